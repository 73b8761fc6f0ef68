// pybind11 binding of the native core: converts arguments and results, maps
// exceptions, releases the GIL around native work.  No logic lives here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "payload/golomb_body.hpp"
#include "random/chacha20.hpp"
#include "random/sha256.hpp"
#include "random/detmath.hpp"
#include "random/maxwell.hpp"
#include "common/cpu.hpp"
#include "common/errors.hpp"
#include "common/pages.hpp"
#include "common/parallel.hpp"
#include "lrsuq/batch_kernels.hpp"
#include "lrsuq/compact.hpp"
#include "lrsuq/norm.hpp"
#include "lrsuq/norm_block.hpp"
#include "lrsuq/quantizer.hpp"
#include "payload/ans_body.hpp"
#include "payload/segments.hpp"
#include "payload/tag.hpp"
#include "payload/ans_streams.hpp"
#include "payload/body.hpp"
#include "coding/model_stats.hpp"
#include "coding/rans.hpp"
#include "coding/rans_kernels.hpp"
#include "coding/source_model.hpp"
#include "python/convert.hpp"

namespace py = pybind11;
using namespace cepam;
using namespace cepam::python;

namespace {

// Calls f(const T* x) with x's data as float32 or float64, the GIL released.
template <class F>
void with_input(const py::array& x, F&& f) {
  require_contiguous_1d(x, "x");
  if (holds<float>(x)) {
    const float* px = static_cast<const float*>(x.data());
    py::gil_scoped_release nogil;
    f(px);
  } else if (holds<double>(x)) {
    const double* px = static_cast<const double*>(x.data());
    py::gil_scoped_release nogil;
    f(px);
  } else {
    throw py::type_error("x must be float32 or float64");
  }
}

// A new array of m values of dtype ("float32" or "float64") filled by
// f(T* y), the GIL released.
template <class F>
py::array with_output(const std::string& dtype, std::size_t m, F&& f) {
  auto run = [&](auto tag) -> py::array {
    using T = decltype(tag);
    CArray<T> y(static_cast<py::ssize_t>(m));
    T* out = y.mutable_data();
    {
      py::gil_scoped_release nogil;
      f(out);
    }
    return std::move(y);
  };
  if (dtype == "float32") return run(float{});
  if (dtype == "float64") return run(double{});
  throw InvalidArgument("dtype must be 'float32' or 'float64'");
}

std::size_t subvectors_of(std::size_t m, int n) {
  return (m + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
}

void check_lattice_sizes(const CArray<std::uint32_t>& H, const CArray<std::int64_t>& M,
                         std::size_t m, int n) {
  const std::size_t N = subvectors_of(m, n);
  if (static_cast<std::size_t>(H.size()) != N ||
      static_cast<std::size_t>(M.size()) != N * static_cast<std::size_t>(n))
    throw InvalidArgument("H and M sizes do not match m and n");
}

py::tuple encode_lattice(const py::array& x, const py::bytes& key, const LrsuqParams& p,
                         double factor) {
  const int n = p.n;
  const KeyStream ks(key_from(key), kPurposeLrsuq);
  const std::size_t m = static_cast<std::size_t>(x.size());
  const std::size_t N = subvectors_of(m, n);
  CArray<std::uint32_t> H(static_cast<py::ssize_t>(N));
  CArray<std::int64_t> M(static_cast<py::ssize_t>(N * static_cast<std::size_t>(n)));
  std::uint32_t* h = H.mutable_data();
  std::int64_t* mm = M.mutable_data();
  with_input(x, [&](const auto* px) { lrsuq_encode(p, ks, px, m, factor, h, mm); });
  return py::make_tuple(H, M);
}

py::array decode_lattice(const CArray<std::uint32_t>& H, const CArray<std::int64_t>& M, std::size_t m,
                 const py::bytes& key, const LrsuqParams& p, const std::string& dtype) {
  check_lattice_sizes(H, M, m, p.n);
  const KeyStream ks(key_from(key), kPurposeLrsuq);
  const std::uint32_t* h = H.data();
  const std::int64_t* mm = M.data();
  return with_output(dtype, m, [&](auto* y) { lrsuq_decode(p, ks, h, mm, m, y); });
}

// The side information (beta, V) of trial indices H (lrsuq_side_info).
py::tuple side_info(const CArray<std::uint32_t>& H, const py::bytes& key, const LrsuqParams& p) {
  const int n = p.n;
  const KeyStream ks(key_from(key), kPurposeLrsuq);
  const std::size_t N = static_cast<std::size_t>(H.size());
  CArray<double> beta(static_cast<py::ssize_t>(N));
  CArray<double> V(static_cast<py::ssize_t>(N * static_cast<std::size_t>(n)));
  const std::uint32_t* h = H.data();
  double* b = beta.mutable_data();
  double* v = V.mutable_data();
  {
    py::gil_scoped_release nogil;
    lrsuq_side_info(p, ks, h, 0, N, b, v);
  }
  return py::make_tuple(beta, V);
}

// The per-sub-vector arithmetic of the CUDA kernels, run on the host
// (lrsuq_encode_subvectors): (H, M, beta, V).
py::tuple encode_subvectors(const py::array& x, const py::bytes& key, const LrsuqParams& p,
                            double factor) {
  const int n = p.n;
  const ChaChaKey k = key_from(key);
  const std::size_t m = static_cast<std::size_t>(x.size());
  const std::size_t N = subvectors_of(m, n);
  StageArrays out = StageArrays::allocate(N, n);
  std::uint32_t* h = out.H.mutable_data();
  std::int64_t* mm = out.M.mutable_data();
  double* b = out.beta.mutable_data();
  double* v = out.V.mutable_data();
  with_input(x, [&](const auto* px) {
    lrsuq_encode_subvectors(p, k, px, m, factor, 0, N, h, mm, b, v);
  });
  return out.tuple();
}

// (H, M, beta, V) of sub-vectors `indices`, each given by its n
// coordinates (pieces: count rows of n), of an update of m coordinates.
py::tuple encode_subvectors_at(const py::array& pieces, const CArray<std::uint64_t>& indices,
                               std::size_t m, const py::bytes& key, const LrsuqParams& p,
                               double factor) {
  const int n = p.n;
  const ChaChaKey k = key_from(key);
  const std::size_t count = static_cast<std::size_t>(indices.size());
  if (static_cast<std::size_t>(pieces.size()) != count * static_cast<std::size_t>(n))
    throw InvalidArgument("pieces must hold n coordinates for each index");
  StageArrays out = StageArrays::allocate(count, n);
  std::uint32_t* h = out.H.mutable_data();
  std::int64_t* mm = out.M.mutable_data();
  double* b = out.beta.mutable_data();
  double* v = out.V.mutable_data();
  const std::uint64_t* j = indices.data();
  with_input(pieces, [&](const auto* px) {
    lrsuq_encode_subvectors_at(p, k, px, j, count, m, factor, h, mm, b, v);
  });
  return out.tuple();
}

// The ANS body of x as the GPU path codes it, its streams by the host twin
// of the CUDA kernel (payload/ans_streams.hpp); with shared_symbols the
// streams' symbols too, by the code the symbol kernel runs.
py::bytes ans_body_by_streams(const py::array& x, const py::bytes& key, const LrsuqParams& p,
                              double factor, bool shared_symbols) {
  const ChaChaKey k = key_from(key);
  std::vector<std::uint8_t> body;
  with_input(x, [&](const auto* px) {
    const std::size_t m = static_cast<std::size_t>(x.size());
    body = shared_symbols
               ? encode_ans_body_by_symbols(p, k, px, m, factor, host_stream_coder)
               : encode_ans_body_by_streams(p, k, px, m, factor, host_stream_coder);
  });
  return py::bytes(reinterpret_cast<const char*>(body.data()), body.size());
}

// (first, start, freq, tabled): every stream's symbols as the symbol
// kernel's host twin gives them (payload/ans_streams.hpp's BodySymbols),
// to compare with the device's (cepam._cuda.body_symbols) symbol by symbol.
py::tuple body_symbols_py(const py::array& x, const py::bytes& key, const LrsuqParams& p,
                          double factor) {
  const ChaChaKey k = key_from(key);
  BodySymbols symbols;
  with_input(x, [&](const auto* px) {
    const std::size_t m = static_cast<std::size_t>(x.size());
    const CellWidths widths = typical_cell_widths(p);
    symbols = body_symbols_of(p, k, px, m, factor,
                              SourceModel::fit(px, m, factor, widths.lo, widths.hi));
  });
  return body_symbol_arrays(symbols);
}

// (total, maxabs): the first pass of the clip's sum of squares by blocks,
// as the CUDA kernel computes it (lrsuq/norm_block.hpp).
py::tuple sum_of_squares_blocks(const py::array& x) {
  double total = 0.0, maxabs = 0.0;
  with_input(x, [&](const auto* px) {
    const std::size_t m = static_cast<std::size_t>(x.size());
    std::vector<double> sums(squares::blocks(m));
    total = squares::sum_by_blocks(px, m, sums.data(), &maxabs);
  });
  return py::make_tuple(total, maxabs);
}

// The source model's statistics of x factor (range, counts) by the host
// twin of the GPU's kernels (coding/model_stats.hpp: by_elements).
py::tuple model_statistics(const py::array& x, double factor) {
  SourceModel::Statistics s;
  with_input(x, [&](const auto* px) {
    s.range = model_stats::by_elements(px, static_cast<std::size_t>(x.size()), factor,
                                       s.counts.data());
  });
  return statistics_tuple(s);
}

// The serialised source model the encoder fits to x factor for params p
// (SourceModel::fit on `threads` threads).
py::bytes source_model_fit(const py::array& x, double factor, const LrsuqParams& p, int threads) {
  const CellWidths w = typical_cell_widths(p);
  std::vector<std::uint8_t> out;
  with_input(x, [&](const auto* px) {
    SourceModel::fit(px, static_cast<std::size_t>(x.size()), factor, w.lo, w.hi, threads)
        .serialize(out);
  });
  return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

// The serialised source model fitted from statistics (SourceModel::fit_from).
py::bytes source_model_from_statistics(double range, const CArray<std::uint64_t>& counts,
                                       const LrsuqParams& p) {
  const CellWidths w = typical_cell_widths(p);
  std::vector<std::uint8_t> out;
  SourceModel::fit_from(statistics_from(range, counts), w.lo, w.hi).serialize(out);
  return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

// A serialised source model parsed and serialised again: its knots in the
// code of the order SourceModel::serialize chooses for them.
py::bytes source_model_reserialized(const py::bytes& model) {
  std::size_t len = 0, pos = 0;
  const std::uint8_t* data = bytes_view(model, &len);
  std::vector<std::uint8_t> out;
  SourceModel::parse(data, len, &pos, false).serialize(out);
  return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

// A serialised source model's bins and tables, as parsed (with its tables)
// -> (edges uint16[K + 1], knots uint32[K + 1], grid float64[kCells + 1],
// quantiles float64[2^12], the packed grid and slopes uint64[kCells], the
// quantile lines uint64[2^12]).
py::tuple source_model_tables(const py::bytes& model) {
  std::size_t len = 0, pos = 0;
  const std::uint8_t* data = bytes_view(model, &len);
  const SourceModel m = SourceModel::parse(data, len, &pos);
  const auto bins = static_cast<std::size_t>(m.bins()) + 1;
  return py::make_tuple(
      py::array_t<std::uint16_t>(static_cast<py::ssize_t>(bins), m.bin_edges()),
      py::array_t<std::uint32_t>(static_cast<py::ssize_t>(bins), m.bin_knots()),
      py::array_t<double>(SourceModel::kCells + 1, m.knot_table()),
      py::array_t<double>(SourceModel::kKnotScale, m.quantile_table()),
      py::array_t<std::uint64_t>(SourceModel::kCells, m.knot_slope_table()),
      py::array_t<std::uint64_t>(SourceModel::kKnotScale, m.quantile_line_table()));
}

// (width of H, width of M, packed H, packed M, H, M): H and M through the
// GPU's compact transfer (lrsuq/compact.hpp), the host's side on `threads`
// threads: packed at their range's widths and widened.
py::tuple compact_round_trip(const CArray<std::uint32_t>& H, const CArray<std::int64_t>& M,
                             int threads) {
  threads = threads_from(threads);
  const std::size_t count = static_cast<std::size_t>(H.size());
  const std::size_t coords = static_cast<std::size_t>(M.size());
  const compact::Range r = compact::range_of(H.data(), count, M.data(), coords, threads);
  const int wh = compact::unsigned_width(r.h_max), wm = compact::signed_width(r.m_lo, r.m_hi);
  std::string ph(count * static_cast<std::size_t>(wh), '\0');
  std::string pm(coords * static_cast<std::size_t>(wm), '\0');
  compact::pack(H.data(), count, M.data(), coords, wh, wm, ph.data(), pm.data(), threads);
  CArray<std::uint32_t> h(H.size());
  CArray<std::int64_t> m(M.size());
  compact::unpack(ph.data(), count, pm.data(), coords, wh, wm, h.mutable_data(), m.mutable_data(),
                  threads);
  return py::make_tuple(wh, wm, py::bytes(ph), py::bytes(pm), h, m);
}

// The rANS streams of symbols [first[s], first[s + 1]) (intervals start,
// freq at 24-bit precision), coded as the CUDA kernel codes them.
py::list rans_encode_segments_py(const CArray<std::uint32_t>& start,
                                 const CArray<std::uint32_t>& freq,
                                 const CArray<std::uint64_t>& first) {
  const std::vector<AnsSymbol> symbols = ans_symbols(start, freq);
  const std::size_t segments = segment_count(first, symbols.size());
  std::vector<std::uint64_t> room(segments + 1, 0), sizes(segments);
  for (std::size_t s = 0; s < segments; ++s)
    room[s + 1] = room[s] + rans_max_stream_bytes(first.data()[s + 1] - first.data()[s]);
  std::vector<std::uint32_t> words(symbols.size());
  std::vector<std::uint8_t> out(room[segments]);
  if (rans_encode_segments(symbols.data(), first.data(), segments, words.data(), out.data(),
                           room.data(), sizes.data()) != kRansOk)
    throw InvalidArgument("a rANS stream overran its room");
  py::list streams;
  for (std::size_t s = 0; s < segments; ++s)
    streams.append(py::bytes(reinterpret_cast<const char*>(out.data() + room[s]), sizes[s]));
  return streams;
}

py::array decode_subvectors(const CArray<std::uint32_t>& H, const CArray<std::int64_t>& M,
                            std::size_t m, const py::bytes& key, const LrsuqParams& p,
                            const std::string& dtype) {
  check_lattice_sizes(H, M, m, p.n);
  const ChaChaKey k = key_from(key);
  const std::uint32_t* h = H.data();
  const std::int64_t* mm = M.data();
  const std::size_t N = subvectors_of(m, p.n);
  return with_output(dtype, m, [&](auto* y) { lrsuq_decode_subvectors(p, k, h, mm, 0, N, m, y); });
}

// The body coder of a code, from the coder table (payload/body.hpp).
Coder coder_from(int coder) {
  for (const BodyCoderInfo& c : body_coders())
    if (static_cast<int>(c.id) == coder) return c.id;
  throw InvalidArgument("unknown body coder");
}

// Whether segment `segment` of a body (coded by a GPU) is the segment the
// host codes from the segment's coordinates (payload/body.hpp).
bool segment_matches_py(const py::bytes& body, const py::array& values, std::size_t segment,
                        std::size_t m, const py::bytes& key, const LrsuqParams& p,
                        double factor, int coder) {
  require_contiguous_1d(values, "values");
  const ChaChaKey k = key_from(key);
  const Coder c = coder_from(coder);
  std::size_t len = 0;
  const std::uint8_t* data = bytes_view(body, &len);
  bool same = false;
  with_input(values, [&](const auto* px) {
    same = segment_matches(p, k, c, data, len, m, factor, segment, px,
                           static_cast<std::size_t>(values.size()));
  });
  return same;
}

CodedBody code_body(const py::array& x, const py::bytes& key, const LrsuqParams& p,
                    double factor, int coder, int threads, const py::object& lattice_stage,
                    const py::object& model_statistics, std::int64_t size, double peak) {
  require_contiguous_1d(x, "x");
  threads = threads_from(threads);
  const KeyStream ks(key_from(key), kPurposeLrsuq);
  const Coder c = coder_from(coder);
  // x is never read when the stage and the model's statistics are given:
  // it may then be empty, and m = size.
  const bool unread = !lattice_stage.is_none() && !model_statistics.is_none();
  if (size >= 0 && size != x.size() && !(unread && x.size() == 0))
    throw InvalidArgument("m must be x's size (or x empty, with lattice_stage and "
                          "model_statistics given)");
  const std::size_t m = static_cast<std::size_t>(size >= 0 ? size : x.size());
  // (Built only when given: a default py::array is a new empty numpy array.)
  std::optional<StageArrays> arrays;
  LatticeStage view{};
  const LatticeStage* stage = nullptr;
  SourceModel::Statistics statistics;
  if (!lattice_stage.is_none()) {
    arrays = StageArrays::from_tuple(lattice_stage.cast<py::tuple>(), m, p.n);
    view = arrays->view();
    stage = &view;
    if (!model_statistics.is_none()) {
      const py::tuple t = model_statistics.cast<py::tuple>();
      if (t.size() != 2) throw InvalidArgument("model_statistics must be (range, counts)");
      statistics = statistics_from(t[0].cast<double>(), t[1].cast<CArray<std::uint64_t>>());
      view.statistics = &statistics;
    }
  }
  CodedBody body;
  if (holds<float>(x)) {
    const float* px = static_cast<const float*>(x.data());
    py::gil_scoped_release nogil;
    body = encode_payload_body(p, ks, px, m, factor, c, threads, stage, peak);
  } else if (holds<double>(x)) {
    const double* px = static_cast<const double*>(x.data());
    py::gil_scoped_release nogil;
    body = encode_payload_body(p, ks, px, m, factor, c, threads, stage, peak);
  } else {
    throw py::type_error("x must be float32 or float64");
  }
  return body;
}

// A coded body not yet written anywhere (encode_coded_body): its parts,
// written once, straight into the sealed payload by seal_payload.
struct UnwrittenBody {
  CodedBody body;
  bool written = false;
  // Its length in bytes, while not yet written.
  std::size_t size() const {
    if (written) throw InvalidArgument("a coded body can be written once only");
    return body.size();
  }
  // The body, to be written now (under the GIL: two callers cannot both take it).
  CodedBody& take() {
    size();
    written = true;
    return body;
  }
};

UnwrittenBody encode_coded_body_py(const py::array& x, const py::bytes& key,
                                   const LrsuqParams& p, double factor, int coder, int threads,
                                   const py::object& lattice_stage,
                                   const py::object& model_statistics, std::int64_t size,
                                   double peak) {
  return {code_body(x, key, p, factor, coder, threads, lattice_stage, model_statistics, size,
                    peak)};
}

py::bytes encode_body_py(const py::array& x, const py::bytes& key, const LrsuqParams& p,
                         double factor, int coder, int threads, const py::object& lattice_stage,
                         const py::object& model_statistics, std::int64_t size, double peak) {
  CodedBody body =
      code_body(x, key, p, factor, coder, threads, lattice_stage, model_statistics, size, peak);
  // The bytes object of the body's size, filled in place by the threads.
  auto out = py::reinterpret_steal<py::bytes>(
      PyBytes_FromStringAndSize(nullptr, static_cast<py::ssize_t>(body.size())));
  if (!out) throw py::error_already_set();
  auto* data = reinterpret_cast<std::uint8_t*>(PyBytes_AS_STRING(out.ptr()));
  {
    py::gil_scoped_release nogil;
    body.write(data, threads_from(threads));
  }
  return out;
}

// The caller's output buffer `out` (decode's out=), checked: a writable,
// C-contiguous 1-D array of m values of dtype ("float32" or "float64").
void check_output_buffer(const py::array& out, const std::string& dtype, std::size_t m) {
  const bool wide = dtype == "float64";
  if (!wide && dtype != "float32") throw InvalidArgument("dtype must be 'float32' or 'float64'");
  if (!(wide ? holds<double>(out) : holds<float>(out)))
    throw InvalidArgument("out must be a " + dtype + " array");
  require_contiguous_1d(out, "out");
  if (!out.writeable()) throw InvalidArgument("out must be writable");
  if (static_cast<std::size_t>(out.size()) != m)
    throw InvalidArgument("out must hold m = " + std::to_string(m) + " values, it holds " +
                          std::to_string(out.size()));
}

// The m decoded values, in a new array of dtype, or written into `out`
// (not None: check_output_buffer), which is returned.
py::array decode_body_py(const py::bytes& body, std::size_t m, const py::bytes& key,
                         const LrsuqParams& p, int coder, const std::string& dtype, int threads,
                         const py::object& out) {
  threads = threads_from(threads);
  const KeyStream ks(key_from(key), kPurposeLrsuq);
  const Coder c = coder_from(coder);
  std::size_t len = 0;
  const std::uint8_t* data = bytes_view(body, &len);
  if (!out.is_none()) {
    if (!py::isinstance<py::array>(out)) throw py::type_error("out must be a numpy array");
    py::array buffer = py::reinterpret_borrow<py::array>(out);
    check_output_buffer(buffer, dtype, m);
    check_payload_body(p, data, len, m, c);  // before writing any value
    void* y = buffer.mutable_data();
    {
      py::gil_scoped_release nogil;
      if (dtype == "float64") decode_payload_body(p, ks, data, len, m, c, static_cast<double*>(y), threads);
      else decode_payload_body(p, ks, data, len, m, c, static_cast<float*>(y), threads);
    }
    return buffer;
  }
  check_payload_body(p, data, len, m, c);  // before allocating m values
  return with_output(dtype, m, [&](auto* y) {
    decode_payload_body(p, ks, data, len, m, c, y, threads);
  });
}

// HMAC-SHA256(key, data) (random/sha256.hpp), data any C-contiguous
// bytes-like object; the GIL released over long data.
py::bytes hmac_sha256_py(const py::buffer& key, const py::buffer& data) {
  const py::buffer_info k = key.request(), d = data.request();
  if (!PyBuffer_IsContiguous(k.view(), 'C') || !PyBuffer_IsContiguous(d.view(), 'C'))
    throw InvalidArgument("key and data must be contiguous");
  const auto* kp = static_cast<const std::uint8_t*>(k.ptr);
  const auto* dp = static_cast<const std::uint8_t*>(d.ptr);
  const std::size_t kl = static_cast<std::size_t>(k.size * k.itemsize);
  const std::size_t dl = static_cast<std::size_t>(d.size * d.itemsize);
  std::uint8_t out[kSha256Bytes];
  if (dl >= (std::size_t{1} << 16)) {
    py::gil_scoped_release nogil;
    hmac_sha256(kp, kl, dp, dl, out);
  } else {
    hmac_sha256(kp, kl, dp, dl, out);
  }
  return py::bytes(reinterpret_cast<const char*>(out), kSha256Bytes);
}

// The 32-byte keys HKDF-SHA256(ikm, salt, info) of each info of a tuple
// (random/sha256.hpp's hkdf_sha256_keys).
py::tuple hkdf_keys_py(const py::bytes& ikm, const py::bytes& salt, const py::tuple& infos) {
  std::size_t il = 0, sl = 0;
  const std::uint8_t* ip = bytes_view(ikm, &il);
  const std::uint8_t* sp = bytes_view(salt, &sl);
  std::vector<py::bytes> held;  // (each info held while its bytes are read)
  std::vector<ByteSpan> spans;
  held.reserve(infos.size());
  spans.reserve(infos.size());
  for (const py::handle info : infos) {
    held.push_back(info.cast<py::bytes>());
    std::size_t nl = 0;
    const std::uint8_t* np = bytes_view(held.back(), &nl);
    spans.push_back({np, nl});
  }
  std::vector<std::uint8_t> out(spans.size() * kSha256Bytes);
  hkdf_sha256_keys(ip, il, sp, sl, spans.data(), spans.size(), out.data());
  py::tuple keys(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i)
    keys[i] = py::bytes(reinterpret_cast<const char*>(out.data() + i * kSha256Bytes),
                        kSha256Bytes);
  return keys;
}

// The tag of a payload of at most one MAC segment (payload/tag.hpp).
py::bytes payload_tag_py(const py::buffer& key, const py::buffer& data) {
  const py::buffer_info k = key.request(), d = data.request();
  if (!PyBuffer_IsContiguous(k.view(), 'C') || !PyBuffer_IsContiguous(d.view(), 'C'))
    throw InvalidArgument("key and data must be contiguous");
  if (static_cast<std::size_t>(k.size * k.itemsize) != kSha256Bytes)
    throw InvalidArgument("a MAC key is 32 bytes");
  std::uint8_t out[kPayloadTagBytes];
  one_segment_tag(static_cast<const std::uint8_t*>(k.ptr), static_cast<const std::uint8_t*>(d.ptr),
                  static_cast<std::size_t>(d.size * d.itemsize), out);
  return py::bytes(reinterpret_cast<const char*>(out), kPayloadTagBytes);
}

py::bytes hkdf_sha256_py(const py::bytes& ikm, const py::bytes& salt, const py::bytes& info,
                         std::size_t length) {
  std::size_t il = 0, sl = 0, nl = 0;
  const std::uint8_t* i = bytes_view(ikm, &il);
  const std::uint8_t* s = bytes_view(salt, &sl);
  const std::uint8_t* n = bytes_view(info, &nl);
  if (length < 1 || length > 255 * kSha256Bytes)
    throw InvalidArgument("HKDF output length must be in [1, 8160] bytes");
  std::string out(length, '\0');
  hkdf_sha256(i, il, s, sl, n, nl, length, reinterpret_cast<std::uint8_t*>(out.data()));
  return py::bytes(out);
}

// A body decoded as the GPU's decoder does it, by its host twin
// (payload/ans_streams.hpp's decode_ans_body_by_segments,
// payload/golomb_body.hpp's decode_golomb_body_by_segments).
py::array decode_by_segments_py(const py::bytes& body, std::size_t m, const py::bytes& key,
                                const LrsuqParams& p, const std::string& dtype, int coder) {
  const ChaChaKey k = key_from(key);
  const Coder c = coder_from(coder);
  std::size_t len = 0;
  const std::uint8_t* data = bytes_view(body, &len);
  check_payload_body(p, data, len, m, c);  // before allocating m values
  return with_output(dtype, m, [&](auto* y) {
    if (c == Coder::Ans) decode_ans_body_by_segments(p, k, data, len, m, y);
    else decode_golomb_body_by_segments(p, k, data, len, m, y);
  });
}

py::tuple decode_symbols_py(const py::bytes& body, std::size_t m, const py::bytes& key,
                            const LrsuqParams& p, int coder, int threads) {
  threads = threads_from(threads);
  const KeyStream ks(key_from(key), kPurposeLrsuq);
  const Coder c = coder_from(coder);
  std::size_t len = 0;
  const std::uint8_t* data = bytes_view(body, &len);
  check_payload_body(p, data, len, m, c);  // before allocating N (n + 1) symbols
  const std::size_t N = subvectors_of(m, p.n);
  CArray<std::uint32_t> h(static_cast<py::ssize_t>(N));
  CArray<std::int64_t> mm(static_cast<py::ssize_t>(N * static_cast<std::size_t>(p.n)));
  std::uint32_t* ph = h.mutable_data();
  std::int64_t* pm = mm.mutable_data();
  {
    py::gil_scoped_release nogil;
    decode_payload_symbols(p, ks, data, len, m, c, ph, pm, threads);
  }
  return py::make_tuple(h, mm);
}

py::dict body_parts_py(const py::bytes& body, int coder, int lattice, std::int64_t m, int n) {
  std::size_t len = 0;
  const std::uint8_t* data = bytes_view(body, &len);
  if (m >= 0) check_lattice(static_cast<LatticeId>(lattice), n);
  const std::size_t segments =
      m < 0 ? AnsBody::kAnySegments : body_segments(static_cast<std::size_t>(m), n);
  py::dict out;
  for (const auto& part : payload_body_parts(data, len, coder_from(coder),
                                             static_cast<LatticeId>(lattice), segments))
    out[py::str(part.first)] = part.second;
  return out;
}

// norm_pass of a contiguous 1-D float32 or float64 array, the GIL released.
NormPass norm_of(const py::array& x, SumOrder order, int threads) {
  require_contiguous_1d(x, "x");
  threads = threads_from(threads);
  const std::size_t m = static_cast<std::size_t>(x.size());
  if (holds<float>(x)) {
    const float* px = static_cast<const float*>(x.data());
    py::gil_scoped_release nogil;
    return norm_pass(px, m, order, threads);
  }
  if (holds<double>(x)) {
    const double* px = static_cast<const double*>(x.data());
    py::gil_scoped_release nogil;
    return norm_pass(px, m, order, threads);
  }
  throw py::type_error("x must be float32 or float64");
}

double sum_squares(const py::array& x, bool fixed_order, int threads) {
  return norm_of(x, fixed_order ? SumOrder::Fixed : SumOrder::Any, threads).sum_squares;
}

// The fixed-order sum of squares and max |x| from the same pass.
py::tuple sum_squares_and_peak(const py::array& x, int threads) {
  const NormPass r = norm_of(x, SumOrder::Fixed, threads);
  return py::make_tuple(r.sum_squares, r.peak);
}

BodyLayout layout_from(std::uint32_t golomb, int k, std::uint64_t h_bits, std::uint64_t m_bits) {
  BodyLayout layout;
  layout.golomb = golomb;
  layout.expg_k = k;
  layout.h_bits = h_bits;
  layout.m_bits = m_bits;
  return layout;
}

py::tuple body_encode(const CArray<std::uint32_t>& H, const CArray<std::int64_t>& M,
                      std::uint32_t golomb, int k) {
  BodyLayout layout = layout_from(golomb, k, 0, 0);
  std::vector<std::uint8_t> out;
  {
    py::gil_scoped_release nogil;
    out.reserve(static_cast<std::size_t>(M.size()) * 2 + 16);
    encode_body(H.data(), static_cast<std::size_t>(H.size()), M.data(),
                static_cast<std::size_t>(M.size()), layout, out);
  }
  return py::make_tuple(
      py::bytes(reinterpret_cast<const char*>(out.data()), out.size()), layout.h_bits,
      layout.m_bits);
}

// The Golomb body of a stage (H[N], M[N n]) coded unit by unit as a GPU
// codes it (payload/golomb_body.hpp's golomb_body_by_units).
py::bytes golomb_body_by_units_py(const CArray<std::uint32_t>& H, const CArray<std::int64_t>& M,
                                  std::uint32_t golomb, int n) {
  if (n < 1 || n > 8) throw InvalidArgument("n must be in 1..8");
  const std::size_t N = static_cast<std::size_t>(H.size());
  if (static_cast<std::size_t>(M.size()) != N * static_cast<std::size_t>(n))
    throw InvalidArgument("M must hold n coordinates a trial index");
  for (std::size_t j = 0; j < N; ++j)
    if (H.data()[j] < 1 || H.data()[j] > kTrialCap || (golomb == 0 && H.data()[j] != 1))
      throw InvalidArgument("trial indices must be in [1, TRIAL_CAP], and 1 where golomb = 0");
  for (std::size_t i = 0; i < N * static_cast<std::size_t>(n); ++i)
    if (M.data()[i] > kMaxAbsM || M.data()[i] < -kMaxAbsM)
      throw InvalidArgument("lattice coordinate too large");
  std::vector<std::uint8_t> body;
  {
    py::gil_scoped_release nogil;
    body = golomb_body_by_units(golomb, H.data(), M.data(), N, n);
  }
  return py::bytes(reinterpret_cast<const char*>(body.data()), body.size());
}

py::tuple body_decode(const py::bytes& body, std::uint64_t N, std::uint64_t count,
                      std::uint32_t golomb, int k, std::uint64_t h_bits, std::uint64_t m_bits) {
  const BodyLayout layout = layout_from(golomb, k, h_bits, m_bits);
  char* data = nullptr;
  py::ssize_t len = 0;
  if (PyBytes_AsStringAndSize(body.ptr(), &data, &len) != 0) throw py::error_already_set();
  // Validate before allocating anything sized by N or count.
  check_body(layout, static_cast<std::size_t>(len), N, count);
  CArray<std::uint32_t> H(static_cast<py::ssize_t>(N));
  CArray<std::int64_t> M(static_cast<py::ssize_t>(count));
  std::uint32_t* h = H.mutable_data();
  std::int64_t* mm = M.mutable_data();
  {
    py::gil_scoped_release nogil;
    decode_body(reinterpret_cast<const std::uint8_t*>(data), static_cast<std::size_t>(len),
                layout, static_cast<std::size_t>(N), static_cast<std::size_t>(count), h, mm);
  }
  return py::make_tuple(H, M);
}

void body_check(std::size_t len, std::uint64_t N, std::uint64_t count, std::uint32_t golomb,
                int k, std::uint64_t h_bits, std::uint64_t m_bits) {
  check_body(layout_from(golomb, k, h_bits, m_bits), len, N, count);
}

py::bytes chacha_block(const py::bytes& key, std::uint32_t counter, const py::bytes& nonce,
                       int double_rounds) {
  if (double_rounds < 1 || double_rounds > 10)
    throw InvalidArgument("double_rounds must be between 1 and 10");
  const std::string ns = nonce;
  if (ns.size() != 12) throw InvalidArgument("a ChaCha20 nonce is 12 bytes");
  std::uint32_t n3[3];

  for (int i = 0; i < 3; ++i) {
    const auto* b = reinterpret_cast<const unsigned char*>(ns.data()) + 4 * i;
    n3[i] = static_cast<std::uint32_t>(b[0]) | (static_cast<std::uint32_t>(b[1]) << 8) |
            (static_cast<std::uint32_t>(b[2]) << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
  }
  std::uint32_t out[16];
  chacha20_block(key_from(key), counter, n3, out, double_rounds);
  unsigned char bytes[64];
  for (int i = 0; i < 16; ++i)
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<unsigned char>(out[i] >> (8 * b));
  return py::bytes(reinterpret_cast<const char*>(bytes), 64);
}

// XORs the sealing keystream into a writable byte buffer, in place.
void seal_xor(const py::buffer& data, const py::bytes& key, int threads) {
  threads = threads_from(threads);
  const py::buffer_info info = data.request(true);
  if (info.ndim != 1 || info.itemsize != 1 || (info.shape[0] > 1 && info.strides[0] != 1))
    throw InvalidArgument("data must be a contiguous writable byte buffer");
  const ChaChaKey k = key_from(key);
  auto* bytes = static_cast<unsigned char*>(info.ptr);
  const auto len = static_cast<std::size_t>(info.shape[0]);
  py::gil_scoped_release nogil;
  xor_keystream(k, kPurposeSeal, bytes, len, threads);
}

// A whole payload, assembled in one new bytes object: head || (sealed_head
// || body || `padding` zero bytes) XOR the sealing keystream || tag, where
// tag = tag_of(memoryview of everything before it), tag_bytes long, or, with
// tag_of None, the one-segment tag under mac_key (payload/tag.hpp).  The
// body (bytes, or an UnwrittenBody whose parts are written here and
// released) is copied and encrypted in one pass, on up to `threads` threads.
py::bytes seal_payload(const py::bytes& head, const py::bytes& sealed_head, const py::object& body,
                       std::size_t padding, const py::bytes& key, int threads,
                       std::size_t tag_bytes, const py::object& tag_of,
                       const py::bytes& mac_key) {
  threads = threads_from(threads);
  const ChaChaKey k = key_from(key);
  std::size_t h = 0, s = 0, b = 0;
  const std::uint8_t* ph = bytes_view(head, &h);
  const std::uint8_t* ps = bytes_view(sealed_head, &s);
  const std::uint8_t* pb = nullptr;
  CodedBody* parts = nullptr;
  if (py::isinstance<UnwrittenBody>(body)) {
    parts = &body.cast<UnwrittenBody&>().take();
    b = parts->size();
  } else if (py::isinstance<py::bytes>(body)) {
    pb = bytes_view(py::reinterpret_borrow<py::bytes>(body), &b);
  } else {
    throw py::type_error("body must be bytes or a CodedBody");
  }
  const std::size_t data_len = h + s + b + padding;
  py::bytes out = py::reinterpret_steal<py::bytes>(
      PyBytes_FromStringAndSize(nullptr, static_cast<py::ssize_t>(data_len + tag_bytes)));
  if (!out) throw py::error_already_set();
  // Filled here before anyone else holds it (the C API's way to build bytes).
  auto* p = reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
  advise_huge_pages(p, data_len + tag_bytes);
  {
    py::gil_scoped_release nogil;
    std::memcpy(p, ph, h);
    xor_keystream(k, kPurposeSeal, p + h, s, 1, 0, ps);
    if (parts != nullptr) {
      parts->write(p + h + s, threads, [&](std::uint8_t* dst, const std::uint8_t* part,
                                           std::size_t bytes, std::size_t at) {
        xor_keystream(k, kPurposeSeal, dst, bytes, 1, s + at, part);
      });
    } else {
      xor_keystream(k, kPurposeSeal, p + h + s, b, threads, s, pb);
    }
    write_keystream(k, kPurposeSeal, p + h + s + b, padding, threads, s + b);
  }
  if (tag_of.is_none()) {
    if (tag_bytes != kPayloadTagBytes) throw InvalidArgument("a payload tag is 16 bytes");
    std::size_t ml = 0;
    const std::uint8_t* mk = bytes_view(mac_key, &ml);
    if (ml != kSha256Bytes) throw InvalidArgument("a MAC key is 32 bytes");
    one_segment_tag(mk, p, data_len, p + data_len);
    return out;
  }
  const py::memoryview whole(out);
  const py::object tag = tag_of(whole[py::slice(0, static_cast<py::ssize_t>(data_len), 1)]);
  std::size_t t = 0;
  const std::uint8_t* pt = bytes_view(tag, &t);
  if (t != tag_bytes) throw InvalidArgument("the tag function returned a tag of the wrong length");
  std::memcpy(p + data_len, pt, t);
  return out;
}

// data[start, stop) XOR the sealing keystream from its byte `first`, as new
// bytes (copied and decrypted in one pass, on up to `threads` threads).
py::bytes unseal(const py::buffer& data, std::size_t start, std::size_t stop, std::uint64_t first,
                 const py::bytes& key, int threads) {
  threads = threads_from(threads);
  const py::buffer_info info = data.request();
  if (info.ndim != 1 || info.itemsize != 1 || (info.shape[0] > 1 && info.strides[0] != 1))
    throw InvalidArgument("data must be a contiguous byte buffer");
  if (start > stop || stop > static_cast<std::size_t>(info.shape[0]))
    throw InvalidArgument("unseal: [start, stop) is not within the data");
  const ChaChaKey k = key_from(key);
  const std::size_t len = stop - start;
  py::bytes out = py::reinterpret_steal<py::bytes>(
      PyBytes_FromStringAndSize(nullptr, static_cast<py::ssize_t>(len)));
  if (!out) throw py::error_already_set();
  auto* p = reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
  const auto* src = static_cast<const unsigned char*>(info.ptr) + start;
  advise_huge_pages(p, len);
  {
    py::gil_scoped_release nogil;
    xor_keystream(k, kPurposeSeal, p, len, threads, first, src);
  }
  return out;
}

CArray<std::uint64_t> keystream_words(const py::bytes& key, std::uint32_t stream,
                                      std::uint64_t first_word, std::size_t count) {
  const KeyStream ks(key_from(key), kPurposeLrsuq);
  CArray<std::uint64_t> out(static_cast<py::ssize_t>(count));
  ks.words(stream, first_word, count, out.mutable_data());
  return out;
}

CArray<double> latent_radius(const py::bytes& key, const LrsuqParams& p, std::uint64_t first,
                             std::size_t count) {
  const KeyStream ks(key_from(key), kPurposeLrsuq);
  CArray<double> out(static_cast<py::ssize_t>(count));
  double* o = out.mutable_data();
  {
    py::gil_scoped_release nogil;
    latent_radii(p, ks, first, count, o);
  }
  return out;
}

// maxwell::sample of `word`, its reserve read from `reserve` (which must hold
// every word it asks for) -> (x, the reserve words it read).
py::tuple maxwell_draw(std::uint64_t word, const CArray<std::uint64_t>& reserve) {
  const std::uint64_t size = static_cast<std::uint64_t>(reserve.size());
  const std::uint64_t* r = reserve.data();
  std::uint64_t used = 0;
  const double x = maxwell::sample(word, [&](std::uint64_t k) {
    used = k + 1;
    return k < size ? r[k] : std::uint64_t{0};
  });
  if (used > size) throw InvalidArgument("the reserve holds fewer words than the draw read");
  return py::make_tuple(x, used);
}

py::dict maxwell_layers() {
  py::dict d;
  auto column = [](auto pick) {
    CArray<double> c(maxwell::kLayers);
    double* out = c.mutable_data();
    for (int i = 0; i < maxwell::kLayers; ++i) out[i] = pick(i);
    return c;
  };
  d["start"] = column([](int i) { return maxwell::kFastRows[i].start; });
  d["width"] = column([](int i) { return maxwell::kFastRows[i].width; });
  d["lo"] = column([](int i) { return maxwell::kFastRows[i].lo; });
  d["hi"] = column([](int i) { return maxwell::kFastRows[i].hi; });
  d["y"] = column([](int i) { return maxwell::kY[i]; });
  d["dy"] = column([](int i) { return maxwell::kDy[i]; });
  d["base_height"] = maxwell::kBaseHeight;
  d["left_edge"] = maxwell::kLeftEdge;
  d["left_share"] = maxwell::kLeftShare;
  d["tail_start"] = maxwell::kTailStart;
  d["tail_rate"] = maxwell::kTailRate;
  d["tail_scale"] = maxwell::kTailScale;
  d["reserve_words"] = maxwell::kReserveWords;
  return d;
}

// Lattice-only entry points (tests): arrays of count * n values.
std::size_t groups_of(py::ssize_t size, int n, const char* what) {
  if (n < 1 || size % n != 0)
    throw InvalidArgument(std::string(what) + " must hold a whole number of n-vectors");
  return static_cast<std::size_t>(size / n);
}

CArray<std::int64_t> closest_points_py(const CArray<double>& t, int lattice, int n) {
  check_lattice(static_cast<LatticeId>(lattice), n);
  const std::size_t count = groups_of(t.size(), n, "t");
  for (py::ssize_t i = 0; i < t.size(); ++i) {
    if (!(std::fabs(t.data()[i]) < kMaxScaledInput))
      throw InvalidArgument("t must be finite with |t| < 2^50");
  }
  CArray<std::int64_t> m(t.size());
  lattice_closest_points(static_cast<LatticeId>(lattice), n, t.data(), count, m.mutable_data());
  return m;
}

CArray<double> lattice_points_py(const CArray<std::int64_t>& m, int lattice, int n) {
  check_lattice(static_cast<LatticeId>(lattice), n);
  const std::size_t count = groups_of(m.size(), n, "m");
  for (py::ssize_t i = 0; i < m.size(); ++i) {
    if (m.data()[i] > kMaxAbsM || m.data()[i] < -kMaxAbsM)
      throw InvalidArgument("lattice coordinates must be at most 2^53 in magnitude");
  }
  CArray<double> p(m.size());
  lattice_points(static_cast<LatticeId>(lattice), n, m.data(), count, p.mutable_data());
  return p;
}

CArray<double> lattice_dithers_py(const CArray<std::uint64_t>& w, int lattice, int n) {
  check_lattice(static_cast<LatticeId>(lattice), n);
  const std::size_t count = groups_of(w.size(), n, "words");
  CArray<double> v(w.size());
  lattice_dithers(static_cast<LatticeId>(lattice), n, w.data(), count, v.mutable_data());
  return v;
}

CArray<double> lattice_basis_py(int lattice, int n) {
  const TriangularBasis b = lattice_basis(static_cast<LatticeId>(lattice), n);
  CArray<double> out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(n)});
  std::copy(b.b.begin(), b.b.end(), out.mutable_data());
  return out;
}

// kernels::reciprocals in elementwise's argument order.
void reciprocals_of(const double* b, double* out, std::size_t count) {
  kernels::reciprocals(b, count, out);
}

template <void (*F)(const double*, double*, std::size_t)>
CArray<double> elementwise(const CArray<double>& x) {
  CArray<double> out(x.size());
  F(x.data(), out.mutable_data(), static_cast<std::size_t>(x.size()));
  return out;
}

// rANS test hooks: a symbol sequence given by its (start, freq) intervals at
// kProbBits precision, and its decoding against a cumulative table.
py::bytes ans_encode_intervals(const CArray<std::uint32_t>& start,
                               const CArray<std::uint32_t>& freq) {
  AnsEncoder enc;
  for (const AnsSymbol& sym : ans_symbols(start, freq)) enc.put(sym.start, sym.freq);
  std::vector<std::uint8_t> out;
  enc.finish(out);
  return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
}

// The rANS streams of symbols [first[s], first[s + 1]) (as for
// rans_encode_segments_py), 1 to 4 of them, coded together by
// AnsEncoder::finish_together.
py::list ans_encode_together(const CArray<std::uint32_t>& start,
                             const CArray<std::uint32_t>& freq,
                             const CArray<std::uint64_t>& first) {
  const std::vector<AnsSymbol> symbols = ans_symbols(start, freq);
  const std::size_t k = segment_count(first, symbols.size());
  if (k < 1 || k > AnsEncoder::kTogether)
    throw InvalidArgument("ans_encode_together takes 1 to 4 streams");
  std::vector<AnsEncoder> enc(k);
  std::vector<std::vector<std::uint8_t>> out(k);
  const AnsEncoder* encoders[AnsEncoder::kTogether];
  std::vector<std::uint8_t>* outs[AnsEncoder::kTogether];
  for (std::size_t t = 0; t < k; ++t) {
    for (std::uint64_t i = first.data()[t]; i < first.data()[t + 1]; ++i)
      *enc[t].append(1) = symbols[i];
    encoders[t] = &enc[t];
    outs[t] = &out[t];
  }
  AnsEncoder::finish_together(encoders, outs, k);
  py::list streams;
  for (const auto& o : out)
    streams.append(py::bytes(reinterpret_cast<const char*>(o.data()), o.size()));
  return streams;
}

// rans_encode_step (coding/rans_core.hpp) of state x[i] for symbol i, each
// alone -> (states uint64[k], words uint32[k], 0 where none was emitted,
// emitted bool[k]).
py::tuple ans_encode_step(const CArray<std::uint64_t>& x, const CArray<std::uint32_t>& start,
                          const CArray<std::uint32_t>& freq) {
  const std::vector<AnsSymbol> symbols = ans_symbols(start, freq);
  const auto k = static_cast<std::size_t>(x.size());
  if (symbols.size() != k) throw InvalidArgument("one symbol a state");
  CArray<std::uint64_t> states(x.size());
  CArray<std::uint32_t> words(x.size());
  CArray<bool> emitted(x.size());
  for (std::size_t i = 0; i < k; ++i) {
    if (x.data()[i] < kAnsLow || x.data()[i] >= (kAnsLow << 32))
      throw InvalidArgument("a state out of range");
    std::uint32_t word = 0;
    std::uint32_t* w = &word;
    states.mutable_data()[i] = rans_encode_step(x.data()[i], symbols[i], w);
    words.mutable_data()[i] = word;
    emitted.mutable_data()[i] = w != &word;
  }
  return py::make_tuple(states, words, emitted);
}

// One group of two runs coded by the AVX-512 rANS kernel from given states
// (x: run a's four, then run b's, in state order; start, freq: a's group
// of four symbols, then b's) -> (the new states, a's words, b's words, in
// the order emitted).
py::tuple ans_encode_group_avx512(const CArray<std::uint64_t>& x,
                                  const CArray<std::uint32_t>& start,
                                  const CArray<std::uint32_t>& freq) {
  const std::vector<AnsSymbol> symbols = ans_symbols(start, freq);
  if (x.size() != 2 * kStreams || symbols.size() != 2 * kStreams)
    throw InvalidArgument("two runs' four states and four symbols each");
  for (py::ssize_t i = 0; i < x.size(); ++i)
    if (x.data()[i] < kAnsLow || x.data()[i] >= (kAnsLow << 32))
      throw InvalidArgument("a state out of range");
#if CEPAM_X86_DISPATCH
  if (!simd_avx512dq()) throw InvalidArgument("the AVX-512 rANS kernel is not in use here");
  std::uint32_t words[2][kStreams];
  RansRun::Lanes lanes[2];
  for (int r = 0; r < 2; ++r) {
    for (int s = 0; s < kStreams; ++s) lanes[r].x[s] = x.data()[r * kStreams + s];
    lanes[r].g = symbols.data() + (r + 1) * kStreams;  // the group below is r's
    lanes[r].w = words[r];
  }
  rans_kernels::avx512::encode_groups(lanes, 2, 1);
  CArray<std::uint64_t> states(2 * kStreams);
  py::list emitted;
  for (int r = 0; r < 2; ++r) {
    for (int s = 0; s < kStreams; ++s) states.mutable_data()[r * kStreams + s] = lanes[r].x[s];
    CArray<std::uint32_t> w(lanes[r].w - words[r]);
    std::copy(words[r], lanes[r].w, w.mutable_data());
    emitted.append(w);
  }
  return py::make_tuple(states, emitted[0], emitted[1]);
#else
  throw InvalidArgument("the AVX-512 rANS kernel is not in use here");
#endif
}

CArray<std::uint32_t> ans_decode_table(const py::bytes& data, const CArray<std::uint32_t>& cum,
                                       std::size_t count) {
  // cum: cumulative frequencies, cum[0] = 0, cum[K] = 2^kProbBits, increasing.
  const std::size_t K = static_cast<std::size_t>(cum.size()) - 1;
  if (cum.size() < 2 || cum.data()[0] != 0 || cum.data()[K] != kProbScale)
    throw InvalidArgument("cum must run from 0 to 2^24");
  for (std::size_t k = 0; k < K; ++k)
    if (cum.data()[k + 1] <= cum.data()[k]) throw InvalidArgument("cum must increase");
  std::size_t len = 0;
  const std::uint8_t* bytes = bytes_view(data, &len);
  AnsDecoder dec(bytes, len);
  CArray<std::uint32_t> out(static_cast<py::ssize_t>(count));
  const std::uint32_t* c = cum.data();
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t slot = dec.peek();
    const std::size_t k = static_cast<std::size_t>(std::upper_bound(c, c + K + 1, slot) - c) - 1;
    dec.advance(c[k], c[k + 1] - c[k]);
    out.mutable_data()[i] = static_cast<std::uint32_t>(k);
  }
  dec.finish();
  return out;
}

// The lattice table (lattice/registry.hpp) as a tuple of dicts: code, name,
// dims (the sub-vector dimensions it takes), mechanisms (the codes it
// takes), bases (dimension -> its lower-triangular basis, rows = basis
// vectors, n * n values), packing_radius (l2), covolume, dual_minimum.
py::tuple lattice_table() {
  py::list rows;
  for (const LatticeInfo& l : kLattices) {
    py::list dims, mechanisms;
    py::dict bases;
    for (int n = 1; n <= kMaxLatticeDim; ++n) {
      if (l.dim != 0 && n != l.dim) continue;
      dims.append(n);
      const TriangularBasis b = lattice_basis(l.id, n);
      py::list values;
      for (double v : b.b) values.append(v);
      bases[py::int_(n)] = py::tuple(values);
    }
    for (const MechanismInfo& mech : kMechanisms)
      if (lattice_takes(l, mech)) mechanisms.append(static_cast<int>(mech.id));
    rows.append(py::dict(py::arg("code") = static_cast<int>(l.id), py::arg("name") = l.name,
                         py::arg("dims") = py::tuple(dims),
                         py::arg("mechanisms") = py::tuple(mechanisms),
                         py::arg("bases") = bases,
                         py::arg("packing_radius") = l.packing_radius,
                         py::arg("covolume") = l.covolume,
                         py::arg("dual_minimum") = l.dual_minimum));
  }
  return py::tuple(rows);
}

// The mechanism table (lrsuq/latent.hpp) as a tuple of dicts: code, name,
// norm ("l2" or "l1", of its acceptance test), max_dim (the largest
// sub-vector dimension it takes).
py::tuple mechanism_table() {
  py::list rows;
  for (const MechanismInfo& mech : kMechanisms)
    rows.append(py::dict(py::arg("code") = static_cast<int>(mech.id), py::arg("name") = mech.name,
                         py::arg("norm") = mech.norm == Norm::L2 ? "l2" : "l1",
                         py::arg("max_dim") = mech.max_dim));
  return py::tuple(rows);
}

// The body-coder table (payload/body.hpp) as a tuple of dicts: code, name,
// cpu (the file of its CPU code), device_encode and device_decode (its
// whole-body functions in cepam._cuda), device_encode_takes_model.
py::tuple coder_table() {
  py::list rows;
  for (const BodyCoderInfo& c : body_coders())
    rows.append(py::dict(py::arg("code") = static_cast<int>(c.id), py::arg("name") = c.name,
                         py::arg("cpu") = c.cpu, py::arg("device_encode") = c.device_encode,
                         py::arg("device_decode") = c.device_decode,
                         py::arg("device_encode_takes_model") = c.device_encode_takes_model));
  return py::tuple(rows);
}

// _core.Params: the codec's parameters (LrsuqParams), checked when built,
// immutable, compared and pickled by value.
void register_params(py::module_& m) {
  const auto state = [](const LrsuqParams& p) {
    return py::make_tuple(static_cast<int>(p.mechanism), p.scale, static_cast<int>(p.lattice),
                          p.n);
  };
  const auto make = [](int mechanism, double scale, int lattice, int n) {
    return LrsuqParams{static_cast<MechanismId>(mechanism), scale, static_cast<LatticeId>(lattice),
                       n};
  };
  py::class_<LrsuqParams>(m, "Params",
                          "The codec's parameters: a mechanism code, its noise scale (sigma, b "
                          "or the SDQ step), a lattice code and the sub-vector dimension n. "
                          "Checked when built (raises InvalidArgumentError naming the "
                          "problem); immutable.")
      .def(py::init(make), py::kw_only(), py::arg("mechanism"), py::arg("scale"),
           py::arg("lattice"), py::arg("n"))
      .def_property_readonly("mechanism",
                             [](const LrsuqParams& p) { return static_cast<int>(p.mechanism); })
      .def_readonly("scale", &LrsuqParams::scale)
      .def_property_readonly("lattice",
                             [](const LrsuqParams& p) { return static_cast<int>(p.lattice); })
      .def_readonly("n", &LrsuqParams::n)
      .def("__eq__", [state](const LrsuqParams& a, const py::object& b) -> py::object {
        if (!py::isinstance<LrsuqParams>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::bool_(state(a).equal(state(b.cast<const LrsuqParams&>())));
      })
      .def("__hash__", [state](const LrsuqParams& p) { return py::hash(state(p)); })
      .def("__repr__", [](const LrsuqParams& p) {
        return py::str("Params(mechanism={}, scale={!r}, lattice={}, n={})")
            .format(static_cast<int>(p.mechanism), p.scale, static_cast<int>(p.lattice), p.n);
      })
      .def(py::pickle(state, [make](const py::tuple& t) {
        if (t.size() != 4) throw InvalidArgument("Params state is (mechanism, scale, lattice, n)");
        return make(t[0].cast<int>(), t[1].cast<double>(), t[2].cast<int>(), t[3].cast<int>());
      }));
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "cepam native core (LRSUQ, ChaCha20 streams, bitstream coders)";
  register_errors(m);

  m.attr("TRIAL_CAP") = kTrialCap;
  m.attr("MAX_ABS_M") = kMaxAbsM;
  m.attr("MAX_GOLOMB") = kMaxGolomb;
  m.attr("MAX_EXPG_ORDER") = kMaxExpGolombOrder;
  m.attr("MAX_THREADS") = kMaxThreads;
  m.attr("MAC_SEGMENT_BYTES") = kMacSegmentBytes;  // the payload tag's (payload/tag.hpp)
  m.attr("TAG_BYTES") = kPayloadTagBytes;
  m.attr("SEGMENT_LABEL") = py::bytes(kSegmentLabel);
  m.attr("TAG_LABEL") = py::bytes(kTagLabel);
  m.attr("SEGMENT_COORDINATES") = kSegmentCoordinates;
  m.attr("LATTICES") = lattice_table();
  m.attr("MECHANISMS") = mechanism_table();
  m.attr("CODERS") = coder_table();
  register_params(m);
#if CEPAM_X86_DISPATCH
  m.attr("SIMD_KERNELS") = py::make_tuple("avx512", "avx2", "portable");
#elif CEPAM_ARM_NEON
  m.attr("SIMD_KERNELS") = py::make_tuple("neon", "portable");
#else
  m.attr("SIMD_KERNELS") = py::make_tuple("portable");
#endif
  m.def("simd_level", []() -> std::string {
    switch (simd_level()) {
      case SimdLevel::Avx512: return "avx512";
      case SimdLevel::Avx2: return "avx2";
      case SimdLevel::Neon: return "neon";
      case SimdLevel::Portable: break;
    }
    return "portable";
  }, "The SIMD level the native kernels run at in this process: 'avx512', 'avx2', 'neon' "
     "(aarch64) or 'portable' (decided once, at the first call that needs it: the CPU's, capped by the "
     "CEPAM_SIMD environment variable; 'portable' in a build without SIMD kernels).");
  m.def("check_combination", [](int mechanism, int lattice, int n) {
    check_combination(static_cast<MechanismId>(mechanism), static_cast<LatticeId>(lattice), n);
  }, py::kw_only(), py::arg("mechanism"), py::arg("lattice"), py::arg("n"),
        "Raises InvalidArgumentError unless the core takes the mechanism on the lattice in "
        "dimension n (the one rule, from the lattice and mechanism tables).");

  // (The calls made on every encode and decode take their arguments by
  // position too: pybind11 spends about 0.1 us a keyword argument.)
  const auto def_encoder = [&m](const char* name, auto encoder, const char* doc) {
    m.def(name, encoder, py::arg("x"), py::arg("key"), py::arg("params"),
          py::arg("factor"), py::arg("coder"), py::arg("threads") = 1,
          py::arg("lattice_stage") = py::none(), py::arg("model_statistics") = py::none(),
          py::arg("m") = -1, py::arg("peak") = -1.0, doc);
  };
  def_encoder("encode", &encode_body_py,
        "Encode a contiguous 1-D float32/float64 array into a payload body (bytes), "
        "on up to `threads` native threads (the same bytes for every count); "
        "lattice_stage=(H, M, beta, V) codes an LRSUQ stage computed elsewhere (the GPU), "
        "and with it model_statistics=(range, counts) fits the ANS coder's source model "
        "from statistics computed elsewhere: x is then never read and may be empty "
        "(of the coded dtype), m giving the update's size; peak: max |x| where the caller "
        "has it (sum_of_squares_and_peak's), else negative (the ANS coder's source model "
        "then takes it in a pass of its own; the same bytes either way).");
  def_encoder("encode_coded_body", &encode_coded_body_py,
        "encode's body as a CodedBody, its parts not yet written: seal_payload writes them "
        "straight into the payload (no bytes object of the body).");
  m.def("decode", &decode_body_py, py::arg("body"), py::arg("m"), py::arg("key"),
        py::arg("params"),
        py::arg("coder"), py::arg("dtype"), py::arg("threads") = 1, py::arg("out") = py::none(),
        "Decode a payload body into m values of dtype on up to `threads` native threads; "
        "with out (a writable, C-contiguous 1-D array of m values of dtype) into out, "
        "which is returned (nothing allocated for the values); raises FormatError, and "
        "InvalidArgumentError for a bad out (checked before any value is written).");
  m.def("hmac_sha256", &hmac_sha256_py, py::arg("key"), py::arg("data"),
        "HMAC-SHA256(key, data), 32 bytes (key and data: contiguous bytes-like objects).");
  m.def("hkdf_keys", &hkdf_keys_py, py::arg("ikm"), py::arg("salt"),
        py::arg("infos"),
        "The 32-byte keys HKDF-SHA256(ikm, salt, info) of each info of a tuple, from one "
        "HKDF-Extract (an empty salt is 32 zero bytes), as a tuple of bytes.");
  m.def("payload_tag", &payload_tag_py, py::arg("key"), py::arg("data"),
        "The 16-byte tag of a payload's header and ciphertext (data, at most one MAC "
        "segment of 2^20 bytes) under the 32-byte MAC key.");
  m.def("hkdf_sha256", &hkdf_sha256_py, py::arg("ikm"), py::kw_only(), py::arg("salt"),
        py::arg("info"), py::arg("length"),
        "HKDF-SHA256 (RFC 5869): Expand(Extract(salt, ikm), info, length); an empty salt is "
        "32 zero bytes; length in [1, 8160].");
  m.def("decode_symbols", &decode_symbols_py, py::arg("body"), py::kw_only(), py::arg("m"),
        py::arg("key"), py::arg("params"), py::arg("coder"), py::arg("threads") = 1,
        "Entropy-decode a payload body -> (H uint32[N], M int64[N*n]) (the GPU decodes "
        "the lattice stage); raises FormatError.");
  m.def("encode_subvectors_at", &encode_subvectors_at, py::arg("pieces"), py::arg("indices"),
        py::kw_only(), py::arg("m"), py::arg("key"), py::arg("params"), py::arg("factor"),
        "(H, M, beta, V) of the sub-vectors `indices` of an update of m coordinates, each "
        "given by its n coordinates (pieces): the host's spot-check of a GPU's results.");
  m.def("segment_matches", &segment_matches_py, py::arg("body"), py::arg("values"),
        py::kw_only(), py::arg("segment"), py::arg("m"), py::arg("key"), py::arg("params"),
        py::arg("factor"), py::arg("coder"),
        "Whether segment `segment` of a body of m coordinates (coder: its code) is the "
        "segment the host codes from that segment's coordinates (values): the host's check "
        "of a GPU's body.");
  m.def("body_parts", &body_parts_py, py::arg("body"), py::kw_only(), py::arg("coder"),
        py::arg("lattice") = 1, py::arg("m") = -1, py::arg("n") = 1,
        "The parts of a payload body and their sizes in bits (with m >= 0, an ANS body "
        "must have the segments of m coordinates in dimension n).");
  m.def("seal_xor", &seal_xor, py::arg("data"), py::kw_only(), py::arg("key"),
        py::arg("threads") = 1,
        "XOR the sealing keystream (ChaCha20, RFC 8439, nonce (0, 0, 'SEAL')) into a "
        "writable byte buffer, in place, on up to `threads` threads.");
  py::class_<UnwrittenBody>(m, "CodedBody",
                            "A payload body coded but not yet written (encode_coded_body): "
                            "len() bytes long, written once, by seal_payload.")
      .def("__len__", &UnwrittenBody::size);
  m.def("seal_payload", &seal_payload, py::arg("head"), py::arg("sealed_head"), py::arg("body"),
        py::arg("padding"), py::arg("key"), py::arg("threads"),
        py::arg("tag_bytes"), py::arg("tag_of"), py::arg("mac_key") = py::bytes(),
        "A payload in one new bytes object: head, then sealed_head || body || padding zeros "
        "XOR the sealing keystream, then tag_of(memoryview of all before the tag) "
        "(tag_bytes long), or with tag_of None the one-segment tag under mac_key "
        "(payload_tag).");
  m.def("unseal", &unseal, py::arg("data"), py::arg("start"), py::arg("stop"),
        py::arg("first"), py::arg("key"), py::arg("threads") = 1,
        "data[start:stop] XOR the sealing keystream from its byte `first`, as new bytes.");
  m.def("sum_of_squares", &sum_squares, py::arg("x"), py::arg("fixed_order") = true,
        py::arg("threads") = 1,
        "Sum of squares in float64 on up to `threads` threads (in a fixed order, the same "
        "bits everywhere and for every thread count, unless fixed_order=False: faster, for "
        "estimates); raises on NaN/Inf.");
  m.def("sum_of_squares_and_peak", &sum_squares_and_peak, py::arg("x"), py::arg("threads") = 1,
        "(sum_of_squares(x) in the fixed order, max |x|) from one pass over x; raises on "
        "NaN/Inf.");
  m.def("acceptance_probability", [](const LrsuqParams& p) { return acceptance_probability(p); },
        py::arg("params"),
        "The probability that one trial is accepted (1 where the cell is the ball).");

  // Test hooks: the core's internal stages and primitives (the LRSUQ stage
  // alone, the body coders' pieces, ChaCha20, the lattice kernels, the
  // deterministic math), for tests/ and bench/; the library calls none of them.
  py::module_ t = m.def_submodule(
      "testing", "Test hooks: internal stages and primitives of the native core, for tests "
      "and benchmarks (not a stable API).");
  py::module_::import("sys").attr("modules")["cepam._core.testing"] = t;
  t.def("encode_lattice", &encode_lattice, py::arg("x"), py::kw_only(), py::arg("key"), py::arg("params"), py::arg("factor"),
        "LRSUQ-encode a contiguous 1-D float32/float64 array -> (H uint32[N], M int64[N*n]).");
  t.def("decode_lattice", &decode_lattice, py::arg("H"), py::arg("M"), py::kw_only(), py::arg("m"),
        py::arg("key"), py::arg("params"),
        py::arg("dtype"), "LRSUQ-decode (H, M) into m values of the given dtype.");
  t.def("lattice_side_info", &side_info, py::arg("H"), py::kw_only(), py::arg("key"),
        py::arg("params"),
        "Side information (beta float64[N], V float64[N*n]) of trial indices H.");
  t.def("encode_subvectors", &encode_subvectors, py::arg("x"), py::kw_only(), py::arg("key"),
        py::arg("params"),
        py::arg("factor"),
        "encode_lattice by the per-sub-vector (CUDA kernel) arithmetic on the host "
        "-> (H, M, beta, V).");
  t.def("decode_subvectors", &decode_subvectors, py::arg("H"), py::arg("M"), py::kw_only(),
        py::arg("m"), py::arg("key"), py::arg("params"), py::arg("dtype"),
        "decode_lattice by the per-sub-vector (CUDA kernel) arithmetic on the host.");
  t.def("latent_words", [](const LrsuqParams& p) { return latent_words(p); }, py::arg("params"));
  t.def("latent_radius", &latent_radius, py::kw_only(), py::arg("key"), py::arg("params"),
        py::arg("first"), py::arg("count"),
        "Radii r(U_j) of sub-vectors first .. first+count-1.");
  t.def("maxwell_draw", &maxwell_draw, py::arg("word"), py::arg("reserve"),
        "maxwell::sample of one word with the given reserve words -> (x, reserve words used).");
  t.def("maxwell_layers", &maxwell_layers,
        "The Maxwell ziggurat's table: its columns and the base's constants.");
  t.def("golomb_parameter", &golomb_parameter, py::arg("p"));
  t.def("pool_threads", [] { return WorkerPool::instance().threads(); },
        "The threads the native worker pool holds (common/worker_pool.hpp).");
  t.def("best_expg_order", [](const CArray<std::int64_t>& M) {
    return best_expg_order(M.data(), static_cast<std::size_t>(M.size()));
  }, py::arg("M"));
  t.def("body_encode", &body_encode, py::arg("H"), py::arg("M"), py::kw_only(),
        py::arg("golomb"), py::arg("expg_k"), "-> (body bytes, h_bits, m_bits)");
  t.def("golomb_body_by_units", &golomb_body_by_units_py, py::arg("H"), py::arg("M"),
        py::kw_only(), py::arg("golomb"), py::arg("n"));
  t.def("body_decode", &body_decode, py::arg("body"), py::kw_only(), py::arg("N"),
        py::arg("count"), py::arg("golomb"), py::arg("expg_k"), py::arg("h_bits"),
        py::arg("m_bits"), "-> (H uint32[N], M int64[count]); raises FormatError.");
  t.def("check_body", &body_check, py::arg("len"), py::kw_only(), py::arg("N"),
        py::arg("count"), py::arg("golomb"), py::arg("expg_k"), py::arg("h_bits"),
        py::arg("m_bits"), "Raises FormatError unless a body of len bytes can hold the counts.");
  t.def("ans_encode_intervals", &ans_encode_intervals, py::arg("start"), py::arg("freq"),
        "rANS-code symbols given as (start, freq) intervals at 24-bit precision.");
  t.def("ans_encode_together", &ans_encode_together, py::arg("start"), py::arg("freq"),
        py::arg("first"),
        "The rANS streams of symbols [first[s], first[s + 1]), 1 to 4 of them, coded together "
        "(AnsEncoder::finish_together) -> list of bytes.");
  t.def("kept_mapping_bytes", &pages::kept_bytes,
        "Bytes of freed working buffers the process keeps mapped for the next call "
        "(common/pages.hpp; at most kept_mapping_limit()).");
  t.def("kept_mapping_limit", [] { return kKeptMappingBytes; },
        "The most bytes of freed working buffers the process keeps (common/pages.hpp).");
  t.def("ans_encode_step", &ans_encode_step, py::arg("x"), py::arg("start"), py::arg("freq"),
        "rans_encode_step of each state x[i] alone for symbol i (the scalar encoder's step) -> "
        "(states, words (0 where none), whether a word was emitted).");
  t.def("ans_encode_group_avx512", &ans_encode_group_avx512, py::arg("x"), py::arg("start"),
        py::arg("freq"),
        "One group of two runs by the AVX-512 rANS kernel from states x -> (states, words of "
        "the first run, words of the second); raises InvalidArgumentError without AVX-512.");
  t.def("ans_body_by_streams", &ans_body_by_streams, py::arg("x"), py::kw_only(),
        py::arg("key"), py::arg("params"), py::arg("factor"), py::arg("shared_symbols") = false,
        "The ANS body of x as the GPU path codes it (LRSUQ per sub-vector, every segment's "
        "streams by the CUDA kernel's code on the host; with shared_symbols every stream's "
        "symbols by the symbol kernel's code too) -> bytes.");
  t.def("decode_by_segments", &decode_by_segments_py, py::arg("body"), py::kw_only(),
        py::arg("m"), py::arg("key"), py::arg("params"), py::arg("dtype"),
        py::arg("coder") = static_cast<int>(Coder::Ans),
        "A body decoded a segment at a time by the GPU decoder's host twin (coder: the "
        "body coder's code) -> values (decode's, and its errors).");
  t.def("body_symbols", &body_symbols_py, py::arg("x"), py::kw_only(), py::arg("key"),
        py::arg("params"), py::arg("factor"),
        "Every stream's symbols by the symbol kernel's host twin -> (first uint64, start "
        "uint32, freq uint32, tabled uint8): stream r segments + s is segment s's box (r = 0) "
        "or point (r = 1) stream; tabled[s]: segment s has a point table.");
  t.def("sum_of_squares_blocks", &sum_of_squares_blocks, py::arg("x"),
        "The first pass of the clip's sum of squares by blocks of 2^16 and a fixed tree, as "
        "the CUDA kernel computes it -> (total, maxabs).");
  t.def("model_statistics", &model_statistics, py::arg("x"), py::kw_only(), py::arg("factor"),
        "The source model's statistics of x factor by the GPU kernels' host twin "
        "-> (range, counts[1024] uint64).");
  t.def("source_model_fit", &source_model_fit, py::arg("x"), py::kw_only(), py::arg("factor"),
        py::arg("params"), py::arg("threads") = 1,
        "The serialised source model the encoder fits to x factor for params.");
  t.def("source_model_from_statistics", &source_model_from_statistics, py::arg("range"),
        py::arg("counts"), py::kw_only(), py::arg("params"),
        "The serialised source model fitted from statistics (range, counts).");
  t.def("source_model_reserialized", &source_model_reserialized, py::arg("model"),
        "A serialised source model parsed and serialised again (its knots coded at the "
        "order the encoder chooses for them).");
  t.def("source_model_tables", &source_model_tables, py::arg("model"),
        "A serialised source model's bins and tables -> (edges uint16[K + 1], knots "
        "uint32[K + 1], grid float64[1025], quantiles float64[4096], grid and slopes packed "
        "uint64[1024]: grid[i] in the low 32 bits, grid[i + 1] - grid[i] in the high).");
  t.def("compact_round_trip", &compact_round_trip, py::arg("H"), py::arg("M"), py::kw_only(),
        py::arg("threads") = 1,
        "H and M through the GPU's compact transfer (packed at the narrowest widths of "
        "their range, then widened; the host's side on threads threads) -> (H width, M width, "
        "packed H bytes, packed M bytes, H, M).");
  t.def("rans_encode_segments", &rans_encode_segments_py, py::arg("start"), py::arg("freq"),
        py::arg("first"),
        "rANS-code the streams [first[s], first[s+1]) as the CUDA kernel does -> [bytes].");
  t.def("ans_decode_table", &ans_decode_table, py::arg("data"), py::arg("cum"),
        py::arg("count"), "Decode count symbols of a cumulative table.");
  t.def("chacha20_block", &chacha_block, py::arg("key"), py::arg("counter"), py::arg("nonce"),
        py::kw_only(), py::arg("double_rounds") = kSealDoubleRounds,
        "RFC 8439 block function (10 double rounds: ChaCha20; 4: ChaCha8) -> 64 bytes.");
  t.def("keystream_words", &keystream_words, py::arg("key"), py::arg("stream"),
        py::arg("first_word"), py::arg("count"));
  t.def("lattice_closest_points", &closest_points_py, py::arg("t"), py::kw_only(),
        py::arg("lattice"), py::arg("n"),
        "Integer basis coordinates of the closest lattice points of t (count * n values).");
  t.def("lattice_points", &lattice_points_py, py::arg("m"), py::kw_only(), py::arg("lattice"),
        py::arg("n"), "The lattice points G^T m of integer coordinates m (count * n values).");
  t.def("lattice_dithers", &lattice_dithers_py, py::arg("words"), py::kw_only(),
        py::arg("lattice"), py::arg("n"),
        "Dithers (uniform in the Voronoi cell) from 64-bit words, n per dither.");
  t.def("lattice_basis", &lattice_basis_py, py::kw_only(), py::arg("lattice"), py::arg("n"),
        "The lower-triangular basis, rows = basis vectors (n x n).");
  t.def("sha256_uses_sha_ni", &sha256_uses_sha_ni,
        "Whether hmac_sha256 and hkdf_sha256 run on the CPU's SHA extensions.");
  t.def("det_log", &elementwise<detmath::log_batch>, py::arg("x"));
  t.def("det_cos2pi_squared", &elementwise<detmath::cos2pi_squared_batch>, py::arg("t"));
  t.def("reciprocals", &elementwise<reciprocals_of>, py::arg("b"),
        "1.0 / b by the encoder's reciprocal kernel (lrsuq/batch_kernels.hpp), float64.");
}
