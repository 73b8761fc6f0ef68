#include "payload/tag.hpp"

#include <cstring>

#include "common/errors.hpp"
#include "random/sha256.hpp"

namespace cepam {
namespace {

// u64 a || u64 b, little-endian.
void put_pair(std::uint8_t out[16], std::uint64_t a, std::uint64_t b) {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<std::uint8_t>(a >> (8 * i));
    out[8 + i] = static_cast<std::uint8_t>(b >> (8 * i));
  }
}

const std::uint8_t* bytes_of(const char* label) {
  return reinterpret_cast<const std::uint8_t*>(label);
}

}  // namespace

void one_segment_tag(const std::uint8_t* key, const std::uint8_t* data, std::size_t len,
                     std::uint8_t out[kPayloadTagBytes]) {
  if (len > kMacSegmentBytes) throw InvalidArgument("one_segment_tag: more than one MAC segment");
  std::uint8_t head[16], segment[kSha256Bytes], tag[kSha256Bytes];
  put_pair(head, 0, len);
  const ByteSpan inner[] = {
      {bytes_of(kSegmentLabel), sizeof kSegmentLabel - 1}, {head, 16}, {data, len}};
  hmac_sha256_parts(key, kSha256Bytes, inner, 3, segment);
  put_pair(head, len, 1);
  const ByteSpan outer[] = {
      {bytes_of(kTagLabel), sizeof kTagLabel - 1}, {head, 16}, {segment, kSha256Bytes}};
  hmac_sha256_parts(key, kSha256Bytes, outer, 3, tag);
  std::memcpy(out, tag, kPayloadTagBytes);
}

}  // namespace cepam
