# bad_input_physics tests (see tests/README.md, "Bad input")
#
# Physically impossible input is bad input: models that are not finite, not positive, outside
# --v-min..--v-max or unstable for --dt, fewer than 2 cells per wavelength, shots or receivers sharing a
# cell, a mask covering the whole grid, and checkpoints holding such a model. Each exits 2 naming the flag
# or the checkpoint before any GPU is touched, so all run without one.

# check_model itself (common/model_checks.hpp).
add_executable(test_model_checks cpu_test_main.cpp test_model_checks.cpp)
target_link_libraries(test_model_checks PRIVATE fwi_core doctest::doctest)
add_test(NAME model_checks_tests COMMAND test_model_checks)
set_tests_properties(model_checks_tests PROPERTIES LABELS cpu TIMEOUT 60)

# physics_<program>_<name>: exit 2 (add_program_exit_test in cmake/TestHelpers.cmake).
function(add_physics_test program name expected_text)
  add_program_exit_test(physics_${program}_${name} ${program} 2 "${expected_text}" ${ARGN})
endfunction()

# Models from the flags: not positive, not a number, outside --v-min..--v-max, unstable.
add_physics_test(01_single_gpu negative_anomaly "--anomaly-dv -5000): velocity -3"
                 --problem small --model anomaly --anomaly-dv -5000)
add_physics_test(04_nccl_threads negative_anomaly "--anomaly-dv -5000)" --problem small --model anomaly --anomaly-dv -5000)
add_physics_test(05_nccl_mpi negative_anomaly "--anomaly-dv -5000)" --problem small --model anomaly --anomaly-dv -5000)
add_physics_test(06_fwi_shot_parallel negative_anomaly "--anomaly-dv -5000)" --problem small --model anomaly --anomaly-dv -5000)
# Odd nz and nx put the anomaly's peak on a cell: exactly 0 m/s there.
add_physics_test(01_single_gpu zero_velocity "velocity 0 m/s at row 32, column 48 is not positive"
                 --problem small --nz 65 --nx 97 --model anomaly --v-top 1500 --anomaly-dv -1500)
add_physics_test(01_single_gpu nan_velocity "--v-top: 'nan' is not a finite number" --problem small --v-top nan)
add_physics_test(04_nccl_threads nan_anomaly "--anomaly-dv: 'nan' is not a finite number" --problem small --model anomaly --anomaly-dv nan)
add_physics_test(01_single_gpu above_v_max "--v-bottom 3500" --problem small --v-bottom 3500)
add_physics_test(05_nccl_mpi above_v_max "--v-top 3200" --problem small --v-top 3200 --v-bottom 3200)
add_physics_test(01_single_gpu initial_below_v_min "--v-initial 800" --problem small --v-initial 800)
add_physics_test(01_single_gpu unstable_anomaly "--dt: 0.0008 s is unstable for the true model"
                 --problem small --model anomaly --anomaly-dv 3000 --v-max 5000)
add_physics_test(05_nccl_mpi unstable_anomaly "--dt: 0.0008 s is unstable for the true model"
                 --problem small --model anomaly --anomaly-dv 3000 --v-max 5000)
add_physics_test(01_single_gpu unstable_v_max "--dt: 0.0008 s is unstable for --v-max" --problem small --v-max 5000)

# A true model that is the initial model (v-initial everywhere) leaves nothing to invert: the run would end
# in "misfit is zero" (exit 1) and 01 --verify would divide a zero misfit by zero.
add_physics_test(01_single_gpu true_is_initial "nothing to invert" --problem small --v-bottom 1500)
add_physics_test(01_single_gpu verify_true_is_initial "nothing to invert" --verify --v-bottom 1500)
add_physics_test(06_fwi_shot_parallel zero_anomaly "nothing to invert" --problem small --model anomaly --anomaly-dv 0)
add_physics_test(04_nccl_threads constant_true_is_initial "nothing to invert"
                 --problem small --v-top 2000 --v-bottom 2000 --v-initial 2000)
# So does a recording that ends before any wave can come back from where the models differ (the interface
# of the small problem, row 32); the same recording with the interface at row 4 is long enough.
add_physics_test(01_single_gpu recording_too_short "--nt: the recording (60 steps, 0.0472 s) ends before"
                 --problem small --nt 60 --delay 0.02)
add_physics_test(06_fwi_shot_parallel recording_too_short_for_interface "allowed --nt at least 234"
                 --problem small --nt 200 --interface-depth 40)
add_exit_test(physics_recording_long_enough_for_shallow_interface CODE 3 TEXT "CUDA GPU and 0 are visible"
              ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:01_single_gpu> --problem small --nt 60 --delay 0.02 --interface-depth 4)

# Fewer than 2 cells per shortest wavelength.
add_physics_test(01_single_gpu high_freq "cells per shortest wavelength" --problem small --freq 60)
add_physics_test(06_fwi_shot_parallel coarse_grid "--dh: 1.42 cells per shortest wavelength" --problem small --dh 30)
# Between 2 and 5 cells: a warning in the program's name, then the run goes on (here to "no GPU").
add_exit_test(physics_01_single_gpu_few_cells_warns CODE 3
              TEXT "01_single_gpu: warning: only 3.3 cells per shortest wavelength" ENVIRONMENT "CUDA_VISIBLE_DEVICES="
              COMMAND $<TARGET_FILE:01_single_gpu> --problem small --freq 30)
# A --v-min so low that a model the update lowers to it has fewer than 2 cells per wavelength: a warning
# (the inversion need not go there), then the run goes on; the default --v-min gives none.
add_exit_test(physics_01_single_gpu_low_v_min_warns CODE 3
              TEXT "01_single_gpu: warning: the update may lower the model to --v-min 300 m/s, where the grid has only 1.42 cells"
              ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:01_single_gpu> --problem small --v-min 300)
add_exit_test(physics_01_single_gpu_usual_v_min_no_warning CODE 3 TEXT "0 are visible" NOT_TEXT "--v-min"
              ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:01_single_gpu> --problem small)

# A wavelet peak so early that the part the recording cuts off reaches more than 1% of the peak (a peak
# under 0.85 periods in): a warning that the source starts abruptly, then the run goes on; at one period
# (0.1%), none.
add_exit_test(physics_01_single_gpu_early_peak_warns CODE 3
              TEXT "01_single_gpu: warning: --delay 0 s is less than one period of --freq 14 Hz (0.0714286 s): the part of the wavelet before the recording starts, cut off, reaches 100% of its peak"
              ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:01_single_gpu> --delay 0)
# ... where it starts at a zero of the wavelet (its value at t = 0 is 0, its side lobe is cut off) too.
add_exit_test(physics_01_single_gpu_peak_at_a_zero_warns CODE 3
              TEXT "the part of the wavelet before the recording starts, cut off, reaches 45% of its peak"
              ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:01_single_gpu> --delay 0.0160771)
add_exit_test(physics_01_single_gpu_peak_after_one_period CODE 3 TEXT "CUDA GPU and 0 are visible" NOT_TEXT "warning"
              ENVIRONMENT "CUDA_VISIBLE_DEVICES=" COMMAND $<TARGET_FILE:01_single_gpu> --freq 12 --delay 0.0833333)

# Geometry: shots and receivers on distinct cells, a mask that leaves rows to update.
add_physics_test(01_single_gpu duplicate_shots "--nshots: 80 shots do not fit on distinct cells; allowed 1..76"
                 --problem small --nshots 80)
add_physics_test(04_nccl_threads shots_on_one_cell "--nshots: 2 shots do not fit on distinct cells; allowed 1..1"
                 --problem small --nshots 2 --src-x-first 40 --src-x-last 40)
add_physics_test(01_single_gpu duplicate_receivers "--nrec: 97 receivers do not fit" --problem small --nrec 97)
add_physics_test(06_fwi_shot_parallel duplicate_receivers "--nrec: 20 receivers do not fit on distinct cells" --problem small --nrec 20 --rec-x-first 50 --rec-x-last 60)
add_physics_test(01_single_gpu mask_whole_grid "--mask-rows: 64 is outside the grid; allowed 0..63"
                 --problem small --mask-rows 64)
add_physics_test(04_nccl_threads mask_beyond_grid "--mask-rows: 1000 is outside the grid" --problem small --mask-rows 1000)

# Checkpoints with a valid checksum and an impossible model: 06 --resume refuses them on rank 0's read,
# before any GPU. make_bad_checkpoint writes each as a fixture.
add_executable(make_bad_checkpoint make_bad_checkpoint.cpp)
target_link_libraries(make_bad_checkpoint PRIVATE fwi_core)
function(add_bad_checkpoint_test kind expected_text)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/bad_checkpoint_${kind})
  add_test(NAME physics_make_checkpoint_${kind} COMMAND make_bad_checkpoint ${dir} ${kind} --problem small)
  set_tests_properties(physics_make_checkpoint_${kind} PROPERTIES LABELS cpu TIMEOUT 60
                       FIXTURES_SETUP bad_checkpoint_${kind})
  add_physics_test(06_fwi_shot_parallel resume_${kind} "${expected_text}" --problem small --resume ${dir} --out ${dir}
                   --checkpoint-every 5)
  set_tests_properties(physics_06_fwi_shot_parallel_resume_${kind} PROPERTIES FIXTURES_REQUIRED bad_checkpoint_${kind})
endfunction()
add_bad_checkpoint_test(nan "checkpoint.fwi': velocity nan")
add_bad_checkpoint_test(negative "checkpoint.fwi': velocity -1500 m/s")
add_bad_checkpoint_test(unstable "s is unstable for --resume: the model in ")
add_bad_checkpoint_test(above-v-max "checkpoint.fwi': velocity 3100 m/s")

# An absorbing layer thinner than 12 cells grows without bound over a long recording: refused by the
# parser, and by validate() for problems built in code.
add_physics_test(01_single_gpu absorb_width_11 "--absorb-width: 11 is out of range; allowed 12..200" --absorb-width 11)
add_physics_test(06_fwi_shot_parallel absorb_width_0 "--absorb-width: 0 is out of range; allowed 12..200" --absorb-width 0)
