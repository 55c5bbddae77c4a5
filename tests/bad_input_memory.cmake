# bad_input_memory tests (see tests/README.md, "Bad input")
#
# A valid problem too large for this machine's memory: every FWI program holds the observed traces of
# every shot in host memory (nshots x nt x nrec floats, once per GPU thread or rank on the machine), and
# 01 --verify also the CPU reference's wavefields of one shot at every step. A run that cannot fit in the machine's physical memory is refused
# before any GPU is touched, with exit 3 (the machine, not the input, is too small; as for device memory)
# and a message naming the flags that size it. The problem below needs 16384 x 100000 x 16384 floats of
# traces, 100000 GiB: more than any machine has, so these run the same everywhere.
set(memory_huge_problem --nz 16 --nx 16384 --nt 100000 --nshots 16384 --src-x-first 0 --src-x-last 16383
                        --nrec 16384 --rec-x-last 16383)
set(memory_fwi_text "host memory: the run needs at least 100000.0 GiB")

# memory_<program>_<name>: exit 3 (add_program_exit_test in cmake/TestHelpers.cmake).
function(add_memory_test program name expected_text)
  add_program_exit_test(memory_${program}_${name} ${program} 3 "${expected_text}" ${ARGN})
endfunction()

add_memory_test(01_single_gpu traces "${memory_fwi_text}" ${memory_huge_problem})
# --verify adds the CPU reference's history to the traces, and names the grid's flags.
add_memory_test(01_single_gpu verify_history "the CPU reference's wavefields of one shot at every step, --nt x the --nz x --nx grid"
                --verify ${memory_huge_problem})
add_memory_test(03_host_staged_mpi traces "${memory_fwi_text}" ${memory_huge_problem})
# 04 counts the traces once for each GPU it drives: 100000 GiB on a machine without GPUs or with one.
add_memory_test(04_nccl_threads traces "--nshots x --nt x --nrec = 16384 x 100000 x 16384 floats"
                ${memory_huge_problem})
add_memory_test(05_nccl_mpi traces "${memory_fwi_text}" ${memory_huge_problem})
add_memory_test(06_fwi_shot_parallel traces "${memory_fwi_text}" ${memory_huge_problem} --no-plots
                --out ${CMAKE_CURRENT_BINARY_DIR}/memory_06)

# Below the machine's memory, a process limit can still end an allocation: the largest grid's models
# (16384 x 16384 floats, 1 GiB each) under a 1.5 GB address-space limit. Exit 3 with a message, never
# "unexpected error: std::bad_alloc".
add_exit_test(memory_01_single_gpu_process_limit CODE 3
              TEXT "01_single_gpu: environment: an allocation failed (std::bad_alloc): the run needs more memory"
              TIMEOUT 60
              COMMAND ${BASH_EXECUTABLE} -c "ulimit -v 1500000 && exec \"$0\" --nz 16384 --nx 16384"
                      $<TARGET_FILE:01_single_gpu>)
