// The two-lane operations (aarch64 NEON, 128-bit) of the kernels written once
// for SIMD lanes (lattice/zn_lanes.hpp, voronoi_lanes.hpp,
// coding/cell_lanes.hpp, lrsuq/maxwell_lanes.hpp), which name them S;
// common/lanes_avx2.hpp says what each does (per lane, what the scalar code
// it stands for computes: the same IEEE operations, branches
// turned into selections).  Internal header, for CEPAM_ARM_NEON builds
// (common/cpu.hpp), where NEON is part of the architecture: no target
// pragma, and the kernels are chosen where simd_level() is Neon (not capped
// by CEPAM_SIMD=portable).  Masks M are vectors of all-ones or zero lanes;
// I32 holds one 32-bit integer a lane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/cpu.hpp"

#if CEPAM_ARM_NEON
#include <arm_neon.h>

namespace cepam::simd {

struct NeonLanes {
  static constexpr int L = 2;
  using D = float64x2_t;
  using M = uint64x2_t;
  using I32 = int32x2_t;
  static D splat(double v) { return vdupq_n_f64(v); }
  static D load(const double* p) { return vld1q_f64(p); }
  static void store(double* p, D a) { vst1q_f64(p, a); }
  static void store_as(double* p, D a) { store(p, a); }
  static void store_as(float* p, D a) { vst1_f32(p, vcvt_f32_f64(a)); }
  // |q| <= 2^53: exact.
  static D load_int64_as_double(const std::int64_t* p) { return vcvtq_f64_s64(vld1q_s64(p)); }
  static D add(D a, D b) { return vaddq_f64(a, b); }
  static D sub(D a, D b) { return vsubq_f64(a, b); }
  static D mul(D a, D b) { return vmulq_f64(a, b); }
  static D div(D a, D b) { return vdivq_f64(a, b); }
  static D add_where(M m, D a, D b) { return vbslq_f64(m, vaddq_f64(a, b), a); }
  static D floor(D a) { return vrndmq_f64(a); }
  // a > b ? a : b (vmaxq_f64 would give NaN for a NaN b, and +0 for (-0, +0)).
  static D max(D a, D b) { return vbslq_f64(vcgtq_f64(a, b), a, b); }
  static M ge(D a, D b) { return vcgeq_f64(a, b); }
  static M gt(D a, D b) { return vcgtq_f64(a, b); }
  static M lt(D a, D b) { return vcltq_f64(a, b); }
  static M le(D a, D b) { return vcleq_f64(a, b); }
  static M eq(D a, D b) { return vceqq_f64(a, b); }
  static M not_gt(D a, D b) { return invert(vcgtq_f64(a, b)); }
  static M not_lt(D a, D b) { return invert(vcltq_f64(a, b)); }
  static D blend(M m, D a, D b) { return vbslq_f64(m, b, a); }
  static M both(M a, M b) { return vandq_u64(a, b); }
  static M either(M a, M b) { return vorrq_u64(a, b); }
  static unsigned bits(M m) {
    return static_cast<unsigned>((vgetq_lane_u64(m, 0) & 1u) | ((vgetq_lane_u64(m, 1) & 1u) << 1));
  }
  static D abs(D a) { return vabsq_f64(a); }
  // Integral |s| < 2^51: the conversion (truncating) is exact.
  static M odd(D s) { return vtstq_s64(vcvtq_s64_f64(s), vdupq_n_s64(1)); }
  static D int64_bits(D f) { return vreinterpretq_f64_s64(vcvtq_s64_f64(f)); }
  // double(w >> 11) 2^-53: the conversion of an integer below 2^53 is exact.
  static D uniform_co(D w) {
    const uint64x2_t top = vshrq_n_u64(vreinterpretq_u64_f64(w), 11);
    return vmulq_f64(vcvtq_f64_u64(top), vdupq_n_f64(0x1.0p-53));
  }
  static D uniform_low(D w) {  // (common/lanes_avx2.hpp says what it is)
    return uniform_co(vreinterpretq_f64_u64(vshlq_n_u64(vreinterpretq_u64_f64(w), 11)));
  }
  static D gather(const double* base, const std::size_t* c) {
    return vcombine_f64(vld1_f64(base + c[0]), vld1_f64(base + c[1]));
  }

  // 32-bit integers.
  static I32 splat_i32(std::int32_t v) { return vdup_n_s32(v); }
  // static_cast<std::int32_t> where it is defined; elsewhere saturated (the
  // lane code clamps such a lane's index or drops its value).
  static I32 trunc_i32(D a) { return vqmovn_s64(vcvtq_s64_f64(a)); }
  static D from_i32(I32 a) { return vcvtq_f64_s64(vmovl_s32(a)); }
  static I32 add_i32(I32 a, I32 b) { return vadd_s32(a, b); }
  static I32 sub_i32(I32 a, I32 b) { return vsub_s32(a, b); }
  static I32 min_i32(I32 a, I32 b) { return vmin_s32(a, b); }
  static I32 max_i32(I32 a, I32 b) { return vmax_s32(a, b); }
  static I32 shr_i32(I32 a, int k) {  // logical
    return vreinterpret_s32_u32(vshl_u32(vreinterpret_u32_s32(a), vdup_n_s32(-k)));
  }
  static I32 and_i32(I32 a, I32 b) { return vand_s32(a, b); }
  static D gather(const double* base, I32 i) {
    return vcombine_f64(vld1_f64(base + vget_lane_s32(i, 0)), vld1_f64(base + vget_lane_s32(i, 1)));
  }
  static D gather_loads(const double* base, I32 i) { return gather(base, i); }
  // lo_l and hi_l = the low and high 32 bits of the word whose bit pattern
  // is w_l, as unsigned integers (exact doubles).
  static void uint32_halves(D w, D& lo, D& hi) {
    const uint64x2_t bits = vreinterpretq_u64_f64(w);
    lo = vcvtq_f64_u64(vandq_u64(bits, vdupq_n_u64(0xffffffff)));
    hi = vcvtq_f64_u64(vshrq_n_u64(bits, 32));
  }
  // out[2 l] = a_l and out[2 l + 1] = b_l, for l = 0, 1.
  static void store_pairs(void* out, I32 a, I32 b) {
    std::int32_t pairs[4];
    vst1q_s32(pairs, vcombine_s32(vzip1_s32(a, b), vzip2_s32(a, b)));
    std::memcpy(out, pairs, sizeof pairs);
  }

  // Rows to columns and back, for the lane code's loads and stores of
  // sub-vectors and table rows: cols[k] lane l = rows[l][k] for k < N
  // (load_cols), and the inverse for the lanes in mask (store_rows).
  template <int N>
  static void load_cols(const double* const* rows, D* cols) {
    for (int k = 0; k < N; k += 2) {
      const D r0 = vld1q_f64(rows[0] + k), r1 = vld1q_f64(rows[1] + k);
      cols[k] = vzip1q_f64(r0, r1);
      cols[k + 1] = vzip2q_f64(r0, r1);
    }
  }
  template <int N>
  static void store_rows(const D* cols, double* const* rows, unsigned mask) {
    for (int k = 0; k < N; k += 2) {
      const D r0 = vzip1q_f64(cols[k], cols[k + 1]), r1 = vzip2q_f64(cols[k], cols[k + 1]);
      if (mask & 1u) vst1q_f64(rows[0] + k, r0);
      if (mask & 2u) vst1q_f64(rows[1] + k, r1);
    }
  }

 private:
  static M invert(M m) { return vreinterpretq_u64_u32(vmvnq_u32(vreinterpretq_u32_u64(m))); }
};

}  // namespace cepam::simd

#endif  // CEPAM_ARM_NEON
