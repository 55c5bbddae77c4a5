# Runs COMMAND (a ;-list) and checks its exit code is EXPECTED_CODE, its stderr contains EXPECTED_TEXT and
# not UNEXPECTED_TEXT (when given), and its stdout each text of the ;-list EXPECTED_OUTPUT (none when it is
# not given) and not UNEXPECTED_OUTPUT (when given); with EXPECT_EMPTY_OUTPUT true, its stdout must be empty.
# COMMAND runs at most TIMEOUT seconds (60 when not given; add_exit_test passes a little less than the
# test's own limit, so that this script, not CTest, reports the command that overstayed).
# Usage: cmake -DCOMMAND="prog;--flag;value" -DEXPECTED_CODE=2 -DEXPECTED_TEXT="--flag" -P expect_exit.cmake
# Fails when `stream` (stdout or stderr, its text in `content`) contains `text`; nothing to check for "".
function(require_absent stream text content)
  if(NOT "${text}" STREQUAL "")
    string(FIND "${content}" "${text}" position)
    if(NOT position EQUAL -1)
      message(FATAL_ERROR "${stream} contains '${text}', which it should not:\n${content}")
    endif()
  endif()
endfunction()

if(NOT DEFINED TIMEOUT)
  set(TIMEOUT 60)
endif()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${TIMEOUT})
if(NOT code STREQUAL "${EXPECTED_CODE}")
  message(FATAL_ERROR "exit code ${code}, expected ${EXPECTED_CODE}\nstdout: ${out}\nstderr: ${err}")
endif()
string(FIND "${err}" "${EXPECTED_TEXT}" position)
if(position EQUAL -1)
  message(FATAL_ERROR "stderr does not mention '${EXPECTED_TEXT}':\n${err}")
endif()
require_absent(stderr "${UNEXPECTED_TEXT}" "${err}")
foreach(text IN LISTS EXPECTED_OUTPUT)
  string(FIND "${out}" "${text}" position)
  if(position EQUAL -1)
    message(FATAL_ERROR "stdout does not contain '${text}':\n${out}")
  endif()
endforeach()
require_absent(stdout "${UNEXPECTED_OUTPUT}" "${out}")
if(EXPECT_EMPTY_OUTPUT AND NOT "${out}" STREQUAL "")
  message(FATAL_ERROR "stdout should be empty:\n${out}")
endif()
message(STATUS "exit ${code} with: ${err}")
