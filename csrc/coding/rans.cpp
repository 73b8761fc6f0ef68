#include "coding/rans.hpp"

#include <cstring>

namespace cepam {

void AnsEncoder::grow(std::size_t k) {
  const std::size_t capacity = count_ + k > 2 * capacity_ ? count_ + k : 2 * capacity_;
  PageArray<AnsSymbol> symbols = page_array<AnsSymbol>(capacity);
  if (count_ > 0) std::memcpy(symbols.get(), symbols_.get(), count_ * sizeof(AnsSymbol));
  symbols_ = std::move(symbols);
  capacity_ = capacity;
}

AnsEncoder& AnsEncoder::operator=(const AnsEncoder& other) {
  if (this == &other) return *this;
  if (capacity_ < other.count_) {  // else the buffer this has already will do
    symbols_ = page_array<AnsSymbol>(other.capacity_);
    capacity_ = other.capacity_;
  }
  if (other.count_ > 0)
    std::memcpy(symbols_.get(), other.symbols_.get(), other.count_ * sizeof(AnsSymbol));
  count_ = other.count_;
  return *this;
}

namespace {

// One rANS encoding step of state x (in [kLow, 2^32 kLow)) for the symbol
// [start, start + freq): renormalise (emit the low word) so that the state
// stays in range after coding, then x -> (x div freq) 2^24 + x mod freq +
// start.  `words` has room for the word.
//
// The division runs in floating point, which unlike the 64-bit integer
// divider is pipelined: after renormalisation x < freq 2^39 (the bound
// that keeps the new state below 2^63), so q = x / freq < 2^39; x and freq
// convert to double with a relative error of at most 2^-53 each (freq < 2^24
// exactly), the quotient rounds with at most 2^-53 more, so the computed q
// is within 2^39 * 3 * 2^-53 < 2^-12 of x / freq, and its truncation is
// floor(x / freq) or one of its neighbours; the remainder r = x - q freq
// (exact in int64) then puts q right.  The result is the exact integer
// division's.
inline std::uint64_t encode_step(std::uint64_t x, AnsSymbol sym, std::uint32_t*& words) {
  const std::uint64_t x_max = ((AnsDecoder::kLow >> kProbBits) << 32) * sym.freq;
  if (x >= x_max) {
    *words++ = static_cast<std::uint32_t>(x);
    x >>= 32;
  }
  const std::int64_t f = sym.freq;
  const std::int64_t xs = static_cast<std::int64_t>(x);  // x < 2^63
  std::int64_t q = static_cast<std::int64_t>(static_cast<double>(xs) / static_cast<double>(f));
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

// The encoding of one symbol list: symbol i goes to state i mod kStreams,
// and the symbols are coded last to first (rANS is last-in first-out), a
// group of four (one per state) at a time with the states in registers, so
// that the chains of the four states overlap; the padding (after the
// symbols) and the symbols above the last whole group go one at a time
// first.  Words come out in reverse decoding order (at most one a symbol).
class Run {
 public:
  Run(const AnsSymbol* symbols, std::size_t count, std::size_t padding)
      : symbols_(symbols), words_(page_array<std::uint32_t>(count + padding)), w_(words_.get()) {
    static_assert(kStreams == 4, "unrolled for four states");
    std::uint64_t x[kStreams] = {AnsDecoder::kLow, AnsDecoder::kLow, AnsDecoder::kLow,
                                 AnsDecoder::kLow};
    constexpr AnsSymbol kPad{0, 1u << (kProbBits - AnsDecoder::kPaddingBits)};
    const std::size_t whole = count & ~std::size_t{kStreams - 1};  // symbols in whole groups
    for (std::size_t i = count + padding; i-- > whole;)
      x[i % kStreams] = encode_step(x[i % kStreams], i < count ? symbols[i] : kPad, w_);
    x0_ = x[0], x1_ = x[1], x2_ = x[2], x3_ = x[3];
    g_ = symbols + whole;
  }
  bool more() const { return g_ != symbols_; }
  // The next group down.
  void group() {
    g_ -= kStreams;
    x3_ = encode_step(x3_, g_[3], w_);
    x2_ = encode_step(x2_, g_[2], w_);
    x1_ = encode_step(x1_, g_[1], w_);
    x0_ = encode_step(x0_, g_[0], w_);
  }
  // Appends the stream: the final states, then the words in decoding order.
  void write(std::vector<std::uint8_t>& out) const {
    const std::uint64_t x[kStreams] = {x0_, x1_, x2_, x3_};
    const std::size_t emitted = static_cast<std::size_t>(w_ - words_.get());
    const std::size_t base = out.size();
    out.resize(base + 8 * kStreams + 4 * emitted);
    std::uint8_t* p = out.data() + base;
    for (int s = 0; s < kStreams; ++s)
      for (int b = 0; b < 8; ++b) *p++ = static_cast<std::uint8_t>(x[s] >> (8 * b));
    for (std::size_t i = emitted; i-- > 0;)
      for (int b = 0; b < 4; ++b) *p++ = static_cast<std::uint8_t>(words_[i] >> (8 * b));
  }

 private:
  const AnsSymbol* symbols_;
  const AnsSymbol* g_;
  PageArray<std::uint32_t> words_;  // (room for one a symbol; not initialised)
  std::uint32_t* w_;
  std::uint64_t x0_, x1_, x2_, x3_;
};

}  // namespace

void AnsEncoder::finish(std::vector<std::uint8_t>& out, std::size_t min_bytes) const {
  const std::size_t base = out.size();  // the stream is coded in place, after it
  encode(0, out);
  // A padding symbol adds 16 bits to the states, so about two make a word:
  // add two per missing word until the stream is long enough (one or two
  // rounds; each round re-encodes, only for such extreme payloads).
  for (std::size_t padding = 0; out.size() - base < min_bytes;) {
    padding += 2 * ((min_bytes - (out.size() - base) + 3) / 4) + 2;
    out.resize(base);
    encode(padding, out);
  }
}

void AnsEncoder::finish_pair(const AnsEncoder& a, std::vector<std::uint8_t>& out_a,
                             const AnsEncoder& b, std::vector<std::uint8_t>& out_b) {
  Run ra(a.symbols_.get(), a.count_, 0), rb(b.symbols_.get(), b.count_, 0);
  while (ra.more() && rb.more()) {
    ra.group();
    rb.group();
  }
  while (ra.more()) ra.group();
  while (rb.more()) rb.group();
  ra.write(out_a);
  rb.write(out_b);
}

void AnsEncoder::encode(std::size_t padding, std::vector<std::uint8_t>& out) const {
  Run run(symbols_.get(), count_, padding);
  while (run.more()) run.group();
  run.write(out);
}

AnsDecoder::AnsDecoder(const std::uint8_t* data, std::size_t len) : data_(data), len_(len) {
  if (len < 8 * static_cast<std::size_t>(kStreams) || (len - 8 * kStreams) % 4 != 0)
    throw FormatError("entropy-coded body has a bad length");
  for (int s = 0; s < kStreams; ++s) {
    std::uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | data[pos_ + static_cast<std::size_t>(b)];
    pos_ += 8;
    if (v < kLow || v >= (kLow << 32)) throw FormatError("entropy-coded body has a bad state");
    x_[s] = v;
  }
}

std::size_t AnsDecoder::finish() {
  const auto at_start = [this] {
    for (int s = 0; s < kStreams; ++s)
      if (x_[s] != kLow) return false;
    return true;
  };
  // Padding (see rans.hpp); each symbol consumes a word or divides a state
  // by 2^16, so this ends within about 3 symbols a word.  With no word
  // left, a state below kLow 2^16 cannot take another symbol.
  // Words left over are trailing data unless they are padding.
  const char* const error = pos_ != len_
                                ? "entropy-coded body has trailing data (not valid padding)"
                                : "entropy-coded body does not end in its initial state";
  std::size_t padding = 0;
  while (pos_ != len_ || !at_start()) {
    if (pos_ == len_ && x_[lane_] < (kLow << kPaddingBits)) throw FormatError(error);
    if (get_raw(kPaddingBits) != 0) throw FormatError(error);
    ++padding;
  }
  return padding;
}

}  // namespace cepam
