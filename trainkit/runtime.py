"""Process-wide settings PyTorch keeps at its root: deterministic algorithms, the number of CPU threads, and the
precision of float32 matrix products.

>>> import trainkit
>>> trainkit.are_deterministic_algorithms_enabled()
False
"""

from __future__ import annotations

import os

import threadpoolctl

from .autograd.user_warnings import warn_user

__all__ = [
    "are_deterministic_algorithms_enabled",
    "get_deterministic_debug_mode",
    "get_float32_matmul_precision",
    "get_num_threads",
    "is_deterministic_algorithms_warn_only_enabled",
    "set_deterministic_debug_mode",
    "set_float32_matmul_precision",
    "set_num_threads",
    "use_deterministic_algorithms",
]

PRECISIONS = ("highest", "high", "medium")
DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


class RuntimeSettings:
    """What the functions below set: read by anything that must honour them."""

    deterministic = False
    warn_only = False
    matmul_precision = "highest"
    num_threads: int | None = None  # None until set: BLAS's own count


SETTINGS = RuntimeSettings()


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms only, as ``torch.use_deterministic_algorithms``. trainkit's CPU kernels
    are deterministic already (the same inputs give the same bits), so the setting is recorded for
    ``are_deterministic_algorithms_enabled`` and code that reads it.

    >>> use_deterministic_algorithms(True); are_deterministic_algorithms_enabled()
    True
    >>> use_deterministic_algorithms(False)
    """
    for name, value in (("mode", mode), ("warn_only", warn_only)):
        if not isinstance(value, bool):
            position = " (position 1)" if name == "mode" else ""
            raise TypeError(
                f"_set_deterministic_algorithms(): argument '{name}'{position} must be bool, not {type(value).__name__}"
            )
    SETTINGS.deterministic = mode
    SETTINGS.warn_only = warn_only if mode else False


def are_deterministic_algorithms_enabled() -> bool:
    """True after ``use_deterministic_algorithms(True)``.

    >>> are_deterministic_algorithms_enabled()
    False
    """
    return SETTINGS.deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """True after ``use_deterministic_algorithms(True, warn_only=True)``.

    >>> is_deterministic_algorithms_warn_only_enabled()
    False
    """
    return SETTINGS.warn_only


def get_deterministic_debug_mode() -> int:
    """0 (off), 1 (deterministic, warn only) or 2 (deterministic), as torch numbers them.

    >>> get_deterministic_debug_mode()
    0
    """
    if not SETTINGS.deterministic:
        return 0
    return 1 if SETTINGS.warn_only else 2


def set_deterministic_debug_mode(debug_mode: str | int) -> None:
    """``"default"``/0, ``"warn"``/1 or ``"error"``/2: ``use_deterministic_algorithms`` in torch's other words.

    >>> set_deterministic_debug_mode("warn"); get_deterministic_debug_mode()
    1
    >>> set_deterministic_debug_mode(0)
    """
    if isinstance(debug_mode, str):
        if debug_mode not in DEBUG_MODES:
            raise RuntimeError(
                f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got {debug_mode}"
            )
        debug_mode = DEBUG_MODES[debug_mode]
    elif not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def set_num_threads(num: int) -> None:
    """Use ``num`` threads for CPU work: the BLAS library behind NumPy's matrix products (OpenBLAS, MKL, BLIS)
    is limited to ``num`` threads through threadpoolctl, as torch sets its intra-op pool.

    >>> set_num_threads(1); get_num_threads()
    1
    """
    if not isinstance(num, int) or isinstance(num, bool):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    threadpoolctl.threadpool_limits(limits=num, user_api="blas")
    SETTINGS.num_threads = num


def get_num_threads() -> int:
    """The number of threads CPU work uses: what ``set_num_threads`` set, else the BLAS library's own count
    (the CPU count when NumPy has no threaded BLAS).

    >>> get_num_threads() >= 1
    True
    """
    if SETTINGS.num_threads is not None:
        return SETTINGS.num_threads
    counts = [info["num_threads"] for info in threadpoolctl.threadpool_info() if info.get("user_api") == "blas"]
    return max(counts) if counts else os.cpu_count() or 1


def set_float32_matmul_precision(precision: str) -> None:
    """``"highest"`` (the default), ``"high"`` or ``"medium"``: how precise float32 matrix products must be
    (torch lets lower settings use TF32 or bfloat16 on GPUs). Recorded; trainkit's products are full float32 on
    every device. Another string warns and changes nothing, as in torch.

    >>> set_float32_matmul_precision("high"); get_float32_matmul_precision()
    'high'
    >>> set_float32_matmul_precision("highest")
    """
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in PRECISIONS:
        warn_user(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
            "setFloat32MatmulPrecision call has no effect."
        )
        return
    SETTINGS.matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """The float32 matmul precision last set (``"highest"`` by default).

    >>> get_float32_matmul_precision()
    'highest'
    """
    return SETTINGS.matmul_precision
