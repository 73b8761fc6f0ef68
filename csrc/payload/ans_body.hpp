// Payload body coder 2 ("ans"): the source model, then the update's
// sub-vectors in the segments of payload/segments.hpp, each coded on its
// own: its own rANS states, its own choice of lattice model, and its byte
// length in front.
//
// In a segment's rANS stream: every trial index H_j (exact Geometric(p)
// model) and every lattice coordinate, coded conditionally on the decoder's
// side information: the scale beta_j = r(U_j) / rho and the dither
// V_{j, H_j} of each sub-vector (see coding/conditional_coder.hpp), block by
// block, kAnsBlock sub-vectors a block: the H of the block (its model needs
// nothing), then its M, so the decoder needs O(kAnsBlock) memory besides the
// output.
//
// Layout (format version 3): source model (SourceModel::serialize), then for
// each of the ceil(N / S) segments (S = kSegmentCoordinates / n sub-vectors,
// N = ceil(m / n)): u32 L (little-endian), the byte length of the rest of
// the segment; for the lattices with a point model (uses_point_model: A2,
// D4, E8) a byte saying which model codes M (0: the box model alone, 1: the
// point model of coding/point_coder.hpp with the box model for its escapes;
// the encoder codes both and keeps the shorter); then the rANS bytes.  The
// body ends with the last segment.
#pragma once

#include <utility>
#include <string>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "payload/body.hpp"
#include "coding/conditional_coder.hpp"
#include "lattice/lattice.hpp"
#include "coding/point_coder.hpp"
#include "coding/rans.hpp"
#include "coding/source_model.hpp"
#include "payload/segments.hpp"

namespace cepam {

inline constexpr std::size_t kAnsBlock = 4096;

// Coordinates a piece: the decoder holds the side information and lattice
// points of a piece of a block at a time (the block's H are decoded first,
// as the format orders them, then its M piece by piece), so that its
// buffers take about 70 KB a segment whatever n.  Not part of the format,
// but a stream with two errors reports the one the decoder meets first,
// so every decoder walks the same pieces (payload/segment_decode.hpp).
inline constexpr std::size_t kPieceCoordinates = 4096;

// Sub-vectors a piece (at least one; kAnsBlock's divisors for n = 1, 2, 4, 8).
inline std::size_t piece_subvectors(int n) {
  const std::size_t coordinates = kPieceCoordinates / static_cast<std::size_t>(n);
  return std::max<std::size_t>(1, std::min(kAnsBlock, coordinates));
}

// Bytes of a segment before its rANS stream: the length, and the model byte.
inline std::size_t segment_prefix(bool point_model) { return point_model ? 5 : 4; }

// Whether an ANS body of this lattice has model bytes (the lattices whose
// cell is not a box).
inline bool uses_point_model(LatticeId id) { return id != LatticeId::Z; }

// True when the basis has no entries off its diagonal (Z^n): then o_k =
// beta V_k, the same whatever the other coordinates (the terms m_i G_ik
// are zeros, which can change at most the sign of a zero o, and neither
// the table nor the cells depend on that sign).
bool is_diagonal(const TriangularBasis& basis);

// The encoder of one segment: encode_block for each block in turn (the H
// and M of its sub-vectors and their side information: beta[count],
// V[count n]), then finish.  subvectors (the segment's) sizes the symbol
// buffer.  model and basis must outlive it.
class AnsSegmentEncoder {
 public:
  // point_model: code M both ways (box model, point model) and keep the shorter.
  AnsSegmentEncoder(const SourceModel& model, double p, const TriangularBasis& basis,
                    std::size_t subvectors, bool point_model);
  // Starts another segment of `subvectors` sub-vectors (same model, basis
  // and acceptance probability), keeping the symbol buffers: the encoder of
  // a segment can be used for the next, without allocating again.
  void restart(std::size_t subvectors);
  // Whether finish() keeps the streams' word buffers for the next segment
  // (AnsEncoder::keep_words; by default it frees them).
  void keep_words(bool keep) {
    ans_.keep_words(keep);
    ans_points_.keep_words(keep);
  }
  void encode_block(std::size_t count, const std::uint32_t* H, const std::int64_t* M,
                    const double* beta, const double* V);
  // Appends the segment: its length, the model byte, then the rANS stream,
  // padded (coding/rans.hpp) if the stream would be shorter than min_stream
  // bytes (the last segment of a body the bomb rule asks to be longer).
  void finish(std::vector<std::uint8_t>& out, std::size_t min_stream = 0) const;
  // finish() of k = 1 to AnsEncoder::kTogether segments (none padded),
  // segments[t]'s appended to *outs[t]: the same bytes, the rANS streams
  // coded together (AnsEncoder::finish_together) where each segment has
  // one stream (a segment whose point model started finishes alone).
  static void finish_together(const AnsSegmentEncoder* const* segments,
                              std::vector<std::uint8_t>* const* outs, std::size_t k);
  // The symbols of the segment's rANS streams, for coding them elsewhere
  // (payload/ans_streams.hpp): the box model's, and the point model's when
  // it started (else nullptr: finish() codes the box model's alone, and
  // otherwise keeps the shorter of the two).
  const AnsEncoder& box_symbols() const { return ans_; }
  const AnsEncoder* point_symbols() const { return points_started_ ? &ans_points_ : nullptr; }
  bool has_model_byte() const { return points_ != nullptr; }

 private:
  void encode_h(std::size_t count, const std::uint32_t* H, AnsEncoder& enc) const;

  const TriangularBasis& basis_;
  GeometricCoder hcoder_;
  CellCoder cells_;
  BoxBasis box_;
  AnsEncoder ans_;
  std::unique_ptr<PointCoder> points_;  // with point_model
  AnsEncoder ans_points_;               // the point model's stream, once started
  bool points_started_ = false;
};

// Appends a segment as AnsSegmentEncoder::finish does: its length, the
// model byte (with model_byte: 1 when the point model codes M), then its
// rANS stream of `size` bytes.  Throws EncodingError past 4 GiB.
void append_segment(std::vector<std::uint8_t>& out, bool model_byte, bool points,
                    const std::uint8_t* stream, std::size_t size);

// The decoder's view of a body: the source model and where each segment's
// rANS stream lies, checked before anything else is read (FormatError for
// a malformed model, a segment length that overruns the body or is too
// short to hold a stream, a model byte other than 0 and 1, a segment count
// other than the one expected, or bytes after the last segment).  Holds
// O(len) memory at most (a segment takes at least 36 bytes).
class AnsBody {
 public:
  struct Segment {
    std::size_t offset, size;  // the rANS stream: data + offset, size bytes
    bool points;               // the point model codes M
  };
  // segments: the expected count, or kAnySegments to take what the body
  // holds.  model_tables = false: the body is checked only, and model() is
  // not for coding (SourceModel::parse without its tables, whose
  // computation is most of the fixed cost of decoding a small body).
  static constexpr std::size_t kAnySegments = ~std::size_t{0};
  AnsBody(const std::uint8_t* data, std::size_t len, bool point_model,
          std::size_t segments = kAnySegments, bool model_tables = true);

  const SourceModel& model() const { return model_; }
  std::size_t model_size() const { return model_size_; }  // bytes of the source model
  const std::vector<Segment>& segments() const { return segments_; }
  const std::uint8_t* data() const { return data_; }

 private:
  const std::uint8_t* data_;
  std::size_t model_size_ = 0;  // (before model_: parse sets it as model_ is built in place)
  SourceModel model_;
  std::vector<Segment> segments_;
};

// The decoder of one segment: per block, decode_h then decode_m, as the
// stream runs.  Throws FormatError on any inconsistency; finish() checks
// that the stream ended where it should.
class AnsSegmentDecoder {
 public:
  AnsSegmentDecoder(const AnsBody& body, std::size_t segment);
  void decode_h(double p, std::size_t count, std::uint32_t* H);
  void decode_m(const TriangularBasis& basis, std::size_t count, const double* beta,
                const double* V, std::int64_t* M);
  // decode_m of a block of each of k <= CellCoder::kTogether segments of
  // the same body at once (decs[t] with blocks[t]), their decoding chains
  // interleaved: for a diagonal basis (Z^n) by CellCoder::decode_batches,
  // for the others their runs of the box model by CellCoder::decode_boxes,
  // two segments at a time.  The same values as decode_m on each in turn;
  // a count may be 0.
  struct MBlock {
    std::size_t count;
    const double* beta;
    const double* V;
    std::int64_t* M;
  };
  static void decode_m_together(AnsSegmentDecoder* const* decs, const MBlock* blocks,
                                std::size_t k, const TriangularBasis& basis);
  // Checks the stream's end; returns its number of padding symbols.
  std::size_t finish() { return ans_.finish(); }

 private:
  const SourceModel& model_;
  class BoxRuns;  // (ans_body.cpp)
  // decode_m_together's pair of segments with a non-diagonal basis.
  void decode_boxes_with(AnsSegmentDecoder& other, const TriangularBasis& basis,
                         const MBlock& mine, const MBlock& theirs);

  bool points_;  // the point model codes M
  std::unique_ptr<PointCoder> point_coder_;  // (made by the first decode_m)
  std::unique_ptr<BoxBasis> box_;            // (likewise, for a non-diagonal basis)
  AnsDecoder ans_;
};


// The ans coder's row of the body-coder table (payload/body.cpp's
// BodyCoders): its code and name; where its CPU code lives (this header's
// .cpp: the coder's threaded loops beside its format); the `_cuda`
// functions that code and decode a whole body on a GPU (csrc/python/
// cuda_bindings.cpp, which cepam/cuda.py calls through the table), and
// whether the device encoder takes the source model's statistics.  Its
// functions: check (without allocating what m sizes), encode, decode,
// symbols (H and M only), matches (a segment against the CPU's coding of
// its stage) and parts (the sections' sizes in bits).
struct AnsBodyCoder {
  static constexpr Coder id = Coder::Ans;
  static constexpr const char* name = "ans";
  static constexpr const char* cpu = "csrc/payload/ans_body.cpp";
  static constexpr const char* device_encode = "encode_ans_body_resident";
  static constexpr const char* device_decode = "decode_ans_body_resident";
  static constexpr bool device_encode_takes_model = true;

  static void check(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                    std::size_t m);
  template <class T>
  static void encode(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                     double factor, int threads, const LatticeStage* stage, double peak,
                     CodedBody& body);
  template <class T>
  static void decode(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                     std::size_t len, std::size_t m, int threads, T* y);
  static void symbols(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                      std::size_t len, std::size_t m, std::uint32_t* H, std::int64_t* M,
                      int threads);
  static bool matches(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                      std::size_t m, std::size_t s, const std::uint32_t* H, const std::int64_t* M,
                      const double* beta, const double* V);
  static void parts(const std::uint8_t* body, std::size_t len, LatticeId lattice,
                    std::size_t segments, std::vector<std::pair<std::string, std::uint64_t>>& parts);
};

}  // namespace cepam
