# fwi_native_architectures(COMPUTE_CAPS RESULT): the CUDA architectures to build for the GPUs present,
# given nvidia-smi's compute capabilities (lines like "9.0"). Runs before project(), so it asks the
# nvcc that project() will find (CMAKE_CUDA_COMPILER, CUDACXX, PATH, /usr/local/cuda/bin) which
# machine code it can build (`nvcc --list-gpu-code`):
#   - every GPU known to it: "native";
#   - a GPU newer than every architecture it knows (a Blackwell and CUDA 12.4, say): machine code for
#     the known GPUs and PTX of the newest architecture it knows, which the driver compiles for the new
#     GPU when a program loads, with a warning that names the GPU;
#   - a GPU older than every architecture it knows (a V100 and CUDA 13): a fatal error saying so.
# Where nvcc cannot be asked, or a GPU falls between two architectures it knows, "native": project() or
# nvcc then reports what is wrong.
function(fwi_native_architectures compute_caps result)
  set(${result} native PARENT_SCOPE)
  if(DEFINED CMAKE_CUDA_COMPILER)
    set(nvcc "${CMAKE_CUDA_COMPILER}")
  elseif(DEFINED ENV{CUDACXX})
    set(nvcc "$ENV{CUDACXX}")
  else()
    find_program(nvcc nvcc PATHS /usr/local/cuda/bin NO_CACHE)
  endif()
  if(NOT nvcc)
    return()
  endif()
  execute_process(COMMAND "${nvcc}" --list-gpu-code OUTPUT_VARIABLE listed RESULT_VARIABLE status ERROR_QUIET)
  string(REGEX MATCHALL "sm_[0-9]+" listed "${listed}")
  if(NOT status EQUAL 0 OR NOT listed)
    return()
  endif()
  string(REPLACE "sm_" "" known "${listed}")
  list(SORT known COMPARE NATURAL)
  list(GET known 0 oldest)
  list(GET known -1 newest)

  # Each GPU is known, older than every known architecture, newer than every one, or between two.
  string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${compute_caps}")
  list(REMOVE_DUPLICATES caps)
  set(machine_code "")
  set(too_old "")
  set(too_new "")
  set(between "")
  foreach(cap IN LISTS caps)
    string(REPLACE "." "" number "${cap}")
    if(number IN_LIST known)
      list(APPEND machine_code "${number}-real")
    elseif(number LESS oldest)
      list(APPEND too_old "${cap}")
    elseif(number GREATER newest)
      list(APPEND too_new "${cap}")
    else()
      list(APPEND between "${cap}")
    endif()
  endforeach()
  if(too_old)
    string(REGEX REPLACE "([0-9]+)([0-9])$" "\\1.\\2" oldest_cap "${oldest}")
    message(FATAL_ERROR "the CUDA compiler ${nvcc} cannot build for a GPU of compute capability ${too_old}: the "
                        "oldest it builds for is ${oldest_cap}. Build with an older CUDA toolkit that still "
                        "supports this GPU (put its nvcc first on PATH, or set CUDACXX), or name the other GPUs' "
                        "architectures yourself with CUDAARCHS")
  endif()
  if(between OR NOT too_new)
    return()  # every GPU known ("native"), or one nvcc itself must judge
  endif()
  string(REGEX REPLACE "([0-9]+)([0-9])$" "\\1.\\2" newest_cap "${newest}")
  list(APPEND machine_code "${newest}-virtual")
  message(WARNING "the CUDA compiler ${nvcc} knows no GPU of compute capability ${too_new}: building PTX of "
                  "${newest_cap}, the newest it knows, which the driver compiles for these GPUs when a program "
                  "loads. A CUDA toolkit that knows them builds machine code for them (Blackwell: CUDA 12.8 or "
                  "newer).")
  set(${result} "${machine_code}" PARENT_SCOPE)
endfunction()
