// An ANS body (payload/ans_body.hpp) coded the way the GPU path codes it:
// the LRSUQ stage by the per-sub-vector functions the CUDA kernels run
// (lrsuq/subvector.hpp), each segment's symbols by the CPU's segment
// encoder, then the rANS streams of every segment at once by a StreamCoder:
// the host twin of the CUDA kernel (coding/rans_core.hpp's
// rans_encode_segments) or the kernel itself (cuda/ans_gpu.hpp).  The bytes
// are encode_payload_body's (tests/core/test_rans_core.py checks it over the
// lattices, mechanisms, dtypes and sizes).
//
// Memory: every segment's symbols at once (8 bytes a symbol, about one a
// coordinate), unlike encode_payload_body, which keeps a segment a thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "coding/rans_core.hpp"
#include "lrsuq/quantizer.hpp"
#include "random/chacha20.hpp"

namespace cepam {

// Codes streams[s] = symbols[first[s] .. first[s + 1]) for s < count
// (first[0] = 0; no padding): appends the streams, one after another, to
// out and their byte lengths to sizes.
using StreamCoder = std::function<void(const AnsSymbol* symbols, const std::uint64_t* first,
                                       std::size_t count, std::vector<std::uint8_t>& out,
                                       std::vector<std::uint64_t>& sizes)>;

// rans_encode_segments on the host (the CUDA kernel's per-stream code, one
// stream after another).
void host_stream_coder(const AnsSymbol* symbols, const std::uint64_t* first, std::size_t count,
                       std::vector<std::uint8_t>& out, std::vector<std::uint64_t>& sizes);

// The ANS body of x[0..m) * factor (the LRSUQ stage keyed by `key`, the key
// of the payload's LRSUQ stream), its streams coded by `code`: the bytes of
// encode_payload_body with the ANS coder.  Throws as encode_payload_body.
template <class T>
std::vector<std::uint8_t> encode_ans_body_by_streams(const LrsuqParams& p, const ChaChaKey& key,
                                                     const T* x, std::size_t m, double factor,
                                                     const StreamCoder& code);

}  // namespace cepam
