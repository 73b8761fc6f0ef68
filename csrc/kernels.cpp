#include "kernels.hpp"

#include <cmath>

#include "chacha20.hpp"
#include "cpu.hpp"
#include "lattice.hpp"

#if CEPAM_X86_DISPATCH
#include <immintrin.h>
#endif

namespace cepam::kernels {
namespace {

#if CEPAM_X86_DISPATCH

// AVX2 helpers.  AVX2 has no conversions between 64-bit integers and
// doubles, so they are done exactly with the usual bit tricks:
//
// to_double(q), |q| <= 2^53: q = hi 2^32 + lo with hi = q >> 32 (signed)
// and lo = q mod 2^32.  Writing lo into the low mantissa bits of 2^52 gives
// the double 2^52 + lo, and hi + 2^31 (hi with its sign bit flipped) into
// those of 2^84 gives 2^84 + (hi + 2^31) 2^32; subtracting 2^52 and
// 2^84 + 2^63 is exact (same binade), and so is adding the two halves,
// because their sum q is representable.  Same value as static_cast<double>.
CEPAM_TARGET_AVX2 inline __m256d to_double(__m256i q) {
  const __m256i hi = _mm256_xor_si256(_mm256_srli_epi64(q, 32), _mm256_set1_epi64x(0x80000000));
  const __m256i lo = _mm256_and_si256(q, _mm256_set1_epi64x(0xffffffff));
  const __m256d hi_d = _mm256_sub_pd(
      _mm256_castsi256_pd(_mm256_or_si256(hi, _mm256_set1_epi64x(0x4530000000000000))),
      _mm256_set1_pd(0x1.000008p84));  // 2^84 + 2^63
  const __m256d lo_d = _mm256_sub_pd(
      _mm256_castsi256_pd(_mm256_or_si256(lo, _mm256_set1_epi64x(0x4330000000000000))),
      _mm256_set1_pd(0x1.0p52));
  return _mm256_add_pd(hi_d, lo_d);
}

// to_int64(f) for integral |f| < 2^51: f + 1.5 2^52 is exact and lies in
// [2^52, 2^53), where the integers are consecutive bit patterns, so the
// difference of the bit patterns is f.  Same value as static_cast.
CEPAM_TARGET_AVX2 inline __m256i to_int64(__m256d f) {
  const __m256d magic = _mm256_set1_pd(0x1.8p52);
  return _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(f, magic)),
                          _mm256_castpd_si256(magic));
}

// v = uniform_co(w) - 0.5 = double(w >> 11) 2^-53 - 0.5.
CEPAM_TARGET_AVX2 inline __m256d dither_avx2(const std::uint64_t* w) {
  const __m256i bits = _mm256_srli_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)), 11);
  return _mm256_sub_pd(_mm256_mul_pd(to_double(bits), _mm256_set1_pd(0x1.0p-53)),
                       _mm256_set1_pd(0.5));
}

CEPAM_TARGET_AVX2 inline __m256d load_as_double(const float* x) {
  return _mm256_cvtps_pd(_mm_loadu_ps(x));
}
CEPAM_TARGET_AVX2 inline __m256d load_as_double(const double* x) { return _mm256_loadu_pd(x); }
CEPAM_TARGET_AVX2 inline void store_from_double(float* y, __m256d v) {
  _mm_storeu_ps(y, _mm256_cvtpd_ps(v));  // rounds to nearest, as static_cast<float>
}
CEPAM_TARGET_AVX2 inline void store_from_double(double* y, __m256d v) { _mm256_storeu_pd(y, v); }

// out[i] = double(w[i] >> 11) for i < count, four at a time.
CEPAM_TARGET_AVX2 std::size_t top53_to_double_avx2(const std::uint64_t* w, std::size_t count,
                                                   double* out) {
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    const __m256i bits = _mm256_srli_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i)), 11);
    _mm256_storeu_pd(out + i, to_double(bits));
  }
  return i;
}

template <class T>
CEPAM_TARGET_AVX2 std::size_t scale_inputs_avx2(const T* x, double factor, const double* inv_beta,
                                                double limit, std::size_t count, double* xs,
                                                double* t) {
  const __m256d fac = _mm256_set1_pd(factor);
  const __m256d lim = _mm256_set1_pd(limit);
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
  std::size_t e = 0;
  for (; e + 4 <= count; e += 4) {
    const __m256d s = _mm256_mul_pd(load_as_double(x + e), fac);
    const __m256d q = _mm256_mul_pd(s, _mm256_loadu_pd(inv_beta + e));
    _mm256_storeu_pd(xs + e, s);
    _mm256_storeu_pd(t + e, q);
    // Stop at the first group with an element out of range (or NaN); the
    // scalar loop below then finds the element.
    if (_mm256_movemask_pd(_mm256_cmp_pd(_mm256_and_pd(q, abs_mask), lim, _CMP_LT_OQ)) != 0xf)
      break;
  }
  return e;
}

CEPAM_TARGET_AVX2 std::size_t zn_trial_avx2(const double* t, const double* xs, const double* beta,
                                            const std::uint64_t* w, std::size_t count, bool l2_norm,
                                            std::int64_t* q, double* dev) {
  const __m256d half = _mm256_set1_pd(0.5);
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
  std::size_t e = 0;
  for (; e + 4 <= count; e += 4) {
    const __m256d v = dither_avx2(w + e);
    const __m256d tv = _mm256_sub_pd(_mm256_loadu_pd(t + e), v);
    // round_half_up: f = floor(tv), plus one where tv - f >= 0.5.
    __m256d f = _mm256_round_pd(tv, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    f = _mm256_blendv_pd(f, _mm256_add_pd(f, one), _mm256_cmp_pd(_mm256_sub_pd(tv, f), half, _CMP_GE_OQ));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + e), to_int64(f));
    if (dev != nullptr) {
      const __m256d y = _mm256_mul_pd(_mm256_loadu_pd(beta + e), _mm256_add_pd(f, v));
      const __m256d d = _mm256_sub_pd(y, _mm256_loadu_pd(xs + e));
      _mm256_storeu_pd(dev + e, l2_norm ? _mm256_mul_pd(d, d) : _mm256_and_pd(d, abs_mask));
    }
  }
  return e;
}

template <class T>
CEPAM_TARGET_AVX2 std::size_t zn_reconstruct_avx2(const std::int64_t* q, const std::uint64_t* w,
                                                  const double* beta, std::size_t count, T* y) {
  std::size_t e = 0;
  for (; e + 4 <= count; e += 4) {
    const __m256d p = to_double(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + e)));
    const __m256d v = dither_avx2(w + e);
    store_from_double(y + e, _mm256_mul_pd(_mm256_loadu_pd(beta + e), _mm256_add_pd(p, v)));
  }
  return e;
}

#endif  // CEPAM_X86_DISPATCH

bool use_avx2() {
#if CEPAM_X86_DISPATCH
  return simd_level() >= SimdLevel::Avx2;
#else
  return false;
#endif
}

}  // namespace

void top53_to_double_transposed(const std::uint64_t* w, std::size_t stride, std::size_t count,
                                double* out) {
#if CEPAM_X86_DISPATCH
  if (use_avx2()) {
    // Row by row: copy word i of up to 256 sub-vectors into a contiguous
    // buffer, then convert it four at a time.  (Gathering the strided words
    // straight into registers is slow on many CPUs.)
    std::uint64_t row[256];
    for (std::size_t i = 0; i < stride; ++i) {
      for (std::size_t c0 = 0; c0 < count; c0 += 256) {
        const std::size_t cnt = count - c0 < 256 ? count - c0 : 256;
        for (std::size_t c = 0; c < cnt; ++c) row[c] = w[(c0 + c) * stride + i];
        double* o = out + i * count + c0;
        std::size_t c = top53_to_double_avx2(row, cnt, o);
        for (; c < cnt; ++c) o[c] = static_cast<double>(row[c] >> 11);
      }
    }
    return;
  }
#endif
  for (std::size_t c = 0; c < count; ++c)
    for (std::size_t i = 0; i < stride; ++i)
      out[i * count + c] = static_cast<double>(w[c * stride + i] >> 11);
}

template <class T>
std::size_t scale_inputs(const T* x, double factor, const double* inv_beta, double limit,
                         std::size_t count, double* xs, double* t) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (use_avx2()) e = scale_inputs_avx2(x, factor, inv_beta, limit, count, xs, t);
#endif
  for (; e < count; ++e) {
    xs[e] = static_cast<double>(x[e]) * factor;
    t[e] = xs[e] * inv_beta[e];
    if (!(std::fabs(t[e]) < limit)) return e;
  }
  return count;
}

void zn_trial(const double* t, const double* xs, const double* beta, const std::uint64_t* w,
              std::size_t count, bool l2_norm, std::int64_t* q, double* dev) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (use_avx2()) e = zn_trial_avx2(t, xs, beta, w, count, l2_norm, q, dev);
#endif
  for (; e < count; ++e) {
    const double v = uniform_co(w[e]) - 0.5;
    const double f = round_half_up(t[e] - v);
    q[e] = static_cast<std::int64_t>(f);
    if (dev != nullptr) {
      const double d = beta[e] * (f + v) - xs[e];
      dev[e] = l2_norm ? d * d : std::fabs(d);
    }
  }
}

template <class T>
void zn_reconstruct(const std::int64_t* q, const std::uint64_t* w, const double* beta,
                    std::size_t count, T* y) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (use_avx2()) e = zn_reconstruct_avx2(q, w, beta, count, y);
#endif
  for (; e < count; ++e)
    y[e] = static_cast<T>(beta[e] * (static_cast<double>(q[e]) + (uniform_co(w[e]) - 0.5)));
}

template std::size_t scale_inputs<float>(const float*, double, const double*, double, std::size_t,
                                         double*, double*);
template std::size_t scale_inputs<double>(const double*, double, const double*, double,
                                          std::size_t, double*, double*);
template void zn_reconstruct<float>(const std::int64_t*, const std::uint64_t*, const double*,
                                    std::size_t, float*);
template void zn_reconstruct<double>(const std::int64_t*, const std::uint64_t*, const double*,
                                     std::size_t, double*);

}  // namespace cepam::kernels
