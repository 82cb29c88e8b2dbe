"""The predator players of the hidden-intent experiment (Exp 6): one player that
keeps an online belief over the prey's corner inside its carry, updates it every
step from what it sees of the prey, and hands an intent input to a predator policy
or to the belief planner.

:class:`IntentPredator` is a :class:`~mopa.players.Player` for the predator team of
``tag_intent`` built with ``predator_intent_obs`` (so the game's predator
observation ends with a ``K``-entry intent input). Each step it:

1. appends the prey's position to the carried prefix and, for the Bayes source,
   recovers the prey's previous action from the last transition (the action whose
   simulated step from the previous state gives the prey its velocity now) and
   applies one Bayes update with the opponent model's ``p(a | s, k)``;
2. computes every belief source it was built with (static ``sources``) and picks
   one with ``params.source`` (an array, so players that differ only in their
   source share one compiled program in a tournament);
3. feeds the predators an intent input picked by ``params.feed``: the true corner
   (the oracle), a random corner drawn at the episode's start, the belief, or the
   one-hot of the belief's argmax committed at ``commit_step`` steps;
4. acts with its policy on the observation carrying that input, or (with a
   ``planner``) runs the Monte-Carlo lookahead with the belief placed in the
   planner's opponent model (intents drawn from it per rollout) and in the game
   state the imagined predators observe.

The carry is the flattened :class:`BeliefCarry` (the same row for every agent).
Belief sources: ``classifier`` (supervised prefix classifier on the occupancy of
the prefix and the latest positions, temperature-scaled), ``jepa`` (the JEPA's
predicted arrival read out against the four corners, temperature-scaled),
``flat`` (uniform) and ``bayes``
(exact Bayes from an intent-conditioned prey model: a behaviour clone
``pi(a | s, z)`` or the prey's own policy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from jax.flatten_util import ravel_pytree

from mopa.envs.pursuit import INTENT_CORNERS, NUM_ACTIONS, PursuitEnv
from mopa.errors import InvalidParameterError
from mopa.eval.tournament import broadcast_seeds
from mopa.opponent.beliefs import (
    BayesBeliefState,
    PrefixBeliefState,
    init_bayes_belief,
    init_prefix_belief,
    readout_logits_fn,
    update_bayes_belief,
    update_prefix_belief,
)
from mopa.opponent.encoders import ClassifierConfig, JEPAConfig, predict_arrival
from mopa.opponent.representations import occupancy, recent_positions
from mopa.planning import (
    IntentModelParams,
    LookaheadParams,
    LookaheadPlayer,
    MCTSPlayer,
)
from mopa.planning.opponents import greedy_logits
from mopa.players import plays_games_in_turn
from mopa.policy import PolicySpec, agent_inputs, make_act_fn

FEEDS = ("none", "true", "random", "belief", "commit")
"""Intent inputs: ``none`` (the unaware policy: the input is cut off), ``true``
(oracle), ``random`` (a corner drawn per episode), ``belief`` and ``commit``."""

SOURCES = ("classifier", "jepa", "flat", "bayes")
"""Belief sources a player can compute."""


@struct.dataclass
class IntentPredatorParams:
    """Every number an :class:`IntentPredator` uses (leaves get a seed axis in a
    tournament)."""

    env_params: Any
    """The game's parameters (the Bayes source simulates the last transition)."""
    policy_params: Any
    """The predator policy's weights (the planner's own policy when planning)."""
    classifier_params: Any
    """The prefix classifier's weights."""
    classifier_temperature: jax.Array
    """``[]`` softmax temperature of the classifier belief."""
    jepa_params: Any
    """The JEPA's weights (online encoder and readout)."""
    jepa_temperature: jax.Array
    """``[]`` temperature of the JEPA readout belief."""
    bayes_params: Any
    """The Bayes source's prey model weights (behaviour clone or prey policy)."""
    planner_params: Any
    """The planner's :class:`~mopa.planning.LookaheadParams`, or ``()``."""
    source: jax.Array
    """``[]`` int32 index into the player's ``sources``."""
    feed: jax.Array
    """``[]`` int32 index into :data:`FEEDS`."""


def intent_predator_params(
    env_params: Any,
    num_seeds: int,
    policy_params: Any,
    *,
    source: int,
    feed: str,
    bayes_params: Any = (),
    planner_opponent: Any = None,
    classifier: tuple[Any, float] = ((), 1.0),
    jepa: tuple[Any, float] = ((), 1.0),
) -> IntentPredatorParams:
    """The params of an :class:`IntentPredator` in a tournament of ``num_seeds``
    seeds.

    Args:
        env_params: the game's parameters (broadcast to every seed).
        num_seeds: ``S``.
        policy_params: the predator policy's ``[S]``-stacked weights.
        source: index of the belief source in the player's ``sources``.
        feed: one of :data:`FEEDS`.
        bayes_params: the Bayes source's prey model, ``[S]``-stacked (``()``
            without one).
        planner_opponent: the planner's rollout prey, ``[S]``-stacked, when the
            player plans (its belief starts uniform; the player sets it each
            step); ``None`` otherwise.
        classifier: ``(weights, temperature)`` of the prefix classifier, one set
            given to every seed (``()`` without one).
        jepa: ``(weights, temperature)`` of the JEPA and its readout, likewise.
    """
    if feed not in FEEDS:
        raise InvalidParameterError(f"feed must be one of {FEEDS}, got {feed!r}")
    K = len(INTENT_CORNERS)
    shared = broadcast_seeds(
        dict(
            env_params=env_params,
            classifier_params=classifier[0],
            classifier_temperature=jnp.float32(classifier[1]),
            jepa_params=jepa[0],
            jepa_temperature=jnp.float32(jepa[1]),
            source=jnp.int32(source),
            feed=jnp.int32(FEEDS.index(feed)),
        ),
        num_seeds,
    )
    planner_params: Any = ()
    if planner_opponent is not None:
        planner_params = LookaheadParams(
            env_params=shared["env_params"],
            own_params=policy_params,
            opponent_params=IntentModelParams(
                policy_params=planner_opponent,
                belief=broadcast_seeds(jnp.full((K,), 1.0 / K), num_seeds),
            ),
        )
    return IntentPredatorParams(
        policy_params=policy_params,
        planner_params=planner_params,
        bayes_params=bayes_params,
        **shared,
    )


class BeliefCarry(NamedTuple):
    """What an :class:`IntentPredator` carries from step to step."""

    prefix: PrefixBeliefState  # the prey's positions so far and the prefix belief
    bayes: BayesBeliefState  # the Bayes belief
    prev_pos: jax.Array  # [N, 2] positions of the previous state
    prev_vel: jax.Array  # [N, 2] velocities of the previous state
    prev_actions: jax.Array  # [A] int32 the predators' previous actions
    random_intent: jax.Array  # [] int32 the corner drawn at the episode's start
    committed: jax.Array  # [] int32 the argmax committed to at commit_step
    belief: jax.Array  # [K] the belief of this step (after the update)


@dataclasses.dataclass(frozen=True)
class PreyModel:
    """An intent-conditioned prey model ``obs [D] -> log p(a | obs, k) [K, A]``.

    The spec is either a behaviour clone (an actor on ``[obs without the intent,
    onehot(k)]``, no agent one-hot) or the prey's own policy (its observation's
    trailing intent one-hot replaced by ``onehot(k)``): the same computation, the
    last ``K`` inputs set to each intent in turn.
    """

    spec: PolicySpec
    """The network's spec (an actor whose observation ends with the intent)."""
    greedy: bool = False
    """Model a prey that takes its actor's mode: ``log p(a | obs, k)`` is 0 on the
    argmax action and ``-inf`` elsewhere (combine with ``epsilon > 0`` in the Bayes
    update). Otherwise the actor's softmax."""

    def log_probs(self, params: Any, obs: jax.Array, num_intents: int) -> jax.Array:
        K = num_intents
        x = jnp.concatenate(
            [jnp.broadcast_to(obs[:-K], (K, obs.shape[0] - K)), jnp.eye(K)], -1
        )  # [K, D]
        if self.spec.agent_id:
            x = agent_inputs(self.spec, x[:, None, :])[:, 0]
        logits = self.spec.module().apply(params, x)
        if self.greedy:
            return greedy_logits(logits)
        return jax.nn.log_softmax(logits, -1)


@dataclasses.dataclass(frozen=True)
class IntentPredator:
    """The Exp 6 predator team; see the module docstring.

    ``params`` is an :class:`IntentPredatorParams`.
    """

    env: PursuitEnv
    """``tag_intent`` with ``predator_intent_obs`` (rollouts and observations)."""
    spec: PolicySpec
    """The predator policy: the unaware one (observation without the intent
    input) when ``feed_none``, else the intent-conditioned one."""
    sources: tuple[str, ...] = ()
    """Belief sources computed each step (``params.source`` indexes them)."""
    feed_none: bool = False
    """Cut the intent input off the observation (the unaware predators)."""
    planner: LookaheadPlayer | MCTSPlayer | None = None
    """Plan with this lookahead (or tree search) instead of acting with the
    policy."""
    classifier: ClassifierConfig | None = None
    """Config of the prefix classifier (for the ``classifier`` source)."""
    jepa: JEPAConfig | None = None
    """Config of the JEPA (for the ``jepa`` source)."""
    prey_model: PreyModel | None = None
    """The prey model of the ``bayes`` source."""
    grid_size: int = 8
    """Occupancy cells per axis read by the classifier and the JEPA."""
    recent: int = 0
    """Latest prey positions read by the classifier and the JEPA beside the
    occupancy (:func:`prefix_features`)."""
    min_steps: int = 1
    """The prefix beliefs stay uniform until this many positions are seen."""
    commit_step: int = 8
    """``commit`` feed: positions seen when the argmax is committed to."""
    bayes_epsilon: float = 0.05
    """Uniform mixing of the Bayes likelihood (the prey acts greedily)."""

    def __post_init__(self):
        if not self.env.predator_intent_obs:
            raise InvalidParameterError(
                "env: the intent predator needs tag_intent with predator_intent_obs"
            )
        for source in self.sources:
            if source not in SOURCES:
                raise InvalidParameterError(
                    f"sources: unknown source {source!r}; choose from {SOURCES}"
                )
        needs = {"classifier": self.classifier, "jepa": self.jepa}
        needs["bayes"] = self.prey_model
        for source, part in needs.items():
            if source in self.sources and part is None:
                raise InvalidParameterError(
                    f"sources: {source!r} needs its model ({source} config)"
                )
        if self.feed_none and (self.sources or self.planner is not None):
            raise InvalidParameterError(
                "feed_none: the unaware predator uses no belief and no planner"
            )

    # -- Player ------------------------------------------------------------------
    @property
    def num_agents(self) -> int:
        return self.env.num_predators

    @property
    def games_in_turn(self) -> bool:
        """The planner's (:func:`~mopa.players.plays_games_in_turn`)."""
        return plays_games_in_turn(self.planner)

    @property
    def num_intents(self) -> int:
        return self.env.num_intents

    @property
    def carry_size(self) -> int:
        return int(self.pack(self.initial_carry(jax.random.key(0))).size)

    def initial_carry(self, key: jax.Array) -> BeliefCarry:
        """The carry at an episode's first step (a random corner drawn from
        ``key``)."""
        N, A, K = self.env.num_agents, self.num_agents, self.num_intents
        max_steps = int(self.env.base_params.max_steps)
        return BeliefCarry(
            prefix=init_prefix_belief(max_steps, 2, K),
            bayes=init_bayes_belief(K),
            prev_pos=jnp.zeros((N, 2)),
            prev_vel=jnp.zeros((N, 2)),
            prev_actions=jnp.zeros((A,), jnp.int32),
            random_intent=jax.random.randint(key, (), 0, K),
            committed=jnp.zeros((), jnp.int32),
            belief=jnp.full((K,), 1.0 / K),
        )

    def pack(self, carry: BeliefCarry) -> jax.Array:
        """One carry row ``[H]`` float32 holding ``carry``."""
        return ravel_pytree(carry)[0]

    def unpack(self, row: jax.Array) -> BeliefCarry:
        """The :class:`BeliefCarry` of one carry row ``[H]``."""
        template = self.initial_carry(jax.random.key(0))
        return ravel_pytree(template)[1](row)

    def act(self, params, key, state, obs, carry, reset):
        key_init, key_act = jax.random.split(key)
        first = reset[0]
        fresh = self.initial_carry(key_init)
        previous = self.unpack(carry[0])
        previous = jax.tree.map(lambda f, p: jnp.where(first, f, p), fresh, previous)
        belief_carry = self._observe(params, state, previous, first)
        fed, belief_carry = self._feed(params, state, belief_carry)
        actions = self._act(params, key_act, state, obs, belief_carry.belief, fed)
        belief_carry = belief_carry._replace(
            prev_pos=state.pos, prev_vel=state.vel, prev_actions=actions
        )
        row = self.pack(belief_carry)
        return actions, jnp.broadcast_to(row, (self.num_agents, row.size))

    # -- beliefs -----------------------------------------------------------------
    def _observe(self, params, state, carry: BeliefCarry, first) -> BeliefCarry:
        P, K = self.env.num_predators, self.num_intents
        uniform = jnp.full((K,), 1.0 / K)
        prefix = update_prefix_belief(
            carry.prefix,
            lead_position(state, params.env_params, P),
            lambda prefix, length: jnp.zeros((K,)),
        )
        bayes = carry.bayes
        beliefs = []
        for source in self.sources:
            if source in ("classifier", "jepa"):
                if source == "classifier":
                    logits_fn = self._classifier_logits(params)
                    temperature = params.classifier_temperature
                else:
                    logits_fn = self._jepa_logits(params)
                    temperature = params.jepa_temperature
                logits = logits_fn(prefix.prefix, prefix.length)
                belief = jax.nn.softmax(logits / temperature)
                beliefs.append(
                    jnp.where(prefix.length >= self.min_steps, belief, uniform)
                )
            elif source == "flat":
                beliefs.append(uniform)
            else:
                updated = self._bayes_update(params, state, carry)
                bayes = jax.tree.map(
                    lambda old, new: jnp.where(first, old, new), carry.bayes, updated
                )
                beliefs.append(bayes.belief)
        if beliefs:
            index = jnp.clip(params.source, 0, len(beliefs) - 1)
            belief = jnp.stack(beliefs)[index]  # [sources, K] -> [K]
        else:
            belief = uniform
        return carry._replace(prefix=prefix, bayes=bayes, belief=belief)

    def _classifier_logits(self, params):
        return classifier_logits_fn(
            self.classifier, params.classifier_params, self.grid_size, self.recent
        )

    def _jepa_logits(self, params):
        corners = jnp.asarray(INTENT_CORNERS) * params.env_params.intent_corner
        return jepa_logits_fn(
            self.jepa, params.jepa_params, self.grid_size, corners, self.recent
        )

    def _bayes_update(self, params, state, carry: BeliefCarry) -> BayesBeliefState:
        """One Bayes step on the prey's last action, recovered from the
        transition ``previous state -> state``."""
        P = self.env.num_predators
        previous = state.replace(
            pos=carry.prev_pos, vel=carry.prev_vel, step=jnp.maximum(state.step - 1, 0)
        )
        action = infer_prey_action(
            self.env, params.env_params, previous, carry.prev_actions, state.vel[P]
        )
        prey_obs = self.env.observe(previous, params.env_params)[1][0]
        log_probs = self.prey_model.log_probs(
            params.bayes_params, prey_obs, self.num_intents
        )
        return update_bayes_belief(carry.bayes, log_probs, action, self.bayes_epsilon)

    def _feed(self, params, state, carry: BeliefCarry) -> tuple[jax.Array, Any]:
        """``[K]`` the intent input handed to the predators, and the carry with
        the committed corner (fixed once ``commit_step`` positions are seen)."""
        K = self.num_intents
        argmax = jnp.argmax(carry.belief).astype(jnp.int32)
        length = carry.prefix.length
        committed = jnp.where(length <= self.commit_step, argmax, carry.committed)
        options = jnp.stack(
            [
                jnp.full((K,), 1.0 / K),  # none (unused: the input is cut off)
                jax.nn.one_hot(state.intent, K),
                jax.nn.one_hot(carry.random_intent, K),
                carry.belief,
                jax.nn.one_hot(committed, K),
            ]
        )
        fed = options[jnp.clip(params.feed, 0, len(FEEDS) - 1)]
        return fed, carry._replace(committed=committed)

    # -- acting ------------------------------------------------------------------
    def _act(self, params, key, state, obs, belief, fed) -> jax.Array:
        K, A = self.num_intents, self.num_agents
        no_carry = jnp.zeros((A, 0), jnp.float32)
        no_reset = jnp.zeros((A,), bool)
        if self.feed_none:
            actions, _ = make_act_fn(self.spec)(
                params.policy_params, key, obs[:, :-K], no_carry, no_reset, True
            )
            return actions
        obs = jnp.concatenate([obs[:, :-K], jnp.broadcast_to(fed, (A, K))], -1)
        if self.planner is None:
            actions, _ = make_act_fn(self.spec)(
                params.policy_params, key, obs, no_carry, no_reset, True
            )
            return actions
        planner_params = params.planner_params
        planner_params = planner_params.replace(
            opponent_params=planner_params.opponent_params.replace(belief=belief)
        )
        imagined = state.replace(belief=fed)
        actions, _ = self.planner.act(
            planner_params, key, imagined, obs, no_carry, no_reset
        )
        return actions


def lead_position(state: Any, env_params: Any, index: int) -> jax.Array:
    """``[2]`` where agent ``index`` will be at the next step, already fixed by the
    state: MPE's step moves a body with its current velocity (the action changes
    only the new velocity), so a move shows in the velocity a step before it shows
    in the position. The prefix beliefs read these positions, which puts them on
    the same footing as the Bayes belief (it reads the move from the velocity)."""
    return state.pos[index] + env_params.dt * state.vel[index]


def prefix_features(
    prefix: jax.Array, length: jax.Array, grid_size: int, recent: int = 0
) -> jax.Array:
    """What the classifier and the JEPA read of the first ``length`` rows of
    ``prefix`` ``[T, 2]``: their ``[G x G]`` normalised occupancy (row ``length -
    1`` of :func:`~mopa.opponent.representations.prefix_occupancies`), then, if
    ``recent`` > 0, the last ``recent`` positions
    (:func:`~mopa.opponent.representations.recent_positions`): the example
    :func:`~mopa.opponent.encoders.make_prefix_data` builds for that prefix."""
    histogram = occupancy(prefix, grid_size, 0, length).reshape(-1)
    if not recent:
        return histogram
    return jnp.concatenate([histogram, recent_positions(prefix, length, recent)])


def classifier_logits_fn(
    config: ClassifierConfig, params: Any, grid_size: int, recent: int = 0
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The prefix classifier as a :data:`~mopa.opponent.beliefs.LogitsFn`."""
    module = config.module()

    def logits_fn(prefix, length):
        return module.apply(params, prefix_features(prefix, length, grid_size, recent))

    return logits_fn


def jepa_logits_fn(
    config: JEPAConfig,
    params: Any,
    grid_size: int,
    corners: jax.Array,
    recent: int = 0,
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The JEPA's arrival readout as logits ``-|arrival - c_k|^2`` over the corners
    ``[K, 2]`` (:func:`~mopa.opponent.beliefs.readout_logits_fn`)."""

    def readout_fn(prefix, length):
        return predict_arrival(
            config, params, prefix_features(prefix, length, grid_size, recent)
        )

    return readout_logits_fn(readout_fn, corners)


def infer_prey_action(
    env: PursuitEnv,
    env_params: Any,
    previous: Any,
    predator_actions: jax.Array,
    prey_vel: jax.Array,
) -> jax.Array:
    """The prey action ``[]`` that best explains the transition: the one whose
    simulated step from ``previous`` (with the predators' ``[A]`` actions) gives
    the prey the velocity nearest ``prey_vel`` ``[2]``. (MPE's step moves a body
    with its old velocity and applies the action's force to the new one, so the
    action shows in the velocity, not yet in the position.) The step is
    deterministic, so this recovers the action exactly unless two actions give the
    same velocity (only when contact or the speed limit cancels the force)."""
    P = env.num_predators
    key = jax.random.key(0)

    def velocity(action):
        actions = (predator_actions.astype(jnp.int32), action[None])
        _, after, *_ = env.step(key, previous, actions, env_params)
        return after.vel[P]

    candidates = jax.vmap(velocity)(jnp.arange(NUM_ACTIONS, dtype=jnp.int32))
    return jnp.argmin(jnp.sum((candidates - prey_vel) ** 2, -1)).astype(jnp.int32)
