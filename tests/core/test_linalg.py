"""The solve that never waits on XLA's CPU thread pool (:mod:`mopa.core.linalg`):
``jnp.linalg.solve``'s numbers bit for bit, and under ``vmap`` only LAPACK calls
on a batch of one, in its own programs and in the online residual's refit."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.linalg import solve
from mopa.opponent.online import OnlineResidualConfig, fit_residual


def batched_lapack_calls(program_text: str) -> list[str]:
    """The LAPACK custom calls of a lowered program whose first operand holds more
    than one matrix (the calls jaxlib may split over the pool and wait on)."""
    found = []
    for line in program_text.splitlines():
        call = re.search(r"custom_call @(lapack_\w+)\(", line)
        if call is None:
            continue
        batch_dims = int(re.search(r'num_batch_dims = "(\d+)"', line).group(1))
        signature = line.rsplit("} : ", 1)[1]  # (operand types) -> result types
        operand = re.search(r"tensor<((?:\d+x)*)", signature).group(1)
        dims = [int(d) for d in operand.split("x") if d]
        if np.prod(dims[:batch_dims], dtype=np.int64) > 1:
            found.append(f"{call.group(1)} on {dims}")
    return found


def test_a_two_by_two_system_by_hand():
    # 2 x + y = 5, x + 3 y = 10: y = (10 - 5 / 2) / (3 - 1 / 2) = 3, x = 1
    a = jnp.array([[2.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(solve(a, jnp.array([5.0, 10.0])), [1.0, 3.0])


def test_under_vmap_it_gives_jnp_linalg_solve_bit_for_bit():
    key_a, key_b = jax.random.split(jax.random.key(0))
    a = jax.random.normal(key_a, (2, 3, 7, 7)) + 4 * jnp.eye(7)
    b = jax.random.normal(key_b, (2, 3, 7))
    each = jax.jit(jax.vmap(jax.vmap(solve)))(a, b)
    batched = jax.jit(jax.vmap(jax.vmap(jnp.linalg.solve)))(a, b)
    np.testing.assert_array_equal(each, batched)
    np.testing.assert_allclose(jnp.einsum("ijkl,ijl->ijk", a, each), b, atol=1e-5)


def test_its_programs_hold_no_batched_lapack_call():
    a = jnp.broadcast_to(2 * jnp.eye(5), (6, 5, 5))
    b = jnp.ones((6, 5))
    plain = jax.jit(jax.vmap(jnp.linalg.solve)).lower(a, b).as_text()
    assert batched_lapack_calls(plain)  # what the check finds: the LU on [6, 5, 5]
    assert any(
        "lapack_sgetrf_ffi on [6, 5, 5]" in c for c in batched_lapack_calls(plain)
    )
    lowered = jax.jit(jax.vmap(solve)).lower(a, b).as_text()
    assert "lapack_sgetrf_ffi" in lowered
    assert batched_lapack_calls(lowered) == []


def test_the_online_refit_over_many_games_holds_no_batched_lapack_call():
    """The Newton solve of the online residual (the solve that hung the population
    experiment's evaluation, batched over its games)."""
    config = OnlineResidualConfig(num_actions=5, obs_size=6, capacity=8)
    F, A, C, G = config.num_features, config.num_actions, config.capacity, 16
    key_f, key_b, key_a = jax.random.split(jax.random.key(1), 3)
    args = (
        jax.random.normal(key_f, (G, C, F)),
        jax.random.normal(key_b, (G, C, A)),
        jax.random.randint(key_a, (G, C), 0, A),
        jnp.ones((G, C), bool),
        jnp.zeros((G, F, A)),
    )

    def refit(*game):
        return fit_residual(config, *game)

    lowered = jax.jit(jax.vmap(refit)).lower(*args).as_text()
    assert "lapack_sgetrf_ffi" in lowered
    assert batched_lapack_calls(lowered) == []
    weights = jax.jit(jax.vmap(refit))(*args)
    assert weights.shape == (G, F, A) and bool(jnp.all(jnp.isfinite(weights)))
