# fwi_compute_caps(TEXT RESULT): the distinct compute capabilities ("9.0") in nvidia-smi's output TEXT.
function(fwi_compute_caps text result)
  string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${text}")
  list(REMOVE_DUPLICATES caps)
  set(${result} "${caps}" PARENT_SCOPE)
endfunction()

# fwi_native_architectures(COMPUTE_CAPS RESULT): the CUDA architectures to build for the GPUs present,
# given nvidia-smi's compute capabilities (lines like "9.0"). Runs before project(), so it asks the
# nvcc that project() will find (CMAKE_CUDA_COMPILER, CUDACXX, PATH, /usr/local/cuda/bin) which
# machine code it can build (`nvcc --list-gpu-code`). For each GPU:
#   - known to it: machine code for it ("90-real"), named, so the build's RESULT says what was built;
#   - between two architectures it knows (compute capability 10.3 where it knows 10.0 and 12.0): machine code
#     of the newest older one of the same major version, which the GPU runs as its own, else that one's
#     PTX, which the driver compiles when a program loads; with a warning that names the GPU;
#   - newer than every architecture it knows: the same rule, so machine code of the newest where the major
#     version is the GPU's, else its PTX (a Blackwell and CUDA 12.4, say: PTX of 9.0), with the same warning;
#   - older than every architecture it knows (a V100 and CUDA 13): left out with a warning where another GPU
#     can be built for (an old display card beside the compute GPUs), else a fatal error saying so; the
#     GPUs left out are in the cache (FWI_TOO_OLD_COMPUTE_CAPS, kept like the architectures), which
#     fwi_warn_about_gpus_without_code then passes over, at this configure and the later ones.
# Where nvcc cannot be asked, "native": project() or nvcc then reports what is wrong.
# nvidia-smi lists every GPU of the machine, also those CUDA_VISIBLE_DEVICES hides: the build covers them too.
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
  execute_process(COMMAND "${nvcc}" --list-gpu-code OUTPUT_VARIABLE listed RESULT_VARIABLE status ERROR_QUIET
                  TIMEOUT ${FWI_QUERY_TIMEOUT})
  string(REGEX MATCHALL "sm_[0-9]+" listed "${listed}")
  if(NOT status EQUAL 0 OR NOT listed)
    return()
  endif()
  string(REPLACE "sm_" "" known "${listed}")
  list(SORT known COMPARE NATURAL)
  list(GET known 0 oldest)

  # Each GPU is known, older than every known architecture, newer than every one, or between two.
  fwi_compute_caps("${compute_caps}" caps)
  set(architectures "")
  set(too_old "")
  set(not_known "")
  foreach(cap IN LISTS caps)
    string(REPLACE "." "" number "${cap}")
    if(number IN_LIST known)
      list(APPEND architectures "${number}-real")
    elseif(number LESS oldest)
      list(APPEND too_old "${cap}")
    else()
      # The newest known architecture older than the GPU: its machine code where the major version is
      # the GPU's (machine code runs on later minor versions of its major one), else its PTX.
      set(older "")
      foreach(candidate IN LISTS known)
        if(candidate LESS number)
          set(older "${candidate}")
        endif()
      endforeach()
      math(EXPR gpu_major "${number} / 10")
      math(EXPR older_major "${older} / 10")
      string(REGEX REPLACE "([0-9]+)([0-9])$" "\\1.\\2" older_cap "${older}")
      if(gpu_major EQUAL older_major)
        list(APPEND architectures "${older}-real")
        list(APPEND not_known "${cap} (machine code of ${older_cap}, which it runs)")
      else()
        list(APPEND architectures "${older}-virtual")
        list(APPEND not_known "${cap} (PTX of ${older_cap}, which the driver compiles for it when a program loads)")
      endif()
    endif()
  endforeach()
  if(too_old)
    string(REGEX REPLACE "([0-9]+)([0-9])$" "\\1.\\2" oldest_cap "${oldest}")
    string(REPLACE ";" ", " too_old_text "${too_old}")
    string(CONCAT cannot "the CUDA compiler ${nvcc} cannot build for a GPU of compute capability ${too_old_text}: "
                         "the oldest it builds for is ${oldest_cap}.")
    string(CONCAT older_toolkit "an older CUDA toolkit that still supports it (put its nvcc first on PATH, or set "
                                "CUDACXX; CUDA 13 builds for 7.5 and later, CUDA 12 for 5.0 and later)")
    if(NOT architectures)
      message(FATAL_ERROR "${cannot} Build with ${older_toolkit}, or name the architectures yourself with CUDAARCHS")
    endif()
    message(WARNING "${cannot} The build is for the other GPUs, and its programs refuse to run on this one: hide "
                    "it from them with CUDA_VISIBLE_DEVICES, or build with ${older_toolkit}.")
    set(FWI_TOO_OLD_COMPUTE_CAPS "${too_old}" CACHE INTERNAL "GPUs left out of the build: too old for nvcc")
  endif()
  if(not_known)
    string(REPLACE ";" ", " not_known "${not_known}")
    message(WARNING "the CUDA compiler ${nvcc} knows no GPU of compute capability ${not_known}. A CUDA toolkit "
                    "that knows them builds machine code for them (Blackwell: CUDA 12.8 or newer).")
  endif()
  list(REMOVE_DUPLICATES architectures)
  set(${result} "${architectures}" PARENT_SCOPE)
endfunction()

# fwi_warn_about_gpus_without_code(COMPUTE_CAPS ARCHITECTURES): a warning for each GPU present (nvidia-smi's
# compute capabilities) that a build for ARCHITECTURES (CMake's list: "90-real", "80", "90-virtual") has
# no code for. A GPU runs machine code of its own architecture or of an older one of its major version,
# and PTX of its own or an older architecture, which the driver compiles when a program loads. Its
# programs would stop with the rebuild hint (or run slower on PTX), so the configure says so at once: a
# build folder keeps its architectures from its first configure, on another node too.
function(fwi_warn_about_gpus_without_code compute_caps architectures)
  if(architectures MATCHES "^(all|all-major|native|OFF)$")
    return()
  endif()
  fwi_compute_caps("${compute_caps}" caps)
  set(without_code "")
  foreach(cap IN LISTS caps)
    if(cap IN_LIST FWI_TOO_OLD_COMPUTE_CAPS)
      continue()  # fwi_native_architectures has said that no CUDA compiler of this toolkit builds for it
    endif()
    string(REPLACE "." "" number "${cap}")
    math(EXPR gpu_major "${number} / 10")
    set(runs_something FALSE)
    foreach(architecture IN LISTS architectures)
      if(NOT architecture MATCHES "^([0-9]+)([af]?)(-real|-virtual)?$")
        set(runs_something TRUE)  # an architecture this rule does not read: nvcc and the driver judge
        break()
      endif()
      set(built "${CMAKE_MATCH_1}")
      set(specific "${CMAKE_MATCH_2}")
      set(kind "${CMAKE_MATCH_3}")
      math(EXPR built_major "${built} / 10")
      if(specific STREQUAL "a")
        # Architecture-specific code (90a), machine code or PTX, runs on that architecture only.
        if(built EQUAL number)
          set(runs_something TRUE)
        endif()
      elseif(specific STREQUAL "f")
        # Family-specific code (100f) runs on the later minor versions of its major one only.
        if(built_major EQUAL gpu_major AND NOT built GREATER number)
          set(runs_something TRUE)
        endif()
      elseif(NOT kind STREQUAL "-virtual" AND built_major EQUAL gpu_major AND NOT built GREATER number)
        set(runs_something TRUE)  # machine code
      elseif(NOT kind STREQUAL "-real" AND NOT built GREATER number)
        set(runs_something TRUE)  # PTX
      endif()
    endforeach()
    if(NOT runs_something)
      list(APPEND without_code "${cap}")
    endif()
  endforeach()
  if(without_code)
    string(REPLACE ";" ", " without_code "${without_code}")
    message(WARNING "this build's CUDA architectures (${architectures}) hold no code that a GPU of compute "
                    "capability ${without_code} on this machine runs: its programs stop with a message asking "
                    "for a rebuild. The build folder keeps the architectures of its first configure; choose "
                    "again for the GPUs present with `env -u CUDAARCHS cmake --preset default --fresh` (another "
                    "folder: add -B <folder>), or name every node's kind with CUDAARCHS=\"80;90\" and --fresh.")
  endif()
endfunction()
