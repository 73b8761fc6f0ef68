// Latent variables of the layered construction.
//
// A noise law f whose superlevel sets are balls is a mixture of uniform
// distributions on balls: z | U ~ Uniform(r(U) * Ball) gives z ~ f when
//   Gaussian(sigma), dimension n:  U ~ chi2(n+2),   r = sigma sqrt(U), l2 ball;
//   Laplace(b), n = 1:             U ~ Gamma(2, 1), r = b U,          interval;
//   Laplace(b), n > 1 (product):   U ~ Gamma(n+1,1), r = b U,         l1 ball.
// Each sampler turns a fixed number of 64-bit random words into r(U), with
// the deterministic logarithm and cosine of detmath.hpp.
//
// chi2(2k) = -2 log(u_1 ... u_k); chi2(1) = -2 log(u_a) cos^2(2 pi u_b)
// (Box-Muller); Gamma(k, 1) = -log(u_1 ... u_k).  Products of at most 9
// uniforms in (0, 1] stay above 2^-477: no underflow.
#pragma once

#include <cmath>
#include <cstdint>

#include "chacha20.hpp"
#include "detmath.hpp"
#include "lattice.hpp"

namespace cepam {

enum class MechanismId : int { Gaussian = 1, Laplace = 2 };

struct GaussianLatent {
  int n;
  double sigma;

  Norm norm() const { return Norm::L2; }
  // Words per sub-vector: k/2 for even k = n + 2, (k - 1)/2 + 2 for odd k.
  int words() const { return (n % 2 == 0) ? (n + 2) / 2 : (n + 1) / 2 + 2; }
  double latent(const std::uint64_t* w) const {
    const int k = n + 2;
    const int pairs = k / 2;
    double product = 1.0;
    for (int i = 0; i < pairs; ++i) product *= uniform_oc(w[i]);
    double half = detmath::log(product);  // -U/2 for the even part
    if (k % 2 == 1) {
      half += detmath::log(uniform_oc(w[pairs])) * detmath::cos2pi_squared(uniform_co(w[pairs + 1]));
    }
    return -2.0 * half;
  }
  double radius(const std::uint64_t* w) const { return sigma * std::sqrt(latent(w)); }
};

struct LaplaceLatent {
  int n;
  double b;

  Norm norm() const { return Norm::L1; }  // for n = 1 the l1 ball is the interval
  int words() const { return n + 1; }
  double latent(const std::uint64_t* w) const {
    double product = 1.0;
    for (int i = 0; i <= n; ++i) product *= uniform_oc(w[i]);
    return -detmath::log(product);
  }
  double radius(const std::uint64_t* w) const { return b * latent(w); }
};

}  // namespace cepam
