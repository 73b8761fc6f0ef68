// Payload body coder 2 ("ans"): the source model, then one rANS stream with
// every trial index H_j (exact Geometric(p) model) followed by every lattice
// coordinate, coded conditionally on the decoder's side information: the
// scale beta_j = r(U_j) / rho and the dither V_{j, H_j} of each sub-vector
// (see conditional_coder.hpp).  H comes first because its model needs
// nothing; the decoder then computes the side information of the block's
// sub-vectors and decodes their M.
//
// Layout: source model (SourceModel::serialize), then the rANS bytes.  The
// stream goes block by block, kAnsBlock sub-vectors a block: the H of the
// block, then its M, so the decoder needs O(kAnsBlock) memory besides the
// output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "conditional_coder.hpp"
#include "lattice.hpp"
#include "rans.hpp"
#include "source_model.hpp"

namespace cepam {

inline constexpr std::size_t kAnsBlock = 4096;

// The encoder: encode_block for each block in turn (the H and M of its
// sub-vectors and their side information: beta[count], V[count n]), then
// finish.  N (the number of sub-vectors) only sizes the symbol buffer.
class AnsBodyEncoder {
 public:
  AnsBodyEncoder(const SourceModel& model, double p, const TriangularBasis& basis,
                 std::size_t N);
  void encode_block(std::size_t count, const std::uint32_t* H, const std::int64_t* M,
                    const double* beta, const double* V);
  // Appends the body: the source model, then the rANS stream.
  void finish(std::vector<std::uint8_t>& out) const;

 private:
  const SourceModel& model_;
  const TriangularBasis& basis_;
  GeometricCoder hcoder_;
  CellCoder cells_;
  AnsEncoder ans_;
};

// The decoder: per block, decode_h then decode_m, as the stream runs.  Throws FormatError on
// any inconsistency; finish() checks that the stream ended where it should.
class AnsBodyDecoder {
 public:
  AnsBodyDecoder(const std::uint8_t* data, std::size_t len);
  void decode_h(double p, std::size_t N, std::uint32_t* H);
  void decode_m(const TriangularBasis& basis, std::size_t N, const double* beta, const double* V,
                std::int64_t* M);
  void finish() const { ans_->finish(); }

 private:
  SourceModel model_;
  std::unique_ptr<AnsDecoder> ans_;
};

}  // namespace cepam
