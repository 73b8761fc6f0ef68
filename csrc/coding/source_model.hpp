// The source model of the entropy coder: the law of one coordinate of the
// (clipped) update, as a piecewise-linear CDF on [-A, A].
//
// A is the largest |x|.  [-A, A] is cut into a grid of kCells = 1024 equal
// cells; the model's K bins (K even, 2 .. 64) are runs of cells, placed
// symmetrically about 0 by a growth parameter g: the half-edges are
// h_k = round(512 P_k / P_{K/2}) cells from the centre, P_0 = 0,
// P_{k+1} = r P_k + 1, r = 1 + g / 32 (made strictly increasing; see
// edges()).  g = 0 gives equal bins; g > 0 bins that widen geometrically
// away from 0, which fit heavy-tailed updates (a few large coordinates,
// most near zero) far better: on MNIST CNN updates 0.2 bits per coordinate
// less than 64 equal bins, with half the knots to send.  The knot values
// c_0 = 0 <= c_1 <= ... <= c_K = 2^12 are the empirical CDF at the bin
// edges, in units of 2^-12.  The model travels in the payload body (A as
// float64, K, g, and the K - 1 free increments with an exp-Golomb code); the
// encoder fits several (K, g) and keeps the one of the fewest estimated
// bits, model included (fit).
//
// The CDF is linear inside a bin.  For evaluation it is tabulated on the
// grid, in integer units of 2^-22 (C_i at cell edge i, exact as doubles and
// non-decreasing), so cdf() is one table lookup and a linear interpolation
// whatever the bins, computed with +, -, * and truncation only: encoder and
// decoder compute the same bits.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "coding/symbol_core.hpp"

namespace cepam {

class SourceModel {
 public:
  static constexpr int kCells = 1024;     // evaluation grid on [-A, A]
  static constexpr int kMaxBins = 64;     // K <= kMaxBins, K even
  static constexpr int kMaxGrowth = 64;   // g <= kMaxGrowth (r <= 3)
  static constexpr int kKnotBits = 12;
  static constexpr std::uint32_t kKnotScale = 1u << kKnotBits;
  static constexpr int kTableBits = 22;   // grid values in units of 2^-22
  static constexpr std::uint32_t kTableScale = 1u << kTableBits;
  static_assert(kCells == kCdfCells && kTableScale == kCdfTableScale && kKnotBits == kCdfKnotBits,
                "symbol_core's copy");

  SourceModel() = default;

  // Fits the model to x[0..m) * factor (as the encoder sees the values).
  // cell_lo, cell_hi: a small and a large typical width of a coding cell
  // (beta G_kk, in the units of x * factor; two points of its law), for the
  // estimates of each candidate's cost.  Defined for any input; the values
  // of a model fitted to non-finite data do not matter (LRSUQ rejects such
  // data).
  // threads: how many threads may share the passes over x (the same model
  // for every count: the passes reduce to a maximum and integer counts).
  // quantiles: whether to compute the quantile table (quantile_cells),
  // which only a decoder reads (its guesses); an encoder's model may do
  // without it (the same model, the same bytes, 4096 divisions fewer).
  // peak: max |x[i]| where the caller has it from a pass of its own (the
  // clip's norm_pass, lrsuq/norm.hpp: exact for finite x), else negative
  // (statistics then takes it in a pass over x).
  template <class T>
  static SourceModel fit(const T* x, std::size_t m, double factor, double cell_lo,
                         double cell_hi, int threads = 1, bool quantiles = true,
                         double peak = -1.0);

  // What fit reduces x[0..m) * factor to (coding/model_stats.hpp): the
  // range A (model_stats::range of the largest |x| and the factor) and
  // counts[c], the number of coordinates in grid cell c (model_stats::cell);
  // the counts add up to m.
  struct Statistics {
    double range = 1.0;
    std::array<std::uint64_t, kCells> counts{};
  };
  template <class T>
  static Statistics statistics(const T* x, std::size_t m, double factor, int threads = 1,
                               double peak = -1.0);
  // The model fit gives for data of these statistics (computed anywhere:
  // a GPU's kernels give the same, cuda/model_gpu.cu), without the data.
  static SourceModel fit_from(const Statistics& stats, double cell_lo, double cell_hi,
                              bool quantiles = true);

  // Serialises / parses the model (parse throws FormatError on bad input
  // and advances *pos).  tables = false checks the model without computing
  // the tables that coding needs (a model only checked, never used).
  void serialize(std::vector<std::uint8_t>& out) const;
  static SourceModel parse(const std::uint8_t* data, std::size_t len, std::size_t* pos,
                           bool tables = true);

  // P(X <= x) under the model, in [0, 1] (at most a few ulps above 1 where
  // rounding puts x + A at the top edge):
  //   u = (x + A) kCells / (2A),  i = min(floor(u), kCells - 1),
  //   F = (C_i + (u - i) (C_{i+1} - C_i)) 2^-22.
  // If 2A overflows, u is 0 or NaN (x + A overflowing); NaN is taken as
  // the top of the range rather than converted to an index.
  double cdf(double x) const { return model_cdf(cdf_view(), x); }
  // The tables cdf reads (coding/symbol_core.hpp's model_cdf, shared with
  // a GPU), valid while the model lives.
  CdfView cdf_view() const { return CdfView{a_, inv_width_, knot_.data(), slope_.data()}; }

  // An approximate inverse of cdf, for search guesses only (never for a
  // coded value): the position u (in cells, as in cdf) where the model's
  // bins' lines (the CDF before the grid floors it) reach (level + 1/2)
  // 2^-12, for level < 2^12.  Not computed for a
  // model fitted with quantiles = false (an encoder's: never read).
  double quantile_cells(std::uint32_t level) const { return quantile_[level]; }
  // The same lines for a finer guess, one word a level (quantile_line_table):
  // in the high 32 bits the slope s of level's bin b (its cells a level,
  // (e_{b+1} - e_b) / (c_{b+1} - c_b), rounded to nearest), in the low its
  // start e_b + (level - c_b) s (within 2^-9 cells of the line's), both in
  // units of 2^-kLineBits cells (below 2^31).  The position of a slot low
  // 2^-12 of a level past its start is start + s low 2^-12.
  static constexpr int kLineBits = 20;

  double range() const { return a_; }
  int bins() const { return bins_; }
  int growth() const { return growth_; }
  // Mean and variance of the model's law (uniform within each grid cell),
  // from the grid table with +, -, *, / in a fixed order: the same bits
  // everywhere.  Computed at each call (a pass over the grid: only the
  // point model reads them, once per coder).
  void moments(double* mean, double* variance) const;
  // The bin edges e_0 .. e_K (in cells) and knots c_0 .. c_K (in units of
  // 2^-12), K = bins().
  const std::uint16_t* bin_edges() const { return edges_.data(); }
  const std::uint32_t* bin_knots() const { return knots_.data(); }
  // The tables behind cdf and quantile_cells (for SIMD forms of them).
  double inv_width() const { return inv_width_; }
  const double* knot_table() const { return knot_.data(); }
  const double* quantile_table() const { return quantile_.data(); }
  const std::uint64_t* quantile_line_table() const { return quantile_line_.data(); }
  // The grid value C_i = knot_table()[i] and its slope C_{i+1} - C_i,
  // integers below 2^23, in the low and high 32 bits of one word
  // (i < kCells): one table read a lookup for the SIMD forms (a gather is
  // among their costliest instructions).
  const std::uint64_t* knot_slope_table() const { return knot_slope_.data(); }

 private:
  void set_range(double a) {
    a_ = a;
    inv_width_ = static_cast<double>(kCells) / (2.0 * a);
  }
  // Sets K and g and the bin edges e_0 = 0 < ... < e_K = kCells (in cells).
  void set_shape(int bins, int growth);
  // Knot c_b from the cumulative count at its edge and the total m: the
  // count's share of 2^12, rounded to nearest.
  static std::uint32_t knot_of(std::uint64_t count, double total) {
    return static_cast<std::uint32_t>(
        std::floor(static_cast<double>(count) * kKnotScale / total + 0.5));
  }
  // Knots from the cumulative cell counts cum[0..kCells] (cum[kCells] = m);
  // knot_by_count (or nullptr): knot_of(c, m) for every c <= m, computed
  // once for the shapes of one fit.
  void set_knots(const std::uint64_t* cum, const std::uint32_t* knot_by_count = nullptr);
  // Fills the grid tables from the knots (tabulate), and the quantile
  // table (derive = tabulate + quantiles, unless quantiles is false).
  void tabulate();
  void derive(bool quantiles = true);
  // The shortest exp-Golomb order of the increments, and its length in bits.
  int knot_order(std::uint64_t* bits) const;
  std::uint64_t serialized_bits() const;
  // C_i and C_{i+1} (knot_[i] and knot_[i + 1] once tabulated) from the
  // knots alone, 0 <= i < kCells, in bin b (e_b <= i < e_{b+1}).
  void table_values(int i, int b, double* at, double* next) const;
  // Estimated bits of counts[k] coordinates at the centre of the group of
  // grid cells [cells[k], cells[k] + group), k < count, coded in cells of
  // widths w_lo and w_hi (in grid cells).
  // bin_of nullptr: from the grid tables (tabulated); else from
  // table_values, bin_of[i] the bin of grid cell i (the same bits, cheaper
  // where few groups are occupied).
  double estimate_bits(const std::uint16_t* cells, const std::uint64_t* counts, std::size_t count,
                       double group, double w_lo, double w_hi,
                       const std::uint8_t* bin_of) const;

  double a_ = 1.0;
  double inv_width_ = kCells / 2.0;
  int bins_ = kMaxBins;
  int growth_ = 0;
  std::array<std::uint16_t, kMaxBins + 1> edges_{};  // in cells
  std::array<std::uint32_t, kMaxBins + 1> knots_{};  // c_0 = 0 .. c_K = 2^12
  // Derived: knot_[i] = C_i and slope_[i] = C_{i+1} - C_i as doubles, and
  // the two packed (knot_slope_table); the quantile and line tables.  Left
  // uninitialised until derived (tabulate writes every knot, slope and
  // packed word, derive every quantile and line): a model is built on
  // every call, and zeroing the 88 KiB cost more than a small update's
  // coding.
  std::array<double, kCells + 1> knot_;
  std::array<double, kCells> slope_;
  std::array<std::uint64_t, kCells> knot_slope_;
  std::array<double, kKnotScale> quantile_;
  std::array<std::uint64_t, kKnotScale> quantile_line_;
};

}  // namespace cepam
