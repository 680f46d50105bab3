"""``trainkit.nn.utils``: gradient clipping, as ``torch.nn.utils``, and ``rnn`` (packed and padded sequences)."""

from ...layers.clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from . import rnn

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm", "rnn"]
