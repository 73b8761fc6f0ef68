// Element-wise kernels of Z^n (lattice/zn_kernels.hpp).  Each public
// function runs the lane code of lattice/zn_lanes.hpp where the processor
// has it (AVX-512: zn_kernels_avx512.cpp; AVX2 and NEON: below) over groups
// of 8, 4 or 2 elements, and finishes with the portable loop, which is also
// the whole computation without them and the reference the lane code
// mirrors operation by operation (common/simd_avx2.hpp explains how that
// gives the same bits).
#include "lattice/zn_kernels.hpp"

#include "common/cpu.hpp"

// Everything from here to CEPAM_BASE_LANES_END (zn_lanes.hpp included) is
// compiled for the second level (AVX2 on x86-64).
CEPAM_BASE_LANES_BEGIN
#if CEPAM_BASE_LANES
#include "common/lanes_base.hpp"
#include "lattice/zn_lanes.hpp"
#endif

namespace cepam::kernels {
namespace {

#if CEPAM_BASE_LANES
// The lane code over this build's second level.
std::size_t trial_lanes(const double* t, const double* xs, const double* beta,
                        const std::uint64_t* w, std::size_t count, bool l2_norm, std::int64_t* q,
                        double* dev, double* v) {
  return lanes::zn_trials<simd::BaseLanes>(t, xs, beta, w, count, l2_norm, q, dev, v);
}
std::size_t dither_lanes(const std::uint64_t* w, std::size_t count, double* v) {
  return lanes::zn_dithers<simd::BaseLanes>(w, count, v);
}
template <class T>
std::size_t reconstruct_lanes(const std::int64_t* q, const double* v, const double* beta,
                              std::size_t count, T* y) {
  return lanes::zn_reconstructs<simd::BaseLanes>(q, v, beta, count, y);
}
#endif

}  // namespace
}  // namespace cepam::kernels

CEPAM_BASE_LANES_END

namespace cepam::kernels {

void zn_trial(const double* t, const double* xs, const double* beta, const std::uint64_t* w,
              std::size_t count, bool l2_norm, std::int64_t* q, double* dev, double* v) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) e = avx512::zn_trial(t, xs, beta, w, count, l2_norm, q, dev, v);
#endif
#if CEPAM_BASE_LANES
  if (simd_base_lanes()) e = trial_lanes(t, xs, beta, w, count, l2_norm, q, dev, v);
#endif
  for (; e < count; ++e) {
    // |f| < 2^51: f == double(q[e]) exactly
    q[e] = static_cast<std::int64_t>(
        zn_trial(t[e], xs[e], beta[e], w[e], l2_norm, dev != nullptr ? &dev[e] : nullptr));
    if (v != nullptr) v[e] = zn_dither(w[e]);
  }
}

void zn_dither(const std::uint64_t* w, std::size_t count, double* v) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) e = avx512::zn_dither(w, count, v);
#endif
#if CEPAM_BASE_LANES
  if (simd_base_lanes()) e = dither_lanes(w, count, v);
#endif
  for (; e < count; ++e) v[e] = zn_dither(w[e]);
}

template <class T>
void zn_reconstruct(const std::int64_t* q, const double* v, const double* beta, std::size_t count,
                    T* y) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) e = avx512::zn_reconstruct(q, v, beta, count, y);
#endif
#if CEPAM_BASE_LANES
  if (simd_base_lanes()) e = reconstruct_lanes(q, v, beta, count, y);
#endif
  for (; e < count; ++e) y[e] = static_cast<T>(beta[e] * (static_cast<double>(q[e]) + v[e]));
}

template void zn_reconstruct<float>(const std::int64_t*, const double*, const double*,
                                    std::size_t, float*);
template void zn_reconstruct<double>(const std::int64_t*, const double*, const double*,
                                     std::size_t, double*);

}  // namespace cepam::kernels
