# KNN_WITH_CUDA=NATIVE: the CUDA engine for the GPUs of this machine only
# (what `pip install` builds, pyproject.toml). nvidia-smi names them, so the
# choice needs no CUDA compiler and no test program (CMake's own
# CMAKE_CUDA_ARCHITECTURES=native compiles and runs one, and fails the
# configure step on a machine without a GPU).
#
# knn_native_cuda_choice(<var>) sets <var> in the caller to AUTO or OFF:
#   - CMAKE_CUDA_ARCHITECTURES given (not empty): AUTO with that list;
#   - GPUs found: AUTO, CMAKE_CUDA_ARCHITECTURES = their machine code
#     (XY-real each); a GPU newer than nvcc gets nvcc's newest PTX instead,
#     which the driver compiles at load;
#   - none: OFF, with a notice saying how to ask for the CUDA engine.

function(knn_native_cuda_choice out_var)
  if(CMAKE_CUDA_ARCHITECTURES)
    message(STATUS "knn_gpgpu: KNN_WITH_CUDA=NATIVE with CMAKE_CUDA_ARCHITECTURES="
                   "${CMAKE_CUDA_ARCHITECTURES} given: the CUDA engine when nvcc is found")
    set(${out_var} AUTO PARENT_SCOPE)
    return()
  endif()

  set(capabilities "")
  find_program(KNN_NVIDIA_SMI nvidia-smi)
  if(KNN_NVIDIA_SMI)
    execute_process(COMMAND "${KNN_NVIDIA_SMI}" --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE smi_out RESULT_VARIABLE smi_rc ERROR_QUIET TIMEOUT 30)
    if(smi_rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" capabilities "${smi_out}")
      list(REMOVE_DUPLICATES capabilities)
    endif()
  endif()

  if(NOT capabilities)
    message(NOTICE
      "knn_gpgpu: no NVIDIA GPU found (nvidia-smi --query-gpu=compute_cap): building the CPU "
      "engine only. To build the CUDA engine all the same (nvcc needed), set\n"
      "  KNN_WITH_CUDA=ON KNN_CUDA_ARCHITECTURES=\"75-real;80-real;90\"\n"
      "in the environment of `pip install` (or -DKNN_WITH_CUDA=ON "
      "-DCMAKE_CUDA_ARCHITECTURES=... with CMake); KNN_WITH_CUDA=AUTO builds CMake's default "
      "list whenever nvcc is found.")
    set(${out_var} OFF PARENT_SCOPE)
    return()
  endif()

  # What this nvcc can compile (compute_75 compute_80 ...), when it is there.
  set(supported "")
  find_program(KNN_NVCC nvcc HINTS ENV CUDACXX ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin)
  if(KNN_NVCC)
    execute_process(COMMAND "${KNN_NVCC}" --list-gpu-arch OUTPUT_VARIABLE nvcc_out
                    RESULT_VARIABLE nvcc_rc ERROR_QUIET TIMEOUT 60)
    if(nvcc_rc EQUAL 0)
      string(REGEX MATCHALL "compute_[0-9]+" supported "${nvcc_out}")
      string(REPLACE "compute_" "" supported "${supported}")
    endif()
  endif()

  set(archs "")
  foreach(capability IN LISTS capabilities)
    string(REPLACE "." "" arch "${capability}")
    if(NOT supported OR arch IN_LIST supported)
      list(APPEND archs "${arch}-real")
    else()
      list(SORT supported COMPARE NATURAL)
      list(GET supported -1 newest)
      list(APPEND archs "${newest}-virtual")
      message(NOTICE "knn_gpgpu: this nvcc cannot compile for compute capability ${capability}: "
                     "PTX for ${newest} instead (the driver compiles it at load)")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES archs)
  message(STATUS "knn_gpgpu: GPUs found (compute capability ${capabilities}): "
                 "CUDA architectures ${archs}")
  set(CMAKE_CUDA_ARCHITECTURES "${archs}" PARENT_SCOPE)
  set(${out_var} AUTO PARENT_SCOPE)
endfunction()
