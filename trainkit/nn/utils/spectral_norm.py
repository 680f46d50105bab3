"""``trainkit.nn.utils.spectral_norm`` (``torch.nn.utils.spectral_norm``): the older, hook-based spectral
normalization, with the parameter ``weight_orig`` and the buffers ``weight_u`` and ``weight_v``.

>>> from trainkit import nn
>>> layer = spectral_norm(nn.Linear(20, 40))
>>> list(layer.state_dict())
['bias', 'weight_orig', 'weight_u', 'weight_v']
"""

from __future__ import annotations

from ...autograd import grad_mode
from ...autograd.tensor import Tensor
from ...functional import normalize
from ...layers.conv import ConvTranspose2d
from ...layers.conv1d import ConvTranspose1d
from ...layers.module import Module
from ...layers.parameter import Parameter
from .weight_norm import LegacyNormHook, legacy_hooks

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm(LegacyNormHook):
    """The hook of ``spectral_norm``: ``module.<name> = W / σ(W)`` before each forward, where ``σ = uᵀ W v`` after
    ``n_power_iterations`` steps ``v ← Wᵀu / ‖Wᵀu‖``, ``u ← W v / ‖W v‖`` (in training mode only)."""

    kind = "spectral_norm"

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__(name)
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """``weight`` as a matrix whose rows are the slices along ``dim``."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with grad_mode.no_grad():
                matrix = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(matrix.t().mv(u), dim=0, eps=self.eps))
                    u.copy_(normalize(matrix.mv(v), dim=0, eps=self.eps))
            # the buffers change in place at the next call; backward needs the values of this one
            u, v = u.clone(), v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        if ("spectral_norm", name) in legacy_hooks(module):
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = dict(module.named_parameters(recurse=False, remove_duplicate=False)).get(name)
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        with grad_mode.no_grad():
            weight_mat = fn.reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        # a plain attribute until the first forward computes it: the hook overwrites it before every call
        setattr(module, name, weight.data)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        fn.attach(module)
        return fn

    def remove(self, module: Module) -> None:
        with grad_mode.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        if self.active:
            setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(
    module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Module:
    """Divide ``module.<name>`` by its largest singular value, estimated by power iteration before each forward
    (``dim`` is the output dimension: 1 for transposed convolutions, else 0).

    >>> from trainkit import nn
    >>> layer = spectral_norm(nn.Conv2d(3, 8, 3))
    >>> tuple(layer.weight_u.shape), tuple(layer.weight_v.shape)
    ((8,), (27,))
    """
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Turn ``module.<name>`` back into one parameter holding ``W / σ(W)`` with the current estimate of σ.

    >>> from trainkit import nn
    >>> layer = remove_spectral_norm(spectral_norm(nn.Linear(2, 2)))
    >>> [name for name, _ in layer.named_parameters()]
    ['bias', 'weight']
    """
    hook = legacy_hooks(module).get(("spectral_norm", name))
    if hook is None:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    hook.remove(module)
    hook.detach(module)
    return module
