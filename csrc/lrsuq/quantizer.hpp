// Layered randomized subtractive universal quantization (LRSUQ).
//
// Encoder, sub-vector j (dimension n) with input x_j:
//   r = r(U_j), beta = r / rho (rho: packing radius of the lattice in the
//   noise law's norm); for trials i = 1, 2, ...: V = dither(j, i),
//   m = Q_L(x_j / beta - V), y = beta (G m + V); accept when
//   ||y - x_j|| <= r.  Emit H_j = i and M_j = m.
// Decoder: y_j = beta (G M_j + V_{j, H_j}).  Then y_j - x_j ~ f exactly and
// independently of x_j.
//
// Randomness: latent words of sub-vector j are words [j W, (j + 1) W) of
// stream 0; dither words of trial i are words [j n, (j + 1) n) of stream i
// (see random/chacha20.hpp).  The decoder computes V_{j, H_j} directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/format_limits.hpp"
#include "random/chacha20.hpp"
#include "lrsuq/latent.hpp"
#include "lattice/lattice.hpp"
#include "lattice/registry.hpp"
#include "lattice/root_lattices.hpp"
#include "lrsuq/subvector.hpp"

namespace cepam {

// The codec's parameters, valid by construction: the constructor checks
// them (a positive finite scale, then check_combination) and throws
// InvalidArgument with a message naming the problem, so that no LrsuqParams
// holds an invalid combination and no function taking one checks it again.
// The members are const: a checked value is never changed into an unchecked
// one.  LrsuqParams{mechanism, scale, lattice, n} constructs (and checks).
struct LrsuqParams {
  const MechanismId mechanism;
  const double scale;  // sigma (Gaussian), b (Laplace) or the SDQ step, > 0
  const LatticeId lattice;
  const int n;  // sub-vector dimension

  LrsuqParams(MechanismId mechanism, double scale, LatticeId lattice, int n);
};

// Validates a lattice and dimension alone (as LrsuqParams does).
void check_lattice(LatticeId id, int n);

// The mechanism table's row of id (lrsuq/latent.hpp); throws InvalidArgument
// for an unknown id.
const MechanismInfo& mechanism_info(MechanismId id);

// Whether the lattice's trials test the mechanism's ball (its norm).
constexpr bool lattice_takes(const LatticeInfo& lattice, const MechanismInfo& mechanism) {
  return mechanism.norm == Norm::L2 || lattice.l1_trials;
}

// The one rule on combinations, from the lattice and mechanism tables: n is
// a dimension of the lattice, the lattice tests the mechanism's norm (A2, D4
// and E8: l2 only, so Gaussian only), and n is at most the mechanism's
// largest (Laplace 4, SDQ 1).  Throws InvalidArgument naming the problem.
void check_combination(MechanismId mechanism, LatticeId lattice, int n);

// Throws InvalidArgument unless the clipping factor is finite and >= 0.
void check_factor(double factor);

// A small and a large typical width of a coding cell (beta G_kk), for the
// ANS coder's source model's estimates (the mechanism table, lrsuq/latent.hpp).
struct CellWidths {
  double lo, hi;
};
CellWidths typical_cell_widths(const LrsuqParams& p);

// Probability that one trial is accepted (the packing density in the
// mechanism's norm); 1 when the lattice cell is the ball itself.
double acceptance_probability(const LrsuqParams& p);

// Number of 64-bit latent words per sub-vector.
int latent_words(const LrsuqParams& p);

// Encodes m values x[0..m) (each multiplied by `factor`, the clipping factor)
// into N = ceil(m / n) trial indices H[0..N) and N n lattice coordinates
// M[0..N n).  The last sub-vector is zero-padded.
template <class T>
void lrsuq_encode(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                  double factor, std::uint32_t* H, std::int64_t* M);

// Encodes sub-vectors [first, last) only (last <= ceil(m / n)): H[j - first]
// and M[(j - first) n + k], and, unless null, their side information
// beta[j - first] and V[(j - first) n + k] (what lrsuq_side_info returns).
// Encoding consecutive ranges in order gives the outputs, and throws the
// error, of lrsuq_encode.
//
// scratch, unless null, holds the working buffers: a caller that encodes
// many ranges passes the same one to each call (one thread at a time), so
// that the buffers are allocated once, not per call (fresh memory costs a
// page fault per 4 KiB touched).
class LrsuqEncodeScratch;
template <class T>
void lrsuq_encode_range(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                        double factor, std::size_t first, std::size_t last, std::uint32_t* H,
                        std::int64_t* M, double* beta, double* V,
                        LrsuqEncodeScratch* scratch = nullptr);

// The working buffers of lrsuq_encode_range (see there), empty until a
// call sizes them.
class LrsuqEncodeScratch {
 public:
  LrsuqEncodeScratch();
  ~LrsuqEncodeScratch();
  LrsuqEncodeScratch(LrsuqEncodeScratch&&) noexcept;
  LrsuqEncodeScratch& operator=(LrsuqEncodeScratch&&) noexcept;

  struct Buffers;  // (quantizer.cpp)
  Buffers& buffers() { return *buffers_; }

 private:
  std::unique_ptr<Buffers> buffers_;
};

// Decodes into y[0..m) (padding dropped).  Throws FormatError if an H is
// outside [1, kTrialCap] or an |M| exceeds kMaxAbsM.
template <class T>
void lrsuq_decode(const LrsuqParams& p, const KeyStream& ks, const std::uint32_t* H,
                  const std::int64_t* M, std::size_t m, T* y);

// Decodes sub-vectors [first, last) only: H[j - first], M[(j - first) n + k]
// into y[j n + k] for j n + k < m.
template <class T>
void lrsuq_decode_range(const LrsuqParams& p, const KeyStream& ks, const std::uint32_t* H,
                        const std::int64_t* M, std::size_t first, std::size_t last,
                        std::size_t m, T* y);

// The decoder's side information of sub-vectors [first, last), the same on
// both sides: beta[j - first] = r(U_j) / rho and V[(j - first) n + k] the
// dither of trial H[j - first].  Throws FormatError for an H out of range.
void lrsuq_side_info(const LrsuqParams& p, const KeyStream& ks, const std::uint32_t* H,
                     std::size_t first, std::size_t last, double* beta, double* V);

// lrsuq_decode_range with the side information of the sub-vectors given
// (beta, V from lrsuq_side_info): y[j n + k] = beta_j (G M_j + V_j)_k for
// j in [first, last) and j n + k < m, the same values.  Throws FormatError
// if an |M| exceeds kMaxAbsM.
template <class T>
void lrsuq_reconstruct(const LrsuqParams& p, const double* beta, const double* V,
                       const std::int64_t* M, std::size_t first, std::size_t last, std::size_t m,
                       T* y);

// The lattice's lower-triangular basis (see payload/ans_body.hpp).
TriangularBasis lattice_basis(const LrsuqParams& p);

// The lattice alone, for tests: closest points (integer basis coordinates)
// of count points t[c n .. c n + n), the points G m of coordinates m, the
// dithers of count word groups w[c n .. c n + n), and the basis.
void lattice_closest_points(LatticeId id, int n, const double* t, std::size_t count,
                            std::int64_t* m);
void lattice_points(LatticeId id, int n, const std::int64_t* m, std::size_t count, double* p);
void lattice_dithers(LatticeId id, int n, const std::uint64_t* w, std::size_t count, double* v);
TriangularBasis lattice_basis(LatticeId id, int n);

// The radius r(U_j) of sub-vectors j in [first, first + count), for tests of
// the latent samplers.
void latent_radii(const LrsuqParams& p, const KeyStream& ks, std::uint64_t first,
                  std::size_t count, double* out);

// The codec's parameters as plain data for the per-sub-vector functions of
// lrsuq/subvector.hpp (and the CUDA kernels).
subvector::Config lrsuq_subvector_config(const LrsuqParams& p);

// Throws the codec's error for sub-vector j failing with a subvector::Status
// (EncodingError for the encoder's, FormatError for the decoder's); limit is
// Config::limit, h the trial index of a kBadTrial.
[[noreturn]] void throw_subvector_error(std::size_t j, int status, double limit = 0.0,
                                        std::uint32_t h = 0);

// Throws DecodingError: sub-vector j decodes to values that overflow dtype.
[[noreturn]] void throw_nonfinite_output(std::size_t j, const char* dtype);

// "float32" or "float64": the name of an output type in messages.
template <class T>
constexpr const char* dtype_name() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

// lrsuq_encode_range and lrsuq_decode_range computed one sub-vector at a
// time by the functions of lrsuq/subvector.hpp, the code the CUDA kernels
// run: the same outputs, bit for bit, and the same first error (beta and V
// are required here).
template <class T>
void lrsuq_encode_subvectors(const LrsuqParams& p, const ChaChaKey& key, const T* x,
                             std::size_t m, double factor, std::size_t first, std::size_t last,
                             std::uint32_t* H, std::int64_t* M, double* beta, double* V);
template <class T>
void lrsuq_decode_subvectors(const LrsuqParams& p, const ChaChaKey& key, const std::uint32_t* H,
                             const std::int64_t* M, std::size_t first, std::size_t last,
                             std::size_t m, T* y);

// Sub-vectors indices[0..count) of an update of m coordinates, each given
// by its own n coordinates (pieces[i n .. i n + n), those past x[m - 1]
// ignored), encoded as lrsuq_encode_subvectors would encode them in place:
// H[count], M[count n], beta[count], V[count n].  The host's spot-check of
// a GPU's results.  Throws InvalidArgument for an index of no sub-vector.
template <class T>
void lrsuq_encode_subvectors_at(const LrsuqParams& p, const ChaChaKey& key, const T* pieces,
                                const std::uint64_t* indices, std::size_t count, std::size_t m,
                                double factor, std::uint32_t* H, std::int64_t* M, double* beta,
                                double* V);

}  // namespace cepam
