// A segment decoder's outcome, for code that runs on a CPU and a GPU (the
// whole-body decoders of payload/segment_decode.hpp and
// payload/golomb_segment.hpp), and the CPU decoder's error it stands for.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cepam {

// kReadOk, or the first error the segment meets (coding/read_status.hpp;
// kReadBadTrial: at sub-vector `at`, whose trial index is h;
// kReadNonFinite: sub-vector `at` decodes to a value its type cannot hold).
struct SegmentOutcome {
  int status;
  std::uint64_t at;
  std::uint32_t h;
};

// Throws the CPU decoder's error for the first of `count` segments (in
// order) whose outcome is not kReadOk: FormatError, the codec's error for
// a bad trial index, or DecodingError for values that overflow `dtype`
// ("float32" or "float64"); nothing if all are.
void throw_first_error(const SegmentOutcome* outcomes, std::size_t count, const char* dtype);

// The host twins' loop: decode(segment) -> SegmentOutcome for each of
// `segments` in order, up to the first that fails, whose error it throws
// (throw_first_error).
template <class Segments, class Decode>
void decode_in_order(const Segments& segments, const char* dtype, Decode&& decode) {
  for (const auto& segment : segments) {
    const SegmentOutcome out = decode(segment);
    if (out.status != 0) throw_first_error(&out, 1, dtype);
  }
}

}  // namespace cepam
