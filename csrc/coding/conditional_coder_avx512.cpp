// The AVX-512 forms of the conditional coder's lane code
// (coding/cell_kernels.hpp): coding/cell_lanes.hpp over the eight-lane
// operations of common/lanes_avx512.hpp, and the decoder of two streams in
// one register.  conditional_coder.cpp calls them where simd_avx512dq().
#include "coding/cell_kernels.hpp"

#include <cstring>

#include "coding/conditional_coder.hpp"
#include "common/cpu.hpp"

#if CEPAM_X86_DISPATCH
// (GCC 12's false warnings off for the whole file: common/cpu.hpp.)
CEPAM_AVX512_WARNINGS_OFF
#include <immintrin.h>

// Everything from here on (cell_lanes.hpp included) is compiled for AVX-512.
CEPAM_TARGET_BEGIN("avx512f,avx512dq,avx512vl")
#include "common/lanes_avx512.hpp"
#include "coding/cell_lanes.hpp"

namespace cepam::cell_kernels::avx512 {

std::size_t encode_run(const CellCoder& cells, const SourceModel& model, const std::int64_t* j,
                       const double* g, const double* o, std::size_t count, AnsEncoder& enc,
                       std::size_t* starts) {
  return cell_lanes::encode_run<simd::Avx512Lanes>(cells, model, j, g, o, count, enc, starts);
}

std::size_t box_tables(const BoxTerms& terms, const std::int64_t* M, const double* V,
                       const double* beta, std::size_t count, std::int64_t* coded, double* g,
                       double* o) {
  using S = simd::Avx512Lanes;
  // (Not for n = 2, A2: there the scalar loop is the faster, 1.06x.)
  switch (terms.n) {
    case 4: return cell_lanes::box_tables<S, 4>(terms, M, V, beta, count, coded, g, o);
    case 8: return cell_lanes::box_tables<S, 8>(terms, M, V, beta, count, coded, g, o);
    default: return 0;
  }
}

namespace {

using S = simd::Avx512Lanes;

// Two 256-bit halves as one register (lanes 0-3 from lo, 4-7 from hi).
inline __m512d halves(const double* lo, const double* hi) {
  return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(lo)), _mm256_loadu_pd(hi), 1);
}
inline __m512i halves(const std::uint64_t* lo, const std::uint64_t* hi) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi));
  return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

// One stream of decode_streams: its batch, its next symbol, its decoder's
// position and words.
struct Stream {
  const CellCoder::Batch* b;
  std::size_t i;  // the batch's next symbol
  std::size_t first;
  AnsDecoder::Cursor c;
  const std::uint8_t* data;
  std::size_t len;

  Stream() = default;
  Stream(const CellCoder::Batch& batch, std::size_t next)
      : b(&batch), i(next), first(next), c(batch.dec->cursor()), data(batch.dec->data()),
        len(batch.dec->size()) {}
  // Whether a group of four symbols can go: four symbols left, and the
  // four words a group may take.
  bool room() const { return i + 4 <= b->count && c.pos + 16 <= len; }
  void close(__m256i x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c.x), x);
    b->dec->resume(c, i - first);
  }
};

// The next group of four symbols of streams s0 (lanes 0-3 of x) and s1
// (lanes 4-7), or none: returns 0 where both went on, else which of the
// two stops them (bit 0 for s0, bit 1 for s1).
// With Fine, the guess reads the model's quantile lines (below).
// (Inlined, so that the registers stay registers.)
template <bool Fine>
[[gnu::always_inline]] inline unsigned step(const CellCoder& cells, const SourceModel& model,
                                            Stream& s0, Stream& s1, __m512i& x) {
  unsigned stop = (s0.room() ? 0u : 1u) | (s1.room() ? 0u : 2u);
  if (stop != 0) return stop;
  const __m512i slot64 = _mm512_and_si512(x, _mm512_set1_epi64(kProbScale - 1));
  const __m256i slot = _mm512_cvtepi64_epi32(slot64);
  const CellCoder::Batch &b0 = *s0.b, &b1 = *s1.b;
  const cell_lanes::Tables<S> t = cell_lanes::layout<S>(model, halves(b0.g + s0.i, b1.g + s1.i),
                                                        halves(b0.o + s0.i, b1.o + s1.i));
  // A table that is not plain, or the escape: the scalar code's.
  const __m256i escape = _mm256_set1_epi32(static_cast<int>(kProbScale - CellCoder::kEscapeFreq));
  const unsigned bad = (~t.plain | _mm256_cmpge_epu32_mask(slot, escape)) & 0xffu;
  if (bad != 0) return ((bad & 0x0fu) != 0 ? 1u : 0u) | ((bad & 0xf0u) != 0 ? 2u : 0u);
  // The model's quantile at the slot's 2^-12 level; with Fine, at the slot
  // itself (cell_lanes::quantile_line), which misses a cell far less often
  // where the cells are narrow against a level, and costs a step's chain a
  // few cycles more.  Then the guess and the exact table
  // (cell_lanes::guess), else the scalar search for the lanes it missed.
  constexpr int kFine = kProbBits - SourceModel::kKnotBits;
  const __m512d u =
      Fine ? cell_lanes::quantile_line<S, cell_lanes::Latency::Any>(model, slot)
           : _mm512_i32gather_pd(_mm256_srli_epi32(slot, kFine), model.quantile_table(), 8);
  __m256i q, start, end;
  const unsigned hit =
      cell_lanes::guess<S, cell_lanes::Latency::Any>(model, t, slot, u, q, start, end);
  if (hit != 0xff) {
    alignas(32) std::uint32_t qs[8], ss[8], st[8], en[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(qs), q);
    _mm256_store_si256(reinterpret_cast<__m256i*>(ss), slot);
    _mm256_store_si256(reinterpret_cast<__m256i*>(st), start);
    _mm256_store_si256(reinterpret_cast<__m256i*>(en), end);
    for (int l = 0; l < 8; ++l) {
      if ((hit >> l) & 1u) continue;
      const Stream& s = l < 4 ? s0 : s1;
      const std::size_t k = s.i + static_cast<std::size_t>(l & 3);
      qs[l] = static_cast<std::uint32_t>(cells.symbol(cells.layout(s.b->g[k], s.b->o[k]), ss[l], st[l], en[l]));
    }
    q = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs));
    start = _mm256_load_si256(reinterpret_cast<const __m256i*>(st));
    end = _mm256_load_si256(reinterpret_cast<const __m256i*>(en));
  }
  // j = lo + q (exact as double: a plain table's cells are below 2^51).
  const __m512i j = _mm512_cvttpd_epi64(_mm512_add_pd(t.lo, _mm512_cvtepi32_pd(q)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(b0.j + s0.i), _mm512_castsi512_si256(j));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(b1.j + s1.i), _mm512_extracti64x4_epi64(j, 1));
  // x = freq (x >> 24) + slot - start (freq (x >> 24) < 2^63, from two
  // 32-bit products), then renormalisation: a lane takes its stream's
  // next word if x < 2^31, the lanes of a stream in order.
  const __m512i freq = _mm512_cvtepu32_epi64(_mm256_sub_epi32(end, start));
  const __m512i hi = _mm512_srli_epi64(x, kProbBits);
  const __m512i prod = _mm512_add_epi64(
      _mm512_mul_epu32(hi, freq), _mm512_slli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(hi, 32), freq), 32));
  x = _mm512_sub_epi64(_mm512_add_epi64(prod, slot64), _mm512_cvtepu32_epi64(start));
  const __mmask8 renorm = _mm512_cmplt_epu64_mask(x, _mm512_set1_epi64(AnsDecoder::kLow));
  const unsigned takes0 = renorm & 0x0fu, takes1 = renorm >> 4;
  const __m128i w0 = _mm_maskz_expandloadu_epi32(static_cast<__mmask8>(takes0), s0.data + s0.c.pos);
  const __m128i w1 = _mm_maskz_expandloadu_epi32(static_cast<__mmask8>(takes1), s1.data + s1.c.pos);
  const __m512i w = _mm512_cvtepu32_epi64(_mm256_inserti128_si256(_mm256_castsi128_si256(w0), w1, 1));
  x = _mm512_mask_or_epi64(x, renorm, _mm512_slli_epi64(x, 32), w);
  s0.c.pos += 4 * static_cast<std::size_t>(__builtin_popcount(takes0));
  s1.c.pos += 4 * static_cast<std::size_t>(__builtin_popcount(takes1));
  s0.i += 4;
  s1.i += 4;
  return 0;
}

// decode_streams for 2 R streams, R registers.
template <int R, bool Fine>
unsigned decode_registers(const CellCoder& cells, const SourceModel& model,
                          const CellCoder::Batch* b, std::size_t* i) {
  static_assert(kStreams == 4, "four states a stream, two streams a register");
  Stream s[2 * R];
  __m512i x[R];
  for (int r = 0; r < R; ++r) {
    s[2 * r] = Stream(b[2 * r], i[2 * r]);
    s[2 * r + 1] = Stream(b[2 * r + 1], i[2 * r + 1]);
    x[r] = halves(s[2 * r].c.x, s[2 * r + 1].c.x);
  }
  // The registers' chains are independent: the processor runs them side
  // by side.
  unsigned stop = 0;
  while (stop == 0)
    for (int r = 0; r < R; ++r)
      stop |= step<Fine>(cells, model, s[2 * r], s[2 * r + 1], x[r]) << (2 * r);
  for (int r = 0; r < R; ++r) {
    s[2 * r].close(_mm512_castsi512_si256(x[r]));
    s[2 * r + 1].close(_mm512_extracti64x4_epi64(x[r], 1));
  }
  for (int k = 0; k < 2 * R; ++k) i[k] = s[k].i;
  return stop;
}

}  // namespace

unsigned decode_streams(const CellCoder& cells, const SourceModel& model,
                        const CellCoder::Batch* b, std::size_t k, std::size_t* i) {
  // The finer guess by the first stream's next table (CellCoder::fine_guess).
  const bool fine = i[0] < b[0].count && CellCoder::fine_guess(model, b[0].g[i[0]]);
  if (k == 4)
    return fine ? decode_registers<2, true>(cells, model, b, i) : decode_registers<2, false>(cells, model, b, i);
  if (k == 2)
    return fine ? decode_registers<1, true>(cells, model, b, i) : decode_registers<1, false>(cells, model, b, i);
  throw InvalidArgument("decode_streams takes 2 or 4 streams");
}

}  // namespace cepam::cell_kernels::avx512

CEPAM_TARGET_END
CEPAM_AVX512_WARNINGS_ON

#endif  // CEPAM_X86_DISPATCH
