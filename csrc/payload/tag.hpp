// The payload tag (docs/format.md, "Tag"; cepam.keys.payload_tag) of a
// payload short enough to be one MAC segment: for data = header ||
// ciphertext of L <= kMacSegmentBytes bytes,
//
//   t_0 = HMAC-SHA256(key, "cepam/seg" || u64 0 || u64 L || data),
//   tag = HMAC-SHA256(key, "cepam/tag" || u64 L || u64 1 || t_0), first 16 bytes
//
// (u64: little-endian).  Longer payloads are cut into segments tagged on
// several threads by cepam.keys.payload_tag, which calls this for a short
// one: a small payload is sealed and verified without a call back into
// Python.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cepam {

inline constexpr std::size_t kMacSegmentBytes = std::size_t{1} << 20;
inline constexpr std::size_t kPayloadTagBytes = 16;
inline constexpr char kSegmentLabel[] = "cepam/seg";  // (the labels: without the NUL)
inline constexpr char kTagLabel[] = "cepam/tag";

// The tag of data[0..len) under the 32-byte MAC key into out[16];
// InvalidArgument if len > kMacSegmentBytes (more than one segment).
void one_segment_tag(const std::uint8_t* key, const std::uint8_t* data, std::size_t len,
                     std::uint8_t out[kPayloadTagBytes]);

}  // namespace cepam
