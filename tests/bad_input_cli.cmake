# bad_input_cli tests (see tests/README.md, "Bad input"): the command-line class. Every program refuses a
# repeated flag, a value that is itself a flag, an integer that overflows, junk and NaN/inf with exit 2 and
# a message naming the flag (and its allowed range); the MPI programs give the same answer on every rank
# without waiting on another; the benchmarks follow the suite's exit codes. All of them run without a GPU:
# flags are checked before any device is touched.

# <program> <args>... on one process: exit 2, stderr contains `text`.
function(add_cli_test name program text)
  add_exit_test(cli_${name} CODE 2 TEXT "${text}" COMMAND $<TARGET_FILE:${program}> ${ARGN})
endfunction()

# The same under `mpirun -np 2`, which must end within 30 s (a few seconds on an idle machine; 30 leaves room
# for a cold start of mpirun on a loaded one): every rank parses the same argv with the same parser and
# decides alone, so none waits (for a collective, or its 60 s timeout) on a rank that left.
function(add_cli_mpi_test name code program text)
  add_exit_test(cli_${name} CODE ${code} TEXT "${text}" LABELS cpu mpi TIMEOUT 30
                ENVIRONMENT ${MPI_TEST_ENVIRONMENT}
                COMMAND ${MPIRUN_TEST} 2 $<TARGET_FILE:${program}> ${ARGN})
endfunction()

# --help: exit 0 with the help on stdout, from its usage line to its last line (--help's own), so that a
# help cut short fails. The MPI programs on 2 ranks, of which rank 0 prints it. The shot-parallel lessons
# (03-06) share one --timeout and its default.
function(add_help_test program)
  set(help_lines "usage: ${program} [flags]" "print this help")
  if(program MATCHES "^0[3-6]_")
    list(APPEND help_lines "before the run gives up (exit 3) (default: 60)")
  endif()
  if(program MATCHES "^0[356]_")
    add_exit_test(cli_${program}_help_text CODE 0 TEXT "" LABELS cpu mpi TIMEOUT 30 ENVIRONMENT ${MPI_TEST_ENVIRONMENT}
                  OUTPUT ${help_lines} COMMAND ${MPIRUN_TEST} 2 $<TARGET_FILE:${program}> --help)
  else()
    add_exit_test(cli_${program}_help_text CODE 0 TEXT "" OUTPUT ${help_lines} COMMAND $<TARGET_FILE:${program}> --help)
  endif()
endfunction()
foreach(program 01_single_gpu 02_allreduce_primitives 03_host_staged_mpi 04_nccl_threads 05_nccl_mpi
                06_fwi_shot_parallel doctor)
  add_help_test(${program})
endforeach()
# An unknown flag, named (01's and 06's are beside their programs' other tests). The MPI programs on 2 ranks.
add_cli_test(02_unknown_flag 02_allreduce_primitives "unknown flag '--frobnicate'" --frobnicate)
add_cli_test(04_unknown_flag 04_nccl_threads "unknown flag '--frobnicate'" --frobnicate)
add_cli_test(doctor_unknown_flag doctor "unknown flag '--frobnicate'" --frobnicate)
add_cli_mpi_test(03_unknown_flag 2 03_host_staged_mpi "unknown flag '--frobnicate'" --frobnicate)
add_cli_mpi_test(05_unknown_flag 2 05_nccl_mpi "unknown flag '--frobnicate'" --frobnicate)

# 01: every rule of the parser, and the pre-scans (--problem's preset, --verify) that must agree with it.
add_cli_test(01_repeated_flag 01_single_gpu "--nz given twice" --nz 64 --nz 80)
add_cli_test(01_repeated_inline_flag 01_single_gpu "--nz given twice" --nz=64 --nz 80)
add_cli_test(01_repeated_switch 01_single_gpu "--verify given twice" --verify --verify)
add_cli_test(01_repeated_problem 01_single_gpu "--problem given twice" --problem small --problem default)
add_cli_test(01_value_is_flag 01_single_gpu "--nz: missing value" --nz --nx 100)
add_cli_test(01_problem_value_is_flag 01_single_gpu "--problem: missing value" --problem --verify)
add_cli_test(01_value_is_help 01_single_gpu "--json: missing value" --json --help)
add_cli_test(01_missing_last_value 01_single_gpu "--nt: missing value (allowed 2..100000)" --nt)
add_cli_test(01_int_overflow 01_single_gpu "--nz: 99999999999999999999 is out of range; allowed 16..16384"
             --nz 99999999999999999999)
add_cli_test(01_int_junk 01_single_gpu "--nz: '12abc' is not an integer; allowed 16..16384" --nz 12abc)
add_cli_test(01_int_fraction 01_single_gpu "--nshots: '2.5' is not an integer; allowed 1..100000" --nshots 2.5)
add_cli_test(01_double_nan 01_single_gpu "--dh: 'nan' is not a finite number; allowed 0.1..1000" --dh nan)
add_cli_test(01_double_inf 01_single_gpu "--dh: 'inf' is not a finite number; allowed 0.1..1000" --dh inf)
add_cli_test(01_double_overflow 01_single_gpu "--freq: 1e999 is out of range; allowed 0.1..1000" --freq 1e999)
add_cli_test(01_double_junk 01_single_gpu "--dt: '0.001s' is not a finite number" --dt 0.001s)
add_cli_test(01_double_hex 01_single_gpu "--freq: '0x1p3' is not a finite number" --freq 0x1p3)
# Numbers in messages as they would be typed, not with six decimals ("3000.000000", "0..1.599200 s").
add_cli_test(01_v_min_above_v_max 01_single_gpu "--v-min: 3000 must be below --v-max (3000)" --v-min 3000)
add_cli_test(01_delay_after_recording 01_single_gpu
             "--delay: the wavelet peak must fall inside the recording; allowed 0..1.5992 s" --delay 5)
# A step of 0 m/s never changes the model: the run could only end in "misfit did not decrease".
add_cli_test(01_zero_step_size 01_single_gpu "--step-size: 0 is out of range; allowed 0.1..1000" --step-size 0)
add_cli_test(01_source_below_grid 01_single_gpu "--src-depth: 1000 is outside the grid; allowed 0..383 (rows of --nz)"
             --src-depth 1000)
add_cli_test(01_depth_power_too_high 01_single_gpu "--gradient-depth-power: 9 is out of range; allowed 0..4"
             --gradient-depth-power 9)
# A flag the run would ignore: refused, since something else was probably meant.
add_cli_test(01_flag_of_other_model 01_single_gpu "--interface-depth: used only with --model two-layer"
             --model anomaly --interface-depth 100)
# The large problem's interface row is outside a smaller grid, but an anomaly model has no interface.
add_exit_test(cli_01_anomaly_in_a_smaller_large_grid CODE 3 TEXT "needs 1 CUDA GPU and 0 are visible" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:01_single_gpu> --problem large --model anomaly --nz 128 --nx 256 --src-x-last 200
                      --rec-x-last 255 --nrec 100)
add_cli_test(01_out_with_verify 01_single_gpu "--out: used only without --verify" --verify --out results)

# 04 (threads) and 02 (one process): the same parser behind other flags.
add_cli_test(04_repeated_flag 04_nccl_threads "--gpus given twice" --gpus 1 --gpus 2)
add_cli_test(04_value_is_flag 04_nccl_threads "--driver: missing value" --driver --verbose)
add_cli_test(04_double_nan 04_nccl_threads "--timeout: 'NaN' is not a finite number" --timeout NaN)
add_cli_test(02_repeated_flag 02_allreduce_primitives "--variants given twice" --variants ring --variants nccl)
add_cli_test(02_int_overflow 02_allreduce_primitives "--gpus: 99999999999 is out of range; allowed 0..8"
             --gpus 99999999999)
add_cli_test(02_bytes_overflow 02_allreduce_primitives "--max-bytes: 99999999999999999999 is out of range; allowed 4..64G"
             --max-bytes 99999999999999999999)
add_cli_test(02_one_shot_size_too_large 02_allreduce_primitives "--one-shot-max-bytes: 2G is out of range; allowed 0..1G"
             --one-shot-max-bytes 2G)
add_cli_test(02_double_inf 02_allreduce_primitives "--step-factor: '-inf' is not a finite number" --step-factor -inf)
# Comma lists: a stray comma is refused, not dropped (it usually means a name was left out).
add_cli_test(02_list_trailing_comma 02_allreduce_primitives "--variants: 'ring,' has an empty item" --variants ring,)
add_cli_test(02_list_double_comma 02_allreduce_primitives "--variants: 'ring,,nccl' has an empty item"
             --variants ring,,nccl)
add_cli_test(02_list_repeated_item 02_allreduce_primitives "--variants: 'ring' is listed twice" --variants ring,nccl,ring)
# A batch longer than a stream's launch queue would block inside a launch, beyond any time limit.
add_cli_test(02_iters_beyond_launch_queue 02_allreduce_primitives "--iters: 501 is out of range; allowed 1..500"
             --iters 501)
add_cli_test(02_flag_of_other_variant 02_allreduce_primitives "--ring-chunks: used only when --variants includes ring"
             --variants nccl --ring-chunks 2)
add_cli_test(02_no_peer_access_for_p2p_kernel 02_allreduce_primitives
             "--no-peer-access: used only when --variants includes via_gpu0, ring or nccl" --variants p2p_kernel
             --no-peer-access)

# doctor, alone and with --mpi on 2 ranks.
add_cli_test(doctor_repeated_flag doctor "--nccl-mib given twice" --nccl-mib 8 --nccl-mib 16)
add_cli_test(doctor_double_nan doctor "--timeout: 'nan' is not a finite number; allowed 1..3600" --timeout nan)
add_cli_mpi_test(doctor_mpi_value_is_help 2 doctor "--json: missing value" --mpi --json --help)
add_cli_mpi_test(doctor_mpi_int_junk 2 doctor "--bandwidth-mib: '8M' is not an integer" --mpi --bandwidth-mib 8M)
add_cli_test(doctor_list_leading_comma doctor "--checks: ',p2p' has an empty item" --checks ,p2p)
add_cli_test(doctor_all_in_a_list doctor "--checks: 'all' stands alone" --checks all,host)
add_cli_mpi_test(03_all_in_a_list 2 03_host_staged_mpi "--combine: 'all' stands alone" --combine all,pinned)
add_cli_test(doctor_flag_of_other_check doctor "--bandwidth-mib: used only when check 4 (bandwidth) runs"
             --checks nccl --bandwidth-mib 8)
add_cli_mpi_test(doctor_mpi_flag_of_unselected_check 2 doctor "--nccl-mib: used only when check 5"
                 --mpi --checks host --nccl-mib 8)
# A check named in --checks that this mode never runs: check 7 runs only with --mpi, checks 3 to 5 only
# without it (they were skipped without a word, and `--mpi --checks p2p` ran nothing that was asked for).
add_cli_test(doctor_check_7_without_mpi doctor "--checks: mpi runs only with --mpi" --checks host,mpi)
add_cli_mpi_test(doctor_mpi_single_process_check 2 doctor "--checks: p2p runs only without --mpi"
                 --mpi --checks p2p)

# The MPI lessons on 2 ranks. "--json --help" once hung 03: rank 1 took --help anywhere as a request for
# help and left, rank 0 took it as the file name of --json and waited on rank 1 until its timeout. The
# parser never takes a flag as another flag's value, so on every rank it is "--json: missing value":
# exit 2, decided by each rank alone. Plain --help is exit 0 on every rank (rank 0 prints it).
add_cli_mpi_test(03_value_is_help 2 03_host_staged_mpi "--json: missing value" --json --help)
add_cli_mpi_test(03_help 0 03_host_staged_mpi "" --combine pinned --help)
add_cli_mpi_test(03_repeated_flag 2 03_host_staged_mpi "--combine given twice" --combine pinned --combine all)
add_cli_mpi_test(03_int_overflow 2 03_host_staged_mpi "--iterations: 3000000000 is out of range; allowed 1..100000"
                 --iterations 3000000000)
add_cli_mpi_test(03_list_trailing_comma 2 03_host_staged_mpi "--combine: 'pinned,' has an empty item"
                 --combine pinned,)
add_cli_mpi_test(03_list_blank_number 2 03_host_staged_mpi "--chunk-kb: ' 64' is not allowed" --chunk-kb " 64")
add_cli_mpi_test(03_list_empty_item 2 03_host_staged_mpi "--in-flight: '1,,2' has an empty item" --in-flight 1,,2)
add_cli_mpi_test(03_list_repeated_number 2 03_host_staged_mpi "--chunk-kb: 64 is listed twice" --chunk-kb 64,256,64)
add_cli_mpi_test(03_flag_without_pipelined 2 03_host_staged_mpi "--chunk-kb: used only when --combine runs pipelined"
                 --combine pinned --chunk-kb 64)
add_cli_mpi_test(03_sweep_flag_without_bench 2 03_host_staged_mpi "-b (--min-bytes): used only with --bench-allreduce"
                 -b 1M)
add_cli_mpi_test(05_sweep_flag_without_bench 2 05_nccl_mpi "--max-bytes: used only with --bench-allreduce"
                 --max-bytes 1M)
add_cli_mpi_test(05_isolated_without_bench 2 05_nccl_mpi "--isolated: used only with --bench-allreduce" --isolated)
add_cli_mpi_test(03_fwi_flag_with_bench 2 03_host_staged_mpi "--nz: used only without --bench-allreduce"
                 --bench-allreduce --nz 256)
add_cli_mpi_test(05_fwi_flag_with_bench 2 05_nccl_mpi "--iterations: used only without --bench-allreduce"
                 --iterations 3 --bench-allreduce)
add_cli_mpi_test(05_value_is_help 2 05_nccl_mpi "--json: missing value" --json --help)
add_cli_mpi_test(05_help 0 05_nccl_mpi "" --help)
add_cli_mpi_test(05_help_before_bad_fault 0 05_nccl_mpi "" --help --test-fault bogus)
add_cli_mpi_test(05_help_before_fault_without_value 0 05_nccl_mpi "" --help --test-fault)
add_cli_mpi_test(05_empty_test_fault 2 05_nccl_mpi "--test-fault: needs a non-empty value" --test-fault=)
add_cli_mpi_test(05_double_inf 2 05_nccl_mpi "--delay: 'inf' is not a finite number" --delay inf)
add_cli_mpi_test(05_repeated_test_fault 2 05_nccl_mpi "--test-fault given twice"
                 --test-fault exit-before-allreduce:1 --test-fault=stall-before-allreduce:0)
add_cli_mpi_test(05_test_fault_value_is_flag 2 05_nccl_mpi "--test-fault: missing value" --test-fault --nz 64)
add_cli_mpi_test(05_bad_transport 2 05_nccl_mpi "--transport: 'nvlink' is not one of auto|network" --transport nvlink)
add_cli_mpi_test(05_bench_transport_missing 2 05_nccl_mpi "--transport: missing value" --bench-allreduce --transport)
add_cli_mpi_test(06_value_is_help 2 06_fwi_shot_parallel "--json: missing value" --json --help)
add_cli_mpi_test(06_help 0 06_fwi_shot_parallel "" --help)
add_cli_mpi_test(06_repeated_problem 2 06_fwi_shot_parallel "--problem given twice" --problem small --problem small)
add_cli_mpi_test(06_int_junk 2 06_fwi_shot_parallel "--nx: '0x40' is not an integer; allowed 16..16384" --nx 0x40)
add_cli_mpi_test(06_bad_transport 2 06_fwi_shot_parallel "--transport: 'Network' is not one of auto|network"
                 --transport Network)

# Ranks given different command lines (an MPMD launch: `mpirun -np 1 prog ARGS1 : -np 1 prog ARGS2`) are
# refused on every rank at once: one rank with --help, or doctor's checks chosen on one rank only, used to
# leave the other waiting in a collective until its timeout (doctor's: with no limit).
function(add_cli_mpmd_test name program first_args second_args)
  add_exit_test(cli_${name} CODE 2 TEXT "the ranks were given different command lines" LABELS cpu mpi TIMEOUT 30
                ENVIRONMENT ${MPI_TEST_ENVIRONMENT}
                COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:${program}> ${first_args}
                        : ${MPIEXEC_NUMPROC_FLAG} 1 $<TARGET_FILE:${program}> ${second_args})
endfunction()
# (srun has no `:` between programs, its MPMD launch is --multi-prog: under it these are left out.)
get_filename_component(launcher_name "${MPIEXEC_EXECUTABLE}" NAME)
if(NOT launcher_name STREQUAL "srun")
  add_cli_mpmd_test(03_help_on_one_rank 03_host_staged_mpi "--problem;small" "--problem;small;--help")
  add_cli_mpmd_test(05_help_on_one_rank 05_nccl_mpi "--help" "")
  add_cli_mpmd_test(06_other_value_on_one_rank 06_fwi_shot_parallel "--problem;small" "--problem;default")
  add_cli_mpmd_test(doctor_checks_on_one_rank doctor "--mpi;--checks;host" "--mpi")
endif()

# visible_gpus, which the scripts and the GPU tests ask how many GPUs there are.
add_exit_test(cli_visible_gpus_help CODE 0 TEXT ""
              OUTPUT "usage: visible_gpus [--env-json | --other-processes | --memory-mib | --peer-access]"
              "the env object of a RESULT" "context on a visible GPU" "memory in MiB, one line each in CUDA's order"
              "every pair of visible GPUs may have peer access"
              COMMAND $<TARGET_FILE:visible_gpus> --help)
# No GPU visible: no other process to list, no memory to give, and no error.
add_exit_test(cli_visible_gpus_other_processes_no_gpu CODE 0 TEXT "" EMPTY_OUTPUT ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:visible_gpus> --other-processes)
add_exit_test(cli_visible_gpus_memory_no_gpu CODE 0 TEXT "" EMPTY_OUTPUT ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:visible_gpus> --memory-mib)
# No pair of GPUs: none lacks peer access.
add_exit_test(cli_visible_gpus_peer_access_no_gpu CODE 0 TEXT "" OUTPUT "1" NOT_OUTPUT "0" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:visible_gpus> --peer-access)
add_exit_test(cli_visible_gpus_unknown_flag CODE 2 TEXT "visible_gpus: error: unknown argument '-v'" COMMAND $<TARGET_FILE:visible_gpus> -v)
add_exit_test(cli_visible_gpus_two_arguments CODE 2 TEXT "visible_gpus: error: at most one argument, 2 given" COMMAND $<TARGET_FILE:visible_gpus> --env-json x)

# The scripts: --help prints the usage and an unknown step, a stray comma or an --out that cannot be
# written is refused (exit 2), each before anything is installed, built or run (hence the short timeouts).
set(scripts ${PROJECT_SOURCE_DIR}/scripts)
# A help text that cannot be written is exit 3, not a silent success.
add_exit_test(cli_help_unwritable CODE 3 TEXT "--help: cannot write the help text to standard output"
              COMMAND ${BASH_EXECUTABLE} -c "exec \"$0\" --help >/dev/full" $<TARGET_FILE:01_single_gpu>)
# The same for the scripts, shell and Python (their help is their header comment or docstring).
foreach(script gpu-check.sh sanitize.sh run-tests.sh record-results.sh compare.sh cluster/hostfile-run.sh)
  string(REGEX REPLACE "[/.-]" "_" name ${script})
  add_exit_test(cli_help_unwritable_${name} CODE 3 TEXT "--help: cannot write the help text to standard output"
                TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} -c "exec \"$0\" \"$1\" --help >/dev/full" ${BASH_EXECUTABLE}
                ${scripts}/${script})
endforeach()
# A standard output that is closed (>&-), not only full: the same exit 3, not a shell error.
foreach(script compare.sh cluster/hostfile-run.sh)
  string(REGEX REPLACE "[/.-]" "_" name ${script})
  add_exit_test(cli_help_closed_stdout_${name} CODE 3 TEXT "--help: cannot write the help text to standard output"
                NOT_TEXT "unbound variable" TIMEOUT 20
                COMMAND ${BASH_EXECUTABLE} -c "exec \"$0\" \"$1\" --help >&-" ${BASH_EXECUTABLE} ${scripts}/${script})
endforeach()
# A reader that stopped early is a success also where SIGPIPE is ignored (some CI runners): sed then fails
# with EPIPE ("Broken pipe") instead of being ended by the signal.
foreach(script gpu-check.sh cluster/hostfile-run.sh)
  string(REGEX REPLACE "[/.-]" "_" name ${script})
  add_exit_test(cli_help_reader_gone_sigpipe_ignored_${name} CODE 0 TEXT "" TIMEOUT 20
                COMMAND ${BASH_EXECUTABLE} -c "trap '' PIPE && (sleep 0.3 && exec \"$0\" \"$1\" --help) | true && exit \${PIPESTATUS[0]}"
                        ${BASH_EXECUTABLE} ${scripts}/${script})
endforeach()
foreach(script compare.py result_schema.py docs_figures.py scaling_model.py relative_paths.py plotting.py)
  string(REGEX REPLACE "[/.-]" "_" name ${script})
  add_exit_test(cli_help_unwritable_${name} CODE 3 TEXT "--help: cannot write the help text to standard output"
                TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} -c "exec python3 \"$0\" --help >/dev/full" ${scripts}/${script})
endforeach()
# So is a run's output that cannot be written (run_program): here visible_gpus's count.
add_exit_test(cli_output_unwritable CODE 3 TEXT "standard output could not be written"
              COMMAND ${BASH_EXECUTABLE} -c "exec \"$0\" >/dev/full" $<TARGET_FILE:visible_gpus>)
# And a pipe whose reader has gone (`| head`): exit 3 with that message, not death by SIGPIPE (exit 141,
# silent). `env --default-signal` undoes a SIGPIPE ignored by whatever started the test.
add_exit_test(cli_output_reader_gone CODE 3 TEXT "a pipe whose reader has gone"
              COMMAND ${BASH_EXECUTABLE} -c "(sleep 0.3 && exec env --default-signal=PIPE \"$0\") | true && exit \${PIPESTATUS[0]}"
                      $<TARGET_FILE:visible_gpus>)
# But a help text the reader stopped taking (`--help | head`) is a success: it took what it wanted.
add_exit_test(cli_help_reader_gone CODE 0 TEXT ""
              COMMAND ${BASH_EXECUTABLE} -c "(sleep 0.3 && exec env --default-signal=PIPE \"$0\" --help) | true && exit \${PIPESTATUS[0]}"
                      $<TARGET_FILE:01_single_gpu>)
add_exit_test(cli_gpu_check_help CODE 0 TEXT "" TIMEOUT 20 OUTPUT "usage: scripts/gpu-check.sh [STEP...]"
              COMMAND ${BASH_EXECUTABLE} ${scripts}/gpu-check.sh --help)
add_exit_test(cli_gpu_check_unknown_step CODE 2 TEXT "unknown step 'bogus'" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/gpu-check.sh build bogus)
add_exit_test(cli_gpu_check_steps_in_one_argument CODE 2 TEXT "unknown step 'build tests'" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/gpu-check.sh "build tests")
add_exit_test(cli_gpu_check_repeated_step CODE 2 TEXT "step 'tests' is listed twice" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/gpu-check.sh tests faults tests)
add_exit_test(cli_sanitize_help CODE 0 TEXT "" TIMEOUT 20 OUTPUT "usage: scripts/sanitize.sh [-j N]"
              COMMAND ${BASH_EXECUTABLE} ${scripts}/sanitize.sh --help)
add_exit_test(cli_sanitize_unknown_argument CODE 2 TEXT "sanitize: unknown argument 'thread'" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/sanitize.sh thread)
add_exit_test(cli_sanitize_bad_parallel CODE 2 TEXT "sanitize: -j: '0' is not a number of tests" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/sanitize.sh -j 0)
add_exit_test(cli_sanitize_bad_parallel_joined CODE 2 TEXT "sanitize: -j: '0' is not a number of tests" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/sanitize.sh -j0)
add_exit_test(cli_run_tests_help CODE 0 TEXT "" TIMEOUT 20 OUTPUT "usage: scripts/run-tests.sh [CTEST OPTIONS...]"
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh --help)
# run-tests.sh checks what it passes to ctest before it builds (--bogus once built everything, then ctest
# ignored it); --help anywhere is the help.
add_exit_test(cli_run_tests_help_after_flags CODE 0 TEXT "" TIMEOUT 20 OUTPUT "usage: scripts/run-tests.sh"
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -L cpu --help)
add_exit_test(cli_run_tests_unknown_flag CODE 2 TEXT "run-tests: unknown flag '--bogus'" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -L cpu --bogus)
add_exit_test(cli_run_tests_bare_word CODE 2 TEXT "run-tests: 'cpu' is not a flag" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh cpu)
add_exit_test(cli_run_tests_missing_value CODE 2 TEXT "run-tests: -R: missing value" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -L cpu -R)
add_exit_test(cli_run_tests_flag_as_value CODE 2 TEXT "run-tests: -E: '-V' is a flag, not a value" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -E -V)
add_exit_test(cli_run_tests_bad_parallel CODE 2 TEXT "run-tests: -j: '0' is not a number of tests" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -j0)
add_exit_test(cli_run_tests_bad_repeat CODE 2 TEXT "run-tests: --repeat: 'until-ok:2' is not MODE:N" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh --repeat until-ok:2)
add_exit_test(cli_run_tests_repeated_flag CODE 2 TEXT "run-tests: --timeout given twice" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh --timeout 60 -L cpu --timeout 90)
add_exit_test(cli_run_tests_parallel_twice CODE 2 TEXT "run-tests: --parallel given twice (-j and --parallel are one option)"
              TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -j4 --parallel 8)
add_exit_test(cli_run_tests_bad_regex CODE 2 TEXT "run-tests: -R: '(' is not a regular expression" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -L cpu -R "(")
# ... and one that bash's regular expressions take and ctest's (CMake's) do not: a nested repeat. The check
# itself takes what ctest takes, a regex that matches the empty string too ('.*': run-tests.sh refused it).
add_test(NAME cli_run_tests_regex_check_takes_what_ctest_takes
         COMMAND ${BASH_EXECUTABLE} -c "for r in '.*' 'a*' '^$' 'cpu|gpu' 'a;b'; do \
                 ${CMAKE_COMMAND} \"-DREGEX=$r\" -P \"$0\" || { echo \"refused: $r\"; exit 1; }; done; \
                 for r in 'x++' 'a**' '(' '['; do \
                 ! ${CMAKE_COMMAND} \"-DREGEX=$r\" -P \"$0\" 2>/dev/null || { echo \"taken: $r\"; exit 1; }; done"
                 ${PROJECT_SOURCE_DIR}/cmake/check_regex.cmake)
set_tests_properties(cli_run_tests_regex_check_takes_what_ctest_takes PROPERTIES LABELS cpu TIMEOUT 30)
add_exit_test(cli_run_tests_regex_ctest_refuses CODE 2 TEXT "run-tests: -E: 'x++' is not a regular expression ctest takes"
              TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -L cpu -E "x++")
add_exit_test(cli_run_tests_own_preset CODE 2 TEXT "run-tests: --preset is the script's own" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh --preset ci)
add_exit_test(cli_run_tests_own_config CODE 2 TEXT "run-tests: -C is the script's own" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -C Release)
# run_if_gpus.sh, through which the GPU tests run: a GPU counter that fails, is missing or prints no number
# fails the test (exit 3) instead of skipping it, so a broken build does not hide behind "skipped"; the
# counter's 0 skips it (77).
set(run_if_gpus ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/common/run_if_gpus.sh)
add_exit_test(cli_run_if_gpus_help CODE 0 TEXT "" TIMEOUT 20 OUTPUT "Usage: run_if_gpus.sh VISIBLE_GPUS_PROGRAM"
              COMMAND ${run_if_gpus} --help)
add_exit_test(cli_run_if_gpus_bad_count CODE 2 TEXT "(MIN_GPUS in 1..999)" TIMEOUT 20
              COMMAND ${run_if_gpus} $<TARGET_FILE:visible_gpus> two true)
add_exit_test(cli_run_if_gpus_no_command CODE 2 TEXT "usage: run_if_gpus.sh" TIMEOUT 20
              COMMAND ${run_if_gpus} $<TARGET_FILE:visible_gpus> 1)
add_exit_test(cli_run_if_gpus_counter_missing CODE 3 TEXT "no_such_counter failed (exit 127)" TIMEOUT 20
              COMMAND ${run_if_gpus} ${CMAKE_CURRENT_BINARY_DIR}/no_such_counter 1 true)
add_exit_test(cli_run_if_gpus_counter_fails CODE 3 TEXT "the GPU counter false failed (exit 1)" TIMEOUT 20
              COMMAND ${run_if_gpus} false 1 true)
add_exit_test(cli_run_if_gpus_counter_not_a_number CODE 3 TEXT "not a number of GPUs" TIMEOUT 20
              COMMAND ${run_if_gpus} pwd 1 true)
add_exit_test(cli_run_if_gpus_skips CODE 77 TEXT "" TIMEOUT 60 ENVIRONMENT CUDA_VISIBLE_DEVICES=
              COMMAND ${run_if_gpus} $<TARGET_FILE:visible_gpus> 1 false)
# CI's script takes no arguments (--help once started a full build).
add_exit_test(cli_ci_run_help CODE 0 TEXT "" TIMEOUT 20 OUTPUT "usage: .ci/run"
              COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/.ci/run --help)
add_exit_test(cli_ci_run_argument CODE 2 TEXT ".ci/run: takes no arguments" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/.ci/run -L cpu)
# CUDA settings from the environment that CMake would keep in its cache, or take silently: refused before
# anything is installed or configured.
add_exit_test(cli_run_tests_bad_cudaarchs CODE 2 TEXT "CUDAARCHS='junk' is not a list of CUDA architectures"
              TIMEOUT 20 ENVIRONMENT CUDAARCHS=junk COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -N)
add_exit_test(cli_run_tests_empty_cudaarchs CODE 2 TEXT "CUDAARCHS='' is not a list" TIMEOUT 20
              COMMAND env CUDAARCHS= ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -N)
add_exit_test(cli_run_tests_missing_cudacxx CODE 3 TEXT "CUDACXX='/nonexistent/nvcc' does not name a program"
              TIMEOUT 20 ENVIRONMENT CUDACXX=/nonexistent/nvcc COMMAND ${BASH_EXECUTABLE} ${scripts}/run-tests.sh -N)
add_exit_test(cli_record_results_unwritable_out CODE 2 TEXT "--out: cannot create the folder '/proc/x'" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/record-results.sh --out /proc/x)
add_exit_test(cli_record_results_stray_comma CODE 2 TEXT "--steps: 'build,' is not a comma list" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/record-results.sh --steps build,)
add_exit_test(cli_compare_unwritable_out CODE 2 TEXT "--out: cannot create the folder '/proc/x'" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --out /proc/x)
# A folder that holds files no comparison made: the comparison would write among them.
add_exit_test(cli_compare_out_holds_other_files CODE 2 TEXT "--out: '/proc' holds files and was not made by compare.sh"
              TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --out /proc)
# Inside the repository, outputs go to out/ or a build folder (git and the docs' check leave them alone).
add_exit_test(cli_compare_out_elsewhere_in_the_repository CODE 2 TEXT "is in the repository but not in out/ or a build folder"
              TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --out ${PROJECT_SOURCE_DIR}/docs/new-folder)
add_exit_test(cli_compare_out_in_the_repository CODE 2 TEXT "holds the repository's own files" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --out ${PROJECT_SOURCE_DIR}/docs)
add_exit_test(cli_compare_repeated_flag CODE 2 TEXT "--iterations given twice" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --iterations 2 --gpus 1 --iterations 3)
add_exit_test(cli_record_results_repeated_flag CODE 2 TEXT "--out given twice" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/record-results.sh --out /tmp/a --out /tmp/b)
# A flag where a value should be is refused, not made a folder (realpath --version once named one).
add_exit_test(cli_compare_out_is_a_flag CODE 2
              TEXT "--out: '--version' is a flag, not a folder (a folder whose name starts with - can be given as ./--version)"
              TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --out --version)
add_exit_test(cli_record_results_out_is_a_flag CODE 2 TEXT "--out: '-e' is a flag, not a folder" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/record-results.sh --out -e)
add_exit_test(cli_compare_repeated_gpu_count CODE 2 TEXT "--gpus: 1 is listed twice" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --gpus 1,2,1)
# compare.sh's own flags, each refused with exit 2 before anything is built or run.
add_exit_test(cli_compare_zero_iterations CODE 2 TEXT "--iterations: '0' is not an integer in 1..9999" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --iterations 0)
add_exit_test(cli_compare_bad_reference CODE 2 TEXT "--reference: 'maybe' is not one of yes|no" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --reference maybe)
add_exit_test(cli_compare_zero_run_timeout CODE 2 TEXT "--run-timeout: '0' is not an integer in 1..999999" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --run-timeout 0)
add_exit_test(cli_compare_gpu_count_junk CODE 2 TEXT "--gpus: '1,x' is not a comma list of GPU counts" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --gpus 1,x)
add_exit_test(cli_compare_unknown_flag CODE 2 TEXT "compare: unknown flag '--bogus'" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --bogus)
add_exit_test(cli_record_results_out_elsewhere_in_the_repository CODE 2
              TEXT "is in the repository but not in out/ or a build folder" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/record-results.sh --out ${PROJECT_SOURCE_DIR}/my-record)
add_exit_test(cli_record_results_repeated_step CODE 2 TEXT "--steps: 'build' is listed twice" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/record-results.sh --steps build,lessons,build)
# --flag=value is --flag value: the value is checked as one given after a space.
add_exit_test(cli_compare_flag_equals_value CODE 2 TEXT "--iterations: '0' is not an integer in 1..9999" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh --gpus=1 --iterations=0)
add_exit_test(cli_record_results_flag_equals_value CODE 2 TEXT "--steps: 'bogus' is not one of" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/record-results.sh --steps=bogus)
# Results are never kept where the build step deletes them. (Of whole machines: scripts_fake_gpu, with a
# fake nvidia-smi, as a real one would let a run on a machine of one GPU start recording.)
add_exit_test(cli_record_results_out_in_build CODE 2 TEXT "is inside the build folder, which the build step deletes"
              TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} ${scripts}/record-results.sh --out ${PROJECT_SOURCE_DIR}/build/results)
# The stored results, which the docs' figures come from, are never replaced.
add_exit_test(cli_compare_committed_results CODE 2 TEXT "is in docs/results, the stored results" TIMEOUT 20
              COMMAND ${BASH_EXECUTABLE} ${scripts}/compare.sh
                      --out ${PROJECT_SOURCE_DIR}/docs/results/4xH100-2026-11-26/compare-default)
# An empty value is refused, not taken as "the default" (an empty --gpus once started a build). CMake drops
# an empty argument from a command, so bash adds it: <script> <flag> ''.
function(add_empty_value_test name script flag)
  add_exit_test(cli_${name} CODE 2 TEXT "${flag}: needs a non-empty value" TIMEOUT 20
                COMMAND ${BASH_EXECUTABLE} -c "exec \"${BASH_EXECUTABLE}\" \"$0\" \"$1\" ''"
                        ${scripts}/${script} ${flag})
endfunction()
add_empty_value_test(compare_empty_gpus compare.sh --gpus)
add_empty_value_test(compare_empty_reference compare.sh --reference)
add_empty_value_test(compare_empty_run_timeout compare.sh --run-timeout)
add_empty_value_test(compare_empty_out compare.sh --out)
add_empty_value_test(run_main_empty_gpus run-main.sh --gpus)
add_empty_value_test(record_results_empty_out record-results.sh --out)
add_empty_value_test(run_tests_empty_label run-tests.sh -L)

# The tests' settings that shorten the limits on GPU waits and file writes, given a bad value: refused at the
# start (exit 2), before any work, by every program; not at the first wait or write, after the set-up or
# (doctor) after every check.
add_exit_test(cli_01_bad_gpu_wait_test_limit CODE 2
              TEXT "FWI_TEST_GPU_WORK_BASE_S: '1e9' is not a number of seconds from 0.1 to 60"
              ENVIRONMENT "FWI_TEST_GPU_WORK_BASE_S=1e9" COMMAND $<TARGET_FILE:01_single_gpu> --problem small)
add_exit_test(cli_doctor_bad_file_write_test_limit CODE 2
              TEXT "FWI_TEST_FILE_WRITE_BASE_S: 'garbage' is not a number of seconds" NOT_TEXT "doctor on"
              ENVIRONMENT "FWI_TEST_FILE_WRITE_BASE_S=garbage" COMMAND $<TARGET_FILE:doctor> --checks host)
add_exit_test(cli_06_bad_file_write_test_limit CODE 2
              TEXT "FWI_TEST_FILE_WRITE_BASE_S: '0' is not a number of seconds" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} FWI_TEST_FILE_WRITE_BASE_S=0
              COMMAND ${MPIRUN_TEST} 2 $<TARGET_FILE:06_fwi_shot_parallel> --problem small)
