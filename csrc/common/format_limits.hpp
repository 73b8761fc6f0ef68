// Limits of the LRSUQ payload format that the quantizer (lrsuq/) and the
// entropy coders (coding/, payload/) both enforce.
#pragma once

#include <cstdint>

namespace cepam {

// Trials per sub-vector before encoding fails.  The smallest acceptance
// probability the core allows is 1/24 (Laplace, l1 ball in Z^4), for which
// reaching the cap has probability below 10^-1200.
inline constexpr std::uint32_t kTrialCap = 65536;

// |x / beta| must stay below this so that m + V is computed with headroom in
// float64 and M fits comfortably in the entropy coder's range.
inline constexpr double kMaxScaledInput = 0x1.0p50;

// Largest |M| the decoder accepts (the encoder cannot produce more than
// about 2^50).
inline constexpr std::int64_t kMaxAbsM = std::int64_t{1} << 53;

}  // namespace cepam
