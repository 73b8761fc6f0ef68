#include "cuda/golomb_gpu.hpp"

#include <cuda_runtime.h>

#include "coding/golomb_core.hpp"
#include "cuda/body_decoder.cuh"
#include "cuda/runtime.cuh"
#include "payload/golomb_body.hpp"
#include "payload/golomb_segment.hpp"
#include "payload/segment_outcome.hpp"
#include "payload/segments.hpp"

namespace cepam::gpu {
namespace {

constexpr int kGolombThreads = 128;

// Pass 1: each unit's trial-index code bits, and the coordinates' bit
// lengths summed into its segment's lengths[s kBitLengths + b] (a unit's
// own counts, then the device's: a few lengths a unit).
__global__ void golomb_count_kernel(GolombUnits u, GolombCode c, const std::uint32_t* H,
                                    const std::int64_t* M, std::uint64_t* h_bits,
                                    unsigned long long* lengths) {
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t >= u.count) return;
  unsigned int own[kBitLengths];
  for (int b = 0; b < kBitLengths; ++b) own[b] = 0;
  h_bits[t] = golomb_unit_h_bits(u, c, t, H, M, [&](int b) { ++own[b]; });
  unsigned long long* segment = lengths + t / u.per_segment * kBitLengths;
  for (int b = 0; b < kBitLengths; ++b)
    if (own[b] != 0) atomicAdd(&segment[b], static_cast<unsigned long long>(own[b]));
}

// Pass 2: each unit's coordinate code bits for its segment's order.
__global__ void golomb_m_bits_kernel(GolombUnits u, const int* k, const std::int64_t* M,
                                     std::uint64_t* m_bits) {
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < u.count) m_bits[t] = golomb_unit_m_bits(u, k[t / u.per_segment], t, M);
}

// Pass 3: each unit's codes at its bit offsets, OR-ed into the zeroed
// body's words (atomically: neighbouring units share words).
__global__ void golomb_write_kernel(GolombUnits u, GolombCode c, const int* k,
                                    const std::uint32_t* H,
                                    const std::int64_t* M, const std::uint64_t* h_pos,
                                    const std::uint64_t* m_pos, unsigned int* words) {
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t >= u.count) return;
  golomb_unit_write(u, c, k[t / u.per_segment], t, H, M, h_pos[t], m_pos[t],
                    [&](std::uint64_t w, std::uint32_t bits) { atomicOr(&words[w], bits); });
}

unsigned int blocks_for(std::size_t count) {
  return static_cast<unsigned int>((count + kGolombThreads - 1) / kGolombThreads);
}

// Segment blockIdx.x of a body (payload/golomb_segment.hpp's steps, as
// decode_golomb_segment runs them): thread 0 reads a piece's trial indices
// and coordinates into the segment's H and M, the block's threads decode
// its values (its first bad trial index and first value not finite found
// by atomicMin), every thread takes the piece's outcome; at the end thread
// 0 checks the sections' ends.  The shared variables are written by thread
// 0 only between barriers, after every thread has read them.
template <class T>
__global__ void golomb_decode_kernel(subvector::Config c, Key key, const std::uint8_t* body,
                                     const GolombSegmentSpan* segments, std::uint32_t g,
                                     unsigned long long m, std::uint32_t* H, std::int64_t* M,
                                     T* y, SegmentOutcome* outcomes) {
  __shared__ int read;
  __shared__ unsigned int bad, nonfinite;
  const GolombSegmentSpan s = segments[blockIdx.x];
  const std::size_t n = static_cast<std::size_t>(c.n);
  const std::size_t piece = golomb_piece(n);
  std::uint32_t* h = H + blockIdx.x * piece;
  std::int64_t* mm = M + blockIdx.x * piece * n;
  const bool reader = threadIdx.x == 0;
  GolombSegmentReader r{};  // (thread 0's)
  if (reader) r = golomb_segment_open(body, s);
  SegmentOutcome out{s.fits != 0 ? kReadOk : kReadSectionsTooShort, 0, 0};
  for (std::uint64_t j0 = s.first; out.status == kReadOk && j0 < s.last; j0 += piece) {
    const std::size_t count =
        s.last - j0 < piece ? static_cast<std::size_t>(s.last - j0) : piece;
    if (reader) {
      read = golomb_read_piece(r, g, s.k, count, n, h, mm);
      bad = nonfinite = static_cast<unsigned int>(count);
    }
    __syncthreads();
    if (read != kReadOk) {
      out = SegmentOutcome{read, 0, 0};
      break;
    }
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) {
      const int v = golomb_piece_value(c, key.w, h, mm, j0, i, m, y);
      if (v == 1) atomicMin(&bad, static_cast<unsigned int>(i));
      if (v == 2) atomicMin(&nonfinite, static_cast<unsigned int>(i));
    }
    __syncthreads();
    out = golomb_piece_outcome(h, count, j0, bad, nonfinite);
    __syncthreads();  // (every thread has read bad, nonfinite and h before the next piece)
  }
  if (reader) {
    if (out.status == kReadOk) out.status = golomb_segment_end(r, body, s);
    outcomes[blockIdx.x] = out;
  }
}

}  // namespace

template <class T>
void decode_golomb_body_resident(const LrsuqParams& p, const ChaChaKey& key,
                                 const std::uint8_t* body, std::size_t len, std::size_t m,
                                 int device, std::uintptr_t stream_id, T* y, Timing* timing) {
  const GolombDecodePlan plan(p, body, len, m);  // the body parsed on the host (FormatError)
  const std::size_t S = plan.segments.size();
  if (S == 0) return;
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t piece = golomb_piece(n);
  // Layout: body, segments, outcomes, then each segment's piece of H and M.
  Layout parts;
  const std::size_t off_body = parts.add(len), off_segs = parts.add(S * sizeof(GolombSegmentSpan));
  const std::size_t off_out = parts.add(S * sizeof(SegmentOutcome));
  const std::size_t off_h = parts.add(S * piece * 4), off_m = parts.add(S * piece * n * 8);
  Scratch scratch(device, parts.bytes());
  decode_by_blocks(
      device, stream_id, body, len, scratch.at<std::uint8_t>(off_body), plan.segments,
      scratch.at<GolombSegmentSpan>(off_segs), scratch.at<SegmentOutcome>(off_out),
      dtype_name<T>(), [](cudaStream_t) {},
      [&](unsigned int blocks, cudaStream_t stream) {
        golomb_decode_kernel<T><<<blocks, kDecodeThreads, 0, stream>>>(
            plan.config, key_words(key), scratch.at<std::uint8_t>(off_body),
            scratch.at<GolombSegmentSpan>(off_segs), plan.golomb, m,
            scratch.at<std::uint32_t>(off_h), scratch.at<std::int64_t>(off_m), y,
            scratch.at<SegmentOutcome>(off_out));
      },
      timing);
}

template void decode_golomb_body_resident<float>(const LrsuqParams&, const ChaChaKey&,
                                                 const std::uint8_t*, std::size_t, std::size_t,
                                                 int, std::uintptr_t, float*, Timing*);
template void decode_golomb_body_resident<double>(const LrsuqParams&, const ChaChaKey&,
                                                  const std::uint8_t*, std::size_t, std::size_t,
                                                  int, std::uintptr_t, double*, Timing*);

void golomb_body_resident(std::uint32_t golomb, const std::uint32_t* H, const std::int64_t* M,
                          std::size_t N, int n, int device, std::uintptr_t stream_id,
                          std::vector<std::uint8_t>& body, Timing* timing) {
  const GolombUnits u = golomb_units(N, segment_subvectors(n), static_cast<std::size_t>(n));
  const GolombCode c = golomb_code(golomb);
  Timing t;
  std::vector<std::uint64_t> h_bits(u.count), m_bits(u.count);
  // Each segment's bit lengths' counts, then its order.
  const std::size_t hist = u.segments * kBitLengths;
  std::vector<unsigned long long> lengths(hist);
  std::vector<int> k(u.segments);
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  Scratch orders(device, u.segments * sizeof(int));
  int* dk = orders.at<int>(0);
  if (u.count != 0) {
    // The units' bits (h_bits, then m_bits) and the bit lengths' counts.
    Layout parts;
    const std::size_t off_h = parts.add(u.count * 8), off_m = parts.add(u.count * 8);
    const std::size_t off_lengths = parts.add(hist * 8);
    Scratch counts(device, parts.bytes());
    std::uint64_t* dh = counts.at<std::uint64_t>(off_h);
    std::uint64_t* dm = counts.at<std::uint64_t>(off_m);
    unsigned long long* dl = counts.at<unsigned long long>(off_lengths);
    Timer kernel_timer(stream), copy_timer(stream);
    try {
      check(cudaMemsetAsync(dl, 0, hist * 8, stream), "reset the bit lengths");
      kernel_timer.start();
      golomb_count_kernel<<<blocks_for(u.count), kGolombThreads, 0, stream>>>(u, c, H, M, dh, dl);
      check(cudaGetLastError(), "launch the Golomb count kernel");
      kernel_timer.stop(&t.kernel_ms);
      check(cudaMemcpyAsync(lengths.data(), dl, hist * 8, cudaMemcpyDeviceToHost, stream),
            "copy the bit lengths");
      check(cudaStreamSynchronize(stream), "synchronize");
      for (std::size_t s = 0; s < u.segments; ++s) {
        std::uint64_t own[kBitLengths];
        for (int b = 0; b < kBitLengths; ++b) own[b] = lengths[s * kBitLengths + b];
        k[s] = best_expg_order(own);
      }
      check(cudaMemcpyAsync(dk, k.data(), u.segments * sizeof(int), cudaMemcpyHostToDevice,
                            stream),
            "copy the segments' orders");
      kernel_timer.start();
      golomb_m_bits_kernel<<<blocks_for(u.count), kGolombThreads, 0, stream>>>(u, dk, M, dm);
      check(cudaGetLastError(), "launch the Golomb length kernel");
      kernel_timer.stop(&t.kernel_ms);
      copy_timer.start();
      check(cudaMemcpyAsync(h_bits.data(), dh, u.count * 8, cudaMemcpyDeviceToHost, stream),
            "copy the units' H bits");
      check(cudaMemcpyAsync(m_bits.data(), dm, u.count * 8, cudaMemcpyDeviceToHost, stream),
            "copy the units' M bits");
      copy_timer.stop(&t.transfer_ms);
    } catch (...) {
      cudaStreamSynchronize(stream);
      throw;
    }
  }
  const GolombPlan plan = golomb_plan(u, golomb, k.data(), h_bits.data(), m_bits.data());
  body.assign(plan.bytes, 0);
  if (u.count != 0) {
    const std::size_t words = (plan.bytes + 3) / 4;
    Layout parts;  // the units' H and M bit offsets, the body's words
    const std::size_t off_h = parts.add(u.count * 8), off_m = parts.add(u.count * 8);
    const std::size_t off_words = parts.add(words * 4);
    Scratch out(device, parts.bytes());
    std::uint64_t* dh = out.at<std::uint64_t>(off_h);
    std::uint64_t* dm = out.at<std::uint64_t>(off_m);
    unsigned int* dw = out.at<unsigned int>(off_words);
    Timer kernel_timer(stream), copy_timer(stream);
    try {
      copy_timer.start();
      check(cudaMemcpyAsync(dh, plan.h_pos.data(), u.count * 8, cudaMemcpyHostToDevice, stream),
            "copy the units' H offsets");
      check(cudaMemcpyAsync(dm, plan.m_pos.data(), u.count * 8, cudaMemcpyHostToDevice, stream),
            "copy the units' M offsets");
      check(cudaMemsetAsync(dw, 0, words * 4, stream), "zero the body");
      copy_timer.stop(&t.transfer_ms);
      kernel_timer.start();
      golomb_write_kernel<<<blocks_for(u.count), kGolombThreads, 0, stream>>>(u, c, dk, H, M,
                                                                              dh, dm, dw);
      check(cudaGetLastError(), "launch the Golomb write kernel");
      kernel_timer.stop(&t.kernel_ms);
      copy_timer.start();
      check(cudaMemcpyAsync(body.data(), dw, plan.bytes, cudaMemcpyDeviceToHost, stream),
            "copy the body");
      copy_timer.stop(&t.transfer_ms);
    } catch (...) {
      cudaStreamSynchronize(stream);
      throw;
    }
  }
  put_golomb_headers(plan, body.data());
  if (timing != nullptr) *timing = t;
}

}  // namespace cepam::gpu
