"""Portable numerics: a run that gives the same digits on every x86-64 processor,
and a record of which mode a run computed in.

JAX on the CPU is deterministic for one program, processor and set of flags, but
the same program computes other last bits on another processor, and a training run
carries a last bit into other weights, so other figures. Four things pick their code
by the processor they run on, and portable mode fixes each:

1. **XLA's compiled loops** use the host's widest vector instructions and, by
   default, approximations of ``exp``, ``tanh`` and the like chosen for the host.
   Portable mode caps code generation at AVX2 (``--xla_cpu_max_isa=AVX2``), which
   every x86-64 processor of the last decade has, and turns the platform-dependent
   approximations off (``--xla_cpu_enable_platform_dependent_math=false``).
2. **Matrix products.** XLA hands its dots to libraries compiled into jaxlib,
   which choose kernels, block sizes and the order of each sum from the
   instruction set and caches they detect at run time, beyond the reach of the
   instruction-set cap. Measured with ``benchmarks/numerics_probe.py`` on an AMD
   EPYC with AVX-512 against an emulated Haswell and an emulated EPYC Milan (AVX2
   only): a product with a transposed operand (every weight gradient is one)
   differs in its last bits for some shapes, and so does a product in canonical
   layout ``[M, K] x [K, N]`` that sums 256 terms; canonical products of at most
   128 terms match. Portable mode therefore lowers every floating-point dot as
   canonical products (:func:`install_portable_dots`): its operands transposed to
   ``[batch, M, K]`` and ``[batch, K, N]``, the contraction split into slices of
   at most :data:`MAX_CONTRACTION` terms summed in order, with optimisation
   barriers around the whole, which keep XLA's simplifier from folding the
   transposes back into the dot and its fusion from merging the dot with the
   operations around it: a network's weight gradient computed in one program
   differed between the processors while each of its products alone matched.
   XNNPACK is off (``--xla_cpu_use_xnnpack=false``) and Eigen on one thread
   (``--xla_cpu_multi_thread_eigen=false``: its thread pool splits work by the
   number of cores).
3. **NumPy** dispatches its loops (``log``, ``exp``, reductions) by instruction set
   when it is imported: its AVX-512 targets are turned off
   (``NPY_DISABLE_CPU_FEATURES``), so every processor runs the AVX2 loops.
4. **OpenBLAS** (NumPy's and SciPy's products and solvers, JAX's LAPACK calls)
   picks its kernels by processor: fixed to Haswell's (``OPENBLAS_CORETYPE``),
   on one thread, as OpenMP code (scikit-learn's k-means) is: how they split work
   depends on the number of cores.

What this is measured on: ``benchmarks/numerics_probe.py`` (a digest per kind of
operation) and the reference run (``mopa experiment reference``: a training run,
an evaluation and a belief, each with a digest), on the processors RESULTS.md's
table of the reference run lists, real and emulated (``qemu-x86_64 -cpu MODEL``
reports that processor's instruction set and caches to XLA, jaxlib's libraries,
NumPy and OpenBLAS). Not measured: processors other than x86-64, and a different
number of devices (the ``mopa`` command splits the CPU into devices by core
count, and a program split over other devices is another program).

The ``mopa`` command runs in portable mode unless told ``--numerics native`` (or
``MOPA_NUMERICS=native``): it sets all of this up before NumPy or JAX is imported
(:mod:`mopa.cli.entry`), and every ``meta.json`` names the mode
(:func:`numerics_record`). A library user calls :func:`use_portable_numerics`
first thing, before importing NumPy or JAX. What portable mode costs in speed is
measured in BENCHMARKS.md.

This module imports neither NumPy nor JAX at import time, so the command line can
set the environment before either is loaded.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

MODES = ("portable", "native")
"""``portable``: XLA's, NumPy's and OpenBLAS's choices fixed to what every
x86-64 processor computes alike, and every dot computed as canonical products of
at most 128 terms (the module's docstring); ``native``: XLA's, NumPy's and
OpenBLAS's own choices for the processor at hand (faster, and what every folder
written before portable mode existed used)."""

MAX_CONTRACTION = 128
"""The most terms one product sums in portable mode: jaxlib's product kernels
give the same digits on processors with and without AVX-512 up to here, and not
for some shapes at 256 (BENCHMARKS.md, *Portable numerics*)."""

PORTABLE_DOTS = "canonical-128-fenced"
"""How portable mode computes a dot (:func:`install_portable_dots`), recorded in
``meta.json``: a record of another method computed other digits."""

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

_portable_dots = False


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
    environment (:func:`prepare_environment`) and the canonical dots
    (:func:`install_portable_dots`). Call it before NumPy or JAX is imported
    (NumPy reads its dispatch settings on import, XLA its flags when JAX first
    computes).

    Returns:
        The mode now in effect (:func:`numerics_mode`): ``"native"`` when NumPy was
        already loaded or JAX had already started.
    """
    prepare_environment("portable")
    install_portable_dots()
    return numerics_mode()


def _portable_dot(lhs, rhs, *, dimension_numbers, **params):
    """``lax.dot_general(lhs, rhs, dimension_numbers)`` as canonical products: the
    operands transposed and reshaped to ``[batch, M, K]`` and ``[batch, K, N]``,
    the ordered sum of the dots over consecutive slices of at most
    :data:`MAX_CONTRACTION` terms of ``K``, with an optimisation barrier before
    and after, so that XLA neither folds the transposes back into the dot nor
    fuses the operands' producers or the result's consumers with it (a fused dot
    runs other kernels, whose digits differ between processors)."""
    from jax import lax
    from jax.extend.core.primitives import dot_general_p

    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    lhs_free = [i for i in range(lhs.ndim) if i not in (*lhs_contract, *lhs_batch)]
    rhs_free = [i for i in range(rhs.ndim) if i not in (*rhs_contract, *rhs_batch)]
    batch = [lhs.shape[i] for i in lhs_batch]
    out_shape = (
        *batch,
        *(lhs.shape[i] for i in lhs_free),
        *(rhs.shape[i] for i in rhs_free),
    )
    b, m = math.prod(batch), math.prod(lhs.shape[i] for i in lhs_free)
    k = math.prod(lhs.shape[i] for i in lhs_contract)
    n = math.prod(rhs.shape[i] for i in rhs_free)
    a = lax.transpose(lhs, (*lhs_batch, *lhs_free, *lhs_contract)).reshape(b, m, k)
    c = lax.transpose(rhs, (*rhs_batch, *rhs_contract, *rhs_free)).reshape(b, k, n)
    a, c = lax.optimization_barrier((a, c))
    if b == 1:
        a, c, dims = a[0], c[0], (((1,), (0,)), ((), ()))
    else:
        dims = (((2,), (1,)), ((0,), (0,)))
    total = None
    for start in range(0, k, MAX_CONTRACTION):
        stop = min(start + MAX_CONTRACTION, k)
        part = dot_general_p.bind(
            lax.slice_in_dim(a, start, stop, axis=a.ndim - 1),
            lax.slice_in_dim(c, start, stop, axis=c.ndim - 2),
            dimension_numbers=dims,
            **params,
        )
        total = part if total is None else total + part
    return lax.optimization_barrier(total).reshape(out_shape)


def install_portable_dots() -> None:
    """Lower every floating-point ``dot_general`` on the CPU in this process as
    canonical products of at most :data:`MAX_CONTRACTION` terms behind
    optimisation barriers (module docstring, item 2; :func:`_portable_dot`); an
    integer dot, exact on every processor, is lowered as before. Idempotent.

    It replaces JAX's CPU lowering rule for the primitive, read from JAX's private
    registry (``jax._src.interpreters.mlir``): :func:`numerics_mode` checks that it
    is in place, and the tests check what it lowers a dot to."""
    global _portable_dots
    if _portable_dots:
        return
    import numpy as np
    from jax._src.interpreters import mlir
    from jax.extend.core.primitives import dot_general_p

    native = mlir._platform_specific_lowerings["cpu"][dot_general_p].rule

    inside = []  # the products of one portable dot lower as XLA's own

    def lower(ctx, lhs, rhs, *, dimension_numbers, **params):
        left = ctx.avals_in[0]
        if inside or not np.issubdtype(left.dtype, np.floating):
            return native(ctx, lhs, rhs, dimension_numbers=dimension_numbers, **params)
        params.pop("platform", None)

        def portable(a, b):
            return _portable_dot(a, b, dimension_numbers=dimension_numbers, **params)

        inside.append(True)
        try:
            return mlir.lower_fun(portable, multiple_results=False)(ctx, lhs, rhs)
        finally:
            inside.pop()

    mlir.register_lowering(dot_general_p, lower, platform="cpu")
    _portable_dots = True


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
    process (XLA's flags, the canonical dots, NumPy's dispatch and OpenBLAS's
    settings), else ``"native"``."""
    flags = set(os.environ.get("XLA_FLAGS", "").split())
    environment = all(os.environ.get(k) == v for k, v in PORTABLE_ENVIRONMENT.items())
    portable = (
        _portable_dots
        and set(PORTABLE_XLA_FLAGS) <= flags
        and environment
        and _numpy_capped()
    )
    return "portable" if portable else "native"


def numerics_record() -> dict[str, Any]:
    """What a run's ``meta.json`` keeps of its numerics: the mode, and in portable
    mode the flags, environment and way of computing dots that define it."""
    mode = numerics_mode()
    if mode == "native":
        return {"mode": mode}
    return {
        "mode": mode,
        "xla_flags": list(PORTABLE_XLA_FLAGS),
        "environment": dict(PORTABLE_ENVIRONMENT),
        "dots": PORTABLE_DOTS,
    }
