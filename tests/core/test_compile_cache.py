"""The persistent compilation cache: shared between processes, and its off switches.

Each check runs fresh Python processes (JAX opens the cache once per process, at its
first compilation) on a cache folder of its own, and counts JAX's own cache hits and
misses (``jax.monitoring`` events), not just the files.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from mopa.core.compile_cache import (
    COMPILE_CACHE_DIR_ENV,
    COMPILE_CACHE_ENV,
    compile_cache_dir,
)

# Compiles one small jitted program (its only compilation); prints JAX's cache
# events and the result.
PROGRAM = """
import json
import jax
import jax.numpy as jnp
import numpy as np
from mopa.core.compile_cache import use_compile_cache

events = []
jax.monitoring.register_event_listener(lambda name, **_: events.append(name))
folder = use_compile_cache()

@jax.jit
def f(x):
    return jnp.cumsum(jnp.sin(x) @ x.T, axis=0).sum()

value = float(f(np.arange(64, dtype=np.float32).reshape(8, 8) / 64))
print(json.dumps({
    "folder": None if folder is None else str(folder),
    "hits": events.count("/jax/compilation_cache/cache_hits"),
    "misses": events.count("/jax/compilation_cache/cache_misses"),
    "value": value,
}))
"""

# The settings a user may have made, which every process here replaces.
USER_SETTINGS = (
    COMPILE_CACHE_ENV,
    COMPILE_CACHE_DIR_ENV,
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_ENABLE_COMPILATION_CACHE",
)


def _start(command, folder, **settings):
    env = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS}
    return subprocess.Popen(
        command,
        env={**env, COMPILE_CACHE_DIR_ENV: str(folder), **settings},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _program(folder, **settings):
    return _start([sys.executable, "-c", PROGRAM], folder, **settings)


def _finish(process) -> dict | str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "persistent compilation cache" not in err  # JAX's read/write warnings
    lines = out.strip().splitlines()
    return json.loads(lines[-1]) if lines[-1].startswith("{") else out


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_one_process_reads_what_two_wrote_at_once_unless_turned_off(tmp_path):
    folder, cold = tmp_path / "cache", tmp_path / "cold"
    writers = [_finish(p) for p in [_program(folder), _program(folder)]]
    entries = _entries(folder)
    readers = [
        _program(folder),
        _program(folder, **{COMPILE_CACHE_ENV: "0"}),
        _program(cold, **{COMPILE_CACHE_ENV: "off"}),
    ]
    reader, off_warm, off_cold = (_finish(p) for p in readers)
    # One entry, f's, whole (a writer renames a finished file into place) and in
    # JAX's naming; no temporary file left beside it.
    assert len(entries) == 1 and entries[0].startswith("jit_f-")
    assert entries[0].endswith("-cache")
    for writer in writers:  # a miss, or a hit if the other wrote first
        assert writer["hits"] + writer["misses"] == 1
    assert reader["folder"] == str(folder)
    assert (reader["hits"], reader["misses"]) == (1, 0)
    # Turned off, a process neither reads the warm cache nor writes an empty one.
    assert off_warm["folder"] is None and off_cold["folder"] is None
    assert (off_warm["hits"], off_warm["misses"]) == (0, 0)
    assert _entries(folder) == entries and _entries(cold) == []
    values = {r["value"] for r in [*writers, reader, off_warm, off_cold]}
    assert len(values) == 1


def test_the_mopa_command_uses_the_cache_unless_told_not_to(tmp_path):
    runs = {
        flags: _start(
            [sys.executable, "-m", "mopa", *flags, "render", "--steps", "2"]
            + ["--out", str(tmp_path / f"{len(flags)}.gif")],
            tmp_path / f"cache{len(flags)}",
        )
        for flags in [(), ("--no-compile-cache",)]
    }
    for process in runs.values():
        assert "wrote" in _finish(process)
    assert any(e.endswith("-cache") for e in _entries(tmp_path / "cache0"))
    assert _entries(tmp_path / "cache1") == []


def test_the_cache_folder_is_the_user_cache_folder_unless_moved(monkeypatch):
    monkeypatch.delenv(COMPILE_CACHE_DIR_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "/home/ada")
    assert compile_cache_dir() == Path("/home/ada/.cache/mopa/jax")
    monkeypatch.setenv("XDG_CACHE_HOME", "/var/cache/ada")
    assert compile_cache_dir() == Path("/var/cache/ada/mopa/jax")
    monkeypatch.setenv(COMPILE_CACHE_DIR_ENV, "~/jax-programs")
    assert compile_cache_dir() == Path("/home/ada/jax-programs")
