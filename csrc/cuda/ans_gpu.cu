// The rANS streams of an ANS body's segments on the device (ans_gpu.hpp):
// one stream a thread, each running coding/rans_core.hpp's
// rans_encode_stream, the function the CPU's AnsEncoder runs (the host
// tests check the two flows bit for bit: tests/core/test_rans_core.py);
// the segments' box-model symbols too, a unit of work (a piece of a block's
// trial indices or coordinates) a thread, by coding/symbol_core.hpp's
// box_unit_symbols, the code the CPU's coder runs (tests/core/test_symbol_core.py
// checks its host twin).
#include "cuda/ans_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/errors.hpp"
#include "cuda/runtime.cuh"
#include "payload/ans_streams.hpp"
#include "payload/box_decode.hpp"

namespace cepam::gpu {
namespace {

constexpr int kStreamThreads = 64;
constexpr int kUnitThreads = 128;
constexpr int kGatherThreads = 256;
constexpr int kDecodeThreads = 128;

// Stream s of the launch: its symbols, scratch words and room in out
// (offsets as rans_encode_segments takes them); its length in sizes[s],
// and *failed set to 1 if its room was too small (never, by the room given).
__global__ void rans_segments_kernel(const AnsSymbol* symbols, const std::uint64_t* first,
                                     unsigned long long segments, std::uint32_t* words,
                                     std::uint8_t* out, const std::uint64_t* out_first,
                                     std::uint64_t* sizes, int* failed) {
  const unsigned long long s = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  if (s >= segments) return;
  std::size_t size = 0;
  const RansStatus st = rans_encode_stream(
      symbols + first[s], static_cast<std::size_t>(first[s + 1] - first[s]), 0, words + first[s],
      out + out_first[s], static_cast<std::size_t>(out_first[s + 1] - out_first[s]), &size);
  sizes[s] = size;
  if (st != kRansOk) atomicExch(failed, 1);
}


// Segment s's stream (sizes[s] bytes at room + out_first[s]) to packed +
// at[s]: one block of threads a segment.
__global__ void gather_streams_kernel(const std::uint8_t* room, const std::uint64_t* out_first,
                                      const std::uint64_t* sizes, const std::uint64_t* at,
                                      unsigned long long segments, std::uint8_t* packed) {
  const unsigned long long s = blockIdx.x;
  if (s >= segments) return;
  const std::uint8_t* from = room + out_first[s];
  std::uint8_t* to = packed + at[s];
  for (unsigned long long i = threadIdx.x; i < sizes[s]; i += blockDim.x) to[i] = from[i];
}

// Codes the streams symbols[first[s] .. first[s + 1]) (symbols in device
// memory, first on the host) as rans_encode_segments does, each into the
// room of its longest possible stream; then gathers the streams, one after
// another, and brings only those bytes to the host (appended to out).
void code_streams(const AnsSymbol* symbols, const std::uint64_t* first, std::size_t segments,
                  int device, cudaStream_t stream, std::vector<std::uint8_t>& out,
                  std::vector<std::uint64_t>& sizes, Timing& t) {
  const std::size_t total = static_cast<std::size_t>(first[segments]);
  // Each stream's room: its largest possible length.
  std::vector<std::uint64_t> out_first(segments + 1, 0);
  for (std::size_t s = 0; s < segments; ++s) {
    if (first[s + 1] < first[s]) throw InvalidArgument("segment offsets must not decrease");
    out_first[s + 1] = out_first[s] + rans_max_stream_bytes(first[s + 1] - first[s]);
  }
  const std::size_t room = static_cast<std::size_t>(out_first[segments]);
  // Layout: failure flag, offsets, room offsets, sizes, the streams' places
  // once gathered, words, room.
  const std::size_t off_first = 8, off_out_first = off_first + (segments + 1) * 8;
  const std::size_t off_sizes = off_out_first + (segments + 1) * 8;
  const std::size_t off_at = off_sizes + segments * 8;
  const std::size_t off_words = off_at + (segments + 1) * 8;
  const std::size_t off_out = off_words + ((total * 4 + 7) / 8) * 8;
  Scratch scratch(device, off_out + room);
  Timer copy_timer(stream), kernel_timer(stream);
  const int zero = 0;
  int failed = 0;
  const std::size_t base = sizes.size();
  sizes.resize(base + segments);
  std::uint64_t* const host_sizes = sizes.data() + base;
  std::vector<std::uint64_t> at(segments + 1, 0);
  std::unique_ptr<Scratch> packed;
  try {
    copy_timer.start();
    check(cudaMemcpyAsync(scratch.at<int>(0), &zero, sizeof zero, cudaMemcpyHostToDevice, stream),
          "reset failure flag");
    check(cudaMemcpyAsync(scratch.at<std::uint64_t>(off_first), first, (segments + 1) * 8,
                          cudaMemcpyHostToDevice, stream), "copy segment offsets");
    check(cudaMemcpyAsync(scratch.at<std::uint64_t>(off_out_first), out_first.data(),
                          (segments + 1) * 8, cudaMemcpyHostToDevice, stream), "copy room offsets");
    copy_timer.stop(&t.transfer_ms);
    kernel_timer.start();
    const unsigned int blocks =
        static_cast<unsigned int>((segments + kStreamThreads - 1) / kStreamThreads);
    rans_segments_kernel<<<blocks, kStreamThreads, 0, stream>>>(
        symbols, scratch.at<std::uint64_t>(off_first), segments,
        scratch.at<std::uint32_t>(off_words), scratch.at<std::uint8_t>(off_out),
        scratch.at<std::uint64_t>(off_out_first), scratch.at<std::uint64_t>(off_sizes),
        scratch.at<int>(0));
    check(cudaGetLastError(), "launch the rANS kernel");
    kernel_timer.stop(&t.kernel_ms);
    copy_timer.start();
    check(cudaMemcpyAsync(&failed, scratch.at<int>(0), sizeof failed, cudaMemcpyDeviceToHost,
                          stream), "copy failure flag");
    check(cudaMemcpyAsync(host_sizes, scratch.at<std::uint64_t>(off_sizes), segments * 8,
                          cudaMemcpyDeviceToHost, stream), "copy stream sizes");
    check(cudaStreamSynchronize(stream), "synchronize");
    copy_timer.stop(&t.transfer_ms);
    if (failed != 0) throw DeviceError("rANS kernel: a stream overran its room");
    for (std::size_t s = 0; s < segments; ++s) {
      if (host_sizes[s] > out_first[s + 1] - out_first[s])
        throw DeviceError("rANS kernel: a stream's length exceeds its room");
      at[s + 1] = at[s] + host_sizes[s];
    }
    const std::size_t bytes = static_cast<std::size_t>(at[segments]);
    packed = std::make_unique<Scratch>(device, bytes);
    kernel_timer.start();
    check(cudaMemcpyAsync(scratch.at<std::uint64_t>(off_at), at.data(), (segments + 1) * 8,
                          cudaMemcpyHostToDevice, stream), "copy the streams' places");
    gather_streams_kernel<<<static_cast<unsigned int>(segments), kGatherThreads, 0, stream>>>(
        scratch.at<std::uint8_t>(off_out), scratch.at<std::uint64_t>(off_out_first),
        scratch.at<std::uint64_t>(off_sizes), scratch.at<std::uint64_t>(off_at), segments,
        packed->at<std::uint8_t>(0));
    check(cudaGetLastError(), "launch the gather kernel");
    kernel_timer.stop(&t.kernel_ms);
    copy_timer.start();
    const std::size_t end = out.size();
    out.resize(end + bytes);
    check(cudaMemcpyAsync(out.data() + end, packed->at<std::uint8_t>(0), bytes,
                          cudaMemcpyDeviceToHost, stream), "copy streams");
    check(cudaStreamSynchronize(stream), "synchronize");
    copy_timer.stop(&t.transfer_ms);
  } catch (...) {
    cudaStreamSynchronize(stream);  // nothing in flight when the buffers go
    throw;
  }
}

// Unit i of a body's symbols, one thread a unit (symbol_core.hpp's
// box_unit_symbols): its symbols at symbols + at[i] (symbols = nullptr:
// none), its symbol count at counts[i], and 1 at *framed where a
// sub-vector of the unit has a point frame.
__global__ void box_units_kernel(BoxSymbolModel z, BoxUnits u, const std::uint32_t* H,
                                 const std::int64_t* M, const double* beta, const double* V,
                                 const std::uint64_t* at, AnsSymbol* symbols,
                                 std::uint64_t* counts, unsigned int* framed) {
  const unsigned long long i =
      blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  if (i >= u.count) return;
  AnsSymbol* out = symbols != nullptr ? symbols + at[i] : nullptr;
  bool f = false;
  counts[i] = box_unit_symbols(z, u, i, H, M, beta, V, out, &f);
  if (f) *framed = 1;
}

}  // namespace

void rans_encode_segments(const AnsSymbol* symbols, const std::uint64_t* first,
                          std::size_t segments, int device, std::uintptr_t stream_id,
                          std::vector<std::uint8_t>& out, std::vector<std::uint64_t>& sizes,
                          Timing* timing) {
  if (segments == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  const std::size_t total = static_cast<std::size_t>(first[segments]);
  Scratch scratch(device, total * sizeof(AnsSymbol));
  Timing t;
  Timer copy_timer(stream);
  copy_timer.start();
  check(cudaMemcpyAsync(scratch.at<AnsSymbol>(0), symbols, total * sizeof(AnsSymbol),
                        cudaMemcpyHostToDevice, stream), "copy symbols");
  copy_timer.stop(&t.transfer_ms);
  code_streams(scratch.at<AnsSymbol>(0), first, segments, device, stream, out, sizes, t);
  if (timing != nullptr) *timing = t;
}

namespace {

// z's tables (knots, slopes, quantiles and the trial index's cum; host
// memory) in device memory at `at` (kBoxTableBytes bytes), copied on
// `stream`; returns z pointing there.
constexpr std::size_t kBoxKnots = kCdfCells + 1, kBoxSlopes = kCdfCells;
constexpr std::size_t kBoxQuantiles = std::size_t{1} << kCdfKnotBits, kBoxCum = kGeometricTable + 1;
constexpr std::size_t kBoxTableBytes =
    (kBoxKnots + kBoxSlopes + kBoxQuantiles) * 8 + (kBoxCum * 4 + 7) / 8 * 8;
BoxSymbolModel box_tables_to_device(const BoxSymbolModel& z, char* at, cudaStream_t stream) {
  BoxSymbolModel dz = z;
  auto* knot = reinterpret_cast<double*>(at);
  auto* slope = knot + kBoxKnots;
  auto* quantile = slope + kBoxSlopes;
  auto* cum = reinterpret_cast<std::uint32_t*>(quantile + kBoxQuantiles);
  dz.cdf.knot = knot;
  dz.cdf.slope = slope;
  dz.quantile = quantile;
  dz.geometric = z.geometric != nullptr ? cum : nullptr;
  check(cudaMemcpyAsync(knot, z.cdf.knot, kBoxKnots * 8, cudaMemcpyHostToDevice, stream),
        "copy the model's knots");
  check(cudaMemcpyAsync(slope, z.cdf.slope, kBoxSlopes * 8, cudaMemcpyHostToDevice, stream),
        "copy the model's slopes");
  check(cudaMemcpyAsync(quantile, z.quantile, kBoxQuantiles * 8, cudaMemcpyHostToDevice, stream),
        "copy the model's quantiles");
  if (z.geometric != nullptr)
    check(cudaMemcpyAsync(cum, z.geometric, kBoxCum * 4, cudaMemcpyHostToDevice, stream),
          "copy the trial index's table");
  return dz;
}

// Every segment's symbols on the device, a unit of work a thread
// (symbol_core.hpp's BoxUnits): each unit's symbols counted (first pass),
// their offsets summed on the host, then written into `symbols` (device
// memory, allocated here); first (segments + 1 entries) gets the
// segments' runs.  False after the first pass where a sub-vector has a
// point frame.  Kernel and copy times go to t.
bool box_symbols_on_device(const BoxSymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                         const double* beta, const double* V, std::size_t N, std::size_t S,
                         std::size_t segments, int device, cudaStream_t stream,
                         std::vector<std::uint64_t>& first, std::unique_ptr<Scratch>& symbols,
                         Timing& t) {
  const BoxUnits u = box_units(z, N, S);
  // The model's tables on the device, then the units' counts and offsets,
  // then the flag of a point frame.
  const std::size_t off_counts = kBoxTableBytes;
  const std::size_t off_at = off_counts + u.count * 8;
  const std::size_t off_framed = off_at + (u.count + 1) * 8;
  Scratch tables(device, off_framed + 8);
  unsigned int framed = 0;
  Timer copy_timer(stream), kernel_timer(stream);
  std::vector<std::uint64_t> at(u.count + 1, 0);
  const unsigned int blocks =
      static_cast<unsigned int>((u.count + kUnitThreads - 1) / kUnitThreads);
  BoxSymbolModel dz;
  try {
    copy_timer.start();
    dz = box_tables_to_device(z, tables.at<char>(0), stream);
    check(cudaMemsetAsync(tables.at<unsigned int>(off_framed), 0, 4, stream), "reset the flag");
    copy_timer.stop(&t.transfer_ms);
    kernel_timer.start();  // the first pass: each unit's symbol count
    box_units_kernel<<<blocks, kUnitThreads, 0, stream>>>(
        dz, u, H, M, beta, V, nullptr, nullptr, tables.at<std::uint64_t>(off_counts),
        tables.at<unsigned int>(off_framed));
    check(cudaGetLastError(), "launch the symbol-count kernel");
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(at.data() + 1, tables.at<std::uint64_t>(off_counts), u.count * 8,
                          cudaMemcpyDeviceToHost, stream), "copy the symbol counts");
    check(cudaMemcpyAsync(&framed, tables.at<unsigned int>(off_framed), 4,
                          cudaMemcpyDeviceToHost, stream), "copy the flag");
    check(cudaStreamSynchronize(stream), "synchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);
    throw;
  }
  if (framed != 0) return false;
  for (std::size_t i = 0; i < u.count; ++i) at[i + 1] += at[i];
  first.assign(segments + 1, 0);
  box_segment_offsets(u, at.data(), first.data());
  symbols = std::make_unique<Scratch>(device, at[u.count] * sizeof(AnsSymbol));
  // The second pass counts again (into zeroed counts): a pass that did not
  // run, or ran otherwise than the first, is an error, not a wrong body.
  std::vector<std::uint64_t> again(u.count);
  try {
    check(cudaMemcpyAsync(tables.at<std::uint64_t>(off_at), at.data(), (u.count + 1) * 8,
                          cudaMemcpyHostToDevice, stream), "copy the units' offsets");
    check(cudaMemsetAsync(tables.at<std::uint64_t>(off_counts), 0, u.count * 8, stream),
          "reset the symbol counts");
    kernel_timer.start();  // the second: the symbols
    box_units_kernel<<<blocks, kUnitThreads, 0, stream>>>(
        dz, u, H, M, beta, V, tables.at<std::uint64_t>(off_at), symbols->at<AnsSymbol>(0),
        tables.at<std::uint64_t>(off_counts), tables.at<unsigned int>(off_framed));
    check(cudaGetLastError(), "launch the symbol kernel");
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(again.data(), tables.at<std::uint64_t>(off_counts), u.count * 8,
                          cudaMemcpyDeviceToHost, stream), "copy the symbol counts");
    check(cudaStreamSynchronize(stream), "synchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);
    throw;
  }
  for (std::size_t i = 0; i < u.count; ++i)
    if (again[i] != at[i + 1] - at[i])
      throw DeviceError("the symbol kernel's second pass counted other symbols than its first");
  return true;
}

// Segment blockIdx.x of a box-model body (payload/box_decode.hpp's steps, as
// box_decode_segment runs them): thread 0 reads the stream (the trial
// indices of a block, then piece by piece the trial indices' check and the
// coordinates), the block's threads compute each piece's side information
// and reconstruct its values (the first sub-vector with a value that is
// not finite found by atomicMin).  Each step's outcome has its own shared
// variable, which the threads read after a barrier and thread 0 writes
// again only after later barriers: all threads take the same branches.
template <class T>
__global__ void box_decode_kernel(BoxSymbolModel z, subvector::Config c, Key key,
                                const std::uint8_t* body, const BoxSegment* segments,
                                unsigned long long m, std::uint32_t* H, double* beta, double* V,
                                std::int64_t* M, T* y, BoxSegmentOutcome* outcomes) {
  __shared__ int opened, trials, points;
  __shared__ unsigned int nonfinite;  // the piece's first sub-vector with a value not finite
  __shared__ BoxSegmentOutcome check;
  const unsigned long long s = blockIdx.x;
  const BoxSegment seg = segments[s];
  const std::size_t n = static_cast<std::size_t>(z.basis.n);
  const BoxDecodeScratch b{H + s * z.block, beta + s * z.piece, V + s * z.piece * n,
                         M + s * z.piece * n};
  const bool reader = threadIdx.x == 0;
  RansReader r;  // (thread 0's)
  if (reader) opened = rans_open(r, body + seg.offset, static_cast<std::size_t>(seg.size));
  __syncthreads();
  int status = opened;
  std::uint64_t nonfinite_at = 0;
  for (std::uint64_t b0 = seg.first; status == kReadOk && b0 < seg.last; b0 += z.block) {
    const std::size_t count =
        seg.last - b0 < z.block ? static_cast<std::size_t>(seg.last - b0) : z.block;
    if (reader) trials = box_read_trials(z, r, count, b.H);
    __syncthreads();
    if ((status = trials) != kReadOk) break;
    for (std::size_t k0 = 0; k0 < count; k0 += z.piece) {
      const std::size_t e = count - k0 < z.piece ? count - k0 : z.piece;
      if (reader) check = box_check_trials(c, b.H + k0, e, b0 + k0);
      __syncthreads();
      if ((status = check.status) != kReadOk) break;
      for (std::size_t i = threadIdx.x; i < e; i += blockDim.x)
        b.beta[i] = subvector::side_info_one(c, key.w, b.H[k0 + i], b0 + k0 + i, b.V + i * n);
      __syncthreads();
      if (reader) {
        points = box_read_points(z, r, e, b.beta, b.V, b.M);
        nonfinite = static_cast<unsigned int>(e);
      }
      __syncthreads();
      if ((status = points) != kReadOk) break;
      for (std::size_t i = threadIdx.x; i < e; i += blockDim.x) {
        if (!subvector::reconstruct_one(c, b.beta[i], b.V + i * n, b.M + i * n, m, b0 + k0 + i,
                                        y))
          atomicMin(&nonfinite, static_cast<unsigned int>(i));
      }
      __syncthreads();  // (and the next piece overwrites beta, V and M)
      if (nonfinite != e) {
        status = kReadNonFinite;
        nonfinite_at = b0 + k0 + nonfinite;
        break;
      }
    }
  }
  if (reader) {
    BoxSegmentOutcome out{status, 0, 0};
    if (status == kReadBadTrial) out = check;
    if (status == kReadNonFinite) out.at = nonfinite_at;
    if (status == kReadOk) out.status = box_read_end(r, seg);
    outcomes[s] = out;
  }
}

}  // namespace

template <class T>
bool decode_box_ans_body(const LrsuqParams& p, const ChaChaKey& key, const std::uint8_t* body,
                         std::size_t len, std::size_t m, int device, std::uintptr_t stream_id,
                         T* y, Timing* timing) {
  const BoxDecodePlan plan(p, body, len, m);  // the body parsed on the host (FormatError)
  if (!plan.box_only) return false;
  const std::size_t S = plan.segments.size();
  if (S == 0) return true;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const auto pad8 = [](std::size_t bytes) { return (bytes + 7) / 8 * 8; };
  // Layout: tables, body, segments, outcomes, then each segment's scratch
  // (H of a block, beta, V and M of a piece).
  const std::size_t off_body = kBoxTableBytes, off_segs = off_body + pad8(len);
  const std::size_t off_out = off_segs + S * sizeof(BoxSegment);
  const std::size_t off_h = off_out + pad8(S * sizeof(BoxSegmentOutcome));
  const std::size_t off_beta = off_h + pad8(S * plan.z.block * 4);
  const std::size_t off_v = off_beta + S * plan.z.piece * 8;
  const std::size_t off_m = off_v + S * plan.z.piece * n * 8;
  Scratch scratch(device, off_m + S * plan.z.piece * n * 8);
  std::vector<BoxSegmentOutcome> outcomes(S);
  Timing t;
  Timer copy_timer(stream), kernel_timer(stream);
  try {
    copy_timer.start();
    const BoxSymbolModel dz = box_tables_to_device(plan.z, scratch.at<char>(0), stream);
    check(cudaMemcpyAsync(scratch.at<std::uint8_t>(off_body), body, len, cudaMemcpyHostToDevice,
                          stream), "copy the body");
    check(cudaMemcpyAsync(scratch.at<BoxSegment>(off_segs), plan.segments.data(),
                          S * sizeof(BoxSegment), cudaMemcpyHostToDevice, stream),
          "copy the segments");
    copy_timer.stop(&t.transfer_ms);
    kernel_timer.start();
    box_decode_kernel<T><<<static_cast<unsigned int>(S), kDecodeThreads, 0, stream>>>(
        dz, plan.config, key_words(key), scratch.at<std::uint8_t>(off_body),
        scratch.at<BoxSegment>(off_segs), m, scratch.at<std::uint32_t>(off_h),
        scratch.at<double>(off_beta), scratch.at<double>(off_v), scratch.at<std::int64_t>(off_m),
        y, scratch.at<BoxSegmentOutcome>(off_out));
    check(cudaGetLastError(), "launch the decode kernel");
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(outcomes.data(), scratch.at<BoxSegmentOutcome>(off_out),
                          S * sizeof(BoxSegmentOutcome), cudaMemcpyDeviceToHost, stream),
          "copy the outcomes");
    check(cudaStreamSynchronize(stream), "synchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);  // nothing in flight when the buffers go
    throw;
  }
  throw_first_error(outcomes.data(), S, dtype_name<T>());
  if (timing != nullptr) *timing = t;
  return true;
}

template bool decode_box_ans_body<float>(const LrsuqParams&, const ChaChaKey&,
                                         const std::uint8_t*, std::size_t, std::size_t, int,
                                         std::uintptr_t, float*, Timing*);
template bool decode_box_ans_body<double>(const LrsuqParams&, const ChaChaKey&,
                                          const std::uint8_t*, std::size_t, std::size_t, int,
                                          std::uintptr_t, double*, Timing*);

bool box_ans_streams(const BoxSymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                     const double* beta, const double* V, std::size_t N, std::size_t S,
                     int device, std::uintptr_t stream_id, std::vector<std::uint8_t>& out,
                     std::vector<std::uint64_t>& sizes, std::vector<AnsSymbol>& last,
                     Timing* timing) {
  const std::size_t segments = N / S + (N % S != 0 ? 1 : 0);
  if (segments == 0) return true;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  Timing t;
  std::vector<std::uint64_t> first;
  std::unique_ptr<Scratch> symbols;
  if (!box_symbols_on_device(z, H, M, beta, V, N, S, segments, device, stream, first, symbols, t))
    return false;
  code_streams(symbols->at<AnsSymbol>(0), first.data(), segments, device, stream, out, sizes, t);
  // The last segment's symbols, for the bomb rule's padding (payload/ans_streams.hpp).
  last.resize(static_cast<std::size_t>(first[segments] - first[segments - 1]));
  check(cudaMemcpy(last.data(), symbols->at<AnsSymbol>(0) + first[segments - 1],
                   last.size() * sizeof(AnsSymbol), cudaMemcpyDeviceToHost),
        "copy the last segment's symbols");
  if (timing != nullptr) *timing = t;
  return true;
}

bool box_symbols(const BoxSymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                 const double* beta, const double* V, std::size_t N, std::size_t S, int device,
                 std::uintptr_t stream_id, std::vector<std::uint64_t>& first,
                 std::vector<AnsSymbol>& symbols) {
  const std::size_t segments = N / S + (N % S != 0 ? 1 : 0);
  first.assign(1, 0);
  symbols.clear();
  if (segments == 0) return true;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  Timing t;
  std::unique_ptr<Scratch> device_symbols;
  if (!box_symbols_on_device(z, H, M, beta, V, N, S, segments, device, stream, first,
                             device_symbols, t))
    return false;
  symbols.resize(static_cast<std::size_t>(first[segments]));
  check(cudaMemcpy(symbols.data(), device_symbols->at<AnsSymbol>(0),
                   symbols.size() * sizeof(AnsSymbol), cudaMemcpyDeviceToHost),
        "copy the symbols");
  return true;
}

}  // namespace cepam::gpu
