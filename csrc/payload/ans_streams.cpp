#include "payload/ans_streams.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "coding/source_model.hpp"
#include "common/errors.hpp"
#include "payload/ans_body.hpp"
#include "payload/body.hpp"

namespace cepam {

void host_stream_coder(const AnsSymbol* symbols, const std::uint64_t* first, std::size_t count,
                       std::vector<std::uint8_t>& out, std::vector<std::uint64_t>& sizes) {
  std::vector<std::uint64_t> room(count + 1, 0), size(count);
  for (std::size_t s = 0; s < count; ++s)
    room[s + 1] = room[s] + rans_max_stream_bytes(first[s + 1] - first[s]);
  std::vector<std::uint32_t> words(first[count]);
  std::vector<std::uint8_t> streams(room[count]);
  if (rans_encode_segments(symbols, first, count, words.data(), streams.data(), room.data(),
                           size.data()) != kRansOk)
    throw EncodingError("a rANS stream overran its room");
  for (std::size_t s = 0; s < count; ++s) {
    out.insert(out.end(), streams.begin() + static_cast<std::ptrdiff_t>(room[s]),
               streams.begin() + static_cast<std::ptrdiff_t>(room[s] + size[s]));
    sizes.push_back(size[s]);
  }
}

template <class T>
std::vector<std::uint8_t> encode_ans_body_by_streams(const LrsuqParams& p, const ChaChaKey& key,
                                                     const T* x, std::size_t m, double factor,
                                                     const StreamCoder& code) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  const std::size_t segments = ans_segments(m, p.n);
  const CellWidths widths = typical_cell_widths(p);
  const SourceModel model = SourceModel::fit(x, m, factor, widths.lo, widths.hi);
  const TriangularBasis basis = lattice_basis(p);
  const double accept = acceptance_probability(p);
  const bool point_model = uses_point_model(p.lattice);
  // Every segment's symbols (each block: LRSUQ by the kernels' functions,
  // then the segment encoder), and the streams to code: each segment's box
  // stream, and its point stream where it has one.
  std::vector<std::unique_ptr<AnsSegmentEncoder>> enc(segments);
  std::vector<std::uint32_t> H(std::min(N, kAnsBlock));
  std::vector<std::int64_t> M(H.size() * n);
  std::vector<double> beta(H.size()), V(H.size() * n);
  std::vector<AnsSymbol> symbols;
  std::vector<std::uint64_t> first{0};
  const auto add = [&](const AnsEncoder& stream) {
    symbols.insert(symbols.end(), stream.data(), stream.data() + stream.symbols());
    first.push_back(symbols.size());
  };
  for (std::size_t s = 0; s < segments; ++s) {
    const std::size_t j_first = s * S, j_last = std::min(N, j_first + S);
    enc[s] = std::make_unique<AnsSegmentEncoder>(model, accept, basis, j_last - j_first,
                                                 point_model);
    for (std::size_t j0 = j_first; j0 < j_last; j0 += kAnsBlock) {
      const std::size_t count = std::min(kAnsBlock, j_last - j0);
      lrsuq_encode_subvectors(p, key, x, m, factor, j0, j0 + count, H.data(), M.data(),
                              beta.data(), V.data());
      enc[s]->encode_block(count, H.data(), M.data(), beta.data(), V.data());
    }
    add(enc[s]->box_symbols());
    if (enc[s]->point_symbols() != nullptr) add(*enc[s]->point_symbols());
  }
  std::vector<std::uint8_t> streams;
  std::vector<std::uint64_t> sizes;
  code(symbols.data(), first.data(), first.size() - 1, streams, sizes);
  if (sizes.size() != first.size() - 1) throw EncodingError("the stream coder lost streams");
  // The body: the model, then each segment with the shorter of its streams
  // (the box model's on a tie), as AnsSegmentEncoder::finish.
  std::vector<std::uint8_t> out;
  model.serialize(out);
  std::size_t at = 0, k = 0, last_begin = out.size();
  for (std::size_t s = 0; s < segments; ++s) {
    last_begin = out.size();
    const std::uint8_t* box = streams.data() + at;
    const std::size_t box_size = sizes[k];
    at += sizes[k++];
    if (enc[s]->point_symbols() == nullptr) {
      append_segment(out, enc[s]->has_model_byte(), false, box, box_size);
      continue;
    }
    const std::uint8_t* points = streams.data() + at;
    const std::size_t points_size = sizes[k];
    at += sizes[k++];
    const bool use_points = points_size < box_size;
    append_segment(out, true, use_points, use_points ? points : box,
                   use_points ? points_size : box_size);
  }
  // The bomb rule's padding (body.cpp), rare: the last segment finished
  // again on the host with the length the body lacks.
  if (out.size() < min_body_bytes(m) && segments > 0) {
    out.resize(last_begin);
    enc[segments - 1]->finish(out, min_body_bytes(m) - last_begin - segment_prefix(point_model));
  }
  return out;
}

template std::vector<std::uint8_t> encode_ans_body_by_streams<float>(
    const LrsuqParams&, const ChaChaKey&, const float*, std::size_t, double, const StreamCoder&);
template std::vector<std::uint8_t> encode_ans_body_by_streams<double>(
    const LrsuqParams&, const ChaChaKey&, const double*, std::size_t, double, const StreamCoder&);

ZSymbolModel z_symbol_model(const SourceModel& model, const GeometricCoder& hcoder,
                            const TriangularBasis& basis) {
  if (basis.n < 1 || basis.n > 8 || !is_diagonal(basis))
    throw InvalidArgument("the shared symbol code takes a diagonal basis of at most 8 dimensions");
  ZSymbolModel z{};
  z.cdf = model.cdf_view();
  z.quantile = model.quantile_table();
  z.geometric = hcoder.table();
  z.n = basis.n;
  const std::size_t n = static_cast<std::size_t>(basis.n);
  for (std::size_t c = 0; c < n; ++c) z.diag[c] = basis.b[(n - 1 - c) * (n + 1)];  // G_kk, k = n-1-c
  z.block = kAnsBlock;
  z.piece = piece_subvectors(basis.n);
  return z;
}

void z_segments_symbols(const ZSymbolModel& z, std::size_t N, std::size_t S,
                        const std::uint32_t* H, const std::int64_t* M, const double* beta,
                        const double* V, std::vector<std::uint64_t>& first,
                        std::vector<AnsSymbol>& symbols) {
  const ZUnits u = z_units(z, N, S);
  std::vector<std::uint64_t> at(u.count + 1, 0);
  for (std::size_t i = 0; i < u.count; ++i)  // the kernel's first pass: counts
    at[i + 1] = at[i] + z_unit_symbols(z, u, i, H, M, beta, V, nullptr);
  symbols.resize(at[u.count]);
  for (std::size_t i = 0; i < u.count; ++i)  // its second: the symbols
    z_unit_symbols(z, u, i, H, M, beta, V, symbols.data() + at[i]);
  first.assign(u.count / std::max<std::size_t>(u.per_segment, 1) + 1, 0);
  z_segment_offsets(u, at.data(), first.data());
}

std::vector<std::uint8_t> assemble_z_body(
    const SourceModel& model, std::size_t m, const std::uint8_t* streams,
    const std::vector<std::uint64_t>& sizes,
    const std::function<std::vector<AnsSymbol>()>& last_symbols) {
  std::vector<std::uint8_t> out;
  model.serialize(out);
  std::size_t at = 0, last_begin = out.size();
  for (const std::uint64_t size : sizes) {
    last_begin = out.size();
    append_segment(out, false, false, streams + at, static_cast<std::size_t>(size));
    at += static_cast<std::size_t>(size);
  }
  if (out.size() < min_body_bytes(m) && !sizes.empty()) {  // the bomb rule's padding
    const std::vector<AnsSymbol> last = last_symbols();
    AnsEncoder enc;
    if (!last.empty()) std::memcpy(enc.append(last.size()), last.data(), last.size() * sizeof(AnsSymbol));
    out.resize(last_begin);
    std::vector<std::uint8_t> stream;
    enc.finish(stream, min_body_bytes(m) - last_begin - segment_prefix(false));
    append_segment(out, false, false, stream.data(), stream.size());
  }
  return out;
}

template <class T>
std::vector<std::uint8_t> encode_z_ans_body_by_symbols(const LrsuqParams& p,
                                                       const ChaChaKey& key, const T* x,
                                                       std::size_t m, double factor,
                                                       const StreamCoder& code) {
  if (p.lattice != LatticeId::Z) throw InvalidArgument("the shared symbol code is for Z^n");
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  const CellWidths widths = typical_cell_widths(p);
  const SourceModel model = SourceModel::fit(x, m, factor, widths.lo, widths.hi);
  const TriangularBasis basis = lattice_basis(p);
  const GeometricCoder hcoder(acceptance_probability(p));
  // The stage of every sub-vector, as a GPU holds it.
  std::vector<std::uint32_t> H(N);
  std::vector<std::int64_t> M(N * n);
  std::vector<double> beta(N), V(N * n);
  if (N > 0) lrsuq_encode_subvectors(p, key, x, m, factor, 0, N, H.data(), M.data(), beta.data(), V.data());
  const ZSymbolModel z = z_symbol_model(model, hcoder, basis);
  std::vector<std::uint64_t> first;
  std::vector<AnsSymbol> symbols;
  z_segments_symbols(z, N, S, H.data(), M.data(), beta.data(), V.data(), first, symbols);
  std::vector<std::uint8_t> streams;
  std::vector<std::uint64_t> sizes;
  code(symbols.data(), first.data(), first.size() - 1, streams, sizes);
  if (sizes.size() != first.size() - 1) throw EncodingError("the stream coder lost streams");
  const std::size_t last = first.size() - 1;
  return assemble_z_body(model, m, streams.data(), sizes, [&] {
    return std::vector<AnsSymbol>(symbols.begin() + static_cast<std::ptrdiff_t>(first[last - 1]),
                                  symbols.end());
  });
}

template <class T>
bool z_segment_matches(const LrsuqParams& p, const ChaChaKey& key, const std::uint8_t* body,
                       std::size_t len, std::size_t m, double factor, std::size_t s,
                       const T* values, std::size_t count) {
  if (p.lattice != LatticeId::Z) throw InvalidArgument("the shared symbol code is for Z^n");
  const AnsBody parsed(body, len, false, ans_segments(m, p.n));
  if (s >= parsed.segments().size()) throw InvalidArgument("the body has no such segment");
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  const std::size_t j0 = s * S, j1 = std::min(N, j0 + S);
  if (count != std::min(m, j1 * n) - j0 * n)
    throw InvalidArgument("values must be the segment's coordinates");
  std::vector<std::uint64_t> indices(j1 - j0);
  for (std::size_t j = j0; j < j1; ++j) indices[j - j0] = j;
  std::vector<std::uint32_t> H(j1 - j0);
  std::vector<std::int64_t> M((j1 - j0) * n);
  std::vector<double> beta(j1 - j0), V((j1 - j0) * n);
  lrsuq_encode_subvectors_at(p, key, values, indices.data(), j1 - j0, m, factor, H.data(),
                             M.data(), beta.data(), V.data());
  const GeometricCoder hcoder(acceptance_probability(p));
  const ZSymbolModel z = z_symbol_model(parsed.model(), hcoder, lattice_basis(p));
  const std::size_t k = z_block_symbols(z, j1 - j0, H.data(), M.data(), beta.data(), V.data(),
                                        nullptr);
  AnsEncoder enc;
  z_block_symbols(z, j1 - j0, H.data(), M.data(), beta.data(), V.data(), enc.append(k));
  // The body's length as the least: the same padding, if the body's last
  // segment has some (the smallest count that reaches it).
  const AnsBody::Segment& seg = parsed.segments()[s];
  std::vector<std::uint8_t> stream;
  enc.finish(stream, seg.size);
  return stream.size() == seg.size &&
         std::equal(stream.begin(), stream.end(), parsed.data() + seg.offset);
}

namespace {
// body, for a body on Z^n (the lattice the shared symbol code takes).
const std::uint8_t* z_body(const LrsuqParams& p, const std::uint8_t* body) {
  if (p.lattice != LatticeId::Z) throw InvalidArgument("the shared symbol code is for Z^n");
  return body;
}
}  // namespace

ZDecodePlan::ZDecodePlan(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                         std::size_t m)
    : ans(z_body(p, body), len, false, ans_segments(m, p.n)),
      hcoder(acceptance_probability(p)),
      z(z_symbol_model(ans.model(), hcoder, lattice_basis(p))),
      config(lrsuq_subvector_config(p)) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  const std::size_t count = ans.segments().size();
  segments.reserve(count);
  for (std::size_t s = 0; s < count; ++s) {
    const AnsBody::Segment& seg = ans.segments()[s];
    segments.push_back(ZSegment{seg.offset, seg.size, s * S, std::min(N, (s + 1) * S),
                                segment_may_pad(s, count, len, m) ? 1 : 0});
  }
}

void throw_first_error(const ZSegmentOutcome* outcomes, std::size_t count, const char* dtype) {
  for (std::size_t s = 0; s < count; ++s) {
    const ZSegmentOutcome& o = outcomes[s];
    if (o.status == kReadOk) continue;
    if (o.status == kReadBadTrial)
      throw_subvector_error(static_cast<std::size_t>(o.at), subvector::kBadTrial, 0.0, o.h);
    if (o.status == kReadNonFinite) throw_nonfinite_output(static_cast<std::size_t>(o.at), dtype);
    throw FormatError(read_message(static_cast<ReadStatus>(o.status)));
  }
}

template <class T>
void decode_z_ans_body_by_segments(const LrsuqParams& p, const ChaChaKey& key,
                                   const std::uint8_t* body, std::size_t len, std::size_t m,
                                   T* y) {
  const ZDecodePlan plan(p, body, len, m);
  const std::size_t n = static_cast<std::size_t>(p.n);
  std::vector<std::uint32_t> H(plan.z.block);
  std::vector<double> beta(plan.z.piece), V(plan.z.piece * n);
  std::vector<std::int64_t> M(plan.z.piece * n);
  const ZDecodeScratch scratch{H.data(), beta.data(), V.data(), M.data()};
  std::vector<ZSegmentOutcome> outcomes;
  for (const ZSegment& seg : plan.segments) {
    outcomes.push_back(z_decode_segment(plan.z, plan.config, key.data(), body, seg, m, scratch, y));
    if (outcomes.back().status != kReadOk) break;  // (the first error is the one thrown)
  }
  throw_first_error(outcomes.data(), outcomes.size(), dtype_name<T>());
}

template void decode_z_ans_body_by_segments<float>(const LrsuqParams&, const ChaChaKey&,
                                                   const std::uint8_t*, std::size_t, std::size_t,
                                                   float*);
template void decode_z_ans_body_by_segments<double>(const LrsuqParams&, const ChaChaKey&,
                                                    const std::uint8_t*, std::size_t,
                                                    std::size_t, double*);

template bool z_segment_matches<float>(const LrsuqParams&, const ChaChaKey&, const std::uint8_t*,
                                       std::size_t, std::size_t, double, std::size_t,
                                       const float*, std::size_t);
template bool z_segment_matches<double>(const LrsuqParams&, const ChaChaKey&, const std::uint8_t*,
                                        std::size_t, std::size_t, double, std::size_t,
                                        const double*, std::size_t);

template std::vector<std::uint8_t> encode_z_ans_body_by_symbols<float>(
    const LrsuqParams&, const ChaChaKey&, const float*, std::size_t, double, const StreamCoder&);
template std::vector<std::uint8_t> encode_z_ans_body_by_symbols<double>(
    const LrsuqParams&, const ChaChaKey&, const double*, std::size_t, double, const StreamCoder&);

}  // namespace cepam
