#include "coding/rans.hpp"

namespace cepam {

void AnsEncoder::finish(std::vector<std::uint8_t>& out) const {
  std::uint64_t x[kStreams];
  for (int s = 0; s < kStreams; ++s) x[s] = AnsDecoder::kLow;
  // Words come out in reverse decoding order; collect, then reverse.
  std::vector<std::uint32_t> words;
  words.reserve(symbols_.size() / 2 + 8);
  for (std::size_t i = symbols_.size(); i-- > 0;) {
    const AnsSymbol& sym = symbols_[i];
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

void AnsDecoder::finish() const {
  if (pos_ != len_) throw FormatError("entropy-coded body has trailing data");
  for (int s = 0; s < kStreams; ++s)
    if (x_[s] != kLow) throw FormatError("entropy-coded body does not end in its initial state");
}

}  // namespace cepam
