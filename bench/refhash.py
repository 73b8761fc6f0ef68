"""Bit-exactness reference for the native core.

    python bench/refhash.py check             # against bench/ref_digests.json
    python bench/refhash.py record ref.json   # every hash, before a change
    python bench/refhash.py check  ref.json   # after: every hash must match

(CEPAM_SIMD=portable or avx2 in the environment checks the other code paths.)
bench/ref_digests.json holds per-group digests of the hashes recorded with
the original scalar core (commit 5f17d47); the sumsq group re-recorded at
payload format version 5 (the sum of squares by blocks and a fixed tree),
and the groups drawn from the LRSUQ streams (ks, mech, radius, badx) at
version 9 (ChaCha8 streams: recorded at the avx512 level, then checked
equal at the portable and avx2 levels).

Hashes (SHA-256) the outputs of every native entry point over many
configurations: LRSUQ encode/decode (Gaussian n = 1, 2, 3, 8; Laplace
n = 1, 2, 4; float32/float64; several m, keys, clip factors, inputs with
zeros and large values), body bytes, body decode (also of corrupted bodies:
the exception message is hashed), latent radii, keystream words at unaligned
offsets, det_log and det_cos2pi_squared.
"""
import hashlib
import json
import os
import sys

import numpy as np

import cepam._core as c
import cepam._core.testing as hooks


def digest(*parts):
    d = hashlib.sha256()
    for p in parts:
        if isinstance(p, np.ndarray):
            d.update(str(p.dtype).encode())
            d.update(np.ascontiguousarray(p).tobytes())
        elif isinstance(p, bytes):
            d.update(p)
        else:
            d.update(repr(p).encode())
    return d.hexdigest()


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001
        return ("err", type(e).__name__ + ": " + str(e))


def keys():
    return [bytes(32), bytes(range(32)), hashlib.sha256(b"cepam").digest()]


def inputs(m, dtype, sigma, rng):
    x = rng.normal(0, 10 * sigma, m)
    if m >= 7:
        x[::5] = 0.0
        x[1::11] = 50 * sigma
        x[2::13] = -50 * sigma
        x[3::17] = rng.normal(0, 1000 * sigma, len(x[3::17]))
    return x.astype(dtype)


def bits_to_bytes(bits):
    bits = bits + "0" * (-len(bits) % 8)
    return bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))


def hostile_cases():
    """(H bits, M bits, N, count, golomb, expg_k) as '0'/'1' strings."""
    one_m = "1"  # M = 0 with k = 0
    cases = []
    # Golomb prefixes too long / at the cap, for several parameters.
    for g in (1, 2, 3, 16, 65536):
        maxq = 65535 // g
        for q in (maxq - 1, maxq, maxq + 1, maxq + 40, 100000):
            tb = (g - 1).bit_length()
            for rem in ("0" * tb, "1" * tb):
                cases.append(("0" * q + "1" + rem, one_m, 1, 1, g, 0))
    # exp-Golomb: lengths around the 55-bit limit, values around 2^53.
    for k in (0, 1, 5, 30, 54):
        for zeros in range(max(0, 50 - k), 58 - k):
            for tail in ("0", "1", "01"):
                body = "0" * zeros + "1" + (tail * 64)[:zeros + k]
                cases.append(("1", body, 1, 1, 1, k))
            cases.append(("1", "0" * zeros, 1, 1, 1, k))  # truncated
    # Several values then garbage, and sections longer than needed.
    cases.append(("1" * 5, "1" * 5 + "0" * 70, 5, 5, 1, 0))
    cases.append(("1" * 5 + "0", "1" * 5, 5, 5, 1, 0))
    cases.append(("1" * 5, "1" * 5 + "1", 5, 5, 1, 0))
    cases.append(("1" * 4, "1" * 5, 5, 5, 1, 0))
    cases.append(("", "1" * 5, 5, 5, 0, 0))
    cases.append(("", "010" * 5, 5, 5, 0, 1))
    cases.append(("", "0000001" + "1" * 6, 1, 1, 0, 0))
    return cases


@np.errstate(over="ignore")
def run():
    out = {}
    rng = np.random.default_rng(12345)
    configs = [(1, n) for n in (1, 2, 3, 8)] + [(2, n) for n in (1, 2, 4)]
    for mech, n in configs:
        for dtype in (np.float32, np.float64):
            for m in (1, 7, 1000, 100003):
                for ki, key in enumerate(keys()):
                    if m == 100003 and ki == 2:
                        continue
                    for factor in (1.0, 0.37):
                        sigma = 1e-3 if ki != 1 else 0.05
                        x = inputs(m, dtype, sigma, rng)
                        tag = f"mech{mech}/n{n}/{np.dtype(dtype).name}/m{m}/k{ki}/f{factor}"
                        params = c.Params(mechanism=mech, scale=sigma, lattice=1, n=n)
                        res = outcome(lambda: hooks.encode_lattice(x, key=key, params=params,
                                                                   factor=factor))
                        if res[0] == "err":
                            out[tag + "/enc"] = digest(res[1])
                            continue
                        H, M = res[1]
                        out[tag + "/H"] = digest(H)
                        out[tag + "/M"] = digest(M)
                        for odt in ("float32", "float64"):
                            y = hooks.decode_lattice(H, M, m=m, key=key, params=params,
                                                     dtype=odt)
                            out[tag + "/y/" + odt] = digest(y)
                        p = c.acceptance_probability(params)
                        g = hooks.golomb_parameter(p)
                        kk = hooks.best_expg_order(M)
                        out[tag + "/k"] = digest(g, kk)
                        for k in sorted({kk, 0, 3, 20}):
                            body, hb, mb = hooks.body_encode(H, M, golomb=g, expg_k=k)
                            out[tag + f"/body{k}"] = digest(body, hb, mb)
                            H2, M2 = hooks.body_decode(body, N=len(H), count=len(M), golomb=g,
                                                   expg_k=k, h_bits=hb, m_bits=mb)
                            assert np.array_equal(H, H2) and np.array_equal(M, M2), tag
                        if m == 1000 and factor == 1.0:
                            # Corrupted bodies: outcome (values or error message).
                            body, hb, mb = hooks.body_encode(H, M, golomb=g, expg_k=kk)
                            crng = np.random.default_rng(m + n + mech + ki)
                            for t in range(40):
                                b = bytearray(body)
                                nh, nm = hb, mb
                                if t % 4 == 0 and len(b) > 0:
                                    b[crng.integers(len(b))] ^= 1 << crng.integers(8)
                                elif t % 4 == 1 and len(b) > 0:
                                    i = crng.integers(len(b))
                                    b[i] = crng.integers(256)
                                    b[(i + 1) % len(b)] = 0
                                elif t % 4 == 2:
                                    nm = max(0, mb - int(crng.integers(1, 9)))
                                    b = b[:(hb + 7) // 8 + (nm + 7) // 8]
                                else:
                                    for _ in range(8):
                                        b[crng.integers(len(b))] = 0
                                r = outcome(lambda: hooks.body_decode(bytes(b), N=len(H),
                                                                  count=len(M), golomb=g,
                                                                  expg_k=kk, h_bits=nh,
                                                                  m_bits=nm))
                                out[tag + f"/corrupt{t}"] = digest(r[0], r[1] if r[0] == "err" else
                                                              tuple(a.tobytes() for a in r[1]))
                            # Bad H / M for the LRSUQ decoder.
                            for bad in range(3):
                                H3, M3 = H.copy(), M.copy()
                                if bad == 0:
                                    H3[5] = 0
                                elif bad == 1:
                                    H3[7] = 2 if n == 1 else 65537
                                else:
                                    M3[9] = (1 << 53) + 1
                                r = outcome(lambda: hooks.decode_lattice(H3, M3, m=m, key=key,
                                                             params=params, dtype="float64"))
                                out[tag + f"/baddec{bad}"] = digest(r[0], r[1] if r[0] == "err"
                                                               else r[1])
        # Latent radii at unaligned offsets.
        for ki, key in enumerate(keys()):
            for first, count in ((0, 1), (3, 7), (5, 300), (1000001, 513), ((1 << 33) + 3, 100)):
                r = hooks.latent_radius(key=key,
                                        params=c.Params(mechanism=mech, scale=1e-3, lattice=1, n=n),
                                        first=first, count=count)
                out[f"radius/mech{mech}/n{n}/k{ki}/{first}/{count}"] = digest(r)
    # Hand-made hostile bodies: prefix codes too long, values above the caps.
    for hi, (hbits, mbits, N, count, g, k) in enumerate(hostile_cases()):
        body = bits_to_bytes(hbits) + bits_to_bytes(mbits)
        r = outcome(lambda: hooks.body_decode(body, N=N, count=count, golomb=g, expg_k=k,
                                          h_bits=len(hbits), m_bits=len(mbits)))
        out[f"hostile{hi}"] = digest(r[0], r[1] if r[0] == "err" else
                                tuple(a.tobytes() for a in r[1]))
        # The same after 300 valid codes (zeros), so that long sections are
        # decoded up to the hostile part.
        for pre in (1, 37, 300):
            b = (g - 1).bit_length() if g else 0
            zero_h = "" if g == 0 else "1" + "0" * (b - (1 if (1 << b) - g > 0 else 0))
            zero_m = "1" + "0" * k
            hb2 = zero_h * pre + hbits
            mb2 = zero_m * pre + mbits
            body = bits_to_bytes(hb2) + bits_to_bytes(mb2)
            r = outcome(lambda: hooks.body_decode(body, N=N + pre, count=count + pre, golomb=g,
                                              expg_k=k, h_bits=len(hb2), m_bits=len(mb2)))
            out[f"hostile{hi}/pre{pre}"] = digest(r[0], r[1] if r[0] == "err" else
                                             tuple(a.tobytes() for a in r[1]))
    # Inputs out of range at various places (the first failing sub-vector
    # is named in the message).
    for n in (1, 2, 3, 8):
        for pos in (0, 1, 5, 255, 256, 257, 700, 1000, 2046, 2999):
            for bad in (1e300, np.inf, np.nan, -3e10):
                for dt in (np.float32, np.float64):
                    x = np.random.default_rng(pos).normal(0, 1e-2, 3000).astype(dt)
                    x[pos] = bad
                    if pos > 600:
                        x[pos // 3] = bad  # an earlier one too
                    params = c.Params(mechanism=1, scale=1e-3, lattice=1, n=n)
                    r = outcome(lambda: hooks.encode_lattice(x, key=bytes(32), params=params,
                                                             factor=1.0))
                    out[f"badx/{n}/{pos}/{bad}/{np.dtype(dt).name}"] = digest(
                        r[0], r[1] if r[0] == "err" else tuple(a.tobytes() for a in r[1]))
    # Input too large: the error message.
    x = np.array([1e300, 0.0, 1.0], dtype=np.float64)
    params = c.Params(mechanism=1, scale=1e-3, lattice=1, n=2)
    out["toolarge"] = digest(outcome(lambda: hooks.encode_lattice(x, key=bytes(32), params=params,
                                                                  factor=1.0)))
    for ki, key in enumerate(keys()):
        for stream in (0, 1, 2, 7, 65536):
            for first in (0, 1, 3, 7, 8, 13, 61, 63, 64, 511, 1000003, (1 << 35) - 5,
                          (1 << 40) + 9):
                for count in (1, 2, 7, 9, 16, 17, 63, 64, 65, 130, 1000):
                    w = hooks.keystream_words(key, stream, first, count)
                    out[f"ks/{ki}/{stream}/{first}/{count}"] = digest(w)
    out["block"] = digest(hooks.chacha20_block(bytes(range(32)), 1,
                                      bytes.fromhex("000000090000004a00000000")))
    lx = np.concatenate([np.ldexp(1.0, -np.arange(0, 601)),
                         np.random.default_rng(1).random(100000) + 2.0 ** -53,
                         np.nextafter(1.0, 0) - np.arange(50) * 2.0 ** -53,
                         np.array([1.0, 0.5, 2.0 ** -600, 0.7071067811865476, 1.4142135623730951])])
    out["log"] = digest(hooks.det_log(lx))
    t = np.concatenate([np.arange(0, 2 ** 16) / 2 ** 16,
                        np.random.default_rng(2).random(100000),
                        np.array([0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875,
                                  np.nextafter(0.125, 0), np.nextafter(0.125, 1),
                                  np.nextafter(1.0, 0)])])
    out["cos"] = digest(hooks.det_cos2pi_squared(t))
    # Outside the samplers' domain (a caller error, but still deterministic);
    # NaN payloads are not part of the contract, so NaNs are canonicalised.
    odd = np.array([0.0, -0.0, -1.0, -2.5, np.inf, -np.inf, np.nan, 5e-324, 2.0 ** -1030,
                    2.0 ** -1022, 1.5, 2.0, 3.0, 1e300, 1.7976931348623157e308, -1e-300]
                   + list(np.random.default_rng(4).normal(0, 1e3, 997)))
    canon = lambda a: np.where(np.isnan(a), np.float64(12345.0), a)  # noqa: E731
    out["log_odd"] = digest(canon(hooks.det_log(odd)))
    out["cos_odd"] = digest(canon(hooks.det_cos2pi_squared(odd)))
    out["sumsq"] = digest(c.sum_of_squares(np.random.default_rng(3).normal(size=100003)),
                     c.sum_of_squares(np.random.default_rng(3).normal(size=100003)
                                      .astype(np.float32)))
    return out


def group_of(key):
    """Coarse group of a hash key, for the compact committed reference."""
    parts = key.split("/")
    head = parts[0].rstrip("0123456789")
    if head in ("mech", "radius", "ks", "badx") and len(parts) > 1:
        return parts[0] + "/" + parts[1]
    return head


def digests(out):
    groups = {}
    for key in sorted(out):
        groups.setdefault(group_of(key), []).append(key + "=" + out[key])
    return {g: hashlib.sha256("\n".join(v).encode()).hexdigest() for g, v in groups.items()}


def main():
    mode = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__),
                                                               "ref_digests.json")
    out = run()
    if mode == "record":  # every hash (for finding which output differs)
        with open(path, "w") as f:
            json.dump(out, f, indent=0, sort_keys=True)
        print(f"recorded {len(out)} hashes")
    elif mode == "record-digests":  # per-group digests (committed)
        with open(path, "w") as f:
            json.dump(digests(out), f, indent=1, sort_keys=True)
        print(f"recorded digests of {len(out)} hashes")
    elif mode == "check":
        ref = json.load(open(path))
        if len(next(iter(ref.values()))) == 64 and set(ref) == set(digests(out)):
            got = digests(out)
            bad = [g for g in ref if got.get(g) != ref[g]]
            what = "groups"
        else:
            bad = [k for k in ref if out.get(k) != ref[k]] + [k for k in out if k not in ref]
            what = "hashes"
        if bad:
            print(f"MISMATCH in {len(bad)} of {len(ref)} {what}:", *bad[:30], sep="\n  ")
            sys.exit(1)
        print(f"all {len(ref)} {what} match ({len(out)} hashes)")
    else:
        sys.exit("usage: refhash.py record|record-digests|check [file]")


if __name__ == "__main__":
    main()
