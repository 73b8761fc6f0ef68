// Payload body coder 2 ("ans"): the source model, then one rANS stream with
// every trial index H_j (exact Geometric(p) model) followed by every lattice
// coordinate, coded conditionally on the decoder's side information: the
// scale beta_j = r(U_j) / rho and the dither V_{j, H_j} of each sub-vector
// (see conditional_coder.hpp).  H comes first because its model needs
// nothing; the decoder then computes the side information of all
// sub-vectors at once and decodes M.
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

#include "lattice.hpp"
#include "rans.hpp"
#include "source_model.hpp"

namespace cepam {

inline constexpr std::size_t kAnsBlock = 4096;

// Appends the body for N sub-vectors: p is the acceptance probability,
// beta[N] and V[N n] the side information, model the fitted source model.
void encode_body_ans(const TriangularBasis& basis, double p, const SourceModel& model,
                     const std::uint32_t* H, std::size_t N, const std::int64_t* M,
                     const double* beta, const double* V, std::vector<std::uint8_t>& out);

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
