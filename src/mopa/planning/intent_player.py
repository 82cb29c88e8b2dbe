"""A team that keeps a belief over its opponent's hidden strategy and acts on it:
with a belief-conditioned policy, or with a planner that draws the opponent's
strategy from the belief.

:class:`IntentPredator` is a :class:`~mopa.players.Player` for the observing team
of any game that names its opponent's private fields
(:class:`~mopa.envs.base.IntentGame`: the predators of ``tag_intent`` built with
``predator_intent_obs``, Blue of the battalion under
:class:`~mopa.opponent.belief_game.SoftBeliefGame`), whose observation ends with a
``K``-entry belief input. Each step it:

1. appends the opponent's position (:meth:`~mopa.envs.base.IntentGame.
   opponent_position`) to the carried prefix and, for the Bayes source, recovers
   the opponent's previous move from the last transition
   (:meth:`~mopa.envs.base.IntentGame.opponent_move`: in the pursuit game the
   action whose simulated step from the previous state gives the prey its
   velocity now) and applies one Bayes update with the opponent model's
   ``p(a | s, k)``;
2. computes every belief source it was built with (static ``sources``) and picks
   one with ``params.source`` (an array, so players that differ only in their
   source share one compiled program in a tournament);
3. feeds the team an intent input picked by ``params.feed``: the true intent
   (the oracle), a random intent drawn at the episode's start, the belief, or the
   one-hot of the belief's argmax committed at ``commit_step`` steps;
4. acts with its policy on the observation carrying that input, or (with a
   ``planner``) runs the Monte-Carlo lookahead with the belief placed in the
   planner's opponent model (intents drawn from it per rollout) and in the game
   state the imagined team observes.

The carry is the flattened :class:`BeliefCarry` (the same row for every agent).
Belief sources: ``classifier`` (supervised prefix classifier on the occupancy of
the prefix and the latest positions, temperature-scaled), ``jepa`` (the JEPA's
predicted arrival read out against the intents' targets, temperature-scaled),
``flat`` (uniform) and ``bayes`` (exact Bayes from an intent-conditioned opponent
model, :class:`PreyModel`: a behaviour clone ``pi(a | s, z)`` or the opponent's
own policy).

Blue of the battalion, against Red's scripted strategy family, reading a belief
over Red's strategy from Red's path (the classifier and the policy are untrained
here; trained ones plug in the same way)::

    >>> import jax
    >>> from mopa.envs import make
    >>> from mopa.opponent.encoders import ClassifierConfig, init_params
    >>> from mopa.opponent.soft_belief_game import soft_belief_game
    >>> from mopa.planning import IntentPredator, intent_predator_params
    >>> from mopa.players import initial_player_carry
    >>> from mopa.policy import PolicySpec
    >>> from mopa.policy import init_params as init_policy
    >>> env, params = soft_belief_game(
    ...     make("battalion_vs_red", red="mixed", discrete=True)[0]
    ... )
    >>> K = env.num_intents  # Red's six strategies
    >>> spec = PolicySpec(kind="actor", num_agents=1, obs_size=17 + K,
    ...                   num_actions=18, hidden=(16,))
    >>> classifier = ClassifierConfig(input_size=8 * 8, num_classes=K)
    >>> blue = IntentPredator(env, spec, sources=("classifier",),
    ...                       classifier=classifier)
    >>> one_seed = lambda tree: jax.tree.map(lambda x: x[None], tree)
    >>> blue_params = intent_predator_params(
    ...     params, 1, one_seed(init_policy(spec, jax.random.key(1))),
    ...     source=0, feed="belief", num_intents=K,
    ...     classifier=(init_params(classifier, jax.random.key(2)), 1.0),
    ... )  # a tournament's params (a seed axis); one game's below
    >>> first_seed = jax.tree.map(lambda x: x[0], blue_params)
    >>> obs, state = env.reset(jax.random.key(0), params)
    >>> actions, carry = jax.jit(blue.act)(
    ...     first_seed, jax.random.key(3), state, obs[0],
    ...     initial_player_carry(blue), jax.numpy.ones(1, bool),
    ... )
    >>> belief = blue.unpack(carry[0]).belief  # after Red's first position
    >>> belief.shape, round(float(belief.sum()), 5)
    ((6,), 1.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from jax.flatten_util import ravel_pytree

from mopa.envs.base import IntentGame
from mopa.errors import InvalidParameterError
from mopa.eval.tournament import broadcast_seeds
from mopa.opponent.beliefs import (
    BayesBeliefState,
    PrefixBeliefState,
    bayes_beliefs,
    beliefs_acted_on,
    init_bayes_belief,
    init_prefix_belief,
    readout_logits_fn,
    update_bayes_belief,
    update_prefix_belief,
)
from mopa.opponent.encoders import ClassifierConfig, JEPAConfig, predict_arrival
from mopa.opponent.representations import occupancy, recent_positions
from mopa.planning.lookahead import LookaheadParams, LookaheadPlayer
from mopa.planning.mcts import MCTSPlayer
from mopa.planning.opponents import IntentModelParams, greedy_logits
from mopa.players import plays_games_in_turn
from mopa.policy import PolicySpec, agent_inputs, make_act_fn

FEEDS = ("none", "true", "random", "belief", "commit")
"""Intent inputs: ``none`` (the unaware policy: the input is cut off), ``true``
(oracle), ``random`` (an intent drawn per episode), ``belief`` and ``commit``."""

SOURCES = ("classifier", "jepa", "flat", "bayes")
"""Belief sources a player can compute."""

BAYES_MEMBERS = (
    "opponent_team",
    "transition_memory",
    "previous_state",
    "opponent_move",
)
"""What of an :class:`~mopa.envs.base.IntentGame` Bayes from the opponent's moves
reads."""


def require_members(env: Any, members: tuple[str, ...], part: str) -> None:
    """Refuse a game that lacks any of the :class:`~mopa.envs.base.IntentGame`
    ``members`` that ``part`` of a player reads."""
    missing = [m for m in members if not hasattr(env, m)]
    if missing:
        raise InvalidParameterError(
            f"env: {part} reads the game's {', '.join(missing)}, which "
            f"{getattr(env, 'name', type(env).__name__)} does not name"
        )


@struct.dataclass
class IntentPredatorParams:
    """Every number an :class:`IntentPredator` uses (leaves get a seed axis in a
    tournament)."""

    env_params: Any
    """The game's parameters (the Bayes source reads the last transition)."""
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
    num_intents: int,
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
        policy_params: the team policy's ``[S]``-stacked weights.
        source: index of the belief source in the player's ``sources``.
        feed: one of :data:`FEEDS`.
        num_intents: ``K``, the game's (the planner's belief starts uniform over
            them).
        bayes_params: the Bayes source's opponent model, ``[S]``-stacked (``()``
            without one).
        planner_opponent: the planner's rollout opponent, ``[S]``-stacked, when
            the player plans (the player sets its belief each step); ``None``
            otherwise.
        classifier: ``(weights, temperature)`` of the prefix classifier, one set
            given to every seed (``()`` without one).
        jepa: ``(weights, temperature)`` of the JEPA and its readout, likewise.
    """
    if feed not in FEEDS:
        raise InvalidParameterError(f"feed must be one of {FEEDS}, got {feed!r}")
    K = num_intents
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

    prefix: PrefixBeliefState  # the opponent's positions so far, the prefix belief
    bayes: BayesBeliefState  # the Bayes belief
    memory: Any  # the previous state's transition_memory (pursuit: pos, vel [N, 2])
    prev_actions: jax.Array  # [A] int32 the team's previous actions
    random_intent: jax.Array  # [] int32 the intent drawn at the episode's start
    committed: jax.Array  # [] int32 the argmax committed to at commit_step
    belief: jax.Array  # [K] the belief of this step (after the update)


@dataclasses.dataclass(frozen=True)
class PreyModel:
    """An intent-conditioned opponent model ``obs [D] -> log p(a | obs, k) [K, A]``.

    The spec is either a behaviour clone (an actor on ``[obs without the intent,
    onehot(k)]``, no agent one-hot) or the opponent's own policy (its
    observation's trailing intent one-hot replaced by ``onehot(k)``): the same
    computation, the last ``K`` inputs set to each intent in turn.
    """

    spec: PolicySpec
    """The network's spec (an actor whose observation ends with the intent)."""
    greedy: bool = False
    """Model an opponent that takes its actor's mode: ``log p(a | obs, k)`` is 0 on the
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


class ObservingTeam:
    """What a player of the observing team of an
    :class:`~mopa.envs.base.IntentGame` with a ``planner`` field (or ``None``)
    says of itself as a :class:`~mopa.players.Player`."""

    @property
    def num_agents(self) -> int:
        return self.env.team_sizes[self.env.belief_team]

    @property
    def games_in_turn(self) -> bool:
        """The planner's (:func:`~mopa.players.plays_games_in_turn`)."""
        return plays_games_in_turn(self.planner)


@dataclasses.dataclass(frozen=True)
class IntentPredator(ObservingTeam):
    """The observing team of an :class:`~mopa.envs.base.IntentGame` keeping a
    belief over its opponent's intent; see the module docstring.

    ``params`` is an :class:`IntentPredatorParams`.
    """

    env: IntentGame
    """The game (with ``observes_belief``): rollouts and observations."""
    spec: PolicySpec
    """The team's policy: the unaware one (observation without the intent
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
    """The opponent model of the ``bayes`` source."""
    grid_size: int = 8
    """Occupancy cells per axis read by the classifier and the JEPA."""
    recent: int = 0
    """Latest opponent positions read by the classifier and the JEPA beside the
    occupancy (:func:`prefix_features`)."""
    min_steps: int = 1
    """The prefix beliefs stay uniform until this many positions are seen."""
    commit_step: int = 8
    """``commit`` feed: positions seen when the argmax is committed to."""
    bayes_epsilon: float = 0.05
    """Uniform mixing of the Bayes likelihood (a greedy opponent's model)."""

    def __post_init__(self):
        if not getattr(self.env, "observes_belief", False):
            raise InvalidParameterError(
                "env: the intent predator needs a game whose team observes a belief "
                "(an IntentGame with observes_belief, e.g. tag_intent with "
                "predator_intent_obs)"
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
        reads = []  # what of the game each part reads
        if {"classifier", "jepa"} & set(self.sources):
            reads.append(("the path sources", ("opponent_position",)))
        if "jepa" in self.sources:
            reads.append(("the jepa source", ("intent_targets",)))
        if "bayes" in self.sources:
            reads.append(("the bayes source", BAYES_MEMBERS))
        if self.planner is not None:
            reads.append(("a planner", ("with_belief",)))
        for part, members in reads:
            require_members(self.env, members, part)

    # -- Player ------------------------------------------------------------------
    @property
    def num_intents(self) -> int:
        return self.env.num_intents

    @property
    def carry_size(self) -> int:
        return int(self.pack(self.initial_carry(jax.random.key(0))).size)

    def initial_carry(self, key: jax.Array) -> BeliefCarry:
        """The carry at an episode's first step (a random intent drawn from
        ``key``)."""
        A, K = self.num_agents, self.num_intents
        max_steps = int(self.env.base_params.max_steps)
        return BeliefCarry(
            prefix=init_prefix_belief(max_steps, 2, K),
            bayes=init_bayes_belief(K),
            memory=empty_memory(self.env) if "bayes" in self.sources else (),
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
        memory = self.env.transition_memory(state) if "bayes" in self.sources else ()
        belief_carry = belief_carry._replace(memory=memory, prev_actions=actions)
        row = self.pack(belief_carry)
        return actions, jnp.broadcast_to(row, (self.num_agents, row.size))

    # -- beliefs -----------------------------------------------------------------
    def _observe(self, params, state, carry: BeliefCarry, first) -> BeliefCarry:
        K = self.num_intents
        uniform = jnp.full((K,), 1.0 / K)
        if {"classifier", "jepa"} & set(self.sources):
            position = self.env.opponent_position(state, params.env_params)
        else:  # a path is only read by those two sources
            position = jnp.zeros((2,))
        prefix = update_prefix_belief(
            carry.prefix, position, lambda prefix, length: jnp.zeros((K,))
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
        targets = self.env.intent_targets(params.env_params)
        return jepa_logits_fn(
            self.jepa, params.jepa_params, self.grid_size, targets, self.recent
        )

    def _bayes_update(self, params, state, carry: BeliefCarry) -> BayesBeliefState:
        """One Bayes step on the opponent's last move, recovered from the
        transition ``previous state -> state``."""
        env = self.env
        previous = env.previous_state(state, carry.memory)
        action = env.opponent_move(
            params.env_params, previous, carry.prev_actions, state
        )
        opponent_obs = env.observe(previous, params.env_params)[env.opponent_team][0]
        log_probs = self.prey_model.log_probs(
            params.bayes_params, opponent_obs, self.num_intents
        )
        return update_bayes_belief(carry.bayes, log_probs, action, self.bayes_epsilon)

    def _feed(self, params, state, carry: BeliefCarry) -> tuple[jax.Array, Any]:
        """``[K]`` the intent input handed to the team, and the carry with the
        committed intent (fixed once ``commit_step`` positions are seen)."""
        K = self.num_intents
        argmax = jnp.argmax(carry.belief).astype(jnp.int32)
        length = carry.prefix.length
        committed = jnp.where(length <= self.commit_step, argmax, carry.committed)
        options = jnp.stack(
            [
                jnp.full((K,), 1.0 / K),  # none (unused: the input is cut off)
                jax.nn.one_hot(self.env.true_intent(state), K),
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
        imagined = self.env.with_belief(state, fed)
        actions, _ = self.planner.act(
            planner_params, key, imagined, obs, no_carry, no_reset
        )
        return actions


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


def empty_memory(env: IntentGame) -> Any:
    """Zeros shaped as ``env``'s :meth:`~mopa.envs.base.IntentGame.
    transition_memory` (an episode's first step has no previous state)."""
    shapes = jax.eval_shape(
        lambda key: env.transition_memory(env.reset(key, env.default_params)[1]),
        jax.random.key(0),
    )
    return jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), shapes)


def episode_bayes_beliefs(
    model: PreyModel,
    stacked_params: Any,
    obs: jax.Array,
    actions: jax.Array,
    seeds: jax.Array,
    num_intents: int,
    epsilon: float,
) -> jax.Array:
    """``[E, T, K]`` the Bayes belief under ``model`` each step of each recorded
    episode acted on (:func:`~mopa.opponent.beliefs.beliefs_acted_on`: it has
    seen the moves before the step), episode ``e`` under the model's params of
    its seed ``seeds[e]`` (``stacked_params`` leaves ``[S, ...]``).

    Args:
        obs: ``[E, T, D]`` the opponent's observations (its intent one-hot last).
        actions: ``[E, T]`` its moves.
        seeds: ``[E]`` int.
        num_intents: ``K``.
    """
    K = num_intents

    def after(o, a, s):
        p = jax.tree.map(lambda x: x[s], stacked_params)
        fn = lambda ob: model.log_probs(p, ob, K)  # noqa: E731
        return bayes_beliefs(fn, o, a, K, epsilon)

    return beliefs_acted_on(jax.jit(jax.vmap(after))(obs, actions, seeds))
