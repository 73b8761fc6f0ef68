// An ANS body (payload/ans_body.hpp) coded the way the GPU path codes it:
// the LRSUQ stage by the per-sub-vector functions the CUDA kernels run
// (lrsuq/subvector.hpp), each segment's symbols by the CPU's segment
// encoder, then the rANS streams of every segment at once by a StreamCoder:
// the host twin of the CUDA kernel (coding/rans_core.hpp's
// rans_encode_segments) or the kernel itself (cuda/ans_gpu.hpp).  The bytes
// are encode_payload_body's (tests/core/test_rans_core.py checks it over the
// lattices, mechanisms, dtypes and sizes).
//
// Memory: every segment's symbols at once (8 bytes a symbol, about one a
// coordinate), unlike encode_payload_body, which keeps a segment a thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "coding/conditional_coder.hpp"
#include "coding/rans_core.hpp"
#include "coding/source_model.hpp"
#include "coding/symbol_core.hpp"
#include "lrsuq/quantizer.hpp"
#include "payload/ans_body.hpp"
#include "payload/z_decode.hpp"
#include "random/chacha20.hpp"

namespace cepam {

// Codes streams[s] = symbols[first[s] .. first[s + 1]) for s < count
// (first[0] = 0; no padding): appends the streams, one after another, to
// out and their byte lengths to sizes.
using StreamCoder = std::function<void(const AnsSymbol* symbols, const std::uint64_t* first,
                                       std::size_t count, std::vector<std::uint8_t>& out,
                                       std::vector<std::uint64_t>& sizes)>;

// rans_encode_segments on the host (the CUDA kernel's per-stream code, one
// stream after another).
void host_stream_coder(const AnsSymbol* symbols, const std::uint64_t* first, std::size_t count,
                       std::vector<std::uint8_t>& out, std::vector<std::uint64_t>& sizes);

// The ANS body of x[0..m) * factor (the LRSUQ stage keyed by `key`, the key
// of the payload's LRSUQ stream), its streams coded by `code`: the bytes of
// encode_payload_body with the ANS coder.  Throws as encode_payload_body.
template <class T>
std::vector<std::uint8_t> encode_ans_body_by_streams(const LrsuqParams& p, const ChaChaKey& key,
                                                     const T* x, std::size_t m, double factor,
                                                     const StreamCoder& code);

// --- Z^n with the symbols computed where the stage ran ---------------------
//
// On Z^n the segments' symbols depend only on each sub-vector's H, M, beta
// and V and on tables of a few hundred bytes (coding/symbol_core.hpp), so
// a GPU computes them where the stage left H, M, beta and V (cuda/ans_gpu.cu)
// and only the streams' bytes come back.  These are that path's pieces on
// the host: the tables, the kernel's work one segment after another, and the
// body assembled from the streams.

// z_block_symbols' tables for this model, trial-index coder and basis of
// Z^n (valid while model and hcoder live).  Throws InvalidArgument for a
// basis that is not diagonal or of more than 8 dimensions.
ZSymbolModel z_symbol_model(const SourceModel& model, const GeometricCoder& hcoder,
                            const TriangularBasis& basis);

// The symbols of every segment of a body of N sub-vectors (S a segment),
// given all of H[N], M[N n], beta[N], V[N n], as the kernel computes them:
// first[s] .. first[s + 1] is segment s's run (first has segments + 1
// entries), and symbols their concatenation.
void z_segments_symbols(const ZSymbolModel& z, std::size_t N, std::size_t S,
                        const std::uint32_t* H, const std::int64_t* M, const double* beta,
                        const double* V, std::vector<std::uint64_t>& first,
                        std::vector<AnsSymbol>& symbols);

// The body of Z^n from its model and its segments' streams (streams one
// after another, sizes[s] bytes each) for m coordinates: the bytes of
// encode_payload_body.  When the bomb rule asks for a longer body (rare:
// the most compressible updates), the last segment is coded again on the
// host with padding, from last_symbols() (its symbols).
std::vector<std::uint8_t> assemble_z_body(
    const SourceModel& model, std::size_t m, const std::uint8_t* streams,
    const std::vector<std::uint64_t>& sizes,
    const std::function<std::vector<AnsSymbol>()>& last_symbols);

// The ANS body of x[0..m) * factor on Z^n as the GPU path codes it: the
// stage of every sub-vector (lrsuq/subvector.hpp), every segment's symbols
// by z_segments_symbols, the streams by `code`, then assemble_z_body.
// The bytes of encode_payload_body with the ANS coder.  Throws
// InvalidArgument off Z^n, else as encode_payload_body.
template <class T>
std::vector<std::uint8_t> encode_z_ans_body_by_symbols(const LrsuqParams& p,
                                                       const ChaChaKey& key, const T* x,
                                                       std::size_t m, double factor,
                                                       const StreamCoder& code);

// Whether segment s of `body` (an ANS body of m coordinates on Z^n, coded
// by a GPU) is the stream the host codes from that segment's coordinates
// values[0 .. min(m, (s + 1) S n) - s S n) (x * 1, the update's, before the
// factor) with the body's own source model: the host's check of one
// segment chosen by the caller.  Equal streams decode to equal values.
// Throws FormatError for a malformed body, InvalidArgument for a segment it
// lacks or a wrong number of values, and the codec's EncodingError where
// the host cannot encode the segment.
template <class T>
bool z_segment_matches(const LrsuqParams& p, const ChaChaKey& key, const std::uint8_t* body,
                       std::size_t len, std::size_t m, double factor, std::size_t s,
                       const T* values, std::size_t count);

// --- Z^n decoded where the values are wanted -------------------------------
//
// On Z^n a segment's symbols decode with tables of a few hundred bytes and
// each sub-vector's side information, which a GPU computes from the key
// (payload/z_decode.hpp): a GPU decodes every segment at once (a thread
// each) straight into device memory.  These are that path's pieces on the
// host.

// What decoding an ANS body of m coordinates on Z^n a segment at a time
// needs besides the body and the key: the body parsed (its model), the
// trial index's coder, the symbol tables, the sub-vector configuration and
// the segments.  Throws the CPU decoder's FormatError for a malformed body
// (AnsBody), InvalidArgument off Z^n.  Holds pointers into itself: not
// copied or moved.
struct ZDecodePlan {
  ZDecodePlan(const LrsuqParams& p, const std::uint8_t* body, std::size_t len, std::size_t m);
  ZDecodePlan(const ZDecodePlan&) = delete;
  ZDecodePlan& operator=(const ZDecodePlan&) = delete;

  AnsBody ans;
  GeometricCoder hcoder;
  ZSymbolModel z;
  subvector::Config config;
  std::vector<ZSegment> segments;
};

// Throws the CPU decoder's error for the first of `count` segments (in
// order) whose outcome is not kReadOk: FormatError, the codec's error for
// a bad trial index, or DecodingError for values that overflow `dtype`
// ("float32" or "float64"); nothing if all are.
void throw_first_error(const ZSegmentOutcome* outcomes, std::size_t count, const char* dtype);

// decode_payload_body's values of an ANS body on Z^n (and its errors), by
// z_decode_segment one segment after another: the GPU kernel's host twin.
// The caller checks the body first (check_payload_body), as for
// decode_payload_body.
template <class T>
void decode_z_ans_body_by_segments(const LrsuqParams& p, const ChaChaKey& key,
                                   const std::uint8_t* body, std::size_t len, std::size_t m,
                                   T* y);

}  // namespace cepam
