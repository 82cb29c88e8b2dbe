"""Test-session settings: the persistent compilation cache the ``mopa`` command uses
(:mod:`mopa.core.compile_cache`; ``MOPA_COMPILE_CACHE=0`` turns it off), so a test
that rebuilds a program an earlier test, CLI subprocess or test run compiled loads
it instead of compiling it again; and JaxMARL imported once up front, because its
import replaces ``sys.stdout`` and would otherwise swallow the output of whichever
test first imports it under output capture. Every test process (and CLI
subprocess) sees three CPU devices, so training runs of two or three seeds take the
sharded path the ``mopa`` command takes (see :mod:`mopa.core.devices`), and XLA
compiles with its quickest settings."""

import importlib.util
import os
import warnings

import pytest

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "3")
from mopa.core.compile_cache import use_compile_cache
from mopa.core.devices import use_quick_compile

# Tests spend most of their time compiling small programs (see QUICK_COMPILE_FLAGS;
# XLA reads its flags, and JAX opens the cache, at the first compilation, after this).
use_quick_compile()
use_compile_cache()

if importlib.util.find_spec("jaxmarl") is not None:
    import jaxmarl  # noqa: F401


@pytest.fixture(scope="module")
def ray_backend():
    """A :class:`~mopa.league.backend.RayBackend` of two workers on a local Ray
    instance of two CPUs, shut down after the module (skips without Ray)."""
    ray = pytest.importorskip(
        "ray", reason="Ray is not installed (the ray extra: pip install mopa[ray])"
    )
    from mopa.league.backend import RayBackend

    with warnings.catch_warnings():  # Ray's fork + exec, not a bare fork
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        ray.init(num_cpus=2, include_dashboard=False)
    try:
        yield RayBackend(num_workers=2)
    finally:
        ray.shutdown()
