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
#include "payload/segment_decode.hpp"
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

// --- The segments' symbols computed where the stage ran -------------------
//
// The segments' symbols depend only on each sub-vector's H, M, beta and V
// and on tables of a few hundred bytes (coding/symbol_core.hpp) and, for
// the point model (A2, D4, E8), each sub-vector's table of nearby lattice
// points (coding/point_table.hpp), so a GPU computes them where the stage
// left H, M, beta and V (cuda/ans_gpu.cu) and only the streams' bytes come
// back.  These are that path's pieces on the host: the tables, the
// kernel's work one unit after another, and the body assembled from the
// streams.

// The symbol tables for this model, trial-index coder and lattice (valid
// while model and hcoder live; the point model's bounds and basis where
// the lattice has one): z() is their view, which points into this object
// (not copied or moved).  Throws InvalidArgument for a lattice of more
// than 8 dimensions.
class SymbolTables {
 public:
  SymbolTables(const SourceModel& model, const GeometricCoder& hcoder, const LrsuqParams& p);
  SymbolTables(const SymbolTables&) = delete;
  SymbolTables& operator=(const SymbolTables&) = delete;
  const SymbolModel& z() const { return z_; }

 private:
  BoxTerms basis_;
  PointBasis point_basis_;
  SymbolModel z_;
};

// A body's streams' symbols, as the kernels compute them: stream k = r
// segments + s (r = 0: segment s's box stream; r = 1: its point stream,
// where the lattice has a point model) is symbols[first[k] .. first[k +
// 1]); tabled[s]: whether a sub-vector of segment s has a point table
// (else its point stream is empty: the segment is coded with the box
// model alone).
struct BodySymbols {
  std::vector<std::uint64_t> first;
  std::vector<AnsSymbol> symbols;
  std::vector<unsigned char> tabled;
};

// The passes over the units that the kernels run (symbol_units,
// unit_symbols): the box units counted (noting the segments with a
// point frame), the point units of those segments counted (noting the
// segments with a table), then every unit's symbols written.
BodySymbols body_symbols(const SymbolModel& z, std::size_t N, std::size_t S,
                         const std::uint32_t* H, const std::int64_t* M, const double* beta,
                         const double* V);

// body_symbols of x[0..m) * factor with the source model `model`,
// the stage computed by the kernels' per-sub-vector code
// (lrsuq/subvector.hpp).
template <class T>
BodySymbols body_symbols_of(const LrsuqParams& p, const ChaChaKey& key, const T* x,
                            std::size_t m, double factor, const SourceModel& model);

// The body from its model and its streams' bytes for m coordinates (the
// streams of BodySymbols one after another, sizes[k] bytes each): each
// segment with the shorter of its box and point streams (the box stream on
// a tie, or where the segment has no table), with the model byte where
// the lattice has a point model (point_model): the bytes of
// encode_payload_body.  When the bomb rule asks for a longer body (rare:
// the most compressible updates), the last segment's chosen stream is
// coded again on the host with padding, from last_symbols(k) (stream k's
// symbols).
std::vector<std::uint8_t> assemble_ans_body(
    const SourceModel& model, std::size_t m, bool point_model, const std::uint8_t* streams,
    const std::vector<std::uint64_t>& sizes, const std::vector<unsigned char>& tabled,
    const std::function<std::vector<AnsSymbol>(std::size_t)>& last_symbols);

// The ANS body of x[0..m) * factor as the GPU path codes it: the source
// model fitted, every stream's symbols by body_symbols_of, the streams by
// `code`, then assemble_ans_body:
// the bytes of encode_payload_body with the ANS coder.  Throws as
// encode_payload_body.
template <class T>
std::vector<std::uint8_t> encode_ans_body_by_symbols(const LrsuqParams& p,
                                                     const ChaChaKey& key, const T* x,
                                                     std::size_t m, double factor,
                                                     const StreamCoder& code);

// Whether segment s of `body` (an ANS body of m coordinates, coded by a
// GPU) is the segment the CPU's segment encoder codes from that segment's
// stage H, M, beta, V (relative to its first sub-vector) with the body's
// own source model: its model byte and stream, byte for byte (body.hpp's
// segment_matches computes the stage).  Throws FormatError for a malformed
// body, InvalidArgument for a segment it lacks.
bool ans_segment_matches(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                         std::size_t m, std::size_t s, const std::uint32_t* H,
                         const std::int64_t* M, const double* beta, const double* V);

// --- Bodies decoded where the values are wanted ---------------------------
//
// A segment decodes with tables of a few hundred bytes, each sub-vector's
// side information, which a GPU computes from the key, and (point model)
// each sub-vector's table of nearby points (payload/segment_decode.hpp): a
// GPU decodes every segment at once (a block of threads each) straight
// into device memory.  These are that path's pieces on the host.

// What decoding an ANS body of m coordinates a segment at a time needs
// besides the body and the key: the body parsed (its model), the trial
// index's coder, the symbol tables, the sub-vector configuration and the
// segments (points: whether any is the point model's).  Throws the CPU
// decoder's FormatError for a malformed body (AnsBody).  Holds pointers
// into itself: not copied or moved.
struct DecodePlan {
  DecodePlan(const LrsuqParams& p, const std::uint8_t* body, std::size_t len, std::size_t m);
  DecodePlan(const DecodePlan&) = delete;
  DecodePlan& operator=(const DecodePlan&) = delete;
  const SymbolModel& z() const { return tables.z(); }

  AnsBody ans;
  GeometricCoder hcoder;
  SymbolTables tables;
  subvector::Config config;
  std::vector<DecodeSegment> segments;
  bool points;
};

// decode_payload_body's values of an ANS body (and its errors), by
// decode_segment one segment after another: the GPU kernel's host twin.
// The caller checks the body first (check_payload_body), as for
// decode_payload_body.
template <class T>
void decode_ans_body_by_segments(const LrsuqParams& p, const ChaChaKey& key,
                                 const std::uint8_t* body, std::size_t len, std::size_t m, T* y);

}  // namespace cepam
