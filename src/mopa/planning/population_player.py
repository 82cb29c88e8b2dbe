"""A team that plans against a population model of its opponent: the joint belief
over the opponent's (intent, member) updated from its moves, and a fallback for an
opponent no member fits, corrected online to its moves; and two scripted prey of
the pursuit game from outside any trained family.

:class:`PopulationPredator` is a :class:`~mopa.players.Player` for the observing
team of any game that names its opponent's private fields and moves
(:class:`~mopa.envs.base.IntentGame`; e.g. the predators of ``tag_intent`` built
with ``predator_intent_obs``). It carries the joint belief over (intent, member)
of :mod:`mopa.opponent.population` in its carry and, each step:

1. recovers the opponent's previous move from the last transition
   (:meth:`~mopa.envs.base.IntentGame.opponent_move`) and updates the belief with
   the clone library's likelihood of it
   (:func:`~mopa.opponent.population.observe_opponent`); on an episode's first step
   it instead starts the belief: afresh at a match's first episode (an all-zero
   carry), else by :func:`~mopa.opponent.population.reset_intent` (the member
   marginal and the none-fits odds carried, the intent reset to its prior), or
   afresh every episode when ``carry_across_episodes`` is off;
2. hands its planner (a lookahead or a tree search whose opponent model is a
   :class:`~mopa.planning.PopulationOpponentModel`) the joint belief to draw
   imagined opponents from (with the model's ``fallback``: the posterior given the
   family and the none-fits probability, :func:`~mopa.opponent.population.
   planner_belief`), and the belief's intent marginal as the team's intent input
   (in the observation and in the imagined game state);
3. when that fallback is an :class:`~mopa.planning.OnlineResidualModel`, also
   scores the opponent's move against the fallback and its correction and refits
   the correction (:func:`~mopa.opponent.online.observe_residual`, with the base's
   predictive over its intent), carried as the member belief is, and hands the
   planner its weights and evidence.

The carry row is the flattened :class:`PopulationCarry` (the same row for every
agent); :meth:`PopulationPredator.unpack` reads it back. :func:`match_beliefs` and
:func:`match_residuals` recompute from a match's recorded moves the belief and the
correction the player acted on at every step; :func:`match_player` plays such
matches against an opponent and replays both through them.

:class:`EvaderPrey` runs from the nearest predator and ignores its intent, and
:class:`WandererPrey` walks at random: opponents no member of a population of
trained prey describes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from mopa.core.checks import check_fraction, check_probability
from mopa.envs.base import IntentGame
from mopa.envs.pursuit import ACTION_DIRECTIONS, NUM_ACTIONS, PREY, PursuitEnv
from mopa.errors import InvalidParameterError
from mopa.eval.protocol import match_stats
from mopa.eval.tournament import broadcast_seeds
from mopa.opponent.data import generate
from mopa.opponent.online import (
    OnlineResidualState,
    init_online_residual,
    observe_residual,
    residual_weight,
)
from mopa.opponent.population import (
    DEFAULT_EPSILON,
    DEFAULT_FALLBACK_PRIOR,
    PopulationBeliefState,
    PopulationConfig,
    init_population_belief,
    intent_belief,
    joint_belief,
    member_belief,
    none_fits_probability,
    observe_opponent,
    planner_belief,
    reset_intent,
)
from mopa.planning.intent_player import (
    BAYES_MEMBERS,
    ObservingTeam,
    empty_memory,
    require_members,
)
from mopa.planning.lookahead import LookaheadParams, LookaheadPlayer
from mopa.planning.mcts import MCTSPlayer
from mopa.planning.opponents import (
    FunctionOpponentModel,
    OnlineResidualModel,
    PopulationModelParams,
    greedy_logits,
    predictive_logits,
    residual_params,
)


def population_planner_params(
    env_params: Any,
    own_params: Any,
    clones: Any,
    num_intents: int,
    *,
    fallback_params: Any = None,
) -> LookaheadParams:
    """The params ``[S, ...]`` of a planner whose opponent model is a
    :class:`~mopa.planning.PopulationOpponentModel` (a :class:`PopulationPredator`'s,
    or one whose player supplies the belief), for ``S`` seeds of the planning team.

    Args:
        env_params: the game's params the rollouts simulate with (one copy).
        own_params: the team's policy weights, leaves ``[S, ...]``.
        clones: the clone library's weights, leaves ``[M, ...]`` (one copy).
        num_intents: ``K``; the belief starts uniform over the ``K x M``
            (intent, member) pairs (the player replaces it every step).
        fallback_params: with a fallback model, its params ``[S, ...]`` (the
            none-fits probability starts at 0).
    """
    seeds = int(jax.tree.leaves(own_params)[0].shape[0])
    members = int(jax.tree.leaves(clones)[0].shape[0])
    uniform = jnp.full((num_intents, members), 1.0 / (num_intents * members))
    fallback = (
        {}
        if fallback_params is None
        else dict(none_fits=jnp.zeros((seeds,)), fallback_params=fallback_params)
    )
    return LookaheadParams(
        env_params=broadcast_seeds(env_params, seeds),
        own_params=own_params,
        opponent_params=PopulationModelParams(
            clone_params=broadcast_seeds(clones, seeds),
            belief=broadcast_seeds(uniform, seeds),
            **fallback,
        ),
    )


class PopulationCarry(NamedTuple):
    """What a :class:`PopulationPredator` carries from step to step (and, in a
    match, from episode to episode)."""

    belief: PopulationBeliefState  # the joint belief after the latest move seen
    online: OnlineResidualState | jax.Array  # the fallback's correction ([0]: none)
    memory: Any  # the previous state's transition_memory (pursuit: pos, vel [N, 2])
    prev_actions: jax.Array  # [A] int32 the team's previous actions
    started: jax.Array  # [] float32: 1 once the match's first step was played


@dataclasses.dataclass(frozen=True)
class PopulationPredator(ObservingTeam):
    """The observing team planning against the population model; see the module
    docstring. ``params`` is the planner's :class:`~mopa.planning.LookaheadParams`
    whose ``opponent_params`` is a :class:`~mopa.planning.PopulationModelParams`
    (its ``belief`` is replaced every step by the carried one)."""

    env: IntentGame
    """The game (with ``observes_belief``, and the members Bayes reads)."""
    population: PopulationConfig
    """The clone library (the same as the planner's opponent model's)."""
    num_members: int
    """``M``: clones in the library."""
    planner: LookaheadPlayer | MCTSPlayer
    """The lookahead or tree search, its opponent model a population model."""
    epsilon: float = DEFAULT_EPSILON
    """Likelihood floor of the belief update."""
    fallback_prior: float = DEFAULT_FALLBACK_PRIOR
    """Prior probability that the prey is outside the family."""
    planning_prior: float | None = None
    """The prior the planner's none-fits probability starts from, with a
    ``fallback`` model (:func:`~mopa.opponent.population.planner_belief`; e.g.
    :func:`~mopa.opponent.population.recognition_prior`); ``None``: the belief's
    own, ``fallback_prior``."""
    carry_across_episodes: bool = True
    """Keep the member belief from one episode of a match to the next."""

    def __post_init__(self):
        if not getattr(self.env, "observes_belief", False):
            raise InvalidParameterError(
                "env: the population predator needs a game whose team observes a "
                "belief (an IntentGame with observes_belief, e.g. tag_intent with "
                "predator_intent_obs)"
            )
        if self.population.num_intents != self.env.num_intents:
            raise InvalidParameterError(
                f"population: num_intents is {self.population.num_intents}, the "
                f"game has {self.env.num_intents}"
            )
        if self.num_members < 1:
            raise InvalidParameterError(
                f"num_members must be >= 1, got {self.num_members}"
            )
        check_probability("fallback_prior", self.fallback_prior)
        if self.planning_prior is not None:
            check_probability("planning_prior", self.planning_prior)
        require_members(self.env, (*BAYES_MEMBERS, "with_belief"), "the player")

    # -- Player ------------------------------------------------------------------
    @property
    def carry_size(self) -> int:
        return int(self.pack(self._fresh_carry()).size)

    def _fresh_belief(self) -> PopulationBeliefState:
        return init_population_belief(
            self.env.num_intents,
            self.num_members,
            fallback_prior=self.fallback_prior,
        )

    @property
    def online(self) -> OnlineResidualModel | None:
        """The planner's fallback when it is corrected online, else ``None``."""
        fallback = self.planner.opponent_model.fallback
        return fallback if isinstance(fallback, OnlineResidualModel) else None

    def _fresh_online(self) -> OnlineResidualState | jax.Array:
        if self.online is None:
            return jnp.zeros((0,), jnp.float32)
        return init_online_residual(self.online.config)

    def _fresh_carry(self) -> PopulationCarry:
        return PopulationCarry(
            belief=self._fresh_belief(),
            online=self._fresh_online(),
            memory=empty_memory(self.env),
            prev_actions=jnp.zeros((self.num_agents,), jnp.int32),
            started=jnp.zeros((), jnp.float32),
        )

    def pack(self, carry: PopulationCarry) -> jax.Array:
        """One carry row ``[H]`` float32 holding ``carry``."""
        return ravel_pytree(carry)[0].astype(jnp.float32)

    def unpack(self, row: jax.Array) -> PopulationCarry:
        """The :class:`PopulationCarry` of one carry row ``[H]``."""
        return ravel_pytree(self._fresh_carry())[1](row)

    def act(self, params: LookaheadParams, key, state, obs, carry, reset):
        K, A = self.env.num_intents, self.num_agents
        previous = self.unpack(carry[0])
        belief, online = self._belief(params, state, previous, reset[0])
        fed = intent_belief(belief)  # [K]
        if self.planner.opponent_model.fallback is None:
            opponent = params.opponent_params.replace(belief=joint_belief(belief))
        else:
            posterior, outside = planner_belief(belief, self.planning_prior)
            opponent = params.opponent_params.replace(
                belief=posterior, none_fits=outside
            )
        if self.online is not None:
            opponent = opponent.replace(
                fallback_params=residual_params(
                    opponent.fallback_params.base_params, online
                )
            )
        obs = jnp.concatenate([obs[:, :-K], jnp.broadcast_to(fed, (A, K))], -1)
        # The planner's key as IntentPredator's (the first of a split), so that
        # with the same episode key both players' rollouts draw the same numbers.
        _, key_act = jax.random.split(key)
        actions, _ = self.planner.act(
            params.replace(opponent_params=opponent),
            key_act,
            self.env.with_belief(state, fed),
            obs,
            jnp.zeros((A, 0), jnp.float32),
            jnp.zeros((A,), bool),
        )
        row = self.pack(
            PopulationCarry(
                belief=belief,
                online=online,
                memory=self.env.transition_memory(state),
                prev_actions=actions,
                started=jnp.ones((), jnp.float32),
            )
        )
        return actions, jnp.broadcast_to(row, (A, row.size))

    # -- the belief ---------------------------------------------------------------
    def _belief(self, params, state, previous: PopulationCarry, first):
        """The belief and the fallback's correction to act on at this step (see
        the module docstring, step 1)."""
        fresh = (self._fresh_belief(), self._fresh_online())
        if self.carry_across_episodes:
            carried = (reset_intent(previous.belief), previous.online)
            started = previous.started > 0.5
            at_start = jax.tree.map(
                lambda c, f: jnp.where(started, c, f), carried, fresh
            )
        else:
            at_start = fresh
        observed = self._observe(params, state, previous)
        return jax.tree.map(
            lambda s, o: jnp.where(first, s, o).astype(o.dtype), at_start, observed
        )

    def _observe(self, params, state, previous: PopulationCarry):
        """The belief and the correction after the opponent's move of the
        transition ``previous state -> state``."""
        env = self.env
        before = env.previous_state(state, previous.memory)
        action = env.opponent_move(
            params.env_params, before, previous.prev_actions, state
        )
        all_obs = env.observe(before, params.env_params)
        prey_obs = all_obs[env.opponent_team]  # [1, D]
        belief = observe_opponent(
            self.population,
            params.opponent_params.clone_params,
            previous.belief,
            prey_obs,
            action[None],
            self.epsilon,
        )
        if self.online is None:
            return belief, previous.online
        base_params = params.opponent_params.fallback_params.base_params
        online = observe_residual(
            self.online.config,
            previous.online,
            prey_obs,
            action[None],
            predictive_logits(self.online.base, base_params, all_obs),
        )
        return belief, online


# -- the player's belief and correction, replayed from a match's moves ---------
def match_beliefs(
    pop_config: PopulationConfig,
    clones: Any,
    obs: jax.Array,
    actions: jax.Array,
    step: jax.Array,
    horizon: int,
    epsilon: float,
    fallback_prior: float,
) -> PopulationBeliefState:
    """The belief a :class:`PopulationPredator` acts on at every step of one
    match, from the recorded moves: as the player computes it online (a fresh
    belief at the match's start, :func:`~mopa.opponent.population.reset_intent` at
    every later episode's start, an update by every move but each episode's last,
    which the player never sees).

    Args:
        pop_config: the clone library's config.
        clones: its weights, leaves ``[M, ...]``.
        obs: ``[S, 1, D]`` the opponent's observations through the match.
        actions: ``[S, 1]`` its moves.
        step: ``[S]`` int, the step inside the episode.
        horizon: steps per episode.
        epsilon: the likelihood floor (the player's).
        fallback_prior: the prior probability that no member fits (the player's).

    Returns:
        Leaves ``[S, ...]``: the belief before each step's move.
    """
    M = jax.tree.leaves(clones)[0].shape[0]
    start = init_population_belief(
        pop_config.num_intents, M, fallback_prior=fallback_prior
    )

    def body(state, inputs):
        o, a, t = inputs
        state = jax.tree.map(
            lambda r, s: jnp.where((t == 0) & (state.steps > 0), r, s),
            reset_intent(state),
            state,
        )
        after = observe_opponent(
            pop_config, clones, state, o, a, epsilon, valid=t < horizon - 1
        )
        return after, state

    _, states = jax.lax.scan(body, start, (obs, actions, step))
    return states


def match_residuals(
    model: OnlineResidualModel,
    base_params: Any,
    obs: jax.Array,
    actions: jax.Array,
    step: jax.Array,
    horizon: int,
) -> OnlineResidualState:
    """The fallback's online correction a :class:`PopulationPredator` acts on at
    every step of one match (when its fallback is corrected online), from the
    recorded moves: as the player computes it online (fresh at the match's start,
    carried across its episodes, updated by every move but each episode's last).

    Args:
        model: the planner's fallback.
        base_params: its base model's params (one seed's).
        obs: ``[S, 1, D]`` the opponent's observations through the match.
        actions: ``[S, 1]`` its moves.
        step: ``[S]`` int, the step inside the episode.
        horizon: steps per episode.

    Returns:
        Leaves ``[S, ...]``: the correction before each step's move.
    """

    def body(state, inputs):
        o, a, t = inputs
        base = predictive_logits(model.base, base_params, _team_obs_only(o, model.team))
        after = observe_residual(model.config, state, o, a, base)
        kept = jax.tree.map(lambda n, s: jnp.where(t < horizon - 1, n, s), after, state)
        return kept, state

    start = init_online_residual(model.config)
    _, states = jax.lax.scan(body, start, (obs, actions, step))
    return states


class Matches(NamedTuple):
    """Matches of a :class:`PopulationPredator` against one opponent
    (:func:`match_player`): ``C`` matches of ``M`` episodes of ``T`` steps."""

    captures: np.ndarray  # [C, M]
    beliefs: PopulationBeliefState  # leaves [C, M x T, ...] (match_beliefs)
    intents: np.ndarray  # [C, M x T] the opponent's intent at every step
    residuals: OnlineResidualState | None  # leaves [C, M x T, ...]; None: no online


def match_player(
    env: PursuitEnv,
    params: Any,
    player: PopulationPredator,
    player_params: Any,
    *,
    num_matches: int,
    episodes_per_match: int,
) -> Callable[[Any, Any, list], Matches]:
    """``play(opponent, opponent_params, keys)``: ``num_matches`` matches of
    ``episodes_per_match`` episodes per seed of ``player_params`` (leaves
    ``[S, ...]``) against one opponent (a :class:`~mopa.players.Player` and its
    unstacked params), seed ``i``'s matches from ``keys[i]``, as :class:`Matches`:
    the captures of every match and episode, the joint belief before every step's
    move (:func:`match_beliefs`), the opponent's intent at every step and, when
    the player's fallback is corrected online, the correction before every step's
    move (:func:`match_residuals`); ``C`` counts the matches of every seed. The
    replays are compiled once, for every opponent ``play`` is called with.

    This is how the belief sharpens across a match: the member belief and the
    online correction carry from one episode to the next, the intent resets."""
    T = int(params.max_steps)
    opponent_params_of = player_params.opponent_params
    clones = jax.tree.map(lambda x: x[0], opponent_params_of.clone_params)
    beliefs_fn = jax.jit(
        jax.vmap(
            lambda o, a, t: match_beliefs(
                player.population,
                clones,
                o,
                a,
                t,
                T,
                player.epsilon,
                player.fallback_prior,
            )
        )
    )
    online = player.online
    residuals_fn = None
    if online is not None:
        base_params = opponent_params_of.fallback_params.base_params
        residuals_fn = jax.jit(
            jax.vmap(
                lambda b, o, a, t: match_residuals(online, b, o, a, t, T),
                in_axes=(None, 0, 0, 0),
            )
        )

    def play(opponent: Any, opponent_params: Any, keys: list) -> Matches:
        captures, states, intents, residuals = [], [], [], []
        for i, key in enumerate(keys):
            dataset = generate(
                env,
                params,
                (player, opponent),
                (jax.tree.map(lambda x, i=i: x[i], player_params), opponent_params),
                key,
                num_chains=num_matches,
                episodes_per_chain=episodes_per_match,
            )
            C, M = dataset.num_chains, episodes_per_match
            rewards = dataset["rewards.predator"][:, :, 0] / float(
                params.capture_reward
            )
            captures.append(rewards.reshape(C, M, T).sum(-1))  # [C, M]
            moves = tuple(
                jnp.asarray(dataset[name])
                for name in ("obs.prey", "actions.prey", "step")
            )
            states.append(beliefs_fn(*moves))
            intents.append(np.repeat(dataset["intent"], T, axis=1))  # [C, M x T]
            if residuals_fn is not None:
                seed_base = jax.tree.map(lambda x, i=i: x[i], base_params)
                residuals.append(residuals_fn(seed_base, *moves))
        return Matches(
            captures=np.concatenate(captures),
            beliefs=_concatenate(states),
            intents=np.concatenate(intents),
            residuals=_concatenate(residuals) if residuals else None,
        )

    return play


MATCH_TRACES = ("captures", "none_fits", "top_member", "intent_right")
"""The arrays of a :func:`match_summary`'s ``raw``: ``captures [C, M]`` and, per
step ``[C, M, T]``, the none-fits probability, the largest member probability and
whether the intent marginal's argmax was the opponent's intent."""


def match_summary(matches: Matches) -> dict[str, Any]:
    """What a population planner's :class:`Matches` show: the captures'
    :func:`~mopa.eval.protocol.match_stats`, and how the belief moves through a
    match (the none-fits probability and the largest member probability at each
    episode's end and through the first episode, the share of matches ending with
    none fits, the intent's accuracy by step), with the online correction's weight
    at each episode's end when there is one. ``raw`` holds :data:`MATCH_TRACES`
    (pool several opponents' with :func:`pooled_match_summary`)."""
    C, M = matches.captures.shape  # matches, episodes per match

    def per_step(values: Any) -> np.ndarray:
        return np.asarray(values).reshape(C, M, -1)

    states = matches.beliefs
    guess = jnp.argmax(jax.vmap(jax.vmap(intent_belief))(states), -1)
    summary = _match_traces(
        matches.captures,
        per_step(jax.vmap(jax.vmap(none_fits_probability))(states)),
        per_step(jnp.max(jax.vmap(jax.vmap(member_belief))(states), -1)),
        per_step(np.asarray(guess) == matches.intents),
    )
    if matches.residuals is not None:
        weight = per_step(jax.vmap(jax.vmap(residual_weight))(matches.residuals))
        summary["residual_weight_by_episode_end"] = weight[:, :, -1].mean(0).tolist()
    return summary


def pooled_match_summary(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`match_summary` of the matches of several opponents together (their
    ``raw`` arrays concatenated; no correction's weight)."""
    return _match_traces(
        *(np.concatenate([s["raw"][k] for s in summaries]) for k in MATCH_TRACES)
    )


def _match_traces(captures, none_fits, top_member, intent_right) -> dict[str, Any]:
    return {
        **match_stats(captures),
        "none_fits_by_episode_end": none_fits[:, :, -1].mean(0).tolist(),
        "none_fits_by_step_first_episode": none_fits[:, 0].mean(0).tolist(),
        "none_fits_flagged_share": float(np.mean(none_fits[:, :, -1] >= 0.5)),
        "top_member_by_episode_end": top_member[:, :, -1].mean(0).tolist(),
        "top_member_by_step_first_episode": top_member[:, 0].mean(0).tolist(),
        "intent_accuracy_by_step": intent_right.mean((0, 1)).tolist(),
        "raw": dict(
            zip(
                MATCH_TRACES,
                (captures, none_fits, top_member, intent_right),
                strict=True,
            )
        ),
    }


def _concatenate(parts: list) -> Any:
    """Pytrees ``parts`` joined along their leaves' first axis."""
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)


def _team_obs_only(obs: jax.Array, team: int) -> tuple:
    """Every team's observations (of a two-team game) for a model that reads
    ``team``'s alone (the others empty)."""
    empty = jnp.zeros((0, 0), obs.dtype)
    return tuple(obs if t == team else empty for t in range(2))


@dataclasses.dataclass(frozen=True)
class EvaderPrey:
    """A scripted prey outside the trained family: it pushes straight away from the
    nearest predator, and back towards the centre once it is past ``wall`` on an
    axis (the arena's edge is penalised); it never looks at its intent. No params
    (``{}`` in a tournament)."""

    env: PursuitEnv
    """The pursuit game (one prey)."""
    wall: float = 0.7
    """Distance from the centre on an axis past which the prey turns back."""

    def __post_init__(self):
        _check_one_prey(self.env, "evader")

    @property
    def num_agents(self) -> int:
        return 1

    @property
    def carry_size(self) -> int:
        return 0

    def act(self, params, key, state, obs, carry, reset):
        del params, key, obs, reset
        P = self.env.num_predators
        scores = self._scores(state.pos[P], state.pos[P] - state.pos[:P])
        return jnp.argmax(scores)[None].astype(jnp.int32), carry

    def _scores(self, pos: jax.Array, gap: jax.Array) -> jax.Array:
        """``[5]`` each move's score (the move taken is the argmax) for the prey at
        ``pos`` ``[2]``, ``gap`` ``[P, 2]`` from each predator to the prey."""
        distance = jnp.sqrt(jnp.sum(gap * gap, -1) + 1e-12)
        nearest = jnp.argmin(distance)
        away = gap[nearest] / distance[nearest]
        inward = -jnp.sign(pos) * (jnp.abs(pos) > self.wall)
        return jnp.asarray(ACTION_DIRECTIONS) @ (away + 2.0 * inward)

    def opponent_model(self) -> FunctionOpponentModel:
        """The evader's own rule as a planner's opponent model (no params, no
        latent): the one-hot distribution on its move, read from its observation
        (its position, and the predators' positions relative to it)."""

        def logits_fn(params, latent, obs):
            del params, latent
            own = obs[PREY][0]  # [D]: vel, pos, obstacles, others, ...
            relative = self.env.prey_predators_relative(own)
            return greedy_logits(self._scores(own[2:4], -relative))[None]

        return FunctionOpponentModel(logits_fn, num_opponents=1, num_actions=5)


@dataclasses.dataclass(frozen=True)
class WandererPrey:
    """A scripted prey outside the trained family: a random walk with momentum.
    Each step it keeps its previous move with probability ``persistence`` and
    otherwise draws one of the moves uniformly (always at an episode's first
    step); it looks at neither the predators nor its intent. No params (``{}`` in
    a tournament)."""

    env: PursuitEnv
    """The pursuit game (one prey)."""
    persistence: float = 0.8
    """Probability of repeating the previous move."""

    def __post_init__(self):
        _check_one_prey(self.env, "wanderer")
        check_fraction("persistence", self.persistence)

    @property
    def num_agents(self) -> int:
        return 1

    @property
    def carry_size(self) -> int:
        return 1

    def act(self, params, key, state, obs, carry, reset):
        del params, state, obs
        key_keep, key_move = jax.random.split(key)
        drawn = jax.random.randint(key_move, (), 0, NUM_ACTIONS)
        keep = jax.random.bernoulli(key_keep, self.persistence) & ~reset[0]
        action = jnp.where(keep, carry[0, 0].astype(jnp.int32), drawn)
        return action[None], action.astype(jnp.float32)[None, None]


def _check_one_prey(env: PursuitEnv, who: str) -> None:
    """Refuse a game of more than one prey for a scripted prey ``who``."""
    if env.num_prey != 1:
        raise InvalidParameterError(
            f"env: the {who} plays one prey, the game has {env.num_prey}"
        )


SCRIPTED_PREY_PLAYERS = {"evader": EvaderPrey, "wanderer": WandererPrey}
"""The scripted prey from outside a trained family, by name, each built from the
pursuit game (``SCRIPTED_PREY_PLAYERS[name](env)``)."""
