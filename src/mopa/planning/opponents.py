"""Opponent models for planners: any function from observations to a distribution
over the opponents' next actions, with an optional latent drawn once per rollout.

A planner asks a model two things::

    latent = model.sample_latent(params, key)           # once per rollout
    logits = model.logits(params, latent, obs)          # [O, num_actions], each step

``obs`` is every team's observations (a tuple, ``env.observe(state, env_params)``
inside rollouts), so a model reads whichever team it was built on: the planning
team's own observations for an opponent-action head, the opponent's observations
for the opponent's own policy. ``O`` is the number of opponent agents (every agent
not in the planning team, teams in order). The latent is how a strategy-conditioned
opponent keeps one strategy for a whole imagined rollout (Exp 6 draws an intent from
the belief per rollout); models without one return an empty array. Models are small
hashable descriptions (static under ``jit``); their numbers travel in ``params``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
from flax import struct

from mopa.envs.base import TeamArrays
from mopa.errors import InvalidParameterError
from mopa.opponent.online import (
    OnlineResidualConfig,
    OnlineResidualState,
    free_log_probs,
    free_weight,
    residual_log_probs,
    residual_weight,
)
from mopa.opponent.population import (
    PopulationConfig,
    PopulationLatent,
    member_logits,
    sample_population_latent,
)
from mopa.policy import PolicySpec, agent_inputs, apply_by_rows, greedy_action

NO_LATENT_SHAPE = (0,)


def _no_latent() -> jax.Array:
    return jnp.zeros(NO_LATENT_SHAPE, jnp.float32)


class OpponentModel(Protocol):
    """What a planner needs of an opponent model; see the module docstring."""

    @property
    def num_opponents(self) -> int:
        """Rows of :meth:`logits` (``O``, every agent outside the planning team)."""
        ...

    @property
    def num_actions(self) -> int:
        """Columns of :meth:`logits`."""
        ...

    def sample_latent(self, params: Any, key: jax.Array) -> Any:
        """A latent (any pytree of arrays) drawn once per rollout."""
        ...

    def logits(self, params: Any, latent: Any, obs: TeamArrays) -> jax.Array:
        """``[O, num_actions]`` unnormalised log-probabilities of each opponent's
        next action given every team's observations ``obs``."""
        ...


def greedy_logits(values: jax.Array) -> jax.Array:
    """Logits of the one-hot distribution on ``argmax(values)`` (ties to the lowest
    index): 0 there and ``-inf`` elsewhere. ``values [..., n] -> [..., n]``."""
    best = jax.nn.one_hot(greedy_action(values), values.shape[-1], dtype=bool)
    return jnp.where(best, 0.0, -jnp.inf)


@dataclasses.dataclass(frozen=True)
class OpponentHeadModel:
    """The opponent-action head of an OA-IQL Q-network (Exp 3) as an opponent model.

    The head sits on the *planning team's* network: each planning agent predicts
    every opponent's next action from its own observation (as OA-IQL trains it, on
    the same agent inputs as the Q-values). The team's prediction is the mixture of
    its agents' predictions, ``log(mean_i softmax(head_i))``, or one agent's alone
    when ``agent`` is given. ``params`` are that network's weights (the planning
    team's own weights). No latent.

    A planner whose own network is this head's network (same spec and team) and
    whose ``opponent_params`` are ``()`` reads the head from its own weights, in the
    same forward pass as its Q-values (one trunk evaluation per imagined step
    instead of two).
    """

    spec: PolicySpec
    """The planning team's Q-network spec (``kind="q"``, ``num_opponents > 0``)."""
    team: int
    """Index of the planning team (whose observations the head reads)."""
    agent: int | None = None
    """Use this agent's prediction alone; ``None`` averages the team's."""

    def __post_init__(self):
        if self.spec.kind != "q":
            raise InvalidParameterError(
                f"spec: the opponent head model needs a feed-forward Q-network "
                f"(kind 'q'), got kind {self.spec.kind!r}"
            )
        if self.spec.num_opponents < 1 or self.spec.opponent_actions < 1:
            raise InvalidParameterError(
                "spec: the policy has no opponent head (num_opponents and "
                "opponent_actions must be >= 1; train with oa_iql)"
            )
        if self.agent is not None and not 0 <= self.agent < self.spec.num_agents:
            raise InvalidParameterError(
                f"agent must be in [0, {self.spec.num_agents}), got {self.agent}"
            )

    @property
    def num_opponents(self) -> int:
        return self.spec.num_opponents

    @property
    def num_actions(self) -> int:
        return self.spec.opponent_actions

    def sample_latent(self, params: Any, key: jax.Array) -> jax.Array:
        del params, key
        return _no_latent()

    def logits(self, params: Any, latent: Any, obs: TeamArrays) -> jax.Array:
        del latent
        x = agent_inputs(self.spec, obs[self.team])  # [A, I]
        _, head = apply_by_rows(self.spec.module(), params, x)  # [A, O, n]
        return self.head_logits(head)

    def head_logits(self, head: jax.Array) -> jax.Array:
        """``[O, n]`` team prediction from the head's per-agent output
        ``[A, O, n]`` (what :meth:`logits` returns for that output)."""
        log_probs = jax.nn.log_softmax(head, -1)
        if self.agent is not None:
            return log_probs[self.agent]
        # log of the mean probability over the team's agents (a mixture).
        return jax.nn.logsumexp(log_probs, 0) - jnp.log(log_probs.shape[0])


@dataclasses.dataclass(frozen=True)
class PolicyOpponentModel:
    """The opponent team's own policy, on its own observations.

    An actor gives its logits (divided by ``temperature``); a Q-network gives the
    Boltzmann distribution ``softmax(Q / temperature)``. With ``greedy`` both give
    the one-hot distribution on their argmax. ``params`` are the opponent policy's
    weights. No latent. Recurrent policies are refused: a planner does not know the
    opponent's hidden state.
    """

    spec: PolicySpec
    """The opponent team's policy spec (``q``, ``actor`` or ``random``)."""
    team: int
    """Index of the opponent team in the game."""
    temperature: float = 1.0
    """Divides the logits or Q-values (lower is greedier)."""
    greedy: bool = False
    """Put all probability on the policy's argmax action."""

    def __post_init__(self):
        if self.spec.kind == "rnn_q":
            raise InvalidParameterError(
                "spec: recurrent opponent policies (kind 'rnn_q') are not supported "
                "as opponent models; the planner cannot know the opponent's carry"
            )
        if not self.temperature > 0:
            raise InvalidParameterError(
                f"temperature must be > 0, got {self.temperature}"
            )

    @property
    def num_opponents(self) -> int:
        return self.spec.num_agents

    @property
    def num_actions(self) -> int:
        return self.spec.num_actions

    def sample_latent(self, params: Any, key: jax.Array) -> jax.Array:
        del params, key
        return _no_latent()

    def logits(self, params: Any, latent: Any, obs: TeamArrays) -> jax.Array:
        del latent
        own = obs[self.team]  # [O, D]
        if self.spec.kind == "random":
            return jnp.zeros((*own.shape[:-1], self.spec.num_actions))
        x = agent_inputs(self.spec, own)
        values = apply_by_rows(self.spec.module(), params, x)
        if self.spec.kind == "q":
            values = values[0]
        if self.greedy:
            return greedy_logits(values)
        return values / self.temperature

    def predictive_logits(self, params: Any, obs: TeamArrays) -> jax.Array:
        """``[O, num_actions]``: :meth:`logits` (no latent to average over)."""
        return self.logits(params, _no_latent(), obs)


@struct.dataclass
class IntentModelParams:
    """Numbers of an :class:`IntentConditionedModel`."""

    policy_params: Any
    """The opponent policy's weights."""
    belief: jax.Array
    """``[K]`` probabilities of each intent (may change every step)."""


@dataclasses.dataclass(frozen=True)
class IntentConditionedModel:
    """A strategy-conditioned opponent policy under an intent drawn from a belief
    (Exp 6, the ``tag_intent`` game).

    Once per rollout an intent ``k ~ Categorical(belief)`` is drawn; at every step
    the last ``num_intents`` entries of the opponent's observation (its intent
    one-hot) are replaced by ``onehot(k)`` before ``policy`` reads them, so the true
    intent in the game state never reaches the imagined opponent. ``params`` is an
    :class:`IntentModelParams`.
    """

    policy: PolicyOpponentModel
    """The opponent's policy, trained with its intent in its observation."""
    num_intents: int
    """``K``: length of the intent one-hot at the end of the observation."""

    def __post_init__(self):
        if not 1 <= self.num_intents <= self.policy.spec.obs_size:
            raise InvalidParameterError(
                f"num_intents must be in [1, {self.policy.spec.obs_size}], got "
                f"{self.num_intents}"
            )

    @property
    def num_opponents(self) -> int:
        return self.policy.num_opponents

    @property
    def num_actions(self) -> int:
        return self.policy.num_actions

    def sample_latent(self, params: IntentModelParams, key: jax.Array) -> jax.Array:
        """``[]`` int32 intent drawn from ``params.belief``."""
        return jax.random.categorical(key, jnp.log(params.belief)).astype(jnp.int32)

    def logits(
        self, params: IntentModelParams, latent: jax.Array, obs: TeamArrays
    ) -> jax.Array:
        own = obs[self.policy.team]  # [O, D]
        intent = jnp.broadcast_to(
            jax.nn.one_hot(latent, self.num_intents, dtype=own.dtype),
            (*own.shape[:-1], self.num_intents),
        )
        conditioned = jnp.concatenate([own[..., : -self.num_intents], intent], -1)
        obs = tuple(
            conditioned if u == self.policy.team else o for u, o in enumerate(obs)
        )
        return self.policy.logits(params.policy_params, (), obs)

    def predictive_logits(
        self, params: IntentModelParams, obs: TeamArrays
    ) -> jax.Array:
        """``[O, num_actions]`` log-probabilities of the opponent's next action with
        its intent averaged out under ``params.belief``: ``log sum_k belief_k
        softmax(logits(k))``."""
        per_intent = jax.vmap(lambda k: self.logits(params, k, obs))(
            jnp.arange(self.num_intents)
        )  # [K, O, n]
        log_belief = jnp.log(params.belief)[:, None, None]
        return jax.nn.logsumexp(log_belief + jax.nn.log_softmax(per_intent, -1), 0)


@struct.dataclass
class PopulationModelParams:
    """Numbers of a :class:`PopulationOpponentModel`."""

    clone_params: Any
    """The clone library's weights, leaves ``[M, ...]``
    (:func:`mopa.opponent.population.fit_population`)."""
    belief: jax.Array
    """``[K, M]`` probabilities of each (intent, member), e.g.
    :func:`mopa.opponent.population.joint_belief` (may change every step); with a
    ``fallback`` model, the posterior given the family
    (:func:`mopa.opponent.population.planner_belief`)."""
    none_fits: Any = ()
    """``[]`` probability that the opponent is outside the family, with a
    ``fallback`` model (``()`` without one)."""
    fallback_params: Any = ()
    """The ``fallback`` model's params (``()`` without one)."""


class FallbackLatent(NamedTuple):
    """An imagined opponent of a :class:`PopulationOpponentModel` with a
    ``fallback``: a member of the family, or (``outside``) the fallback model."""

    family: PopulationLatent  # the (intent, member) drawn from the belief
    outside: jax.Array  # [] bool: the opponent plays the fallback model
    fallback: Any  # the fallback model's latent


@dataclasses.dataclass(frozen=True)
class PopulationOpponentModel:
    """A population of opponents (:mod:`mopa.opponent.population`) under the joint
    belief over (intent, member).

    Once per rollout an imagined opponent ``(g, m) ~ belief`` is drawn
    (:class:`~mopa.opponent.population.PopulationLatent`); at every step each agent
    of team ``team`` moves as member ``m``'s clone under intent ``g`` reads its
    observation (without the ``drop_obs_tail`` entries, so the true intent in the
    game never reaches the imagined opponent). With the belief of
    :func:`~mopa.opponent.population.joint_belief`, an opponent no member fits is
    imagined as drawn from the whole population. ``params`` is a
    :class:`PopulationModelParams`.

    With a ``fallback`` model, "none fits" gets a model of its own (the GSCU-style
    conservative fallback): each rollout imagines the fallback's opponent with
    probability ``params.none_fits`` and otherwise a member ``(g, m) ~ belief``
    (then the posterior given the family, :func:`~mopa.opponent.population.
    planner_belief`). Where ``none_fits`` is 0 the members drawn are the ones
    drawn without a fallback from the same belief and key.
    """

    config: PopulationConfig
    """The clone library (network, intents, dropped observation entries)."""
    team: int
    """Index of the opponent team in the game."""
    num_opponents: int = 1
    """``O``: agents of that team (every agent outside the planning team)."""
    fallback: OpponentModel | None = None
    """The model of an opponent outside the family (its params are
    ``params.fallback_params``); ``None``: such an opponent is imagined as drawn
    from the belief (:func:`~mopa.opponent.population.joint_belief`)."""
    greedy: bool = False
    """An imagined member plays its clone's argmax action (for opponents known to
    play their policy's mode); the fallback keeps its own setting."""

    def __post_init__(self):
        if not isinstance(self.config, PopulationConfig):
            raise InvalidParameterError(
                f"config must be a PopulationConfig, got {type(self.config).__name__}"
            )
        if self.team < 0:
            raise InvalidParameterError(f"team must be >= 0, got {self.team}")
        if self.num_opponents < 1:
            raise InvalidParameterError(
                f"num_opponents must be >= 1, got {self.num_opponents}"
            )
        if self.fallback is not None and (
            self.fallback.num_actions != self.config.num_actions
            or self.fallback.num_opponents != self.num_opponents
        ):
            raise InvalidParameterError(
                f"fallback: its logits must be [{self.num_opponents}, "
                f"{self.config.num_actions}] as the population's, got "
                f"[{self.fallback.num_opponents}, {self.fallback.num_actions}]"
            )

    @property
    def num_actions(self) -> int:
        return self.config.num_actions

    def sample_latent(
        self, params: PopulationModelParams, key: jax.Array
    ) -> PopulationLatent | FallbackLatent:
        """``(intent [], member [])`` int32 drawn from ``params.belief``; with a
        ``fallback``, a :class:`FallbackLatent`: the member and the fallback's
        latent each drawn with ``key`` itself (only one of them plays), the
        outside draw with a key folded from it. So a rollout that imagines the
        fallback imagines what the fallback model alone would with the same key,
        and one that imagines a member, what the model without a fallback would:
        common random numbers, which make a comparison with either planner a
        difference of their models, not of their draws."""
        family = sample_population_latent(key, params.belief)
        if self.fallback is None:
            return family
        return FallbackLatent(
            family=family,
            outside=jax.random.bernoulli(jax.random.fold_in(key, 1), params.none_fits),
            fallback=self.fallback.sample_latent(params.fallback_params, key),
        )

    def logits(
        self,
        params: PopulationModelParams,
        latent: PopulationLatent | FallbackLatent,
        obs: TeamArrays,
    ) -> jax.Array:
        own = obs[self.team]  # [O, D]
        member = latent if self.fallback is None else latent.family
        family = member_logits(
            self.config, params.clone_params, member.member, member.intent, own
        )
        if self.greedy:
            family = greedy_logits(family)
        if self.fallback is None:
            return family
        outside = self.fallback.logits(params.fallback_params, latent.fallback, obs)
        return jnp.where(latent.outside, outside, family)


@dataclasses.dataclass(frozen=True)
class FunctionOpponentModel:
    """Any function as an opponent model: ``logits_fn(params, latent, obs) ->
    [num_opponents, num_actions]``, with an optional ``latent_fn(params, key)``
    (default: no latent). A scripted opponent, or a mixture of hand-built policies.
    """

    logits_fn: Callable[[Any, Any, TeamArrays], jax.Array]
    """``(params, latent, obs) -> [O, num_actions]`` logits."""
    num_opponents: int
    """``O``: rows of the logits."""
    num_actions: int
    """Columns of the logits."""
    latent_fn: Callable[[Any, jax.Array], Any] | None = None
    """``(params, key) -> latent``, drawn once per rollout; ``None``: no latent."""

    def __post_init__(self):
        for name in ("num_opponents", "num_actions"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )

    def sample_latent(self, params: Any, key: jax.Array) -> Any:
        if self.latent_fn is None:
            return _no_latent()
        return self.latent_fn(params, key)

    def logits(self, params: Any, latent: Any, obs: TeamArrays) -> jax.Array:
        return self.logits_fn(params, latent, obs)


def predictive_logits(model: OpponentModel, params: Any, obs: TeamArrays) -> jax.Array:
    """``[O, num_actions]``: ``model``'s prediction of the opponents' next actions
    with its latent averaged out (what an observer scores a real move against).

    Raises:
        InvalidParameterError: the model does not say how to average its latent
            out (it has no ``predictive_logits``).
    """
    predictive = getattr(model, "predictive_logits", None)
    if predictive is None:
        raise InvalidParameterError(
            f"{type(model).__name__} has no predictive_logits: its latent cannot be "
            "averaged out (use a PolicyOpponentModel or an IntentConditionedModel)"
        )
    return predictive(params, obs)


@struct.dataclass
class OnlineResidualParams:
    """Numbers of an :class:`OnlineResidualModel`."""

    base_params: Any
    """The base model's params."""
    weights: jax.Array
    """``[F, A]`` the correction (:class:`~mopa.opponent.online.
    OnlineResidualState`'s ``weights``; zeros before any move)."""
    residual_weight: jax.Array
    """``[]`` probability that a rollout imagines the corrected model
    (:func:`~mopa.opponent.online.residual_weight`), given that it does not
    imagine the free fit."""
    free_weights: jax.Array | None = None
    """``[F, A]`` the free fit (the state's ``free_weights``); ``None`` without
    ``free_fit``."""
    free_weight: jax.Array | None = None
    """``[]`` probability that a rollout imagines the free fit
    (:func:`~mopa.opponent.online.free_weight`); ``None`` without ``free_fit``."""


def residual_params(
    base_params: Any, state: OnlineResidualState
) -> OnlineResidualParams:
    """An :class:`OnlineResidualModel`'s params from the watching player's
    :class:`~mopa.opponent.online.OnlineResidualState` (leaves of any batch
    shape): the correction's and the free fit's weights and evidence."""
    return OnlineResidualParams(
        base_params=base_params,
        weights=state.weights,
        residual_weight=residual_weight(state),
        free_weights=state.free_weights,
        free_weight=free_weight(state),
    )


class ResidualLatent(NamedTuple):
    """An imagined opponent of an :class:`OnlineResidualModel`."""

    base: Any  # the base model's latent
    corrected: jax.Array  # [] bool: the rollout imagines the corrected model
    free: jax.Array  # [] bool: ... the free fit (before ``corrected``)


@dataclasses.dataclass(frozen=True)
class OnlineResidualModel:
    """A base opponent model and its online correction
    (:mod:`mopa.opponent.online`): a rollout imagines the corrected model,
    ``softmax(floored base logits + phi(o) W)``, with probability
    ``params.residual_weight`` and the base itself otherwise; with the config's
    ``free_fit``, the free fit ``softmax(phi(o) V)`` first, with probability
    ``params.free_weight``. The base's latent is
    drawn with the rollout's key itself, so a rollout that imagines the base
    imagines exactly what the base alone would with the same key. ``params`` is
    an :class:`OnlineResidualParams`; the player that watches the opponent keeps
    its :class:`~mopa.opponent.online.OnlineResidualState` and hands the planner
    its weights and evidence every decision."""

    base: OpponentModel
    """The model the correction starts from (e.g. a policy of the family under a
    flat intent)."""
    config: OnlineResidualConfig
    """The correction's features, prior and fit."""
    team: int
    """Index of the opponent team in the game (whose observations are read)."""

    def __post_init__(self):
        if not isinstance(self.config, OnlineResidualConfig):
            raise InvalidParameterError(
                "config must be an OnlineResidualConfig, got "
                f"{type(self.config).__name__}"
            )
        if self.base.num_actions != self.config.num_actions:
            raise InvalidParameterError(
                f"config: num_actions is {self.config.num_actions}, the base model "
                f"has {self.base.num_actions}"
            )
        if self.team < 0:
            raise InvalidParameterError(f"team must be >= 0, got {self.team}")

    @property
    def num_opponents(self) -> int:
        return self.base.num_opponents

    @property
    def num_actions(self) -> int:
        return self.base.num_actions

    def sample_latent(self, params: OnlineResidualParams, key: jax.Array):
        self._check_free(params)
        return ResidualLatent(
            base=self.base.sample_latent(params.base_params, key),
            corrected=jax.random.bernoulli(
                jax.random.fold_in(key, 2), params.residual_weight
            ),
            free=(
                jax.random.bernoulli(jax.random.fold_in(key, 3), params.free_weight)
                if self.config.free_fit
                else jnp.zeros((), bool)
            ),
        )

    def logits(
        self, params: OnlineResidualParams, latent: ResidualLatent, obs: TeamArrays
    ) -> jax.Array:
        base = self.base.logits(params.base_params, latent.base, obs)
        corrected = residual_log_probs(
            self.config, params.weights, base, obs[self.team]
        )
        logits = jnp.where(latent.corrected, corrected, base)
        if not self.config.free_fit:
            return logits
        self._check_free(params)
        free = free_log_probs(self.config, params.free_weights, base, obs[self.team])
        return jnp.where(latent.free, free, logits)

    def _check_free(self, params: OnlineResidualParams) -> None:
        """A config with ``free_fit`` needs the free fit's params."""
        if self.config.free_fit and (
            params.free_weights is None or params.free_weight is None
        ):
            raise InvalidParameterError(
                "params: the config has free_fit, so OnlineResidualParams needs "
                "free_weights and free_weight (the state's free_weights and "
                "opponent.free_weight(state))"
            )
