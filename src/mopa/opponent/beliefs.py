"""Online beliefs over an opponent's K discrete strategies.

A belief is a probability vector ``[K]`` over the strategies the opponent may be
playing (the prey's hidden corner in ``tag_intent``), sharpened as the trajectory
prefix grows. Three sources, all pure ``jnp``, jittable and ``vmap``-able over
episodes; each has a one-step update (``state -> new state``, for a ``lax.scan``
that plays the game) and a whole-trajectory helper giving the belief after every
step, ``[T, K]``, computed along a different path (every prefix at once) so the two
check each other:

(a) **classifier**: ``softmax(logits_fn(prefix, length) / temperature)``, uniform
    before ``min_steps`` steps have been seen (:func:`update_prefix_belief`,
    :func:`prefix_beliefs`); :func:`window_logits_fn` builds ``logits_fn`` from one
    classifier per window length, using the largest window seen so far (the
    research's online belief).
(b) **label-free readout**: a predicted arrival position ``[2]`` becomes logits
    ``-|pred - c_k|^2`` over the known candidate locations ``c_k`` (:func:`readout_
    logits_fn`), used as in (a); the temperature is fit on held-out data by
    minimising the negative log-likelihood (:func:`fit_readout_temperature`).
(c) **exact Bayes** from a strategy-conditioned policy ``p(a_t | s_t, k)``:
    ``log b_t(k) = log b_{t-1}(k) + log p(a_t | s_t, k)``, renormalised in log space
    (:func:`update_bayes_belief`, :func:`bayes_beliefs`). The policy model is any
    function ``obs [D] -> log-probabilities [K, A]``; :func:`policy_log_probs_fn`
    builds it from a mopa policy whose observation ends with a K-entry strategy
    one-hot (the true ``tag_intent`` prey), and :func:`mopa.opponent.bc.bc_log_
    probs_fn` from a behaviour clone.

Also the two ways beliefs enter training and planning: :func:`sample_strategy`
(draw a strategy from a belief) and :func:`soft_belief` / :func:`random_soft_belief`
(``alpha * onehot + (1 - alpha) * uniform``, the belief-conditioned predators'
training input).

Row ``t`` of every whole-trajectory helper is the belief *after* observing step
``t`` (``t + 1`` steps); the prior, before anything is seen, is uniform.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.errors import InvalidParameterError
from mopa.policy import PolicySpec

LogitsFn = Callable[[jax.Array, jax.Array], jax.Array]
"""``logits_fn(prefix [T, D], length []) -> logits [K]``: only the first
``length`` rows of ``prefix`` hold observed steps; the rest are zeros."""

LogProbsFn = Callable[[jax.Array], jax.Array]
"""``log_probs_fn(obs [D]) -> log p(a | obs, k) [K, A]`` (rows normalised)."""


# -- shared -------------------------------------------------------------------------
def uniform_belief(num_strategies: int) -> jax.Array:
    """The flat belief ``[K]``."""
    _check_positive("num_strategies", num_strategies)
    return jnp.full((num_strategies,), 1.0 / num_strategies, jnp.float32)


def sample_strategy(key: jax.Array, belief: jax.Array) -> jax.Array:
    """One strategy index ``[]`` (int32) drawn from ``belief [K]``."""
    return jax.random.categorical(key, jnp.log(belief)).astype(jnp.int32)


def soft_belief(
    strategy: jax.Array, alpha: jax.Array, num_strategies: int
) -> jax.Array:
    """``alpha * onehot(strategy) + (1 - alpha) * uniform`` ``[K]``.

    ``alpha = 1`` is the oracle's one-hot, ``alpha = 0`` the flat belief.
    """
    _check_positive("num_strategies", num_strategies)
    onehot = jax.nn.one_hot(strategy, num_strategies)
    return alpha * onehot + (1.0 - alpha) / num_strategies


def random_soft_belief(
    key: jax.Array,
    strategy: jax.Array,
    num_strategies: int,
    alpha_low: float = 0.0,
    alpha_high: float = 1.0,
) -> jax.Array:
    """A soft belief of random sharpness ``[K]``: :func:`soft_belief` with
    ``alpha ~ U[alpha_low, alpha_high]``, drawn once per call (per episode).

    This is the training input of the research's belief-conditioned predators
    (Exp 6), which learn to hedge when it is flat and commit when it is sharp.
    """
    if not 0.0 <= alpha_low <= alpha_high <= 1.0:
        raise InvalidParameterError(
            "alpha_low and alpha_high must satisfy 0 <= alpha_low <= alpha_high <= 1,"
            f" got {alpha_low}, {alpha_high}"
        )
    alpha = jax.random.uniform(key, (), minval=alpha_low, maxval=alpha_high)
    return soft_belief(strategy, alpha, num_strategies)


# -- (a), (b): beliefs from a function of the trajectory prefix ----------------------
@struct.dataclass
class PrefixBeliefState:
    """What a prefix belief carries from step to step."""

    prefix: jax.Array  # [T, D] observed features, zeros past `length`
    length: jax.Array  # [] int32: steps observed so far
    belief: jax.Array  # [K] current belief


def init_prefix_belief(
    max_steps: int, feature_size: int, num_strategies: int
) -> PrefixBeliefState:
    """An empty prefix of ``max_steps`` rows and the uniform belief."""
    _check_positive("max_steps", max_steps)
    _check_positive("feature_size", feature_size)
    return PrefixBeliefState(
        prefix=jnp.zeros((max_steps, feature_size), jnp.float32),
        length=jnp.zeros((), jnp.int32),
        belief=uniform_belief(num_strategies),
    )


def update_prefix_belief(
    state: PrefixBeliefState,
    features: jax.Array,
    logits_fn: LogitsFn,
    temperature: float | jax.Array = 1.0,
    min_steps: int = 1,
) -> PrefixBeliefState:
    """Append one step's features and recompute the belief.

    Args:
        state: the belief so far.
        features: ``[D]`` this step's features (e.g. the opponent's position).
        logits_fn: see :data:`LogitsFn`.
        temperature: the softmax temperature (``> 0``).
        min_steps: the belief stays uniform until this many steps are observed
            (the first classifier window).

    Returns:
        The new state; appending past ``max_steps`` rows leaves the prefix and the
        belief unchanged.
    """
    max_steps = state.prefix.shape[0]
    full = state.length >= max_steps
    index = jnp.minimum(state.length, max_steps - 1)
    prefix = jnp.where(full, state.prefix, state.prefix.at[index].set(features))
    length = jnp.minimum(state.length + 1, max_steps)
    belief = _prefix_belief(logits_fn, prefix, length, temperature, min_steps)
    belief = jnp.where(full, state.belief, belief)
    return PrefixBeliefState(prefix=prefix, length=length, belief=belief)


def prefix_beliefs(
    logits_fn: LogitsFn,
    trajectory: jax.Array,
    num_strategies: int,
    temperature: float | jax.Array = 1.0,
    min_steps: int = 1,
) -> jax.Array:
    """The belief after every step of one trajectory, ``[T, K]``.

    Row ``t`` is what :func:`update_prefix_belief` gives after ``t + 1`` steps;
    computed here for every prefix at once (each prefix masked from the whole
    trajectory), not by scanning.

    Args:
        logits_fn: see :data:`LogitsFn`.
        trajectory: ``[T, D]`` features of every step.
        num_strategies: ``K``, checked against ``logits_fn``'s output.
        temperature, min_steps: as in :func:`update_prefix_belief`.
    """
    if trajectory.ndim != 2:
        raise InvalidParameterError(
            f"trajectory must be [T, D], got shape {tuple(trajectory.shape)}"
        )
    T = trajectory.shape[0]
    rows = jnp.arange(T)

    def belief_at(t):
        prefix = jnp.where((rows <= t)[:, None], trajectory, 0.0)
        return _prefix_belief(logits_fn, prefix, t + 1, temperature, min_steps)

    beliefs = jax.vmap(belief_at)(rows)
    if beliefs.shape[-1] != num_strategies:
        raise InvalidParameterError(
            f"logits_fn returns {beliefs.shape[-1]} logits, "
            f"num_strategies is {num_strategies}"
        )
    return beliefs


def _prefix_belief(logits_fn, prefix, length, temperature, min_steps) -> jax.Array:
    logits = logits_fn(prefix, jnp.asarray(length, jnp.int32))
    belief = jax.nn.softmax(logits / temperature, -1)
    uniform = jnp.full_like(belief, 1.0 / belief.shape[-1])
    return jnp.where(length >= min_steps, belief, uniform)


def window_logits_fn(
    window_sizes: Sequence[int],
    classifier_fns: Sequence[Callable[[jax.Array], jax.Array]],
) -> LogitsFn:
    """A :data:`LogitsFn` from one classifier per window length.

    ``classifier_fns[i](prefix[:window_sizes[i]]) -> logits [K]`` sees the first
    ``window_sizes[i]`` steps; the returned function uses the classifier of the
    largest window that fits in the observed length (the research's online
    belief: "the posterior of the classifier for the largest k seen so far"). Pair
    it with ``min_steps = window_sizes[0]``: below it the first classifier would
    see unobserved (zero) rows.

    Args:
        window_sizes: increasing window lengths, e.g. ``(3, 5, 8, 12, 18, 25)``.
        classifier_fns: one function per window.
    """
    sizes = tuple(int(k) for k in window_sizes)
    if len(sizes) == 0 or len(sizes) != len(classifier_fns):
        raise InvalidParameterError(
            f"window_sizes and classifier_fns must be non-empty and of equal length, "
            f"got {len(sizes)} and {len(classifier_fns)}"
        )
    if sizes[0] < 1 or any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise InvalidParameterError(
            f"window_sizes must be positive and increasing, got {sizes}"
        )
    branches = [
        (lambda prefix, fn=fn, k=k: fn(prefix[:k]))
        for fn, k in zip(classifier_fns, sizes, strict=True)
    ]

    def logits_fn(prefix: jax.Array, length: jax.Array) -> jax.Array:
        if prefix.shape[0] < sizes[-1]:
            raise InvalidParameterError(
                f"prefix has {prefix.shape[0]} rows, the largest window is {sizes[-1]}"
            )
        index = jnp.clip(jnp.sum(length >= jnp.asarray(sizes)) - 1, 0, len(sizes) - 1)
        return jax.lax.switch(index, branches, prefix)

    return logits_fn


def readout_logits_fn(
    readout_fn: Callable[[jax.Array, jax.Array], jax.Array], candidates: jax.Array
) -> LogitsFn:
    """A :data:`LogitsFn` from a position readout: ``-|readout - c_k|^2``.

    With a temperature ``tau`` the belief is ``softmax(-|p - c_k|^2 / tau)``: the
    strategy whose location the opponent is predicted to reach is the likeliest,
    with no strategy labels involved (the label-free JEPA belief of Exp 6).

    Args:
        readout_fn: ``(prefix [T, D], length []) -> predicted position [2]``.
        candidates: ``[K, 2]`` the known strategy locations (``tag_intent``:
            ``INTENT_CORNERS * intent_corner``).
    """
    candidates = jnp.asarray(candidates, jnp.float32)
    if candidates.ndim != 2:
        raise InvalidParameterError(
            f"candidates must be [K, P], got shape {tuple(candidates.shape)}"
        )

    def logits_fn(prefix: jax.Array, length: jax.Array) -> jax.Array:
        return readout_logits(readout_fn(prefix, length), candidates)

    return logits_fn


def readout_logits(position: jax.Array, candidates: jax.Array) -> jax.Array:
    """``-|position - c_k|^2`` ``[..., K]`` for positions ``[..., P]`` and candidate
    locations ``[K, P]``."""
    return -jnp.sum((position[..., None, :] - candidates) ** 2, -1)


def fit_readout_temperature(
    positions: Any,
    candidates: Any,
    labels: Any,
    bounds: tuple[float, float] = (1e-3, 1e2),
) -> float:
    """The temperature minimising the held-out NLL of the readout belief.

    Host-side (scipy). See :func:`mopa.opponent.calibration.fit_temperature`.

    Args:
        positions: ``[N, P]`` predicted arrival positions on held-out data.
        candidates: ``[K, P]`` candidate locations.
        labels: ``[N]`` true strategy indices.
        bounds: search interval of the temperature.
    """
    from mopa.opponent.calibration import fit_temperature

    positions = np.asarray(positions, np.float32)
    candidates = np.asarray(candidates, np.float32)
    if positions.ndim != 2 or candidates.ndim != 2:
        raise InvalidParameterError(
            f"positions must be [N, P] and candidates [K, P], got shapes "
            f"{positions.shape} and {candidates.shape}"
        )
    logits = readout_logits(jnp.asarray(positions), jnp.asarray(candidates))
    return fit_temperature(logits, labels, bounds=bounds)


# -- (c): exact Bayes ------------------------------------------------------------------
@struct.dataclass
class BayesBeliefState:
    """The Bayes belief, carried in log space (safe against underflow)."""

    log_belief: jax.Array  # [K] normalised log-probabilities
    length: jax.Array  # [] int32: actions observed so far

    @property
    def belief(self) -> jax.Array:
        """``[K]`` probabilities."""
        return jnp.exp(self.log_belief)


def init_bayes_belief(
    num_strategies: int, prior: jax.Array | None = None
) -> BayesBeliefState:
    """The prior belief (uniform unless ``prior [K]`` is given)."""
    if prior is None:
        prior = uniform_belief(num_strategies)
    prior = jnp.asarray(prior, jnp.float32)
    if prior.shape != (num_strategies,):
        raise InvalidParameterError(
            f"prior must have shape ({num_strategies},), got {tuple(prior.shape)}"
        )
    log_prior = jnp.log(prior)
    return BayesBeliefState(
        log_belief=log_prior - jax.nn.logsumexp(log_prior),
        length=jnp.zeros((), jnp.int32),
    )


def floored_log_likelihood(
    log_probs: jax.Array, action: jax.Array, epsilon: float | jax.Array = 0.0
) -> jax.Array:
    """``log p_eps(a | k)`` ``[K]`` of the observed action under every strategy.

    ``p_eps(a | k) = (1 - eps) p(a | k) + eps / A``: the model is mixed with a
    uniform policy at rate ``epsilon``. With ``epsilon = 0`` an action that a
    strategy gives probability 0 rules that strategy out for good (exact Bayes);
    ``epsilon > 0`` bounds every update's log-ratio by ``log(A / eps)``, so one
    unexpected action (an imperfect opponent model, exploration, a greedy opponent
    modelled by a softmax) cannot zero a strategy forever.

    Args:
        log_probs: ``[K, A]`` normalised log-probabilities of each action.
        action: ``[]`` the observed action.
        epsilon: uniform mixing rate in ``[0, 1]``.
    """
    num_actions = log_probs.shape[-1]
    observed = jnp.take(log_probs, action, axis=-1)
    mixed = jnp.logaddexp(
        jnp.log1p(-epsilon) + observed, jnp.log(epsilon) - jnp.log(num_actions)
    )
    return jnp.where(epsilon > 0, mixed, observed)


def update_bayes_belief(
    state: BayesBeliefState,
    log_probs: jax.Array,
    action: jax.Array,
    epsilon: float | jax.Array = 0.0,
) -> BayesBeliefState:
    """One Bayes step: ``log b(k) += log p_eps(action | k)``, renormalised.

    If the action has probability 0 under every strategy (only possible with
    ``epsilon = 0``), the observation carries no usable evidence and the belief is
    left unchanged instead of becoming NaN.

    Args:
        state: the belief before the action.
        log_probs: ``[K, A]`` the opponent model at this step's observation.
        action: ``[]`` the action the opponent took.
        epsilon: see :func:`floored_log_likelihood`.
    """
    joint = state.log_belief + floored_log_likelihood(log_probs, action, epsilon)
    evidence = jax.nn.logsumexp(joint)
    log_belief = jnp.where(jnp.isfinite(evidence), joint - evidence, state.log_belief)
    return BayesBeliefState(log_belief=log_belief, length=state.length + 1)


def bayes_beliefs(
    log_probs_fn: LogProbsFn,
    obs: jax.Array,
    actions: jax.Array,
    num_strategies: int,
    epsilon: float | jax.Array = 0.0,
    prior: jax.Array | None = None,
) -> jax.Array:
    """The Bayes belief after every step of one trajectory, ``[T, K]``.

    Computed in closed form, ``b_t ∝ prior * prod_{s <= t} p_eps(a_s | o_s, k)``,
    as a cumulative sum of log-likelihoods (equal to scanning
    :func:`update_bayes_belief` whenever every step's evidence is finite).

    Args:
        log_probs_fn: see :data:`LogProbsFn`.
        obs: ``[T, D]`` the opponent's observation at each step.
        actions: ``[T]`` the opponent's action at each step.
        num_strategies: ``K``.
        epsilon: see :func:`floored_log_likelihood`.
        prior: ``[K]`` (uniform by default).
    """
    if obs.ndim != 2 or actions.shape != obs.shape[:1]:
        raise InvalidParameterError(
            f"obs must be [T, D] and actions [T], got shapes {tuple(obs.shape)} "
            f"and {tuple(actions.shape)}"
        )
    log_prior = init_bayes_belief(num_strategies, prior).log_belief
    log_probs = jax.vmap(log_probs_fn)(obs)  # [T, K, A]
    if log_probs.shape[1] != num_strategies:
        raise InvalidParameterError(
            f"log_probs_fn gives {log_probs.shape[1]} strategies, "
            f"num_strategies is {num_strategies}"
        )
    likelihood = jax.vmap(floored_log_likelihood, in_axes=(0, 0, None))(
        log_probs, actions, epsilon
    )  # [T, K]
    joint = log_prior + jnp.cumsum(likelihood, 0)
    return jax.nn.softmax(joint, -1)


def beliefs_acted_on(after: jax.Array) -> jax.Array:
    """``[E, T, K]`` the belief acted on at every step (it has seen the moves
    before the step): the uniform belief, then ``after [E, T, K]`` (the belief
    after each step's move) but its last step."""
    E, _, K = after.shape
    uniform = jnp.full((E, 1, K), 1.0 / K)
    return jnp.concatenate([uniform, after[:, :-1]], 1)


def policy_log_probs_fn(
    spec: PolicySpec,
    params: Any,
    num_strategies: int,
    agent: int = 0,
    q_temperature: float = 1.0,
) -> LogProbsFn:
    """The opponent model ``obs [D] -> log p(a | obs, k) [K, A]`` of a mopa policy
    whose observation ends with a ``K``-entry strategy one-hot.

    For every ``k`` the last ``K`` entries of the observation are replaced by
    ``onehot(k)`` and the network is evaluated: an actor's logits give the
    distribution directly; a Q policy's ``softmax(Q / q_temperature)`` stands in
    for its greedy choice (a model, not the exact policy: combine it with
    ``epsilon > 0`` or a small temperature); ``random`` is uniform. For the
    ``tag_intent`` prey this is the true opponent policy under every intent.

    Args:
        spec: the policy's spec (``kind`` ``"actor"``, ``"q"`` or ``"random"``;
            recurrent policies need their carry and are not supported).
        params: its weights.
        num_strategies: ``K``, the length of the observation's trailing one-hot.
        agent: the agent's index in its team (for the agent one-hot input).
        q_temperature: softmax temperature for Q policies.
    """
    if spec.kind == "rnn_q":
        raise InvalidParameterError(
            "spec.kind 'rnn_q' is not supported by policy_log_probs_fn "
            "(a recurrent policy's likelihood needs its carry)"
        )
    _check_positive("num_strategies", num_strategies)
    if num_strategies > spec.obs_size:
        raise InvalidParameterError(
            f"num_strategies ({num_strategies}) exceeds spec.obs_size ({spec.obs_size})"
        )
    if not 0 <= agent < spec.num_agents:
        raise InvalidParameterError(
            f"agent must be in [0, {spec.num_agents}), got {agent}"
        )
    if q_temperature <= 0:
        raise InvalidParameterError(f"q_temperature must be > 0, got {q_temperature}")
    module = spec.module()
    K = num_strategies

    def log_probs_fn(obs: jax.Array) -> jax.Array:
        if obs.shape != (spec.obs_size,):
            raise InvalidParameterError(
                f"obs must have shape ({spec.obs_size},), got {tuple(obs.shape)}"
            )
        x = jnp.concatenate(
            [jnp.broadcast_to(obs[:-K], (K, obs.shape[0] - K)), jnp.eye(K)], -1
        )  # [K, D]: the observation under every strategy
        if spec.agent_id:
            agent_onehot = jax.nn.one_hot(agent, spec.num_agents)
            x = jnp.concatenate(
                [x, jnp.broadcast_to(agent_onehot, (K, agent_onehot.shape[0]))], -1
            )
        if spec.kind == "random":
            logits = jnp.zeros((K, spec.num_actions))
        elif spec.kind == "q":
            logits = module.apply(params, x)[0] / q_temperature
        else:
            logits = module.apply(params, x)
        return jax.nn.log_softmax(logits, -1)

    return log_probs_fn


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise InvalidParameterError(f"{name} must be >= 1, got {value}")
