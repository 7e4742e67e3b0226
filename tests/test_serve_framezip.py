"""Gzip bodies stitched from pre-deflated pictures decode to exactly the plain body."""

from __future__ import annotations

import base64
import gzip
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from serve.games.framezip import Picture, gzipped, plain

texts = st.binary(max_size=300).map(lambda b: b.hex().encode())
pictures = st.binary(min_size=1, max_size=3000).map(
    lambda b: Picture(base64.b64encode(b * 4).decode()))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(texts, pictures), max_size=8))
def test_stitched_gzip_decodes_to_the_plain_body(pieces):
    body = gzipped(pieces)
    assert gzip.decompress(body) == plain(pieces)
    stream = zlib.decompressobj(31)
    assert stream.decompress(body) + stream.flush() == plain(pieces) and stream.eof


def test_text_longer_than_one_stored_block_and_a_reused_picture():
    pic = Picture(base64.b64encode(bytes(range(256)) * 64).decode())
    pieces = [b"x" * 70_000, pic, b"{}", pic]
    assert gzip.decompress(gzipped(pieces)) == plain(pieces)
    assert len(gzipped([pic])) < len(pic.raw) // 4
