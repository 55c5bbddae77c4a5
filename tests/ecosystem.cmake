# Fresh machine and ecosystem tests: the launch-mismatch check and nccl-tests flags (see tests/README.md)

# CMake as people expect it: CUDAARCHS is honoured (the ci preset used to override it), and an installed
# program runs from its prefix, as does the installed plotting script (with the module it imports).
add_test(NAME ecosystem_cudaarchs_honoured
         COMMAND ${BASH_EXECUTABLE} -c
                 "dir=$(mktemp -d) && cd \"$1\" && CUDAARCHS='80;90' \"$0\" --preset ci -B \"$dir\" -DBUILD_TESTING=OFF >/dev/null && grep -x 'CMAKE_CUDA_ARCHITECTURES:STRING=80;90' \"$dir/CMakeCache.txt\"; status=$?; rm -rf \"$dir\"; exit $status"
                 ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR})
# CMake reads CUDAARCHS only at a build folder's first configure: a later configure with another one
# says that it is not used, rather than ignoring it in silence. (These tests keep the configure's output
# and check its exit status apart: a status read at the end of a pipe would be grep's alone.)
add_test(NAME ecosystem_cudaarchs_changed_later_is_reported
         COMMAND ${BASH_EXECUTABLE} -c
                 "dir=$(mktemp -d) && cd \"$1\" && CUDAARCHS=80 \"$0\" --preset ci -B \"$dir\" -DBUILD_TESTING=OFF >/dev/null 2>&1 && out=$(CUDAARCHS=90 \"$0\" \"$dir\" 2>&1); status=$?; rm -rf \"$dir\"; echo \"$out\" | tail -n 12; [ $status -eq 0 ] && echo \"$out\" | tr -s ' \\n' ' ' | grep -q 'CUDAARCHS=\"90\" is not used: this build folder keeps the CUDA architectures 80'"
                 ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR})
# Without nvidia-smi the configure cannot see the GPUs, though CUDA may work (a container without NVIDIA's
# utility capability): it says so, and how to name them.
add_test(NAME ecosystem_configure_without_nvidia_smi
         COMMAND ${BASH_EXECUTABLE} -c
                 "dir=$(mktemp -d) && cd \"$1\" && out=$(env -u CUDAARCHS \"$0\" --preset ci -B \"$dir\" -DBUILD_TESTING=OFF -DFWI_NVIDIA_SMI=/nonexistent/nvidia-smi 2>&1); status=$?; rm -rf \"$dir\"; echo \"$out\" | tail -n 12; [ $status -eq 0 ] && echo \"$out\" | tr -s ' \\n' ' ' | grep -q 'no GPU visible: FWI_NO_GPU_ARCHITECTURES; nvidia-smi is not installed.*CUDAARCHS'"
                 ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR})
# An nvidia-smi that cannot answer the query (no GPU, a driver it cannot reach, one too old for the query; here
# `false`): the configure says so, and how to name the GPUs.
add_test(NAME ecosystem_configure_nvidia_smi_without_compute_cap
         COMMAND ${BASH_EXECUTABLE} -c
                 "dir=$(mktemp -d) && cd \"$1\" && out=$(env -u CUDAARCHS \"$0\" --preset ci -B \"$dir\" -DBUILD_TESTING=OFF -DFWI_NVIDIA_SMI=false 2>&1); status=$?; rm -rf \"$dir\"; echo \"$out\" | tail -n 12; [ $status -eq 0 ] && echo \"$out\" | tr -s ' \\n' ' ' | grep -q \"no GPU visible: FWI_NO_GPU_ARCHITECTURES; nvidia-smi could not say the GPUs' compute capability.*CUDAARCHS\""
                 ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR})
set_tests_properties(ecosystem_cudaarchs_honoured ecosystem_cudaarchs_changed_later_is_reported
                     ecosystem_configure_without_nvidia_smi ecosystem_configure_nvidia_smi_without_compute_cap
                     PROPERTIES LABELS cpu TIMEOUT 300)
# With a GPU present and no architectures given, the build is for the GPUs present, unless the CUDA
# compiler does not know one of them (cmake/CudaArchitectures.cmake): a GPU of a major version newer than
# it knows gets PTX of the newest it knows, with a warning; one older than it knows stops the configure
# with a message. A fake nvidia-smi reports the GPUs.
add_test(NAME ecosystem_gpu_newer_than_the_compiler
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_architectures_test.sh ${CMAKE_COMMAND}
                 ${PROJECT_SOURCE_DIR} "9.0 99.0" "knows no GPU of compute capability 99.0.*CUDA architectures: 90-real;[0-9]+-virtual" ok)
add_test(NAME ecosystem_gpu_older_than_the_compiler
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_architectures_test.sh ${CMAKE_COMMAND}
                 ${PROJECT_SOURCE_DIR} "1.0" "cannot build for a GPU of compute capability 1.0: the oldest it builds for is" fails)
# ... but beside a GPU it builds for (an old display card beside the compute GPU), the old one is left out
# with a warning, and the build is for the other.
add_test(NAME ecosystem_gpu_older_than_the_compiler_beside_another
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_architectures_test.sh ${CMAKE_COMMAND}
                 ${PROJECT_SOURCE_DIR} "1.0 9.0" "cannot build for a GPU of compute capability 1.0: .*The build is for the other GPUs.*CUDA architectures: 90-real \\(the GPUs present" ok "" "hold no code")
# ... and a later configure of that build folder does not ask to choose again for the GPU left out.
add_test(NAME ecosystem_gpu_older_than_the_compiler_reconfigured
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_architectures_test.sh ${CMAKE_COMMAND}
                 ${PROJECT_SOURCE_DIR} "1.0 9.0" "CUDA architectures: 90-real \\(as given or kept" ok "1.0 9.0" "hold no code")
add_test(NAME ecosystem_gpu_between_known_architectures
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_architectures_test.sh ${CMAKE_COMMAND}
                 ${PROJECT_SOURCE_DIR} "8.5" "knows no GPU of compute capability 8.5 \\(machine code of 8.0.*CUDA architectures: 80-real " ok)
# The architectures chosen at the first configure stay: a build folder shared by nodes with other GPUs
# is not rebuilt for whichever configured last. Where a GPU present has no code in them (8.6's machine
# code on a 9.0), the configure warns and says how to choose again; where it runs them (8.0's on an
# 8.6, of the same major version), it does not.
add_test(NAME ecosystem_architectures_kept_on_reconfigure
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_architectures_test.sh ${CMAKE_COMMAND}
                 ${PROJECT_SOURCE_DIR} "8.6" "CUDA architectures: 86-real \\(as given or kept from the first configure.*hold no code that a GPU of compute capability 9.0 on this machine runs.*--fresh" ok "9.0")
add_test(NAME ecosystem_architectures_kept_run_on_later_minor_version
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_architectures_test.sh ${CMAKE_COMMAND}
                 ${PROJECT_SOURCE_DIR} "8.0" "CUDA architectures: 80-real \\(as given or kept" ok "8.6" "hold no code")
set_tests_properties(ecosystem_gpu_newer_than_the_compiler ecosystem_gpu_older_than_the_compiler
                     ecosystem_gpu_older_than_the_compiler_beside_another ecosystem_gpu_older_than_the_compiler_reconfigured
                     ecosystem_gpu_between_known_architectures ecosystem_architectures_kept_on_reconfigure
                     ecosystem_architectures_kept_run_on_later_minor_version
                     PROPERTIES LABELS cpu TIMEOUT 300)
# Architecture-specific code (90a) runs on its own architecture only: a build of it warns for an 8.0 GPU
# present, not for the 9.0 beside it (any such architecture once counted as running everywhere).
add_test(NAME ecosystem_architecture_specific_code_warns
         COMMAND ${BASH_EXECUTABLE} -c
                 "work=$(mktemp -d) && mkdir \"$work/bin\" && printf '#!/bin/sh\\nprintf \"%%s\\\\n\" 8.0 9.0\\n' >\"$work/bin/nvidia-smi\" && chmod +x \"$work/bin/nvidia-smi\" && cd \"$1\" && out=$(CUDAARCHS=90a-real PATH=\"$work/bin:$PATH\" \"$0\" --preset ci -B \"$work/build\" -DBUILD_TESTING=OFF 2>&1); status=$?; rm -rf \"$work\"; echo \"$out\" | tail -n 12; [ $status -eq 0 ] && echo \"$out\" | tr -s ' \\n' ' ' | grep -q 'hold no code that a GPU of compute capability 8.0 on this machine runs'"
                 ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR})
set_tests_properties(ecosystem_architecture_specific_code_warns PROPERTIES LABELS cpu TIMEOUT 300)
# An nvidia-smi that never answers (a hung driver) is stopped after FWI_QUERY_TIMEOUT seconds: the
# configure warns and goes on as without a GPU, instead of waiting without a limit.
add_test(NAME ecosystem_nvidia_smi_hangs
         COMMAND ${BASH_EXECUTABLE} -c
                 "work=$(mktemp -d) && mkdir \"$work/bin\" && printf '#!/bin/sh\\nexec sleep 600\\n' >\"$work/bin/nvidia-smi\" && chmod +x \"$work/bin/nvidia-smi\" && cd \"$1\" && out=$(env -u CUDAARCHS PATH=\"$work/bin:$PATH\" \"$0\" --preset ci -B \"$work/build\" -DBUILD_TESTING=OFF -DFWI_QUERY_TIMEOUT=3 2>&1); status=$?; rm -rf \"$work\"; echo \"$out\" | tail -n 12; [ $status -eq 0 ] && echo \"$out\" | tr -s ' \\n' ' ' | grep -q 'nvidia-smi did not answer within 3 s.*CUDA architectures: 90 (no GPU visible'"
                 ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR})
set_tests_properties(ecosystem_nvidia_smi_hangs PROPERTIES LABELS cpu TIMEOUT 120)
# A first configure that fails leaves no cache, so a CUDAARCHS it was given does not outlive it.
add_test(NAME ecosystem_failed_first_configure_keeps_nothing
         COMMAND ${BASH_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/failed_configure_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(ecosystem_failed_first_configure_keeps_nothing PROPERTIES LABELS cpu TIMEOUT 120)
# Google Benchmark is optional: a configure without it leaves the benchmarks and their tests out, says so,
# and succeeds (the benchmarks' tests once named their programs unconditionally, failing the configure).
add_test(NAME ecosystem_configure_without_google_benchmark
         COMMAND ${BASH_EXECUTABLE} -c
                 "work=$(mktemp -d) && out=$(CUDAARCHS=90 \"$0\" -S \"$1\" -B \"$work/build\" -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON 2>&1); status=$?; rm -rf \"$work\"; echo \"$out\" | tail -n 20; [ $status -eq 0 ] && echo \"$out\" | tr -s ' \\n' ' ' | grep -q 'Google Benchmark not found .* the benchmarks are left out'"
                 ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR})
set_tests_properties(ecosystem_configure_without_google_benchmark PROPERTIES LABELS cpu TIMEOUT 300)
add_test(NAME ecosystem_install_runs_from_prefix
         COMMAND ${BASH_EXECUTABLE} -c
                 "dir=$(mktemp -d) && \"$0\" --install \"$1\" --prefix \"$dir\" >/dev/null && \"$dir/bin/01_single_gpu\" --help >/dev/null && python3 \"$dir/share/multi_gpu_fwi/plot_fwi.py\" \"$dir\" >/dev/null; status=$?; rm -rf \"$dir\"; exit $status"
                 ${CMAKE_COMMAND} ${CMAKE_BINARY_DIR})
set_tests_properties(ecosystem_install_runs_from_prefix PROPERTIES LABELS cpu TIMEOUT 120)

# nccl-tests' command lines work in every allreduce sweep (02, 03 and 05 --bench-allreduce): -b/-e/-f/-n/-w
# (-g in 02), sizes with K/M/G and past 2 GiB. Each parses and then stops at the GPU check (exit 3, not 2):
# CUDA_VISIBLE_DEVICES is empty, so no GPU is visible on any machine. A bad size is exit 2 naming the flag.
# (03's sweep at 1G: its host buffers, 2 GiB, are checked before the GPU and fit any machine that runs the tests.)
set(ecosystem_no_gpu "CUDA_VISIBLE_DEVICES=")
add_exit_test(ecosystem_nccl_tests_flags_02 CODE 3 TEXT "needs 1 CUDA GPU and 0 are visible"
              ENVIRONMENT ${ecosystem_no_gpu}
              COMMAND $<TARGET_FILE:02_allreduce_primitives> -b 1M -e 4G -f 2 -g 2 -n 5 -w 1)
add_exit_test(ecosystem_nccl_tests_flags_03 CODE 3 TEXT "no CUDA GPU" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:03_host_staged_mpi> --bench-allreduce -b 1M -e 1G -f 2 -n 5 -w 1)
add_exit_test(ecosystem_nccl_tests_flags_05 CODE 3 TEXT "no CUDA GPU" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:05_nccl_mpi> --bench-allreduce -b 1M -e 4G -f 2 -n 5 -w 1)
add_exit_test(ecosystem_nccl_tests_bad_size_02 CODE 2 TEXT "-b (--min-bytes): '12Q' is not a size"
              ENVIRONMENT ${ecosystem_no_gpu} COMMAND $<TARGET_FILE:02_allreduce_primitives> -b 12Q)
add_exit_test(ecosystem_nccl_tests_zero_size_02 CODE 2 TEXT "-e (--max-bytes): 0 is out of range"
              ENVIRONMENT ${ecosystem_no_gpu} COMMAND $<TARGET_FILE:02_allreduce_primitives> -e 0)
add_exit_test(ecosystem_nccl_tests_short_and_long_02 CODE 2 TEXT "--min-bytes given twice"
              ENVIRONMENT ${ecosystem_no_gpu} COMMAND $<TARGET_FILE:02_allreduce_primitives> -b 1M --min-bytes 2M)
add_exit_test(ecosystem_nccl_tests_bad_size_03 CODE 2 TEXT "-b (--min-bytes): '12Q' is not a size" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:03_host_staged_mpi> --bench-allreduce -b 12Q)
add_exit_test(ecosystem_nccl_tests_zero_size_05 CODE 2 TEXT "-e (--max-bytes): 0 is out of range" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:05_nccl_mpi> --bench-allreduce -e 0)
add_exit_test(ecosystem_nccl_tests_no_gpus_flag_05 CODE 2 TEXT "unknown flag '-g'" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:05_nccl_mpi> --bench-allreduce -g 2)

# A launch that went wrong is refused (exit 2, naming the variable, as a program of one process started as
# several ranks is): the environment names several ranks
# but MPI sees one (the program started without mpirun, or by a launcher its MPI does not join). Run
# directly, without mpirun: Open MPI then starts a singleton of one rank.
add_exit_test(ecosystem_launch_mismatch_world_size_05 CODE 2 TEXT "WORLD_SIZE=4" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} WORLD_SIZE=4
              COMMAND $<TARGET_FILE:05_nccl_mpi> --bench-allreduce)
add_exit_test(ecosystem_launch_mismatch_slurm_ntasks_05 CODE 2 TEXT "SLURM_NTASKS=2" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} SLURM_NTASKS=2
              COMMAND $<TARGET_FILE:05_nccl_mpi> --bench-allreduce)
add_exit_test(ecosystem_launch_mismatch_pmi_size_03 CODE 2 TEXT "PMI_SIZE=2" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} PMI_SIZE=2
              COMMAND $<TARGET_FILE:03_host_staged_mpi>)
add_exit_test(ecosystem_launch_mismatch_ompi_size_06 CODE 2 TEXT "OMPI_COMM_WORLD_SIZE=2" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} OMPI_COMM_WORLD_SIZE=2
              COMMAND $<TARGET_FILE:06_fwi_shot_parallel> --problem small --no-plots
                      --out ${CMAKE_CURRENT_BINARY_DIR}/ecosystem_launch_06_mismatch)
add_exit_test(ecosystem_launch_mismatch_doctor_mpi CODE 2 TEXT "WORLD_SIZE=2" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} WORLD_SIZE=2
              COMMAND $<TARGET_FILE:doctor> --mpi)
# doctor without --mpi is no MPI program: started by mpirun as several ranks, it is refused before any check
# (each would run every check at once on the same GPUs); `mpirun -np 1` is one doctor and goes on.
add_exit_test(ecosystem_doctor_mpirun_without_mpi CODE 2
              TEXT "started as one of several MPI ranks (OMPI_COMM_WORLD_SIZE=2, set by Open MPI's mpirun): each would run the whole program on the same GPUs; add --mpi"
              LABELS cpu mpi ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
              COMMAND ${MPIRUN_TEST} 2 $<TARGET_FILE:doctor>)
# So are the other programs of one process (and the benchmarks: benchmarks.cmake).
foreach(program 01_single_gpu 02_allreduce_primitives 04_nccl_threads)
  add_exit_test(ecosystem_${program}_mpirun_several CODE 2
                TEXT "started as one of several MPI ranks (OMPI_COMM_WORLD_SIZE=2, set by Open MPI's mpirun)"
                LABELS cpu mpi ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
                COMMAND ${MPIRUN_TEST} 2 $<TARGET_FILE:${program}>)
endforeach()
add_exit_test(ecosystem_doctor_mpirun_one_without_mpi CODE 3 TEXT "" OUTPUT "no GPU visible -> exit 3" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu}
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:doctor>)
# A rank count past MPI's int is named as it is set, not as the largest number it was read as.
add_exit_test(ecosystem_launch_ompi_size_overflow_06 CODE 2
              TEXT "OMPI_COMM_WORLD_SIZE=99999999999999999999 (set by Open MPI's mpirun) is more ranks than MPI"
              LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} OMPI_COMM_WORLD_SIZE=99999999999999999999
              COMMAND $<TARGET_FILE:06_fwi_shot_parallel> --problem small --no-plots
                      --out ${CMAKE_CURRENT_BINARY_DIR}/ecosystem_launch_06_overflow)
# A value that is no rank count is refused too, naming it as it is set, not read as unset (which would let a
# mistaken launch through unseen).
add_exit_test(ecosystem_launch_ompi_size_junk_05 CODE 2
              TEXT "OMPI_COMM_WORLD_SIZE='2abc' (set by Open MPI's mpirun) is not a number of ranks" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} OMPI_COMM_WORLD_SIZE=2abc
              COMMAND $<TARGET_FILE:05_nccl_mpi> --bench-allreduce)
add_exit_test(ecosystem_launch_world_size_zero_05 CODE 2 TEXT "WORLD_SIZE=0 (set by torchrun" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} WORLD_SIZE=0
              COMMAND $<TARGET_FILE:05_nccl_mpi> --bench-allreduce)
# Consistent launches pass the check and go on to the GPU check: WORLD_SIZE=1; and `mpirun -np 1` inside a
# Slurm allocation of more tasks (Open MPI's OMPI_COMM_WORLD_SIZE=1 says one rank on purpose).
add_exit_test(ecosystem_launch_world_size_one_05 CODE 3 TEXT "sees no CUDA GPU" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} WORLD_SIZE=1
              COMMAND $<TARGET_FILE:05_nccl_mpi> --bench-allreduce)
add_exit_test(ecosystem_launch_mpirun_one_in_slurm_05 CODE 3 TEXT "sees no CUDA GPU" LABELS cpu mpi
              ENVIRONMENT ${MPI_TEST_ENVIRONMENT} ${ecosystem_no_gpu} SLURM_NTASKS=4
              COMMAND ${MPIRUN_TEST} 1 $<TARGET_FILE:05_nccl_mpi> --bench-allreduce)
