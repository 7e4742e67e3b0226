"""Stage tables on disk: Parquet written atomically with stable bytes, and checked on reading.

A table file either holds a complete table or does not exist: it is written beside its final
name and renamed into place, so an interrupted stage never leaves a file that looks finished.
"""

from __future__ import annotations

__all__ = [
    "as_float", "as_int", "fsync_path", "read_parquet", "sha256_file", "write_parquet",
    "write_text",
]

import hashlib
import os
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import InputError


def write_parquet(df: pl.DataFrame, path: Path) -> str:
    """Write ``df`` to ``path`` atomically; return the file's sha256."""
    table = df.to_arrow()
    # Plain (not large) strings: the type readers of the format expect, and stable bytes.
    fields = [pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
              for f in table.schema]
    table = table.cast(pa.schema(fields))
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd", compression_level=3,
                   write_statistics=False, store_schema=False)
    fsync_path(tmp)
    os.replace(tmp, path)
    return sha256_file(path)


def write_text(text: str, path: Path) -> None:
    """Write a small text file atomically, as UTF-8 whatever the locale."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    fsync_path(tmp)
    os.replace(tmp, path)


def read_parquet(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    """A table (or its ``columns``) as a polars DataFrame; a file that is not one is refused.

    Versions are read from folders anyone can edit: a truncated or foreign file, or one
    lacking a column, is a ``PipelineError`` naming the file rather than a parser's traceback.
    """
    try:
        return pl.read_parquet(path, columns=columns)
    except pl.exceptions.ColumnNotFoundError as e:
        raise InputError(f"{path} lacks a column ({str(e).splitlines()[0]})") from None
    except (pl.exceptions.PolarsError, pa.ArrowException) as e:
        raise InputError(f"{path} is not a readable Parquet table "
                            f"({str(e).splitlines()[0]})") from None


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fsync_path(path: Path) -> None:
    """Flush a file, or a folder's entries (after a rename), to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def as_float(value: Any) -> float:
    """A polars aggregate or cell (typed as any Python literal) as a float."""
    return float(value)


def as_int(value: Any) -> int:
    """A polars aggregate or cell (typed as any Python literal) as an int."""
    return int(value)
