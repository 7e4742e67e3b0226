"""Gzip bodies assembled from images compressed once, instead of compressing every frame anew.

A frame is mostly two 16 KB base64 images that recur across frames. Each image is deflated
once into a byte-aligned, non-final chunk (a sync flush; its back-references stay inside
it), so chunks can follow one another in one deflate stream; the short JSON between them
goes in as stored blocks. Only the CRC-32 of the whole body is computed per answer.
"""

from __future__ import annotations

__all__ = [
    "FINAL_BLOCK", "GZIP_HEADER", "Picture", "STORED_MAX", "gzipped", "plain", "stored_blocks",
]

import struct
import zlib

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, no mtime
FINAL_BLOCK = b"\x01\x00\x00\xff\xff"  # an empty stored block marked last
STORED_MAX = 0xFFFF


class Picture:
    """One base64 image as bytes, as text, and (on first use) as a deflate chunk."""

    __slots__ = ("raw", "_chunk")

    def __init__(self, b64: str) -> None:
        self.raw = b64.encode("ascii")
        self._chunk: bytes | None = None

    @property
    def b64(self) -> str:
        return self.raw.decode("ascii")

    def chunk(self) -> bytes:
        if self._chunk is None:
            z = zlib.compressobj(1, zlib.DEFLATED, -15)
            self._chunk = z.compress(self.raw) + z.flush(zlib.Z_SYNC_FLUSH)
        return self._chunk


def stored_blocks(data: bytes) -> bytes:
    """``data`` as non-final stored deflate blocks (starting on a byte boundary)."""
    out = []
    for i in range(0, len(data), STORED_MAX):
        part = data[i:i + STORED_MAX]
        out.append(b"\x00" + struct.pack("<HH", len(part), len(part) ^ 0xFFFF) + part)
    return b"".join(out)


def plain(pieces: list[bytes | Picture]) -> bytes:
    return b"".join(p.raw if isinstance(p, Picture) else p for p in pieces)


def gzipped(pieces: list[bytes | Picture]) -> bytes:
    """One gzip member whose content is ``plain(pieces)``."""
    crc, size, out = 0, 0, [GZIP_HEADER]
    for p in pieces:
        raw = p.raw if isinstance(p, Picture) else p
        crc = zlib.crc32(raw, crc)
        size += len(raw)
        if isinstance(p, Picture):
            out.append(p.chunk())
        elif raw:
            out.append(stored_blocks(raw))
    out.append(FINAL_BLOCK)
    out.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
    return b"".join(out)
