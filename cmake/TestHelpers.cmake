# What the tests of every program share.

# MPI tests: one launcher and one environment. --oversubscribe: CI machines have 2 cores; -x hands the
# multicast setting to the ranks; as root, Open MPI wants the two ALLOW variables.
# Usage: ${MPIRUN_TEST} <ranks> <program> <args>...
set(MPIRUN_TEST ${MPIEXEC_EXECUTABLE} --oversubscribe -x NCCL_NVLS_ENABLE ${MPIEXEC_NUMPROC_FLAG})
set(MPI_TEST_ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;NCCL_NVLS_ENABLE=0")

# add_exit_test(<name> CODE <exit code> TEXT <text> [LABELS <labels>] [TIMEOUT <seconds>]
#               [ENVIRONMENT <VAR=value>...] COMMAND <program> <args>...)
# Passes when the command exits with CODE and its stderr contains TEXT (tests/expect_exit.cmake): the
# bad-input and bad-launch tests of every program. LABELS default to cpu, TIMEOUT to 120 s.
function(add_exit_test name)
  cmake_parse_arguments(ARG "" "CODE;TEXT;TIMEOUT" "LABELS;ENVIRONMENT;COMMAND" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS cpu)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${ARG_COMMAND}" -DEXPECTED_CODE=${ARG_CODE}
                   "-DEXPECTED_TEXT=${ARG_TEXT}" -P ${PROJECT_SOURCE_DIR}/tests/expect_exit.cmake)
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
  if(ARG_ENVIRONMENT)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${ARG_ENVIRONMENT}")
  endif()
endfunction()
