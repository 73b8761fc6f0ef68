#include "lrsuq.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "errors.hpp"

namespace cepam {
namespace {

constexpr std::size_t kChunk = 256;  // sub-vectors per keystream batch (multiple of 8)
constexpr int kMaxN = 8;

// Calls fn(lattice, latent) with the concrete types for p.
template <class Fn>
void dispatch(const LrsuqParams& p, Fn&& fn) {
  check_params(p);
  const LatticeZn lattice{p.n};
  if (p.mechanism == MechanismId::Gaussian) {
    fn(lattice, GaussianLatent{p.n, p.scale});
  } else {
    fn(lattice, LaplaceLatent{p.n, p.scale});
  }
}

template <class Lattice>
bool accepted(const Lattice& lattice, Norm norm, const double* y, const double* x, double r) {
  if (lattice.cell_is_ball()) return true;
  const int n = lattice.dim();
  if (norm == Norm::L2) {
    double s = 0.0;
    for (int k = 0; k < n; ++k) {
      const double d = y[k] - x[k];
      s += d * d;
    }
    return s <= r * r;
  }
  double s = 0.0;
  for (int k = 0; k < n; ++k) s += std::fabs(y[k] - x[k]);
  return s <= r;
}

// y = beta (G m + v)
template <class Lattice>
void reconstruct(const Lattice& lattice, double beta, const std::int64_t* m, const double* v,
                 double* y) {
  double p[kMaxN];
  lattice.to_point(m, p);
  for (int k = 0; k < lattice.dim(); ++k) y[k] = beta * (p[k] + v[k]);
}

std::string describe_subvector(std::size_t j) { return "sub-vector " + std::to_string(j); }

template <class T, class Lattice, class Latent>
void encode_impl(const Lattice& lattice, const Latent& latent, const KeyStream& ks, const T* x,
                 std::size_t m, double factor, std::uint32_t* H, std::int64_t* M) {
  const int n = lattice.dim();
  const std::size_t un = static_cast<std::size_t>(n);
  const std::size_t W = static_cast<std::size_t>(latent.words());
  const std::size_t N = (m + un - 1) / un;
  const double rho = lattice.packing_radius(latent.norm());
  std::vector<std::uint64_t> latent_buf(kChunk * W), dither_buf(kChunk * un);
  std::uint64_t retry_words[kMaxN];
  double xs[kMaxN], t[kMaxN], v[kMaxN], y[kMaxN];
  std::int64_t q[kMaxN];

  for (std::size_t j0 = 0; j0 < N; j0 += kChunk) {
    const std::size_t count = (N - j0 < kChunk) ? N - j0 : kChunk;
    ks.words(0, j0 * W, count * W, latent_buf.data());
    ks.words(1, j0 * un, count * un, dither_buf.data());
    for (std::size_t c = 0; c < count; ++c) {
      const std::size_t j = j0 + c;
      for (std::size_t k = 0; k < un; ++k) {
        const std::size_t idx = j * un + k;
        xs[k] = idx < m ? static_cast<double>(x[idx]) * factor : 0.0;
      }
      const double r = latent.radius(&latent_buf[c * W]);
      const double beta = r / rho;
      const double inv_beta = 1.0 / beta;
      for (int k = 0; k < n; ++k) {
        const double s = xs[k] * inv_beta;
        if (!(std::fabs(s) < kMaxScaledInput)) {
          throw EncodingError(
              describe_subvector(j) +
              ": the input is too large relative to the noise scale drawn for it "
              "(|x| / beta >= 2^50); clip the update or use a larger noise scale");
        }
        t[k] = s;
      }
      const std::uint64_t* words = &dither_buf[c * un];
      std::uint32_t trial = 1;
      for (;;) {
        lattice.dither(words, v);
        double tv[kMaxN];
        for (int k = 0; k < n; ++k) tv[k] = t[k] - v[k];
        lattice.closest_point(tv, q);
        reconstruct(lattice, beta, q, v, y);
        if (accepted(lattice, latent.norm(), y, xs, r)) break;
        if (trial == kTrialCap) {
          throw EncodingError(describe_subvector(j) + ": no trial accepted within the cap of " +
                              std::to_string(kTrialCap) + " trials");
        }
        ++trial;
        ks.words(trial, j * un, un, retry_words);
        words = retry_words;
      }
      H[j] = trial;
      for (std::size_t k = 0; k < un; ++k) M[j * un + k] = q[k];
    }
  }
}

template <class T, class Lattice, class Latent>
void decode_impl(const Lattice& lattice, const Latent& latent, const KeyStream& ks,
                 const std::uint32_t* H, const std::int64_t* M, std::size_t m, T* out) {
  const int n = lattice.dim();
  const std::size_t un = static_cast<std::size_t>(n);
  const std::size_t W = static_cast<std::size_t>(latent.words());
  const std::size_t N = (m + un - 1) / un;
  const double rho = lattice.packing_radius(latent.norm());
  std::vector<std::uint64_t> latent_buf(kChunk * W), dither_buf(kChunk * un);
  std::uint64_t retry_words[kMaxN];
  double v[kMaxN], y[kMaxN];
  std::int64_t q[kMaxN];

  for (std::size_t j0 = 0; j0 < N; j0 += kChunk) {
    const std::size_t count = (N - j0 < kChunk) ? N - j0 : kChunk;
    ks.words(0, j0 * W, count * W, latent_buf.data());
    ks.words(1, j0 * un, count * un, dither_buf.data());
    for (std::size_t c = 0; c < count; ++c) {
      const std::size_t j = j0 + c;
      const std::uint32_t h = H[j];
      if (h < 1 || h > kTrialCap || (h != 1 && lattice.cell_is_ball())) {
        throw FormatError(describe_subvector(j) + ": trial index " + std::to_string(h) +
                          " out of range");
      }
      for (std::size_t k = 0; k < un; ++k) {
        const std::int64_t mk = M[j * un + k];
        if (mk > kMaxAbsM || mk < -kMaxAbsM) {
          throw FormatError(describe_subvector(j) + ": lattice coordinate out of range");
        }
        q[k] = mk;
      }
      const std::uint64_t* words = &dither_buf[c * un];
      if (h != 1) {
        ks.words(h, j * un, un, retry_words);
        words = retry_words;
      }
      const double beta = latent.radius(&latent_buf[c * W]) / rho;
      lattice.dither(words, v);
      reconstruct(lattice, beta, q, v, y);
      for (std::size_t k = 0; k < un; ++k) {
        const std::size_t idx = j * un + k;
        if (idx < m) out[idx] = static_cast<T>(y[k]);
      }
    }
  }
}

}  // namespace

void check_params(const LrsuqParams& p) {
  if (!(p.scale > 0.0) || !std::isfinite(p.scale)) {
    throw InvalidArgument("noise scale must be a positive finite number");
  }
  if (p.lattice != LatticeId::Z) throw InvalidArgument("unknown lattice id");
  if (p.n < 1 || p.n > kMaxN) {
    throw InvalidArgument("dimension n must be between 1 and 8 for the lattice Z^n");
  }
  if (p.mechanism == MechanismId::Laplace) {
    if (p.n > 4) {
      throw InvalidArgument(
          "Laplace with l1 balls on Z^n accepts a trial with probability 1/n!; "
          "n must be at most 4");
    }
  } else if (p.mechanism != MechanismId::Gaussian) {
    throw InvalidArgument("unknown mechanism id");
  }
}

double acceptance_probability(const LrsuqParams& p) {
  check_params(p);
  const LatticeZn lattice{p.n};
  if (lattice.cell_is_ball()) return 1.0;
  if (p.mechanism == MechanismId::Gaussian) return lattice.packing_density();
  // l1 ball of radius 1/2 in the unit cube: volume 1 / n!.
  double f = 1.0;
  for (int k = 2; k <= p.n; ++k) f *= k;
  return 1.0 / f;
}

int latent_words(const LrsuqParams& p) {
  int w = 0;
  dispatch(p, [&](const auto&, const auto& latent) { w = latent.words(); });
  return w;
}

template <class T>
double sum_of_squares(const T* x, std::size_t m) {
  // Four accumulators in a fixed order; a finite input whose squares
  // overflow is rescaled by its largest magnitude.
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  double maxabs = 0.0;
  std::size_t i = 0;
  for (; i + 4 <= m; i += 4) {
    for (std::size_t l = 0; l < 4; ++l) {
      const double v = static_cast<double>(x[i + l]);
      acc[l] += v * v;
      maxabs = std::fabs(v) > maxabs ? std::fabs(v) : maxabs;
    }
  }
  for (; i < m; ++i) {
    const double v = static_cast<double>(x[i]);
    acc[0] += v * v;
    maxabs = std::fabs(v) > maxabs ? std::fabs(v) : maxabs;
  }
  double total = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  if (std::isfinite(total) && total > 0x1.0p-900) return total;
  for (std::size_t k = 0; k < m; ++k) {
    if (!std::isfinite(static_cast<double>(x[k]))) {
      throw InvalidArgument("input contains a non-finite value (NaN or Inf) at flat index " +
                            std::to_string(k));
    }
  }
  if (maxabs == 0.0) return 0.0;
  // Overflow or underflow: accumulate (x / maxabs)^2 and scale back.  The
  // result may be +inf, which the caller treats as "clip to the bound".
  double scaled = 0.0;
  for (std::size_t k = 0; k < m; ++k) {
    const double v = static_cast<double>(x[k]) / maxabs;
    scaled += v * v;
  }
  return scaled * maxabs * maxabs;
}

template <class T>
void lrsuq_encode(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                  double factor, std::uint32_t* H, std::int64_t* M) {
  if (!(factor >= 0.0) || !std::isfinite(factor)) {
    throw InvalidArgument("clipping factor must be finite and non-negative");
  }
  dispatch(p, [&](const auto& lattice, const auto& latent) {
    encode_impl(lattice, latent, ks, x, m, factor, H, M);
  });
}

template <class T>
void lrsuq_decode(const LrsuqParams& p, const KeyStream& ks, const std::uint32_t* H,
                  const std::int64_t* M, std::size_t m, T* y) {
  dispatch(p, [&](const auto& lattice, const auto& latent) {
    decode_impl(lattice, latent, ks, H, M, m, y);
  });
}

void latent_radii(const LrsuqParams& p, const KeyStream& ks, std::uint64_t first,
                  std::size_t count, double* out) {
  dispatch(p, [&](const auto&, const auto& latent) {
    const std::size_t W = static_cast<std::size_t>(latent.words());
    std::vector<std::uint64_t> words(count * W);
    ks.words(0, first * W, count * W, words.data());
    for (std::size_t c = 0; c < count; ++c) out[c] = latent.radius(&words[c * W]);
  });
}

template double sum_of_squares<float>(const float*, std::size_t);
template double sum_of_squares<double>(const double*, std::size_t);
template void lrsuq_encode<float>(const LrsuqParams&, const KeyStream&, const float*,
                                  std::size_t, double, std::uint32_t*, std::int64_t*);
template void lrsuq_encode<double>(const LrsuqParams&, const KeyStream&, const double*,
                                   std::size_t, double, std::uint32_t*, std::int64_t*);
template void lrsuq_decode<float>(const LrsuqParams&, const KeyStream&, const std::uint32_t*,
                                  const std::int64_t*, std::size_t, float*);
template void lrsuq_decode<double>(const LrsuqParams&, const KeyStream&, const std::uint32_t*,
                                   const std::int64_t*, std::size_t, double*);

}  // namespace cepam
