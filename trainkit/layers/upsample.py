"""Upsampling layers: Upsample, UpsamplingNearest2d and UpsamplingBilinear2d, as in ``torch.nn``."""

from __future__ import annotations

from ..autograd.tensor import Tensor
from ..functional import interpolate
from .module import Module


class Upsample(Module):
    """Resize the spatial dimensions of its input with ``F.interpolate``, as ``torch.nn.Upsample``.

    Give either ``size`` or ``scale_factor`` (kept as a float, or a tuple of floats). ``mode`` is 'nearest'
    (the default), 'linear', 'bilinear', 'trilinear' or 'area'; ``align_corners`` and ``recompute_scale_factor``
    are passed on to ``interpolate``.

    >>> import trainkit
    >>> up = Upsample(scale_factor=2, mode="bilinear")
    >>> up
    Upsample(scale_factor=2.0, mode='bilinear')
    >>> up(trainkit.ones(1, 3, 4, 5)).shape
    trainkit.Size([1, 3, 8, 10])
    """

    def __init__(
        self,
        size=None,
        scale_factor=None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = "scale_factor=" + repr(self.scale_factor)
        else:
            info = "size=" + repr(self.size)
        return info + ", mode=" + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    """``Upsample`` with mode 'nearest' for 4-D input, as ``torch.nn.UpsamplingNearest2d``.

    >>> import trainkit
    >>> UpsamplingNearest2d(scale_factor=2)(trainkit.ones(1, 1, 2, 3)).shape
    trainkit.Size([1, 1, 4, 6])
    """

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample`` with mode 'bilinear' and ``align_corners=True``, as ``torch.nn.UpsamplingBilinear2d``.

    >>> import trainkit
    >>> UpsamplingBilinear2d(size=3)(trainkit.tensor([[[[0.0, 2.0], [4.0, 6.0]]]]))[0, 0]
    tensor([[0., 1., 2.],
            [2., 3., 4.],
            [4., 5., 6.]])
    """

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
