"""Transformer encoder and decoder layers and stacks (nn.Transformer*), as in "Attention Is All You Need".

Each layer is attention and a two-layer feed-forward block, each with a residual connection and a LayerNorm:
post-norm (the default) normalises after each sum, ``norm_first=True`` (pre-norm) normalises each block's input.
The stacks deep-copy one layer ``num_layers`` times, so every layer starts from the same weights.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

from .. import functional as F
from ..autograd import backend
from ..autograd.creation import full, zeros_like
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.ops.triangular import triu
from ..autograd.tensor import Tensor
from .activation import GELU, ReLU
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .init import xavier_uniform_
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]


def _activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """The function a string names ('relu' or 'gelu' only, as PyTorch), or the callable itself."""
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


def _float_mask(mask: Tensor | None, name: str, other: Tensor | None, other_name: str, dtype) -> Tensor | None:
    """A boolean mask (True = leave out) as an additive float one (-inf there, 0 elsewhere) of ``dtype``.

    A float mask is passed on as it is; any other dtype is refused. Mixing a boolean and a float mask is still
    accepted, with PyTorch's deprecation warning (``other`` is the mask it is compared with, or None).
    """
    if mask is None:
        return None
    is_float = mask.is_floating_point()
    if mask.dtype != backend.bool_ and not is_float:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other is not None and mask.dtype != other.dtype:
        warnings.warn(
            f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both instead.",
            stacklevel=4,
        )
    if is_float:
        return mask
    return zeros_like(mask, dtype=dtype).masked_fill(mask, float("-inf"))


def _seq_len(x: Tensor, batch_first: bool) -> int:
    """The sequence length of (S, E), (S, N, E) or, batch first, (N, S, E)."""
    if x.dim() == 2:
        return x.shape[0]
    return x.shape[1 if batch_first else 0]


def _is_causal(mask: Tensor | None, is_causal: bool | None, size: int) -> bool:
    """``is_causal`` when given; when None, whether ``mask`` is exactly the square causal mask of ``size``."""
    if is_causal is not None or mask is None:
        return is_causal is True
    causal = Transformer.generate_square_subsequent_mask(size, device=mask.device, dtype=mask.dtype)
    return tuple(mask.shape) == tuple(causal.shape) and bool((mask == causal).all())


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each added back to its input and normalised.

    Post-norm: ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``; with ``norm_first``:
    ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``, where ``sa`` is multi-head self-attention and
    ``ff(x) = linear2(dropout(activation(linear1(x))))``, each block followed by its dropout. Inputs are
    (S, N, E), (N, S, E) with ``batch_first``, or unbatched (S, E).

    >>> import trainkit
    >>> layer = TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> layer(trainkit.rand(5, 3, 8)).shape
    trainkit.Size([5, 3, 8])
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **factory
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        activation = _activation(activation)
        # 1 for relu, 2 for gelu, 0 otherwise: PyTorch keeps this code for its fused path; kept for code reading it
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """``src_mask`` (S, S) or (N*nhead, S, S) and ``src_key_padding_mask`` (N, S), boolean (True = leave out)
        or additive float; ``is_causal`` says that ``src_mask`` is the causal mask."""
        src_key_padding_mask = _float_mask(
            src_key_padding_mask, "src_key_padding_mask", src_mask, "src_mask", src.dtype
        )
        src_mask = _float_mask(src_mask, "src_mask", None, "", src.dtype)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x: Tensor, mask: Tensor | None, padding: Tensor | None, is_causal: bool) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False, is_causal=is_causal)[
            0
        ]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention to the encoder's output (``memory``), then a feed-forward block.

    Post-norm: ``x = norm1(x + sa(x)); x = norm2(x + mha(x, memory)); x = norm3(x + ff(x))``; with
    ``norm_first`` each block reads its norm's output and is added to its unnormalised input.

    >>> import trainkit
    >>> layer = TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> layer(trainkit.rand(4, 3, 8), trainkit.rand(6, 3, 8)).shape
    trainkit.Size([4, 3, 8])
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **factory
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **factory
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """``tgt_mask`` (T, T), ``memory_mask`` (T, S), padding masks (N, T) and (N, S); masks are handed to
        the attention layers as given (boolean True = leave out, or additive float)."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x: Tensor, mask: Tensor | None, padding: Tensor | None, is_causal: bool) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding, is_causal=is_causal, need_weights=False)[
            0
        ]
        return self.dropout1(x)

    def _mha_block(
        self, x: Tensor, memory: Tensor, mask: Tensor | None, padding: Tensor | None, is_causal: bool
    ) -> Tensor:
        x = self.multihead_attn(
            x, memory, memory, attn_mask=mask, key_padding_mask=padding, is_causal=is_causal, need_weights=False
        )[0]
        return self.dropout2(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _why_no_nested(layer: Module) -> str:
    """Why PyTorch's fused nested-tensor path would not apply to a stack of ``layer`` ('' when it would)."""
    if not isinstance(layer, TransformerEncoderLayer):
        return "encoder_layer was not TransformerEncoderLayer"
    attn = layer.self_attn
    if layer.norm_first:
        return "encoder_layer.norm_first was True"
    if not attn.batch_first:
        return "encoder_layer.self_attn.batch_first was not True(use batch_first for better inference performance)"
    if not attn._qkv_same_embed_dim:
        return "encoder_layer.self_attn._qkv_same_embed_dim was not True"
    if attn.in_proj_bias is None:
        return "encoder_layer.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return "encoder_layer.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps"
    if attn.num_heads % 2 == 1:
        return "encoder_layer.self_attn.num_heads is odd"
    return ""


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` applied in turn, then ``norm`` when given.

    ``enable_nested_tensor`` and ``mask_check`` are kept for PyTorch's signature; trainkit has no fused
    nested-tensor path, so they change no numbers (PyTorch's warning when that path could not apply is kept).

    >>> import trainkit
    >>> layer = TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    >>> encoder = TransformerEncoder(layer, num_layers=2)
    >>> encoder(trainkit.rand(3, 5, 8)).shape
    trainkit.Size([3, 5, 8])
    """

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _why_no_nested(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(
                f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why_not}", stacklevel=2
            )
            self.use_nested_tensor = False

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """``is_causal=None`` finds out whether ``mask`` is the square causal mask; True asserts that it is."""
        src_key_padding_mask = _float_mask(src_key_padding_mask, "src_key_padding_mask", mask, "mask", src.dtype)
        mask = _float_mask(mask, "mask", None, "", src.dtype)
        is_causal = _is_causal(mask, is_causal, _seq_len(src, self.layers[0].self_attn.batch_first))
        padded = self._zeroed_positions(src, mask, src_key_padding_mask)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        if padded is not None:
            output = output.masked_fill(padded.unsqueeze(-1), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _zeroed_positions(self, src: Tensor, mask: Tensor | None, padding: Tensor | None) -> Tensor | None:
        """The padded positions PyTorch's nested-tensor path sets to 0 before the final norm, or None.

        PyTorch takes that path in evaluation without a graph, for batched input with a padding mask that only
        pads ends of sequences and no ``mask``, when ``use_nested_tensor`` holds; the other positions come out
        as with the masks, so zeroing the padded ones gives its numbers.
        """
        first = self.layers[0]
        if (
            padding is None
            or mask is not None
            or not getattr(self, "use_nested_tensor", False)
            or first.training
            or src.dim() != 3
        ):
            return None
        attn, weights = first.self_attn, [src]
        weights += [attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight, attn.out_proj.bias]
        for part in (first.norm1, first.norm2, first.linear1, first.linear2):
            weights += [part.weight, part.bias]
        if is_grad_enabled() and any(w is not None and w.requires_grad for w in weights):
            return None
        padded = padding != 0
        # only padding may follow a padded position (with mask_check off PyTorch assumes so without looking, and
        # packs other masks wrongly; trainkit then keeps the masked numbers)
        if bool((padded[:, :-1] & ~padded[:, 1:]).any()):
            return None
        return padded


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` applied in turn to the target, each reading ``memory``;
    then ``norm`` when given.

    >>> import trainkit
    >>> layer = TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    >>> decoder = TransformerDecoder(layer, num_layers=2)
    >>> decoder(trainkit.rand(4, 3, 8), trainkit.rand(6, 3, 8)).shape
    trainkit.Size([4, 3, 8])
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """``tgt_is_causal=None`` finds out whether ``tgt_mask`` is the square causal mask."""
        tgt_is_causal = _is_causal(tgt_mask, tgt_is_causal, _seq_len(tgt, self.layers[0].self_attn.batch_first))
        output = tgt
        for layer in self.layers:
            output = layer(
                output,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=tgt_is_causal,
                memory_is_causal=memory_is_causal,
            )
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """An encoder stack and a decoder stack, each ending in a LayerNorm; every matrix (parameter of 2 or more
    dimensions) starts as xavier_uniform_.

    ``forward(src, tgt)`` encodes ``src`` (S, N, E) into memory and decodes ``tgt`` (T, N, E) against it, giving
    (T, N, E) (batch first with ``batch_first``).

    >>> import trainkit
    >>> model = Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32,
    ...                     batch_first=True)
    >>> mask = Transformer.generate_square_subsequent_mask(4)
    >>> model(trainkit.rand(2, 6, 16), trainkit.rand(2, 4, 16), tgt_mask=mask, tgt_is_causal=True).shape
    trainkit.Size([2, 4, 16])
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = F.relu,
        custom_encoder: Any | None = None,
        custom_decoder: Any | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        layer_args = (
            d_model,
            nhead,
            dim_feedforward,
            dropout,
            activation,
            layer_norm_eps,
            batch_first,
            norm_first,
            bias,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            encoder_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(*layer_args, **factory), num_encoder_layers, encoder_norm
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            decoder_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(*layer_args, **factory), num_decoder_layers, decoder_norm
            )
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src``, then decode ``tgt`` against the result; the masks go to the stacks by name."""
        batched = src.dim() == 3
        batch = 0 if self.batch_first else 1
        if batched and src.shape[batch] != tgt.shape[batch]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The (sz, sz) causal mask: -inf above the diagonal (a later position), 0 elsewhere; float32 by default.

        >>> Transformer.generate_square_subsequent_mask(3)
        tensor([[  0., -inf, -inf],
                [  0.,   0., -inf],
                [  0.,   0.,   0.]])
        """
        return triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)

    def _reset_parameters(self) -> None:
        """xavier_uniform_ for every parameter of two or more dimensions, in registration order."""
        for p in self.parameters():
            if p.dim() > 1:
                xavier_uniform_(p)
