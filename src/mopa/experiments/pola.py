"""Experiments of the POLA paper (Zhao et al. 2022): ``pola-fig3`` (exact IPD),
``pola-ipd`` and ``pola-coin`` (sampled, Figs. 4-5).

``pola-fig3``: for each method (LOLA or outer POLA with tabular, MLP or
pre-conditioned tabular policies) and contribution factor, the fraction of seeds
that find tit-for-tat (:func:`mopa.algos.pola.exact.is_tft`). The per-cell
learning rates are those of the paper's published commands; where the paper
published none (LOLA with an MLP at cf <= 1.25, and pre-conditioned LOLA, which
"never found TFT"), the setting used is listed in :data:`FIG3_FALLBACKS` and in
``results.json``.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos.pola.exact import ExactConfig, p_tft
from mopa.algos.pola.sampled import (
    SampledConfig,
    chunk_line,
    env_steps,
    summarise_seeds,
    train_seeds,
)
from mopa.core.checks import check_fields
from mopa.core.stages import Stages
from mopa.errors import InvalidParameterError, UnknownNameError
from mopa.report import pola_report
from mopa.runs.registry import register_experiment

CONTRIB_FACTORS = (1.1, 1.25, 1.33, 1.4, 1.6)

FIG3_SETTINGS: dict[str, dict[float, dict]] = {
    "lola_tabular": {
        cf: dict(lr_inner=3.0, lr_outer=25.0, num_epochs=30) for cf in CONTRIB_FACTORS
    },
    "pola_tabular": {
        cf: dict(lr_inner=lr, lr_outer=0.3, outer_beta=0.1, num_epochs=2)
        for cf, lr in zip(CONTRIB_FACTORS, (5.0, 5.0, 5.0, 4.0, 2.5), strict=True)
    },
    "lola_mlp": {
        1.1: dict(lr_inner=0.4, lr_outer=0.05, num_epochs=100),
        1.25: dict(lr_inner=0.4, lr_outer=0.05, num_epochs=100),
        1.33: dict(lr_inner=0.4, lr_outer=0.05, num_epochs=100),
        1.4: dict(lr_inner=0.3, lr_outer=0.1, num_epochs=100),
        1.6: dict(lr_inner=0.12, lr_outer=0.05, num_epochs=100),
    },
    "pola_mlp": {
        1.1: dict(lr_inner=0.3, lr_outer=0.03, outer_beta=0.1, num_epochs=2),
        1.25: dict(lr_inner=0.25, lr_outer=0.03, outer_beta=0.13, num_epochs=2),
        1.33: dict(lr_inner=0.25, lr_outer=0.02, outer_beta=0.13, num_epochs=2),
        1.4: dict(lr_inner=0.2, lr_outer=0.03, outer_beta=0.1, num_epochs=2),
        1.6: dict(lr_inner=0.12, lr_outer=0.03, outer_beta=0.05, num_epochs=2),
    },
    "lola_precond": {
        cf: dict(lr_inner=lr, lr_outer=0.05, num_epochs=100)
        for cf, lr in zip(CONTRIB_FACTORS, (0.4, 0.5, 0.4, 0.3, 0.3), strict=True)
    },
    "pola_precond": {
        cf: dict(lr_inner=lr, lr_outer=0.05, outer_beta=0.5, num_epochs=10)
        for cf, lr in zip(CONTRIB_FACTORS, (0.4, 0.5, 0.4, 0.3, 0.3), strict=True)
    },
}
"""Per method and contribution factor: the :class:`ExactConfig` fields of the
paper's commands (``LOLA_exact.py`` flags ``--lr_policies_inner``,
``--lr_policies_outer``, ``--outer_beta``, ``--num_epochs``)."""

FIG3_FALLBACKS = {
    "lola_mlp": "cf 1.1 and 1.25 have no published setting; the cf 1.33 one is used",
    "lola_precond": "no published setting; POLA-precond's step sizes with 100 "
    "epochs (10x POLA's) are used",
}
"""Cells whose setting the paper did not publish, and what is used instead."""


def method_config(method: str, cf: float) -> ExactConfig:
    """The :class:`ExactConfig` of one Fig. 3 cell."""
    algo, policy = method.split("_")
    return ExactConfig(
        method=algo, policy=policy, contrib_factor=cf, **FIG3_SETTINGS[method][cf]
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fig3Config:
    """The Fig. 3 experiment: P(find TFT) per method and contribution factor."""

    methods: tuple[str, ...] = tuple(FIG3_SETTINGS)
    """Methods to run (keys of :data:`FIG3_SETTINGS`)."""
    contrib_factors: tuple[float, ...] = CONTRIB_FACTORS
    """Contribution factors (each must have a setting)."""
    num_seeds: int = 20
    """Seeds per cell."""
    seed: int = 0
    """Base PRNG seed; cell seeds are derived from it."""
    epochs_scale: float = 1.0
    """Multiplies every cell's number of epochs (rounded up; < 1 for quick runs)."""

    def __post_init__(self):
        check_fields(self)
        for method in self.methods:
            if method not in FIG3_SETTINGS:
                raise UnknownNameError(
                    f"methods: unknown method {method!r}; choose from "
                    f"{', '.join(FIG3_SETTINGS)}"
                )
        for cf in self.contrib_factors:
            if cf not in CONTRIB_FACTORS:
                raise InvalidParameterError(
                    f"contrib_factors: {cf} has no setting; choose from "
                    f"{CONTRIB_FACTORS}"
                )
        if self.num_seeds < 1:
            raise InvalidParameterError(f"num_seeds must be >= 1, got {self.num_seeds}")
        if self.epochs_scale <= 0:
            raise InvalidParameterError(
                f"epochs_scale must be > 0, got {self.epochs_scale}"
            )


def run_fig3(config: Fig3Config, seeds: int | None, progress, stages=None) -> dict:
    """Run every cell; returns ``{"p_tft": {METHOD: {CF: float}}, ...}``."""
    num_seeds = config.num_seeds if seeds is None else seeds
    results: dict = {"p_tft": {}, "final_value": {}, "max_pola_iters": {}}
    settings: dict = {}
    for m, method in enumerate(config.methods):
        for c, cf in enumerate(config.contrib_factors):
            cell = method_config(method, cf)
            epochs = int(np.ceil(cell.num_epochs * config.epochs_scale))
            cell = dataclasses.replace(cell, num_epochs=epochs)
            key = jax.random.fold_in(jax.random.key(config.seed), 100 * m + c)
            p, out = p_tft(cell, jax.random.split(key, num_seeds))
            results["p_tft"].setdefault(method, {})[str(cf)] = p
            results["final_value"].setdefault(method, {})[str(cf)] = float(
                np.mean(np.asarray(out.values[:, -1]))
            )
            results["max_pola_iters"].setdefault(method, {})[str(cf)] = int(
                np.max(np.asarray(out.iters))
            )
            settings.setdefault(method, {})[str(cf)] = dataclasses.asdict(cell)
            progress(f"{method:13s} cf={cf:<5} P(TFT)={p:.2f}")
    results["num_seeds"] = num_seeds
    results["settings"] = settings
    results["fallbacks"] = {
        m: FIG3_FALLBACKS[m] for m in config.methods if m in FIG3_FALLBACKS
    }
    return results


register_experiment(
    "pola-fig3",
    run_fig3,
    {
        "paper": Fig3Config(),
        "quick": Fig3Config(
            methods=("lola_tabular", "pola_tabular"),
            contrib_factors=(1.6,),
            num_seeds=4,
            epochs_scale=0.5,
        ),
    },
    "paper",
    plot_fn=pola_report.plot_fig3,
    description="exact IPD: P(find TFT) of LOLA vs outer POLA per policy class and cf",
)


# -- sampled experiments (Figs. 4-5) -----------------------------------------------
SAMPLED_METHODS = ("lola_dice", "pola_dice", "pola_om")

PAPER_SAMPLED = {
    "ipd": {
        "lola_dice": SampledConfig(
            env="ipd", n_update=20001, inner_steps=1, outer_steps=1, lr_in=0.05,
            lr_out=0.003, lr_v=0.0005, inner_beta=0.0, outer_beta=0.0,
            batch_size=2000, rollout_len=50, hidden_size=64, contrib_factor=1.33,
        ),
        "pola_dice": SampledConfig(
            env="ipd", n_update=101, inner_steps=2, outer_steps=200, lr_in=0.005,
            lr_out=0.003, lr_v=0.0005, inner_beta=10.0, outer_beta=100.0,
            batch_size=2000, rollout_len=50, hidden_size=64,
        ),
        "pola_om": SampledConfig(
            env="ipd", n_update=101, inner_steps=2, outer_steps=200, lr_in=0.005,
            lr_out=0.003, lr_v=0.0005, inner_beta=10.0, outer_beta=100.0,
            batch_size=2000, rollout_len=50, hidden_size=64, opp_model=True,
            opp_model_steps=1, opp_model_data_batches=200, om_lr_p=0.005,
            om_lr_v=0.0005,
        ),
    },
    "coin": {
        "lola_dice": SampledConfig(
            env="coin", n_update=50001, inner_steps=1, outer_steps=1, lr_in=0.003,
            lr_out=0.003, lr_v=0.0005, inner_beta=0.0, outer_beta=0.0,
            batch_size=2000, rollout_len=50, hidden_size=64,
        ),
        "pola_dice": SampledConfig(
            env="coin", n_update=251, inner_steps=4, outer_steps=200, lr_in=0.01,
            lr_out=0.003, lr_v=0.0005, inner_beta=5.0, outer_beta=150.0,
            batch_size=1000, rollout_len=50, hidden_size=64,
        ),
        "pola_om": SampledConfig(
            env="coin", n_update=251, inner_steps=6, outer_steps=200, lr_in=0.01,
            lr_out=0.003, lr_v=0.0005, inner_beta=15.0, outer_beta=150.0,
            batch_size=1000, rollout_len=50, hidden_size=64, opp_model=True,
            opp_model_steps=1, opp_model_data_batches=200, om_lr_p=0.005,
            om_lr_v=0.0005,
        ),
    },
}  # fmt: skip
"""The paper's published commands (README of the POLA repository), per game."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SampledExperimentConfig:
    """LOLA-DiCE, POLA-DiCE and POLA-OM on one game, several seeds each."""

    env: str = "ipd"
    """Game: ``ipd`` or ``coin``."""
    methods: tuple[str, ...] = SAMPLED_METHODS
    """Methods to run."""
    lola_dice: SampledConfig = PAPER_SAMPLED["ipd"]["lola_dice"]
    """Config of LOLA-DiCE."""
    pola_dice: SampledConfig = PAPER_SAMPLED["ipd"]["pola_dice"]
    """Config of POLA-DiCE."""
    pola_om: SampledConfig = PAPER_SAMPLED["ipd"]["pola_om"]
    """Config of POLA-OM."""
    num_seeds: int = 10
    """Seeds per method."""
    seed: int = 0
    """Base PRNG seed."""

    def __post_init__(self):
        check_fields(self)
        if self.env not in ("ipd", "coin"):
            raise InvalidParameterError(f"env must be ipd or coin, got {self.env!r}")
        for method in self.methods:
            if method not in SAMPLED_METHODS:
                raise UnknownNameError(
                    f"methods: unknown method {method!r}; choose from "
                    f"{', '.join(SAMPLED_METHODS)}"
                )
            if getattr(self, method).env != self.env:
                raise InvalidParameterError(
                    f"{method}: its config plays {getattr(self, method).env!r}, "
                    f"not {self.env!r}"
                )
        if self.num_seeds < 1:
            raise InvalidParameterError(f"num_seeds must be >= 1, got {self.num_seeds}")


def _train_method(
    method: str, cfg: SampledConfig, seed: int, offsets: list[int], progress
) -> dict:
    """Train one method's seeds (keys ``fold_in(key(seed), offset)``) together and
    summarise the last update's evaluation with 95% intervals over seeds
    (:func:`~mopa.algos.pola.sampled.summarise_seeds`), beside the paper's
    budget."""
    keys = jnp.stack([jax.random.fold_in(jax.random.key(seed), o) for o in offsets])
    trained = train_seeds(
        cfg, keys, lambda done, chunk: progress(chunk_line(method, cfg, done, chunk))
    )
    entry = summarise_seeds(trained, cfg)
    paper = PAPER_SAMPLED[cfg.env][method]
    entry["paper_env_steps_per_run"] = env_steps(paper)
    entry["reduction_vs_paper"] = env_steps(paper) / env_steps(cfg)
    entry["num_seeds"] = len(offsets)
    progress(
        f"{method}: {len(offsets)} seeds in {trained.wall_s:.0f} s wall, "
        f"{trained.cpu_s:.0f} s CPU (+ {trained.compile_s:.0f} s compiling); "
        f"vs each other {entry['vs_each_other']:.3f} +/- "
        f"{entry['ci95']['vs_each_other']:.3f}, vs ALLD {entry['vs_alld']:.3f} "
        f"+/- {entry['ci95']['vs_alld']:.3f}"
    )
    return entry


def run_sampled(
    config: SampledExperimentConfig, seeds: int | None, progress, stages=None
) -> dict:
    """Train each method's seeds together (:func:`train_seeds`; compilation timed
    apart) and summarise the last update's evaluation: ``{METHOD:
    {"vs_each_other", "vs_alld", "own_coin_proportion", "ci95", "per_seed",
    "curves", ...}}``. Each method is a stage (``train_METHOD``): rerunning with
    the same method config, base seed and seed count reuses its result."""
    num_seeds = config.num_seeds if seeds is None else seeds
    stages = stages if stages is not None else Stages(None, progress)
    results: dict = {}
    for m, method in enumerate(config.methods):
        cfg = getattr(config, method)
        offsets = [1000 * m + s for s in range(num_seeds)]
        described = {
            "method": method,
            "config": dataclasses.asdict(cfg),
            "seed": config.seed,
            "key_offsets": offsets,
        }
        results[method] = stages.run(
            f"train_{method}",
            described,
            lambda folder, method=method, cfg=cfg, offsets=offsets: _train_method(
                method, cfg, config.seed, offsets, progress
            ),
        )
    return results


def _cpu(paper: SampledConfig, **changes) -> SampledConfig:
    return dataclasses.replace(paper, **changes)


CPU_SAMPLED = {
    "ipd": {
        "lola_dice": _cpu(
            PAPER_SAMPLED["ipd"]["lola_dice"], n_update=1000, lr_out=0.03,
            lr_v=0.01, batch_size=200, hidden_size=16,
        ),
        "pola_dice": _cpu(
            PAPER_SAMPLED["ipd"]["pola_dice"], n_update=100, outer_steps=10,
            lr_in=0.05, lr_out=0.03, lr_v=0.01, batch_size=200, hidden_size=16,
        ),
        "pola_om": _cpu(
            PAPER_SAMPLED["ipd"]["pola_om"], n_update=100, outer_steps=10,
            lr_in=0.05, lr_out=0.03, lr_v=0.01, batch_size=200, hidden_size=16,
            opp_model_data_batches=100, om_lr_p=0.02, om_lr_v=0.01,
        ),
    },
    "coin": {
        "lola_dice": _cpu(
            PAPER_SAMPLED["coin"]["lola_dice"], n_update=150, lr_out=0.03,
            batch_size=100, hidden_size=16,
        ),
        "pola_dice": _cpu(
            PAPER_SAMPLED["coin"]["pola_dice"], n_update=20, outer_steps=10,
            inner_steps=2, lr_out=0.03, batch_size=100, hidden_size=16,
        ),
        "pola_om": _cpu(
            PAPER_SAMPLED["coin"]["pola_om"], n_update=20, outer_steps=10,
            inner_steps=2, lr_out=0.03, batch_size=100, hidden_size=16,
            opp_model_data_batches=10, om_lr_p=0.02,
        ),
    },
}  # fmt: skip
"""CPU presets: far fewer outer steps per update (10 vs 200) with a 10x larger
outer step size, smaller batches (200 / 100 vs 2000 / 1000), 16 GRU units instead
of 64, fewer updates, and (POLA-OM) 100 (IPD) or 10 (Coin Game) opponent-model data
batches instead of 200; each result records ``reduction_vs_paper`` in environment
steps. On the IPD, POLA's lookahead step is 10x the paper's (``lr_in`` 0.05,
LOLA-DiCE's) and the critics' step size 20x (``lr_v``, ``om_lr_v`` 0.01): at 0.0005
a critic cannot reach the game's discounted values (about 3-7) within the preset's
1,000 outer steps, which leaves the DiCE estimates without a baseline. LOLA-DiCE
on the IPD runs as many outer steps (1,000) with the same critic step size, for a
like-for-like comparison. The Coin Game presets keep the paper's critic step
size."""


def _tiny(config: SampledConfig) -> SampledConfig:
    """A seconds-long smoke version of ``config`` (for tests of the pipeline)."""
    return dataclasses.replace(
        config, n_update=2, outer_steps=min(config.outer_steps, 2),
        inner_steps=min(config.inner_steps, 2), batch_size=8, rollout_len=6,
        hidden_size=4, opp_model_data_batches=2,
    )  # fmt: skip


for _env, _name in (("ipd", "pola-ipd"), ("coin", "pola-coin")):
    register_experiment(
        _name,
        run_sampled,
        {
            "paper": SampledExperimentConfig(env=_env, **PAPER_SAMPLED[_env]),
            "cpu": SampledExperimentConfig(
                env=_env,
                num_seeds=3,
                methods=("pola_dice", "pola_om", "lola_dice"),
                **CPU_SAMPLED[_env],
            ),
            "tiny": SampledExperimentConfig(
                env=_env,
                num_seeds=2,
                **{m: _tiny(c) for m, c in CPU_SAMPLED[_env].items()},
            ),
        },
        "cpu",
        plot_fn=pola_report.plot_sampled,
        description=f"{'IPD' if _env == 'ipd' else 'Coin Game'}: LOLA-DiCE, "
        "POLA-DiCE and POLA-OM vs each other and vs ALLD",
    )
