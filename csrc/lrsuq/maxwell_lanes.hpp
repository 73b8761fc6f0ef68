// maxwell::fast (random/maxwell.hpp) for SIMD lanes (internal header of
// lrsuq/maxwell_kernels*.cpp, included after their target pragma): lane l
// is word c + l.  The same operations as the scalar code, in its order
// (common/simd_avx2.hpp says why that gives its bits): the layer
// i = w >> 54, u = uniform_co(w << 11) (S::uniform_low), the fast rows of
// the lanes' layers loaded whole and transposed into columns (S::load_cols:
// on Zen 4 3.4 times faster than a gather for each column), x = start +
// u width, kept where lo <= x <= hi.
#pragma once

#include <cstddef>
#include <cstdint>

#include "random/maxwell.hpp"

namespace cepam::kernels::lanes {

// kernels::maxwell_radii for the whole groups of S::L words: returns the
// words done; the rejected words' indices appended to slow (*nslow of them).
template <class S>
inline std::size_t maxwell_radii(double sigma, const std::uint64_t* w, std::size_t count,
                                 double* out, std::uint64_t* slow, std::size_t* nslow) {
  using D = typename S::D;
  constexpr int L = S::L;
  const double* wd = reinterpret_cast<const double*>(w);  // the words' bit patterns
  const D s = S::splat(sigma);
  std::size_t c = 0, r = 0;
  for (; c + L <= count; c += L) {
    const D words = S::load(wd + c);
    const double* rows[L];
    for (int l = 0; l < L; ++l)
      rows[l] = &maxwell::fast_row(w[c + l] >> maxwell::kLayerShift).start;
    D row[4];  // start, width, lo, hi
    S::template load_cols<4>(rows, row);
    const D x = S::add(row[0], S::mul(S::uniform_low(words), row[1]));
    const typename S::M kept = S::both(S::ge(x, row[2]), S::le(x, row[3]));
    S::store(out + c, S::mul(s, S::blend(kept, S::splat(-1.0), x)));  // sigma fast(w)
    // The rejected lanes' indices.  (A group of eight has one with
    // probability 0.03: the branch costs less than appending without one,
    // whose chain through r took about 3 cycles a lane.)
    const unsigned bits = S::bits(kept);
    if (bits != (1u << L) - 1) {
      for (int l = 0; l < L; ++l) {
        slow[r] = c + static_cast<std::size_t>(l);
        r += ((bits >> l) & 1u) ^ 1u;
      }
    }
  }
  *nslow = r;
  return c;
}

}  // namespace cepam::kernels::lanes
