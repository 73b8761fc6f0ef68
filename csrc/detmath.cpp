// Batch forms of the deterministic logarithm and cosine (detmath.hpp): the
// AVX2 forms (simd_avx2.hpp) four elements at a time, the remainder of a
// batch with the scalar functions.
#include "detmath.hpp"

#include <array>

#include "cpu.hpp"
#include "simd_avx2.hpp"

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

namespace {
// 1 / (2k + 1), rounded by the compiler (IEEE division, the same bits everywhere).
constexpr std::array<double, 40> inverse_odds() {
  std::array<double, 40> t{};
  for (int k = 0; k < 40; ++k) t[static_cast<std::size_t>(k)] = 1.0 / static_cast<double>(2 * k + 1);
  return t;
}
constexpr std::array<double, 40> kInverseOdd = inverse_odds();
}  // namespace

double normal_cdf(double z) {
  if (!(z > -38.0)) return 0.0;  // (NaN too)
  if (!(z < 38.0)) return 1.0;
  const double a = z < 0.0 ? -z : z;
  const double density = 0.398942280401432702863 * exp_nonpositive(-0.5 * (z * z));
  if (a < 3.0) {
    // Phi(z) = 1/2 + phi(z) sum_k z^(2k+1) / (1 3 ... (2k+1)), 40 terms.
    const double z2 = z * z;
    double term = z, sum = z;
    for (std::size_t k = 1; k < kInverseOdd.size(); ++k) {
      term *= z2 * kInverseOdd[k];
      sum += term;
    }
    return 0.5 + density * sum;
  }
  // Q(a) = phi(a) / (a + 1 / (a + 2 / (a + 3 / ...))), from depth 40 up.
  double cf = a;
  for (int k = 40; k >= 1; --k) cf = a + static_cast<double>(k) / cf;
  const double tail = density / cf;
  return z < 0.0 ? tail : 1.0 - tail;
}

}  // namespace cepam::detmath
