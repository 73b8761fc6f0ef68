#include "common/cpu.hpp"

#include <cstdlib>
#include <cstring>

namespace cepam {
namespace {

SimdLevel detect() {
  SimdLevel cap = SimdLevel::Avx512;
#if defined(_MSC_VER)
#pragma warning(suppress : 4996)  // getenv is fine here: read once, not kept
#endif
  if (const char* env = std::getenv("CEPAM_SIMD")) {
    if (std::strcmp(env, "portable") == 0) cap = SimdLevel::Portable;
    if (std::strcmp(env, "avx2") == 0) cap = SimdLevel::Avx2;
  }
  SimdLevel level = SimdLevel::Portable;
#if CEPAM_X86_DISPATCH
  __builtin_cpu_init();
  // libgcc and compiler-rt report these only when the OS saves the state.
  if (__builtin_cpu_supports("avx2")) level = SimdLevel::Avx2;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f"))
    level = SimdLevel::Avx512;
#elif CEPAM_ARM_NEON
  level = SimdLevel::Neon;
#endif
  return level < cap ? level : cap;
}

}  // namespace

SimdLevel simd_level() {
  static const SimdLevel level = detect();
  return level;
}

bool simd_avx512dq() {
#if CEPAM_X86_DISPATCH
  static const bool dq = simd_level() >= SimdLevel::Avx512 && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vl");
  return dq;
#else
  return false;
#endif
}

bool simd_base_lanes() {
#if CEPAM_X86_DISPATCH
  return simd_level() >= SimdLevel::Avx2 && !simd_avx512dq();
#else
  return simd_level() >= SimdLevel::Neon;  // (false without CEPAM_ARM_NEON)
#endif
}

}  // namespace cepam
