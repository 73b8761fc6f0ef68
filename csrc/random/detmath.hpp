// Deterministic transcendental functions for the latent samplers.
//
// The samplers must give bit-identical results on every platform, compiler
// and (later) on CUDA, so they cannot use the platform's libm, whose last-bit
// behaviour differs between implementations.  These are the fdlibm
// algorithms (Sun Microsystems, 1993: "Developed at SunPro, a Sun
// Microsystems, Inc. business. Permission to use, copy, modify, and
// distribute this software is freely granted, provided that this notice is
// preserved.") restricted to the arguments the samplers use, written with
// +, -, *, / and sqrt only (all correctly rounded in IEEE 754), and compiled
// with -ffp-contract=off so that no fused multiply-add changes a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/host_device.hpp"

namespace cepam::detmath {

CEPAM_HD inline std::uint64_t bits_of(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

CEPAM_HD inline double double_of(std::uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// fdlibm's coefficients, shared by the scalar functions below and the
// SIMD versions in random/detmath_avx2.hpp (which must give the same bits).
namespace fdlibm {
inline constexpr double ln2_hi = 6.93147180369123816490e-01;  // 0x3fe62e42 fee00000
inline constexpr double ln2_lo = 1.90821492927058770002e-10;  // 0x3dea39ef 35793c76
inline constexpr double Lg1 = 6.666666666666735130e-01;
inline constexpr double Lg2 = 3.999999999940941908e-01;
inline constexpr double Lg3 = 2.857142874366239149e-01;
inline constexpr double Lg4 = 2.222219843214978396e-01;
inline constexpr double Lg5 = 1.818357216161805012e-01;
inline constexpr double Lg6 = 1.531383769920937332e-01;
inline constexpr double Lg7 = 1.479819860511658591e-01;
inline constexpr double C1 = 4.16666666666666019037e-02;
inline constexpr double C2 = -1.38888888888741095749e-03;
inline constexpr double C3 = 2.48015872894767294178e-05;
inline constexpr double C4 = -2.75573143513906633035e-07;
inline constexpr double C5 = 2.08757232129817482790e-09;
inline constexpr double C6 = -1.13596475577881948265e-11;
inline constexpr double S1 = -1.66666666666666324348e-01;
inline constexpr double S2 = 8.33333333332248946124e-03;
inline constexpr double S3 = -1.98412698298579493134e-04;
inline constexpr double S4 = 2.75573137070700676789e-06;
inline constexpr double S5 = -2.50507602534068634195e-08;
inline constexpr double S6 = 1.58969099521155010221e-10;
// e_exp.c
inline constexpr double inv_ln2 = 1.44269504088896338700e+00;
inline constexpr double P1 = 1.66666666666666019037e-01;
inline constexpr double P2 = -2.77777777770155933842e-03;
inline constexpr double P3 = 6.61375632143793436117e-05;
inline constexpr double P4 = -1.65339022054652515390e-06;
inline constexpr double P5 = 4.13813679705723846039e-08;
}  // namespace fdlibm

// Natural logarithm of a positive, normal, finite double (fdlibm e_log.c,
// main path; error below 1 ulp).  Arguments outside that range are a
// programming error of the caller; the samplers only pass values in
// [2^-600, 1].
CEPAM_HD inline double log(double x) {
  using namespace fdlibm;

  const std::uint64_t u = bits_of(x);
  std::int32_t hx = static_cast<std::int32_t>(u >> 32);
  const std::uint32_t lx = static_cast<std::uint32_t>(u);
  std::int32_t k = (hx >> 20) - 1023;
  hx &= 0x000fffff;
  // Normalise the mantissa into [sqrt(2)/2, sqrt(2)).
  const std::int32_t i = (hx + 0x95f64) & 0x100000;
  const double m = double_of((static_cast<std::uint64_t>(
                                  static_cast<std::uint32_t>(hx | (i ^ 0x3ff00000)))
                              << 32) |
                             lx);
  k += (i >> 20);
  const double f = m - 1.0;
  const double dk = static_cast<double>(k);
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double w = z * z;
  const double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  const double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  const double R = t2 + t1;
  const double hfsq = 0.5 * f * f;
  return dk * ln2_hi - ((hfsq - (s * (hfsq + R) + dk * ln2_lo)) - f);
}

// fdlibm __kernel_cos(x, 0) for |x| <= pi/4.
CEPAM_HD inline double kernel_cos(double x) {
  using namespace fdlibm;
  const double z = x * x;
  const double r = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
  const double hz = 0.5 * z;
  const double w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + z * r);
}

// fdlibm __kernel_sin(x, 0, 0) for |x| <= pi/4.
CEPAM_HD inline double kernel_sin(double x) {
  using namespace fdlibm;
  const double z = x * x;
  const double v = z * x;
  const double r = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)));
  return x + v * (S1 + z * r);
}

// cos(2*pi*t)^2 for t in [0, 1).  The argument is reduced in units of full
// turns, where every step below is exact (Sterbenz), so only the final
// multiplication by 2*pi rounds before the kernel.
CEPAM_HD inline double cos2pi_squared(double t) {
  constexpr double two_pi = 6.28318530717958623200e+00;
  if (t >= 0.5) t -= 0.5;     // cos^2 has period 1/2
  if (t > 0.25) t = 0.5 - t;  // and is symmetric about 1/4
  double c;
  if (t <= 0.125) {
    c = kernel_cos(two_pi * t);
  } else {
    c = kernel_sin(two_pi * (0.25 - t));
  }
  return c * c;
}

// e^x for |x| <= 708 (fdlibm e_exp.c, main path, error below 1 ulp); 0
// below -708 (where the result would be subnormal), +inf above 708.
CEPAM_HD inline double exp_bounded(double x) {
  using namespace fdlibm;
  if (!(x > -708.0)) return 0.0;
  if (x > 708.0) return double_of(0x7ff0000000000000ULL);  // +inf
  if (x > -0x1.0p-28 && x < 0x1.0p-28) return 1.0 + x;
  // k = round(x / ln 2), halves away from zero.
  const std::int32_t k = static_cast<std::int32_t>(inv_ln2 * x + (x < 0.0 ? -0.5 : 0.5));
  const double dk = static_cast<double>(k);
  const double hi = x - dk * ln2_hi;
  const double lo = dk * ln2_lo;
  const double r = hi - lo;
  const double t = r * r;
  const double c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
  const double y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
  // y 2^k, -1021 <= k <= 1022: by the exponent's bits.
  return double_of(bits_of(y) + (static_cast<std::uint64_t>(static_cast<std::int64_t>(k)) << 52));
}

// The standard normal CDF Phi(z), to 7.5e-8 (Abramowitz and Stegun
// 26.2.17, with exp_bounded): for entropy models, where it need only be
// the same everywhere.
namespace normal_cdf_coeffs {  // (its constants, for SIMD forms of it)
inline constexpr double p = 0.2316419;
inline constexpr double b1 = 0.319381530, b2 = -0.356563782, b3 = 1.781477937,
                        b4 = -1.821255978, b5 = 1.330274429;
inline constexpr double inv_sqrt_2pi = 0.398942280401432702863;
}  // namespace normal_cdf_coeffs
CEPAM_HD inline double normal_cdf(double z) {
  if (!(z > -38.0)) return 0.0;  // (NaN too)
  if (!(z < 38.0)) return 1.0;
  // Abramowitz and Stegun 26.2.17 (Zelen and Severo): the upper tail of |z|
  // is phi(z) t (b1 + t (b2 + ...)), t = 1 / (1 + p |z|).
  using namespace normal_cdf_coeffs;
  const double a = z < 0.0 ? -z : z;
  const double density = inv_sqrt_2pi * exp_bounded(-0.5 * (z * z));
  const double t = 1.0 / (1.0 + p * a);
  const double tail = density * (t * (b1 + t * (b2 + t * (b3 + t * (b4 + t * b5)))));
  return z < 0.0 ? tail : 1.0 - tail;
}

// Batch forms: out[i] = log(x[i]) and out[i] = cos2pi_squared(t[i]) for
// i < count (out may be x).  Bit-identical to the functions above for every
// input: the AVX2 forms (random/detmath_avx2.hpp, chosen at run time, see common/cpu.hpp)
// apply the same operations in the same order to four elements at a time.
// (The latent samplers use fused kernels built on the same AVX2 forms,
// lrsuq/batch_kernels.hpp; these batch forms let the tests check them on any input.)
void log_batch(const double* x, double* out, std::size_t count);
void cos2pi_squared_batch(const double* t, double* out, std::size_t count);

}  // namespace cepam::detmath
