#include "payload/body.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>

#include "payload/golomb_body.hpp"
#include "payload/ans_body.hpp"
#include "payload/body_loops.hpp"
#include "common/errors.hpp"
#include "common/parallel.hpp"
#include "common/scratch.hpp"

namespace cepam {
namespace {

// The bomb rule (body.hpp).
void check_declared_size(std::size_t m, std::size_t len) {
  if (min_body_bytes(m) > len)
    throw FormatError("body of " + std::to_string(len) + " bytes declares " + std::to_string(m) +
                      " coordinates, more than its length can carry (" +
                      std::to_string(kCoordinatesPerBodyBit) + " a bit)");
}

// The body-coder table: one type a coder, in code order (each declared in
// its header, payload/<name>_body.hpp, its threaded loops beside its format
// in payload/<name>_body.cpp).  Adding a coder: its type and a Coder code.
template <class... Cs>
struct CoderList {};
using BodyCoders = CoderList<GolombBodyCoder, AnsBodyCoder>;

template <class Fn, class... Cs>
bool with_body_coder(Coder coder, Fn&& fn, CoderList<Cs...>) {
  return ((coder == Cs::id ? (fn(Cs{}), true) : false) || ...);
}

// Calls fn(body_coder) with the coder of code `coder`; throws InvalidArgument
// for an unknown code.
template <class Fn>
void with_body_coder(Coder coder, Fn&& fn) {
  if (!with_body_coder(coder, fn, BodyCoders{})) throw InvalidArgument("unknown body coder");
}

void check_coder(Coder coder) {
  with_body_coder(coder, [](auto) {});
}

template <class... Cs>
std::vector<BodyCoderInfo> coder_table(CoderList<Cs...>) {
  return {BodyCoderInfo{Cs::id, Cs::name, Cs::cpu, Cs::device_encode, Cs::device_decode,
                        Cs::device_encode_takes_model}...};
}

}  // namespace

std::vector<BodyCoderInfo> body_coders() { return coder_table(BodyCoders{}); }

void check_payload_body(const LrsuqParams& p, const std::uint8_t* body, std::size_t len,
                        std::size_t m, Coder coder) {
  check_coder(coder);
  check_declared_size(m, len);
  with_body_coder(coder, [&](auto c) { c.check(p, body, len, m); });
}

template <class T>
CodedBody encode_payload_body(const LrsuqParams& p, const KeyStream& ks, const T* x,
                              std::size_t m, double factor, Coder coder, int threads,
                              const LatticeStage* stage, double peak) {
  check_coder(coder);
  check_factor(factor);
  if (!std::isfinite(peak)) throw InvalidArgument("peak must be finite");
  CodedBody body;
  with_body_coder(coder,
                  [&](auto c) { c.encode(p, ks, x, m, factor, threads, stage, peak, body); });
  return body;
}

template <class T>
void decode_payload_body(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                         std::size_t len, std::size_t m, Coder coder, T* y, int threads) {
  check_coder(coder);
  check_declared_size(m, len);
  with_body_coder(coder, [&](auto c) { c.decode(p, ks, body, len, m, threads, y); });
}

void decode_payload_symbols(const LrsuqParams& p, const KeyStream& ks, const std::uint8_t* body,
                            std::size_t len, std::size_t m, Coder coder, std::uint32_t* H,
                            std::int64_t* M, int threads) {
  check_coder(coder);
  check_declared_size(m, len);
  with_body_coder(coder, [&](auto c) { c.symbols(p, ks, body, len, m, H, M, threads); });
}

template <class T>
bool segment_matches(const LrsuqParams& p, const ChaChaKey& key, Coder coder,
                     const std::uint8_t* body, std::size_t len, std::size_t m, double factor,
                     std::size_t s, const T* values, std::size_t count) {
  check_coder(coder);
  const std::size_t n = static_cast<std::size_t>(p.n);
  const std::size_t N = subvectors(p, m);
  if (s >= body_segments(m, p.n)) throw InvalidArgument("the body has no such segment");
  const SegmentRange range = segment_range(p, N, s);
  if (count != std::min(m, range.last * n) - range.first * n)
    throw InvalidArgument("values must be the segment's coordinates");
  // The segment's stage, from its coordinates (with their global indices).
  const std::size_t c = range.last - range.first;
  std::vector<std::uint64_t> indices(c);
  for (std::size_t j = 0; j < c; ++j) indices[j] = range.first + j;
  std::vector<std::uint32_t> H(c);
  std::vector<std::int64_t> M(c * n);
  std::vector<double> beta(c), V(c * n);
  lrsuq_encode_subvectors_at(p, key, values, indices.data(), c, m, factor, H.data(), M.data(),
                             beta.data(), V.data());
  bool same = false;
  with_body_coder(coder, [&](auto coder_type) {
    same = coder_type.matches(p, body, len, m, s, H.data(), M.data(), beta.data(), V.data());
  });
  return same;
}

std::vector<std::pair<std::string, std::uint64_t>> payload_body_parts(const std::uint8_t* body,
                                                                      std::size_t len,
                                                                      Coder coder,
                                                                      LatticeId lattice,
                                                                      std::size_t segments) {
  std::vector<std::pair<std::string, std::uint64_t>> parts;
  with_body_coder(coder, [&](auto c) { c.parts(body, len, lattice, segments, parts); });
  return parts;
}

template CodedBody encode_payload_body<float>(const LrsuqParams&, const KeyStream&,
                                             const float*, std::size_t, double, Coder, int,
                                             const LatticeStage*, double);
template CodedBody encode_payload_body<double>(const LrsuqParams&, const KeyStream&,
                                              const double*, std::size_t, double, Coder, int,
                                              const LatticeStage*, double);
template bool segment_matches<float>(const LrsuqParams&, const ChaChaKey&, Coder,
                                     const std::uint8_t*, std::size_t, std::size_t, double,
                                     std::size_t, const float*, std::size_t);
template bool segment_matches<double>(const LrsuqParams&, const ChaChaKey&, Coder,
                                      const std::uint8_t*, std::size_t, std::size_t, double,
                                      std::size_t, const double*, std::size_t);
template void decode_payload_body<float>(const LrsuqParams&, const KeyStream&,
                                         const std::uint8_t*, std::size_t, std::size_t, Coder,
                                         float*, int);
template void decode_payload_body<double>(const LrsuqParams&, const KeyStream&,
                                          const std::uint8_t*, std::size_t, std::size_t, Coder,
                                          double*, int);

}  // namespace cepam
