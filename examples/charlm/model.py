"""Language models for configs/charlm.yaml and configs/charlm_lstm.yaml, written as one writes them in PyTorch.

Both take token ids of shape (N, T) and return logits of shape (N, T, vocab_size): position t scores the token
that follows token t. ``trainkit train`` gives them ``vocab_size`` and ``block_size`` from the text data when the
config leaves them out, and flattens the logits and targets for the loss (``F.cross_entropy(logits.view(-1, V),
targets.view(-1))``). ``import trainkit as torch`` is all that differs from PyTorch code.
"""

from __future__ import annotations

import math

import trainkit as torch
import trainkit.nn.functional as F
from trainkit import nn


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which each position sees itself and the positions before it only."""

    def __init__(self, n_embd: int, n_head: int, dropout: float = 0.0):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd ({n_embd}) must be a multiple of n_head ({n_head})")
        self.n_head, self.dropout = n_head, dropout
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # (N, T, C) -> (N, heads, T, C / heads): each head attends on its own slice of the width
        q, k, v = (z.view(n, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(n, t, c))


class Block(nn.Module):
    """A pre-norm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))`` with a 4x wide GELU MLP."""

    def __init__(self, n_embd: int, n_head: int, dropout: float = 0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd), nn.Dropout(dropout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A small GPT: token and position embeddings, ``n_layer`` pre-norm blocks of causal self-attention
    (``F.scaled_dot_product_attention(q, k, v, is_causal=True)``) and GELU MLPs, a final LayerNorm, and an output
    head that shares its weight with the token embedding.

    Weights start as in GPT-2: normal with std 0.02, the projections back into the residual stream scaled by
    1 / sqrt(2 * n_layer) so that the stream's variance does not grow with depth; biases zero.

    >>> model = GPT(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=16)
    >>> model(torch.zeros(3, 8, dtype=torch.int64)).shape
    trainkit.Size([3, 8, 10])
    """

    def __init__(
        self,
        vocab_size: int,
        block_size: int,
        n_layer: int = 4,
        n_head: int = 4,
        n_embd: int = 128,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied: one matrix scores the tokens and embeds them
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("attn.proj.weight", "mlp.2.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        n, t = idx.shape
        if t > self.block_size:
            raise ValueError(f"a sequence of {t} tokens is longer than block_size {self.block_size}")
        positions = torch.arange(t, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class LSTMLanguageModel(nn.Module):
    """An LSTM language model: ``nn.Embedding`` -> ``nn.LSTM`` (batch_first) -> ``nn.Linear`` to the vocabulary.

    ``block_size`` is the context the sampling callback keeps (the LSTM itself takes any length).

    >>> model = LSTMLanguageModel(vocab_size=10, block_size=8, embedding_dim=8, hidden_size=16)
    >>> model(torch.zeros(3, 8, dtype=torch.int64)).shape
    trainkit.Size([3, 8, 10])
    """

    def __init__(
        self,
        vocab_size: int,
        block_size: int,
        embedding_dim: int = 64,
        hidden_size: int = 256,
        num_layers: int = 1,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.block_size = block_size
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(
            embedding_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        output, _ = self.lstm(self.embedding(idx))
        return self.head(output)
