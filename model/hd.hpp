#pragma once
// KVT_HD marks code that is compiled once for the host and, under nvcc, for the device too.
// Functions marked with it take plain pointers and sizes: no allocation, no exceptions and no
// STL containers, so that a CUDA thread (or block) can run exactly the code the CPU runs.

#if defined(__CUDACC__)
#define KVT_HD __host__ __device__
#else
#define KVT_HD
#endif
