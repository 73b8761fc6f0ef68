"""Tied weights (one tensor under two names: a language model's embedding
shared with its output layer) are coded once, counted once in the clip and
given back tied."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import cepam
from cepam.ties import resolve_ties

from conftest import SECRET_A

torch = pytest.importorskip("torch")

TINY = cepam.Gaussian(sigma=1e-5)  # decoded values within about 1e-4 of the clipped input
NOISE = cepam.Gaussian(sigma=1e-3)
VOCAB, WIDTH = 64, 16


class TiedLSTM(torch.nn.Module):
    """An LSTM language model whose output layer reuses its embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(VOCAB, WIDTH)
        self.lstm = torch.nn.LSTM(WIDTH, WIDTH, batch_first=True)
        self.decoder = torch.nn.Linear(WIDTH, VOCAB)
        self.decoder.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.lstm(self.embedding(tokens))[0])


class TiedTransformer(torch.nn.Module):
    """A one-layer causal transformer language model with a tied head."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(VOCAB, WIDTH)
        self.position = torch.nn.Embedding(12, WIDTH)
        self.layer = torch.nn.TransformerEncoderLayer(WIDTH, nhead=2, dim_feedforward=32,
                                                      dropout=0.0, batch_first=True)
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB)
        self.head.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        h = self.embedding(tokens) + self.position(torch.arange(n))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(n)
        return self.head(self.norm(self.layer(h, src_mask=mask, is_causal=True)))


MODELS = {"lstm": TiedLSTM, "transformer": TiedTransformer}
TIED = {"lstm": ("decoder.weight", "embedding.weight"),
        "transformer": ("head.weight", "embedding.weight")}


def _trained(kind: str) -> tuple[torch.nn.Module, dict, dict]:
    """A tied model, the state_dict difference of one SGD step on random
    tokens computed name by name (its ties lost), and the same update as a
    tied model's state_dict (its ties kept: shared storage)."""
    torch.manual_seed(0)
    model = MODELS[kind]()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tokens = torch.randint(0, VOCAB, (8, 12))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    logits = model(tokens[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
    loss.backward()
    optimizer.step()
    difference = {k: v - before[k] for k, v in model.state_dict().items()}
    delta_model = copy.deepcopy(model)  # deepcopy keeps the tie
    with torch.no_grad():
        for name, p in delta_model.named_parameters():
            p.copy_(difference[name])
    return model, difference, delta_model.state_dict()


def _without(update: dict, name: str) -> dict:
    return {k: v for k, v in update.items() if k != name}


def _norm(update: dict) -> float:
    return float(np.sqrt(sum(float((v.double() ** 2).sum()) for v in update.values())))


@pytest.fixture(params=sorted(MODELS))
def kind(request) -> str:
    return request.param


def test_the_models_are_tied_and_small(kind):
    model, _, tied = _trained(kind)
    name, target = TIED[kind]
    assert cepam.find_ties(model) == {name: target}
    assert cepam.find_ties(tied) == {name: target}
    assert 2_000 < sum(p.numel() for p in model.parameters()) < 5_000


@pytest.mark.parametrize("coder", ["ans", "golomb"])
def test_a_tied_update_is_the_update_without_its_duplicate(kind, coder):
    """The payload of a tied update (a tied state_dict, or a difference with
    ties=model) is the payload of the update with the duplicate entry
    removed, byte for byte: the tied matrix is coded once."""
    model, difference, tied = _trained(kind)
    name, _ = TIED[kind]
    kw = dict(secret=SECRET_A, round=4, client=2, clip=1.0, coder=coder, nonce=bytes(16))
    reference = cepam.encode(_without(difference, name), NOISE, **kw)
    assert cepam.encode(tied, NOISE, **kw) == reference
    assert cepam.encode(difference, NOISE, ties=model, **kw) == reference
    assert cepam.encode(difference, NOISE, ties=model.state_dict(), **kw) == reference
    assert cepam.encode(difference, NOISE, ties={name: TIED[kind][1]}, **kw) == reference
    # Not knowing the tie, the encoder codes the matrix twice: about 17% more
    # here (docs/guide/pytorch.md, measured with torch 2.13).
    assert len(cepam.encode(difference, NOISE, **kw)) > 1.1 * len(reference)


def test_decoded_tensors_are_tied(kind):
    model, difference, tied = _trained(kind)
    name, target = TIED[kind]
    payload = cepam.encode(tied, TINY, secret=SECRET_A, round=0, client=1, clip=10.0)
    # The payload does not carry the tie: without a template the duplicate is absent.
    assert name not in cepam.decode(payload, secret=SECRET_A)
    for decoded in (cepam.decode(payload, secret=SECRET_A, like=model),
                    cepam.decode(payload, secret=SECRET_A, like=model.state_dict()),
                    cepam.decode(payload, secret=SECRET_A, ties=model),
                    cepam.decode(payload, secret=SECRET_A, ties={name: target})):
        assert decoded[name] is decoded[target]
        assert set(decoded) == set(difference)
        assert all(torch.allclose(decoded[k], difference[k], atol=1e-4) for k in difference)
    # With a template, in its order; and it loads into the model, still tied.
    decoded = cepam.decode(payload, secret=SECRET_A, like=model)
    assert list(decoded) == list(model.state_dict())
    fresh = MODELS[kind]()
    fresh.load_state_dict(decoded)
    assert dict(fresh.named_parameters())[target] is getattr(fresh, name.split(".")[0]).weight


def test_a_bare_tied_payload_decodes_tied(kind):
    model, difference, _ = _trained(kind)
    name, target = TIED[kind]
    codec = cepam.Codec(TINY, secret=SECRET_A, client=1, clip=10.0, structure=False, ties=model)
    payload = codec.encode(difference, round=0)
    decoded = codec.decode(payload, like=model.state_dict())
    assert decoded[name] is decoded[target]
    assert torch.allclose(decoded[target], difference[target], atol=1e-4)
    # A template with the tie lost (separate tensors) names another structure.
    untied = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(cepam.FormatError, match="ties="):
        cepam.decode(payload, secret=SECRET_A, like=untied)
    decoded = cepam.decode(payload, secret=SECRET_A, like=untied, ties=model)
    assert decoded[name] is decoded[target]


def test_the_clip_counts_a_tied_matrix_once(kind, monkeypatch):
    """update_norm and encode's clip see the tied matrix once: the decoded
    update (ties once) is clipped to exactly the clip."""
    model, difference, tied = _trained(kind)
    name, _ = TIED[kind]
    once = _norm(_without(difference, name))
    assert cepam.update_norm(tied) == pytest.approx(once, rel=1e-6)
    assert cepam.update_norm(difference, ties=model) == cepam.update_norm(tied)
    twice = np.hypot(once, _norm({name: difference[name]}))  # without the tie
    assert cepam.update_norm(difference) == pytest.approx(twice, rel=1e-6)
    norm = cepam.update_norm(tied)
    seen = _spy_norms(monkeypatch)
    payload = cepam.encode(tied, TINY, secret=SECRET_A, round=0, client=1, clip=0.5 * once,
                           nonce=bytes(16))  # one fixed noise draw
    assert len(seen) == 1 and np.sqrt(seen[0]) == norm
    decoded = cepam.decode(payload, secret=SECRET_A)
    # Over 30 nonces the decoded norm's relative error has a spread of 4.6e-5
    # (LSTM) and 8e-6 (transformer), and at most 1.1e-4; a clip that counted
    # the tie twice would be off by 1 - once / twice: 1.0e-2 and 1.9e-2.
    assert 1 - once / twice > 5e-3
    assert _norm(decoded) == pytest.approx(0.5 * once, rel=5e-4)


def test_ties_are_found_by_storage_never_by_value():
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert cepam.find_ties({"a": w, "b": w.clone()}) == {}  # equal values, not one tensor
    assert cepam.find_ties({"a": w[:1], "b": w[1:2]}) == {}  # one storage, other offsets
    assert cepam.find_ties({"a": w, "b": w.t()}) == {}  # other strides
    assert cepam.find_ties({"a": w, "b": w.view(torch.int32)}) == {}  # other dtype
    assert cepam.find_ties({"a": torch.empty(0), "b": torch.empty(0)}) == {}
    assert cepam.find_ties({"a": w, "b": w.detach(), "c": w[:]}) == {"b": "a", "c": "a"}
    x = np.ones(5, np.float32)
    assert cepam.find_ties({"a": x, "b": x, "c": x.copy()}) == {"b": "a"}


def test_numpy_ties_decode_to_one_array():
    x = np.linspace(-0.1, 0.1, 50).astype(np.float32)
    update = {"emb": x, "bias": np.zeros(3, np.float32), "out": x}
    payload = cepam.encode(update, TINY, secret=SECRET_A, round=0, client=1, clip=10.0,
                           nonce=bytes(16))
    assert payload == cepam.encode(_without(update, "out"), TINY, secret=SECRET_A, round=0,
                                   client=1, clip=10.0, nonce=bytes(16))
    decoded = cepam.decode(payload, secret=SECRET_A, like=update)
    assert list(decoded) == ["emb", "bias", "out"] and decoded["out"] is decoded["emb"]
    np.testing.assert_allclose(decoded["out"], x, atol=1e-4)


def test_a_tie_coded_apart_is_not_imposed_on_decode():
    """A payload whose encoder did not know the tie holds both entries; a
    decoder that knows it gives both back as coded."""
    model, difference, _ = _trained("lstm")
    payload = cepam.encode(difference, TINY, secret=SECRET_A, round=0, client=1, clip=10.0)
    decoded = cepam.decode(payload, secret=SECRET_A, like=model)
    assert decoded["decoder.weight"] is not decoded["embedding.weight"]
    assert torch.allclose(decoded["decoder.weight"], difference["decoder.weight"], atol=1e-4)


def test_ties_chain_to_one_group():
    groups = resolve_ties({}, (("c", "b"), ("b", "a")))
    assert len(set(groups.values())) == 1 and set(groups) == {"a", "b", "c"}
    x = np.ones(4, np.float32)
    update = {"a": x, "b": x.copy(), "c": x.copy()}
    payload = cepam.encode(update, TINY, secret=SECRET_A, round=0, client=1, clip=10.0,
                           ties={"c": "b", "b": "a"})
    decoded = cepam.decode(payload, secret=SECRET_A, ties={"c": "b", "b": "a"})
    assert decoded["a"] is decoded["b"] is decoded["c"]


@pytest.mark.parametrize("bad, error, match", [
    (42, cepam.InvalidTypeError, "ties must be"),
    ({"a": "a"}, cepam.InvalidArgumentError, "tied to itself"),
    ({"a": "b", "c": np.ones(2)}, cepam.InvalidTypeError, "not both"),
    ({"b": "w"}, cepam.InvalidArgumentError, "differs from it in shape"),
    ({"b": 3}, cepam.InvalidTypeError, "got a value of type int"),
    # A misspelt name ties nothing: the tensor would be coded twice.
    ({"v": "w"}, cepam.InvalidArgumentError, "'v' is not an entry of the update"),
])
def test_bad_ties_are_refused(bad, error, match):
    update = {"w": np.ones(4, np.float32), "b": np.ones(3, np.float32)}
    with pytest.raises(error, match=match):
        cepam.encode(update, TINY, secret=SECRET_A, round=0, client=1, clip=1.0, ties=bad)
    with pytest.raises(error, match=match):
        cepam.update_norm(update, ties=bad)
    if bad not in ({"b": "w"}, {"v": "w"}):  # (refused where the update is read)
        with pytest.raises(error, match=match):
            cepam.Codec(TINY, secret=SECRET_A, ties=bad)


def test_a_module_with_extra_state_is_taken_as_ties():
    """A module's state_dict may hold a layer's extra state (not a tensor):
    ties=module takes it, where a mapping given by hand must hold tensors."""
    torch = pytest.importorskip("torch")

    class WithExtra(torch.nn.Linear):
        def get_extra_state(self):
            return {"version": 2}

        def set_extra_state(self, state):
            pass

    model = WithExtra(2, 2)
    assert any(not isinstance(v, torch.Tensor) for v in model.state_dict().values())
    update = {k: torch.zeros_like(v) for k, v in model.state_dict().items()
              if isinstance(v, torch.Tensor)}
    assert cepam.update_norm(update, ties=model) == 0.0


def test_find_ties_refuses_what_is_no_model():
    with pytest.raises(cepam.InvalidTypeError, match="find_ties takes"):
        cepam.find_ties([torch.ones(2)])


# --------------------------------------------------------------- update_norm and the clip


FINE = cepam.Gaussian(sigma=1e-6)  # (the coordinates here are small enough for float32)


def _bn_update() -> dict[str, np.ndarray]:
    """Weights of norm 0.4, running statistics of norm 3, and a counter."""
    rng = np.random.default_rng(11)
    w = rng.normal(size=200).astype(np.float32)
    s = rng.normal(size=32).astype(np.float32)
    w *= 0.4 / np.linalg.norm(w)
    s *= 3.0 / np.linalg.norm(s)
    return {"conv.weight": w.reshape(20, 10), "bn.weight": np.full(16, 0.0, np.float32),
            "bn.running_mean": s[:16], "bn.running_var": s[16:],
            "bn.num_batches_tracked": np.array(3)}


def _spy_norms(monkeypatch) -> list[float]:
    """The sums of squares encode computes to clip, as it computes them."""
    import cepam.encoding as encoding

    seen: list[float] = []
    measure = encoding._norm_pass

    def spy(*args):
        result = measure(*args)
        seen.append(result[0])
        return result

    monkeypatch.setattr(encoding, "_norm_pass", spy)
    return seen


@pytest.mark.parametrize("buffers", ["separate", "local", "joint"])
def test_update_norm_is_the_norm_encode_clips(buffers, monkeypatch):
    update = _bn_update()
    weights = float(np.linalg.norm(update["conv.weight"].astype(np.float64)))
    statistics = float(np.sqrt(sum(float(np.sum(update[k].astype(np.float64) ** 2))
                                   for k in ("bn.running_mean", "bn.running_var"))))
    norm = cepam.update_norm(update, buffers=buffers)
    expected = weights if buffers == "local" else np.hypot(weights, statistics)
    assert norm == pytest.approx(expected, rel=1e-6)
    # The very sum encode clips with (the counter and, with "local", the
    # statistics left out).
    seen = _spy_norms(monkeypatch)
    codec = cepam.Codec(FINE, secret=SECRET_A, client=1, clip=100.0, buffers=buffers)
    # A fixed nonce: with "local" (norm 0.4) the decoded norm's relative spread
    # is 1e-6 / 0.4 = 2.5e-6, so fresh noise would miss rel=1e-5 once in 16,000 runs.
    decoded = codec.decode(codec.encode(update, round=0, nonce=bytes(16)), round=0)
    assert [np.sqrt(seen[0])] == [norm]
    # A clip above the norm leaves the update whole: the decoded norm is it.
    assert _norm({k: torch.from_numpy(v) for k, v in decoded.items()}) == pytest.approx(
        norm, rel=1e-5)
    # torch tensors measure the same.
    assert cepam.update_norm({k: torch.from_numpy(v) for k, v in update.items()},
                             buffers=buffers) == norm


@pytest.mark.parametrize("buffers", ["separate", "local", "joint"])
def test_a_clip_below_update_norm_binds_and_above_does_not(buffers):
    update = _bn_update()
    norm = cepam.update_norm(update, buffers=buffers)
    for clip, expected in ((1.001 * norm, norm), (0.5 * norm, 0.5 * norm)):
        codec = cepam.Codec(FINE, secret=SECRET_A, client=1, clip=clip, buffers=buffers)
        decoded = codec.decode(codec.encode(update, round=0), round=0)
        assert _norm({k: torch.from_numpy(v) for k, v in decoded.items()}) == pytest.approx(
            expected, rel=1e-4)


def test_update_norm_refuses_bad_arguments():
    with pytest.raises(cepam.InvalidArgumentError, match="buffers must be one of"):
        cepam.update_norm(_bn_update(), buffers="params")
    with pytest.raises(cepam.InvalidArgumentError, match="non-finite"):
        cepam.update_norm({"w": np.array([1.0, np.nan], np.float32)})
    with pytest.raises(cepam.InvalidTypeError):
        cepam.update_norm("not an update")


def test_the_noise_baseline_noises_a_tied_tensor_once():
    from cepam.baselines import add_private_noise

    _, _, tied = _trained("lstm")
    noisy = add_private_noise(tied, NOISE, rng=np.random.default_rng(0), clip=1.0)
    assert noisy["decoder.weight"] is noisy["embedding.weight"]


def _cuda_ready() -> bool:
    return torch.cuda.is_available() and cepam.cuda.is_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda_ready(), reason="needs a CUDA device and cepam's CUDA path")
def test_a_tied_update_on_the_gpu_is_coded_once_and_decoded_tied():
    model, _, tied = _trained("transformer")
    name, target = TIED["transformer"]
    kw = dict(secret=SECRET_A, round=0, client=1, clip=1.0, nonce=bytes(16))
    on_gpu = {k: v.cuda() for k, v in tied.items()}
    on_gpu[name] = on_gpu[target]  # (.cuda() copies each name apart)
    assert cepam.encode(on_gpu, NOISE, **kw) == cepam.encode(tied, NOISE, **kw)
    decoded = cepam.decode(cepam.encode(tied, NOISE, **kw), secret=SECRET_A, like=model,
                           device="cuda")
    assert decoded[name] is decoded[target] and decoded[name].is_cuda


def test_a_meta_template_ties_by_parameter(kind):
    """A model built on device 'meta' (a cheap template: its tensors hold no
    memory) ties its names by parameter object: encode with ties= and decode
    with like= such a model as with the real one."""
    model, difference, _ = _trained(kind)
    name, target = TIED[kind]
    with torch.device("meta"):
        template = MODELS[kind]()
    assert cepam.find_ties(template) == {name: target}
    codec = cepam.Codec(TINY, secret=SECRET_A, client=1, clip=10.0, structure=False,
                        ties=template)
    payload = codec.encode(difference, round=0, nonce=bytes(16))
    real = cepam.encode(difference, TINY, secret=SECRET_A, round=0, client=1, clip=10.0,
                        structure=False, ties=model, nonce=bytes(16))
    assert payload == real
    decoded = cepam.decode(payload, secret=SECRET_A, like=template)
    assert decoded[name] is decoded[target]
    # A meta state_dict (a mapping, no objects to compare) ties nothing.
    assert cepam.find_ties(template.state_dict()) == {}
