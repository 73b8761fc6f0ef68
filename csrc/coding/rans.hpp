// rANS with 64-bit states and 32-bit renormalisation (after F. Giesen's
// public-domain rans64), with kStreams states interleaved for speed.
//
// Symbol i (in decoding order) goes to state i mod kStreams.  The encoder
// receives symbols in decoding order, buffers them, and encodes them in
// reverse (rANS is last-in first-out); the byte string is the kStreams final
// states (8 bytes each, little-endian) followed by the 32-bit words the
// encoder emitted, in the order the decoder consumes them.
//
// Probabilities have kProbBits bits of precision: a symbol is (start, freq)
// with 1 <= freq and start + freq <= 2^kProbBits.  Raw bits are coded as
// symbols of a uniform distribution over 2^b values (b <= 16 per call).
//
// Padding: a stream may end with any number of padding symbols, raw 16-bit
// zeros after the last symbol (in decoding order), so that a payload
// reaches the length the bomb rule asks of it (payload/body.hpp).  The
// decoder, after the last symbol, decodes padding until every word is
// consumed and every state is back at its initial value; this point is
// unique (the encoder's states never drop below kLow, so a state at kLow
// with no word left cannot precede another symbol), so every payload still
// has one valid encoding, and a stream without padding reads as before.
//
// The decoder treats its input as hostile: reads are bounds-checked, every
// slot maps to some symbol by construction of the models, and at the end the
// states must be back at their initial value and every word consumed, so a
// corrupted stream is detected rather than silently decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "coding/rans_core.hpp"
#include "common/cpu.hpp"
#include "common/pages.hpp"
#include "common/errors.hpp"

namespace cepam {

// kProbBits, kStreams, AnsSymbol and the encoder's arithmetic: coding/rans_core.hpp.

class AnsEncoder {
 public:
  AnsEncoder() = default;
  AnsEncoder(const AnsEncoder& other) { *this = other; }
  AnsEncoder& operator=(const AnsEncoder& other);
  AnsEncoder(AnsEncoder&&) = default;
  AnsEncoder& operator=(AnsEncoder&&) = default;

  void put(std::uint32_t start, std::uint32_t freq) { *append(1) = {start, freq}; }
  void put_raw(std::uint32_t value, int bits) {
    // A uniform symbol at precision `bits`, rescaled to kProbBits.
    const int shift = kProbBits - bits;
    *append(1) = {value << shift, 1u << shift};
  }
  void put_raw_long(std::uint64_t value, int bits) {
    while (bits > 16) {
      bits -= 16;
      put_raw(static_cast<std::uint32_t>((value >> bits) & 0xffffu), 16);
    }
    put_raw(static_cast<std::uint32_t>(value & ((std::uint64_t{1} << bits) - 1)), bits);
  }
  // k more symbols, which the caller writes at the pointer returned
  // (batches of symbols computed together).
  AnsSymbol* append(std::size_t k) {
    if (capacity_ - count_ < k) grow(k);
    AnsSymbol* at = symbols_.get() + count_;
    count_ += k;
    return at;
  }
  std::size_t symbols() const { return count_; }
  // The symbols put so far (symbols() of them), for coding them elsewhere
  // (rans_core.hpp's rans_encode_segments, the GPU's kernel).
  const AnsSymbol* data() const { return symbols_.get(); }
  // Puts again the symbols [first, last) of `other` (first <= last <=
  // other.symbols(): two streams that share runs of symbols compute them
  // once).
  void put_copy(const AnsEncoder& other, std::size_t first, std::size_t last) {
    const std::size_t k = last - first;
    if (k != 0) std::memcpy(append(k), other.symbols_.get() + first, k * sizeof(AnsSymbol));
  }
  // Drops the symbols after the first `symbols` ones.
  void truncate(std::size_t symbols) {
    if (symbols < count_) count_ = symbols;
  }
  // Drops every symbol, keeping the buffer (an encoder used again).
  void clear() { count_ = 0; }
  void reserve(std::size_t symbols) {
    if (symbols > capacity_) grow(symbols - count_);
  }
  // Whether finish() keeps its word buffer for the next stream (an encoder
  // used again, segment after segment: no buffer mapped and unmapped a
  // stream, for the buffer's pages kept resident) or frees it (the default).
  void keep_words(bool keep) { keep_words_ = keep; }

  // Encodes every symbol put so far and appends the bytes to out, with
  // padding symbols after them if the stream would be shorter than
  // min_bytes (then it is at least min_bytes long, at most 8 more).
  void finish(std::vector<std::uint8_t>& out, std::size_t min_bytes = 0) const;
  // finish() (no padding) of k = 1 to kTogether encoders at once, the
  // stream of encoders[t] appended to *outs[t]: the same bytes as k calls,
  // with the streams' serial chains interleaved (with AVX-512, two streams'
  // states a register, for an even k: coding/rans_kernels.hpp).
  static constexpr std::size_t kTogether = 4;
  static void finish_together(const AnsEncoder* const* encoders,
                              std::vector<std::uint8_t>* const* outs, std::size_t k);
  // How many streams finish_together takes at a time at its best: 4 with
  // AVX-512 (two registers), else 2.
  static std::size_t streams_together();

 private:
  // The stream of the symbols followed by `padding` padding symbols.
  void encode(std::size_t padding, std::vector<std::uint8_t>& out) const;
  // The coder's word buffer, with room for the symbols and `padding` more
  // (one word a symbol at most).
  std::uint32_t* words(std::size_t padding) const;
  // Done with the word buffer (freed unless kept).
  void done_with_words() const;

  void grow(std::size_t k);  // room for k more symbols (at least)

  // The symbols put: count_ of capacity_ (the rest not initialised: the
  // buffer is written once, in order).
  PageArray<AnsSymbol> symbols_;
  std::size_t capacity_ = 0, count_ = 0;
  // The word buffer of finish() (scratch, not part of the encoder's value;
  // kept from stream to stream with keep_words).
  mutable PageArray<std::uint32_t> words_;
  mutable std::size_t words_capacity_ = 0;
  bool keep_words_ = false;
};

class AnsDecoder {
 public:
  // Reads the states; throws FormatError if the stream is too short.
  AnsDecoder(const std::uint8_t* data, std::size_t len);

  // The slot of the next symbol, in [0, 2^kProbBits).
  std::uint32_t peek() const { return static_cast<std::uint32_t>(x_[lane_] & (kProbScale - 1)); }
  // Consumes the next symbol, whose interval [start, start + freq) holds peek().
  void advance(std::uint32_t start, std::uint32_t freq) {
    const std::uint64_t x = step(x_[lane_], start, freq);
    if (pos_ + 4 <= len_) {
      x_[lane_] = renormalise(x, pos_);
    } else {  // no word left
      if (x < kLow) throw FormatError(read_message(kReadTruncated));
      x_[lane_] = x;
    }
    lane_ = (lane_ + 1) & (kStreams - 1);
  }

  // Decodes up to `count` symbols in a row, as peek() and advance() would,
  // with the states held in registers (the decoders' inner loop).
  // lookup(i, slot, start, freq) gives the interval [start, start + freq)
  // holding the slot of symbol i of the run, or returns false to stop
  // before symbol i (then not consumed).  The run also stops before the
  // stream could run short (a symbol reads at most one word), leaving the
  // last symbols to advance().  Returns the number of symbols decoded.
  template <class Lookup>
  std::size_t decode_run(std::size_t count, Lookup&& lookup) {
    static_assert(kStreams == 4, "unrolled for four states");
    const std::size_t words = (len_ - pos_) / 4;
    if (count > words) count = words;
    Cursor c = cursor();
    std::size_t i = 0;  // symbol i + t goes to c.x[t]
    for (bool more = true; more;) {
      CEPAM_UNROLL(4)
      for (int t = 0; t < kStreams; ++t) {
        std::uint32_t start, freq;
        const std::uint32_t slot = static_cast<std::uint32_t>(c.x[t] & (kProbScale - 1));
        if (i + t == count || !lookup(i + t, slot, start, freq)) {
          i += t;
          more = false;
          break;
        }
        c.x[t] = renormalise(step(c.x[t], start, freq), c.pos);
      }
      if (more) i += kStreams;
    }
    resume(c, i);
    return i;
  }

  // Decodes `count` symbols: runs of decode_run(lookup), lookup's i
  // counting from the first of them, and rare(i) for symbol i where a run
  // stops.
  template <class Lookup, class Rare>
  void decode_each(std::size_t count, Lookup&& lookup, Rare&& rare) {
    for (std::size_t i = 0; i < count;) {
      i += decode_run(count - i, [&](std::size_t k, std::uint32_t s, std::uint32_t& start,
                                     std::uint32_t& freq) { return lookup(i + k, s, start, freq); });
      if (i < count) rare(i++);
    }
  }

  // The decoder's position, for loops that run the states themselves
  // (decode_run, and the SIMD decoder in coding/conditional_coder.cpp): x[t] is
  // the state of the lane of the next symbol plus t, pos the offset of the
  // next word in data().
  struct Cursor {
    std::uint64_t x[kStreams];
    std::size_t pos;
  };
  Cursor cursor() const {
    Cursor c;
    for (int t = 0; t < kStreams; ++t) c.x[t] = x_[(lane_ + t) & (kStreams - 1)];
    c.pos = pos_;
    return c;
  }
  // Continues from c, a cursor() taken `decoded` symbols earlier.
  void resume(const Cursor& c, std::size_t decoded) {
    for (int t = 0; t < kStreams; ++t) x_[(lane_ + t) & (kStreams - 1)] = c.x[t];
    lane_ = (lane_ + static_cast<int>(decoded & (kStreams - 1))) & (kStreams - 1);
    pos_ = c.pos;
  }
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return len_; }

  // Decodes the padding, if any, and throws FormatError unless the stream
  // then ended exactly where the encoder's did.  Returns the number of
  // padding symbols.
  std::size_t finish();

  static constexpr std::uint64_t kLow = kAnsLow;
  static constexpr int kPaddingBits = kAnsPaddingBits;  // a padding symbol: raw bits, zero

 private:
  // The state after the symbol [start, start + freq) (whose slot x holds),
  // before renormalisation.
  static std::uint64_t step(std::uint64_t x, std::uint32_t start, std::uint32_t freq) {
    return static_cast<std::uint64_t>(freq) * (x >> kProbBits) + (x & (kProbScale - 1)) - start;
  }
  // x, with the word at pos shifted in (and pos advanced) if x < kLow;
  // pos + 4 <= len_.  No branch on x (which the processor could not
  // predict): the word is read either way.
  std::uint64_t renormalise(std::uint64_t x, std::size_t& pos) const {
    const std::uint64_t renorm = std::uint64_t{0} - static_cast<std::uint64_t>(x < kLow);  // mask
    const std::uint64_t w = word(pos);
    pos += static_cast<std::size_t>(renorm & 4);
    return (((x << 32) | w) & renorm) | (x & ~renorm);
  }
  std::uint32_t word(std::size_t pos) const {  // little-endian
    std::uint32_t w;
    std::memcpy(&w, data_ + pos, sizeof w);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap32(w);
#endif
    return w;
  }

  const std::uint8_t* data_;
  std::size_t len_;
  std::size_t pos_ = 0;
  std::uint64_t x_[kStreams];
  int lane_ = 0;
};

// AnsDecoder as a reader of the decoders shared with a GPU (rans_core.hpp's
// rans_raw and rans_raw_long, symbol_core.hpp's geometric_decode and
// cell_decode): it throws its errors (FormatError, in read_message's
// words) where a RansReader returns them, so what it returns is kReadOk.
inline std::uint32_t rans_peek(const AnsDecoder& d) { return d.peek(); }
inline ReadStatus rans_advance(AnsDecoder& d, std::uint32_t start, std::uint32_t freq) {
  d.advance(start, freq);
  return kReadOk;
}

}  // namespace cepam
