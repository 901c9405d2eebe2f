// Portability macros for code that both engines compile: the OpenMP engine
// with a host compiler, the CUDA engine with nvcc for host and device.
#pragma once

#if defined(__CUDACC__)
#define KNN_HD __host__ __device__ __forceinline__
#else
#define KNN_HD inline
#endif
