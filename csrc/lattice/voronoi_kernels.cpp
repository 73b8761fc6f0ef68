// AVX2 forms of the D4 and E8 trial and dither loops (lattice/voronoi_kernels.hpp).
//
// Each mirrors, operation by operation, the scalar code of
// lattice/root_lattices.hpp (closest_dn, LatticeD4 / LatticeE8 ::closest and
// ::parallelepiped, VoronoiLattice::dither and ::trial_batch), four
// sub-vectors at a time; integers are held in doubles, where every value
// involved is an integer (or half-integer) below 2^51 in magnitude and so
// exact, and converted to int64 only at the end (avx2::to_int64).  Zeros
// are made positive (x + 0.0), as the scalar code's integers convert.
#include "lattice/voronoi_kernels.hpp"

#include "common/cpu.hpp"
#include "lrsuq/simd_avx2.hpp"

namespace cepam::kernels {
namespace {

#if CEPAM_X86_DISPATCH

// Rows r0..r3 (four doubles each) become the columns.
CEPAM_TARGET_AVX2 inline void transpose4(__m256d& r0, __m256d& r1, __m256d& r2, __m256d& r3) {
  const __m256d t0 = _mm256_unpacklo_pd(r0, r1);
  const __m256d t1 = _mm256_unpackhi_pd(r0, r1);
  const __m256d t2 = _mm256_unpacklo_pd(r2, r3);
  const __m256d t3 = _mm256_unpackhi_pd(r2, r3);
  r0 = _mm256_permute2f128_pd(t0, t2, 0x20);
  r1 = _mm256_permute2f128_pd(t1, t3, 0x20);
  r2 = _mm256_permute2f128_pd(t0, t2, 0x31);
  r3 = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// out[k], lane l = a[l N + k] for k < N (four sub-vectors of N elements).
template <int N>
CEPAM_TARGET_AVX2 inline void load_lanes(const double* a, __m256d* out) {
  for (int k = 0; k < N; k += 4) {
    __m256d r0 = _mm256_loadu_pd(a + k), r1 = _mm256_loadu_pd(a + N + k),
            r2 = _mm256_loadu_pd(a + 2 * N + k), r3 = _mm256_loadu_pd(a + 3 * N + k);
    transpose4(r0, r1, r2, r3);
    out[k] = r0;
    out[k + 1] = r1;
    out[k + 2] = r2;
    out[k + 3] = r3;
  }
}

// a[l N + k] = lane l of in[k]: the inverse of load_lanes.
template <int N>
CEPAM_TARGET_AVX2 inline void store_lanes(double* a, const __m256d* in) {
  for (int k = 0; k < N; k += 4) {
    __m256d r0 = in[k], r1 = in[k + 1], r2 = in[k + 2], r3 = in[k + 3];
    transpose4(r0, r1, r2, r3);
    _mm256_storeu_pd(a + k, r0);
    _mm256_storeu_pd(a + N + k, r1);
    _mm256_storeu_pd(a + 2 * N + k, r2);
    _mm256_storeu_pd(a + 3 * N + k, r3);
  }
}

CEPAM_TARGET_AVX2 inline __m256d load_words(const std::uint64_t* w) {
  return _mm256_castsi256_pd(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
}

// The words of four sub-vectors as uniform_co values, u[k] lane l =
// uniform_co(w[l N + k]).
template <int N>
CEPAM_TARGET_AVX2 inline void load_uniforms(const std::uint64_t* w, __m256d* u) {
  for (int k = 0; k < N; k += 4) {
    __m256d r0 = load_words(w + k), r1 = load_words(w + N + k),
            r2 = load_words(w + 2 * N + k), r3 = load_words(w + 3 * N + k);
    transpose4(r0, r1, r2, r3);
    u[k] = avx2::uniform_co(_mm256_castpd_si256(r0));
    u[k + 1] = avx2::uniform_co(_mm256_castpd_si256(r1));
    u[k + 2] = avx2::uniform_co(_mm256_castpd_si256(r2));
    u[k + 3] = avx2::uniform_co(_mm256_castpd_si256(r3));
  }
}

CEPAM_TARGET_AVX2 inline __m256d splat(double v) { return _mm256_set1_pd(v); }

// lattice_detail::closest_dn for four lanes: g[k] = the D_N point (as
// doubles), returns the squared distance.
template <int N>
CEPAM_TARGET_AVX2 inline __m256d closest_dn(const __m256d* t, __m256d* g) {
  const __m256d zero = _mm256_setzero_pd(), one = splat(1.0);
  __m256d d2 = zero, worst = splat(-1.0), which = zero;
  __m256i sum = _mm256_setzero_si256();
  __m256d e[N];
  for (int k = 0; k < N; ++k) {
    // round_half_up_i64: floor, plus one where t - floor(t) >= 1/2.
    const __m256d f = _mm256_round_pd(t[k], _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m256d up = _mm256_cmp_pd(_mm256_sub_pd(t[k], f), splat(0.5), _CMP_GE_OQ);
    g[k] = _mm256_add_pd(_mm256_blendv_pd(f, _mm256_add_pd(f, one), up), zero);
    e[k] = _mm256_sub_pd(t[k], g[k]);
    d2 = _mm256_add_pd(d2, _mm256_mul_pd(e[k], e[k]));
    sum = _mm256_add_epi64(sum, avx2::to_int64(g[k]));
    const __m256d a = _mm256_andnot_pd(splat(-0.0), e[k]);
    const __m256d larger = _mm256_cmp_pd(a, worst, _CMP_GT_OQ);
    which = _mm256_blendv_pd(which, splat(static_cast<double>(k)), larger);
    worst = _mm256_blendv_pd(worst, a, larger);
  }
  const __m256i one_i = _mm256_set1_epi64x(1);
  const __m256d odd = _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(sum, one_i), one_i));
  for (int k = 0; k < N; ++k) {
    const __m256d here =
        _mm256_and_pd(odd, _mm256_cmp_pd(which, splat(static_cast<double>(k)), _CMP_EQ_OQ));
    const __m256d step = _mm256_blendv_pd(splat(-1.0), one, _mm256_cmp_pd(e[k], zero, _CMP_GE_OQ));
    g[k] = _mm256_blendv_pd(g[k], _mm256_add_pd(g[k], step), here);
  }
  // d2 + odd (1 - 2 worst)
  const __m256d fix = _mm256_mul_pd(_mm256_and_pd(odd, one),
                                    _mm256_sub_pd(one, _mm256_mul_pd(splat(2.0), worst)));
  return _mm256_add_pd(d2, fix);
}

struct D4Lanes {
  static constexpr int N = 4;
  static constexpr LatticeId id = LatticeId::D4;

  CEPAM_TARGET_AVX2 static void parallelepiped(const __m256d* u, __m256d* p) {
    p[0] = _mm256_add_pd(
        _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(splat(2.0), u[0]), u[1]), u[2]), u[3]);
    p[1] = u[1];
    p[2] = u[2];
    p[3] = u[3];
  }

  // m: basis coordinates (as doubles), p: the point.
  CEPAM_TARGET_AVX2 static void closest(const __m256d* t, __m256d* m, __m256d* p) {
    closest_dn<4>(t, p);
    m[3] = p[3];
    m[2] = p[2];
    m[1] = p[1];
    m[0] = _mm256_mul_pd(_mm256_sub_pd(_mm256_sub_pd(_mm256_sub_pd(p[0], p[1]), p[2]), p[3]),
                         splat(0.5));
  }
};

struct E8Lanes {
  static constexpr int N = 8;
  static constexpr LatticeId id = LatticeId::E8;

  CEPAM_TARGET_AVX2 static void parallelepiped(const __m256d* u, __m256d* p) {
    const __m256d h7 = _mm256_mul_pd(u[7], splat(0.5));
    p[7] = h7;
    p[6] = _mm256_add_pd(u[6], h7);
    for (int k = 1; k <= 5; ++k) p[k] = _mm256_add_pd(_mm256_sub_pd(u[k], u[k + 1]), h7);
    p[0] = _mm256_add_pd(_mm256_sub_pd(_mm256_mul_pd(splat(2.0), u[0]), u[1]), h7);
  }

  CEPAM_TARGET_AVX2 static void closest(const __m256d* t, __m256d* m, __m256d* p) {
    __m256d s[8], g0[8], g1[8], P[8];
    for (int k = 0; k < 8; ++k) s[k] = _mm256_sub_pd(t[k], splat(0.5));
    const __m256d d0 = closest_dn<8>(t, g0);
    const __m256d d1 = closest_dn<8>(s, g1);
    const __m256d c = _mm256_cmp_pd(d1, d0, _CMP_LT_OQ);
    for (int k = 0; k < 8; ++k) {
      // Doubled coordinates P = 2 g0 or 2 g1 + 1; the point P / 2.
      P[k] = _mm256_blendv_pd(_mm256_add_pd(g0[k], g0[k]),
                              _mm256_add_pd(_mm256_add_pd(g1[k], g1[k]), splat(1.0)), c);
      p[k] = _mm256_blendv_pd(g0[k], _mm256_add_pd(g1[k], splat(0.5)), c);
    }
    // m7 = P7; m6 = (P6 - m7) / 2; m_k = (P_k - m7) / 2 + m_{k+1};
    // m0 = ((P0 - m7) / 2 + m1) / 2 (every halving of an even integer).
    const __m256d m7 = P[7];
    m[7] = m7;
    m[6] = _mm256_mul_pd(_mm256_sub_pd(P[6], m7), splat(0.5));
    for (int k = 5; k >= 1; --k)
      m[k] = _mm256_add_pd(_mm256_mul_pd(_mm256_sub_pd(P[k], m7), splat(0.5)), m[k + 1]);
    m[0] = _mm256_mul_pd(
        _mm256_add_pd(_mm256_mul_pd(_mm256_sub_pd(P[0], m7), splat(0.5)), m[1]), splat(0.5));
  }
};

// VoronoiLattice::dither for four sub-vectors: v = p - Q(p), p = G^T u.
template <class L>
CEPAM_TARGET_AVX2 inline void dither_lanes(const std::uint64_t* w, __m256d* v) {
  constexpr int N = L::N;
  __m256d u[N], p[N], m[N], c[N];
  load_uniforms<N>(w, u);
  L::parallelepiped(u, p);
  L::closest(p, m, c);
  for (int k = 0; k < N; ++k) v[k] = _mm256_sub_pd(p[k], c[k]);
}

template <class L>
CEPAM_TARGET_AVX2 std::size_t trial_avx2(const double* t, const double* xs, const double* beta,
                                         const std::uint64_t* w, std::size_t count,
                                         std::int64_t* q, double* dev, double* v_out) {
  constexpr int N = L::N;
  constexpr std::size_t n = static_cast<std::size_t>(N);
  const __m256d limit = splat(0x1.0p46);
  std::size_t c = 0;
  for (; c + 4 <= count; c += 4) {
    const std::size_t e = c * n;
    __m256d tt[N];
    load_lanes<N>(t + e, tt);
    __m256d big = _mm256_setzero_pd();
    for (int k = 0; k < N; ++k) big = _mm256_max_pd(big, _mm256_andnot_pd(splat(-0.0), tt[k]));
    if (_mm256_movemask_pd(_mm256_cmp_pd(big, limit, _CMP_LT_OQ)) != 0xf) break;
    __m256d v[N], s[N], m[N], p[N];
    dither_lanes<L>(w + e, v);
    if (v_out != nullptr) store_lanes<N>(v_out + e, v);
    for (int k = 0; k < N; ++k) s[k] = _mm256_sub_pd(tt[k], v[k]);
    L::closest(s, m, p);
    for (int k = 0; k < N; ++k) m[k] = _mm256_castsi256_pd(avx2::to_int64(m[k]));
    store_lanes<N>(reinterpret_cast<double*>(q + e), m);
    if (dev != nullptr) {
      // beta is repeated per coordinate: one value a sub-vector.
      const __m256d b = _mm256_setr_pd(beta[e], beta[e + n], beta[e + 2 * n], beta[e + 3 * n]);
      __m256d xx[N];
      load_lanes<N>(xs + e, xx);
      for (int k = 0; k < N; ++k) {
        const __m256d d = _mm256_sub_pd(_mm256_mul_pd(b, _mm256_add_pd(p[k], v[k])), xx[k]);
        xx[k] = _mm256_mul_pd(d, d);
      }
      store_lanes<N>(dev + e, xx);
    }
  }
  return c;
}

template <class L>
CEPAM_TARGET_AVX2 std::size_t dither_avx2(const std::uint64_t* w, std::size_t count, double* v) {
  constexpr std::size_t n = static_cast<std::size_t>(L::N);
  std::size_t c = 0;
  for (; c + 4 <= count; c += 4) {
    __m256d out[L::N];
    dither_lanes<L>(w + c * n, out);
    store_lanes<L::N>(v + c * n, out);
  }
  return c;
}

bool use_avx2() { return simd_level() >= SimdLevel::Avx2; }

#endif  // CEPAM_X86_DISPATCH

}  // namespace

std::size_t voronoi_trial(LatticeId id, const double* t, const double* xs, const double* beta,
                          const std::uint64_t* w, std::size_t count, std::int64_t* q,
                          double* dev, double* v_out) {
#if CEPAM_X86_DISPATCH
  if (use_avx2()) {
    if (id == LatticeId::E8) return trial_avx2<E8Lanes>(t, xs, beta, w, count, q, dev, v_out);
    if (id == LatticeId::D4) return trial_avx2<D4Lanes>(t, xs, beta, w, count, q, dev, v_out);
  }
#else
  (void)id, (void)t, (void)xs, (void)beta, (void)w, (void)count, (void)q, (void)dev,
      (void)v_out;
#endif
  return 0;
}

std::size_t voronoi_dither(LatticeId id, const std::uint64_t* w, std::size_t count, double* v) {
#if CEPAM_X86_DISPATCH
  if (use_avx2()) {
    if (id == LatticeId::E8) return dither_avx2<E8Lanes>(w, count, v);
    if (id == LatticeId::D4) return dither_avx2<D4Lanes>(w, count, v);
  }
#else
  (void)id, (void)w, (void)count, (void)v;
#endif
  return 0;
}

}  // namespace cepam::kernels
