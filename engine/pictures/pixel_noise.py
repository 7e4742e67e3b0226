"""A noisy look's pixel noise inside numba: the same bytes as ``engine.pictures.look.add_noise``.

``add_noise`` reads NumPy's Philox4x64-10 stream keyed by (key, step) and maps 16-bit
uniforms through ``noise_table``; ``philox_block`` is that generator and ``NoiseSteps``
that table as its few breakpoints, so kernels can add the noise frame by frame themselves.
"""

from __future__ import annotations

__all__ = ["MAX_BREAKS", "NoiseSteps", "add_noise_kernel", "noise_steps", "noise_words",
           "philox_block"]

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from engine.kernel_cache import njit
from engine.pictures.look import noise_table

_M0 = np.uint64(0xD2E7470EE14C6C93)
_M1 = np.uint64(0xCA5A826395121157)
_W0 = np.uint64(0x9E3779B97F4A7C15)
_W1 = np.uint64(0xBB67AE8584CAA73B)
_LOW32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_ONE = np.uint64(1)
_WORD = 2**64 - 1
MAX_BREAKS = 80  # 2 * (ceil(6 * MAX_NOISE_STD) + 1) steps of the rounded Gaussian, and some


@njit(cache=True)
def _mulhilo(a: np.uint64, b: np.uint64) -> tuple[np.uint64, np.uint64]:
    """The high and low 64-bit words of the 128-bit product ``a * b``."""
    a_lo, a_hi = a & _LOW32, a >> _S32
    b_lo, b_hi = b & _LOW32, b >> _S32
    ll = a_lo * b_lo
    lh = a_lo * b_hi
    hl = a_hi * b_lo
    cross = (ll >> _S32) + (lh & _LOW32) + hl
    return a_hi * b_hi + (lh >> _S32) + (cross >> _S32), a * b


@njit(cache=True)
def philox_block(counter: np.uint64, key0: np.uint64, key1: np.uint64,
                 out: np.ndarray) -> None:
    """The four words Philox4x64-10 gives for ``counter`` (upper counter words zero):
    NumPy's ``Philox(key=[key0, key1]).random_raw()`` yields block 1, 2, ... in order."""
    c0, c1, c2, c3 = counter, np.uint64(0), np.uint64(0), np.uint64(0)
    k0, k1 = key0, key1
    for r in range(10):
        if r > 0:
            k0 += _W0
            k1 += _W1
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    out[0], out[1], out[2], out[3] = c0, c1, c2, c3


@njit(cache=True)
def _draw(u: int, low: int, breaks: np.ndarray, coarse: np.ndarray) -> int:
    """``noise_table(std)[u]``: ``low`` plus the breakpoints at or below ``u``."""
    i = int(coarse[u >> 8])
    while i < breaks.size and breaks[i] <= u:
        i += 1
    return low + i


@njit(cache=True)
def add_noise_kernel(frame: np.ndarray, key: np.uint64, step: np.uint64, low: int,
                     breaks: np.ndarray, coarse: np.ndarray) -> None:
    """Add the noise of (``key``, ``step``) to the flat uint8 ``frame`` in place, rounded and
    clipped to 0-255, byte for byte as ``engine.pictures.look.add_noise``."""
    words = np.empty(4, np.uint64)
    n = frame.size
    block = np.uint64(0)
    i = 0
    while i < n:
        block += _ONE
        philox_block(block, key, step, words)
        for w in range(4):
            word = words[w]
            for part in range(4):
                if i < n:
                    u = np.int64((word >> np.uint64(16 * part)) & np.uint64(0xFFFF))
                    v = int(frame[i]) + _draw(u, low, breaks, coarse)  # type: ignore[arg-type]
                    frame[i] = 0 if v < 0 else (255 if v > 255 else v)
                    i += 1


@dataclass(frozen=True, eq=False)
class NoiseSteps:
    """``noise_table(std)`` as breakpoints: the table is ``low`` plus how many of ``breaks``
    are at or below the index; ``coarse[u >> 8]`` is how many are below ``u & ~255``."""

    low: int
    breaks: np.ndarray  # int32, ascending, at most MAX_BREAKS
    coarse: np.ndarray  # uint8 (256,)


@lru_cache(maxsize=512)
def noise_steps(std: float) -> NoiseSteps:
    """The breakpoints of ``noise_table(std)``, read off the table itself."""
    table = noise_table(std).astype(np.int64)
    low = int(table[0])
    values = np.arange(low + 1, int(table[-1]) + 1)
    breaks = np.searchsorted(table, values, side="left").astype(np.int32)
    if breaks.size > MAX_BREAKS:
        raise ValueError(f"noise std {std}: {breaks.size} steps, more than {MAX_BREAKS}")
    coarse = np.searchsorted(breaks, np.arange(256) * 256, side="left").astype(np.uint8)
    return NoiseSteps(low, breaks, coarse)


def noise_words(key: int, step: int) -> tuple[np.uint64, np.uint64]:
    """The Philox key words of (key, step), as ``add_noise`` forms them."""
    return np.uint64(key & _WORD), np.uint64(step & _WORD)
