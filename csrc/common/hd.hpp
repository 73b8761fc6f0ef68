// Functions written once for the host and for CUDA devices.
//
// CEPAM_HD marks a function that compiles both as host C++ and, under nvcc,
// as device code: the per-sub-vector arithmetic of LRSUQ (the ChaCha20
// block, the deterministic logarithm and cosine, the latent radii, the
// lattices' dithers and closest points, the acceptance test and the
// reconstruction).  The CPU path calls the same functions, so the CPU tests
// check the arithmetic the GPU runs; both are compiled without fused
// multiply-add contraction (-ffp-contract=off, nvcc --fmad=false) and without
// fast-math, so they give the same bits.
#pragma once

#if defined(__CUDACC__)
#define CEPAM_HD __host__ __device__
#else
#define CEPAM_HD
#endif
