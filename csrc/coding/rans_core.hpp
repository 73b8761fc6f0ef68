// The rANS encoder's arithmetic (coding/rans.hpp), written once for the CPU
// and a GPU (CEPAM_HD, common/host_device.hpp): plain inline functions on
// caller-provided buffers, no allocation, no exception.  AnsEncoder runs
// its streams through RansRun, so the CPU's bytes are this code's bytes;
// rans_encode_segments codes many independent streams (an ANS body's
// segments) the way the CUDA kernel does (cuda/ans_gpu.cu: one stream a
// thread, each thread calling rans_encode_stream), and the tests compare
// it with AnsEncoder bit for bit (tests/core/test_rans_core.py).
//
// A stream: symbol i (in decoding order) goes to state i mod kStreams; the
// symbols are coded last to first (rANS is last-in first-out), then written
// as the kStreams final states (8 bytes each, little-endian) followed by the
// 32-bit words emitted, in the order the decoder consumes them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/read_status.hpp"
#include "common/host_device.hpp"

namespace cepam {

inline constexpr int kProbBits = 24;
inline constexpr std::uint32_t kProbScale = 1u << kProbBits;
inline constexpr int kStreams = 4;  // a power of 2

// The lower bound of a state, and the bits of a padding symbol (raw bits,
// zero; coding/rans.hpp).
inline constexpr std::uint64_t kAnsLow = std::uint64_t{1} << 31;
inline constexpr int kAnsPaddingBits = 16;

struct AnsSymbol {
  std::uint32_t start;
  std::uint32_t freq;
};

// The byte length of a stream that emitted `words` words.
CEPAM_HD inline std::size_t rans_stream_bytes(std::size_t words) {
  return 8 * static_cast<std::size_t>(kStreams) + 4 * words;
}

// One rANS encoding step of state x (in [kLow, 2^32 kLow)) for the symbol
// [start, start + freq): renormalise (emit the low word) so that the state
// stays in range after coding, then x -> (x div freq) 2^24 + x mod freq +
// start.  `words` has room for the word.
//
// The division runs in floating point, which unlike the 64-bit integer
// divider is pipelined, and as a product with 1 / freq, which does not
// wait for x: each state's serial chain holds a multiplication where it
// held a division (Z encodes 1.03 to 1.06x faster at m = 10^5, one
// segment coded alone).  After renormalisation x < freq 2^39 (the bound
// that keeps the new state below 2^63), so q = x / freq < 2^39; x
// converts to double with a relative error of at most 2^-53, 1 / freq
// (freq < 2^24, exact) rounds with at most 2^-53 and the product with at
// most 2^-53 more, so the computed q is within 2^39 * 3.1 * 2^-53 < 2^-12
// of x / freq, and its truncation is floor(x / freq) or one of its
// neighbours; the remainder r = x - q freq (exact in int64) then puts q
// right.  The result is the exact integer division's, whatever the
// rounding of the reciprocal and the product (host or device).
CEPAM_HD inline std::uint64_t rans_encode_step(std::uint64_t x, AnsSymbol sym,
                                               std::uint32_t*& words) {
  const std::uint64_t x_max = ((kAnsLow >> kProbBits) << 32) * sym.freq;
  if (x >= x_max) {
    *words++ = static_cast<std::uint32_t>(x);
    x >>= 32;
  }
  const std::int64_t f = sym.freq;
  const std::int64_t xs = static_cast<std::int64_t>(x);  // x < 2^63
  const double inv_f = 1.0 / static_cast<double>(f);  // (independent of x)
  std::int64_t q = static_cast<std::int64_t>(static_cast<double>(xs) * inv_f);
  std::int64_t r = xs - q * f;
  if (r < 0) {
    q -= 1;
    r += f;
  } else if (r >= f) {
    q += 1;
    r -= f;
  }
  return (static_cast<std::uint64_t>(q) << kProbBits) + static_cast<std::uint64_t>(r) + sym.start;
}

// The encoding of one symbol list followed by `padding` padding symbols, a
// group of four symbols (one per state) at a time with the states in
// registers, so that the chains of the four states overlap; the padding
// and the symbols above the last whole group go one at a time first.
// Words come out in reverse decoding order (at most one a symbol) into
// `words`, which has room for count + padding.  The caller runs group()
// while more(), then write() (AnsEncoder::finish_together interleaves the
// groups of several runs, or hands them to the AVX-512 kernel through
// lanes() and set_lanes()).
class RansRun {
 public:
  CEPAM_HD RansRun(const AnsSymbol* symbols, std::size_t count, std::size_t padding,
                   std::uint32_t* words)
      : symbols_(symbols), words_(words), w_(words) {
    static_assert(kStreams == 4, "unrolled for four states");
    std::uint64_t x[kStreams] = {kAnsLow, kAnsLow, kAnsLow, kAnsLow};
    const AnsSymbol pad{0, 1u << (kProbBits - kAnsPaddingBits)};
    const std::size_t whole = count & ~std::size_t{kStreams - 1};  // symbols in whole groups
    for (std::size_t i = count + padding; i-- > whole;)
      x[i % kStreams] = rans_encode_step(x[i % kStreams], i < count ? symbols[i] : pad, w_);
    x0_ = x[0], x1_ = x[1], x2_ = x[2], x3_ = x[3];
    g_ = symbols + whole;
  }
  CEPAM_HD bool more() const { return g_ != symbols_; }
  // The next group down.
  CEPAM_HD void group() {
    g_ -= kStreams;
    x3_ = rans_encode_step(x3_, g_[3], w_);
    x2_ = rans_encode_step(x2_, g_[2], w_);
    x1_ = rans_encode_step(x1_, g_[1], w_);
    x0_ = rans_encode_step(x0_, g_[0], w_);
  }
  CEPAM_HD std::size_t emitted() const { return static_cast<std::size_t>(w_ - words_); }
  // The whole groups still to code.
  CEPAM_HD std::size_t groups_left() const {
    return static_cast<std::size_t>(g_ - symbols_) / kStreams;
  }
  // The states, the last group coded (the next is the kStreams symbols
  // below it) and the word cursor: for a SIMD coder that codes several
  // runs' groups at once (coding/rans_kernels.hpp) and hands them back with
  // set_lanes.
  struct Lanes {
    std::uint64_t x[kStreams];
    const AnsSymbol* g;
    std::uint32_t* w;
  };
  CEPAM_HD Lanes lanes() const { return {{x0_, x1_, x2_, x3_}, g_, w_}; }
  CEPAM_HD void set_lanes(const Lanes& l) {
    x0_ = l.x[0], x1_ = l.x[1], x2_ = l.x[2], x3_ = l.x[3];
    g_ = l.g;
    w_ = l.w;
  }
  CEPAM_HD std::size_t bytes() const { return rans_stream_bytes(emitted()); }
  // Writes the stream's bytes() bytes at out: the final states, then the
  // words in decoding order.
  CEPAM_HD void write(std::uint8_t* out) const {
    const std::uint64_t x[kStreams] = {x0_, x1_, x2_, x3_};
    std::uint8_t* p = out;
    for (int s = 0; s < kStreams; ++s)
      for (int b = 0; b < 8; ++b) *p++ = static_cast<std::uint8_t>(x[s] >> (8 * b));
    for (std::size_t i = emitted(); i-- > 0;)
      for (int b = 0; b < 4; ++b) *p++ = static_cast<std::uint8_t>(words_[i] >> (8 * b));
  }

 private:
  const AnsSymbol* symbols_;
  const AnsSymbol* g_;
  std::uint32_t* words_;  // room for one word a symbol
  std::uint32_t* w_;
  std::uint64_t x0_, x1_, x2_, x3_;
};

// Status of the stream coders below.
enum RansStatus : int { kRansOk = 0, kRansNoRoom = 1 };

// Codes one stream (symbols[0..count), then `padding` padding symbols) into
// out[0..capacity) with `words` (room for count + padding) as scratch; sets
// *size to its byte length.  kRansNoRoom (and *size the length needed)
// when capacity is too small: nothing is written then.
CEPAM_HD inline RansStatus rans_encode_stream(const AnsSymbol* symbols, std::size_t count,
                                              std::size_t padding, std::uint32_t* words,
                                              std::uint8_t* out, std::size_t capacity,
                                              std::size_t* size) {
  RansRun run(symbols, count, padding, words);
  while (run.more()) run.group();
  *size = run.bytes();
  if (run.bytes() > capacity) return kRansNoRoom;
  run.write(out);
  return kRansOk;
}

// The most bytes a stream of `symbols` symbols can take (a word a symbol at
// most): the capacity that never gives kRansNoRoom.
CEPAM_HD inline std::size_t rans_max_stream_bytes(std::size_t symbols) {
  return rans_stream_bytes(symbols);
}

// Codes `segments` independent streams as the CUDA kernel does, one after
// another on the host: stream s is symbols[first[s] .. first[s + 1]) with
// no padding, written at out + out_first[s] (room for out_first[s + 1] -
// out_first[s] bytes), its byte length in sizes[s]; words[first[s] ..
// first[s + 1]) is its scratch.  Returns the first failing stream's status
// (the others are still coded).
CEPAM_HD inline RansStatus rans_encode_segments(const AnsSymbol* symbols,
                                                const std::uint64_t* first, std::size_t segments,
                                                std::uint32_t* words, std::uint8_t* out,
                                                const std::uint64_t* out_first,
                                                std::uint64_t* sizes) {
  RansStatus status = kRansOk;
  for (std::size_t s = 0; s < segments; ++s) {
    std::size_t size = 0;
    const RansStatus st = rans_encode_stream(
        symbols + first[s], static_cast<std::size_t>(first[s + 1] - first[s]), 0,
        words + first[s], out + out_first[s],
        static_cast<std::size_t>(out_first[s + 1] - out_first[s]), &size);
    sizes[s] = size;
    if (st != kRansOk && status == kRansOk) status = st;
  }
  return status;
}

// --- The decoder's side ------------------------------------------------------
//
// A stream read symbol by symbol, for a GPU's decoder and its host twin
// (payload/segment_decode.hpp).  The CPU's AnsDecoder (coding/rans.hpp) reads
// the same streams in the same way, in runs and SIMD groups, and refuses
// the same ones: the outcomes below are its errors (read_message gives its
// words), and the host tests compare the two on valid and corrupted
// bodies (tests/core/test_segment_decode.py).  Reads are bounds-checked; every
// loop is bounded by the stream's length.

struct RansReader {
  const std::uint8_t* data;
  std::size_t len, pos;
  std::uint64_t x[kStreams];
  int lane;
};

// Opens a stream of len bytes: its kStreams initial states.
CEPAM_HD inline ReadStatus rans_open(RansReader& r, const std::uint8_t* data, std::size_t len) {
  r.data = data;
  r.len = len;
  r.pos = 0;
  r.lane = 0;
  if (len < 8 * static_cast<std::size_t>(kStreams) || (len - 8 * kStreams) % 4 != 0)
    return kReadBadLength;
  for (int s = 0; s < kStreams; ++s) {
    std::uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | data[r.pos + static_cast<std::size_t>(b)];
    r.pos += 8;
    if (v < kAnsLow || v >= (kAnsLow << 32)) return kReadBadState;
    r.x[s] = v;
  }
  return kReadOk;
}

// The slot of the next symbol, in [0, 2^kProbBits).
CEPAM_HD inline std::uint32_t rans_peek(const RansReader& r) {
  return static_cast<std::uint32_t>(r.x[r.lane] & (kProbScale - 1));
}

// Consumes the next symbol, [start, start + freq) holding its slot.
CEPAM_HD inline ReadStatus rans_advance(RansReader& r, std::uint32_t start, std::uint32_t freq) {
  const std::uint64_t x0 = r.x[r.lane];
  std::uint64_t x = static_cast<std::uint64_t>(freq) * (x0 >> kProbBits) + (x0 & (kProbScale - 1)) -
                    start;
  if (x < kAnsLow) {
    if (r.pos + 4 > r.len) return kReadTruncated;
    const std::uint8_t* w = r.data + r.pos;
    const std::uint32_t word = static_cast<std::uint32_t>(w[0]) |
                               (static_cast<std::uint32_t>(w[1]) << 8) |
                               (static_cast<std::uint32_t>(w[2]) << 16) |
                               (static_cast<std::uint32_t>(w[3]) << 24);
    x = (x << 32) | word;
    r.pos += 4;
  }
  r.x[r.lane] = x;
  r.lane = (r.lane + 1) & (kStreams - 1);
  return kReadOk;
}

// `bits` (1..16) raw bits, from a RansReader or any reader with
// rans_peek and rans_advance (coding/rans.hpp's AnsDecoder).
template <class Reader>
CEPAM_HD inline ReadStatus rans_raw(Reader& r, int bits, std::uint32_t* value) {
  const int shift = kProbBits - bits;
  *value = rans_peek(r) >> shift;
  return rans_advance(r, *value << shift, 1u << shift);
}

// `bits` (1..64) raw bits, 16 at a time from the top.
template <class Reader>
CEPAM_HD inline ReadStatus rans_raw_long(Reader& r, int bits, std::uint64_t* value) {
  std::uint64_t v = 0;
  std::uint32_t part = 0;
  while (bits > 16) {
    bits -= 16;
    const ReadStatus st = rans_raw(r, 16, &part);
    if (st != kReadOk) return st;
    v = (v << 16) | part;
  }
  const ReadStatus st = rans_raw(r, bits, &part);
  *value = (v << bits) | part;
  return st;
}

// After the last symbol: the padding, if any (*padding symbols), then the
// stream must end where the encoder began (AnsDecoder::finish).
CEPAM_HD inline ReadStatus rans_finish(RansReader& r, std::size_t* padding) {
  const ReadStatus error = r.pos != r.len ? kReadTrailing : kReadNotInitial;
  *padding = 0;
  for (;;) {
    bool at_start = true;
    for (int s = 0; s < kStreams; ++s) at_start = at_start && r.x[s] == kAnsLow;
    if (r.pos == r.len && at_start) return kReadOk;
    if (r.pos == r.len && r.x[r.lane] < (kAnsLow << kAnsPaddingBits)) return error;
    std::uint32_t bits = 0;
    const ReadStatus st = rans_raw(r, kAnsPaddingBits, &bits);
    if (st != kReadOk) return st;
    if (bits != 0) return error;
    ++*padding;
  }
}

}  // namespace cepam
