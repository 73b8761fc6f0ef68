// Payload body coder 2 ("ans"): the source model, then one rANS stream with
// every trial index H_j (exact Geometric(p) model) followed by every lattice
// coordinate, coded conditionally on the decoder's side information: the
// scale beta_j = r(U_j) / rho and the dither V_{j, H_j} of each sub-vector
// (see coding/conditional_coder.hpp).  H comes first because its model needs
// nothing; the decoder then computes the side information of the block's
// sub-vectors and decodes their M.
//
// Layout: source model (SourceModel::serialize), for the lattices with a
// point model (uses_point_model: A2, D4, E8) a byte saying which model codes
// M (0: the box model alone, 1: the point model of coding/point_coder.hpp with the
// box model for its escapes; the encoder codes both and keeps the shorter),
// then the rANS bytes.  The stream goes block by block, kAnsBlock
// sub-vectors a block: the H of the block, then its M, so the decoder needs
// O(kAnsBlock) memory besides the output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "coding/conditional_coder.hpp"
#include "lattice/lattice.hpp"
#include "coding/point_coder.hpp"
#include "coding/rans.hpp"
#include "coding/source_model.hpp"

namespace cepam {

inline constexpr std::size_t kAnsBlock = 4096;

// Whether an ANS body of this lattice has the model byte (the lattices whose
// cell is not a box).
inline bool uses_point_model(LatticeId id) { return id != LatticeId::Z; }

// The encoder: encode_block for each block in turn (the H and M of its
// sub-vectors and their side information: beta[count], V[count n]), then
// finish.  N (the number of sub-vectors) only sizes the symbol buffer.
class AnsBodyEncoder {
 public:
  // point_model: code M both ways (box model, point model) and keep the shorter.
  AnsBodyEncoder(const SourceModel& model, double p, const TriangularBasis& basis,
                 std::size_t N, bool point_model);
  void encode_block(std::size_t count, const std::uint32_t* H, const std::int64_t* M,
                    const double* beta, const double* V);
  // Appends the body: the source model, the model byte, then the rANS
  // stream, padded (coding/rans.hpp) if the body would be shorter than
  // min_bytes.
  void finish(std::vector<std::uint8_t>& out, std::size_t min_bytes) const;

 private:
  void encode_h(std::size_t count, const std::uint32_t* H, AnsEncoder& enc) const;

  const SourceModel& model_;
  const TriangularBasis& basis_;
  GeometricCoder hcoder_;
  CellCoder cells_;
  AnsEncoder ans_;
  std::unique_ptr<PointCoder> points_;  // with point_model
  AnsEncoder ans_points_;               // the point model's stream, once started
  bool points_started_ = false;
};

// The decoder: per block, decode_h then decode_m, as the stream runs.  Throws FormatError on
// any inconsistency; finish() checks that the stream ended where it should.
class AnsBodyDecoder {
 public:
  // point_model: the body has the model byte (uses_point_model).
  AnsBodyDecoder(const std::uint8_t* data, std::size_t len, bool point_model);
  void decode_h(double p, std::size_t N, std::uint32_t* H);
  void decode_m(const TriangularBasis& basis, std::size_t N, const double* beta, const double* V,
                std::int64_t* M);
  // Returns whether the stream had padding.
  bool finish() const { return ans_->finish() > 0; }
  // Where the rANS stream starts.
  std::size_t stream_offset() const { return offset_; }

 private:
  SourceModel model_;
  bool points_ = false;  // the point model codes M
  std::unique_ptr<PointCoder> point_coder_;  // (made by the first decode_m)
  std::size_t offset_ = 0;
  std::unique_ptr<AnsDecoder> ans_;
};

}  // namespace cepam
