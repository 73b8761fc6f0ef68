// pybind11 binding of the CUDA LRSUQ stage (module cepam._cuda): converts
// DLPack capsules and arrays, maps exceptions, releases the GIL.  No logic
// lives here (csrc/cuda/lrsuq_gpu.hpp has it).  It binds the whole-body
// Golomb coder (csrc/cuda/golomb_gpu.hpp: encode's for large Golomb
// bodies, its decoder not used yet) and, with CEPAM_CUDA_EXPERIMENTAL
// (CMakeLists.txt), the whole-body ANS coder (csrc/cuda/ans_gpu.hpp), which
// no public call uses.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "cuda/ans_gpu.hpp"  // (declarations: bound with CEPAM_CUDA_EXPERIMENTAL only)
#include "cuda/dlpack.hpp"
#include "cuda/golomb_gpu.hpp"
#include "cuda/lrsuq_gpu.hpp"
#include "cuda/model_gpu.hpp"
#include "cuda/norm_gpu.hpp"
#include "lrsuq/quantizer.hpp"
#include "payload/ans_body.hpp"
#include "payload/ans_streams.hpp"
#include "payload/golomb_body.hpp"
#include "python/convert.hpp"

namespace py = pybind11;
using namespace cepam;
using namespace cepam::python;

namespace {

constexpr const char* kCapsule = "dltensor";
constexpr const char* kUsedCapsule = "used_dltensor";

// A consumed DLPack capsule: renamed as the protocol requires, its deleter
// called when this goes out of scope.
class Borrowed {
 public:
  explicit Borrowed(const py::capsule& capsule) {
    if (std::string(capsule.name() ? capsule.name() : "") != kCapsule)
      throw InvalidArgument("expected an unconsumed DLPack capsule ('dltensor')");
    managed_ = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsule));
    if (managed_ == nullptr) throw py::error_already_set();
    if (PyCapsule_SetName(capsule.ptr(), kUsedCapsule) != 0) throw py::error_already_set();
  }
  ~Borrowed() {
    if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
  }
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;
  const dlpack::Tensor& tensor() const { return managed_->dl_tensor; }

 private:
  dlpack::ManagedTensor* managed_ = nullptr;
};

// The number of elements of a compact (row-major, no gaps) tensor.
std::size_t compact_size(const dlpack::Tensor& t) {
  std::size_t size = 1;
  std::int64_t expected = 1;
  for (std::int32_t d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] < 0) throw InvalidArgument("negative tensor dimension");
    if (t.strides != nullptr && t.shape[d] > 1 && t.strides[d] != expected)
      throw InvalidArgument("the tensor must be contiguous (call .contiguous() first)");
    expected *= t.shape[d];
    size *= static_cast<std::size_t>(t.shape[d]);
  }
  return size;
}

py::dict timing_dict(const gpu::Timing& t) {
  py::dict d;
  d["kernel_ms"] = t.kernel_ms;
  d["transfer_ms"] = t.transfer_ms;
  return d;
}

// Checks that t is float32 or float64 in CUDA device memory.
void check_cuda_floats(const dlpack::Tensor& t) {
  if (t.device.device_type != dlpack::kCUDA)
    throw InvalidArgument("the tensor is not in CUDA device memory");
  if (t.dtype.code != dlpack::kFloat || t.dtype.lanes != 1 ||
      (t.dtype.bits != 32 && t.dtype.bits != 64))
    throw py::type_error("x must be float32 or float64");
}

// f(x, m, device) with the float32 or float64 elements x[0..m) of a
// compact CUDA tensor (a DLPack capsule) on `device`, the GIL released.
template <class F>
void with_cuda_floats(const py::capsule& capsule, F&& f) {
  Borrowed borrowed(capsule);
  const dlpack::Tensor& t = borrowed.tensor();
  check_cuda_floats(t);
  const std::size_t m = compact_size(t);
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  py::gil_scoped_release nogil;
  if (t.dtype.bits == 32) {
    f(reinterpret_cast<const float*>(base), m, t.device.device_id);
  } else {
    f(reinterpret_cast<const double*>(base), m, t.device.device_id);
  }
}

// (total, maxabs, timing): the first pass of the clip's sum of squares of a
// CUDA tensor (cuda/norm_gpu.hpp).
py::tuple sum_of_squares(const py::capsule& x, std::uintptr_t stream) {
  gpu::Timing timing;
  gpu::Squares s{};
  with_cuda_floats(x, [&](const auto* px, std::size_t m, int device) {
    s = gpu::sum_of_squares(px, m, device, stream, &timing);
  });
  return py::make_tuple(s.total, s.maxabs, timing_dict(timing));
}

// (range, counts, timing): the source model's statistics of a CUDA tensor
// times factor (cuda/model_gpu.hpp).
py::tuple model_statistics(const py::capsule& x, double factor, std::uintptr_t stream) {
  gpu::Timing timing;
  SourceModel::Statistics s;
  with_cuda_floats(x, [&](const auto* px, std::size_t m, int device) {
    s = gpu::model_statistics(px, m, factor, device, stream, &timing);
  });
  const py::tuple stats = statistics_tuple(s);
  return py::make_tuple(stats[0], stats[1], timing_dict(timing));
}

// (H, M, beta, V, timing) of a CUDA tensor given as a DLPack capsule.
py::tuple encode_lattice(const py::capsule& x, const py::bytes& key, const LrsuqParams& p,
                         double factor, std::uintptr_t stream, std::size_t chunk, int threads) {
  threads = threads_from(threads);
  const int n = p.n;
  const ChaChaKey k = key_from(key);
  Borrowed borrowed(x);
  const dlpack::Tensor& t = borrowed.tensor();
  check_cuda_floats(t);
  const std::size_t m = compact_size(t);
  const std::size_t N = (m + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
  StageArrays out = StageArrays::allocate(N, n);
  std::uint32_t* h = out.H.mutable_data();
  std::int64_t* mm = out.M.mutable_data();
  double* b = out.beta.mutable_data();
  double* v = out.V.mutable_data();
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  gpu::Timing timing;
  {
    py::gil_scoped_release nogil;
    if (t.dtype.bits == 32) {
      gpu::encode_lattice(p, k, reinterpret_cast<const float*>(base), m, factor,
                          t.device.device_id, stream, h, mm, b, v, &timing, chunk, threads);
    } else {
      gpu::encode_lattice(p, k, reinterpret_cast<const double*>(base), m, factor,
                          t.device.device_id, stream, h, mm, b, v, &timing, chunk, threads);
    }
  }
  return py::make_tuple(out.H, out.M, out.beta, out.V, timing_dict(timing));
}

// Device memory owned by a DLPack tensor of shape (m,).
struct Owned {
  dlpack::ManagedTensor managed{};
  std::int64_t shape[1]{};
  int device = 0;
};

void delete_owned(dlpack::ManagedTensor* self) {
  auto* owned = static_cast<Owned*>(self->manager_ctx);
  gpu::device_free(owned->device, owned->managed.dl_tensor.data);
  delete owned;
}

// A capsule destructor: frees the tensor unless a consumer took it.
void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsule)) {
    auto* managed = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsule));
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }
}

// fill(T* y, Timing*) with the GIL released, y the caller's tensor `out`
// (an unconsumed DLPack capsule): m compact values of dtype in device
// memory of `device`, else InvalidArgument before anything is written.
// -> (None, timing).
template <class Fill>
py::tuple fill_caller_output(const py::capsule& out, std::size_t m, int bits, int device,
                             Fill&& fill) {
  Borrowed borrowed(out);
  const dlpack::Tensor& t = borrowed.tensor();
  if (t.device.device_type != dlpack::kCUDA || t.device.device_id != device)
    throw InvalidArgument("out must be in device memory of CUDA device " +
                          std::to_string(device));
  if (t.dtype.code != dlpack::kFloat || t.dtype.lanes != 1 || t.dtype.bits != bits)
    throw InvalidArgument("out must be float" + std::to_string(bits) + ", as dtype says");
  if (compact_size(t) != m)
    throw InvalidArgument("out must hold the m = " + std::to_string(m) + " decoded values");
  char* base = static_cast<char*>(t.data) + t.byte_offset;
  gpu::Timing timing;
  {
    py::gil_scoped_release nogil;
    if (bits == 32) {
      fill(reinterpret_cast<float*>(base), &timing);
    } else {
      fill(reinterpret_cast<double*>(base), &timing);
    }
  }
  return py::make_tuple(py::none(), timing_dict(timing));
}

// (capsule, timing): a new DLPack tensor of m values of dtype ("float32"
// or "float64") in device memory of `device`, filled by fill(T* y, Timing*)
// with the GIL released (freed if fill throws); with `out` (a DLPack
// capsule, not None), the values go into the caller's tensor instead
// (fill_caller_output: no device memory is allocated for them) and the
// capsule returned is None.
template <class Fill>
py::tuple device_output(std::size_t m, const std::string& dtype, int device,
                        const py::object& out, Fill&& fill) {
  if (dtype != "float32" && dtype != "float64")
    throw InvalidArgument("dtype must be 'float32' or 'float64'");
  const int bits = dtype == "float32" ? 32 : 64;
  if (!out.is_none()) {
    if (!py::isinstance<py::capsule>(out))
      throw py::type_error("out must be a DLPack capsule or None");
    return fill_caller_output(py::reinterpret_borrow<py::capsule>(out), m, bits, device, fill);
  }
  auto* owned = new Owned();
  owned->device = device;
  owned->shape[0] = static_cast<std::int64_t>(m);
  dlpack::Tensor& t = owned->managed.dl_tensor;
  t.device = {dlpack::kCUDA, device};
  t.ndim = 1;
  t.dtype = {dlpack::kFloat, static_cast<std::uint8_t>(bits), 1};
  t.shape = owned->shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  owned->managed.manager_ctx = owned;
  owned->managed.deleter = &delete_owned;
  gpu::Timing timing;
  try {
    t.data = gpu::device_alloc(device, m * static_cast<std::size_t>(bits / 8));
    py::gil_scoped_release nogil;
    if (bits == 32) {
      fill(static_cast<float*>(t.data), &timing);
    } else {
      fill(static_cast<double*>(t.data), &timing);
    }
  } catch (...) {
    delete_owned(&owned->managed);
    throw;
  }
  py::capsule capsule(&owned->managed, kCapsule, &capsule_destructor);
  return py::make_tuple(capsule, timing_dict(timing));
}

// y = decode(H, M) in device memory of `device`, as a DLPack capsule
// (float32 or float64, shape (m,)), and the timing.
py::tuple decode_lattice(const CArray<std::uint32_t>& H, const CArray<std::int64_t>& M,
                         std::size_t m, const py::bytes& key, const LrsuqParams& p,
                         const std::string& dtype, int device, std::uintptr_t stream,
                         std::size_t chunk, int threads, const py::object& out) {
  threads = threads_from(threads);
  const int n = p.n;
  const ChaChaKey k = key_from(key);
  const std::size_t N = (m + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
  if (static_cast<std::size_t>(H.size()) != N ||
      static_cast<std::size_t>(M.size()) != N * static_cast<std::size_t>(n))
    throw InvalidArgument("H and M sizes do not match m and n");
  const std::uint32_t* h = H.data();
  const std::int64_t* mm = M.data();
  return device_output(m, dtype, device, out, [&](auto* y, gpu::Timing* timing) {
    gpu::decode_lattice(p, k, h, mm, m, device, stream, y, timing, chunk, threads);
  });
}

// The whole-body coders: Golomb always, ANS with CEPAM_CUDA_EXPERIMENTAL
// (CMakeLists.txt).

// A body of coder `coder` decoded on the GPU into device memory of
// `device` (cuda/ans_gpu.hpp's decode_ans_body_resident,
// cuda/golomb_gpu.hpp's decode_golomb_body_resident), as a DLPack capsule,
// and the timing.
template <Coder coder>
py::tuple decode_body_resident(const py::bytes& body, std::size_t m, const py::bytes& key,
                               const LrsuqParams& p, const std::string& dtype, int device,
                               std::uintptr_t stream, const py::object& out) {
  const ChaChaKey k = key_from(key);
  std::size_t len = 0;
  const std::uint8_t* data = bytes_view(body, &len);
  check_payload_body(p, data, len, m, coder);  // before allocating m values
  return device_output(m, dtype, device, out, [&](auto* y, gpu::Timing* timing) {
    if constexpr (coder == Coder::Ans)
      gpu::decode_ans_body_resident(p, k, data, len, m, device, stream, y, timing);
    else
      gpu::decode_golomb_body_resident(p, k, data, len, m, device, stream, y, timing);
  });
}

// Device memory of `bytes`, freed on scope exit.
struct DeviceBuffer {
  DeviceBuffer(int dev, std::size_t bytes) : device(dev), ptr(gpu::device_alloc(dev, bytes)) {}
  ~DeviceBuffer() { gpu::device_free(device, ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class U>
  U* as() const { return static_cast<U*>(ptr); }
  int device;
  void* ptr;
};

// The LRSUQ stage of a CUDA tensor left in device memory: calls f(m, N,
// device, H, M, beta, V) with the stage's device arrays.
template <class F>
void with_lattice(const py::capsule& x, const ChaChaKey& k, const LrsuqParams& p, double factor,
                  std::uintptr_t stream, gpu::Timing* timing, F&& f) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  with_cuda_floats(x, [&](const auto* px, std::size_t m, int device) {
    const std::size_t N = (m + n - 1) / n;
    DeviceBuffer H(device, N * 4), M(device, N * n * 8), beta(device, N * 8), V(device, N * n * 8);
    gpu::encode_lattice_resident(p, k, px, m, factor, device, stream, H.as<std::uint32_t>(),
                                 M.as<std::int64_t>(), beta.as<double>(), V.as<double>(), timing);
    f(m, N, device, H, M, beta, V);
  });
}

// The spot-checked sub-vectors' stage, copied from the device into checked.
void copy_spots(const CArray<std::uint64_t>& spot, std::size_t N, int n, int device,
                const DeviceBuffer& H, const DeviceBuffer& M, const DeviceBuffer& beta,
                const DeviceBuffer& V, StageArrays& checked) {
  const std::size_t count = static_cast<std::size_t>(spot.size());
  const std::size_t dim = static_cast<std::size_t>(n);
  const std::uint64_t* spots = spot.data();
  for (std::size_t i = 0; i < count; ++i)
    if (spots[i] >= N) throw InvalidArgument("a spot-check index names no sub-vector");
  std::uint32_t* ch = checked.H.mutable_data();
  std::int64_t* cm = checked.M.mutable_data();
  double* cb = checked.beta.mutable_data();
  double* cv = checked.V.mutable_data();
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t j = static_cast<std::size_t>(spots[i]);
    gpu::copy_to_host(device, ch + i, H.as<std::uint32_t>() + j, 4);
    gpu::copy_to_host(device, cm + i * dim, M.as<std::int64_t>() + j * dim, dim * 8);
    gpu::copy_to_host(device, cb + i, beta.as<double>() + j, 8);
    gpu::copy_to_host(device, cv + i * dim, V.as<double>() + j * dim, dim * 8);
  }
}

// (body, (H, M, beta, V) at `spot`, timing): the Golomb body of a CUDA
// tensor with the LRSUQ stage and the codes on the device
// (cuda/golomb_gpu.hpp's golomb_body_resident).  Only the body's bytes
// and the spot-checked sub-vectors' stage come back to the host.
py::tuple encode_golomb_body_resident(const py::capsule& x, const py::bytes& key,
                                      const LrsuqParams& p, double factor,
                                      const CArray<std::uint64_t>& spot, std::uintptr_t stream) {
  StageArrays checked = StageArrays::allocate(static_cast<std::size_t>(spot.size()), p.n);
  std::vector<std::uint8_t> body;
  gpu::Timing lattice_timing, coder_timing;
  const std::uint32_t golomb = golomb_parameter(acceptance_probability(p));
  with_lattice(x, key_from(key), p, factor, stream, &lattice_timing,
               [&](std::size_t, std::size_t N, int device, const DeviceBuffer& H,
                   const DeviceBuffer& M, const DeviceBuffer& beta, const DeviceBuffer& V) {
    copy_spots(spot, N, p.n, device, H, M, beta, V, checked);
    gpu::golomb_body_resident(golomb, H.as<std::uint32_t>(), M.as<std::int64_t>(), N, p.n, device,
                              stream, body, &coder_timing);
  });
  py::dict timing = timing_dict(lattice_timing);
  timing["coder_kernel_ms"] = coder_timing.kernel_ms;
  timing["coder_transfer_ms"] = coder_timing.transfer_ms;
  return py::make_tuple(py::bytes(reinterpret_cast<const char*>(body.data()), body.size()),
                        checked.tuple(), timing);
}

#if defined(CEPAM_CUDA_EXPERIMENTAL)  // the whole-body ANS coder
// The rANS streams [first[s], first[s + 1]) of the symbols (intervals
// start, freq), coded on `device` -> ([bytes], timing).
py::tuple rans_encode_segments_py(const CArray<std::uint32_t>& start,
                               const CArray<std::uint32_t>& freq,
                               const CArray<std::uint64_t>& first, int device,
                               std::uintptr_t stream) {
  const std::vector<AnsSymbol> symbols = ans_symbols(start, freq);
  const std::size_t segments = segment_count(first, symbols.size());
  std::vector<std::uint8_t> out;
  std::vector<std::uint64_t> sizes;
  gpu::Timing timing;
  {
    py::gil_scoped_release nogil;
    gpu::rans_encode_segments(symbols.data(), first.data(), segments, device, stream, out, sizes,
                              &timing);
  }
  py::list streams;
  std::size_t at = 0;
  for (const std::uint64_t size : sizes) {
    streams.append(py::bytes(reinterpret_cast<const char*>(out.data() + at), size));
    at += size;
  }
  return py::make_tuple(streams, timing_dict(timing));
}

// The ANS body of x (host memory) with every segment's rANS streams coded
// on `device` (payload/ans_streams.hpp): the CPU's body bytes.
py::bytes encode_ans_body(const py::array& x, const py::bytes& key, const LrsuqParams& p,
                          double factor, int device, std::uintptr_t stream) {
  const ChaChaKey k = key_from(key);
  if (x.ndim() != 1 || !(x.flags() & py::array::c_style))
    throw InvalidArgument("x must be a contiguous 1-D array");
  const StreamCoder on_device = [&](const AnsSymbol* symbols, const std::uint64_t* first,
                                    std::size_t count, std::vector<std::uint8_t>& out,
                                    std::vector<std::uint64_t>& sizes) {
    gpu::rans_encode_segments(symbols, first, count, device, stream, out, sizes, nullptr);
  };
  const std::size_t m = static_cast<std::size_t>(x.size());
  std::vector<std::uint8_t> body;
  if (holds<float>(x)) {
    const auto* px = static_cast<const float*>(x.data());
    py::gil_scoped_release nogil;
    body = encode_ans_body_by_streams(p, k, px, m, factor, on_device);
  } else if (holds<double>(x)) {
    const auto* px = static_cast<const double*>(x.data());
    py::gil_scoped_release nogil;
    body = encode_ans_body_by_streams(p, k, px, m, factor, on_device);
  } else {
    throw py::type_error("x must be float32 or float64");
  }
  return py::bytes(reinterpret_cast<const char*>(body.data()), body.size());
}

// with_lattice, and the symbol model of the source model fitted on the
// host from statistics = (range, counts) (the device's,
// cuda/model_gpu.hpp): calls f(model, z, m, N, device, H, M, beta, V).
template <class F>
void with_stage(const py::capsule& x, const ChaChaKey& k, const LrsuqParams& p, double factor,
                const py::tuple& statistics, std::uintptr_t stream, gpu::Timing* timing, F&& f) {
  if (statistics.size() != 2) throw InvalidArgument("statistics must be (range, counts)");
  const SourceModel::Statistics stats =
      statistics_from(statistics[0].cast<double>(), statistics[1].cast<CArray<std::uint64_t>>());
  const CellWidths widths = typical_cell_widths(p);
  const SourceModel model = SourceModel::fit_from(stats, widths.lo, widths.hi);
  const GeometricCoder hcoder(acceptance_probability(p));
  const SymbolTables tables(model, hcoder, p);
  const SymbolModel& z = tables.z();
  with_lattice(x, k, p, factor, stream, timing,
               [&](std::size_t m, std::size_t N, int device, const DeviceBuffer& H,
                   const DeviceBuffer& M, const DeviceBuffer& beta, const DeviceBuffer& V) {
    f(model, z, m, N, device, H, M, beta, V);
  });
}

// (body, (H, M, beta, V) at `spot`, timing): the ANS body of a CUDA tensor
// with the LRSUQ stage, the segments' symbols (the box model's and, on A2,
// D4 and E8, the point model's) and their rANS streams all on the device
// (cuda/ans_gpu.hpp's ans_streams_resident).  Only the streams, the last
// segment's symbols and the spot-checked sub-vectors' stage come back to
// the host.
py::tuple encode_ans_body_resident(const py::capsule& x, const py::bytes& key, const LrsuqParams& p,
                                   double factor, const py::tuple& statistics,
                                   const CArray<std::uint64_t>& spot, std::uintptr_t stream) {
  StageArrays checked = StageArrays::allocate(static_cast<std::size_t>(spot.size()), p.n);
  std::vector<std::uint8_t> body;
  gpu::Timing lattice_timing, coder_timing;
  with_stage(x, key_from(key), p, factor, statistics, stream, &lattice_timing,
             [&](const SourceModel& model, const SymbolModel& z, std::size_t m, std::size_t N,
                 int device, const DeviceBuffer& H, const DeviceBuffer& M,
                 const DeviceBuffer& beta, const DeviceBuffer& V) {
    copy_spots(spot, N, p.n, device, H, M, beta, V, checked);
    gpu::DeviceStreams streams;
    gpu::ans_streams_resident(z, H.as<std::uint32_t>(), M.as<std::int64_t>(), beta.as<double>(),
                              V.as<double>(), N, segment_subvectors(p.n), device, stream, streams,
                              &coder_timing);
    const std::size_t segments = streams.tabled.size();
    body = assemble_ans_body(model, m, uses_point_model(p.lattice), streams.bytes.data(),
                             streams.sizes, streams.tabled,
                             [&](std::size_t k) { return streams.last[k / segments]; });
  });
  py::dict timing = timing_dict(lattice_timing);
  timing["coder_kernel_ms"] = coder_timing.kernel_ms;
  timing["coder_transfer_ms"] = coder_timing.transfer_ms;
  return py::make_tuple(py::bytes(reinterpret_cast<const char*>(body.data()), body.size()),
                        checked.tuple(), timing);
}

// (first, start, freq, tabled): every stream's symbols of a CUDA tensor as
// the symbol kernel computes them (the stage on the device too), to compare
// with the host twin's (cepam._core.testing.body_symbols) symbol by symbol.
py::tuple body_symbols_resident(const py::capsule& x, const py::bytes& key, const LrsuqParams& p,
                      double factor, const py::tuple& statistics, std::uintptr_t stream) {
  BodySymbols symbols;
  with_stage(x, key_from(key), p, factor, statistics, stream, nullptr,
             [&](const SourceModel&, const SymbolModel& z, std::size_t, std::size_t N,
                 int device, const DeviceBuffer& H, const DeviceBuffer& M,
                 const DeviceBuffer& beta, const DeviceBuffer& V) {
    gpu::body_symbols_resident(z, H.as<std::uint32_t>(), M.as<std::int64_t>(), beta.as<double>(),
                     V.as<double>(), N, segment_subvectors(p.n), device, stream, symbols);
  });
  return body_symbol_arrays(symbols);
}
#endif  // CEPAM_CUDA_EXPERIMENTAL

}  // namespace

// (CEPAM_CUDA_MODULE: _cuda_on_host where the kernels run on the host,
// CMakeLists.txt's CEPAM_CUDA_ON_HOST.)
#ifndef CEPAM_CUDA_MODULE
#define CEPAM_CUDA_MODULE _cuda
#endif
PYBIND11_MODULE(CEPAM_CUDA_MODULE, m) {
  m.doc() = "cepam's LRSUQ stage on CUDA devices (bit-identical to the CPU codec)";
  register_errors(m);
  // The codec's parameters arrive as cepam._core.Params: the class is
  // registered by _core, whose import makes it known here.
  py::module_::import("cepam._core");

  m.def("device_count", []() {
    std::string why;
    const int count = gpu::device_count(&why);
    return py::make_tuple(count, why);
  }, "-> (number of CUDA devices, why none: '' when there are some); never raises.");
  m.def("encode_lattice", &encode_lattice, py::arg("x"), py::kw_only(), py::arg("key"),
        py::arg("params"), py::arg("factor"), py::arg("stream") = 0, py::arg("chunk") = 0,
        py::arg("threads") = 1,
        "LRSUQ-encode a CUDA tensor (DLPack capsule) -> (H, M, beta, V, timing), host arrays; "
        "chunk: sub-vectors per launch (0: the default); threads: host threads that widen "
        "each chunk.");
  m.def("decode_lattice", &decode_lattice, py::arg("H"), py::arg("M"), py::kw_only(),
        py::arg("m"), py::arg("key"), py::arg("params"), py::arg("dtype"),
        py::arg("device") = 0, py::arg("stream") = 0, py::arg("chunk") = 0,
        py::arg("threads") = 1, py::arg("out") = py::none(),
        "LRSUQ-decode (H, M) into a new CUDA tensor -> (DLPack capsule, timing); chunk: "
        "sub-vectors per launch (0: the default); threads: host threads that pack each "
        "chunk; out: a DLPack capsule of the caller's tensor (m values of dtype on device) "
        "to decode into instead -> (None, timing).");
  m.def("sum_of_squares", &sum_of_squares, py::arg("x"), py::kw_only(), py::arg("stream") = 0,
        "The first pass of the clip's sum of squares of a CUDA tensor (DLPack capsule), by "
        "blocks of 2^16 and a fixed tree -> (total, maxabs, timing); a total that is not "
        "finite or is below 2^-900 needs the host's second pass.");
  m.def("model_statistics", &model_statistics, py::arg("x"), py::kw_only(), py::arg("factor"),
        py::arg("stream") = 0,
        "The entropy coder's source-model statistics of a CUDA tensor (DLPack capsule) times "
        "factor -> (range, counts[1024] uint64, timing): the CPU's, for "
        "SourceModel::fit_from.");
  m.def(GolombBodyCoder::device_encode, &encode_golomb_body_resident, py::arg("x"),
        py::kw_only(), py::arg("key"), py::arg("params"), py::arg("factor"), py::arg("spot"),
        py::arg("stream") = 0,
        "The Golomb body of a CUDA tensor (DLPack capsule), coded on the GPU from the LRSUQ "
        "stage to the body's bytes: (body, (H, M, beta, V) of the sub-vectors `spot`, "
        "timing).");
  m.def(GolombBodyCoder::device_decode, &decode_body_resident<Coder::Golomb>, py::arg("body"),
        py::kw_only(), py::arg("m"), py::arg("key"), py::arg("params"), py::arg("dtype"),
        py::arg("device") = 0, py::arg("stream") = 0, py::arg("out") = py::none(),
        "Decode a Golomb body on the GPU, every segment at once, into a new CUDA tensor -> "
        "(DLPack capsule, timing): decode's values and errors; out: as decode_lattice's.");
#if defined(CEPAM_CUDA_EXPERIMENTAL)
  m.attr("EXPERIMENTAL") = true;
  m.def("body_symbols", &body_symbols_resident, py::arg("x"), py::kw_only(), py::arg("key"),
        py::arg("params"), py::arg("factor"), py::arg("statistics"), py::arg("stream") = 0,
        "Every stream's symbols of a CUDA tensor by the symbol kernel -> (first uint64, "
        "start uint32, freq uint32, tabled uint8), host arrays.");
  m.def(AnsBodyCoder::device_decode, &decode_body_resident<Coder::Ans>, py::arg("body"),
        py::kw_only(), py::arg("m"), py::arg("key"), py::arg("params"), py::arg("dtype"),
        py::arg("device") = 0, py::arg("stream") = 0, py::arg("out") = py::none(),
        "Decode an ANS body on the GPU, every segment at once, into a new CUDA tensor -> "
        "(DLPack capsule, timing): decode's values and errors; out: as decode_lattice's.");
  m.def("encode_ans_body", &encode_ans_body, py::arg("x"), py::kw_only(), py::arg("key"),
        py::arg("params"), py::arg("factor"), py::arg("device") = 0, py::arg("stream") = 0,
        "The ANS body of a host array with every segment's rANS streams coded on the GPU "
        "-> bytes (the CPU's body).");
  m.def(AnsBodyCoder::device_encode, &encode_ans_body_resident, py::arg("x"), py::kw_only(),
        py::arg("key"), py::arg("params"), py::arg("factor"), py::arg("statistics"),
        py::arg("spot"), py::arg("stream") = 0,
        "The ANS body of a CUDA tensor (DLPack capsule), coded on the GPU from the LRSUQ "
        "stage to the rANS streams, the source model fitted from statistics = (range, "
        "counts) -> (body, (H, M, beta, V) of sub-vectors spot, timing).");
  m.def("rans_encode_segments", &rans_encode_segments_py, py::arg("start"), py::arg("freq"),
        py::arg("first"), py::kw_only(), py::arg("device") = 0, py::arg("stream") = 0,
        "rANS-code the streams [first[s], first[s+1]) on the GPU, one a thread "
        "-> ([bytes], timing): the CPU's bytes.");
#else
  m.attr("EXPERIMENTAL") = false;
#endif
}
