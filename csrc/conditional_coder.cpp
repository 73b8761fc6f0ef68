#include "conditional_coder.hpp"

namespace cepam {
namespace {

constexpr std::uint32_t kEscapeFreq = CellCoder::kEscapeFreq;

inline std::uint64_t zigzag64(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
inline std::int64_t unzigzag64(std::uint64_t z) {
  return static_cast<std::int64_t>(z >> 1) ^ -static_cast<std::int64_t>(z & 1);
}

// Escaped value: 6 raw bits of length L, then L raw bits of zigzag(j).
void put_escaped(std::int64_t j, AnsEncoder& enc) {
  const std::uint64_t z = zigzag64(j);
  int len = 0;
  while (len < 64 && (z >> len) != 0) ++len;
  enc.put_raw(static_cast<std::uint32_t>(len), 6);
  if (len > 0) enc.put_raw_long(z, len);
}

std::int64_t get_escaped(AnsDecoder& dec) {
  const int len = static_cast<int>(dec.get_raw(6));
  if (len > 55) throw FormatError("escaped lattice coordinate out of range");
  const std::uint64_t z = len > 0 ? dec.get_raw_long(len) : 0;
  const std::int64_t j = unzigzag64(z);
  if (j > kMaxAbsM || j < -kMaxAbsM) throw FormatError("escaped lattice coordinate out of range");
  return j;
}

}  // namespace

GeometricCoder::GeometricCoder(double p) : coded_(p < 1.0) {
  if (!coded_) return;
  // freq(h) = round(2^P p (1 - p)^(h - 1)), at least 1; the escape takes 1;
  // h = 1 absorbs the rounding so that the table sums to 2^P exactly.
  std::uint32_t freq[kTable];
  double ph = p * static_cast<double>(kProbScale);
  std::uint64_t rest = 0;
  for (int h = 0; h < kTable; ++h) {
    const double f = std::floor(ph + 0.5);
    freq[h] = f < 1.0 ? 1u : static_cast<std::uint32_t>(f);
    if (h > 0) rest += freq[h];
    ph *= (1.0 - p);
  }
  freq[0] = static_cast<std::uint32_t>(kProbScale - kEscapeFreq - rest);
  cum_[0] = 0;
  for (int h = 0; h < kTable; ++h) cum_[h + 1] = cum_[h] + freq[h];
  cum_[kTable + 1] = kProbScale;
  for (int t = 0, h = 0; t < (1 << kGuideBits); ++t) {
    while (cum_[h + 1] <= static_cast<std::uint32_t>(t) << (kProbBits - kGuideBits)) ++h;
    guide_[t] = static_cast<std::uint8_t>(h);
  }
}

void GeometricCoder::encode(std::uint32_t h, AnsEncoder& enc) const {
  if (!coded_) return;
  if (h >= 1 && h <= static_cast<std::uint32_t>(kTable)) {
    enc.put(cum_[h - 1], cum_[h] - cum_[h - 1]);
  } else {
    enc.put(cum_[kTable], kEscapeFreq);
    enc.put_raw(h - 1, 16);  // h <= kTrialCap = 2^16
  }
}

std::uint32_t GeometricCoder::decode(AnsDecoder& dec) const {
  if (!coded_) return 1;
  const std::uint32_t s = dec.peek();
  if (s >= cum_[kTable]) {
    dec.advance(cum_[kTable], kEscapeFreq);
    const std::uint32_t h = dec.get_raw(16) + 1;
    if (h <= static_cast<std::uint32_t>(kTable)) throw FormatError("non-canonical trial index");
    return h;
  }
  int h = guide_[s >> (kProbBits - kGuideBits)];
  while (cum_[h + 1] <= s) ++h;  // ends below kTable, as s < cum_[kTable]
  dec.advance(cum_[h], cum_[h + 1] - cum_[h]);
  return static_cast<std::uint32_t>(h + 1);
}

// The largest q with cum(q) <= s, from a guess q in [0, count): gallops
// away from the guess until the answer is bracketed, then bisects, so that
// it takes O(log |answer - guess|) steps.  cum(0) = 0 <= s < cum(count)
// always (s below the escape slot), which bounds both gallops.
std::int64_t CellCoder::search(const Layout& l, std::uint32_t s, std::int64_t q) const {
  std::int64_t lo, hi;  // cum(lo) <= s < cum(hi)
  std::int64_t step = 1;
  if (cum(l, q) <= s) {
    lo = q;
    hi = q + 1;
    while (cum(l, hi) <= s) {
      lo = hi;
      hi = hi + step < l.count ? hi + step : l.count;
      step *= 2;
    }
  } else {  // q > 0 here
    hi = q;
    lo = q - 1;
    while (cum(l, lo) > s) {
      hi = lo;
      lo = lo - step > 0 ? lo - step : 0;
      step *= 2;
    }
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (cum(l, mid) <= s) lo = mid;
    else hi = mid;
  }
  return lo;
}

void CellCoder::encode_escaped(std::int64_t j, AnsEncoder& enc) const {
  enc.put(kProbScale - kEscapeFreq, kEscapeFreq);
  put_escaped(j, enc);
}

std::int64_t CellCoder::decode_escaped(const Layout& l, AnsDecoder& dec) const {
  dec.advance(kProbScale - kEscapeFreq, kEscapeFreq);
  const std::int64_t j = get_escaped(dec);
  if (j >= l.lo && j <= l.hi) throw FormatError("non-canonical escaped coordinate");
  return j;
}

// A coarse symbol q = d >> shift, then the offset d mod 2^shift raw.
void CellCoder::encode_coarse(std::uint64_t d, const Layout& l, AnsEncoder& enc) const {
  const std::int64_t q = static_cast<std::int64_t>(d >> l.shift);
  const std::uint32_t start = cum(l, q);
  enc.put(start, cum(l, q + 1) - start);
  enc.put_raw_long(d & ((std::uint64_t{1} << l.shift) - 1), l.shift);
}

std::int64_t CellCoder::decode_coarse(std::int64_t q, const Layout& l, AnsDecoder& dec) const {
  const std::uint64_t r = dec.get_raw_long(l.shift);
  const std::int64_t j = l.lo + static_cast<std::int64_t>((static_cast<std::uint64_t>(q) << l.shift) | r);
  if (j > l.hi) throw FormatError("lattice coordinate outside its table");
  return j;
}

}  // namespace cepam
