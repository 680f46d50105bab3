"""``trainkit.cuda``: what PyTorch code asks about GPUs."""

from __future__ import annotations

from ..autograd.backend import cuda_is_available, load_cupy
from ..autograd.random import manual_seed as seed_all


def is_available() -> bool:
    """True when CuPy imports and a GPU answers.

    >>> isinstance(is_available(), bool)
    True
    """
    return cuda_is_available()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether trainkit computes in bfloat16 on the GPU: not yet (its bfloat16 is ml_dtypes' NumPy dtype, whose ops
    are made and tested on the CPU). Programs that choose their dtype by it (nanoGPT) then take float16 on the GPU,
    with a GradScaler.

    >>> is_bf16_supported()
    False
    """
    return False


def device_count() -> int:
    """How many GPUs CuPy sees (0 without CuPy)."""
    if not cuda_is_available():
        return 0
    return load_cupy().cuda.runtime.getDeviceCount()


def synchronize() -> None:
    """Wait for all work queued on the current GPU to finish."""
    if cuda_is_available():
        load_cupy().cuda.Device().synchronize()


def manual_seed(seed: int) -> None:
    """Seed the GPUs' streams (``trainkit.manual_seed`` seeds them all already)."""
    seed_all(seed)


manual_seed_all = manual_seed


from . import amp  # noqa: E402  (trainkit.cuda.amp, as torch.cuda.amp, after the names above)
