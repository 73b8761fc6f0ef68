// The lattice table: every lattice of the core written once, with its
// payload code (LatticeId), name, dimension and geometry, and the one
// dispatch from a LatticeId to the lattice's type (its kernels).
//
// Adding a lattice: a type with the interface of lattice/lattice.hpp, a
// LatticeId value, a row in kLattices and, for a fixed-dimension lattice,
// its type in RootLattices.  The binding exports the table (cepam's
// _core.LATTICES), which the Python side reads instead of repeating it.
#pragma once

#include <string>

#include "common/errors.hpp"
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
};

inline constexpr LatticeInfo kLattices[] = {
    {LatticeId::Z, "Z", 0, true, 0.5, 1.0, 1.0},
    // minimal distance 1: covolume sqrt(3) / 2, dual minimum 2 / sqrt(3)
    {LatticeId::A2, "A2", 2, false, 0.5, 0x1.bb67ae8584caap-1, 0x1.279a74590331dp+0},
    // {x in Z^4 : sum even}: covolume 2, dual minimum 1
    {LatticeId::D4, "D4", 4, false, 0x1.6a09e667f3bcdp-1, 2.0, 1.0},
    // D8 u (D8 + 1/2): unimodular, its own dual, minimum sqrt(2)
    {LatticeId::E8, "E8", 8, false, 0x1.6a09e667f3bcdp-1, 1.0, 0x1.6a09e667f3bcdp+0},
};

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
