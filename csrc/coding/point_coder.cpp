#include "coding/point_coder.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "lattice/root_lattices.hpp"
#include "random/detmath.hpp"
#include "common/cpu.hpp"
#include "common/errors.hpp"

#if CEPAM_X86_DISPATCH
#include <immintrin.h>

#include "random/detmath_avx2.hpp"
#endif

namespace cepam {
namespace {

// (coding/point_core.hpp)
template <int N>
constexpr int kWindow = kPointWindow<N>;
template <int N>
constexpr int kTerms = kPointTerms<N>;

#if CEPAM_X86_DISPATCH
// point_ball_probability (coding/point_core.hpp) for d2[0 .. count) in
// place, four at a time: the same operations (avx2::log, exp_bounded and
// normal_cdf mirror detmath's; the branches are selections).  Returns how
// many it did (a multiple of 4).
CEPAM_TARGET_AVX2 std::size_t ball_probabilities_avx2(double n, double rho2, double sp2, double* d2,
                                                      std::size_t count) {
  using avx2::splat;
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    const __m256d d = _mm256_loadu_pd(d2 + i);
    const __m256d q1 = _mm256_add_pd(splat(n * sp2), d);
    const __m256d q2 = _mm256_add_pd(q1, d);
    const __m256d q3 = _mm256_add_pd(q2, d);
    const __m256d h = _mm256_sub_pd(
        splat(1.0), _mm256_div_pd(_mm256_mul_pd(splat(2.0 / 3.0), _mm256_mul_pd(q1, q3)),
                                  _mm256_mul_pd(q2, q2)));
    const __m256d p = _mm256_div_pd(_mm256_mul_pd(q2, splat(sp2)), _mm256_mul_pd(q1, q1));
    const __m256d m = _mm256_mul_pd(_mm256_sub_pd(h, splat(1.0)),
                                    _mm256_sub_pd(splat(1.0), _mm256_mul_pd(splat(3.0), h)));
    const __m256d power =
        avx2::exp_bounded(_mm256_mul_pd(h, avx2::log(_mm256_div_pd(splat(rho2), q1))));
    const __m256d mp = _mm256_mul_pd(_mm256_mul_pd(splat(0.5), m), p);  // 0.5 m p
    // h p (h - 1 - 0.5 (2 - h) m p)
    const __m256d x = _mm256_sub_pd(
        _mm256_sub_pd(h, splat(1.0)),
        _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(splat(0.5), _mm256_sub_pd(splat(2.0), h)), m), p));
    const __m256d num =
        _mm256_sub_pd(power, _mm256_add_pd(splat(1.0), _mm256_mul_pd(_mm256_mul_pd(h, p), x)));
    const __m256d den =
        _mm256_mul_pd(_mm256_mul_pd(h, _mm256_sqrt_pd(_mm256_mul_pd(splat(2.0), p))),
                      _mm256_add_pd(splat(1.0), mp));
    const __m256d z = _mm256_div_pd(num, den);
    __m256d out = _mm256_blendv_pd(avx2::normal_cdf(z), splat(1.0),
                                   _mm256_cmp_pd(z, splat(6.0), _CMP_GT_OQ));
    out = _mm256_blendv_pd(_mm256_setzero_pd(), out, _mm256_cmp_pd(z, splat(-6.0), _CMP_GT_OQ));
    _mm256_storeu_pd(d2 + i, out);
  }
  return i;
}
#endif

// point_ball_probability for d2[0 .. count), in place; d2 has room for count
// rounded up to a multiple of 4, where the SIMD form computes the last
// group whole (on copies of d2[count - 1]; each lane is computed alone, so
// the others' values do not change).
void ball_probabilities(double n, double rho2, double sp2, double* d2, std::size_t count) {
  std::size_t i = 0;
#if CEPAM_X86_DISPATCH
  if (simd_level() >= SimdLevel::Avx2 && count > 0) {
    const std::size_t whole = (count + 3) & ~std::size_t{3};
    std::fill(d2 + count, d2 + whole, d2[count - 1]);
    i = ball_probabilities_avx2(n, rho2, sp2, d2, whole);
  }
#endif
  for (; i < count; ++i) d2[i] = point_ball_probability(n, rho2, sp2, d2[i]);
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

#if CEPAM_X86_DISPATCH
// point_fill_cosets (coding/point_core.hpp) for four levels at a time (the
// floor by roundpd, the same integer).
template <int N>
CEPAM_TARGET_AVX2 void fill_cosets_avx2(const double* t, PointCoder::Coset* s) {
  constexpr int W = kWindow<N>;
  constexpr int kCosets = N == 8 ? 2 : 1;
  static_assert(N % 4 == 0, "four levels at a time");
  for (int c = 0; c < kCosets; ++c) {
    const __m256d h = _mm256_set1_pd(0.5 * static_cast<double>(c));
    double d2[N];
    for (int k = 0; k < N; k += 4) {
      const __m256d tk = _mm256_loadu_pd(t + k);
      const __m256d u = _mm256_sub_pd(tk, h);
      const __m256d n0 = _mm256_floor_pd(_mm256_add_pd(u, _mm256_set1_pd(0.5)));
      const __m256d d = _mm256_sub_pd(u, n0);
      _mm256_storeu_pd(d2 + k, _mm256_mul_pd(d, d));
      __m256d side = _mm256_set1_pd(std::numeric_limits<double>::infinity());
      for (int w = 0; w <= 2 * W; ++w) {
        const __m256d x =
            _mm256_add_pd(_mm256_add_pd(n0, _mm256_set1_pd(static_cast<double>(w - W))), h);
        const __m256d e = _mm256_sub_pd(x, tk);
        const __m256d sq = _mm256_mul_pd(e, e);
        _mm256_storeu_pd(s[c].x[w] + k, x);
        _mm256_storeu_pd(s[c].sq[w] + k, sq);
        if (w != W) side = _mm256_min_pd(side, sq);  // (no NaN: t is finite)
      }
      _mm256_storeu_pd(s[c].side + k, side);
    }
    point_set_bounds<N>(d2, s[c]);
  }
}
#endif

template <int N>
PointCoder::FillCosets fill_cosets_for() {
#if CEPAM_X86_DISPATCH
  if (simd_level() >= SimdLevel::Avx2) return &fill_cosets_avx2<N>;
#endif
  return &point_fill_cosets<N>;
}

}  // namespace

PointCoder::PointCoder(const SourceModel& model, const TriangularBasis& basis)
    : n_(basis.n), b_(basis.b) {
  if (n_ < 1 || n_ > 8) throw InvalidArgument("basis dimension out of range");
  double det = 1.0;
  for (int k = 0; k < n_; ++k) det *= b_[static_cast<std::size_t>(k * n_ + k)];
  const double mu = model.mean(), var = model.variance();
  const double r_cap = radius_for(n_, det, 0.5 * static_cast<double>(kMaxCandidates));
  bounds_ = PointBounds{std::isfinite(mu) && std::isfinite(var) ? 1 : 0, n_, basis.rho, mu, var,
                        r_cap, std::sqrt(static_cast<double>(n_))};
  // The bases of D4 and E8 (lattice/root_lattices.hpp) are walked in the
  // coordinates x = G^T m (walk_top); any other basis by enumerate.
  const auto is_basis = [&](const double* rows) { return std::equal(b_.begin(), b_.end(), rows); };
  // (The windows need r_cap + 1/2 + 2^-10 <= kWindow + 1: D4 2.40 <= 3, E8
  // 1.79 <= 2.)
  if (n_ == 4 && is_basis(LatticeD4::basis_rows()) && bounds_.r_cap + 0.5 + 0x1.0p-10 <= kWindow<4> + 1) {
    enumerate_ = &PointCoder::walk_top<4>;
    fill_cosets_ = fill_cosets_for<4>();
  } else if (n_ == 8 && is_basis(LatticeE8::basis_rows()) &&
             bounds_.r_cap + 0.5 + 0x1.0p-10 <= kWindow<8> + 1) {
    enumerate_ = &PointCoder::walk_top<8>;
    fill_cosets_ = fill_cosets_for<8>();
  } else {
    enumerate_ = enumerator(n_);
    fill_cosets_ = nullptr;
  }
  for (int k = 0; k < n_; ++k) {
    terms_[k] = 0;
    for (int i = k + 1; i < n_; ++i)
      if (b_[static_cast<std::size_t>(i * n_ + k)] != 0.0) term_row_[k][terms_[k]++] = i;
    const double g = b_[static_cast<std::size_t>(k * n_ + k)];
    int e;
    inv_g_[k] = (std::frexp(g, &e) == 0.5) ? 1.0 / g : 0.0;  // exact: g = 2^(e - 1)
  }
  if (walked()) {
    const int most = n_ == 8 ? kTerms<8> : kTerms<4>;
    for (int k = 0; k < n_; ++k) {
      assert(terms_[k] <= most);  // (the D4 and E8 bases: at most kTerms by construction)
      for (int t = 0; t < most; ++t) {
        const bool term = t < terms_[k];
        pad_row_[k][t] = term ? term_row_[k][t] : n_;  // m_n: a zero
        pad_g_[k][t] = term ? b_[static_cast<std::size_t>(term_row_[k][t] * n_ + k)] : 0.0;
      }
    }
  }
  if (walked()) candx_.resize(kMaxCandidates * static_cast<std::size_t>(n_));
  else cand_.resize(kMaxCandidates * static_cast<std::size_t>(n_));
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
  std::int64_t lo, hi;
  if (!point_valid_run(centre, valid, lo, hi)) return;
  for (std::int64_t j = lo; j <= hi && !overflow_; ++j) {
    cur_[K] = j;
    const double p = distance(j);
    if constexpr (K > 0) {
      enumerate<N, K - 1>(p);
    } else if (count_ == kMaxCandidates) {
      overflow_ = true;
    } else {
      std::int64_t* to = cand_.data() + count_ * N;
      for (int i = 0; i < N; ++i) to[i] = cur_[i];  // (N fixed: moves inline, no memmove call)
      d2_[count_++] = p;
    }
  }
}

// D4 and E8, walked in the coordinates x = G^T m.
//
// The walk finds the candidates that enumerate finds, in the same order,
// with the same distances (D4 and E8 used enumerate until the walk, pruned
// with the bounds below, which the walk applies to the same nodes with the
// same values).  Level k steps through x_k itself instead of m_k: a point
// of D4 or E8 has x_{n-1} in g Z (g = G_{n-1,n-1} = 1 or 1/2), all of
// x_0 .. x_{n-2} in Z + h, h = the fractional part of x_{n-1} (the coset),
// and sum_k (x_k - h) even.  So below the top each level's terms depend on
// the coset alone: they are tabulated once per sub-vector (fill_cosets),
// and the last level takes every other value (the parity).
// Why the same:
// - The set.  enumerate's x_k = offset + m_k G_kk is exact (halves of
//   integers below 2^42), so its term e = x_k - t_k, its partial sums and
//   its set (the points whose partial sums all stay within R^2; the last
//   sum is the largest, as adding a non-negative term never decreases a
//   rounded sum) are functions of x alone: the walk computes the same e.
// - The order.  G is lower triangular with a positive diagonal, so for
//   fixed m_i (i > k), x_k increases with m_k: enumerate's order
//   (lexicographic in m_{n-1}, .., m_0) is the lexicographic order of
//   (x_{n-1}, .., x_0), the walk's.
// - The windows.  A value x_k = n + h within R has |fl(x_k - t_k)| <= R
//   (1 + 2^-51), and the window's centre n0 = floor(fl(t_k - h) + 1/2) is
//   within 1/2 + 2^-11 of t_k - h (|t_k| < 2^40), so |n - n0| < R + 1/2 +
//   2^-10 <= kWindow + 1 (checked for r_cap in the constructor): every
//   value within R is in the window, whose values are tested one by one.
// - The pruning.  enumerate kept j when p(j) <= R^2 and (level > 0) p(j) +
//   below_k kBoundShrink <= R^2, the walk tests the same sums (the second
//   test implies the first).  below_k depends on h alone.
// - The candidates.  x and m determine each other, exactly (to_x, solve):
//   every offset is a sum of halves of integers below 2^42 and every
//   1 / G_kk a power of two; so the walk keeps x, and m is solved for
//   when it is needed (find, decode).
template <int N>
void PointCoder::walk_top(double partial) {
  constexpr int K = N - 1;
  const double g = b_[K * N + K];  // 1 (D4) or 1/2 (E8); no offset at the top
  const double tk = t_[K];
  const auto distance = [&](std::int64_t j) {
    const double e = (0.0 + static_cast<double>(j) * g) - tk;
    return partial + e * e;
  };
  const auto valid = [&](std::int64_t j) { return distance(j) <= r2_; };
  const double centre = tk * inv_g_[K] + 0.5;
  std::int64_t lo, hi;
  if (!point_valid_run(centre, valid, lo, hi)) return;
  fill_cosets_(t_, coset_);
  for (std::int64_t j = lo; j <= hi; ++j) {
    // x_K = j g: coset 1 (h = 1/2) of E8 when j is odd.
    const Coset& s = coset_[N == 8 ? (j & 1) : 0];
    const double p = distance(j);
    // No point below can come within R: the subtree has no candidate.
    if (p + s.bound[K] > r2_) continue;
    x_[K] = static_cast<double>(j) * g;
    if (!walk<N, K - 1>(p, s, x_[K])) return;
  }
}

// Level K < N-1 of the walk: x_K in the window of coset s; sum = the sum
// of x_i, i > K.  False when the candidates overflow.
template <int N, int K>
bool PointCoder::walk(double partial, const Coset& s, double sum) {
  constexpr int W = kWindow<N>;
  const double r2 = r2_;
  if constexpr (K > 0) {
    const double bound = s.bound[K];
    // Rounding is monotone, so where the least term off the centre fails
    // the test every value off the centre does: only the centre is tried.
    if (!((partial + s.side[K]) + bound <= r2)) {
      const double p = partial + s.sq[W][K];
      if (!(p + bound <= r2)) return true;
      x_[K] = s.x[W][K];
      return walk<N, K - 1>(p, s, sum + x_[K]);
    }
    for (int w = 0; w <= 2 * W; ++w) {
      const double p = partial + s.sq[w][K];
      if (!(p + bound <= r2)) continue;
      x_[K] = s.x[w][K];
      if (!walk<N, K - 1>(p, s, sum + x_[K])) return false;
    }
  } else {
    // x_0 makes the sum of the x_k even (of the n_k = x_k - h, as there
    // are 4 or 8 of them); the window's values alternate in parity.
    const double first = sum + s.x[0][0];  // an integer below 2^46: exact
    for (int w = static_cast<int>(static_cast<std::int64_t>(first) & 1); w <= 2 * W; w += 2) {
      const double p = partial + s.sq[w][0];
      if (!(p <= r2)) continue;
      if (count_ == kMaxCandidates) {
        overflow_ = true;
        return false;
      }
      x_[0] = s.x[w][0];
      double* to = candx_.data() + count_ * N;
      for (int i = 0; i < N; ++i) to[i] = x_[i];  // (N fixed: moves inline, no memmove call)
      d2_[count_++] = p;
    }
  }
  return true;
}

// x = G^T m and m = G^-T x (k = n-1 .. 0) for D4 and E8 (N = n), with the
// terms of offset whose G_ik is not zero, padded to kTerms<N> with zeros
// (every sum is exact, so the order and the zeros do not matter):
// straight-line code.
template <int N>
void PointCoder::to_x(const std::int64_t* m, double* x) const {
  double mm[N + 1];
  for (int k = 0; k < N; ++k) mm[k] = static_cast<double>(m[k]);
  mm[N] = 0.0;
  for (int k = 0; k < N; ++k) {
    double s = mm[k] * b_[k * N + k];
    for (int t = 0; t < kTerms<N>; ++t) s += mm[pad_row_[k][t]] * pad_g_[k][t];
    x[k] = s;
  }
}

template <int N>
void PointCoder::solve(const double* x, std::int64_t* m) const {
  double mm[N + 1];
  mm[N] = 0.0;
  for (int k = N - 1; k >= 0; --k) {
    double off = 0.0;
    for (int t = 0; t < kTerms<N>; ++t) off += mm[pad_row_[k][t]] * pad_g_[k][t];
    mm[k] = (x[k] - off) * inv_g_[k];
  }
  for (int k = 0; k < N; ++k) m[k] = static_cast<std::int64_t>(mm[k]);
}

void PointCoder::solve(const double* x, std::int64_t* m) const {
  if (n_ == 8) solve<8>(x, m);
  else solve<4>(x, m);
}

std::size_t PointCoder::find(const std::int64_t* m) const {
  const std::size_t n = static_cast<std::size_t>(n_);
  if (!walked()) {
    for (std::size_t i = 0; i < count_; ++i)
      if (std::equal(m, m + n, cand_.begin() + static_cast<std::ptrdiff_t>(i * n))) return i;
    return count_;
  }
  // A candidate's x is exact, and so is that of m if m is one (then its
  // x is the first equal one, the x of distinct points being distinct).
  // So is that of any m with every |m_k| below 2^40 (halves of integers
  // below 2^44): an equal x is then the same point.  An x that equals a
  // candidate's only by rounding (m far away) is told apart by solving for
  // the candidate's m.
  double x[8];
  if (n_ == 8) to_x<8>(m, x);
  else to_x<4>(m, x);
  constexpr std::int64_t kExact = std::int64_t{1} << 40;
  bool exact = true;
  for (std::size_t k = 0; k < n; ++k) exact &= m[k] < kExact && m[k] > -kExact;
  for (std::size_t i = 0; i < count_; ++i) {
    const double* c = candx_.data() + i * n;
    if (std::equal(x, x + n, c)) {
      if (exact) return i;
      std::int64_t mc[8];
      solve(c, mc);
      return std::equal(m, m + n, mc) ? i : count_;
    }
  }
  return count_;
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
  PointFrame f;
  if (!point_frame(bounds_, beta, v, t_, &f)) return false;
  r2_ = f.r2;
  count_ = 0;
  overflow_ = false;
  (this->*enumerate_)(0.0);
  if (overflow_ || count_ == 0) return false;
  // d2_ then holds the candidates' probabilities.
  static_assert(kMaxCandidates % 4 == 0, "d2_ has room for the last group of four");
  if (count_ > 1) ball_probabilities(static_cast<double>(n_), f.rho2, f.sp2, d2_.data(), count_);
  point_frequencies(d2_.data(), count_, freq_.data(), cum_.data());
  return true;
}

bool PointCoder::encode(const std::int64_t* m, AnsEncoder& enc) const {
  std::uint32_t start, freq;
  const bool listed = point_symbol(find(m), count_, cum_.data(), &start, &freq);
  enc.put(start, freq);
  return listed;
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
  if (walked()) solve(candx_.data() + i * n, m);
  else std::copy_n(cand_.begin() + static_cast<std::ptrdiff_t>(i * n), n, m);
  return true;
}

}  // namespace cepam
