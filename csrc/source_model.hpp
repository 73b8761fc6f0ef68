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
  template <class T>
  static SourceModel fit(const T* x, std::size_t m, double factor);

  // Serialises / parses the model (parse throws FormatError on bad input
  // and advances *pos).
  void serialize(std::vector<std::uint8_t>& out) const;
  static SourceModel parse(const std::uint8_t* data, std::size_t len, std::size_t* pos);

  // P(X <= x) under the model, in [0, 1].
  double cdf(double x) const {
    if (!(x > -a_)) return 0.0;
    if (!(x < a_)) return 1.0;
    const double u = (x + a_) * inv_width_;
    // u is in [0, K] for a valid model; the clamps also keep the index in
    // range should anything upstream misbehave.
    int i = u >= 0.0 ? (u < kBins - 1 ? static_cast<int>(u) : kBins - 1) : 0;
    const double lo = static_cast<double>(knots_[static_cast<std::size_t>(i)]);
    const double hi = static_cast<double>(knots_[static_cast<std::size_t>(i) + 1]);
    return (lo + (u - static_cast<double>(i)) * (hi - lo)) * (1.0 / kKnotScale);
  }
  double range() const { return a_; }
  const std::vector<std::uint32_t>& knots() const { return knots_; }

 private:
  void set_range(double a) {
    a_ = a;
    inv_width_ = static_cast<double>(kBins) / (2.0 * a);
  }
  double a_ = 1.0;
  double inv_width_ = kBins / 2.0;
  std::vector<std::uint32_t> knots_;
};

}  // namespace cepam
