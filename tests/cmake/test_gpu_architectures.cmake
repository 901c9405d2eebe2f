# ctest gpu_architectures: knn_native_cuda_choice (cmake/knn_gpu_architectures.cmake),
# the choice `pip install` makes, against fake nvidia-smi and nvcc programs that
# print what real ones print on machines with and without GPUs.
#
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -P tests/cmake/test_gpu_architectures.cmake
cmake_minimum_required(VERSION 3.25)  # the policies of the project (IN_LIST)
include("${SOURCE_DIR}/cmake/knn_gpu_architectures.cmake")

function(expect what actual expected)
  if(NOT "${actual}" STREQUAL "${expected}")
    message(SEND_ERROR "${what}: got '${actual}', expected '${expected}'")
  endif()
endfunction()

# A folder holding an nvidia-smi that prints `smi_out` and exits with `smi_rc`
# (none when smi_rc is "absent"), and bin/nvcc listing the virtual
# architectures of CUDA 12.4 (nothing past compute_90).
function(fake_tools dir smi_out smi_rc)
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}/bin")
  if(NOT smi_rc STREQUAL "absent")
    file(WRITE "${dir}/bin/nvidia-smi" "#!/bin/sh\nprintf '${smi_out}'\nexit ${smi_rc}\n")
    file(CHMOD "${dir}/bin/nvidia-smi" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  endif()
  file(WRITE "${dir}/bin/nvcc"
       "#!/bin/sh\n[ \"$1\" = --list-gpu-arch ] && printf 'compute_50\\ncompute_75\\ncompute_80\\ncompute_86\\ncompute_89\\ncompute_90\\n'\n")
  file(CHMOD "${dir}/bin/nvcc" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
endfunction()

# Runs the choice with only the fake folder on the search paths; sets
# choice_<name> and archs_<name> in the caller.
macro(choose name)
  set(ENV{PATH} "${WORK_DIR}/${name}/bin")
  set(ENV{CUDA_HOME} "${WORK_DIR}/${name}")
  unset(ENV{CUDACXX})
  unset(ENV{CUDA_PATH})
  unset(KNN_NVIDIA_SMI CACHE)
  unset(KNN_NVIDIA_SMI)
  unset(KNN_NVCC CACHE)
  unset(KNN_NVCC)
  set(CMAKE_CUDA_ARCHITECTURES "${given_${name}}")
  knn_native_cuda_choice(choice_${name})
  set(archs_${name} "${CMAKE_CUDA_ARCHITECTURES}")
endmacro()

set(saved_path "$ENV{PATH}")

# No nvidia-smi: a machine without the NVIDIA driver.
fake_tools("${WORK_DIR}/none" "" absent)
choose(none)
expect("no nvidia-smi: engine" "${choice_none}" OFF)
expect("no nvidia-smi: architectures" "${archs_none}" "")

# nvidia-smi without a device: it fails ("No devices were found", exit 6).
fake_tools("${WORK_DIR}/nodevice" "No devices were found\\n" 6)
choose(nodevice)
expect("nvidia-smi fails: engine" "${choice_nodevice}" OFF)

# Two A10s and an H100: machine code for each kind once.
fake_tools("${WORK_DIR}/mixed" "8.6\\n8.6\\n9.0\\n" 0)
choose(mixed)
expect("8.6 8.6 9.0: engine" "${choice_mixed}" AUTO)
expect("8.6 8.6 9.0: architectures" "${archs_mixed}" "86-real;90-real")

# A GPU newer than the nvcc: the nvcc's newest PTX, for the driver to compile.
fake_tools("${WORK_DIR}/newer" "12.0\\n" 0)
choose(newer)
expect("12.0 with nvcc 12.4: engine" "${choice_newer}" AUTO)
expect("12.0 with nvcc 12.4: architectures" "${archs_newer}" "90-virtual")

# Architectures given: taken as they are, whatever the GPUs.
fake_tools("${WORK_DIR}/given" "8.6\\n" 0)
set(given_given "75-real;80-real")
choose(given)
expect("given: engine" "${choice_given}" AUTO)
expect("given: architectures" "${archs_given}" "75-real;80-real")

set(ENV{PATH} "${saved_path}")
