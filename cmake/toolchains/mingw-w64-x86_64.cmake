# Cross-compiling knn_gpgpu for 64-bit Windows with MinGW-w64 (GCC).
#
#   cmake -S . -B build-win \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/mingw-w64-x86_64.cmake \
#         -DKNN_WITH_CUDA=OFF
#   (or: cmake --preset mingw-cross)
#
# It needs the *posix* thread model of the compilers (Debian/Ubuntu package
# g++-mingw-w64-x86-64-posix: x86_64-w64-mingw32-g++-posix): the win32 model of
# GCC 12 has no std::mutex/std::thread, and libgomp (OpenMP) comes with the
# posix one. The result is knn_gpgpu.dll, its import library knn_gpgpu.dll.a and
# the CPU (OpenMP) engine; CUDA needs MSVC (see docs/windows.md).
#
# The top-level CMakeLists.txt links the DLL with -static on MinGW (libgcc,
# libstdc++ and winpthread go into it, native MSYS2 builds included); this file
# adds libgomp (see OpenMP_gomp_LIBRARY below), so the cross-built DLL needs
# only KERNEL32.dll and msvcrt.dll. scripts/checks/windows.sh checks that.
#
# Overrides: -DKNN_MINGW_TRIPLE=... (default x86_64-w64-mingw32),
#            -DKNN_MINGW_ROOT=...   (default /usr/<triple>, the target sysroot).
# When Wine is installed, it becomes the CMAKE_CROSSCOMPILING_EMULATOR, so
# `ctest` in the cross build runs the Windows tests under Wine.

set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)

if(NOT KNN_MINGW_TRIPLE)
  set(KNN_MINGW_TRIPLE x86_64-w64-mingw32)
endif()
if(NOT KNN_MINGW_ROOT)
  set(KNN_MINGW_ROOT /usr/${KNN_MINGW_TRIPLE})
endif()
# try_compile projects re-read this file: hand them the same choices.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KNN_MINGW_TRIPLE KNN_MINGW_ROOT)

# Prefer the explicitly posix-threaded drivers; the unsuffixed names are a
# fallback for distributions whose only compilers are posix-threaded (MSYS2,
# Fedora). A win32-threaded GCC fails later, at std::mutex.
find_program(KNN_MINGW_CC NAMES ${KNN_MINGW_TRIPLE}-gcc-posix ${KNN_MINGW_TRIPLE}-gcc)
find_program(KNN_MINGW_CXX NAMES ${KNN_MINGW_TRIPLE}-g++-posix ${KNN_MINGW_TRIPLE}-g++)
find_program(KNN_MINGW_RC NAMES ${KNN_MINGW_TRIPLE}-windres)
if(NOT KNN_MINGW_CC OR NOT KNN_MINGW_CXX)
  message(FATAL_ERROR
    "MinGW-w64 compilers for ${KNN_MINGW_TRIPLE} not found. On Debian/Ubuntu: "
    "apt-get install g++-mingw-w64-x86-64-posix")
endif()
set(CMAKE_C_COMPILER ${KNN_MINGW_CC})
set(CMAKE_CXX_COMPILER ${KNN_MINGW_CXX})
if(KNN_MINGW_RC)
  set(CMAKE_RC_COMPILER ${KNN_MINGW_RC})
endif()

# Headers, libraries and CMake packages come from the target sysroot only;
# programs (code generators, Python...) from the build machine.
set(CMAKE_FIND_ROOT_PATH ${KNN_MINGW_ROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# FindOpenMP would pick libgomp's import library (libgomp.dll.a) by its full
# path, which even -static cannot turn into a static link. Point it at the
# archive instead, so that libgomp is linked into knn_gpgpu.dll too.
if(NOT OpenMP_gomp_LIBRARY)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libgomp.a
                  OUTPUT_VARIABLE KNN_MINGW_LIBGOMP OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  if(IS_ABSOLUTE "${KNN_MINGW_LIBGOMP}" AND EXISTS "${KNN_MINGW_LIBGOMP}")
    set(OpenMP_gomp_LIBRARY "${KNN_MINGW_LIBGOMP}" CACHE FILEPATH
        "libgomp archive, linked statically into the DLL")
  endif()
endif()

# A cross build has no nvcc for Windows: the CPU engine only.
set(KNN_WITH_CUDA OFF CACHE STRING "Build the CUDA engine: AUTO, ON, OFF")

# Executables (tests, tools, examples) link the GCC runtime statically, so
# that they run under Wine or on Windows without MinGW DLLs on the PATH. (The
# DLL itself is linked statically by the top-level CMakeLists.txt.)
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# Debian installs wine64 as /usr/lib/wine/wine64 (the `wine` package adds
# /usr/bin/wine); use whichever is there to run test executables: ctest and
# gtest_discover_tests then run the .exe files under Wine, quietly.
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  find_program(KNN_WINE NAMES wine64 wine PATHS /usr/lib/wine /usr/lib64/wine)
  if(KNN_WINE)
    set(CMAKE_CROSSCOMPILING_EMULATOR
        /usr/bin/env WINEDEBUG=-all "WINEDLLOVERRIDES=mscoree,mshtml=" ${KNN_WINE})
  endif()
endif()
