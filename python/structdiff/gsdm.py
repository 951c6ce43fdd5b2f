"""The GSDM denoiser in PyTorch, module for module and name for name as structdiff's C++ one
(src/models/gsdm.cpp), so a model file's weights load with load_state_dict and give the C++
outputs:

    model = structdiff.gsdm.Gsdm.from_model_file("models/sudoku9.pt")
    x0_estimate = model(x_t, t, observed)   # (batch, width), (batch,) int64, (batch, nodes) bool
"""
import json
import math

import torch
import torch.nn.functional as F

from . import Pattern, _ops, load_model_file, sparse_attention


def sinusoidal_embedding(positions, dim):
    """The transformer spacing of structdiff::sinusoidal_embedding, in its float32 operation order."""
    half = dim // 2
    index = torch.arange(half, dtype=torch.float32, device=positions.device)
    frequencies = torch.exp(-math.log(10000.0) * index / max(half, 1))
    angles = positions.to(torch.float32).unsqueeze(1) * frequencies.unsqueeze(0)
    code = torch.cat([torch.sin(angles), torch.cos(angles)], 1)
    return F.pad(code, (0, 1)) if dim % 2 == 1 else code


class TokenNorm(torch.nn.Module):
    """LayerNorm per token, or the reference's GroupNorm over all tokens."""

    def __init__(self, kind, dim):
        super().__init__()
        self.kind = kind
        if kind == "token":
            self.layer_norm = torch.nn.LayerNorm(dim)
        else:
            self.group_norm = torch.nn.GroupNorm(math.gcd(dim, 32), dim)

    def forward(self, h):  # (batch, nodes, dim)
        if self.kind == "token":
            return self.layer_norm(h)
        return self.group_norm(h.transpose(1, 2)).transpose(1, 2)


class ResBlock(torch.nn.Module):
    def __init__(self, dim, norm):
        super().__init__()
        self.norm1, self.norm2 = TokenNorm(norm, dim), TokenNorm(norm, dim)
        self.linear1, self.linear2 = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)
        self.time_proj, self.node_proj = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)

    def forward(self, h, time_embedding, node_embedding):
        a = (self.linear1(F.silu(self.norm1(h))) + self.time_proj(time_embedding).unsqueeze(1)
             + self.node_proj(node_embedding).unsqueeze(0))
        return h + self.linear2(F.silu(self.norm2(a)))


class AttentionBlock(torch.nn.Module):
    def __init__(self, dim, heads, norm, scaled):
        super().__init__()
        self.heads = heads
        self.scale = (1.0 / math.sqrt(dim // heads)) if scaled else 1.0
        self.norm = TokenNorm(norm, dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, h, pattern):
        batch, nodes, dim = h.shape
        qkv = self.qkv(self.norm(h)).view(batch, nodes, 3, self.heads, dim // self.heads)
        q, k, v = (part.transpose(1, 2) for part in qkv.unbind(2))  # one stack in backward
        if pattern is None:  # dense attention: every node attends to every node
            scores = q @ k.transpose(-2, -1) * self.scale
            attended = torch.softmax(scores, -1) @ v
        else:
            attended = sparse_attention(q, k, v, pattern, self.scale)
        return h + self.out(attended.transpose(1, 2).reshape(batch, nodes, dim))


GSDM_KINDS = ("gsdm", "sudoku")
# Weights the constructor may allocate for its node table: the C++ model's own limit on nodes
# times a wide model, so a hostile table_rows is refused before allocating.
MAX_TABLE_ELEMENTS = 2**31


def _check_arguments(config, structure, table_rows):
    if not isinstance(config, dict):
        raise TypeError(f"config must be a model file's \"model\" dict, got {type(config).__name__}")
    for key in ("dim", "heads", "blocks"):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"config[{key!r}] must be a positive int, got {value!r}")
    if config.get("norm") not in ("token", "group") or config.get("attention") is None:
        raise ValueError("config needs \"norm\" (token or group) and \"attention\"")
    if not isinstance(structure, (tuple, list)) or len(structure) != 5:
        raise TypeError("structure must be the 5 items of torch.ops.structdiff.gsdm_structure, got "
                        f"{type(structure).__name__}")
    if isinstance(table_rows, bool) or not isinstance(table_rows, int):
        raise TypeError(f"table_rows must be an int, got {type(table_rows).__name__}")
    if not 1 <= table_rows <= MAX_TABLE_ELEMENTS // config["dim"]:
        raise ValueError(f"table_rows must be in 1 .. {MAX_TABLE_ELEMENTS // config['dim']} for dim "
                         f"{config['dim']}, got {table_rows}")


class Gsdm(torch.nn.Module):
    """config: a model file's config["model"]; structure: torch.ops.structdiff.gsdm_structure
    of its metadata (pattern and variable groups)."""

    def __init__(self, config, structure, table_rows):
        super().__init__()
        _check_arguments(config, structure, table_rows)
        dim, heads, norm = config["dim"], config["heads"], config["norm"]
        # Files written before these switches have the defaults.
        scaled = config.get("attention_scaling", "inverse-sqrt-dim") == "inverse-sqrt-dim"
        self.time_swish = config.get("time_swish", False)
        row_offsets, col_indices, groups, nodes, entries = structure
        self.dim = dim
        self.pattern = (None if config["attention"] == "dense"
                        else Pattern(row_offsets, col_indices, row_offsets.shape[1] - 1))
        self.groups = [(int(g[0]), bool(g[1]), int(g[2]), n, e)
                       for g, n, e in zip(groups.tolist(), nodes, entries)]
        self.num_nodes = row_offsets.shape[1] - 1
        self.width = sum(e.numel() for e in entries)
        widths = {}
        for width, _, projection, _, _ in self.groups:
            widths[projection] = width
        self.input_proj = torch.nn.ModuleList(
            [torch.nn.Linear(widths[p], dim) for p in range(len(widths))])
        self.output_proj = torch.nn.ModuleList(
            [torch.nn.Linear(dim, widths[p]) for p in range(len(widths))])
        self.register_buffer("embedding_index", torch.zeros(self.num_nodes, dtype=torch.long))
        self.register_buffer("sinusoidal_codes", torch.zeros(self.num_nodes, dim))
        self.node_table = torch.nn.Embedding(table_rows, dim)
        self.observed_embedding = torch.nn.Parameter(torch.zeros(dim))
        self.time_in, self.time_out = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)
        for i in range(config["blocks"]):
            self.add_module(f"res{i}", ResBlock(dim, norm))
            self.add_module(f"attn{i}", AttentionBlock(dim, heads, norm, scaled))
        self.blocks = config["blocks"]
        self.final_norm = TokenNorm(norm, dim) if config.get("output_norm", True) else None

    @classmethod
    def from_model_file(cls, path):
        state_dict, metadata = load_model_file(path)
        if metadata.get("kind") not in GSDM_KINDS:
            raise ValueError(f"{path} is a {metadata.get('kind')!r} model file, not a GSDM one "
                             f"(kind {' or '.join(GSDM_KINDS)})")
        structure = _ops.gsdm_structure(json.dumps(metadata))
        model = cls(metadata["config"]["model"], structure, state_dict["node_table.weight"].shape[0])
        model.load_state_dict(state_dict)
        model.metadata = metadata
        return model.eval()

    def _check_inputs(self, x_t, t, observed):
        for name, value in (("x_t", x_t), ("t", t), ("observed", observed)):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if not x_t.is_floating_point() or x_t.dim() != 2 or x_t.shape[1] != self.width:
            raise ValueError(f"x_t must be a floating (batch, {self.width}) tensor, got "
                             f"{x_t.dtype} {tuple(x_t.shape)}")
        batch = x_t.shape[0]
        if t.is_floating_point() or t.is_complex() or tuple(t.shape) != (batch,):
            raise ValueError(f"t must be an integer ({batch},) tensor of diffusion steps, got "
                             f"{t.dtype} {tuple(t.shape)}")
        if tuple(observed.shape) != (batch, self.num_nodes):
            raise ValueError(f"observed must be a ({batch}, {self.num_nodes}) tensor, got "
                             f"{tuple(observed.shape)}")

    def forward(self, x_t, t, observed):
        self._check_inputs(x_t, t, observed)
        batch = x_t.shape[0]
        h = torch.zeros(batch, self.num_nodes, self.dim, dtype=x_t.dtype, device=x_t.device)
        for width, _, projection, nodes, entries in self.groups:
            values = x_t.index_select(1, entries.to(x_t.device)).view(batch, nodes.numel(), width)
            h = h.index_copy(1, nodes.to(x_t.device), self.input_proj[projection](values))
        h = h + observed.unsqueeze(-1).to(h.dtype) * self.observed_embedding
        time_embedding = self.time_out(F.silu(self.time_in(sinusoidal_embedding(t, self.dim))))
        if self.time_swish:  # the same input to every block's time projection: swish once
            time_embedding = F.silu(time_embedding)
        node_embedding = self.node_table(self.embedding_index) + self.sinusoidal_codes
        pattern = None if self.pattern is None else self.pattern.to(x_t.device)
        for i in range(self.blocks):
            h = getattr(self, f"res{i}")(h, time_embedding, node_embedding)
            h = getattr(self, f"attn{i}")(h, pattern)
        if self.final_norm is not None:
            h = F.silu(self.final_norm(h))
        out = torch.zeros(batch, self.width, dtype=x_t.dtype, device=x_t.device)
        for _, discrete, projection, nodes, entries in self.groups:
            prediction = self.output_proj[projection](h.index_select(1, nodes.to(x_t.device)))
            if discrete:
                prediction = torch.softmax(prediction, -1)
            out = out.index_copy(1, entries.to(x_t.device), prediction.reshape(batch, -1))
        return out
