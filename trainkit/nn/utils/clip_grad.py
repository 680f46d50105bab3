"""``trainkit.nn.utils.clip_grad`` (``torch.nn.utils.clip_grad``): gradient clipping under PyTorch's module path.

>>> import trainkit
>>> from trainkit.nn.utils.clip_grad import clip_grad_norm_
>>> clip_grad_norm_ is trainkit.nn.utils.clip_grad_norm_
True
"""

from ...layers.clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]
