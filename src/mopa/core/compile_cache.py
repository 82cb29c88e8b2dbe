"""A persistent compilation cache shared by every ``mopa`` process.

Much of a quick run's time, and of the test suite's, is XLA compiling programs that
an earlier process already compiled. JAX's persistent compilation cache keeps each
compiled program in a folder, keyed by a hash of the program, the jaxlib version,
the backend, ``XLA_FLAGS``, the compile options and the devices; a later process that
builds the same program loads it instead of compiling it. Programs compiled under
other flags or another device count get other keys (checked with jax 0.10.2: one
function compiled in a process with three CPU devices, in one with eight, and in one
with eight and an XLA flag added, gets three keys), so the test suite's programs
(three devices) and the command's (eight) are kept apart. The ``mopa`` command
calls :func:`use_compile_cache` before any JAX work, and so does the test suite.

Beside the compiled programs, the folder's ``programs`` subfolder keeps traced ones
(:mod:`mopa.core.program_store`), on and off with the cache, so a later process
skips tracing as well as compiling them.

On by default, in ``$XDG_CACHE_HOME/mopa/jax`` (``~/.cache/mopa/jax``);
``MOPA_COMPILE_CACHE_DIR`` moves it, ``MOPA_COMPILE_CACHE=0`` (or ``mopa
--no-compile-cache``) turns it off. Deleting the folder is always safe.

Several processes may share the folder (the test suite's workers, a training run
and a report being built). JAX's own file store (``jax._src.lru_cache.LRUCache``,
jax 0.10) writes an entry with ``Path.write_bytes``, in place: a process reading
the entry meanwhile, or killed while writing it, sees or leaves a truncated file,
and since a key that exists is never written again, a truncated entry stays (JAX
warns and recompiles each time it meets it). Its size cap is worse shared: the
eviction it enables reads every entry's access-time file under a lock and fails
when another process has just removed one (jax-ml/jax#22718,
FileNotFoundError/PermissionError on ``-atime`` files in parallel; jax-ml/jax#39880,
one orphaned entry stops every later write). So the cache here has no size cap, and
:class:`_WholeFileStore` replaces JAX's store with one that writes each entry to a
temporary file and renames it into place (:func:`mopa.core.files.atomic_write`): a
reader sees no entry or a whole one, and two processes that compile the same
program both write a complete entry for the same key (either is right). Entries
keep JAX's names (``KEY-cache``), so plain JAX reads the same folder. On some CPUs
XLA rejects every entry it loads (jax-ml/jax#38445, AVX-512 hosts): it logs an
error and compiles, so the cache then saves nothing but breaks nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
from jax._src import compilation_cache
from jax._src.compilation_cache_interface import CacheInterface

from mopa.core.checks import switched_off
from mopa.core.files import atomic_write
from mopa.core.program_store import use_program_store

COMPILE_CACHE_ENV = "MOPA_COMPILE_CACHE"
"""Set to ``0`` (or ``false``, ``no``, ``off``) to turn the cache off."""

COMPILE_CACHE_DIR_ENV = "MOPA_COMPILE_CACHE_DIR"
"""The cache's folder, instead of the user cache folder's ``mopa/jax``."""

MIN_COMPILE_SECONDS = 0.0
"""Programs that compiled faster than this are not written. Zero: most of a quick
run's programs are small, and loading one is still faster than compiling it (in the
quick Exp 6 run, 2 ms against 12 ms on average for the 450 that compile in under
20 ms)."""

PROGRAMS_FOLDER = "programs"
"""The cache folder's subfolder of traced programs (:mod:`mopa.core.program_store`),
on and off with the cache."""


def compile_cache_dir() -> Path:
    """The cache's folder: ``$MOPA_COMPILE_CACHE_DIR`` if set, else ``mopa/jax`` in
    the user cache folder (``$XDG_CACHE_HOME``, or ``~/.cache``)."""
    if os.environ.get(COMPILE_CACHE_DIR_ENV):
        return Path(os.environ[COMPILE_CACHE_DIR_ENV]).expanduser()
    user_cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(user_cache) / "mopa" / "jax"


def use_compile_cache(enabled: bool = True) -> Path | None:
    """Turn JAX's persistent compilation cache on, in :func:`compile_cache_dir`
    (or the folder the user gave JAX itself, ``JAX_COMPILATION_CACHE_DIR``, when
    ``MOPA_COMPILE_CACHE_DIR`` is unset), or off when ``enabled`` is false or
    ``MOPA_COMPILE_CACHE`` says so. JAX opens the cache at its first compilation,
    so this takes effect only when called before it.

    Returns:
        The cache's folder, or ``None`` when the cache is off.
    """
    if not enabled or switched_off(COMPILE_CACHE_ENV):
        jax.config.update("jax_enable_compilation_cache", False)
        use_program_store(None)
        return None
    folder = compile_cache_dir()
    if COMPILE_CACHE_DIR_ENV not in os.environ and jax.config.jax_compilation_cache_dir:
        folder = Path(jax.config.jax_compilation_cache_dir)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_compilation_cache_max_size", -1)  # no eviction: see above
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    _install_whole_file_store(folder)
    use_program_store(folder / PROGRAMS_FOLDER)
    return folder


def _install_whole_file_store(folder: Path) -> None:
    """Make JAX read and write the cache through :class:`_WholeFileStore`, unless
    it already opened a cache (it compiled something since the cache was on)."""
    if compilation_cache._cache is None:
        compilation_cache._cache = _WholeFileStore(folder)


class _WholeFileStore(CacheInterface):
    """JAX's cache entries, one file each (``KEY-cache``, JAX's naming), each
    written whole: to a temporary file beside it, then renamed into place."""

    def __init__(self, folder: Path):
        self._path = Path(folder)

    def get(self, key: str) -> bytes | None:
        try:
            return (self._path / f"{key}-cache").read_bytes()
        except FileNotFoundError:
            return None

    def put(self, key: str, value: bytes) -> None:
        path = self._path / f"{key}-cache"
        if not path.exists():
            atomic_write(path, lambda file: file.write(value))


# -- the kernel's limit on memory mappings ------------------------------------------
MAPPINGS_SHARE = 0.5
"""Share of the kernel's limit on a process's memory mappings past which
:func:`bound_compiled_programs` drops JAX's compiled programs."""


def memory_mappings() -> tuple[int, int] | None:
    """``(this process's memory mappings, the kernel's limit)`` (Linux's
    ``/proc/self/maps`` and ``vm.max_map_count``), or ``None`` where the system
    does not say."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            count = sum(1 for _ in maps)
        limit = int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return None
    return count, limit


def bound_compiled_programs(share: float | None = None) -> bool:
    """Drop JAX's compiled programs (``jax.clear_caches``) once this process holds
    more than ``share`` (:data:`MAPPINGS_SHARE` by default) of the kernel's limit
    on memory mappings.

    XLA's CPU programs live in memory mappings of their own, and a long run that
    compiles thousands of programs (a league, a verification of a long folder)
    fails with ``LLVM compilation error: Cannot allocate memory`` when it reaches
    the limit (65,530 by default), long before memory runs out. A program
    compiled again is the same program, so no figure moves; with the persistent
    cache on it is loaded rather than compiled. :class:`~mopa.core.stages.Stages`
    calls this after every stage it runs.

    Returns:
        Whether the programs were dropped.
    """
    share = MAPPINGS_SHARE if share is None else share
    mappings = memory_mappings()
    if mappings is None or mappings[0] <= share * mappings[1]:
        return False
    jax.clear_caches()
    return True
