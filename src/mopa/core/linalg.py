"""Linear solves that can run beside other programs on a CPU.

jaxlib's CPU LAPACK kernels (``jnp.linalg.solve`` lowers to ``getrf``, an LU
factorisation) split a batch of matrices over XLA's intra-op thread pool and then
wait, blocking the thread they run on, until every part is done. XLA runs a
program's operations on that same pool, so a kernel that runs there waits on a
pool thread for work queued behind it. The pool has one thread per core (or per
CPU device, if there are more devices): once as many such kernels wait at the
same time as the pool has threads, nothing is left to do the parts and the
process hangs, every thread asleep. A tournament that plays its tree search as a
program of its own beside the other rows, stages run together, a program sharded
over several CPU devices, or one program with independent solves side by side can
all get there (on a 2-core machine, two programs suffice).

:func:`solve` is ``jnp.linalg.solve`` of one matrix; under ``vmap`` it solves the
matrices one after another (:func:`~mopa.core.batching.one_after_another`), each
with a LAPACK call on a batch of one, which LAPACK's kernels never split, so the
kernel does its work on its own thread and never waits on the pool. Each matrix is
factorised and solved by the same LAPACK routines as in the batched call, so the
numbers are the same bit for bit; a large batch of small matrices pays a loop
step per matrix. mopa's jitted code solves linear systems only through it
(``tests/core/test_linalg.py`` checks the lowered programs of its players).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mopa.core.batching import one_after_another

_solve_each = one_after_another(jnp.linalg.solve)


def solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """``x`` with ``a x = b`` (``jnp.linalg.solve``) for one matrix; under
    ``vmap``, one matrix after another (see the module docstring).

    Not differentiable in reverse mode (a ``custom_vmap``).

    Args:
        a: ``[D, D]`` a non-singular matrix.
        b: ``[D]`` the right-hand side.

    Returns:
        ``[D]`` the solution.
    """
    return _solve_each(a, b)
