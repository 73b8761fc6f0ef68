// Element-wise kernels of Z^n (lattice/zn_kernels.hpp).  Each public
// function runs its AVX2 form (when available) over groups of four elements
// and finishes with the portable loop, which is also the whole computation
// without AVX2 and the reference the AVX2 forms mirror operation by
// operation (common/simd_avx2.hpp explains how that gives the same bits).
#include "lattice/zn_kernels.hpp"

#include "common/cpu.hpp"
#include "common/simd_avx2.hpp"

namespace cepam::kernels {
namespace {

#if CEPAM_X86_DISPATCH

CEPAM_TARGET_AVX2 std::size_t zn_trial_avx2(const double* t, const double* xs, const double* beta,
                                            const std::uint64_t* w, std::size_t count, bool l2_norm,
                                            std::int64_t* q, double* dev) {
  const __m256d half = _mm256_set1_pd(0.5);
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
  std::size_t e = 0;
  for (; e + 4 <= count; e += 4) {
    const __m256d v = avx2::uniform_co_minus_half(w + e);
    const __m256d tv = _mm256_sub_pd(_mm256_loadu_pd(t + e), v);
    // round_half_up: f = floor(tv), plus one where tv - f >= 0.5.
    __m256d f = _mm256_round_pd(tv, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    f = _mm256_blendv_pd(f, _mm256_add_pd(f, one),
                         _mm256_cmp_pd(_mm256_sub_pd(tv, f), half, _CMP_GE_OQ));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + e), avx2::to_int64(f));
    if (dev != nullptr) {
      const __m256d y = _mm256_mul_pd(_mm256_loadu_pd(beta + e), _mm256_add_pd(f, v));
      const __m256d d = _mm256_sub_pd(y, _mm256_loadu_pd(xs + e));
      _mm256_storeu_pd(dev + e, l2_norm ? _mm256_mul_pd(d, d) : _mm256_and_pd(d, abs_mask));
    }
  }
  return e;
}

CEPAM_TARGET_AVX2 std::size_t zn_dither_avx2(const std::uint64_t* w, std::size_t count, double* v) {
  std::size_t e = 0;
  for (; e + 4 <= count; e += 4) _mm256_storeu_pd(v + e, avx2::uniform_co_minus_half(w + e));
  return e;
}

template <class T>
CEPAM_TARGET_AVX2 std::size_t zn_reconstruct_avx2(const std::int64_t* q, const double* v,
                                                  const double* beta, std::size_t count, T* y) {
  std::size_t e = 0;
  for (; e + 4 <= count; e += 4) {
    const __m256d p = avx2::to_double(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + e)));
    avx2::store_from_double(y + e, _mm256_mul_pd(_mm256_loadu_pd(beta + e),
                                           _mm256_add_pd(p, _mm256_loadu_pd(v + e))));
  }
  return e;
}

bool use_avx2() { return simd_level() >= SimdLevel::Avx2; }

#endif  // CEPAM_X86_DISPATCH

}  // namespace

void zn_trial(const double* t, const double* xs, const double* beta, const std::uint64_t* w,
              std::size_t count, bool l2_norm, std::int64_t* q, double* dev) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (use_avx2()) e = zn_trial_avx2(t, xs, beta, w, count, l2_norm, q, dev);
#endif
  for (; e < count; ++e) {
    // |f| < 2^51: f == double(q[e]) exactly
    q[e] = static_cast<std::int64_t>(
        zn_trial(t[e], xs[e], beta[e], w[e], l2_norm, dev != nullptr ? &dev[e] : nullptr));
  }
}

void zn_dither(const std::uint64_t* w, std::size_t count, double* v) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (use_avx2()) e = zn_dither_avx2(w, count, v);
#endif
  for (; e < count; ++e) v[e] = zn_dither(w[e]);
}

template <class T>
void zn_reconstruct(const std::int64_t* q, const double* v, const double* beta, std::size_t count,
                    T* y) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (use_avx2()) e = zn_reconstruct_avx2(q, v, beta, count, y);
#endif
  for (; e < count; ++e) y[e] = static_cast<T>(beta[e] * (static_cast<double>(q[e]) + v[e]));
}

template void zn_reconstruct<float>(const std::int64_t*, const double*, const double*,
                                    std::size_t, float*);
template void zn_reconstruct<double>(const std::int64_t*, const double*, const double*,
                                     std::size_t, double*);

}  // namespace cepam::kernels
