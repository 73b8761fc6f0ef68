#include "payload/ans_body.hpp"

#include <type_traits>

#include "coding/bitstream.hpp"
#include "coding/conditional_coder.hpp"
#include "common/errors.hpp"
#include "common/parallel.hpp"
#include "common/scratch.hpp"
#include "payload/ans_streams.hpp"
#include "payload/body_loops.hpp"

namespace cepam {
namespace {

constexpr int kMaxN = 8;
constexpr std::size_t kLayoutBatch = 256;  // coordinates per CellCoder batch

// The coordinates of sub-vectors [j0, j1) in coding order (k = n-1 .. 0 in
// each), with their tables g = beta G_kk and o = beta V_k, for a diagonal
// basis: CellCoder's batches.
class DiagonalBatch {
 public:
  DiagonalBatch() = default;  // (then use() before anything else)
  explicit DiagonalBatch(const TriangularBasis& basis) { use(basis); }
  DiagonalBatch(const DiagonalBatch&) = delete;  // (scales() may point into it)
  DiagonalBatch& operator=(const DiagonalBatch&) = delete;
  void use(const TriangularBasis& basis) {
    n_ = static_cast<std::size_t>(basis.n);
    terms_ = box_terms(basis.n, basis.b.data());
    unit_ = n_ == 1 && terms_.diag[0] == 1.0;
  }
  std::size_t subvectors() const { return kLayoutBatch / n_; }
  std::size_t size(std::size_t j0, std::size_t j1) const { return (j1 - j0) * n_; }

  // Coordinate c of sub-vector j in coding order is k = n-1-c: element j n + n-1-c.
  // Then scales() gives the scales g and o holds the offsets, in coding order.
  void tables(std::size_t j0, std::size_t j1, const double* beta, const double* V) {
    if (unit_) {  // Z^1: g = beta 1 = beta, read where it is
      g_ = beta + j0;
      for (std::size_t j = j0, i = 0; j < j1; ++j, ++i) o[i] = beta[j] * V[j];
      return;
    }
    g_ = g;
    with_dim([&](auto dim) {
      const std::size_t n = dim.value > 0 ? dim.value : n_;
      for (std::size_t j = j0, i = 0; j < j1; ++j, i += n) {
        for (std::size_t c = 0; c < n; ++c) {
          g[i + c] = beta[j] * terms_.diag[c];  // G_kk at coding position c
          o[i + c] = beta[j] * V[j * n + n - 1 - c];
        }
      }
    });
  }
  // The coordinates of the batch in coding order: M's own for n = 1, else
  // a copy (gather) to fill or (scatter) to store.
  const std::int64_t* gather(std::size_t j0, std::size_t j1, const std::int64_t* M) {
    if (n_ == 1) return M + j0;
    with_dim([&](auto dim) {
      const std::size_t n = dim.value > 0 ? dim.value : n_;
      for (std::size_t j = j0, i = 0; j < j1; ++j, i += n)
        for (std::size_t c = 0; c < n; ++c) coded_[i + c] = M[j * n + n - 1 - c];
    });
    return coded_;
  }
  std::int64_t* coordinates(std::size_t j0, std::int64_t* M) { return n_ == 1 ? M + j0 : coded_; }
  void scatter(std::size_t j0, std::size_t j1, std::int64_t* M) const {
    if (n_ == 1) return;
    with_dim([&](auto dim) {
      const std::size_t n = dim.value > 0 ? dim.value : n_;
      for (std::size_t j = j0, i = 0; j < j1; ++j, i += n)
        for (std::size_t c = 0; c < n; ++c) M[j * n + n - 1 - c] = coded_[i + c];
    });
  }

  const double* scales() const { return g_; }

  double o[kLayoutBatch];

 private:
  double g[kLayoutBatch];
  const double* g_ = g;
  bool unit_ = false;
  // fn(std::integral_constant<std::size_t, N>): N = n for n = 1 and 2, so
  // that the loops over a sub-vector's coordinates unroll, else 0 (then n_).
  template <class Fn>
  void with_dim(Fn&& fn) const {
    if (n_ == 1) fn(std::integral_constant<std::size_t, 1>{});
    else if (n_ == 2) fn(std::integral_constant<std::size_t, 2>{});
    else fn(std::integral_constant<std::size_t, 0>{});
  }

  std::size_t n_ = 1;
  BoxTerms terms_;
  std::int64_t coded_[kLayoutBatch];
};

// The coordinates of sub-vectors [j0, j1) of a non-diagonal basis in
// coding order, with their tables (BoxBasis): CellCoder's batches for the
// encoder, which knows every coordinate.
class BoxBatch {
 public:
  explicit BoxBatch(const BoxBasis& basis) : basis_(basis), n_(static_cast<std::size_t>(basis.n())) {}
  std::size_t subvectors() const { return kLayoutBatch / n_; }

  void tables(std::size_t j0, std::size_t j1, const double* beta, const double* V,
              const std::int64_t* M) {
    basis_.tables(M + j0 * n_, V + j0 * n_, beta + j0, j1 - j0, coded, g, o);
  }
  // The batch, sub-vectors [first, last), into enc, noting where each
  // sub-vector's symbols start: sub-vector j's at start(j) (start(last):
  // the end).
  void encode(const CellCoder& cells, std::size_t first, std::size_t last, AnsEncoder& enc) {
    first_ = first;
    const std::size_t count = (last - first) * n_;
    cells.encode_batch(coded, g, o, count, enc, starts_);
    starts_[count] = enc.symbols();
  }
  std::size_t start(std::size_t j) const { return starts_[(j - first_) * n_]; }

  std::int64_t coded[kLayoutBatch];
  double g[kLayoutBatch], o[kLayoutBatch];

 private:
  const BoxBasis& basis_;
  std::size_t n_;
  std::size_t first_ = 0, starts_[kLayoutBatch + 1];
};

}  // namespace

AnsSegmentEncoder::AnsSegmentEncoder(const SourceModel& model, double p,
                                     const TriangularBasis& basis, std::size_t subvectors,
                                     bool point_model)
    : basis_(basis), hcoder_(p), cells_(model), box_(basis) {
  if (basis.n > kMaxN) throw InvalidArgument("basis dimension too large");
  if (point_model) points_ = std::make_unique<PointCoder>(model, basis);
  restart(subvectors);
}

bool is_diagonal(const TriangularBasis& basis) {
  for (int i = 0; i < basis.n; ++i)
    for (int k = 0; k < basis.n; ++k)
      if (i != k && basis.b[static_cast<std::size_t>(i * basis.n + k)] != 0.0) return false;
  return true;
}

void AnsSegmentEncoder::restart(std::size_t subvectors) {
  ans_.clear();
  ans_points_.clear();
  points_started_ = false;
  // One symbol per coded H and per coordinate, more only for escapes and
  // coarse tables: room for an eighth more.  (A few escapes past an exact
  // reserve doubled the buffer, copied it and faulted in twice its pages:
  // Z at rms/sigma 100 encoded 1.19x faster at m = 10^5 with the room,
  // 1.10x at 10^6.  Room never written takes no memory: pages are mapped
  // as they are written.)
  const std::size_t h = hcoder_.coded() ? 1 : 0;
  const std::size_t symbols = subvectors * (static_cast<std::size_t>(basis_.n) + h);
  ans_.reserve(symbols + symbols / 8 + 64);
}

void AnsSegmentEncoder::encode_h(std::size_t count, const std::uint32_t* H,
                                 AnsEncoder& enc) const {
  for (std::size_t j = 0; j < count; ++j) hcoder_.encode(H[j], enc);
}

void AnsSegmentEncoder::encode_block(std::size_t count, const std::uint32_t* H,
                                     const std::int64_t* M, const double* beta,
                                     const double* V) {
  const std::size_t n = static_cast<std::size_t>(basis_.n);
  const std::size_t h_first = ans_.symbols();
  encode_h(count, H, ans_);
  if (!is_diagonal(basis_)) {
    // The box model codes every sub-vector into ans_.  The point model's
    // stream equals it up to the first sub-vector with a table: it starts
    // there, as a copy, then takes each sub-vector's point, or the escape
    // and then the box model's symbols (and those of the sub-vectors
    // without a table).  The box symbols are computed once, into ans_, and
    // the point model's stream takes copies of its runs of them.
    if (points_started_) ans_points_.put_copy(ans_, h_first, ans_.symbols());
    BoxBatch batch(box_);
    for (std::size_t j0 = 0; j0 < count; j0 += batch.subvectors()) {
      const std::size_t j1 = count - j0 < batch.subvectors() ? count : j0 + batch.subvectors();
      batch.tables(j0, j1, beta, V, M);
      batch.encode(cells_, j0, j1, ans_);
      if (!points_) continue;
      // ans_points_ takes its runs of box symbols from ans_: [start(run), start(j)).
      std::size_t run = j0;
      const auto take_run = [&](std::size_t j) {
        ans_points_.put_copy(ans_, batch.start(run), batch.start(j));
      };
      for (std::size_t j = j0; j < j1; ++j) {
        if (!points_->prepare(beta[j], V + j * n)) continue;
        if (!points_started_) {  // a copy of ans_ up to sub-vector j
          ans_points_ = ans_;
          ans_points_.truncate(batch.start(j));
          points_started_ = true;
        } else {
          take_run(j);
        }
        // Sub-vector j's point, or the escape and then its box symbols.
        run = points_->encode(M + j * n, ans_points_) ? j + 1 : j;
      }
      if (points_started_) take_run(j1);
    }
    return;
  }
  DiagonalBatch batch(basis_);
  for (std::size_t j0 = 0; j0 < count; j0 += batch.subvectors()) {
    const std::size_t j1 = count - j0 < batch.subvectors() ? count : j0 + batch.subvectors();
    batch.tables(j0, j1, beta, V);
    cells_.encode_batch(batch.gather(j0, j1, M), batch.scales(), batch.o, batch.size(j0, j1), ans_);
  }
}

namespace {

// The shortest segment: its length, the model byte, and four states.
std::size_t min_segment_bytes(bool point_model) {
  return segment_prefix(point_model) + 8 * static_cast<std::size_t>(kStreams);
}

// A segment is its length, the model byte (where the lattice has a point
// model), then its rANS stream: begin_segment appends the first two (the
// length to be filled in) and returns where the segment starts;
// end_segment fills in the length of what follows it.
std::size_t begin_segment(std::vector<std::uint8_t>& out, bool model_byte, bool points) {
  const std::size_t at = out.size();
  out.resize(at + 4);
  if (model_byte) out.push_back(points ? 1 : 0);
  return at;
}
void end_segment(std::vector<std::uint8_t>& out, std::size_t at) {
  const std::size_t size = out.size() - at - 4;
  if (size > 0xffffffffu) throw EncodingError("an entropy-coded segment is longer than 4 GiB");
  store_le(out.data() + at, size, 4);
}

// Appends a segment whose rANS stream is `stream`.
void put_segment(std::vector<std::uint8_t>& out, bool model_byte, bool points,
                 const std::vector<std::uint8_t>& stream) {
  append_segment(out, model_byte, points, stream.data(), stream.size());
}

}  // namespace

void append_segment(std::vector<std::uint8_t>& out, bool model_byte, bool points,
                    const std::uint8_t* stream, std::size_t stream_size) {
  const std::size_t at = begin_segment(out, model_byte, points);
  out.insert(out.end(), stream, stream + stream_size);
  end_segment(out, at);
}

void AnsSegmentEncoder::finish(std::vector<std::uint8_t>& out, std::size_t min_stream) const {
  if (!points_started_) {  // the box model alone (or the same stream both ways), coded in place
    const std::size_t at = begin_segment(out, points_ != nullptr, false);
    ans_.finish(out, min_stream);
    end_segment(out, at);
    return;
  }
  std::vector<std::uint8_t> stream;
  bool use_points = false;
  {
    std::vector<std::uint8_t> box;
    const AnsEncoder* both[] = {&ans_, &ans_points_};
    std::vector<std::uint8_t>* outs[] = {&box, &stream};
    AnsEncoder::finish_together(both, outs, 2);
    use_points = stream.size() < box.size();
    if (!use_points) stream.swap(box);
    if (stream.size() < min_stream) {  // padded
      stream.clear();
      (use_points ? ans_points_ : ans_).finish(stream, min_stream);
    }
  }
  put_segment(out, points_ != nullptr, use_points, stream);
}

void AnsSegmentEncoder::finish_together(const AnsSegmentEncoder* const* segments,
                                        std::vector<std::uint8_t>* const* outs, std::size_t k) {
  const AnsEncoder* streams[AnsEncoder::kTogether];
  std::vector<std::uint8_t> coded[AnsEncoder::kTogether];
  std::vector<std::uint8_t>* coded_at[AnsEncoder::kTogether];
  std::size_t together = 0;  // the segments of one stream, coded together below
  std::size_t which[AnsEncoder::kTogether];
  for (std::size_t t = 0; t < k; ++t) {
    if (segments[t]->points_started_) {  // (pairs its own two streams)
      segments[t]->finish(*outs[t]);
      continue;
    }
    streams[together] = &segments[t]->ans_;
    coded_at[together] = &coded[together];
    which[together++] = t;
  }
  if (together > 0) AnsEncoder::finish_together(streams, coded_at, together);
  for (std::size_t u = 0; u < together; ++u) {
    const AnsSegmentEncoder& segment = *segments[which[u]];
    put_segment(*outs[which[u]], segment.points_ != nullptr, false, coded[u]);
  }
}

AnsBody::AnsBody(const std::uint8_t* data, std::size_t len, bool point_model,
                 std::size_t segments, bool model_tables)
    : data_(data), model_(SourceModel::parse(data, len, &model_size_, model_tables)) {
  std::size_t pos = model_size_;
  const std::size_t least = min_segment_bytes(point_model);
  // Checked before anything is allocated: the body can hold that many segments.
  if (segments != kAnySegments && segments > (len - pos) / least)
    throw FormatError("body too short for its number of segments");
  segments_.reserve(segments != kAnySegments ? segments : (len - pos) / least);
  while (pos < len && segments_.size() != segments) {
    if (len - pos < 4) throw FormatError("body truncated in a segment length");
    const std::size_t size = static_cast<std::size_t>(load_le(data + pos, 4));
    pos += 4;
    if (size > len - pos) throw FormatError("segment length overruns the body");
    if (size < least - 4) throw FormatError("segment too short for its stream");
    Segment s{pos, size, false};
    if (point_model) {
      if (data[pos] > 1) throw FormatError("unknown lattice point model");
      s.points = data[pos] == 1;
      ++s.offset;
      --s.size;
    }
    segments_.push_back(s);
    pos += size;
  }
  if (segments != kAnySegments && segments_.size() != segments)
    throw FormatError("body has fewer segments than its coordinates need");
  if (pos != len) throw FormatError("body has trailing data after its last segment");
}

AnsSegmentDecoder::AnsSegmentDecoder(const AnsBody& body, std::size_t segment)
    : model_(body.model()),
      points_(body.segments()[segment].points),
      ans_(body.data() + body.segments()[segment].offset, body.segments()[segment].size) {}

// A block of a segment with a non-diagonal basis, as the decoder meets it:
// runs of sub-vectors that the box model codes alone (no point table; the
// whole block where the segment has no point model), each ended by a
// sub-vector with a table, which takes its point, or the escape and then
// the box model's symbols.  next() finds the next run [j0, j) (preparing
// the point coder's table for the sub-vector that ends it: the coder holds
// the table of the last sub-vector prepared); point() decodes that
// sub-vector, if any.  Once done(), next() gives an empty run.
class AnsSegmentDecoder::BoxRuns {
 public:
  BoxRuns(AnsSegmentDecoder& d, const TriangularBasis& basis, const MBlock& block)
      : d_(d), b_(block), n_(static_cast<std::size_t>(basis.n)) {
    if (!d.box_ || d.box_->n() != basis.n) d.box_ = std::make_unique<BoxBasis>(basis);
    if (d.points_ && !d.point_coder_) d.point_coder_ = std::make_unique<PointCoder>(d.model_, basis);
    points_ = d.points_ ? d.point_coder_.get() : nullptr;
  }
  bool done() const { return j0_ >= b_.count; }
  void next() {
    j_ = j0_;
    while (j_ < b_.count && !(points_ && points_->prepare(b_.beta[j_], b_.V + j_ * n_))) ++j_;
  }
  std::size_t length() const { return j_ - j0_; }
  const double* beta() const { return b_.beta + j0_; }
  const double* V() const { return b_.V + j0_ * n_; }
  std::int64_t* M() const { return b_.M + j0_ * n_; }
  void point() {
    if (j_ == b_.count) {
      j0_ = j_;
      return;
    }
    std::int64_t* m = b_.M + j_ * n_;
    if (!points_->decode(d_.ans_, m)) {
      CellCoder(d_.model_).decode_box(*d_.box_, 1, b_.beta + j_, b_.V + j_ * n_, d_.ans_, m);
      if (points_->listed(m)) throw FormatError(read_message(kReadNonCanonicalPoint));
    }
    j0_ = j_ + 1;
  }

 private:
  AnsSegmentDecoder& d_;
  const MBlock b_;
  std::size_t n_;
  PointCoder* points_;
  std::size_t j0_ = 0, j_ = 0;
};

void AnsSegmentDecoder::decode_h(double p, std::size_t count, std::uint32_t* H) {
  GeometricCoder(p).decode_batch(count, ans_, H);
}

void AnsSegmentDecoder::decode_m(const TriangularBasis& basis, std::size_t N, const double* beta,
                                 const double* V, std::int64_t* M) {
  const CellCoder cells(model_);
  if (basis.n > kMaxN) throw InvalidArgument("basis dimension too large");
  if (!is_diagonal(basis)) {
    BoxRuns runs(*this, basis, {N, beta, V, M});
    while (!runs.done()) {
      runs.next();
      cells.decode_box(*box_, runs.length(), runs.beta(), runs.V(), ans_, runs.M());
      runs.point();
    }
    return;
  }
  // A diagonal basis: batches of coordinates in coding order.
  DiagonalBatch batch(basis);
  for (std::size_t j0 = 0; j0 < N; j0 += batch.subvectors()) {
    const std::size_t j1 = N - j0 < batch.subvectors() ? N : j0 + batch.subvectors();
    batch.tables(j0, j1, beta, V);
    cells.decode_batch(batch.scales(), batch.o, batch.size(j0, j1), ans_, batch.coordinates(j0, M));
    batch.scatter(j0, j1, M);
  }
}

void AnsSegmentDecoder::decode_boxes_with(AnsSegmentDecoder& other, const TriangularBasis& basis,
                                          const MBlock& mine, const MBlock& theirs) {
  // The two segments' runs of the box model side by side (each then takes
  // its point, if its run ended at one).
  BoxRuns a(*this, basis, mine), b(other, basis, theirs);
  const CellCoder cells(model_);
  while (!a.done() || !b.done()) {
    a.next();
    b.next();
    cells.decode_boxes(*box_, {a.length(), a.beta(), a.V(), &ans_, a.M()},
                       {b.length(), b.beta(), b.V(), &other.ans_, b.M()});
    a.point();
    b.point();
  }
}

void AnsSegmentDecoder::decode_m_together(AnsSegmentDecoder* const* decs, const MBlock* blocks,
                                          std::size_t k, const TriangularBasis& basis) {
  if (k < 1 || k > CellCoder::kTogether) throw InvalidArgument("decode_m_together takes 1 to 4 segments");
  const SourceModel& model = decs[0]->model_;
  for (std::size_t t = 1; t < k; ++t)
    if (&decs[t]->model_ != &model) throw InvalidArgument("segments of different bodies");
  if (basis.n > kMaxN) throw InvalidArgument("basis dimension too large");
  if (!is_diagonal(basis)) {
    for (std::size_t t = 0; t < k; t += 2) {
      const MBlock& b = blocks[t];
      if (t + 1 < k) decs[t]->decode_boxes_with(*decs[t + 1], basis, b, blocks[t + 1]);
      else decs[t]->decode_m(basis, b.count, b.beta, b.V, b.M);
    }
    return;
  }
  const CellCoder cells(model);
  DiagonalBatch batches[CellCoder::kTogether];
  for (std::size_t t = 0; t < k; ++t) batches[t].use(basis);
  std::size_t at[CellCoder::kTogether] = {}, end[CellCoder::kTogether];
  CellCoder::Batch runs[CellCoder::kTogether];
  const auto more = [&] {
    for (std::size_t t = 0; t < k; ++t)
      if (at[t] < blocks[t].count) return true;
    return false;
  };
  while (more()) {
    for (std::size_t t = 0; t < k; ++t) {
      DiagonalBatch& batch = batches[t];
      const MBlock& b = blocks[t];
      end[t] = b.count - at[t] < batch.subvectors() ? b.count : at[t] + batch.subvectors();
      batch.tables(at[t], end[t], b.beta, b.V);
      runs[t] = {batch.scales(), batch.o, batch.size(at[t], end[t]), &decs[t]->ans_,
                 batch.coordinates(at[t], b.M)};
    }
    cells.decode_batches(runs, k);
    for (std::size_t t = 0; t < k; ++t) {
      batches[t].scatter(at[t], end[t], blocks[t].M);
      at[t] = end[t];
    }
  }
}

// --- The coder of payload/body.cpp's table: its threaded loops ---------------

namespace {

// The segments every thread must have for the ANS encoder to group them
// `width` (2 or 4) at a time (SegmentTasks).  Each segment of a group
// beyond the first holds its symbols (8 bytes a symbol: 1 MB for Z, 1.2 MB
// for E8): pairs from 8 segments a thread (at most 1 byte a coordinate for
// Z), four from 48 (0.5 byte; docs/guide/performance.md, "Sizes chosen by
// measurement").
std::size_t encode_group_segments(std::size_t width) { return width <= 2 ? 8 : 48; }
// The decoder's: the width itself.
std::size_t decode_group_segments(std::size_t width) { return width; }
// The ANS encoder keeps its word buffers from segment to segment where every
// thread has at least this many segments.
constexpr std::size_t kKeepWordsSegments = 16;

// The decoder's buffers of one segment: the trial indices of a block, and
// the side information (beta, dither) and lattice points of a piece.
struct DecodeBuffers {
  Scratch<std::uint32_t> H;
  Scratch<std::int64_t> M;
  Scratch<double> beta, V;
  DecodeBuffers(std::size_t N, std::size_t n)
      : H(std::min(N, kAnsBlock)), M(std::min(N, piece(n)) * n), beta(std::min(N, piece(n))),
        V(std::min(N, piece(n)) * n) {}
  static std::size_t piece(std::size_t n) { return piece_subvectors(static_cast<int>(n)); }
};

// What the decoder hands on: `count` sub-vectors' trial indices, side
// information and lattice points.
struct DecodedPiece {
  const std::uint32_t* H;
  const double* beta;
  const double* V;
  const std::int64_t* M;
};

// The buffers of one ANS block: trial indices, lattice points and side
// information (beta, dither) of up to kAnsBlock sub-vectors.
struct AnsBlock {
  Scratch<std::uint32_t> H;
  Scratch<std::int64_t> M;
  Scratch<double> beta, V;
  AnsBlock(std::size_t N, std::size_t n)
      : H(block(N)), M(block(N) * n), beta(block(N)), V(block(N) * n) {}
  static std::size_t block(std::size_t N) { return N < kAnsBlock ? N : kAnsBlock; }
};

// How the segments of an ANS body go to the threads.  Where every thread
// has needs(width) segments or more (at least `width`: the encoder asks
// more, its bound on the memory its groups hold), a task takes `width`
// segments and codes or decodes them together (their serial chains
// interleaved); with too few for `widest` (a power of 2), half as many,
// down to 2.  These groups come first, in a number that is a multiple of
// the threads, so that they come out even, and the rest (the short last
// segment among them) go one a task.  Only the speed depends on it: every
// segment is coded alone.
struct SegmentTasks {
  std::size_t width, groups, count;  // the tasks: `groups` groups, then single segments
  SegmentTasks(std::size_t segments, int threads, std::size_t widest,
               std::size_t (*needs)(std::size_t width)) {
    const std::size_t w = threads < 1 ? 1 : static_cast<std::size_t>(threads);
    const auto enough = [&](std::size_t k) { return segments >= std::max(k, needs(k)) * w; };
    for (width = widest; width > 2 && !enough(width);) width /= 2;
    groups = enough(width) ? segments / width / w * w : 0;
    count = groups + (segments - width * groups);
  }
  bool grouped(std::size_t t) const { return t < groups; }
  std::size_t first(std::size_t t) const { return t < groups ? width * t : width * groups + (t - groups); }
};

// Decodes an ANS body, its segments in parallel, block by block (a
// block's H, then its M piece by piece), and calls sink(j0, count, piece)
// with each piece's symbols and side information (from several threads at
// once, for disjoint pieces); checks each segment's end.  Holds
// DecodeBuffers for one segment, or two, a thread.
template <class Sink>
void decode_ans_blocks(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                       std::size_t len, std::size_t m, int threads, Sink&& sink) {
  const std::size_t N = subvectors(p, m);
  const AnsBody ans(body, len, uses_point_model(p.lattice), body_segments(m, p.n));
  const double accept = acceptance_probability(p);
  const TriangularBasis basis = lattice_basis(p);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t S = ans.segments().size();
  const auto finish = [&](AnsSegmentDecoder& dec, std::size_t s) {
    const std::size_t padding = dec.finish();
    if (padding != 0 && !segment_may_pad(s, S, len, m))
      throw FormatError(read_message(kReadPaddingBeyond));
  };
  const std::size_t P = DecodeBuffers::piece(n);
  // The side information of the piece of `count` sub-vectors at k0 in the
  // block at j0 (whose H are decoded).
  const auto side_info = [&](std::size_t j0, std::size_t k0, std::size_t count, DecodeBuffers& b) {
    lrsuq_side_info(p, ks, b.H.data() + k0, j0 + k0, j0 + k0 + count, b.beta.data(), b.V.data());
  };
  const auto hand_on = [&](std::size_t j0, std::size_t k0, std::size_t count, DecodeBuffers& b) {
    sink(j0 + k0, count, DecodedPiece{b.H.data() + k0, b.beta.data(), b.V.data(), b.M.data()});
  };
  const auto segment = [&](std::size_t s) {
    const SegmentRange range = segment_range(p, N, s);
    AnsSegmentDecoder dec(ans, s);
    DecodeBuffers b(range.last - range.first, n);
    for_each_block(range.first, range.last, [&](std::size_t j0, std::size_t count) {
      dec.decode_h(accept, count, b.H.data());
      for (std::size_t k0 = 0; k0 < count; k0 += P) {
        const std::size_t c = std::min(P, count - k0);
        side_info(j0, k0, c, b);
        dec.decode_m(basis, c, b.beta.data(), b.V.data(), b.M.data());
        hand_on(j0, k0, c, b);
      }
    }, kAnsBlock);
    finish(dec, s);
  };
  // A group of segments is decoded block by block in step, their serial
  // decoding chains interleaved where the coder allows (AnsSegmentDecoder::
  // decode_m_together): four segments where the conditional coder
  // interleaves four streams (a diagonal basis, AVX-512), else two.  A
  // group that fails is decoded again one segment at a time, so that the
  // error is the first in segment order, as ungrouped (at most twice the
  // work, on the error path only).
  const SegmentTasks tasks(S, threads, is_diagonal(basis) ? CellCoder::streams_together() : 2,
                           decode_group_segments);
  const auto together = [&](std::size_t s) {
    const std::size_t k = tasks.width;
    std::vector<SegmentRange> r;
    std::vector<AnsSegmentDecoder> d;
    std::vector<DecodeBuffers> b;
    r.reserve(k);
    d.reserve(k);
    b.reserve(k);
    for (std::size_t t = 0; t < k; ++t) {
      r.push_back(segment_range(p, N, s + t));
      d.emplace_back(ans, s + t);
      b.emplace_back(r[t].last - r[t].first, n);
    }
    AnsSegmentDecoder* decs[CellCoder::kTogether];
    for (std::size_t t = 0; t < k; ++t) decs[t] = &d[t];
    // The last segment of the group may be the body's last, with fewer blocks.
    for (std::size_t o = 0; r[0].first + o < r[0].last; o += kAnsBlock) {
      std::size_t c[CellCoder::kTogether];
      for (std::size_t t = 0; t < k; ++t) {
        const std::size_t j0 = r[t].first + o;
        c[t] = j0 < r[t].last ? std::min(kAnsBlock, r[t].last - j0) : 0;
        if (c[t] != 0) d[t].decode_h(accept, c[t], b[t].H.data());
      }
      for (std::size_t k0 = 0; k0 < c[0]; k0 += P) {
        AnsSegmentDecoder::MBlock blocks[CellCoder::kTogether];
        for (std::size_t t = 0; t < k; ++t) {
          const std::size_t e = k0 < c[t] ? std::min(P, c[t] - k0) : 0;
          if (e != 0) side_info(r[t].first + o, k0, e, b[t]);
          blocks[t] = {e, b[t].beta.data(), b[t].V.data(), b[t].M.data()};
        }
        AnsSegmentDecoder::decode_m_together(decs, blocks, k, basis);
        for (std::size_t t = 0; t < k; ++t)
          if (blocks[t].count != 0) hand_on(r[t].first + o, k0, blocks[t].count, b[t]);
      }
    }
    for (std::size_t t = 0; t < k; ++t) finish(d[t], s + t);
  };
  parallel_for(threads, tasks.count, [&](std::size_t t) {
    const std::size_t s = tasks.first(t);
    if (!tasks.grouped(t)) return segment(s);
    try {
      together(s);
    } catch (...) {
      for (std::size_t u = 0; u < tasks.width; ++u) segment(s + u);
      throw;
    }
  });
}

}  // namespace

void AnsBodyCoder::check(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                         std::size_t m) {
  // (AnsBody checks the model, the segments' lengths and model bytes; the
  // decoder builds the model's tables, this check needs none.)
  AnsBody(body, len, uses_point_model(p.lattice), body_segments(m, p.n), false);
}
// The model is fitted first; then the segments, each block by block
// (LRSUQ, then the coder), in parallel (a non-finite input makes LRSUQ
// throw in its segment, the first such segment's error is thrown).
template <class T>
void AnsBodyCoder::encode(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                          double factor, int threads, const LatticeStage* stage, double peak,
                          CodedBody& body) {
  const std::size_t N = subvectors(p, m);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const double accept = acceptance_probability(p);
  const CellWidths widths = typical_cell_widths(p);
  const SourceModel model =
      stage != nullptr && stage->statistics != nullptr
          ? SourceModel::fit_from(*stage->statistics, widths.lo, widths.hi, false)
          : SourceModel::fit(x, m, factor, widths.lo, widths.hi, threads, false, peak);
  const TriangularBasis basis = lattice_basis(p);
  // The body's parts: the source model, then each segment.
  const std::size_t S = body_segments(m, p.n);
  body.parts.assign(S + 1, {});
  std::vector<std::uint8_t>* segments = body.parts.data() + 1;
  std::unique_ptr<AnsSegmentEncoder> last;  // kept, in case the body needs padding
  // What a thread keeps from segment to segment: its block buffers and
  // encoders (restarted for each segment), so that a segment takes no fresh
  // memory (no page faults) but where it needs more than the one before.
  struct Worker {
    AnsBlock b;
    std::unique_ptr<AnsSegmentEncoder> enc[AnsEncoder::kTogether];
    LrsuqEncodeScratch lrsuq;
  };
  // A group of segments is finished together (their rANS streams' serial
  // chains interleaved: AnsSegmentEncoder::finish_together); the same
  // bytes.  Four with AVX-512 (two streams a register), else two, where
  // the threads have segments enough (encode_group_segments: the memory
  // the groups hold).  Where every thread has kKeepWordsSegments segments
  // or more an encoder keeps its streams' word buffers (about 60 KB) from
  // segment to segment; with fewer they are freed (docs/guide/
  // performance.md, "Sizes chosen by measurement").
  const SegmentTasks tasks(S, threads, AnsEncoder::streams_together(), encode_group_segments);
  const bool keep_words =
      S >= kKeepWordsSegments * static_cast<std::size_t>(threads < 1 ? 1 : threads);
  // Segment s, coded (not finished) by the worker's encoder number `slot`.
  const auto code = [&](Worker& w, std::size_t slot, std::size_t s) -> AnsSegmentEncoder& {
    const SegmentRange range = segment_range(p, N, s);
    auto& enc = w.enc[slot];
    if (enc == nullptr) {
      enc = std::make_unique<AnsSegmentEncoder>(model, accept, basis, range.last - range.first,
                                                uses_point_model(p.lattice));
      enc->keep_words(keep_words);
    } else {
      enc->restart(range.last - range.first);
    }
    for_each_block(range.first, range.last, [&](std::size_t j0, std::size_t count) {
      lattice_range(p, ks, x, m, factor, stage, j0, j0 + count, w.b.H.data(), w.b.M.data(),
                    w.b.beta.data(), w.b.V.data(), &w.lrsuq);
      enc->encode_block(count, w.b.H.data(), w.b.M.data(), w.b.beta.data(), w.b.V.data());
    }, kAnsBlock);
    return *enc;
  };
  const auto keep_last = [&](std::size_t s, std::unique_ptr<AnsSegmentEncoder>& enc) {
    if (s + 1 == S) last = std::move(enc);
  };
  parallel_for_with(
      threads, tasks.count,
      [&] { return Worker{AnsBlock(std::min(N, segment_subvectors(p.n)), n), {}, {}}; },
      [&](Worker& w, std::size_t t) {
        const std::size_t s = tasks.first(t);
        AnsSegmentEncoder& enc = code(w, 0, s);
        if (!tasks.grouped(t)) {
          enc.finish(segments[s]);
          keep_last(s, w.enc[0]);
          return;
        }
        const AnsSegmentEncoder* group[AnsEncoder::kTogether] = {&enc};
        std::vector<std::uint8_t>* outs[AnsEncoder::kTogether] = {&segments[s]};
        for (std::size_t u = 1; u < tasks.width; ++u) {
          group[u] = &code(w, u, s + u);
          outs[u] = &segments[s + u];
        }
        AnsSegmentEncoder::finish_together(group, outs, tasks.width);
        for (std::size_t u = 0; u < tasks.width; ++u) keep_last(s + u, w.enc[u]);
      });
  // The bomb rule (body.hpp): a body shorter than min_body_bytes(m) is padded
  // at the end of its last segment's stream (re-finished with the length it
  // lacks; only extremely compressible updates need it).
  model.serialize(body.parts[0]);
  const std::size_t size = body.size();
  if (size < min_body_bytes(m) && last != nullptr) {
    std::vector<std::uint8_t>& final_segment = body.parts.back();
    const std::size_t before = size - final_segment.size();
    const std::size_t prefix = segment_prefix(uses_point_model(p.lattice));
    final_segment.clear();
    last->finish(final_segment, min_body_bytes(m) - before - prefix);
  }
}
template <class T>
void AnsBodyCoder::decode(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                          std::size_t len, std::size_t m, int threads, T* y) {
  decode_ans_blocks(p, ks, body, len, m, threads,
                    [&](std::size_t j0, std::size_t count, const DecodedPiece& b) {
    lrsuq_reconstruct(p, b.beta, b.V, b.M, j0, j0 + count, m, y);
  });
}
// (Every sub-vector is in one piece of one segment: each entry of H and
// M is written once, by the thread that decodes its segment.)
void AnsBodyCoder::symbols(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                           std::size_t len, std::size_t m, std::uint32_t* H, std::int64_t* M,
                           int threads) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  decode_ans_blocks(p, ks, body, len, m, threads,
                    [&](std::size_t j0, std::size_t count, const DecodedPiece& b) {
    std::copy_n(b.H, count, H + j0);
    std::copy_n(b.M, count * n, M + j0 * n);
  });
}
bool AnsBodyCoder::matches(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                           std::size_t m, std::size_t s, const std::uint32_t* H, const std::int64_t* M,
                           const double* beta, const double* V) {
  return ans_segment_matches(p, body, len, m, s, H, M, beta, V);
}
void AnsBodyCoder::parts(const std::uint8_t* body, std::size_t len, LatticeId lattice,
                         std::size_t segments,
                         std::vector<std::pair<std::string, std::uint64_t>>& parts) {
  const bool point_model = uses_point_model(lattice);
  const AnsBody ans(body, len, point_model, segments);
  const std::uint64_t framing = ans.segments().size() * segment_prefix(point_model);
  parts.emplace_back("model", 8 * static_cast<std::uint64_t>(ans.model_size()));
  parts.emplace_back("segments", 8 * framing);
  parts.emplace_back("stream", 8 * (len - ans.model_size() - framing));
}

template void AnsBodyCoder::encode<float>(const LrsuqParams&, const KeyStream&, const float*,
                                          std::size_t, double, int, const LatticeStage*, double,
                                          CodedBody&);
template void AnsBodyCoder::encode<double>(const LrsuqParams&, const KeyStream&, const double*,
                                           std::size_t, double, int, const LatticeStage*, double,
                                           CodedBody&);
template void AnsBodyCoder::decode<float>(const LrsuqParams&, const KeyStream&, const std::uint8_t*,
                                          std::size_t, std::size_t, int, float*);
template void AnsBodyCoder::decode<double>(const LrsuqParams&, const KeyStream&,
                                           const std::uint8_t*, std::size_t, std::size_t, int,
                                           double*);

}  // namespace cepam
