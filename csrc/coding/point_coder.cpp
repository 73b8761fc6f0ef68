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

PointCoder::PointCoder(const SourceModel& model, const TriangularBasis& basis) {
  const int n = basis.n;
  if (n < 1 || n > 8) throw InvalidArgument("basis dimension out of range");
  const double* b = basis.b.data();
  double det = 1.0;
  for (int k = 0; k < n; ++k) det *= b[k * n + k];
  double mu, var;
  model.moments(&mu, &var);
  const double r_cap = radius_for(n, det, 0.5 * static_cast<double>(kMaxCandidates));
  bounds_ = PointBounds{std::isfinite(mu) && std::isfinite(var) ? 1 : 0, n, basis.rho, mu, var,
                        r_cap, std::sqrt(static_cast<double>(n))};
  basis_ = PointBasis{};
  basis_.n = n;
  std::copy(b, b + n * n, basis_.b);
  // The bases of D4 and E8 (lattice/root_lattices.hpp) are walked in the
  // coordinates x = G^T m (point_walk_top); any other basis by
  // point_enumerate.
  const auto is_basis = [&](const double* rows) { return std::equal(b, b + n * n, rows); };
  // (The windows need r_cap + 1/2 + 2^-10 <= kWindow + 1: D4 2.40 <= 3, E8
  // 1.79 <= 2.)
  if (n == 4 && is_basis(LatticeD4::basis_rows()) && r_cap + 0.5 + 0x1.0p-10 <= kWindow<4> + 1)
    basis_.walked = 4;
  else if (n == 8 && is_basis(LatticeE8::basis_rows()) && r_cap + 0.5 + 0x1.0p-10 <= kWindow<8> + 1)
    basis_.walked = 8;
  fill_cosets_[0] = fill_cosets_for<4>();
  fill_cosets_[1] = fill_cosets_for<8>();
  for (int k = 0; k < n; ++k) {
    basis_.terms[k] = 0;
    for (int i = k + 1; i < n; ++i)
      if (b[i * n + k] != 0.0) basis_.term_row[k][basis_.terms[k]++] = i;
    const double g = b[k * n + k];
    int e;
    basis_.inv_g[k] = (std::frexp(g, &e) == 0.5) ? 1.0 / g : 0.0;  // exact: g = 2^(e - 1)
  }
  if (basis_.walked != 0) {
    const int most = n == 8 ? kTerms<8> : kTerms<4>;
    for (int k = 0; k < n; ++k) {
      assert(basis_.terms[k] <= most);  // (the D4 and E8 bases: at most kTerms by construction)
      for (int t = 0; t < most; ++t) {
        const bool term = t < basis_.terms[k];
        basis_.pad_row[k][t] = term ? basis_.term_row[k][t] : n;  // m_n: a zero
        basis_.pad_g[k][t] = term ? b[basis_.term_row[k][t] * n + k] : 0.0;
      }
    }
  }
}

bool PointCoder::listed(const std::int64_t* m) const { return point_listed(basis_, table_, m); }

// The table: coding/point_table.hpp's point_prepare (the comment before
// its point_walk says why the D4 and E8 walk finds what the enumeration
// finds), with this processor's forms of the cosets' tables and the ball
// probabilities.
bool PointCoder::prepare(double beta, const double* v) {
  const auto fill = [this](int n, const double* t, Coset* s) {
    fill_cosets_[n == 8 ? 1 : 0](t, s);
  };
  return point_prepare(basis_, bounds_, beta, v, table_, fill, &ball_probabilities);
}

bool PointCoder::encode(const std::int64_t* m, AnsEncoder& enc) const {
  std::uint32_t start, freq;
  const bool listed = point_symbol(point_find(basis_, table_, m), table_.count, table_.cum, &start,
                                   &freq);
  enc.put(start, freq);
  return listed;
}

bool PointCoder::decode(AnsDecoder& dec, std::int64_t* m) const {
  const std::uint32_t s = dec.peek();
  if (s >= kSlots) {
    dec.advance(kSlots, kEscapeFreq);
    return false;
  }
  const std::size_t i = point_index(table_, s);
  dec.advance(table_.cum[i], table_.cum[i + 1] - table_.cum[i]);
  point_candidate(basis_, table_, i, m);
  return true;
}

}  // namespace cepam
