"""Model files in Python: every shipped model's weights load by name; the GSDM denoiser in PyTorch
gives the C++ denoiser's outputs; `structdiff export` writes files PyTorch reads without
structdiff."""
import json
import os
import struct
import subprocess

import pytest
import torch

import structdiff
from structdiff.gsdm import Gsdm

SOURCE = os.environ.get("STRUCTDIFF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("STRUCTDIFF_BINARY", os.path.join(SOURCE, "build", "src", "structdiff"))


def shipped(name):
    return os.path.join(SOURCE, "models", name)


@pytest.mark.parametrize("name, kind", [
    ("sudoku9.pt", "sudoku"), ("sudoku9-gaussian.pt", "sudoku"), ("gsdm-sorting5.pt", "gsdm"), ("ddpm-fashion-mnist.pt", "ddpm"),
    ("ddpm-mnist.pt", "ddpm"), ("tracformer-kjv.pt", "tracformer"), ("unn-mnist.pt", "unn-conv"),
    ("unn-parser-en-partut.pt", "unn-parser"), ("classifier-mnist.pt", "classifier"),
    ("classifier-fashion-mnist.pt", "classifier"),
])
def test_every_shipped_model_loads_as_a_state_dict(name, kind):
    state_dict, metadata = structdiff.load_model_file(shipped(name))
    # One layout whatever the file's age: the configuration that builds the model under "config".
    assert metadata["kind"] == kind or (kind == "sudoku" and metadata["config"]["problem"] == "sudoku")
    assert isinstance(metadata["config"], dict) and metadata["config"]
    assert state_dict and all(isinstance(t, torch.Tensor) for t in state_dict.values())


def random_inputs(model, batch, seed):
    g = torch.Generator().manual_seed(seed)
    x_t = torch.randn(batch, model.width, generator=g)
    t = torch.randint(0, 1000, (batch,), generator=g)
    observed = torch.rand(batch, model.num_nodes, generator=g) < 0.4
    return x_t, t, observed


@pytest.mark.parametrize("name", ["sudoku9.pt", "gsdm-sorting5.pt"])
def test_the_gsdm_in_python_gives_the_cpp_outputs(name):
    model = Gsdm.from_model_file(shipped(name))
    x_t, t, observed = random_inputs(model, 4, seed=1)
    # The C++ conditioning writes the observed values into x_t before the network; the denoiser
    # itself is compared here, on the same inputs.
    with torch.no_grad():
        ours = model(x_t, t, observed)
    reference = torch.ops.structdiff.gsdm_denoise(shipped(name), x_t, t, observed)
    assert ours.shape == reference.shape
    assert (ours - reference).abs().max() < 1e-5


# (With GroupNorm over these 16 channels, one channel per group, the time embedding, constant over
# the tokens, is normalised away: the time path is switched with the token norm.)
@pytest.mark.parametrize("switches", [
    [], ["--attention-scaling", "none", "--output-head", "plain", "--time-path", "swish"],
    ["--norm", "group", "--attention", "dense"]])
def test_the_python_gsdm_follows_the_architecture_switches(tmp_path, switches):
    path = str(tmp_path / "tiny.pt")
    subprocess.run([BINARY, "--threads", "1", "sudoku", "train", "--size", "4", "--dim", "16",
                    "--blocks", "1", "--heads", "2", "--train-steps", "3", "--out", path] + switches,
                   check=True, capture_output=True)
    model = Gsdm.from_model_file(path)
    x_t, t, observed = random_inputs(model, 3, seed=3)
    with torch.no_grad():
        ours = model(x_t, t, observed)
    reference = torch.ops.structdiff.gsdm_denoise(path, x_t, t, observed)
    assert (ours - reference).abs().max() < 1e-5


def test_the_python_gsdm_is_differentiable_end_to_end():
    model = Gsdm.from_model_file(shipped("gsdm-sorting5.pt")).train()
    x_t, t, observed = random_inputs(model, 2, seed=2)
    model(x_t, t, observed).square().sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def read_safetensors(path):
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
        data = f.read()
    dtypes = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "BOOL": torch.bool}
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        tensor = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[entry["dtype"]])
        tensors[name] = tensor.reshape(entry["shape"])
    return tensors, header["__metadata__"]


@pytest.mark.parametrize("fmt", ["safetensors", "torch"])
def test_export_writes_files_pytorch_reads_without_structdiff(tmp_path, fmt):
    out = tmp_path / f"sudoku9.{fmt}"
    result = subprocess.run([BINARY, "export", "--model", shipped("sudoku9.pt"), "--format", fmt,
                             "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    expected, metadata = structdiff.load_model_file(shipped("sudoku9.pt"))
    if fmt == "safetensors":
        tensors, header_metadata = read_safetensors(out)
        assert json.loads(header_metadata["structdiff"]) == metadata
    else:
        # weights_only: the default of torch.load since PyTorch 2.6, and the safe way to load.
        document = torch.load(out, weights_only=True)
        tensors = document["state_dict"]
        assert json.loads(document["metadata"]) == metadata
    assert set(tensors) == set(expected)
    for name, tensor in expected.items():
        assert torch.equal(tensors[name], tensor), name
    model = Gsdm(metadata["config"]["model"], torch.ops.structdiff.gsdm_structure(json.dumps(metadata)),
                 tensors["node_table.weight"].shape[0])
    model.load_state_dict(tensors)


def test_export_refuses_what_it_cannot_write(tmp_path):
    result = subprocess.run([BINARY, "export", "--model", shipped("sudoku9.pt"), "--format", "onnx",
                             "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert result.returncode == 2 and "--format: onnx not in {safetensors,torch}" in result.stderr


def test_the_python_gsdm_names_a_model_file_of_another_kind():
    with pytest.raises(ValueError, match="is a 'ddpm' model file, not a GSDM one"):
        Gsdm.from_model_file(shipped("ddpm-fashion-mnist.pt"))
    model = Gsdm.from_model_file(shipped("gsdm-sorting5.pt"))
    x_t, t, observed = random_inputs(model, 2, seed=1)
    with pytest.raises(ValueError, match=r"t must be an integer \(2,\) tensor of diffusion steps"):
        model(x_t, t.float(), observed)
