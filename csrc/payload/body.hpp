// The body of a payload: everything between header and tag, for one of the
// body coders (payload/body.cpp's table, BodyCoders).  This is the core's
// whole encode/decode path: LRSUQ, the side information, and the entropy
// coder.
//
// Coder 1 ("golomb"), the paper's choice:
//   u32 Golomb parameter, u8 exp-Golomb order, u64 H bits, u64 M bits
//   (little-endian), then the H and M sections of payload/golomb_body.hpp.
// Coder 2 ("ans"): payload/ans_body.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "coding/source_model.hpp"
#include "payload/coded_body.hpp"
#include "random/chacha20.hpp"
#include "lrsuq/quantizer.hpp"

namespace cepam {

enum class Coder : int { Golomb = 1, Ans = 2 };

// The LRSUQ stage of all N = ceil(m / n) sub-vectors when it was computed
// elsewhere (the CUDA kernels, csrc/cuda/lrsuq_gpu.hpp): H[N], M[N n] and the
// side information beta[N], V[N n], exactly as lrsuq_encode_range gives
// them.  The body coders then code these instead of running the quantizer
// (x still gives the ANS coder its source model unless `statistics` does:
// the model's statistics of x factor computed elsewhere too, the CUDA
// kernels of csrc/cuda/model_gpu.hpp; then x is never read); the bytes are
// the same.
struct LatticeStage {
  const std::uint32_t* H;
  const std::int64_t* M;
  const double* beta;
  const double* V;
  const SourceModel::Statistics* statistics = nullptr;
};

// The bomb rule: a body of len bytes may declare at most
// kCoordinatesPerBodyBit x 8 len coordinates, so that decoding costs the
// server memory and time in proportion to the bytes it received (1024
// coordinates a bit: a 1 KB body decodes to at most 8.4 M coordinates, 64
// MiB as float64).  The decoders check it before anything sized by m is
// allocated.  Golomb bodies hold at least one bit per coordinate; the
// encoder pads an ANS body (coding/rans.hpp) that would be shorter than
// min_body_bytes(m) -- a constant far below the noise can code in less than
// 10^-6 bits a coordinate -- and the decoder accepts padding only in a body
// at most kPaddingSlack bytes longer than that, so padding cannot be used
// to make a payload longer than the rule asks.
inline constexpr std::uint64_t kCoordinatesPerBodyBit = 1024;
inline constexpr std::size_t kPaddingSlack = 16;
inline std::size_t min_body_bytes(std::size_t m) {
  constexpr std::size_t per_byte = 8 * kCoordinatesPerBodyBit;
  return m / per_byte + (m % per_byte != 0 ? 1 : 0);
}

// Whether segment s of an ANS body of `segments` segments, len bytes and m
// coordinates may end in padding (coding/rans.hpp): only the last, and only
// in a body no longer than the bomb rule asks (every decoder's rule).
inline bool segment_may_pad(std::size_t s, std::size_t segments, std::size_t len, std::size_t m) {
  return s + 1 == segments && len <= min_body_bytes(m) + kPaddingSlack;
}

// The body coders of the core (body.cpp's BodyCoders), in code order: the
// one table the binding exports (cepam's _core.CODERS).  A row: the code,
// the name, the file of the coder's CPU code, the `_cuda` functions that
// code and decode a whole body on a GPU, and whether that encoder takes the
// source model's statistics (payload/golomb_body.hpp's GolombBodyCoder,
// payload/ans_body.hpp's AnsBodyCoder).
struct BodyCoderInfo {
  Coder id;
  const char* name;
  const char* cpu;
  const char* device_encode;
  const char* device_decode;
  bool device_encode_takes_model;
};
std::vector<BodyCoderInfo> body_coders();

// Encodes x[0..m) * factor; returns the body in parts, to be written into
// the caller's buffer (payload/coded_body.hpp).  threads: how many threads
// may work on it (>= 1; see common/parallel.hpp); the bytes are the same
// for every count.  peak: max |x[i]| where the caller has it (the clip's
// norm_pass, lrsuq/norm.hpp), else negative: the ANS coder's source model
// then takes it in a pass over x (the same bytes either way).
template <class T>
CodedBody encode_payload_body(const LrsuqParams& p, const KeyStream& ks, const T* x,
                              std::size_t m, double factor, Coder coder, int threads = 1,
                              const LatticeStage* stage = nullptr, double peak = -1.0);

// Checks what can be checked of a body before anything sized by m is
// allocated: the bomb rule, the coder's parameters, and for the Golomb coder
// that m fits the sections (at least one bit per coordinate); for the ANS
// coder the source model and the stream's length.  Throws FormatError.
void check_payload_body(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                        std::size_t m, Coder coder);

// Decodes a body of len bytes into y[0..m), on up to `threads` threads (the
// same values, and the same error, for every count).  The caller bounds m
// (both coders check m against the body's length before allocating, and
// work in chunks: O(threads) chunk buffers besides the output).
template <class T>
void decode_payload_body(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                         std::size_t len, std::size_t m, Coder coder, T* y, int threads = 1);

// The trial indices and lattice coordinates in a body, written into the
// caller's H[0..N) and M[0..N n) (N = ceil(m / n) sub-vectors; every entry
// is written, by the threads that decode it: no pass over them on the
// calling thread), for decoding on a GPU, tests and tools.  Call
// check_payload_body first: it bounds m by the body's length, and so the
// arrays the caller allocates.  On an error the arrays' contents are
// unspecified.
void decode_payload_symbols(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                            std::size_t len, std::size_t m, Coder coder, std::uint32_t* H,
                            std::int64_t* M, int threads = 1);

// Whether segment s of `body` (a body of m coordinates coded elsewhere,
// by a GPU) is the segment the CPU's coder codes from that segment's
// coordinates values[0 .. count) (count: min(m, (s + 1) S n) - s S n, x *
// 1, the update's, before the factor): for the ANS coder with the body's
// own source model (ans_streams.hpp's ans_segment_matches), for the Golomb
// coder with its parameters (golomb_body.hpp's golomb_segment_matches).
// The host's check of one segment chosen by the caller; equal segments
// decode to equal values.  Throws FormatError for a malformed body,
// InvalidArgument for a segment it lacks or a wrong number of values, and
// the codec's EncodingError where the host cannot encode the segment.
template <class T>
bool segment_matches(const LrsuqParams& p, const ChaChaKey& key, Coder coder,
                     const std::uint8_t* body, std::size_t len, std::size_t m, double factor,
                     std::size_t s, const T* values, std::size_t count);

// The body's parts and their sizes in bits (without the secret); for the
// ANS coder, "model" (the source model), "segments" (each segment's length
// and model byte) and "stream" (the segments' rANS streams).
// segments: the number an ANS body must have (body_segments), or
// AnsBody::kAnySegments to take what it holds.
std::vector<std::pair<std::string, std::uint64_t>> payload_body_parts(const std::uint8_t* body,
                                                                      std::size_t len,
                                                                      Coder coder,
                                                                      LatticeId lattice,
                                                                      std::size_t segments);

}  // namespace cepam
