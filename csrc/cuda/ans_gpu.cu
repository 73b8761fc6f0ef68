// The rANS streams of an ANS body's segments on the device (ans_gpu.hpp):
// one stream a thread, each running coding/rans_core.hpp's
// rans_encode_stream, the function the CPU's AnsEncoder runs (the host
// tests check the two flows bit for bit: tests/core/test_rans_core.py);
// on Z^n the segments' symbols too, one segment a thread, by
// coding/symbol_core.hpp's z_segment_symbols, the code the CPU's coder runs
// (tests/core/test_symbol_core.py checks its host twin).
#include "cuda/ans_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/errors.hpp"
#include "cuda/runtime.cuh"

namespace cepam::gpu {
namespace {

constexpr int kStreamThreads = 64;

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


// Codes the streams symbols[first[s] .. first[s + 1]) (symbols in device
// memory, first on the host) as rans_encode_segments does.
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
  // Layout: failure flag, offsets, room offsets, sizes, words, out.
  const std::size_t off_first = 8, off_out_first = off_first + (segments + 1) * 8;
  const std::size_t off_sizes = off_out_first + (segments + 1) * 8;
  const std::size_t off_words = off_sizes + segments * 8;
  const std::size_t off_out = off_words + ((total * 4 + 7) / 8) * 8;
  Scratch scratch(device, off_out + room);
  Timer copy_timer(stream), kernel_timer(stream);
  const int zero = 0;
  int failed = 0;
  const std::size_t base = sizes.size();
  sizes.resize(base + segments);
  std::vector<std::uint8_t> streams(room);
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
    check(cudaMemcpyAsync(sizes.data() + base, scratch.at<std::uint64_t>(off_sizes), segments * 8,
                          cudaMemcpyDeviceToHost, stream), "copy stream sizes");
    check(cudaMemcpyAsync(streams.data(), scratch.at<std::uint8_t>(off_out), room,
                          cudaMemcpyDeviceToHost, stream), "copy streams");
    copy_timer.stop(&t.transfer_ms);
  } catch (...) {
    cudaStreamSynchronize(stream);  // nothing in flight when the buffers go
    throw;
  }
  check(cudaStreamSynchronize(stream), "synchronize");
  if (failed != 0) throw DeviceError("rANS kernel: a stream overran its room");
  for (std::size_t s = 0; s < segments; ++s) {
    const std::uint8_t* p = streams.data() + out_first[s];
    out.insert(out.end(), p, p + sizes[base + s]);
  }
}

// Segment s of Z^n's body, one thread a segment (symbol_core.hpp's
// z_segment_symbols): its symbols at symbols + first[s] (symbols = nullptr:
// none), and its symbol count at counts[s] (counts = nullptr: none).
__global__ void z_symbols_kernel(ZSymbolModel z, unsigned long long N, unsigned long long S,
                                 unsigned long long segments, const std::uint32_t* H,
                                 const std::int64_t* M, const double* beta, const double* V,
                                 const std::uint64_t* first, AnsSymbol* symbols,
                                 std::uint64_t* counts) {
  const unsigned long long s = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  if (s >= segments) return;
  const std::size_t k = z_segment_symbols(z, s, N, S, H, M, beta, V,
                                          symbols != nullptr ? symbols + first[s] : nullptr);
  if (counts != nullptr) counts[s] = k;
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

// Every segment's symbols on the device: counted (first pass), offsets
// summed on the host into first (segments + 1 entries), then written into
// `symbols` (device memory, allocated here).  Kernel and copy times go to t.
void z_symbols_on_device(const ZSymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                         const double* beta, const double* V, std::size_t N, std::size_t S,
                         std::size_t segments, int device, cudaStream_t stream,
                         std::vector<std::uint64_t>& first, std::unique_ptr<Scratch>& symbols,
                         Timing& t) {
  // The model's tables on the device: knots, slopes, the trial index's cum.
  constexpr std::size_t kKnots = kCdfCells + 1, kSlopes = kCdfCells;
  constexpr std::size_t kCum = kGeometricTable + 1;
  const std::size_t off_slope = kKnots * 8, off_cum = off_slope + kSlopes * 8;
  const std::size_t off_counts = off_cum + ((kCum * 4 + 7) / 8) * 8;
  const std::size_t off_first = off_counts + segments * 8;
  Scratch tables(device, off_first + (segments + 1) * 8);
  ZSymbolModel dz = z;
  dz.cdf.knot = tables.at<double>(0);
  dz.cdf.slope = tables.at<double>(off_slope);
  dz.geometric = z.geometric != nullptr ? tables.at<std::uint32_t>(off_cum) : nullptr;
  Timer copy_timer(stream), kernel_timer(stream);
  first.assign(segments + 1, 0);
  const unsigned int blocks =
      static_cast<unsigned int>((segments + kStreamThreads - 1) / kStreamThreads);
  try {
    copy_timer.start();
    check(cudaMemcpyAsync(tables.at<double>(0), z.cdf.knot, kKnots * 8, cudaMemcpyHostToDevice,
                          stream), "copy the model's knots");
    check(cudaMemcpyAsync(tables.at<double>(off_slope), z.cdf.slope, kSlopes * 8,
                          cudaMemcpyHostToDevice, stream), "copy the model's slopes");
    if (z.geometric != nullptr)
      check(cudaMemcpyAsync(tables.at<std::uint32_t>(off_cum), z.geometric, kCum * 4,
                            cudaMemcpyHostToDevice, stream), "copy the trial index's table");
    copy_timer.stop(&t.transfer_ms);
    kernel_timer.start();  // the first pass: each segment's symbol count
    z_symbols_kernel<<<blocks, kStreamThreads, 0, stream>>>(
        dz, N, S, segments, H, M, beta, V, nullptr, nullptr, tables.at<std::uint64_t>(off_counts));
    check(cudaGetLastError(), "launch the symbol-count kernel");
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(first.data() + 1, tables.at<std::uint64_t>(off_counts), segments * 8,
                          cudaMemcpyDeviceToHost, stream), "copy the symbol counts");
    check(cudaStreamSynchronize(stream), "synchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);
    throw;
  }
  for (std::size_t s = 0; s < segments; ++s) first[s + 1] += first[s];
  symbols = std::make_unique<Scratch>(device, first[segments] * sizeof(AnsSymbol));
  // The second pass counts again (into zeroed counts): a pass that did not
  // run, or ran otherwise than the first, is an error, not a wrong body.
  std::vector<std::uint64_t> again(segments);
  try {
    check(cudaMemcpyAsync(tables.at<std::uint64_t>(off_first), first.data(), (segments + 1) * 8,
                          cudaMemcpyHostToDevice, stream), "copy the segments' offsets");
    check(cudaMemsetAsync(tables.at<std::uint64_t>(off_counts), 0, segments * 8, stream),
          "reset the symbol counts");
    kernel_timer.start();  // the second: the symbols
    z_symbols_kernel<<<blocks, kStreamThreads, 0, stream>>>(
        dz, N, S, segments, H, M, beta, V, tables.at<std::uint64_t>(off_first),
        symbols->at<AnsSymbol>(0), tables.at<std::uint64_t>(off_counts));
    check(cudaGetLastError(), "launch the symbol kernel");
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(again.data(), tables.at<std::uint64_t>(off_counts), segments * 8,
                          cudaMemcpyDeviceToHost, stream), "copy the symbol counts");
    check(cudaStreamSynchronize(stream), "synchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);
    throw;
  }
  for (std::size_t s = 0; s < segments; ++s)
    if (again[s] != first[s + 1] - first[s])
      throw DeviceError("the symbol kernel's second pass counted other symbols than its first");
}

}  // namespace

void z_ans_streams(const ZSymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
                   const double* beta, const double* V, std::size_t N, std::size_t S,
                   int device, std::uintptr_t stream_id, std::vector<std::uint8_t>& out,
                   std::vector<std::uint64_t>& sizes, std::vector<AnsSymbol>& last,
                   Timing* timing) {
  const std::size_t segments = N / S + (N % S != 0 ? 1 : 0);
  if (segments == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  Timing t;
  std::vector<std::uint64_t> first;
  std::unique_ptr<Scratch> symbols;
  z_symbols_on_device(z, H, M, beta, V, N, S, segments, device, stream, first, symbols, t);
  code_streams(symbols->at<AnsSymbol>(0), first.data(), segments, device, stream, out, sizes, t);
  // The last segment's symbols, for the bomb rule's padding (payload/ans_streams.hpp).
  last.resize(static_cast<std::size_t>(first[segments] - first[segments - 1]));
  check(cudaMemcpy(last.data(), symbols->at<AnsSymbol>(0) + first[segments - 1],
                   last.size() * sizeof(AnsSymbol), cudaMemcpyDeviceToHost),
        "copy the last segment's symbols");
  if (timing != nullptr) *timing = t;
}

void z_symbols(const ZSymbolModel& z, const std::uint32_t* H, const std::int64_t* M,
               const double* beta, const double* V, std::size_t N, std::size_t S, int device,
               std::uintptr_t stream_id, std::vector<std::uint64_t>& first,
               std::vector<AnsSymbol>& symbols) {
  const std::size_t segments = N / S + (N % S != 0 ? 1 : 0);
  first.assign(1, 0);
  symbols.clear();
  if (segments == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  Timing t;
  std::unique_ptr<Scratch> device_symbols;
  z_symbols_on_device(z, H, M, beta, V, N, S, segments, device, stream, first, device_symbols, t);
  symbols.resize(static_cast<std::size_t>(first[segments]));
  check(cudaMemcpy(symbols.data(), device_symbols->at<AnsSymbol>(0),
                   symbols.size() * sizeof(AnsSymbol), cudaMemcpyDeviceToHost),
        "copy the symbols");
}

}  // namespace cepam::gpu
