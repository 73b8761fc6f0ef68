#include "coding/conditional_coder.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "coding/cell_kernels.hpp"
#include "common/cpu.hpp"
#include "common/simd_avx2.hpp"

#if CEPAM_X86_DISPATCH
// The lane code (coding/cell_lanes.hpp over common/lanes_avx2.hpp), compiled
// for AVX2; the AVX-512 forms are in conditional_coder_avx512.cpp.
CEPAM_TARGET_BEGIN("avx2")
#include "common/lanes_avx2.hpp"
#include "coding/cell_lanes.hpp"
CEPAM_TARGET_END
#elif CEPAM_ARM_NEON
// The same lane code over NEON's two lanes (the encoder's runs).
#include "common/lanes_neon.hpp"
#include "coding/cell_lanes.hpp"
#endif

namespace cepam {
namespace {

constexpr std::uint32_t kEscapeFreq = CellCoder::kEscapeFreq;


// Throws a decoder's error (FormatError, in read_message's words).
void throw_unless_ok(ReadStatus st) {
  if (st != kReadOk) throw FormatError(read_message(st));
}

// CellCoder::decode_box's batch: the coordinates of up to kBatch / n
// sub-vectors in coding order (coordinate i at coding position c[i] is
// element i - c + (n - 1 - c) of out, written at the end), with what their tables need ahead:
// g = beta G_kk, the sub-vector's beta, V_k, and the guess's terms.  The
// guess y = p0 + u p1 - sum_{i>k} m_i G_ik / G_kk, for the model's
// quantile u (in grid cells), is the table's guess z_lo + 1/2 + u (z_hi -
// z_lo) / kCells (CellCoder::guess, z = (+-A - o) / g) without its
// divisions: with r = 1 / g, p0 = -A r - V_k / G_kk (less 1/2: y is
// rounded to nearest, BoxBasis::guess_near) and p1 = 2 A r / kCells; the
// check that the guess is a cell of the table rejects any value that is
// not (non-finite ones included).  md holds the decoded
// coordinates (doubles, exact: |m| <= 2^53), those above coordinate i
// being final when it is decoded.
struct BoxRun {
  static constexpr std::size_t kBatch = 256;

  const CellCoder& cells;
  const SourceModel& model;
  const BoxBasis& basis;
  std::int64_t* out = nullptr;
  alignas(32) double g[kBatch];
  alignas(32) double beta[kBatch];
  alignas(32) double v[kBatch];
  alignas(32) double p0[kBatch];
  alignas(32) double p1[kBatch];
  alignas(32) double md[kBatch];
  int c[kBatch];

  BoxRun(const CellCoder& cells_, const SourceModel& model_, const BoxBasis& basis_)
      : cells(cells_), model(model_), basis(basis_) {}

  // The tables of sub-vectors [0, count) of beta_ and V.
  void tables(const double* beta_, const double* V, std::size_t count, std::int64_t* out_) {
    const int n = basis.n();
    out = out_;
#if CEPAM_X86_DISPATCH
    if ((n == 4 || n == 8) && simd_level() >= SimdLevel::Avx2) return tables_avx2(beta_, V, count);
#endif
    const double a = model.range();
    for (std::size_t j = 0, i = 0; j < count; ++j) {
      const double b = beta_[j], inv_beta = 1.0 / b;
      for (int p = 0; p < n; ++p, ++i) {
        const double r = inv_beta * basis.inv_diagonal(p);
        g[i] = b * basis.diagonal(p);
        beta[i] = b;
        v[i] = V[j * static_cast<std::size_t>(n) + static_cast<std::size_t>(n - 1 - p)];
        p0[i] = -a * r - v[i] * basis.inv_diagonal(p);
        p1[i] = (2.0 * a / SourceModel::kCells) * r;
        c[i] = p;
      }
    }
  }
#if CEPAM_X86_DISPATCH
  // tables for D4 and E8 (n = 4, 8): the same operations, a row's four
  // coordinates a register (the dither's, reversed, by a permutation).
  CEPAM_TARGET_AVX2 void tables_avx2(const double* beta_, const double* V, std::size_t count) {
    const std::size_t n = static_cast<std::size_t>(basis.n());
    const double a = model.range();
    const __m256d minus_a = _mm256_set1_pd(-a);
    const __m256d width = _mm256_set1_pd(2.0 * a / SourceModel::kCells);
    __m256d diag[2], inv[2];
    __m128i pos[2];  // the coding positions
    for (std::size_t h = 0; h < n / 4; ++h) {
      const int k = 4 * static_cast<int>(h);
      diag[h] = _mm256_setr_pd(basis.diagonal(k), basis.diagonal(k + 1), basis.diagonal(k + 2),
                               basis.diagonal(k + 3));
      inv[h] = _mm256_setr_pd(basis.inv_diagonal(k), basis.inv_diagonal(k + 1),
                              basis.inv_diagonal(k + 2), basis.inv_diagonal(k + 3));
      pos[h] = _mm_setr_epi32(k, k + 1, k + 2, k + 3);
    }
    for (std::size_t j = 0, i = 0; j < count; ++j) {
      const double b = beta_[j];
      const __m256d bb = _mm256_set1_pd(b), inv_beta = _mm256_set1_pd(1.0 / b);
      for (std::size_t h = 0; h < n / 4; ++h, i += 4) {
        // v = the dither's coordinates n - 1 - p, p = 4 h .. 4 h + 3.
        const __m256d vv = _mm256_permute4x64_pd(_mm256_loadu_pd(V + (i + n - 4 - 8 * h)), 0x1b);
        const __m256d r = _mm256_mul_pd(inv_beta, inv[h]);
        _mm256_store_pd(g + i, _mm256_mul_pd(bb, diag[h]));
        _mm256_store_pd(beta + i, bb);
        _mm256_store_pd(v + i, vv);
        _mm256_store_pd(p0 + i, _mm256_sub_pd(_mm256_mul_pd(minus_a, r), _mm256_mul_pd(vv, inv[h])));
        _mm256_store_pd(p1 + i, _mm256_mul_pd(width, r));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i), pos[h]);
      }
    }
  }
#endif
  double above(std::size_t i, int d) const { return md[i - static_cast<std::size_t>(d)]; }
  double offset(std::size_t i) const {
    return basis.offset(c[i], beta[i], v[i], [&](int d) { return above(i, d); });
  }
  // The guess of coordinate i, from p0 + u p1.
  double guess(std::size_t i, double y) const {
    return basis.guess_near<0>(c[i], y, nullptr, [&](int d) { return above(i, d); });
  }
  void store(std::size_t i, double m) { md[i] = m; }
  // Writes the batch's `count` coordinates to out (all decoded: exact
  // integers of at most 2^53).
  void write(std::size_t count) const {
    const std::size_t n = static_cast<std::size_t>(basis.n());
    for (std::size_t j = 0; j < count; j += n)
      for (std::size_t p = 0; p < n; ++p) out[j + n - 1 - p] = static_cast<std::int64_t>(md[j + p]);
  }
  // CellCoder::decode of coordinate i.
  void decode(std::size_t i, AnsDecoder& dec) {
    store(i, static_cast<double>(cells.decode(cells.layout(g[i], offset(i)), dec)));
  }
  // CellCoder::lookup of coordinate i at slot s (and the coordinate
  // stored), from the guess: false for the escape slot or a coarse table.
  bool lookup(std::size_t i, std::uint32_t s, std::uint32_t& start, std::uint32_t& freq) {
    if (s >= kProbScale - kEscapeFreq) return false;
    double m = guess(i, p0[i] + model.quantile_cells(s >> (kProbBits - SourceModel::kKnotBits)) * p1[i]);
    const CellCoder::Layout l = cells.layout(g[i], offset(i));
    if (l.shift > 0) return false;
    std::uint32_t end;
    // A guess in cell lo + q, 0 < q < count - 1 (cum_at's range for q and
    // q + 1): m and m + 1 are then the cells as doubles.  (A guess is an
    // integer, or far out, or not finite; the check makes sure of it.)
    bool hit = m >= static_cast<double>(l.lo + 1) && m <= static_cast<double>(l.hi - 1);
    const std::int64_t q = hit ? static_cast<std::int64_t>(m) - l.lo : 0;
    hit = hit && static_cast<double>(l.lo + q) == m;
    if (hit) {
      start = cells.cum_at(l, m - 0.5, q);
      end = cells.cum_at(l, (m + 1.0) - 0.5, q + 1);
      hit = start <= s && s < end;
    }
    if (!hit) m = static_cast<double>(l.lo + cells.symbol(l, s, start, end));
    store(i, m);
    freq = end - start;
    return true;
  }
};

#if CEPAM_X86_DISPATCH

// CellCoder's tables for four coordinates, one a lane (coding/cell_lanes.hpp
// over AVX2's four lanes).
using Avx2 = simd::Avx2Lanes;
using Tables4 = cell_lanes::Tables<Avx2>;
using cell_lanes::Latency;

// The low 32-bit halves of four 64-bit lanes.
CEPAM_TARGET_AVX2 inline __m128i low_halves(__m256i v) {
  return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
}

// table[i_l] for four 64-bit indices, with four loads.
CEPAM_TARGET_AVX2 inline __m256d lookup4(const double* table, __m256i i) {
  alignas(32) std::int64_t k[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(k), i);
  return _mm256_setr_pd(table[k[0]], table[k[1]], table[k[2]], table[k[3]]);
}

// table[i_l] for the four lanes, from a table of 32-bit or smaller integers.
template <class T>
CEPAM_TARGET_AVX2 inline __m128i lookup4i(const T* table, __m128i i) {
  alignas(16) std::int32_t k[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(k), i);
  return _mm_setr_epi32(static_cast<std::int32_t>(table[k[0]]), static_cast<std::int32_t>(table[k[1]]),
                        static_cast<std::int32_t>(table[k[2]]), static_cast<std::int32_t>(table[k[3]]));
}

// Whether any of four slots is the escape's.
CEPAM_TARGET_AVX2 inline bool any_escape(__m128i slot) {
  const __m128i escape = _mm_cmpeq_epi32(
      slot, _mm_set1_epi32(static_cast<int>(kProbScale - CellCoder::kEscapeFreq)));
  return _mm_movemask_epi8(escape) != 0;
}

// CellCoder::encode_batch's runs of four (cell_lanes::encode_run).
CEPAM_TARGET_AVX2 std::size_t encode_run_avx2(const CellCoder& cells, const SourceModel& model,
                                              const std::int64_t* j, const double* g,
                                              const double* o, std::size_t count,
                                              AnsEncoder& enc, std::size_t* starts) {
  return cell_lanes::encode_run<Avx2>(cells, model, j, g, o, count, enc, starts);
}

// kWordIndex[k]: for renormalisation in decode_groups_avx2, where bit t of k
// says that lane t takes a word: the 32-bit index, among the next four
// words, of lane t's word (the number of lanes before t that take one).
constexpr std::array<std::array<std::int32_t, 8>, 16> word_index() {
  std::array<std::array<std::int32_t, 8>, 16> table{};
  for (int k = 0; k < 16; ++k) {
    int before = 0;
    for (int t = 0; t < 4; ++t) {
      table[k][2 * t] = table[k][2 * t + 1] = before;
      before += (k >> t) & 1;
    }
  }
  return table;
}
alignas(32) constexpr std::array<std::array<std::int32_t, 8>, 16> kWordIndex = word_index();

// One rANS stream decoded in groups of four symbols, one per state
// (AnsDecoder's lanes, rotated so that lane t of x is the state of the
// group's t-th symbol), with AnsDecoder::advance's state changes, in
// registers: step(group) decodes the next group while four words remain,
// where group(k, slots, start, end) gives the intervals [start, end) of
// group k's symbols (k counting from the cursor's start), whose slots are
// `slots` (in 64-bit lanes), and stores the values, or returns false to
// stop before group k.  close() hands the position back to the decoder.
struct GroupCursor {
  AnsDecoder& dec;
  const std::uint8_t* data;
  std::size_t len, pos;
  __m256i x;
  std::size_t groups = 0;  // decoded so far

  CEPAM_TARGET_AVX2 explicit GroupCursor(AnsDecoder& d) : dec(d), data(d.data()), len(d.size()) {
    static_assert(kStreams == 4, "one state per lane");
    const AnsDecoder::Cursor c = d.cursor();
    x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.x));
    pos = c.pos;
  }

  template <class Group>
  CEPAM_TARGET_AVX2 bool step(Group& group) {
    if (pos + 16 > len) return false;
    const __m256i slot64 = _mm256_and_si256(x, _mm256_set1_epi64x(kProbScale - 1));
    __m128i start, end;
    if (!group(groups, slot64, start, end)) return false;
    // x = freq (x >> 24) + slot - start (freq (x >> 24) < 2^63, from two
    // 32-bit products), then renormalisation: lane t takes the next word
    // if x < 2^31, the lanes in order.
    const __m256i freq = _mm256_cvtepu32_epi64(_mm_sub_epi32(end, start));
    const __m256i hi = _mm256_srli_epi64(x, kProbBits);
    const __m256i prod = _mm256_add_epi64(
        _mm256_mul_epu32(hi, freq), _mm256_slli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(hi, 32), freq), 32));
    x = _mm256_sub_epi64(_mm256_add_epi64(prod, slot64), _mm256_cvtepu32_epi64(start));
    const __m256i renorm = _mm256_cmpgt_epi64(_mm256_set1_epi64x(AnsDecoder::kLow), x);  // x < 2^63
    const int takes = _mm256_movemask_pd(_mm256_castsi256_pd(renorm));
    const __m256i words = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + pos)));
    const __m256i w = _mm256_and_si256(
        _mm256_permutevar8x32_epi32(words, _mm256_load_si256(reinterpret_cast<const __m256i*>(kWordIndex[takes].data()))),
        _mm256_set1_epi64x(0xffffffff));
    x = _mm256_blendv_epi8(x, _mm256_or_si256(_mm256_slli_epi64(x, 32), w), renorm);
    pos += 4 * static_cast<std::size_t>(__builtin_popcount(static_cast<unsigned>(takes)));
    ++groups;
    return true;
  }

  CEPAM_TARGET_AVX2 void close() {
    AnsDecoder::Cursor c;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c.x), x);
    c.pos = pos;
    dec.resume(c, 4 * groups);
  }
};

// Decodes up to `groups` groups of four symbols (GroupCursor::step with
// `group`); returns the number decoded.
template <class Group>
CEPAM_TARGET_AVX2 std::size_t decode_groups_avx2(AnsDecoder& dec, std::size_t groups, Group& group) {
  GroupCursor cursor(dec);
  while (cursor.groups < groups && cursor.step(group)) {
  }
  cursor.close();
  return cursor.groups;
}

// CellCoder::decode for the groups of coordinates (g[i], o[i]) into j[i],
// while every table of the group is plain and no slot is the escape.  A
// wrong guess is put right by the scalar search.  L: the table lookups on
// the decoder's serial chain (Latency::Low for one stream alone; with two
// streams interleaved, each hides the other's latency, and the gathers'
// fewer instructions win).
template <Latency L>
struct CellGroups {
  const CellCoder& cells;
  const SourceModel& model;
  const double* g;
  const double* o;
  std::int64_t* j;
  // The finer guess (CellCoder::fine_guess, by the run's first table): at
  // rms/sigma 100 the plain one missed 6.5 % of a lone stream's groups of
  // four, each miss a scalar search (m = 10^5, one segment: decode 1.11x
  // faster with it).
  bool fine = false;

  CEPAM_TARGET_AVX2 bool operator()(std::size_t k, __m256i slot64, __m128i& start,
                                    __m128i& end) const {
    const std::size_t i = 4 * k;
    const __m128i slot = low_halves(slot64);
    const Tables4 t = cell_lanes::layout<Avx2>(model, _mm256_loadu_pd(g + i), _mm256_loadu_pd(o + i));
    if (t.plain != 0xf || any_escape(slot)) return false;
    // The guess from the model's quantile table (four loads; with fine, at
    // the slot itself, as the AVX-512 decoder does:
    // cell_lanes::quantile_line), then the exact table
    // (cell_lanes::guess), else the scalar search.
    constexpr int kFine = kProbBits - SourceModel::kKnotBits;
    const __m256d u = fine ? cell_lanes::quantile_line<Avx2, L>(model, slot)
                           : lookup4(model.quantile_table(), _mm256_srli_epi64(slot64, kFine));
    __m128i q;
    if (cell_lanes::guess<Avx2, L>(model, t, slot, u, q, start, end) != 0xf) {
      alignas(16) std::uint32_t qs[4], ss[4], st[4], en[4];
      _mm_store_si128(reinterpret_cast<__m128i*>(qs), q);
      _mm_store_si128(reinterpret_cast<__m128i*>(ss), slot);
      _mm_store_si128(reinterpret_cast<__m128i*>(st), start);
      _mm_store_si128(reinterpret_cast<__m128i*>(en), end);
      for (int l = 0; l < 4; ++l)
        qs[l] = static_cast<std::uint32_t>(cells.symbol(cells.layout(g[i + l], o[i + l]), ss[l], st[l], en[l]));
      q = _mm_load_si128(reinterpret_cast<const __m128i*>(qs));
      start = _mm_load_si128(reinterpret_cast<const __m128i*>(st));
      end = _mm_load_si128(reinterpret_cast<const __m128i*>(en));
    }
    // j = lo + q (exact as double: a plain table's cells are below 2^51).
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(j + i),
                        avx2::to_int64(_mm256_add_pd(t.lo, _mm256_cvtepi32_pd(q))));
    return true;
  }
};

// CellCoder::decode_box's groups of four coordinates from coordinate i0 of
// a BoxRun: each coordinate guessed (BoxRun::guess, from the guesses of
// those before it), then the four tables (cell_lanes::layout), exact given the
// guesses, and the check that each guess is a cell of its table (0 < q <
// Q - 1, cell_lanes::cum's range) whose interval holds its slot.  Where one is not,
// the four coordinates are decoded again one by one (CellCoder::symbol,
// as in BoxRun::lookup), or the run stops (escape slot, coarse table).
struct BoxGroups {
  BoxRun& run;
  std::size_t i0;

  CEPAM_TARGET_AVX2 bool operator()(std::size_t k, __m256i slot64, __m128i& start,
                                    __m128i& end) const {
    const std::size_t i = i0 + 4 * k;
    const SourceModel& model = run.model;
    const __m128i slot = low_halves(slot64);
    if (any_escape(slot)) return false;
    // The guesses and tables of the four, in registers (a vector loaded
    // from four scalar stores would wait for them to retire): near[]
    // holds the group's guesses before lane l, most recent first
    // (BoxBasis::offset_near).
    alignas(32) std::uint64_t level[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(level),
                       _mm256_srli_epi64(slot64, kProbBits - SourceModel::kKnotBits));
    double near[4] = {0.0, 0.0, 0.0, 0.0};
    double o[4];
    const auto lane = [&](auto L) {
      constexpr int l = decltype(L)::value;
      const std::size_t at = i + l;
      const BoxBasis& b = run.basis;
      const int c = run.c[at];
      const auto far = [&](int d) { return run.above(at, d); };
      o[l] = b.offset_near<l>(c, run.beta[at], run.v[at], near, far);
      const double y = run.p0[at] + model.quantile_cells(static_cast<std::uint32_t>(level[l])) * run.p1[at];
      const double m = b.guess_near<l>(c, y, near, far);
      run.md[at] = m;
      near[3] = near[2];
      near[2] = near[1];
      near[1] = near[0];
      near[0] = m;
    };
    lane(std::integral_constant<int, 0>{});
    lane(std::integral_constant<int, 1>{});
    lane(std::integral_constant<int, 2>{});
    lane(std::integral_constant<int, 3>{});
    const Tables4 t = cell_lanes::layout<Avx2>(model, _mm256_loadu_pd(run.g + i), _mm256_setr_pd(o[0], o[1], o[2], o[3]));
    const __m256d m = _mm256_setr_pd(near[3], near[2], near[1], near[0]);
    // Inside: an integer m (see BoxRun::lookup) in cells lo + 1 .. lo + Q - 2.
    const __m256d q_d = _mm256_sub_pd(m, t.lo);
    const __m256d inside = _mm256_and_pd(
        cell_lanes::inside<Avx2>(t, q_d),
        _mm256_cmp_pd(_mm256_round_pd(m, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), m, _CMP_EQ_OQ));
    const __m128i q = _mm256_cvttpd_epi32(q_d);
    cell_lanes::interval<Avx2, Latency::Low>(model, t, q, _mm256_sub_pd(m, avx2::splat(0.5)), start, end);
    const __m128i hit = _mm_andnot_si128(_mm_cmpgt_epi32(start, slot), _mm_cmpgt_epi32(end, slot));
    if (t.plain == 0xf && _mm256_movemask_pd(inside) == 0xf && _mm_movemask_epi8(hit) == 0xffff)
      return true;
    alignas(16) std::uint32_t ss[4], st[4], en[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(ss), slot);
    for (std::size_t l = 0; l < 4; ++l) {
      const CellCoder::Layout lt = run.cells.layout(run.g[i + l], run.offset(i + l));
      if (lt.shift > 0) return false;
      run.store(i + l, static_cast<double>(lt.lo + run.cells.symbol(lt, ss[l], st[l], en[l])));
    }
    start = _mm_load_si128(reinterpret_cast<const __m128i*>(st));
    end = _mm_load_si128(reinterpret_cast<const __m128i*>(en));
    return true;
  }
};

// Decodes `count` symbols: groups of four (decode_groups_avx2 with
// group_at(i), the Group for the symbols from i) where they go, and one
// symbol the scalar way, one(i), where they stop.
template <class GroupAt, class One>
CEPAM_TARGET_AVX2 void decode_in_groups(AnsDecoder& dec, std::size_t count, GroupAt&& group_at,
                                        One&& one) {
  for (std::size_t i = 0; i < count;) {
    auto group = group_at(i);
    i += 4 * decode_groups_avx2(dec, (count - i) / 4, group);
    if (i < count) one(i++);
  }
}

// decode_in_groups for two streams at once (two segments of a body): the
// same symbols, with the two serial chains of the symbols' decoding
// interleaved, so that each runs while the other waits on its latency.
// Where one stream stops (a group that is not plain, or its last few
// symbols), it takes one symbol the scalar way and the pair goes on; once
// one stream is done, the other finishes alone.
template <class GroupAt0, class One0, class GroupAt1, class One1>
CEPAM_TARGET_AVX2 void decode_in_groups_pair(AnsDecoder& dec0, std::size_t count0,
                                             GroupAt0&& group_at0, One0&& one0,
                                             AnsDecoder& dec1, std::size_t count1,
                                             GroupAt1&& group_at1, One1&& one1) {
  std::size_t i0 = 0, i1 = 0;
  while (i0 < count0 && i1 < count1) {
    auto group0 = group_at0(i0);
    auto group1 = group_at1(i1);
    const std::size_t whole0 = (count0 - i0) / 4, whole1 = (count1 - i1) / 4;
    GroupCursor c0(dec0), c1(dec1);
    bool more0 = true, more1 = true;
    while (more0 && more1) {
      more0 = c0.groups < whole0 && c0.step(group0);
      more1 = c1.groups < whole1 && c1.step(group1);
    }
    c0.close();
    c1.close();
    i0 += 4 * c0.groups;
    i1 += 4 * c1.groups;
    if (!more0 && i0 < count0) one0(i0++);
    if (!more1 && i1 < count1) one1(i1++);
  }
  decode_in_groups(dec0, count0 - i0, [&](std::size_t i) { return group_at0(i0 + i); },
                   [&](std::size_t i) { one0(i0 + i); });
  decode_in_groups(dec1, count1 - i1, [&](std::size_t i) { return group_at1(i1 + i); },
                   [&](std::size_t i) { one1(i1 + i); });
}

bool use_avx2() { return simd_level() >= SimdLevel::Avx2; }

#endif  // CEPAM_X86_DISPATCH

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

std::uint32_t GeometricCoder::decode(AnsDecoder& dec) const {
  if (!coded_) return 1;
  std::uint32_t h, start, freq;
  if (lookup(dec.peek(), h, start, freq)) {
    dec.advance(start, freq);
    return h;
  }
  throw_unless_ok(geometric_escape(cum_, dec, &h));  // (shared with a GPU's decoder)
  return h;
}

void GeometricCoder::decode_batch(std::size_t count, AnsDecoder& dec, std::uint32_t* H) const {
  if (!coded_) {
    std::fill_n(H, count, 1u);
    return;
  }
#if CEPAM_X86_DISPATCH
  if (use_avx2()) {
    // lookup() for four symbols: the guide's index, moved up while
    // cum(i + 1) <= slot (at most kTable steps, as slot < cum_[kTable]).
    struct Groups {
      const GeometricCoder& coder;
      std::uint32_t* H;
      CEPAM_TARGET_AVX2 bool operator()(std::size_t k, __m256i slot64, __m128i& start,
                                        __m128i& end) const {
        const __m128i slot = low_halves(slot64);
        const std::uint32_t* cum = coder.cum_;
        if (_mm_movemask_epi8(_mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(cum[kTable])), slot)) != 0xffff)
          return false;  // an escape
        __m128i i = lookup4i(coder.guide_, _mm_srli_epi32(slot, kProbBits - kGuideBits));
        end = lookup4i(cum + 1, i);
        for (__m128i up; _mm_movemask_epi8(up = _mm_cmpgt_epi32(end, slot)) != 0xffff;) {
          i = _mm_sub_epi32(i, _mm_xor_si128(up, _mm_set1_epi32(-1)));  // + 1 where end <= slot
          end = lookup4i(cum + 1, i);
        }
        start = lookup4i(cum, i);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(H + 4 * k), _mm_add_epi32(i, _mm_set1_epi32(1)));
        return true;
      }
    };
    decode_in_groups(
        dec, count, [&](std::size_t i) { return Groups{*this, H + i}; },
        [&](std::size_t i) { H[i] = decode(dec); });
    return;
  }
#endif
  dec.decode_each(
      count,
      [&](std::size_t i, std::uint32_t s, std::uint32_t& start, std::uint32_t& freq) {
        return lookup(s, H[i], start, freq);
      },
      [&](std::size_t i) { H[i] = decode(dec); });
}

std::int64_t CellCoder::decode_rare(const Layout& l, AnsDecoder& dec) const {
  // The escape and the value raw, or a coarse symbol and the offset inside
  // it: symbol_core.hpp's cell_decode, shared with a GPU's decoder.
  std::int64_t j = 0;
  throw_unless_ok(cell_decode(cdf_, model_.quantile_table(), l, dec, &j));
  return j;
}

BoxBasis::BoxBasis(const TriangularBasis& basis) : n_(basis.n) {
  if (n_ < 1 || n_ > kMaxN) throw InvalidArgument("basis dimension too large");
  terms_ = box_terms(n_, basis.b.data());
  for (int c = 0; c < n_; ++c) {
    const int k = n_ - 1 - c;
    const double gkk = terms_.diag[c];
    inv_diag_[c] = 1.0 / gkk;
    for (int d = 1; d <= kNear; ++d) {
      const double gik = k + d < n_ ? basis.b[static_cast<std::size_t>((k + d) * n_ + k)] : 0.0;
      near_coef_[c][d - 1] = gik;
      const double ratio = gik / gkk;
      near_ratio_[c][d - 1] = ratio;
      near_kind_[c][d - 1] = ratio == 0.0                              ? kZero
                             : std::abs(ratio) < 0x1.0p40 && std::floor(ratio) == ratio ? kWhole
                                                                       : kFraction;
    }
    for (int t = terms_.first[c]; t < terms_.first[c + 1]; ++t) ratio_[t] = terms_.coef[t] / gkk;
    for (int near = 0; near <= kNear; ++near) {
      far_[c][near] = terms_.first[c];
      while (far_[c][near] < terms_.first[c + 1] && terms_.dist[far_[c][near]] <= near)
        ++far_[c][near];
    }
  }
}

void CellCoder::decode_box(const BoxBasis& basis, std::size_t count, const double* beta,
                           const double* V, AnsDecoder& dec, std::int64_t* M) const {
  if (count == 0) return;
  const std::size_t n = static_cast<std::size_t>(basis.n());
  const std::size_t per = BoxRun::kBatch / n;  // sub-vectors a batch
  BoxRun run(*this, model_, basis);
  for (std::size_t j0 = 0; j0 < count; j0 += per) {
    const std::size_t j1 = count - j0 < per ? count : j0 + per;
    run.tables(beta + j0, V + j0 * n, j1 - j0, M + j0 * n);
    const std::size_t coords = (j1 - j0) * n;
#if CEPAM_X86_DISPATCH
    if (use_avx2()) {
      decode_in_groups(
          dec, coords, [&](std::size_t i) { return BoxGroups{run, i}; },
          [&](std::size_t i) { run.decode(i, dec); });
    } else
#endif
    {
      dec.decode_each(
          coords,
          [&](std::size_t i, std::uint32_t s, std::uint32_t& start, std::uint32_t& freq) {
            return run.lookup(i, s, start, freq);
          },
          [&](std::size_t i) { run.decode(i, dec); });
    }
    run.write(coords);
  }
}

void CellCoder::decode_boxes(const BoxBasis& basis, const BoxBlock& b0, const BoxBlock& b1) const {
#if CEPAM_X86_DISPATCH
  if (use_avx2()) {
    const std::size_t n = static_cast<std::size_t>(basis.n());
    const std::size_t per = BoxRun::kBatch / n;  // sub-vectors a batch
    BoxRun r0(*this, model_, basis), r1(*this, model_, basis);
    for (std::size_t j0 = 0, k0 = 0; j0 < b0.count || k0 < b1.count;) {
      const std::size_t j1 = b0.count - j0 < per ? b0.count : j0 + per;
      const std::size_t k1 = b1.count - k0 < per ? b1.count : k0 + per;
      r0.tables(b0.beta + j0, b0.V + j0 * n, j1 - j0, b0.M + j0 * n);
      r1.tables(b1.beta + k0, b1.V + k0 * n, k1 - k0, b1.M + k0 * n);
      const std::size_t c0 = (j1 - j0) * n, c1 = (k1 - k0) * n;
      decode_in_groups_pair(
          *b0.dec, c0, [&](std::size_t i) { return BoxGroups{r0, i}; },
          [&](std::size_t i) { r0.decode(i, *b0.dec); }, *b1.dec, c1,
          [&](std::size_t i) { return BoxGroups{r1, i}; }, [&](std::size_t i) { r1.decode(i, *b1.dec); });
      r0.write(c0);
      r1.write(c1);
      j0 = j1;
      k0 = k1;
    }
    return;
  }
#endif
  decode_box(basis, b0.count, b0.beta, b0.V, *b0.dec, b0.M);
  decode_box(basis, b1.count, b1.beta, b1.V, *b1.dec, b1.M);
}

void BoxBasis::tables(const std::int64_t* M, const double* V, const double* beta,
                      std::size_t count, std::int64_t* coded, double* g, double* o) const {
  const std::size_t n = static_cast<std::size_t>(n_);
  std::size_t j = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) j = cell_kernels::avx512::box_tables(terms_, M, V, beta, count, coded, g, o);
#endif
  for (std::size_t i = j * n; j < count; ++j) {
    const std::int64_t* m = M + j * n;
    for (std::size_t c = 0; c < n; ++c, ++i) {
      const std::size_t k = n - 1 - c;
      coded[i] = m[k];
      g[i] = beta[j] * terms_.diag[c];
      o[i] = offset(static_cast<int>(c), beta[j], V[j * n + k],
                    [&](int d) { return static_cast<double>(m[k + static_cast<std::size_t>(d)]); });
    }
  }
}

void CellCoder::encode_batch(const std::int64_t* j, const double* g, const double* o,
                             std::size_t count, AnsEncoder& enc, std::size_t* starts) const {
  std::size_t i = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) i = cell_kernels::avx512::encode_run(*this, model_, j, g, o, count, enc, starts);
  else if (use_avx2()) i = encode_run_avx2(*this, model_, j, g, o, count, enc, starts);
#elif CEPAM_ARM_NEON
  if (simd_level() >= SimdLevel::Neon)
    i = cell_lanes::encode_run<simd::NeonLanes>(*this, model_, j, g, o, count, enc, starts);
#endif
  for (; i < count; ++i) {
    if (starts != nullptr) starts[i] = enc.symbols();
    encode(j[i], layout(g[i], o[i]), enc);
  }
}

void CellCoder::decode_batch(const double* g, const double* o, std::size_t count,
                             AnsDecoder& dec, std::int64_t* j) const {
#if CEPAM_X86_DISPATCH
  if (use_avx2()) {
    decode_in_groups(
        dec, count, [&](std::size_t i) {
          return CellGroups<Latency::Low>{*this, model_, g + i, o + i, j + i,
                                          fine_guess(model_, g[i])};
        },
        [&](std::size_t i) { j[i] = decode(layout(g[i], o[i]), dec); });
    return;
  }
#endif
  // The layouts of a batch are computed first, off the serial chain of the
  // symbols' decoding, then the symbols in runs.
  constexpr std::size_t kBatch = 256;
  Layout layouts[kBatch];
  for (std::size_t i0 = 0; i0 < count; i0 += kBatch) {
    const std::size_t n = count - i0 < kBatch ? count - i0 : kBatch;
    for (std::size_t i = 0; i < n; ++i) layouts[i] = layout(g[i0 + i], o[i0 + i]);
    std::int64_t* out = j + i0;
    dec.decode_each(
        n,
        [&](std::size_t i, std::uint32_t s, std::uint32_t& start, std::uint32_t& freq) {
          return lookup(layouts[i], s, out[i], start, freq);
        },
        [&](std::size_t i) { out[i] = decode(layouts[i], dec); });
  }
}

std::size_t CellCoder::streams_together() {
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return 4;
#endif
  return 2;
}

void CellCoder::decode_batches(const Batch* b, std::size_t k) const {
  if (k > kTogether) throw InvalidArgument("too many streams for decode_batches");
#if CEPAM_X86_DISPATCH
  if (use_avx2()) {
    const auto one = [this](const Batch& batch, std::size_t i) {
      batch.j[i] = decode(layout(batch.g[i], batch.o[i]), *batch.dec);
    };
    std::size_t i[kTogether] = {};
    const auto ready = [&](std::size_t s) { return i[s] + 4 <= b[s].count; };
    // Two streams a register while every stream of the run has groups of
    // four left (all k, then pairs); where one stops, it takes a symbol
    // the scalar way.
    const auto run = [&](std::size_t s0, std::size_t streams) {
      for (;;) {
        for (std::size_t s = s0; s < s0 + streams; ++s)
          if (!ready(s)) return;
        const unsigned stop =
            cell_kernels::avx512::decode_streams(*this, model_, b + s0, streams, i + s0);
        for (std::size_t s = s0; s < s0 + streams; ++s)
          if (((stop >> (s - s0)) & 1u) != 0 && i[s] < b[s].count) one(b[s], i[s]++);
      }
    };
    if (simd_avx512dq()) {
      if (k == 4) run(0, 4);
      for (std::size_t s = 0; s + 1 < k; s += 2) run(s, 2);
    }
    // The rest in pairs of four-lane chains (and the odd one alone).
    const auto groups = [this](const Batch& batch) {
      return [this, &batch](std::size_t at) {
        return CellGroups<Latency::Any>{*this, model_, batch.g + at, batch.o + at, batch.j + at,
                                        fine_guess(model_, batch.g[at])};
      };
    };
    const auto rest = [&](std::size_t t) {
      return Batch{b[t].g + i[t], b[t].o + i[t], b[t].count - i[t], b[t].dec, b[t].j + i[t]};
    };
    for (std::size_t s = 0; s < k; s += 2) {
      const Batch r0 = rest(s);
      if (s + 1 == k) {
        decode_batch(r0.g, r0.o, r0.count, *r0.dec, r0.j);
        break;
      }
      const Batch r1 = rest(s + 1);
      decode_in_groups_pair(*r0.dec, r0.count, groups(r0), [&](std::size_t t) { one(r0, t); },
                            *r1.dec, r1.count, groups(r1), [&](std::size_t t) { one(r1, t); });
    }
    return;
  }
#endif
  for (std::size_t s = 0; s < k; ++s) decode_batch(b[s].g, b[s].o, b[s].count, *b[s].dec, b[s].j);
}

}  // namespace cepam
