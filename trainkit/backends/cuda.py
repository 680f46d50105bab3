"""``trainkit.backends.cuda`` (``torch.backends.cuda``): cuBLAS and attention switches, accepted and without effect.

``matmul.allow_tf32`` and the reduced-precision switches keep what a program sets: trainkit multiplies float32 in
float32 (CuPy's default, no TF32) whatever they say. The scaled-dot-product-attention switches
(``enable_flash_sdp`` ...) are recorded and read back; trainkit has one attention kernel, its own.

>>> from trainkit.backends import cuda
>>> cuda.matmul.allow_tf32 = True
>>> cuda.matmul.allow_tf32
True
>>> cuda.matmul.allow_tf32 = False
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = [
    "CuBLASFlags",
    "cudnn_sdp_enabled",
    "enable_cudnn_sdp",
    "enable_flash_sdp",
    "enable_math_sdp",
    "enable_mem_efficient_sdp",
    "flash_sdp_enabled",
    "is_built",
    "math_sdp_enabled",
    "matmul",
    "mem_efficient_sdp_enabled",
    "preferred_linalg_library",
    "sdp_kernel",
]


class CuBLASFlags:
    """``torch.backends.cuda.matmul``: the cuBLAS switches, with PyTorch's defaults; other names are refused.

    >>> flags = CuBLASFlags()
    >>> flags.allow_fp16_reduced_precision_reduction
    True
    >>> flags.allow_tf64 = True
    Traceback (most recent call last):
    AttributeError: Unknown attribute allow_tf64
    """

    DEFAULTS = {
        "allow_tf32": False,
        "allow_fp16_reduced_precision_reduction": True,
        "allow_bf16_reduced_precision_reduction": True,
        "allow_fp16_accumulation": False,
    }

    def __init__(self):
        object.__setattr__(self, "values", dict(self.DEFAULTS))

    def __getattr__(self, name: str):
        if name in self.DEFAULTS:
            return self.values[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name: str, value) -> None:
        if name not in self.DEFAULTS:
            raise AttributeError(f"Unknown attribute {name}")
        self.values[name] = value


matmul = CuBLASFlags()
SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    """False, as PyTorch's CPU build says: trainkit's GPU path is CuPy (see ``trainkit.cuda.is_available``).

    >>> is_built()
    False
    """
    return False


def enable_flash_sdp(enabled: bool) -> None:
    """Records the switch (trainkit has one attention kernel).

    >>> enable_flash_sdp(True); flash_sdp_enabled()
    True
    """
    SDP["flash"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    """What ``enable_flash_sdp`` last set (True at start).

    >>> flash_sdp_enabled()
    True
    """
    return SDP["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Records the switch (trainkit has one attention kernel).

    >>> enable_mem_efficient_sdp(True); mem_efficient_sdp_enabled()
    True
    """
    SDP["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    """What ``enable_mem_efficient_sdp`` last set (True at start).

    >>> mem_efficient_sdp_enabled()
    True
    """
    return SDP["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    """Records the switch (trainkit has one attention kernel).

    >>> enable_math_sdp(True); math_sdp_enabled()
    True
    """
    SDP["math"] = bool(enabled)


def math_sdp_enabled() -> bool:
    """What ``enable_math_sdp`` last set (True at start).

    >>> math_sdp_enabled()
    True
    """
    return SDP["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Records the switch (trainkit has one attention kernel).

    >>> enable_cudnn_sdp(True); cudnn_sdp_enabled()
    True
    """
    SDP["cudnn"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    """What ``enable_cudnn_sdp`` last set (True at start).

    >>> cudnn_sdp_enabled()
    True
    """
    return SDP["cudnn"]


@contextlib.contextmanager
def sdp_kernel(
    enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True, enable_cudnn: bool = True
) -> Iterator[None]:
    """Sets the attention switches inside the ``with`` block and restores them after.

    >>> with sdp_kernel(enable_flash=False):
    ...     flash_sdp_enabled()
    False
    """
    saved = dict(SDP)
    SDP.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient, cudnn=enable_cudnn)
    try:
        yield
    finally:
        SDP.update(saved)


def preferred_linalg_library(backend: str | None = None) -> str:
    """Accepted and without effect (trainkit's linear algebra is NumPy's or CuPy's); returns ``"default"``.

    >>> preferred_linalg_library()
    'default'
    """
    return "default"
