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


@pytest.mark.slow
def test_portable_mode_makes_every_dot_canonical_products_of_bounded_length():
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
        text = product.lower(a, b).as_text()
        print(text.count("stablehlo.dot_general"))
        print(text.count("stablehlo.optimization_barrier"))
        # The same numbers as canonical products of 128 terms summed in order.
        at = np.ascontiguousarray(np.asarray(a).T)
        parts = [
            jnp.asarray(at[:, s : s + 128]) @ b[s : s + 128]
            for s in range(0, 1000, 128)
        ]
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        print(bool((product(a, b) == total).all()))
        exact = np.asarray(a, np.float64).T @ np.asarray(b, np.float64)
        print(float(np.abs(np.asarray(product(a, b)) - exact).max()))
        # Two contracted axes and a batch axis: 8 x 100 terms in slices of 128.
        c = jax.random.normal(jax.random.key(2), (3, 8, 100, 5))
        d = jax.random.normal(jax.random.key(3), (3, 8, 100, 7))
        two = jax.jit(lambda c, d: jnp.einsum("bikn,bikm->bnm", c, d))
        print(two.lower(c, d).as_text().count("stablehlo.dot_general"))
        exact = np.einsum("bikn,bikm->bnm", np.float64(c), np.float64(d))
        print(float(np.abs(np.asarray(two(c, d)) - exact).max()))
        # A canonical short dot is fenced off from its neighbours too; an
        # integer dot is left as it was.
        x, y = jnp.ones((4, 128)), jnp.ones((128, 3))
        short = jax.jit(lambda x, y: x @ y).lower(x, y)
        print(short.as_text().count("stablehlo.optimization_barrier"))
        ints = jax.jit(lambda x: x.T @ x).lower(jnp.ones((600, 3), jnp.int32))
        print(ints.as_text().count("stablehlo.dot_general"))
        print(numerics.numerics_mode())
        """
    )
    mode, dots, barriers, same, error, two, two_error, short, ints, after = (
        printed.split()
    )
    assert mode == "portable" and after == "portable"
    # ceil(1000 / 128) products, a barrier before and one after
    assert int(dots) == 8 and int(barriers) == 2
    assert same == "True"  # the canonical products summed in order
    assert float(error) < 1e-3  # and the product it is (float32 rounding)
    assert int(two) == 7  # ceil(800 / 128)
    assert float(two_error) < 1e-3
    assert int(short) == 2 and int(ints) == 1


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


@pytest.mark.slow
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
        "dots": numerics.PORTABLE_DOTS,
    }
    assert isinstance(meta["machine"]["cpu"]["l1d_kib"], int)


def test_a_native_process_records_native_numerics():
    assert run_metadata({})["numerics"] == {"mode": "native"}


def test_the_processor_is_described_as_this_process_sees_it():
    # Under an emulated processor (qemu-x86_64 -cpu Haswell-v4) /proc/cpuinfo
    # describes the host; the extensions a program can use are what CPUID
    # reports, as NumPy read them.
    from numpy._core._multiarray_umath import __cpu_features__

    from mopa.core.runinfo import cpu_description

    cpu = cpu_description()
    assert ("avx2" in cpu["isa"]) == bool(__cpu_features__["AVX2"])
    assert ("avx512f" in cpu["isa"]) == bool(__cpu_features__["AVX512F"])
    assert "listed_isa" not in cpu or cpu["listed_isa"] != cpu["isa"]
