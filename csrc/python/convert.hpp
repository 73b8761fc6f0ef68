// Conversions shared by the Python bindings (_core, _cuda): keys, arrays,
// and the mapping of the core's exceptions to cepam.errors.  No logic lives
// here.  (The codec's parameters travel as _core.Params, LrsuqParams.)
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coding/rans_core.hpp"
#include "coding/source_model.hpp"
#include "common/errors.hpp"
#include "common/parallel.hpp"
#include "lrsuq/quantizer.hpp"
#include "payload/ans_streams.hpp"
#include "payload/body.hpp"
#include "random/chacha20.hpp"

namespace cepam::python {

namespace py = pybind11;

inline ChaChaKey key_from(const py::bytes& key) {
  const std::string s = key;
  if (s.size() != 32) throw InvalidArgument("a stream key is 32 bytes");
  return chacha_key_from_bytes(reinterpret_cast<const unsigned char*>(s.data()));
}

// The bytes of a Python bytes object, without a copy (valid while it lives).
inline const std::uint8_t* bytes_view(const py::bytes& b, std::size_t* len) {
  char* data = nullptr;
  py::ssize_t size = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &data, &size) != 0) throw py::error_already_set();
  *len = static_cast<std::size_t>(size);
  return reinterpret_cast<const std::uint8_t*>(data);
}

// A native thread count from Python, checked (the same bound everywhere).
inline int threads_from(int threads) {
  if (threads < 1 || threads > kMaxThreads)
    throw InvalidArgument("threads must be between 1 and " + std::to_string(kMaxThreads));
  return threads;
}

template <class T>
using CArray = py::array_t<T, py::array::c_style>;

// True when a holds native-endian T (numpy's notion of an equivalent dtype).
template <class T>
inline bool holds(const py::array& a) {
  return py::isinstance<py::array_t<T>>(a);
}

inline void require_contiguous_1d(const py::array& a, const char* what) {
  if (a.ndim() != 1 || !(a.flags() & py::array::c_style))
    throw InvalidArgument(std::string(what) + " must be a contiguous 1-D array");
}

// The source model's statistics as (range, counts[kCells] uint64), and back.
inline py::tuple statistics_tuple(const SourceModel::Statistics& s) {
  CArray<std::uint64_t> counts(SourceModel::kCells);
  std::copy(s.counts.begin(), s.counts.end(), counts.mutable_data());
  return py::make_tuple(s.range, counts);
}

inline SourceModel::Statistics statistics_from(double range, const CArray<std::uint64_t>& counts) {
  if (counts.size() != SourceModel::kCells)
    throw InvalidArgument("counts must hold " + std::to_string(SourceModel::kCells) + " cells");
  SourceModel::Statistics s;
  s.range = range;
  std::copy(counts.data(), counts.data() + SourceModel::kCells, s.counts.begin());
  return s;
}

// rANS symbols from intervals [start, start + freq) at 24-bit precision,
// checked.
inline std::vector<AnsSymbol> ans_symbols(const CArray<std::uint32_t>& start,
                                          const CArray<std::uint32_t>& freq) {
  if (start.size() != freq.size()) throw InvalidArgument("start and freq differ in length");
  const std::size_t count = static_cast<std::size_t>(start.size());
  std::vector<AnsSymbol> symbols(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t s = start.data()[i], f = freq.data()[i];
    if (f == 0 || s + f > kProbScale) throw InvalidArgument("bad symbol interval");
    symbols[i] = {static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(f)};
  }
  return symbols;
}

// (first uint64, start uint32, freq uint32): segments' symbols as arrays,
// the inverse of ans_symbols.
inline py::tuple symbol_arrays(const std::vector<std::uint64_t>& first,
                               const std::vector<AnsSymbol>& symbols) {
  CArray<std::uint64_t> f(static_cast<py::ssize_t>(first.size()));
  std::copy(first.begin(), first.end(), f.mutable_data());
  CArray<std::uint32_t> start(static_cast<py::ssize_t>(symbols.size()));
  CArray<std::uint32_t> freq(static_cast<py::ssize_t>(symbols.size()));
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    start.mutable_data()[i] = symbols[i].start;
    freq.mutable_data()[i] = symbols[i].freq;
  }
  return py::make_tuple(f, start, freq);
}

// (first uint64, start uint32, freq uint32, tabled uint8): a body's
// streams' symbols (payload/ans_streams.hpp's BodySymbols) as arrays.
inline py::tuple body_symbol_arrays(const BodySymbols& body) {
  const py::tuple arrays = symbol_arrays(body.first, body.symbols);
  CArray<std::uint8_t> tabled(static_cast<py::ssize_t>(body.tabled.size()));
  std::copy(body.tabled.begin(), body.tabled.end(), tabled.mutable_data());
  return py::make_tuple(arrays[0], arrays[1], arrays[2], tabled);
}

// Checks segments' offsets into `count` symbols: first[0] = 0, non-decreasing,
// the last one count.  Returns the number of segments.
inline std::size_t segment_count(const CArray<std::uint64_t>& first, std::size_t count) {
  const std::size_t k = static_cast<std::size_t>(first.size());
  if (k < 1 || first.data()[0] != 0 || first.data()[k - 1] != count)
    throw InvalidArgument("first must run from 0 to the number of symbols");
  for (std::size_t s = 1; s < k; ++s)
    if (first.data()[s] < first.data()[s - 1]) throw InvalidArgument("first must not decrease");
  return k - 1;
}

// The arrays of an LRSUQ stage of N sub-vectors in dimension n: H[N],
// M[N n], beta[N], V[N n] (payload/body.hpp's LatticeStage).
struct StageArrays {
  CArray<std::uint32_t> H;
  CArray<std::int64_t> M;
  CArray<double> beta, V;

  // New arrays for N sub-vectors in dimension n.
  static StageArrays allocate(std::size_t N, int n) {
    const auto Nn = static_cast<py::ssize_t>(N * static_cast<std::size_t>(n));
    return {CArray<std::uint32_t>(static_cast<py::ssize_t>(N)), CArray<std::int64_t>(Nn),
            CArray<double>(static_cast<py::ssize_t>(N)), CArray<double>(Nn)};
  }
  // The arrays of a Python (H, M, beta, V), checked against m coordinates.
  static StageArrays from_tuple(const py::tuple& stage, std::size_t m, int n) {
    if (stage.size() != 4) throw InvalidArgument("lattice_stage must be (H, M, beta, V)");
    StageArrays s{stage[0].cast<CArray<std::uint32_t>>(), stage[1].cast<CArray<std::int64_t>>(),
                  stage[2].cast<CArray<double>>(), stage[3].cast<CArray<double>>()};
    const std::size_t N = (m + static_cast<std::size_t>(n) - 1) / static_cast<std::size_t>(n);
    const std::size_t Nn = N * static_cast<std::size_t>(n);
    if (static_cast<std::size_t>(s.H.size()) != N || static_cast<std::size_t>(s.M.size()) != Nn ||
        static_cast<std::size_t>(s.beta.size()) != N || static_cast<std::size_t>(s.V.size()) != Nn)
      throw InvalidArgument("lattice_stage sizes do not match m and n");
    return s;
  }
  LatticeStage view() const { return {H.data(), M.data(), beta.data(), V.data()}; }
  py::tuple tuple() const { return py::make_tuple(H, M, beta, V); }
};

inline void register_errors(py::module_& m) {
  py::module_ errors = py::module_::import("cepam.errors");
  // Leaked on purpose: the translator may run until interpreter exit.
  static PyObject* invalid = py::object(errors.attr("InvalidArgumentError")).release().ptr();
  static PyObject* format = py::object(errors.attr("FormatError")).release().ptr();
  static PyObject* decoding = py::object(errors.attr("DecodingError")).release().ptr();
  static PyObject* encoding = py::object(errors.attr("EncodingError")).release().ptr();
  static PyObject* invalid_type = py::object(errors.attr("InvalidTypeError")).release().ptr();
  static PyObject* device = py::object(errors.attr("DeviceError")).release().ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const DecodingError& e) {
      PyErr_SetString(decoding, e.what());
    } catch (const FormatError& e) {
      PyErr_SetString(format, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(device, e.what());
    } catch (const EncodingError& e) {
      PyErr_SetString(encoding, e.what());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(invalid, e.what());
    } catch (const py::type_error& e) {
      PyErr_SetString(invalid_type, e.what());
    }
  });
  (void)m;
}

}  // namespace cepam::python
