// SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and HKDF-SHA256 (RFC 5869),
// for the codec's key derivation and payload tags on short inputs, where a
// call into Python's hashlib costs more than the hashing (a few
// microseconds a call: cepam.keys).  The SHA extensions (SHA-NI) are used
// where the CPU has them and the SIMD level is not capped to portable
// (common/cpu.hpp); the portable code gives the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cepam {

inline constexpr std::size_t kSha256Bytes = 32;

// SHA-256 of data[0..len) into out[32].
void sha256(const std::uint8_t* data, std::size_t len, std::uint8_t out[kSha256Bytes]);

// HMAC-SHA256(key, data) into out[32] (any key length).
void hmac_sha256(const std::uint8_t* key, std::size_t key_len, const std::uint8_t* data,
                 std::size_t len, std::uint8_t out[kSha256Bytes]);

// A read-only run of bytes, one part of a message hashed in parts.
struct ByteSpan {
  const std::uint8_t* data;
  std::size_t len;
};

// HMAC-SHA256(key, parts[0] || ... || parts[count - 1]) into out[32] (the
// parts hashed where they lie, never joined).
void hmac_sha256_parts(const std::uint8_t* key, std::size_t key_len, const ByteSpan* parts,
                       std::size_t count, std::uint8_t out[kSha256Bytes]);

// HKDF-SHA256(ikm, salt, info) (RFC 5869: Expand(Extract(salt, ikm), info,
// length); an empty salt is 32 zero bytes) into out[length], length in
// [1, 255 * 32] (InvalidArgument otherwise).
void hkdf_sha256(const std::uint8_t* ikm, std::size_t ikm_len, const std::uint8_t* salt,
                 std::size_t salt_len, const std::uint8_t* info, std::size_t info_len,
                 std::size_t length, std::uint8_t* out);

// The 32-byte keys HKDF-SHA256(ikm, salt, infos[i]), i < count, into
// out[32 count]: one Extract, then each key's single Expand block.
void hkdf_sha256_keys(const std::uint8_t* ikm, std::size_t ikm_len, const std::uint8_t* salt,
                      std::size_t salt_len, const ByteSpan* infos, std::size_t count,
                      std::uint8_t* out);

// Whether the SHA-NI compression is in use (for the tests).
bool sha256_uses_sha_ni();

}  // namespace cepam
