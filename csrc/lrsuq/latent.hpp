// Latent variables of the layered construction.
//
// A noise law f whose superlevel sets are balls is a mixture of uniform
// distributions on balls: z | U ~ Uniform(r(U) * Ball) gives z ~ f when
//   Gaussian(sigma), dimension n:  U ~ chi2(n+2),   r = sigma sqrt(U), l2 ball;
//   Laplace(b), n = 1:             U ~ Gamma(2, 1), r = b U,          interval;
//   Laplace(b), n > 1 (product):   U ~ Gamma(n+1,1), r = b U,         l1 ball;
//   SDQ(step), n = 1:              no latent,       r = step / 2,     interval.
// Each sampler turns a fixed number of 64-bit random words into r(U), with
// the deterministic logarithm and cosine of random/detmath.hpp.
//
// chi2(2k) = -2 log(u_1 ... u_k); chi2(1) = -2 log(u_a) cos^2(2 pi u_b)
// (Box-Muller); Gamma(k, 1) = -log(u_1 ... u_k).  Products of at most 9
// uniforms in (0, 1] stay above 2^-477: no underflow.
//
// Gaussian, n = 1 (format version 10 on): r = sigma R with R the Maxwell
// radius (sqrt(U), U ~ chi2(3)) of random/maxwell.hpp's ziggurat, from one
// word of stream 0 (99.59 % of sub-vectors) and, for the others, words of
// the sub-vector's reserve.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/host_device.hpp"
#include "lrsuq/batch_kernels.hpp"
#include "lrsuq/maxwell_kernels.hpp"
#include "lattice/lattice.hpp"
#include "random/chacha20.hpp"
#include "random/detmath.hpp"
#include "random/maxwell.hpp"

namespace cepam {

// SDQ: subtractive dithered quantization (no latent; cepam.SDQ in Python).
enum class MechanismId : int { Gaussian = 1, Laplace = 2, SDQ = 3 };

// The mechanism table: payload code, name, the norm of its acceptance test,
// the largest sub-vector dimension it takes (with why), and a small and a
// large typical width of a coding cell on Z as multiples of the scale (two
// quadrature points of beta, for the ANS source model's estimates:
// Gaussian 2 chi_3, Laplace 2 Gamma(2, 1); SDQ the step).  Its latent type
// (below) carries the same id.
struct MechanismInfo {
  MechanismId id;
  const char* name;
  Norm norm;
  int max_dim;
  const char* max_dim_reason;
  double cell_width_lo, cell_width_hi;
};

inline constexpr MechanismInfo kMechanisms[] = {
    {MechanismId::Gaussian, "Gaussian", Norm::L2, 8, "the largest sub-vector of the core", 1.86,
     4.54},
    {MechanismId::Laplace, "Laplace", Norm::L1, 4,
     "with l1 balls on Z^n a trial is accepted with probability 1/n!", 1.17, 6.8},
    {MechanismId::SDQ, "SDQ", Norm::L1, 1, "SDQ is scalar", 1.0, 1.0},
};

// The largest sub-vector dimension any mechanism takes.
constexpr int largest_mechanism_dim() {
  int most = 0;
  for (const MechanismInfo& m : kMechanisms) most = m.max_dim > most ? m.max_dim : most;
  return most;
}

// The row of id, at compile time: nullptr for an id without a row.
constexpr const MechanismInfo* find_mechanism_row(MechanismId id) {
  for (const MechanismInfo& m : kMechanisms)
    if (m.id == id) return &m;
  return nullptr;
}

// The radius r(U) of one sub-vector from its latent words, the scalar
// formulas that the batches (kernels::gaussian_radii, laplace_radii) and the
// CUDA kernels (lrsuq/subvector.hpp) share: products accumulated from 1.0 in
// word order.
// N > 0 fixes the dimension at compile time (the CPU's unrolled loops).
template <int N = 0>
CEPAM_HD inline double gaussian_radius(int n, double sigma, const std::uint64_t* w) {
  const int k = (N > 0 ? N : n) + 2;
  const int pairs = k / 2;
  double product = 1.0;
  for (int i = 0; i < pairs; ++i) product *= uniform_oc(w[i]);
  double half = detmath::log(product);  // -U/2 for the even part
  if (k % 2 == 1) {
    half += detmath::log(uniform_oc(w[pairs])) * detmath::cos2pi_squared(uniform_co(w[pairs + 1]));
  }
  return sigma * std::sqrt(-2.0 * half);
}

// The stream-0 word holding word i of sub-vector j's latent (W words a
// sub-vector, in index order).
CEPAM_HD inline std::uint64_t latent_word(int W, std::uint64_t j, int i) {
  return j * static_cast<std::uint64_t>(W) + static_cast<std::uint64_t>(i);
}

template <int N = 0>
CEPAM_HD inline double laplace_radius(int n, double b, const std::uint64_t* w) {
  const int words = (N > 0 ? N : n) + 1;
  double product = 1.0;
  for (int i = 0; i < words; ++i) product *= uniform_oc(w[i]);
  return b * -detmath::log(product);
}

// The radii of sub-vectors [j0, j0 + count) of a latent with W words a
// sub-vector in index order, from stream 0 of ks (buf: count W words).
template <class Latent>
void contiguous_radii(const Latent& latent, const KeyStream& ks, std::uint64_t j0,
                      std::size_t count, std::uint64_t* buf, double* out) {
  const std::size_t W = static_cast<std::size_t>(latent.words());
  ks.words(0, j0 * W, count * W, buf);
  latent.radii(buf, count, out);
}

// The Maxwell radii (Gaussian, n = 1) of sub-vectors [j0, j0 + count): their
// words (stream 0, one a sub-vector) into buf, the fast test on all
// (kernels::maxwell_radii; the rejected ones' indices after the words in
// buf, maxwell_buffer_words(count) words in all), then maxwell::sample for
// the rejected ones (0.4 %), their reserves read as the device code reads
// them.
inline std::size_t maxwell_buffer_words(std::size_t count) { return 2 * count; }
inline void maxwell_radii_at(double sigma, const KeyStream& ks, std::uint64_t j0,
                             std::size_t count, std::uint64_t* buf, double* out) {
  std::uint64_t* slow = buf + count;
  ks.words(0, j0, count, buf);
  const std::size_t nslow = kernels::maxwell_radii(sigma, buf, count, out, slow);
  for (std::size_t i = 0; i < nslow; ++i) {
    const std::uint64_t c = slow[i];
    auto reserve = maxwell::reserve_of(ks.key().data(), ks.purpose(), j0 + c);
    out[c] = sigma * maxwell::sample(buf[c], reserve);
  }
}

// The latent types: of(n, scale) builds one; norm(), words(), radii() (a
// batch of contiguous words, SIMD where available), buffer_words(count)
// and radii_at(ks, j0, count, buf, out) (the radii of a range of
// sub-vectors, from the keystream) on the host; words_for(n), the words a
// sub-vector of dimension n takes from stream 0, at compile time (checked
// against the device code's array, lrsuq/subvector.hpp); radius_from(n,
// scale, w, j, key), the radius of sub-vector j from the words
// latent_word(...) names (and from the key, for a latent that draws more),
// also in device code (CEPAM_HD).
struct GaussianLatent {
  int n;
  double sigma;

  static constexpr MechanismId id = MechanismId::Gaussian;
  static GaussianLatent of(int n, double scale) { return {n, scale}; }

  Norm norm() const { return Norm::L2; }
  // Words per sub-vector: k/2 for even k = n + 2, (k - 1)/2 + 2 for odd k;
  // for n = 1, the Maxwell ziggurat's one (and its reserve, another stream).
  static constexpr int words_for(int n) { return n == 1 ? 1 : kernels::gaussian_words(n); }
  int words() const { return words_for(n); }
  std::size_t buffer_words(std::size_t count) const {
    return n == 1 ? maxwell_buffer_words(count) : count * static_cast<std::size_t>(words());
  }
  void radii_at(const KeyStream& ks, std::uint64_t j0, std::size_t count, std::uint64_t* buf,
                double* out) const {
    if (n == 1) {
      maxwell_radii_at(sigma, ks, j0, count, buf, out);
    } else {
      contiguous_radii(*this, ks, j0, count, buf, out);
    }
  }

  // out[c] = r(U_c) for c < count, sub-vector c's words at w + c words()
  // (n > 1: radii_at takes n = 1's from the ziggurat).
  // Per sub-vector:  half = log(u_1 ... u_{k/2})               (= -chi2(2[k/2]) / 2)
  //                  half += log(u_a) cos^2(2 pi u_b)            (odd k only)
  //                  r = sigma sqrt(-2 half)
  // (kernels::gaussian_radii, SIMD where available).
  void radii(const std::uint64_t* w, std::size_t count, double* out) const {
    kernels::gaussian_radii(n, sigma, w, count, out);
  }
  // The radius of sub-vector j from its words w (and, for n = 1, its
  // reserve under key).
  CEPAM_HD static double radius_from(int n, double sigma, const std::uint64_t* w,
                                     std::uint64_t j, const std::uint32_t* key) {
    if (n == 1) return sigma * maxwell::sample(w[0], maxwell::reserve_of(key, kPurposeLrsuq, j));
    return gaussian_radius(n, sigma, w);
  }
};

struct LaplaceLatent {
  int n;
  double b;

  static constexpr MechanismId id = MechanismId::Laplace;
  static LaplaceLatent of(int n, double scale) { return {n, scale}; }

  Norm norm() const { return Norm::L1; }  // for n = 1 the l1 ball is the interval
  static constexpr int words_for(int n) { return n + 1; }
  int words() const { return words_for(n); }
  std::size_t buffer_words(std::size_t count) const {
    return count * static_cast<std::size_t>(words());
  }
  void radii_at(const KeyStream& ks, std::uint64_t j0, std::size_t count, std::uint64_t* buf,
                double* out) const {
    contiguous_radii(*this, ks, j0, count, buf, out);
  }

  // out[c] = r(U_c) = b (-log(u_1 ... u_{n+1})) for c < count
  // (kernels::laplace_radii, SIMD where available).
  void radii(const std::uint64_t* w, std::size_t count, double* out) const {
    kernels::laplace_radii(n, b, w, count, out);
  }
  CEPAM_HD static double radius_from(int n, double b, const std::uint64_t* w, std::uint64_t,
                                     const std::uint32_t*) {
    return laplace_radius(n, b, w);
  }
};

// SDQ: a fixed radius, no latent variable.  With scale beta = radius / rho
// this is plain subtractive dithered quantization, uniform error on the
// scaled cell; on Z^1 with radius step / 2, the scalar SDQ baseline.
struct SdqLatent {
  int n;
  double radius;

  static constexpr MechanismId id = MechanismId::SDQ;  // radius = step / 2
  static SdqLatent of(int n, double scale) { return {n, 0.5 * scale}; }

  Norm norm() const { return Norm::L1; }
  static constexpr int words_for(int) { return 0; }
  int words() const { return words_for(n); }
  std::size_t buffer_words(std::size_t) const { return 0; }
  void radii(const std::uint64_t*, std::size_t count, double* out) const {
    for (std::size_t c = 0; c < count; ++c) out[c] = radius;
  }
  void radii_at(const KeyStream&, std::uint64_t, std::size_t count, std::uint64_t*,
                double* out) const {
    radii(nullptr, count, out);
  }
  CEPAM_HD static double radius_from(int, double step, const std::uint64_t*, std::uint64_t,
                                     const std::uint32_t*) {
    return 0.5 * step;
  }
};

// The latents by type, one per row of kMechanisms.
template <class... Ls>
struct LatentList {};
using Latents = LatentList<GaussianLatent, LaplaceLatent, SdqLatent>;

// The row of a latent type (compile-time: a type without a row does not
// compile).
template <class Latent>
constexpr const MechanismInfo& mechanism_row() {
  static_assert(find_mechanism_row(Latent::id) != nullptr,
                "a latent type without a row in kMechanisms");
  return *find_mechanism_row(Latent::id);
}

// Every row of kMechanisms has one latent type in Latents, and the reverse.
template <class... Ls>
constexpr bool rows_match_types(LatentList<Ls...>) {
  for (const MechanismInfo& m : kMechanisms)
    if (((m.id == Ls::id ? 1 : 0) + ... + 0) != 1) return false;
  return ((find_mechanism_row(Ls::id) != nullptr) && ...);
}
static_assert(rows_match_types(Latents{}), "kMechanisms and Latents must list the same mechanisms");

// The most latent words a sub-vector of the latent takes, over the
// dimensions its row allows (1 .. max_dim).
template <class Latent>
constexpr int latent_words_at_most() {
  int most = 0;
  for (int n = 1; n <= mechanism_row<Latent>().max_dim; ++n)
    most = Latent::words_for(n) > most ? Latent::words_for(n) : most;
  return most;
}

// The same over every latent of the table.
template <class... Ls>
constexpr int most_latent_words(LatentList<Ls...>) {
  int most = 0;
  ((most = latent_words_at_most<Ls>() > most ? latent_words_at_most<Ls>() : most), ...);
  return most;
}

template <class Fn, class... Ls>
CEPAM_HD bool with_latent_type(MechanismId id, Fn&& fn, LatentList<Ls...>) {
  return ((id == Ls::id ? (fn(Ls{}), true) : false) || ...);
}

// Calls fn(latent) with a value-initialised latent of mechanism id (for its
// type and static members, e.g. radius_from) and returns true, or returns false
// (fn not called) for an unknown id.  Usable in device code: the dispatch
// of lrsuq/subvector.hpp.
template <class Fn>
CEPAM_HD bool with_latent_type(MechanismId id, Fn&& fn) {
  return with_latent_type(id, fn, Latents{});
}

// Calls fn(latent) with the latent of mechanism id for dimension n and the
// mechanism's scale; returns false (fn not called) for an unknown id.
template <class Fn>
bool with_latent(MechanismId id, int n, double scale, Fn&& fn) {
  return with_latent_type(id, [&](auto latent) { fn(decltype(latent)::of(n, scale)); });
}

}  // namespace cepam
