#include "coding/rans.hpp"

namespace cepam {

void AnsEncoder::grow(std::size_t k) {
  const std::size_t doubled = 2 * symbols_.size();
  symbols_.resize(count_ + k > doubled ? count_ + k : doubled);
}

void AnsEncoder::finish(std::vector<std::uint8_t>& out, std::size_t min_bytes) const {
  std::vector<std::uint8_t> stream;
  encode(0, stream);
  // A padding symbol adds 16 bits to the states, so about two make a word:
  // add two per missing word until the stream is long enough (one or two
  // rounds; each round re-encodes, only for such extreme payloads).
  for (std::size_t padding = 0; stream.size() < min_bytes;) {
    padding += 2 * ((min_bytes - stream.size() + 3) / 4) + 2;
    stream.clear();
    encode(padding, stream);
  }
  out.insert(out.end(), stream.begin(), stream.end());
}

namespace {

// One rANS encoding step of state x (in [kLow, 2^32 kLow)) for the symbol
// [start, start + freq): renormalise (emit the low word) so that the state
// stays in range after coding, then code.  `words` has room for the word.
inline std::uint64_t encode_step(std::uint64_t x, AnsSymbol sym, std::uint32_t*& words) {
  const std::uint64_t x_max = ((AnsDecoder::kLow >> kProbBits) << 32) * sym.freq;
  if (x >= x_max) {
    *words++ = static_cast<std::uint32_t>(x);
    x >>= 32;
  }
  return ((x / sym.freq) << kProbBits) + (x % sym.freq) + sym.start;
}

}  // namespace

void AnsEncoder::encode(std::size_t padding, std::vector<std::uint8_t>& out) const {
  // Symbol i goes to state i mod kStreams; the symbols are coded last to
  // first.  The four states live in registers, a group of four symbols
  // (one per state) at a time, so that the four chains of divisions
  // overlap; the padding (after the symbols) and the symbols above the
  // last whole group go one at a time first.
  static_assert(kStreams == 4, "unrolled for four states");
  std::uint64_t x[kStreams];
  for (int s = 0; s < kStreams; ++s) x[s] = AnsDecoder::kLow;
  // Words come out in reverse decoding order (at most one a symbol); collect, then reverse.
  const std::size_t count = count_;
  const std::size_t total = count + padding;
  std::vector<std::uint32_t> words(total);
  std::uint32_t* w = words.data();
  constexpr AnsSymbol kPad{0, 1u << (kProbBits - AnsDecoder::kPaddingBits)};
  const std::size_t whole = count & ~std::size_t{kStreams - 1};  // symbols in whole groups
  for (std::size_t i = total; i-- > whole;)
    x[i % kStreams] = encode_step(x[i % kStreams], i < count ? symbols_[i] : kPad, w);
  std::uint64_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
  for (const AnsSymbol* g = symbols_.data() + whole; g != symbols_.data();) {
    g -= kStreams;
    x3 = encode_step(x3, g[3], w);
    x2 = encode_step(x2, g[2], w);
    x1 = encode_step(x1, g[1], w);
    x0 = encode_step(x0, g[0], w);
  }
  x[0] = x0, x[1] = x1, x[2] = x2, x[3] = x3;
  const std::size_t emitted = static_cast<std::size_t>(w - words.data());
  const std::size_t base = out.size();
  out.resize(base + 8 * kStreams + 4 * emitted);
  std::uint8_t* p = out.data() + base;
  for (int s = 0; s < kStreams; ++s)
    for (int b = 0; b < 8; ++b) *p++ = static_cast<std::uint8_t>(x[s] >> (8 * b));
  for (std::size_t i = emitted; i-- > 0;)
    for (int b = 0; b < 4; ++b) *p++ = static_cast<std::uint8_t>(words[i] >> (8 * b));
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
