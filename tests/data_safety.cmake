# data_safety tests (see tests/README.md, "Bad input"): the suite never loses data. Every file it writes
# is replaced atomically (kill -9 at any moment leaves one whole version); nothing deletes or overwrites
# what it did not make (compare.sh's DIR/runs, 06's checkpoint); an output file that cannot be written is
# refused before the run, not after it. All run without a GPU: every refusal comes before one is touched.

# The writer the kill test SIGKILLs, and the maker of the checkpoints the refusal tests must keep.
add_executable(atomic_write_stress atomic_write_stress.cpp)
target_link_libraries(atomic_write_stress PRIVATE fwi_core)

add_test(NAME data_safety_kill_while_writing
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/kill_while_writing.sh
                 $<TARGET_FILE:atomic_write_stress> 20)
set_tests_properties(data_safety_kill_while_writing PROPERTIES LABELS cpu TIMEOUT 300
                     ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
# A trial count that is not one (abc, 0) is refused, not run as no trial that passes.
foreach(trials abc 0)
  add_exit_test(data_safety_kill_while_writing_${trials}_trials CODE 2 TEXT "TRIALS '${trials}' is not an integer in 1..9999"
                TIMEOUT 20 COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/kill_while_writing.sh
                                   $<TARGET_FILE:atomic_write_stress> ${trials})
endforeach()

set(data_safety_check ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/data_safety_checks.sh)

# compare.sh empties DIR/runs: only one it made (marked). A user's folder or file there is refused with
# exit 2 before the build, and survives byte for byte.
add_test(NAME data_safety_compare_keeps_user_runs
         COMMAND ${data_safety_check} user-runs 2 "--out|was not made by compare.sh"
                 ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/compare.sh --out @DIR@)
add_test(NAME data_safety_compare_keeps_user_runs_file
         COMMAND ${data_safety_check} runs-file 2 "--out|was not made by compare.sh"
                 ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/compare.sh --problem small --out @DIR@)
set_tests_properties(data_safety_compare_keeps_user_runs data_safety_compare_keeps_user_runs_file
                     PROPERTIES LABELS cpu TIMEOUT 60)

# 06 over a folder that holds a checkpoint: refused (exit 2, before any GPU: none is visible here) unless
# it continues that checkpoint (--resume DIR) or is told to replace it (--overwrite); the checkpoint
# survives byte for byte either way.
set(fwi06_in_mpirun ${MPIRUN_TEST} 1 $<TARGET_FILE:06_fwi_shot_parallel> --problem small --no-plots)
function(add_checkpoint_kept_test name code text)
  add_test(NAME data_safety_${name}
           COMMAND ${data_safety_check} checkpoint $<TARGET_FILE:atomic_write_stress> ${code} "${text}"
                   ${fwi06_in_mpirun} ${ARGN})
  set_tests_properties(data_safety_${name} PROPERTIES LABELS "cpu;mpi" TIMEOUT 90
                       ENVIRONMENT "${MPI_TEST_ENVIRONMENT};CUDA_VISIBLE_DEVICES=")
endfunction()
add_checkpoint_kept_test(fwi06_keeps_checkpoint 2 "--out|--resume|--overwrite|holds a checkpoint" --out @DIR@)
add_checkpoint_kept_test(fwi06_keeps_checkpoint_resuming_another 2 "--out|holds a checkpoint"
                         --out @DIR@ --resume ${CMAKE_CURRENT_BINARY_DIR}/no_such_run)
# Allowed past the check: --overwrite reaches the GPU check (exit 3), --resume of the same folder that goes
# on checkpointing reads the checkpoint (exit 2: it is the stress program's, not this problem's).
add_checkpoint_kept_test(fwi06_overwrite_allowed 3 "sees no CUDA GPU" --out @DIR@ --overwrite)
add_checkpoint_kept_test(fwi06_resume_same_folder_allowed 2 "belongs to another problem"
                         --out @DIR@ --resume @DIR@ --checkpoint-every 5)
# Without --checkpoint-every, a run continued in its own folder would leave its checkpoint behind the newer
# models and loss history, for a later --resume to go back to: refused.
add_checkpoint_kept_test(fwi06_resume_same_folder_without_checkpoints 2 "continues in its own folder (--out)"
                         --out @DIR@ --resume @DIR@)
# --overwrite would delete the checkpoint that --resume of the same folder continues from: refused.
add_checkpoint_kept_test(fwi06_overwrite_of_resumed_checkpoint 2 "--overwrite: it would delete the checkpoint that --resume"
                         --out @DIR@ --resume @DIR@ --overwrite)

# A folder in --out under the name of a file the run writes there (or removes: another run's snapshot) is
# refused before any GPU, rather than left for the end of the run (or --overwrite's removal of the checkpoint)
# to fail on: a checkpoint.fwi and a snapshot for 06, a final model for 01.
set(run_file_is_a_folder "it is a folder, and the run writes (or removes) its own")
function(add_run_file_is_a_folder_test name file labels)
  add_exit_test(data_safety_${name} CODE 2 TEXT "${file}': ${run_file_is_a_folder} ${file} there"
                LABELS ${labels} TIMEOUT 90 ENVIRONMENT ${MPI_TEST_ENVIRONMENT} CUDA_VISIBLE_DEVICES=
                COMMAND ${BASH_EXECUTABLE} -c "mkdir -p \"$0/$1/x\" && shift && exec \"$@\" --out \"$0\""
                        ${CMAKE_CURRENT_BINARY_DIR}/data_safety_${name} ${file} ${ARGN})
endfunction()
add_run_file_is_a_folder_test(fwi06_checkpoint_is_a_folder checkpoint.fwi "cpu;mpi" ${fwi06_in_mpirun} --overwrite)
add_run_file_is_a_folder_test(fwi06_snapshot_is_a_folder model_iter_0005.npy "cpu;mpi" ${fwi06_in_mpirun})
add_run_file_is_a_folder_test(fwi01_final_model_is_a_folder final_model.npy cpu $<TARGET_FILE:01_single_gpu>
                              --problem small)

# A whole checkpoint of 1000 iterations resumed by a run of 5 is refused for --iterations, before any GPU
# (it was once refused for its size, as a file too large for the run could be).
set(checkpoint_1000 ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_1000_iterations)
add_test(NAME data_safety_make_checkpoint_1000_iterations
         COMMAND make_bad_checkpoint ${checkpoint_1000} 1000-iterations --problem small)
set_tests_properties(data_safety_make_checkpoint_1000_iterations PROPERTIES LABELS cpu TIMEOUT 60
                     FIXTURES_SETUP checkpoint_1000_iterations)
add_exit_test(data_safety_fwi06_resume_fewer_iterations CODE 2
              TEXT "--iterations: the checkpoint already holds 1000 iterations; allowed 1001 or more" LABELS cpu mpi
              TIMEOUT 90 ENVIRONMENT ${MPI_TEST_ENVIRONMENT} CUDA_VISIBLE_DEVICES=
              COMMAND ${fwi06_in_mpirun} --resume ${checkpoint_1000} --out ${checkpoint_1000} --iterations 5
                      --checkpoint-every 5)
set_tests_properties(data_safety_fwi06_resume_fewer_iterations PROPERTIES FIXTURES_REQUIRED checkpoint_1000_iterations)
# A --kill-after-checkpoint at or before the resumed checkpoint would never fire: refused, not ignored.
add_exit_test(data_safety_fwi06_kill_before_resumed_checkpoint CODE 2
              TEXT "--kill-after-checkpoint: 500 is not after the checkpoint's 1000 iterations" LABELS cpu mpi
              TIMEOUT 90 ENVIRONMENT ${MPI_TEST_ENVIRONMENT} CUDA_VISIBLE_DEVICES=
              COMMAND ${fwi06_in_mpirun} --resume ${checkpoint_1000} --out ${CMAKE_CURRENT_BINARY_DIR}/kill_before_resumed
                      --iterations 2000 --checkpoint-every 5 --kill-after-checkpoint 500)
set_tests_properties(data_safety_fwi06_kill_before_resumed_checkpoint
                     PROPERTIES FIXTURES_REQUIRED checkpoint_1000_iterations)

# The checkpoint's problem is checked on rank 0's read, before any GPU: another --step-size is refused,
# naming both values.
add_exit_test(data_safety_fwi06_resume_other_problem CODE 2 TEXT "step_size 40  |  this run: step_size 55"
              LABELS cpu mpi TIMEOUT 90 ENVIRONMENT ${MPI_TEST_ENVIRONMENT} CUDA_VISIBLE_DEVICES=
              COMMAND ${fwi06_in_mpirun} --resume ${checkpoint_1000} --out ${CMAKE_CURRENT_BINARY_DIR}/resume_other_problem
                      --iterations 1002 --step-size 55)
set_tests_properties(data_safety_fwi06_resume_other_problem PROPERTIES FIXTURES_REQUIRED checkpoint_1000_iterations)
# Another rank count is allowed, with a warning (the sums' order changes): the run goes on past the check, to
# the missing GPU (exit 3).
add_exit_test(data_safety_fwi06_resume_on_other_rank_count CODE 3 TEXT "a run on 1 rank, this one has 2"
              LABELS cpu mpi TIMEOUT 90 ENVIRONMENT ${MPI_TEST_ENVIRONMENT} CUDA_VISIBLE_DEVICES=
              COMMAND ${MPIRUN_TEST} 2 $<TARGET_FILE:06_fwi_shot_parallel> --problem small --no-plots
                      --resume ${checkpoint_1000} --out ${CMAKE_CURRENT_BINARY_DIR}/resume_on_other_rank_count
                      --iterations 1002)
set_tests_properties(data_safety_fwi06_resume_on_other_rank_count
                     PROPERTIES FIXTURES_REQUIRED checkpoint_1000_iterations)

# --json that cannot be written is refused at the start (exit 2 naming --json), not after the run: no GPU
# is visible, so a later check would exit 3.
set(no_gpu "CUDA_VISIBLE_DEVICES=")
# (Each test an --out folder of its own, so that tests run side by side never share one.)
add_exit_test(data_safety_json_missing_folder_01 CODE 2 TEXT "--json: cannot write" ENVIRONMENT ${no_gpu}
              COMMAND $<TARGET_FILE:01_single_gpu> --problem small --out ${CMAKE_CURRENT_BINARY_DIR}/data_safety_01_missing
                      --json ${CMAKE_CURRENT_BINARY_DIR}/no_such_folder/result.json)
add_exit_test(data_safety_json_unwritable_01 CODE 2 TEXT "--json: cannot write" ENVIRONMENT ${no_gpu}
              COMMAND $<TARGET_FILE:01_single_gpu> --problem small --out ${CMAKE_CURRENT_BINARY_DIR}/data_safety_01_unwritable
                      --json /proc/fwi_result.json)
add_exit_test(data_safety_json_unwritable_01_verify CODE 2 TEXT "--json: cannot write" ENVIRONMENT ${no_gpu}
              COMMAND $<TARGET_FILE:01_single_gpu> --verify --json /proc/fwi_result.json)
add_exit_test(data_safety_json_unwritable_05_bench CODE 2 TEXT "--json: cannot write" ENVIRONMENT "${MPI_TEST_ENVIRONMENT}"
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:05_nccl_mpi> --bench-allreduce --json /proc/fwi_result.json)
add_exit_test(data_safety_json_unwritable_02 CODE 2 TEXT "--json: cannot write" ENVIRONMENT ${no_gpu}
              COMMAND $<TARGET_FILE:02_allreduce_primitives> --json /proc/fwi_result.json)
add_exit_test(data_safety_json_missing_folder_06 CODE 2 TEXT "--json: cannot write" LABELS cpu mpi TIMEOUT 90
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${no_gpu}
              COMMAND ${fwi06_in_mpirun} --out ${CMAKE_CURRENT_BINARY_DIR}/data_safety_06_missing
                      --json ${CMAKE_CURRENT_BINARY_DIR}/no_such_folder/result.json)
add_exit_test(data_safety_json_is_folder_06 CODE 2 TEXT "--json: cannot write" LABELS cpu mpi TIMEOUT 90
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${no_gpu}
              COMMAND ${fwi06_in_mpirun} --out ${CMAKE_CURRENT_BINARY_DIR}/data_safety_06_is_folder
                      --json ${CMAKE_CURRENT_BINARY_DIR})
# --json in a new --out folder is fine: the folder is made first, so both pass and the run reaches the
# GPU check (exit 3: none is visible). Each test makes its own new folder in a scratch folder of its own,
# so no other test's run can have made it before.
function(add_new_out_test name labels code text)
  add_test(NAME data_safety_${name} COMMAND ${data_safety_check} scratch ${code} "${text}" ${ARGN})
  set_tests_properties(data_safety_${name} PROPERTIES LABELS "${labels}" TIMEOUT 90
                       ENVIRONMENT "${MPI_TEST_ENVIRONMENT};${no_gpu}")
endfunction()
add_new_out_test(json_in_new_out_01 cpu 3 "needs 1 CUDA GPU and 0 are visible" $<TARGET_FILE:01_single_gpu> --problem small --out @DIR@/new
                 --json @DIR@/new/result.json)
add_new_out_test(json_in_new_out_06 "cpu;mpi" 3 "sees no CUDA GPU" ${fwi06_in_mpirun} --out @DIR@/new
                 --json @DIR@/new/result.json)
# But not with the name of one of the run's own files there, which one would replace the other (a RESULT
# over the checkpoint would end the run's chance to resume): in --out, or in the folder --resume reads.
add_new_out_test(json_over_run_file_01 cpu 2 "/new/final_model.npy' could replace one of the run's own files in the folder of --out|first_gradient.npy, observed_gathers.npy); give"
                 $<TARGET_FILE:01_single_gpu> --problem small --out @DIR@/new --json @DIR@/new/final_model.npy)
# 01 writes only its own five files there, which its refusal names: a name only 06 writes passes.
add_new_out_test(json_named_as_06s_file_01 cpu 3 "needs 1 CUDA GPU and 0 are visible" $<TARGET_FILE:01_single_gpu>
                 --problem small --out @DIR@/new --json @DIR@/new/summary.csv)
add_new_out_test(json_over_run_file_06 "cpu;mpi" 2 "could replace one of the run's own files in the folder of --out"
                 ${fwi06_in_mpirun} --out @DIR@/new --json @DIR@/new/./loss_history.json)
add_new_out_test(json_over_resumed_checkpoint_06 "cpu;mpi" 2 "could replace one of the run's own files in the folder of --resume"
                 ${fwi06_in_mpirun} --resume ${checkpoint_1000} --out @DIR@/new --iterations 2000
                 --json ${checkpoint_1000}/checkpoint.fwi)
set_tests_properties(data_safety_json_over_resumed_checkpoint_06 PROPERTIES FIXTURES_REQUIRED checkpoint_1000_iterations)

# An output path that exists but is not a regular file is refused before the run: the file written is
# renamed over the path, which would replace a device, a FIFO or a symbolic link with it (doctor once
# hung at its end, opening a FIFO to write). The FIFO and the link survive.
add_exit_test(data_safety_json_device_01 CODE 2 TEXT "--json: cannot write '/dev/null': it is not a regular file"
              ENVIRONMENT ${no_gpu} COMMAND $<TARGET_FILE:01_single_gpu> --verify --json /dev/null)
add_test(NAME data_safety_doctor_json_fifo
         COMMAND ${data_safety_check} fifo 2 "--json: cannot write|it is not a regular file" $<TARGET_FILE:doctor>
                 --json @DIR@/fifo)
add_test(NAME data_safety_json_symlink_01
         COMMAND ${data_safety_check} user-link 2 "--json: cannot write|it is a symbolic link"
                 $<TARGET_FILE:01_single_gpu> --verify --json @DIR@/link.json)
set_tests_properties(data_safety_doctor_json_fifo data_safety_json_symlink_01 PROPERTIES LABELS cpu TIMEOUT 90
                     ENVIRONMENT ${no_gpu})

# doctor's --json is checked before any check runs (it used to fail only at the end, replacing the
# diagnosis' exit code).
add_exit_test(data_safety_doctor_json_unwritable CODE 2 TEXT "--json: cannot write"
              COMMAND $<TARGET_FILE:doctor> --json ${CMAKE_CURRENT_BINARY_DIR}/no-such-folder/doctor.json)
add_exit_test(data_safety_04_json_unwritable CODE 2 TEXT "--json: cannot write"
              COMMAND $<TARGET_FILE:04_nccl_threads> --json ${CMAKE_CURRENT_BINARY_DIR}/no-such-folder/r.json)
add_exit_test(data_safety_05_json_unwritable CODE 2 TEXT "--json: cannot write" ENVIRONMENT "${MPI_TEST_ENVIRONMENT}"
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:05_nccl_mpi> --json ${CMAKE_CURRENT_BINARY_DIR}/no-such-folder/r.json)
add_exit_test(data_safety_03_json_unwritable CODE 2 TEXT "--json: cannot write" ENVIRONMENT "${MPI_TEST_ENVIRONMENT}"
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:03_host_staged_mpi> --json ${CMAKE_CURRENT_BINARY_DIR}/no-such-folder/r.json)

# An --out that cannot be created is refused before the run (01 used to find out after its iterations).
add_exit_test(data_safety_out_uncreatable_01 CODE 2 TEXT "--out: cannot create directory"
              COMMAND $<TARGET_FILE:01_single_gpu> --out /proc/no-such-folder/out)
add_exit_test(data_safety_out_uncreatable_06 CODE 2 TEXT "--out: cannot create directory" ENVIRONMENT "${MPI_TEST_ENVIRONMENT}"
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:06_fwi_shot_parallel> --out /proc/no-such-folder/out)
# An --out folder that exists but takes no files (here /proc, where not even root can create one).
add_exit_test(data_safety_out_unwritable_01 CODE 2 TEXT "--out: cannot create a file in '/proc'"
              COMMAND $<TARGET_FILE:01_single_gpu> --out /proc)
add_exit_test(data_safety_out_unwritable_06 CODE 2 TEXT "--out: cannot create a file in '/proc'"
              ENVIRONMENT "${MPI_TEST_ENVIRONMENT}" COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:06_fwi_shot_parallel> --out /proc)
# A run refused for its --json, or at the GPU check, removes the --out folders it made (01 and 06).
add_test(NAME data_safety_fwi01_refused_json_leaves_no_out
         COMMAND ${data_safety_check} empty-out 2 "--json: cannot write"
                 $<TARGET_FILE:01_single_gpu> --problem small --out @DIR@/new/run --json /proc/result.json)
add_test(NAME data_safety_fwi01_refused_gpu_leaves_no_out
         COMMAND ${data_safety_check} empty-out 3 "needs 1 CUDA GPU" $<TARGET_FILE:01_single_gpu> --problem small --out @DIR@/new)
set_tests_properties(data_safety_fwi01_refused_json_leaves_no_out data_safety_fwi01_refused_gpu_leaves_no_out
                     PROPERTIES LABELS cpu TIMEOUT 60 ENVIRONMENT "CUDA_VISIBLE_DEVICES=")
add_test(NAME data_safety_fwi06_refused_json_leaves_no_out
         COMMAND ${data_safety_check} empty-out 2 "--json: cannot write"
                 ${fwi06_in_mpirun} --out @DIR@/new/run --json /proc/result.json)
set_tests_properties(data_safety_fwi06_refused_json_leaves_no_out PROPERTIES LABELS "cpu;mpi" TIMEOUT 90
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT};CUDA_VISIBLE_DEVICES=")

# A run refused at the GPU check (exit 3: none is visible) writes no file into --out, and removes the
# folder it made for it.
add_test(NAME data_safety_fwi06_refused_writes_nothing
         COMMAND ${data_safety_check} empty-out 3 "sees no CUDA GPU" ${fwi06_in_mpirun} --out @DIR@/new)
set_tests_properties(data_safety_fwi06_refused_writes_nothing PROPERTIES LABELS "cpu;mpi" TIMEOUT 90
                     ENVIRONMENT "${MPI_TEST_ENVIRONMENT};CUDA_VISIBLE_DEVICES=")
