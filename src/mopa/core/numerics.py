"""Portable numerics: a run gives the same digits on every x86-64 processor.

JAX on the CPU is deterministic for one program, processor and set of flags, but
the same program computes other last bits on another processor, and a training run
carries a last bit into other weights, so other figures. Four things pick their code
by the processor they run on, each fixed here:

1. **XLA's compiled loops** use the host's widest vector instructions and, by
   default, approximations of ``exp``, ``tanh`` and the like chosen for the host.
   Portable mode caps code generation at AVX2 (``--xla_cpu_max_isa=AVX2``), which
   every x86-64 processor of the last decade has, and turns the platform-dependent
   approximations off (``--xla_cpu_enable_platform_dependent_math=false``, which
   also puts YNNPACK, XLA's library for dots, into its consistent-arithmetic mode).
2. **Matrix products.** XLA hands a dot whose operands are laid out as ``[M, K] x
   [K, N]`` to YNNPACK and any other (a transposed operand: every weight gradient
   is one) to Eigen. Eigen splits a contraction longer than ``kc`` terms into
   panels summed one after another, and sets ``kc`` from the L1 data cache size it
   reads from the processor: 288 terms with 32 KiB (AMD Zen 2 to 4), 432 with
   48 KiB (Intel Sapphire Rapids, AMD Zen 5), so a sum of 300 terms rounds
   differently on the two. Portable mode lowers every floating-point dot so that
   it contracts at most :data:`MAX_CONTRACTION` terms at a time: a longer one is
   the sum, in order, of the dots over consecutive slices of the contracted axis
   (:func:`install_bounded_dots`). XNNPACK, which picks its kernels by instruction
   set, is off (``--xla_cpu_use_xnnpack=false``), and Eigen runs on one thread
   (``--xla_cpu_multi_thread_eigen=false``: its thread pool splits a contraction
   by the number of cores).
3. **NumPy** dispatches its loops (``log``, ``exp``, reductions) by instruction set
   when it is imported: its AVX-512 targets are turned off
   (``NPY_DISABLE_CPU_FEATURES``), so every processor runs the AVX2 loops.
4. **OpenBLAS** (NumPy's and SciPy's products and solvers, JAX's LAPACK calls)
   picks its kernels by processor: fixed to Haswell's (``OPENBLAS_CORETYPE``),
   on one thread, as OpenMP code (scikit-learn's k-means) is: how they split work
   depends on the number of cores.

The ``mopa`` command runs in portable mode unless told ``--numerics native`` (or
``MOPA_NUMERICS=native``): it sets all of this up before NumPy or JAX is imported
(:mod:`mopa.cli.entry`), and every ``meta.json`` names the mode
(:func:`numerics_record`). A library user calls :func:`use_portable_numerics`
first thing, before importing NumPy or JAX. What portable mode costs in speed is
measured in BENCHMARKS.md; what it does not cover is said there and in RESULTS.md.

This module imports neither NumPy nor JAX at import time, so the command line can
set the environment before either is loaded.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

MODES = ("portable", "native")
"""``portable``: the same digits on every x86-64 processor; ``native``: XLA's,
NumPy's and OpenBLAS's own choices for the processor at hand (faster, and what
every folder written before portable mode existed used)."""

MAX_CONTRACTION = 256
"""The most terms one dot sums in portable mode: below both processors' Eigen
panel (288 terms at 32 KiB of L1, 432 at 48 KiB), a power of two so the common
hidden sizes (64, 128, 256) contract whole."""

PORTABLE_XLA_FLAGS = (
    "--xla_cpu_max_isa=AVX2",
    "--xla_cpu_enable_platform_dependent_math=false",
    "--xla_cpu_use_xnnpack=false",
    "--xla_cpu_multi_thread_eigen=false",
)
"""XLA's CPU flags of portable mode (the module docstring says why each)."""

PORTABLE_ENVIRONMENT = {
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    "OPENBLAS_CORETYPE": "Haswell",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
}
"""Environment variables of portable mode, read by NumPy and OpenBLAS when they
are loaded (NumPy 2's dispatch targets above AVX2 are ``X86_V4``,
``AVX512_ICL`` and ``AVX512_SPR``)."""

ENVIRONMENT_VARIABLE = "MOPA_NUMERICS"
"""Chooses the ``mopa`` command's mode when ``--numerics`` does not."""

_bounded_dots = False


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`.

    Raises:
        InvalidParameterError: another value.
    """
    if mode not in MODES:
        from mopa.errors import InvalidParameterError

        raise InvalidParameterError(f"numerics must be one of {MODES}, got {mode!r}")
    return mode


def prepare_environment(mode: str) -> None:
    """Set this process's environment for ``mode`` before NumPy or JAX is loaded:
    for ``portable``, :data:`PORTABLE_ENVIRONMENT`, and :data:`PORTABLE_XLA_FLAGS`
    in ``XLA_FLAGS`` (replacing another value of the same flag, keeping the user's
    other flags); for ``native``, nothing."""
    if check_mode(mode) == "native":
        return
    os.environ.update(PORTABLE_ENVIRONMENT)
    ours = {flag.split("=")[0] for flag in PORTABLE_XLA_FLAGS}
    current = os.environ.get("XLA_FLAGS", "").split()
    kept = [flag for flag in current if flag.split("=")[0] not in ours]
    os.environ["XLA_FLAGS"] = " ".join([*kept, *PORTABLE_XLA_FLAGS])


def use_portable_numerics() -> str:
    """Put this process in portable mode, as far as it still can be: the
    environment (:func:`prepare_environment`) and the bounded dots
    (:func:`install_bounded_dots`). Call it before NumPy or JAX is imported
    (NumPy reads its dispatch settings on import, XLA its flags when JAX first
    computes).

    Returns:
        The mode now in effect (:func:`numerics_mode`): ``"native"`` when NumPy was
        already loaded or JAX had already started.
    """
    prepare_environment("portable")
    install_bounded_dots()
    return numerics_mode()


def _bounded_dot(lhs, rhs, *, dimension_numbers, **params):
    """``lax.dot_general`` of ``lhs`` and ``rhs`` as the ordered sum of dots over
    consecutive slices of the longest contracted axis, each contracting at most
    :data:`MAX_CONTRACTION` terms in all."""
    from jax import lax
    from jax.extend.core.primitives import dot_general_p

    (lhs_axes, rhs_axes), _ = dimension_numbers
    sizes = [lhs.shape[axis] for axis in lhs_axes]
    longest = max(range(len(sizes)), key=sizes.__getitem__)
    others = math.prod(sizes) // sizes[longest]
    step = max(1, MAX_CONTRACTION // others)
    total = None
    for start in range(0, sizes[longest], step):
        stop = min(start + step, sizes[longest])
        part = dot_general_p.bind(
            lax.slice_in_dim(lhs, start, stop, axis=lhs_axes[longest]),
            lax.slice_in_dim(rhs, start, stop, axis=rhs_axes[longest]),
            dimension_numbers=dimension_numbers,
            **params,
        )
        total = part if total is None else total + part
    return total


def install_bounded_dots() -> None:
    """Lower every floating-point ``dot_general`` on the CPU in this process so that
    it contracts at most :data:`MAX_CONTRACTION` terms at a time (module docstring,
    item 2); a dot that contracts fewer is lowered as before. Idempotent.

    It replaces JAX's CPU lowering rule for the primitive, read from JAX's private
    registry (``jax._src.interpreters.mlir``): :func:`numerics_mode` checks that it
    is in place, and the tests check that it bounds every dot."""
    global _bounded_dots
    if _bounded_dots:
        return
    import numpy as np
    from jax._src.interpreters import mlir
    from jax.extend.core.primitives import dot_general_p

    native = mlir._platform_specific_lowerings["cpu"][dot_general_p].rule

    def lower(ctx, lhs, rhs, *, dimension_numbers, **params):
        (lhs_axes, _), _ = dimension_numbers
        aval = ctx.avals_in[0]
        terms = math.prod(aval.shape[axis] for axis in lhs_axes)
        if terms <= MAX_CONTRACTION or not np.issubdtype(aval.dtype, np.floating):
            return native(ctx, lhs, rhs, dimension_numbers=dimension_numbers, **params)
        params.pop("platform", None)

        def bounded(a, b):
            return _bounded_dot(a, b, dimension_numbers=dimension_numbers, **params)

        return mlir.lower_fun(bounded, multiple_results=False)(ctx, lhs, rhs)

    mlir.register_lowering(dot_general_p, lower, platform="cpu")
    _bounded_dots = True


def _numpy_capped() -> bool:
    """Whether NumPy runs no loop above AVX2 (its AVX-512 targets off, or a
    processor without them)."""
    if "numpy" not in sys.modules:
        return False
    from numpy._core._multiarray_umath import __cpu_features__

    wide = PORTABLE_ENVIRONMENT["NPY_DISABLE_CPU_FEATURES"].split()
    return not any(__cpu_features__.get(target) for target in wide)


def numerics_mode() -> str:
    """``"portable"`` when every part of portable mode is in effect in this
    process (XLA's flags, the bounded dots, NumPy's dispatch and OpenBLAS's
    settings), else ``"native"``."""
    flags = set(os.environ.get("XLA_FLAGS", "").split())
    environment = all(os.environ.get(k) == v for k, v in PORTABLE_ENVIRONMENT.items())
    portable = (
        _bounded_dots
        and set(PORTABLE_XLA_FLAGS) <= flags
        and environment
        and _numpy_capped()
    )
    return "portable" if portable else "native"


def numerics_record() -> dict[str, Any]:
    """What a run's ``meta.json`` keeps of its numerics: the mode, and in portable
    mode the flags, environment and contraction bound that define it."""
    mode = numerics_mode()
    if mode == "native":
        return {"mode": mode}
    return {
        "mode": mode,
        "xla_flags": list(PORTABLE_XLA_FLAGS),
        "environment": dict(PORTABLE_ENVIRONMENT),
        "max_contraction": MAX_CONTRACTION,
    }
