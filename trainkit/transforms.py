"""Image transforms with torchvision's names (``torchvision.transforms``), on arrays and trainkit Tensors.

torchvision's transforms take PIL images; these take what ``np.asarray(pil_image)`` gives (a uint8 HxW or HxWxC
array) up to ``ToTensor`` and (C, H, W) tensors after it, so a torchvision pipeline such as
``Compose([RandomCrop(28, padding=4), ToTensor(), Normalize((0.1307,), (0.3081,))])`` is written
``Compose([ToTensor(), RandomCrop(28, padding=4), Normalize((0.1307,), (0.3081,))])``: crop and flip after
``ToTensor``. The random transforms draw from trainkit's default generator, so ``trainkit.manual_seed`` repeats
them.

>>> import numpy as np, trainkit
>>> t = Compose([ToTensor(), Normalize((0.5,), (0.5,))])
>>> t(np.array([[0, 255]], dtype=np.uint8)).tolist()
[[[-1.0, 1.0]]]
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import numpy as np

from .autograd.backend import get_default_dtype
from .autograd.creation import as_tensor, from_numpy, rand, randint
from .autograd.ops.rearrange import flip
from .autograd.tensor import Tensor
from .functional.padding import pad

__all__ = ["Compose", "Normalize", "RandomCrop", "RandomHorizontalFlip", "ToTensor"]


class Compose:
    """Apply transforms one after another, as ``torchvision.transforms.Compose``.

    >>> Compose([lambda x: x + 1, lambda x: x * 2])(3)
    8
    """

    def __init__(self, transforms: Sequence[Callable]):
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        lines = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({lines}\n)"


class ToTensor:
    """An HxW or HxWxC array (or anything ``np.asarray`` reads, such as a PIL image) to a (C, H, W) tensor.

    uint8 values are scaled to floats in [0, 1] (the default dtype, float32); other dtypes keep their values and
    dtype, as in torchvision.

    >>> import numpy as np
    >>> x = ToTensor()(np.full((2, 3), 51, dtype=np.uint8))
    >>> tuple(x.shape), x.dtype, round(x[0, 0, 0].item(), 4)
    ((1, 2, 3), trainkit.float32, 0.2)
    """

    def __call__(self, pic) -> Tensor:
        if isinstance(pic, Tensor):
            raise TypeError("pic should be an ndarray (or PIL Image), got a Tensor: it is already converted")
        array = np.asarray(pic)
        if array.ndim == 2:
            array = array[:, :, None]
        if array.ndim != 3:
            raise ValueError(f"pic should be 2 or 3 dimensional (HxW or HxWxC), got {array.ndim} dimensions")
        chw = np.ascontiguousarray(array.transpose(2, 0, 1))
        dt = get_default_dtype().np
        if chw.dtype == np.uint8:
            # converted, then divided in that dtype, as torch does: the values match torchvision's to the bit
            return from_numpy(chw.astype(dt) / dt.type(255))
        if chw.dtype == np.bool_:
            return from_numpy(chw.astype(dt))
        return from_numpy(chw)

    def __repr__(self) -> str:
        return "ToTensor()"


class Normalize:
    """``(x - mean) / std`` per channel of a (..., C, H, W) float tensor, as ``torchvision.transforms.Normalize``.

    >>> import trainkit
    >>> Normalize((1.0, 2.0), (2.0, 4.0))(trainkit.ones(2, 1, 1) * 3).flatten().tolist()
    [1.0, 0.25]
    """

    def __init__(self, mean: Sequence[float] | float, std: Sequence[float] | float, inplace: bool = False):
        self.mean = [float(m) for m in (mean if isinstance(mean, Sequence) else [mean])]
        self.std = [float(s) for s in (std if isinstance(std, Sequence) else [std])]
        if any(s == 0 for s in self.std):
            raise ValueError(
                f"std evaluated to zero after conversion to float, leading to division by zero: {self.std}"
            )
        self.inplace = inplace

    def __call__(self, tensor: Tensor) -> Tensor:
        if not isinstance(tensor, Tensor):
            raise TypeError(f"Input tensor should be a trainkit Tensor (apply ToTensor first), got {type(tensor)}")
        if not tensor.dtype.is_floating_point:
            raise TypeError(f"Input tensor should be a float tensor. Got {tensor.dtype}.")
        if tensor.ndim < 3:
            raise ValueError(f"Expected tensor to be a tensor image of size (..., C, H, W). Got {tuple(tensor.shape)}")
        mean = as_tensor(np.array(self.mean), dtype=tensor.dtype, device=tensor.device).reshape(-1, 1, 1)
        std = as_tensor(np.array(self.std), dtype=tensor.dtype, device=tensor.device).reshape(-1, 1, 1)
        if self.inplace:
            return tensor.sub_(mean).div_(std)
        return (tensor - mean) / std

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean}, std={self.std})"


class RandomHorizontalFlip:
    """Mirror a (..., H, W) tensor left to right with probability ``p``.

    >>> import trainkit
    >>> RandomHorizontalFlip(p=1.0)(trainkit.tensor([[[1, 2, 3]]])).tolist()
    [[[3, 2, 1]]]
    """

    def __init__(self, p: float = 0.5):
        self.p = p

    def __call__(self, img: Tensor) -> Tensor:
        if rand(1).item() < self.p:  # torchvision's draw, so that a seed flips the images it flips
            return flip(_tensor(img), -1)
        return img

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


class RandomCrop:
    """Crop a (..., H, W) tensor to ``size`` at a random place, after padding its borders by ``padding``.

    ``padding`` is one amount for all borders, (left/right, top/bottom) or (left, top, right, bottom);
    ``padding_mode`` is 'constant' (``fill``), 'edge' or 'reflect', as in torchvision.

    >>> import trainkit
    >>> out = RandomCrop(28, padding=4)(trainkit.ones(1, 28, 28))
    >>> tuple(out.shape), 0.0 <= out.min().item() <= out.max().item() == 1.0
    ((1, 28, 28), True)
    """

    _MODES = {"constant": "constant", "edge": "replicate", "reflect": "reflect"}

    def __init__(
        self,
        size: int | Sequence[int],
        padding: int | Sequence[int] | None = None,
        pad_if_needed: bool = False,
        fill: float = 0,
        padding_mode: str = "constant",
    ):
        self.size = (int(size), int(size)) if isinstance(size, numbers.Number) else tuple(int(s) for s in size)
        if len(self.size) != 2:
            raise ValueError(f"size should be an int or a sequence of two ints (height, width), got {size}")
        if padding_mode not in self._MODES:
            raise ValueError(f"padding_mode should be one of {sorted(self._MODES)}, got {padding_mode!r}")
        self.padding, self.pad_if_needed, self.fill, self.padding_mode = padding, pad_if_needed, fill, padding_mode

    def _pad(self, img: Tensor, left: int, top: int, right: int, bottom: int) -> Tensor:
        mode = self._MODES[self.padding_mode]
        return pad(img, (left, right, top, bottom), mode=mode, value=self.fill if mode == "constant" else None)

    def __call__(self, img: Tensor) -> Tensor:
        img = _tensor(img)
        if self.padding is not None:
            p = [self.padding] if isinstance(self.padding, numbers.Number) else list(self.padding)
            left, top, right, bottom = {1: p * 4, 2: p * 2, 4: p}.get(len(p)) or _bad_padding(self.padding)
            img = self._pad(img, left, top, right, bottom)
        th, tw = self.size
        h, w = img.shape[-2], img.shape[-1]
        if self.pad_if_needed and (h < th or w < tw):
            img = self._pad(img, max(tw - w, 0), max(th - h, 0), max(tw - w, 0), max(th - h, 0))
            h, w = img.shape[-2], img.shape[-1]
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size {(h, w)}")
        if h == th and w == tw:  # nothing to choose: torchvision draws nothing then
            return img
        i = int(randint(0, h - th + 1, size=(1,)).item())
        j = int(randint(0, w - tw + 1, size=(1,)).item())
        return img[..., i : i + th, j : j + tw]

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


def _tensor(img) -> Tensor:
    if not isinstance(img, Tensor):
        raise TypeError(f"expected a (..., H, W) trainkit Tensor (apply ToTensor first), got {type(img).__name__}")
    if img.ndim < 2:
        raise ValueError(f"expected a (..., H, W) tensor, got shape {tuple(img.shape)}")
    return img


def _bad_padding(padding):
    raise ValueError(f"padding should be an int or a sequence of 1, 2 or 4 ints, got {padding}")
