// The Maxwell radius (chi with three degrees of freedom) by a ziggurat: the
// latent of Gaussian Z^1 (format version 10; lrsuq/latent.hpp).
//
// A uniform point of [-R, R] is N(0, 1) when R has the density
// sqrt(2 / pi) x^2 exp(-x^2 / 2), x >= 0 (Khintchine: every symmetric
// unimodal law is a mixture of uniforms, here with the law of |N(0, I_3)|).
// The region under f(x) = x^2 exp(-x^2 / 2) is cut into kLayers = 1024
// layers of equal area (tools/maxwell_ziggurat.py writes their table,
// random/maxwell_table.hpp): 1023 rectangles [L_i, R_i] x [y_i, y_(i+1)],
// [L_i, R_i] = {f >= y_i}, and a base, the region under min(f, y_1).  A
// uniform point of a uniformly chosen layer, kept when it lies under f, is
// a uniform point of the region under f, whose abscissa has the density
// f / sqrt(pi / 2): the ziggurat of Marsaglia and Tsang (2000), with layers
// on both sides of the mode.
//
// One 64-bit word w draws the layer i = w >> 54 and the abscissa
// x = start_i + u width_i, u = uniform_co(w << 11) (its low 53 bits); the
// fast test keeps x when lo_i <= x <= hi_i (the next layer's level set,
// rounded inwards: every point above it in the layer is under f), for
// 99.59 % of words.  Else the slow path reads words of the sample's reserve
// (below), in order:
// - layer i >= 1: y = y_i + u' dy_i; x is kept if y < f(x), where
//   f(x) = (x x) exp_bounded(-0.5 (x x));
// - layer 0 (x beyond the base's rectangle [L_1, R_1]): the left piece under
//   f on [0, L_1] with probability kLeftShare, else the tail beyond R_1:
//   left: x = L_1 u_a, kept if y_1 u_b < f(x) (else two more words);
//   tail: W = R^2 / 2 has the density ~ w^(1/2) e^(-w) on w > w0 = R_1^2 / 2;
//   w = w0 + E / (1 - c), E = -log(u_oc), c = 1 / (2 w0), is kept if
//   u_co < sqrt(w / w0) exp_bounded(-c (w - w0)) (the ratio of the densities
//   over its maximum, at w0), and x = sqrt(2 w);
// - a rejected wedge starts over from the next reserve word as a new w.
// Uniforms u', u_a, u_b, u_co are uniform_co of a word (its top 53 bits),
// u_oc uniform_oc.  The reserve of sample s is words [256 s, 256 s + 256) of
// the stream kReserveStream; were they all read, the last x is kept (every
// try reads at most two words and is rejected with probability below 2/3,
// so that has probability below (2/3)^127 < 10^-22 for a sample).
// Exactness: the draws are those of the construction up to the rounding of
// the table (each layer's area within 10^-15 of the others', relative) and
// of exp and log (below 1 ulp), like every sampler of this library.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/host_device.hpp"
#include "random/chacha20.hpp"
#include "random/chacha20_block.hpp"
#include "random/detmath.hpp"
#include "random/maxwell_table.hpp"

namespace cepam::maxwell {

// The stream of the samples' reserve words (above the trials' 1 .. 2^16),
// and the words each sample may take from it.
inline constexpr std::uint32_t kReserveStream = 0xffffffffu;
inline constexpr std::uint64_t kReserveWords = 256;

// The layers, numbered by a word's top 10 bits.
inline constexpr int kLayers = 1024, kLayerShift = 54;
static_assert(kLayers == 1 << (64 - kLayerShift), "a layer for each top");
static_assert(kLayers == CEPAM_MAXWELL_LAYERS, "random/maxwell_table.hpp has a row a layer");

// The table: each layer's fast row (start, width, lo, hi: what the fast
// test reads, 32 bytes, which the SIMD kernels load whole and transpose),
// and its y and dy (the slow path's).  Device code reads its own copies (a
// host array is not visible there).
struct alignas(32) FastRow {
  double start, width, lo, hi;
};
#define CEPAM_MAXWELL_FAST(start, width, lo, hi, y, dy) {start, width, lo, hi},
#define CEPAM_MAXWELL_Y(start, width, lo, hi, y, dy) y,
#define CEPAM_MAXWELL_DY(start, width, lo, hi, y, dy) dy,
inline constexpr FastRow kFastRows[kLayers] = {CEPAM_MAXWELL_ROWS(CEPAM_MAXWELL_FAST)};
inline constexpr double kY[kLayers] = {CEPAM_MAXWELL_ROWS(CEPAM_MAXWELL_Y)};
inline constexpr double kDy[kLayers] = {CEPAM_MAXWELL_ROWS(CEPAM_MAXWELL_DY)};
#if defined(__CUDACC__)
__device__ const FastRow kFastRowsDevice[kLayers] = {CEPAM_MAXWELL_ROWS(CEPAM_MAXWELL_FAST)};
__device__ const double kYDevice[kLayers] = {CEPAM_MAXWELL_ROWS(CEPAM_MAXWELL_Y)};
__device__ const double kDyDevice[kLayers] = {CEPAM_MAXWELL_ROWS(CEPAM_MAXWELL_DY)};
#endif
#undef CEPAM_MAXWELL_FAST
#undef CEPAM_MAXWELL_Y
#undef CEPAM_MAXWELL_DY

// Layer i's fast row, and the height y_i + u dy_i in its wedge.
CEPAM_HD inline const FastRow& fast_row(std::uint64_t i) {
#if defined(__CUDA_ARCH__)
  return kFastRowsDevice[i];
#else
  return kFastRows[i];
#endif
}
CEPAM_HD inline double wedge_y(std::uint64_t i, double u) {  // y_i + u dy_i
#if defined(__CUDA_ARCH__)
  return kYDevice[i] + u * kDyDevice[i];
#else
  return kY[i] + u * kDy[i];
#endif
}

// The abscissa of word w in its layer's row: start + u width,
// u = uniform_co(w << 11) (the low 53 bits); whether the fast test keeps it.
CEPAM_HD inline double abscissa(const FastRow& r, std::uint64_t w) {
  return r.start + uniform_co(w << 11) * r.width;
}
CEPAM_HD inline bool kept_fast(const FastRow& r, double x) { return x >= r.lo && x <= r.hi; }

// The fast test: w's abscissa where it is kept without a further word, else
// -1.0 (kernels::maxwell_radii computes the same in SIMD lanes).
CEPAM_HD inline double fast(std::uint64_t w) {
  const FastRow& r = fast_row(w >> kLayerShift);
  const double x = abscissa(r, w);
  return kept_fast(r, x) ? x : -1.0;
}

CEPAM_HD inline double density(double x) {  // f, unnormalised
  const double s = x * x;
  return s * detmath::exp_bounded(-0.5 * s);
}

// The sample of word w, reserve(k) giving word k < kReserveWords of its
// reserve.
template <class Reserve>
CEPAM_HD inline double sample(std::uint64_t w, Reserve&& reserve) {
  std::uint64_t k = 0;
  for (;;) {
    const std::uint64_t i = w >> kLayerShift;
    const FastRow& r = fast_row(i);
    double x = abscissa(r, w);
    if (kept_fast(r, x)) return x;
    if (k == kReserveWords) return x;
    if (i != 0) {  // a wedge
      if (wedge_y(i, uniform_co(reserve(k++))) < density(x)) return x;
    } else if (uniform_co(reserve(k++)) < kLeftShare) {  // the left piece
      while (k + 2 <= kReserveWords) {
        x = kLeftEdge * uniform_co(reserve(k++));
        if (kBaseHeight * uniform_co(reserve(k++)) < density(x)) return x;
      }
      return x;
    } else {  // the tail
      while (k + 2 <= kReserveWords) {
        const double t = kTailStart + -detmath::log(uniform_oc(reserve(k++))) * kTailScale;
        x = std::sqrt(2.0 * t);
        const double keep =
            std::sqrt(t / kTailStart) * detmath::exp_bounded(-kTailRate * (t - kTailStart));
        if (uniform_co(reserve(k++)) < keep) return x;
      }
      return x;
    }
    if (k == kReserveWords) return x;
    w = reserve(k++);  // the wedge's x rejected: a new word
  }
}

// The reserve of sample s, from the key and purpose of its stream 0: a
// StreamReader of kReserveStream (one block computed for each 8 words read).
struct StreamReserve {
  chacha::StreamReader stream;
  std::uint64_t first;
  CEPAM_HD std::uint64_t operator()(std::uint64_t k) { return stream.word(first + k); }
};
CEPAM_HD inline StreamReserve reserve_of(const std::uint32_t* key, std::uint32_t purpose,
                                         std::uint64_t s) {
  return {chacha::StreamReader(key, purpose, kReserveStream), s * kReserveWords};
}

}  // namespace cepam::maxwell
