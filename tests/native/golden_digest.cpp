// Digests of the native core's output, for comparing builds and platforms.
//
// Encodes a fixed, deterministically generated set of inputs with every
// lattice, mechanism and coder the core has (float32 and float64 inputs, two
// clipping factors, three noise-to-signal ratios, sizes that leave a partial
// last sub-vector and that span several ANS blocks), decodes each body, and
// prints one line a case:
//
//   <case> <body bytes> <FNV-1a 64 of the body> <FNV-1a 64 of the decoded values>
//
// and a last line "total <FNV-1a 64 of all the lines above>".  The format
// promises identical bytes on every platform, compiler and SIMD level, so
// the output of two builds (x86-64 GCC, Clang, CEPAM_NO_SIMD, aarch64 under
// qemu; tools/cross_check.sh) must be identical.  The program checks
// nothing itself beyond a decode's success: it compares builds, not a
// recorded format, so it stays valid when the format changes.
//
// The inputs use only exactly-rounded arithmetic on bits from a fixed
// generator (no libm), so they are the same everywhere too.
//
// Exit status: 0 when every case encoded and decoded, 1 otherwise.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "lrsuq/quantizer.hpp"
#include "payload/body.hpp"
#include "random/chacha20.hpp"

namespace {

using cepam::Coder;
using cepam::LatticeId;
using cepam::LrsuqParams;
using cepam::MechanismId;

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

std::uint64_t fnv1a(const void* data, std::size_t len, std::uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

// splitmix64: a fixed, portable stream of 64-bit words.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform on [-0.5, 0.5), exact (53 bits, scaled by a power of two).
  double centred() { return static_cast<double>(next() >> 11) * 0x1.0p-53 - 0.5; }
};

// m values of scale about `spread`: a sum of four uniforms (bell-shaped),
// with a few exact zeros, tiny values and one large outlier mixed in.
std::vector<double> make_input(std::uint64_t seed, std::size_t m, double spread) {
  SplitMix64 rng{seed};
  std::vector<double> x(m);
  for (std::size_t i = 0; i < m; ++i) {
    const double s = rng.centred() + rng.centred() + rng.centred() + rng.centred();
    x[i] = s * spread;
  }
  if (m > 7) {
    x[1] = 0.0;
    x[3] = 1e-7 * spread;
    x[5] = -0x1p-1074;  // the smallest subnormal double (-0 as float32)
    x[m - 2] = 40.0 * spread;
  }
  return x;
}

// The golden vectors' input (tests/golden/generate.py).
const std::vector<double> kGoldenX = {0.0,   1e-3, -2.5e-3, 0.0123, -0.5, 3.0,   1e-7,
                                      -1e-7, 0.25, 0.75,    -0.125, 42.0, -0.031};

struct Setting {
  MechanismId mechanism;
  LatticeId lattice;
  int n;
  const char* name;
};

std::vector<Setting> all_settings() {
  std::vector<Setting> s;
  static const char* const zn[] = {"", "Z1", "Z2", "Z3", "Z4", "Z5", "Z6", "Z7", "Z8"};
  for (int n = 1; n <= 8; ++n) s.push_back({MechanismId::Gaussian, LatticeId::Z, n, zn[n]});
  for (int n = 1; n <= 4; ++n) s.push_back({MechanismId::Laplace, LatticeId::Z, n, zn[n]});
  s.push_back({MechanismId::SDQ, LatticeId::Z, 1, "Z1"});
  s.push_back({MechanismId::Gaussian, LatticeId::A2, 2, "A2"});
  s.push_back({MechanismId::Gaussian, LatticeId::D4, 4, "D4"});
  s.push_back({MechanismId::Gaussian, LatticeId::E8, 8, "E8"});
  return s;
}

const char* mechanism_name(MechanismId m) {
  switch (m) {
    case MechanismId::Gaussian: return "gaussian";
    case MechanismId::Laplace: return "laplace";
    case MechanismId::SDQ: return "sdq";
  }
  return "?";
}

template <class T>
std::string run_case(const LrsuqParams& p, const cepam::KeyStream& ks,
                     const std::vector<double>& x64, double factor, Coder coder) {
  const std::vector<T> x(x64.begin(), x64.end());
  const std::vector<std::uint8_t> body =
      cepam::encode_payload_body(p, ks, x.data(), x.size(), factor, coder).bytes();
  cepam::check_payload_body(p, body.data(), body.size(), x.size(), coder);
  std::vector<T> y(x.size());
  cepam::decode_payload_body(p, ks, body.data(), body.size(), y.size(), coder, y.data());
  char line[96];
  std::snprintf(line, sizeof line, "%zu %016llx %016llx", body.size(),
                static_cast<unsigned long long>(fnv1a(body.data(), body.size())),
                static_cast<unsigned long long>(fnv1a(y.data(), y.size() * sizeof(T))));
  return line;
}

}  // namespace

int main() {
  unsigned char key_bytes[32];
  for (int i = 0; i < 32; ++i) key_bytes[i] = static_cast<unsigned char>(i);
  const cepam::KeyStream ks(cepam::chacha_key_from_bytes(key_bytes), cepam::kPurposeLrsuq);

  struct Input {
    std::string name;
    std::vector<double> x;
  };
  // Noise scale 0.01 against inputs of spread 0.01, 1 and 100 (ratios
  // 1, 100, 10^4); 40,003 values span several ANS blocks at n = 1.
  const std::vector<Input> inputs = {
      {"golden13", kGoldenX},
      {"m1003-s0.01", make_input(1, 1003, 0.01)},
      {"m1003-s1", make_input(2, 1003, 1.0)},
      {"m40003-s100", make_input(3, 40003, 100.0)},
  };
  const double scale = 0.01;
  const double factors[] = {1.0, 0.375};

  std::uint64_t total = kFnvOffset;
  int failures = 0;
  for (const Setting& s : all_settings()) {
    const LrsuqParams p{s.mechanism, scale, s.lattice, s.n};
    for (const Coder coder : {Coder::Golomb, Coder::Ans}) {
      for (const Input& in : inputs) {
        for (const double factor : factors) {
          for (const bool f32 : {true, false}) {
            std::string name = std::string(mechanism_name(s.mechanism)) + "-" + s.name + "-" +
                               (coder == Coder::Golomb ? "golomb" : "ans") + "-" + in.name +
                               (factor == 1.0 ? "" : "-clip") + (f32 ? "-f32" : "-f64");
            std::string result;
            try {
              result = f32 ? run_case<float>(p, ks, in.x, factor, coder)
                           : run_case<double>(p, ks, in.x, factor, coder);
            } catch (const std::exception& e) {
              result = std::string("ERROR ") + e.what();
              ++failures;
            }
            const std::string line = name + " " + result + "\n";
            std::fputs(line.c_str(), stdout);
            total = fnv1a(line.data(), line.size(), total);
          }
        }
      }
    }
  }
  std::printf("total %016llx\n", static_cast<unsigned long long>(total));
  return failures == 0 ? 0 : 1;
}
