"""PyTorch's module paths over trainkit's objects: ``torch.nn.modules.rnn.LSTM``, ``torch.utils.data.dataloader``,
``torch.backends.*`` flags, ``torch.jit`` and ``torch.hub`` as programs use them."""

from __future__ import annotations

import importlib

import pytest

import trainkit

SAME = [
    ("trainkit.nn.modules.module", "Module", trainkit.nn.Module),
    ("trainkit.nn.modules.linear", "Linear", trainkit.nn.Linear),
    ("trainkit.nn.modules.conv", "Conv2d", trainkit.nn.Conv2d),
    ("trainkit.nn.modules.rnn", "LSTM", trainkit.nn.LSTM),
    ("trainkit.nn.modules.activation", "ReLU", trainkit.nn.ReLU),
    ("trainkit.nn.modules.activation", "MultiheadAttention", trainkit.nn.MultiheadAttention),
    ("trainkit.nn.modules.container", "Sequential", trainkit.nn.Sequential),
    ("trainkit.nn.modules.dropout", "Dropout", trainkit.nn.Dropout),
    ("trainkit.nn.modules.normalization", "LayerNorm", trainkit.nn.LayerNorm),
    ("trainkit.nn.modules.batchnorm", "BatchNorm2d", trainkit.nn.BatchNorm2d),
    ("trainkit.nn.modules.pooling", "MaxPool2d", trainkit.nn.MaxPool2d),
    ("trainkit.nn.modules.sparse", "Embedding", trainkit.nn.Embedding),
    ("trainkit.nn.modules.transformer", "TransformerEncoderLayer", trainkit.nn.TransformerEncoderLayer),
    ("trainkit.nn.modules.loss", "CrossEntropyLoss", trainkit.nn.CrossEntropyLoss),
    ("trainkit.nn.modules.loss", "_Loss", trainkit.layers.loss._Loss),
    ("trainkit.nn.modules.flatten", "Flatten", trainkit.nn.Flatten),
    ("trainkit.nn.modules", "Linear", trainkit.nn.Linear),
    ("trainkit.nn.parameter", "Parameter", trainkit.nn.Parameter),
    ("trainkit.nn.utils.clip_grad", "clip_grad_norm_", trainkit.nn.utils.clip_grad_norm_),
    ("trainkit.nn.utils.rnn", "pad_sequence", trainkit.nn.utils.rnn.pad_sequence),
    ("trainkit.utils.data", "DataLoader", trainkit.data.DataLoader),
    ("trainkit.utils.data.dataloader", "DataLoader", trainkit.data.DataLoader),
    ("trainkit.utils.data.dataloader", "default_collate", trainkit.data.default_collate),
    ("trainkit.utils.data.dataset", "TensorDataset", trainkit.data.TensorDataset),
    ("trainkit.utils.data.dataset", "random_split", trainkit.data.random_split),
    ("trainkit.utils.data.sampler", "RandomSampler", trainkit.data.RandomSampler),
    ("trainkit.autograd.function", "Function", trainkit.autograd.Function),
    ("trainkit.autograd.grad_mode", "no_grad", trainkit.no_grad),
    ("trainkit.autograd.functional", "jacobian", trainkit.autograd.functional.jacobian),
]


@pytest.mark.parametrize("module,name,obj", SAME, ids=[f"{m}.{n}" for m, n, _ in SAME])
def test_pytorch_paths_are_the_same_objects(module, name, obj):
    assert getattr(importlib.import_module(module), name) is obj


def test_every_class_of_nn_modules_is_pytorchs_path_of_it(torch):
    for name in ("rnn", "linear", "conv", "loss", "activation", "container", "pooling", "sparse"):
        ours = importlib.import_module(f"trainkit.nn.modules.{name}")
        theirs = importlib.import_module(f"torch.nn.modules.{name}")
        for attr in ours.__all__:
            assert hasattr(theirs, attr), f"torch.nn.modules.{name} has no {attr}"


def test_utils_data_keeps_the_names_of_trainkit_data():
    for name in trainkit.data.__all__:
        assert getattr(trainkit.utils.data, name) is getattr(trainkit.data, name)


def test_backend_flags_are_settable_with_pytorchs_defaults(torch):
    cudnn, cuda = trainkit.backends.cudnn, trainkit.backends.cuda
    for flag in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(cudnn, flag) == getattr(torch.backends.cudnn, flag), flag
    for flag in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        assert getattr(cuda.matmul, flag) == getattr(torch.backends.cuda.matmul, flag), flag
    saved = cudnn.benchmark, cudnn.deterministic, cuda.matmul.allow_tf32
    try:
        cudnn.benchmark, cudnn.deterministic, cuda.matmul.allow_tf32 = True, True, True
        assert (cudnn.benchmark, cudnn.deterministic, cuda.matmul.allow_tf32) == (True, True, True)
    finally:
        cudnn.benchmark, cudnn.deterministic, cuda.matmul.allow_tf32 = saved
    with pytest.raises(AttributeError, match="Unknown attribute allow_tf64"):
        cuda.matmul.allow_tf64 = True
    assert trainkit.backends.mps.is_available() is False and trainkit.backends.mps.is_built() is False
    assert trainkit.backends.cudnn.is_available() is False
    with cudnn.flags(enabled=False):
        assert cudnn.enabled is False
    assert cudnn.enabled is True
    assert isinstance(trainkit.backends.mkldnn.is_available(), bool)
    assert trainkit.backends.opt_einsum.strategy == "auto"


def test_jit_refuses_to_compile_and_its_decorators_pass_through():
    model = trainkit.nn.Linear(2, 2)
    for compile_ in (trainkit.jit.script, trainkit.jit.trace):
        with pytest.raises(RuntimeError, match="trainkit has no TorchScript.*call the module or function directly"):
            compile_(model)

    def f(x):
        return x

    assert trainkit.jit.ignore(f) is f and trainkit.jit.ignore(drop=True)(f) is f and trainkit.jit.unused(f) is f
    assert not trainkit.jit.is_scripting() and not trainkit.jit.is_tracing()


def test_hub_refuses_clearly():
    with pytest.raises(RuntimeError, match=r"torch.hub.load\('pytorch/vision', 'resnet18'\).*trainkit.load"):
        trainkit.hub.load("pytorch/vision", "resnet18")
    with pytest.raises(RuntimeError, match="does not download"):
        trainkit.hub.load_state_dict_from_url("https://example.com/w.pth")


def test_onnx_imports_and_exports():
    pytest.importorskip("onnx")
    assert trainkit.onnx.is_in_onnx_export() is False
    program = trainkit.onnx.export(trainkit.nn.Linear(2, 2), (trainkit.zeros(1, 2),), None)
    assert program.model_proto.graph.node[0].op_type == "Gemm"


def test_multihead_attention_out_proj_class_has_pytorchs_path():
    attention = trainkit.nn.MultiheadAttention(4, 2)
    linear = importlib.import_module("trainkit.nn.modules.linear")
    assert type(attention.out_proj) is linear.NonDynamicallyQuantizableLinear
