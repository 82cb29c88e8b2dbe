"""The ``belief`` stage of ``mopa experiment intent_population`` prey by prey: where
the intent belief is wrong at an episode's end, and how sure it is there.

For each held-out prey, and for each fitting prey with its own clone left out of the
library (the pooled clone, fitted on every fitting prey, stays in), on the ``data``
stage's episodes (the prey against its own co-trained predators): the intent
belief's accuracy after each episode's last move, its mean ECE over the steps, the
confusion of the true intent with the belief's guess at the end, and the belief's
confidence and none-fits probability at the end, where it is right and where wrong;
and where the prey ends its episodes, by intent (its mean position at the last
step: a prey that ends at the same corner under two intents cannot be told apart
by them).
No games are played. ``--stages`` is the ``stages`` folder of a default-profile
run. Writes ``--out`` (JSON) and ``--out`` with ``.meta.json``::

    JAX_PLATFORMS=cpu python benchmarks/population_belief_per_prey.py \\
        --stages DIR/stages --out benchmarks/population_belief_per_prey.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mopa.core.devices import use_cpu_devices

use_cpu_devices()  # as the mopa command does, before JAX starts

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _population import add_set_option, config_from, write_record  # noqa: E402

from mopa.core.runinfo import run_metadata  # noqa: E402
from mopa.experiments import intent_population as ip  # noqa: E402
from mopa.opponent.calibration import ece_by_step  # noqa: E402
from mopa.opponent.data import load_dataset  # noqa: E402
from mopa.opponent.population import (  # noqa: E402
    episode_beliefs,
    intent_belief,
    load_clones,
    none_fits_probability,
    population_log_probs,
)


def prey_summary(config, clones, stages: Path, name: str, leave_out: int | None):
    """The belief's end-of-episode record against prey ``name`` (member
    ``leave_out`` of the library dropped, or none)."""
    pop_config = config.population_config()
    obs, actions, intents = ip.prey_arrays(
        load_dataset(stages / "data" / f"{name}.npz")
    )
    log_probs = population_log_probs(pop_config, clones, obs)  # [E, T, 1, K, M, A]
    if leave_out is not None:
        keep = [m for m in range(log_probs.shape[-2]) if m != leave_out]
        log_probs = log_probs[..., keep, :]
    states = episode_beliefs(
        log_probs, actions, config.bayes_epsilon, config.fallback_prior
    )
    after = jax.vmap(jax.vmap(intent_belief))(states)  # [E, T, K]
    K = after.shape[-1]
    acted = jnp.concatenate(
        [jnp.full((after.shape[0], 1, K), 1.0 / K), after[:, :-1]], 1
    )
    end = np.asarray(after[:, -1])
    none_fits = np.asarray(
        jax.vmap(none_fits_probability)(jax.tree.map(lambda x: x[:, -1], states))
    )
    guess = end.argmax(-1)
    right = guess == intents
    confusion = np.zeros((K, K), int)
    np.add.at(confusion, (intents, guess), 1)

    def mean(values, where):
        return float(values[where].mean()) if where.any() else None

    last = np.asarray(obs)[:, -1, 0, 2:4]  # [E, 2] the prey's own position
    return {
        "end_position_by_intent": [
            last[intents == k].mean(0).round(3).tolist()
            if np.any(intents == k)
            else None
            for k in range(K)
        ],
        "episodes": int(intents.size),
        "accuracy_at_end": float(right.mean()),
        "mean_ece": float(
            np.mean(ece_by_step(acted, jnp.asarray(intents), config.calibration_bins))
        ),
        "confusion_true_by_guess": confusion.tolist(),
        "confidence_at_end": {
            "right": mean(end.max(-1), right),
            "wrong": mean(end.max(-1), ~right),
        },
        "none_fits_at_end": {
            "right": mean(none_fits, right),
            "wrong": mean(none_fits, ~right),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    add_set_option(parser)
    args = parser.parse_args()
    config = config_from(parser, args.set)
    meta = run_metadata(
        {
            "stages": str(args.stages),
            "set": {f: getattr(config, f) for f, _ in args.set},
        }
    )
    clones = load_clones(args.stages / "population" / "clones.msgpack")
    start = time.perf_counter()
    results = {
        "held_out": {
            n: prey_summary(config, clones, args.stages, n, None)
            for n in config.held_out_prey
        },
        "fitting_own_clone_left_out": {
            n: prey_summary(
                config, clones, args.stages, n, config.member_names.index(n)
            )
            for n in config.fitting_prey
        },
    }
    results["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(results, indent=1), flush=True)
    write_record(args.out, results, meta)


if __name__ == "__main__":
    main()
