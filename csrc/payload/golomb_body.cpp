#include "payload/golomb_body.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "coding/bitstream.hpp"
#include "coding/golomb_core.hpp"
#include "common/errors.hpp"
#include "lrsuq/quantizer.hpp"
#include "payload/segments.hpp"
#include "payload/body_loops.hpp"
#include "common/parallel.hpp"
#include "common/scratch.hpp"

namespace cepam {
namespace {

// A code's bits: in one put where they fit (the zeros are leading zeros of
// the tail), else the zeros, then the tail.
inline void put_code(const PrefixCode& code, BitWriter& w) {
  const int total = code.zeros + code.bits;
  if (total <= 56) {
    w.put(code.tail, total);
  } else {
    w.put_zeros(static_cast<std::uint64_t>(code.zeros));
    w.put_long(code.tail, code.bits);
  }
}

void check_layout(const BodyLayout& layout) {
  if (layout.golomb > kMaxGolomb) throw FormatError("Golomb parameter out of range");
  if (layout.expg_k < 0 || layout.expg_k > kMaxExpGolombOrder)
    throw FormatError("exp-Golomb order out of range");
}

}  // namespace

std::uint32_t golomb_parameter(double p) {
  if (!(p > 0.0 && p <= 1.0)) throw InvalidArgument("acceptance probability must be in (0, 1]");
  if (p == 1.0) return 0;
  const double g = std::ceil(std::log(2.0 - p) / -std::log1p(-p));
  return g < 1.0 ? 1u : static_cast<std::uint32_t>(g);
}

void add_bit_lengths(const std::int64_t* M, std::size_t count, std::uint64_t* hist) {
  // Four interleaved parts, so that runs of equal lengths do not serialise
  // on one counter.
  std::uint64_t part[4][kBitLengths] = {};
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    ++part[0][bit_length64(zigzag64(M[i]))];
    ++part[1][bit_length64(zigzag64(M[i + 1]))];
    ++part[2][bit_length64(zigzag64(M[i + 2]))];
    ++part[3][bit_length64(zigzag64(M[i + 3]))];
  }
  for (; i < count; ++i) ++part[0][bit_length64(zigzag64(M[i]))];
  for (int b = 0; b < kBitLengths; ++b) hist[b] += part[0][b] + part[1][b] + part[2][b] + part[3][b];
}

int best_expg_order(const std::uint64_t* hist) {
  int best = 0;
  std::uint64_t best_cost = ~std::uint64_t{0};
  for (int k = 0; k <= kMaxExpGolombOrder; ++k) {
    // A value of bit length b costs 2 max(b, k + 1) - k - 1 bits (give or
    // take the carry of adding 2^k).
    std::uint64_t cost = 0;
    for (int b = 0; b < kBitLengths; ++b) {
      const int len = b > k + 1 ? b : k + 1;
      cost += hist[b] * static_cast<std::uint64_t>(2 * len - k - 1);
    }
    if (cost < best_cost) {
      best_cost = cost;
      best = k;
    }
  }
  return best;
}

int best_expg_order(const std::int64_t* M, std::size_t count) {
  std::uint64_t hist[kBitLengths] = {};
  add_bit_lengths(M, count, hist);
  return best_expg_order(hist);
}

void put_h_codes(const std::uint32_t* H, std::size_t N, std::uint32_t golomb, BitWriter& w) {
  if (golomb == 0) {
    for (std::size_t j = 0; j < N; ++j)
      if (H[j] != 1) throw InvalidArgument("trial index must be 1 when H is not coded");
    return;
  }
  const GolombCode c = golomb_code(golomb);
  for (std::size_t j = 0; j < N; ++j) {
    if (H[j] < 1) throw InvalidArgument("trial index must be at least 1");
    if (H[j] > kTrialCap) throw InvalidArgument("trial index above the cap");
    put_code(h_code(c, H[j]), w);
  }
}

template <class I>
void put_m_codes(const I* M, std::size_t count, int k, BitWriter& w) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t m = static_cast<std::int64_t>(M[i]);
    if (m > kMaxAbsM || m < -kMaxAbsM) throw InvalidArgument("lattice coordinate too large");
    put_code(m_code(k, m), w);
  }
}
template void put_m_codes<std::int16_t>(const std::int16_t*, std::size_t, int, BitWriter&);
template void put_m_codes<std::int32_t>(const std::int32_t*, std::size_t, int, BitWriter&);
template void put_m_codes<std::int64_t>(const std::int64_t*, std::size_t, int, BitWriter&);

void encode_body(const std::uint32_t* H, std::size_t N, const std::int64_t* M, std::size_t count,
                 BodyLayout& layout, std::vector<std::uint8_t>& out) {
  check_layout(layout);
  {
    BitWriter w(out);
    put_h_codes(H, N, layout.golomb, w);
    layout.h_bits = w.bits();
    w.finish();
  }
  {
    BitWriter w(out);
    put_m_codes(M, count, layout.expg_k, w);
    layout.m_bits = w.bits();
    w.finish();
  }
}

std::uint64_t min_bits_h(const BodyLayout& layout, std::uint64_t N) {
  return layout.golomb == 0 ? 0 : N;  // at least the terminating one bit each
}

std::uint64_t min_bits_m(const BodyLayout& layout, std::uint64_t count) {
  return count * static_cast<std::uint64_t>(layout.expg_k + 1);
}

void check_sections(const BodyLayout& layout, std::size_t len) {
  check_layout(layout);
  const std::uint64_t max_bits = std::uint64_t{1} << 60;
  if (layout.h_bits > max_bits || layout.m_bits > max_bits)
    throw FormatError("declared section length out of range");
  const std::uint64_t h_bytes = (layout.h_bits + 7) / 8;
  const std::uint64_t m_bytes = (layout.m_bits + 7) / 8;
  if (h_bytes + m_bytes != static_cast<std::uint64_t>(len))
    throw FormatError("body length does not match its declared sections");
}

void check_body(const BodyLayout& layout, std::size_t len, std::uint64_t N, std::uint64_t count) {
  check_sections(layout, len);
  // count <= m_bits and N <= count keep the products below 2^64.
  if (count > layout.m_bits || N > count || min_bits_h(layout, N) > layout.h_bits ||
      min_bits_m(layout, count) > layout.m_bits)
    throw FormatError("declared number of coordinates does not fit the body");
}

namespace {

void check(ReadStatus st) {
  if (st != kReadOk) throw FormatError(read_message(st));
}

}  // namespace

GolombBodyReader::GolombBodyReader(const std::uint8_t* data, std::size_t len,
                                   const BodyLayout& layout, std::uint64_t N,
                                   std::uint64_t count)
    : data_(data),
      layout_((check_body(layout, len, N, count), layout)),
      h_bytes_((layout.h_bits + 7) / 8),
      m_bytes_((layout.m_bits + 7) / 8),
      h_{data, layout.h_bits, 0},
      m_{data + h_bytes_, layout.m_bits, 0} {}

void GolombBodyReader::finish_h() const {
  check(golomb_section_end(h_, layout_.h_bits, data_, h_bytes_, kReadHTrailing, kReadHPadding));
}

void GolombBodyReader::finish_m() const {
  check(golomb_section_end(m_, layout_.m_bits, data_ + h_bytes_, m_bytes_, kReadMTrailing,
                           kReadMPadding));
}

void GolombBodyReader::read_h(std::size_t N, std::uint32_t* H) {
  check(golomb_read_h(h_, layout_.golomb, N, H));
}

void GolombBodyReader::read_m(std::size_t count, std::int64_t* M) {
  check(golomb_read_m(m_, layout_.expg_k, count, M));
}

GolombPlan golomb_plan(const GolombUnits& u, std::uint32_t golomb, const int* k,
                       const std::uint64_t* h_bits, const std::uint64_t* m_bits) {
  GolombPlan plan;
  plan.golomb = golomb;
  plan.segments.resize(u.segments);
  plan.h_pos.resize(u.count);
  plan.m_pos.resize(u.count);
  std::uint64_t at = kGolombParams;  // bytes before the segment
  for (std::size_t s = 0; s < u.segments; ++s) {
    BodyLayout& seg = plan.segments[s];
    seg.golomb = golomb;
    seg.expg_k = k[s];
    const std::size_t first = s * u.per_segment;
    for (std::size_t t = first; t < first + u.per_segment; ++t) {
      seg.h_bits += h_bits[t];
      seg.m_bits += m_bits[t];
    }
    std::uint64_t h = 8 * (at + kGolombSegmentHeader);
    std::uint64_t m = h + 8 * ((seg.h_bits + 7) / 8);
    for (std::size_t t = first; t < first + u.per_segment; ++t) {
      plan.h_pos[t] = h;
      plan.m_pos[t] = m;
      h += h_bits[t];
      m += m_bits[t];
    }
    at += kGolombSegmentHeader + (seg.h_bits + 7) / 8 + (seg.m_bits + 7) / 8;
  }
  plan.bytes = static_cast<std::size_t>(at);
  return plan;
}

void put_golomb_params(std::uint32_t golomb, std::uint8_t* body) { store_le(body, golomb, 4); }

void put_segment_header(const BodyLayout& layout, std::uint8_t* at) {
  at[0] = static_cast<std::uint8_t>(layout.expg_k);
  store_le(at + 1, layout.h_bits, 8);
  store_le(at + 9, layout.m_bits, 8);
}

void put_golomb_headers(const GolombPlan& plan, std::uint8_t* body) {
  put_golomb_params(plan.golomb, body);
  std::size_t at = kGolombParams;
  for (const BodyLayout& seg : plan.segments) {
    put_segment_header(seg, body + at);
    at += kGolombSegmentHeader + (seg.h_bits + 7) / 8 + (seg.m_bits + 7) / 8;
  }
}

std::vector<std::uint8_t> golomb_body_by_units(std::uint32_t golomb, const std::uint32_t* H,
                                               const std::int64_t* M, std::size_t N, int n) {
  const std::size_t dim = static_cast<std::size_t>(n);
  const GolombUnits u = golomb_units(N, segment_subvectors(n), dim);
  const GolombCode code = golomb_code(golomb);
  // The passes of the kernels, one unit after another.
  std::vector<std::uint64_t> h_bits(u.count), m_bits(u.count);
  std::vector<std::uint64_t> lengths(u.segments * kBitLengths, 0);
  for (std::size_t t = 0; t < u.count; ++t) {
    std::uint64_t* own = lengths.data() + t / u.per_segment * kBitLengths;
    h_bits[t] = golomb_unit_h_bits(u, code, t, H, M, [&](int b) { ++own[b]; });
  }
  std::vector<int> k(u.segments);
  for (std::size_t s = 0; s < u.segments; ++s)
    k[s] = best_expg_order(lengths.data() + s * kBitLengths);
  for (std::size_t t = 0; t < u.count; ++t)
    m_bits[t] = golomb_unit_m_bits(u, k[t / u.per_segment], t, M);
  const GolombPlan plan = golomb_plan(u, golomb, k.data(), h_bits.data(), m_bits.data());
  std::vector<std::uint8_t> body(plan.bytes, 0);
  std::uint8_t* bytes = body.data();
  for (std::size_t t = 0; t < u.count; ++t)
    golomb_unit_write(u, code, k[t / u.per_segment], t, H, M, plan.h_pos[t], plan.m_pos[t],
                      [&](std::uint64_t w, std::uint32_t bits) {
                        // bytes [4w, 4w + 4), the first in the low bits; those past the
                        // body's end are zero bits (no code reaches them).
                        for (std::uint64_t i = 0; i < 4 && 4 * w + i < plan.bytes; ++i)
                          bytes[4 * w + i] |= static_cast<std::uint8_t>(bits >> (8 * i));
                      });
  put_golomb_headers(plan, bytes);
  return body;
}

bool golomb_segment_matches(const std::uint8_t* body, std::size_t len, std::size_t N, int n,
                            std::size_t s, const std::uint32_t* H, const std::int64_t* M) {
  const std::size_t S = segment_subvectors(n);
  const GolombBody parsed(body, len, N / S + (N % S != 0 ? 1 : 0));
  if (s >= parsed.segments().size()) throw InvalidArgument("the body has no such segment");
  const std::size_t count = std::min(N, s * S + S) - s * S;
  const std::size_t coordinates = count * static_cast<std::size_t>(n);
  std::vector<std::uint8_t> h, m, coded;
  BodyLayout layout;
  layout.golomb = parsed.golomb();
  layout.expg_k = best_expg_order(M, coordinates);
  BitWriter hw(h), mw(m);
  put_h_codes(H, count, layout.golomb, hw);
  put_m_codes(M, coordinates, layout.expg_k, mw);
  layout.h_bits = hw.bits();
  layout.m_bits = mw.bits();
  hw.finish();
  mw.finish();
  append_segment(layout, h, m, coded);
  const GolombBody::Segment& seg = parsed.segments()[s];
  return coded.size() == kGolombSegmentHeader + seg.bytes() &&
         std::equal(coded.begin(), coded.end(), body + seg.offset - kGolombSegmentHeader);
}

GolombBody::GolombBody(const std::uint8_t* data, std::size_t len, std::size_t segments)
    : data_(data) {
  if (len < kGolombParams) throw FormatError("body too short for its coder parameters");
  const std::uint64_t golomb = load_le(data, 4);
  if (golomb > kMaxGolomb) throw FormatError("Golomb parameter out of range");
  golomb_ = static_cast<std::uint32_t>(golomb);
  std::size_t pos = kGolombParams;
  // Checked before anything is allocated: the body can hold that many segments.
  const std::size_t most = (len - pos) / kGolombSegmentHeader;
  if (segments != kAnySegments && segments > most)
    throw FormatError("body too short for its number of segments");
  segments_.reserve(segments != kAnySegments ? segments : most);
  while (pos < len && segments_.size() != segments) {
    if (len - pos < kGolombSegmentHeader)
      throw FormatError("body truncated in a segment's lengths");
    Segment seg{pos + kGolombSegmentHeader,
                {golomb_, data[pos], load_le(data + pos + 1, 8), load_le(data + pos + 9, 8)}};
    pos += kGolombSegmentHeader;
    if (seg.layout.expg_k > kMaxExpGolombOrder) throw FormatError("exp-Golomb order out of range");
    const std::uint64_t max_bits = std::uint64_t{1} << 60;
    if (seg.layout.h_bits > max_bits || seg.layout.m_bits > max_bits)
      throw FormatError("declared section length out of range");
    if (seg.bytes() > len - pos) throw FormatError("segment's sections overrun the body");
    segments_.push_back(seg);
    pos += seg.bytes();
  }
  if (segments != kAnySegments && segments_.size() != segments)
    throw FormatError("body has fewer segments than its coordinates need");
  if (pos != len) throw FormatError("body length does not match its declared segments");
}

GolombBody golomb_body_of(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                          std::size_t m) {
  GolombBody golomb(body, len, body_segments(m, p.n));
  if (golomb.golomb() == 0 && acceptance_probability(p) < 1.0)
    throw FormatError("trial indices must be coded for this lattice");
  return golomb;
}

GolombDecodePlan::GolombDecodePlan(const LrsuqParams& p, const std::uint8_t* body,
                                   std::size_t len, std::size_t m)
    : config(lrsuq_subvector_config(p)) {
  const GolombBody parsed = golomb_body_of(p, body, len, m);
  golomb = parsed.golomb();
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = m / n + (m % n != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(p.n);
  segments.reserve(parsed.segments().size());
  for (std::size_t s = 0; s < parsed.segments().size(); ++s) {
    const GolombBody::Segment& seg = parsed.segments()[s];
    const std::uint64_t first = s * S, last = std::min(N, s * S + S);
    int fits = 1;
    try {
      parsed.check(s, last - first, (last - first) * n);
    } catch (const FormatError&) {
      fits = 0;  // (the segment's outcome: the CPU's reader refuses it when opened)
    }
    segments.push_back(GolombSegmentSpan{seg.offset, seg.layout.h_bits, seg.layout.m_bits, first,
                                         last, seg.layout.expg_k, fits});
  }
}

template <class T>
void decode_golomb_body_by_segments(const LrsuqParams& p, const ChaChaKey& key,
                                    const std::uint8_t* body, std::size_t len, std::size_t m,
                                    T* y) {
  const GolombDecodePlan plan(p, body, len, m);
  const std::size_t piece = golomb_piece(static_cast<std::size_t>(p.n));
  std::vector<std::uint32_t> H(piece);
  std::vector<std::int64_t> M(piece * static_cast<std::size_t>(p.n));
  decode_in_order(plan.segments, dtype_name<T>(), [&](const GolombSegmentSpan& seg) {
    return decode_golomb_segment(plan.config, key.data(), body, seg, plan.golomb, m, H.data(),
                                 M.data(), y);
  });
}

template void decode_golomb_body_by_segments<float>(const LrsuqParams&, const ChaChaKey&,
                                                    const std::uint8_t*, std::size_t, std::size_t,
                                                    float*);
template void decode_golomb_body_by_segments<double>(const LrsuqParams&, const ChaChaKey&,
                                                     const std::uint8_t*, std::size_t,
                                                     std::size_t, double*);

void GolombBody::check(std::size_t s, std::uint64_t N, std::uint64_t count) const {
  const Segment& seg = segments_[s];
  check_body(seg.layout, seg.bytes(), N, count);
}

GolombBodyReader GolombBody::reader(std::size_t s, std::uint64_t N, std::uint64_t count) const {
  const Segment& seg = segments_[s];
  return GolombBodyReader(data_ + seg.offset, seg.bytes(), seg.layout, N, count);
}

void append_segment(const BodyLayout& layout, const std::vector<std::uint8_t>& h,
                    const std::vector<std::uint8_t>& m, std::vector<std::uint8_t>& out) {
  const std::size_t at = out.size();
  out.resize(at + kGolombSegmentHeader);
  put_segment_header(layout, out.data() + at);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), m.begin(), m.end());
}

void decode_body(const std::uint8_t* data, std::size_t size, const BodyLayout& layout,
                 std::size_t N, std::size_t count, std::uint32_t* H, std::int64_t* M) {
  GolombBodyReader reader(data, size, layout, N, count);
  reader.read_h(N, H);
  reader.finish_h();
  reader.read_m(count, M);
  reader.finish_m();
}

// --- The coder of payload/body.cpp's table: its threaded loops ---------------

namespace {

// Codes into bytes (padded to a byte), returns the bits.
template <class Put>
std::uint64_t coded_bits(std::vector<std::uint8_t>& bytes, Put&& put) {
  BitWriter w(bytes);
  put(w);
  const std::uint64_t bits = w.bits();
  w.finish();
  return bits;
}

// A segment's lattice coordinates kept until their code's order is known
// (in the narrowest of int16, int32 and int64 that holds them all: int16 or
// int32 in practice); a thread's, reused from segment to segment.
class KeptCoordinates {
 public:
  // Appends M[0..count) (of `total` in the segment), first widening those
  // kept where a value needs it.
  void keep(const std::int64_t* M, std::size_t count, std::size_t total) {
    if (count == 0) return;
    const auto [lo, hi] = std::minmax_element(M, M + count);
    const int need = *lo >= INT16_MIN && *hi <= INT16_MAX   ? 16
                     : *lo >= INT32_MIN && *hi <= INT32_MAX ? 32
                                                            : 64;
    if (need > width_) {
      if (need == 32) {
        m32_.assign(m16_.begin(), m16_.end());
      } else if (width_ == 16) {
        m64_.assign(m16_.begin(), m16_.end());
      } else {
        m64_.assign(m32_.begin(), m32_.end());
      }
      width_ = need;
    }
    if (width_ == 16) append(m16_, M, count, total);
    else if (width_ == 32) append(m32_, M, count, total);
    else append(m64_, M, count, total);
  }
  // Puts the kept coordinates' codes of order k.
  void put_codes(int k, BitWriter& w) const {
    if (width_ == 64) put_m_codes(m64_.data(), m64_.size(), k, w);
    else if (width_ == 32) put_m_codes(m32_.data(), m32_.size(), k, w);
    else put_m_codes(m16_.data(), m16_.size(), k, w);
  }
  // Forgets the kept coordinates (their buffers kept for the next segment).
  void clear() {
    m16_.clear();
    m32_.clear();
    m64_.clear();
    width_ = 16;
  }

 private:
  template <class I>
  static void append(std::vector<I>& kept, const std::int64_t* M, std::size_t count,
                     std::size_t total) {
    if (kept.capacity() < total) kept.reserve(total);
    for (std::size_t i = 0; i < count; ++i) kept.push_back(static_cast<I>(M[i]));
  }
  int width_ = 16;
  std::vector<std::int16_t> m16_;
  std::vector<std::int32_t> m32_;
  std::vector<std::int64_t> m64_;
};

// The Golomb body of x: its parameter, then its segments in parallel, each
// (a part of the body) its header, piece by piece LRSUQ and the codes of H,
// then (the order of M's code known from the segment's coordinates) the
// codes of M.  Holds the codes, and a segment's M and a piece's symbols a
// thread.
template <class T>
void encode_golomb(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                   double factor, int threads, const LatticeStage* stage, CodedBody& body) {
  const std::size_t N = subvectors(p, m);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::uint32_t golomb = golomb_parameter(acceptance_probability(p));
  const std::size_t S = body_segments(m, p.n);
  body.parts.assign(S + 1, {});
  body.parts[0].resize(kGolombParams);
  put_golomb_params(golomb, body.parts[0].data());
  // A thread's buffers for a piece's LRSUQ and a segment's M, kept from
  // segment to segment.
  struct Worker {
    Scratch<std::uint32_t> H;
    Scratch<std::int64_t> M;
    LrsuqEncodeScratch lrsuq;
    KeptCoordinates kept;
  };
  const std::size_t B = std::min(N, golomb_piece(n));
  parallel_for_with(
      threads, S,
      [&] { return Worker{Scratch<std::uint32_t>(B), Scratch<std::int64_t>(B * n), {}, {}}; },
      [&](Worker& w, std::size_t s) {
        const SegmentRange range = segment_range(p, N, s);
        std::vector<std::uint8_t>& part = body.parts[s + 1];
        part.resize(kGolombSegmentHeader);  // then its sections
        w.kept.clear();
        BodyLayout layout;
        layout.golomb = golomb;
        std::uint64_t lengths[kBitLengths] = {};
        layout.h_bits = coded_bits(part, [&](BitWriter& bw) {
          for_each_block(range.first, range.last, [&](std::size_t j0, std::size_t count) {
            lattice_range(p, ks, x, m, factor, stage, j0, j0 + count, w.H.data(), w.M.data(),
                          nullptr, nullptr, &w.lrsuq);
            put_h_codes(w.H.data(), count, golomb, bw);
            add_bit_lengths(w.M.data(), count * n, lengths);
            w.kept.keep(w.M.data(), count * n, (range.last - range.first) * n);
          }, B);
        });
        layout.expg_k = best_expg_order(lengths);
        layout.m_bits =
            coded_bits(part, [&](BitWriter& bw) { w.kept.put_codes(layout.expg_k, bw); });
        put_segment_header(layout, part.data());
      });
}

// Decodes a Golomb body, its segments in parallel, piece by piece (a
// piece's H, then its M: the two sections are read in step), into H[N] and
// M[N n] where they are given, else into a piece's buffers a thread, and
// calls sink(j0, count, H, M) with each piece's symbols (from several
// threads at once, for disjoint pieces); checks each segment's end.
template <class Sink>
void decode_golomb_pieces(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                          std::size_t m, int threads, std::uint32_t* H, std::int64_t* M,
                          Sink&& sink) {
  const GolombBody golomb = golomb_body_of(p, body, len, m);
  const std::size_t N = subvectors(p, m);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t P = std::min(N, golomb_piece(n));
  const std::size_t buffer = H == nullptr ? P : 0;
  struct Piece {
    Scratch<std::uint32_t> H;
    Scratch<std::int64_t> M;
  };
  parallel_for_with(
      threads, golomb.segments().size(),
      [&] { return Piece{Scratch<std::uint32_t>(buffer), Scratch<std::int64_t>(buffer * n)}; },
      [&](Piece& b, std::size_t s) {
        const SegmentRange range = segment_range(p, N, s);
        const std::size_t count = range.last - range.first;
        GolombBodyReader reader = golomb.reader(s, count, count * n);
        for_each_block(range.first, range.last, [&](std::size_t j0, std::size_t c) {
          std::uint32_t* h = H != nullptr ? H + j0 : b.H.data();
          std::int64_t* mm = M != nullptr ? M + j0 * n : b.M.data();
          reader.read_h(c, h);
          reader.read_m(c * n, mm);
          sink(j0, c, h, mm);
        }, P);
        reader.finish_h();
        reader.finish_m();
      });
}

}  // namespace

void GolombBodyCoder::check(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                            std::size_t m) {
  const GolombBody golomb = golomb_body_of(p, body, len, m);
  const std::size_t N = subvectors(p, m);
  for (std::size_t s = 0; s < golomb.segments().size(); ++s) {
    const SegmentRange range = segment_range(p, N, s);
    const std::size_t count = range.last - range.first;
    golomb.check(s, count, count * static_cast<std::size_t>(p.n));
  }
}
template <class T>
void GolombBodyCoder::encode(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                             double factor, int threads, const LatticeStage* stage,
                             double /*peak: no source model*/, CodedBody& body) {
  encode_golomb(p, ks, x, m, factor, threads, stage, body);
}
template <class T>
void GolombBodyCoder::decode(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                             std::size_t len, std::size_t m, int threads, T* y) {
  decode_golomb_pieces(p, body, len, m, threads, nullptr, nullptr,
                       [&](std::size_t j0, std::size_t count, const std::uint32_t* H,
                           const std::int64_t* M) {
    lrsuq_decode_range(p, ks, H, M, j0, j0 + count, m, y);
  });
}
// (Every sub-vector is in one piece of one segment: each entry of H and
// M is written once, by the thread that decodes its segment.)
void GolombBodyCoder::symbols(const LrsuqParams& p, const KeyStream&, const std::uint8_t* body,
                              std::size_t len, std::size_t m, std::uint32_t* H, std::int64_t* M,
                              int threads) {
  const auto nothing = [](std::size_t, std::size_t, const std::uint32_t*,
                          const std::int64_t*) {};
  decode_golomb_pieces(p, body, len, m, threads, H, M, nothing);
}
bool GolombBodyCoder::matches(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                              std::size_t m, std::size_t s, const std::uint32_t* H, const std::int64_t* M,
                              const double*, const double*) {
  return golomb_segment_matches(body, len, subvectors(p, m), p.n, s, H, M);
}
void GolombBodyCoder::parts(const std::uint8_t* body, std::size_t len, LatticeId, std::size_t segments,
                            std::vector<std::pair<std::string, std::uint64_t>>& parts) {
  const GolombBody golomb(body, len, segments);
  std::uint64_t h = 0, mm = 0, padding = 0;
  for (const GolombBody::Segment& seg : golomb.segments()) {
    h += seg.layout.h_bits;
    mm += seg.layout.m_bits;
    padding += 8 * static_cast<std::uint64_t>(seg.bytes()) - seg.layout.h_bits -
               seg.layout.m_bits;
  }
  parts.emplace_back("params", 8 * kGolombParams);
  parts.emplace_back("segments", 8 * kGolombSegmentHeader * golomb.segments().size());
  parts.emplace_back("H", h);
  parts.emplace_back("M", mm);
  parts.emplace_back("padding", padding);
}

template void GolombBodyCoder::encode<float>(const LrsuqParams&, const KeyStream&, const float*,
                                             std::size_t, double, int, const LatticeStage*, double,
                                             CodedBody&);
template void GolombBodyCoder::encode<double>(const LrsuqParams&, const KeyStream&, const double*,
                                              std::size_t, double, int, const LatticeStage*, double,
                                              CodedBody&);
template void GolombBodyCoder::decode<float>(const LrsuqParams&, const KeyStream&,
                                             const std::uint8_t*, std::size_t, std::size_t, int,
                                             float*);
template void GolombBodyCoder::decode<double>(const LrsuqParams&, const KeyStream&,
                                              const std::uint8_t*, std::size_t, std::size_t, int,
                                              double*);

}  // namespace cepam
