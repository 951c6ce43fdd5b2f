"""The operators from Python: float64 gradchecks, equality with the PyTorch code a user would
write (dense masked softmax, the mechanisms' formulas), the pattern builders, and bad input
raising an exception with a clear message."""
import json
import math
import os
import time

import pytest
import torch

import structdiff
from structdiff.gsdm import Gsdm

SOURCE = os.environ.get("STRUCTDIFF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def dense_masked(q, k, v, mask, scale=None):
    """The reference: dense softmax over the allowed keys; rows without keys give zeros."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    mask = mask.unsqueeze(1)  # (P, 1, queries, keys) over heads
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
    return torch.nan_to_num(weights, nan=0.0) @ v


def qkv(batch, heads, queries, keys, dim, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda n: torch.randn(batch, heads, n, dim, dtype=dtype, generator=g, requires_grad=True)
    return make(queries), make(keys), make(keys)


def test_the_issue_example_gradchecks_and_equals_dense_masked_attention():
    edges = [(0, 1), (1, 0), (2, 3), (3, 2), (1, 4), (4, 1)] + [(i, i) for i in range(5)]
    p = structdiff.Pattern.from_edges(5, edges)
    q, k, v = (torch.randn(2, 3, 5, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = structdiff.sparse_attention(q, k, v, p)
    assert out.shape == (2, 3, 5, 8)
    assert torch.autograd.gradcheck(lambda a, b, c: structdiff.sparse_attention(a, b, c, p), (q, k, v))
    assert (out - dense_masked(q, k, v, p.dense_mask())).abs().max() < 1e-10


@pytest.mark.parametrize("name, pattern", [
    ("sudoku 4x4", structdiff.Pattern.of_problem("sudoku", [4])),
    ("causal", structdiff.Pattern.causal(9)),
    ("window", structdiff.Pattern.sliding_window(11, 2, 1)),
    ("multi-scope prefix", structdiff.Pattern.tracformer_encoder(16, 2, 3, "prefix")),
    ("decoder cross, T x 2T", structdiff.Pattern.tracformer_decoder(8, 3, 2, "suffix")),
    ("per element", structdiff.Pattern.stack([structdiff.Pattern.causal(6),
                                              structdiff.Pattern.sliding_window(6, 1, 0)])),
])
def test_forward_and_gradients_equal_the_dense_reference(name, pattern):
    batch = pattern.row_offsets.shape[0] if pattern.row_offsets.shape[0] > 1 else 2
    q, k, v = qkv(batch, 2, pattern.num_queries, pattern.num_keys, 4)
    out = structdiff.sparse_attention(q, k, v, pattern)
    reference = dense_masked(q, k, v, pattern.dense_mask())
    assert (out - reference).abs().max() < 1e-10, name
    cotangent = torch.randn_like(out)
    ours = torch.autograd.grad((out * cotangent).sum(), (q, k, v))
    theirs = torch.autograd.grad((reference * cotangent).sum(), (q, k, v))
    for a, b in zip(ours, theirs):
        assert (a - b).abs().max() < 1e-10, name
    small = qkv(batch, 1, pattern.num_queries, pattern.num_keys, 2, seed=1)
    assert torch.autograd.gradcheck(lambda a, b, c: structdiff.sparse_attention(a, b, c, pattern), small)


def test_float32_matches_float64_and_rows_without_keys_give_zeros():
    pattern = structdiff.Pattern.tracformer_decoder(8, 3, 3, "prefix")  # row 0 attends to nothing
    q, k, v = qkv(2, 2, pattern.num_queries, pattern.num_keys, 8)
    exact = structdiff.sparse_attention(q, k, v, pattern)
    single = structdiff.sparse_attention(q.float(), k.float(), v.float(), pattern)
    assert single.dtype == torch.float32
    assert (single.double() - exact).abs().max() < 1e-5
    empty = pattern.row_offsets[0, 1:] == pattern.row_offsets[0, :-1]
    assert empty.any()
    assert exact[:, :, empty].abs().max() == 0


def test_the_module_and_a_custom_scale():
    pattern = structdiff.Pattern.of_problem("sudoku", [9])
    assert (pattern.num_queries, pattern.num_keys, pattern.num_entries) == (81, 81, 81 * 21)
    q, k, v = qkv(1, 2, 81, 81, 8)
    module = structdiff.SparseAttention(pattern, scale=0.5)
    assert (module(q, k, v) - dense_masked(q, k, v, pattern.dense_mask(), scale=0.5)).abs().max() < 1e-10


def test_graph_specs_from_a_file_or_inline():
    from_file = structdiff.Pattern.from_graph_spec(os.path.join(SOURCE, "examples", "sudoku4.json"))
    assert from_file.num_queries == 16
    inline = structdiff.Pattern.from_graph_spec(
        {"arrays": [{"name": "x", "shape": [3]}], "edges": [["x[0]", "x[1]"]]})
    assert inline.num_queries == 3 and inline.num_entries == 5  # both directions and self


def test_linear_time_mechanisms_equal_their_formulas_and_gradcheck():
    q, k, v = qkv(2, 2, 7, 7, 4)
    phi = lambda x: torch.nn.functional.elu(x) + 1
    numerator = phi(q) @ (phi(k).transpose(-2, -1) @ v)
    denominator = phi(q) @ phi(k).sum(-2, keepdim=True).transpose(-2, -1) + 1e-6
    assert (structdiff.linear_attention(q, k, v) - numerator / denominator).abs().max() < 1e-10
    projection = structdiff.favor_projection(6, 4, dtype=torch.float64)
    assert projection.shape == (6, 4)
    small = qkv(1, 1, 5, 5, 4, seed=2)
    assert torch.autograd.gradcheck(lambda a, b, c: structdiff.linear_attention(a, b, c), small)
    assert torch.autograd.gradcheck(
        lambda a, b, c: structdiff.favor_attention(a, b, c, projection, "relu"), small)
    assert torch.autograd.gradcheck(lambda a, b, c: structdiff.diffusivity_simple(a, b, c), small)


def test_bad_input_raises_with_a_clear_message():
    p = structdiff.Pattern.from_edges(5, [(0, 1), (1, 0)])
    q, k, v = qkv(1, 1, 5, 5, 4)
    cases = [
        (lambda: structdiff.sparse_attention(q.long(), k, v, p), "must be float32 or float64"),
        (lambda: structdiff.sparse_attention(q, k.float(), v, p), "share one dtype"),
        (lambda: structdiff.sparse_attention(q[0], k, v, p), "must be (batch, heads, tokens, head_dim)"),
        (lambda: structdiff.sparse_attention(q, k[:, :, :4], v[:, :, :4], p),
         "pattern is 5x5 but the inputs have 5 queries and 4 keys"),
        (lambda: torch.ops.structdiff.sparse_attention(q[:, :, :4], k, v, p.row_offsets, p.col_indices, 1.0),
         "row_offsets must be (1 or 1, 5) for 4 queries"),
        (lambda: structdiff.sparse_attention(q, k, v[..., :3], p), "V's head_dim (3) equal to Q's (4)"),
        (lambda: structdiff.sparse_attention(
            q, k, v, structdiff.Pattern(p.row_offsets, p.col_indices + 7, 5)), "out of range for 5 keys"),
        (lambda: structdiff.sparse_attention(
            q, k, v, structdiff.Pattern(p.row_offsets.flip(1), p.col_indices, 5)), "start at"),
        (lambda: structdiff.sparse_attention(
            q, k, v, structdiff.Pattern(p.row_offsets.int(), p.col_indices, 5)), "must be an int64 tensor"),
        (lambda: structdiff.sparse_attention(
            q, k, v, structdiff.Pattern(p.row_offsets.to("meta"), p.col_indices, 5)),
         "pattern row_offsets is on meta but the inputs are on cpu"),
        (lambda: structdiff.sparse_attention(q.to("meta"), k.to("meta"), v.to("meta"), p.to("meta")),
         "structdiff's operators run on the CPU so far, not meta"),
        (lambda: structdiff.Pattern.from_edges(3, [(0, 5)]), "edge 0 (0, 5) has an endpoint outside [0, 3)"),
        (lambda: structdiff.Pattern.from_graph_spec({"arrays": [{"nmae": "x", "shape": [2]}]}), "nmae"),
        (lambda: structdiff.Pattern.of_problem("sudoku", [10]), "a square of 2..5"),
        (lambda: structdiff.Pattern.tracformer_encoder(8, 1, 3, "middle"), "'prefix' or 'suffix'"),
        (lambda: structdiff.favor_attention(q, k, v, torch.ones(6, 4, dtype=torch.float64), "tanh"),
         "'softmax' or 'relu'"),
        (lambda: structdiff.load_model_file("/nonexistent.pt"), "does not exist"),
        (lambda: structdiff.load_model_file("/dev/null"), "/dev/null is not a regular file"),
    ]
    for call, fragment in cases:
        with pytest.raises((ValueError, RuntimeError)) as error:
            call()
        assert fragment in str(error.value), (fragment, str(error.value))
        assert "Exception raised from" not in str(error.value)
    with pytest.raises(TypeError):
        structdiff.sparse_attention(q, k, v, "not a pattern")
    # Fractions are refused, not cut to the integer below; so are empty heads and NaN scales.
    with pytest.raises(TypeError, match="edges must be .query, key. pairs of ints, got torch.float"):
        structdiff.Pattern.from_edges(5, [(0.5, 1.7)])
    with pytest.raises(ValueError, match="q has head_dim 0"):
        structdiff.sparse_attention(q[..., :0], k[..., :0], v[..., :0], p)
    with pytest.raises(ValueError, match="scale must be a finite number, got nan"):
        structdiff.sparse_attention(q, k, v, p, scale=float("nan"))
    with pytest.raises(ValueError, match=r"num_nodes must be in 0 \.\. 2\*\*63 - 1, got -1"):
        structdiff.Pattern.from_edges(-1, [])


RAW_TEXT = ("Exception raised from", "json.exception", "PytorchStreamReader", "bad_alloc",
            "enforce fail", "Traceback", "c10::")
HOSTILE = [float("nan"), float("inf"), -float("inf"), -1, 0, 10**12, 10**30, 2.5, "x", None, True,
           [1, 2], torch.zeros(3, dtype=torch.long)]


def public_calls():
    """Each public function of the package with arguments it accepts, by name."""
    q, k, v = (t.detach() for t in qkv(1, 2, 5, 5, 4))
    p = structdiff.Pattern.from_edges(5, [(0, 1), (1, 0), (2, 2)])
    projection = structdiff.favor_projection(8, 4, dtype=torch.float64)
    return [
        (structdiff.Pattern.from_edges, dict(num_nodes=5, edges=[(0, 1)], symmetrize=False, self_edges=False)),
        (structdiff.Pattern.from_graph_spec, dict(spec={"arrays": [{"name": "x", "shape": [2]}]})),
        (structdiff.Pattern.of_problem, dict(problem="sorting", size=[3], intermediates=True, variant="")),
        (structdiff.Pattern.tracformer_encoder, dict(tokens=16, layer=1, n_max=3, direction="prefix")),
        (structdiff.Pattern.tracformer_decoder, dict(tokens=16, num_layers=2, layer=1, direction="prefix")),
        (structdiff.Pattern.causal, dict(n=6)),
        (structdiff.Pattern.sliding_window, dict(n=6, left=1, right=1)),
        (structdiff.Pattern, dict(row_offsets=p.row_offsets, col_indices=p.col_indices, num_keys=5)),
        (structdiff.Pattern.stack, dict(patterns=[p, p])),
        (structdiff.sparse_attention, dict(q=q, k=k, v=v, pattern=p, scale=0.5)),
        (structdiff.SparseAttention, dict(pattern=p, scale=None)),
        (structdiff.linear_attention, dict(q=q, k=k, v=v, eps=1e-6)),
        (structdiff.favor_projection, dict(num_features=8, head_dim=4, orthogonal=True, seed=0, dtype=torch.float64)),
        (structdiff.favor_attention, dict(q=q, k=k, v=v, projection=projection, kernel="softmax", eps=1e-4)),
        (structdiff.diffusivity_simple, dict(q=q, k=k, v=v, norm="per_node")),
        (structdiff.load_model_file, dict(path=os.path.join(SOURCE, "models", "gsdm-sorting5.pt"))),
        *gsdm_calls(),
    ]


def gsdm_calls():
    """The GSDM denoiser's entry points: loading a model file, building one, a forward pass."""
    path = os.path.join(SOURCE, "models", "gsdm-sorting5.pt")
    model = Gsdm.from_model_file(path)
    _, metadata = structdiff.load_model_file(path)
    structure = torch.ops.structdiff.gsdm_structure(json.dumps(metadata))
    return [
        (Gsdm.from_model_file, dict(path=path)),
        (Gsdm, dict(config=metadata["config"]["model"], structure=structure, table_rows=model.node_table.weight.shape[0])),
        (model.forward, dict(x_t=torch.randn(2, model.width), t=torch.tensor([3, 7]),
                             observed=torch.zeros(2, model.num_nodes, dtype=torch.bool))),
    ]


@pytest.mark.parametrize("function, arguments", public_calls(), ids=lambda x: getattr(x, "__qualname__", ""))
def test_every_argument_refuses_hostile_values_in_one_line(function, arguments):
    """The Python API's fuzzer: each argument of each public function, in turn, gets each hostile
    value; the call succeeds or raises TypeError / ValueError with one line of structdiff's words,
    in bounded time (a huge size is refused before allocating, not tried)."""
    function(**arguments)  # the arguments themselves are fine
    for name in arguments:
        for value in HOSTILE:
            started = time.monotonic()
            try:
                function(**{**arguments, name: value})
            except (TypeError, ValueError) as error:
                message = str(error)
                assert "\n" not in message.strip(), (name, value, message)
                assert not any(raw in message for raw in RAW_TEXT), (name, value, message)
            assert time.monotonic() - started < 10, (name, value)
