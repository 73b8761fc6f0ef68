#include "lrsuq/quantizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "common/errors.hpp"
#include "common/scratch.hpp"

namespace cepam {
namespace {

constexpr std::size_t kChunk = subvector::kChunk;  // sub-vectors per keystream batch
constexpr std::size_t kVoronoiChunk = 1024;  // the same for the encoder's A2, D4, E8

// Whether the tables allow the latent on the lattice type: the lattice
// tests the mechanism's norm, and a fixed dimension is within the
// mechanism's largest (check_combination's rule on the rows, at compile
// time).  Only these pairs are instantiated.
template <class Lattice, class Latent>
constexpr bool combination_allowed() {
  const LatticeInfo& l = lattice_row<Lattice>();
  const MechanismInfo& m = mechanism_row<Latent>();
  return lattice_takes(l, m) && l.dim <= m.max_dim;
}

// Calls fn(lattice, latent) with the concrete types for p (Z^1 and Z^2
// with their dimension fixed at compile time; a root lattice with the
// latents the tables allow on it: on A2, D4 and E8 the Gaussian's).
template <class Fn>
void dispatch(const LrsuqParams& p, Fn&& fn) {
  const auto on = [&](const auto& lattice) {
    with_latent(p.mechanism, p.n, p.scale, [&](const auto& latent) {
      using Lattice = std::decay_t<decltype(lattice)>;
      using Latent = std::decay_t<decltype(latent)>;
      if constexpr (combination_allowed<Lattice, Latent>()) {
        fn(lattice, latent);
      } else {  // (LrsuqParams checks the combination when it is built)
        check_combination(p.mechanism, p.lattice, p.n);
      }
    });
  };
  if (with_root_lattice(p.lattice, on)) return;
  switch (p.n) {
    case 1: on(BasicLatticeZn<1>{1}); break;
    case 2: on(BasicLatticeZn<2>{2}); break;
    default: on(LatticeZn{p.n}); break;
  }
}

// Calls fn(lattice) with the concrete lattice type of (id, n), for the
// lattice-only entry points (tests); check_lattice validates first.
template <class Fn>
void dispatch_lattice(LatticeId id, int n, Fn&& fn) {
  check_lattice(id, n);
  with_lattice(id, n, fn);
}

// Largest |x / beta| the encoder accepts: the lattice's row
// (lattice/registry.hpp).
template <class Lattice>
constexpr double scaled_input_limit(const Lattice&) {
  return lattice_row<Lattice>().max_scaled_input;
}

// The acceptance test of one sub-vector from its per-element terms (see
// Lattice::trial_batch): the squared l2 norm, or the l1 norm, of y - x,
// summed in coordinate order, against the radius r.
inline bool accepted(Norm norm, const double* dev, std::size_t n, double r) {
  double s = 0.0;
  for (std::size_t k = 0; k < n; ++k) s += dev[k];
  return norm == Norm::L2 ? s <= r * r : s <= r;
}


// beta[c] = r[c] / rho for c < count.  Where rho is a power of two (the
// packing radius of Z^n is 1/2) this is r[c] (1 / rho), the same value for
// every r (scaling by a power of two rounds as the division does), without
// a division: the compiler's own rewrite of x / 2.
void scale_radii(const double* r, double rho, std::size_t count, double* beta) {
  int e;
  const double inv = 1.0 / rho;
  if (std::frexp(rho, &e) == 0.5 && std::isfinite(inv) && inv * rho == 1.0) {
    for (std::size_t c = 0; c < count; ++c) beta[c] = r[c] * inv;
  } else {
    for (std::size_t c = 0; c < count; ++c) beta[c] = r[c] / rho;
  }
}

// Dither words of trial trial_of(i) for the sub-vectors j = j0 + subs[i],
// i < count: words [j n, j n + n) of stream trial_of(i), which lie in one or
// two blocks.  All those blocks are computed in SIMD batches
// (KeyStream::gather); words(i) points to sub-vector subs[i]'s n words.
class TrialWords {
 public:
  TrialWords() = default;
  explicit TrialWords(std::size_t max_subs) { reserve(max_subs); }
  // Room for max_subs sub-vectors at a time.
  void reserve(std::size_t max_subs) {
    stream_.reserve(2 * max_subs);
    index_.reserve(2 * max_subs);
    blocks_.reserve(16 * max_subs);
    offset_.reserve(max_subs);
  }

  template <class TrialOf>
  void fetch(const KeyStream& ks, TrialOf&& trial_of, std::size_t n, std::size_t j0,
             const std::size_t* subs, std::size_t count) {
    std::size_t requests = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t first = static_cast<std::uint64_t>(j0 + subs[i]) * n;
      const std::uint64_t last = first + n - 1;
      const std::uint32_t trial = trial_of(i);
      offset_[i] = 8 * requests + static_cast<std::size_t>(first % 8);
      for (std::uint64_t b = first / 8; b <= last / 8; ++b) {
        stream_[requests] = trial;
        index_[requests] = b;
        ++requests;
      }
    }
    ks.gather(requests, stream_.data(), index_.data(), blocks_.data());
  }
  const std::uint64_t* words(std::size_t i) const { return &blocks_[offset_[i]]; }
  // The words of the count fetched sub-vectors, those of sub-vector i at
  // i n: the blocks themselves when each sub-vector's words are one whole
  // block (n = 8), else copied into scratch (count n words).
  const std::uint64_t* packed(std::size_t n, std::size_t count, std::uint64_t* scratch) const {
    if (n == 8) return blocks_.data();  // one block a sub-vector: offset_[i] = 8 i
    for (std::size_t i = 0; i < count; ++i) std::copy_n(words(i), n, scratch + i * n);
    return scratch;
  }

 private:
  Scratch<std::uint32_t> stream_{0};
  Scratch<std::uint64_t> index_{0};
  Scratch<std::uint64_t> blocks_{0};
  Scratch<std::size_t> offset_{0};
};

// One trial, number `trial`, of the Voronoi lattice's sub-vectors c =
// idx[i] (c = i where idx is null), i < count, of a chunk (t, xs: n
// elements per sub-vector; beta, radius: one value each; the dither words of
// sub-vector idx[i] at w + i n): as kernels::voronoi_trials, whose SIMD
// kernels take the sub-vectors they can and subvector::voronoi_trial the
// rest.  Accepted ones get H[c] = trial, q[c n ..] and (unless V is null)
// V[c n ..] (the kernels may write the rejected ones' too, which the trial that
// accepts them writes again); the rejected ones' c go to rej in order (rej
// may be idx), and their number is returned.
template <class Lattice>
std::size_t voronoi_round(const Lattice& lattice, std::uint32_t trial, const std::uint64_t* w,
                          const std::size_t* idx, std::size_t count, const double* t,
                          const double* xs, const double* beta, const double* radius,
                          std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej) {
  constexpr std::size_t n = static_cast<std::size_t>(Lattice::kDim);
  std::size_t nrej = 0;
  const std::size_t done = kernels::voronoi_trials(Lattice::id, trial, w, idx, count, t, xs, beta,
                                                   radius, H, q, V, rej, &nrej);
  for (std::size_t i = done; i < count; ++i) {
    const std::size_t c = idx != nullptr ? idx[i] : i;
    double v[n], dev[n];
    std::int64_t qc[n];
    subvector::voronoi_trial(lattice, t + c * n, xs + c * n, beta[c], w + i * n, v, qc, dev);
    if (!accepted(Norm::L2, dev, n, radius[c])) {
      rej[nrej++] = c;
      continue;
    }
    H[c] = trial;
    std::copy_n(qc, n, q + c * n);
    if (V != nullptr) std::copy_n(v, n, V + c * n);
  }
  return nrej;
}

}  // namespace

// encode_impl's working arrays (sized by reserve for a chunk of `chunk`
// sub-vectors of n elements, W latent words each).
struct LrsuqEncodeScratch::Buffers {
  Scratch<std::uint64_t> latent_buf{0}, dither_buf{0};
  Scratch<double> radius{0}, beta{0}, inv_beta{0};
  // Per element (e = c n + k): beta and 1 / beta of its sub-vector, x, x / beta,
  // and its term of the acceptance test.
  Scratch<double> beta_e{0}, inv_beta_e{0}, xs{0}, t{0}, dev{0};
  // The sub-vectors rejected so far (chunk indices), with compacted copies
  // of their elements and radii, dither words and lattice points.
  Scratch<std::size_t> rejected{0};
  Scratch<double> rt{0}, rxs{0}, rbeta{0}, rradius{0};
  Scratch<std::uint64_t> rwords{0};
  // The rejected sub-vectors' dithers at the current trial, when the side
  // information is wanted.
  Scratch<double> rdither{0};
  Scratch<std::int64_t> rq{0};
  TrialWords retry;

  // latent: the latent's buffer_words(chunk); zn: chunk n for Z^n (whose
  // trial loop uses the arrays of that size), 0 for the Voronoi lattices;
  // side: the side information is wanted.
  void reserve(std::size_t chunk, std::size_t n, std::size_t latent, std::size_t zn, bool side) {
    latent_buf.reserve(latent);
    dither_buf.reserve(chunk * n);
    for (Scratch<double>* a : {&radius, &beta, &inv_beta}) a->reserve(chunk);
    for (Scratch<double>* a : {&inv_beta_e, &xs, &t}) a->reserve(chunk * n);
    for (Scratch<double>* a : {&beta_e, &dev, &rt, &rxs, &rbeta}) a->reserve(zn);
    rradius.reserve(zn != 0 ? chunk : 0);
    rejected.reserve(chunk);
    rwords.reserve(chunk * n);
    rdither.reserve(side ? zn : 0);
    rq.reserve(zn);
    retry.reserve(chunk);
  }
};

LrsuqEncodeScratch::LrsuqEncodeScratch() : buffers_(std::make_unique<Buffers>()) {}
LrsuqEncodeScratch::~LrsuqEncodeScratch() = default;
LrsuqEncodeScratch::LrsuqEncodeScratch(LrsuqEncodeScratch&&) noexcept = default;
LrsuqEncodeScratch& LrsuqEncodeScratch::operator=(LrsuqEncodeScratch&&) noexcept = default;

namespace {

// encode_impl's arguments: sub-vectors [first, last) of x[0..m) * factor
// (zero padding after x[m - 1]), their outputs relative to first (beta and
// V, the side information as side_info_impl computes it, unless null).
template <class T>
struct EncodeArgs {
  const KeyStream& ks;
  const T* x;
  std::size_t m;
  double factor;
  std::size_t first, last;
  std::uint32_t* H;
  std::int64_t* M;
  double* beta;
  double* V;
};

// One chunk of sub-vectors [j0, j0 + count) for its trials: the first `ok`
// of them are in range (count if all), and its outputs (V unless null).
// The chunk's scaled inputs, radii, scales and trial-1 dither words are in
// the scratch buffers.
struct EncodeChunk {
  std::size_t j0, count, ok;
  std::uint32_t* H;
  std::int64_t* M;
  double* V;
  const double* beta_elem;  // beta per element (for n = 1, per sub-vector)
};

// The chunk's keystream (latent words, trial 1's dither words), radii and
// scales, and its scaled inputs t = x factor / beta; returns the number of
// sub-vectors before the first whose input is out of range (|t| >= limit or
// not finite), count if none.
template <class T, class Latent>
std::size_t prepare_chunk(const Latent& latent, const EncodeArgs<T>& a, std::size_t un,
                          double rho, double limit, bool zn, std::size_t j0, std::size_t count,
                          LrsuqEncodeScratch::Buffers& buf, const double** beta_elem) {
  const std::size_t e0 = j0 * un;      // first element of the chunk
  const std::size_t ne = count * un;   // elements, padding included
  latent.radii_at(a.ks, j0, count, buf.latent_buf.data(), buf.radius.data());
  a.ks.words(1, e0, ne, buf.dither_buf.data());
  scale_radii(buf.radius.data(), rho, count, buf.beta.data());
  kernels::reciprocals(buf.beta.data(), count, buf.inv_beta.data());
  // Per element (for n = 1, the per-sub-vector arrays themselves).
  *beta_elem = buf.beta.data();
  const double* inv_beta_elem = buf.inv_beta.data();
  if (un > 1) {
    for (std::size_t c = 0; c < count; ++c) {
      for (std::size_t k = 0; k < un; ++k) {
        if (zn) buf.beta_e[c * un + k] = buf.beta[c];
        buf.inv_beta_e[c * un + k] = buf.inv_beta[c];
      }
    }
    *beta_elem = buf.beta_e.data();
    inv_beta_elem = buf.inv_beta_e.data();
  }
  // Scaled inputs (zero padding after x[m - 1]).
  const std::size_t real = (a.m - e0 < ne) ? a.m - e0 : ne;
  std::size_t bad = kernels::scale_inputs(a.x + e0, a.factor, inv_beta_elem, limit, real,
                                          buf.xs.data(), buf.t.data());
  if (bad == real) {
    bad = ne;  // none so far
    for (std::size_t e = real; e < ne; ++e) {
      buf.xs[e] = 0.0;
      buf.t[e] = buf.xs[e] * inv_beta_elem[e];
      if (!(std::fabs(buf.t[e]) < limit)) {
        bad = e;
        break;
      }
    }
  }
  return bad / un;
}

// The trials of a chunk on a Voronoi lattice (A2, D4, E8): trial 1 of all
// its sub-vectors in range, then trials 2, 3, ... of the rejected ones
// (their dither blocks gathered), indexed in place.
template <class Lattice>
void voronoi_trials_chunk(const Lattice& lattice, const KeyStream& ks, const EncodeChunk& c,
                          double limit, LrsuqEncodeScratch::Buffers& buf) {
  constexpr std::size_t un = static_cast<std::size_t>(Lattice::kDim);
  std::size_t nrej = voronoi_round(lattice, 1, buf.dither_buf.data(), nullptr, c.ok, buf.t.data(),
                                   buf.xs.data(), buf.beta.data(), buf.radius.data(), c.H, c.M,
                                   c.V, buf.rejected.data());
  for (std::uint32_t trial = 1; nrej > 0;) {
    if (trial == kTrialCap) throw_subvector_error(c.j0 + buf.rejected[0], subvector::kTrialCap, limit);
    ++trial;
    buf.retry.fetch(ks, [trial](std::size_t) { return trial; }, un, c.j0, buf.rejected.data(),
                    nrej);
    nrej = voronoi_round(lattice, trial, buf.retry.packed(un, nrej, buf.rwords.data()),
                         buf.rejected.data(), nrej, buf.t.data(), buf.xs.data(), buf.beta.data(),
                         buf.radius.data(), c.H, c.M, c.V, buf.rejected.data());
  }
}

// The trials of a chunk on Z^n: trial 1 of all its sub-vectors in range in
// one batch over their elements, then trials 2, 3, ... of the rejected
// ones, in order, in batches over compacted copies of their elements
// (index i: sub-vector rejected[i]).
template <class Lattice>
void zn_trials_chunk(const Lattice& lattice, const KeyStream& ks, const EncodeChunk& c,
                     Norm norm, double limit, LrsuqEncodeScratch::Buffers& buf) {
  const std::size_t un = static_cast<std::size_t>(lattice.dim());
  const bool every_trial_accepted = lattice.cell_is_ball();
  lattice.trial_batch(buf.t.data(), buf.xs.data(), c.beta_elem, buf.dither_buf.data(), c.ok * un,
                      norm, c.M, every_trial_accepted ? nullptr : buf.dev.data(), c.V);
  std::fill_n(c.H, c.ok, 1u);
  if (every_trial_accepted) return;
  std::size_t nrej = 0;
  for (std::size_t s = 0; s < c.ok; ++s) {
    buf.rejected[nrej] = s;
    nrej += accepted(norm, &buf.dev[s * un], un, buf.radius[s]) ? 0 : 1;
  }
  for (std::size_t i = 0; i < nrej; ++i) {
    const std::size_t s = buf.rejected[i];
    std::copy_n(&buf.t[s * un], un, &buf.rt[i * un]);
    std::copy_n(&buf.xs[s * un], un, &buf.rxs[i * un]);
    std::copy_n(&c.beta_elem[s * un], un, &buf.rbeta[i * un]);
    buf.rradius[i] = buf.radius[s];
  }
  for (std::uint32_t trial = 1; nrej > 0;) {
    if (trial == kTrialCap) throw_subvector_error(c.j0 + buf.rejected[0], subvector::kTrialCap, limit);
    ++trial;
    buf.retry.fetch(ks, [trial](std::size_t) { return trial; }, un, c.j0, buf.rejected.data(),
                    nrej);
    for (std::size_t i = 0; i < nrej; ++i) std::copy_n(buf.retry.words(i), un, &buf.rwords[i * un]);
    lattice.trial_batch(buf.rt.data(), buf.rxs.data(), buf.rbeta.data(), buf.rwords.data(),
                        nrej * un, norm, buf.rq.data(), buf.dev.data(),
                        c.V != nullptr ? buf.rdither.data() : nullptr);
    std::size_t still = 0;
    for (std::size_t i = 0; i < nrej; ++i) {
      const std::size_t s = buf.rejected[i];
      if (accepted(norm, &buf.dev[i * un], un, buf.rradius[i])) {
        c.H[s] = trial;
        std::copy_n(&buf.rq[i * un], un, &c.M[s * un]);
        if (c.V != nullptr) std::copy_n(&buf.rdither[i * un], un, &c.V[s * un]);
        continue;
      }
      if (still != i) {
        buf.rejected[still] = s;
        std::copy_n(&buf.rt[i * un], un, &buf.rt[still * un]);
        std::copy_n(&buf.rxs[i * un], un, &buf.rxs[still * un]);
        std::copy_n(&buf.rbeta[i * un], un, &buf.rbeta[still * un]);
        buf.rradius[still] = buf.rradius[i];
      }
      ++still;
    }
    nrej = still;
  }
}

// Encodes sub-vectors [first, last) chunk by chunk: the keystream of trial
// 1 and of the latent variables of a whole chunk is generated in one go, the
// radii of the chunk are computed in one batch, every sub-vector does trial
// 1 in one batch over the chunk's elements, and the rejected ones go on to
// trials 2, 3, ... together (voronoi_trials_chunk, zn_trials_chunk).  The
// outputs, and which error is thrown first, are those of the plain loop
// "for each sub-vector, for each trial" (so they do not depend on first and
// last): a sub-vector out of range ends the encoding, after the sub-vectors
// before it (which may themselves fail first).
template <class T, class Lattice, class Latent>
void encode_impl(const Lattice& lattice, const Latent& latent, const EncodeArgs<T>& a,
                 LrsuqEncodeScratch* scratch) {
  const std::size_t un = static_cast<std::size_t>(lattice.dim());
  const Norm norm = latent.norm();
  const double rho = lattice.packing_radius(norm);
  const double limit = scaled_input_limit(lattice);
  // Sub-vectors per chunk: more for the Voronoi lattices, whose later trials
  // run in groups of 8 sub-vectors and of 16 keystream blocks (fewer of them
  // part empty); their trials need none of the Z^n loop's arrays (size zn).
  constexpr bool voronoi = Lattice::id != LatticeId::Z;
  static_assert(!voronoi || mechanism_row<Latent>().norm == Norm::L2,
                "the Voronoi trials (voronoi_round) test l2 balls only");
  constexpr std::size_t chunk = voronoi ? kVoronoiChunk : kChunk;
  // The buffers hold the largest chunk of this range (rounded up to 64
  // sub-vectors), not a whole chunk: a small update allocates (and faults
  // in) little.
  const std::size_t cap = std::min(chunk, (a.last - a.first + 63) / 64 * 64);
  const std::size_t zn = voronoi ? 0 : cap * un;
  std::unique_ptr<LrsuqEncodeScratch> own;  // when the caller gives none
  if (scratch == nullptr) scratch = (own = std::make_unique<LrsuqEncodeScratch>()).get();
  LrsuqEncodeScratch::Buffers& buf = scratch->buffers();
  buf.reserve(cap, un, latent.buffer_words(cap), zn, a.V != nullptr);

  for (std::size_t j0 = a.first; j0 < a.last; j0 += chunk) {
    EncodeChunk c{};
    c.j0 = j0;
    c.count = (a.last - j0 < chunk) ? a.last - j0 : chunk;
    c.ok = prepare_chunk(latent, a, un, rho, limit, !voronoi, j0, c.count, buf, &c.beta_elem);
    c.H = a.H + (j0 - a.first);
    c.M = a.M + (j0 - a.first) * un;
    c.V = a.V != nullptr ? a.V + (j0 - a.first) * un : nullptr;
    if (a.beta != nullptr) std::copy_n(buf.beta.data(), c.ok, a.beta + (j0 - a.first));
    if constexpr (voronoi) {
      voronoi_trials_chunk(lattice, a.ks, c, limit, buf);
    } else {
      zn_trials_chunk(lattice, a.ks, c, norm, limit, buf);
    }
    if (c.ok < c.count) throw_subvector_error(j0 + c.ok, subvector::kInputTooLarge, limit);
  }
}

// The decoder's view of a chunk of sub-vectors [j0, j0 + count): checks
// their trial indices, then computes their scales beta = r(U) / rho and the
// dither words of trial H_j (trial 1 for a whole chunk at once; for the
// sub-vectors with H_j != 1 the one or two blocks holding the dither of trial
// H_j, gathered), so that the work per sub-vector is constant.
template <class Lattice, class Latent>
class ChunkSideInfo {
 public:
  ChunkSideInfo(const Lattice& lattice, const Latent& latent, const KeyStream& ks)
      : lattice_(lattice), latent_(latent), ks_(ks),
        un_(static_cast<std::size_t>(lattice.dim())),
        rho_(lattice.packing_radius(latent.norm())),
        latent_buf_(latent.buffer_words(kChunk)), dither_(kChunk * un_), beta_(kChunk),
        later_(kChunk),
        retry_(kChunk) {}

  // H[c] is the trial index of sub-vector j0 + c, c < count <= kChunk.
  // The betas go to beta_out[0 .. count) where given (no copy), else to
  // beta().
  void fetch(std::size_t j0, std::size_t count, const std::uint32_t* H,
             double* beta_out = nullptr) {
    // (Bitwise, so that the compiler vectorises it: H - 1 must be below
    // 2^16 = kTrialCap, and H must be 1 if the cell is the ball.)
    static_assert(kTrialCap == 1u << 16, "scan bound");
    const std::uint32_t ball = lattice_.cell_is_ball() ? ~0u : 0u;
    std::uint32_t flags_h = 0;
    for (std::size_t c = 0; c < count; ++c) flags_h |= ((H[c] - 1u) >> 16) | ((H[c] ^ 1u) & ball);
    if (flags_h != 0) {
      for (std::size_t c = 0; c < count; ++c) {
        const std::uint32_t h = H[c];
        if (h < 1 || h > kTrialCap || (h != 1 && lattice_.cell_is_ball())) {
          throw_subvector_error(j0 + c, subvector::kBadTrial, 0.0, h);
        }
      }
    }
    std::size_t nlater = 0;  // sub-vectors with H != 1
    if (!lattice_.cell_is_ball()) {
      for (std::size_t c = 0; c < count; ++c) {
        later_[nlater] = c;
        nlater += H[c] != 1 ? 1 : 0;
      }
    }
    double* beta = beta_out != nullptr ? beta_out : beta_.data();
    latent_.radii_at(ks_, j0, count, latent_buf_.data(), beta);
    ks_.words(1, j0 * un_, count * un_, dither_.data());
    scale_radii(beta, rho_, count, beta);
    retry_.fetch(ks_, [&](std::size_t i) { return H[later_[i]]; }, un_, j0, later_.data(), nlater);
    for (std::size_t i = 0; i < nlater; ++i) {
      const std::uint64_t* w = retry_.words(i);
      std::copy(w, w + un_, &dither_[later_[i] * un_]);
    }
  }
  const double* beta() const { return beta_.data(); }
  const std::uint64_t* dither_words() const { return dither_.data(); }

 private:
  const Lattice& lattice_;
  const Latent& latent_;
  const KeyStream& ks_;
  std::size_t un_;
  double rho_;
  Scratch<std::uint64_t> latent_buf_, dither_;
  Scratch<double> beta_;
  Scratch<std::size_t> later_;
  TrialWords retry_;
};

// Throws FormatError unless |Mc[e]| <= kMaxAbsM for the elements e < count
// of the sub-vectors from j0 on.
void check_coordinates(const std::int64_t* Mc, std::size_t count, std::size_t j0,
                       std::size_t un) {
  // M + 2^53 must be at most 2^54: flagged when >= 2^54 (which also flags
  // the valid M = 2^53, for the exact check below).
  static_assert(kMaxAbsM == std::int64_t{1} << 53, "scan bound");
  std::uint64_t flags_m = 0;
  for (std::size_t e = 0; e < count; ++e)
    flags_m |= (static_cast<std::uint64_t>(Mc[e]) + (std::uint64_t{1} << 53)) >> 54;
  if (flags_m == 0) return;
  for (std::size_t e = 0; e < count; ++e) {
    if (Mc[e] > kMaxAbsM || Mc[e] < -kMaxAbsM) {
      throw_subvector_error(j0 + e / un, subvector::kBadCoordinate);
    }
  }
}

// Throws FormatError unless out[0..count) (the elements from e0 on) are
// finite: beta (G M + V) overflows T only for a noise scale or coordinates
// no honest encoder of finite T values produces (found by fuzz/).  The scan
// runs on the chunk just written, while it is in cache.
template <class T>
void check_decoded(const T* out, std::size_t count, std::size_t e0, std::size_t un) {
  // Inf and NaN are the values whose exponent bits are all ones: adding
  // the exponent's lowest bit to them (the rest masked off) carries into
  // the sign bit, as for no other value.  An integer loop, which the
  // compiler vectorises.
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  static_assert(sizeof(T) == sizeof(Bits) && std::numeric_limits<T>::is_iec559, "IEEE binary32 or 64");
  constexpr int kTop = 8 * sizeof(Bits) - 1;
  constexpr int kMantissa = std::numeric_limits<T>::digits - 1;
  constexpr Bits kExponent = (~Bits{0} >> 1) & ~((Bits{1} << kMantissa) - 1);
  constexpr Bits kLowest = Bits{1} << kMantissa;
  Bits flags = 0;
  for (std::size_t e = 0; e < count; ++e) {
    Bits b;
    std::memcpy(&b, out + e, sizeof b);
    flags |= ((b & kExponent) + kLowest) >> kTop;
  }
  if (flags == 0) return;
  for (std::size_t e = 0; e < count; ++e) {
    if (!std::isfinite(out[e])) {
      throw_nonfinite_output((e0 + e) / un, dtype_name<T>());
    }
  }
}

// The decoder's output for `count` <= kChunk sub-vectors from j0 on, from
// their side information (beta[c], V[c n + k]) and checked coordinates
// Mc[c n + k]: out[j n + k] = beta_j (G M_j + V_j)_k for j n + k < m
// (padding dropped).  beta_e: scratch for kChunk n values.
template <class T, class Lattice>
void reconstruct_chunk(const Lattice& lattice, const double* beta, const double* V,
                       const std::int64_t* Mc, std::size_t j0, std::size_t count, std::size_t m,
                       T* out, double* beta_e) {
  const std::size_t un = static_cast<std::size_t>(lattice.dim());
  const std::size_t e0 = j0 * un;
  // beta per element (for n = 1 that is beta itself).
  const double* beta_elem = beta;
  if (un > 1) {
    for (std::size_t c = 0; c < count; ++c)
      for (std::size_t k = 0; k < un; ++k) beta_e[c * un + k] = beta[c];
    beta_elem = beta_e;
  }
  const std::size_t real = (m - e0 < count * un) ? m - e0 : count * un;
  lattice.reconstruct_batch(Mc, V, beta_elem, real, out + e0);
  check_decoded(out + e0, real, e0, un);
}

// Decodes sub-vectors [first, last): H[j - first], M[(j - first) n + k],
// into out[j n + k] for j n + k < m (padding dropped).
template <class T, class Lattice, class Latent>
void decode_impl(const Lattice& lattice, const Latent& latent, const KeyStream& ks,
                 const std::uint32_t* H, const std::int64_t* M, std::size_t first,
                 std::size_t last, std::size_t m, T* out) {
  const std::size_t un = static_cast<std::size_t>(lattice.dim());
  ChunkSideInfo<Lattice, Latent> side(lattice, latent, ks);
  Scratch<double> V(kChunk * un), beta_e(kChunk * un);
  for (std::size_t j0 = first; j0 < last; j0 += kChunk) {
    const std::size_t count = (last - j0 < kChunk) ? last - j0 : kChunk;
    const std::int64_t* Mc = M + (j0 - first) * un;
    side.fetch(j0, count, H + (j0 - first));  // checks H first
    check_coordinates(Mc, count * un, j0, un);
    lattice.dither_batch(side.dither_words(), count, V.data());
    reconstruct_chunk(lattice, side.beta(), V.data(), Mc, j0, count, m, out, beta_e.data());
  }
}

// lrsuq_reconstruct: decode_impl with the side information given.
template <class T, class Lattice>
void reconstruct_impl(const Lattice& lattice, const double* beta, const double* V,
                      const std::int64_t* M, std::size_t first, std::size_t last, std::size_t m,
                      T* out) {
  const std::size_t un = static_cast<std::size_t>(lattice.dim());
  Scratch<double> beta_e(kChunk * un);
  for (std::size_t j0 = first; j0 < last; j0 += kChunk) {
    const std::size_t count = (last - j0 < kChunk) ? last - j0 : kChunk;
    const std::size_t c0 = j0 - first;
    check_coordinates(M + c0 * un, count * un, j0, un);
    reconstruct_chunk(lattice, beta + c0, V + c0 * un, M + c0 * un, j0, count, m, out,
                      beta_e.data());
  }
}

// beta_j and V_{j, H_j} of sub-vectors [first, last), relative to first.
template <class Lattice, class Latent>
void side_info_impl(const Lattice& lattice, const Latent& latent, const KeyStream& ks,
                    const std::uint32_t* H, std::size_t first, std::size_t last, double* beta,
                    double* V) {
  const std::size_t un = static_cast<std::size_t>(lattice.dim());
  ChunkSideInfo<Lattice, Latent> side(lattice, latent, ks);
  for (std::size_t j0 = first; j0 < last; j0 += kChunk) {
    const std::size_t count = (last - j0 < kChunk) ? last - j0 : kChunk;
    const std::size_t c0 = j0 - first;
    side.fetch(j0, count, H + c0, beta + c0);
    lattice.dither_batch(side.dither_words(), count, V + c0 * un);
  }
}

}  // namespace

void throw_subvector_error(std::size_t j, int status, double limit, std::uint32_t h) {
  const std::string where = "sub-vector " + std::to_string(j);
  switch (status) {
    case subvector::kTrialCap:
      throw EncodingError(where + ": no trial accepted within the cap of " +
                          std::to_string(kTrialCap) + " trials");
    case subvector::kInputTooLarge:
      throw EncodingError(where +
                          ": the input is too large relative to the noise scale drawn for it "
                          "(|x| / beta >= 2^" + std::to_string(std::ilogb(limit)) +
                          "); clip the update or use a larger noise scale");
    case subvector::kBadTrial:
      throw FormatError(where + ": trial index " + std::to_string(h) + " out of range");
    case subvector::kBadCoordinate:
      throw FormatError(where + ": lattice coordinate out of range");
    case subvector::kNonFiniteOutput:
      throw_nonfinite_output(j, "the output type");
    default:
      throw EncodingError(where + ": unknown failure " + std::to_string(status));
  }
}

void throw_nonfinite_output(std::size_t j, const char* dtype) {
  throw DecodingError("sub-vector " + std::to_string(j) + ": decoded values overflow " + dtype +
                      " (the noise scale is too large for it)");
}

subvector::Config lrsuq_subvector_config(const LrsuqParams& p) {
  subvector::Config c{};
  dispatch(p, [&](const auto& lattice, const auto& latent) {
    c.mechanism = static_cast<int>(p.mechanism);
    c.lattice = static_cast<int>(p.lattice);
    c.n = p.n;
    c.scale = p.scale;
    c.rho = lattice.packing_radius(latent.norm());
    c.limit = scaled_input_limit(lattice);
    c.words = latent.words();
    c.l2 = latent.norm() == Norm::L2;
    c.cell_is_ball = lattice.cell_is_ball();
    c.trial_cap = kTrialCap;
    c.max_abs_m = kMaxAbsM;
  });
  return c;
}

template <class T>
void lrsuq_encode_subvectors(const LrsuqParams& p, const ChaChaKey& key, const T* x,
                             std::size_t m, double factor, std::size_t first, std::size_t last,
                             std::uint32_t* H, std::int64_t* M, double* beta, double* V) {
  const subvector::Config c = lrsuq_subvector_config(p);
  const std::size_t un = static_cast<std::size_t>(p.n);
  for (std::size_t j = first; j < last; ++j) {
    const std::size_t i = j - first;
    const subvector::Status s =
        subvector::encode_one(c, key.data(), x, m, factor, j, H + i, M + i * un, beta + i, V + i * un);
    if (s != subvector::kOk) throw_subvector_error(j, s, c.limit);
  }
}

template <class T>
void lrsuq_encode_subvectors_at(const LrsuqParams& p, const ChaChaKey& key, const T* pieces,
                                const std::uint64_t* indices, std::size_t count, std::size_t m,
                                double factor, std::uint32_t* H, std::int64_t* M, double* beta,
                                double* V) {
  const subvector::Config c = lrsuq_subvector_config(p);
  const std::size_t un = static_cast<std::size_t>(p.n);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t j = indices[i];
    if (j >= (m + un - 1) / un) throw InvalidArgument("sub-vector index out of range");
    const std::uint64_t valid = std::min<std::uint64_t>(un, m - j * un);
    const subvector::Status s = subvector::encode_at(c, key.data(), pieces + i * un, valid, factor,
                                                     j, H + i, M + i * un, beta + i, V + i * un);
    if (s != subvector::kOk) throw_subvector_error(static_cast<std::size_t>(j), s, c.limit);
  }
}

template <class T>
void lrsuq_decode_subvectors(const LrsuqParams& p, const ChaChaKey& key, const std::uint32_t* H,
                             const std::int64_t* M, std::size_t first, std::size_t last,
                             std::size_t m, T* y) {
  const subvector::Config c = lrsuq_subvector_config(p);
  const std::size_t un = static_cast<std::size_t>(p.n);
  for (std::size_t j = first; j < last; ++j) {
    const std::size_t i = j - first;
    const subvector::Status s = subvector::decode_one(c, key.data(), H[i], M + i * un, m, j, y);
    if (s == subvector::kNonFiniteOutput) throw_nonfinite_output(j, dtype_name<T>());
    if (s != subvector::kOk) throw_subvector_error(j, s, c.limit, H[i]);
  }
}

void check_lattice(LatticeId id, int n) {
  const LatticeInfo& l = lattice_info(id);  // throws for an unknown id
  if (l.dim == 0) {
    if (n < 1 || n > kMaxLatticeDim)
      throw InvalidArgument(std::string("dimension n (dim) must be between 1 and ") +
                            std::to_string(kMaxLatticeDim) + " for the lattice " + l.name +
                            "^n, got " + std::to_string(n));
  } else if (n != l.dim) {
    throw InvalidArgument(std::string("the lattice ") + l.name + " has dimension " +
                          std::to_string(l.dim) + ": n (dim) must be " + std::to_string(l.dim) +
                          ", got " + std::to_string(n));
  }
}

const MechanismInfo& mechanism_info(MechanismId id) {
  for (const MechanismInfo& m : kMechanisms)
    if (m.id == id) return m;
  throw InvalidArgument("unknown mechanism id " + std::to_string(static_cast<int>(id)));
}

CellWidths typical_cell_widths(const LrsuqParams& p) {
  const MechanismInfo& mech = mechanism_info(p.mechanism);
  return {mech.cell_width_lo * p.scale, mech.cell_width_hi * p.scale};
}

void check_combination(MechanismId mechanism, LatticeId lattice, int n) {
  check_lattice(lattice, n);
  const LatticeInfo& l = lattice_info(lattice);
  const MechanismInfo& m = mechanism_info(mechanism);
  if (!lattice_takes(l, m)) {
    std::string allowed;
    for (const MechanismInfo& other : kMechanisms) {
      if (!lattice_takes(l, other)) continue;
      allowed += (allowed.empty() ? "" : ", ");
      allowed += other.name;
    }
    throw InvalidArgument(std::string("the lattice ") + l.name + " tests l2 balls only: it takes the " +
                          allowed + " mechanism only, not " + m.name + " (which needs Z)");
  }
  if (n > m.max_dim) {
    throw InvalidArgument(std::string(m.name) + " takes dimension n (dim) at most " +
                          std::to_string(m.max_dim) + " (" + m.max_dim_reason + "), got " +
                          std::to_string(n));
  }
}

LrsuqParams::LrsuqParams(MechanismId mechanism_, double scale_, LatticeId lattice_, int n_)
    : mechanism(mechanism_), scale(scale_), lattice(lattice_), n(n_) {
  if (!(scale > 0.0) || !std::isfinite(scale)) {
    throw InvalidArgument("noise scale must be a positive finite number");
  }
  check_combination(mechanism, lattice, n);
}

double acceptance_probability(const LrsuqParams& p) {
  if (p.lattice != LatticeId::Z) {
    double density = 0.0;
    dispatch_lattice(p.lattice, p.n, [&](const auto& l) { density = l.packing_density(); });
    return density;  // Gaussian: the l2 packing density
  }
  const LatticeZn lattice{p.n};
  if (lattice.cell_is_ball()) return 1.0;
  if (mechanism_info(p.mechanism).norm == Norm::L2) return lattice.packing_density();
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
void lrsuq_encode(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                  double factor, std::uint32_t* H, std::int64_t* M) {
  check_factor(factor);
  const std::size_t n = static_cast<std::size_t>(p.n);
  lrsuq_encode_range(p, ks, x, m, factor, 0, (m + n - 1) / n, H, M, nullptr, nullptr);
}

void check_factor(double factor) {
  if (!(factor >= 0.0) || !std::isfinite(factor)) {
    throw InvalidArgument("clipping factor must be finite and non-negative");
  }
}

template <class T>
void lrsuq_encode_range(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                        double factor, std::size_t first, std::size_t last, std::uint32_t* H,
                        std::int64_t* M, double* beta, double* V, LrsuqEncodeScratch* scratch) {
  check_factor(factor);
  dispatch(p, [&](const auto& lattice, const auto& latent) {
    encode_impl(lattice, latent, EncodeArgs<T>{ks, x, m, factor, first, last, H, M, beta, V},
                scratch);
  });
}

template <class T>
void lrsuq_decode(const LrsuqParams& p, const KeyStream& ks, const std::uint32_t* H,
                  const std::int64_t* M, std::size_t m, T* y) {
  lrsuq_decode_range(p, ks, H, M, 0, (m + static_cast<std::size_t>(p.n) - 1) /
                                          static_cast<std::size_t>(p.n), m, y);
}

template <class T>
void lrsuq_decode_range(const LrsuqParams& p, const KeyStream& ks, const std::uint32_t* H,
                        const std::int64_t* M, std::size_t first, std::size_t last,
                        std::size_t m, T* y) {
  dispatch(p, [&](const auto& lattice, const auto& latent) {
    decode_impl(lattice, latent, ks, H, M, first, last, m, y);
  });
}

template <class T>
void lrsuq_reconstruct(const LrsuqParams& p, const double* beta, const double* V,
                       const std::int64_t* M, std::size_t first, std::size_t last, std::size_t m,
                       T* y) {
  dispatch(p, [&](const auto& lattice, const auto&) {
    reconstruct_impl(lattice, beta, V, M, first, last, m, y);
  });
}

void lrsuq_side_info(const LrsuqParams& p, const KeyStream& ks, const std::uint32_t* H,
                     std::size_t first, std::size_t last, double* beta, double* V) {
  dispatch(p, [&](const auto& lattice, const auto& latent) {
    side_info_impl(lattice, latent, ks, H, first, last, beta, V);
  });
}

namespace {
// The lattice's basis and l2 packing radius.
template <class Lattice>
void set_basis(const Lattice& lattice, TriangularBasis& basis) {
  basis.b = lattice.basis();
  basis.rho = lattice.packing_radius(Norm::L2);
}
}  // namespace

TriangularBasis lattice_basis(const LrsuqParams& p) {
  TriangularBasis basis{p.n, {}};
  dispatch(p, [&](const auto& lattice, const auto&) { set_basis(lattice, basis); });
  return basis;
}

void lattice_closest_points(LatticeId id, int n, const double* t, std::size_t count,
                            std::int64_t* m) {
  dispatch_lattice(id, n, [&](const auto& l) {
    const std::size_t un = static_cast<std::size_t>(n);
    for (std::size_t c = 0; c < count; ++c) l.closest_point(t + c * un, m + c * un);
  });
}

void lattice_points(LatticeId id, int n, const std::int64_t* m, std::size_t count, double* p) {
  dispatch_lattice(id, n, [&](const auto& l) {
    const std::size_t un = static_cast<std::size_t>(n);
    for (std::size_t c = 0; c < count; ++c) l.to_point(m + c * un, p + c * un);
  });
}

void lattice_dithers(LatticeId id, int n, const std::uint64_t* w, std::size_t count, double* v) {
  // dither_batch: the SIMD kernels where there are (the same values).
  dispatch_lattice(id, n, [&](const auto& l) { l.dither_batch(w, count, v); });
}

TriangularBasis lattice_basis(LatticeId id, int n) {
  TriangularBasis basis{n, {}};
  dispatch_lattice(id, n, [&](const auto& l) { set_basis(l, basis); });
  return basis;
}

void latent_radii(const LrsuqParams& p, const KeyStream& ks, std::uint64_t first,
                  std::size_t count, double* out) {
  dispatch(p, [&](const auto&, const auto& latent) {
    Scratch<std::uint64_t> words(latent.buffer_words(count));
    latent.radii_at(ks, first, count, words.data(), out);
  });
}

template void lrsuq_encode_subvectors<float>(const LrsuqParams&, const ChaChaKey&, const float*,
                                             std::size_t, double, std::size_t, std::size_t,
                                             std::uint32_t*, std::int64_t*, double*, double*);
template void lrsuq_encode_subvectors<double>(const LrsuqParams&, const ChaChaKey&, const double*,
                                              std::size_t, double, std::size_t, std::size_t,
                                              std::uint32_t*, std::int64_t*, double*, double*);
template void lrsuq_encode_subvectors_at<float>(const LrsuqParams&, const ChaChaKey&,
                                                const float*, const std::uint64_t*, std::size_t,
                                                std::size_t, double, std::uint32_t*,
                                                std::int64_t*, double*, double*);
template void lrsuq_encode_subvectors_at<double>(const LrsuqParams&, const ChaChaKey&,
                                                 const double*, const std::uint64_t*, std::size_t,
                                                 std::size_t, double, std::uint32_t*,
                                                 std::int64_t*, double*, double*);
template void lrsuq_decode_subvectors<float>(const LrsuqParams&, const ChaChaKey&,
                                             const std::uint32_t*, const std::int64_t*,
                                             std::size_t, std::size_t, std::size_t, float*);
template void lrsuq_decode_subvectors<double>(const LrsuqParams&, const ChaChaKey&,
                                              const std::uint32_t*, const std::int64_t*,
                                              std::size_t, std::size_t, std::size_t, double*);
template void lrsuq_encode<float>(const LrsuqParams&, const KeyStream&, const float*,
                                  std::size_t, double, std::uint32_t*, std::int64_t*);
template void lrsuq_encode<double>(const LrsuqParams&, const KeyStream&, const double*,
                                   std::size_t, double, std::uint32_t*, std::int64_t*);
template void lrsuq_encode_range<float>(const LrsuqParams&, const KeyStream&, const float*,
                                        std::size_t, double, std::size_t, std::size_t,
                                        std::uint32_t*, std::int64_t*, double*, double*,
                                        LrsuqEncodeScratch*);
template void lrsuq_encode_range<double>(const LrsuqParams&, const KeyStream&, const double*,
                                         std::size_t, double, std::size_t, std::size_t,
                                         std::uint32_t*, std::int64_t*, double*, double*,
                                         LrsuqEncodeScratch*);
template void lrsuq_reconstruct<float>(const LrsuqParams&, const double*, const double*,
                                       const std::int64_t*, std::size_t, std::size_t,
                                       std::size_t, float*);
template void lrsuq_reconstruct<double>(const LrsuqParams&, const double*, const double*,
                                        const std::int64_t*, std::size_t, std::size_t,
                                        std::size_t, double*);
template void lrsuq_decode<float>(const LrsuqParams&, const KeyStream&, const std::uint32_t*,
                                  const std::int64_t*, std::size_t, float*);
template void lrsuq_decode_range<float>(const LrsuqParams&, const KeyStream&,
                                        const std::uint32_t*, const std::int64_t*, std::size_t,
                                        std::size_t, std::size_t, float*);
template void lrsuq_decode_range<double>(const LrsuqParams&, const KeyStream&,
                                         const std::uint32_t*, const std::int64_t*, std::size_t,
                                         std::size_t, std::size_t, double*);
template void lrsuq_decode<double>(const LrsuqParams&, const KeyStream&, const std::uint32_t*,
                                   const std::int64_t*, std::size_t, double*);

}  // namespace cepam
