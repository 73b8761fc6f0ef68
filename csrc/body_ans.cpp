#include "body_ans.hpp"

#include "conditional_coder.hpp"
#include "errors.hpp"

namespace cepam {
namespace {

constexpr int kMaxN = 8;

// Calls visit(k, g_k, o_k) for k = n-1 .. 0, where m_k is the coordinate
// being coded; m holds the coordinates of this sub-vector (those with index
// above k are final when visit(k) runs).
template <class Visit>
void visit_coordinates(const TriangularBasis& basis, double beta, const double* v,
                       const std::int64_t* m, Visit&& visit) {
  const int n = basis.n;
  for (int k = n - 1; k >= 0; --k) {
    double shift = v[k];
    for (int i = k + 1; i < n; ++i)
      shift += static_cast<double>(m[i]) * basis.b[static_cast<std::size_t>(i * n + k)];
    visit(k, beta * basis.b[static_cast<std::size_t>(k * n + k)], beta * shift);
  }
}

}  // namespace

void encode_body_ans(const TriangularBasis& basis, double p, const SourceModel& model,
                     const std::uint32_t* H, std::size_t N, const std::int64_t* M,
                     const double* beta, const double* V, std::vector<std::uint8_t>& out) {
  model.serialize(out);
  AnsEncoder enc;
  const GeometricCoder hcoder(p);
  const CellCoder cells(model);
  const std::size_t n = static_cast<std::size_t>(basis.n);
  for (std::size_t j0 = 0; j0 < N; j0 += kAnsBlock) {
    const std::size_t j1 = N - j0 < kAnsBlock ? N : j0 + kAnsBlock;
    for (std::size_t j = j0; j < j1; ++j) hcoder.encode(H[j], enc);
    for (std::size_t j = j0; j < j1; ++j) {
      const std::int64_t* m = M + j * n;
      visit_coordinates(basis, beta[j], V + j * n, m, [&](int k, double g, double o) {
        cells.encode(m[k], g, o, enc);
      });
    }
  }
  enc.finish(out);
}

AnsBodyDecoder::AnsBodyDecoder(const std::uint8_t* data, std::size_t len) {
  std::size_t pos = 0;
  model_ = SourceModel::parse(data, len, &pos);
  ans_ = std::make_unique<AnsDecoder>(data + pos, len - pos);
}

void AnsBodyDecoder::decode_h(double p, std::size_t N, std::uint32_t* H) {
  const GeometricCoder hcoder(p);
  for (std::size_t j = 0; j < N; ++j) H[j] = hcoder.decode(*ans_);
}

void AnsBodyDecoder::decode_m(const TriangularBasis& basis, std::size_t N, const double* beta,
                              const double* V, std::int64_t* M) {
  const CellCoder cells(model_);
  const std::size_t n = static_cast<std::size_t>(basis.n);
  if (basis.n > kMaxN) throw InvalidArgument("basis dimension too large");
  for (std::size_t j = 0; j < N; ++j) {
    std::int64_t* m = M + j * n;
    visit_coordinates(basis, beta[j], V + j * n, m, [&](int k, double g, double o) {
      m[k] = cells.decode(g, o, *ans_);
    });
  }
}

}  // namespace cepam
