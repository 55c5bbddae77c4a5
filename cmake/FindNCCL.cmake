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

# The library as a development package installs it (libnccl.so), or only as the versioned file that
# pip's nvidia-nccl-cu12/cu13 wheels ship (libnccl.so.2); in a multiarch folder on Debian and Ubuntu
# (x86_64-linux-gnu, aarch64-linux-gnu on a Grace host).
set(nccl_library_names nccl libnccl.so.2)
set(nccl_library_suffixes lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu)
if(CMAKE_LIBRARY_ARCHITECTURE)
  list(PREPEND nccl_library_suffixes lib/${CMAKE_LIBRARY_ARCHITECTURE})
endif()
if(nccl_roots)
  find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${nccl_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES ${nccl_library_names} PATHS ${nccl_roots} PATH_SUFFIXES ${nccl_library_suffixes}
               NO_DEFAULT_PATH)
  string(REPLACE ";" ", " nccl_roots_text "${nccl_roots}")
  set(nccl_missing "")
  if(NOT NCCL_INCLUDE_DIR)
    list(APPEND nccl_missing "include/nccl.h")
  endif()
  if(NOT NCCL_LIBRARY)
    list(APPEND nccl_missing "lib/libnccl.so (or libnccl.so.2)")
  endif()
  string(REPLACE ";" " nor " nccl_missing "${nccl_missing}")
  set(nccl_not_found_reason "NCCL_ROOT / NCCL_HOME (${nccl_roots_text}) has no ${nccl_missing}: point it at an NCCL installation (for pip's wheel, the site-packages/nvidia/nccl folder), or unset it to use the system's")
else()
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES ${nccl_library_names}
    HINTS ${CUDAToolkit_LIBRARY_DIR}
    PATH_SUFFIXES ${nccl_library_suffixes})
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
