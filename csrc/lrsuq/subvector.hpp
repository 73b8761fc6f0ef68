// One sub-vector of LRSUQ, written once for the host and for CUDA devices
// (CEPAM_HD, common/host_device.hpp).
//
// The CPU codec (lrsuq/quantizer.cpp) runs the same formulas over chunks
// of sub-vectors, in SIMD batches that give the same bits; the CUDA kernels
// (csrc/cuda/) run one sub-vector per thread with the functions below, and
// lrsuq_encode_subvectors / lrsuq_decode_subvectors run them one sub-vector
// at a time on the host, so that the CPU tests check, bit for bit, the
// arithmetic the GPU runs (tests/core/test_subvector.py).
//
// Sub-vector j, dimension n, with radius r = r(U_j) and beta = r / rho:
//   latent words  stream 0, words [j W, (j + 1) W) (W = Config::words);
//                 Gaussian Z^1 also its reserve (random/maxwell.hpp);
//   trial i       stream i, words [j n, (j + 1) n): the dither V, then
//                 m = Q_L(x_j / beta - V), y = beta (G m + V), accepted when
//                 ||y - x_j|| <= r (l2: the squared terms against r^2, l1:
//                 the absolute terms against r, summed in coordinate order);
//   decoder       y_j = beta (G M_j + V_{j, H_j}).
// lrsuq/quantizer.hpp and docs/format.md give the layout in full.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/host_device.hpp"
#include "lattice/lattice.hpp"
#include "lattice/registry.hpp"
#include "lattice/root_lattices.hpp"
#include "random/chacha20.hpp"
#include "random/chacha20_block.hpp"
#include "random/detmath.hpp"
#include "lrsuq/latent.hpp"

namespace cepam {
struct LrsuqParams;
}

namespace cepam::subvector {

inline constexpr int kMaxDim = 8;
// The latent words of one sub-vector (radius_of's array): Gaussian, n = 7,
// (9 - 1) / 2 + 2.  Every mechanism of the table, at every dimension its
// row allows, must fit: checked at compile time.
inline constexpr int kMaxLatentWords = 6;
static_assert(most_latent_words(Latents{}) <= kMaxLatentWords,
              "a latent needs more words than subvector::kMaxLatentWords holds");
static_assert(largest_mechanism_dim() <= kMaxDim,
              "a mechanism's largest dimension exceeds subvector::kMaxDim");

// Sub-vectors the CPU's LRSUQ takes together (lrsuq/quantizer.cpp: a
// keystream batch).  Its decoder checks a chunk's trial indices, then
// reconstructs the chunk and checks its values, so the first error of a
// range of sub-vectors is in its first chunk with either
// (payload/golomb_segment.hpp decodes in that order).
inline constexpr std::size_t kChunk = 256;

// Outcome of one sub-vector (0: success).  The codec reports the first
// sub-vector, in index order, whose outcome is not Ok.
enum Status : int {
  kOk = 0,
  kInputTooLarge = 1,  // encoder: |x / beta| >= Config::limit (or not finite)
  kTrialCap = 2,       // encoder: no trial accepted within kTrialCap
  kBadTrial = 3,       // decoder: H out of range
  kBadCoordinate = 4,  // decoder: |M| > kMaxAbsM
  kNonFiniteOutput = 5,  // decoder: a value overflows the output type
};

// The codec's parameters as plain data (usable as a kernel argument).
struct Config {
  int mechanism;      // MechanismId
  int lattice;        // LatticeId
  int n;              // sub-vector dimension
  double scale;       // sigma, b or the SDQ step
  double rho;         // packing radius in the mechanism's norm
  double limit;       // largest |x / beta| the encoder accepts (exclusive)
  int words;          // latent words per sub-vector
  bool l2;            // acceptance test in l2 (Gaussian), else l1
  bool cell_is_ball;  // every trial is accepted (Z^1)
  std::uint32_t trial_cap;
  std::int64_t max_abs_m;
};

// Z^n, one coordinate (lattice/zn_kernels.hpp).
using kernels::zn_dither;
using kernels::zn_trial;

// The radius of sub-vector j from stream 0 of the key.
CEPAM_HD inline double radius_of(const Config& c, const std::uint32_t* key, std::uint64_t j) {
  std::uint64_t w[kMaxLatentWords];
  chacha::StreamReader s0(key, kPurposeLrsuq, 0);
  double r = 0.0;  // (every Config holds a mechanism of the table)
  with_latent_type(static_cast<MechanismId>(c.mechanism), [&](auto latent) {
    using Latent = decltype(latent);
    for (int i = 0; i < c.words; ++i) w[i] = s0.word(latent_word(c.words, j, i));
    r = Latent::radius_from(c.n, c.scale, w, j, key);
  });
  return r;
}

// The n dither words of trial `trial` of sub-vector j.
CEPAM_HD inline void trial_words(const Config& c, const std::uint32_t* key, std::uint64_t j,
                                 std::uint32_t trial, std::uint64_t* w) {
  chacha::StreamReader s(key, kPurposeLrsuq, trial);
  const std::uint64_t first = j * static_cast<std::uint64_t>(c.n);
  for (int k = 0; k < c.n; ++k) w[k] = s.word(first + static_cast<std::uint64_t>(k));
}

// One trial on a Voronoi lattice (A2, D4, E8): v = the dither of words w,
// q = Q(t - v) in basis coordinates, dev = the squared terms of
// beta (G q + v) - xs.
template <class Lattice>
CEPAM_HD inline void voronoi_trial(const Lattice& lattice, const double* t, const double* xs,
                                   double beta, const std::uint64_t* w, double* v,
                                   std::int64_t* q, double* dev) {
  constexpr int N = Lattice::kDim;
  double s[N], p[N];
  lattice.dither(w, v);
  for (int k = 0; k < N; ++k) s[k] = t[k] - v[k];
  lattice.closest(s, q, p);
  for (int k = 0; k < N; ++k) {
    const double d = beta * (p[k] + v[k]) - xs[k];
    dev[k] = d * d;
  }
}

// One trial of any lattice: v, q and the acceptance test's terms.
CEPAM_HD inline void any_trial(const Config& c, const double* t, const double* xs, double beta,
                               const std::uint64_t* w, double* v, std::int64_t* q, double* dev) {
  if (with_root_lattice(static_cast<LatticeId>(c.lattice), [&](const auto& lattice) {
        voronoi_trial(lattice, t, xs, beta, w, v, q, dev);
      }))
    return;
  for (int k = 0; k < c.n; ++k) {  // Z^n
    v[k] = zn_dither(w[k]);
    q[k] = static_cast<std::int64_t>(zn_trial(t[k], xs[k], beta, w[k], c.l2, &dev[k]));
  }
}

// Encodes sub-vector j whose coordinates are xj[0..valid) * factor (zero
// padding after them; valid <= n): H, M[0..n), and the decoder's side
// information beta and V[0..n).  (The host's spot-check of a device's
// results encodes a few sub-vectors this way: cepam/cuda.py.)
template <class T>
CEPAM_HD inline Status encode_at(const Config& c, const std::uint32_t* key, const T* xj,
                                 std::uint64_t valid, double factor, std::uint64_t j,
                                 std::uint32_t* H, std::int64_t* M, double* beta_out, double* V) {
  const int n = c.n;
  const double r = radius_of(c, key, j);
  const double beta = r / c.rho;  // = r (1 / rho) bit for bit where rho is a power of two
  const double inv_beta = 1.0 / beta;
  double xs[kMaxDim], t[kMaxDim];
  for (int k = 0; k < n; ++k) {
    xs[k] = static_cast<std::uint64_t>(k) < valid ? static_cast<double>(xj[k]) * factor : 0.0;
    t[k] = xs[k] * inv_beta;
    if (!(std::fabs(t[k]) < c.limit)) return kInputTooLarge;
  }
  const double bound = c.l2 ? r * r : r;
  for (std::uint32_t trial = 1;; ++trial) {
    std::uint64_t w[kMaxDim];
    double v[kMaxDim], dev[kMaxDim];
    std::int64_t q[kMaxDim];
    trial_words(c, key, j, trial, w);
    any_trial(c, t, xs, beta, w, v, q, dev);
    double s = 0.0;
    for (int k = 0; k < n; ++k) s += dev[k];
    if (c.cell_is_ball || s <= bound) {
      *H = trial;
      for (int k = 0; k < n; ++k) {
        M[k] = q[k];
        V[k] = v[k];
      }
      *beta_out = beta;
      return kOk;
    }
    if (trial == c.trial_cap) return kTrialCap;
  }
}

// Encodes sub-vector j of x[0..m) * factor (zero padding after x[m - 1]):
// encode_at of its coordinates.
template <class T>
CEPAM_HD inline Status encode_one(const Config& c, const std::uint32_t* key, const T* x,
                                  std::uint64_t m, double factor, std::uint64_t j,
                                  std::uint32_t* H, std::int64_t* M, double* beta_out,
                                  double* V) {
  const std::uint64_t base = j * static_cast<std::uint64_t>(c.n);
  const std::uint64_t valid = base < m ? m - base : 0;
  return encode_at(c, key, valid != 0 ? x + base : x, valid, factor, j, H, M, beta_out, V);
}

// The point G m of basis coordinates m, for any lattice.
CEPAM_HD inline void to_point(const Config& c, const std::int64_t* m, double* p) {
  if (with_root_lattice(static_cast<LatticeId>(c.lattice),
                        [&](const auto& lattice) { lattice.to_point(m, p); }))
    return;
  for (int k = 0; k < c.n; ++k) p[k] = static_cast<double>(m[k]);  // Z^n
}

// The dither of words w, for any lattice.
CEPAM_HD inline void dither(const Config& c, const std::uint64_t* w, double* v) {
  if (with_root_lattice(static_cast<LatticeId>(c.lattice),
                        [&](const auto& lattice) { lattice.dither(w, v); }))
    return;
  for (int k = 0; k < c.n; ++k) v[k] = zn_dither(w[k]);  // Z^n
}

// Whether h is a trial index the encoder can send (1 .. trial_cap; 1 where
// every trial is accepted).
CEPAM_HD inline bool trial_ok(const Config& c, std::uint32_t h) {
  return h >= 1 && h <= c.trial_cap && (h == 1 || !c.cell_is_ball);
}

// The decoder's side information of sub-vector j, whose trial index is h:
// returns beta and sets v[0..n) to the dither V_h.
CEPAM_HD inline double side_info_one(const Config& c, const std::uint32_t* key, std::uint32_t h,
                                     std::uint64_t j, double* v) {
  const double beta = radius_of(c, key, j) / c.rho;
  std::uint64_t w[kMaxDim];
  trial_words(c, key, j, h, w);
  dither(c, w, v);
  return beta;
}

// y[j n + k] = T(beta (G M + v)) for j n + k < m (padding dropped); false
// if a value is not finite (all are written).
template <class T>
CEPAM_HD inline bool reconstruct_one(const Config& c, double beta, const double* v,
                                     const std::int64_t* M, std::uint64_t m, std::uint64_t j,
                                     T* y) {
  double p[kMaxDim];
  to_point(c, M, p);
  bool finite = true;
  for (int k = 0; k < c.n; ++k) {
    const std::uint64_t e = j * static_cast<std::uint64_t>(c.n) + static_cast<std::uint64_t>(k);
    if (e < m) {
      const T value = static_cast<T>(beta * (p[k] + v[k]));
      finite = finite && value - value == T(0);  // not Inf or NaN
      y[e] = value;
    }
  }
  return finite;
}

// Decodes sub-vector j from its trial index h and coordinates M[0..n) into
// y[j n + k] for j n + k < m (padding dropped): y = T(beta (G M + V_h)).
template <class T>
CEPAM_HD inline Status decode_one(const Config& c, const std::uint32_t* key, std::uint32_t h,
                                  const std::int64_t* M, std::uint64_t m, std::uint64_t j, T* y) {
  if (!trial_ok(c, h)) return kBadTrial;
  for (int k = 0; k < c.n; ++k) {
    if (M[k] > c.max_abs_m || M[k] < -c.max_abs_m) return kBadCoordinate;
  }
  double v[kMaxDim];
  const double beta = side_info_one(c, key, h, j, v);
  return reconstruct_one(c, beta, v, M, m, j, y) ? kOk : kNonFiniteOutput;
}

}  // namespace cepam::subvector
