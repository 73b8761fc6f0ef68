// The l2 norm of an update, for clipping: the encoder scales the update by
// clip / ||x|| when ||x|| > clip, so the norm's bits decide the payload's.
#pragma once

#include <cstddef>

#include "lrsuq/norm_block.hpp"

namespace cepam {

// The elements of one block of sum_of_squares (payload format version 5).
using squares::kSquaresBlock;

// The order in which sum_of_squares adds the squares.  Both orders cut x
// into blocks of kSquaresBlock elements (the last one may be shorter), sum
// each block on its own (in parallel), then add the block sums by a fixed
// pairwise tree in block order: adjacent pairs, level by level (s[2j] +
// s[2j+1]; an odd last sum goes up a level as it is) until one is left.
// The thread count never changes the result.
enum class SumOrder {
  // Within a block: four accumulators, element i of the block into
  // accumulator i mod 4 in index order (the elements after the last
  // multiple of four into accumulator 0), and the block's sum (a0 + a1) +
  // (a2 + a3): the same bits on every platform, at every SIMD level and
  // for every thread count.  For anything the payload depends on.
  Fixed,
  // Within a block, any order (more accumulators, for speed): the result
  // may differ in its last bits between builds and processors.  For
  // estimates only (the decoder's precision check).
  Any,
};

// The sum of squares of x[0..m) in float64, on up to `threads` threads.  A
// finite input whose squares overflow (or underflow to below 2^-900) is
// summed again as (x / max|x|)^2 (in index order within each block, the
// blocks by the same tree) and scaled back, so the result may be +inf.
// Throws InvalidArgument naming the first non-finite entry.
template <class T>
double sum_of_squares(const T* x, std::size_t m, SumOrder order = SumOrder::Fixed,
                      int threads = 1);

// sum_of_squares and, from the same pass over x, its largest magnitude
// max |x[i]| (exact: an element's value; 0 for m = 0), which the ANS
// coder's source model takes instead of a pass of its own.
struct NormPass {
  double sum_squares;
  double peak;
};
template <class T>
NormPass norm_pass(const T* x, std::size_t m, SumOrder order = SumOrder::Fixed, int threads = 1);

}  // namespace cepam
