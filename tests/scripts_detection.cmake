# What scripts/common.sh installs or refuses on a fresh machine (tests/scripts_detection_test.sh): fake
# cmake, nvcc, MPI, g++, python3 and apt-cache on PATH, temporary include folders, a dry run; NCCL found
# where cmake/FindNCCL.cmake looks or planned as libnccl-dev, and the CMake, CUDA and NCCL version floors.
# Installs nothing and needs no GPU.
add_test(NAME scripts_detection
         COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/scripts_detection_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(scripts_detection PROPERTIES LABELS cpu TIMEOUT 60)
# What compare.sh and record-results.sh say about the GPUs, with a fake nvidia-smi and a scratch copy of
# scripts/ that builds nothing (tests/scripts_fake_gpu_test.sh); the scripts run through symbolic links.
add_test(NAME scripts_fake_gpu
         COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/scripts_fake_gpu_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(scripts_fake_gpu PROPERTIES LABELS cpu TIMEOUT 300)  # about 50 s alone; much more on a loaded machine
# The scripts' checks of numbers in a locale whose [0-9] also takes "²" (tests/scripts_locale_test.sh): still
# refused; skipped where no such locale can be made.
add_test(NAME scripts_locale
         COMMAND ${BASH_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/scripts_locale_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(scripts_locale PROPERTIES LABELS cpu TIMEOUT 120 SKIP_RETURN_CODE 77)
