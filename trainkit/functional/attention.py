"""Scaled dot-product attention as one op, and multi_head_attention_forward."""

__all__: list[str] = []
