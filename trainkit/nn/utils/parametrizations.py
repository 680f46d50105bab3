"""``trainkit.nn.utils.parametrizations`` (``torch.nn.utils.parametrizations``): weight and spectral normalization
as parametrizations (see ``parametrize``), with PyTorch's state dict keys.

>>> import trainkit
>>> from trainkit import nn
>>> layer = weight_norm(nn.Linear(20, 40))
>>> [tuple(t.shape) for t in layer.parametrizations.weight.parameters()]
[(40, 1), (40, 20)]
"""

from __future__ import annotations

from ...autograd import grad_mode
from ...autograd.tensor import Tensor
from ...functional import normalize
from ...layers.conv import ConvTranspose2d
from ...layers.conv1d import ConvTranspose1d
from ...layers.module import Module
from . import parametrize
from .orthogonal import orthogonal

__all__ = ["norm_except_dim", "orthogonal", "weight_norm", "spectral_norm"]


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The ``pow``-norm of ``v`` over every dimension but ``dim``, kept as size-1 dimensions
    (``torch.norm_except_dim``); ``dim=-1`` is the norm of the whole tensor, a scalar.

    >>> import trainkit
    >>> norm_except_dim(trainkit.tensor([[3.0, 4.0], [6.0, 8.0]]), 2, 0).tolist()
    [[5.0], [10.0]]
    """
    if dim == -1:
        return v.norm(pow)
    if dim < 0:
        dim += v.dim()
    others = tuple(d for d in range(v.dim()) if d != dim)
    return v.norm(pow, dim=others, keepdim=True) if others else v.abs()


def weight_norm_value(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """``w = g · v / ‖v‖``, the norm taken over every dimension but ``dim`` (``torch._weight_norm``)."""
    return v * (g / norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    """``weight = g · v / ‖v‖`` from ``original0 = g`` and ``original1 = v``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_norm_value(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Split ``module.<name>`` into a magnitude ``g`` and a direction ``v``: ``w = g · v / ‖v‖`` (Salimans and
    Kingma, 2016), the norm per slice along ``dim`` (the whole tensor with ``dim=None``).

    ``g`` and ``v`` are ``module.parametrizations.<name>.original0`` and ``original1``.

    >>> import trainkit
    >>> from trainkit import nn
    >>> layer = weight_norm(nn.Linear(3, 2), dim=None)
    >>> tuple(layer.parametrizations.weight.original0.shape)
    ()
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def accept_legacy_keys(module, state_dict, prefix, *unused) -> None:
        """A state dict saved with the older ``nn.utils.weight_norm`` names ``g`` and ``v`` ``<name>_g`` and
        ``<name>_v``: they load as ``original0`` and ``original1``."""
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module.register_load_state_dict_pre_hook(accept_legacy_keys)
    return module


class _SpectralNorm(Module):
    """``weight / σ(weight)``, σ estimated by power iteration on the buffers ``_u`` and ``_v``; a vector is divided
    by its 2-norm."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self.reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=self.eps))
            self.power_method(weight_mat, 15)  # start from estimates, not from noise

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """``weight`` as a matrix whose rows are the slices along ``dim``."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """``u ← W v / ‖W v‖``, ``v ← Wᵀ u / ‖Wᵀ u‖``, ``n_power_iterations`` times, in place in the buffers."""
        with grad_mode.no_grad():
            weight_mat = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(weight_mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(weight_mat.t().mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.dim() == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self.reshape_weight_to_matrix(weight)
        if self.training:
            self.power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Module:
    """Divide ``module.<name>`` by its largest singular value σ (Miyato et al., 2018), estimated by
    ``n_power_iterations`` steps of power iteration at each access in training mode (15 at registration).

    ``dim`` is the output dimension: 1 for transposed convolutions, else 0. A weight of more than two dimensions
    is flattened to a matrix for the estimate. The singular vectors are the buffers
    ``parametrizations.<name>.0._u`` and ``._v``.

    >>> import trainkit
    >>> from trainkit import nn
    >>> layer = spectral_norm(nn.Linear(20, 40))
    >>> list(layer.state_dict())
    ['bias', 'parametrizations.weight.original', 'parametrizations.weight.0._u', 'parametrizations.weight.0._v']
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
