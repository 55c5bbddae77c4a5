# The tests of the Google Benchmark programs (bench_propagator, bench_allreduce): included only where the
# build has them, as a configure without Google Benchmark leaves the programs out (and the rest of the tests
# in). Their command-line tests come first, then their output file, then their launch.

# The Google Benchmark programs: exit 3 with one line when no GPU is visible (an empty CUDA_VISIBLE_DEVICES
# hides every GPU, so this runs the same on a GPU machine), 2 for an unknown flag, a bad value of one of
# their --benchmark_* flags or a filter that selects nothing (checked first), and good values accepted.
# Their listings name every case (run without a GPU, as listing runs none).
set(bench_propagator_cases "Gradient/" "GradientBatches/" "GradientSustained/" "ForwardStep/" "CopyBandwidth/")
set(bench_allreduce_cases "allreduce/via_gpu0/" "allreduce/ring/" "allreduce/p2p_kernel/" "allreduce/nccl/")
foreach(bench bench_propagator bench_allreduce)
  add_exit_test(cli_${bench}_no_gpu CODE 3 TEXT "needs 1 CUDA GPU and 0 are visible" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
                COMMAND $<TARGET_FILE:${bench}> --benchmark_repetitions=1)
  add_exit_test(cli_${bench}_unknown_flag CODE 2 TEXT "--frobnicate" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
                COMMAND $<TARGET_FILE:${bench}> --frobnicate)
  add_exit_test(cli_${bench}_filter_selects_nothing CODE 2 TEXT "--benchmark_filter 'NoSuchCase'"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_filter=NoSuchCase)
  # Values Google Benchmark itself would abort on (a repetition count below 1; CPU counters it was built
  # without, in 1.8), a negative warm-up, or values it would ignore with exit 0.
  add_exit_test(cli_${bench}_negative_repetitions CODE 2 TEXT "--benchmark_repetitions=-1"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_repetitions=-1)
  add_exit_test(cli_${bench}_too_many_repetitions CODE 2 TEXT "a whole number from 1 to 1000"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_repetitions=1001)
  # A filter so long that the regex engine would run out of stack (signal 11) is refused first.
  string(REPEAT "a" 20000 long_filter)
  add_exit_test(cli_${bench}_long_filter CODE 2 TEXT "a regular expression of at most 1000 characters"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_filter=${long_filter})
  # Filters the regex engine would backtrack on for minutes or longer are refused; an invalid regex is
  # said to be one.
  add_exit_test(cli_${bench}_backtracking_filter CODE 2 TEXT "without a repeated group that repeats"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> "--benchmark_filter=(.?)*Q")
  add_exit_test(cli_${bench}_quantified_quantifier_filter CODE 2 TEXT "without a quantifier on a quantifier"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> "--benchmark_filter=Gradient.**Q")
  add_exit_test(cli_${bench}_many_repetitions_filter CODE 2 TEXT "without more than 4 unbounded repetitions"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> "--benchmark_filter=.*.*.*.*.*Q")
  # Optional repetitions backtrack too: 16 of them took most of a second, each more doubles it.
  add_exit_test(cli_${bench}_many_optional_filter CODE 2 TEXT "without more than 12 optional repetitions"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}>
                "--benchmark_filter=.?.?.?.?.?.?.?.?.?.?.?.?.?.?.?.?Q")
  add_exit_test(cli_${bench}_wide_ranges_filter CODE 2 TEXT "without more than 12 optional repetitions"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> "--benchmark_filter=.{0,30}.{0,30}Q")
  add_exit_test(cli_${bench}_invalid_filter CODE 2 TEXT "a valid (POSIX extended) regular expression"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> "--benchmark_filter=[")
  # A group that is not repeated is fine: the listing names the case it selects, and not another.
  list(GET ${bench}_cases 0 first_case)
  list(GET ${bench}_cases -1 last_case)
  add_exit_test(cli_${bench}_grouped_filter CODE 0 TEXT "" ENVIRONMENT "CUDA_VISIBLE_DEVICES=" OUTPUT "${first_case}"
                NOT_OUTPUT "${last_case}" COMMAND $<TARGET_FILE:${bench}> --benchmark_list_tests "--benchmark_filter=^(${first_case}|NoSuchCase)")
  # Google Benchmark reads its flags from BENCHMARK_* variables too: the same values are refused there.
  add_exit_test(cli_${bench}_env_repetitions CODE 2 TEXT "environment variable BENCHMARK_REPETITIONS=-5"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" "BENCHMARK_REPETITIONS=-5" COMMAND $<TARGET_FILE:${bench}>)
  # ... but not where the command line gives the flag, which Google Benchmark then takes instead.
  add_exit_test(cli_${bench}_env_overridden CODE 0 TEXT "" OUTPUT "${first_case}"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" "BENCHMARK_REPETITIONS=-5"
                COMMAND $<TARGET_FILE:${bench}> --benchmark_repetitions=3 --benchmark_list_tests)
  add_exit_test(cli_${bench}_env_context CODE 2
                TEXT "environment variable BENCHMARK_CONTEXT=a=1,foo: the value must be a comma list of KEY=VALUE pairs"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" "BENCHMARK_CONTEXT=a=1,foo" COMMAND $<TARGET_FILE:${bench}>)
  add_exit_test(cli_${bench}_perf_counters CODE 2 TEXT "--benchmark_perf_counters=CYCLES': the value must be empty"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_perf_counters=CYCLES)
  add_exit_test(cli_${bench}_negative_warmup CODE 2 TEXT "--benchmark_min_warmup_time=-1"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_min_warmup_time=-1)
  # --benchmark_min_time as the Google Benchmark built with reads it: seconds in every version; "2s" (and
  # "100x", a count of iterations) from 1.8, where 1.7 would call the flag unknown. (A listing shows that the
  # suite's check lets them through; 1.8 itself reads them when a case runs, as gpu-check's benchmarks step
  # does with "0.05s".)
  add_exit_test(cli_${bench}_min_time_seconds CODE 0 TEXT "" OUTPUT "${first_case}" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
                COMMAND $<TARGET_FILE:${bench}> --benchmark_min_time=0.5 --benchmark_list_tests)
  if(FWI_BENCHMARK_MIN_TIME_UNITS)
    add_exit_test(cli_${bench}_min_time_unit CODE 0 TEXT "" OUTPUT "${first_case}" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
                  COMMAND $<TARGET_FILE:${bench}> --benchmark_min_time=2s --benchmark_list_tests)
    add_exit_test(cli_${bench}_min_time_iterations CODE 0 TEXT "" OUTPUT "${first_case}"
                  ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_min_time=100x --benchmark_list_tests)
  else()
    add_exit_test(cli_${bench}_min_time_unit CODE 2 TEXT "takes no 's' or 'x' (1.8 and newer do)"
                  ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_min_time=2s)
  endif()
  add_exit_test(cli_${bench}_min_time_fractional_iterations CODE 2 TEXT "--benchmark_min_time=1.5x': the value must be a positive number of seconds"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_min_time=1.5x)
  add_exit_test(cli_${bench}_bad_format CODE 2 TEXT "console|json|csv"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_format=xml)
  add_exit_test(cli_${bench}_short_help CODE 0 TEXT "" OUTPUT "--benchmark_filter=<regex>" "--v=<verbosity>"
                COMMAND $<TARGET_FILE:${bench}> -h)
  # Google Benchmark's own --help, which exits inside it: into a full disk exit 3, into a reader that stopped
  # early exit 0, as the programs' own --help.
  add_exit_test(cli_${bench}_help_unwritable CODE 3 TEXT "--help: cannot write the help text to standard output"
                COMMAND ${BASH_EXECUTABLE} -c "exec \"$0\" --help >/dev/full" $<TARGET_FILE:${bench}>)
  add_exit_test(cli_${bench}_help_reader_gone CODE 0 TEXT ""
                COMMAND ${BASH_EXECUTABLE} -c "(sleep 0.3 && exec env --default-signal=PIPE \"$0\" --help) | true && exit \${PIPESTATUS[0]}"
                        $<TARGET_FILE:${bench}>)
  add_exit_test(cli_${bench}_repeated_filter CODE 2 TEXT "--benchmark_filter given twice"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES="
                COMMAND $<TARGET_FILE:${bench}> --benchmark_filter=Gradient --benchmark_filter=NoSuchCase)
  add_exit_test(cli_${bench}_bad_switch CODE 2 TEXT "one of true|false|yes|no|1|0"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:${bench}> --benchmark_list_tests=maybe)
  # A listing into a pipe whose reader has gone is lost: exit 3, not 0 (nor death by SIGPIPE).
  add_exit_test(cli_${bench}_output_reader_gone CODE 3 TEXT "a pipe whose reader has gone"
                ENVIRONMENT "CUDA_VISIBLE_DEVICES="
                COMMAND ${BASH_EXECUTABLE} -c "(sleep 0.3 && exec env --default-signal=PIPE \"$0\" --benchmark_list_tests) | true && exit \${PIPESTATUS[0]}"
                        $<TARGET_FILE:${bench}>)
  # Listing the benchmarks runs none, so it needs no GPU.
  add_exit_test(cli_${bench}_list_without_gpu CODE 0 TEXT "" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
                OUTPUT ${${bench}_cases} COMMAND $<TARGET_FILE:${bench}> --benchmark_list_tests)
  # The tests' limit settings, as the programs read them: a bad one refused at the start (exit 2), not as a
  # failure of every case (exit 3).
  add_exit_test(cli_${bench}_bad_gpu_wait_test_limit CODE 2 TEXT "FWI_TEST_GPU_WORK_BASE_S: 'x' is not a number"
                ENVIRONMENT "FWI_TEST_GPU_WORK_BASE_S=x" COMMAND $<TARGET_FILE:${bench}>)
endforeach()

# The flags of scripts/gpu-check.sh's benchmarks step parse with the Google Benchmark installed, and the run
# then stops at the GPU check. (Its bench_allreduce's --benchmark_min_time is spelt as the version installed
# takes it, which the script asks by listing the cases.)
add_exit_test(cli_bench_propagator_gpu_check_flags CODE 3 TEXT "needs 1 CUDA GPU and 0 are visible"
              ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:bench_propagator> --benchmark_out=${CMAKE_CURRENT_BINARY_DIR}/bench_propagator.json
                      --benchmark_out_format=json)

# --benchmark_out follows the suite's rules for output files (see data_safety.cmake).
# A path that exists but is not a regular file is refused before the run.
add_exit_test(data_safety_bench_out_device CODE 2 TEXT "--benchmark_out: cannot write '/dev/null': it is not a regular"
              ENVIRONMENT ${no_gpu} COMMAND $<TARGET_FILE:bench_allreduce> --benchmark_out=/dev/null)
# --benchmark_out of a refused benchmark run (a filter that selects nothing, no GPU), or of one that only
# lists the benchmarks, leaves the file it names as it was: the results go to a temporary file, renamed
# over it only after a run.
foreach(bench bench_propagator bench_allreduce)
  add_test(NAME data_safety_${bench}_out_kept_when_refused
           COMMAND ${data_safety_check} user-file 2 "selects no benchmark"
                   $<TARGET_FILE:${bench}> --benchmark_out=@DIR@/kept.json --benchmark_filter=NoSuchCase)
  add_test(NAME data_safety_${bench}_out_kept_without_gpu
           COMMAND ${data_safety_check} user-file 3 "needs 1 CUDA GPU and 0 are visible"
                   $<TARGET_FILE:${bench}> --benchmark_out=@DIR@/kept.json)
  add_test(NAME data_safety_${bench}_out_kept_when_listing
           COMMAND ${data_safety_check} user-file 0 ""
                   $<TARGET_FILE:${bench}> --benchmark_out=@DIR@/kept.json --benchmark_list_tests)
  set_tests_properties(data_safety_${bench}_out_kept_when_refused data_safety_${bench}_out_kept_without_gpu
                       data_safety_${bench}_out_kept_when_listing PROPERTIES LABELS cpu TIMEOUT 60 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
endforeach()
add_exit_test(data_safety_bench_out_twice CODE 2 TEXT "--benchmark_out given twice" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:bench_allreduce> --benchmark_out=${CMAKE_CURRENT_BINARY_DIR}/bench_a.json
                      --benchmark_out=${CMAKE_CURRENT_BINARY_DIR}/bench_b.json)
add_exit_test(data_safety_bench_out_unwritable CODE 2 TEXT "--benchmark_out: cannot write" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:bench_allreduce> --benchmark_out=/proc/results.json)
# Google Benchmark reads BENCHMARK_OUT where no --benchmark_out is given: checked as the flag is (it ended the
# run with Google Benchmark's "invalid file name" and exit 1).
add_exit_test(data_safety_bench_out_variable_unwritable CODE 2 TEXT "BENCHMARK_OUT: cannot write"
              ENVIRONMENT "CUDA_VISIBLE_DEVICES=;BENCHMARK_OUT=/proc/results.json" COMMAND $<TARGET_FILE:bench_propagator>)

# Like the programs of one process, a benchmark started by mpirun as several ranks is refused before any work.
add_exit_test(ecosystem_bench_propagator_mpirun_several CODE 2
              TEXT "started as one of several MPI ranks (OMPI_COMM_WORLD_SIZE=2, set by Open MPI's mpirun)"
              LABELS cpu mpi ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
              COMMAND ${MPIRUN_TEST} 2 $<TARGET_FILE:bench_propagator>)
