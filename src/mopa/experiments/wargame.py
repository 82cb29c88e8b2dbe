"""The wargame's experiments: a trained Blue against the scripted Red ladder
(``mopa experiment wargame_ladder``); the transfer benchmarks are in
:mod:`mopa.experiments.wargame_transfer`.

Every Blue here is trained through :func:`mopa.league.train_blue` (PPO with a
centralised critic, the league's MAPPO, on ``battalion_vs_red`` with discrete
actions) and evaluated through :func:`mopa.league.evaluate_blue`: wins, draws
and losses from the game's own end signals (a simultaneous break and the
500-step limit are draws), episode ``i`` of an evaluation seeded
``eval_seed + i``, the policy acting greedily. Rates carry 95% Wilson score
intervals; nothing falls back: an error in training or evaluation fails the
experiment.

``wargame_ladder``: one Blue trained against a mixture of the ladder's levels
(each episode's Red drawn from ``mixture``, a game parameter, so every level
shares one compiled program), then evaluated against each of L1-L5 over
``n_episodes`` episodes, beside the targets (at least 95% against L1-L4 and 60%
against L5) and the reference PPO baseline of seed 001 (85, 85, 100, 100, 25%).
With ``clone`` set (the default profile) the PPO run starts from an actor first
trained by behaviour cloning (:mod:`mopa.league.cloning`) of
:func:`~mopa.envs.battalion_wrappers.cover_teacher_action`, a scripted Blue
that reads only its own observation (with ``terrain_obs``: where the best cover
nearby lies): it moves to that cover while Red is out of range, then faces Red
and fires from there, and closes on a Red that has not come within range by
``hold_until`` of the episode. The cloned actor is evaluated on the ladder too,
so the report shows what PPO added to or took from its starting point.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mopa.core.checks import check_fields
from mopa.errors import InvalidParameterError
from mopa.league.cloning import CloneConfig, clone_blue
from mopa.league.evaluation import evaluate_blue, red_mixture_kwargs
from mopa.league.training import TrainingConfig, train_blue
from mopa.report import wargame_report
from mopa.report.wargame_report import rate_cell
from mopa.runs.registry import register_experiment

LEVELS = ("L1", "L2", "L3", "L4", "L5")
"""The scripted Red ladder, weakest first."""
REFERENCE_PPO = {"L1": 0.85, "L2": 0.85, "L3": 1.00, "L4": 1.00, "L5": 0.25}
"""Win rates of seed 001's PPO baseline (about 50k steps) against the ladder."""
TARGETS = {"L1": 0.95, "L2": 0.95, "L3": 0.95, "L4": 0.95, "L5": 0.60}
"""The win rates a trained Blue must reach against each level."""


# -- wargame_ladder -------------------------------------------------------------------
LADDER_TRAINING = TrainingConfig(
    game="battalion_vs_red",
    game_kwargs={"reward_received": 10.0, "terrain_obs": True},
    total_timesteps=6_000_000,
    n_envs=128,
    n_steps=128,
    num_chunks=10,
    hidden=(128, 128),
    lr=3e-4,
    ent_coef=0.01,
    gamma=0.995,
    update_epochs=4,
    num_minibatches=4,
    run_id="ladder",
)
"""PPO settings of the default ladder run (the game's Red is set from the
experiment's ``mixture``). Damage received costs twice the reward of damage dealt
(``reward_received`` 10, a documented game option; the game's default is 5), so
that Blue values fighting from better cover than Red's, and Blue's observation
carries the terrain features of ``terrain_obs`` (where cover lies around it). The
default profile trains at learning rate 1e-4 from a cloned actor."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WargameLadderConfig:
    """A Blue trained through the league against a mixture of the ladder's
    levels, evaluated against each level."""

    training: TrainingConfig = LADDER_TRAINING
    """League training settings (``game_kwargs`` gets the mixture's Red)."""
    mixture: tuple[tuple[str, float], ...] = (
        ("L1", 0.1),
        ("L2", 0.1),
        ("L3", 0.1),
        ("L4", 0.2),
        ("L5", 0.5),
    )
    """``(Red type, weight)``: each training episode's Red is drawn from these."""
    clone: CloneConfig | None = None
    """Start PPO from a behaviour-cloned teacher (``None``: from fresh weights).
    Needs ``terrain_obs`` in the training game."""
    n_episodes: int = 200
    """Evaluation episodes per level."""
    eval_seed: int = 1_000_000
    """Episode ``i`` of every evaluation uses ``jax.random.key(eval_seed + i)``."""

    def __post_init__(self):
        check_fields(self)
        if self.n_episodes < 1:
            raise InvalidParameterError(
                f"n_episodes must be >= 1, got {self.n_episodes}"
            )
        object.__setattr__(
            self, "mixture", tuple((str(n), float(w)) for n, w in self.mixture)
        )
        red_mixture_kwargs(self.mixture)  # validates the mixture
        if self.clone is not None and not dict(self.training.game_kwargs).get(
            "terrain_obs", False
        ):
            raise InvalidParameterError(
                "clone needs terrain_obs=True in training.game_kwargs (the teacher "
                "reads the terrain features)"
            )

    @property
    def training_config(self) -> TrainingConfig:
        """The league run: ``training`` with the mixture's Red."""
        kwargs = {**dict(self.training.game_kwargs), **red_mixture_kwargs(self.mixture)}
        return self.training.replace(game_kwargs=kwargs)


def evaluate_ladder(checkpoint: str, config: WargameLadderConfig, progress, label):
    """:func:`evaluate_blue` of ``checkpoint`` against every level, beside the
    targets and the reference's PPO."""
    levels = {}
    for level in LEVELS:
        summary = evaluate_blue(checkpoint, level, config.n_episodes, config.eval_seed)
        summary["target"] = TARGETS[level]
        summary["reference_ppo"] = REFERENCE_PPO[level]
        summary["target_met"] = summary["win_rate"] >= TARGETS[level]
        levels[level] = summary
        progress(f"{label} {level}: {rate_cell(summary)} (target {TARGETS[level]:.2f})")
    return levels


def run_wargame_ladder(
    config: WargameLadderConfig, seeds: int | None, progress, stages
) -> dict:
    """Clone the teacher (stage ``clone``, with ``config.clone``), train one Blue
    (stage ``train``) and evaluate both against every level."""
    if seeds not in (None, 1):
        raise InvalidParameterError(
            f"wargame_ladder trains one Blue (seed {config.training.seed}); "
            f"seeds={seeds} is not supported"
        )
    training = config.training_config
    results: dict[str, Any] = {}
    if config.clone is not None:
        clone = config.clone
        cloned = stages.run(
            "clone",
            {"training": training.identity(), "clone": dataclasses.asdict(clone)},
            lambda folder: clone_blue(training, clone, folder, progress),
        )
        training = training.replace(
            init_checkpoint=cloned["checkpoint"],
            critic_warmup_chunks=clone.critic_warmup_chunks,
        )
        results["clone"] = {
            **{k: v for k, v in cloned.items() if k != "checkpoint"},
            "config": dataclasses.asdict(clone),
            "levels": evaluate_ladder(cloned["checkpoint"], config, progress, "clone"),
        }
    trained = stages.run(
        "train",
        training.identity(),
        lambda folder: train_blue(training, folder, "train", progress),
    )
    levels = evaluate_ladder(trained["checkpoint"], config, progress, "trained")
    return {
        "levels": levels,
        "all_targets_met": all(s["target_met"] for s in levels.values()),
        "n_episodes": config.n_episodes,
        "eval_seed": config.eval_seed,
        "mixture": [list(p) for p in config.mixture],
        "training": {k: v for k, v in trained.items() if k != "checkpoint"},
        **results,
        "stage_wall_s": dict(stages.timing_s),
    }


register_experiment(
    "wargame_ladder",
    run_wargame_ladder,
    {
        "default": WargameLadderConfig(
            training=LADDER_TRAINING.replace(lr=1e-4),
            mixture=(("L1", 0.1), ("L2", 0.1), ("L3", 0.1), ("L4", 0.3), ("L5", 0.4)),
            clone=CloneConfig(),
        ),
        "quick": WargameLadderConfig(
            training=LADDER_TRAINING.replace(
                total_timesteps=4 * 16 * 2,
                n_envs=4,
                n_steps=16,
                num_chunks=2,
                hidden=(16,),
                num_minibatches=2,
                update_epochs=1,
            ),
            clone=CloneConfig(num_episodes=4, num_updates=4, batch_size=64),
            n_episodes=8,
        ),
    },
    "default",
    description="a Blue trained through the league vs the scripted Red ladder "
    "L1-L5: win/draw/loss with 95% intervals beside the reference's PPO",
    markdown_fn=wargame_report.markdown_wargame_ladder,
)
