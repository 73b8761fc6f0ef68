// Payload body coder 1 ("golomb"): the trial indices H and lattice
// coordinates M, H - 1 with a Golomb code of parameter g (the paper's
// choice; g = 0 means H is always 1 and takes no bits), M with an order-k
// exponential-Golomb code of the zigzagged integers.
//
// Layout (format version 7): u32 g (little-endian), then for each of the
// segments of payload/segments.hpp: u8 k, u64 H bits, u64 M bits, and the
// segment's two byte-aligned sections (its H, then its M), so that segments
// are coded and decoded in parallel.  g is the whole body's (the
// mechanism's), k the segment's own (chosen from its coordinates, so that
// an encoder holds one segment's coordinates at a time, not the update's).
// The decoder checks that each section is consumed exactly and its padding
// is zero, so every payload has one valid encoding.  (Version 6 had one k
// for the whole body, after g; version 5 one pair of sections.)
#pragma once

#include <utility>
#include <string>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "payload/body.hpp"
#include "coding/bitstream.hpp"
#include "coding/golomb_core.hpp"
#include "coding/golomb_read.hpp"
#include "lrsuq/quantizer.hpp"
#include "payload/golomb_segment.hpp"
#include "random/chacha20.hpp"

namespace cepam {

enum class CoderId : int { Golomb = 1 };

// The sections of one segment and their codes' parameters.
struct BodyLayout {
  std::uint32_t golomb = 0;  // Golomb parameter of H - 1; 0: H not coded
  int expg_k = 0;            // order of the exp-Golomb code of M
  std::uint64_t h_bits = 0;  // bits of the H section (before padding)
  std::uint64_t m_bits = 0;  // bits of the M section (before padding)
};

// Bytes of the body's parameter (g), and of a segment's header (its k and
// its sections' lengths).
inline constexpr std::size_t kGolombParams = 4;
inline constexpr std::size_t kGolombSegmentHeader = 1 + 8 + 8;

// Largest accepted Golomb parameter and exp-Golomb order.
inline constexpr std::uint32_t kMaxGolomb = 1u << 16;
inline constexpr int kMaxExpGolombOrder = 54;

// The Golomb parameter that is optimal for Geometric(p) on {1, 2, ...}
// (Gallager and Van Voorhis 1975); 0 when p == 1.
std::uint32_t golomb_parameter(double p);

// The exp-Golomb order that (nearly) minimises the length of M.
int best_expg_order(const std::int64_t* M, std::size_t count);

// The same from a histogram of bit lengths: hist[b] += the number of
// coordinates whose zigzag value has bit length b (add_bit_lengths, summed
// over the chunks of M in any order).
inline constexpr int kBitLengths = 65;
void add_bit_lengths(const std::int64_t* M, std::size_t count, std::uint64_t* hist);
int best_expg_order(const std::uint64_t* hist);

// The codes of the sections, appended to w: H[0..N) with Golomb parameter
// golomb (nothing when 0; H must be 1 then), M[0..count) with order k.
// A section's codes are the concatenation of its chunks' codes.  Throw
// InvalidArgument for an H below 1 or above kTrialCap, or an |M| above kMaxAbsM.
void put_h_codes(const std::uint32_t* H, std::size_t N, std::uint32_t golomb, BitWriter& w);
template <class I>
void put_m_codes(const I* M, std::size_t count, int k, BitWriter& w);

// Appends the body to out and fills layout.h_bits / layout.m_bits.
void encode_body(const std::uint32_t* H, std::size_t N, const std::int64_t* M, std::size_t count,
                 BodyLayout& layout, std::vector<std::uint8_t>& out);

// Parses a body of `len` bytes into H[0..N) and M[0..count).  Throws
// FormatError on any inconsistency.  The caller must have checked that
// the declared counts fit the section lengths (see min_bits_*).
void decode_body(const std::uint8_t* data, std::size_t len, const BodyLayout& layout,
                 std::size_t N, std::size_t count, std::uint32_t* H, std::int64_t* M);

// Checks that the parameters are in range and that the two sections fill
// exactly `len` bytes; throws FormatError otherwise.
void check_sections(const BodyLayout& layout, std::size_t len);

// The sections of a body, read in order a chunk at a time
// (coding/golomb_read.hpp): read_h and read_m may alternate (H and M are
// separate sections); finish_h and finish_m check that a section was
// consumed exactly and its padding is zero.  The constructor runs
// check_body.  Throws FormatError on any inconsistency.
class GolombBodyReader {
 public:
  GolombBodyReader(const std::uint8_t* data, std::size_t len, const BodyLayout& layout,
                   std::uint64_t N, std::uint64_t count);
  void read_h(std::size_t N, std::uint32_t* H);
  void read_m(std::size_t count, std::int64_t* M);
  void finish_h() const;
  void finish_m() const;

 private:
  const std::uint8_t* data_;
  BodyLayout layout_;
  std::uint64_t h_bytes_, m_bytes_;
  BitCursor h_, m_;
};

// check_sections, and that the sections can hold N trial indices and
// `count` coordinates; throws FormatError otherwise.  Callers run it before
// allocating anything sized by N or count.
void check_body(const BodyLayout& layout, std::size_t len, std::uint64_t N, std::uint64_t count);

// A Golomb body's parameter and segments, parsed and checked (FormatError)
// before anything sized by the update is allocated: the parameter, each
// segment's order and lengths against the body (the segments are found from the
// lengths before any is read), `segments` segments exactly, no bytes after
// the last.  check(s, N, count) also checks that segment s can hold N trial
// indices and `count` coordinates; reader(s, N, count) reads it.
class GolombBody {
 public:
  struct Segment {
    std::size_t offset;  // its sections: data + offset, then h_bytes + m_bytes bytes
    BodyLayout layout;
    std::size_t bytes() const { return (layout.h_bits + 7) / 8 + (layout.m_bits + 7) / 8; }
  };
  static constexpr std::size_t kAnySegments = ~std::size_t{0};
  // segments: the expected count, or kAnySegments to take what the body holds.
  GolombBody(const std::uint8_t* data, std::size_t len, std::size_t segments);

  std::uint32_t golomb() const { return golomb_; }
  const std::vector<Segment>& segments() const { return segments_; }
  void check(std::size_t s, std::uint64_t N, std::uint64_t count) const;
  GolombBodyReader reader(std::size_t s, std::uint64_t N, std::uint64_t count) const;

 private:
  const std::uint8_t* data_;
  std::uint32_t golomb_ = 0;
  std::vector<Segment> segments_;
};

// The Golomb body of an update of m coordinates with LRSUQ parameters p,
// parsed (its segments counted from m), with the trial-index rule: H
// uncoded (g = 0) only where every trial succeeds.  Throws FormatError.
GolombBody golomb_body_of(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                          std::size_t m);

// --- A body decoded a segment at a time (payload/golomb_segment.hpp) ------

// What decoding a body by segments needs besides the body and the key:
// its parameter, the sub-vector configuration and each segment's span.
// Throws the CPU decoder's FormatError for a malformed body (golomb_body_of).
struct GolombDecodePlan {
  GolombDecodePlan(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                   std::size_t m);
  std::uint32_t golomb;
  subvector::Config config;
  std::vector<GolombSegmentSpan> segments;
};

// decode_payload_body's values of a Golomb body (and its errors), by
// decode_golomb_segment one segment after another: the GPU kernel's host
// twin.  The caller checks the body first (check_payload_body).
template <class T>
void decode_golomb_body_by_segments(const LrsuqParams& p, const ChaChaKey& key,
                                    const std::uint8_t* body, std::size_t len, std::size_t m,
                                    T* y);

// The bytes of one segment (its header, then its sections), appended to
// out: the sections' codes h (layout.h_bits) and m (layout.m_bits, order
// layout.expg_k), each already padded to a byte.
void append_segment(const BodyLayout& layout, const std::vector<std::uint8_t>& h,
                    const std::vector<std::uint8_t>& m, std::vector<std::uint8_t>& out);

// --- A body coded where the stage ran (a GPU: cuda/golomb_gpu.hpp) -------
//
// A GPU codes every segment at once in units (coding/golomb_core.hpp): the
// units count their codes' bits and their segment's coordinates' bit
// lengths, the host chooses each segment's order and lays out the body
// from the counts (golomb_plan), the units write their codes at their bit
// offsets into the zeroed body, and the host writes the parameter and the
// segments' headers (put_golomb_headers).

// The body's layout from each unit's H and M code bits (of the units of
// u; k[s] segment s's exp-Golomb order): each segment's sections, each
// unit's first bit of its H and of its M codes, the body's length in bytes.
struct GolombPlan {
  std::uint32_t golomb = 0;
  std::vector<BodyLayout> segments;
  std::vector<std::uint64_t> h_pos, m_pos;
  std::size_t bytes = 0;
};
GolombPlan golomb_plan(const GolombUnits& u, std::uint32_t golomb, const int* k,
                       const std::uint64_t* h_bits, const std::uint64_t* m_bits);

// Writes the body's parameter (kGolombParams bytes) at body.
void put_golomb_params(std::uint32_t golomb, std::uint8_t* body);

// Writes a segment's header (kGolombSegmentHeader bytes: its order and its
// sections' lengths) at `at`.
void put_segment_header(const BodyLayout& layout, std::uint8_t* at);

// Writes the body's parameter and each segment's header into body
// (plan.bytes bytes; the rest is the units' codes).
void put_golomb_headers(const GolombPlan& plan, std::uint8_t* body);

// The body of the stage H[N], M[N n] (dimension n, trial indices in [1,
// kTrialCap], 1 where golomb = 0) coded unit by unit as a GPU codes it: the
// host twin of the kernels, giving encode_payload_body's bytes.
std::vector<std::uint8_t> golomb_body_by_units(std::uint32_t golomb, const std::uint32_t* H,
                                               const std::int64_t* M, std::size_t N, int n);

// Whether segment s of `body` (a Golomb body of N sub-vectors of
// dimension n, coded by a GPU) is the segment the CPU's coder codes from
// that segment's stage H, M (relative to its first sub-vector) with the
// body's parameter: its header and sections, byte for byte.  Throws
// FormatError for a malformed body, InvalidArgument for a segment it lacks.
bool golomb_segment_matches(const std::uint8_t* body, std::size_t len, std::size_t N, int n,
                            std::size_t s, const std::uint32_t* H, const std::int64_t* M);

// Fewest bits N trial indices / count coordinates can take: a declared
// count above what the sections can hold is rejected before allocating.
std::uint64_t min_bits_h(const BodyLayout& layout, std::uint64_t N);
std::uint64_t min_bits_m(const BodyLayout& layout, std::uint64_t count);


// The golomb coder's row of the body-coder table (payload/body.cpp's
// BodyCoders): its code and name; where its CPU code lives (this header's
// .cpp: the coder's threaded loops beside its format); the `_cuda`
// functions that code and decode a whole body on a GPU (csrc/python/
// cuda_bindings.cpp, which cepam/cuda.py calls through the table), and
// whether the device encoder takes the source model's statistics.  Its
// functions: check (without allocating what m sizes), encode, decode,
// symbols (H and M only), matches (a segment against the CPU's coding of
// its stage) and parts (the sections' sizes in bits).
struct GolombBodyCoder {
  static constexpr Coder id = Coder::Golomb;
  static constexpr const char* name = "golomb";
  static constexpr const char* cpu = "csrc/payload/golomb_body.cpp";
  static constexpr const char* device_encode = "encode_golomb_body_resident";
  static constexpr const char* device_decode = "decode_golomb_body_resident";
  static constexpr bool device_encode_takes_model = false;

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
