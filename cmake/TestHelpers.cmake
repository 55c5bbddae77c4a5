# What the tests of every program share.

# MPI tests: one launcher and one environment, from CMake's FindMPI variables, so a site can run them with
# its own launcher (e.g. -DMPIEXEC_EXECUTABLE=srun -DMPIEXEC_NUMPROC_FLAG=-n "-DMPIEXEC_PREFLAGS=--mpi=pmix").
# The default MPIEXEC_PREFLAGS are Open MPI's: --oversubscribe (CI machines have 2 cores) and -x, which
# hands the multicast setting to the ranks. They go before the rank count (FindMPI puts them after it),
# which mpirun and srun both accept, so that a test can append the count and its program. As root,
# Open MPI wants the two ALLOW variables.
# Usage: ${MPIRUN_TEST} <ranks> <program> <args>...
# Set once, at the first configure whose launcher answers, and only for Open MPI's launcher (MPICH's takes
# neither flag, and passes the whole environment anyway): a value given later, an empty one included, is
# kept.
if(NOT FWI_MPIEXEC_PREFLAGS_CHOSEN AND NOT MPIEXEC_PREFLAGS)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version RESULT_VARIABLE launcher_status
                  OUTPUT_VARIABLE launcher_version ERROR_QUIET TIMEOUT 20)
  if(launcher_version MATCHES "Open MPI|OpenRTE")
    set(MPIEXEC_PREFLAGS --oversubscribe -x NCCL_NVLS_ENABLE CACHE STRING "flags of the MPI launcher (tests)" FORCE)
  endif()
  if(launcher_status EQUAL 0)
    set(FWI_MPIEXEC_PREFLAGS_CHOSEN ON CACHE INTERNAL "MPIEXEC_PREFLAGS was given its default once")
  endif()
else()
  set(FWI_MPIEXEC_PREFLAGS_CHOSEN ON CACHE INTERNAL "MPIEXEC_PREFLAGS was given its default once")
endif()
set(MPIRUN_TEST ${MPIEXEC_EXECUTABLE} ${MPIEXEC_PREFLAGS} ${MPIEXEC_NUMPROC_FLAG})
# Open MPI's single-copy shared memory (CMA) off: in a container without CAP_SYS_PTRACE (Docker's default) it
# fails ("Read -1, expected ..., errno = 1"), and the tests check what the programs do, not its speed.
set(MPI_TEST_ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;NCCL_NVLS_ENABLE=0"
                         "OMPI_MCA_btl_vader_single_copy_mechanism=none")

# gpu_mpi_labels(<variable> <gpus>): the labels of an MPI test on `gpus` GPUs: gpu;mpi for one, multigpu;mpi
# for two or more (docs/ARCHITECTURE.md), so that -L gpu and -L multigpu select by the GPUs a test needs.
function(gpu_mpi_labels variable gpus)
  if(gpus GREATER 1)
    set(${variable} "multigpu;mpi" PARENT_SCOPE)
  else()
    set(${variable} "gpu;mpi" PARENT_SCOPE)
  endif()
endfunction()

# add_exit_test(<name> CODE <exit code> TEXT <text> [NOT_TEXT <text>] [LABELS <labels>] [TIMEOUT <seconds>]
#               [ENVIRONMENT <VAR=value>...] [OUTPUT <text>...] [NOT_OUTPUT <text>] [EMPTY_OUTPUT] COMMAND <program>
#               <args>...)
# Passes when the command exits with CODE, its stderr contains TEXT (and not NOT_TEXT) and its stdout each OUTPUT text
# (and not NOT_OUTPUT; nothing at all with EMPTY_OUTPUT) (tests/expect_exit.cmake): the bad-input and bad-launch tests of every program, and what --help prints.
# LABELS default to cpu (cpu and mpi for a COMMAND that starts with MPIEXEC_EXECUTABLE), TIMEOUT to 120 s.
# An empty TEXT ("" where any message will do) sets WHOLE_TEXT to "" rather than unsetting it: the same to
# the function, and without the warning of CMake 3.31 and later (functions keep the policies of their
# definition).
if(POLICY CMP0174)
  cmake_policy(SET CMP0174 NEW)
endif()
function(add_exit_test name)
  cmake_parse_arguments(ARG "EMPTY_OUTPUT" "CODE;TEXT;NOT_TEXT;NOT_OUTPUT;TIMEOUT" "LABELS;ENVIRONMENT;COMMAND;OUTPUT"
                        ${ARGN})
  # TEXT and NOT_TEXT once more, whole: ${ARGN} splits a text at its semicolons ("out of range; allowed
  # 1..2"), and the parse above kept only the part before the first.
  cmake_parse_arguments(PARSE_ARGV 1 WHOLE "" "TEXT;NOT_TEXT" "")
  if(NOT ARG_LABELS)
    list(GET ARG_COMMAND 0 program)
    if(program STREQUAL MPIEXEC_EXECUTABLE)  # a command under the MPI launcher: -L mpi selects it
      set(ARG_LABELS cpu mpi)
    else()
      set(ARG_LABELS cpu)
    endif()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  # The command's own limit, a little under the test's: expect_exit.cmake then says which command overstayed.
  math(EXPR command_timeout "${ARG_TIMEOUT} - 5")
  if(command_timeout LESS 5)
    set(command_timeout ${ARG_TIMEOUT})
  endif()
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${ARG_COMMAND}" -DEXPECTED_CODE=${ARG_CODE} -DTIMEOUT=${command_timeout}
                   "-DEXPECTED_TEXT=${WHOLE_TEXT}" "-DUNEXPECTED_TEXT=${WHOLE_NOT_TEXT}"
                   "-DEXPECTED_OUTPUT=${ARG_OUTPUT}" "-DUNEXPECTED_OUTPUT=${ARG_NOT_OUTPUT}"
                   "-DEXPECT_EMPTY_OUTPUT=${ARG_EMPTY_OUTPUT}" -P ${PROJECT_SOURCE_DIR}/tests/expect_exit.cmake)
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
  if(ARG_ENVIRONMENT)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${ARG_ENVIRONMENT}")
  endif()
endfunction()

# add_program_exit_test(<name> <program> <exit code> <text> <args>...): add_exit_test for an FWI program
# run as its users run it: 01 and 04 directly, the MPI programs (03, 05, 06) under mpirun with one rank.
function(add_program_exit_test name program code expected_text)
  if(program STREQUAL "01_single_gpu" OR program STREQUAL "04_nccl_threads")
    add_exit_test(${name} CODE ${code} TEXT "${expected_text}" COMMAND $<TARGET_FILE:${program}> ${ARGN})
  else()
    add_exit_test(${name} CODE ${code} TEXT "${expected_text}" LABELS cpu mpi
                  ENVIRONMENT "${MPI_TEST_ENVIRONMENT}" COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:${program}> ${ARGN})
  endif()
endfunction()
