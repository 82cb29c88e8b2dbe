"""``reference``: a small run whose every digit is checked on each processor.

Three stages, each ending in a SHA-256 digest of the exact bytes of what it
computed, beside a few of its figures:

- ``train``: a short MAPPO co-training run on ``tag_intent`` (every seed's final
  parameters and its metric curves);
- ``evaluate``: a cross-play tournament of the trained predators and prey and of
  freshly initialised ones (every episode's totals and returns);
- ``belief``: the population model of the README's example, end to end: scripted
  adversaries recorded, one behaviour clone each fitted, the online belief over
  one watched episode and the lookahead planner's move against it.

``mopa verify results/reference`` reruns it: the figures compare to the digit and
the digests to the bit, so it says whether this processor computes what the one
that wrote the folder computed. RESULTS.md keeps a table of the processors it was
checked on. The committed folder is written in portable numerics
(:mod:`mopa.core.numerics`); the stages say separately which part of a pipeline
repeats, since a digest of the training run differs as soon as one gradient
rounds differently, while the evaluation of freshly initialised players does not
depend on training at all.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos import MAPPOConfig
from mopa.algos.driver import run_training
from mopa.core.stages import Stages
from mopa.envs import make
from mopa.eval.tournament import TournamentEntry, play_tournament
from mopa.players import PolicyPlayer, initial_player_carry
from mopa.policy import init_params, read_policy_file
from mopa.runs.registry import register_experiment


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReferenceConfig:
    """The reference run's budget (small: it reruns on every processor)."""

    seed: int = 0
    """Base seed of every stage."""
    num_seeds: int = 2
    """Seeds of the training run."""
    train_steps: int = 32_768
    """Environment steps per seed of the MAPPO run (2 updates of 32 games x 128
    steps, whose minibatches contract 3,072 samples: long dots)."""
    eval_episodes: int = 16
    """Episodes per seed pair and cell of the tournament."""
    belief_steps: int = 25
    """Steps of the watched episode the belief reads."""


def digest(*trees: Any) -> str:
    """SHA-256 of every leaf's bytes, in tree order (shapes and dtypes included)."""
    hasher = hashlib.sha256()
    for leaf in jax.tree.leaves(trees):
        array = np.asarray(leaf)
        hasher.update(f"{array.dtype}{array.shape}".encode())
        hasher.update(np.ascontiguousarray(array).tobytes())
    return hasher.hexdigest()


def _train(config: ReferenceConfig, stages: Stages, progress) -> dict[str, Any]:
    train = MAPPOConfig(
        env="tag_intent",
        total_steps=config.train_steps,
        num_seeds=config.num_seeds,
        seed=config.seed,
        num_chunks=1,
    )

    def body(folder):
        result = run_training(train, out=folder / "run", progress=None)
        teams = read_policy_file(folder / "run").teams
        metrics = {k: np.asarray(v) for k, v in sorted(result.metrics.items())}
        return {
            "run": str(folder / "run"),
            "digest": digest({t: p for t, (_, p) in sorted(teams.items())}, metrics),
            "final": {
                k: float(np.nanmean(v[:, -1]))
                for k, v in metrics.items()
                if k.startswith("return/")
            },
        }

    progress("train: MAPPO on tag_intent")
    return stages.run("train", train.to_dict(), body)


def _evaluate(config: ReferenceConfig, trained: dict[str, Any]) -> dict[str, Any]:
    env, params = make("tag_intent")
    teams = read_policy_file(trained["run"]).teams
    key = jax.random.key(config.seed + 1)
    sides = []
    for index, team in enumerate(env.team_names):
        spec, stack = teams[team]
        fresh = jax.vmap(lambda k, spec=spec: init_params(spec, k))(
            jax.random.split(jax.random.fold_in(key, index), config.num_seeds)
        )
        player = PolicyPlayer(spec)
        sides.append(
            [
                TournamentEntry("initialised", player, fresh),
                TournamentEntry("trained", player, stack),
            ]
        )
    result = play_tournament(
        env, params, *sides, key, num_episodes=config.eval_episodes, pairing="paired"
    )
    captures = result.summary("captures")["mean"]
    return {
        "digest": digest(result.returns, result.totals),
        "captures": {
            f"{row} vs {column}": float(captures[r, c])
            for r, row in enumerate(result.row_names)
            for c, column in enumerate(result.column_names)
        },
    }


@dataclasses.dataclass(frozen=True)
class _Heads:
    """A scripted adversary: heads for landmark 0, landmark 1 or the good agent,
    as its parameters say (the README's population example)."""

    num_agents: int = 1
    carry_size: int = 0

    def act(self, target, key, state, obs, carry, reset):
        offset = obs.reshape(1, -1, 2)[:, target]
        axis = jnp.argmax(jnp.abs(offset), -1)
        ahead = jnp.take_along_axis(offset, axis[:, None], -1)[:, 0] > 0
        return 1 + 2 * axis + ahead, carry


def _belief(config: ReferenceConfig) -> dict[str, Any]:
    from mopa import opponent, planning
    from mopa.policy import PolicySpec

    env, params = make("adversary", continuous_actions=False)
    spec = PolicySpec(kind="q", num_agents=2, obs_size=10, num_actions=5, hidden=(16,))
    key = jax.random.key(config.seed + 2)
    good, good_params = PolicyPlayer(spec), init_params(spec, key)

    def record(target, key):
        weights = (target, good_params)
        return opponent.generate(
            env, params, (_Heads(), good), weights, key, num_chains=16
        )

    keys = jax.random.split(key, 6)
    fits = [record(target, keys[target]) for target in range(3)]
    members = [opponent.member_data(d, "adversary", intent_field=None) for d in fits]
    clone = opponent.BCConfig(
        num_actions=5, hidden=(64,), lr=1e-2, num_epochs=40, batch_size=50
    )
    model = opponent.PopulationConfig(clone=clone)
    clones, _ = opponent.fit_population(keys[3], model, members)
    seen = record(1, keys[4])
    belief = opponent.init_population_belief(num_intents=1, num_members=3)
    trace = []
    for t in range(config.belief_steps):
        obs_t, actions_t = seen["obs.adversary"][0, t], seen["actions.adversary"][0, t]
        belief = opponent.observe_opponent(model, clones, belief, obs_t, actions_t)
        trace.append(opponent.member_belief(belief))
    lookahead = planning.LookaheadConfig(num_rollouts=8, horizon=5, leaf_weight=0.0)
    opponent_model = planning.PopulationOpponentModel(
        model, team=env.team_index("adversary")
    )
    planner = planning.LookaheadPlayer(env, "good", lookahead, opponent_model, spec)
    plan_params = planning.LookaheadParams(
        params,
        good_params,
        planning.PopulationModelParams(clones, opponent.joint_belief(belief)),
    )
    obs, state = env.reset(keys[5], params)
    carry, reset = initial_player_carry(planner), jnp.ones(2, bool)
    actions, _ = planner.act(plan_params, keys[5], state, obs[1], carry, reset)
    final = np.asarray(trace[-1])
    return {
        "digest": digest(clones, jnp.stack(trace), actions),
        "member_belief": [float(p) for p in final],
        "none_fits": float(opponent.none_fits_probability(belief)),
        "planned_moves": [int(a) for a in np.asarray(actions)],
    }


def run_reference(
    config: ReferenceConfig, seeds: int | None, progress, stages: Stages
) -> dict[str, Any]:
    """The three stages (module docstring); ``seeds`` overrides the training
    run's seed count."""
    if seeds is not None:
        config = dataclasses.replace(config, num_seeds=seeds)
    trained = _train(config, stages, progress)
    progress("evaluate: initialised and trained players cross-played")
    evaluation = stages.run(
        "evaluate",
        {**dataclasses.asdict(config), "train": trained["digest"]},
        lambda folder: _evaluate(config, trained),
    )
    progress("belief: the population example, end to end")
    belief = stages.run(
        "belief", dataclasses.asdict(config), lambda folder: _belief(config)
    )
    return {
        "train": {k: trained[k] for k in ("digest", "final")},
        "evaluate": evaluation,
        "belief": belief,
    }


register_experiment(
    "reference",
    run_reference,
    {"default": ReferenceConfig()},
    "default",
    description="a small run checked to the bit on each processor",
)
