"""Blue of the battalion against Red's scripted strategy family, fed a belief over
Red's strategy: whole episodes of a belief-conditioned policy or of a chooser
among scripted plans, with an online belief from a prefix classifier over Blue's
own observations (:mod:`mopa.opponent.battalion_belief`), every feed in one
jitted program; and the family probe, each scripted plan's win rate against each
strategy (whether knowing the strategy can pay).

What fills Blue's belief slot is a feed of :data:`FEEDS`, an array, so Blues that
differ only in it share a compiled program: the flat belief, the online
classifier belief, the true strategy (:meth:`~mopa.envs.base.IntentGame.
true_intent`), a soft belief of random sharpness, or a decoy (a soft belief about
a strategy drawn independently of Red's: Blue then plays as on any belief, but its
moves say nothing about Red's, so a classifier fitted on such episodes must read
Red's).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos.mappo.config import MAPPOConfig
from mopa.algos.mappo.train import make_trainer
from mopa.algos.trainer import seed_keys
from mopa.core.checkpoint import read_msgpack, write_msgpack
from mopa.envs import make
from mopa.envs.scripted_red import RED_TYPE_INDEX, RED_TYPES, STRATEGIES, heuristic_blue
from mopa.errors import InvalidParameterError
from mopa.opponent.battalion_belief import (
    NUM_FEATURES,
    belief_features,
    row_classifier_logits_fn,
)
from mopa.opponent.beliefs import (
    init_prefix_belief,
    prefix_beliefs,
    soft_belief,
    update_prefix_belief,
)
from mopa.opponent.encoders import ClassifierConfig
from mopa.opponent.soft_belief_game import soft_belief_game
from mopa.policy import PolicySpec, agent_inputs

FAMILY = STRATEGIES
"""Red's hidden strategy family; a belief is a distribution over it."""


def family_game(discrete: bool = True) -> tuple[Any, Any]:
    """``battalion_vs_red`` against the family (uniform strategies)."""
    return make("battalion_vs_red", red="mixed", discrete=discrete)


def training_segments(
    num_updates: int, num_chunks: int, warm: int
) -> list[tuple[int, int]]:
    """``[(first update, updates)]`` of every jitted training call: ``num_chunks``
    near-equal chunks, the one holding update ``warm`` cut there (so no call
    mixes the shared warm start with what follows)."""
    chunks = np.array_split(np.arange(num_updates), min(num_chunks, num_updates))
    segments = []
    for part in chunks:
        first, end = int(part[0]), int(part[-1]) + 1
        bounds = sorted({first, end, *([warm] if first < warm < end else [])})
        segments += [(a, b - a) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return segments


def train_belief_blues(
    mappo: MAPPOConfig,
    sharpness: Mapping[str, tuple[float, float]],
    warm: int,
    num_chunks: int,
    progress: Callable[[str], None],
) -> tuple[PolicySpec, dict[str, Any], dict[str, np.ndarray]]:
    """Train Blues against the family that differ only in the sharpness range of
    the belief in their observation, every seed, in one program.

    The range is a parameter of the game (:func:`~mopa.opponent.soft_belief_game.
    soft_belief_game` of :func:`family_game`), so one compiled MAPPO run is
    vmapped over the Blues and their seeds: the same network, budget, settings
    and seed keys for all. For the first ``warm`` updates every Blue sees the
    flat belief (the same inputs and keys, so the same parameters: a shared warm
    start); each Blue's own range holds in the updates after that.

    Args:
        mappo: the run's settings (``num_seeds`` seeds per Blue).
        sharpness: ``{Blue: (alpha_low, alpha_high)}``.
        warm: updates of the shared warm start.
        num_chunks: jitted calls (:func:`training_segments`), each reported.
        progress: called with one line per call.

    Returns:
        ``(spec, {Blue: params with a leading seed axis [S]}, {Blue: return/blue
        [S, U]})``.
    """
    names = tuple(sharpness)
    lows = jnp.asarray([sharpness[n][0] for n in names], jnp.float32)
    highs = jnp.asarray([sharpness[n][1] for n in names], jnp.float32)
    flat = jnp.zeros_like(lows)
    game, params = soft_belief_game(family_game()[0], 0.0, 1.0)

    def trainer(low, high):
        return make_trainer(
            mappo, (game, params.replace(alpha_low=low, alpha_high=high))
        )

    def init(low, high):
        return jax.vmap(trainer(low, high).init)(seed_keys(mappo))

    def update(low, high, carry):
        return jax.vmap(trainer(low, high).update)(carry)

    def run_chunk(carry, low, high, length):
        return jax.lax.scan(
            lambda c, _: jax.vmap(update)(low, high, c), carry, length=length
        )

    segments = training_segments(mappo.num_updates, num_chunks, warm)
    run_chunk = jax.jit(run_chunk, static_argnums=3)
    carry = jax.jit(jax.vmap(init))(flat, flat)
    returns, done = [], 0
    for index, (first, size) in enumerate(segments):
        tick = time.perf_counter()
        low, high = (flat, flat) if first < warm else (lows, highs)
        carry, metrics = run_chunk(carry, low, high, size)
        returns.append(np.asarray(metrics["return/blue"]))  # [U, B, S]
        done += size
        rate = size * mappo.steps_per_update * mappo.num_seeds * len(names)
        rate /= max(time.perf_counter() - tick, 1e-9)
        with np.errstate(all="ignore"):
            recent = np.nanmean(returns[-1], axis=(0, 2))
        progress(
            f"[train] part {index + 1}/{len(segments)}"
            f"{' (shared warm start)' if first < warm else ''}  "
            f"{done * mappo.steps_per_update:,}/{mappo.total_steps:,} steps per "
            f"seed and Blue  {rate:,.0f} steps/s  return/blue "
            + "  ".join(f"{n} {r:.2f}" for n, r in zip(names, recent, strict=True))
        )
    curve = np.concatenate(returns)  # [U, B, S]
    spec, params = trainer(lows[0], highs[0]).policies(carry)["blue"]
    return (
        spec,
        {n: jax.tree.map(lambda x, i=i: x[i], params) for i, n in enumerate(names)},
        {n: curve[:, i].T for i, n in enumerate(names)},
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BlueBeliefConfig:
    """How a Blue's belief is kept and fed (static: one compiled program each)."""

    classifier: ClassifierConfig
    """The prefix classifier over recorded rows
    (:func:`~mopa.opponent.battalion_belief.classifier_input`)."""
    belief_stride: int
    """Steps between the rows the belief reads."""
    belief_rows: int
    """Rows the belief reads at most."""
    alpha_low: float
    """Lower end of the soft and decoy feeds' sharpness."""
    alpha_high: float
    """Upper end of that sharpness."""
    greedy: bool = True
    """A policy Blue takes its actor's most likely action."""


FEEDS = ("none", "online", "oracle", "soft", "decoy")
"""What fills a Blue's belief slot: the flat belief (``blind``), the online
classifier belief (``aware``), the true type (``oracle``), a soft belief of
random sharpness (the training distribution), or a soft belief of random
sharpness about a type drawn independently of Red's (the belief stage's data:
Blue plays as it would on every kind of belief, but its own moves say nothing
about Red's type, so the classifier must read Red's)."""


@functools.lru_cache(maxsize=8)
def make_play(config: BlueBeliefConfig, spec: PolicySpec) -> Callable:
    """``play(actor_params, classifier_params, temperature, feed, keys [N]) ->
    dict of [N, ...]``: one episode per key of a trained Blue against the mixed
    family (discrete actions; jitted; one program for every feed).

    ``feed`` (an index into :data:`FEEDS`, traced) chooses what fills the
    Blue's belief slot: ``none`` the flat ``1 / K`` (the blind Blue), ``online``
    the classifier's belief, ``oracle`` the true type's one-hot, ``soft`` a soft
    belief of the training sharpness, ``decoy`` one about a type drawn
    independently of Red's. The online belief (:func:`classifier_
    logits_fn` of ``classifier_params`` at ``temperature``) is updated from
    Blue's own observation every ``belief_stride`` steps
    (:func:`~mopa.opponent.beliefs.update_prefix_belief`); the type enters only
    the ``oracle`` and ``soft`` feeds and the labels.

    Returns (per episode): ``outcome`` (1 win, 0 draw, -1 loss), ``return``
    (Blue's episode return, the training objective), ``label`` (Red's
    type in :data:`FAMILY`), ``length`` (steps played), ``rows [R, F]`` and
    ``num_rows`` (what the belief read), ``beliefs [R, K]`` (the online belief
    after each row).
    """
    module = spec.module()

    def act(actor_params, obs, fed, step, key):
        x = jnp.concatenate([obs, fed[None]], -1)
        logits = module.apply(actor_params, agent_inputs(spec, x))
        if config.greedy:
            return jnp.argmax(logits, -1).astype(jnp.int32)
        return jax.random.categorical(key, logits).astype(jnp.int32)

    return _make_episodes(config, family_game(), act)


@functools.lru_cache(maxsize=8)
def make_plan_play(config: BlueBeliefConfig) -> Callable:
    """:func:`make_play` for the planning Blue (continuous actions): its
    ``actor_params`` are the win-rate table ``[P, K]`` of the plans of
    :data:`PROBE_PLANS` against the types of :data:`FAMILY` (the family probe's,
    measured on other episodes), and at every step it plays the plan with the
    highest expected win rate under the belief it is fed (:func:`choose_plan`)."""
    env, params = make("battalion_vs_red", red="mixed")
    ranges = jnp.asarray([r for r, _ in PROBE_PLANS.values()], jnp.float32)
    starts = jnp.asarray([t for _, t in PROBE_PLANS.values()], jnp.int32)

    def act(table, obs, fed, step, key):
        plan = choose_plan(table, fed)
        distance = jnp.where(step < starts[plan], 1e9, ranges[plan])
        return heuristic_blue(obs[0], params, distance)[None]

    return _make_episodes(config, (env, params), act)


def choose_plan(table: jax.Array, belief: jax.Array) -> jax.Array:
    """``[]`` int32: the plan with the highest expected win rate under the
    belief, ``argmax_p sum_k belief[k] table[p, k]`` (the first on a tie).

    Args:
        table: ``[P, K]`` win rate of each plan against each type.
        belief: ``[K]`` the belief over the types.
    """
    return jnp.argmax(table @ belief).astype(jnp.int32)


def _make_episodes(config: BlueBeliefConfig, game: tuple, act: Callable):
    """The jitted, vmapped episode of :func:`make_play` with the Blue's action
    ``act(actor_params, obs [1, 17], fed belief [K], step [], key) -> action``."""
    env, params = game
    horizon, K = int(params.max_steps), env.num_intents
    c_config = config.classifier
    stride, R = config.belief_stride, config.belief_rows

    def episode(actor_params, c_params, temperature, feed, key):
        logits_fn = row_classifier_logits_fn(c_config, c_params)
        key_reset, key_alpha, key_run, key_decoy = jax.random.split(key, 4)
        obs, state = env.reset(key_reset, params)
        label = env.true_intent(state)
        alpha = jax.random.uniform(
            key_alpha, (), minval=config.alpha_low, maxval=config.alpha_high
        )
        flat = jnp.full((K,), 1.0 / K)
        oracle = jax.nn.one_hot(label, K)
        soft = soft_belief(label, alpha, K)
        decoy_type = jax.random.randint(key_decoy, (), 0, K)
        decoy = soft_belief(decoy_type, alpha, K)

        def step(carry, key_step):
            obs, state, belief, alive, outcome, length, total = carry
            record = alive & (state.step % stride == 0) & (belief.length < R)
            features = belief_features(obs[0][0], params)
            updated = update_prefix_belief(belief, features, logits_fn, temperature)
            belief = jax.tree.map(
                lambda new, old: jnp.where(record, new, old), updated, belief
            )
            fed = jnp.stack([flat, belief.belief, oracle, soft, decoy])[feed]
            key_act, key_env = jax.random.split(key_step)
            action = act(actor_params, obs[0], fed, state.step, key_act)
            obs, state, rewards, terminated, truncated, info = env.step(
                key_env, state, (action,), params
            )
            done = terminated | truncated
            code = jnp.where(info["blue_win"], 1, jnp.where(info["red_win"], -1, 0))
            outcome = jnp.where(alive & done, code, outcome)
            length = length + alive.astype(jnp.int32)
            total = total + alive * rewards[0][0]
            carry = (obs, state, belief, alive & ~done, outcome, length, total)
            return carry, None

        init = (
            obs,
            state,
            init_prefix_belief(R, NUM_FEATURES, K),
            jnp.ones((), bool),
            jnp.full((), -2, jnp.int32),
            jnp.zeros((), jnp.int32),
            jnp.zeros((), jnp.float32),
        )
        (_, _, belief, _, outcome, length, total), _ = jax.lax.scan(
            step, init, jax.random.split(key_run, horizon)
        )
        # [R, K]: row r is the belief after r + 1 rows (rows past num_rows repeat
        # zeros and are masked by the callers).
        beliefs = prefix_beliefs(logits_fn, belief.prefix, K, temperature)
        return {
            "outcome": outcome,
            "return": total,
            "label": label,
            "length": length,
            "rows": belief.prefix,
            "num_rows": belief.length,
            "beliefs": beliefs,
        }

    return jax.jit(jax.vmap(episode, in_axes=(None, None, None, None, 0)))


def play_seeds(
    play: Callable,
    stacked_params: Any,
    c_params: Any,
    temperature: float,
    feed: str,
    keys: jax.Array,
) -> dict[str, np.ndarray]:
    """:func:`make_play`'s ``play`` for every seed's parameters (host loop over
    the leading seed axis; seed ``s`` plays ``keys[s]``): arrays ``[S, N, ...]``.

    Args:
        feed: a name of :data:`FEEDS`.
        keys: ``[S, N]`` episode keys.
    """
    if feed not in FEEDS:
        raise InvalidParameterError(f"feed must be one of {FEEDS}, got {feed!r}")
    num_seeds = jax.tree.leaves(stacked_params)[0].shape[0]
    index = jnp.asarray(FEEDS.index(feed), jnp.int32)
    temperature = jnp.asarray(temperature, jnp.float32)
    runs = [
        play(
            jax.tree.map(lambda x, s=s: x[s], stacked_params),
            c_params,
            temperature,
            index,
            keys[s],
        )
        for s in range(num_seeds)
    ]
    return {k: np.stack([np.asarray(r[k]) for r in runs]) for k in runs[0]}


def episode_keys(seed: int, salt: int, num_seeds: int, num_episodes: int) -> jax.Array:
    """``[S, N]`` episode keys, the same for every condition (common random
    numbers: same terrain, start and Red type), different for every seed."""
    base = jax.random.fold_in(jax.random.key(seed), salt)
    index = jnp.arange(num_seeds * num_episodes)
    keys = jax.vmap(lambda i: jax.random.fold_in(base, i))(index)
    return keys.reshape(num_seeds, num_episodes)


PROBE_PLANS = {
    "close to 50 m": (50.0, 0),
    "close to 120 m": (120.0, 0),
    "hold position": (1e9, 0),
    "hold, close to 50 m from step 200": (50.0, 200),
    "hold, close to 50 m from step 300": (50.0, 300),
}
"""Scripted Blue plans of the family probe, ``name: (distance, from step)``:
:func:`~mopa.envs.scripted_red.heuristic_blue` (face Red, fire when it is in the
arc) holding its position until the step, then closing to the distance."""


def probe_family(num_episodes: int, seed: int) -> dict[str, Any]:
    """Each plan of :data:`PROBE_PLANS` against each type of :data:`FAMILY`
    (continuous actions), in one program vmapped over plans, types and episodes.

    If one plan were best against every type, knowing the type could not help a
    Blue restricted to these plans; where the best plan differs by type, it can.

    Returns:
        ``{"plans": [...], "types": [...], "win_rate", "draw_rate", "loss_rate":
        [P][K] lists, "best_plan_by_win_rate": {type: plan}, "best_single_plan"
        (best mean win rate over the uniform family) and its win rate,
        "best_plan_per_type_win_rate" (the mean win rate of playing each type's
        best plan: what knowing the type is worth among these plans),
        "num_episodes"}``.
    """
    env, params = make("battalion_vs_red", red="mixed")
    horizon = int(params.max_steps)
    ranges = jnp.asarray([r for r, _ in PROBE_PLANS.values()], jnp.float32)
    starts = jnp.asarray([t for _, t in PROBE_PLANS.values()], jnp.int32)
    probs = jnp.asarray(
        [np.eye(len(RED_TYPES))[RED_TYPE_INDEX[red]] for red in FAMILY], jnp.float32
    )
    keys = episode_keys(seed, 4, 1, num_episodes)[0]

    def episode(close_range, start, red_probs, key):
        game = params.replace(red_probs=red_probs)
        key_reset, key_run = jax.random.split(key)
        obs, state = env.reset(key_reset, game)

        def step(carry, key_step):
            obs, state, alive, outcome = carry
            distance = jnp.where(state.step < start, 1e9, close_range)
            action = heuristic_blue(obs[0][0], game, distance)[None]
            obs, state, _, terminated, truncated, info = env.step(
                key_step, state, (action,), game
            )
            done = terminated | truncated
            code = jnp.where(info["blue_win"], 1, jnp.where(info["red_win"], -1, 0))
            return (
                obs,
                state,
                alive & ~done,
                jnp.where(alive & done, code, outcome),
            ), None

        init = (obs, state, jnp.ones((), bool), jnp.full((), -2, jnp.int32))
        (_, _, _, outcome), _ = jax.lax.scan(
            step, init, jax.random.split(key_run, horizon)
        )
        return outcome

    play = jax.vmap(episode, in_axes=(None, None, None, 0))
    play = jax.vmap(play, in_axes=(None, None, 0, None))
    outcomes = np.asarray(
        jax.jit(jax.vmap(play, in_axes=(0, 0, None, None)))(ranges, starts, probs, keys)
    )  # [P, K, N]
    plans = list(PROBE_PLANS)
    win = (outcomes == 1).mean(-1)  # [P, K]
    single = int(np.argmax(win.mean(1)))
    return {
        "plans": plans,
        "types": list(FAMILY),
        "win_rate": win.tolist(),
        "draw_rate": (outcomes == 0).mean(-1).tolist(),
        "loss_rate": (outcomes == -1).mean(-1).tolist(),
        "best_plan_by_win_rate": {
            red: plans[int(np.argmax(win[:, k]))] for k, red in enumerate(FAMILY)
        },
        "best_single_plan": plans[single],
        "best_single_plan_win_rate": float(win[single].mean()),
        "best_plan_per_type_win_rate": float(win.max(0).mean()),
        "num_episodes": num_episodes,
    }


BLUE_FORMAT = "mopa-wargame-intent-blue"
"""Format tag of a trained Blue's file (:func:`save_blue`)."""


def save_blue(path: str | Path, spec: PolicySpec, params: Any) -> Path:
    """Write a trained Blue (its network's spec and seed-stacked weights) as
    msgpack; no code is stored."""
    return write_msgpack(
        path,
        {
            "format": BLUE_FORMAT,
            "version": 1,
            "spec": json.dumps(spec.to_dict()),
            "params": jax.tree.map(np.asarray, params),
        },
    )


def load_blue(path: str | Path) -> tuple[PolicySpec, Any]:
    """``(spec, params)`` of the Blue :func:`save_blue` wrote."""
    data = read_msgpack(Path(path), BLUE_FORMAT)
    spec = PolicySpec.from_dict(json.loads(data["spec"]))
    return spec, jax.tree.map(jnp.asarray, data["params"])
