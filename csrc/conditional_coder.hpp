// Entropy models of the LRSUQ symbols, for the rANS coder.
//
// GeometricCoder: the trial index H ~ Geometric(p) exactly (p the lattice's
// acceptance probability), as an integer table for H = 1 .. kTable with an
// escape for larger H (raw 16 bits).
//
// CellCoder: one lattice coordinate j, conditional on what the decoder
// already knows.  Coordinate k of the sub-vector lies, given the latent
// (scale beta), the dither V_H and the coordinates already decoded, in the
// cell [g (j - 1/2) + o, g (j + 1/2) + o) of the source law F (see
// SourceModel), with g = beta G_kk and o = beta (sum_{i>k} G_ik m_i + V_k)
// for a lower-triangular basis G; exactly so on Z^n, approximately (the
// Voronoi cell is not a box) on the other lattices.  So
//   P(j) ~ F(g (j + 1/2) + o) - F(g (j - 1/2) + o)
// over the cells meeting [-A, A] (plus a margin), as a cumulative table
// computed on the fly: cum(q) = floor(F(edge_q) R) + q, which gives every
// symbol a frequency of at least 1 and is monotone by construction.  When
// there are more than kMaxSymbols cells (tiny beta), 2^shift neighbouring
// cells form one coarse symbol and the offset inside it is sent raw: the
// source density is flat on that scale.  Values outside the table (possible
// off Z^n) take an escape symbol and a raw code.
#pragma once

#include <cmath>
#include <cstdint>

#include "errors.hpp"
#include "rans.hpp"
#include "source_model.hpp"

namespace cepam {

class GeometricCoder {
 public:
  static constexpr int kTable = 64;

  explicit GeometricCoder(double p);
  bool coded() const { return coded_; }
  void encode(std::uint32_t h, AnsEncoder& enc) const;
  std::uint32_t decode(AnsDecoder& dec) const;

 private:
  bool coded_;
  std::uint32_t cum_[kTable + 2];  // cum_[h - 1] .. ; cum_[kTable] is the escape's start
};

class CellCoder {
 public:
  static constexpr std::int64_t kMaxSymbols = 1 << 12;
  static constexpr std::int64_t kMargin = 2;

  explicit CellCoder(const SourceModel& model) : model_(model) {}

  void encode(std::int64_t j, double g, double o, AnsEncoder& enc) const;
  std::int64_t decode(double g, double o, AnsDecoder& dec) const;

 private:
  struct Layout {
    std::int64_t lo, hi;  // fine cells [lo, hi]
    int shift;            // coarse symbol = 2^shift fine cells
    std::int64_t count;   // coarse symbols Q
    double g, o;
    std::uint32_t range;  // R = 2^kProbBits - Q - 1
  };
  Layout layout(double g, double o) const;
  std::uint32_t cum(const Layout& l, std::int64_t q) const;

  const SourceModel& model_;
};

}  // namespace cepam
