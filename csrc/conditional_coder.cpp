#include "conditional_coder.hpp"

#include "lrsuq.hpp"

namespace cepam {
namespace {

constexpr std::uint32_t kEscapeFreq = 1;

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

std::int64_t clamp_cell(double v) {
  const double limit = static_cast<double>(kMaxAbsM);
  if (!(v > -limit)) return -kMaxAbsM;
  if (!(v < limit)) return kMaxAbsM;
  return static_cast<std::int64_t>(v);
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
  int h = 0;
  while (cum_[h + 1] <= s) ++h;  // the mass is at small h: a short scan
  dec.advance(cum_[h], cum_[h + 1] - cum_[h]);
  return static_cast<std::uint32_t>(h + 1);
}

CellCoder::Layout CellCoder::layout(double g, double o) const {
  Layout l;
  l.g = g;
  l.o = o;
  const double a = model_.range();
  l.lo = clamp_cell(std::floor((-a - o) / g + 0.5)) - kMargin;
  l.hi = clamp_cell(std::floor((a - o) / g + 0.5)) + kMargin;
  if (l.lo < -kMaxAbsM) l.lo = -kMaxAbsM;
  if (l.hi > kMaxAbsM) l.hi = kMaxAbsM;
  if (l.hi < l.lo) l.hi = l.lo;
  const std::uint64_t span = static_cast<std::uint64_t>(l.hi - l.lo);  // cells - 1
  l.shift = 0;
  while ((span >> l.shift) >= static_cast<std::uint64_t>(kMaxSymbols)) ++l.shift;
  l.count = static_cast<std::int64_t>(span >> l.shift) + 1;
  l.range = kProbScale - static_cast<std::uint32_t>(l.count) - kEscapeFreq;
  return l;
}

std::uint32_t CellCoder::cum(const Layout& l, std::int64_t q) const {
  if (q <= 0) return 0;
  if (q >= l.count) return l.range + static_cast<std::uint32_t>(l.count);
  const std::int64_t cell = l.lo + (q << l.shift);
  const double edge = l.g * (static_cast<double>(cell) - 0.5) + l.o;
  const double f = std::floor(model_.cdf(edge) * static_cast<double>(l.range));
  return static_cast<std::uint32_t>(f) + static_cast<std::uint32_t>(q);
}

void CellCoder::encode(std::int64_t j, double g, double o, AnsEncoder& enc) const {
  const Layout l = layout(g, o);
  if (j < l.lo || j > l.hi) {
    enc.put(kProbScale - kEscapeFreq, kEscapeFreq);
    put_escaped(j, enc);
    return;
  }
  const std::uint64_t d = static_cast<std::uint64_t>(j - l.lo);
  const std::int64_t q = static_cast<std::int64_t>(d >> l.shift);
  const std::uint32_t start = cum(l, q);
  enc.put(start, cum(l, q + 1) - start);
  if (l.shift > 0) enc.put_raw_long(d & ((std::uint64_t{1} << l.shift) - 1), l.shift);
}

std::int64_t CellCoder::decode(double g, double o, AnsDecoder& dec) const {
  const Layout l = layout(g, o);
  const std::uint32_t s = dec.peek();
  if (s >= kProbScale - kEscapeFreq) {
    dec.advance(kProbScale - kEscapeFreq, kEscapeFreq);
    const std::int64_t j = get_escaped(dec);
    if (j >= l.lo && j <= l.hi) throw FormatError("non-canonical escaped coordinate");
    return j;
  }
  // Largest q with cum(q) <= s; cum(count) > s always.
  std::int64_t lo = 0, hi = l.count;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (cum(l, mid) <= s) lo = mid;
    else hi = mid;
  }
  const std::uint32_t start = cum(l, lo);
  dec.advance(start, cum(l, lo + 1) - start);
  std::uint64_t r = 0;
  if (l.shift > 0) r = dec.get_raw_long(l.shift);
  const std::int64_t j = l.lo + static_cast<std::int64_t>((static_cast<std::uint64_t>(lo) << l.shift) | r);
  if (j > l.hi) throw FormatError("lattice coordinate outside its table");
  return j;
}

}  // namespace cepam
