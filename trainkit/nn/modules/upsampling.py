"""``trainkit.nn.modules.upsampling`` (``torch.nn.modules.upsampling``): the same classes as
``trainkit.nn``, under PyTorch's module path (only those trainkit has).

>>> import trainkit
>>> from trainkit.nn.modules.upsampling import Upsample
>>> Upsample is trainkit.nn.Upsample
True
"""

from ...layers import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
