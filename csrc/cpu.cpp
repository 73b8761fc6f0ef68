#include "cpu.hpp"

#include <cstdlib>
#include <cstring>

namespace cepam {
namespace {

SimdLevel detect() {
  const char* env = std::getenv("CEPAM_SIMD");
  if (env != nullptr && std::strcmp(env, "portable") == 0) return SimdLevel::Portable;
#if CEPAM_X86_DISPATCH
  __builtin_cpu_init();
  // libgcc and compiler-rt report avx2 only when the OS saves the YMM state.
  if (__builtin_cpu_supports("avx2")) return SimdLevel::Avx2;
#endif
  return SimdLevel::Portable;
}

}  // namespace

SimdLevel simd_level() {
  static const SimdLevel level = detect();
  return level;
}

}  // namespace cepam
