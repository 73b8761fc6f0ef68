// The source model of the entropy coder: the law of one coordinate of the
// (clipped) update, as a piecewise-linear CDF on [-A, A] with K equal bins.
//
// A is the largest |x|; the knot values c_0 = 0 <= c_1 <= ... <= c_K = 2^12
// are the empirical CDF at the bin edges, in units of 2^-12.  The model
// travels in the payload body (A as float64, the K increments with an
// exp-Golomb code), so the decoder evaluates exactly the same CDF: cdf()
// uses only +, -, *, / and floor.  A histogram model, rather than a fitted
// Gaussian, because the updates cepam codes are not Gaussian: a Gaussian
// model of a uniform source alone wastes 0.25 bits per coordinate at high
// signal-to-noise ratio, the 64-bin model about 0.001.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cepam {

class SourceModel {
 public:
  static constexpr int kBins = 64;
  static constexpr int kKnotBits = 12;
  static constexpr std::uint32_t kKnotScale = 1u << kKnotBits;

  SourceModel() = default;

  // Fits the model to x[0..m) * factor (as the encoder sees the values).
  // Defined for any input; the values of a model fitted to non-finite data
  // do not matter (LRSUQ rejects such data).
  template <class T>
  static SourceModel fit(const T* x, std::size_t m, double factor);

  // Serialises / parses the model (parse throws FormatError on bad input
  // and advances *pos).
  void serialize(std::vector<std::uint8_t>& out) const;
  static SourceModel parse(const std::uint8_t* data, std::size_t len, std::size_t* pos);

  // P(X <= x) under the model, in [0, 1] (at most a few ulps above 1 where
  // rounding puts x + A at the top edge):
  //   u = (x + A) K / (2A),  i = min(floor(u), K - 1),
  //   F = (c_i + (u - i) (c_{i+1} - c_i)) 2^-12.
  // If 2A overflows, u is 0 or NaN (x + A overflowing); NaN is taken as
  // the top of the range rather than converted to an index.
  double cdf(double x) const {
    if (!(x > -a_)) return 0.0;
    if (!(x < a_)) return 1.0;
    const double u = (x + a_) * inv_width_;
    if (!(u < 2.0 * kBins)) return 1.0;  // NaN (u < K + 1 otherwise)
    int i = static_cast<int>(u);
    if (i > kBins - 1) i = kBins - 1;
    return (knot_[i] + (u - static_cast<double>(i)) * slope_[i]) * (1.0 / kKnotScale);
  }

  // An approximate inverse of cdf, for search guesses only (never for a
  // coded value): the position u (in bins, as in cdf) where the CDF reaches
  // (level + 1/2) 2^-12, for level < 2^12.
  double quantile_bins(std::uint32_t level) const { return quantile_[level]; }

  double range() const { return a_; }
  // Mean and variance of the model's law (uniform within each bin), from
  // the knots with +, -, *, / in a fixed order: the same bits everywhere.
  double mean() const { return mean_; }
  double variance() const { return variance_; }
  // The tables behind cdf and quantile_bins (for SIMD forms of them).
  double inv_width() const { return inv_width_; }
  const double* knot_table() const { return knot_.data(); }
  const double* slope_table() const { return slope_.data(); }
  const double* quantile_table() const { return quantile_.data(); }
  const std::array<std::uint32_t, kBins + 1>& knots() const { return knots_; }

 private:
  void set_range(double a) {
    a_ = a;
    inv_width_ = static_cast<double>(kBins) / (2.0 * a);
  }
  // Fills the derived tables from knots_.
  void derive();

  double a_ = 1.0;
  double inv_width_ = kBins / 2.0;
  std::array<std::uint32_t, kBins + 1> knots_{};  // c_0 = 0 .. c_K = 2^12
  // Derived: knot_[i] = c_i and slope_[i] = c_{i+1} - c_i as doubles (the
  // values cdf computes from the integers); the quantile table.
  std::array<double, kBins + 1> knot_{};
  std::array<double, kBins> slope_{};
  std::array<double, kKnotScale> quantile_{};
  double mean_ = 0.0, variance_ = 0.0;
};

}  // namespace cepam
