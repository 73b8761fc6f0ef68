#include "coding/rans.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

#include "coding/rans_kernels.hpp"

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

// A stream's bytes (coding/rans_core.hpp's RansRun, coded), appended to out.
void append_rans_run(const RansRun& run, std::vector<std::uint8_t>& out) {
  const std::size_t base = out.size();
  out.resize(base + run.bytes());
  run.write(out.data() + base);
}

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

std::size_t AnsEncoder::streams_together() {
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return kTogether;
#endif
  return 2;
}

void AnsEncoder::finish_together(const AnsEncoder* const* encoders,
                                 std::vector<std::uint8_t>* const* outs, std::size_t k) {
  if (k < 1 || k > kTogether) throw InvalidArgument("finish_together takes 1 to 4 encoders");
  std::optional<RansRun> runs[kTogether];
  for (std::size_t t = 0; t < k; ++t) {
    const AnsEncoder& e = *encoders[t];
    runs[t].emplace(e.symbols_.get(), e.count_, 0, e.words(0));
  }
#if CEPAM_X86_DISPATCH
  // The groups every run has, two runs a register (an even k).
  if (k % 2 == 0 && simd_avx512dq()) {
    std::size_t common = runs[0]->groups_left();
    for (std::size_t t = 1; t < k; ++t) common = std::min(common, runs[t]->groups_left());
    RansRun::Lanes lanes[kTogether];
    for (std::size_t t = 0; t < k; ++t) lanes[t] = runs[t]->lanes();
    rans_kernels::avx512::encode_groups(lanes, k, common);
    for (std::size_t t = 0; t < k; ++t) runs[t]->set_lanes(lanes[t]);
  }
#endif
  // The rest (everything without AVX-512): the runs in pairs, a group of
  // each in turn (copies, which the compiler keeps in registers).
  for (std::size_t t = 0; t < k; t += 2) {
    if (t + 1 == k) {
      while (runs[t]->more()) runs[t]->group();
      break;
    }
    RansRun a = *runs[t], b = *runs[t + 1];
    while (a.more() && b.more()) {
      a.group();
      b.group();
    }
    while (a.more()) a.group();
    while (b.more()) b.group();
    runs[t] = a;
    runs[t + 1] = b;
  }
  for (std::size_t t = 0; t < k; ++t) {
    append_rans_run(*runs[t], *outs[t]);
    encoders[t]->done_with_words();
  }
}

std::uint32_t* AnsEncoder::words(std::size_t padding) const {
  if (words_capacity_ < count_ + padding) {
    words_ = page_array<std::uint32_t>(count_ + padding);
    words_capacity_ = count_ + padding;
  }
  return words_.get();
}

void AnsEncoder::done_with_words() const {
  if (keep_words_) return;
  words_.reset();
  words_capacity_ = 0;
}

void AnsEncoder::encode(std::size_t padding, std::vector<std::uint8_t>& out) const {
  RansRun run(symbols_.get(), count_, padding, words(padding));
  while (run.more()) run.group();
  append_rans_run(run, out);
  done_with_words();
}

// The stream's opening and end are rans_core.hpp's (the GPU decoder's
// too): one reading of the format, one set of errors.
AnsDecoder::AnsDecoder(const std::uint8_t* data, std::size_t len) : data_(data), len_(len) {
  RansReader r;
  const ReadStatus st = rans_open(r, data, len);
  if (st != kReadOk) throw FormatError(read_message(st));
  pos_ = r.pos;
  for (int s = 0; s < kStreams; ++s) x_[s] = r.x[s];
}

std::size_t AnsDecoder::finish() {
  // Padding (see rans.hpp); each symbol consumes a word or divides a state
  // by 2^16, so this ends within about 3 symbols a word.  With no word
  // left, a state below kLow 2^16 cannot take another symbol.  Words left
  // over are trailing data unless they are padding.
  RansReader r{data_, len_, pos_, {}, lane_};
  for (int s = 0; s < kStreams; ++s) r.x[s] = x_[s];
  std::size_t padding = 0;
  const ReadStatus st = rans_finish(r, &padding);
  if (st != kReadOk) throw FormatError(read_message(st));
  return padding;
}

}  // namespace cepam
