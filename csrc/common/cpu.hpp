// Run-time selection of the SIMD code paths.
//
// Every SIMD kernel in the core has a portable C++ twin and computes the
// same bits: the ChaCha20 kernels are integer-only, and the floating-point
// kernels apply the same IEEE 754 operations (+, -, *, /, sqrt, no fused
// multiply-add) to each element, in the same order, as the portable code.
// So the choice below changes speed, never results.
//
// On x86-64 with GCC or Clang, the AVX2 kernels are compiled with
// __attribute__((target("avx2"))) (which does not enable FMA, so nothing can
// be contracted) and chosen when the CPU and OS support AVX2.  There is also
// an AVX-512F ChaCha20 kernel (integer-only), and AVX-512DQ forms of
// portable loops and of the lane kernels (common/lanes_avx512.hpp) of the
// lattices and the conditional coder's encoder (simd_avx512dq).  Setting the environment
// variable CEPAM_SIMD to "portable" or "avx2" before the first call caps the
// level (used by the tests to compare the paths).  On aarch64 with GCC or
// Clang, the NEON level (common/lanes_neon.hpp: the conditional coder's
// encoder and the Voronoi lattices' trials and dithers) is always there;
// CEPAM_SIMD=portable caps it too.  The portable kernels themselves are
// written over 128-bit vectors where GCC or Clang compile them
// (CEPAM_VECTOR128).  Other compilers and architectures, and builds with
// CEPAM_NO_SIMD defined, always use the portable scalar code.
#pragma once

// (clang-cl, which defines _MSC_VER, is left out: its runtime may lack the
// CPU model behind __builtin_cpu_supports.)
#if !defined(CEPAM_NO_SIMD) && (defined(__GNUC__) || defined(__clang__)) && \
    defined(__x86_64__) && !defined(_MSC_VER)
#define CEPAM_X86_DISPATCH 1
#define CEPAM_TARGET_AVX2 __attribute__((target("avx2")))
#define CEPAM_TARGET_AVX512 __attribute__((target("avx512f")))
#define CEPAM_TARGET_AVX512DQ __attribute__((target("avx512f,avx512dq,avx512vl")))
#else
#define CEPAM_X86_DISPATCH 0
#endif

// Asks GCC and Clang to unroll the next loop n times (fully, for loops of at
// most n iterations), for loops that must be straight-line code to be
// vectorised or kept in registers.  (nvcc, which knows no GCC pragma, gets
// none: these loops are host code.)
#if defined(__GNUC__) && !defined(__CUDACC__)
#define CEPAM_PRAGMA(...) _Pragma(#__VA_ARGS__)
#define CEPAM_UNROLL(n) CEPAM_PRAGMA(GCC unroll n)
#else
#define CEPAM_UNROLL(n)
#endif

#if CEPAM_X86_DISPATCH && !defined(__CUDACC__)
// A region of a file whose every function is compiled for an instruction set
// (the lane code included there): CEPAM_TARGET_BEGIN("avx2") ...
// CEPAM_TARGET_END.
#if defined(__clang__)
#define CEPAM_TARGET_BEGIN(isa) \
  CEPAM_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define CEPAM_TARGET_END CEPAM_PRAGMA(clang attribute pop)
#else
#define CEPAM_TARGET_BEGIN(isa) CEPAM_PRAGMA(GCC push_options) CEPAM_PRAGMA(GCC target(isa))
#define CEPAM_TARGET_END CEPAM_PRAGMA(GCC pop_options)
#endif
// GCC 12's AVX-512 intrinsics trip its own -Wuninitialized and
// -Wmaybe-uninitialized (GCC bug 105593) where they are inlined: off between
// CEPAM_AVX512_WARNINGS_OFF and CEPAM_AVX512_WARNINGS_ON.
#if defined(__clang__)
#define CEPAM_AVX512_WARNINGS_OFF \
  CEPAM_PRAGMA(GCC diagnostic push) CEPAM_PRAGMA(GCC diagnostic ignored "-Wuninitialized")
#else
#define CEPAM_AVX512_WARNINGS_OFF                                                   \
  CEPAM_PRAGMA(GCC diagnostic push) CEPAM_PRAGMA(GCC diagnostic ignored "-Wuninitialized") \
  CEPAM_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized")
#endif
#define CEPAM_AVX512_WARNINGS_ON CEPAM_PRAGMA(GCC diagnostic pop)
#endif

// The portable kernels' 128-bit vectors: GCC and Clang's vector extensions
// (__attribute__((vector_size(16)))), which compile to SSE2 on x86-64 and
// to NEON on aarch64 (and to scalar code elsewhere), element by element the
// operations written, so the same bits as the scalar forms.  Not with MSVC,
// nvcc (host code is compiled by its host compiler, but the kernels that use
// these are not device code) or CEPAM_NO_SIMD, whose portable kernels are
// plain scalar C++ (the cross-check's reference build).
#if !defined(CEPAM_NO_SIMD) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(_MSC_VER) && !defined(__CUDACC__)
#define CEPAM_VECTOR128 1
#else
#define CEPAM_VECTOR128 0
#endif

// The NEON lane kernels (common/lanes_neon.hpp) of aarch64 builds with GCC
// or Clang: NEON is part of the architecture, so they need no target pragma
// and no CPU test; CEPAM_SIMD=portable turns them off.
#if CEPAM_VECTOR128 && defined(__aarch64__) && defined(__ARM_NEON)
#define CEPAM_ARM_NEON 1
#else
#define CEPAM_ARM_NEON 0
#endif

// Builds with a kernel's second lane level (simd::BaseLanes,
// common/lanes_base.hpp: AVX2 on x86-64, NEON on aarch64), below the
// AVX-512 forms; simd_base_lanes() says whether it runs.
#define CEPAM_BASE_LANES (CEPAM_X86_DISPATCH || CEPAM_ARM_NEON)
// The region of a kernel file that holds its second level (the lane code
// included there): CEPAM_TARGET_BEGIN("avx2") ... CEPAM_TARGET_END on
// x86-64, nothing on aarch64 (NEON is the baseline).
#if CEPAM_X86_DISPATCH
#define CEPAM_BASE_LANES_BEGIN CEPAM_TARGET_BEGIN("avx2")
#define CEPAM_BASE_LANES_END CEPAM_TARGET_END
#else
#define CEPAM_BASE_LANES_BEGIN
#define CEPAM_BASE_LANES_END
#endif

namespace cepam {

// Ordered: each level includes the ones below it on its architecture (Neon
// exists on aarch64 only, Avx2 and Avx512 on x86-64 only).
enum class SimdLevel : int { Portable = 0, Neon = 1, Avx2 = 2, Avx512 = 3 };

// The SIMD level in use, decided once per process.
SimdLevel simd_level();

// Whether the AVX-512 level is in use and the CPU also has the DQ and VL
// extensions (for kernels the compiler vectorises for AVX-512: portable
// loops compiled with CEPAM_TARGET_AVX512DQ, whose vectorisation keeps
// every element's operations, as nothing else is allowed without
// -ffast-math; 64-bit integer conversions need DQ).
bool simd_avx512dq();

// Whether a kernel's second lane level (CEPAM_BASE_LANES) runs: AVX2 where
// the AVX-512 forms (simd_avx512dq) do not, or NEON.
bool simd_base_lanes();

}  // namespace cepam
