"""Checks and measures the CUDA path on a GPU machine, in one command.

    python bench/gpu_check.py                      # tests, comparisons, the table at m = 10^8
    python bench/gpu_check.py --sizes 1e6 1e7      # other sizes
    python bench/gpu_check.py --chunks 1 4096 1048576 --repeat 3

1. Runs the tests marked ``cuda`` (tests/core/test_cuda.py): the LRSUQ stage on the
   GPU against the CPU codec bit for bit for every lattice and mechanism, the
   golden vectors, the rANS kernel and GPU-coded ANS bodies, the spot-check,
   the sum-of-squares and source-model statistics kernels, encode of CUDA
   tensors with no copy of the update to the host, and decode(device="cuda").  Fails when one fails, or when none ran (all
   skipped: no device, no cepam._cuda or no torch with CUDA).
2. The symbol kernel (the ANS coder's box and point models: Z, D4, E8) against its
   host twin symbol by symbol, and the device-resident stage in full, on
   small updates (kernel_symbols();
   with --dump, the inputs and results of a difference are saved).  Then
   for each size and lattice (Z, D4, E8; float32, Gaussian sigma = 1e-3,
   rms/sigma = 10): the GPU's H, M, beta and V against the host's
   per-sub-vector computation for several launch chunks (at every size up to
   --compare-max, and at a sample of sub-vectors above), and the payload of
   the CUDA tensor against the CPU's payload of the same context, byte for
   byte, and that encode copied none of the update to the host
   (``cepam.cuda.LatticeStage.host`` never called).
3. Prints the table of issue 24, in millions of coordinates per second: the
   LRSUQ kernel, the transfers, ``cepam.encode`` of a CUDA tensor end to end
   (payload bytes in host memory; also with the body coded, and decoded,
   whole on the GPU: the default for Golomb bodies from
   ``cepam.cuda.DEVICE_BODY_MIN_COORDINATES``, for ANS bodies never),
   ``cepam.encode`` on all CPU cores, and
   ``cepam.decode(device="cuda")`` end to end by the GPU's path at every
   size (also with ``out=`` a CUDA tensor kept from call to call: no device
   memory allocated and freed a call) against the CPU decode and
   against the CPU decode whose result is then copied to the GPU (the
   alternative to the decode kernel's path, which ``decode(device="cuda")``
   takes below ``cepam.cuda.DEVICE_DECODE_MIN_COORDINATES``: faster at 10^6
   and 10^7 on an H200; the Golomb rows time it for Golomb bodies); then
   the clip's sum-of-squares kernel and the source model's statistics
   kernels (both used by encode) and the rANS segment kernel against their
   host twins, with the source model fitted from the GPU's statistics against
   the CPU's fit; and the ANS body coded on the GPU (the symbol and rANS
   kernels) against the CPU's body, on Z, D4 and E8.
4. With --profile: where one encode of a CUDA tensor and one
   decode(device="cuda") spend their time, by function (cProfile).

The whole-body ANS coder's checks and rows (the symbol kernel, the rANS
kernel, ANS bodies coded and decoded on the GPU) run where cepam._cuda was
built with it (-C cmake.define.CEPAM_CUDA_EXPERIMENTAL=ON); elsewhere
they are left out, and say so.  The Golomb rows run in every build.

Exits non-zero when there is no CUDA path, a test fails or all skip, or any
comparison differs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LATTICES = {"Z": (1, 1), "D4": (3, 4), "E8": (4, 8)}  # name: (code, n)
SIGMA = 1e-3


def experimental() -> bool:
    """Whether cepam._cuda holds the whole-body ANS coder (CMakeLists.txt's
    CEPAM_CUDA_EXPERIMENTAL); prints a note where it does not."""
    from cepam import _cuda

    if getattr(_cuda, "EXPERIMENTAL", False):
        return True
    print("(whole-body ANS coder not built: -C cmake.define.CEPAM_CUDA_EXPERIMENTAL=ON "
          "adds its checks and rows)")
    return False


def run_tests() -> tuple[bool, str]:
    """Runs the cuda tests; (all passed and at least one ran, a summary)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "cuda.xml"
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "-rs",
                                "-p", "no:cacheprovider", f"--junitxml={report}",
                                str(ROOT / "tests" / "core" / "test_cuda.py")], cwd=ROOT)
        counts = {"tests": 0, "skipped": 0, "failures": 0, "errors": 0}
        if report.exists():
            for suite in ElementTree.parse(report).getroot().iter("testsuite"):
                for k in counts:
                    counts[k] += int(suite.get(k, 0))
    ran = counts["tests"] - counts["skipped"]
    ok = code == 0 and ran > 0 and counts["failures"] == 0 and counts["errors"] == 0
    return ok, (f"cuda tests: {ran} ran, {counts['skipped']} skipped, "
                f"{counts['failures']} failed, {counts['errors']} errors")


def best(fn, repeat: int) -> tuple[float, object]:
    """The shortest wall time of ``repeat`` calls of fn (seconds), and its
    last result."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def compare_stage(x, xd, kw, chunks: list[int], compare_max: int) -> bool:
    """The GPU's (H, M, beta, V) for each launch chunk (the first received
    on one host thread, the others on all) against the host's
    per-sub-vector computation: all of it up to compare_max coordinates, a
    sample of 4096 sub-vectors (by cepam.cuda.spot_indices) above."""
    from cepam import _core, _cuda, cuda
    from cepam._core import testing as hooks

    n = kw["params"].n
    same = True
    for i, chunk in enumerate(chunks):
        threads = 1 if i == 0 else os.cpu_count() or 1
        H, M, beta, V, _ = _cuda.encode_lattice(xd.__dlpack__(stream=1), factor=1.0,
                                                chunk=chunk, threads=threads, **kw)
        if x.size <= compare_max:
            ref = hooks.encode_subvectors(x, factor=1.0, **kw)
            ok = all(a.tobytes() == b.tobytes() for a, b in zip((H, M, beta, V), ref))
        else:
            idx = cuda.spot_indices(kw["key"] + chunk.to_bytes(8, "little"), len(H), count=4096)
            padded_rows = np.zeros((len(idx), n), x.dtype)
            for r, j in enumerate(idx.astype(np.int64)):
                piece = x[j * n : j * n + n]
                padded_rows[r, : piece.size] = piece
            h, mm, b, v = _core.encode_subvectors_at(padded_rows.ravel(), idx, m=x.size,
                                                     factor=1.0, **kw)
            rows = idx.astype(np.intp)
            ok = (H[rows].tobytes() == h.tobytes()
                  and M.reshape(-1, n)[rows].tobytes() == mm.tobytes()
                  and beta[rows].tobytes() == b.tobytes()
                  and V.reshape(-1, n)[rows].tobytes() == v.tobytes())
        if not ok:
            print(f"  MISMATCH: the GPU's LRSUQ stage with chunk {chunk} ({threads} host threads) "
                  "differs from the host's")
        same &= ok
    return same


def table(sizes: list[int], chunks: list[int], compare_max: int, repeat: int,
          lattices: dict[str, tuple[int, int]]) -> bool:
    import torch

    import cepam
    from cepam import _core, _cuda

    threads = os.cpu_count() or 1
    key = bytes(range(32))
    secret = bytes(range(100, 132))
    same = True
    host_copies = _count_host_copies()
    whole_body = experimental()
    rate = lambda m, s: m / s / 1e6 if s > 0 else float("inf")  # noqa: E731
    print(f"\nGPU: {torch.cuda.get_device_name(0)}; CPU: {threads} threads; M coordinates/s "
          f"(float32, Gaussian sigma = {SIGMA:g}, rms/sigma = 10; best of {repeat})")
    print("| m | lattice | LRSUQ kernel | transfers | cepam.encode of a CUDA tensor "
          f"| cepam.encode on {threads} CPU threads | decode(device='cuda') "
          f"| the same, out= a kept tensor | decode on {threads} CPU threads "
          f"| the same, then copied to the GPU | same bytes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for m in sizes:
        x = (np.random.default_rng(0).normal(size=m) * 10 * SIGMA).astype(np.float32)
        xd = torch.from_numpy(x).cuda()
        for lat, (code, n) in lattices.items():
            kw = dict(key=key, params=_core.Params(mechanism=1, scale=SIGMA, lattice=code, n=n))
            ok = compare_stage(x, xd, kw, chunks, compare_max)
            stage = [_cuda.encode_lattice(xd.__dlpack__(stream=1), factor=1.0, **kw)[4]
                     for _ in range(repeat)]
            kernel_s = min(t["kernel_ms"] for t in stage) / 1e3
            transfer_s = min(t["transfer_ms"] for t in stage) / 1e3
            # (a fixed nonce: encode draws a fresh one a call, and the payloads compared
            # must differ only where the paths do)
            enc = dict(secret=secret, round=0, client=0, lattice=lat, clip=1e9, threads=threads,
                       nonce=bytes(16))
            torch.cuda.synchronize()
            try:
                t_gpu, p_gpu = best(lambda: cepam.encode(xd, cepam.Gaussian(sigma=SIGMA), **enc),
                                    repeat)
            except cepam.errors.DeviceError as e:  # loud, and the other lattices still run
                print(f"| {m:.2g} | {lat} | {rate(m, kernel_s):,.0f} | {rate(m, transfer_s):,.0f} "
                      f"| DeviceError: {e} |", flush=True)
                same = False
                continue
            xh = torch.from_numpy(x)  # a host tensor: the same structure, so the same bytes
            t_cpu, p_cpu = best(lambda: cepam.encode(xh, cepam.Gaussian(sigma=SIGMA), **enc),
                                repeat)
            ok &= p_gpu == p_cpu and host_copies["n"] == 0
            if host_copies["n"]:
                print(f"  HOST COPY: m = {m}, {lat}: encode copied the CUDA update to the host")
            if p_gpu != p_cpu:
                print(f"  MISMATCH: m = {m}, {lat}: the CUDA tensor's payload differs from the CPU's")

            def gpu_decode():
                y = cepam.decode(p_cpu, secret=secret, device="cuda", threads=threads)
                torch.cuda.synchronize()
                return y

            t_dgpu, y_gpu = best(gpu_decode, repeat)
            kept = torch.empty(m, device="cuda")  # (decode's out=: no device memory a call)

            def gpu_decode_into():
                y = cepam.decode(p_cpu, secret=secret, device="cuda", threads=threads, out=kept)
                torch.cuda.synchronize()
                return y

            t_dinto, _ = best(gpu_decode_into, repeat)
            t_dcpu, y_cpu = best(lambda: cepam.decode(p_cpu, secret=secret, threads=threads),
                                 repeat)

            def host_decode_then_copy():  # the alternative to the kernel path, for comparison
                y = cepam.decode(p_cpu, secret=secret, threads=threads).cuda()
                torch.cuda.synchronize()
                return y

            t_dcopy, _ = best(host_decode_then_copy, repeat)
            y_back = y_gpu.cpu().numpy()
            if y_back.tobytes() != y_cpu.numpy().tobytes():
                ok = False
                print(f"  MISMATCH: m = {m}, {lat}: decode(device='cuda') differs from the CPU's")
            if kept.cpu().numpy().tobytes() != y_cpu.numpy().tobytes():
                ok = False
                print(f"  MISMATCH: m = {m}, {lat}: decode(device='cuda', out=) differs from "
                      "the CPU's")
            del y_gpu, y_back, y_cpu, p_gpu, kept
            same &= ok
            print(f"| {m:.2g} | {lat} | {rate(m, kernel_s):,.0f} | {rate(m, transfer_s):,.0f} | "
                  f"{rate(m, t_gpu):,.0f} | {rate(m, t_cpu):,.0f} | {rate(m, t_dgpu):,.0f} | "
                  f"{rate(m, t_dinto):,.0f} | {rate(m, t_dcpu):,.0f} | {rate(m, t_dcopy):,.0f} | "
                  f"{'yes' if ok else 'NO'} |",
                  flush=True)
            if whole_body:
                same &= gpu_body_row(m, lat, xd, enc, p_cpu, repeat)
            if lat == "Z":
                same &= gpu_golomb_rows(m, x, xd, enc, repeat)
        xd = None  # (the device memory freed before the next size)
        torch.cuda.empty_cache()
    same &= kernels(sizes[-1], repeat)
    print("\nGPU and CPU: same H, M, beta, V for every chunk, same payloads (no host copy of "
          "the update), same decoded values, same norms, model statistics and rANS streams:",
          "yes" if same else "NO")
    return same


@contextlib.contextmanager
def whole_body(on: bool):
    """Within: encode and decode(device="cuda") code and decode every body
    whole on the GPU (``on``) or never, whatever their defaults
    (cepam.cuda.LatticeStage.codes_body_on_device, cuda.decodes_body_on_device)."""
    from cepam import cuda

    policies = cuda.LatticeStage.codes_body_on_device, cuda.decodes_body_on_device
    cuda.LatticeStage.codes_body_on_device = lambda self, **_: on
    cuda.decodes_body_on_device = lambda **_: on
    try:
        yield
    finally:
        cuda.LatticeStage.codes_body_on_device, cuda.decodes_body_on_device = policies


def gpu_body_row(m: int, lat: str, xd, enc: dict, expected: bytes, repeat: int) -> bool:
    """A row for lattice ``lat`` with its ANS body coded and decoded on the
    GPU (neither is the default: LatticeStage.codes_body_on_device,
    cuda.decodes_body_on_device):
    cepam.encode of the CUDA tensor (LatticeStage.device_body) and
    decode(device="cuda") of the CPU's payload (_cuda.decode_ans_body_resident),
    their speeds, and their payload and values against the CPU's."""
    import torch

    import cepam

    secret = enc["secret"]
    t_enc = t_dec = float("inf")
    ok = True
    try:
        with whole_body(True):
            t_enc, payload = best(lambda: cepam.encode(xd, cepam.Gaussian(sigma=SIGMA), **enc),
                                  repeat)
            ok = payload == expected
            if not ok:
                print(f"  MISMATCH: m = {m}, {lat}: the payload with the body coded on the GPU "
                      "differs")

            def gpu_decode():
                y = cepam.decode(expected, secret=secret, device="cuda", threads=enc["threads"])
                torch.cuda.synchronize()
                return y

            t_dec, y = best(gpu_decode, repeat)
            same = y.cpu().numpy().tobytes() == \
                cepam.decode(expected, secret=secret, threads=enc["threads"]).numpy().tobytes()
            if not same:
                print(f"  MISMATCH: m = {m}, {lat}: the values decoded on the GPU differ from the "
                      "CPU's")
            ok &= same
    except cepam.errors.CepamError as e:  # DeviceError, or a FormatError the CPU did not raise
        print(f"  {type(e).__name__}: m = {m}, {lat} with the body on the GPU: {e}")
        ok = False
    print(f"| {m:.2g} | {lat}, body coded and decoded on the GPU | | | {m / t_enc / 1e6:,.0f} | | "
          f"{m / t_dec / 1e6:,.0f} | | | {'yes' if ok else 'NO'} |", flush=True)
    return ok


def gpu_golomb_rows(m: int, x, xd, enc: dict, repeat: int) -> bool:
    """Rows for Z with the Golomb coder: cepam.encode of the CUDA tensor with
    the body coded on the host from the GPU's stage, and whole on the GPU
    (LatticeStage.device_body), their speeds and payloads against the
    CPU's; the CPU's own encode; and decode(device="cuda") of the CPU's
    payload with the body read on the host and the decode kernel run, and
    decoded whole on the GPU (_cuda.decode_golomb_body_resident), their
    speeds and values against the CPU's, and the CPU's decode, alone and
    then copied to the GPU (the alternative to both).  Each path is forced, whatever
    the defaults (cuda.DEVICE_BODY_MIN_COORDINATES) would take at this
    size."""
    import torch

    import cepam

    enc = dict(enc, coder="golomb")
    mech = cepam.Gaussian(sigma=SIGMA)
    xh = torch.from_numpy(x)
    t_cpu, expected = best(lambda: cepam.encode(xh, mech, **enc), repeat)
    reference = cepam.decode(expected, secret=enc["secret"], threads=enc["threads"])

    def gpu_decode():
        y = cepam.decode(expected, secret=enc["secret"], device="cuda", threads=enc["threads"])
        torch.cuda.synchronize()
        return y

    with whole_body(False):
        t_host, p_host = best(lambda: cepam.encode(xd, mech, **enc), repeat)
        t_dec_host, y_host = best(gpu_decode, repeat)
    t_gpu = t_dec_gpu = float("inf")
    p_gpu = y_gpu = None
    try:
        with whole_body(True):
            t_gpu, p_gpu = best(lambda: cepam.encode(xd, mech, **enc), repeat)
            t_dec_gpu, y_gpu = best(gpu_decode, repeat)
    except cepam.errors.CepamError as e:  # DeviceError: loud, and the run goes on
        print(f"  {type(e).__name__}: m = {m}, Z, golomb with the body on the GPU: {e}")

    t_dcpu, _ = best(lambda: cepam.decode(expected, secret=enc["secret"], threads=enc["threads"]),
                     repeat)

    def host_decode_then_copy():  # the alternative to both GPU paths, for comparison
        y = cepam.decode(expected, secret=enc["secret"], threads=enc["threads"]).cuda()
        torch.cuda.synchronize()
        return y

    t_dcopy, _ = best(host_decode_then_copy, repeat)

    def same_values(y):
        return y is not None and y.cpu().numpy().tobytes() == reference.numpy().tobytes()

    ok = p_host == expected and p_gpu == expected and same_values(y_host) and same_values(y_gpu)
    if not ok:
        print(f"  MISMATCH: m = {m}, Z, golomb: a CUDA tensor's payload or the values decoded "
              "on the GPU differ from the CPU's")
    host_ok = p_host == expected and same_values(y_host)
    gpu_ok = p_gpu == expected and same_values(y_gpu)
    print(f"| {m:.2g} | Z, golomb | | | {m / t_host / 1e6:,.0f} | {m / t_cpu / 1e6:,.0f} | "
          f"{m / t_dec_host / 1e6:,.0f} | | {m / t_dcpu / 1e6:,.0f} | {m / t_dcopy / 1e6:,.0f} | "
          f"{'yes' if host_ok else 'NO'} |", flush=True)
    print(f"| {m:.2g} | Z, golomb, body coded and decoded on the GPU | | | {m / t_gpu / 1e6:,.0f} "
          f"| | {m / t_dec_gpu / 1e6:,.0f} | | | {'yes' if gpu_ok else 'NO'} |", flush=True)
    return ok


def _count_host_copies() -> dict[str, int]:
    """Counts the calls of cepam.cuda.LatticeStage.host (the whole update
    copied to the host) from now on: {"n": count}."""
    from cepam import cuda

    count = {"n": 0}
    original = cuda.LatticeStage.host

    def counted(self):
        count["n"] += 1
        return original(self)

    cuda.LatticeStage.host = counted
    return count


def model_statistics(x, xd, repeat: int) -> bool:
    """The source model's statistics kernels against their host twin, and
    the model fitted from the GPU's statistics against the CPU's fit."""
    from cepam import _core, _cuda
    from cepam._core import testing as hooks

    params = _core.Params(mechanism=1, scale=SIGMA, lattice=1, n=1)
    runs = [_cuda.model_statistics(xd.__dlpack__(stream=1), factor=0.5) for _ in range(repeat)]
    rng, counts, _ = runs[-1]
    twin_rng, twin_counts = hooks.model_statistics(x, factor=0.5)
    same = rng == twin_rng and np.array_equal(counts, twin_counts) and (
        hooks.source_model_from_statistics(rng, counts, params=params)
        == hooks.source_model_fit(x, factor=0.5, params=params, threads=os.cpu_count() or 1))
    ms = min(r[2]["kernel_ms"] for r in runs)
    print(f"source model statistics kernels (m = {x.size:.2g}): {x.size / ms / 1e3:,.0f} M "
          f"coordinates/s, same statistics and model as the host: {'yes' if same else 'NO'}")
    return same


def kernels(m: int, repeat: int) -> bool:
    """The kernels against their host twins: the clip's sum of squares by
    blocks and the source model's statistics (both used by encode), and the
    rANS streams of m symbols in segments of 2^17 (a geometric model; not
    used by encode yet)."""
    import torch

    from cepam import _cuda
    from cepam._core import testing as hooks

    x = (np.random.default_rng(1).normal(size=m) * 10 * SIGMA).astype(np.float32)
    xd = torch.from_numpy(x).cuda()
    runs = [_cuda.sum_of_squares(xd.__dlpack__(stream=1)) for _ in range(repeat)]
    norm_same = runs[-1][:2] == hooks.sum_of_squares_blocks(x)
    norm_ms = min(r[2]["kernel_ms"] for r in runs)
    print(f"\nsum of squares kernel (m = {m:.2g}): {m / norm_ms / 1e3:,.0f} M coordinates/s, "
          f"same bits as the host: {'yes' if norm_same else 'NO'}")
    model_same = model_statistics(x, xd, repeat)
    del xd
    if not experimental():
        return norm_same and model_same
    k = min(m, 1 << 24)  # symbols: the host twin runs on one core
    rng = np.random.default_rng(2)
    freq_table = np.maximum(1, (0.5 ** np.arange(1, 25) * (1 << 24)).astype(np.int64))
    freq_table[0] += (1 << 24) - freq_table.sum()
    cum = np.concatenate([[0], np.cumsum(freq_table)])
    idx = rng.choice(len(freq_table), size=k, p=freq_table / (1 << 24))
    start, freq = cum[idx].astype(np.uint32), freq_table[idx].astype(np.uint32)
    first = np.append(np.arange(0, k, 1 << 17), k).astype(np.uint64)
    gpu = [_cuda.rans_encode_segments(start, freq, first) for _ in range(repeat)]
    rans_same = gpu[-1][0] == hooks.rans_encode_segments(start, freq, first)
    rans_ms = min(t["kernel_ms"] for _, t in gpu)
    print(f"rANS segment kernel ({k:.1e} symbols, {len(first) - 1} segments): "
          f"{k / rans_ms / 1e3:,.0f} M symbols/s, same bytes as the host: "
          f"{'yes' if rans_same else 'NO'}")
    bodies_same = gpu_bodies(x, repeat)
    return norm_same and model_same and rans_same and bodies_same


def kernel_symbols(dump: Path | None) -> bool:
    """The symbol kernel against its host twin, symbol by symbol, and the
    device-resident stage (every sub-vector) against the host's, on small
    updates of lattices Z, D4 and E8 (the point model's streams too, at
    spread 0.3): where they differ, the first differing symbol and its
    segment are printed and, with --dump, the inputs and both results saved
    (kernel_symbols.npz) for study on any machine."""
    import torch

    from cepam import _core, _cuda
    from cepam._core import testing as hooks

    key, same, saved = bytes(range(32)), True, {}
    for mech, lattice, n, m, spread in ((1, 1, 1, 4_099, 3.0), (1, 1, 2, 4_099, 3.0),
                                        (1, 1, 1, 8_193, 0.0), (2, 1, 1, 3 * (1 << 17) + 5, 0.2),
                                        (1, 3, 4, 4_099, 5.0), (1, 4, 8, 3 * (1 << 17) + 5, 5.0),
                                        (1, 3, 4, 4_099, 0.3), (1, 4, 8, 3 * (1 << 17) + 5, 0.3)):
        x = np.random.default_rng(m + n).normal(scale=spread, size=m).astype(np.float32)
        xd = torch.from_numpy(x).cuda()
        params = _core.Params(mechanism=mech, scale=0.5, lattice=lattice, n=n)
        kw = dict(key=key, params=params, factor=0.75)
        stats = hooks.model_statistics(x, factor=0.75)
        N = -(-m // n)
        _, stage, _ = _cuda.encode_ans_body_resident(xd.__dlpack__(stream=1), statistics=stats,
                                                     spot=np.arange(N, dtype=np.uint64), **kw)
        host_stage = hooks.encode_subvectors(x, **kw)
        stage_same = all(a.tobytes() == b.tobytes() for a, b in zip(stage, host_stage))
        dev = _cuda.body_symbols(xd.__dlpack__(stream=1), statistics=stats, **kw)
        host = hooks.body_symbols(x, **kw)
        first_same = np.array_equal(dev[0], host[0]) and np.array_equal(dev[3], host[3])
        k = min(len(dev[1]), len(host[1]))
        diff = np.flatnonzero((dev[1][:k] != host[1][:k]) | (dev[2][:k] != host[2][:k]))
        ok = stage_same and first_same and len(dev[1]) == len(host[1]) and diff.size == 0
        where = ""
        if diff.size:
            i = int(diff[0])
            where = (f"; first differing symbol {i} (segment "
                     f"{int(np.searchsorted(host[0], i, side='right')) - 1}): device "
                     f"({dev[1][i]}, {dev[2][i]}), host ({host[1][i]}, {host[2][i]}); "
                     f"{diff.size} differ")
        print(f"Symbols (mechanism {mech}, lattice {lattice}, n = {n}, m = {m}): device stage "
              f"{'same' if stage_same else 'DIFFERS'}; counts {dev[0][1:6].tolist()}.. vs "
              f"{host[0][1:6].tolist()}..; segments with a point table {int(dev[3].sum())} vs "
              f"{int(host[3].sum())}; symbols {len(dev[1])} vs {len(host[1])}"
              f"{where}: {'same' if ok else 'DIFFER'}", flush=True)
        if not ok:
            tag = f"{mech}_{lattice}_{n}_{m}"
            saved.update({f"x_{tag}": x, f"range_{tag}": np.array(stats[0]),
                          f"counts_{tag}": stats[1]})
            for name, a in zip(("first", "start", "freq", "tabled"), dev):
                saved[f"dev_{name}_{tag}"] = a
            for name, a in zip("HMbV", stage):
                saved[f"dev_{name}_{tag}"] = a
        same = same and ok
    if saved and dump is not None:
        np.savez_compressed(dump / "kernel_symbols.npz", **saved)
    return same


def profile(m: int, lattices: list[str], top: int = 14) -> None:
    """Where an encode of a CUDA tensor and a decode(device="cuda") spend
    their wall time, by Python function (cProfile; a native call is one
    entry, so cumulative times show the native calls, the host checks and
    the sealing apart): one warm call of each, m coordinates, per lattice."""
    import cProfile
    import io
    import pstats

    import torch

    import cepam

    secret = bytes(range(100, 132))
    x = (np.random.default_rng(3).normal(size=m) * 10 * SIGMA).astype(np.float32)
    xd = torch.from_numpy(x).cuda()
    for lat in lattices:
        enc = dict(secret=secret, round=0, client=0, lattice=lat, clip=1e9)
        calls = {"encode": lambda: cepam.encode(xd, cepam.Gaussian(sigma=SIGMA), **enc)}
        payload = calls["encode"]()  # warm
        calls["decode(device='cuda')"] = lambda: (cepam.decode(payload, secret=secret,
                                                                device="cuda"),
                                                   torch.cuda.synchronize())
        calls["decode(device='cuda')"]()  # warm
        for what, call in calls.items():
            torch.cuda.synchronize()
            prof = cProfile.Profile()
            t0 = time.perf_counter()
            prof.runcall(call)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
            lines = [line for line in out.getvalue().splitlines()
                     if line.strip() and not line.lstrip().startswith(("Ordered", "List"))]
            print(f"\nprofile: {what}, {lat}, m = {m:.2g}: {wall:.3f} s wall")
            print("\n".join(lines[-top - 1:]))


def gpu_bodies(x, repeat: int) -> bool:
    """The ANS body coded on the GPU from the stage to the streams
    (``_cuda.encode_ans_body_resident``: the symbol kernel, then the rANS
    kernel) against the CPU's body: Z^1 and Z^2 (Gaussian and Laplace), D4
    and E8, float32 and float64, at rms/sigma = 5 (the box model), and D4
    and E8 at 0.25 (point tables)."""
    import torch

    from cepam import _core, _cuda, cuda
    from cepam._core import testing as hooks

    key, same = bytes(range(32)), True
    for mech, lattice, n, spread in ((1, 1, 1, 1.0), (2, 1, 1, 1.0), (1, 1, 2, 1.0),
                                     (1, 3, 4, 1.0), (1, 4, 8, 1.0), (1, 3, 4, 0.05),
                                     (1, 4, 8, 0.05)):
        for dtype in ("float32", "float64"):
            xs = (x * spread).astype(dtype)
            xds = torch.from_numpy(xs).cuda()
            params = _core.Params(mechanism=mech, scale=SIGMA, lattice=lattice, n=n)
            stats = hooks.model_statistics(xs, factor=0.5)
            spot = cuda.spot_indices(key, -(-xs.size // n))
            runs = [_cuda.encode_ans_body_resident(xds.__dlpack__(stream=1), key=key,
                                                   params=params, factor=0.5, statistics=stats,
                                                   spot=spot)
                    for _ in range(repeat)]
            ok = runs[-1][0] == _core.encode(xs, key=key, params=params, factor=0.5, coder=2,
                                             threads=os.cpu_count() or 1)
            ms = min(t["kernel_ms"] + t["coder_kernel_ms"] for _, _, t in runs)
            coder_ms = min(t["coder_kernel_ms"] for _, _, t in runs)
            print(f"Body on the GPU (mechanism {mech}, lattice {lattice}, n = {n}, {dtype}, "
                  f"rms/sigma = {5 * spread:g}, m = {xs.size:.2g}): "
                  f"stage + symbols + streams {xs.size / ms / 1e3:,.0f} M coordinates/s "
                  f"(symbols + streams {xs.size / coder_ms / 1e3:,.0f}), same body as the "
                  f"CPU: {'yes' if ok else 'NO'}")
            same = same and ok
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e8],
                        help="update sizes m in coordinates (default: 1e8)")
    parser.add_argument("--chunks", type=int, nargs="+", default=[4096, 1 << 16, 1 << 20],
                        help="sub-vectors per kernel launch to compare (default: 4096 65536 "
                             "1048576)")
    parser.add_argument("--compare-max", type=float, default=1e7,
                        help="compare every sub-vector up to this m, a sample above")
    parser.add_argument("--repeat", type=int, default=1, help="runs per timing (best of)")
    parser.add_argument("--no-tests", action="store_true", help="skip the cuda tests")
    parser.add_argument("--lattices", nargs="+", default=list(LATTICES), choices=list(LATTICES),
                        help="the lattices of the table (default: Z D4 E8)")
    parser.add_argument("--profile", action="store_true",
                        help="then profile one encode and decode(device='cuda') per lattice at "
                             "the largest size")
    parser.add_argument("--dump", type=Path, default=None,
                        help="a folder for the inputs and results of differing symbol checks")
    args = parser.parse_args()
    import cepam.cuda

    ok, why = cepam.cuda.status()
    if not ok:
        print(f"no CUDA path: {why}", file=sys.stderr)
        return 1
    tests_ok, summary = (True, "cuda tests: not run (--no-tests)") if args.no_tests else \
        run_tests()
    # decode(device="cuda") takes the GPU's path at every size from here on:
    # the table times that path; the host's decode and copy, which decode
    # takes below cepam.cuda.DEVICE_DECODE_MIN_COORDINATES, has its own column.
    cepam.cuda.DEVICE_DECODE_MIN_COORDINATES = 0
    same = kernel_symbols(args.dump) if experimental() else True
    same &= table([int(s) for s in args.sizes], args.chunks, int(args.compare_max),
                  max(1, args.repeat), {k: LATTICES[k] for k in args.lattices})
    if args.profile:
        profile(int(max(args.sizes)), args.lattices)
    print(summary)
    return 0 if tests_ok and same else 1


if __name__ == "__main__":
    sys.exit(main())
