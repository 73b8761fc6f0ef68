#include "random/chacha20.hpp"

#include <cstring>

#include "common/cpu.hpp"
#include "random/chacha20_block.hpp"

#if CEPAM_X86_DISPATCH
// GCC 12's AVX-512 intrinsics trip its own -Wuninitialized (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace cepam {
namespace {

constexpr std::uint32_t kSigma[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};

using chacha::rotl;

// The batch kernels compute kChaChaBatch = 16 blocks at once: lane l is
// block index[l] of stream stream[l], written to out[8 l .. 8 l + 8).
// Contiguous ranges and the scattered blocks of rejected trials use the
// same kernels.
constexpr int kLanes = kChaChaBatch;

// Portable kernel: groups of four blocks side by side, over arrays of four
// lanes, so that a compiler can keep each state word of the four blocks in
// one 128-bit register (SSE2, NEON) and vectorise the quarter rounds.
constexpr int kGroup = 4;

inline void quarter(std::uint32_t* a, std::uint32_t* b, std::uint32_t* c, std::uint32_t* d) {
  for (int l = 0; l < kGroup; ++l) { a[l] += b[l]; d[l] = rotl(d[l] ^ a[l], 16); }
  for (int l = 0; l < kGroup; ++l) { c[l] += d[l]; b[l] = rotl(b[l] ^ c[l], 12); }
  for (int l = 0; l < kGroup; ++l) { a[l] += b[l]; d[l] = rotl(d[l] ^ a[l], 8); }
  for (int l = 0; l < kGroup; ++l) { c[l] += d[l]; b[l] = rotl(b[l] ^ c[l], 7); }
}

void group_portable(const ChaChaKey& key, std::uint32_t purpose, const std::uint32_t* stream,
                    const std::uint64_t* index, std::uint64_t* out) {
  alignas(16) std::uint32_t init[16][kGroup];
  alignas(16) std::uint32_t x[16][kGroup];
  for (int l = 0; l < kGroup; ++l) {
    for (int i = 0; i < 4; ++i) init[i][l] = kSigma[i];
    for (int i = 0; i < 8; ++i) init[4 + i][l] = key[static_cast<std::size_t>(i)];
    init[12][l] = static_cast<std::uint32_t>(index[l]);
    init[13][l] = static_cast<std::uint32_t>(index[l] >> 32);
    init[14][l] = stream[l];
    init[15][l] = purpose;
  }
  std::memcpy(x, init, sizeof x);
  for (int round = 0; round < 10; ++round) {
    quarter(x[0], x[4], x[8], x[12]);
    quarter(x[1], x[5], x[9], x[13]);
    quarter(x[2], x[6], x[10], x[14]);
    quarter(x[3], x[7], x[11], x[15]);
    quarter(x[0], x[5], x[10], x[15]);
    quarter(x[1], x[6], x[11], x[12]);
    quarter(x[2], x[7], x[8], x[13]);
    quarter(x[3], x[4], x[9], x[14]);
  }
  for (int i = 0; i < 16; ++i)
    for (int l = 0; l < kGroup; ++l) x[i][l] += init[i][l];
  for (int l = 0; l < kGroup; ++l)
    for (int w = 0; w < 8; ++w)
      out[8 * l + w] = static_cast<std::uint64_t>(x[2 * w][l]) |
                       (static_cast<std::uint64_t>(x[2 * w + 1][l]) << 32);
}

void batch_portable(const ChaChaKey& key, std::uint32_t purpose, const std::uint32_t* stream,
                    const std::uint64_t* index, std::uint64_t* out) {
  for (int g = 0; g < kLanes; g += kGroup)
    group_portable(key, purpose, stream + g, index + g, out + 8 * g);
}

#if CEPAM_X86_DISPATCH
// AVX2 kernel.  Layout: one 256-bit register per state word, x[i] holding
// word i of the eight blocks (32-bit lane l = block l), so a quarter round
// is eight independent quarter rounds with plain vector adds, xors and
// rotates (rotations by 16 and 8 are byte shuffles).  At the end an 8 x 8
// transpose of words 0-7 and of words 8-15 turns the columns back into
// blocks: block l is the 64 bytes x[0][l], x[1][l], ..., x[15][l], which
// read as little-endian 64-bit words are the stream words.
CEPAM_TARGET_AVX2 inline __m256i rotl_avx2(__m256i v, int c) {
  return _mm256_or_si256(_mm256_slli_epi32(v, c), _mm256_srli_epi32(v, 32 - c));
}

CEPAM_TARGET_AVX2 inline void quarter_avx2(__m256i& a, __m256i& b, __m256i& c, __m256i& d,
                                           __m256i rot16, __m256i rot8) {
  a = _mm256_add_epi32(a, b);
  d = _mm256_shuffle_epi8(_mm256_xor_si256(d, a), rot16);
  c = _mm256_add_epi32(c, d);
  b = rotl_avx2(_mm256_xor_si256(b, c), 12);
  a = _mm256_add_epi32(a, b);
  d = _mm256_shuffle_epi8(_mm256_xor_si256(d, a), rot8);
  c = _mm256_add_epi32(c, d);
  b = rotl_avx2(_mm256_xor_si256(b, c), 7);
}

// Transposes the 8 x 8 matrix of 32-bit words in rows r[0..8) and stores
// row l of the transpose (lane l of every r[i]) at out + 16 l words.
CEPAM_TARGET_AVX2 inline void transpose_store_avx2(const __m256i r[8], std::uint32_t* out) {
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
  __m256i* o = reinterpret_cast<__m256i*>(out);  // row l at o + 2 l (16 words apart)
  _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(u0, u4, 0x20));
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u1, u5, 0x20));
  _mm256_storeu_si256(o + 4, _mm256_permute2x128_si256(u2, u6, 0x20));
  _mm256_storeu_si256(o + 6, _mm256_permute2x128_si256(u3, u7, 0x20));
  _mm256_storeu_si256(o + 8, _mm256_permute2x128_si256(u0, u4, 0x31));
  _mm256_storeu_si256(o + 10, _mm256_permute2x128_si256(u1, u5, 0x31));
  _mm256_storeu_si256(o + 12, _mm256_permute2x128_si256(u2, u6, 0x31));
  _mm256_storeu_si256(o + 14, _mm256_permute2x128_si256(u3, u7, 0x31));
}

// Eight blocks (lanes index[0..8), stream[0..8)) into out[0..64).
CEPAM_TARGET_AVX2 void blocks8_avx2(const ChaChaKey& key, std::uint32_t purpose,
                                    const std::uint32_t* stream, const std::uint64_t* index,
                                    std::uint64_t* out) {
  alignas(32) std::uint32_t lo[8], hi[8];
  for (int l = 0; l < 8; ++l) {
    lo[l] = static_cast<std::uint32_t>(index[l]);
    hi[l] = static_cast<std::uint32_t>(index[l] >> 32);
  }
  __m256i init[16];
  for (int i = 0; i < 4; ++i) init[i] = _mm256_set1_epi32(static_cast<int>(kSigma[i]));
  for (int i = 0; i < 8; ++i)
    init[4 + i] = _mm256_set1_epi32(static_cast<int>(key[static_cast<std::size_t>(i)]));
  init[12] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
  init[13] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
  init[14] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(stream));
  init[15] = _mm256_set1_epi32(static_cast<int>(purpose));

  // Byte shuffles rotating each 32-bit word left by 16 and by 8.
  const __m256i rot16 = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
                                         2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  const __m256i rot8 = _mm256_setr_epi8(3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14,
                                        3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14);
  __m256i x[16];
  for (int i = 0; i < 16; ++i) x[i] = init[i];
  for (int round = 0; round < 10; ++round) {
    quarter_avx2(x[0], x[4], x[8], x[12], rot16, rot8);
    quarter_avx2(x[1], x[5], x[9], x[13], rot16, rot8);
    quarter_avx2(x[2], x[6], x[10], x[14], rot16, rot8);
    quarter_avx2(x[3], x[7], x[11], x[15], rot16, rot8);
    quarter_avx2(x[0], x[5], x[10], x[15], rot16, rot8);
    quarter_avx2(x[1], x[6], x[11], x[12], rot16, rot8);
    quarter_avx2(x[2], x[7], x[8], x[13], rot16, rot8);
    quarter_avx2(x[3], x[4], x[9], x[14], rot16, rot8);
  }
  for (int i = 0; i < 16; ++i) x[i] = _mm256_add_epi32(x[i], init[i]);
  std::uint32_t* out32 = reinterpret_cast<std::uint32_t*>(out);  // x86: little-endian
  transpose_store_avx2(x, out32);
  transpose_store_avx2(x + 8, out32 + 8);
}

CEPAM_TARGET_AVX2 void batch_avx2(const ChaChaKey& key, std::uint32_t purpose,
                                  const std::uint32_t* stream, const std::uint64_t* index,
                                  std::uint64_t* out) {
  blocks8_avx2(key, purpose, stream, index, out);
  blocks8_avx2(key, purpose, stream + 8, index + 8, out + 64);
}

// AVX-512 kernel: the same layout with sixteen 32-bit lanes per register
// (lane l = block l), native rotates, and 32 registers so that the state
// never leaves them.  The final 16 x 16 transpose runs in four steps: the
// first two interleave 32-bit and 64-bit elements within 128-bit lanes, so
// that 128-bit lane L of u[4 g + s] holds words 4 g .. 4 g + 3 of block
// 4 L + s; the last two move those 128-bit pieces across lanes
// (shuffle_i32x4) so that block 4 L + s gets the pieces of g = 0, 1, 2, 3.
CEPAM_TARGET_AVX512 inline void quarter_avx512(__m512i& a, __m512i& b, __m512i& c, __m512i& d) {
  a = _mm512_add_epi32(a, b);
  d = _mm512_rol_epi32(_mm512_xor_si512(d, a), 16);
  c = _mm512_add_epi32(c, d);
  b = _mm512_rol_epi32(_mm512_xor_si512(b, c), 12);
  a = _mm512_add_epi32(a, b);
  d = _mm512_rol_epi32(_mm512_xor_si512(d, a), 8);
  c = _mm512_add_epi32(c, d);
  b = _mm512_rol_epi32(_mm512_xor_si512(b, c), 7);
}

CEPAM_TARGET_AVX512 void batch_avx512(const ChaChaKey& key, std::uint32_t purpose,
                                      const std::uint32_t* stream, const std::uint64_t* index,
                                      std::uint64_t* out) {
  alignas(64) std::uint32_t lo[16], hi[16];
  for (int l = 0; l < 16; ++l) {
    lo[l] = static_cast<std::uint32_t>(index[l]);
    hi[l] = static_cast<std::uint32_t>(index[l] >> 32);
  }
  __m512i init[16];
  for (int i = 0; i < 4; ++i) init[i] = _mm512_set1_epi32(static_cast<int>(kSigma[i]));
  for (int i = 0; i < 8; ++i)
    init[4 + i] = _mm512_set1_epi32(static_cast<int>(key[static_cast<std::size_t>(i)]));
  init[12] = _mm512_load_si512(lo);
  init[13] = _mm512_load_si512(hi);
  init[14] = _mm512_loadu_si512(stream);
  init[15] = _mm512_set1_epi32(static_cast<int>(purpose));
  __m512i x[16];
  for (int i = 0; i < 16; ++i) x[i] = init[i];
  for (int round = 0; round < 10; ++round) {
    quarter_avx512(x[0], x[4], x[8], x[12]);
    quarter_avx512(x[1], x[5], x[9], x[13]);
    quarter_avx512(x[2], x[6], x[10], x[14]);
    quarter_avx512(x[3], x[7], x[11], x[15]);
    quarter_avx512(x[0], x[5], x[10], x[15]);
    quarter_avx512(x[1], x[6], x[11], x[12]);
    quarter_avx512(x[2], x[7], x[8], x[13]);
    quarter_avx512(x[3], x[4], x[9], x[14]);
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
  __m512i* o = reinterpret_cast<__m512i*>(out);  // block b at o + b (x86: little-endian)
  for (int s = 0; s < 4; ++s) {
    // Pieces (g, L) of u[4 g + s]; gather piece L of every g into block 4 L + s.
    const __m512i v0 = _mm512_shuffle_i32x4(u[s], u[4 + s], 0x44);       // (0,0) (0,1) (1,0) (1,1)
    const __m512i v1 = _mm512_shuffle_i32x4(u[s], u[4 + s], 0xee);       // (0,2) (0,3) (1,2) (1,3)
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + s], u[12 + s], 0x44);  // (2,0) (2,1) (3,0) (3,1)
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + s], u[12 + s], 0xee);  // (2,2) (2,3) (3,2) (3,3)
    _mm512_storeu_si512(o + 0 + s, _mm512_shuffle_i32x4(v0, v2, 0x88));   // L = 0
    _mm512_storeu_si512(o + 4 + s, _mm512_shuffle_i32x4(v0, v2, 0xdd));   // L = 1
    _mm512_storeu_si512(o + 8 + s, _mm512_shuffle_i32x4(v1, v3, 0x88));   // L = 2
    _mm512_storeu_si512(o + 12 + s, _mm512_shuffle_i32x4(v1, v3, 0xdd));  // L = 3
  }
}
#endif

ChaChaBatch batch_kernel() {
#if CEPAM_X86_DISPATCH
  if (simd_level() >= SimdLevel::Avx512) return batch_avx512;
  if (simd_level() >= SimdLevel::Avx2) return batch_avx2;
#endif
  return batch_portable;
}

// Blocks [first, first + kLanes) of one stream.
void batch_consecutive(ChaChaBatch kernel, const ChaChaKey& key, std::uint32_t purpose,
                       std::uint32_t stream, std::uint64_t first, std::uint64_t* out) {
  std::uint32_t streams[kLanes];
  std::uint64_t index[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    streams[l] = stream;
    index[l] = first + static_cast<std::uint64_t>(l);
  }
  kernel(key, purpose, streams, index, out);
}

}  // namespace

void chacha20_block(const ChaChaKey& key, std::uint32_t counter, const std::uint32_t nonce[3],
                    std::uint32_t out[16]) {
  chacha::block(key.data(), counter, nonce, out);
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
    : key_(key), purpose_(purpose), kernel_(batch_kernel()) {}

void KeyStream::blocks(std::uint32_t stream, std::uint64_t first_block, std::size_t count,
                       std::uint64_t* out) const {
  const ChaChaBatch kernel = kernel_;
  std::size_t done = 0;
  for (; done + kLanes <= count; done += kLanes)
    batch_consecutive(kernel, key_, purpose_, stream, first_block + done, out + 8 * done);
  if (done < count) {
    std::uint64_t tail[8 * kLanes];
    batch_consecutive(kernel, key_, purpose_, stream, first_block + done, tail);
    std::memcpy(out + 8 * done, tail, (count - done) * 8 * sizeof(std::uint64_t));
  }
}

void KeyStream::gather(std::size_t count, const std::uint32_t* stream, const std::uint64_t* block,
                       std::uint64_t* out) const {
  const ChaChaBatch kernel = kernel_;
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
  chacha20_block(key_, static_cast<std::uint32_t>(block), nonce, words32);
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
  const ChaChaBatch kernel = kernel_;
  while (count > 0) {
    // A batch of blocks at a time, straight into place when aligned and whole.
    const bool direct = skip == 0 && count >= 8 * kLanes;
    batch_consecutive(kernel, key_, purpose_, stream, block, direct ? out : buf);
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

// The 8 bytes of w, least significant first, as a native word (for XOR
// with 8 bytes read from memory).
inline std::uint64_t little_endian(std::uint64_t w) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return __builtin_bswap64(w);
#else
  return w;
#endif
}

}  // namespace

void xor_keystream(const ChaChaKey& key, std::uint32_t purpose, unsigned char* data,
                   std::size_t len) {
  const KeyStream ks(key, purpose);
  constexpr std::size_t kChunkBlocks = 4 * kLanes;
  std::uint64_t words[8 * kChunkBlocks];
  for (std::uint64_t block = 0; len > 0; block += kChunkBlocks) {
    const std::size_t bytes = len < 64 * kChunkBlocks ? len : 64 * kChunkBlocks;
    ks.blocks(0, block, (bytes + 63) / 64, words);
    // Word w holds keystream bytes 8 w .. 8 w + 7, little-endian: whole
    // words XOR as 8 bytes at a time, read and written in that order.
    std::size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      std::uint64_t d;
      std::memcpy(&d, data + i, 8);
      d ^= little_endian(words[i / 8]);
      std::memcpy(data + i, &d, 8);
    }
    for (; i < bytes; ++i)
      data[i] ^= static_cast<unsigned char>(words[i / 8] >> (8 * (i % 8)));
    data += bytes;
    len -= bytes;
  }
}

}  // namespace cepam
