"""Run metadata written beside every result: package versions, the git SHA and
whether the tree was dirty; and the rule that the repository's own results/ and
benchmarks/ are written only from a clean tree."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from mopa.errors import InvalidParameterError

SOURCE = Path(__file__).resolve().parent
"""mopa's source: the checkout whose commit a run records."""

PACKAGES = ("mopa", "jax", "jaxlib", "flax", "optax", "chex", "numpy", "jaxmarl")


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (``None`` where it is not installed)."""
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = sys.version.split()[0]
    return versions


@dataclasses.dataclass(frozen=True)
class GitState:
    """Where mopa's source comes from: the checkout's commit and whether its
    tracked files differ from it (``diff_sha256``: SHA-256 of ``git diff HEAD
    --binary``, so two dirty runs can be told apart)."""

    root: Path
    sha: str
    dirty: bool
    diff_sha256: str | None


def git_state(directory: str | Path | None = None) -> GitState | None:
    """The git state of the checkout holding ``directory`` (default: mopa's source),
    or ``None`` outside a git checkout."""
    directory = Path(directory) if directory else SOURCE

    def git(*args: str) -> bytes:
        return subprocess.run(
            ["git", *args], cwd=directory, capture_output=True, check=True, timeout=10
        ).stdout

    try:
        root = Path(git("rev-parse", "--show-toplevel").decode().strip())
        sha = git("rev-parse", "HEAD").decode().strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
        diff = git("diff", "HEAD", "--binary") if dirty else b""
    except (OSError, subprocess.SubprocessError):
        return None
    digest = hashlib.sha256(diff).hexdigest() if dirty else None
    return GitState(root, sha, dirty, digest)


def git_sha(directory: str | Path | None = None) -> str | None:
    """The commit checked out where mopa's source lives (with ``-dirty`` when the
    work tree has uncommitted changes), or ``None`` outside a git checkout."""
    state = git_state(directory)
    if state is None:
        return None
    return f"{state.sha}-dirty" if state.dirty else state.sha


RECORD_FOLDERS = ("results", "benchmarks")
"""The repository's folders of committed figures: written only from a clean tree."""


def check_clean_for(path: str | Path, allow_dirty: bool = False) -> None:
    """Refuse to write ``path`` inside the repository's own ``results/`` or
    ``benchmarks/`` while mopa's source has uncommitted changes: a figure there
    must name the commit that produced it.

    Args:
        path: the folder or file about to be written.
        allow_dirty: write anyway (its ``meta.json`` then names a dirty tree).

    Raises:
        InvalidParameterError: ``path`` is a record folder of a dirty checkout.
    """
    if allow_dirty:
        return
    state = git_state()
    if state is None or not state.dirty:
        return
    target = Path(path).resolve()
    for folder in RECORD_FOLDERS:
        if target.is_relative_to(state.root / folder):
            raise InvalidParameterError(
                f"{path} is in the repository's {folder}/ and the source has "
                "uncommitted changes: commit first, or pass --allow-dirty"
            )


def run_metadata(config: dict[str, Any]) -> dict[str, Any]:
    """``{"config", "versions", "git_sha", "git_dirty", "git_diff_sha256",
    "platform", "machine", "numerics"}`` for a run; ``machine`` holds the CPU
    count, the JAX devices and :func:`cpu_description`, ``numerics`` the mode the
    process computes in (:func:`mopa.core.numerics.numerics_record`). Call it when
    the run starts: the source it records is the source that ran."""
    import jax

    from mopa.core.numerics import numerics_record

    state = git_state()
    return {
        "config": config,
        "versions": package_versions(),
        "git_sha": None if state is None else state.sha + "-dirty" * state.dirty,
        "git_dirty": None if state is None else state.dirty,
        "git_diff_sha256": None if state is None else state.diff_sha256,
        "platform": platform.platform(),
        "machine": {
            "cpus": _cpu_count(),
            "devices": [str(d) for d in jax.devices()],
            "cpu": cpu_description(),
        },
        "numerics": numerics_record(),
    }


ISA_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
    "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile",
)  # fmt: skip
"""The vector extensions XLA's CPU compiler may use, as Linux names them."""


def cpu_description() -> dict[str, Any]:
    """``{"model", "isa", "l1d_kib"}``: the processor's name, which of
    :data:`ISA_FLAGS` it has and its L1 data cache per core. XLA compiles for the
    processor it runs on, and Eigen blocks its products by the L1 cache, so in
    native numerics the float rounding of a program, and a training run that
    amplifies it, can differ between processors with the same jax, code and seeds
    (:mod:`mopa.core.numerics`); a result records where it was computed."""
    model, flags = platform.processor() or None, set()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:  # not Linux
        pass
    return {
        "model": model,
        "isa": [flag for flag in ISA_FLAGS if flag in flags],
        "l1d_kib": _l1d_kib(),
    }


def _l1d_kib() -> int | None:
    """The first core's L1 data cache in KiB, as Linux reports it (``None``
    elsewhere)."""
    folder = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(folder.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if level == "1" and kind == "Data" and size.endswith("K"):
            return int(size[:-1])
    return None


def _cpu_count() -> int | None:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count()
