"""XLA settings the ``mopa`` command applies before any JAX work."""

import os

from mopa.core.devices import QUICK_COMPILE_FLAGS, use_quick_compile


def test_quick_compile_adds_its_flags_unless_the_user_set_them(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    assert use_quick_compile()
    flags = os.environ["XLA_FLAGS"].split()
    assert flags == ["--xla_cpu_enable_fast_math=false", *QUICK_COMPILE_FLAGS]
    assert not use_quick_compile()  # already there: unchanged
    assert os.environ["XLA_FLAGS"].split() == flags
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
    assert not use_quick_compile()  # the user's choice wins
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=2"


def test_the_mopa_command_uses_them_for_quick_profiles_only(monkeypatch, capsys):
    from mopa.cli.main import main

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    # An unknown experiment fails after the settings are applied, before any work.
    assert main(["experiment", "no_such_experiment", "--profile", "default"]) == 2
    assert "XLA_FLAGS" not in os.environ
    assert main(["experiment", "no_such_experiment", "--profile", "quick"]) == 2
    assert os.environ["XLA_FLAGS"].split() == list(QUICK_COMPILE_FLAGS)
    assert "no_such_experiment" in capsys.readouterr().err


def test_the_installed_xla_accepts_the_quick_flags():
    # XLA aborts the whole process on a flag it does not know (jaxlib 0.11 dropped
    # one of the older emitters' flags), so run a computation under them apart.
    import subprocess
    import sys

    env = {**os.environ, "XLA_FLAGS": " ".join(QUICK_COMPILE_FLAGS)}
    env["JAX_PLATFORMS"] = "cpu"
    code = "import jax.numpy as jnp; print(float(jnp.arange(4.0).sum()))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == "6.0"
