#include "source_model.hpp"

#include <cstring>

#include "bitstream.hpp"
#include "errors.hpp"

namespace cepam {

template <class T>
SourceModel SourceModel::fit(const T* x, std::size_t m, double factor) {
  SourceModel model;
  // max |x factor| = (max |x|) factor, rounding being monotone; the
  // comparisons skip NaN.  Eight partial maxima, for vectorisation (the
  // maximum does not depend on the order).
  T part[8] = {};
  std::size_t i8 = 0;
  for (; i8 + 8 <= m; i8 += 8) {
    for (std::size_t l = 0; l < 8; ++l) {
      const T v = std::fabs(x[i8 + l]);
      part[l] = v > part[l] ? v : part[l];
    }
  }
  for (; i8 < m; ++i8) {
    const T v = std::fabs(x[i8]);
    part[0] = v > part[0] ? v : part[0];
  }
  T xmax = 0;
  for (const T v : part) xmax = v > xmax ? v : xmax;
  const double a = static_cast<double>(xmax) * factor;
  // 2A must be finite (the bin width); values beyond a clamped range fall in
  // the end bins, which only costs bits.
  constexpr double kMaxRange = 0x1.0p1020;
  model.set_range(a > 0.0 ? (a < kMaxRange ? a : kMaxRange) : 1.0);
  // Bin b = floor(u) clamped to [0, K - 1], clamped in the floating-point
  // domain (so that a NaN u, from non-finite data that LRSUQ will reject,
  // gets some bin without undefined behaviour), a chunk at a time in a loop
  // the compiler vectorises; then counted in four partial histograms.
  std::uint64_t counts[4][kBins] = {};
  constexpr std::size_t kChunk = 512;
  std::uint8_t bins[kChunk];
  for (std::size_t i0 = 0; i0 < m; i0 += kChunk) {
    const std::size_t n = m - i0 < kChunk ? m - i0 : kChunk;
    for (std::size_t i = 0; i < n; ++i) {
      const double u = (static_cast<double>(x[i0 + i]) * factor + model.a_) * model.inv_width_;
      const double c = u < kBins - 1 ? u : kBins - 1;
      bins[i] = static_cast<std::uint8_t>(static_cast<int>(c >= 1.0 ? c : 0.0));
    }
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (std::size_t l = 0; l < 4; ++l) ++counts[l][bins[i + l]];
    for (; i < n; ++i) ++counts[0][bins[i]];
  }
  std::uint64_t cum = 0;
  const double total = m > 0 ? static_cast<double>(m) : 1.0;
  for (int b = 0; b < kBins; ++b) {
    for (std::size_t l = 0; l < 4; ++l) cum += counts[l][b];
    model.knots_[static_cast<std::size_t>(b) + 1] =
        static_cast<std::uint32_t>(std::floor(static_cast<double>(cum) * kKnotScale / total + 0.5));
  }
  model.knots_[kBins] = kKnotScale;
  if (m == 0) {  // no data: a uniform model
    for (int b = 0; b <= kBins; ++b)
      model.knots_[static_cast<std::size_t>(b)] = static_cast<std::uint32_t>(b) * (kKnotScale / kBins);
  }
  model.derive();
  return model;
}

void SourceModel::derive() {
  for (int b = 0; b <= kBins; ++b) knot_[b] = static_cast<double>(knots_[b]);
  for (int b = 0; b < kBins; ++b) {
    slope_[b] = knot_[b + 1] - knot_[b];
    // Level l + 1/2 lies in bin b when c_b <= l < c_{b+1} (c_0 = 0 and
    // c_K = 2^12, so every level is in one bin, of positive slope).
    for (std::uint32_t l = knots_[b]; l < knots_[b + 1]; ++l)
      quantile_[l] = b + (l + 0.5 - knot_[b]) / slope_[b];
  }
  // Bin b, of width w = 2A / K and weight slope_b 2^-12, has mean -A + (b + 1/2) w
  // and second moment about its centre w^2 / 12.
  const double w = 2.0 * a_ / kBins;
  double m1 = 0.0, m2 = 0.0;
  for (int b = 0; b < kBins; ++b) {
    const double centre = (static_cast<double>(b) + 0.5) * w - a_;
    const double p = slope_[b] * (1.0 / kKnotScale);
    m1 += p * centre;
    m2 += p * (centre * centre);
  }
  mean_ = m1;
  const double var = m2 - m1 * m1 + w * w * (1.0 / 12.0);
  variance_ = var > 0.0 ? var : 0.0;
}

void SourceModel::serialize(std::vector<std::uint8_t>& out) const {
  std::uint64_t bits;
  std::memcpy(&bits, &a_, sizeof bits);
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<std::uint8_t>(bits >> (8 * b)));
  // Increments d_b = c_{b+1} - c_b for b < K - 1 (the last is implied), with
  // an exp-Golomb code whose order is chosen to minimise the length.
  std::array<std::uint32_t, kBins - 1> d;
  for (int b = 0; b < kBins - 1; ++b)
    d[static_cast<std::size_t>(b)] = knots_[static_cast<std::size_t>(b) + 1] - knots_[static_cast<std::size_t>(b)];
  int best_k = 0;
  std::uint64_t best = ~std::uint64_t{0};
  for (int k = 0; k <= kKnotBits; ++k) {
    std::uint64_t len = 0;
    for (std::uint32_t v : d) {
      const std::uint64_t w = static_cast<std::uint64_t>(v) + (std::uint64_t{1} << k);
      len += static_cast<std::uint64_t>(2 * (64 - count_leading_zeros(w)) - k - 1);
    }
    if (len < best) {
      best = len;
      best_k = k;
    }
  }
  out.push_back(static_cast<std::uint8_t>(best_k));
  BitWriter w(out);
  for (std::uint32_t v : d) {
    const std::uint64_t u = static_cast<std::uint64_t>(v) + (std::uint64_t{1} << best_k);
    const int len = 64 - count_leading_zeros(u);
    w.put_zeros(static_cast<std::uint64_t>(len - best_k - 1));
    w.put(u, len);
  }
  w.finish();
}

SourceModel SourceModel::parse(const std::uint8_t* data, std::size_t len, std::size_t* pos) {
  std::size_t p = *pos;
  if (len < p || len - p < 9) throw FormatError("source model truncated");
  std::uint64_t bits = 0;
  for (int b = 7; b >= 0; --b) bits = (bits << 8) | data[p + static_cast<std::size_t>(b)];
  double a;
  std::memcpy(&a, &bits, sizeof a);
  if (!(a > 0.0) || !std::isfinite(2.0 * a) || !std::isfinite(kBins / (2.0 * a)) ||
      !(kBins / (2.0 * a) > 0.0))
    throw FormatError("source model range out of bounds");
  const int k = data[p + 8];
  if (k > kKnotBits) throw FormatError("source model code order out of range");
  p += 9;
  SourceModel model;
  model.set_range(a);
  // Each code is at most 2 * 13 + 1 bits; the reader stops at the end of data.
  BitReader r(data + p, 8 * static_cast<std::uint64_t>(len - p));
  std::uint32_t cum = 0;
  for (int b = 0; b < kBins - 1; ++b) {
    const std::uint64_t zeros = r.zeros_then_one(static_cast<std::uint64_t>(kKnotBits + 1));
    const int nbits = static_cast<int>(zeros) + k;
    const std::uint64_t v = ((std::uint64_t{1} << nbits) | r.get(nbits)) - (std::uint64_t{1} << k);
    if (v > kKnotScale - cum) throw FormatError("source model knots exceed the scale");
    cum += static_cast<std::uint32_t>(v);
    model.knots_[static_cast<std::size_t>(b) + 1] = cum;
  }
  model.knots_[kBins] = kKnotScale;
  model.derive();
  const std::uint64_t used = (r.position() + 7) / 8;
  const int pad = static_cast<int>(used * 8 - r.position());
  if (pad > 0 && (data[p + used - 1] & ((1u << pad) - 1)) != 0)
    throw FormatError("source model has non-zero padding");
  *pos = p + static_cast<std::size_t>(used);
  return model;
}

template SourceModel SourceModel::fit<float>(const float*, std::size_t, double);
template SourceModel SourceModel::fit<double>(const double*, std::size_t, double);

}  // namespace cepam
