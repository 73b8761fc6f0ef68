#include "coding/point_coder.hpp"

#include <algorithm>
#include <cmath>

#include "random/detmath.hpp"
#include "common/errors.hpp"

namespace cepam {
namespace {

constexpr double kMaxT = 0x1.0p40;  // |t_k| above this: no table

// P(chi'^2_n(lambda) <= x) with x = rho^2 / sp^2 and lambda = d2 / sp^2, by
// Sankaran's (1963) normal approximation of (chi'^2 / (n + lambda))^h:
//   h = 1 - 2/3 (n + lambda)(n + 3 lambda) / (n + 2 lambda)^2,
//   p = (n + 2 lambda) / (n + lambda)^2,  m = (h - 1)(1 - 3 h),
//   z = ((x / (n + lambda))^h - 1 - h p (h - 1 - (2 - h) m p / 2))
//       / (h sqrt(2 p) (1 + m p / 2)),
// written with q_i = n sp^2 + i d2 so that nothing overflows when sp is small.
double ball_probability(double n, double rho2, double sp2, double d2) {
  const double q1 = n * sp2 + d2, q2 = q1 + d2, q3 = q2 + d2;
  const double h = 1.0 - (2.0 / 3.0) * (q1 * q3) / (q2 * q2);  // in [1/3, 1/2]
  const double p = q2 * sp2 / (q1 * q1);
  const double m = (h - 1.0) * (1.0 - 3.0 * h);
  const double power = detmath::exp_bounded(h * detmath::log(rho2 / q1));
  const double z = (power - (1.0 + h * p * (h - 1.0 - 0.5 * (2.0 - h) * m * p))) /
                   (h * std::sqrt(2.0 * p) * (1.0 + 0.5 * m * p));
  // Beyond 6 standard deviations the probability is below the coder's
  // resolution (2^-24): not worth computing.
  if (!(z > -6.0)) return 0.0;
  if (z > 6.0) return 1.0;
  return detmath::normal_cdf(z);
}

// The radius R at which the ball of radius R holds about `points` lattice
// points (volume V_n R^n against the cell volume det G), by bisection:
// deterministic, no pow.
double radius_for(int n, double cell_volume, double points) {
  const double unit_ball = zn_packing_density(n) * std::ldexp(1.0, n);  // V_n
  double lo = 0.0, hi = 64.0;
  for (int it = 0; it < 80; ++it) {
    const double mid = 0.5 * (lo + hi);
    double vol = unit_ball;
    for (int k = 0; k < n; ++k) vol *= mid;
    if (vol <= points * cell_volume) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace

PointCoder::PointCoder(const SourceModel& model, const TriangularBasis& basis)
    : n_(basis.n), b_(basis.b), rho_(basis.rho), mu_(model.mean()), var_(model.variance()) {
  if (n_ < 1 || n_ > 8) throw InvalidArgument("basis dimension out of range");
  double det = 1.0;
  for (int k = 0; k < n_; ++k) det *= b_[static_cast<std::size_t>(k * n_ + k)];
  r_cap_ = radius_for(n_, det, 0.5 * static_cast<double>(kMaxCandidates));
  root_n_ = std::sqrt(static_cast<double>(n_));
  enumerate_ = enumerator(n_);
  // D4 (n = 4) and E8 (n = 8, last row 1/2): every point's coordinates lie
  // in Z, or all in Z + 1/2 (E8), as the top coordinate says.
  const std::size_t last = static_cast<std::size_t>(n_) * static_cast<std::size_t>(n_) - 1;
  coset_bound_ = (n_ == 4 && b_[0] == 2.0 && b_[last] == 1.0) ||
                 (n_ == 8 && b_[0] == 2.0 && b_[last] == 0.5);
  for (int k = 0; k < n_; ++k) {
    terms_[k] = 0;
    for (int i = k + 1; i < n_; ++i)
      if (b_[static_cast<std::size_t>(i * n_ + k)] != 0.0) term_row_[k][terms_[k]++] = i;
    const double g = b_[static_cast<std::size_t>(k * n_ + k)];
    int e;
    inv_g_[k] = (std::frexp(g, &e) == 0.5) ? 1.0 / g : 0.0;  // exact: g = 2^(e - 1)
  }
  usable_ = std::isfinite(mu_) && std::isfinite(var_);
  cand_.resize(kMaxCandidates * static_cast<std::size_t>(n_));
  d2_.resize(kMaxCandidates);
  cum_.resize(kMaxCandidates + 1);
  freq_.resize(kMaxCandidates);
}

// sum_{i > k} m_i G_ik, in order of i.
inline double PointCoder::offset(int k, const std::int64_t* m) const {
  double s = 0.0;
  for (int i = k + 1; i < n_; ++i)
    s += static_cast<double>(m[i]) * b_[static_cast<std::size_t>(i * n_ + k)];
  return s;
}

// partial + e^2, e = (off + m_k G_kk) - t_k: the distance's term k.
inline double PointCoder::extend(int k, double off, std::int64_t mk, double partial) const {
  const double e = (off + static_cast<double>(mk) * b_[static_cast<std::size_t>(k * n_ + k)]) - t_[k];
  return partial + e * e;
}

bool PointCoder::listed(const std::int64_t* m) const {
  double partial = 0.0;
  for (int k = n_ - 1; k >= 0; --k) partial = extend(k, offset(k, m), m[k], partial);
  return partial <= r2_;
}

// The candidates m_k at level K, given cur_[i] for i > K: those whose
// partial sums stay within R^2.  e = (off + j G_KK) - t_K is non-decreasing
// in j (every rounding is monotone), so the partial sum is quasi-convex in
// j: the valid j form an interval around the minimum, which is at j0 - 1,
// j0 or j0 + 1 for j0 the nearest integer to the centre.  off and e are
// offset(K, cur_) and extend(K, ...), written out for a fixed N.
template <int N, int K>
void PointCoder::enumerate(double partial) {
  const double* b = b_.data();
  const double g = b[K * N + K];
  // The terms of offset(K, cur_) whose G_iK is not zero, in order of i
  // (a zero term can only change the sign of a zero sum, which neither the
  // squared distance nor the centre's floor sees).
  double off = 0.0;
  for (int t = 0; t < terms_[K]; ++t)
    off += static_cast<double>(cur_[term_row_[K][t]]) * b[term_row_[K][t] * N + K];
  const double tk = t_[K];
  const auto distance = [&](std::int64_t j) {
    const double e = (off + static_cast<double>(j) * g) - tk;
    return partial + e * e;
  };
  const auto valid = [&](std::int64_t j) { return distance(j) <= r2_; };
  // j0 = floor((t_K - off) / g + 1/2): by truncation (exact, |t| < 2^40),
  // and by a multiplication where 1 / g is a power of two (the same value
  // as the division then).
  const double centre = (inv_g_[K] != 0.0 ? (tk - off) * inv_g_[K] : (tk - off) / g) + 0.5;
  std::int64_t j0 = static_cast<std::int64_t>(centre);
  j0 -= centre < static_cast<double>(j0) ? 1 : 0;
  std::int64_t lo = j0;
  if (!valid(lo)) {
    if (valid(j0 - 1)) lo = j0 - 1;
    else if (valid(j0 + 1)) lo = j0 + 1;
    else return;
  }
  std::int64_t hi = lo;
  while (valid(lo - 1)) --lo;
  while (valid(hi + 1)) ++hi;
  for (std::int64_t j = lo; j <= hi && !overflow_; ++j) {
    cur_[K] = j;
    const double p = distance(j);
    if constexpr (K > 0) {
      if (coset_bound_) {
        if (K == N - 1) set_level_bounds(static_cast<double>(j) * g);
        // No point below can come within R: the subtree has no candidate.
        if (p + below_[K] * kBoundShrink > r2_) continue;
      }
      enumerate<N, K - 1>(p);
    } else if (count_ == kMaxCandidates) {
      overflow_ = true;
    } else {
      std::copy(cur_, cur_ + N, cand_.begin() + static_cast<std::ptrdiff_t>(count_ * N));
      d2_[count_++] = p;
    }
  }
}

// below_[k] = sum over levels i < k of the squared distance of t_i to the
// nearest point of Z + h, h = the fractional part of the top coordinate
// (a point of D4 or E8 has all its coordinates in Z + h).  Each level's term
// of a candidate's distance is at least that (computed with relative errors
// of a few units in 2^-53, which kBoundShrink covers), so a subtree whose
// partial sum plus below_ exceeds R^2 holds no candidate and is skipped:
// the same candidates, in the same order, with the same distances.
void PointCoder::set_level_bounds(double top) {
  const double h = top - std::floor(top);
  below_[0] = 0.0;
  for (int k = 0; k + 1 < n_; ++k) {
    const double u = t_[k] - h;
    const double d = u - std::floor(u + 0.5);
    below_[k + 1] = below_[k] + d * d;
  }
}

PointCoder::Enumerate PointCoder::enumerator(int n) {
  switch (n) {
    case 1: return &PointCoder::enumerate<1, 0>;
    case 2: return &PointCoder::enumerate<2, 1>;
    case 3: return &PointCoder::enumerate<3, 2>;
    case 4: return &PointCoder::enumerate<4, 3>;
    case 5: return &PointCoder::enumerate<5, 4>;
    case 6: return &PointCoder::enumerate<6, 5>;
    case 7: return &PointCoder::enumerate<7, 6>;
    default: return &PointCoder::enumerate<8, 7>;
  }
}

bool PointCoder::prepare(double beta, const double* v) {
  if (!usable_ || !(beta > 0.0)) return false;
  const double rho2 = rho_ * rho_;
  // sp^2 at least rho^2 2^-60 (a constant source): the model stays finite.
  double sp2 = var_ / (beta * beta);
  if (!(sp2 >= rho2 * 0x1.0p-60)) sp2 = rho2 * 0x1.0p-60;
  // Where the source spreads over more than the cell (sp > rho) the box
  // model is as good: no table.
  if (!(sp2 <= rho2)) return false;
  const double r = rho_ + std::sqrt(sp2) * (root_n_ + kTail);
  if (!(r <= r_cap_)) return false;
  const double centre = mu_ / beta;
  for (int k = 0; k < n_; ++k) {
    t_[k] = centre - v[k];
    if (!(std::fabs(t_[k]) < kMaxT)) return false;
  }
  r2_ = r * r;
  count_ = 0;
  overflow_ = false;
  (this->*enumerate_)(0.0);
  if (overflow_ || count_ == 0) return false;
  const double n = static_cast<double>(n_);
  double total = 0.0;
  for (std::size_t i = 0; i < count_; ++i) {
    d2_[i] = ball_probability(n, rho2, sp2, d2_[i]);  // d2_ now holds P_i
    total += d2_[i];
  }
  if (!(total > 0.0)) {  // every P_i underflowed: a uniform table
    std::fill_n(d2_.begin(), count_, 1.0);
    total = static_cast<double>(count_);
  }
  // 1 + floor(P_i scale) sums to at most S - K + K rounding slack; the
  // rest goes to the first most probable candidate, so that the table ends
  // at S exactly.
  const std::uint32_t k = static_cast<std::uint32_t>(count_);
  const double scale = static_cast<double>(kSlots - 2 * k) / total;
  std::size_t best = 0;
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    freq_[i] = 1 + static_cast<std::uint32_t>(d2_[i] * scale);
    sum += freq_[i];
    if (d2_[i] > d2_[best]) best = i;
  }
  freq_[best] += kSlots - sum;
  cum_[0] = 0;
  for (std::size_t i = 0; i < count_; ++i) cum_[i + 1] = cum_[i] + freq_[i];
  return true;
}

bool PointCoder::encode(const std::int64_t* m, AnsEncoder& enc) const {
  const std::size_t n = static_cast<std::size_t>(n_);
  for (std::size_t i = 0; i < count_; ++i) {
    if (std::equal(m, m + n, cand_.begin() + static_cast<std::ptrdiff_t>(i * n))) {
      enc.put(cum_[i], cum_[i + 1] - cum_[i]);
      return true;
    }
  }
  enc.put(kSlots, kEscapeFreq);
  return false;
}

bool PointCoder::decode(AnsDecoder& dec, std::int64_t* m) const {
  const std::uint32_t s = dec.peek();
  if (s >= kSlots) {
    dec.advance(kSlots, kEscapeFreq);
    return false;
  }
  // The i with cum_[i] <= s < cum_[i + 1].
  const auto it = std::upper_bound(cum_.begin(), cum_.begin() + static_cast<std::ptrdiff_t>(count_) + 1, s);
  const std::size_t i = static_cast<std::size_t>(it - cum_.begin()) - 1;
  dec.advance(cum_[i], cum_[i + 1] - cum_[i]);
  const std::size_t n = static_cast<std::size_t>(n_);
  std::copy_n(cand_.begin() + static_cast<std::ptrdiff_t>(i * n), n, m);
  return true;
}

}  // namespace cepam
