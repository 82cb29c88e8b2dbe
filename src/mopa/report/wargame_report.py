"""The wargame experiments' reports: the ladder
(:mod:`mopa.experiments.wargame`), the transfer benchmarks
(:mod:`mopa.experiments.wargame_transfer`) and the opponent modelling
(:mod:`mopa.experiments.wargame_intent`): ``results.md`` with win, draw and loss
and their Wilson intervals, and the belief's plot. Read ``results.json`` only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def rate_cell(summary: dict[str, Any], name: str = "win") -> str:
    """``0.95 [0.91, 0.97]``: a rate and its interval."""
    low, high = summary[f"{name}_ci95"]
    return f"{summary[f'{name}_rate']:.3f} [{low:.3f}, {high:.3f}]"


def outcome_columns(summary: dict[str, Any]) -> str:
    """The ``wins | draws | losses | win | draw | loss`` cells of a table row."""
    return (
        f"{summary['wins']} | {summary['draws']} | {summary['losses']} | "
        f"{rate_cell(summary)} | {rate_cell(summary, 'draw')} | "
        f"{rate_cell(summary, 'loss')}"
    )


OUTCOME_HEADER = (
    "wins | draws | losses | win rate [95% CI] | draw rate [95% CI] | "
    "loss rate [95% CI]"
)
"""Column titles of :func:`outcome_columns`."""


def ladder_rows(levels: dict[str, Any], suffix: str = "") -> list[str]:
    """The ladder table: one row per level (named ``level + suffix``) with
    targets and the reference."""
    lines = [
        f"| level | {OUTCOME_HEADER} | target | reference PPO |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level, summary in levels.items():
        lines.append(
            f"| {level}{suffix} | {outcome_columns(summary)} | "
            f"{summary['target']:.2f} | "
            f"{summary['reference_ppo']:.2f} |"
        )
    return lines


def markdown_wargame_ladder(results: dict) -> str:
    """``results.md``: the ladder table with intervals, targets and the
    reference's PPO baseline (and the cloned starting point's, when there is
    one)."""
    training = results["training"]
    mixture = ", ".join(f"{name} {weight:g}" for name, weight in results["mixture"])
    met = "met" if results["all_targets_met"] else "NOT met"
    clone = results.get("clone")
    start = (
        "from an actor cloned from the cover-seeking scripted teacher"
        if clone is not None
        else "from fresh weights"
    )
    lines = [
        "# A trained Blue against the scripted Red ladder (battalion_vs_red)",
        "",
        f"Targets (win rate at least 0.95 against L1-L4, 0.60 against L5): **{met}**.",
        "",
        f"Blue trained through `mopa.league` (MAPPO, discrete actions) for "
        f"{training['env_steps']:,} steps {start}, against a per-episode mixture "
        f"of Red levels ({mixture}); evaluated greedily over "
        f"{results['n_episodes']} episodes per level (episode i seeded "
        f"{results['eval_seed']} + i). Outcomes from the game's end signals; "
        "draws (simultaneous break, 500-step limit) are counted. Intervals: 95% "
        "Wilson.",
        "",
        *ladder_rows(results["levels"]),
        "",
        f"Training wall time: {training['wall_s']:.0f} s.",
        "",
    ]
    if clone is not None:
        lines += [
            "## The cloned starting point (before PPO)",
            "",
            f"Behaviour cloning: {clone['samples']:,} teacher steps, greedy "
            f"agreement with the teacher {clone['teacher_agreement']:.3f}, "
            f"{clone['wall_s']:.0f} s.",
            "",
            *ladder_rows(clone["levels"], " (clone)"),
            "",
        ]
    return "\n".join(lines)


def markdown_wargame_generalization(results: dict) -> str:
    """``results.md``: held-out scenarios zero-shot, fine-tuned and specialist."""
    budgets = results["budgets"]
    criteria = results["criteria"]
    n = results["n_episodes"]
    ratio = criteria["fine_tuned_over_specialist"]
    lines = [
        "# Generalization across procedural scenarios (battalion_vs_red, Red "
        f"{results['red']})",
        "",
        f"A generalist trained for {budgets['generalist_steps']:,} steps on "
        f"{len(results['scenarios']['train'])} procedural scenarios; each held-out "
        "scenario gets the generalist zero-shot, the generalist fine-tuned on it "
        f"for {budgets['finetune_steps']:,} steps ({_fine_tuning_text(budgets)}), "
        "and a specialist trained on it "
        f"alone from scratch for {budgets['specialist_steps']:,} steps. "
        f"{n} greedy episodes per policy and scenario; draws counted; 95% Wilson "
        "intervals.",
        "",
        f"| scenario | policy | {OUTCOME_HEADER} |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    labels = {"zero_shot": "zero-shot", "fine_tuned": "fine-tuned",
              "specialist": "specialist"}  # fmt: skip
    for name, row in results["heldout"].items():
        for policy, label in labels.items():
            lines.append(f"| {name} | {label} | {outcome_columns(row[policy])} |")
    pooled = results["pooled"]
    for policy, label in labels.items():
        lines.append(f"| all held-out | {label} | {outcome_columns(pooled[policy])} |")
    lines.append(
        "| training scenarios | generalist | "
        f"{outcome_columns(pooled['training_scenarios'])} |"
    )
    lines += [
        "",
        "The reference's criteria on these figures: zero-shot win rate on held-out "
        f"scenarios {criteria['zero_shot_win_rate']:.3f} (criterion >= 0.55: "
        f"{_yes(criteria['zero_shot_at_least_0.55'])}); fine-tuned over specialist "
        + (f"{ratio:.3f}" if ratio is not None else "undefined (specialists never won)")
        + " (criterion >= 0.8: "
        f"{_yes(criteria['fine_tuned_at_least_0.8_of_specialist'])}).",
        "",
        "Scenarios (game parameters; the terrain layout is drawn per episode):",
        "",
    ]
    fields = list(next(iter(results["scenarios"]["train"].values())))
    lines += [
        "| scenario | set | " + " | ".join(fields) + " |",
        "|---|---|" + "---:|" * len(fields),
    ]
    for group in ("train", "heldout"):
        for name, values in results["scenarios"][group].items():
            cells = " | ".join(f"{values[f]:g}" for f in fields)
            lines.append(f"| {name} | {group} | {cells} |")
    lines.append("")
    return "\n".join(lines)


def _fine_tuning_text(budgets: dict[str, Any]) -> str:
    return (
        f"learning rate {budgets['finetune_lr']:g}; in the first "
        f"{budgets['finetune_warmup_chunks']} of {budgets['num_chunks']} chunks "
        "only the fresh critic learns"
    )


def _yes(flag: bool) -> str:
    return "met" if flag else "not met"


def markdown_wargame_terrain(results: dict) -> str:
    """``results.md``: win/draw/loss on both terrains and the drops."""
    budgets = results["budgets"]
    drops, criteria = results["drops"], results["criteria"]

    def terrain(values: dict[str, Any]) -> str:
        return ", ".join(f"{k}={v}" for k, v in values.items())

    lines = [
        f"# Terrain transfer (battalion_vs_red, Red {results['red']})",
        "",
        f"Source terrain: {terrain(results['source'])}. Target terrain: "
        f"{terrain(results['target'])}. Blue trained on the source for "
        f"{budgets['source_steps']:,} steps; fine-tuned on the target for "
        f"{budgets['finetune_steps']:,} steps from the trained weights "
        f"({_fine_tuning_text(budgets)}). Two "
        "controls are trained on the target from scratch: with the fine-tuning "
        "budget (what the budget alone buys) and with the source's budget (how hard "
        "the target terrain is for a Blue trained on it). "
        f"{results['n_episodes']} greedy episodes per row; draws counted; 95% "
        "Wilson intervals.",
        "",
        f"| policy | evaluated on | {OUTCOME_HEADER} |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    rows = (
        ("source_on_source", "trained on source", "source"),
        ("source_on_target", "trained on source (zero-shot)", "target"),
        ("fine_tuned_on_target", "fine-tuned on target", "target"),
        ("scratch_on_target", "target from scratch (fine-tuning budget)", "target"),
        ("target_on_target", "target from scratch (source budget)", "target"),
    )
    for key, policy, where in rows:
        lines.append(
            f"| {policy} | {where} | {outcome_columns(results['evaluations'][key])} |"
        )

    def cell(entry: dict[str, Any]) -> str:
        low, high = entry["ci95"]
        return f"{100 * entry['diff']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"

    lines += [
        "",
        "Win-rate drop, source on source minus each row on the target, in points "
        "(95% Newcombe interval):",
        "",
        "| | drop | reference criterion | point estimate | whole interval |",
        "|---|---:|---|---|---|",
        f"| zero-shot | {cell(drops['zero_shot'])} | < 20 points | "
        f"{_yes(criteria['zero_shot_drop_under_0.20'])} | "
        f"{_yes(criteria['zero_shot_drop_upper_under_0.20'])} |",
        f"| fine-tuned | {cell(drops['fine_tuned'])} | < 5 points | "
        f"{_yes(criteria['fine_tuned_drop_under_0.05'])} | "
        f"{_yes(criteria['fine_tuned_drop_upper_under_0.05'])} |",
        f"| from scratch, fine-tuning budget | {cell(drops['scratch'])} | | | |",
        f"| from scratch, source budget | {cell(drops['target_trained'])} | | | |",
        "",
    ]
    return "\n".join(lines)


LABELS = {
    "blind": "type-blind Blue (observations only)",
    "aware": "type-aware Blue (online belief)",
    "oracle": "oracle Blue (true type; reference)",
}


def _by_type_header(labels: dict, names) -> tuple[str, str]:
    """The header and rule of a markdown table with a row per Red type and a
    column per entry of ``names`` (its label up to the parenthesis)."""
    return (
        "| Red type | " + " | ".join(labels[n].split(" (")[0] for n in names) + " |",
        "| --- |" + " --- |" * len(names),
    )


def _rate(summary: dict) -> str:
    lo, hi = summary["win_rate_ci95"]
    return f"{summary['win_rate']:.3f} [{lo:.3f}, {hi:.3f}]"


def _mean(summary: dict) -> str:
    lo, hi = summary["ci95"]
    return f"{summary['mean']:.2f} [{lo:.2f}, {hi:.2f}]"


def verdict(results: dict) -> str:
    """One sentence: whether the type-aware Blue beat the type-blind one with
    non-overlapping 95% intervals."""
    aware, blind = results["conditions"]["aware"], results["conditions"]["blind"]
    if results["aware_beats_blind"]:
        return (
            f"The type-aware Blue beat the type-blind Blue with non-overlapping 95% "
            f"intervals: win rate {_rate(aware)} against {_rate(blind)}."
        )
    return (
        f"The type-aware Blue did not beat the type-blind Blue with non-overlapping "
        f"95% intervals: win rate {_rate(aware)} against {_rate(blind)}."
    )


def plan_verdict(results: dict) -> str:
    """One sentence: whether the planning Blue with the online belief beat the
    planning Blue without one with non-overlapping 95% intervals."""
    planning = results["planning"]
    aware = planning["conditions"]["aware_planner"]
    blind = planning["conditions"]["blind_planner"]
    did = "beat" if planning["beats"] else "did not beat"
    return (
        f"The type-aware planning Blue {did} the type-blind planning Blue with "
        f"non-overlapping 95% intervals: win rate {_rate(aware)} against "
        f"{_rate(blind)}."
    )


PLAN_LABELS = {
    "blind_planner": "type-blind planner (best single plan)",
    "aware_planner": "type-aware planner (online belief)",
    "oracle_planner": "oracle planner (true type; reference)",
}
CONDITIONS = tuple(LABELS)
"""The opponent-modelling Blues, in table order (the experiment's conditions)."""
PLANNERS = tuple(PLAN_LABELS)
"""The planning Blues, in table order."""


def _planning_markdown(results: dict) -> list[str]:
    planning = results["planning"]
    lines = [
        "",
        "## The planning Blue",
        "",
        "Blues that choose, at every step, the plan of the family probe with the "
        "highest expected win rate under their belief (the probe's win-rate table, "
        "measured on other episodes): the blind one with the flat belief (it plays "
        f"the best single plan, {planning['blind_plan']}), the aware one with the "
        "online posterior of its own classifier (fitted on its own games with "
        "decoy beliefs), the oracle with the true type. The same evaluation "
        "episodes as above.",
        "",
        "| Blue | wins | draws | losses | win rate [95% CI] | episode return "
        "[95% CI] |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]
    for name in PLANNERS:
        c = planning["conditions"][name]
        lines.append(
            f"| {PLAN_LABELS[name]} | {c['wins']} | {c['draws']} | {c['losses']} | "
            f"{_rate(c)} | {_mean(c['return'])} |"
        )
    diff, odiff = planning["difference"], planning["oracle_minus_blind"]
    lines += [
        "",
        f"Paired win-rate difference: aware - blind {diff['mean']:+.3f} "
        f"[{diff['ci95'][0]:+.3f}, {diff['ci95'][1]:+.3f}]; oracle - blind "
        f"{odiff['mean']:+.3f} [{odiff['ci95'][0]:+.3f}, {odiff['ci95'][1]:+.3f}].",
        "",
        f"**{plan_verdict(results)}**",
        "",
        *_by_type_header(PLAN_LABELS, PLANNERS),
    ]
    for red in results["family"]:
        cells = [
            f"{_rate(planning['per_type'][n][red])}"
            for n in PLANNERS
            if red in planning["per_type"][n]
        ]
        lines.append(f"| {red} | " + " | ".join(cells) + " |")
    belief = planning["belief"]
    lines += [
        "",
        f"The planner's belief by step (temperature {belief['temperature']:.2f}):",
        "",
        "| step | accuracy (evaluation) | ECE (evaluation) | episodes | "
        "accuracy (held-out) | ECE (held-out) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, step in enumerate(results["belief"]["steps"]):
        lines.append(
            f"| {step} | {belief['accuracy_by_step'][i]:.3f} | "
            f"{belief['ece_by_step'][i]:.3f} | {belief['n_episodes_by_step'][i]} | "
            f"{belief['heldout_accuracy_by_step'][i]:.3f} | "
            f"{belief['heldout_ece_by_step'][i]:.3f} |"
        )
    return lines


def wargame_markdown(results: dict) -> str:
    """``results.md``: the outcome table, per-type win rates, the belief by step."""
    lines = [
        "# Opponent modelling in the wargame (W7 item 4)",
        "",
        f"Blue against the mixed Red strategy family ({', '.join(results['family'])};"
        f" type drawn uniformly per episode, hidden from Blue). "
        f"{results['num_seeds']} seeds x {results['eval_episodes_per_seed']} "
        f"episodes per condition, the same episodes for every condition; "
        f"{results['train_steps_per_seed']:,} training steps per seed for both "
        "trained Blues, the first "
        f"{results.get('warm_start', 0.0):.0%} of them shared (both with the flat "
        "belief). Win rate with its Wilson 95% interval over all episodes.",
        "",
        "| Blue | wins | draws | losses | win rate [95% CI] | win rate per seed "
        "| episode return [95% CI] |",
        "| --- | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for name in CONDITIONS:
        c = results["conditions"][name]
        seeds = ", ".join(f"{r:.3f}" for r in c["seed_win_rates"])
        lines.append(
            f"| {LABELS[name]} | {c['wins']} | {c['draws']} | {c['losses']} | "
            f"{_rate(c)} | {seeds} | {_mean(c['return'])} |"
        )
    diff = results["aware_minus_blind"]
    odiff = results["oracle_minus_blind"]
    lines += [
        "",
        f"Paired win-rate difference over the same episodes: aware - blind "
        f"{diff['mean']:+.3f} [{diff['ci95'][0]:+.3f}, {diff['ci95'][1]:+.3f}]; "
        f"oracle - blind {odiff['mean']:+.3f} "
        f"[{odiff['ci95'][0]:+.3f}, {odiff['ci95'][1]:+.3f}].",
        "",
        f"**{verdict(results)}**",
        "",
        "## Win rate by Red type",
        "",
        "Win rate [95% CI] (wins / draws / losses) and the mean episode return "
        "(Blue's training objective: 5 x damage dealt - 5 x damage received, "
        "+-10 for a win or a loss, -0.01 a step).",
        "",
        *_by_type_header(LABELS, CONDITIONS),
    ]
    for red in results["family"]:
        cells = []
        for name in CONDITIONS:
            s = results["per_type"][name][red]
            cells.append(
                f"{_rate(s)} (W{s['wins']}/D{s['draws']}/L{s['losses']}); "
                f"return {s['return']['mean']:.2f}"
            )
        lines.append(f"| {red} | " + " | ".join(cells) + " |")
    probe = results["family_probe"]
    lines += [
        "",
        "## Do the strategies call for different plans?",
        "",
        "Scripted Blue plans (face Red, fire when it is in the arc; hold "
        "position, from the start or until a step, then close to a distance) "
        "against each Red type, "
        f"{probe['num_episodes']} episodes each: win / draw / loss rates.",
        "",
        "| Red type | " + " | ".join(probe["plans"]) + " | best plan by win rate |",
        "| --- |" + " --- |" * (len(probe["plans"]) + 1),
    ]
    for k, red in enumerate(probe["types"]):
        cells = [
            f"{probe['win_rate'][p][k]:.2f} / {probe['draw_rate'][p][k]:.2f} / "
            f"{probe['loss_rate'][p][k]:.2f}"
            for p in range(len(probe["plans"]))
        ]
        best = probe["best_plan_by_win_rate"][red]
        lines.append(f"| {red} | " + " | ".join(cells) + f" | {best} |")
    lines += [
        "",
        "Against the uniform family the best single plan "
        f"({probe['best_single_plan']}) wins "
        f"{probe['best_single_plan_win_rate']:.3f}; playing each type's best "
        f"plan wins {probe['best_plan_per_type_win_rate']:.3f}: among these plans, "
        "knowing the type is worth the difference.",
    ]
    belief = results["belief"]
    lines += [
        "",
        "## Belief over Red's type by step",
        "",
        "The aware Blue's online belief: a classifier over the rows of Blue's own "
        f"observations recorded every {belief['stride']} "
        f"steps (temperature {belief['temperature']:.2f}); accuracy and ECE over "
        "the evaluation episodes still being played at that step (and on held-out "
        f"data episodes). Chance is {belief['chance']:.3f}.",
        "",
        "| step | accuracy (evaluation) | ECE (evaluation) | episodes | "
        "accuracy (held-out) | ECE (held-out) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, step in enumerate(belief["steps"]):
        lines.append(
            f"| {step} | {belief['accuracy_by_step'][i]:.3f} | "
            f"{belief['ece_by_step'][i]:.3f} | {belief['n_episodes_by_step'][i]} | "
            f"{belief['heldout_accuracy_by_step'][i]:.3f} | "
            f"{belief['heldout_ece_by_step'][i]:.3f} |"
        )
    if "planning" in results:
        lines += _planning_markdown(results)
    lines.append("")
    return "\n".join(lines)


def plot_wargame_intent(results: dict, out_dir: Path) -> list[Path]:
    """``wargame_intent_belief.png``: belief accuracy and ECE by step."""
    from matplotlib.figure import Figure

    from mopa.report.figures import save_png

    belief = results["belief"]
    steps = np.asarray(belief["steps"])
    figure = Figure(figsize=(6.0, 3.8), dpi=100, facecolor="white")
    axes = figure.subplots()
    axes.plot(
        steps, belief["accuracy_by_step"], "-o", ms=3, label="accuracy (evaluation)"
    )
    axes.plot(
        steps, belief["heldout_accuracy_by_step"], "--", label="accuracy (held-out)"
    )
    axes.plot(steps, belief["ece_by_step"], "-s", ms=3, label="ECE (evaluation)")
    axes.axhline(belief["chance"], color="grey", lw=0.8, ls=":", label="chance")
    axes.set_ylim(0, 1)
    axes.set_xlabel("game step")
    axes.set_title("Belief over Red's strategy type")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return [save_png(figure, Path(out_dir) / "wargame_intent_belief.png")]
