"""The conditions of the hidden-intent experiment (:mod:`mopa.experiments.intent`)
and how they are evaluated: every predator condition as a composition of library
objects (:class:`~mopa.planning.IntentPredator` with its belief sources, feed and
planner), the prey, the paired and common-opponent tournaments
(:mod:`mopa.eval.protocol`), the calibration of every belief source on held-out
episodes, and the belief planner's GIF.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.checkpoint import read_msgpack
from mopa.core.files import write_json
from mopa.envs import make
from mopa.envs.pursuit import INTENT_CORNERS, NUM_ACTIONS, PREY
from mopa.eval.evaluate import record_episode
from mopa.eval.protocol import (
    opponent_means,
    play_pool,
    play_rows,
    pooled_table,
    row_stats,
)
from mopa.eval.tournament import TournamentEntry, broadcast_seeds
from mopa.opponent import bc as bc_lib
from mopa.opponent.calibration import calibration_by_step
from mopa.opponent.data import load_dataset
from mopa.opponent.encoders import load_encoder
from mopa.opponent.intent_encoders import (
    path_beliefs,
    prey_lead_positions,
    split_episodes,
)
from mopa.planning import (
    IntentConditionedModel,
    IntentPredator,
    LookaheadPlayer,
    MCTSPlayer,
    PolicyOpponentModel,
    PreyModel,
    classifier_logits_fn,
    intent_predator_params,
    jepa_logits_fn,
)
from mopa.planning.intent_player import episode_bayes_beliefs
from mopa.planning.pursuit_planners import pursuit_lookahead, pursuit_tree_search
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, read_policy_file
from mopa.worldmodel import (
    LearnedDynamicsEnv,
    LearnedDynamicsParams,
    dynamics_of,
    load_world_model,
)

if TYPE_CHECKING:
    from mopa.experiments.intent import IntentConfig

WORLD_MODELS = ("ssm", "jepa")
"""The learned world models (``wm_<name>_planner``)."""


TRAIN_CONDITIONS = ("unaware", "oracle", "belief")
"""Training conditions (presets ``exp6_mappo_<condition>``)."""


CONDITIONS = (
    "unaware",
    "oracle",
    "oracle_random_intent",
    "belief_reactive",
    "hard_inference",
    "belief_planner",
    "flat_belief_planner",
    "jepa_belief_planner",
    "supervised_belief_planner",
    "bc_belief_planner",
    "mcts_planner",
    "wm_ssm_planner",
    "wm_jepa_planner",
)
"""Evaluation conditions mopa builds, in table order."""


PAIRED_PREY = {
    "unaware": "unaware",
    "oracle": "oracle",
    "oracle_random_intent": "oracle",
    "hard_inference": "oracle",
    "belief_reactive": "belief",
    "belief_planner": "belief",
    "flat_belief_planner": "belief",
    "jepa_belief_planner": "belief",
    "supervised_belief_planner": "belief",
    "bc_belief_planner": "belief",
    "mcts_planner": "belief",
    "wm_ssm_planner": "belief",
    "wm_jepa_planner": "belief",
}
"""The training condition whose prey each evaluation condition meets in the
paired protocol (the research's pairing, ``intent.md``)."""


INTENT_GAME = ("tag_intent", {"predator_intent_obs": True})
"""``(name, overrides)``: ``tag_intent`` with the intent input on the predators'
observation (the true one-hot unless a player replaces it)."""


def intent_game() -> tuple[Any, Any]:
    """``(env, params)`` of :data:`INTENT_GAME`."""
    name, overrides = INTENT_GAME
    return make(name, **overrides)


def read_teams(folder: Path) -> dict[str, tuple[PolicySpec, Any]]:
    """``{team: (spec, params [S, ...])}`` of the run a :func:`train_stage` left in
    ``folder``."""
    return read_policy_file(folder / "run").teams


def bc_config(config: IntentConfig) -> bc_lib.BCConfig:
    return bc_lib.BCConfig(num_actions=NUM_ACTIONS, num_epochs=config.bc_epochs)


def prey_paths(dataset) -> tuple[np.ndarray, np.ndarray]:
    """The prey's lead positions and intents of every episode of ``dataset``."""
    return prey_lead_positions(dataset, float(intent_game()[1].dt))


def load_encoders(folder: Path):
    c_config, c_params = load_encoder(folder / "classifier.msgpack")
    j_config, j_params = load_encoder(folder / "jepa.msgpack")
    bc_params, bc_jepa_params = (
        jax.tree.map(
            jnp.asarray,
            read_msgpack(folder / f"{name}.msgpack", "mopa-intent-bc", noun="clone")[
                "params"
            ],
        )
        for name in ("bc", "bc_jepa")
    )
    return (c_config, c_params), (j_config, j_params), (bc_params, bc_jepa_params)


def calibration_stage(
    config: IntentConfig,
    encoders: dict,
    encoder_folder: Path,
    belief_folder: Path,
    folder: Path,
) -> dict:
    _, params = intent_game()
    K = len(INTENT_CORNERS)
    dataset = load_dataset(encoder_folder / "dataset.npz")
    _, _, test = split_episodes(dataset, config.seed)
    positions, labels = prey_paths(test)
    (c_config, c_params), (j_config, j_params), (bc_params, bc_jepa_params) = (
        load_encoders(encoder_folder)
    )
    corners = jnp.asarray(INTENT_CORNERS) * params.intent_corner
    sources = {
        "classifier": (
            classifier_logits_fn(
                c_config, c_params, config.grid_size, config.encoder_recent
            ),
            encoders["classifier_temperature"],
        ),
        "jepa": (
            jepa_logits_fn(
                j_config, j_params, config.grid_size, corners, config.encoder_recent
            ),
            encoders["jepa_temperature"],
        ),
    }
    beliefs = {
        name: path_beliefs(fn, positions, K, t, config.min_belief_steps)
        for name, (fn, t) in sources.items()
    }
    # Bayes from the prey's own policy (the online belief: the belief-condition
    # prey of each episode's seed), from its behaviour clone and from the clone
    # of the JEPA's names, on the same held-out episodes.
    prey_spec, prey_params = read_teams(belief_folder)["prey"]
    clone_spec = bc_lib.bc_policy_spec(bc_config(config), prey_spec.obs_size - K, K)
    for name, spec, stacked in (
        ("bayes", prey_spec, prey_params),
        ("bc_bayes", clone_spec, bc_params),
        ("jepa_bayes", clone_spec, bc_jepa_params),
    ):
        beliefs[name] = episode_bayes_beliefs(
            PreyModel(spec, config.greedy_prey_model),
            stacked,
            jnp.asarray(test.episodes("obs.prey")[:, :, 0, :]),
            jnp.asarray(test.episodes("actions.prey")[:, :, 0]),
            jnp.asarray(test.episode_labels("seed_index")),
            K,
            config.bayes_epsilon,
        )
    out = {
        "num_episodes": int(len(labels)),
        **calibration_by_step(beliefs, labels, config.calibration_bins),
    }
    write_json(folder / "calibration.json", out)
    return out


def lookahead_planner(
    config, env, own_spec, opponent_spec, clone=False
) -> LookaheadPlayer:
    """The joint lookahead of the planner conditions
    (:func:`~mopa.planning.pursuit_planners.pursuit_lookahead` at an
    :class:`IntentConfig`'s rollouts, horizon, discount and leaf weight), with the
    prey ``opponent_spec`` under an intent drawn from the belief per rollout;
    ``clone``: the rollout prey is the behaviour clone (sampled at
    ``clone_temperature``)."""
    if clone and config.clone_temperature > 0:
        prey = PolicyOpponentModel(
            opponent_spec, team=PREY, temperature=config.clone_temperature
        )
    else:
        prey = PolicyOpponentModel(
            opponent_spec, team=PREY, greedy=config.greedy_prey_model
        )
    return pursuit_lookahead(
        env,
        own_spec,
        IntentConditionedModel(prey, env.num_intents),
        num_rollouts=config.planner_rollouts,
        horizon=config.planner_horizon,
        gamma=config.planner_gamma,
        distance_weight=config.distance_weight,
    )


def tree_search_planner(config, env, own_spec, opponent_spec) -> MCTSPlayer:
    """The tree search of ``mcts_planner`` at the lookahead's simulator budget
    (:func:`~mopa.planning.pursuit_planners.pursuit_tree_search`)."""
    lookahead = lookahead_planner(config, env, own_spec, opponent_spec)
    return pursuit_tree_search(lookahead, config.mcts_particles)


BELIEF_SOURCES = ("bayes", "classifier", "jepa", "flat")
"""Belief sources of the predators that keep one (``params.source`` indexes
them); ``bayes`` (exact Bayes from the prey's own policy) is the online belief."""


def build_entries(
    config: IntentConfig, teams: dict, encoder_folder: Path, wm_folder: Path
) -> dict:
    """Every evaluation condition as a tournament entry, and the prey entries.

    Returns:
        ``{"predators": {NAME: TournamentEntry}, "prey": {CONDITION:
        TournamentEntry}}``.
    """
    env, params = intent_game()
    K = env.num_intents
    (c_config, c_params), (j_config, j_params), (bc_params, bc_jepa_params) = (
        load_encoders(encoder_folder)
    )
    encoders = json.loads((encoder_folder / "stage.json").read_text())["result"]
    b_config = bc_config(config)
    prey_spec = teams["belief"]["prey"][0]
    clone_spec = bc_lib.bc_policy_spec(b_config, prey_spec.obs_size - K, K)
    unaware_spec, unaware_params = teams["unaware"]["predator"]
    oracle_spec, oracle_params = teams["oracle"]["predator"]
    belief_spec, belief_params = teams["belief"]["predator"]
    S = jax.tree.leaves(oracle_params)[0].shape[0]
    common = dict(
        classifier=c_config,
        jepa=j_config,
        grid_size=config.grid_size,
        recent=config.encoder_recent,
        min_steps=config.min_belief_steps,
        commit_step=config.commit_step,
        bayes_epsilon=config.bayes_epsilon,
    )

    def player(spec, sources, model_spec, planner=None):
        return IntentPredator(
            env,
            spec,
            sources=sources,
            planner=planner,
            prey_model=PreyModel(model_spec, config.greedy_prey_model),
            **common,
        )

    unaware = IntentPredator(env, unaware_spec, feed_none=True, **common)
    reactive = player(oracle_spec, BELIEF_SOURCES, prey_spec)
    lookahead = lookahead_planner(config, env, belief_spec, prey_spec)
    true_planner = player(belief_spec, BELIEF_SOURCES, prey_spec, lookahead)
    clone_planner = player(
        belief_spec,
        ("bayes",),
        clone_spec,
        lookahead_planner(config, env, belief_spec, clone_spec, clone=True),
    )
    jepa_planner = player(belief_spec, ("bayes",), clone_spec, lookahead)
    mcts_planner = player(
        belief_spec,
        BELIEF_SOURCES,
        prey_spec,
        tree_search_planner(config, env, belief_spec, prey_spec),
    )

    def entry_params(policy_params, source, feed, prey_params, planner_opponent):
        """``prey_params``: the Bayes source's prey model (``[S]``-stacked);
        ``planner_opponent``: the planner's rollout prey, if it plans."""
        return intent_predator_params(
            params,
            S,
            policy_params,
            source=BELIEF_SOURCES.index(source),
            feed=feed,
            num_intents=K,
            bayes_params=prey_params,
            planner_opponent=planner_opponent,
            classifier=(c_params, encoders["classifier_temperature"]),
            jepa=(j_params, encoders["jepa_temperature"]),
        )

    # Each predator models the prey it was co-trained with (its seed's); the
    # clone planner models the behaviour clone only (one clone per seed).
    prey_oracle, prey_belief = teams["oracle"]["prey"][1], teams["belief"]["prey"][1]
    conditions = {  # player, policy, source, feed, Bayes model, rollout prey
        "unaware": (unaware, unaware_params, "flat", "none", prey_oracle, None),
        "oracle": (reactive, oracle_params, "bayes", "true", prey_oracle, None),
        "oracle_random_intent": (
            reactive, oracle_params, "bayes", "random", prey_oracle, None,
        ),
        "hard_inference": (
            reactive, oracle_params, "bayes", "commit", prey_oracle, None,
        ),
        "belief_reactive": (
            reactive, belief_params, "bayes", "belief", prey_belief, None,
        ),
        "belief_planner": (
            true_planner, belief_params, "bayes", "belief", prey_belief, prey_belief,
        ),
        "flat_belief_planner": (
            true_planner, belief_params, "flat", "belief", prey_belief, prey_belief,
        ),
        "jepa_belief_planner": (
            jepa_planner, belief_params, "bayes", "belief", bc_jepa_params,
            prey_belief,
        ),
        "supervised_belief_planner": (
            true_planner, belief_params, "classifier", "belief", prey_belief,
            prey_belief,
        ),
        "bc_belief_planner": (
            clone_planner, belief_params, "bayes", "belief", bc_params, bc_params,
        ),
        "mcts_planner": (
            mcts_planner, belief_params, "bayes", "belief", prey_belief, prey_belief,
        ),
    }  # fmt: skip
    predators = {
        name: (player, entry_params(*fields))
        for name, (player, *fields) in conditions.items()
    }
    # The belief planner rolled through each learned world model: the game's
    # rewards and observations, the model's physics.
    base_player, base_params = predators["belief_planner"]
    for name in WORLD_MODELS:
        wm_config, wm_params, _ = load_world_model(wm_folder / f"{name}.msgpack")
        wm_env = LearnedDynamicsEnv(env, dynamics_of(wm_config, member="sample"))
        planner = dataclasses.replace(base_player.planner, env=wm_env)
        planner_params = base_params.planner_params.replace(
            env_params=broadcast_seeds(LearnedDynamicsParams(params, wm_params), S)
        )
        predators[f"wm_{name}_planner"] = (
            dataclasses.replace(base_player, planner=planner),
            base_params.replace(planner_params=planner_params),
        )
    prey = {
        condition: TournamentEntry(
            f"prey_{condition}",
            PolicyPlayer(teams[condition]["prey"][0]),
            teams[condition]["prey"][1],
        )
        for condition in TRAIN_CONDITIONS
    }
    return {
        "predators": {
            name: TournamentEntry(name, player, entry_params)
            for name, (player, entry_params) in predators.items()
        },
        "prey": prey,
    }


def eval_paired_stage(
    config, teams, encoder_folder, wm_folder, folder, progress
) -> dict:
    """Each condition against the prey co-trained with its predators (seed
    ``s`` against seed ``s``)."""
    env, params = intent_game()
    entries = build_entries(config, teams, encoder_folder, wm_folder)
    S = jax.tree.leaves(teams["oracle"]["prey"][1])[0].shape[0]
    captures = {}
    for prey_condition in TRAIN_CONDITIONS:
        rows = [
            entries["predators"][name]
            for name in CONDITIONS
            if PAIRED_PREY[name] == prey_condition
        ]
        progress(
            f"[eval_paired] {', '.join(r.name for r in rows)} vs prey_{prey_condition}"
        )
        captures.update(
            play_rows(
                env,
                params,
                rows,
                entries["prey"][prey_condition],
                jax.random.fold_in(jax.random.key(config.seed), 7),
                num_episodes=config.eval_episodes,
                pairing="paired",
            )
        )
    ordered = {name: row_stats(captures[name], S) for name in CONDITIONS}
    seed_means = {name: values.mean(-1).tolist() for name, values in captures.items()}
    write_json(
        folder / "paired.json", {"conditions": ordered, "seed_means": seed_means}
    )
    return {"conditions": ordered, "seed_means": seed_means}


def common_episodes(config: IntentConfig, num_seeds: int) -> int:
    """Episodes per seed pair of the common-opponent protocol, so that a condition
    plays at least ``eval_episodes`` episodes per predator seed over the pool of
    ``3 x num_seeds`` prey."""
    return math.ceil(config.eval_episodes / (len(TRAIN_CONDITIONS) * num_seeds))


def eval_common_stage(
    config, teams, encoder_folder, wm_folder, folder, progress
) -> dict:
    """Every condition against the prey of every training condition."""
    env, params = intent_game()
    entries = build_entries(config, teams, encoder_folder, wm_folder)
    S = jax.tree.leaves(teams["oracle"]["prey"][1])[0].shape[0]
    progress(f"[eval_common] {len(CONDITIONS)} conditions vs the pool of prey")
    prey = [f"prey_{c}" for c in TRAIN_CONDITIONS]
    captures = play_pool(
        env,
        params,
        [entries["predators"][name] for name in CONDITIONS],
        [entries["prey"][c] for c in TRAIN_CONDITIONS],
        jax.random.fold_in(jax.random.key(config.seed), 11),
        num_episodes=common_episodes(config, S),
    )
    conditions = pooled_table(captures, prey, CONDITIONS, S)
    means = opponent_means(captures)
    per_prey = {name: {p: means[p][name] for p in prey} for name in CONDITIONS}
    write_json(folder / "common.json", {"conditions": conditions, "per_prey": per_prey})
    return {"conditions": conditions, "per_prey": per_prey}


def gif_stage(config, teams, encoder_folder, wm_folder, folder) -> dict:
    from mopa.report.render import belief_gif

    env, params = intent_game()
    entries = build_entries(config, teams, encoder_folder, wm_folder)
    planner = entries["predators"]["belief_planner"]
    prey = entries["prey"]["belief"]
    first = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
    states, carries = record_episode(
        env,
        params,
        (planner.player, prey.player),
        (first(planner.params), first(prey.params)),
        jax.random.fold_in(jax.random.key(config.seed), 13),
        int(params.max_steps),
    )
    beliefs = np.stack(
        [np.asarray(planner.player.unpack(row[0]).belief) for row in carries]
    )
    frames = belief_gif(
        env,
        states,
        params,
        beliefs,
        INTENT_CORNERS * float(params.intent_corner),
        folder / "belief_planner.gif",
        size=config.gif_size,
        title="belief planner",
    )
    return {"frames": frames, "gif": "belief_planner.gif"}
