// The rANS streams of an ANS body's segments coded on a CUDA device, one
// stream a thread, by the arithmetic the CPU's coder runs
// (coding/rans_core.hpp): the same bytes as AnsEncoder::finish of each
// stream.  Like lrsuq_gpu.hpp this header needs no CUDA headers.
//
// ans_streams_resident also computes the segments' symbols on the device (the
// box model's and, on A2, D4 and E8, the point model's) from the LRSUQ
// stage left there (encode_lattice_resident): only the streams' bytes come
// back.  What stays on the CPU: fitting the source model (from the
// device's statistics), the choice between a segment's box and point
// streams, and padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coding/rans_core.hpp"
#include "coding/symbol_core.hpp"
#include "payload/ans_streams.hpp"
#include "cuda/lrsuq_gpu.hpp"

namespace cepam::gpu {

// Codes `segments` streams: stream s is symbols[first[s] .. first[s + 1])
// (host memory, first[0] = 0), no padding.  Appends the streams, one after
// another, to out and their byte lengths to sizes.  Throws DeviceError for
// CUDA failures.
void rans_encode_segments(const AnsSymbol* symbols, const std::uint64_t* first,
                          std::size_t segments, int device, std::uintptr_t stream,
                          std::vector<std::uint8_t>& out, std::vector<std::uint64_t>& sizes,
                          Timing* timing);

// What ans_streams_resident brings back: the streams' bytes, one after another
// (stream k = r segments + s: segment s's box stream for r = 0, its point
// stream for r = 1 where the lattice has a point model, empty where the
// segment has no table), their lengths, the segments with a point table,
// and the last segment's box and point streams' symbols.
struct DeviceStreams {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint64_t> sizes;
  std::vector<unsigned char> tabled;
  std::vector<AnsSymbol> last[2];
};

// The streams of every segment of a body (N sub-vectors, S a segment) from
// its stage H[N], M[N n], beta[N], V[N n] in device memory of `device`,
// with z's tables (host memory: copied to the device): each stream's
// symbols counted, then written, a unit of work a thread
// (unit_symbols; the point model's units each with a PointTable of 7
// KiB of local memory), then coded as rans_encode_segments codes them
// (payload/ans_streams.hpp's assemble_ans_body makes the body).  Throws
// DeviceError for CUDA failures.  (On Z^n the kernel before this one, a
// segment a thread, ran on an H100 to the CPU's bytes; this one has run
// only as its host twin.)
void ans_streams_resident(const SymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                          const double* beta, const double* V, std::size_t N, std::size_t S,
                          int device, std::uintptr_t stream, DeviceStreams& out, Timing* timing);

// Every stream's symbols as ans_streams_resident computes them on the device,
// brought to the host: a check of the symbol kernel apart from the coder
// (bench/gpu_check.py, tests/core/test_cuda.py).
void body_symbols_resident(const SymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                 const double* beta, const double* V, std::size_t N, std::size_t S, int device,
                 std::uintptr_t stream, BodySymbols& out);

// Decodes an ANS body of len bytes (host memory; the caller checks it
// first: check_payload_body) into y[0..m) (device memory of `device`): the
// host parses the body (payload/ans_streams.hpp's DecodePlan: the CPU's
// FormatError for a malformed one), the device decodes every segment at
// once, a block of threads a segment (payload/segment_decode.hpp: the
// stream read on one thread, with the point tables of a segment of the
// point model, the side information and the values on all), and the values
// stay on the device.  Device memory besides y: the body, and for each
// segment a block's trial indices and a piece's side information and
// coordinates (112 KiB on Z^1: 0.9 bytes a coordinate) and, where the
// point model codes some segment, a point table (7 KiB).  Throws the CPU
// decoder's error for the first segment that fails, DeviceError for CUDA
// failures.  The CPU's values and errors on an H200 (docs/guide/gpu.md)
// and through its host twin (decode_ans_body_by_segments).
template <class T>
void decode_ans_body_resident(const LrsuqParams& p, const ChaChaKey& key,
                              const std::uint8_t* body, std::size_t len, std::size_t m,
                              int device, std::uintptr_t stream, T* y, Timing* timing);

}  // namespace cepam::gpu
