// The ChaCha block function (RFC 8439 section 2.3, with a given number of
// double rounds: 10 is ChaCha20) and random access to
// the words of a keyed stream, written once for host and device (CEPAM_HD).
// random/chacha20.hpp describes the stream layout; its portable and SIMD
// batch kernels give the same words as stream_word() below.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace cepam::chacha {

CEPAM_HD inline std::uint32_t rotl(std::uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }

CEPAM_HD inline void quarter_round(std::uint32_t* x, int a, int b, int c, int d) {
  x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 16);
  x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 12);
  x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 8);
  x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 7);
}

// RFC 8439 block function: 256-bit key (8 little-endian words), 32-bit
// counter, 96-bit nonce -> the 16 output words of the 64-byte block, after
// `double_rounds` double rounds (10: ChaCha20).
CEPAM_HD inline void block(const std::uint32_t key[8], std::uint32_t counter,
                           const std::uint32_t nonce[3], std::uint32_t out[16],
                           int double_rounds) {
  std::uint32_t init[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
                            key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7],
                            counter, nonce[0], nonce[1], nonce[2]};
  std::uint32_t x[16];
  for (int i = 0; i < 16; ++i) x[i] = init[i];
  for (int round = 0; round < double_rounds; ++round) {
    quarter_round(x, 0, 4, 8, 12);
    quarter_round(x, 1, 5, 9, 13);
    quarter_round(x, 2, 6, 10, 14);
    quarter_round(x, 3, 7, 11, 15);
    quarter_round(x, 0, 5, 10, 15);
    quarter_round(x, 1, 6, 11, 12);
    quarter_round(x, 2, 7, 8, 13);
    quarter_round(x, 3, 4, 9, 14);
  }
  for (int i = 0; i < 16; ++i) out[i] = x[i] + init[i];
}

// Reads words of one stream (random/chacha20.hpp: block b has counter
// b mod 2^32 and nonce (b >> 32, stream, purpose), the purpose's double
// rounds (double_rounds_of); word w is bytes
// 8 (w mod 8) .. 8 (w mod 8) + 7 of block w / 8, little-endian), keeping the
// last block it computed, so that consecutive words cost one block per 8.
class StreamReader {
 public:
  CEPAM_HD StreamReader(const std::uint32_t* key, std::uint32_t purpose, std::uint32_t stream)
      : key_(key), purpose_(purpose), stream_(stream) {}

  CEPAM_HD std::uint64_t word(std::uint64_t w) {
    const std::uint64_t b = w / 8;
    if (!valid_ || b != block_) {
      const std::uint32_t nonce[3] = {static_cast<std::uint32_t>(b >> 32), stream_, purpose_};
      block(key_, static_cast<std::uint32_t>(b), nonce, out_, double_rounds_of(purpose_));
      block_ = b;
      valid_ = true;
    }
    const int i = static_cast<int>(w % 8);
    return static_cast<std::uint64_t>(out_[2 * i]) |
           (static_cast<std::uint64_t>(out_[2 * i + 1]) << 32);
  }

 private:
  const std::uint32_t* key_;
  std::uint32_t purpose_, stream_;
  std::uint64_t block_ = 0;
  bool valid_ = false;
  std::uint32_t out_[16];
};

}  // namespace cepam::chacha
