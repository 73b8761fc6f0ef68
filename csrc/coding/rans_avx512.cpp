// The rANS encoder's step for two runs' eight states in one AVX-512
// register (coding/rans_kernels.hpp): rans_encode_step per lane, with the
// division's quotient estimated from a reciprocal.
#include "coding/rans_kernels.hpp"

#include "common/cpu.hpp"
#include "common/errors.hpp"

#if CEPAM_X86_DISPATCH
// (GCC 12's false warnings off for the whole file: common/cpu.hpp.)
CEPAM_AVX512_WARNINGS_OFF
#include <immintrin.h>

CEPAM_TARGET_BEGIN("avx512f,avx512dq,avx512vl")

namespace cepam::rans_kernels::avx512 {
namespace {

static_assert(kStreams == 4 && kProbBits == 24 && kAnsLow == (std::uint64_t{1} << 31),
              "the step below is written for four states of [2^31, 2^63) and 24-bit symbols");

// Two runs a and b in one register, lanes (a3, a2, a1, a0, b3, b2, b1, b0)
// from the lowest: a group's symbols in the order RansRun::group codes
// them, so that the words a group emits, compressed in lane order, come
// out in the scalar order.
inline __m512i load_states(const RansRun::Lanes& a, const RansRun::Lanes& b) {
  return _mm512_set_epi64(static_cast<long long>(b.x[0]), static_cast<long long>(b.x[1]),
                          static_cast<long long>(b.x[2]), static_cast<long long>(b.x[3]),
                          static_cast<long long>(a.x[0]), static_cast<long long>(a.x[1]),
                          static_cast<long long>(a.x[2]), static_cast<long long>(a.x[3]));
}
inline void store_states(__m512i x, RansRun::Lanes& a, RansRun::Lanes& b) {
  alignas(64) std::uint64_t t[8];
  _mm512_store_si512(t, x);
  for (int s = 0; s < kStreams; ++s) {
    a.x[s] = t[3 - s];
    b.x[s] = t[7 - s];
  }
}

// A run's words of one group: the emitting lanes' (bits of `emit`) low
// halves, in lane order, stored at w (four, whatever the count), w advanced.
inline void put_words(__m128i low, unsigned emit, std::uint32_t*& w) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(w), _mm_maskz_compress_epi32(emit, low));
  w += __builtin_popcount(emit);
}

// rans_encode_step for the eight states x, the next group of runs a and b.
//
// The renormalisation is the scalar one: x >= x_max = freq 2^39 emits the
// low word and shifts x by 32.  Then q = floor(x / freq) from an estimate:
// r ~ 1 / freq from the processor's 14-bit reciprocal and two Newton
// steps (relative error under 2^-50), q' = trunc(double(x) r) (2^-32 r
// where the state is shifted: floor(floor(x / 2^32) / freq) = floor(x /
// (2^32 freq)), so the estimate starts from the unshifted x and the shift
// is off its chain), within 2^39 (2^-50 + 2^-52) < 2^-10 of x / freq, so
// q' is floor(x / freq) or one of its neighbours; the remainder x - q'
// freq, in (-freq, 2 freq), is computed modulo 2^32 (exact: freq < 2^24)
// and puts q' right, as in the scalar step.  The new states are those of
// the exact division, whatever the estimate's rounding.
inline __m512i step(__m512i x, RansRun::Lanes& a, RansRun::Lanes& b) {
  a.g -= kStreams;
  b.g -= kStreams;
  const __m512i order = _mm512_set_epi64(8, 9, 10, 11, 0, 1, 2, 3);
  const __m512i sym = _mm512_permutex2var_epi64(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.g))), order,
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.g))));
  const __m512i freq = _mm512_srli_epi64(sym, 32);
  const __m512i start = _mm512_and_si512(sym, _mm512_set1_epi64(0xffffffff));
  const __m512d f = _mm512_cvtepi64_pd(freq);
  const __m512d one = _mm512_set1_pd(1.0);
  __m512d r = _mm512_rcp14_pd(f);
  r = _mm512_fmadd_pd(r, _mm512_fnmadd_pd(f, r, one), r);
  r = _mm512_fmadd_pd(r, _mm512_fnmadd_pd(f, r, one), r);
  // Renormalisation (x < 2^63: signed conversions are exact in range).
  const __mmask8 emit = _mm512_cmpge_epu64_mask(x, _mm512_slli_epi64(freq, 39));
  const __m256i low = _mm512_cvtepi64_epi32(x);
  put_words(_mm256_castsi256_si128(low), emit & 0xfu, a.w);
  put_words(_mm256_extracti128_si256(low, 1), emit >> 4, b.w);
  r = _mm512_mask_mul_pd(r, emit, r, _mm512_set1_pd(0x1.0p-32));
  __m512i q = _mm512_cvttpd_epi64(_mm512_mul_pd(_mm512_cvtepi64_pd(x), r));
  x = _mm512_mask_srli_epi64(x, emit, x, 32);
  // x - q freq modulo 2^32, sign-extended, then q and the remainder put right.
  const __m512i d = _mm512_sub_epi64(x, _mm512_mul_epu32(q, freq));
  __m512i rem = _mm512_srai_epi64(_mm512_slli_epi64(d, 32), 32);
  const __mmask8 below = _mm512_cmplt_epi64_mask(rem, _mm512_setzero_si512());
  const __mmask8 above = _mm512_cmpge_epi64_mask(rem, freq);
  const __m512i ones = _mm512_set1_epi64(1);
  q = _mm512_mask_add_epi64(_mm512_mask_sub_epi64(q, below, q, ones), above, q, ones);
  rem = _mm512_mask_sub_epi64(_mm512_mask_add_epi64(rem, below, rem, freq), above, rem, freq);
  return _mm512_add_epi64(_mm512_add_epi64(_mm512_slli_epi64(q, kProbBits), rem), start);
}

template <int R>  // registers: R pairs of runs
void encode_registers(RansRun::Lanes* runs, std::size_t groups) {
  __m512i x[R];
  for (int p = 0; p < R; ++p) x[p] = load_states(runs[2 * p], runs[2 * p + 1]);
  for (std::size_t i = 0; i < groups; ++i)
    for (int p = 0; p < R; ++p) x[p] = step(x[p], runs[2 * p], runs[2 * p + 1]);
  for (int p = 0; p < R; ++p) store_states(x[p], runs[2 * p], runs[2 * p + 1]);
}

}  // namespace

void encode_groups(RansRun::Lanes* runs, std::size_t k, std::size_t groups) {
  if (k == 4) return encode_registers<2>(runs, groups);
  if (k == 2) return encode_registers<1>(runs, groups);
  throw InvalidArgument("encode_groups takes 2 or 4 runs");
}

}  // namespace cepam::rans_kernels::avx512

CEPAM_TARGET_END
CEPAM_AVX512_WARNINGS_ON

#endif  // CEPAM_X86_DISPATCH
