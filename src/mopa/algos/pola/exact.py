"""Learning with exact values on the IPD (``ipd_exact``): naive gradients, LOLA
(actual-update and Taylor variants) and outer POLA, for tabular, small-MLP and
pre-conditioned tabular memory-one policies.

Every policy maps its parameters to ``[5]`` cooperation probabilities over the
states DD, DC, CD, CC, start (agent 1's action first, see :mod:`mopa.envs.ipd`);
values are exact (:func:`mopa.envs.ipd.exact_values`) and losses are their
negatives. Both agents compute their updates from the same joint parameters and
apply them together.

* naive: ``theta_i -= lr_outer * grad_i L_i``.
* LOLA, actual update (Foerster et al. 2018; POLA paper Sec. 3): the opponent takes
  ``inner_steps`` differentiable SGD steps ``theta_j' = theta_j - lr_inner grad_j
  L_j``; then ``theta_i -= lr_outer * d/d theta_i L_i(theta_i, theta_j'(theta_i))``.
* LOLA, Taylor: ``theta_i -= lr_outer * (grad_i L_i - lr_inner * grad_i(grad_j L_i .
  grad_j L_j))``.
* outer POLA (Zhao et al. 2022, Eq. 5 solved exactly): repeat gradient steps on
  ``L_i(theta_i, theta_j'(theta_i)) + outer_beta * KL(pi_i^0 || pi_i)``, where
  ``pi_i^0`` is the policy at the start of the update and the opponent's lookahead
  restarts from its starting parameters each iteration, until the forward and
  reverse KL between successive policies are both below ``prox_threshold`` or after
  ``prox_max_iters`` iterations. KL is summed over the 5 states.

"Found tit-for-tat" (the paper's Fig. 3 criterion): after some epoch both agents
cooperate with probability below 0.65 in the states where the other defected last,
and the mean discounted return exceeds ``0.8 (cf - 1) / (1 - gamma)``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.checks import check_count, check_fields, check_probability
from mopa.envs.ipd import MIRROR_STATES, OTHER_DEFECTED, exact_values
from mopa.errors import InvalidParameterError

METHODS = ("naive", "lola", "lola_taylor", "pola")
"""Exact learning rules."""

POLICY_CLASSES = ("tabular", "mlp", "precond")
"""Policy parameterisations."""

STATE_INPUTS = np.array(
    [
        [1, 0, 0, 1, 0, 0],  # DD
        [1, 0, 0, 0, 1, 0],  # DC
        [0, 1, 0, 1, 0, 0],  # CD
        [0, 1, 0, 0, 1, 0],  # CC
        [0, 0, 1, 0, 0, 1],  # start
    ],
    np.float32,
)
"""``[5, 6]`` MLP input of each state: one-hot of agent 1's last action over
(D, C, start), then agent 2's."""

_PRECOND_1 = np.array(
    [
        [1, 0, -2, 0, 0],
        [0, 1, -2, 0, 0],
        [0, 0, 1, 0, 0],
        [0, 0, -2, 1, 0],
        [0, 0, -2, 0, 1],
    ],
    np.float32,
)
PRECOND = np.stack([_PRECOND_1, _PRECOND_1[MIRROR_STATES][:, MIRROR_STATES]])
"""``[2, 5, 5]`` fixed lower-triangular-up-to-permutation matrices of the
pre-conditioned tabular policies: ``P(C) = sigmoid(PRECOND[i] @ theta)``. Each
couples the state where the other agent just defected to every other state, which
makes the gradient geometry badly conditioned (values from the POLA paper)."""

TFT_COOP_THRESHOLD = 0.65
TFT_RETURN_FRACTION = 0.8


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExactConfig:
    """One exact-IPD learning run (per seed)."""

    method: str = "lola"
    """Learning rule: one of :data:`METHODS`."""
    policy: str = "tabular"
    """Policy parameterisation: one of :data:`POLICY_CLASSES`."""
    contrib_factor: float = 1.33
    """Contribution factor ``cf`` of the IPD."""
    gamma: float = 0.96
    """Discount factor."""
    lr_inner: float = 3.0
    """Step size of the opponent's simulated SGD step(s) (LOLA/POLA lookahead)."""
    lr_outer: float = 25.0
    """Step size of the agent's own update (each POLA fixed-point iteration)."""
    inner_steps: int = 1
    """Opponent SGD steps in the lookahead."""
    outer_beta: float = 0.0
    """Weight of the proximal KL term of outer POLA."""
    num_epochs: int = 30
    """Joint updates per run."""
    std: float = 0.1
    """Standard deviation of the initial tabular logits."""
    hidden_size: int = 16
    """Hidden units of the MLP policy (tanh)."""
    prox_threshold: float = 1e-8
    """POLA stops when both KLs between successive policies fall below this."""
    prox_max_iters: int = 5000
    """POLA stops after this many iterations at the latest."""
    horizon: int | None = None
    """``None`` for the infinite discounted game, else a finite number of rounds."""

    def __post_init__(self):
        check_fields(self)
        if self.method not in METHODS:
            raise InvalidParameterError(
                f"method must be one of {', '.join(METHODS)}, got {self.method!r}"
            )
        if self.policy not in POLICY_CLASSES:
            raise InvalidParameterError(
                f"policy must be one of {', '.join(POLICY_CLASSES)}, "
                f"got {self.policy!r}"
            )
        check_probability("gamma", self.gamma)
        for field in ("lr_inner", "lr_outer", "outer_beta", "std", "prox_threshold"):
            if getattr(self, field) < 0:
                raise InvalidParameterError(
                    f"{field} must be >= 0, got {getattr(self, field)}"
                )
        for field in ("inner_steps", "num_epochs", "hidden_size", "prox_max_iters"):
            check_count(field, getattr(self, field))
        if self.horizon is not None and self.horizon < 1:
            raise InvalidParameterError(f"horizon must be >= 1, got {self.horizon}")


# -- policies ----------------------------------------------------------------------
def init_policy(key: jax.Array, config: ExactConfig) -> Any:
    """Initial parameters of one agent's policy.

    Tabular and pre-conditioned: ``[5]`` logits ~ N(0, std^2). MLP: a 6-H-1 tanh
    network with PyTorch's default uniform initialisation (``U(-1/sqrt(fan_in),
    1/sqrt(fan_in))`` for weights and biases).
    """
    if config.policy in ("tabular", "precond"):
        return config.std * jax.random.normal(key, (5,))
    hidden = config.hidden_size
    k1, k2, k3, k4 = jax.random.split(key, 4)
    b_in, b_out = 1 / np.sqrt(6.0), 1 / np.sqrt(hidden)
    return {
        "w1": jax.random.uniform(k1, (6, hidden), minval=-b_in, maxval=b_in),
        "b1": jax.random.uniform(k2, (hidden,), minval=-b_in, maxval=b_in),
        "w2": jax.random.uniform(k3, (hidden,), minval=-b_out, maxval=b_out),
        "b2": jax.random.uniform(k4, (), minval=-b_out, maxval=b_out),
    }


def coop_probs(params: Any, policy: str, agent: int) -> jax.Array:
    """``[5]`` cooperation probabilities of ``agent`` (0 or 1, static) in DD, DC, CD,
    CC, start."""
    if policy == "tabular":
        return jax.nn.sigmoid(params)
    if policy == "precond":
        return jax.nn.sigmoid(jnp.asarray(PRECOND[agent]) @ params)
    hidden = jnp.tanh(jnp.asarray(STATE_INPUTS) @ params["w1"] + params["b1"])
    return jax.nn.sigmoid(hidden @ params["w2"] + params["b2"])


def mirror_params(params: Any, policy: str) -> Any:
    """Parameters that play the other seat exactly as ``params`` plays this one:
    ``coop_probs(mirror, policy, 1 - i) == coop_probs(params, policy, i)[MIRROR]``.
    """
    if policy in ("tabular", "precond"):
        return params[jnp.asarray(MIRROR_STATES)]
    w1 = jnp.concatenate([params["w1"][3:], params["w1"][:3]])
    return {**params, "w1": w1}


def bernoulli_kl(p: jax.Array, q: jax.Array) -> jax.Array:
    """``sum_s KL(Bernoulli(p_s) || Bernoulli(q_s))`` over the states."""
    eps = 1e-12
    p, q = jnp.clip(p, eps, 1 - eps), jnp.clip(q, eps, 1 - eps)
    return jnp.sum(p * jnp.log(p / q) + (1 - p) * jnp.log((1 - p) / (1 - q)))


# -- losses and updates ------------------------------------------------------------
def _ordered(agent: int, mine: Any, other: Any) -> tuple[Any, Any]:
    return (mine, other) if agent == 0 else (other, mine)


def loss(agent: int, mine: Any, other: Any, config: ExactConfig) -> jax.Array:
    """``-V_agent``: the exact loss of ``agent`` with parameters ``mine`` against
    ``other``."""
    theta_1, theta_2 = _ordered(agent, mine, other)
    values = exact_values(
        coop_probs(theta_1, config.policy, 0),
        coop_probs(theta_2, config.policy, 1),
        config.contrib_factor,
        config.gamma,
        config.horizon,
    )
    return -values[agent]


def _sgd(params: Any, grads: Any, lr: float) -> Any:
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def lookahead(agent: int, mine: Any, other: Any, config: ExactConfig) -> Any:
    """The opponent's parameters after ``inner_steps`` SGD steps on its own loss
    against ``mine`` (differentiable in ``mine``)."""

    def step(other, _):
        grads = jax.grad(loss, argnums=1)(1 - agent, other, mine, config)
        return _sgd(other, grads, config.lr_inner), None

    other, _ = jax.lax.scan(step, other, None, length=config.inner_steps)
    return other


def lola_loss(agent: int, mine: Any, other: Any, config: ExactConfig) -> jax.Array:
    """``L_agent(mine, other'(mine))`` after the opponent's lookahead."""
    return loss(agent, mine, lookahead(agent, mine, other, config), config)


def taylor_grad(agent: int, mine: Any, other: Any, config: ExactConfig) -> Any:
    """Original LOLA's update direction ``grad_i L_i - lr_inner grad_i(grad_j L_i .
    grad_j L_j)``."""

    def shaping(mine):
        g_mine = jax.grad(loss, argnums=2)(agent, mine, other, config)
        g_other = jax.grad(loss, argnums=1)(1 - agent, other, mine, config)
        return sum(
            jnp.vdot(a, b)
            for a, b in zip(
                jax.tree.leaves(g_mine), jax.tree.leaves(g_other), strict=True
            )
        )

    naive = jax.grad(loss, argnums=1)(agent, mine, other, config)
    correction = jax.grad(shaping)(mine)
    return jax.tree.map(lambda n, c: n - config.lr_inner * c, naive, correction)


def pola_step(
    agent: int, mine: Any, other: Any, config: ExactConfig
) -> tuple[Any, jax.Array]:
    """Outer POLA: iterate to the fixed point of the proximal LOLA objective.

    Returns:
        ``(new parameters, iterations used)``.
    """
    start_probs = coop_probs(mine, config.policy, agent)

    def objective(theta):
        probs = coop_probs(theta, config.policy, agent)
        prox = bernoulli_kl(start_probs, probs)
        return lola_loss(agent, theta, other, config) + config.outer_beta * prox

    def body(carry):
        theta, probs, iters, _ = carry
        theta = _sgd(theta, jax.grad(objective)(theta), config.lr_outer)
        new_probs = coop_probs(theta, config.policy, agent)
        converged = (bernoulli_kl(new_probs, probs) < config.prox_threshold) & (
            bernoulli_kl(probs, new_probs) < config.prox_threshold
        )
        iters = iters + 1
        return theta, new_probs, iters, converged | (iters >= config.prox_max_iters)

    init = (mine, start_probs, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    theta, _, iters, _ = jax.lax.while_loop(lambda c: ~c[3], body, init)
    return theta, iters


def agent_update(
    agent: int, mine: Any, other: Any, config: ExactConfig
) -> tuple[Any, jax.Array]:
    """One agent's new parameters under ``config.method`` (and the POLA iterations
    used, 1 for the other methods)."""
    one = jnp.ones((), jnp.int32)
    if config.method == "naive":
        grads = jax.grad(loss, argnums=1)(agent, mine, other, config)
    elif config.method == "lola":
        grads = jax.grad(lola_loss, argnums=1)(agent, mine, other, config)
    elif config.method == "lola_taylor":
        grads = taylor_grad(agent, mine, other, config)
    else:
        return pola_step(agent, mine, other, config)
    return _sgd(mine, grads, config.lr_outer), one


def joint_update(
    thetas: tuple[Any, Any], config: ExactConfig
) -> tuple[tuple[Any, Any], jax.Array]:
    """Both agents' updates from the same joint parameters, applied together.

    Returns:
        ``((theta_1', theta_2'), [2] iterations used)``.
    """
    new_1, iters_1 = agent_update(0, thetas[0], thetas[1], config)
    new_2, iters_2 = agent_update(1, thetas[1], thetas[0], config)
    return (new_1, new_2), jnp.stack([iters_1, iters_2])


def is_tft(probs: jax.Array, values: jax.Array, config: ExactConfig) -> jax.Array:
    """The Fig. 3 criterion for ``[2, 5]`` cooperation probabilities and ``[2]``
    values."""
    retaliates = jnp.all(
        jnp.stack(
            [
                jnp.all(probs[i, OTHER_DEFECTED[i]] < TFT_COOP_THRESHOLD)
                for i in range(2)
            ]
        )
    )
    target = TFT_RETURN_FRACTION * (config.contrib_factor - 1) / (1 - config.gamma)
    return retaliates & (values.mean() > target)


class ExactOutput(NamedTuple):
    """Per-epoch record of one exact run (after each joint update)."""

    values: jax.Array  # [E, 2] exact discounted values
    probs: jax.Array  # [E, 2, 5] cooperation probabilities
    tft: jax.Array  # [E] bool: the TFT criterion holds
    iters: jax.Array  # [E, 2] POLA iterations used


def make_train(config: ExactConfig):
    """``train(key) -> ExactOutput``: a whole exact run, pure and jittable; vmap it
    over keys for seeds."""

    def evaluate(thetas):
        probs = jnp.stack([coop_probs(thetas[i], config.policy, i) for i in range(2)])
        values = exact_values(
            probs[0], probs[1], config.contrib_factor, config.gamma, config.horizon
        )
        return values, probs

    def train(key: jax.Array) -> ExactOutput:
        key_1, key_2 = jax.random.split(key)
        thetas = (init_policy(key_1, config), init_policy(key_2, config))

        def epoch(thetas, _):
            thetas, iters = joint_update(thetas, config)
            values, probs = evaluate(thetas)
            return thetas, ExactOutput(
                values, probs, is_tft(probs, values, config), iters
            )

        _, out = jax.lax.scan(epoch, thetas, None, length=config.num_epochs)
        return out

    return train


@functools.lru_cache(maxsize=64)
def _seeds_train(config: ExactConfig):
    return jax.jit(jax.vmap(make_train(config)))


def p_tft(config: ExactConfig, keys: jax.Array) -> tuple[float, ExactOutput]:
    """Fraction of seeds (one per key in ``[S]`` keys) that found TFT at some epoch,
    and the per-seed outputs ``[S, E, ...]`` (compiled once per config)."""
    out = _seeds_train(config)(keys)
    return float(np.mean(np.asarray(out.tft).any(axis=1))), out
