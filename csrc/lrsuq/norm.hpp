// The l2 norm of an update, for clipping: the encoder scales the update by
// clip / ||x|| when ||x|| > clip, so the norm's bits decide the payload's.
#pragma once

#include <cstddef>

namespace cepam {

// The order in which sum_of_squares adds the squares.
enum class SumOrder {
  // Four accumulators, element i into accumulator i mod 4 in index order
  // (the elements after the last multiple of four into accumulator 0), and
  // the total (a0 + a1) + (a2 + a3): the same bits on every platform and
  // at every SIMD level.  For anything the payload depends on.
  Fixed,
  // Any order (more accumulators, for speed): the result may differ in its
  // last bits between builds and processors.  For estimates only (the
  // decoder's precision check).
  Any,
};

// The sum of squares of x[0..m) in float64.  A finite input whose squares
// overflow (or underflow to below 2^-900) is summed as (x / max|x|)^2 and
// scaled back, so the result may be +inf.  Throws InvalidArgument naming
// the first non-finite entry.
template <class T>
double sum_of_squares(const T* x, std::size_t m, SumOrder order = SumOrder::Fixed);

}  // namespace cepam
