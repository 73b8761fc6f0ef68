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

BoxSymbolModel box_symbol_model(const SourceModel& model, const GeometricCoder& hcoder,
                                const LrsuqParams& p) {
  const TriangularBasis basis = lattice_basis(p);
  if (basis.n < 1 || basis.n > BoxTerms::kMaxN)
    throw InvalidArgument("the shared symbol code takes lattices of at most 8 dimensions");
  BoxSymbolModel z{};
  z.cdf = model.cdf_view();
  z.quantile = model.quantile_table();
  z.geometric = hcoder.table();
  z.basis = box_terms(basis.n, basis.b.data());
  z.points = PointBounds{};  // usable = 0
  if (uses_point_model(p.lattice)) z.points = PointCoder(model, basis).bounds();
  z.block = kAnsBlock;
  z.piece = piece_subvectors(basis.n);
  return z;
}

bool box_segments_symbols(const BoxSymbolModel& z, std::size_t N, std::size_t S,
                          const std::uint32_t* H, const std::int64_t* M, const double* beta,
                          const double* V, std::vector<std::uint64_t>& first,
                          std::vector<AnsSymbol>& symbols) {
  const BoxUnits u = box_units(z, N, S);
  std::vector<std::uint64_t> at(u.count + 1, 0);
  bool framed = false;
  for (std::size_t i = 0; i < u.count; ++i)  // the kernel's first pass: counts
    at[i + 1] = at[i] + box_unit_symbols(z, u, i, H, M, beta, V, nullptr, &framed);
  if (framed) return false;
  symbols.resize(at[u.count]);
  for (std::size_t i = 0; i < u.count; ++i)  // its second: the symbols
    box_unit_symbols(z, u, i, H, M, beta, V, symbols.data() + at[i], &framed);
  first.assign(u.count / std::max<std::size_t>(u.per_segment, 1) + 1, 0);
  box_segment_offsets(u, at.data(), first.data());
  return true;
}

std::vector<std::uint8_t> assemble_box_body(
    const SourceModel& model, std::size_t m, bool point_model, const std::uint8_t* streams,
    const std::vector<std::uint64_t>& sizes,
    const std::function<std::vector<AnsSymbol>()>& last_symbols) {
  std::vector<std::uint8_t> out;
  model.serialize(out);
  std::size_t at = 0, last_begin = out.size();
  for (const std::uint64_t size : sizes) {
    last_begin = out.size();
    append_segment(out, point_model, false, streams + at, static_cast<std::size_t>(size));
    at += static_cast<std::size_t>(size);
  }
  if (out.size() < min_body_bytes(m) && !sizes.empty()) {  // the bomb rule's padding
    const std::vector<AnsSymbol> last = last_symbols();
    AnsEncoder enc;
    if (!last.empty()) std::memcpy(enc.append(last.size()), last.data(), last.size() * sizeof(AnsSymbol));
    out.resize(last_begin);
    std::vector<std::uint8_t> stream;
    enc.finish(stream, min_body_bytes(m) - last_begin - segment_prefix(point_model));
    append_segment(out, point_model, false, stream.data(), stream.size());
  }
  return out;
}

template <class T>
std::optional<std::vector<std::uint8_t>> encode_box_ans_body_by_symbols(
    const LrsuqParams& p, const ChaChaKey& key, const T* x, std::size_t m, double factor,
    const StreamCoder& code) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  const CellWidths widths = typical_cell_widths(p);
  const SourceModel model = SourceModel::fit(x, m, factor, widths.lo, widths.hi);
  const GeometricCoder hcoder(acceptance_probability(p));
  // The stage of every sub-vector, as a GPU holds it.
  std::vector<std::uint32_t> H(N);
  std::vector<std::int64_t> M(N * n);
  std::vector<double> beta(N), V(N * n);
  if (N > 0) lrsuq_encode_subvectors(p, key, x, m, factor, 0, N, H.data(), M.data(), beta.data(), V.data());
  const BoxSymbolModel z = box_symbol_model(model, hcoder, p);
  std::vector<std::uint64_t> first;
  std::vector<AnsSymbol> symbols;
  if (!box_segments_symbols(z, N, S, H.data(), M.data(), beta.data(), V.data(), first, symbols))
    return std::nullopt;
  std::vector<std::uint8_t> streams;
  std::vector<std::uint64_t> sizes;
  code(symbols.data(), first.data(), first.size() - 1, streams, sizes);
  if (sizes.size() != first.size() - 1) throw EncodingError("the stream coder lost streams");
  const std::size_t last = first.size() - 1;
  return assemble_box_body(model, m, uses_point_model(p.lattice), streams.data(), sizes, [&] {
    return std::vector<AnsSymbol>(symbols.begin() + static_cast<std::ptrdiff_t>(first[last - 1]),
                                  symbols.end());
  });
}

template <class T>
bool segment_matches(const LrsuqParams& p, const ChaChaKey& key, const std::uint8_t* body,
                     std::size_t len, std::size_t m, double factor, std::size_t s,
                     const T* values, std::size_t count) {
  const AnsBody parsed(body, len, uses_point_model(p.lattice), ans_segments(m, p.n));
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
  const BoxSymbolModel z = box_symbol_model(parsed.model(), hcoder, p);
  const AnsBody::Segment& seg = parsed.segments()[s];
  bool framed = false;
  const std::size_t k = box_block_symbols(z, j1 - j0, H.data(), M.data(), beta.data(), V.data(),
                                          nullptr, &framed);
  if (seg.points || framed) return false;  // not the box model's segment
  AnsEncoder enc;
  box_block_symbols(z, j1 - j0, H.data(), M.data(), beta.data(), V.data(), enc.append(k));
  // The body's length as the least: the same padding, if the body's last
  // segment has some (the smallest count that reaches it).
  std::vector<std::uint8_t> stream;
  enc.finish(stream, seg.size);
  return stream.size() == seg.size &&
         std::equal(stream.begin(), stream.end(), parsed.data() + seg.offset);
}

BoxDecodePlan::BoxDecodePlan(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                             std::size_t m)
    : ans(body, len, uses_point_model(p.lattice), ans_segments(m, p.n)),
      hcoder(acceptance_probability(p)),
      z(box_symbol_model(ans.model(), hcoder, p)),
      config(lrsuq_subvector_config(p)),
      box_only(true) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  const std::size_t count = ans.segments().size();
  segments.reserve(count);
  for (std::size_t s = 0; s < count; ++s) {
    const AnsBody::Segment& seg = ans.segments()[s];
    segments.push_back(BoxSegment{seg.offset, seg.size, s * S, std::min(N, (s + 1) * S),
                                  segment_may_pad(s, count, len, m) ? 1 : 0});
    if (seg.points) box_only = false;
  }
}

bool is_box_body(const LrsuqParams& p, const std::uint8_t* body, std::size_t len, std::size_t m) {
  const AnsBody ans(body, len, uses_point_model(p.lattice), ans_segments(m, p.n), false);
  for (const AnsBody::Segment& seg : ans.segments())
    if (seg.points) return false;
  return true;
}

void throw_first_error(const BoxSegmentOutcome* outcomes, std::size_t count, const char* dtype) {
  for (std::size_t s = 0; s < count; ++s) {
    const BoxSegmentOutcome& o = outcomes[s];
    if (o.status == kReadOk) continue;
    if (o.status == kReadBadTrial)
      throw_subvector_error(static_cast<std::size_t>(o.at), subvector::kBadTrial, 0.0, o.h);
    if (o.status == kReadNonFinite) throw_nonfinite_output(static_cast<std::size_t>(o.at), dtype);
    throw FormatError(read_message(static_cast<ReadStatus>(o.status)));
  }
}

template <class T>
bool decode_box_ans_body_by_segments(const LrsuqParams& p, const ChaChaKey& key,
                                     const std::uint8_t* body, std::size_t len, std::size_t m,
                                     T* y) {
  const BoxDecodePlan plan(p, body, len, m);
  if (!plan.box_only) return false;
  const std::size_t n = static_cast<std::size_t>(p.n);
  std::vector<std::uint32_t> H(plan.z.block);
  std::vector<double> beta(plan.z.piece), V(plan.z.piece * n);
  std::vector<std::int64_t> M(plan.z.piece * n);
  const BoxDecodeScratch scratch{H.data(), beta.data(), V.data(), M.data()};
  std::vector<BoxSegmentOutcome> outcomes;
  for (const BoxSegment& seg : plan.segments) {
    outcomes.push_back(box_decode_segment(plan.z, plan.config, key.data(), body, seg, m, scratch, y));
    if (outcomes.back().status != kReadOk) break;  // (the first error is the one thrown)
  }
  throw_first_error(outcomes.data(), outcomes.size(), dtype_name<T>());
  return true;
}

template bool decode_box_ans_body_by_segments<float>(const LrsuqParams&, const ChaChaKey&,
                                                     const std::uint8_t*, std::size_t,
                                                     std::size_t, float*);
template bool decode_box_ans_body_by_segments<double>(const LrsuqParams&, const ChaChaKey&,
                                                      const std::uint8_t*, std::size_t,
                                                      std::size_t, double*);

template bool segment_matches<float>(const LrsuqParams&, const ChaChaKey&, const std::uint8_t*,
                                     std::size_t, std::size_t, double, std::size_t,
                                     const float*, std::size_t);
template bool segment_matches<double>(const LrsuqParams&, const ChaChaKey&, const std::uint8_t*,
                                      std::size_t, std::size_t, double, std::size_t,
                                      const double*, std::size_t);

template std::optional<std::vector<std::uint8_t>> encode_box_ans_body_by_symbols<float>(
    const LrsuqParams&, const ChaChaKey&, const float*, std::size_t, double, const StreamCoder&);
template std::optional<std::vector<std::uint8_t>> encode_box_ans_body_by_symbols<double>(
    const LrsuqParams&, const ChaChaKey&, const double*, std::size_t, double, const StreamCoder&);

}  // namespace cepam
