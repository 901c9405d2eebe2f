# The test layering_rejects: cmake/check_layering.cmake run on
# tests/cmake/layering_fixture/, a tree whose src/ and mpi/ reach the engines
# other than through the registration, must fail naming exactly those files.
#   cmake -DSOURCE_DIR=<repository root> -P tests/cmake/check_layering_rejects.cmake
cmake_minimum_required(VERSION 3.16)

execute_process(
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${SOURCE_DIR}/tests/cmake/layering_fixture
          -P ${SOURCE_DIR}/cmake/check_layering.cmake
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(text "${out}${err}")
if(result EQUAL 0)
  message(FATAL_ERROR "the check passed a tree that breaks the layering:\n${text}")
endif()
foreach(expected
    "src/names_engine.cpp: names cuda::device_count"
    "src/includes_engine.cpp: #include \"../openmp/omp_engine.h\" reaches openmp/"
    "mpi/names_engine.cpp: names omp::build_kdtree")
  string(FIND "${text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the check did not report \"${expected}\":\n${text}")
  endif()
endforeach()
foreach(allowed "src/backends.cpp:" "src/comment_only.cpp:")
  string(FIND "${text}" "${allowed}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the check reported ${allowed} which keeps the rule:\n${text}")
  endif()
endforeach()
message(STATUS "layering_rejects: the check names every file that breaks the rule, and no other")
