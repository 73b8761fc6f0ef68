// ChaCha (RFC 8439's block function, with the double rounds of its
// purpose) as a keyed, random-access pseudo-random function.
//
// The block function is RFC 8439 section 2.3: 256-bit key, 32-bit block
// counter, 96-bit nonce, and the number of double rounds as an argument:
// 10 (ChaCha20, RFC 8439) for the sealing keystream, 4 (ChaCha8) for the
// LRSUQ streams (format version 9; 10 before).  cepam uses it as a
// counter-mode PRF over a 64-bit block index and a 32-bit stream id:
//
//   counter  = low 32 bits of the block index
//   nonce[0] = high 32 bits of the block index
//   nonce[1] = stream id   (0: latent variables, i >= 1: dithers of trial i,
//                           2^32 - 1: the Maxwell ziggurat's reserve)
//   nonce[2] = purpose     (kPurposeLrsuq for the LRSUQ codec)
//
// Every stream is a sequence of 64-bit words; word w of a stream is bytes
// 8(w mod 8) .. 8(w mod 8)+7 of block w / 8, read little-endian.  The words
// a sub-vector needs therefore sit at a fixed, computable position, which is
// what lets the decoder jump straight to trial H without replaying trials.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/host_device.hpp"

namespace cepam {

using ChaChaKey = std::array<std::uint32_t, 8>;

// RFC 8439 block function with `double_rounds` double rounds (10: ChaCha20
// itself): 16 output words (the 64-byte block, as little-endian 32-bit
// words).
void chacha20_block(const ChaChaKey& key, std::uint32_t counter,
                    const std::uint32_t nonce[3], std::uint32_t out[16],
                    int double_rounds);

// Loads a key from 32 bytes (little-endian words, as in RFC 8439).
ChaChaKey chacha_key_from_bytes(const unsigned char bytes[32]);

inline constexpr std::uint32_t kPurposeLrsuq = 0x4c525351u;  // "QSRL"
inline constexpr std::uint32_t kPurposeSeal = 0x4c414553u;   // "SEAL"

// The double rounds of each purpose's keystream.  The sealing keystream
// encrypts the payload: ChaCha20, as RFC 8439 has it.  The LRSUQ streams
// are never seen by anyone without the key, and must only be a
// pseudo-random function of it (uniform words to whoever lacks the key:
// docs/format.md, version 9), for which ChaCha8 is the choice of Go's
// runtime source (C2SP chacha8rand) and of Aumasson's "Too Much Crypto"
// (2019): the best published attacks reach 7 rounds.
inline constexpr int kSealDoubleRounds = 10;   // ChaCha20
inline constexpr int kLrsuqDoubleRounds = 4;   // ChaCha8 (format version 9)
CEPAM_HD constexpr int double_rounds_of(std::uint32_t purpose) {
  return purpose == kPurposeLrsuq ? kLrsuqDoubleRounds : kSealDoubleRounds;
}

// Blocks per call of a batch kernel.
inline constexpr int kChaChaBatch = 16;

// A kernel computing kChaChaBatch blocks at once: block index[l] of stream
// stream[l] into out[8 l .. 8 l + 8) (as 64-bit words), l < kChaChaBatch.
// There is a portable one and, where the CPU has them, AVX2 and AVX-512
// ones (see common/cpu.hpp); all give the same bits.
using ChaChaBatch = void (*)(const ChaChaKey& key, std::uint32_t purpose,
                             const std::uint32_t* stream, const std::uint64_t* index,
                             std::uint64_t* out);

struct ChaChaKernels;  // the batch kernels of the SIMD level in use

class KeyStream {
 public:
  KeyStream(const ChaChaKey& key, std::uint32_t purpose);

  // Writes 8 words per block for blocks [first_block, first_block + count)
  // of stream `stream` into out (8 * count words).
  void blocks(std::uint32_t stream, std::uint64_t first_block, std::size_t count,
              std::uint64_t* out) const;

  // Writes words [first_word, first_word + count) of stream `stream`.
  void words(std::uint32_t stream, std::uint64_t first_word, std::size_t count,
             std::uint64_t* out) const;

  // Scattered blocks: block block[i] of stream stream[i] into
  // out[8 i .. 8 i + 8), for i < count (the blocks of rejected trials).
  void gather(std::size_t count, const std::uint32_t* stream, const std::uint64_t* block,
              std::uint64_t* out) const;

  // The key and purpose (for a chacha::StreamReader of the same streams).
  const ChaChaKey& key() const { return key_; }
  std::uint32_t purpose() const { return purpose_; }

 private:
  void single_block(std::uint32_t stream, std::uint64_t block, std::uint64_t* out) const;

  ChaChaKey key_;
  std::uint32_t purpose_;
  const ChaChaKernels* kernels_;
};

// XORs the ChaCha20 keystream of RFC 8439 section 2.4 into data[0, len):
// key `key`, nonce words (0, 0, purpose), block counter from 0 (blocks
// beyond 2^32 carry into nonce word 0, as KeyStream does), starting at byte
// `first` of the keystream.  With src, data[0, len) is first copied from
// src[0, len) (one pass: data = src XOR keystream).  Encrypts and decrypts
// alike.  On up to `threads` threads, in parts that end on multiples of
// kXorPart bytes of the keystream: the same bytes for every thread count.
inline constexpr std::size_t kXorPart = std::size_t{1} << 20;
void xor_keystream(const ChaChaKey& key, std::uint32_t purpose, unsigned char* data,
                   std::size_t len, int threads = 1, std::uint64_t first = 0,
                   const unsigned char* src = nullptr);

// Writes keystream bytes [first, first + len) into data (what
// xor_keystream makes of zeros), on up to `threads` threads likewise.
void write_keystream(const ChaChaKey& key, std::uint32_t purpose, unsigned char* data,
                     std::size_t len, int threads = 1, std::uint64_t first = 0);

// Uniform double in [0, 1) from the top 53 bits of a word.
CEPAM_HD inline double uniform_co(std::uint64_t w) {
  return static_cast<double>(w >> 11) * 0x1.0p-53;
}

// Uniform double in (0, 1] from the top 53 bits of a word (for logarithms).
CEPAM_HD inline double uniform_oc(std::uint64_t w) {
  return static_cast<double>((w >> 11) + 1) * 0x1.0p-53;
}

}  // namespace cepam
