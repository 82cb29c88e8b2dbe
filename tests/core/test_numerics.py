"""Portable numerics (:mod:`mopa.core.numerics`): what the mode sets, that every
long dot is an ordered sum of bounded ones, and that the command line chooses the
mode before NumPy or JAX loads and records it.

Portable mode changes how this process lowers dots, so every check that turns it
on runs in a fresh Python process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from mopa.cli.entry import numerics_choice
from mopa.cli.main import main
from mopa.core import numerics
from mopa.core.runinfo import run_metadata


def _python(code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter (native numerics unless it says
    otherwise) and return what it printed."""
    clean = {
        k: v for k, v in os.environ.items() if k not in numerics.PORTABLE_ENVIRONMENT
    }
    clean.pop("XLA_FLAGS", None)
    clean.pop(numerics.ENVIRONMENT_VARIABLE, None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**clean, "JAX_PLATFORMS": "cpu", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_portable_mode_bounds_every_long_dot_and_sums_the_parts_in_order():
    printed = _python(
        """
        from mopa.core import numerics
        assert numerics.numerics_mode() == "native"
        print(numerics.use_portable_numerics())
        import jax, jax.numpy as jnp, numpy as np
        # A weight gradient's product: the contracted axis leads on both sides.
        a = jax.random.normal(jax.random.key(0), (1000, 64))
        b = jax.random.normal(jax.random.key(1), (1000, 48))
        product = jax.jit(lambda a, b: a.T @ b)
        print(product.lower(a, b).as_text().count("stablehlo.dot_general"))
        parts = [a[s : s + 256].T @ b[s : s + 256] for s in range(0, 1000, 256)]
        total = ((parts[0] + parts[1]) + parts[2]) + parts[3]
        print(bool((product(a, b) == total).all()))
        exact = np.asarray(a, np.float64).T @ np.asarray(b, np.float64)
        print(float(np.abs(np.asarray(product(a, b)) - exact).max()))
        # Two contracted axes (8 x 100 terms): slices of the longer one, 32 rows
        # of 8 at a time; a short dot and an integer dot are left as they were.
        c = jax.random.normal(jax.random.key(2), (8, 100, 5))
        d = jax.random.normal(jax.random.key(3), (8, 100, 7))
        two = jax.jit(lambda c, d: jnp.einsum("ikn,ikm->nm", c, d))
        print(two.lower(c, d).as_text().count("stablehlo.dot_general"))
        short = jax.jit(lambda x: x @ x.T).lower(jnp.ones((4, 256)))
        print(short.as_text().count("stablehlo.dot_general"))
        ints = jax.jit(lambda x: x.T @ x).lower(jnp.ones((600, 3), jnp.int32))
        print(ints.as_text().count("stablehlo.dot_general"))
        print(numerics.numerics_mode())
        """
    )
    mode, dots, same, error, two, short, ints, after = printed.split()
    assert mode == "portable" and after == "portable"
    assert int(dots) == 4  # ceil(1000 / 256) slices of at most 256 terms
    assert same == "True"  # the same numbers as the parts summed in order
    assert float(error) < 1e-3  # and the product it is (float32 rounding)
    assert int(two) == 4  # 100 rows of 8 terms: 32 rows (256 terms) at a time
    assert int(short) == 1 and int(ints) == 1


def test_portable_mode_sets_xla_numpy_and_openblas_and_keeps_other_flags():
    printed = _python(
        """
        import os
        from mopa.core import numerics
        numerics.prepare_environment("portable")
        print(os.environ["XLA_FLAGS"])
        import numpy as np
        from numpy._core._multiarray_umath import __cpu_features__
        wide = ("X86_V4", "AVX512_ICL", "AVX512_SPR")
        print([t for t in wide if __cpu_features__.get(t)])
        import threadpoolctl
        print(sorted({i.get("architecture") for i in threadpoolctl.threadpool_info()}))
        print(sorted({i["num_threads"] for i in threadpoolctl.threadpool_info()}))
        """,
        XLA_FLAGS="--xla_cpu_max_isa=AVX512 --xla_cpu_ftz=true",
    )
    flags, wide, cores, threads = printed.splitlines()
    assert flags.split() == ["--xla_cpu_ftz=true", *numerics.PORTABLE_XLA_FLAGS]
    assert wide == "[]"  # NumPy runs no AVX-512 loop
    assert cores == "['Haswell']" and threads == "[1]"


def test_the_command_chooses_portable_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv(numerics.ENVIRONMENT_VARIABLE, raising=False)
    assert numerics_choice(["train", "--numerics", "native"]) == "portable"
    assert numerics_choice(["--numerics", "native", "train"]) == "native"
    assert numerics_choice(["--no-compile-cache", "--numerics=native", "envs"]) == (
        "native"
    )
    monkeypatch.setenv(numerics.ENVIRONMENT_VARIABLE, "native")
    assert numerics_choice(["envs"]) == "native"
    assert numerics_choice(["--numerics", "portable", "envs"]) == "portable"


def test_a_mode_other_than_the_processes_is_refused_in_one_line(capsys):
    assert main(["--numerics", "portable", "envs"]) == 2  # this process is native
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--numerics portable" in err
    assert main(["--numerics", "fast", "envs"]) == 2
    assert "invalid choice: 'fast'" in capsys.readouterr().err
    with pytest.raises(Exception, match="numerics must be one of"):
        numerics.check_mode("fast")


def test_the_command_records_portable_mode_in_meta_json(tmp_path):
    out = tmp_path / "run"
    _python(
        f"""
        import sys
        from mopa.cli.entry import main
        sys.exit(main(["train", "--algo", "iql", "--steps", "2e3", "--seeds", "1",
                       "--out", "{out}", "--quiet"]))
        """
    )
    meta = json.loads((out / "meta.json").read_text())
    assert meta["numerics"] == {
        "mode": "portable",
        "xla_flags": list(numerics.PORTABLE_XLA_FLAGS),
        "environment": numerics.PORTABLE_ENVIRONMENT,
        "max_contraction": numerics.MAX_CONTRACTION,
    }
    assert isinstance(meta["machine"]["cpu"]["l1d_kib"], int)


def test_a_native_process_records_native_numerics():
    assert run_metadata({})["numerics"] == {"mode": "native"}
