"""``trainkit.nn.utils``: gradient clipping, as ``torch.nn.utils``, and ``rnn`` (packed and padded sequences);
``clip_grad`` is PyTorch's module path of the clipping functions."""

from ...layers.clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from . import clip_grad, rnn

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm", "clip_grad", "rnn"]
