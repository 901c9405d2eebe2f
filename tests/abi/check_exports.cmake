# ABI checks run by ctest as `cmake -D... -P check_exports.cmake`.
#
#   MODE=exports  LIB=<libknn_gpgpu.so> NM=<nm> SYMBOLS=<abi_symbols.txt>
#       The dynamic symbols the library defines (nm -D --defined-only) are
#       exactly the names in abi_symbols.txt: nothing missing, nothing else
#       exported (linker-defined markers such as _init/_fini/_edata/_end/
#       __bss_start and version-node names are ignored).
#   MODE=header   HEADER=<knn_gpgpu.h> SYMBOLS=<abi_symbols.txt>
#       Every function the header and its parts (KNN_HEADER_PARTS, next to
#       it) declare with KNN_API ... KNN_CALL is in
#       abi_symbols.txt and every name there is declared, so the list that the
#       dlopen test and the export check use cannot fall behind the header.

cmake_minimum_required(VERSION 3.16)  # IN_LIST

function(read_symbol_list path out)
  file(STRINGS "${path}" lines)
  set(names "")
  foreach(line IN LISTS lines)
    string(STRIP "${line}" line)
    if(line STREQUAL "" OR line MATCHES "^#")
      continue()
    endif()
    list(APPEND names "${line}")
  endforeach()
  list(REMOVE_DUPLICATES names)
  list(SORT names)
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

function(compare_sets expected actual what_actual)
  set(missing ${expected})
  if(actual)
    list(REMOVE_ITEM missing ${actual})
  endif()
  set(extra ${actual})
  if(expected)
    list(REMOVE_ITEM extra ${expected})
  endif()
  if(missing OR extra)
    string(REPLACE ";" " " missing_text "${missing}")
    string(REPLACE ";" " " extra_text "${extra}")
    message(FATAL_ERROR
      "${what_actual} differs from abi_symbols.txt\n"
      "  in abi_symbols.txt only: ${missing_text}\n"
      "  in ${what_actual} only: ${extra_text}")
  endif()
endfunction()

if(NOT SYMBOLS OR NOT EXISTS "${SYMBOLS}")
  message(FATAL_ERROR "SYMBOLS (abi_symbols.txt) not given or missing: '${SYMBOLS}'")
endif()
read_symbol_list("${SYMBOLS}" expected)
list(LENGTH expected expected_count)
if(expected_count EQUAL 0)
  message(FATAL_ERROR "abi_symbols.txt is empty")
endif()

if(MODE STREQUAL "exports")
  if(NOT NM)
    message(FATAL_ERROR "no nm program given")
  endif()
  execute_process(COMMAND "${NM}" -D --defined-only "${LIB}"
                  OUTPUT_VARIABLE nm_out ERROR_VARIABLE nm_err RESULT_VARIABLE nm_rc)
  if(NOT nm_rc EQUAL 0)
    message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed (${nm_rc}): ${nm_err}")
  endif()
  string(REPLACE "\n" ";" nm_lines "${nm_out}")
  set(ignored _init _fini _edata _end __bss_start __bss_start__ __bss_end__ __end__ _bss_end__)
  set(exported "")
  foreach(line IN LISTS nm_lines)
    # "<address> <type> <name>[@@version]"
    if(NOT line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) +([^ ]+)$")
      continue()
    endif()
    set(type "${CMAKE_MATCH_1}")
    string(REGEX REPLACE "@.*$" "" name "${CMAKE_MATCH_2}")
    if(type STREQUAL "A")  # version-node names of a version script
      continue()
    endif()
    if(name IN_LIST ignored)
      continue()
    endif()
    list(APPEND exported "${name}")
  endforeach()
  list(REMOVE_DUPLICATES exported)
  list(SORT exported)
  compare_sets("${expected}" "${exported}" "the exports of ${LIB}")
  list(LENGTH exported count)
  message(STATUS "${count} exported symbols, exactly abi_symbols.txt")
elseif(MODE STREQUAL "header")
  # The parts knn_gpgpu.h includes.
  set(KNN_HEADER_PARTS knn_gpgpu_classic.h knn_gpgpu_index.h knn_gpgpu_quadtree.h
      knn_gpgpu_mesh.h knn_gpgpu_stats.h)
  get_filename_component(header_dir "${HEADER}" DIRECTORY)
  file(READ "${HEADER}" text)
  foreach(part IN LISTS KNN_HEADER_PARTS)
    if(NOT EXISTS "${header_dir}/${part}")
      message(FATAL_ERROR "${header_dir}/${part} is missing")
    endif()
    file(READ "${header_dir}/${part}" part_text)
    string(APPEND text "${part_text}")
  endforeach()
  # Drop comments so that prose cannot look like a declaration.
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  string(REGEX MATCHALL "KNN_API[^;{}()#]*KNN_CALL[ \t\r\n]+[A-Za-z_][A-Za-z0-9_]*[ \t\r\n]*\\("
         declarations "${text}")
  set(declared "")
  foreach(decl IN LISTS declarations)
    string(REGEX MATCH "KNN_CALL[ \t\r\n]+([A-Za-z_][A-Za-z0-9_]*)" _ "${decl}")
    list(APPEND declared "${CMAKE_MATCH_1}")
  endforeach()
  list(REMOVE_DUPLICATES declared)
  list(SORT declared)
  compare_sets("${expected}" "${declared}" "the functions declared in ${HEADER}")
  list(LENGTH declared count)
  message(STATUS "${count} functions declared, exactly abi_symbols.txt")
else()
  message(FATAL_ERROR "MODE must be 'exports' or 'header', not '${MODE}'")
endif()
