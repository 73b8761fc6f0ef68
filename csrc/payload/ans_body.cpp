#include "payload/ans_body.hpp"

#include <type_traits>

#include "coding/bitstream.hpp"
#include "coding/conditional_coder.hpp"
#include "common/errors.hpp"

namespace cepam {
namespace {

constexpr int kMaxN = 8;
constexpr std::size_t kLayoutBatch = 256;  // coordinates per CellCoder batch

// The coordinates of sub-vectors [j0, j1) in coding order (k = n-1 .. 0 in
// each), with their tables g = beta G_kk and o = beta V_k, for a diagonal
// basis: CellCoder's batches.
class DiagonalBatch {
 public:
  explicit DiagonalBatch(const TriangularBasis& basis)
      : n_(static_cast<std::size_t>(basis.n)), terms_(box_terms(basis.n, basis.b.data())) {}
  std::size_t subvectors() const { return kLayoutBatch / n_; }
  std::size_t size(std::size_t j0, std::size_t j1) const { return (j1 - j0) * n_; }

  // Coordinate c of sub-vector j in coding order is k = n-1-c: element j n + n-1-c.
  void tables(std::size_t j0, std::size_t j1, const double* beta, const double* V) {
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

  double g[kLayoutBatch], o[kLayoutBatch];

 private:
  // fn(std::integral_constant<std::size_t, N>): N = n for n = 1 and 2, so
  // that the loops over a sub-vector's coordinates unroll, else 0 (then n_).
  template <class Fn>
  void with_dim(Fn&& fn) const {
    if (n_ == 1) fn(std::integral_constant<std::size_t, 1>{});
    else if (n_ == 2) fn(std::integral_constant<std::size_t, 2>{});
    else fn(std::integral_constant<std::size_t, 0>{});
  }

  std::size_t n_;
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
    for (std::size_t j = j0, i = 0; j < j1; ++j) {
      const std::int64_t* m = M + j * n_;
      for (std::size_t c = 0; c < n_; ++c, ++i) {
        const std::size_t k = n_ - 1 - c;
        coded[i] = m[k];
        g[i] = beta[j] * basis_.diagonal(static_cast<int>(c));
        o[i] = basis_.offset(static_cast<int>(c), beta[j], V[j * n_ + k],
                             [&](int d) { return static_cast<double>(m[k + static_cast<std::size_t>(d)]); });
      }
    }
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
  // coarse tables.
  const std::size_t h = hcoder_.coded() ? 1 : 0;
  ans_.reserve(subvectors * (static_cast<std::size_t>(basis_.n) + h));
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
    cells_.encode_batch(batch.gather(j0, j1, M), batch.g, batch.o, batch.size(j0, j1), ans_);
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
    AnsEncoder::finish_pair(ans_, box, ans_points_, stream);
    use_points = stream.size() < box.size();
    if (!use_points) stream.swap(box);
    if (stream.size() < min_stream) {  // padded
      stream.clear();
      (use_points ? ans_points_ : ans_).finish(stream, min_stream);
    }
  }
  put_segment(out, points_ != nullptr, use_points, stream);
}

void AnsSegmentEncoder::finish_with(const AnsSegmentEncoder& other, std::vector<std::uint8_t>& out,
                                    std::vector<std::uint8_t>& other_out) const {
  if (points_started_ || other.points_started_) {  // (each pairs its own two streams)
    finish(out);
    other.finish(other_out);
    return;
  }
  std::vector<std::uint8_t> mine, theirs;
  AnsEncoder::finish_pair(ans_, mine, other.ans_, theirs);
  put_segment(out, points_ != nullptr, false, mine);
  put_segment(other_out, other.points_ != nullptr, false, theirs);
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
    cells.decode_batch(batch.g, batch.o, batch.size(j0, j1), ans_, batch.coordinates(j0, M));
    batch.scatter(j0, j1, M);
  }
}

void AnsSegmentDecoder::decode_m_with(AnsSegmentDecoder& other, const TriangularBasis& basis,
                                      const MBlock& mine, const MBlock& theirs) {
  if (&model_ != &other.model_) throw InvalidArgument("segments of different bodies");
  if (basis.n > kMaxN) throw InvalidArgument("basis dimension too large");
  if (!is_diagonal(basis)) {
    // The two segments' runs of the box model side by side (each then
    // takes its point, if its run ended at one).
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
    return;
  }
  const CellCoder cells(model_);
  DiagonalBatch a(basis), b(basis);
  for (std::size_t i = 0, k = 0; i < mine.count || k < theirs.count;) {
    const std::size_t i1 = mine.count - i < a.subvectors() ? mine.count : i + a.subvectors();
    const std::size_t k1 = theirs.count - k < b.subvectors() ? theirs.count : k + b.subvectors();
    a.tables(i, i1, mine.beta, mine.V);
    b.tables(k, k1, theirs.beta, theirs.V);
    cells.decode_batches({a.g, a.o, a.size(i, i1), &ans_, a.coordinates(i, mine.M)},
                         {b.g, b.o, b.size(k, k1), &other.ans_, b.coordinates(k, theirs.M)});
    a.scatter(i, i1, mine.M);
    b.scatter(k, k1, theirs.M);
    i = i1;
    k = k1;
  }
}

}  // namespace cepam
