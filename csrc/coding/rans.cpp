#include "coding/rans.hpp"

namespace cepam {

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

void AnsEncoder::encode(std::size_t padding, std::vector<std::uint8_t>& out) const {
  std::uint64_t x[kStreams];
  for (int s = 0; s < kStreams; ++s) x[s] = AnsDecoder::kLow;
  // Words come out in reverse decoding order; collect, then reverse.
  std::vector<std::uint32_t> words;
  const std::size_t total = symbols_.size() + padding;
  words.reserve(total / 2 + 8);
  constexpr AnsSymbol kPad{0, 1u << (kProbBits - AnsDecoder::kPaddingBits)};
  for (std::size_t i = total; i-- > 0;) {
    const AnsSymbol& sym = i < symbols_.size() ? symbols_[i] : kPad;
    std::uint64_t& st = x[i % kStreams];
    // Renormalise so that the state stays in [L, 2^32 L) after coding.
    const std::uint64_t x_max = ((AnsDecoder::kLow >> kProbBits) << 32) * sym.freq;
    if (st >= x_max) {
      words.push_back(static_cast<std::uint32_t>(st));
      st >>= 32;
    }
    st = ((st / sym.freq) << kProbBits) + (st % sym.freq) + sym.start;
  }
  const std::size_t base = out.size();
  out.resize(base + 8 * kStreams + 4 * words.size());
  std::uint8_t* p = out.data() + base;
  for (int s = 0; s < kStreams; ++s)
    for (int b = 0; b < 8; ++b) *p++ = static_cast<std::uint8_t>(x[s] >> (8 * b));
  for (std::size_t i = words.size(); i-- > 0;)
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
