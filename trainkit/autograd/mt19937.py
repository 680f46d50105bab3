"""PyTorch's CPU random engine: a 32-bit Mersenne Twister (MT19937) and the bytes of ``torch.get_rng_state()``.

The engine is the reference MT19937 seeded with ``init_genrand``: the first word of its 624-word state is the seed's
low 32 bits and word j is ``1812433253 * (w[j-1] ^ (w[j-1] >> 30)) + j`` (mod 2^32). Each draw tempers the next word
of the state and the whole state is twisted afresh every 624 draws. A 64-bit draw is two 32-bit ones, the first in
the high half. NumPy's ``MT19937`` bit generator runs the same recurrence and tempering, so the words come from it in
bulk (``random_raw``) once its state is set to ours; its own seeding (SeedSequence) is never used.

The state bytes follow PyTorch's layout (5056 bytes, little-endian, C struct padding):

    offset  size  field
         0     8  initial seed (uint64)
         8     4  left: draws until the next twist, plus one (int32)
        12     4  seeded flag (int32, 1)
        16     8  next: index of the next word (uint64)
        24  4992  the 624 state words, each widened to uint64
      5016    24  legacy normal_x, normal_y (the cached float64 normal), normal_rho (float64 each)
      5040     4  normal_is_valid: whether normal_y holds a cached float64 normal (int32)
      5048     4  the cached float32 normal (float32)
      5052     1  whether the float32 cache is valid (bool)
"""

from __future__ import annotations

import struct

import numpy as np

__all__ = ["MT19937", "STATE_SIZE"]

N = 624
STATE_SIZE = 5056
_HEAD = struct.Struct("<QiiQ")  # initial seed, left, seeded, next
_WORDS_AT = _HEAD.size
_TAIL_AT = _WORDS_AT + 8 * N
_TAIL = struct.Struct("<dddi4xf?3x")  # normal_x, normal_y, normal_rho, normal_is_valid, float cache, its flag


def seeded_words(seed: int) -> np.ndarray:
    """The 624 state words ``init_genrand`` makes from the low 32 bits of ``seed``.

    >>> int(seeded_words(5489)[1])
    1301868182
    """
    words = [seed & 0xFFFFFFFF]
    for j in range(1, N):
        prev = words[-1]
        words.append((1812433253 * (prev ^ (prev >> 30)) + j) & 0xFFFFFFFF)
    return np.array(words, dtype=np.uint32)


class MT19937:
    """The 32-bit Mersenne Twister behind ``torch.Generator`` on the CPU, with its cached normal samples.

    >>> e = MT19937(0)
    >>> [int(w) for w in e.random32(2)]
    [2357136044, 2546248239]
    >>> len(e.state_bytes())
    5056
    """

    def __init__(self, seed: int = 5489):
        self._bits = np.random.MT19937()
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """Restart from ``seed`` (an unsigned 64-bit number; the state uses its low 32 bits) with no cached normal."""
        self.initial_seed = int(seed)
        self._set_words(seeded_words(self.initial_seed), N)
        self._fresh = True  # PyTorch's index reads 0, not 624, before the first draw after seeding
        self.next_double_normal: float | None = None
        self.next_float_normal: float | None = None

    def _set_words(self, words: np.ndarray, pos: int) -> None:
        self._bits.state = {"bit_generator": "MT19937", "state": {"key": words, "pos": int(pos)}}

    def random32(self, n: int) -> np.ndarray:
        """The next ``n`` 32-bit draws (uint32)."""
        if n <= 0:
            return np.zeros(0, dtype=np.uint32)
        self._fresh = False
        return self._bits.random_raw(int(n)).astype(np.uint32)

    def random64(self, n: int) -> np.ndarray:
        """The next ``n`` 64-bit draws (uint64), each two 32-bit draws with the first in the high half."""
        pairs = self.random32(2 * n).astype(np.uint64).reshape(-1, 2)
        return (pairs[:, 0] << np.uint64(32)) | pairs[:, 1]

    def copy(self) -> MT19937:
        """An independent engine in the same state."""
        twin = MT19937.__new__(MT19937)
        twin._bits = np.random.MT19937()
        twin.load_state_bytes(self.state_bytes())
        return twin

    # --------------------------------------------------------------------------------------------- state bytes
    def state_bytes(self) -> bytes:
        """The state in PyTorch's byte layout (``torch.get_rng_state()``)."""
        state = self._bits.state["state"]
        pos = int(state["pos"])
        left, nxt = N + 1 - pos, pos
        if self._fresh and pos == N:
            left, nxt = 1, 0
        double_valid = self.next_double_normal is not None
        float_valid = self.next_float_normal is not None
        return b"".join(
            (
                _HEAD.pack(self.initial_seed & 0xFFFFFFFFFFFFFFFF, left, 1, nxt),
                np.asarray(state["key"], dtype="<u8").tobytes(),
                _TAIL.pack(
                    0.0,
                    self.next_double_normal if double_valid else 0.0,
                    0.0,
                    int(double_valid),
                    self.next_float_normal if float_valid else 0.0,
                    float_valid,
                ),
            )
        )

    def load_state_bytes(self, data: bytes) -> None:
        """Take the state from PyTorch's byte layout; raise ``RuntimeError`` as PyTorch does for a bad one."""
        if len(data) != STATE_SIZE:
            raise RuntimeError(
                f"Expected a CPUGeneratorImplState of size {STATE_SIZE} but found the input RNG state size to be "
                f"{len(data)}"
            )
        seed, left, seeded, nxt = _HEAD.unpack_from(data, 0)
        if not seeded or not 0 < left <= N or nxt > N:
            raise RuntimeError("Invalid mt19937 state")
        words = np.frombuffer(data, dtype="<u8", count=N, offset=_WORDS_AT).astype(np.uint32)
        _, normal_y, _, double_valid, float_normal, float_valid = _TAIL.unpack_from(data, _TAIL_AT)
        # left counts down to the twist: at 1 the next draw twists first, as NumPy does at position 624
        self._set_words(words, N if left == 1 else nxt)
        self._fresh = left == 1 and nxt == 0
        self.initial_seed = seed
        self.next_double_normal = float(normal_y) if double_valid else None
        self.next_float_normal = float(float_normal) if float_valid else None
