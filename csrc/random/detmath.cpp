// Batch forms of the deterministic logarithm and cosine (random/detmath.hpp): the
// AVX2 forms (random/detmath_avx2.hpp) four elements at a time, the remainder of a
// batch with the scalar functions.
#include "random/detmath.hpp"

#include "common/cpu.hpp"
#include "random/detmath_avx2.hpp"

namespace cepam::detmath {
namespace {

#if CEPAM_X86_DISPATCH

CEPAM_TARGET_AVX2 std::size_t log_batch_avx2(const double* x, double* out, std::size_t count) {
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4) _mm256_storeu_pd(out + i, avx2::log(_mm256_loadu_pd(x + i)));
  return i;
}

CEPAM_TARGET_AVX2 std::size_t cos2pi_squared_batch_avx2(const double* t, double* out,
                                                        std::size_t count) {
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4)
    _mm256_storeu_pd(out + i, avx2::cos2pi_squared(_mm256_loadu_pd(t + i)));
  return i;
}

#endif  // CEPAM_X86_DISPATCH

}  // namespace

void log_batch(const double* x, double* out, std::size_t count) {
  std::size_t i = 0;
#if CEPAM_X86_DISPATCH
  if (simd_level() >= SimdLevel::Avx2) i = log_batch_avx2(x, out, count);
#endif
  for (; i < count; ++i) out[i] = log(x[i]);
}

void cos2pi_squared_batch(const double* t, double* out, std::size_t count) {
  std::size_t i = 0;
#if CEPAM_X86_DISPATCH
  if (simd_level() >= SimdLevel::Avx2) i = cos2pi_squared_batch_avx2(t, out, count);
#endif
  for (; i < count; ++i) out[i] = cos2pi_squared(t[i]);
}

}  // namespace cepam::detmath
