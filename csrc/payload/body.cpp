#include "payload/body.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

#include "payload/golomb_body.hpp"
#include "payload/ans_body.hpp"
#include "common/errors.hpp"

namespace cepam {
namespace {

constexpr std::size_t kGolombPrefix = 4 + 1 + 8 + 8;

void put_le(std::vector<std::uint8_t>& out, std::size_t at, std::uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) out[at + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(v >> (8 * b));
}

std::uint64_t get_le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

BodyLayout golomb_layout(const std::uint8_t* body, std::size_t len) {
  if (len < kGolombPrefix) throw FormatError("body too short for its coder parameters");
  BodyLayout layout;
  const std::uint64_t golomb = get_le(body, 4);
  if (golomb > kMaxGolomb) throw FormatError("Golomb parameter out of range");
  layout.golomb = static_cast<std::uint32_t>(golomb);
  layout.expg_k = body[4];
  layout.h_bits = get_le(body + 5, 8);
  layout.m_bits = get_le(body + 13, 8);
  return layout;
}

std::size_t subvectors(const LrsuqParams& p, std::size_t m) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  return m / n + (m % n != 0 ? 1 : 0);
}

// A small and a large typical width of a coding cell (beta G_kk), for the
// source model's estimates: two quadrature points of beta on Z (Gaussian:
// 2 sigma chi_3, Laplace: 2 b Gamma(2, 1)), the step for SDQ.
struct CellWidths {
  double lo, hi;
};
CellWidths typical_cell_widths(const LrsuqParams& p) {
  switch (p.mechanism) {
    case MechanismId::Gaussian: return {1.86 * p.scale, 4.54 * p.scale};
    case MechanismId::Laplace: return {1.17 * p.scale, 6.8 * p.scale};
    default: return {p.scale, p.scale};
  }
}

void check_coder(Coder coder) {
  if (coder != Coder::Golomb && coder != Coder::Ans) throw InvalidArgument("unknown body coder");
}

// The bomb rule (body.hpp).
void check_declared_size(std::size_t m, std::size_t len) {
  if (min_body_bytes(m) > len)
    throw FormatError("body of " + std::to_string(len) + " bytes declares " + std::to_string(m) +
                      " coordinates, more than its length can carry (" +
                      std::to_string(kCoordinatesPerBodyBit) + " a bit)");
}

// Decodes a Golomb body's symbols; throws before allocating if the declared
// counts cannot fit the body.
void golomb_symbols(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                    std::size_t N, std::vector<std::uint32_t>& H,
                    std::vector<std::int64_t>& M) {
  const BodyLayout layout = golomb_layout(body, len);
  const std::size_t count = N * static_cast<std::size_t>(p.n);
  if (layout.golomb == 0 && acceptance_probability(p) < 1.0)
    throw FormatError("trial indices must be coded for this lattice");
  check_body(layout, len - kGolombPrefix, N, count);
  H.resize(N);
  M.resize(count);
  decode_body(body + kGolombPrefix, len - kGolombPrefix, layout, N, count, H.data(), M.data());
}

// The offset of the rANS stream in an ANS body, after checking the model and
// the stream's length.
std::size_t ans_stream_offset(const std::uint8_t* body, std::size_t len, LatticeId lattice) {
  // (The decoder checks the model, the model byte, the length and the states.)
  return AnsBodyDecoder(body, len, uses_point_model(lattice)).stream_offset();
}

// The buffers of one ANS block: trial indices, lattice points and side
// information (beta, dither) of up to kAnsBlock sub-vectors.
struct AnsBlock {
  std::vector<std::uint32_t> H;
  std::vector<std::int64_t> M;
  std::vector<double> beta, V;
  AnsBlock(std::size_t N, std::size_t n) {
    const std::size_t block = N < kAnsBlock ? N : kAnsBlock;
    H.resize(block);
    M.resize(block * n);
    beta.resize(block);
    V.resize(block * n);
  }
};

// Calls f(j0, count) for the blocks of kAnsBlock sub-vectors that cover [0, N).
template <class F>
void for_each_block(std::size_t N, F&& f) {
  for (std::size_t j0 = 0; j0 < N; j0 += kAnsBlock)
    f(j0, N - j0 < kAnsBlock ? N - j0 : kAnsBlock);
}

// Decodes an ANS body block by block and calls sink(j0, count, block) with
// each block's symbols and side information; checks the stream's end.
template <class Sink>
void decode_ans_blocks(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                       std::size_t len, std::size_t m, Sink&& sink) {
  const std::size_t N = subvectors(p, m);
  AnsBodyDecoder dec(body, len, uses_point_model(p.lattice));
  const double accept = acceptance_probability(p);
  const TriangularBasis basis = lattice_basis(p);
  AnsBlock b(N, static_cast<std::size_t>(p.n));
  for_each_block(N, [&](std::size_t j0, std::size_t count) {
    dec.decode_h(accept, count, b.H.data());
    lrsuq_side_info(p, ks, b.H.data(), j0, j0 + count, b.beta.data(), b.V.data());
    dec.decode_m(basis, count, b.beta.data(), b.V.data(), b.M.data());
    sink(j0, count, b);
  });
  if (dec.finish() && len > min_body_bytes(m) + kPaddingSlack)
    throw FormatError("entropy-coded body has trailing data (padding beyond the length the bomb rule asks)");
}

}  // namespace

void check_payload_body(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                        std::size_t m, Coder coder) {
  check_params(p);
  check_coder(coder);
  check_declared_size(m, len);
  if (coder == Coder::Golomb) {
    const BodyLayout layout = golomb_layout(body, len);
    const std::size_t N = subvectors(p, m);
    check_body(layout, len - kGolombPrefix, N, N * static_cast<std::size_t>(p.n));
  } else {
    ans_stream_offset(body, len, p.lattice);
  }
}

template <class T>
std::vector<std::uint8_t> encode_payload_body(const LrsuqParams& p, const KeyStream& ks,
                                              const T* x, std::size_t m, double factor,
                                              Coder coder) {
  check_params(p);
  check_coder(coder);
  check_factor(factor);
  const std::size_t N = subvectors(p, m);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const double accept = acceptance_probability(p);
  std::vector<std::uint8_t> out;
  if (coder == Coder::Golomb) {
    std::vector<std::uint32_t> H(N);
    std::vector<std::int64_t> M(N * n);
    lrsuq_encode(p, ks, x, m, factor, H.data(), M.data());
    BodyLayout layout;
    layout.golomb = golomb_parameter(accept);
    layout.expg_k = best_expg_order(M.data(), M.size());
    out.resize(kGolombPrefix);
    encode_body(H.data(), N, M.data(), M.size(), layout, out);
    put_le(out, 0, layout.golomb, 4);
    out[4] = static_cast<std::uint8_t>(layout.expg_k);
    put_le(out, 5, layout.h_bits, 8);
    put_le(out, 13, layout.m_bits, 8);
    return out;
  }
  // ANS: LRSUQ and the coder go block by block (the model is fitted first;
  // a non-finite input makes LRSUQ throw when its block comes, and the
  // symbols of the blocks before it are dropped).
  const CellWidths widths = typical_cell_widths(p);
  const SourceModel model = SourceModel::fit(x, m, factor, widths.lo, widths.hi);
  const TriangularBasis basis = lattice_basis(p);
  AnsBodyEncoder enc(model, accept, basis, N, uses_point_model(p.lattice));
  AnsBlock b(N, n);
  for_each_block(N, [&](std::size_t j0, std::size_t count) {
    lrsuq_encode_range(p, ks, x, m, factor, j0, j0 + count, b.H.data(), b.M.data(),
                       b.beta.data(), b.V.data());
    enc.encode_block(count, b.H.data(), b.M.data(), b.beta.data(), b.V.data());
  });
  enc.finish(out, min_body_bytes(m));
  return out;
}

template <class T>
void decode_payload_body(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                         std::size_t len, std::size_t m, Coder coder, T* y) {
  check_params(p);
  check_coder(coder);
  check_declared_size(m, len);
  const std::size_t N = subvectors(p, m);
  if (coder == Coder::Golomb) {
    std::vector<std::uint32_t> H;
    std::vector<std::int64_t> M;
    golomb_symbols(p, body, len, N, H, M);
    lrsuq_decode(p, ks, H.data(), M.data(), m, y);
    return;
  }
  decode_ans_blocks(p, ks, body, len, m,
                    [&](std::size_t j0, std::size_t count, const AnsBlock& b) {
    lrsuq_reconstruct(p, b.beta.data(), b.V.data(), b.M.data(), j0, j0 + count, m, y);
  });
}

void decode_payload_symbols(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                            std::size_t len, std::size_t m, Coder coder,
                            std::vector<std::uint32_t>& H, std::vector<std::int64_t>& M) {
  check_params(p);
  check_coder(coder);
  check_declared_size(m, len);
  const std::size_t N = subvectors(p, m);
  const std::size_t n = static_cast<std::size_t>(p.n);
  if (coder == Coder::Golomb) {
    golomb_symbols(p, body, len, N, H, M);
    return;
  }
  H.assign(N, 0);
  M.assign(N * n, 0);
  decode_ans_blocks(p, ks, body, len, m,
                    [&](std::size_t j0, std::size_t count, const AnsBlock& b) {
    std::copy_n(b.H.begin(), count, H.begin() + static_cast<std::ptrdiff_t>(j0));
    std::copy_n(b.M.begin(), count * n, M.begin() + static_cast<std::ptrdiff_t>(j0 * n));
  });
}

std::vector<std::pair<std::string, std::uint64_t>> payload_body_parts(const std::uint8_t* body,
                                                                      std::size_t len,
                                                                      Coder coder,
                                                                      LatticeId lattice) {
  check_coder(coder);
  std::vector<std::pair<std::string, std::uint64_t>> parts;
  if (coder == Coder::Golomb) {
    const BodyLayout layout = golomb_layout(body, len);
    const std::uint64_t rest = 8 * static_cast<std::uint64_t>(len - kGolombPrefix);
    if ((layout.h_bits + 7) / 8 + (layout.m_bits + 7) / 8 != len - kGolombPrefix)
      throw FormatError("body length does not match its declared sections");
    parts.emplace_back("params", 8 * kGolombPrefix);
    parts.emplace_back("H", layout.h_bits);
    parts.emplace_back("M", layout.m_bits);
    parts.emplace_back("padding", rest - layout.h_bits - layout.m_bits);
  } else {
    const std::size_t pos = ans_stream_offset(body, len, lattice);
    parts.emplace_back("model", 8 * static_cast<std::uint64_t>(pos));
    parts.emplace_back("stream", 8 * static_cast<std::uint64_t>(len - pos));
  }
  return parts;
}

template std::vector<std::uint8_t> encode_payload_body<float>(const LrsuqParams&,
                                                              const KeyStream&, const float*,
                                                              std::size_t, double, Coder);
template std::vector<std::uint8_t> encode_payload_body<double>(const LrsuqParams&,
                                                               const KeyStream&, const double*,
                                                               std::size_t, double, Coder);
template void decode_payload_body<float>(const LrsuqParams&, const KeyStream&,
                                         const std::uint8_t*, std::size_t, std::size_t, Coder,
                                         float*);
template void decode_payload_body<double>(const LrsuqParams&, const KeyStream&,
                                          const std::uint8_t*, std::size_t, std::size_t, Coder,
                                          double*);

}  // namespace cepam
