#include "coding/source_model.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "coding/bitstream.hpp"
#include "coding/model_stats.hpp"
#include "random/detmath.hpp"
#include "common/cpu.hpp"
#include "common/errors.hpp"
#include "common/parallel.hpp"

namespace cepam {
namespace {

// The shapes (K, g) the encoder tries, in order (the first of the fewest
// estimated bits wins): 64 equal bins (the best fit to smooth, light-tailed
// sources), nearly equal ones, and fewer, geometrically widening bins for
// heavy tails and small payloads.
struct Shape {
  int bins, growth;
};
constexpr Shape kShapes[] = {{64, 0}, {64, 3}, {32, 0}, {32, 6},
                             {32, 13}, {32, 19}, {16, 13}, {16, 26}};

constexpr int kHeaderBytes = 8 + 1 + 1 + 1;  // A, K, g, code order

// -log2(p) for p in [2^-24, 1], to about 2e-5 bits (for estimates only,
// but deterministic: the estimates choose the payload's model): the
// exponent, plus log2 of the significand f in [1, 2) interpolated linearly
// in a table of 2^7 intervals (computed with detmath::log).
struct Log2Table {
  static constexpr int kBits = 7;
  std::array<double, (1 << kBits) + 1> value;
  Log2Table() {
    const double inv_log2 = 1.0 / detmath::log(2.0);
    for (int k = 0; k <= 1 << kBits; ++k)
      value[static_cast<std::size_t>(k)] = detmath::log(1.0 + k / double{1 << kBits}) * inv_log2;
  }
};

inline double neg_log2(double p) {
  static const Log2Table table;
  const std::uint64_t u = detmath::bits_of(p);
  const int e = static_cast<int>(u >> 52) - 1023;
  const std::uint64_t frac = u & ((std::uint64_t{1} << 52) - 1);
  const int k = static_cast<int>(frac >> (52 - Log2Table::kBits));
  // The position inside interval k, in [0, 1).
  const double r = static_cast<double>(frac & ((std::uint64_t{1} << (52 - Log2Table::kBits)) - 1)) *
                   (1.0 / static_cast<double>(std::uint64_t{1} << (52 - Log2Table::kBits)));
  const double lo = table.value[static_cast<std::size_t>(k)];
  return -(e + lo + r * (table.value[static_cast<std::size_t>(k) + 1] - lo));
}


// Elements per task of the passes over x in fit.
constexpr std::size_t kFitChunk = std::size_t{1} << 16;

// The passes over x (model_stats::max_abs, model_stats::cell of each
// element): loops the compiler vectorises, compiled also for AVX-512 (DQ)
// where the CPU has it; the same maximum and cells on every level (the same
// IEEE operations on each element).
template <class T>
inline void cell_loop(const T* x, std::size_t n, double factor, double a, double inv_width,
                      std::int32_t* cells) {
  for (std::size_t i = 0; i < n; ++i) cells[i] = model_stats::cell(x[i], factor, a, inv_width);
}

#if CEPAM_X86_DISPATCH
CEPAM_TARGET_AVX512DQ float max_abs_avx512(const float* x, std::size_t m) {
  return model_stats::max_abs(x, m);
}
CEPAM_TARGET_AVX512DQ double max_abs_avx512(const double* x, std::size_t m) {
  return model_stats::max_abs(x, m);
}
CEPAM_TARGET_AVX512DQ void cells_avx512(const float* x, std::size_t n, double factor, double a,
                                        double inv_width, std::int32_t* cells) {
  cell_loop(x, n, factor, a, inv_width, cells);
}
CEPAM_TARGET_AVX512DQ void cells_avx512(const double* x, std::size_t n, double factor, double a,
                                        double inv_width, std::int32_t* cells) {
  cell_loop(x, n, factor, a, inv_width, cells);
}
#endif

template <class T>
T largest_magnitude(const T* x, std::size_t m) {
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return max_abs_avx512(x, m);
#endif
  return model_stats::max_abs(x, m);
}

template <class T>
void grid_cells(const T* x, std::size_t n, double factor, double a, double inv_width,
                std::int32_t* cells) {
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return cells_avx512(x, n, factor, a, inv_width, cells);
#endif
  cell_loop(x, n, factor, a, inv_width, cells);
}

// Adds to counts[c] the number of i < m whose x[i] factor falls in grid
// cell c of a model of range a (model_stats::cell), a chunk at a time in a
// loop the compiler vectorises; then counted in four partial histograms.
template <class T>
void count_cells(const T* x, std::size_t m, double factor, double a, double inv_width,
                 std::uint64_t* counts) {
  constexpr std::size_t kCells = SourceModel::kCells;
  if (m <= 64) {  // a small update: straight into counts (the same integers)
    for (std::size_t i = 0; i < m; ++i) ++counts[model_stats::cell(x[i], factor, a, inv_width)];
    return;
  }
  std::vector<std::uint64_t> part(4 * kCells, 0);
  std::uint64_t* const part0 = part.data();
  std::uint64_t* const part1 = part0 + kCells;
  std::uint64_t* const part2 = part1 + kCells;
  std::uint64_t* const part3 = part2 + kCells;
  constexpr std::size_t kChunk = 512;
  std::int32_t cells[kChunk];
  for (std::size_t i0 = 0; i0 < m; i0 += kChunk) {
    const std::size_t n = m - i0 < kChunk ? m - i0 : kChunk;
    grid_cells(x + i0, n, factor, a, inv_width, cells);
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
      ++part0[cells[i]];
      ++part1[cells[i + 1]];
      ++part2[cells[i + 2]];
      ++part3[cells[i + 3]];
    }
    for (; i < n; ++i) ++part0[cells[i]];
  }
  for (std::size_t c = 0; c < kCells; ++c) counts[c] += part0[c] + part1[c] + part2[c] + part3[c];
}

}  // namespace

template <class T>
SourceModel::Statistics SourceModel::statistics(const T* x, std::size_t m, double factor,
                                                int threads, double peak) {
  static_assert(kCells == model_stats::kCells);
  Statistics stats;
  const std::size_t chunks = m / kFitChunk + (m % kFitChunk != 0 ? 1 : 0);
  const auto chunk_size = [&](std::size_t c) { return m - c * kFitChunk < kFitChunk ? m - c * kFitChunk : kFitChunk; };
  // The largest magnitude: the caller's, else a maximum per chunk, then
  // theirs (the comparisons skip NaN).
  const auto largest = [&]() -> double {
    if (peak >= 0.0) return peak;
    if (chunks <= 1) {
      const T top = m != 0 ? largest_magnitude(x, m) : T(0);
      return static_cast<double>(top > T(0) ? top : T(0));
    }
    std::vector<T> maxima(chunks, T(0));
    parallel_for(threads, chunks, [&](std::size_t c) {
      maxima[c] = largest_magnitude(x + c * kFitChunk, chunk_size(c));
    });
    T xmax = 0;
    for (const T v : maxima) xmax = v > xmax ? v : xmax;
    return static_cast<double>(xmax);
  };
  stats.range = model_stats::range(largest(), factor);
  if (chunks <= 1) {  // one chunk (a small update): no tasks, no partial counts
    count_cells(x, m, factor, stats.range, model_stats::inv_width(stats.range),
                stats.counts.data());
    return stats;
  }
  const double inv_width = model_stats::inv_width(stats.range);
  // The histogram of the grid cells: chunks counted in parallel, their
  // counts summed (in any order: integers).
  std::mutex adding;
  parallel_for(threads, chunks, [&](std::size_t c) {
    std::vector<std::uint64_t> local(kCells, 0);
    count_cells(x + c * kFitChunk, chunk_size(c), factor, stats.range, inv_width, local.data());
    const std::lock_guard<std::mutex> lock(adding);
    for (std::size_t k = 0; k < kCells; ++k) stats.counts[k] += local[k];
  });
  return stats;
}

template <class T>
SourceModel SourceModel::fit(const T* x, std::size_t m, double factor, double cell_lo,
                             double cell_hi, int threads, bool quantiles, double peak) {
  return fit_from(statistics(x, m, factor, threads, peak), cell_lo, cell_hi, quantiles);
}

SourceModel SourceModel::fit_from(const Statistics& stats, double cell_lo, double cell_hi,
                                  bool quantiles) {
  SourceModel model;
  model.set_range(stats.range);
  const std::array<std::uint64_t, kCells>& counts = stats.counts;
  std::uint64_t m = 0;
  for (const std::uint64_t k : counts) m += k;
  if (m == 0) {  // no data: a uniform model
    model.set_shape(kMaxBins, 0);
    for (int b = 0; b <= kMaxBins; ++b)
      model.knots_[static_cast<std::size_t>(b)] = static_cast<std::uint32_t>(b) * (kKnotScale / kMaxBins);
    model.derive(quantiles);
    return model;
  }
  // The cumulative counts at the cell edges; the occupied groups of 2^s
  // cells, 2^s the largest power of two (up to 8) not above a quarter of the
  // smaller coding cell (finer detail is smoothed away), as their first
  // cells and counts.
  std::array<std::uint64_t, kCells + 1> cum;
  cum[0] = 0;
  for (std::size_t c = 0; c < kCells; ++c)
    cum[c + 1] = cum[c] + counts[c];
  const double w_lo = cell_lo * model.inv_width_, w_hi = cell_hi * model.inv_width_;
  std::size_t group = 1;
  while (group < 8 && 4.0 * static_cast<double>(group) <= w_lo) group *= 2;
  std::array<std::uint16_t, kCells> occupied;
  std::array<std::uint64_t, kCells> occupancy;
  std::size_t n_occupied = 0;
  for (std::size_t c = 0; c < kCells; c += group) {
    const std::uint64_t k = cum[c + group] - cum[c];
    if (k == 0) continue;
    occupied[n_occupied] = static_cast<std::uint16_t>(c);
    occupancy[n_occupied++] = k;
  }
  // The coding cells' widths in grid cells, at least one (below that, the
  // estimates of the shapes differ by about a constant; also for NaN).
  const double lo = w_lo > 1.0 ? w_lo : 1.0, hi = w_hi > 1.0 ? w_hi : 1.0;
  // The estimates read the grid at 8 points an occupied group: with few
  // groups (small updates) each point is computed from the knots rather
  // than the whole grid tabulated for each shape (the same values).
  const bool tabulated = n_occupied > kCells / 16;
  // The model's own bits first, for every shape; then the data's estimate,
  // shapes in order of their model bits, skipping those whose model alone
  // costs more than the best total so far (the estimate is never negative,
  // so they cannot win, nor tie): the choice of the loop over every shape
  // in kShapes order (fewest bits, the first of a tie), with fewer
  // estimates where the model dominates (small updates).
  // (Each shape's edges are computed once per process, its knots once per
  // fit, and put back when the shape is estimated and when it is chosen.)
  constexpr std::size_t kCount = sizeof kShapes / sizeof kShapes[0];
  // Each shape's edges and the bin of each grid cell (e_b <= c < e_{b+1}),
  // computed once per process.
  using Edges = std::array<std::uint16_t, kMaxBins + 1>;
  using Bins = std::array<std::uint8_t, kCells>;
  struct Shaped {
    std::array<Edges, kCount> edges;
    std::array<Bins, kCount> bin_of;
  };
  static const Shaped kShaped = [] {
    Shaped shaped;
    SourceModel shaper;
    for (std::size_t k = 0; k < kCount; ++k) {
      shaper.set_shape(kShapes[k].bins, kShapes[k].growth);
      shaped.edges[k] = shaper.edges_;
      for (int b = 0; b < kShapes[k].bins; ++b)
        for (int c = shaper.edges_[static_cast<std::size_t>(b)];
             c < shaper.edges_[static_cast<std::size_t>(b) + 1]; ++c)
          shaped.bin_of[k][static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(b);
    }
    return shaped;
  }();
  // A small update's knots take one of m + 1 values (a cumulative count
  // over m): each computed once, by knot_of, for every shape.
  std::array<std::uint32_t, kCells + 1> knot_by_count;
  const bool few = m <= kCells;
  if (few)
    for (std::uint64_t c = 0; c <= m; ++c) knot_by_count[c] = knot_of(c, static_cast<double>(m));
  std::array<std::array<std::uint32_t, kMaxBins + 1>, kCount> knots;
  const auto use_shape = [&](std::size_t k) {
    model.bins_ = kShapes[k].bins;
    model.growth_ = kShapes[k].growth;
    model.edges_ = kShaped.edges[k];
  };
  const auto use_fitted = [&](std::size_t k) {  // (after the first pass)
    use_shape(k);
    model.knots_ = knots[k];
  };
  std::array<double, kCount> model_bits;
  std::array<std::size_t, kCount> order;
  for (std::size_t k = 0; k < kCount; ++k) {
    use_shape(k);
    model.set_knots(cum.data(), few ? knot_by_count.data() : nullptr);
    knots[k] = model.knots_;
    model_bits[k] = static_cast<double>(model.serialized_bits());
    order[k] = k;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return model_bits[a] < model_bits[b]; });
  std::size_t best_k = kCount;
  double best_bits = 0.0;
  for (const std::size_t k : order) {
    if (best_k != kCount && model_bits[k] > best_bits) break;  // (sorted: so are the rest)
    use_fitted(k);
    if (tabulated) model.tabulate();
    const double bits = model.estimate_bits(occupied.data(), occupancy.data(), n_occupied,
                                            static_cast<double>(group), lo, hi,
                                            tabulated ? nullptr : kShaped.bin_of[k].data()) +
                        model_bits[k];
    if (best_k == kCount || bits < best_bits || (bits == best_bits && k < best_k)) {
      best_k = k;
      best_bits = bits;
    }
  }
  use_fitted(best_k);
  model.derive(quantiles);
  return model;
}

void SourceModel::set_shape(int bins, int growth) {
  bins_ = bins;
  growth_ = growth;
  constexpr int kHalf = kCells / 2;
  const int half = bins / 2;
  const double r = 1.0 + growth / 32.0;
  std::array<double, kMaxBins / 2 + 1> P;
  P[0] = 0.0;
  for (int k = 0; k < half; ++k) P[static_cast<std::size_t>(k) + 1] = P[static_cast<std::size_t>(k)] * r + 1.0;
  std::array<int, kMaxBins / 2 + 1> h;
  h[0] = 0;
  for (int k = 1; k <= half; ++k) {
    const int v = static_cast<int>(std::floor(kHalf * P[static_cast<std::size_t>(k)] / P[static_cast<std::size_t>(half)] + 0.5));
    h[static_cast<std::size_t>(k)] = v > h[static_cast<std::size_t>(k) - 1] ? v : h[static_cast<std::size_t>(k) - 1] + 1;
  }
  h[static_cast<std::size_t>(half)] = kHalf;
  for (int k = half - 1; k >= 1; --k) {
    const int up = h[static_cast<std::size_t>(k) + 1] - 1;
    if (h[static_cast<std::size_t>(k)] > up) h[static_cast<std::size_t>(k)] = up;
  }
  for (int k = 0; k <= half; ++k) {
    edges_[static_cast<std::size_t>(half + k)] = static_cast<std::uint16_t>(kHalf + h[static_cast<std::size_t>(k)]);
    edges_[static_cast<std::size_t>(half - k)] = static_cast<std::uint16_t>(kHalf - h[static_cast<std::size_t>(k)]);
  }
}

void SourceModel::set_knots(const std::uint64_t* cum, const std::uint32_t* knot_by_count) {
  const double total = static_cast<double>(cum[kCells]);
  knots_[0] = 0;
  for (int b = 1; b < bins_; ++b) {
    const std::uint64_t count = cum[edges_[static_cast<std::size_t>(b)]];
    knots_[static_cast<std::size_t>(b)] =
        knot_by_count != nullptr ? knot_by_count[count] : knot_of(count, total);
  }
  knots_[static_cast<std::size_t>(bins_)] = kKnotScale;
}

namespace {

// The grid table and the quantile lines of a model (tabulate, derive):
// loops the compiler vectorises, compiled also for AVX-512 (DQ: 64-bit
// integer conversions) where the CPU has it.  The grid values are exact
// integers either way; the quantiles only guide the decoder's search.
struct Lines {
  int bins;
  const std::uint16_t* edges;  // e_0 .. e_K, in cells
  const std::uint32_t* knots;  // c_0 .. c_K, in units of 2^-12
};

inline void grid_loop(const Lines& l, double* knot, double* slope, std::uint64_t* packed) {
  // C_i = c_b 2^10 + floor((i - e_b) d / w) in bin b, d = (c_{b+1} - c_b)
  // 2^10, w = e_{b+1} - e_b: exact integers, non-decreasing, C_{e_b} =
  // c_b 2^10.  x = (i - e_b) d < 2^32 is exact as a double, and so is every
  // step below.  x (1 / w) is within 2^-20 of x / w, whose fraction is 0 or
  // at least 1 / w >= 2^-10: its truncation q is the floor, or one below
  // it where x / w is an integer, which the exact remainder r = x - q w = w
  // tells.  The slope C_{i+1} - C_i comes from the same bin's formula at
  // i + 1 (at i + 1 = e_{b+1} it gives d, C_{e_{b+1}} = c_{b+1} 2^10), not
  // from the table (read back there, from values just stored a few at a
  // time per bin, each vector load straddled two stores and waited for
  // both), and not from a second quotient: with k = floor(d / w) and
  // s = d - k w, floor((x + d) / w) = q + k + [r + s >= w], r = x - q w
  // (both remainders in [0, w), so their sum is below 2w).
  constexpr int kShift = SourceModel::kTableBits - SourceModel::kKnotBits;
  for (int b = 0; b < l.bins; ++b) {
    const std::uint32_t e0 = l.edges[b];
    const std::uint32_t width = l.edges[b + 1] - e0;
    const std::uint32_t di = (l.knots[b + 1] - l.knots[b]) << kShift;
    const double d = static_cast<double>(di);
    const double w = static_cast<double>(width), inv = 1.0 / w;
    const double k = static_cast<double>(di / width), s = static_cast<double>(di % width);
    const double base = static_cast<double>(l.knots[b] << kShift);
    double* const at = knot + e0;
    double* const rise = slope + e0;
    std::uint64_t* const word = packed + e0;
    for (std::uint32_t i = 0; i < width; ++i) {
      const double x = static_cast<double>(static_cast<std::int32_t>(i)) * d;
      double q = static_cast<double>(static_cast<std::int64_t>(x * inv));
      double r = x - q * w;
      if (r >= w) {
        q += 1.0;
        r -= w;
      }
      const double step = r + s >= w ? k + 1.0 : k;
      at[i] = base + q;
      rise[i] = step;
      // (both integers in [0, 2^22]: exact as int64, packed as uint32 halves)
      word[i] = static_cast<std::uint64_t>(static_cast<std::int64_t>(base + q)) |
                static_cast<std::uint64_t>(static_cast<std::int64_t>(step)) << 32;
    }
  }
  knot[SourceModel::kCells] = SourceModel::kTableScale;
}

inline void quantile_loop(const Lines& l, double* quantile, std::uint64_t* line) {
  // Level l + 1/2 (in units of 2^-12) lies in bin b when c_b <= l < c_{b+1}
  // (integer knots; every level in one bin, c_0 = 0 and c_K = 2^12), where
  // the model's CDF runs linearly from c_b at edge e_b to c_{b+1} at
  // e_{b+1}: its quantile is e_b + (l - c_b + 1/2) (e_{b+1} - e_b) /
  // (c_{b+1} - c_b) cells.  The grid table holds that line floored to
  // 2^-22, so this is within a thousandth of a cell of the grid's own
  // inverse, and only a guess (cell_guess: any value is a valid one; the
  // decoded symbols never depend on it).  A division a bin: most of a small
  // update's decode was the division a level of the grid's inverse (4,096
  // of them, about 4 us).  line: the lines again, from each level's start
  // (SourceModel::quantile_line_table).
  for (int b = 0; b < l.bins; ++b) {
    const std::uint32_t lo = l.knots[b], hi = l.knots[b + 1];
    if (hi == lo) continue;
    const double edge = l.edges[b];
    const double scale = static_cast<double>(l.edges[b + 1] - l.edges[b]) /
                         static_cast<double>(hi - lo);
    const auto count = static_cast<int>(hi - lo);
    double* out = quantile + lo;
    for (int k = 0; k < count; ++k) out[k] = edge + (k + 0.5) * scale;
    // The slope rounded to nearest (scale 2^20 + 1/2 >= 0: truncation is
    // floor); the starts in integers from the edge (below 2^30 + 2^11).
    const auto slope = static_cast<std::uint64_t>(scale * (1 << SourceModel::kLineBits) + 0.5);
    const std::uint64_t start = static_cast<std::uint64_t>(l.edges[b]) << SourceModel::kLineBits;
    std::uint64_t* at = line + lo;
    for (std::uint64_t k = 0; k < static_cast<std::uint64_t>(count); ++k)
      at[k] = (start + k * slope) | slope << 32;
  }
}

#if CEPAM_X86_DISPATCH
CEPAM_TARGET_AVX512DQ void grid_avx512(const Lines& l, double* knot, double* slope,
                                       std::uint64_t* packed) {
  grid_loop(l, knot, slope, packed);
}
CEPAM_TARGET_AVX512DQ void quantile_avx512(const Lines& l, double* quantile,
                                           std::uint64_t* line) {
  quantile_loop(l, quantile, line);
}
#endif

// The grid tables, in their AVX-512 form where it runs.
void grid(const Lines& l, double* knot, double* slope, std::uint64_t* packed) {
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return grid_avx512(l, knot, slope, packed);
#endif
  grid_loop(l, knot, slope, packed);
}

}  // namespace

void SourceModel::tabulate() {
  grid(Lines{bins_, edges_.data(), knots_.data()}, knot_.data(), slope_.data(),
       knot_slope_.data());
}

void SourceModel::table_values(int i, int lo, double* at, double* next) const {
  // tabulate's C_i: in bin b (e_b <= i < e_{b+1}), c_b 2^10 + floor((i - e_b) d / width),
  // and C_{i+1} by the same bin's formula (at i + 1 = e_{b+1} it gives c_{b+1} 2^10).
  // (i - e_b) d < 2^32 and width <= 2^10: the double quotient's floor is the
  // integer one (a quotient that is no integer is 2^-10 or more from one,
  // beyond the rounding error, below 2^-21).
  constexpr int kShift = kTableBits - kKnotBits;
  const std::uint32_t e0 = edges_[static_cast<std::size_t>(lo)];
  const double width = edges_[static_cast<std::size_t>(lo) + 1] - e0;
  const std::uint32_t c = knots_[static_cast<std::size_t>(lo)];
  const std::uint64_t d = static_cast<std::uint64_t>(knots_[static_cast<std::size_t>(lo) + 1] - c) << kShift;
  const std::uint64_t off = static_cast<std::uint32_t>(i) - e0;
  const double base = static_cast<double>(c << kShift);
  *at = base + static_cast<double>(static_cast<std::uint64_t>(static_cast<double>(off * d) / width));
  *next = base + static_cast<double>(static_cast<std::uint64_t>(static_cast<double>((off + 1) * d) / width));
}

void SourceModel::derive(bool quantiles) {
  tabulate();
  if (!quantiles) return;
  const Lines lines{bins_, edges_.data(), knots_.data()};
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return quantile_avx512(lines, quantile_.data(), quantile_line_.data());
#endif
  quantile_loop(lines, quantile_.data(), quantile_line_.data());
}

void SourceModel::moments(double* mean, double* variance) const {
  // Grid cell i, of width w = 2A / kCells and weight slope_i 2^-22, has
  // mean -A + (i + 1/2) w and variance w^2 / 12.
  const double w = 2.0 * a_ / kCells;
  double m1 = 0.0, m2 = 0.0;
  for (int c = 0; c < kCells; ++c) {
    const double centre = (static_cast<double>(c) + 0.5) * w - a_;
    const double p = slope_[c] * (1.0 / kTableScale);
    m1 += p * centre;
    m2 += p * (centre * centre);
  }
  *mean = m1;
  const double var = m2 - m1 * m1 + w * w * (1.0 / 12.0);
  *variance = var > 0.0 ? var : 0.0;
}

double SourceModel::estimate_bits(const std::uint16_t* cells, const std::uint64_t* counts,
                                  std::size_t count, double group, double w_lo,
                                  double w_hi, const std::uint8_t* bin_of) const {
  // F on the grid (u in cells), in units of 2^-22.
  const auto grid = [this, bin_of](double u) {
    if (!(u > 0.0)) return 0.0;
    if (!(u < kCells)) return static_cast<double>(kTableScale);
    const int i = static_cast<int>(u);
    if (bin_of == nullptr) return knot_[i] + (u - i) * slope_[i];
    double c, next;
    table_values(i, bin_of[i], &c, &next);
    return c + (u - i) * (next - c);
  };
  // -log2 of the model's probability of [t - a, t + b], at least 2^-24.
  const auto cost = [&grid](double t, double a, double b) {
    const double p = (grid(t + b) - grid(t - a)) * (1.0 / kTableScale);
    return neg_log2(p > 0x1.0p-24 ? p : 0x1.0p-24);
  };
  // A coordinate x lies anywhere in its coding cell: cells of two widths,
  // each with x at a quarter and at three quarters of it.
  double bits = 0.0;
  for (std::size_t k = 0; k < count; ++k) {
    const double t = cells[k] + 0.5 * group;
    const double c = cost(t, 0.25 * w_lo, 0.75 * w_lo) + cost(t, 0.75 * w_lo, 0.25 * w_lo) +
                     cost(t, 0.25 * w_hi, 0.75 * w_hi) + cost(t, 0.75 * w_hi, 0.25 * w_hi);
    bits += static_cast<double>(counts[k]) * c;
  }
  return 0.25 * bits;
}

int SourceModel::knot_order(std::uint64_t* bits) const {
  // Increments d_b = c_{b+1} - c_b for b < K - 1 (the last is implied), with
  // an exp-Golomb code whose order k (0 .. kKnotBits) is chosen to minimise
  // the length: the first order of the fewest bits.  At order k, d takes
  // 2 bitlen(d + 2^k) - k - 1 bits.  With L = bitlen(d) (0 for d = 0, at
  // most kKnotBits + 1), bitlen(d + 2^k) is k + 1 for k >= L; for k < L it
  // is L, or L + 1 once 2^k >= 2^L - d, that is for k >= t = bitlen(2^L -
  // d - 1) (t < L).  So the length at order k is
  //   (k + 1) #{L <= k} + sum_{L > k} (2 L - 1 - k) + 2 #{t <= k < L},
  // every order's from the counts of L and t: one pass over the increments
  // (a small update's fit computes this for each of its shapes, and the
  // code of each increment at each order took a tenth of its encode).
  constexpr int kOrders = kKnotBits + 1;
  std::array<std::uint32_t, kOrders + 1> by_length{};  // #{L = l}, l <= kKnotBits + 1
  std::array<std::uint32_t, kOrders> by_start{};       // #{t = l} (d > 0)
  std::uint64_t longer = 0;  // sum over the increments of 2 L - 1 (d > 0)
  for (int b = 0; b + 1 < bins_; ++b) {
    const std::uint32_t lo = knots_[static_cast<std::size_t>(b)];
    const std::uint32_t hi = knots_[static_cast<std::size_t>(b) + 1];
    // (knots rise within [0, 2^12]: fit's and parse's own; the counts'
    // indices below rely on it)
    if (hi < lo || hi > kKnotScale) throw InvalidArgument("source model knots out of order");
    const std::uint64_t d = hi - lo;
    const int length = d == 0 ? 0 : 64 - count_leading_zeros(d);
    ++by_length[static_cast<std::size_t>(length)];
    if (d == 0) continue;
    const std::uint64_t gap = (std::uint64_t{1} << length) - d - 1;
    ++by_start[static_cast<std::size_t>(gap == 0 ? 0 : 64 - count_leading_zeros(gap))];
    longer += static_cast<std::uint64_t>(2 * length - 1);
  }
  const std::uint64_t count = static_cast<std::uint64_t>(bins_ - 1);
  std::uint64_t at_most = by_length[0];  // #{L <= k}
  std::uint64_t started = 0;             // #{t <= k}
  std::uint64_t at_most_nonzero = 0;     // #{0 < L <= k}
  int best_k = 0;
  std::uint64_t best = ~std::uint64_t{0};
  for (int k = 0; k < kOrders; ++k) {
    const auto kk = static_cast<std::uint64_t>(k);
    if (k > 0) {
      at_most += by_length[static_cast<std::size_t>(k)];
      at_most_nonzero += by_length[static_cast<std::size_t>(k)];
      longer -= static_cast<std::uint64_t>(by_length[static_cast<std::size_t>(k)]) *
                static_cast<std::uint64_t>(2 * k - 1);
    }
    started += by_start[static_cast<std::size_t>(k)];
    const std::uint64_t len = (kk + 1) * at_most + longer - kk * (count - at_most) +
                              2 * (started - at_most_nonzero);
    if (len < best) {
      best = len;
      best_k = k;
    }
  }
  *bits = best;
  return best_k;
}

std::uint64_t SourceModel::serialized_bits() const {
  std::uint64_t bits;
  knot_order(&bits);
  return 8 * (kHeaderBytes + (bits + 7) / 8);
}

void SourceModel::serialize(std::vector<std::uint8_t>& out) const {
  std::uint64_t bits;
  std::memcpy(&bits, &a_, sizeof bits);
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<std::uint8_t>(bits >> (8 * b)));
  out.push_back(static_cast<std::uint8_t>(bins_));
  out.push_back(static_cast<std::uint8_t>(growth_));
  const int order = knot_order(&bits);
  out.push_back(static_cast<std::uint8_t>(order));
  BitWriter w(out);
  for (int b = 0; b + 1 < bins_; ++b) {
    const std::uint64_t u = static_cast<std::uint64_t>(knots_[static_cast<std::size_t>(b) + 1] -
                                                       knots_[static_cast<std::size_t>(b)]) +
                            (std::uint64_t{1} << order);
    const int len = 64 - count_leading_zeros(u);
    w.put_zeros(static_cast<std::uint64_t>(len - order - 1));
    w.put(u, len);
  }
  w.finish();
}

SourceModel SourceModel::parse(const std::uint8_t* data, std::size_t len, std::size_t* pos,
                               bool tables) {
  std::size_t p = *pos;
  if (len < p || len - p < kHeaderBytes) throw FormatError("source model truncated");
  std::uint64_t bits = 0;
  for (int b = 7; b >= 0; --b) bits = (bits << 8) | data[p + static_cast<std::size_t>(b)];
  double a;
  std::memcpy(&a, &bits, sizeof a);
  if (!(a > 0.0) || !std::isfinite(2.0 * a) || !std::isfinite(kCells / (2.0 * a)) ||
      !(kCells / (2.0 * a) > 0.0))
    throw FormatError("source model range out of bounds");
  const int bins = data[p + 8];
  if (bins < 2 || bins > kMaxBins || bins % 2 != 0)
    throw FormatError("source model bin count out of range");
  const int growth = data[p + 9];
  if (growth > kMaxGrowth) throw FormatError("source model growth out of range");
  const int k = data[p + 10];
  if (k > kKnotBits) throw FormatError("source model code order out of range");
  p += kHeaderBytes;
  SourceModel model;
  model.set_range(a);
  model.set_shape(bins, growth);
  // Each code is at most 2 * 13 + 1 bits; the reader stops at the end of data.
  BitReader r(data + p, 8 * static_cast<std::uint64_t>(len - p));
  std::uint32_t cum = 0;
  for (int b = 0; b + 1 < bins; ++b) {
    const std::uint64_t zeros = r.zeros_then_one(static_cast<std::uint64_t>(kKnotBits + 1));
    const int nbits = static_cast<int>(zeros) + k;
    const std::uint64_t v = ((std::uint64_t{1} << nbits) | r.get(nbits)) - (std::uint64_t{1} << k);
    if (v > kKnotScale - cum) throw FormatError("source model knots exceed the scale");
    cum += static_cast<std::uint32_t>(v);
    model.knots_[static_cast<std::size_t>(b) + 1] = cum;
  }
  model.knots_[static_cast<std::size_t>(bins)] = kKnotScale;
  if (tables) model.derive();
  const std::uint64_t used = (r.position() + 7) / 8;
  const int pad = static_cast<int>(used * 8 - r.position());
  if (pad > 0 && (data[p + used - 1] & ((1u << pad) - 1)) != 0)
    throw FormatError("source model has non-zero padding");
  *pos = p + static_cast<std::size_t>(used);
  return model;
}

template SourceModel SourceModel::fit<float>(const float*, std::size_t, double, double, double,
                                             int, bool, double);
template SourceModel::Statistics SourceModel::statistics<float>(const float*, std::size_t, double,
                                                                int, double);
template SourceModel::Statistics SourceModel::statistics<double>(const double*, std::size_t,
                                                                 double, int, double);
template SourceModel SourceModel::fit<double>(const double*, std::size_t, double, double, double,
                                              int, bool, double);

}  // namespace cepam
