#include "random/chacha20.hpp"

#include <algorithm>
#include <cstring>

#include "common/cpu.hpp"
#include "common/parallel.hpp"
#include "random/chacha20_block.hpp"

#if CEPAM_X86_DISPATCH
CEPAM_AVX512_WARNINGS_OFF  // (GCC 12's false warnings: common/cpu.hpp)
#include <immintrin.h>
CEPAM_AVX512_WARNINGS_ON
#endif

namespace cepam {
namespace {

constexpr std::uint32_t kSigma[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};

// The batch kernels compute kChaChaBatch = 16 blocks at once: lane l is
// block index[l] of stream stream[l], written to out[8 l .. 8 l + 8).
// Contiguous ranges and the scattered blocks of rejected trials use the
// same kernels.
constexpr int kLanes = kChaChaBatch;

// Portable kernel: groups of four blocks side by side, word i of the four
// blocks in one Word4, so that a quarter round is four quarter rounds, one
// a lane: 128-bit vector adds, xors and shifts where the compiler has them
// (CEPAM_VECTOR128: SSE2 on x86-64, NEON on aarch64), four scalar lanes
// otherwise (the same bits: integer operations).
constexpr int kGroup = 4;

#if CEPAM_VECTOR128
typedef std::uint32_t Word4 __attribute__((vector_size(16)));
inline Word4 splat4(std::uint32_t v) { return Word4{v, v, v, v}; }
#else
struct Word4 {
  std::uint32_t v[kGroup];
  template <class F>
  Word4 each(const Word4& o, F f) const {  // f lane by lane
    Word4 r;
    for (int l = 0; l < kGroup; ++l) r.v[l] = f(v[l], o.v[l]);
    return r;
  }
  Word4& operator+=(const Word4& o) {
    return *this = each(o, [](std::uint32_t a, std::uint32_t b) { return a + b; });
  }
  Word4 operator^(const Word4& o) const {
    return each(o, [](std::uint32_t a, std::uint32_t b) { return a ^ b; });
  }
  Word4 operator|(const Word4& o) const {
    return each(o, [](std::uint32_t a, std::uint32_t b) { return a | b; });
  }
  Word4 operator<<(int c) const {
    return each(*this, [c](std::uint32_t a, std::uint32_t) { return a << c; });
  }
  Word4 operator>>(int c) const {
    return each(*this, [c](std::uint32_t a, std::uint32_t) { return a >> c; });
  }
};
inline Word4 splat4(std::uint32_t v) { return Word4{{v, v, v, v}}; }
#endif

template <int C>
inline Word4 rotl4(const Word4& v) { return (v << C) | (v >> (32 - C)); }

inline void quarter(Word4& a, Word4& b, Word4& c, Word4& d) {
  a += b; d = rotl4<16>(d ^ a);
  c += d; b = rotl4<12>(b ^ c);
  a += b; d = rotl4<8>(d ^ a);
  c += d; b = rotl4<7>(b ^ c);
}

void group_portable(const ChaChaKey& key, std::uint32_t purpose, const std::uint32_t* stream,
                    const std::uint64_t* index, std::uint64_t* out) {
  Word4 init[16];
  for (int i = 0; i < 4; ++i) init[i] = splat4(kSigma[i]);
  for (int i = 0; i < 8; ++i) init[4 + i] = splat4(key[static_cast<std::size_t>(i)]);
  // Words 12 to 14, the lanes' own (block counter and nonce words), lane by lane.
  std::uint32_t lo[kGroup], hi[kGroup];
  for (int l = 0; l < kGroup; ++l) {
    lo[l] = static_cast<std::uint32_t>(index[l]);
    hi[l] = static_cast<std::uint32_t>(index[l] >> 32);
  }
  std::memcpy(&init[12], lo, sizeof lo);
  std::memcpy(&init[13], hi, sizeof hi);
  std::memcpy(&init[14], stream, sizeof lo);
  init[15] = splat4(purpose);
  Word4 x[16];
  for (int i = 0; i < 16; ++i) x[i] = init[i];
  const int double_rounds = double_rounds_of(purpose);
  for (int round = 0; round < double_rounds; ++round) {
    quarter(x[0], x[4], x[8], x[12]);
    quarter(x[1], x[5], x[9], x[13]);
    quarter(x[2], x[6], x[10], x[14]);
    quarter(x[3], x[7], x[11], x[15]);
    quarter(x[0], x[5], x[10], x[15]);
    quarter(x[1], x[6], x[11], x[12]);
    quarter(x[2], x[7], x[8], x[13]);
    quarter(x[3], x[4], x[9], x[14]);
  }
  for (int i = 0; i < 16; ++i) x[i] += init[i];
  std::uint32_t words[16][kGroup];  // word i of block l at [i][l]
  std::memcpy(words, x, sizeof words);
  for (int l = 0; l < kGroup; ++l)
    for (int w = 0; w < 8; ++w)
      out[8 * l + w] = static_cast<std::uint64_t>(words[2 * w][l]) |
                       (static_cast<std::uint64_t>(words[2 * w + 1][l]) << 32);
}

void batch_portable(const ChaChaKey& key, std::uint32_t purpose, const std::uint32_t* stream,
                    const std::uint64_t* index, std::uint64_t* out) {
  for (int g = 0; g < kLanes; g += kGroup)
    group_portable(key, purpose, stream + g, index + g, out + 8 * g);
}

// Blocks [first, first + kLanes) of one stream.
void run_portable(const ChaChaKey& key, std::uint32_t purpose, std::uint32_t stream,
                  std::uint64_t first, std::uint64_t* out) {
  std::uint32_t streams[kLanes];
  std::uint64_t index[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    streams[l] = stream;
    index[l] = first + static_cast<std::uint64_t>(l);
  }
  batch_portable(key, purpose, streams, index, out);
}

// The 8 bytes of w, least significant first, as a native word (for XOR
// with 8 bytes read from memory).
inline std::uint64_t little_endian(std::uint64_t w) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return __builtin_bswap64(w);
#else
  return w;
#endif
}

// XORs the keystream words into data[0, bytes): word w holds keystream
// bytes 8 w .. 8 w + 7, little-endian, so whole words XOR as 8 bytes at a
// time, read and written in that order.
void xor_words(const std::uint64_t* words, unsigned char* data, std::size_t bytes) {
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t d;
    std::memcpy(&d, data + i, 8);
    d ^= little_endian(words[i / 8]);
    std::memcpy(data + i, &d, 8);
  }
  for (; i < bytes; ++i) data[i] ^= static_cast<unsigned char>(words[i / 8] >> (8 * (i % 8)));
}

// Blocks [first, first + kLanes) of stream 0 XORed into data[0, 64 kLanes).
void xor_portable(const ChaChaKey& key, std::uint32_t purpose, std::uint64_t first,
                  unsigned char* data) {
  std::uint64_t words[8 * kLanes];
  run_portable(key, purpose, 0, first, words);
  xor_words(words, data, sizeof words);
}

#if CEPAM_X86_DISPATCH
// The state words that are the same in every block of a batch (words 12,
// 13 and 14, the counter and the index and stream nonce words, are the
// lanes' own), as the ints the broadcasts take.
class InitialState {
 public:
  InitialState(const ChaChaKey& key, std::uint32_t purpose) {
    for (int i = 0; i < 4; ++i) w_[i] = kSigma[i];
    for (int i = 0; i < 8; ++i) w_[4 + i] = key[static_cast<std::size_t>(i)];
    w_[12] = w_[13] = w_[14] = 0;
    w_[15] = purpose;
  }
  int word(int i) const { return static_cast<int>(w_[i]); }

 private:
  std::uint32_t w_[16];
};

// The SIMD kernels hold word i of every block in one register, x[i] (32-bit
// lane l = block l), so that a quarter round is one quarter round per lane
// with plain vector adds, xors and rotates.  The four quarter rounds of a
// column or diagonal round are independent and are interleaved, operation
// by operation, so that their chains overlap.  At the end a
// transpose turns the columns back into blocks: block l is the 64 bytes
// x[0][l], x[1][l], ..., x[15][l], which read as little-endian 64-bit words
// are the stream words (x86 is little-endian).  The blocks are stored, or
// XORed into the bytes already there (the sealing keystream), on the way
// out of the registers.  Each kernel ends with vzeroupper: the compilers
// leave it out where a kernel ends in a call that passes vectors in
// registers, and the SSE code that runs next (all of the portable code)
// then pays for the upper halves left in use, several times over on some
// CPUs (a source model's 4096 quantiles: 7 us after it, 39 us without).

// AVX2 kernel: eight blocks a register.  Sixteen registers cannot hold the
// state and a temporary, and compilers then keep rows in memory in ways that
// cost about a tenth of the speed, so the double rounds are written in
// assembly (GCC and Clang syntax), with this allocation: row i in ymm i, but
// for rows 13 and 14, which take turns in ymm14 (the other one in memory),
// and ymm13 as the temporary.  The four quarter rounds of a column or
// diagonal round go in two pairs, interleaved; each pair needs only one of
// rows 13 and 14 (column pairs {0, 2} and {1, 3} need 14 and 13, diagonal
// pairs {0, 2} and {1, 3} need 13 and 14), so they change places twice per
// double round.  Rotations by 16 and 8 are byte shuffles, by 12 and 7 two
// shifts and an or.
//
// Byte shuffles rotating each 32-bit word left by 16 and by 8 (memory
// operands of vpshufb in the double round below).
alignas(32) constexpr unsigned char kRot16Avx2[32] = {
    2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
    2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13};
alignas(32) constexpr unsigned char kRot8Avx2[32] = {
    3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14,
    3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14};

#define CC_OP2(op, src, dst) op " %%ymm" #src ", %%ymm" #dst ", %%ymm" #dst "\n\t"
#define CC_SHUF(rot, d) "vpshufb %[" rot "], %%ymm" #d ", %%ymm" #d "\n\t"
#define CC_ROT(b, l, r)                                                        \
  "vpslld $" #l ", %%ymm" #b ", %%ymm13\n\tvpsrld $" #r ", %%ymm" #b ", %%ymm" #b \
  "\n\tvpor %%ymm13, %%ymm" #b ", %%ymm" #b "\n\t"
#define CC_PAIR(a1, b1, c1, d1, a2, b2, c2, d2)                                                \
  CC_OP2("vpaddd", b1, a1) CC_OP2("vpaddd", b2, a2) CC_OP2("vpxor", a1, d1)                   \
  CC_OP2("vpxor", a2, d2) CC_SHUF("r16", d1) CC_SHUF("r16", d2) CC_OP2("vpaddd", d1, c1)      \
  CC_OP2("vpaddd", d2, c2) CC_OP2("vpxor", c1, b1) CC_OP2("vpxor", c2, b2) CC_ROT(b1, 12, 20) \
  CC_ROT(b2, 12, 20) CC_OP2("vpaddd", b1, a1) CC_OP2("vpaddd", b2, a2) CC_OP2("vpxor", a1, d1) \
  CC_OP2("vpxor", a2, d2) CC_SHUF("r8", d1) CC_SHUF("r8", d2) CC_OP2("vpaddd", d1, c1)        \
  CC_OP2("vpaddd", d2, c2) CC_OP2("vpxor", c1, b1) CC_OP2("vpxor", c2, b2) CC_ROT(b1, 7, 25)  \
  CC_ROT(b2, 7, 25)
#define CC_LOAD(i) "vmovdqu " #i "*32(%[x]), %%ymm" #i "\n\t"
#define CC_STORE(i) "vmovdqu %%ymm" #i ", " #i "*32(%[x])\n\t"

// `double_rounds` (at least 1) double rounds on x[0..16) in place.
CEPAM_TARGET_AVX2 inline void rounds_avx2(__m256i* x, int double_rounds) {
  unsigned n = static_cast<unsigned>(double_rounds);
  asm(CC_LOAD(0) CC_LOAD(1) CC_LOAD(2) CC_LOAD(3) CC_LOAD(4) CC_LOAD(5) CC_LOAD(6) CC_LOAD(7)
      CC_LOAD(8) CC_LOAD(9) CC_LOAD(10) CC_LOAD(11) CC_LOAD(12) CC_LOAD(14) CC_LOAD(15)
      "1:\n\t"
      CC_PAIR(0, 4, 8, 12, 2, 6, 10, 14)
      "vmovdqu %%ymm14, 14*32(%[x])\n\tvmovdqu 13*32(%[x]), %%ymm14\n\t"
      CC_PAIR(1, 5, 9, 14, 3, 7, 11, 15)
      CC_PAIR(0, 5, 10, 15, 2, 7, 8, 14)
      "vmovdqu %%ymm14, 13*32(%[x])\n\tvmovdqu 14*32(%[x]), %%ymm14\n\t"
      CC_PAIR(1, 6, 11, 12, 3, 4, 9, 14)
      "decl %[n]\n\t"
      "jnz 1b\n\t"
      CC_STORE(0) CC_STORE(1) CC_STORE(2) CC_STORE(3) CC_STORE(4) CC_STORE(5) CC_STORE(6)
      CC_STORE(7) CC_STORE(8) CC_STORE(9) CC_STORE(10) CC_STORE(11) CC_STORE(12) CC_STORE(14)
      CC_STORE(15)
      : [n] "+&r"(n), "+m"(*reinterpret_cast<__m256i(*)[16]>(x))
      : [x] "r"(x), [r16] "m"(*reinterpret_cast<const __m256i*>(kRot16Avx2)),
        [r8] "m"(*reinterpret_cast<const __m256i*>(kRot8Avx2))
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
        "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}
#undef CC_OP2
#undef CC_SHUF
#undef CC_ROT
#undef CC_PAIR
#undef CC_LOAD
#undef CC_STORE

// Stores 32 bytes of keystream v at out, or XORs them into out when xor_in.
CEPAM_TARGET_AVX2 inline void put_avx2(__m256i v, std::uint32_t* out, bool xor_in) {
  __m256i* o = reinterpret_cast<__m256i*>(out);
  if (xor_in) v = _mm256_xor_si256(v, _mm256_loadu_si256(o));
  _mm256_storeu_si256(o, v);
}

// Transposes the 8 x 8 matrix of 32-bit words in rows r[0..8) and puts
// row l of the transpose (lane l of every r[i]) at out + 16 l words.
CEPAM_TARGET_AVX2 inline void transpose_put_avx2(const __m256i r[8], std::uint32_t* out,
                                                 bool xor_in) {
  // Within 128-bit halves: interleave pairs of rows, then pairs of pairs.
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]);  // a0 b0 a1 b1 | a4 b4 a5 b5
  const __m256i t1 = _mm256_unpackhi_epi32(r[0], r[1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]);
  const __m256i t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]);
  const __m256i t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2);  // a0 b0 c0 d0 | a4 b4 c4 d4
  const __m256i u1 = _mm256_unpackhi_epi64(t0, t2);  // a1 b1 c1 d1 | a5 b5 c5 d5
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3);  // a2 .. d2 | a6 .. d6
  const __m256i u3 = _mm256_unpackhi_epi64(t1, t3);  // a3 .. d3 | a7 .. d7
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6);  // e0 f0 g0 h0 | e4 f4 g4 h4
  const __m256i u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7);
  const __m256i u7 = _mm256_unpackhi_epi64(t5, t7);
  // Across halves: lane l < 4 takes both low halves, lane l + 4 both high.
  put_avx2(_mm256_permute2x128_si256(u0, u4, 0x20), out + 0 * 16, xor_in);
  put_avx2(_mm256_permute2x128_si256(u1, u5, 0x20), out + 1 * 16, xor_in);
  put_avx2(_mm256_permute2x128_si256(u2, u6, 0x20), out + 2 * 16, xor_in);
  put_avx2(_mm256_permute2x128_si256(u3, u7, 0x20), out + 3 * 16, xor_in);
  put_avx2(_mm256_permute2x128_si256(u0, u4, 0x31), out + 4 * 16, xor_in);
  put_avx2(_mm256_permute2x128_si256(u1, u5, 0x31), out + 5 * 16, xor_in);
  put_avx2(_mm256_permute2x128_si256(u2, u6, 0x31), out + 6 * 16, xor_in);
  put_avx2(_mm256_permute2x128_si256(u3, u7, 0x31), out + 7 * 16, xor_in);
}

// Eight blocks: lane l has block counter lo[l], nonce (hi[l], stream[l],
// purpose); put at out (8 blocks of 16 words), XORed in when xor_in.
CEPAM_TARGET_AVX2 inline void blocks8_avx2(const ChaChaKey& key, std::uint32_t purpose, __m256i lo,
                                           __m256i hi, __m256i stream, std::uint32_t* out,
                                           bool xor_in) {
  const InitialState state(key, purpose);
  __m256i x[16];
  for (int i = 0; i < 16; ++i) x[i] = _mm256_set1_epi32(state.word(i));
  x[12] = lo;
  x[13] = hi;
  x[14] = stream;
  rounds_avx2(x, double_rounds_of(purpose));
  // Adding the input back: the rows of constants again (not kept in
  // registers through the rounds), and the three rows given.
  for (int i = 0; i < 16; ++i) {
    const __m256i in =
        i == 12 ? lo : i == 13 ? hi : i == 14 ? stream : _mm256_set1_epi32(state.word(i));
    x[i] = _mm256_add_epi32(x[i], in);
  }
  transpose_put_avx2(x, out, xor_in);
  transpose_put_avx2(x + 8, out + 8, xor_in);
}

// Low and high 32 bits of index[0..8).
CEPAM_TARGET_AVX2 inline void split_avx2(const std::uint64_t* index, __m256i& lo, __m256i& hi) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(index));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(index + 4));
  // Per 128-bit half: a's low words then b's, (a0 a1 b0 b1 | a2 a3 b2 b3);
  // the permute puts the halves' pairs in order.
  const __m256 af = _mm256_castsi256_ps(a), bf = _mm256_castsi256_ps(b);
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  lo = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_shuffle_ps(af, bf, 0x88)), order);
  hi = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_shuffle_ps(af, bf, 0xdd)), order);
}

// Block counters and nonce words of blocks first + k, k = base .. base + 7.
CEPAM_TARGET_AVX2 inline void counters_avx2(std::uint64_t first, int base, __m256i& lo,
                                            __m256i& hi) {
  const __m256i k = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                     _mm256_set1_epi32(base));
  const auto first_lo = static_cast<std::uint32_t>(first);
  const auto first_hi = static_cast<std::uint32_t>(first >> 32);
  lo = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first_lo)), k);
  // lo wrapped past 2^32 exactly where lo < k (unsigned): carry one into hi.
  const __m256i bias = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(k, bias), _mm256_xor_si256(lo, bias));
  hi = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(first_hi)), carry);
}

CEPAM_TARGET_AVX2 void batch_avx2(const ChaChaKey& key, std::uint32_t purpose,
                                  const std::uint32_t* stream, const std::uint64_t* index,
                                  std::uint64_t* out) {
  for (int h = 0; h < kLanes; h += 8) {
    __m256i lo, hi;
    split_avx2(index + h, lo, hi);
    blocks8_avx2(key, purpose, lo, hi,
                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(stream + h)),
                 reinterpret_cast<std::uint32_t*>(out + 8 * h), false);
  }
  _mm256_zeroupper();
}

// Blocks [first, first + kLanes) of stream `stream` into out (8 words a
// block), or XORed into the bytes at out when xor_in.
CEPAM_TARGET_AVX2 void range_avx2(const ChaChaKey& key, std::uint32_t purpose,
                                  std::uint32_t stream, std::uint64_t first, std::uint32_t* out,
                                  bool xor_in) {
  const __m256i s = _mm256_set1_epi32(static_cast<int>(stream));
  for (int h = 0; h < kLanes; h += 8) {
    __m256i lo, hi;
    counters_avx2(first, h, lo, hi);
    blocks8_avx2(key, purpose, lo, hi, s, out + 16 * h, xor_in);
  }
}

CEPAM_TARGET_AVX2 void run_avx2(const ChaChaKey& key, std::uint32_t purpose, std::uint32_t stream,
                                std::uint64_t first, std::uint64_t* out) {
  range_avx2(key, purpose, stream, first, reinterpret_cast<std::uint32_t*>(out), false);
  _mm256_zeroupper();
}

CEPAM_TARGET_AVX2 void xor_avx2(const ChaChaKey& key, std::uint32_t purpose, std::uint64_t first,
                                unsigned char* data) {
  range_avx2(key, purpose, 0, first, reinterpret_cast<std::uint32_t*>(data), true);
  _mm256_zeroupper();
}

// AVX-512 kernel: sixteen blocks a register, native rotates, and 32
// registers so that the state never leaves them.  The final 16 x 16
// transpose runs in four steps: the first two interleave 32-bit and 64-bit
// elements within 128-bit lanes, so that 128-bit lane L of u[4 g + s] holds
// words 4 g .. 4 g + 3 of block 4 L + s; the last two move those 128-bit
// pieces across lanes (shuffle_i32x4) so that block 4 L + s gets the pieces
// of g = 0, 1, 2, 3.
// The rows (b, c, d) of the four quarter rounds (a, b, c, d) = (j, b[j],
// c[j], d[j]) of a column and of a diagonal round.
constexpr int kColumn[3][4] = {{4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}};
constexpr int kDiagonal[3][4] = {{5, 6, 7, 4}, {10, 11, 8, 9}, {15, 12, 13, 14}};

// Half of the four quarter rounds of rows R, interleaved operation by
// operation: a += b, d = (d ^ a) <<< S1, c += d, b = (b ^ c) <<< S2.  The
// rows are a template argument, so that every index is a constant and the
// compilers keep the rows in registers (Clang did not with the rows as
// function arguments).
template <const int (&R)[3][4], int S1, int S2>
CEPAM_TARGET_AVX512 inline void half_round_avx512(__m512i* x) {
  CEPAM_UNROLL(4)
  for (int j = 0; j < 4; ++j) x[j] = _mm512_add_epi32(x[j], x[R[0][j]]);
  CEPAM_UNROLL(4)
  for (int j = 0; j < 4; ++j) x[R[2][j]] = _mm512_rol_epi32(_mm512_xor_si512(x[R[2][j]], x[j]), S1);
  CEPAM_UNROLL(4)
  for (int j = 0; j < 4; ++j) x[R[1][j]] = _mm512_add_epi32(x[R[1][j]], x[R[2][j]]);
  CEPAM_UNROLL(4)
  for (int j = 0; j < 4; ++j)
    x[R[0][j]] = _mm512_rol_epi32(_mm512_xor_si512(x[R[0][j]], x[R[1][j]]), S2);
}

// Stores 64 bytes of keystream v at out, or XORs them into out when xor_in.
CEPAM_TARGET_AVX512 inline void put_avx512(__m512i v, __m512i* out, bool xor_in) {
  if (xor_in) v = _mm512_xor_si512(v, _mm512_loadu_si512(out));
  _mm512_storeu_si512(out, v);
}

// Sixteen blocks: lane l has block counter lo[l], nonce (hi[l], stream[l],
// purpose); block l put at out + 64 l bytes, XORed in when xor_in.
CEPAM_TARGET_AVX512 inline void blocks16_avx512(const ChaChaKey& key, std::uint32_t purpose,
                                                __m512i lo, __m512i hi, __m512i stream,
                                                __m512i* out, bool xor_in) {
  const InitialState state(key, purpose);
  __m512i init[16];
  for (int i = 0; i < 16; ++i) init[i] = _mm512_set1_epi32(state.word(i));
  init[12] = lo;
  init[13] = hi;
  init[14] = stream;
  __m512i x[16];
  for (int i = 0; i < 16; ++i) x[i] = init[i];
  const int double_rounds = double_rounds_of(purpose);
  for (int round = 0; round < double_rounds; ++round) {
    half_round_avx512<kColumn, 16, 12>(x);
    half_round_avx512<kColumn, 8, 7>(x);
    half_round_avx512<kDiagonal, 16, 12>(x);
    half_round_avx512<kDiagonal, 8, 7>(x);
  }
  for (int i = 0; i < 16; ++i) x[i] = _mm512_add_epi32(x[i], init[i]);

  __m512i t[16], u[16];
  for (int g = 0; g < 4; ++g) {
    // Rows a, b, c, d = words 4 g .. 4 g + 3 (each 128-bit lane: 4 blocks).
    const __m512i* r = x + 4 * g;
    t[4 * g + 0] = _mm512_unpacklo_epi32(r[0], r[1]);  // a0 b0 a1 b1 per 128-bit lane
    t[4 * g + 1] = _mm512_unpackhi_epi32(r[0], r[1]);  // a2 b2 a3 b3
    t[4 * g + 2] = _mm512_unpacklo_epi32(r[2], r[3]);  // c0 d0 c1 d1
    t[4 * g + 3] = _mm512_unpackhi_epi32(r[2], r[3]);  // c2 d2 c3 d3
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g + 0], t[4 * g + 2]);  // a0 b0 c0 d0: s = 0
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g + 0], t[4 * g + 2]);  // a1 b1 c1 d1: s = 1
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);  // s = 2
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);  // s = 3
  }
  for (int s = 0; s < 4; ++s) {
    // Pieces (g, L) of u[4 g + s]; gather piece L of every g into block 4 L + s.
    const __m512i v0 = _mm512_shuffle_i32x4(u[s], u[4 + s], 0x44);       // (0,0) (0,1) (1,0) (1,1)
    const __m512i v1 = _mm512_shuffle_i32x4(u[s], u[4 + s], 0xee);       // (0,2) (0,3) (1,2) (1,3)
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + s], u[12 + s], 0x44);  // (2,0) (2,1) (3,0) (3,1)
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + s], u[12 + s], 0xee);  // (2,2) (2,3) (3,2) (3,3)
    put_avx512(_mm512_shuffle_i32x4(v0, v2, 0x88), out + 0 + s, xor_in);   // L = 0
    put_avx512(_mm512_shuffle_i32x4(v0, v2, 0xdd), out + 4 + s, xor_in);   // L = 1
    put_avx512(_mm512_shuffle_i32x4(v1, v3, 0x88), out + 8 + s, xor_in);   // L = 2
    put_avx512(_mm512_shuffle_i32x4(v1, v3, 0xdd), out + 12 + s, xor_in);  // L = 3
  }
}

CEPAM_TARGET_AVX512 void batch_avx512(const ChaChaKey& key, std::uint32_t purpose,
                                      const std::uint32_t* stream, const std::uint64_t* index,
                                      std::uint64_t* out) {
  // Low and high 32 bits of the indices (truncating and shifted 64 -> 32).
  const __m512i a = _mm512_loadu_si512(index), b = _mm512_loadu_si512(index + 8);
  const __m512i lo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(a)),
                                        _mm512_cvtepi64_epi32(b), 1);
  const __m512i hi = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(a, 32))),
      _mm512_cvtepi64_epi32(_mm512_srli_epi64(b, 32)), 1);
  blocks16_avx512(key, purpose, lo, hi, _mm512_loadu_si512(stream),
                  reinterpret_cast<__m512i*>(out), false);
  _mm256_zeroupper();
}

// Blocks [first, first + 16) of stream `stream` put at out, XORed in when xor_in.
CEPAM_TARGET_AVX512 inline void range_avx512(const ChaChaKey& key, std::uint32_t purpose,
                                             std::uint32_t stream, std::uint64_t first,
                                             __m512i* out, bool xor_in) {
  const __m512i k = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i first_lo = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(first)));
  const __m512i first_hi =
      _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(first >> 32)));
  const __m512i lo = _mm512_add_epi32(first_lo, k);
  // lo wrapped past 2^32 exactly where lo < k (unsigned): carry one into hi.
  const __m512i hi = _mm512_mask_add_epi32(first_hi, _mm512_cmplt_epu32_mask(lo, k), first_hi,
                                           _mm512_set1_epi32(1));
  blocks16_avx512(key, purpose, lo, hi, _mm512_set1_epi32(static_cast<int>(stream)), out, xor_in);
}

CEPAM_TARGET_AVX512 void run_avx512(const ChaChaKey& key, std::uint32_t purpose,
                                    std::uint32_t stream, std::uint64_t first, std::uint64_t* out) {
  range_avx512(key, purpose, stream, first, reinterpret_cast<__m512i*>(out), false);
  _mm256_zeroupper();
}

CEPAM_TARGET_AVX512 void xor_avx512(const ChaChaKey& key, std::uint32_t purpose,
                                    std::uint64_t first, unsigned char* data) {
  range_avx512(key, purpose, 0, first, reinterpret_cast<__m512i*>(data), true);
  _mm256_zeroupper();
}
#endif

}  // namespace

// The kernels of the SIMD level in use (all give the same bits).
struct ChaChaKernels {
  ChaChaBatch batch;  // scattered blocks
  // Blocks [first, first + kLanes) of one stream into out (8 words a block).
  void (*run)(const ChaChaKey& key, std::uint32_t purpose, std::uint32_t stream,
              std::uint64_t first, std::uint64_t* out);
  // Blocks [first, first + kLanes) of stream 0 XORed into data[0, 64 kLanes).
  void (*xor_into)(const ChaChaKey& key, std::uint32_t purpose, std::uint64_t first,
                   unsigned char* data);
};

namespace {

const ChaChaKernels* chacha_kernels() {
#if CEPAM_X86_DISPATCH
  static const ChaChaKernels avx512{batch_avx512, run_avx512, xor_avx512};
  static const ChaChaKernels avx2{batch_avx2, run_avx2, xor_avx2};
  if (simd_level() >= SimdLevel::Avx512) return &avx512;
  if (simd_level() >= SimdLevel::Avx2) return &avx2;
#endif
  static const ChaChaKernels portable{batch_portable, run_portable, xor_portable};
  return &portable;
}

}  // namespace

void chacha20_block(const ChaChaKey& key, std::uint32_t counter, const std::uint32_t nonce[3],
                    std::uint32_t out[16], int double_rounds) {
  chacha::block(key.data(), counter, nonce, out, double_rounds);
}

ChaChaKey chacha_key_from_bytes(const unsigned char bytes[32]) {
  ChaChaKey key{};
  for (std::size_t i = 0; i < 8; ++i) {
    key[i] = static_cast<std::uint32_t>(bytes[4 * i]) |
             (static_cast<std::uint32_t>(bytes[4 * i + 1]) << 8) |
             (static_cast<std::uint32_t>(bytes[4 * i + 2]) << 16) |
             (static_cast<std::uint32_t>(bytes[4 * i + 3]) << 24);
  }
  return key;
}

KeyStream::KeyStream(const ChaChaKey& key, std::uint32_t purpose)
    : key_(key), purpose_(purpose), kernels_(chacha_kernels()) {}

void KeyStream::blocks(std::uint32_t stream, std::uint64_t first_block, std::size_t count,
                       std::uint64_t* out) const {
  const auto run = kernels_->run;
  std::size_t done = 0;
  for (; done + kLanes <= count; done += kLanes)
    run(key_, purpose_, stream, first_block + done, out + 8 * done);
  if (done < count) {
    std::uint64_t tail[8 * kLanes];
    run(key_, purpose_, stream, first_block + done, tail);
    std::memcpy(out + 8 * done, tail, (count - done) * 8 * sizeof(std::uint64_t));
  }
}

void KeyStream::gather(std::size_t count, const std::uint32_t* stream, const std::uint64_t* block,
                       std::uint64_t* out) const {
  const ChaChaBatch kernel = kernels_->batch;
  std::size_t done = 0;
  for (; done + kLanes <= count; done += kLanes)
    kernel(key_, purpose_, stream + done, block + done, out + 8 * done);
  if (done == count) return;
  const std::size_t rest = count - done;
  if (rest <= 2) {
    // One or two blocks: the scalar block function is cheaper than a batch.
    for (std::size_t i = done; i < count; ++i) single_block(stream[i], block[i], out + 8 * i);
    return;
  }
  std::uint32_t s[kLanes] = {};
  std::uint64_t b[kLanes] = {};
  std::uint64_t tail[8 * kLanes];
  for (std::size_t i = 0; i < rest; ++i) {
    s[i] = stream[done + i];
    b[i] = block[done + i];
  }
  kernel(key_, purpose_, s, b, tail);
  std::memcpy(out + 8 * done, tail, rest * 8 * sizeof(std::uint64_t));
}

void KeyStream::single_block(std::uint32_t stream, std::uint64_t block, std::uint64_t* out) const {
  const std::uint32_t nonce[3] = {static_cast<std::uint32_t>(block >> 32), stream, purpose_};
  std::uint32_t words32[16];
  chacha20_block(key_, static_cast<std::uint32_t>(block), nonce, words32,
                 double_rounds_of(purpose_));
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<std::uint64_t>(words32[2 * i]) |
             (static_cast<std::uint64_t>(words32[2 * i + 1]) << 32);
}

void KeyStream::words(std::uint32_t stream, std::uint64_t first_word, std::size_t count,
                      std::uint64_t* out) const {
  if (count == 0) return;
  std::uint64_t block = first_word / 8;
  std::size_t skip = static_cast<std::size_t>(first_word % 8);
  std::uint64_t buf[8 * kLanes];
  if (skip + count <= 16) {
    // A sub-vector's words: one or two blocks, no need for a batch.
    single_block(stream, block, buf);
    if (skip + count > 8) single_block(stream, block + 1, buf + 8);
    std::memcpy(out, buf + skip, count * sizeof(std::uint64_t));
    return;
  }
  const auto run = kernels_->run;
  while (count > 0) {
    // A batch of blocks at a time, straight into place when aligned and whole.
    const bool direct = skip == 0 && count >= 8 * kLanes;
    run(key_, purpose_, stream, block, direct ? out : buf);
    const std::size_t avail = 8 * kLanes - skip;
    const std::size_t take = count < avail ? count : avail;
    if (!direct) std::memcpy(out, buf + skip, take * sizeof(std::uint64_t));
    out += take;
    count -= take;
    block += kLanes;
    skip = 0;
  }
}

namespace {

// What a part of xor_keystream XORs the keystream into: data as it is, a
// copy of src, or zeros (the keystream itself).
enum class Start { Data, Copy, Zeros };

// xor_keystream over data[0, len), which starts at byte `pos` of the
// keystream, after filling data as `start` says.
void xor_keystream_at(const ChaChaKey& key, std::uint32_t purpose, std::uint64_t pos,
                      unsigned char* data, std::size_t len, Start start,
                      const unsigned char* src) {
  if (len == 0) return;
  if (start == Start::Copy) std::memcpy(data, src, len);
  if (start == Start::Zeros) std::memset(data, 0, len);
  const ChaChaKernels* kernels = chacha_kernels();
  std::uint64_t words[8 * kLanes];
  std::uint64_t block = pos / 64;
  const std::size_t skip = static_cast<std::size_t>(pos % 64);
  if (skip != 0) {  // the rest of a block begun elsewhere
    kernels->run(key, purpose, 0, block, words);
    const std::size_t take = len < 64 - skip ? len : 64 - skip;
    for (std::size_t i = 0; i < take; ++i) {
      const std::size_t b = skip + i;
      data[i] ^= static_cast<unsigned char>(words[b / 8] >> (8 * (b % 8)));
    }
    data += take;
    len -= take;
    ++block;
  }
  constexpr std::size_t kChunk = 64 * kLanes;  // bytes
  for (; len >= kChunk; block += kLanes, data += kChunk, len -= kChunk)
    kernels->xor_into(key, purpose, block, data);
  if (len > 0) {
    kernels->run(key, purpose, 0, block, words);
    xor_words(words, data, len);
  }
}

// xor_keystream_at over data[0, len) from keystream byte `first`, on up to
// `threads` threads, in parts that end on multiples of kXorPart bytes of
// the keystream.
void xor_parts(const ChaChaKey& key, std::uint32_t purpose, unsigned char* data,
               std::size_t len, int threads, std::uint64_t first, Start start,
               const unsigned char* src) {
  if (len == 0) return;
  static_assert(kXorPart % 64 == 0, "a part starts on a keystream block");
  const std::uint64_t lo = first / kXorPart;
  const std::size_t parts = static_cast<std::size_t>((first + len - 1) / kXorPart - lo + 1);
  if (threads <= 1 || parts <= 1) {
    xor_keystream_at(key, purpose, first, data, len, start, src);
    return;
  }
  parallel_for(threads, parts, [&](std::size_t p) {
    const std::uint64_t a = std::max<std::uint64_t>(first, (lo + p) * kXorPart);
    const std::uint64_t b = std::min<std::uint64_t>(first + len, (lo + p + 1) * kXorPart);
    const std::size_t at = static_cast<std::size_t>(a - first);
    xor_keystream_at(key, purpose, a, data + at, static_cast<std::size_t>(b - a), start,
                     src == nullptr ? nullptr : src + at);
  });
}

}  // namespace

void xor_keystream(const ChaChaKey& key, std::uint32_t purpose, unsigned char* data,
                   std::size_t len, int threads, std::uint64_t first, const unsigned char* src) {
  xor_parts(key, purpose, data, len, threads, first, src == nullptr ? Start::Data : Start::Copy,
            src);
}

void write_keystream(const ChaChaKey& key, std::uint32_t purpose, unsigned char* data,
                     std::size_t len, int threads, std::uint64_t first) {
  xor_parts(key, purpose, data, len, threads, first, Start::Zeros, nullptr);
}

}  // namespace cepam
