#include "payload/body.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>

#include "payload/golomb_body.hpp"
#include "payload/ans_body.hpp"
#include "payload/ans_streams.hpp"
#include "common/errors.hpp"
#include "common/parallel.hpp"
#include "common/scratch.hpp"

namespace cepam {
namespace {

// The ANS encoder pairs segments only where every thread has at least this
// many (SegmentTasks).
constexpr std::size_t kPairSegments = 16;

std::size_t subvectors(const LrsuqParams& p, std::size_t m) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  return m / n + (m % n != 0 ? 1 : 0);
}

// The bomb rule (body.hpp).
void check_declared_size(std::size_t m, std::size_t len) {
  if (min_body_bytes(m) > len)
    throw FormatError("body of " + std::to_string(len) + " bytes declares " + std::to_string(m) +
                      " coordinates, more than its length can carry (" +
                      std::to_string(kCoordinatesPerBodyBit) + " a bit)");
}

// The decoder's buffers of one segment: the trial indices of a block, and
// the side information (beta, dither) and lattice points of a piece.
struct DecodeBuffers {
  Scratch<std::uint32_t> H;
  Scratch<std::int64_t> M;
  Scratch<double> beta, V;
  DecodeBuffers(std::size_t N, std::size_t n)
      : H(std::min(N, kAnsBlock)), M(std::min(N, piece(n)) * n), beta(std::min(N, piece(n))),
        V(std::min(N, piece(n)) * n) {}
  static std::size_t piece(std::size_t n) { return piece_subvectors(static_cast<int>(n)); }
};

// What the decoder hands on: `count` sub-vectors' trial indices, side
// information and lattice points.
struct DecodedPiece {
  const std::uint32_t* H;
  const double* beta;
  const double* V;
  const std::int64_t* M;
};

// The buffers of one ANS block: trial indices, lattice points and side
// information (beta, dither) of up to kAnsBlock sub-vectors.
struct AnsBlock {
  Scratch<std::uint32_t> H;
  Scratch<std::int64_t> M;
  Scratch<double> beta, V;
  AnsBlock(std::size_t N, std::size_t n)
      : H(block(N)), M(block(N) * n), beta(block(N)), V(block(N) * n) {}
  static std::size_t block(std::size_t N) { return N < kAnsBlock ? N : kAnsBlock; }
};

// Calls f(j0, count) for the blocks of `size` sub-vectors (kAnsBlock unless
// given) that cover [first, last).
template <class F>
void for_each_block(std::size_t first, std::size_t last, F&& f, std::size_t size = kAnsBlock) {
  for (std::size_t j0 = first; j0 < last; j0 += size) f(j0, last - j0 < size ? last - j0 : size);
}

// The sub-vectors [first, last) of ANS segment s.
struct SegmentRange {
  std::size_t first, last;
};
SegmentRange segment_range(const LrsuqParams& p, std::size_t N, std::size_t s) {
  const std::size_t S = segment_subvectors(p.n);
  return {s * S, N - s * S < S ? N : (s + 1) * S};
}

// How the segments of an ANS body go to the threads.  Where there are
// segments enough to keep every thread busy (at least `per_thread` a
// thread: at least 2), a task takes two segments and
// codes or decodes them together (their serial chains interleaved); the
// pairs come first, in a number that is a multiple of the threads, so that
// they come out even, and the rest (fewer than twice the threads, the
// short last segment among them) go one a task.  Only the speed depends on
// it: every segment is coded alone.
struct SegmentTasks {
  std::size_t pairs, count;  // the tasks: `pairs` pairs, then single segments
  SegmentTasks(std::size_t segments, int threads, std::size_t per_thread = 2) {
    const std::size_t w = threads < 1 ? 1 : static_cast<std::size_t>(threads);
    pairs = segments < std::max<std::size_t>(2, per_thread) * w ? 0 : segments / 2 / w * w;
    count = segments - pairs;
  }
  bool paired(std::size_t t) const { return t < pairs; }
  std::size_t first(std::size_t t) const { return t < pairs ? 2 * t : pairs + t; }
};

// Decodes an ANS body, its segments in parallel, block by block (a
// block's H, then its M piece by piece), and calls sink(j0, count, piece)
// with each piece's symbols and side information (from several threads at
// once, for disjoint pieces); checks each segment's end.  Holds
// DecodeBuffers for one segment, or two, a thread.
template <class Sink>
void decode_ans_blocks(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                       std::size_t len, std::size_t m, int threads, Sink&& sink) {
  const std::size_t N = subvectors(p, m);
  const AnsBody ans(body, len, uses_point_model(p.lattice), body_segments(m, p.n));
  const double accept = acceptance_probability(p);
  const TriangularBasis basis = lattice_basis(p);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t S = ans.segments().size();
  const auto finish = [&](AnsSegmentDecoder& dec, std::size_t s) {
    const std::size_t padding = dec.finish();
    if (padding != 0 && !segment_may_pad(s, S, len, m))
      throw FormatError(read_message(kReadPaddingBeyond));
  };
  const std::size_t P = DecodeBuffers::piece(n);
  // The side information of the piece of `count` sub-vectors at k0 in the
  // block at j0 (whose H are decoded).
  const auto side_info = [&](std::size_t j0, std::size_t k0, std::size_t count, DecodeBuffers& b) {
    lrsuq_side_info(p, ks, b.H.data() + k0, j0 + k0, j0 + k0 + count, b.beta.data(), b.V.data());
  };
  const auto hand_on = [&](std::size_t j0, std::size_t k0, std::size_t count, DecodeBuffers& b) {
    sink(j0 + k0, count, DecodedPiece{b.H.data() + k0, b.beta.data(), b.V.data(), b.M.data()});
  };
  const auto segment = [&](std::size_t s) {
    const SegmentRange range = segment_range(p, N, s);
    AnsSegmentDecoder dec(ans, s);
    DecodeBuffers b(range.last - range.first, n);
    for_each_block(range.first, range.last, [&](std::size_t j0, std::size_t count) {
      dec.decode_h(accept, count, b.H.data());
      for (std::size_t k0 = 0; k0 < count; k0 += P) {
        const std::size_t c = std::min(P, count - k0);
        side_info(j0, k0, c, b);
        dec.decode_m(basis, c, b.beta.data(), b.V.data(), b.M.data());
        hand_on(j0, k0, c, b);
      }
    });
    finish(dec, s);
  };
  // A pair of segments is decoded block by block in step, their serial
  // decoding chains interleaved where the coder allows (AnsSegmentDecoder::
  // decode_m_with).  A pair that fails is decoded again one segment at a
  // time, so that the error is the first in segment order, as unpaired (at
  // most twice the work, on the error path only).
  const SegmentTasks tasks(S, threads);
  const auto pair = [&](std::size_t s) {
    const SegmentRange r0 = segment_range(p, N, s), r1 = segment_range(p, N, s + 1);
    AnsSegmentDecoder d0(ans, s), d1(ans, s + 1);
    DecodeBuffers b0(r0.last - r0.first, n), b1(r1.last - r1.first, n);
    // The second segment may be the last, with fewer blocks.
    for (std::size_t j0 = r0.first, j1 = r1.first; j0 < r0.last; j0 += kAnsBlock, j1 += kAnsBlock) {
      const std::size_t c0 = std::min(kAnsBlock, r0.last - j0);
      const std::size_t c1 = j1 < r1.last ? std::min(kAnsBlock, r1.last - j1) : 0;
      d0.decode_h(accept, c0, b0.H.data());
      if (c1 != 0) d1.decode_h(accept, c1, b1.H.data());
      for (std::size_t k0 = 0; k0 < c0; k0 += P) {
        const std::size_t e0 = std::min(P, c0 - k0), e1 = k0 < c1 ? std::min(P, c1 - k0) : 0;
        side_info(j0, k0, e0, b0);
        if (e1 != 0) side_info(j1, k0, e1, b1);
        d0.decode_m_with(d1, basis, {e0, b0.beta.data(), b0.V.data(), b0.M.data()},
                         {e1, b1.beta.data(), b1.V.data(), b1.M.data()});
        hand_on(j0, k0, e0, b0);
        if (e1 != 0) hand_on(j1, k0, e1, b1);
      }
    }
    finish(d0, s);
    finish(d1, s + 1);
  };
  parallel_for(threads, tasks.count, [&](std::size_t t) {
    const std::size_t s = tasks.first(t);
    if (!tasks.paired(t)) return segment(s);
    try {
      pair(s);
    } catch (...) {
      segment(s);
      segment(s + 1);
      throw;
    }
  });
}

// Codes into bytes (padded to a byte), returns the bits.
template <class Put>
std::uint64_t coded_bits(std::vector<std::uint8_t>& bytes, Put&& put) {
  BitWriter w(bytes);
  put(w);
  const std::uint64_t bits = w.bits();
  w.finish();
  return bits;
}

// LRSUQ of sub-vectors [j0, j1) into H, M (and beta, V unless null),
// relative to j0: by the quantizer (with the working buffers `scratch`
// unless null), or copied from a stage computed elsewhere.
template <class T>
void lattice_range(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                   double factor, const LatticeStage* stage, std::size_t j0, std::size_t j1,
                   std::uint32_t* H, std::int64_t* M, double* beta, double* V,
                   LrsuqEncodeScratch* scratch = nullptr) {
  if (stage == nullptr) {
    lrsuq_encode_range(p, ks, x, m, factor, j0, j1, H, M, beta, V, scratch);
    return;
  }
  const std::size_t n = static_cast<std::size_t>(p.n);
  std::copy(stage->H + j0, stage->H + j1, H);
  std::copy(stage->M + j0 * n, stage->M + j1 * n, M);
  if (beta != nullptr) std::copy(stage->beta + j0, stage->beta + j1, beta);
  if (V != nullptr) std::copy(stage->V + j0 * n, stage->V + j1 * n, V);
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

// The body coders, one type each: check (without allocating what m
// sizes), encode, decode, symbols (H and M only), matches (a segment
// against the CPU's coding of its stage) and parts (the sections' sizes in
// bits), chosen from BodyCoders by their Coder code.
struct GolombBodyCoder {
  static constexpr Coder id = Coder::Golomb;
  static constexpr const char* name = "golomb";
  static void check(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
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
  static void encode(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                     double factor, int threads, const LatticeStage* stage,
                     CodedBody& body) {
    encode_golomb(p, ks, x, m, factor, threads, stage, body);
  }
  template <class T>
  static void decode(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                     std::size_t len, std::size_t m, int threads, T* y) {
    decode_golomb_pieces(p, body, len, m, threads, nullptr, nullptr,
                         [&](std::size_t j0, std::size_t count, const std::uint32_t* H,
                             const std::int64_t* M) {
      lrsuq_decode_range(p, ks, H, M, j0, j0 + count, m, y);
    });
  }
  // (Every sub-vector is in one piece of one segment: each entry of H and
  // M is written once, by the thread that decodes its segment.)
  static void symbols(const LrsuqParams& p, const KeyStream&, const std::uint8_t* body,
                      std::size_t len, std::size_t m, std::uint32_t* H, std::int64_t* M,
                      int threads) {
    const auto nothing = [](std::size_t, std::size_t, const std::uint32_t*,
                            const std::int64_t*) {};
    decode_golomb_pieces(p, body, len, m, threads, H, M, nothing);
  }
  static bool matches(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                      std::size_t m, std::size_t s, const std::uint32_t* H, const std::int64_t* M,
                      const double*, const double*) {
    return golomb_segment_matches(body, len, subvectors(p, m), p.n, s, H, M);
  }
  static void parts(const std::uint8_t* body, std::size_t len, LatticeId, std::size_t segments,
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
};

struct AnsBodyCoder {
  static constexpr Coder id = Coder::Ans;
  static constexpr const char* name = "ans";
  static void check(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                    std::size_t m) {
    // (AnsBody checks the model, the segments' lengths and model bytes; the
    // decoder builds the model's tables, this check needs none.)
    AnsBody(body, len, uses_point_model(p.lattice), body_segments(m, p.n), false);
  }
  // The model is fitted first; then the segments, each block by block
  // (LRSUQ, then the coder), in parallel (a non-finite input makes LRSUQ
  // throw in its segment, the first such segment's error is thrown).
  template <class T>
  static void encode(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                     double factor, int threads, const LatticeStage* stage,
                     CodedBody& body) {
    const std::size_t N = subvectors(p, m);
    const std::size_t n = static_cast<std::size_t>(p.n);
    const double accept = acceptance_probability(p);
    const CellWidths widths = typical_cell_widths(p);
    // (The encoder never reads the model's quantile table: not computed.)
    const SourceModel model =
        stage != nullptr && stage->statistics != nullptr
            ? SourceModel::fit_from(*stage->statistics, widths.lo, widths.hi, false)
            : SourceModel::fit(x, m, factor, widths.lo, widths.hi, threads, false);
    const TriangularBasis basis = lattice_basis(p);
    // The body's parts: the source model, then each segment.
    const std::size_t S = body_segments(m, p.n);
    body.parts.assign(S + 1, {});
    std::vector<std::uint8_t>* segments = body.parts.data() + 1;
    std::unique_ptr<AnsSegmentEncoder> last;  // kept, in case the body needs padding
    // What a thread keeps from segment to segment: its block buffers and
    // encoders (restarted for each segment), so that a segment takes no fresh
    // memory (no page faults) but where it needs more than the one before.
    struct Worker {
      AnsBlock b;
      std::unique_ptr<AnsSegmentEncoder> enc[2];
      LrsuqEncodeScratch lrsuq;
    };
    // A pair of segments is finished together (their rANS streams' chains of
    // divisions interleaved: AnsSegmentEncoder::finish_with); the same bytes.
    // A pair holds a second segment's symbols (1 to 2.5 MB): pairs only
    // where every thread has kPairSegments segments or more, so that the
    // pairs' extra memory stays under 1 byte a coordinate.  There too an
    // encoder keeps its streams' word buffers from segment to segment (the
    // pages of about a stream's words, some 60 KB, kept: at m = 10^8 a
    // buffer mapped and unmapped a segment was 763 of each a call); with
    // fewer segments a thread they cost more per coordinate than they save
    // (0.06 bytes a coordinate at 10^7 on 16 threads), and are freed.
    const SegmentTasks tasks(S, threads, kPairSegments);
    const bool keep_words = tasks.pairs > 0;
    // Segment s, coded (not finished) by the worker's encoder number `slot`.
    const auto code = [&](Worker& w, std::size_t slot, std::size_t s) -> AnsSegmentEncoder& {
      const SegmentRange range = segment_range(p, N, s);
      auto& enc = w.enc[slot];
      if (enc == nullptr) {
        enc = std::make_unique<AnsSegmentEncoder>(model, accept, basis, range.last - range.first,
                                                  uses_point_model(p.lattice));
        enc->keep_words(keep_words);
      } else {
        enc->restart(range.last - range.first);
      }
      for_each_block(range.first, range.last, [&](std::size_t j0, std::size_t count) {
        lattice_range(p, ks, x, m, factor, stage, j0, j0 + count, w.b.H.data(), w.b.M.data(),
                      w.b.beta.data(), w.b.V.data(), &w.lrsuq);
        enc->encode_block(count, w.b.H.data(), w.b.M.data(), w.b.beta.data(), w.b.V.data());
      });
      return *enc;
    };
    const auto keep_last = [&](std::size_t s, std::unique_ptr<AnsSegmentEncoder>& enc) {
      if (s + 1 == S) last = std::move(enc);
    };
    parallel_for_with(
        threads, tasks.count,
        [&] { return Worker{AnsBlock(std::min(N, segment_subvectors(p.n)), n), {}, {}}; },
        [&](Worker& w, std::size_t t) {
          const std::size_t s = tasks.first(t);
          AnsSegmentEncoder& enc = code(w, 0, s);
          if (!tasks.paired(t)) {
            enc.finish(segments[s]);
            keep_last(s, w.enc[0]);
            return;
          }
          AnsSegmentEncoder& next = code(w, 1, s + 1);
          enc.finish_with(next, segments[s], segments[s + 1]);
          keep_last(s + 1, w.enc[1]);
        });
    // The bomb rule (body.hpp): a body shorter than min_body_bytes(m) is padded
    // at the end of its last segment's stream (re-finished with the length it
    // lacks; only extremely compressible updates need it).
    model.serialize(body.parts[0]);
    const std::size_t size = body.size();
    if (size < min_body_bytes(m) && last != nullptr) {
      std::vector<std::uint8_t>& final_segment = body.parts.back();
      const std::size_t before = size - final_segment.size();
      const std::size_t prefix = segment_prefix(uses_point_model(p.lattice));
      final_segment.clear();
      last->finish(final_segment, min_body_bytes(m) - before - prefix);
    }
  }
  template <class T>
  static void decode(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                     std::size_t len, std::size_t m, int threads, T* y) {
    decode_ans_blocks(p, ks, body, len, m, threads,
                      [&](std::size_t j0, std::size_t count, const DecodedPiece& b) {
      lrsuq_reconstruct(p, b.beta, b.V, b.M, j0, j0 + count, m, y);
    });
  }
  // (Every sub-vector is in one piece of one segment: each entry of H and
  // M is written once, by the thread that decodes its segment.)
  static void symbols(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                      std::size_t len, std::size_t m, std::uint32_t* H, std::int64_t* M,
                      int threads) {
    const std::size_t n = static_cast<std::size_t>(p.n);
    decode_ans_blocks(p, ks, body, len, m, threads,
                      [&](std::size_t j0, std::size_t count, const DecodedPiece& b) {
      std::copy_n(b.H, count, H + j0);
      std::copy_n(b.M, count * n, M + j0 * n);
    });
  }
  static bool matches(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                      std::size_t m, std::size_t s, const std::uint32_t* H, const std::int64_t* M,
                      const double* beta, const double* V) {
    return ans_segment_matches(p, body, len, m, s, H, M, beta, V);
  }
  static void parts(const std::uint8_t* body, std::size_t len, LatticeId lattice,
                    std::size_t segments,
                    std::vector<std::pair<std::string, std::uint64_t>>& parts) {
    const bool point_model = uses_point_model(lattice);
    const AnsBody ans(body, len, point_model, segments);
    const std::uint64_t framing = ans.segments().size() * segment_prefix(point_model);
    parts.emplace_back("model", 8 * static_cast<std::uint64_t>(ans.model_size()));
    parts.emplace_back("segments", 8 * framing);
    parts.emplace_back("stream", 8 * (len - ans.model_size() - framing));
  }
};

template <class... Cs>
struct CoderList {};
using BodyCoders = CoderList<GolombBodyCoder, AnsBodyCoder>;

template <class Fn, class... Cs>
bool with_body_coder(Coder coder, Fn&& fn, CoderList<Cs...>) {
  return ((coder == Cs::id ? (fn(Cs{}), true) : false) || ...);
}

// Calls fn(body_coder) with the coder of code `coder`; throws InvalidArgument
// for an unknown code.
template <class Fn>
void with_body_coder(Coder coder, Fn&& fn) {
  if (!with_body_coder(coder, fn, BodyCoders{})) throw InvalidArgument("unknown body coder");
}

void check_coder(Coder coder) {
  with_body_coder(coder, [](auto) {});
}

template <class... Cs>
std::vector<BodyCoderInfo> coder_table(CoderList<Cs...>) {
  return {BodyCoderInfo{Cs::id, Cs::name}...};
}

}  // namespace

std::vector<BodyCoderInfo> body_coders() { return coder_table(BodyCoders{}); }

void check_payload_body(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                        std::size_t m, Coder coder) {
  check_coder(coder);
  check_declared_size(m, len);
  with_body_coder(coder, [&](auto c) { c.check(p, body, len, m); });
}

template <class T>
CodedBody encode_payload_body(const LrsuqParams& p, const KeyStream& ks, const T* x,
                              std::size_t m, double factor, Coder coder, int threads,
                              const LatticeStage* stage) {
  check_coder(coder);
  check_factor(factor);
  CodedBody body;
  with_body_coder(coder,
                  [&](auto c) { c.encode(p, ks, x, m, factor, threads, stage, body); });
  return body;
}

template <class T>
void decode_payload_body(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                         std::size_t len, std::size_t m, Coder coder, T* y, int threads) {
  check_coder(coder);
  check_declared_size(m, len);
  with_body_coder(coder, [&](auto c) { c.decode(p, ks, body, len, m, threads, y); });
}

void decode_payload_symbols(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                            std::size_t len, std::size_t m, Coder coder, std::uint32_t* H,
                            std::int64_t* M, int threads) {
  check_coder(coder);
  check_declared_size(m, len);
  with_body_coder(coder, [&](auto c) { c.symbols(p, ks, body, len, m, H, M, threads); });
}

template <class T>
bool segment_matches(const LrsuqParams& p, const ChaChaKey& key, Coder coder,
                     const std::uint8_t* body, std::size_t len, std::size_t m, double factor,
                     std::size_t s, const T* values, std::size_t count) {
  check_coder(coder);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = subvectors(p, m);
  if (s >= body_segments(m, p.n)) throw InvalidArgument("the body has no such segment");
  const SegmentRange range = segment_range(p, N, s);
  if (count != std::min(m, range.last * n) - range.first * n)
    throw InvalidArgument("values must be the segment's coordinates");
  // The segment's stage, from its coordinates (with their global indices).
  const std::size_t c = range.last - range.first;
  std::vector<std::uint64_t> indices(c);
  for (std::size_t j = 0; j < c; ++j) indices[j] = range.first + j;
  std::vector<std::uint32_t> H(c);
  std::vector<std::int64_t> M(c * n);
  std::vector<double> beta(c), V(c * n);
  lrsuq_encode_subvectors_at(p, key, values, indices.data(), c, m, factor, H.data(), M.data(),
                             beta.data(), V.data());
  bool same = false;
  with_body_coder(coder, [&](auto coder_type) {
    same = coder_type.matches(p, body, len, m, s, H.data(), M.data(), beta.data(), V.data());
  });
  return same;
}

std::vector<std::pair<std::string, std::uint64_t>> payload_body_parts(const std::uint8_t* body,
                                                                      std::size_t len,
                                                                      Coder coder,
                                                                      LatticeId lattice,
                                                                      std::size_t segments) {
  std::vector<std::pair<std::string, std::uint64_t>> parts;
  with_body_coder(coder, [&](auto c) { c.parts(body, len, lattice, segments, parts); });
  return parts;
}

template CodedBody encode_payload_body<float>(const LrsuqParams&, const KeyStream&,
                                             const float*, std::size_t, double, Coder, int,
                                             const LatticeStage*);
template CodedBody encode_payload_body<double>(const LrsuqParams&, const KeyStream&,
                                              const double*, std::size_t, double, Coder, int,
                                              const LatticeStage*);
template bool segment_matches<float>(const LrsuqParams&, const ChaChaKey&, Coder,
                                     const std::uint8_t*, std::size_t, std::size_t, double,
                                     std::size_t, const float*, std::size_t);
template bool segment_matches<double>(const LrsuqParams&, const ChaChaKey&, Coder,
                                      const std::uint8_t*, std::size_t, std::size_t, double,
                                      std::size_t, const double*, std::size_t);
template void decode_payload_body<float>(const LrsuqParams&, const KeyStream&,
                                         const std::uint8_t*, std::size_t, std::size_t, Coder,
                                         float*, int);
template void decode_payload_body<double>(const LrsuqParams&, const KeyStream&,
                                          const std::uint8_t*, std::size_t, std::size_t, Coder,
                                          double*, int);

}  // namespace cepam
