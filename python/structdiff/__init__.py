"""structdiff from PyTorch: the structure of a problem as an attention pattern.

    import torch, structdiff
    p = structdiff.Pattern.from_edges(5, [(0, 1), (1, 0), (2, 2)])   # (query, key) pairs
    out = structdiff.sparse_attention(q, k, v, p)   # (batch, heads, tokens, dim), 1/sqrt(dim)

The operators (torch.ops.structdiff.*) are structdiff's C++ kernels, in the shared library that
`pip install .` builds against the torch of the environment and installs beside this package.
Bad input raises TypeError (a wrong kind of argument) or ValueError (a wrong value) with a
one-line message.
"""
import json
import math
import numbers
import operator
import os

import torch

_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libstructdiff_ops.so")
if not os.path.exists(_LIBRARY):
    raise ImportError(f"{_LIBRARY} is missing: install the package with `pip install .` from a "
                      "structdiff checkout (see the README)")
torch.ops.load_library(_LIBRARY)
_ops = torch.ops.structdiff

__all__ = [
    "version",
    "Pattern",
    "sparse_attention",
    "SparseAttention",
    "linear_attention",
    "favor_attention",
    "favor_projection",
    "diffusivity_simple",
    "load_model_file",
]


def _shown(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(name, value, minimum):
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {_shown(value)}") from None
    if not minimum <= value < 2**63:
        raise ValueError(f"{name} must be in {minimum} .. 2**63 - 1, got {_shown(value)}")
    return value


def _float(name, value, positive=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {_shown(value)}")
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0):
        raise ValueError(f"{name} must be a finite number{' > 0' if positive else ''}, got {value}")
    return value


def _flag(name, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {type(value).__name__} {_shown(value)}")


def _tensor(name, value):
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def _text(name, value):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {_shown(value)}")
    return value


def _qkv(q, k, v):
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        _tensor(name, tensor)
        if tensor.dim() == 4 and tensor.shape[-1] == 0:
            raise ValueError(f"{name} has head_dim 0; attention needs at least one feature")


def version():
    """The operator library's build: "structdiff <commit> libtorch <version> cuda-kernels yes|no",
    as `structdiff --version` prints it."""
    return _ops.version()


class Pattern:
    """Which keys each query attends to: CSR tensors (row_offsets (P, queries + 1), absolute into
    col_indices), one pattern shared by a batch (P = 1) or one per batch element."""

    def __init__(self, row_offsets, col_indices, num_keys):
        self.row_offsets = _tensor("row_offsets", row_offsets)
        self.col_indices = _tensor("col_indices", col_indices)
        self.num_keys = _int("num_keys", num_keys, 0)

    @property
    def num_queries(self):
        return self.row_offsets.shape[1] - 1

    @property
    def num_entries(self):
        return self.col_indices.numel()

    def to(self, device):
        return Pattern(self.row_offsets.to(device), self.col_indices.to(device), self.num_keys)

    def dense_mask(self):
        """(P, queries, keys) bool: True where a query attends to a key."""
        patterns = self.row_offsets.shape[0]
        mask = torch.zeros(patterns, self.num_queries, self.num_keys, dtype=torch.bool)
        offsets, cols = self.row_offsets.cpu(), self.col_indices.cpu()
        for p in range(patterns):
            for row in range(self.num_queries):
                mask[p, row, cols[offsets[p, row]:offsets[p, row + 1]]] = True
        return mask

    @staticmethod
    def stack(patterns):
        """One pattern per batch element, from patterns of equal shape."""
        if not isinstance(patterns, (list, tuple)) or not all(isinstance(p, Pattern) for p in patterns):
            raise TypeError("Pattern.stack takes a list of structdiff.Pattern")
        if not patterns:
            raise ValueError("Pattern.stack needs at least one pattern")
        shape = (patterns[0].num_queries, patterns[0].num_keys)
        rows, cols, base = [], [], 0
        for p in patterns:
            if (p.num_queries, p.num_keys) != shape or p.row_offsets.shape[0] != 1:
                raise ValueError("Pattern.stack takes single patterns of one shape")
            rows.append(p.row_offsets + base)
            cols.append(p.col_indices)
            base += p.num_entries
        return Pattern(torch.cat(rows), torch.cat(cols), shape[1])

    @classmethod
    def from_edges(cls, num_nodes, edges, symmetrize=False, self_edges=False):
        """Directed (query, key) pairs over num_nodes nodes; duplicates merge."""
        num_nodes = _int("num_nodes", num_nodes, 0)
        if not isinstance(edges, torch.Tensor):
            try:
                edges = torch.as_tensor(edges)
            except (TypeError, ValueError, RuntimeError) as error:
                raise TypeError("edges must be (query, key) pairs of ints: "
                                + str(error).splitlines()[0]) from None
        if edges.numel() == 0:
            edges = edges.reshape(0, 2)
        if edges.is_floating_point() or edges.is_complex() or edges.dtype == torch.bool:
            raise TypeError(f"edges must be (query, key) pairs of ints, got {edges.dtype} values "
                            "(a fraction would be cut to an integer node)")
        if edges.dim() != 2 or edges.shape[1] != 2:
            raise ValueError(f"edges must be (query, key) pairs, shape (E, 2), got {tuple(edges.shape)}")
        return cls(*_ops.pattern_from_edges(num_nodes, edges.long(), _flag("symmetrize", symmetrize),
                                            _flag("self_edges", self_edges)))

    @classmethod
    def from_graph_spec(cls, spec):
        """A graphical model's attention mask: a JSON spec file (docs/gsdm-spec.md), or its text."""
        if isinstance(spec, dict):
            try:
                spec = json.dumps(spec, allow_nan=False)
            except (TypeError, ValueError) as error:
                raise ValueError(f"the spec cannot be written as JSON: {error}") from None
        elif isinstance(spec, os.PathLike):
            spec = os.fspath(spec)
        return cls(*_ops.pattern_from_graph_spec(_text("spec", spec)))

    @classmethod
    def of_problem(cls, problem, size=(), intermediates=True, variant=""):
        """The mask of a GSDM problem of the registry, e.g. ("sudoku", [9]) or ("bcmf", [8, 8, 4])."""
        if isinstance(size, (str, bytes)) or not isinstance(size, (list, tuple)):
            raise TypeError(f"size must be a list of ints, got {type(size).__name__} {_shown(size)}")
        size = [_int("size", n, 0) for n in size]
        return cls(*_ops.pattern_of_problem(_text("problem", problem), size, _flag("intermediates", intermediates),
                                            _text("variant", variant)))

    @classmethod
    def tracformer_encoder(cls, tokens, layer, n_max, direction="prefix"):
        return cls(*_ops.pattern_tracformer_encoder(_int("tokens", tokens, 0), _int("layer", layer, 0),
                                                    _int("n_max", n_max, 0), _text("direction", direction)))

    @classmethod
    def tracformer_decoder(cls, tokens, num_layers, layer, direction="prefix"):
        return cls(*_ops.pattern_tracformer_decoder(
            _int("tokens", tokens, 0), _int("num_layers", num_layers, 0), _int("layer", layer, 0),
            _text("direction", direction)))

    @classmethod
    def causal(cls, n):
        return cls(*_ops.pattern_causal(_int("n", n, 0)))

    @classmethod
    def sliding_window(cls, n, left, right):
        return cls(*_ops.pattern_sliding_window(_int("n", n, 0), _int("left", left, 0),
                                                _int("right", right, 0)))

    def __repr__(self):
        return (f"Pattern({self.row_offsets.shape[0]} x {self.num_queries} queries x "
                f"{self.num_keys} keys, {self.num_entries} entries)")


def sparse_attention(q, k, v, pattern, scale=None):
    """Softmax attention of each query over its pattern's keys, fused (no dense scores).

    q: (batch, heads, queries, dim); k, v: (batch, heads, keys, dim); float32 or float64.
    scale: the logits' factor, 1/sqrt(dim) by default. Differentiable in q, k and v."""
    _qkv(q, k, v)
    if not isinstance(pattern, Pattern):
        raise TypeError("pattern must be a structdiff.Pattern")
    for name, tensor in (("k", k), ("v", v), ("pattern row_offsets", pattern.row_offsets),
                         ("pattern col_indices", pattern.col_indices)):
        if tensor.device != q.device:
            raise ValueError(f"{name} is on {tensor.device} but the inputs are on {q.device}")
    if q.device.type != "cpu":
        raise ValueError(f"structdiff's operators run on the CPU so far, not {q.device} "
                         "(the CUDA kernel is the C++ library's)")
    if q.dim() == 4 and k.dim() == 4 and (q.shape[2], k.shape[2]) != (pattern.num_queries, pattern.num_keys):
        raise ValueError(f"pattern is {pattern.num_queries}x{pattern.num_keys} but the inputs have "
                         f"{q.shape[2]} queries and {k.shape[2]} keys")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else _float("scale", scale)
    return _ops.sparse_attention(q, k, v, pattern.row_offsets, pattern.col_indices, scale)


class SparseAttention(torch.nn.Module):
    """sparse_attention over a fixed pattern, as a module (the pattern moves with .to())."""

    def __init__(self, pattern, scale=None):
        super().__init__()
        if not isinstance(pattern, Pattern):
            raise TypeError("pattern must be a structdiff.Pattern")
        self.pattern = pattern
        self.scale = scale
        self.register_buffer("row_offsets", pattern.row_offsets, persistent=False)
        self.register_buffer("col_indices", pattern.col_indices, persistent=False)

    def forward(self, q, k, v):
        pattern = Pattern(self.row_offsets, self.col_indices, self.pattern.num_keys)
        return sparse_attention(q, k, v, pattern, self.scale)


def linear_attention(q, k, v, eps=1e-6):
    """Katharopoulos et al.: phi = elu + 1, linear in the number of tokens."""
    _qkv(q, k, v)
    return _ops.linear_attention(q, k, v, _float("eps", eps, positive=True))


def favor_projection(num_features, head_dim, orthogonal=True, seed=0, dtype=torch.float32):
    """FAVOR+ random features (num_features, head_dim), orthogonal blocks by default."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {type(dtype).__name__} {_shown(dtype)}")
    return _ops.favor_projection(_int("num_features", num_features, 1), _int("head_dim", head_dim, 1),
                                 _flag("orthogonal", orthogonal), _int("seed", seed, 0), dtype)


def favor_attention(q, k, v, projection, kernel="softmax", eps=1e-4):
    """Performer's FAVOR+ (softmax or relu kernel) with the given random features."""
    _qkv(q, k, v)
    return _ops.favor_attention(q, k, v, _tensor("projection", projection), _text("kernel", kernel),
                                _float("eps", eps, positive=True))


def diffusivity_simple(q, k, v, norm="per_node"):
    """DIFFormer's simple diffusivity 1 + q~.k~, row-normalised, in linear time."""
    _qkv(q, k, v)
    return _ops.diffusivity_simple(q, k, v, _text("norm", norm))


def load_model_file(path):
    """A structdiff model file (any kind) as (state_dict, metadata): the weights by the C++
    module's names, and the file's metadata (kind, configuration, provenance)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if not os.path.exists(path):
        raise ValueError(f"model file {os.fspath(path)} does not exist")
    if not os.path.isfile(path):
        raise ValueError(f"model file {os.fspath(path)} is not a regular file (a directory, pipe or device)")
    metadata, names, tensors = _ops.read_model_file(os.fspath(path))
    return dict(zip(names, tensors)), json.loads(metadata)


from . import gsdm  # noqa: E402  (the GSDM denoiser, on the operators above)
