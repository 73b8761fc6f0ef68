#include "payload/ans_streams.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "coding/source_model.hpp"
#include "common/errors.hpp"
#include "payload/ans_body.hpp"
#include "payload/body.hpp"

namespace cepam {
namespace {

// Stream k's symbols, symbols[first[k] .. first[k + 1]).
std::vector<AnsSymbol> stream_symbols(const std::vector<AnsSymbol>& symbols,
                                      const std::vector<std::uint64_t>& first, std::size_t k) {
  return std::vector<AnsSymbol>(symbols.begin() + static_cast<std::ptrdiff_t>(first[k]),
                                symbols.begin() + static_cast<std::ptrdiff_t>(first[k + 1]));
}

}  // namespace

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
  const std::size_t segments = body_segments(m, p.n);
  const CellWidths widths = typical_cell_widths(p);
  const SourceModel model = SourceModel::fit(x, m, factor, widths.lo, widths.hi);
  const TriangularBasis basis = lattice_basis(p);
  const double accept = acceptance_probability(p);
  const bool point_model = uses_point_model(p.lattice);
  // Every segment's symbols (each block: LRSUQ by the kernels' functions,
  // then the segment encoder), and the streams to code: each segment's box
  // stream, then (point model) each segment's point stream, empty where
  // the segment has no table.
  std::vector<std::unique_ptr<AnsSegmentEncoder>> enc(segments);
  std::vector<std::uint32_t> H(std::min(N, kAnsBlock));
  std::vector<std::int64_t> M(H.size() * n);
  std::vector<double> beta(H.size()), V(H.size() * n);
  std::vector<AnsSymbol> symbols;
  std::vector<std::uint64_t> first{0};
  std::vector<unsigned char> tabled(segments, 0);
  const auto add = [&](const AnsEncoder* stream) {
    if (stream != nullptr)
      symbols.insert(symbols.end(), stream->data(), stream->data() + stream->symbols());
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
    add(&enc[s]->box_symbols());
    tabled[s] = enc[s]->point_symbols() != nullptr ? 1 : 0;
  }
  if (point_model)
    for (std::size_t s = 0; s < segments; ++s) add(enc[s]->point_symbols());
  std::vector<std::uint8_t> streams;
  std::vector<std::uint64_t> sizes;
  code(symbols.data(), first.data(), first.size() - 1, streams, sizes);
  return assemble_ans_body(model, m, point_model, streams.data(), sizes, tabled,
                           [&](std::size_t k) { return stream_symbols(symbols, first, k); });
}

template std::vector<std::uint8_t> encode_ans_body_by_streams<float>(
    const LrsuqParams&, const ChaChaKey&, const float*, std::size_t, double, const StreamCoder&);
template std::vector<std::uint8_t> encode_ans_body_by_streams<double>(
    const LrsuqParams&, const ChaChaKey&, const double*, std::size_t, double, const StreamCoder&);

SymbolTables::SymbolTables(const SourceModel& model, const GeometricCoder& hcoder,
                           const LrsuqParams& p)
    : z_{} {
  const TriangularBasis basis = lattice_basis(p);
  if (basis.n < 1 || basis.n > BoxTerms::kMaxN)
    throw InvalidArgument("the shared symbol code takes lattices of at most 8 dimensions");
  basis_ = box_terms(basis.n, basis.b.data());
  point_basis_ = PointBasis{};
  z_.cdf = model.cdf_view();
  z_.quantile = model.quantile_table();
  z_.geometric = hcoder.table();
  z_.basis = &basis_;
  z_.points = PointBounds{};  // usable = 0
  z_.point_basis = &point_basis_;
  if (uses_point_model(p.lattice)) {
    const PointCoder points(model, basis);
    z_.points = points.bounds();
    point_basis_ = points.basis();
  }
  z_.block = kAnsBlock;
  z_.piece = piece_subvectors(basis.n);
}

BodySymbols body_symbols(const SymbolModel& z, std::size_t N, std::size_t S,
                         const std::uint32_t* H, const std::int64_t* M, const double* beta,
                         const double* V) {
  const SymbolUnits u = symbol_units(z, N, S);
  const std::size_t box_units_end = u.segments * u.per_segment;
  BodySymbols out;
  std::vector<unsigned char> framed(u.segments, 0);
  out.tabled.assign(u.segments, 0);
  std::vector<std::uint64_t> at(u.count + 1, 0);
  // A point table (7 KiB) for the point units, where there are some.
  const std::unique_ptr<PointTable> table =
      u.streams == 2 ? std::make_unique<PointTable>() : nullptr;
  // The kernels' passes: the box units' counts, noting the segments with a
  // point frame; the point units' counts there, noting those with a table;
  // then the symbols.
  for (std::size_t i = 0; i < box_units_end; ++i) {
    bool flag = false;
    at[i + 1] = unit_symbols(z, u, i, H, M, beta, V, nullptr, table.get(), nullptr, &flag);
    if (flag) framed[i / u.per_segment] = 1;
  }
  for (std::size_t i = box_units_end; i < u.count; ++i) {
    bool flag = false;
    at[i + 1] = unit_symbols(z, u, i, H, M, beta, V, framed.data(), table.get(), nullptr, &flag);
    if (flag) out.tabled[i / u.per_segment - u.segments] = 1;
  }
  for (std::size_t i = 0; i < u.count; ++i) at[i + 1] += at[i];
  out.symbols.resize(at[u.count]);
  for (std::size_t i = 0; i < u.count; ++i) {
    bool flag = false;
    unit_symbols(z, u, i, H, M, beta, V, framed.data(), table.get(), out.symbols.data() + at[i],
                 &flag);
  }
  out.first.assign(u.streams * u.segments + 1, 0);
  stream_offsets(u, at.data(), out.first.data());
  return out;
}

std::vector<std::uint8_t> assemble_ans_body(
    const SourceModel& model, std::size_t m, bool point_model, const std::uint8_t* streams,
    const std::vector<std::uint64_t>& sizes, const std::vector<unsigned char>& tabled,
    const std::function<std::vector<AnsSymbol>(std::size_t)>& last_symbols) {
  const std::size_t segments = tabled.size();
  if (sizes.size() != (point_model ? 2 : 1) * segments)
    throw EncodingError("the stream coder lost streams");
  std::vector<std::uint64_t> at(sizes.size() + 1, 0);  // stream k's bytes: streams + at[k]
  for (std::size_t k = 0; k < sizes.size(); ++k) at[k + 1] = at[k] + sizes[k];
  std::vector<std::uint8_t> out;
  model.serialize(out);
  std::size_t last_begin = out.size(), last_stream = 0;
  for (std::size_t s = 0; s < segments; ++s) {
    // The shorter of the box and point streams (the box model's on a tie),
    // as AnsSegmentEncoder::finish.
    const bool use_points = tabled[s] != 0 && sizes[segments + s] < sizes[s];
    const std::size_t k = use_points ? segments + s : s;
    last_begin = out.size();
    last_stream = k;
    append_segment(out, point_model, use_points, streams + at[k],
                   static_cast<std::size_t>(sizes[k]));
  }
  if (out.size() < min_body_bytes(m) && segments > 0) {  // the bomb rule's padding
    const std::vector<AnsSymbol> last = last_symbols(last_stream);
    AnsEncoder enc;
    if (!last.empty()) std::memcpy(enc.append(last.size()), last.data(), last.size() * sizeof(AnsSymbol));
    out.resize(last_begin);
    std::vector<std::uint8_t> stream;
    enc.finish(stream, min_body_bytes(m) - last_begin - segment_prefix(point_model));
    append_segment(out, point_model, last_stream >= segments, stream.data(), stream.size());
  }
  return out;
}

template <class T>
BodySymbols body_symbols_of(const LrsuqParams& p, const ChaChaKey& key, const T* x,
                            std::size_t m, double factor, const SourceModel& model) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const GeometricCoder hcoder(acceptance_probability(p));
  // The stage of every sub-vector, as a GPU holds it.
  std::vector<std::uint32_t> H(N);
  std::vector<std::int64_t> M(N * n);
  std::vector<double> beta(N), V(N * n);
  if (N > 0) lrsuq_encode_subvectors(p, key, x, m, factor, 0, N, H.data(), M.data(), beta.data(), V.data());
  const SymbolTables tables(model, hcoder, p);
  return body_symbols(tables.z(), N, segment_subvectors(p.n),
                              H.data(), M.data(), beta.data(), V.data());
}

template <class T>
std::vector<std::uint8_t> encode_ans_body_by_symbols(const LrsuqParams& p,
                                                     const ChaChaKey& key, const T* x,
                                                     std::size_t m, double factor,
                                                     const StreamCoder& code) {
  const CellWidths widths = typical_cell_widths(p);
  const SourceModel model = SourceModel::fit(x, m, factor, widths.lo, widths.hi);
  const BodySymbols body = body_symbols_of(p, key, x, m, factor, model);
  std::vector<std::uint8_t> streams;
  std::vector<std::uint64_t> sizes;
  code(body.symbols.data(), body.first.data(), body.first.size() - 1, streams, sizes);
  return assemble_ans_body(model, m, uses_point_model(p.lattice), streams.data(), sizes,
                           body.tabled, [&](std::size_t k) {
                             return stream_symbols(body.symbols, body.first, k);
                           });
}

bool ans_segment_matches(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                         std::size_t m, std::size_t s, const std::uint32_t* H,
                         const std::int64_t* M, const double* beta, const double* V) {
  const AnsBody parsed(body, len, uses_point_model(p.lattice), body_segments(m, p.n));
  if (s >= parsed.segments().size()) throw InvalidArgument("the body has no such segment");
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  const std::size_t count = std::min(N, s * S + S) - s * S;
  // The CPU's segment encoder, block by block, with the body's model.
  const bool point_model = uses_point_model(p.lattice);
  const TriangularBasis basis = lattice_basis(p);  // (the encoder holds a reference)
  AnsSegmentEncoder enc(parsed.model(), acceptance_probability(p), basis, count, point_model);
  for (std::size_t b0 = 0; b0 < count; b0 += kAnsBlock) {
    const std::size_t c = std::min(kAnsBlock, count - b0);
    enc.encode_block(c, H + b0, M + b0 * n, beta + b0, V + b0 * n);
  }
  // The body's stream length as the least: the same padding, if the body's
  // last segment has some (the smallest count that reaches it).  The
  // segment: its length, its model byte (point model), its stream.
  const AnsBody::Segment& seg = parsed.segments()[s];
  std::vector<std::uint8_t> coded;
  enc.finish(coded, seg.size);
  const std::size_t prefix = segment_prefix(point_model);
  return coded.size() == prefix + seg.size &&
         std::equal(coded.begin(), coded.end(), parsed.data() + seg.offset - prefix);
}

DecodePlan::DecodePlan(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                       std::size_t m)
    : ans(body, len, uses_point_model(p.lattice), body_segments(m, p.n)),
      hcoder(acceptance_probability(p)),
      tables(ans.model(), hcoder, p),
      config(lrsuq_subvector_config(p)),
      points(false) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  const std::size_t count = ans.segments().size();
  segments.reserve(count);
  for (std::size_t s = 0; s < count; ++s) {
    const AnsBody::Segment& seg = ans.segments()[s];
    segments.push_back(DecodeSegment{seg.offset, seg.size, s * S, std::min(N, (s + 1) * S),
                                     segment_may_pad(s, count, len, m) ? 1 : 0,
                                     seg.points ? 1 : 0});
    points = points || seg.points;
  }
}

template <class T>
void decode_ans_body_by_segments(const LrsuqParams& p, const ChaChaKey& key,
                                 const std::uint8_t* body, std::size_t len, std::size_t m, T* y) {
  const DecodePlan plan(p, body, len, m);
  const std::size_t n = static_cast<std::size_t>(p.n);
  std::vector<std::uint32_t> H(plan.z().block);
  std::vector<double> beta(plan.z().piece), V(plan.z().piece * n);
  std::vector<std::int64_t> M(plan.z().piece * n);
  const std::unique_ptr<PointTable> table =
      plan.points ? std::make_unique<PointTable>() : nullptr;  // (7 KiB)
  const DecodeScratch scratch{H.data(), beta.data(), V.data(), M.data(), table.get()};
  decode_in_order(plan.segments, dtype_name<T>(), [&](const DecodeSegment& seg) {
    return decode_segment(plan.z(), plan.config, key.data(), body, seg, m, scratch, y);
  });
}

template void decode_ans_body_by_segments<float>(const LrsuqParams&, const ChaChaKey&,
                                                 const std::uint8_t*, std::size_t, std::size_t,
                                                 float*);
template void decode_ans_body_by_segments<double>(const LrsuqParams&, const ChaChaKey&,
                                                  const std::uint8_t*, std::size_t, std::size_t,
                                                  double*);

template BodySymbols body_symbols_of<float>(const LrsuqParams&, const ChaChaKey&, const float*,
                                            std::size_t, double, const SourceModel&);
template BodySymbols body_symbols_of<double>(const LrsuqParams&, const ChaChaKey&, const double*,
                                             std::size_t, double, const SourceModel&);
template std::vector<std::uint8_t> encode_ans_body_by_symbols<float>(
    const LrsuqParams&, const ChaChaKey&, const float*, std::size_t, double, const StreamCoder&);
template std::vector<std::uint8_t> encode_ans_body_by_symbols<double>(
    const LrsuqParams&, const ChaChaKey&, const double*, std::size_t, double, const StreamCoder&);

}  // namespace cepam
