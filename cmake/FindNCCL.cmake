# FindNCCL: the NCCL header and library, which live in the CUDA toolkit on some machines
# (/usr/local/cuda/include, .../lib64) and in the system directories on others (/usr/include,
# /usr/lib/x86_64-linux-gnu). NCCL_ROOT (a CMake or environment variable) or NCCL_HOME points at another
# NCCL, which is then the only one looked for: one given and not found is an error, not a silent fall
# back to the system's.
# Defines NCCL_FOUND, NCCL_VERSION and the imported target NCCL::nccl.

find_package(CUDAToolkit QUIET)

set(nccl_roots ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME})
# The paths found are cached: found again when the roots given change (or are no longer given).
if(NOT "${nccl_roots}" STREQUAL "${NCCL_ROOTS_SEARCHED}")
  unset(NCCL_INCLUDE_DIR CACHE)
  unset(NCCL_LIBRARY CACHE)
endif()
set(NCCL_ROOTS_SEARCHED "${nccl_roots}" CACHE INTERNAL "the NCCL_ROOT / NCCL_HOME that NCCL was looked for in")

if(nccl_roots)
  find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${nccl_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY nccl PATHS ${nccl_roots} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu NO_DEFAULT_PATH)
  string(REPLACE ";" ", " nccl_roots_text "${nccl_roots}")
  set(nccl_not_found_reason "NCCL_ROOT / NCCL_HOME (${nccl_roots_text}) has no include/nccl.h and lib/libnccl.so: point it at an NCCL installation, or unset it to use the system's")
else()
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl
    HINTS ${CUDAToolkit_LIBRARY_DIR}
    PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  set(nccl_not_found_reason "install libnccl-dev (scripts/run-tests.sh does), or set NCCL_ROOT to an NCCL installation")
endif()

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" nccl_version_lines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${part} ([0-9]+).*" "\\1" NCCL_${part} "${nccl_version_lines}")
  endforeach()
  set(NCCL_VERSION "${NCCL_MAJOR}.${NCCL_MINOR}.${NCCL_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION
  REASON_FAILURE_MESSAGE "${nccl_not_found_reason}")

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
