# The layering of the sources, run before the engines compile (target
# knn_layering) and by ctest (test "layering") as
#   cmake -DSOURCE_DIR=<repository root> -P cmake/check_layering.cmake
#
# Every quoted #include of the library's sources is resolved against the
# including file's folder; a file may only include what its layer is allowed
# to know (docs/ARCHITECTURE.md, "Rules the layout keeps"):
#   src/, mpi/        anything but an engine's folder (cuda/, openmp/): they
#                     reach the engines through engine/backend.h, and name no
#                     engine namespace (cuda::, omp::) outside comments; the
#                     one exception is src/backends.cpp, which registers the
#                     backends (kRegistration below)
#   cuda/, openmp/    engine/, common/, include/ and their own folder, never
#                     src/ and never each other
#   engine/, common/  engine/, common/, include/ only
#   cuda/<folder>/    core/ and the headers at cuda/'s root, never another
#                     structure's folder (cuda/core/ none at all)
# The includes are relative, so the compiler's include path cannot enforce
# this; this check does, and fails naming every offending include or name.

cmake_minimum_required(VERSION 3.16)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layering.cmake: set -DSOURCE_DIR=<repository root>")
endif()
get_filename_component(root "${SOURCE_DIR}" ABSOLUTE)

# layer -> the top-level folders its files may include
set(allowed_cuda cuda engine common include)
set(allowed_openmp openmp engine common include)
set(allowed_engine engine common include)
set(allowed_common engine common include)
# The engines' folders, which the ABI layer reaches only through the backend
# registration.
set(engine_folders cuda openmp)
set(kRegistration src/backends.cpp)

set(violations "")
set(checked 0)
foreach(layer cuda openmp engine common)
  file(GLOB_RECURSE sources LIST_DIRECTORIES false
       "${root}/${layer}/*.h" "${root}/${layer}/*.hpp" "${root}/${layer}/*.cuh"
       "${root}/${layer}/*.c" "${root}/${layer}/*.cpp" "${root}/${layer}/*.cu")
  foreach(source IN LISTS sources)
    math(EXPR checked "${checked} + 1")
    get_filename_component(dir "${source}" DIRECTORY)
    file(RELATIVE_PATH source_rel "${root}" "${source}")
    file(STRINGS "${source}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" included "${line}")
      get_filename_component(target "${included}" ABSOLUTE BASE_DIR "${dir}")
      if(NOT EXISTS "${target}")
        # Not a file of this tree relative to the includer: named by a path
        # from the root ("src/x.h" through an include directory) counts too.
        get_filename_component(target "${included}" ABSOLUTE BASE_DIR "${root}")
      endif()
      file(RELATIVE_PATH target_rel "${root}" "${target}")
      string(REGEX MATCH "^[^/]+" top "${target_rel}")
      if(NOT EXISTS "${target}" OR target_rel MATCHES "^\\.\\./" OR top STREQUAL target_rel)
        continue()  # a system or generated header, or a file at the root
      endif()
      if(NOT top IN_LIST allowed_${layer})
        list(APPEND violations "${source_rel}: #include \"${included}\" reaches ${top}/")
      elseif(layer STREQUAL "cuda" AND source_rel MATCHES "^cuda/([^/]+)/"
             AND target_rel MATCHES "^cuda/([^/]+)/")
        # Inside cuda/: core/ and every structure's folder use core/ and the
        # root headers, never another structure's folder.
        string(REGEX REPLACE "^cuda/([^/]+)/.*$" "\\1" from "${source_rel}")
        string(REGEX REPLACE "^cuda/([^/]+)/.*$" "\\1" to "${target_rel}")
        if(NOT to STREQUAL from AND NOT to STREQUAL "core")
          list(APPEND violations "${source_rel}: #include \"${included}\" reaches cuda/${to}/")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

# The ABI layer (src/) and the distributed index (mpi/): no engine's folder
# and no engine's namespace, but in the registration.
set(composers 0)
foreach(layer src mpi)
  file(GLOB_RECURSE sources LIST_DIRECTORIES false
       "${root}/${layer}/*.h" "${root}/${layer}/*.hpp" "${root}/${layer}/*.c" "${root}/${layer}/*.cpp")
  foreach(source IN LISTS sources)
    file(RELATIVE_PATH source_rel "${root}" "${source}")
    if(source_rel STREQUAL kRegistration)
      continue()
    endif()
    math(EXPR composers "${composers} + 1")
    get_filename_component(dir "${source}" DIRECTORY)
    file(STRINGS "${source}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" included "${line}")
      get_filename_component(target "${included}" ABSOLUTE BASE_DIR "${dir}")
      file(RELATIVE_PATH target_rel "${root}" "${target}")
      string(REGEX MATCH "^[^/]+" top "${target_rel}")
      if(top IN_LIST engine_folders)
        list(APPEND violations
             "${source_rel}: #include \"${included}\" reaches ${top}/ (only ${kRegistration} may)")
      endif()
    endforeach()
    file(STRINGS "${source}" lines REGEX "(cuda|omp)::")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "//.*$" "" code "${line}")  # comments may name them
      if(code MATCHES "(^|[^A-Za-z0-9_])((cuda|omp)::[A-Za-z0-9_:]*)")
        list(APPEND violations
             "${source_rel}: names ${CMAKE_MATCH_2} (only ${kRegistration} may, the rest go through engine/backend.h)")
      endif()
    endforeach()
  endforeach()
endforeach()

if(checked EQUAL 0 OR composers EQUAL 0)
  message(FATAL_ERROR "check_layering.cmake: no sources found under ${root}")
endif()
if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "Includes and names that break the layering (docs/ARCHITECTURE.md):\n  ${text}")
endif()
message(STATUS "layering: ${checked} files of cuda/, openmp/, engine/, common/ include only what their layer may; "
               "${composers} files of src/ and mpi/ reach the engines only through ${kRegistration}")
