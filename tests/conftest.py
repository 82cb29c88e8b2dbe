"""Test-session settings: a persistent compilation cache in a temporary folder, so
tests that rebuild the same jitted program (a resumed run, a CLI subprocess) load
it instead of compiling it again; and JaxMARL imported once up front, because its
import replaces ``sys.stdout`` and would otherwise swallow the output of whichever
test first imports it under output capture. Every test process (and CLI
subprocess) sees three CPU devices, so training runs of two or three seeds take the
sharded path the ``mopa`` command takes (see :mod:`mopa.core.devices`), and XLA
compiles with its quickest settings."""

import importlib.util
import os

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "3")
import jax
import pytest

from mopa.core.devices import use_quick_compile

# Tests spend most of their time compiling small programs (see QUICK_COMPILE_FLAGS;
# XLA reads its flags at the first compilation, after this).
use_quick_compile()

if importlib.util.find_spec("jaxmarl") is not None:
    import jaxmarl  # noqa: F401


@pytest.fixture(scope="session", autouse=True)
def compilation_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jax_cache")
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    yield folder
