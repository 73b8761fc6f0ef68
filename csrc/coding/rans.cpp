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

// A stream of the symbols list coded by the shared arithmetic
// (coding/rans_core.hpp) into a word buffer, appended to a vector.
class Run {
 public:
  Run(const AnsSymbol* symbols, std::size_t count, std::size_t padding, std::uint32_t* words)
      : run_(symbols, count, padding, words) {}
  bool more() const { return run_.more(); }
  void group() { run_.group(); }
  void write(std::vector<std::uint8_t>& out) const {
    const std::size_t base = out.size();
    out.resize(base + run_.bytes());
    run_.write(out.data() + base);
  }

 private:
  RansRun run_;
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
  Run ra(a.symbols_.get(), a.count_, 0, a.words(0)), rb(b.symbols_.get(), b.count_, 0, b.words(0));
  while (ra.more() && rb.more()) {
    ra.group();
    rb.group();
  }
  while (ra.more()) ra.group();
  while (rb.more()) rb.group();
  ra.write(out_a);
  rb.write(out_b);
  a.done_with_words();
  b.done_with_words();
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
  Run run(symbols_.get(), count_, padding, words(padding));
  while (run.more()) run.group();
  run.write(out);
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
