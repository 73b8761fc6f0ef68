#include "random/sha256.hpp"

#include <cstring>
#include <vector>

#include "common/cpu.hpp"
#include "common/errors.hpp"

#if CEPAM_X86_DISPATCH
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace cepam {
namespace {

constexpr std::uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compress_portable(std::uint32_t state[8], const std::uint8_t* data, std::size_t blocks) {
  for (; blocks != 0; --blocks, data += 64) {
    std::uint32_t w[64];
    for (int t = 0; t < 16; ++t)
      w[t] = static_cast<std::uint32_t>(data[4 * t]) << 24 |
             static_cast<std::uint32_t>(data[4 * t + 1]) << 16 |
             static_cast<std::uint32_t>(data[4 * t + 2]) << 8 | data[4 * t + 3];
    for (int t = 16; t < 64; ++t) {
      const std::uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const std::uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    std::uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; ++t) {
      const std::uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[t] + w[t];
      const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#if CEPAM_X86_DISPATCH
// The SHA extensions' form of compress_portable (Intel's SHA-NI rounds:
// two rounds per sha256rnds2, the schedule by sha256msg1/msg2).
__attribute__((target("sha,sse4.1"))) void compress_sha_ni(std::uint32_t state[8],
                                                          const std::uint8_t* data,
                                                          std::size_t blocks) {
  const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));
  __m128i state1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));
  tmp = _mm_shuffle_epi32(tmp, 0xB1);          // CDAB
  state1 = _mm_shuffle_epi32(state1, 0x1B);    // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // CDGH
  for (; blocks != 0; --blocks, data += 64) {
    const __m128i abef = state0, cdgh = state1;
    __m128i w[16];
    for (int i = 0; i < 16; ++i) {
      if (i < 4) {
        w[i] = _mm_shuffle_epi8(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * i)), mask);
      } else {
        w[i] = _mm_sha256msg2_epu32(
            _mm_add_epi32(_mm_sha256msg1_epu32(w[i - 4], w[i - 3]),
                          _mm_alignr_epi8(w[i - 1], w[i - 2], 4)),
            w[i - 1]);
      }
      __m128i msg = _mm_add_epi32(w[i], _mm_loadu_si128(reinterpret_cast<const __m128i*>(kK + 4 * i)));
      state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
      msg = _mm_shuffle_epi32(msg, 0x0E);
      state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
  }
  tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);     // HGFE
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), state1);
}

bool cpu_has_sha_ni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & (1u << 29)) != 0 && __builtin_cpu_supports("sse4.1");
}
#endif

using Compress = void (*)(std::uint32_t*, const std::uint8_t*, std::size_t);

Compress compress_in_use() {
#if CEPAM_X86_DISPATCH
  static const Compress f =
      simd_level() != SimdLevel::Portable && cpu_has_sha_ni() ? compress_sha_ni : compress_portable;
  return f;
#else
  return compress_portable;
#endif
}

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256() : compress_(compress_in_use()) { std::memcpy(h_, kInit, sizeof h_); }
  void update(const std::uint8_t* data, std::size_t len) {
    total_ += len;
    if (fill_ != 0) {
      const std::size_t take = len < 64 - fill_ ? len : 64 - fill_;
      std::memcpy(buf_ + fill_, data, take);
      fill_ += take;
      data += take;
      len -= take;
      if (fill_ < 64) return;
      compress_(h_, buf_, 1);
      fill_ = 0;
    }
    if (len >= 64) {
      compress_(h_, data, len / 64);
      data += len / 64 * 64;
      len %= 64;
    }
    std::memcpy(buf_, data, len);
    fill_ = len;
  }
  void finish(std::uint8_t out[kSha256Bytes]) {
    const std::uint64_t bits = total_ * 8;
    std::uint8_t pad[72] = {0x80};
    const std::size_t zeros = (fill_ < 56 ? 56 - fill_ : 120 - fill_);
    for (int i = 0; i < 8; ++i) pad[zeros + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(bits >> (56 - 8 * i));
    update(pad, zeros + 8);
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<std::uint8_t>(h_[i] >> (24 - 8 * j));
  }

 private:
  Compress compress_;
  std::uint32_t h_[8];
  std::uint8_t buf_[64];
  std::size_t fill_ = 0;
  std::uint64_t total_ = 0;
};

// HMAC's inner and outer hashes, keyed (the key's pads absorbed).
struct Hmac {
  Sha256 inner, outer;
  Hmac(const std::uint8_t* key, std::size_t key_len) {
    std::uint8_t block[64] = {};
    if (key_len > 64) sha256(key, key_len, block);
    else if (key_len != 0) std::memcpy(block, key, key_len);
    std::uint8_t pad[64];
    for (int i = 0; i < 64; ++i) pad[i] = block[i] ^ 0x36;
    inner.update(pad, 64);
    for (int i = 0; i < 64; ++i) pad[i] = block[i] ^ 0x5c;
    outer.update(pad, 64);
  }
  void finish(std::uint8_t out[kSha256Bytes]) {
    std::uint8_t digest[kSha256Bytes];
    inner.finish(digest);
    outer.update(digest, kSha256Bytes);
    outer.finish(out);
  }
};

}  // namespace

void sha256(const std::uint8_t* data, std::size_t len, std::uint8_t out[kSha256Bytes]) {
  Sha256 h;
  h.update(data, len);
  h.finish(out);
}

void hmac_sha256(const std::uint8_t* key, std::size_t key_len, const std::uint8_t* data,
                 std::size_t len, std::uint8_t out[kSha256Bytes]) {
  Hmac mac(key, key_len);
  mac.inner.update(data, len);
  mac.finish(out);
}

void hmac_sha256_parts(const std::uint8_t* key, std::size_t key_len, const ByteSpan* parts,
                       std::size_t count, std::uint8_t out[kSha256Bytes]) {
  Hmac mac(key, key_len);
  for (std::size_t i = 0; i < count; ++i) mac.inner.update(parts[i].data, parts[i].len);
  mac.finish(out);
}

namespace {

// HKDF-Extract: PRK = HMAC-SHA256(salt, ikm), an empty salt being 32 zero
// bytes; returned as the HMAC keyed by the PRK (its pads absorbed once).
Hmac extract(const std::uint8_t* ikm, std::size_t ikm_len, const std::uint8_t* salt,
             std::size_t salt_len) {
  static const std::uint8_t zeros[kSha256Bytes] = {};
  std::uint8_t prk[kSha256Bytes];
  if (salt_len == 0) hmac_sha256(zeros, kSha256Bytes, ikm, ikm_len, prk);
  else hmac_sha256(salt, salt_len, ikm, ikm_len, prk);
  return Hmac(prk, kSha256Bytes);
}

}  // namespace

void hkdf_sha256(const std::uint8_t* ikm, std::size_t ikm_len, const std::uint8_t* salt,
                 std::size_t salt_len, const std::uint8_t* info, std::size_t info_len,
                 std::size_t length, std::uint8_t* out) {
  if (length < 1 || length > 255 * kSha256Bytes)
    throw InvalidArgument("HKDF output length must be in [1, 8160] bytes");
  // T(i) = HMAC(PRK, T(i - 1) || info || i).
  const Hmac keyed = extract(ikm, ikm_len, salt, salt_len);
  std::uint8_t block[kSha256Bytes];
  for (std::size_t done = 0, i = 1; done < length; ++i) {
    Hmac mac = keyed;
    if (i > 1) mac.inner.update(block, kSha256Bytes);
    mac.inner.update(info, info_len);
    const std::uint8_t counter = static_cast<std::uint8_t>(i);
    mac.inner.update(&counter, 1);
    mac.finish(block);
    const std::size_t take = length - done < kSha256Bytes ? length - done : kSha256Bytes;
    std::memcpy(out + done, block, take);
    done += take;
  }
}

void hkdf_sha256_keys(const std::uint8_t* ikm, std::size_t ikm_len, const std::uint8_t* salt,
                      std::size_t salt_len, const ByteSpan* infos, std::size_t count,
                      std::uint8_t* out) {
  // Each key is T(1) = HMAC(PRK, info || 1).
  const Hmac keyed = extract(ikm, ikm_len, salt, salt_len);
  static constexpr std::uint8_t kCounter = 1;
  for (std::size_t i = 0; i < count; ++i) {
    Hmac mac = keyed;
    mac.inner.update(infos[i].data, infos[i].len);
    mac.inner.update(&kCounter, 1);
    mac.finish(out + i * kSha256Bytes);
  }
}

bool sha256_uses_sha_ni() {
#if CEPAM_X86_DISPATCH
  return compress_in_use() == compress_sha_ni;
#else
  return false;
#endif
}

}  // namespace cepam
