"""LeMOL against a behaviour-cloning opponent model (``mopa experiment lemol``).

The measurement LeMOL (Davies et al. 2020) claims: while an opponent learns,
an opponent model that reads its experience across episodes (LeMOL's LSTM)
predicts its actions better than one that ignores its learning (the same model
with its memory cut, a behaviour clone of the same stored play-outs).

On ``push`` with one-hot moves (so that accuracy is defined), the adversary is
the focal agent and the good agent a fresh MADDPG learner in every play-out
(:mod:`mopa.algos.lemol`). One stage per method, each ``n_opp_cycles`` cycles for
every seed at once (seeds vmapped, the same seed keys for every method, so the
opponents of a seed start from the same networks and learn on the same
schedule):

* ``lemol``: the focal agent reads LeMOL's prediction (``opponent_model="lstm"``);
* ``bc``: it reads the behaviour clone's (``opponent_model="bc"``);
* ``maddpg`` / ``m3ddpg``: no model, for the returns table.

Per cycle: the models' online prediction accuracy and cross-entropy on the
cycle's play-outs (made before the cycle's model training; the uniform
predictor's 0.2 and ``log 5`` as references) and both agents' returns, each as a
mean with a 95% Student-t interval over seeds. The verdict compares LeMOL with
BC over the later cycles (the last ``later_fraction`` of them): the per-seed
difference of mean accuracy, LeMOL minus BC, with its interval over seeds (the
seeds are paired: same opponents' starting networks).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mopa.algos.lemol import LeMOLConfig
from mopa.algos.lemol.train import train_cycles
from mopa.core.checks import check_discount, check_fields
from mopa.errors import InvalidParameterError, UnknownNameError
from mopa.eval.protocol import seed_gap, seed_interval
from mopa.report import lemol_report
from mopa.report.lemol_report import MODEL_METHODS, UNIFORM_ACCURACY
from mopa.runs.registry import register_experiment

METHODS = ("lemol", "bc", "maddpg", "m3ddpg")
"""What the focal (adversary) agent uses: LeMOL, the behaviour-cloning model,
or no model (plain MADDPG / M3DDPG)."""
TEAMS = ("adversary", "good")
"""``push``'s teams: the focal agent's, then the learning opponent's."""

DEFAULT_RUN = LeMOLConfig(
    scenario="push",
    discrete_actions=True,
    num_episodes=40,
    batch_size=32,
    learning_starts=100,
    polyak=0.01,
    num_units=32,
    agent_update_freq=2,
    omlr=1e-2,
    lstm_hidden_dim=32,
    chunk_length=50,
    num_traj_to_train=4,
    traj_per_iter=2,
    om_training_iters=5,
    n_opp_cycles=12,
)
"""The default profile's runs: 12 cycles of 2 play-outs of 40 episodes of 25
steps (one gradient step every 2 steps, from the 100th transition on, so that the
opponent learns over most of its play-out), the model trained on the 4 most
recent opponent trajectories; MADDPG's learning rate and discount (``1e-2``,
0.95), a smaller batch (32 vs 1024), network (32 vs 64 units) and LSTM (32 vs 64)
than the LeMOL code's, and a faster target update (``polyak`` 0.01 vs 1e-4) for
the short play-outs."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeMOLExperimentConfig:
    """LeMOL vs the behaviour-cloning opponent model (and MADDPG / M3DDPG) on
    ``push`` against learning opponents."""

    run: LeMOLConfig = DEFAULT_RUN
    """Settings shared by every method's run (``bad_policy``,
    ``opponent_model`` and ``num_seeds`` are set per method)."""
    methods: tuple[str, ...] = METHODS
    """Methods to run (``lemol`` and ``bc`` are required)."""
    num_seeds: int = 5
    """Seeds per method (vmapped)."""
    seed: int = 0
    """Base seed: seed ``i`` uses ``fold_in(key(seed), i)`` for every method."""
    later_fraction: float = 0.5
    """Share of the cycles, counted from the end, the verdict averages over."""
    within_bins: int = 10
    """Bins of a play-out's updates for the within-play-out accuracy curve."""

    def __post_init__(self):
        check_fields(self)
        for method in self.methods:
            if method not in METHODS:
                raise UnknownNameError(
                    f"methods: unknown method {method!r}; choose from "
                    f"{', '.join(METHODS)}"
                )
        if not set(MODEL_METHODS) <= set(self.methods):
            raise InvalidParameterError("methods must include lemol and bc")
        if not self.run.discrete_actions:
            raise InvalidParameterError(
                "run: discrete_actions must be True (accuracy needs one-hot moves)"
            )
        if (self.run.scenario, self.run.num_adversaries) != ("push", 1):
            raise InvalidParameterError("run: needs scenario push, num_adversaries 1")
        if self.run.good_policy != "maddpg":
            raise InvalidParameterError("run: good_policy must be maddpg")
        if self.num_seeds < 1:
            raise InvalidParameterError(f"num_seeds must be >= 1, got {self.num_seeds}")
        check_discount("later_fraction", self.later_fraction)
        if not 1 <= self.within_bins <= self.run.updates_per_playout:
            raise InvalidParameterError(
                f"within_bins must be in [1, {self.run.updates_per_playout}] "
                f"(updates per play-out), got {self.within_bins}"
            )

    @property
    def later_cycles(self) -> tuple[int, int]:
        """``[start, end)`` of the cycles the verdict averages over."""
        n = self.run.n_opp_cycles
        return n - max(1, round(self.later_fraction * n)), n


def method_config(run: LeMOLConfig, method: str, num_seeds: int) -> LeMOLConfig:
    """The run of ``method``: the focal (adversary) agent's learner and model."""
    if method in MODEL_METHODS:
        changes = dict(
            bad_policy="lemol", opponent_model="lstm" if method == "lemol" else "bc"
        )
    else:
        changes = dict(bad_policy=method, opponent_model="lstm")
    return run.replace(num_seeds=num_seeds, **changes)


def _curve(values: np.ndarray) -> dict[str, list]:
    """Per-cycle mean and interval of ``[seed, cycle]`` values."""
    stats = [seed_interval(values[:, c]) for c in range(values.shape[1])]
    return {"mean": [m for m, _ in stats], "ci95": [ci for _, ci in stats]}


def run_lemol_experiment(
    config: LeMOLExperimentConfig, seeds: int | None, progress, stages
) -> dict:
    """Run every method (one stage each) and summarise; see the module
    docstring."""
    num_seeds = config.num_seeds if seeds is None else seeds
    trained = {}
    for method in config.methods:
        described = {
            "method": method,
            "run": method_config(config.run, method, num_seeds).to_dict(),
            "num_seeds": num_seeds,
            "seed": config.seed,
            "within_bins": config.within_bins,
        }
        trained[method] = stages.run(
            f"train_{method}",
            described,
            lambda folder, m=method: train_cycles(
                method_config(config.run, m, num_seeds),
                config.seed,
                TEAMS,
                config.within_bins,
                progress,
                m,
            ),
        )
    start, end = config.later_cycles
    arrays = {
        method: {k: np.asarray(v, np.float64) for k, v in r["cycles"].items()}
        for method, r in trained.items()
    }
    later = {
        method: {k: v[:, start:end].mean(1) for k, v in a.items()}
        for method, a in arrays.items()
    }
    accuracy = {m: _curve(arrays[m]["om_accuracy"]) for m in MODEL_METHODS}
    cross_entropy = {m: _curve(arrays[m]["om_loss"]) for m in MODEL_METHODS}
    results: dict[str, Any] = {
        "prediction_accuracy": {m: c["mean"] for m, c in accuracy.items()},
        "prediction_accuracy_ci95": {m: c["ci95"] for m, c in accuracy.items()},
        "cross_entropy": {m: c["mean"] for m, c in cross_entropy.items()},
        "cross_entropy_ci95": {m: c["ci95"] for m, c in cross_entropy.items()},
        "train_loss": {
            m: _curve(arrays[m]["om_train_loss"])["mean"] for m in MODEL_METHODS
        },
        "uniform": {
            "accuracy": UNIFORM_ACCURACY,
            "cross_entropy": float(np.mean(arrays["lemol"]["om_uniform_loss"])),
        },
        "within_playout_accuracy": {
            m: _curve(np.asarray(trained[m]["within_playout"])[:, start:end].mean(1))
            for m in MODEL_METHODS
        },
        "returns": {},
        "returns_opponent": {},
        "returns_per_cycle": {
            m: {team: _curve(a[f"return/{team}"]) for team in TEAMS}
            for m, a in arrays.items()
        },
    }
    for method, values in later.items():
        for name, team in (("returns", "adversary"), ("returns_opponent", "good")):
            mean, ci = seed_interval(values[f"return/{team}"])
            results[name][method] = {"mean": mean, "ci95": ci}
    results["accuracy_gap"] = seed_gap(
        later["lemol"]["om_accuracy"], later["bc"]["om_accuracy"], True, MODEL_METHODS
    )
    results["cross_entropy_gap"] = seed_gap(
        later["lemol"]["om_loss"], later["bc"]["om_loss"], False, MODEL_METHODS
    )
    results["later_accuracy"] = {
        m: dict(
            zip(("mean", "ci95"), seed_interval(later[m]["om_accuracy"]), strict=True)
        )
        for m in MODEL_METHODS
    }
    results["verdict"] = lemol_report.verdict(results, (start, end))
    progress(results["verdict"])
    results.update(
        num_seeds=num_seeds,
        num_cycles=config.run.n_opp_cycles,
        later_cycles=[start, end],
        methods=list(config.methods),
        run=config.run.to_dict(),
        stage_wall_s=dict(stages.timing_s),
        compile_s={m: r["compile_s"] for m, r in trained.items()},
    )
    return results


register_experiment(
    "lemol",
    run_lemol_experiment,
    {
        "default": LeMOLExperimentConfig(),
        "quick": LeMOLExperimentConfig(
            run=DEFAULT_RUN.replace(
                num_episodes=2,
                batch_size=8,
                learning_starts=8,
                num_units=8,
                lstm_hidden_dim=8,
                chunk_length=10,
                num_traj_to_train=2,
                traj_per_iter=1,
                om_training_iters=1,
                n_opp_cycles=2,
            ),
            methods=MODEL_METHODS,
            num_seeds=2,
            within_bins=5,
        ),
    },
    "default",
    plot_fn=lemol_report.write_report,
    description="LeMOL vs a behaviour-cloning opponent model on push: accuracy "
    "per cycle against learning opponents, and returns",
    markdown_fn=lemol_report.results_markdown,
)
