"""Writes the golden payloads of tests/codec/test_determinism.py.

Run it only on purpose, when the payload format changes (bump the format
version then):  python tests/golden/generate.py > tests/golden/v10.json

Every payload is encoded under a fixed nonce (``nonce_of``: format version 8
draws a fresh one for each payload unless the caller passes its own), so the
bytes are a function of the case alone.
"""

import hashlib
import json

import numpy as np

import cepam

SECRET = bytes(range(32))
X = np.array([0.0, 1e-3, -2.5e-3, 0.0123, -0.5, 3.0, 1e-7, -1e-7, 0.25, 0.75, -0.125,
              42.0, -0.031], dtype=np.float32)

CASES = {
    "gaussian-n1": dict(mechanism=cepam.Gaussian(sigma=0.01), dim=1, clip=None, coder="ans"),
    "gaussian-n2-clip": dict(mechanism=cepam.Gaussian(sigma=0.01), dim=2, clip=1.0, coder="ans"),
    "gaussian-n3": dict(mechanism=cepam.Gaussian(sigma=0.05), dim=3, clip=None, coder="ans"),
    "gaussian-n8": dict(mechanism=cepam.Gaussian(sigma=0.01), dim=8, clip=None, coder="ans"),
    "laplace-n1": dict(mechanism=cepam.Laplace(b=0.02), dim=1, clip=None, coder="ans"),
    "laplace-n2": dict(mechanism=cepam.Laplace(b=0.02), dim=2, clip=10.0, coder="ans"),
    "sdq": dict(mechanism=cepam.SDQ(step=0.02), dim=1, clip=None, coder="ans"),
    "golomb-gaussian-n1": dict(mechanism=cepam.Gaussian(sigma=0.01), dim=1, clip=None,
                               coder="golomb"),
    "golomb-gaussian-n2-clip": dict(mechanism=cepam.Gaussian(sigma=0.01), dim=2, clip=1.0,
                                    coder="golomb"),
    "golomb-laplace-n2": dict(mechanism=cepam.Laplace(b=0.02), dim=2, clip=None,
                              coder="golomb"),
    # lattice="auto" (its choice sealed) and padding (zero bytes, sealed).
    "gaussian-auto": dict(mechanism=cepam.Gaussian(sigma=0.001), dim=None, clip=None,
                          coder="ans", lattice="auto"),
    "gaussian-n1-pad-bucket": dict(mechanism=cepam.Gaussian(sigma=0.01), dim=1, clip=None,
                                   coder="ans", pad="bucket"),
    "golomb-gaussian-n1-pad-max": dict(mechanism=cepam.Gaussian(sigma=0.01), dim=1, clip=1.0,
                                       coder="golomb", pad="max"),
    # No structure in the header (the decoder passes like=, a template).
    "gaussian-n2-clip-bare": dict(mechanism=cepam.Gaussian(sigma=0.01), dim=2, clip=1.0,
                                  coder="ans", structure=False),
}


# Large updates, pinned by the SHA-256 of their payloads: the clip's sum of
# squares over several blocks (and its tree), a tag over several MAC
# segments (payloads over 1 MiB), and bodies of several segments.
LARGE = {
    "large-gaussian-n1-clip": dict(mechanism=cepam.Gaussian(sigma=0.001), dim=1, clip=40.0,
                                   coder="ans", size=1_600_007, rms=0.05),
    "large-gaussian-e8-clip": dict(mechanism=cepam.Gaussian(sigma=0.001), lattice="E8",
                                   clip=40.0, coder="ans", size=3 * (1 << 16) + 5, rms=0.05),
    # A Golomb body of four segments (format version 6; each its own order since
    # version 7), the last one short.
    "large-golomb-n2-clip": dict(mechanism=cepam.Gaussian(sigma=0.001), dim=2, clip=40.0,
                                 coder="golomb", size=3 * (1 << 17) + 20_001, rms=0.05),
}


def nonce_of(name):
    """Case ``name``'s fixed 16-byte payload nonce: the first bytes of
    SHA-256("cepam/golden/" || name), one of its own for each case."""
    return hashlib.sha256(b"cepam/golden/" + name.encode()).digest()[:16]


def large_update(name):
    """The float32 update of large case ``name`` (a fixed-seed Gaussian)."""
    case = LARGE[name]
    rng = np.random.default_rng(2026)
    return (rng.standard_normal(case["size"]) * case["rms"]).astype(np.float32)


def encode_large(name, *, threads=None):
    """The payload of large case ``name``, on ``threads`` threads."""
    case = dict(LARGE[name])
    mechanism = case.pop("mechanism")
    del case["size"], case["rms"]
    return cepam.encode(large_update(name), mechanism, secret=SECRET, round=3, client=5,
                        message=2, threads=threads, nonce=nonce_of(name), **case)


def update_for(name):
    if name.endswith(("gaussian-n2-clip", "gaussian-n2-clip-bare")):
        return {"w": X[:9].reshape(3, 3), "b": X[9:].astype(np.float64)}
    return X


def encode_case(name):
    """The golden payload of case ``name``."""
    case = dict(CASES[name])
    mechanism = case.pop("mechanism")
    return cepam.encode(update_for(name), mechanism, secret=SECRET, round=3, client=5,
                        message=1, nonce=nonce_of(name), **case)


def decode_case(name, payload):
    """Case ``name``'s payload decoded (with its template when it is bare)."""
    like = update_for(name) if CASES[name].get("structure") is False else None
    return cepam.decode(payload, secret=SECRET, like=like)


def main():
    out = {"x": [float(v).hex() for v in X], "secret": SECRET.hex(), "cases": {}}
    for name in CASES:
        payload = encode_case(name)
        y = decode_case(name, payload)
        leaves = y if isinstance(y, dict) else {"": y}
        out["cases"][name] = {
            "payload": payload.hex(),
            "decoded": {k: [float(v).hex() for v in np.ravel(a)] for k, a in leaves.items()},
        }
    out["large"] = {}
    for name in LARGE:
        payload = encode_large(name)
        y = cepam.decode(payload, secret=SECRET)
        out["large"][name] = {"bytes": len(payload),
                              "payload_sha256": hashlib.sha256(payload).hexdigest(),
                              "decoded_sha256": hashlib.sha256(y.tobytes()).hexdigest()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
