// libFuzzer target over the native core's payload readers: every function
// a server runs on a body after the HMAC tag has verified, called exactly as
// the binding calls them (check first, then allocate, then decode), with a
// body a malicious client chose.  The header is parsed in Python
// (cepam.payload); its fields reach the core as the arguments below.
//
// Input (a "frame", little-endian; fuzz/make_corpus.py writes real ones):
//   u8  target     0 decode to float32, 1 decode to float64, 2 decode the
//                  symbols (H, M), 3 the body's parts (cepam.inspect),
//                  (0 and 1: also the GPU's decoder of the body's coder,
//                  its host twin, which must meet the CPU's outcome)
//                  4 LRSUQ decode of raw symbols (H u32[N], M i64[N n])
//   u8  mechanism  u8 lattice  u8 n  u8 coder
//   f64 scale      u32 m (coordinates; above kMaxCoordinates: skipped, as a
//                  server passing max_coordinates = kMaxCoordinates would)
//   32 bytes       the message's stream key
//   the body       (everything between header and tag)
// A crash, sanitizer report, leak, or any exception other than FormatError
// and InvalidArgument (the errors a hostile body may raise) is a finding;
// so is a non-finite decoded value, and a body that the GPU's decoder (its
// host twin) decodes otherwise than the CPU.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "lrsuq/quantizer.hpp"
#include "payload/ans_body.hpp"
#include "payload/golomb_body.hpp"
#include "payload/ans_streams.hpp"
#include "payload/body.hpp"
#include "random/chacha20.hpp"

namespace {

using namespace cepam;

constexpr std::size_t kFrameBytes = 1 + 4 + 8 + 4 + 32;
constexpr std::size_t kMaxCoordinates = std::size_t{1} << 14;

std::uint64_t le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

template <class T>
void require_finite(const std::vector<T>& y) {
  for (const T v : y)
    if (!std::isfinite(static_cast<double>(v))) std::abort();  // a finding
}

// The values of a decode, or its FormatError's message.
template <class T, class Decode>
std::string outcome(std::vector<T>& y, Decode&& decode) {
  try {
    decode(y.data());
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

template <class T>
void decode_values(const LrsuqParams& p, const ChaChaKey& key, const KeyStream& ks,
                   const std::uint8_t* body, std::size_t len, std::size_t m, Coder coder,
                   int threads) {
  check_payload_body(p, body, len, m, coder);  // before anything sized by m
  std::vector<T> y(m);
  const std::string error = outcome(y, [&](T* out) {
    decode_payload_body(p, ks, body, len, m, coder, out, threads);
  });
  {
    // The GPU's decoders (their host twins, payload/segment_decode.hpp and
    // payload/golomb_segment.hpp) must meet the same outcome: the same
    // error, or the same values.
    std::vector<T> twin(m);
    const std::string twin_error = outcome(twin, [&](T* out) {
      if (coder == Coder::Ans) decode_ans_body_by_segments(p, key, body, len, m, out);
      else decode_golomb_body_by_segments(p, key, body, len, m, out);
    });
    if (twin_error != error) std::abort();  // a finding
    if (error.empty() && m > 0 && std::memcmp(y.data(), twin.data(), m * sizeof(T)) != 0)
      std::abort();
  }
  if (!error.empty()) throw FormatError(error);
  require_finite(y);
}

void decode_raw_symbols(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                        std::size_t len, std::size_t m) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = (m + n - 1) / n;
  if (len < N * (4 + 8 * n)) return;
  std::vector<std::uint32_t> H(N);
  std::vector<std::int64_t> M(N * n);
  for (std::size_t j = 0; j < N; ++j) H[j] = static_cast<std::uint32_t>(le(body + 4 * j, 4));
  for (std::size_t i = 0; i < N * n; ++i)
    M[i] = static_cast<std::int64_t>(le(body + 4 * N + 8 * i, 8));
  std::vector<double> y(m);
  lrsuq_decode(p, ks, H.data(), M.data(), m, y.data());
  require_finite(y);
}

void run(const std::uint8_t* data, std::size_t size) {
  if (size < kFrameBytes) return;
  const int target = data[0] % 5;
  const int threads = 1 + (data[0] / 5) % 2;  // the parallel decoders too
  const int coder_code = data[4];
  const std::uint64_t scale_bits = le(data + 5, 8);
  double scale = 0.0;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const std::size_t m = static_cast<std::size_t>(le(data + 13, 4));
  if (m > kMaxCoordinates) return;
  const ChaChaKey key = chacha_key_from_bytes(data + 17);
  const std::uint8_t* body = data + kFrameBytes;
  const std::size_t len = size - kFrameBytes;
  // The body is copied to a buffer of its own size, so that the sanitizer
  // sees any read past its end.
  const std::vector<std::uint8_t> own(body, body + len);
  body = own.data();

  // The header parser's checks (throws InvalidArgument).
  const LrsuqParams p{static_cast<MechanismId>(data[1]), scale, static_cast<LatticeId>(data[2]),
                      static_cast<int>(data[3])};
  const KeyStream ks(key, kPurposeLrsuq);
  const Coder coder = static_cast<Coder>(coder_code);
  switch (target) {
    case 0: decode_values<float>(p, key, ks, body, len, m, coder, threads); break;
    case 1: decode_values<double>(p, key, ks, body, len, m, coder, threads); break;
    case 2: {
      check_payload_body(p, body, len, m, coder);  // before anything sized by m
      const std::size_t n = static_cast<std::size_t>(p.n), N = (m + n - 1) / n;
      std::vector<std::uint32_t> H(N);
      std::vector<std::int64_t> M(N * n);
      decode_payload_symbols(p, ks, body, len, m, coder, H.data(), M.data(), threads);
      break;
    }
    case 3: payload_body_parts(body, len, coder, p.lattice, body_segments(m, p.n)); break;
    default: decode_raw_symbols(p, ks, body, len, m); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    run(data, size);
  } catch (const cepam::FormatError&) {
  } catch (const cepam::InvalidArgument&) {
  }
  return 0;
}
