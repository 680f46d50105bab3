"""The names of docs/pytorch-surface.md the differential test covers, and those it skips with the reason."""

from __future__ import annotations

import re
from pathlib import Path

SURFACE = Path(__file__).resolve().parents[2] / "docs" / "pytorch-surface.md"

# Section heading prefix in the surface page -> the prefix of op names in cases.py.
SECTIONS = {"## `trainkit` (": "torch.", "## `Tensor` methods": "Tensor.", "## `trainkit.nn.functional`": "F."}

_DTYPE = "a dtype, not a callable op"
_GRAD_MODE = "a grad-mode switch or query (context manager or global state), covered by test_autograd_semantics.py"
_RNG = "global random state, not an op on tensors"
_DEVICE = "a device or device query: the differential test runs on the CPU"
_OWN = "trainkit's own name, not in torch"
_ATTR = "autograd state read or set by the harness on every call (requires_grad, grad_fn, grad, is_leaf)"
_HOOK = "a hook registration, covered by test_autograd_extras.py"

SKIPPED: dict[str, str] = {
    "torch.finfo": "a dtype's limits, not an op on tensors; compared with torch.finfo by test_bfloat16.py",
    "torch.compile": "a compiler wrapper (the same numbers as eager by construction), covered by test_compile.py",
    "Tensor.pin_memory": "a copy for transfers to a GPU (torch refuses it without one), covered by test_tensor_api.py",
    "Tensor.bfloat16": "a bfloat16 result the harness cannot read from torch through NumPy; covered by "
    "test_bfloat16_ops.py",
    **{
        f"torch.{n}": "autocast's context manager or its thread-local state, covered by test_autocast.py"
        for n in (
            "autocast",
            "clear_autocast_cache",
            "get_autocast_dtype",
            "is_autocast_cache_enabled",
            "is_autocast_enabled",
            "set_autocast_cache_enabled",
            "set_autocast_dtype",
            "set_autocast_enabled",
        )
    },
    **{
        f"torch.{n}": "a legacy tensor type (constructor and isinstance), covered by test_torch_names.py"
        for n in (
            "BoolTensor",
            "ByteTensor",
            "CharTensor",
            "DoubleTensor",
            "FloatTensor",
            "HalfTensor",
            "IntTensor",
            "LongTensor",
            "ShortTensor",
        )
    },
    **{
        f"torch.{n}": "a process-wide setting, covered by test_torch_names.py"
        for n in (
            "are_deterministic_algorithms_enabled",
            "get_deterministic_debug_mode",
            "get_float32_matmul_precision",
            "get_num_threads",
            "is_deterministic_algorithms_warn_only_enabled",
            "set_deterministic_debug_mode",
            "set_float32_matmul_precision",
            "set_num_threads",
            "use_deterministic_algorithms",
        )
    },
    **{
        f"torch.{n}": _DTYPE
        for n in (
            "bool",
            "double",
            "dtype",
            "float",
            "bfloat16",
            "float16",
            "float32",
            "float64",
            "half",
            "int",
            "int16",
            "int32",
            "int64",
            "int8",
            "long",
            "short",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
        )
    },
    **{
        f"torch.{n}": _GRAD_MODE
        for n in ("enable_grad", "inference_mode", "is_grad_enabled", "no_grad", "set_grad_enabled")
    },
    **{
        f"torch.{n}": _RNG
        for n in ("Generator", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state")
    },
    **{
        f"torch.{n}": "random draws: compared with torch's for the same seed by test_rng_parity.py"
        for n in ("bernoulli", "normal", "randint_like")
    },
    **{
        f"Tensor.{n}": "random draws: compared with torch's for the same seed by test_rng_parity.py"
        for n in (
            "bernoulli",
            "bernoulli_",
            "cauchy_",
            "exponential_",
            "geometric_",
            "log_normal_",
            "normal_",
            "random_",
            "uniform_",
        )
    },
    "torch.device": _DEVICE,
    "torch.get_default_device": _DEVICE,
    "torch.set_default_device": _DEVICE,
    "torch.get_default_dtype": "global default-dtype state, covered by test_tensor_api.py",
    "torch.set_default_dtype": "global default-dtype state, covered by test_tensor_api.py",
    "torch.load": "file input/output, covered by test_serialization.py",
    "torch.save": "file input/output, covered by test_serialization.py",
    "torch.Size": "a class (results that are sizes are compared as tuples)",
    "torch.Tensor": "a class",
    "torch.Trainer": _OWN,
    "torch.summary": _OWN,
    "Tensor.backward": "called by the harness on every case that requires grad",
    "Tensor.cpu": _DEVICE,
    "Tensor.cuda": _DEVICE,
    "Tensor.device": _DEVICE,
    "Tensor.is_cuda": _DEVICE,
    "Tensor.dtype": "read by the harness on every result",
    "Tensor.requires_grad": _ATTR,
    "Tensor.grad_fn": _ATTR,
    "Tensor.grad": _ATTR,
    "Tensor.is_leaf": _ATTR,
    "Tensor.retains_grad": _HOOK,
    "Tensor.retain_grad": _HOOK,
    "Tensor.register_hook": _HOOK,
    "Tensor.register_post_accumulate_grad_hook": _HOOK,
    "Tensor.data": "an alias of detach() that is assignable; covered by test_tensor_api.py",
}


def surface_names() -> list[str]:
    """Every name of the three sections, prefixed as the op names of cases.py are."""
    text = SURFACE.read_text()
    names = []
    for heading, prefix in SECTIONS.items():
        body = text[text.index(heading) :].split("\n")[1]
        names += [prefix + n for n in re.findall(r"`([^`]+)`", body)]
    return names
