"""An opponent model that learns the opponent it meets: a base model corrected
online, and the evidence for the correction.

A model fitted offline (a clone library, :mod:`mopa.opponent.population`)
describes the opponents it was fitted to. Against an opponent outside them a
planner falls back on a broad base model (a policy of the family played under a
flat intent, say), which learns nothing from the moves it sees. The online
residual does: a linear correction of the base's log-probabilities, fitted to the
opponent's moves as they arrive::

    log p_W(a | o) = log p_base(a | o) + phi(o)^T W_a - log Z(o)
    phi(o) = [f(o'), 1]

(``o'`` the observation without its ``drop_obs_tail`` entries, ``f`` the config's
``features_fn``, the identity by default; ``p_base`` the base
model's predictive floored as the beliefs floor theirs, ``(1 - epsilon) p +
epsilon / A``, so that a move the base rules out can still be learned). Under a
Gaussian prior ``W ~ N(0, 1 / prior_precision)`` on every weight, ``W`` is the MAP
estimate on the ``capacity`` latest moves: a convex problem (multinomial logistic
regression with the base as an offset), refitted after every move by
``newton_steps`` Newton steps from the previous weights (each the best of a few
step sizes, so the objective never rises). With no moves ``W = 0``,
the floored base.

**Features.** By default they are the raw observation: a user whose observations
are far from unit scale scales them first. The correction is linear in them, so an
opponent whose rule is not linear in the observation (one that flees the *nearest*
threat, or turns at a wall) is learned only as far as the features carry the rule.
A game's own features, ``features_fn=f`` (any traceable map of one observation's read
entries), let the correction express such rules: for the pursuit game,
:meth:`~mopa.envs.pursuit.PursuitEnv.prey_threat_features`. The base enters as a
fixed offset, which a correction must outweigh where the base is wrong (and
confident); with ``reweigh_base`` the base's log-probabilities are features as
well, ``phi = [f(o'), 1, log p_base]``, so the fit can discount the base. With
``free_fit`` a second correction is fitted without the base at all,
``log p_V(a | o) = phi(o)^T V_a - log Z(o)`` (a plain multinomial logistic
regression on the same features, under the same prior), for an opponent the base
misdescribes so badly that outweighing it costs more evidence than learning anew.

**Whether to use it.** A correction fitted to few moves may predict worse than the
base. So the correction is itself a hypothesis, weighed against the base by its
*prequential* likelihood: each move is scored under the weights fitted to the
moves before it, then added to the fit (the predictive log-likelihood of a
sequential predictor, which cannot reward fitting the move being scored)::

    log_odds(t) = log_odds(t - 1) + log p_{W_{t-1}}(a_t | o_t) - log p_base(a_t | o_t)
    residual_weight(t) = sigmoid(log_odds(t)),   log_odds(0) = logit(prior)

(``p_base`` floored in both terms.) With ``free_fit`` the free correction keeps
its own log odds against the base the same way, and the three hypotheses (the
base, the corrected base, the free fit; prior odds ``prior : 1 - prior`` of each
correction against the base) are weighed by their posterior,
``softmax([0, log_odds, free_log_odds])``: :func:`free_weight` is the free fit's
probability, and :func:`residual_weight` stays the corrected base's odds against
the base alone. A planner
(:class:`~mopa.planning.OnlineResidualModel`) imagines the free fit in a rollout
with probability ``free_weight`` (0 without ``free_fit``), else the corrected model
with probability ``residual_weight`` and the base itself (not floored)
otherwise: from ``prior`` (even odds by default) before any move, and as the base
alone once the evidence is against the correction.

Typical use, beside a planner whose opponent model is an
:class:`~mopa.planning.OnlineResidualModel` on ``base``::

    config = OnlineResidualConfig(num_actions=5, obs_size=D)
    state = init_online_residual(config)
    # after every move the opponent makes (its observation, its action, and the
    # base model's predictive logits of that observation):
    state = observe_residual(config, state, obs, action, base_logits)
    # the planner's params, each decision (the weights and evidence of both fits):
    params = planning.residual_params(base_params, state)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import struct

from mopa.core.checks import check_count, check_fields, check_probability
from mopa.core.linalg import solve
from mopa.errors import InvalidParameterError

_STEP_SIZES = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.0)
"""Newton step sizes :func:`fit_residual` tries (the best is taken)."""

DEFAULT_PRIOR = 0.5
"""Default prior probability that the correction predicts the opponent better than
the base (no preference: the prequential evidence decides)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class OnlineResidualConfig:
    """Shape, prior and fit of an online residual model (all static)."""

    num_actions: int
    """``A``: the opponent's discrete actions."""
    obs_size: int
    """``D``: entries of the opponent's observation (before ``drop_obs_tail``)."""
    drop_obs_tail: int = 0
    """Trailing observation entries the correction never reads (as the
    population's clones: e.g. the opponent's own intent)."""
    prior_precision: float = 1.0
    """``lambda``: precision of the Gaussian prior on each weight (the L2 penalty
    of the MAP fit)."""
    capacity: int = 128
    """Moves kept for the fit (the latest; a ring buffer)."""
    newton_steps: int = 2
    """Newton steps of the refit after each move (from the previous weights)."""
    epsilon: float = 0.05
    """Floor of the base's predictive: ``(1 - epsilon) p + epsilon / A``."""
    prior: float = DEFAULT_PRIOR
    """Prior probability of the correction against the base
    (:func:`residual_weight` starts there)."""
    features_fn: Callable[[jax.Array], jax.Array] | None = None
    """``f``: one observation's read entries ``[D - drop_obs_tail]`` to its
    features ``[K]`` (traceable by JAX; ``phi(o) = [f(o'), 1]``). ``None``: the
    entries themselves."""
    reweigh_base: bool = False
    """The floored base's log-probabilities are features too (``A`` more rows of
    ``W``): the correction can then reweigh the base's moves, or discount a base
    that misleads (its weights near ``-I``), where otherwise it must outweigh it."""
    free_fit: bool = False
    """Also fit the features without the base, ``softmax(phi V)``, as a third
    hypothesis weighed by its own prequential evidence (:func:`free_weight`)."""

    def __post_init__(self):
        check_fields(self)
        check_count("num_actions", self.num_actions, low=2)
        check_count("obs_size", self.obs_size)
        check_count("drop_obs_tail", self.drop_obs_tail, low=0)
        if self.drop_obs_tail >= self.obs_size:
            raise InvalidParameterError(
                f"drop_obs_tail must be below obs_size ({self.obs_size}), got "
                f"{self.drop_obs_tail}"
            )
        if not self.prior_precision > 0:
            raise InvalidParameterError(
                f"prior_precision must be > 0, got {self.prior_precision}"
            )
        check_count("capacity", self.capacity)
        check_count("newton_steps", self.newton_steps)
        # epsilon > 0: a move the base rules out could still be learned
        check_probability("epsilon", self.epsilon)
        check_probability("prior", self.prior)
        if self.features_fn is not None:
            if not callable(self.features_fn):
                raise InvalidParameterError(
                    f"features_fn must be a function of one observation or None, "
                    f"got {self.features_fn!r}"
                )
            read = self.obs_size - self.drop_obs_tail
            shape = _feature_shape(self.features_fn, read)
            if len(shape) != 1 or shape[0] < 1:
                raise InvalidParameterError(
                    f"features_fn must map an observation [{read}] to a vector [K], "
                    f"K >= 1; it gives shape {shape}"
                )

    @property
    def num_features(self) -> int:
        """``F``: rows of ``W``, the features of an observation (``f``'s, or its
        read entries, and a constant) and with ``reweigh_base`` the base's ``A``
        log-probabilities."""
        read = self.obs_size - self.drop_obs_tail
        if self.features_fn is not None:
            read = _feature_shape(self.features_fn, read)[0]
        return read + 1 + (self.num_actions if self.reweigh_base else 0)


@struct.dataclass
class OnlineResidualState:
    """The moves seen (a ring buffer) and the correction fitted to them."""

    features: jax.Array  # [C, F] each kept move's design row (design_rows)
    base: jax.Array  # [C, A] the floored base's log-probabilities there
    actions: jax.Array  # [C] int32 the moves
    count: jax.Array  # [] int32 moves seen (all of them; the latest C are kept)
    weights: jax.Array  # [F, A] the MAP correction
    log_odds: jax.Array  # [] log odds of the correction against the base
    free_weights: jax.Array  # [F, A] the MAP free fit (zeros without free_fit)
    free_log_odds: jax.Array  # [] its log odds against the base (-inf without)


def init_online_residual(config: OnlineResidualConfig) -> OnlineResidualState:
    """No moves seen: ``W = V = 0`` and the log odds at ``logit(prior)`` (the free
    fit's at ``-inf`` without ``free_fit``)."""
    C, F, A = config.capacity, config.num_features, config.num_actions
    log_odds = _logit(config.prior)
    return OnlineResidualState(
        features=jnp.zeros((C, F), jnp.float32),
        base=jnp.zeros((C, A), jnp.float32),
        actions=jnp.zeros((C,), jnp.int32),
        count=jnp.zeros((), jnp.int32),
        weights=jnp.zeros((F, A), jnp.float32),
        log_odds=jnp.asarray(log_odds, jnp.float32),
        free_weights=jnp.zeros((F, A), jnp.float32),
        free_log_odds=jnp.asarray(
            log_odds if config.free_fit else -jnp.inf, jnp.float32
        ),
    )


def residual_features(config: OnlineResidualConfig, obs: jax.Array) -> jax.Array:
    """``phi(o)``: ``obs [..., D] -> [..., F]``, ``f`` of the read entries (the
    entries themselves by default) and a 1."""
    if obs.shape[-1] != config.obs_size:
        raise InvalidParameterError(
            f"obs: the last axis must have obs_size {config.obs_size} entries, got "
            f"shape {obs.shape}"
        )
    read = obs[..., : config.obs_size - config.drop_obs_tail]
    if config.features_fn is not None:
        read = jnp.vectorize(config.features_fn, signature="(d)->(k)")(read)
    return jnp.concatenate([read, jnp.ones((*obs.shape[:-1], 1), read.dtype)], -1)


def design_rows(
    config: OnlineResidualConfig, obs: jax.Array, base: jax.Array
) -> jax.Array:
    """``[..., F]`` what ``W`` multiplies: ``phi(o)``, and with ``reweigh_base``
    the floored base's log-probabilities ``base [..., A]`` after it."""
    phi = residual_features(config, obs)
    if not config.reweigh_base:
        return phi
    return jnp.concatenate([phi, base.astype(phi.dtype)], -1)


def floored_base(config: OnlineResidualConfig, base_logits: jax.Array) -> jax.Array:
    """``log((1 - epsilon) softmax(base_logits) + epsilon / A)``, ``[..., A]``."""
    probs = jax.nn.softmax(base_logits, -1)
    eps = config.epsilon
    return jnp.log((1.0 - eps) * probs + eps / config.num_actions)


def residual_log_probs(
    config: OnlineResidualConfig,
    weights: jax.Array,
    base_logits: jax.Array,
    obs: jax.Array,
) -> jax.Array:
    """``log p_W(a | o)`` ``[..., A]`` of the corrected model.

    Args:
        config: the model.
        weights: ``[F, A]`` the correction.
        base_logits: ``[..., A]`` the base's logits at ``obs`` (floored here).
        obs: ``[..., D]`` the opponent's observations.
    """
    base = floored_base(config, base_logits)
    return jax.nn.log_softmax(base + design_rows(config, obs, base) @ weights, -1)


def fit_residual(
    config: OnlineResidualConfig,
    features: jax.Array,
    base: jax.Array,
    actions: jax.Array,
    mask: jax.Array,
    weights: jax.Array,
) -> jax.Array:
    """``newton_steps`` Newton steps on the MAP objective from ``weights``.

    The objective is ``-sum_n mask_n log softmax(base_n + phi_n W)_{a_n} +
    lambda / 2 ||W||^2``, convex, with Hessian at least ``lambda I``. Each step
    moves along the Newton direction by the best of a few step sizes (1, 1/2, ...,
    1/16, or 0): the objective never rises.

    Args:
        config: the model.
        features: ``[N, F]`` each move's :func:`design_rows`.
        base: ``[N, A]`` the floored base's log-probabilities at each move.
        actions: ``[N]`` int the moves.
        mask: ``[N]`` bool the moves to fit (the rest are ignored).
        weights: ``[F, A]`` the starting weights.

    Returns:
        ``[F, A]`` the weights after the steps.
    """
    shape = weights.shape
    mask = mask.astype(jnp.float32)

    def loss(flat):
        w = flat.reshape(shape)
        log_probs = jax.nn.log_softmax(base + features @ w, -1)  # [N, A]
        chosen = jnp.take_along_axis(log_probs, actions[:, None], -1)[:, 0]
        return -jnp.sum(mask * chosen) + 0.5 * config.prior_precision * jnp.sum(
            flat * flat
        )

    def step(flat, _):
        gradient = jax.grad(loss)(flat)
        hessian = jax.hessian(loss)(flat)
        # Batched over games, jnp.linalg.solve would be a LAPACK kernel that waits
        # on XLA's CPU thread pool and can hang programs run side by side
        # (mopa.core.linalg); this solves the games' systems one after another.
        direction = solve(hessian, gradient)
        # A full Newton step can overshoot far from the optimum (moves a linear
        # model separates push the weights out); take the best of a few halvings,
        # or none, so that the objective never rises.
        sizes = jnp.asarray(_STEP_SIZES, flat.dtype)
        tried = flat[None] - sizes[:, None] * direction[None]
        return tried[jnp.argmin(jax.vmap(loss)(tried))], None

    flat, _ = jax.lax.scan(step, weights.reshape(-1), None, length=config.newton_steps)
    return flat.reshape(shape)


def observe_residual(
    config: OnlineResidualConfig,
    state: OnlineResidualState,
    obs: jax.Array,
    actions: jax.Array,
    base_logits: jax.Array,
) -> OnlineResidualState:
    """Score the opponent's moves under the current fit, keep them, refit.

    Each agent's move is one example (the agents of a team share the correction,
    as they share a clone).

    Args:
        config: the model.
        state: the state before these moves.
        obs: ``[O, D]`` each opponent agent's observation.
        actions: ``[O]`` int each agent's move.
        base_logits: ``[O, A]`` the base model's predictive logits at ``obs`` (its
            marginal over any latent it draws).

    Returns:
        The state after these moves: the log odds add the moves' prequential
        log-likelihood ratio of the correction against the base (and of the free
        fit, with ``free_fit``); the buffer holds them; the weights are refitted.
    """
    base = floored_base(config, base_logits)  # [O, A]
    features = design_rows(config, obs, base)  # [O, F]
    actions = actions.astype(jnp.int32)

    def ratio(log_probs):  # the moves' log-likelihood ratio against the base
        chosen = jnp.take_along_axis(log_probs - base, actions[:, None], -1)[:, 0]
        return jnp.sum(chosen)

    corrected = jax.nn.log_softmax(base + features @ state.weights, -1)
    C = config.capacity
    slots = (state.count + jnp.arange(actions.shape[0])) % C
    kept = state.replace(
        features=state.features.at[slots].set(features),
        base=state.base.at[slots].set(base),
        actions=state.actions.at[slots].set(actions),
        count=state.count + actions.shape[0],
        log_odds=state.log_odds + ratio(corrected),
    )
    mask = jnp.arange(C) < kept.count
    weights = fit_residual(
        config, kept.features, kept.base, kept.actions, mask, state.weights
    )
    if not config.free_fit:
        return kept.replace(weights=weights)
    free = jax.nn.log_softmax(features @ state.free_weights, -1)
    free_weights = fit_residual(
        config,
        kept.features,
        jnp.zeros_like(kept.base),
        kept.actions,
        mask,
        state.free_weights,
    )
    return kept.replace(
        weights=weights,
        free_weights=free_weights,
        free_log_odds=state.free_log_odds + ratio(free),
    )


def residual_weight(state: OnlineResidualState) -> jax.Array:
    """``[]`` probability that the correction, not the base, describes the
    opponent (the prequential evidence; see the module docstring); with
    ``free_fit``, given that the free fit does not."""
    return jax.nn.sigmoid(state.log_odds)


def free_weight(state: OnlineResidualState) -> jax.Array:
    """``[]`` posterior probability of the free fit among the three hypotheses
    (the base, the corrected base, the free fit); 0 without ``free_fit``."""
    zero = jnp.zeros_like(state.log_odds)
    log_odds = jnp.stack([zero, state.log_odds, state.free_log_odds], -1)
    return jax.nn.softmax(log_odds, -1)[..., 2]


def free_log_probs(
    config: OnlineResidualConfig,
    free_weights: jax.Array,
    base_logits: jax.Array,
    obs: jax.Array,
) -> jax.Array:
    """``log p_V(a | o)`` ``[..., A]`` of the free fit (``base_logits`` only
    enters through the features, with ``reweigh_base``)."""
    base = floored_base(config, base_logits)
    return jax.nn.log_softmax(design_rows(config, obs, base) @ free_weights, -1)


def _feature_shape(features_fn: Callable, read: int) -> tuple[int, ...]:
    """The shape ``features_fn`` gives one observation's ``read`` entries (traced,
    not run); a function that cannot take them is refused."""
    try:
        out = jax.eval_shape(features_fn, jax.ShapeDtypeStruct((read,), jnp.float32))
    except Exception as error:  # noqa: BLE001 - any failure is the user's function's
        raise InvalidParameterError(
            f"features_fn must take one observation's {read} read entries: {error}"
        ) from None
    return tuple(getattr(out, "shape", ()))


def _logit(p: float) -> float:
    """``log(p / (1 - p))`` for ``0 < p < 1``."""
    return math.log(p / (1 - p))
