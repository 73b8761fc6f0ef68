// The lattice table: every lattice of the core written once, with its
// payload code (LatticeId), name, dimension and geometry, and the one
// dispatch from a LatticeId to the lattice's type (its kernels).
//
// Adding a lattice: a type with the interface of lattice/lattice.hpp, a
// LatticeId value, a row in kLattices (its input bound among its facts)
// and, for a fixed-dimension lattice, its type in RootLattices; a type
// without a row, or a row without a type, fails to compile (the
// static_asserts below).  The binding exports the table (cepam's
// _core.LATTICES), which the Python side reads instead of repeating it.
#pragma once

#include <string>

#include "common/errors.hpp"
#include "common/format_limits.hpp"
#include "common/host_device.hpp"
#include "lattice/lattice.hpp"
#include "lattice/root_lattices.hpp"

namespace cepam {

// The largest sub-vector dimension of the core (Z^n takes n = 1 .. 8).
inline constexpr int kMaxLatticeDim = 8;

struct LatticeInfo {
  LatticeId id;
  const char* name;
  int dim;              // the fixed dimension; 0: any n in 1 .. kMaxLatticeDim (Z^n)
  bool l1_trials;       // its trials test l1 balls too (else the l2 ball only)
  // Geometry in the coordinates of the lattice's kernels: the l2 packing
  // radius, the volume of a cell (for Z^n: 1) and the length of the shortest
  // non-zero vector of the dual lattice.
  double packing_radius;
  double covolume;
  double dual_minimum;
  // The largest |x / beta| the encoder accepts (exclusive; a power of two,
  // at most kMaxScaledInput): every integer coordinate of the closest point
  // of x / beta - V must stay below kMaxAbsM, with headroom in float64.
  double max_scaled_input;
};

inline constexpr LatticeInfo kLattices[] = {
    {LatticeId::Z, "Z", 0, true, 0.5, 1.0, 1.0, kMaxScaledInput},
    // minimal distance 1: covolume sqrt(3) / 2, dual minimum 2 / sqrt(3)
    {LatticeId::A2, "A2", 2, false, 0.5, 0x1.bb67ae8584caap-1, 0x1.279a74590331dp+0, kMaxScaledInput},
    // {x in Z^4 : sum even}: covolume 2, dual minimum 1
    {LatticeId::D4, "D4", 4, false, 0x1.6a09e667f3bcdp-1, 2.0, 1.0, kMaxScaledInput},
    // D8 u (D8 + 1/2): unimodular, its own dual, minimum sqrt(2); its basis
    // coordinates m_1 .. m_6 sum up to six doubled point coordinates, hence
    // the lower input bound
    {LatticeId::E8, "E8", 8, false, 0x1.6a09e667f3bcdp-1, 1.0, 0x1.6a09e667f3bcdp+0, 0x1.0p48},
};

// The row of id, at compile time: nullptr for an id without a row.
constexpr const LatticeInfo* find_lattice_row(LatticeId id) {
  for (const LatticeInfo& l : kLattices)
    if (l.id == id) return &l;
  return nullptr;
}

// The row of a lattice type (compile-time: a type without a row does not
// compile).
template <class Lattice>
constexpr const LatticeInfo& lattice_row() {
  static_assert(find_lattice_row(Lattice::id) != nullptr, "a lattice type without a row in kLattices");
  return *find_lattice_row(Lattice::id);
}

// The row of id; throws InvalidArgument for an unknown id.
inline const LatticeInfo& lattice_info(LatticeId id) {
  for (const LatticeInfo& l : kLattices)
    if (l.id == id) return l;
  throw InvalidArgument("unknown lattice id " + std::to_string(static_cast<int>(id)));
}

// The fixed-dimension lattices, by type (Z^n, of any dimension, is the other).
template <class... Ls>
struct LatticeList {};
using RootLattices = LatticeList<LatticeA2, LatticeD4, LatticeE8>;

// Every row is Z^n (dimension 0, LatticeZn) or the row of one type of
// RootLattices (its dimension that type's), and the reverse: checked here.
template <class... Ls>
constexpr bool rows_match_types(LatticeList<Ls...>) {
  for (const LatticeInfo& l : kLattices) {
    const int types = ((l.id == Ls::id ? 1 : 0) + ... + 0);
    const bool dims = ((l.id != Ls::id || l.dim == Ls::kDim) && ...);
    if (!dims || (l.dim == 0) != (l.id == LatticeZn::id) || types != (l.dim == 0 ? 0 : 1))
      return false;
    if (!(l.max_scaled_input > 0.0 && l.max_scaled_input <= kMaxScaledInput)) return false;
  }
  return ((find_lattice_row(Ls::id) != nullptr) && ...);
}
static_assert(rows_match_types(RootLattices{}),
              "kLattices and RootLattices must list the same lattices (Z^n: dimension 0)");

template <class Fn, class... Ls>
CEPAM_HD bool with_root_lattice(LatticeId id, Fn&& fn, LatticeList<Ls...>) {
  return ((id == Ls::id ? (fn(Ls{}), true) : false) || ...);
}

// Calls fn(lattice) with the lattice of id among RootLattices and returns
// true, or returns false (fn not called) for any other id (Z^n).  Usable in
// device code (lrsuq/subvector.hpp) and by the lane kernels.
template <class Fn>
CEPAM_HD bool with_root_lattice(LatticeId id, Fn&& fn) {
  return with_root_lattice(id, fn, RootLattices{});
}

// Calls fn(lattice) with the lattice of (id, n): a root lattice, or Z^n.
template <class Fn>
void with_lattice(LatticeId id, int n, Fn&& fn) {
  if (!with_root_lattice(id, fn)) fn(LatticeZn{n});
}

}  // namespace cepam
