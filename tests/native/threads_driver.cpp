// A native driver of the parallel encode and decode paths, for
// ThreadSanitizer (tests/native/run_tsan.sh builds the core and this file
// with -fsanitize=thread).  For every lattice and both coders it encodes an
// update of uneven size on 1 and on 4 threads, checks that the bytes and the
// decoded values agree, and decodes corrupted bodies on 4 threads (each must
// throw FormatError, the same message as on 1 thread); decodes the symbols
// (the GPU decode's host side) on 1 and 4 threads into shared arrays, and
// packs and widens them as the GPU transfers do (lrsuq/compact.hpp) on 4
// threads.  The worker pool (common/worker_pool.hpp) serves loops from
// several callers at once and loops inside tasks: two threads encode at
// once, and a loop's tasks run loops of their own.  Exit status 0 when
// every check holds.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.hpp"
#include "common/parallel.hpp"
#include "lrsuq/compact.hpp"
#include "payload/body.hpp"

using namespace cepam;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

std::string decode_error(const LrsuqParams& p, const KeyStream& ks,
                         const std::vector<std::uint8_t>& body, std::size_t m, Coder coder,
                         int threads) {
  std::vector<float> y(m);
  try {
    decode_payload_body(p, ks, body.data(), body.size(), m, coder, y.data(), threads);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "decoded";
}

// Loops inside the tasks of a loop, and loops from two callers at once.
void check_pool(const LrsuqParams& p, const KeyStream& ks, const std::vector<float>& x) {
  std::vector<std::uint64_t> sums(16);
  parallel_for(4, sums.size(), [&](std::size_t i) {
    std::vector<std::uint64_t> parts(100);
    parallel_for(4, parts.size(), [&](std::size_t j) { parts[j] = (i + 1) * j; });
    for (const std::uint64_t v : parts) sums[i] += v;
  });
  for (std::size_t i = 0; i < sums.size(); ++i)
    check(sums[i] == (i + 1) * 4950, "a loop inside a task: wrong sum");
  const auto one = encode_payload_body(p, ks, x.data(), x.size(), 1.0, Coder::Ans, 1).bytes();
  std::vector<std::uint8_t> results[2];
  std::vector<std::thread> callers;
  for (auto& result : results) {
    callers.emplace_back([&] {
      for (int r = 0; r < 3; ++r)
        result = encode_payload_body(p, ks, x.data(), x.size(), 1.0, Coder::Ans, 4).bytes(4);
    });
  }
  for (std::thread& t : callers) t.join();
  check(results[0] == one && results[1] == one, "two callers at once: bytes differ");
}

}  // namespace

int main() {
  unsigned char key_bytes[32];
  for (int i = 0; i < 32; ++i) key_bytes[i] = static_cast<unsigned char>(i);
  const KeyStream ks(chacha_key_from_bytes(key_bytes), kPurposeLrsuq);
  struct Setting {
    LatticeId lattice;
    int n;
  };
  const Setting settings[] = {{LatticeId::Z, 1}, {LatticeId::Z, 3}, {LatticeId::A2, 2},
                              {LatticeId::D4, 4}, {LatticeId::E8, 8}};
  const std::size_t m = 3 * (std::size_t{1} << 16) + 4321;  // several chunks and segments
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> x(m);
  for (float& v : x) v = normal(rng);
  for (const Setting& s : settings) {
    const LrsuqParams p{MechanismId::Gaussian, 1e-3, s.lattice, s.n};
    for (const Coder coder : {Coder::Golomb, Coder::Ans}) {
      const std::string name = "lattice " + std::to_string(static_cast<int>(s.lattice)) +
                               " n " + std::to_string(s.n) + " coder " +
                               std::to_string(static_cast<int>(coder));
      const auto one = encode_payload_body(p, ks, x.data(), m, 1.0, coder, 1).bytes();
      // (Its parts written into place by 4 threads too.)
      const auto four = encode_payload_body(p, ks, x.data(), m, 1.0, coder, 4).bytes(4);
      check(one == four, name + ": bytes differ between 1 and 4 threads");
      std::vector<float> y1(m), y4(m);
      decode_payload_body(p, ks, one.data(), one.size(), m, coder, y1.data(), 1);
      decode_payload_body(p, ks, one.data(), one.size(), m, coder, y4.data(), 4);
      check(std::memcmp(y1.data(), y4.data(), m * sizeof(float)) == 0,
            name + ": values differ between 1 and 4 threads");
      // The symbols, decoded by the threads into the caller's arrays.
      const std::size_t N = (m + static_cast<std::size_t>(s.n) - 1) / static_cast<std::size_t>(s.n);
      const std::size_t Nn = N * static_cast<std::size_t>(s.n);
      std::vector<std::uint32_t> h1(N), h4(N), h_back(N);
      std::vector<std::int64_t> m1(Nn), m4(Nn), m_back(Nn);
      decode_payload_symbols(p, ks, one.data(), one.size(), m, coder, h1.data(), m1.data(), 1);
      decode_payload_symbols(p, ks, one.data(), one.size(), m, coder, h4.data(), m4.data(), 4);
      check(h1 == h4 && m1 == m4, name + ": symbols differ between 1 and 4 threads");
      // The GPU transfers' host side on 4 threads: range, pack, widen.
      const compact::Range r1 = compact::range_of(h1.data(), N, m1.data(), Nn);
      const compact::Range r4 = compact::range_of(h4.data(), N, m4.data(), Nn, 4);
      check(r1.h_max == r4.h_max && r1.m_lo == r4.m_lo && r1.m_hi == r4.m_hi,
            name + ": the chunk's range differs on 4 threads");
      const int wh = compact::unsigned_width(r4.h_max);
      const int wm = compact::signed_width(r4.m_lo, r4.m_hi);
      std::vector<std::uint8_t> ph(N * static_cast<std::size_t>(wh));
      std::vector<std::uint8_t> pm(Nn * static_cast<std::size_t>(wm));
      compact::pack(h4.data(), N, m4.data(), Nn, wh, wm, ph.data(), pm.data(), 4);
      compact::unpack(ph.data(), N, pm.data(), Nn, wh, wm, h_back.data(), m_back.data(), 4);
      check(h_back == h1 && m_back == m1, name + ": the compact round trip differs on 4 threads");
      // Corrupted bodies: a flipped byte in the middle and near the end, a truncation.
      for (const std::size_t at : {one.size() / 2, one.size() - 3}) {
        auto bad = one;
        bad[at] ^= 0x5a;
        const std::string e1 = decode_error(p, ks, bad, m, coder, 1);
        const std::string e4 = decode_error(p, ks, bad, m, coder, 4);
        check(e1 == e4, name + ": different outcomes on 1 and 4 threads: " + e1 + " / " + e4);
      }
      auto cut = one;
      cut.resize(one.size() - 1);
      check(decode_error(p, ks, cut, m, coder, 4) != "decoded", name + ": truncation decoded");
    }
  }
  check_pool({MechanismId::Gaussian, 1e-3, LatticeId::E8, 8}, ks, x);
  if (failures == 0) std::printf("threads_driver: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
