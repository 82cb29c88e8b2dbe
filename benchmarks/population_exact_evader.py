"""How much a better model of the evader could give the lookahead: the population
planner of ``mopa experiment intent_population`` with the evader's own rule as its
model of the prey, against ``flat_belief_planner``, on the same episodes.

The evader (:class:`~mopa.planning.EvaderPrey`) is
deterministic and its rule reads only what its observation holds, so a planner
can be handed the exact model (:meth:`EvaderPrey.opponent_model`): the population
planner with that rule as its fallback and a planning prior of ``1 - 1e-9`` that
none fits, so its rollouts imagine the evader's own moves and nothing else. Its
captures bound what any model of the evader gives the lookahead; the population
planner itself (whose fallback is the flat-belief planner's prey, corrected
online with ``--set online_fallback true``) plays beside it. Paired episodes,
``--episodes`` per predator seed, the experiment's key and prey.

With ``--logistic-episodes N`` a third row asks whether a model linear in the
evader's threat features (:meth:`~mopa.envs.pursuit.PursuitEnv.prey_threat_features`,
what the online correction reads with ``online_features`` ``threats``) could
plan as well, were it fitted well: a multinomial logistic regression
(scikit-learn, ``C=100``) fitted offline to the evader's moves in ``N`` episodes
per chain of 8 chains against the first predator seed's flat-belief planner (a
key of their own), its accuracy on those moves and on as many fresh ones
reported, played as the fallback as the exact rule is. Writes ``--out`` (JSON)
and ``--out`` with ``.meta.json``::

    JAX_PLATFORMS=cpu python benchmarks/population_exact_evader.py \\
        --stages DIR/stages --out benchmarks/population_exact_evader.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from mopa.core.devices import use_cpu_devices

use_cpu_devices()  # as the mopa command does, before JAX starts

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _population import (  # noqa: E402
    add_set_option,
    config_from,
    play_named_rows,
    trained_stages,
    write_record,
)
from sklearn.linear_model import LogisticRegression  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.envs.pursuit import NUM_ACTIONS, PREY  # noqa: E402
from mopa.eval.intervals import mean_interval  # noqa: E402
from mopa.experiments import intent_population_rows as pr  # noqa: E402
from mopa.experiments.intent_conditions import intent_game  # noqa: E402
from mopa.opponent.data import generate  # noqa: E402
from mopa.planning import EvaderPrey, FunctionOpponentModel  # noqa: E402

EXACT = "exact_model_planner"
LOGISTIC = "threat_logistic_planner"


def evader_moves(rows, prey, key, episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(features [N, F], moves [N])``: the evader's threat features and moves in
    ``episodes`` episodes per chain of 8 against the first predator seed's
    flat-belief planner."""
    env, params = intent_game()
    player, params_fn = rows["flat_belief_planner"]
    dataset = generate(
        env,
        params,
        (player, prey.player),
        (
            jax.tree.map(lambda x: x[0], params_fn(None)),
            jax.tree.map(lambda x: x[0], prey.params),
        ),
        key,
        num_chains=8,
        episodes_per_chain=episodes,
    )
    obs = jnp.asarray(dataset["obs.prey"]).reshape(-1, env.prey_obs_size)
    features = jax.vmap(env.prey_threat_features)(obs)
    return np.asarray(features), np.asarray(dataset["actions.prey"]).reshape(-1)


def logistic_model(rows, prey, key, episodes: int) -> tuple:
    """``(model, accuracy)``: the logistic regression on the evader's threat
    features as a planner's model, and its accuracy on the moves it was fitted to
    and on fresh ones."""
    env, _ = intent_game()
    keys = jax.random.split(key)
    x, y = evader_moves(rows, prey, keys[0], episodes)
    fit = LogisticRegression(C=100.0, max_iter=5000).fit(x, y)
    fresh_x, fresh_y = evader_moves(rows, prey, keys[1], episodes)
    weights = np.zeros((x.shape[1], NUM_ACTIONS), np.float32)
    bias = np.full(NUM_ACTIONS, -30.0, np.float32)  # moves never seen
    weights[:, fit.classes_] = fit.coef_.T
    bias[fit.classes_] = fit.intercept_
    weights, bias = jnp.asarray(weights), jnp.asarray(bias)

    def logits_fn(params, latent, obs):
        del params, latent
        return (env.prey_threat_features(obs[PREY][0]) @ weights + bias)[None]

    accuracy = {
        "fitted": float(np.mean(fit.predict(x) == y)),
        "fresh": float(np.mean(fit.predict(fresh_x) == fresh_y)),
        "moves": int(y.size),
    }
    model = FunctionOpponentModel(logits_fn, num_opponents=1, num_actions=NUM_ACTIONS)
    return model, accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--logistic-episodes", type=int, default=0)
    add_set_option(parser)
    args = parser.parse_args()
    config = config_from(parser, args.set)
    meta = run_metadata(
        {
            "stages": str(args.stages),
            "episodes": args.episodes,
            "logistic_episodes": args.logistic_episodes,
            "set": {f: getattr(config, f) for f, _ in args.set},
        }
    )
    teams, clones = trained_stages(config, args.stages)
    rows = pr.build_rows(config, teams, clones)
    player, params_fn = rows["population_planner"]
    model = player.planner.opponent_model
    env, _ = intent_game()
    prey = pr.prey_entries(config, teams)["evader"]

    def fallback_row(fallback):
        """The population planner imagining ``fallback`` (whose params are
        ignored) and nothing else."""
        imagined = dataclasses.replace(model, fallback=fallback)
        return (
            dataclasses.replace(
                player,
                planner=dataclasses.replace(player.planner, opponent_model=imagined),
                planning_prior=1 - 1e-9,
            ),
            params_fn,
        )

    start = time.perf_counter()
    rows[EXACT] = fallback_row(EvaderPrey(env).opponent_model())
    names = [EXACT, "population_planner", "flat_belief_planner"]
    accuracy = None
    if args.logistic_episodes > 0:
        key = jax.random.fold_in(pr.eval_key(config), 99)
        logistic, accuracy = logistic_model(rows, prey, key, args.logistic_episodes)
        rows[LOGISTIC] = fallback_row(logistic)
        names.insert(1, LOGISTIC)
    values = play_named_rows(
        rows,
        names,
        prey,
        pr.eval_key(config),
        num_episodes=args.episodes,
        paired=True,
    )
    captures = {r: np.asarray(values[r], np.float64).ravel() for r in names}
    flat = captures["flat_belief_planner"]
    results = {
        "captures": {r: mean_interval(v) for r, v in captures.items()},
        "versus_flat": {
            r: {**mean_interval(captures[r] - flat), "n": int(flat.size)}
            for r in names
            if r != "flat_belief_planner"
        },
        "seconds": round(time.perf_counter() - start, 1),
    }
    if accuracy is not None:
        results["logistic_accuracy"] = accuracy
    print(json.dumps(results, indent=1), flush=True)
    write_record(args.out, results, meta)


if __name__ == "__main__":
    main()
