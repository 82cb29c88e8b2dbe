"""FLOPs from XLA's cost analysis against a hand count, the largest trained layer,
and the reference matmul."""

import math

import jax
import jax.numpy as jnp
import pytest

from mopa.bench.compute import (
    DenseShape,
    largest_dense_layer,
    largest_trained_layer,
    matmul_gflop_s,
    program_flops,
)

ROWS, INPUTS, HIDDEN, OUTPUTS = 128, 32, 64, 16
EPOCHS, MINIBATCHES = 2, 3


def _params():
    key_1, key_2 = jax.random.split(jax.random.key(0))
    return {
        "hidden": {
            "kernel": jax.random.normal(key_1, (INPUTS, HIDDEN)),
            "bias": jnp.zeros(HIDDEN),
        },
        "out": {
            "kernel": jax.random.normal(key_2, (HIDDEN, OUTPUTS)),
            "bias": jnp.zeros(OUTPUTS),
        },
    }


def _loss(params, x, y):  # x [R, I], y [R, O]
    h = jax.nn.relu(x @ params["hidden"]["kernel"] + params["hidden"]["bias"])
    out = h @ params["out"]["kernel"] + params["out"]["bias"]
    return jnp.mean((out - y) ** 2)


def _train(params, x, y):
    """SGD over ``EPOCHS`` passes of ``MINIBATCHES`` minibatches of ``ROWS`` rows:
    x ``[M, R, I]``, y ``[M, R, O]``; nested scans, as a trainer's."""

    def minibatch(params, batch):
        grads = jax.grad(_loss)(params, *batch)
        return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), None

    def epoch(params, _):
        return jax.lax.scan(minibatch, params, (x, y))[0], None

    return jax.lax.scan(epoch, params, length=EPOCHS)[0]


def _batches():
    return (
        jnp.ones((MINIBATCHES, ROWS, INPUTS)),
        jnp.ones((MINIBATCHES, ROWS, OUTPUTS)),
    )


def test_program_flops_match_a_hand_count_of_a_dense_network():
    # Per gradient step, a matmul [R, I] @ [I, O] is 2 R I O FLOPs. Forward: both
    # layers. Backward: both kernels' gradients (x^T @ grad, the same count) and
    # the hidden layer's input gradient (grad @ W_out^T); the first layer's input
    # gradient is never used, so XLA drops it. So 4 R I H + 6 R H O per step:
    # 128 x (4 x 32 x 64 + 6 x 64 x 16) = 1,835,008, times 2 x 3 = 6 steps.
    per_step = 4 * ROWS * INPUTS * HIDDEN + 6 * ROWS * HIDDEN * OUTPUTS
    hand = EPOCHS * MINIBATCHES * per_step
    flops = program_flops(_train, _params(), *_batches())
    # The rest is elementwise, a few FLOPs per activation or parameter: bias
    # adds, ReLU and its mask, the squared error, bias gradients and the SGD step,
    # about 10 R (H + O) = 102,400 per step against 1,835,008 of matmuls (5.6%),
    # so the count lies between the matmuls alone and 10% above them. A scan
    # counted once (XLA's own rule for loops) would give a sixth of the hand
    # count, far outside.
    assert hand <= flops <= 1.10 * hand


def test_a_scan_counts_every_step():
    w = jnp.ones((8, 8))

    def power(x):  # 5 x 4 = 20 matmuls [4, 8] @ [8, 8], 2 x 4 x 8 x 8 each
        def outer(x, _):
            return jax.lax.scan(lambda x, _: (x @ w, None), x, length=4)[0], None

        return jax.lax.scan(outer, x, length=5)[0]

    assert program_flops(power, jnp.ones((4, 8))) == pytest.approx(20 * 512, rel=1e-3)


def test_largest_trained_layer_is_the_costliest_gradient():
    # Hidden layer: R x I x H = 128 x 32 x 64 beats R x H x O = 128 x 64 x 16.
    layer = largest_trained_layer(_train, _params(), *_batches())
    assert layer == DenseShape(rows=ROWS, inputs=INPUTS, outputs=HIDDEN)

    def agents(params, x):  # x [R, A = 3, I]: rows are samples x agents
        return jax.grad(lambda p: _loss(p, x, 0.0))(params)

    layer = largest_trained_layer(agents, _params(), jnp.ones((ROWS, 3, INPUTS)))
    assert layer == DenseShape(rows=3 * ROWS, inputs=INPUTS, outputs=HIDDEN)
    assert largest_trained_layer(lambda x: x @ x.T, jnp.ones((4, 4))) is None


def test_largest_dense_layer_is_the_costliest_forward_matmul():
    def forward(params, x):  # x [R, I]
        h = jax.nn.relu(x @ params["hidden"]["kernel"])
        return h @ params["out"]["kernel"]

    x = jnp.ones((ROWS, INPUTS))
    assert largest_dense_layer(forward, _params(), x) == DenseShape(
        ROWS, INPUTS, HIDDEN
    )
    # vmap-ed over games and candidates (params shared): one matmul of every row.
    batched = jax.vmap(jax.vmap(forward, (None, 0)), (None, 0))
    layer = largest_dense_layer(batched, _params(), jnp.ones((5, 7, ROWS, INPUTS)))
    assert layer == DenseShape(5 * 7 * ROWS, INPUTS, HIDDEN)

    # Each application counts by its own FLOPs: here the output layer's.
    def two(params, x):  # the output layer also sees 64 x more rows
        wide = jnp.ones((64 * ROWS, HIDDEN)) @ params["out"]["kernel"]
        return forward(params, x), wide

    layer = largest_dense_layer(two, _params(), x)
    assert layer == DenseShape(64 * ROWS, HIDDEN, OUTPUTS)
    assert largest_dense_layer(lambda x: x @ x.T, jnp.ones((4, 4))) is None


def test_matmul_reference_is_a_positive_rate():
    gflop_s = matmul_gflop_s(DenseShape(64, 32, 16), 1, repeats=2, min_seconds=0.01)
    assert math.isfinite(gflop_s) and gflop_s > 0


def test_sharded_arguments_count_the_whole_program():
    """XLA costs a program whose inputs are spread over devices per device; the
    count is the whole program's all the same (the matmul reference shards its
    seeds over the devices the trainer uses, and times them all)."""
    from mopa.algos.driver import seed_sharding

    sharding = seed_sharding(3)
    assert sharding is not None  # the suite's 3 CPU devices
    x = jax.device_put(jnp.ones((3, ROWS, INPUTS)), sharding)
    w = jax.device_put(jnp.ones((3, INPUTS, HIDDEN)), sharding)
    matmuls = jax.vmap(jnp.matmul)
    assert program_flops(matmuls, x, w) == 3 * 2 * ROWS * INPUTS * HIDDEN
