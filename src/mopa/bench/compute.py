"""What a compiled program computes, and what the machine reaches: FLOPs from XLA's
own cost analysis, the largest dense layer a program trains, and the GFLOP/s of
plain matmuls of that layer's shape as the machine's reference.

XLA's cost analysis (``Compiled.cost_analysis()["flops"]``) counts the body of a
``while`` loop once, whatever its trip count, so a program built of ``lax.scan``
loops (a trainer's rollout, its epochs and minibatches) would be understated by
the loops' lengths. :func:`program_flops` recovers every iteration from XLA's own
counts: compiled with one scan unrolled by a factor ``u``, the program counts that
scan's body (nested loops included, once each) ``u`` times instead of once, so
the difference divided by ``u - 1`` is the body's cost, which the scan runs
``length`` times per run of its enclosing scans. Loops that are not scans are
still counted once: ``while_loop`` with a traced bound, and the five rounds of the
threefry generator, which XLA's CPU lowering keeps as a loop (integer work
deriving keys, not the networks).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
from jax.extend.core import ClosedJaxpr, Jaxpr, jaxpr_as_fun, jaxprs_in_params

from mopa.algos.driver import seed_sharding


class DenseShape(NamedTuple):
    """A dense layer as one matmul: ``x [rows, inputs] @ kernel [inputs, outputs]``."""

    rows: int
    inputs: int
    outputs: int

    @property
    def flops(self) -> int:
        """Multiply-adds of the forward matmul, counted as 2 FLOPs each."""
        return 2 * self.rows * self.inputs * self.outputs


def program_flops(fn: Callable[..., Any], *args: Any) -> float:
    """FLOPs of one call of ``fn(*args)``, every scan iteration counted, from XLA's
    cost analysis of the compiled program (see the module docstring).

    With ``C_s`` the cost of scan ``s``'s body counted once, ``L_s`` its length and
    ``P_s`` the product of the lengths of the scans around it, the total is XLA's
    count of the program plus ``sum_s C_s (L_s - 1) P_s``. Costs one compilation
    of the program, plus one for each set of scans of equal length and nesting.

    Args:
        fn: a jittable function.
        *args: its arguments, as arrays or ``jax.ShapeDtypeStruct`` s (their
            shardings are ignored: the count is the whole program's, on every
            device together).

    Returns:
        XLA's ``flops`` of the program (NaN where the backend gives no cost).
    """
    # Shapes only: XLA's cost of a program whose inputs are sharded over devices
    # is one device's share, and this is the whole program's count.
    args = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), args)
    closed = jax.make_jaxpr(fn)(*args)
    leaves = jax.tree.leaves(args)
    base = _xla_flops(closed, leaves)
    # Scans of the same length and enclosing lengths are never nested in one
    # another (a nested one's enclosing product is larger), so each such group is
    # unrolled together: one compilation measures the sum of their bodies.
    groups: dict[tuple[int, int], set[int]] = {}
    for index, length, around in _scans(closed.jaxpr):
        if length > 1:
            groups.setdefault((length, around), set()).add(index)
    total = base
    for (length, around), indices in groups.items():
        unroll = min(u for u in range(2, length + 1) if length % u == 0)
        unrolled = _xla_flops(_set_unroll(closed, indices, unroll), leaves)
        total += (unrolled - base) / (unroll - 1) * (length - 1) * around
    return total


def _xla_flops(closed: ClosedJaxpr, leaves: list[Any]) -> float:
    """XLA's ``flops`` of the compiled ``closed`` (NaN where there is none)."""
    compiled = jax.jit(jaxpr_as_fun(closed)).lower(*leaves).compile()
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):  # older JAX: one dict per program
        cost = cost[0] if cost else None
    return float(cost.get("flops", math.nan)) if cost else math.nan


def _scans(jaxpr: Jaxpr, around: int = 1, counter: list[int] | None = None):
    """``(index, length, product of the enclosing scans' lengths)`` of every scan
    of ``jaxpr``, nested ones included, indexed in the order
    :func:`_set_unroll` numbers them."""
    counter = [0] if counter is None else counter
    for eqn in jaxpr.eqns:
        inner_around = around
        if eqn.primitive.name == "scan":
            length = eqn.params["length"]
            yield counter[0], length, around
            counter[0] += 1
            inner_around = around * length
        for inner in jaxprs_in_params(eqn.params):
            yield from _scans(inner, inner_around, counter)


def _set_unroll(closed: ClosedJaxpr, indices: set[int], unroll: int) -> ClosedJaxpr:
    """``closed`` with the scans numbered ``indices`` (see :func:`_scans`) unrolled
    by ``unroll``."""
    counter = [0]

    def rewrite(jaxpr: Jaxpr) -> Jaxpr:
        eqns = []
        for eqn in jaxpr.eqns:
            chosen = False
            if eqn.primitive.name == "scan":
                chosen = counter[0] in indices
                counter[0] += 1
            params = {name: param(value) for name, value in eqn.params.items()}
            if chosen:
                params["unroll"] = unroll
            eqns.append(eqn.replace(params=params))
        return jaxpr.replace(eqns=eqns)

    def param(value: Any) -> Any:
        if isinstance(value, ClosedJaxpr):
            return ClosedJaxpr(rewrite(value.jaxpr), value.consts)
        if isinstance(value, Jaxpr):
            return rewrite(value)
        if isinstance(value, tuple) and any(
            isinstance(v, ClosedJaxpr | Jaxpr) for v in value
        ):
            return tuple(param(v) for v in value)
        return value

    return ClosedJaxpr(rewrite(closed.jaxpr), closed.consts)


def largest_trained_layer(fn: Callable[..., Any], *args: Any) -> DenseShape | None:
    """The dense layer of ``fn(*args)`` whose gradient costs the most, with the rows
    one gradient step feeds it.

    The layers are the 2-D leaves named ``kernel`` in ``args`` (Flax's ``Dense``
    and the layers built on it). A kernel's gradient is the one matmul of the
    program whose result has the kernel's shape (or its transpose) and which
    contracts over the layer's rows, so its contracted size is the number of rows
    (samples x agents) of a minibatch, whichever way the trainer batches them.

    Args:
        fn: a jittable function that takes gradients of dense layers.
        *args: its arguments, as arrays or ``jax.ShapeDtypeStruct`` s.

    Returns:
        The shape with the most FLOPs, or ``None`` when ``fn`` trains no kernel.
    """
    kernels = _kernel_shapes(args)
    shapes = []
    for eqn in _equations(jax.make_jaxpr(fn)(*args).jaxpr):
        if eqn.primitive.name != "dot_general":
            continue
        (contract, _), (batch, _) = eqn.params["dimension_numbers"]
        out = tuple(eqn.outvars[0].aval.shape)
        if batch or len(out) != 2:
            continue
        kernel = out if out in kernels else out[::-1]
        if kernel in kernels:
            lhs = eqn.invars[0].aval.shape
            shapes.append(DenseShape(math.prod(lhs[d] for d in contract), *kernel))
    return max(shapes, key=lambda s: s.flops, default=None)


def largest_dense_layer(fn: Callable[..., Any], *args: Any) -> DenseShape | None:
    """The largest forward matmul of a dense layer in ``fn(*args)``, for a program
    that only runs its networks, such as a planner's decision (a trainer's is
    :func:`largest_trained_layer`).

    The layers are the 2-D leaves named ``kernel`` in ``args``. A layer's forward
    matmul is a ``dot_general`` whose right operand is the kernel, contracted over
    its first axis; its rows are the product of the left operand's other axes
    (``vmap``-ed axes included: the games, candidates and rollouts applied at
    once).

    Returns:
        The shape with the most FLOPs, or ``None`` when ``fn`` applies no kernel.
    """
    kernels = _kernel_shapes(args)
    shapes = []
    for eqn in _equations(jax.make_jaxpr(fn)(*args).jaxpr):
        if eqn.primitive.name != "dot_general":
            continue
        (lhs_contract, rhs_contract), (_, rhs_batch) = eqn.params["dimension_numbers"]
        kernel = tuple(eqn.invars[1].aval.shape)
        if kernel not in kernels or tuple(rhs_contract) != (0,) or rhs_batch:
            continue
        lhs = eqn.invars[0].aval.shape
        free = math.prod(d for i, d in enumerate(lhs) if i not in lhs_contract)
        shapes.append(DenseShape(free, *kernel))
    return max(shapes, key=lambda s: s.flops, default=None)


def matmul_limit(
    layer: DenseShape | None, gflop_s: float, num_seeds: int, repeats: int = 5
) -> dict[str, Any]:
    """A benchmark row's limit fields for a program that ran at ``gflop_s``:
    ``matmul_shape`` (``[rows, inputs, outputs]``), ``matmul_gflop_s`` (a plain
    matmul of that shape, :func:`matmul_gflop_s`, measured now) and
    ``matmul_fraction`` (``gflop_s`` over it); all ``None`` without a layer."""
    if layer is None:
        return {"matmul_shape": None, "matmul_gflop_s": None, "matmul_fraction": None}
    limit = matmul_gflop_s(layer, num_seeds, repeats=repeats)
    return {
        "matmul_shape": list(layer),
        "matmul_gflop_s": limit,
        "matmul_fraction": gflop_s / limit,
    }


def _kernel_shapes(args: Any) -> set[tuple[int, int]]:
    """Shapes of the 2-D leaves named ``kernel`` in ``args`` (the dense layers)."""
    return {
        tuple(leaf.shape)
        for path, leaf in jax.tree_util.tree_leaves_with_path(args)
        if getattr(path[-1], "key", None) == "kernel" and len(leaf.shape) == 2
    }


def _equations(jaxpr: Jaxpr):
    """Every equation of ``jaxpr`` and of the jaxprs nested in it."""
    for eqn in jaxpr.eqns:
        yield eqn
        for inner in jaxprs_in_params(eqn.params):
            yield from _equations(inner)


MATMUL_BATCH_BYTES = 32 * 2**20
"""Most bytes of inputs per seed that one call of the reference program reads."""
MATMUL_CALL_FLOPS = 2e8
"""FLOPs per seed that one call of the reference program aims at, so that the
cost of dispatching a call is small beside it."""


def matmul_gflop_s(
    shape: DenseShape, num_seeds: int, repeats: int = 5, min_seconds: float = 0.05
) -> float:
    """GFLOP/s the machine reaches on matmuls of ``shape``, run the way the trainer
    runs a seed's layers: vmapped over ``num_seeds`` and spread over the same
    devices (:func:`~mopa.algos.driver.seed_sharding`), in this process, so with
    the same XLA threads.

    The program is nothing but ``x_k [rows, inputs] @ kernel [inputs, outputs]``
    for ``k < K`` distinct inputs in a scan (``K`` up to ``MATMUL_CALL_FLOPS``
    and ``MATMUL_BATCH_BYTES``), so that a call is long beside its dispatch; it is
    called until it has run ``min_seconds``, ``repeats`` times over.

    Args:
        shape: ``rows x inputs @ inputs x outputs`` per seed.
        num_seeds: seeds run at once.
        repeats: timed repeats; the median is returned.
        min_seconds: least length of a timed repeat (calls are doubled until a
            repeat lasts this long).

    Returns:
        XLA's FLOPs of the program x calls / median seconds of a repeat / 1e9.
    """
    count = max(
        1,
        min(
            math.ceil(MATMUL_CALL_FLOPS / shape.flops),
            MATMUL_BATCH_BYTES // (4 * shape.rows * shape.inputs),
        ),
    )
    key_x, key_w = jax.random.split(jax.random.key(0))
    x = jax.random.normal(key_x, (num_seeds, count, shape.rows, shape.inputs))
    w = jax.random.normal(key_w, (num_seeds, shape.inputs, shape.outputs))

    def matmuls(x, w):  # [K, rows, inputs], [inputs, outputs] -> [K, rows, outputs]
        return jax.lax.scan(lambda _, x_k: (None, x_k @ w), None, x)[1]

    matmuls = jax.vmap(matmuls)
    sharding = seed_sharding(num_seeds)
    if sharding is None:
        compiled = jax.jit(matmuls).lower(x, w).compile()
    else:
        x, w = jax.device_put((x, w), sharding)
        compiled = (
            jax.jit(matmuls, in_shardings=sharding, out_shardings=sharding)
            .lower(x, w)
            .compile()
        )
    flops = program_flops(matmuls, x, w)

    def run(calls: int) -> float:
        tick = time.perf_counter()
        for _ in range(calls):
            compiled(x, w).block_until_ready()
        return time.perf_counter() - tick

    run(1)  # warm up
    calls = 1
    while run(calls) < min_seconds:
        calls *= 2
    seconds = statistics.median(run(calls) for _ in range(repeats))
    return flops * calls / seconds / 1e9
