"""Where the engine's compiled kernels are cached: ``.numba_cache/<hash of engine sources>``.

numba checks only a kernel's own file, so a kernel that inlines a helper changed in another
file would otherwise run stale machine code: a folder per hash of all the engine's sources
(its subpackages' too) rules that out. Only this package's kernels are located so
(``NUMBA_CACHE_DIR``, when set, is the base folder); the process's environment and other code's
caching are left alone. Kernel modules take ``njit`` from here, which puts the locator in place
before any kernel. The first compilation of a kernel into an empty folder says so, once per
folder (a line on stderr): a first build or vector environment is slower, not hung.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

from numba import njit
from numba.core import event
from numba.core.caching import CacheImpl, UserProvidedCacheLocator

__all__ = ["COMPILING_NOTICE", "EngineCacheLocator", "cache_dir", "njit", "say_compiling"]

ENGINE = Path(__file__).resolve().parent
COMPILING_NOTICE = ".compiling-said"  # in the cache folder: the line was said for it
log = logging.getLogger(__name__)


@functools.cache
def cache_dir() -> Path:
    """``NUMBA_CACHE_DIR`` (else the repository's ``.numba_cache``) / the sources' hash."""
    digest = hashlib.sha256()
    for path in sorted(ENGINE.rglob("*.py")):
        digest.update(path.relative_to(ENGINE).as_posix().encode() + b"\0" + path.read_bytes())
    base = Path(os.environ.get("NUMBA_CACHE_DIR") or ENGINE.parent / ".numba_cache")
    tag = digest.hexdigest()[:12]
    return base if base.name == tag else base / tag


class EngineCacheLocator(UserProvidedCacheLocator):
    """numba's locator for a user cache folder, for the engine's own kernels alone."""

    def __init__(self, py_func: Any, py_file: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = str(cache_dir() / self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if ENGINE not in Path(py_file).resolve().parents:
            return None
        # the file-backed locator's checks, without the user locator's NUMBA_CACHE_DIR test
        return super(UserProvidedCacheLocator, cls).from_function(py_func, py_file)


if EngineCacheLocator not in CacheImpl._locator_classes:
    CacheImpl._locator_classes.insert(0, EngineCacheLocator)


@functools.cache
def say_compiling() -> None:
    """Log, once per cache folder (the first process to compile into it), that the kernels
    are compiling: a WARNING, so that it shows with no logging set up (a Gymnasium user's)."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.close(os.open(folder / COMPILING_NOTICE, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # another process said it, or an earlier run
    except OSError:
        pass  # a folder it cannot write: compiling every time, so say it every time
    log.warning("compiling the engine's numba kernels (first use only: about 10-20 s more for a "
                "build's grading or the vector environment's first reset and step; then "
                "loaded from %s)", folder)


class _FirstCompilation(event.Listener):
    """numba's compile events (sent on a cache miss only) of the engine's kernels."""

    def on_start(self, ev: event.Event) -> None:
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        if func is not None and ENGINE in Path(func.__code__.co_filename).resolve().parents:
            say_compiling()

    def on_end(self, ev: event.Event) -> None:
        pass


event.register("numba:compile", _FirstCompilation())
