// The rANS streams of an ANS body's segments on the device (ans_gpu.hpp):
// one stream a thread, each running coding/rans_core.hpp's
// rans_encode_stream, the function the CPU's AnsEncoder runs (the host
// tests check the two flows bit for bit: tests/core/test_rans_core.py);
// the segments' box-model symbols too, a unit of work (a piece of a block's
// trial indices or coordinates) a thread, by coding/symbol_core.hpp's
// unit_symbols, the code the CPU's coder runs (tests/core/test_symbol_core.py
// checks its host twin).
#include "cuda/ans_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/errors.hpp"
#include "cuda/body_decoder.cuh"
#include "cuda/runtime.cuh"
#include "payload/ans_streams.hpp"
#include "payload/segment_decode.hpp"

namespace cepam::gpu {
namespace {

constexpr int kStreamThreads = 64;
constexpr int kUnitThreads = 128;
constexpr int kGatherThreads = 256;

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
  Layout parts;
  const std::size_t off_failed = parts.add(sizeof(int)), off_first = parts.add((segments + 1) * 8);
  const std::size_t off_out_first = parts.add((segments + 1) * 8);
  const std::size_t off_sizes = parts.add(segments * 8), off_at = parts.add((segments + 1) * 8);
  const std::size_t off_words = parts.add(total * 4), off_out = parts.add(room);
  Scratch scratch(device, parts.bytes());
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
    check(cudaMemcpyAsync(scratch.at<int>(off_failed), &zero, sizeof zero,
                          cudaMemcpyHostToDevice, stream), "reset failure flag");
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
        scratch.at<int>(off_failed));
    check(cudaGetLastError(), "launch the rANS kernel");
    kernel_timer.stop(&t.kernel_ms);
    copy_timer.start();
    check(cudaMemcpyAsync(&failed, scratch.at<int>(off_failed), sizeof failed,
                          cudaMemcpyDeviceToHost, stream), "copy failure flag");
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

// Units [first, first + units) of a body's symbols, one thread a unit
// (symbol_core.hpp's unit_symbols; Points: the point model's units,
// each with a PointTable of local memory): unit i's symbols at symbols +
// at[i] (symbols = nullptr: none), its symbol count at counts[i], and 1 at
// flags[i / per_segment] where it sets its flag (flags = nullptr: not
// noted).  framed: the box units' flags (the segments with a point frame).
template <bool Points>
__global__ void units_kernel(SymbolModel z, SymbolUnits u, unsigned long long first,
                             unsigned long long units, const std::uint32_t* H,
                             const std::int64_t* M, const double* beta, const double* V,
                             const unsigned char* framed, const std::uint64_t* at,
                             AnsSymbol* symbols, std::uint64_t* counts,
                             unsigned char* flags) {
  const unsigned long long t =
      blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  if (t >= units) return;
  const unsigned long long i = first + t;
  AnsSymbol* out = symbols != nullptr ? symbols + at[i] : nullptr;
  bool flag = false;
  if constexpr (Points) {
    PointTable table;
    counts[i] = unit_symbols(z, u, i, H, M, beta, V, framed, &table, out, &flag);
  } else {
    counts[i] = unit_symbols(z, u, i, H, M, beta, V, framed, nullptr, out, &flag);
  }
  if (flag && flags != nullptr) flags[i / u.per_segment] = 1;
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

// z's tables (knots, slopes, quantiles, the trial index's cum, the box
// model's basis and the point model's; host memory) in device memory at
// `at` (kSymbolTableBytes bytes), copied on `stream`; returns z pointing
// there.
constexpr std::size_t kTableKnots = kCdfCells + 1, kTableSlopes = kCdfCells;
constexpr std::size_t kTableQuantiles = std::size_t{1} << kCdfKnotBits;
constexpr std::size_t kTableCum = kGeometricTable + 1;
constexpr std::size_t kTableBasis =
    (kTableKnots + kTableSlopes + kTableQuantiles) * 8 + pad8(kTableCum * 4);
constexpr std::size_t kTablePointBasis = kTableBasis + pad8(sizeof(BoxTerms));
constexpr std::size_t kSymbolTableBytes = kTablePointBasis + pad8(sizeof(PointBasis));
SymbolModel symbol_tables_to_device(const SymbolModel& z, char* at, cudaStream_t stream) {
  SymbolModel dz = z;
  auto* knot = reinterpret_cast<double*>(at);
  auto* slope = knot + kTableKnots;
  auto* quantile = slope + kTableSlopes;
  auto* cum = reinterpret_cast<std::uint32_t*>(quantile + kTableQuantiles);
  auto* basis = reinterpret_cast<BoxTerms*>(at + kTableBasis);
  auto* point_basis = reinterpret_cast<PointBasis*>(at + kTablePointBasis);
  dz.cdf.knot = knot;
  dz.cdf.slope = slope;
  dz.quantile = quantile;
  dz.geometric = z.geometric != nullptr ? cum : nullptr;
  dz.basis = basis;
  dz.point_basis = point_basis;
  check(cudaMemcpyAsync(knot, z.cdf.knot, kTableKnots * 8, cudaMemcpyHostToDevice, stream),
        "copy the model's knots");
  check(cudaMemcpyAsync(slope, z.cdf.slope, kTableSlopes * 8, cudaMemcpyHostToDevice, stream),
        "copy the model's slopes");
  check(cudaMemcpyAsync(quantile, z.quantile, kTableQuantiles * 8, cudaMemcpyHostToDevice, stream),
        "copy the model's quantiles");
  if (z.geometric != nullptr)
    check(cudaMemcpyAsync(cum, z.geometric, kTableCum * 4, cudaMemcpyHostToDevice, stream),
          "copy the trial index's table");
  check(cudaMemcpyAsync(basis, z.basis, sizeof(BoxTerms), cudaMemcpyHostToDevice, stream),
        "copy the basis");
  check(cudaMemcpyAsync(point_basis, z.point_basis, sizeof(PointBasis), cudaMemcpyHostToDevice,
                        stream), "copy the point model's basis");
  return dz;
}

// Units [first, first + units) on `stream` (nothing for none).
void launch_units(bool points, const SymbolModel& dz, const SymbolUnits& u, std::size_t first,
                  std::size_t units, const std::uint32_t* H, const std::int64_t* M,
                  const double* beta, const double* V, const unsigned char* framed,
                  const std::uint64_t* at, AnsSymbol* symbols, std::uint64_t* counts,
                  unsigned char* flags, cudaStream_t stream) {
  if (units == 0) return;
  const unsigned int blocks = static_cast<unsigned int>((units + kUnitThreads - 1) / kUnitThreads);
  if (points) {
    units_kernel<true><<<blocks, kUnitThreads, 0, stream>>>(
        dz, u, first, units, H, M, beta, V, framed, at, symbols, counts, flags);
  } else {
    units_kernel<false><<<blocks, kUnitThreads, 0, stream>>>(
        dz, u, first, units, H, M, beta, V, framed, at, symbols, counts, flags);
  }
  check(cudaGetLastError(), "launch the symbol kernel");
}

// Every stream's symbols on the device, a unit of work a thread
// (symbol_core.hpp's SymbolUnits), in the passes of payload/ans_streams.hpp's
// body_symbols: the box units counted (noting the segments with a
// point frame), the point units of those segments counted (noting the
// segments with a table), their offsets summed on the host, then every
// unit's symbols written into `symbols` (device memory, allocated here).
// first (streams x segments + 1 entries) gets the streams' runs, tabled
// the segments with a table.  Kernel and copy times go to t.
void symbols_on_device(const SymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                       const double* beta, const double* V, std::size_t N, std::size_t S,
                       int device, cudaStream_t stream, std::vector<std::uint64_t>& first,
                       std::vector<unsigned char>& tabled, std::unique_ptr<Scratch>& symbols,
                       Timing& t) {
  const SymbolUnits u = symbol_units(z, N, S);
  const std::size_t box = u.segments * u.per_segment;  // the box units; the point units follow
  const std::size_t runs = u.streams * u.segments;
  // The model's tables on the device, then the units' counts and offsets,
  // then the runs' flags (box runs: a point frame; point runs: a table).
  Layout parts;
  const std::size_t off_tables = parts.add(kSymbolTableBytes), off_counts = parts.add(u.count * 8);
  const std::size_t off_at = parts.add((u.count + 1) * 8), off_flags = parts.add(runs);
  Scratch tables(device, parts.bytes());
  Timer copy_timer(stream), kernel_timer(stream);
  std::vector<std::uint64_t> at(u.count + 1, 0);
  std::vector<unsigned char> flags(runs, 0);
  std::uint64_t* counts = tables.at<std::uint64_t>(off_counts);
  unsigned char* device_flags = tables.at<unsigned char>(off_flags);
  SymbolModel dz;
  // The point units run (and hold their tables' local memory) only where a
  // segment has a point frame: none at rms/sigma = 10.
  std::size_t point_units = 0;
  try {
    copy_timer.start();
    dz = symbol_tables_to_device(z, tables.at<char>(off_tables), stream);
    check(cudaMemsetAsync(device_flags, 0, runs, stream), "reset the flags");
    check(cudaMemsetAsync(counts, 0, u.count * 8, stream), "reset the symbol counts");
    copy_timer.stop(&t.transfer_ms);
    kernel_timer.start();  // the box units' counts, noting the segments with a point frame
    launch_units(false, dz, u, 0, box, H, M, beta, V, nullptr, nullptr, nullptr, counts,
                 device_flags, stream);
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(flags.data(), device_flags, runs, cudaMemcpyDeviceToHost, stream),
          "copy the flags");
    check(cudaStreamSynchronize(stream), "synchronize");
    if (std::find(flags.begin(), flags.begin() + static_cast<std::ptrdiff_t>(u.segments), 1) !=
        flags.begin() + static_cast<std::ptrdiff_t>(u.segments))
      point_units = u.count - box;
    kernel_timer.start();  // the point units' counts there, noting the segments with a table
    launch_units(true, dz, u, box, point_units, H, M, beta, V, device_flags, nullptr, nullptr,
                 counts, device_flags, stream);
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(at.data() + 1, counts, u.count * 8, cudaMemcpyDeviceToHost, stream),
          "copy the symbol counts");
    check(cudaMemcpyAsync(flags.data(), device_flags, runs, cudaMemcpyDeviceToHost, stream),
          "copy the flags");
    check(cudaStreamSynchronize(stream), "synchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);
    throw;
  }
  for (std::size_t i = 0; i < u.count; ++i) at[i + 1] += at[i];
  first.assign(runs + 1, 0);
  stream_offsets(u, at.data(), first.data());
  tabled.assign(u.segments, 0);
  if (u.streams == 2)
    std::copy(flags.begin() + static_cast<std::ptrdiff_t>(u.segments), flags.end(), tabled.begin());
  symbols = std::make_unique<Scratch>(device, at[u.count] * sizeof(AnsSymbol));
  // The symbols, counted again (into zeroed counts): a pass that did not
  // run, or ran otherwise than the first, is an error, not a wrong body.
  std::vector<std::uint64_t> again(u.count);
  try {
    check(cudaMemcpyAsync(tables.at<std::uint64_t>(off_at), at.data(), (u.count + 1) * 8,
                          cudaMemcpyHostToDevice, stream), "copy the units' offsets");
    check(cudaMemsetAsync(counts, 0, u.count * 8, stream), "reset the symbol counts");
    kernel_timer.start();
    launch_units(false, dz, u, 0, box, H, M, beta, V, device_flags,
                 tables.at<std::uint64_t>(off_at), symbols->at<AnsSymbol>(0), counts, nullptr,
                 stream);
    launch_units(true, dz, u, box, point_units, H, M, beta, V, device_flags,
                 tables.at<std::uint64_t>(off_at), symbols->at<AnsSymbol>(0), counts, nullptr,
                 stream);
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(again.data(), counts, u.count * 8, cudaMemcpyDeviceToHost, stream),
          "copy the symbol counts");
    check(cudaStreamSynchronize(stream), "synchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);
    throw;
  }
  for (std::size_t i = 0; i < u.count; ++i)
    if (again[i] != at[i + 1] - at[i])
      throw DeviceError("the symbol kernel's second pass counted other symbols than its first");
}

// Segment blockIdx.x of a body (payload/segment_decode.hpp's steps, as
// decode_segment runs them): thread 0 reads the stream (the trial indices
// of a block, then piece by piece the trial indices' check and the
// coordinates, with the segment's point table at tables + blockIdx.x where
// the point model codes it), the block's threads compute each piece's side information
// and reconstruct its values (the first sub-vector with a value that is
// not finite found by atomicMin).  Each step's outcome has its own shared
// variable, which the threads read after a barrier and thread 0 writes
// again only after later barriers: all threads take the same branches.
template <class T>
__global__ void decode_kernel(SymbolModel z, subvector::Config c, Key key,
                              const std::uint8_t* body, const DecodeSegment* segments,
                              unsigned long long m, std::uint32_t* H, double* beta, double* V,
                              std::int64_t* M, PointTable* tables, T* y,
                              SegmentOutcome* outcomes) {
  __shared__ int opened, trials, points;
  __shared__ unsigned int nonfinite;  // the piece's first sub-vector with a value not finite
  __shared__ SegmentOutcome check;
  const unsigned long long s = blockIdx.x;
  const DecodeSegment seg = segments[s];
  const std::size_t n = static_cast<std::size_t>(z.basis->n);
  const DecodeScratch b{H + s * z.block, beta + s * z.piece, V + s * z.piece * n,
                        M + s * z.piece * n, tables != nullptr ? tables + s : nullptr};
  const bool reader = threadIdx.x == 0;
  RansReader r;  // (thread 0's)
  if (reader) opened = rans_open(r, body + seg.offset, static_cast<std::size_t>(seg.size));
  __syncthreads();
  int status = opened;
  std::uint64_t nonfinite_at = 0;
  for (std::uint64_t b0 = seg.first; status == kReadOk && b0 < seg.last; b0 += z.block) {
    const std::size_t count =
        seg.last - b0 < z.block ? static_cast<std::size_t>(seg.last - b0) : z.block;
    if (reader) trials = read_trials(z, r, count, b.H);
    __syncthreads();
    if ((status = trials) != kReadOk) break;
    for (std::size_t k0 = 0; k0 < count; k0 += z.piece) {
      const std::size_t e = count - k0 < z.piece ? count - k0 : z.piece;
      if (reader) check = check_trials(c, b.H + k0, e, b0 + k0);
      __syncthreads();
      if ((status = check.status) != kReadOk) break;
      for (std::size_t i = threadIdx.x; i < e; i += blockDim.x)
        b.beta[i] = subvector::side_info_one(c, key.w, b.H[k0 + i], b0 + k0 + i, b.V + i * n);
      __syncthreads();
      if (reader) {
        points = read_points(z, r, e, b.beta, b.V, seg.points != 0 ? b.table : nullptr, b.M);
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
    SegmentOutcome out{status, 0, 0};
    if (status == kReadBadTrial) out = check;
    if (status == kReadNonFinite) out.at = nonfinite_at;
    if (status == kReadOk) out.status = read_end(r, seg);
    outcomes[s] = out;
  }
}

}  // namespace

template <class T>
void decode_ans_body_resident(const LrsuqParams& p, const ChaChaKey& key,
                              const std::uint8_t* body, std::size_t len, std::size_t m,
                              int device, std::uintptr_t stream_id, T* y, Timing* timing) {
  const DecodePlan plan(p, body, len, m);  // the body parsed on the host (FormatError)
  const std::size_t S = plan.segments.size();
  if (S == 0) return;
  const std::size_t n = static_cast<std::size_t>(p.n);
  // Layout: tables, body, segments, outcomes, then each segment's scratch
  // (H of a block, beta, V and M of a piece, and where the point model
  // codes some segment, a point table).
  const std::size_t block = plan.z().block, piece = plan.z().piece;
  Layout parts;
  const std::size_t off_model = parts.add(kSymbolTableBytes), off_body = parts.add(len);
  const std::size_t off_segs = parts.add(S * sizeof(DecodeSegment));
  const std::size_t off_out = parts.add(S * sizeof(SegmentOutcome));
  const std::size_t off_h = parts.add(S * block * 4), off_beta = parts.add(S * piece * 8);
  const std::size_t off_v = parts.add(S * piece * n * 8), off_m = parts.add(S * piece * n * 8);
  const std::size_t off_tables = parts.add(plan.points ? S * sizeof(PointTable) : 0);
  Scratch scratch(device, parts.bytes());
  SymbolModel dz{};
  decode_by_blocks(
      device, stream_id, body, len, scratch.at<std::uint8_t>(off_body), plan.segments,
      scratch.at<DecodeSegment>(off_segs), scratch.at<SegmentOutcome>(off_out), dtype_name<T>(),
      [&](cudaStream_t stream) {
        dz = symbol_tables_to_device(plan.z(), scratch.at<char>(off_model), stream);
      },
      [&](unsigned int blocks, cudaStream_t stream) {
        decode_kernel<T><<<blocks, kDecodeThreads, 0, stream>>>(
            dz, plan.config, key_words(key), scratch.at<std::uint8_t>(off_body),
            scratch.at<DecodeSegment>(off_segs), m, scratch.at<std::uint32_t>(off_h),
            scratch.at<double>(off_beta), scratch.at<double>(off_v),
            scratch.at<std::int64_t>(off_m),
            plan.points ? scratch.at<PointTable>(off_tables) : nullptr, y,
            scratch.at<SegmentOutcome>(off_out));
      },
      timing);
}

template void decode_ans_body_resident<float>(const LrsuqParams&, const ChaChaKey&,
                                              const std::uint8_t*, std::size_t, std::size_t, int,
                                              std::uintptr_t, float*, Timing*);
template void decode_ans_body_resident<double>(const LrsuqParams&, const ChaChaKey&,
                                               const std::uint8_t*, std::size_t, std::size_t, int,
                                               std::uintptr_t, double*, Timing*);

void ans_streams_resident(const SymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                          const double* beta, const double* V, std::size_t N, std::size_t S,
                          int device, std::uintptr_t stream_id, DeviceStreams& out,
                          Timing* timing) {
  const std::size_t segments = N / S + (N % S != 0 ? 1 : 0);
  out = DeviceStreams{};
  if (segments == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  Timing t;
  std::vector<std::uint64_t> first;
  std::unique_ptr<Scratch> symbols;
  symbols_on_device(z, H, M, beta, V, N, S, device, stream, first, out.tabled, symbols, t);
  const std::size_t runs = first.size() - 1;
  code_streams(symbols->at<AnsSymbol>(0), first.data(), runs, device, stream, out.bytes,
               out.sizes, t);
  // The last segment's box and point streams' symbols, for the bomb rule's
  // padding (payload/ans_streams.hpp's assemble_ans_body).
  for (std::size_t r = 0; r * segments < runs; ++r) {
    const std::size_t k = r * segments + segments - 1;
    out.last[r].resize(static_cast<std::size_t>(first[k + 1] - first[k]));
    if (!out.last[r].empty())
      check(cudaMemcpy(out.last[r].data(), symbols->at<AnsSymbol>(0) + first[k],
                       out.last[r].size() * sizeof(AnsSymbol), cudaMemcpyDeviceToHost),
            "copy the last segment's symbols");
  }
  if (timing != nullptr) *timing = t;
}

void body_symbols_resident(const SymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                 const double* beta, const double* V, std::size_t N, std::size_t S, int device,
                 std::uintptr_t stream_id, BodySymbols& out) {
  const std::size_t segments = N / S + (N % S != 0 ? 1 : 0);
  out = BodySymbols{};
  out.first.assign(1, 0);
  if (segments == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  Timing t;
  std::unique_ptr<Scratch> device_symbols;
  symbols_on_device(z, H, M, beta, V, N, S, device, stream, out.first, out.tabled,
                    device_symbols, t);
  out.symbols.resize(static_cast<std::size_t>(out.first.back()));
  check(cudaMemcpy(out.symbols.data(), device_symbols->at<AnsSymbol>(0),
                   out.symbols.size() * sizeof(AnsSymbol), cudaMemcpyDeviceToHost),
        "copy the symbols");
}

}  // namespace cepam::gpu
