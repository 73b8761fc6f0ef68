// CEPAM_HD marks the per-sub-vector arithmetic written once for the CPU and
// a GPU (lattice closest points and dithers, uniform variates): plain
// inline scalar functions that nvcc compiles for both host and device, and
// that the CPU's SIMD kernels mirror operation by operation.
#pragma once

#if defined(__CUDACC__)
#define CEPAM_HD __host__ __device__
#else
#define CEPAM_HD
#endif

