#include "chacha20.hpp"

#include <cstring>

namespace cepam {
namespace {

constexpr std::uint32_t kSigma[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};

inline std::uint32_t rotl(std::uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }

// Lanes blocks computed side by side: written over arrays of lanes so that
// the compiler vectorises the quarter rounds (all integer arithmetic, so the
// result is the same whatever instructions are chosen).
constexpr int kLanes = 8;

inline void quarter(std::uint32_t* a, std::uint32_t* b, std::uint32_t* c, std::uint32_t* d) {
  for (int l = 0; l < kLanes; ++l) { a[l] += b[l]; d[l] = rotl(d[l] ^ a[l], 16); }
  for (int l = 0; l < kLanes; ++l) { c[l] += d[l]; b[l] = rotl(b[l] ^ c[l], 12); }
  for (int l = 0; l < kLanes; ++l) { a[l] += b[l]; d[l] = rotl(d[l] ^ a[l], 8); }
  for (int l = 0; l < kLanes; ++l) { c[l] += d[l]; b[l] = rotl(b[l] ^ c[l], 7); }
}

// kLanes consecutive blocks, starting at block index `first`, of one stream.
void blocks_lanes(const ChaChaKey& key, std::uint32_t stream, std::uint32_t purpose,
                  std::uint64_t first, std::uint64_t* out) {
  alignas(64) std::uint32_t init[16][kLanes];
  alignas(64) std::uint32_t x[16][kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const std::uint64_t index = first + static_cast<std::uint64_t>(l);
    for (int i = 0; i < 4; ++i) init[i][l] = kSigma[i];
    for (int i = 0; i < 8; ++i) init[4 + i][l] = key[static_cast<std::size_t>(i)];
    init[12][l] = static_cast<std::uint32_t>(index);
    init[13][l] = static_cast<std::uint32_t>(index >> 32);
    init[14][l] = stream;
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
    for (int l = 0; l < kLanes; ++l) x[i][l] += init[i][l];
  for (int l = 0; l < kLanes; ++l)
    for (int w = 0; w < 8; ++w)
      out[8 * l + w] = static_cast<std::uint64_t>(x[2 * w][l]) |
                       (static_cast<std::uint64_t>(x[2 * w + 1][l]) << 32);
}

}  // namespace

void chacha20_block(const ChaChaKey& key, std::uint32_t counter, const std::uint32_t nonce[3],
                    std::uint32_t out[16]) {
  std::uint32_t init[16];
  for (int i = 0; i < 4; ++i) init[i] = kSigma[i];
  for (int i = 0; i < 8; ++i) init[4 + i] = key[static_cast<std::size_t>(i)];
  init[12] = counter;
  init[13] = nonce[0];
  init[14] = nonce[1];
  init[15] = nonce[2];
  std::uint32_t x[16];
  std::memcpy(x, init, sizeof x);
  auto qr = [&x](int a, int b, int c, int d) {
    x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 16);
    x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 12);
    x[a] += x[b]; x[d] = rotl(x[d] ^ x[a], 8);
    x[c] += x[d]; x[b] = rotl(x[b] ^ x[c], 7);
  };
  for (int round = 0; round < 10; ++round) {
    qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15);
    qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14);
  }
  for (int i = 0; i < 16; ++i) out[i] = x[i] + init[i];
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

void KeyStream::blocks(std::uint32_t stream, std::uint64_t first_block, std::size_t count,
                       std::uint64_t* out) const {
  std::size_t done = 0;
  for (; done + kLanes <= count; done += kLanes)
    blocks_lanes(key_, stream, purpose_, first_block + done, out + 8 * done);
  if (done < count) {
    std::uint64_t tail[8 * kLanes];
    blocks_lanes(key_, stream, purpose_, first_block + done, tail);
    std::memcpy(out + 8 * done, tail, (count - done) * 8 * sizeof(std::uint64_t));
  }
}

void KeyStream::words(std::uint32_t stream, std::uint64_t first_word, std::size_t count,
                      std::uint64_t* out) const {
  std::uint64_t buf[8 * kLanes];
  std::uint64_t w = first_word;
  const std::uint64_t end = first_word + count;
  while (w < end) {
    const std::uint64_t block = w / 8;
    const std::size_t skip = static_cast<std::size_t>(w % 8);
    const std::uint64_t want = end - w;
    if (skip == 0 && want >= 8 * kLanes) {
      blocks_lanes(key_, stream, purpose_, block, out);  // straight into place
      out += 8 * kLanes;
      w += 8 * kLanes;
      continue;
    }
    std::uint64_t avail;
    if (skip + want <= 16) {
      // A sub-vector's words: one or two blocks, no need for a full batch.
      avail = 16 - skip;
      for (std::uint64_t b = 0; b < 2; ++b) {
        const std::uint64_t index = block + b;
        const std::uint32_t nonce[3] = {static_cast<std::uint32_t>(index >> 32), stream, purpose_};
        std::uint32_t words32[16];
        chacha20_block(key_, static_cast<std::uint32_t>(index), nonce, words32);
        for (int i = 0; i < 8; ++i)
          buf[8 * b + static_cast<std::uint64_t>(i)] =
              static_cast<std::uint64_t>(words32[2 * i]) |
              (static_cast<std::uint64_t>(words32[2 * i + 1]) << 32);
        if (skip + want <= 8) { avail = 8 - skip; break; }
      }
    } else {
      blocks_lanes(key_, stream, purpose_, block, buf);
      avail = 8 * kLanes - skip;
    }
    const std::size_t take = static_cast<std::size_t>(want < avail ? want : avail);
    std::memcpy(out, buf + skip, take * sizeof(std::uint64_t));
    out += take;
    w += take;
  }
}

}  // namespace cepam
