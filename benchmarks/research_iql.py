"""Exps 2-4 like for like: the research's own IQL code and mopa's, the same runs
side by side, with the same budgets and the same greedy evaluation.

The research's code (``rlogger/marl-opp-aware``) is not part of mopa: it lives in a
checkout outside the repository and runs in its own virtual environment (jax
0.4.38, flax 0.10.2, JaxMARL at the revision its code needs), as subprocesses of
this script. Three commands:

* ``research``: trains each condition with the research's script and config
  (``NUM_SEEDS`` seeds vmapped, its 2M steps per seed), one run at a time under
  ``nice``; reads its own greedy test metric at the end of training (predator
  return, as its writeup reads it: return / 10 = captures); and plays
  ``--episodes`` greedy episodes per seed of the saved teams with
  ``research_code_side.py eval`` (per-episode captures counted from the rewards
  the game pays). With ``exp3_iql`` and ``exp3_oa_iql`` it also runs the
  research's cross-play tournament (``src/tournament.py``); with
  ``exp4_mappo_random`` its MAPPO (the research reads MAPPO's training return);
  and it dumps rollouts of the research's games (``research_code_side.py
  rollout``) for ``benchmarks/research_game_parity.py``.
* ``mopa``: the same conditions with mopa's ``research_*`` presets (``mopa train
  --preset``), the same seeds count and budget, one run at a time under ``nice``,
  then ``--episodes`` greedy episodes per seed.
* ``table``: the side-by-side table of two such files, as markdown.

Every run's wall time is recorded; the machine may be shared, and the load average
at the start and end of each run is recorded beside it. Runs already finished in
``--work`` are reused (their recorded wall times with them). Writes ``--out``
(JSON) and ``--out`` with ``.meta.json``::

    JAX_PLATFORMS=cpu python benchmarks/research_iql.py research \\
        --checkout /work/research/marl-opp-aware \\
        --python /work/research/venv/bin/python --work /tmp/research_iql \\
        --out benchmarks/research_iql_code.json
    JAX_PLATFORMS=cpu python benchmarks/research_iql.py mopa \\
        --work /tmp/research_iql --out benchmarks/research_iql_mopa.json
    python benchmarks/research_iql.py table \\
        benchmarks/research_iql_code.json benchmarks/research_iql_mopa.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESEARCH_SIDE = HERE / "research_code_side.py"

CONDITIONS = {
    "exp2_baseline": ("iql_teams", "ql_teams_static_baseline"),
    "exp2_cw": ("iql_teams", "ql_teams_static_cw"),
    "exp2_ccw": ("iql_teams", "ql_teams_static_ccw"),
    "exp3_iql": ("iql_teams_mlp", "ql_teams_mlp_simple_tag"),
    "exp3_oa_iql": ("iql_teams_oa_mlp", "ql_teams_oa_mlp_simple_tag"),
    "exp4_iql_random": ("iql_teams_mlp", "ql_teams_resources_random"),
}
"""IQL conditions: the research's training script and config (its README's
commands for Exps 2-4)."""

MAPPO = ("mappo_teams_mlp", "mappo_teams_resources_random")
"""Exp 4's MAPPO on random placement, the numerator of the research's ratio."""

MOPA_PRESETS = {
    "exp2_baseline": "research_iql_rnn_tag_static_baseline",
    "exp2_cw": "research_iql_rnn_tag_static_cw",
    "exp2_ccw": "research_iql_rnn_tag_static_ccw",
    "exp3_iql": "research_iql_tag",
    "exp3_oa_iql": "research_oa_iql_tag",
    "exp4_iql_random": "research_iql_tag_resources_random",
    "exp4_mappo_random": "research_mappo_tag_resources_random",
}
"""mopa's preset for each condition: the research's settings."""

WRITEUP = {
    "exp2_baseline": {"predator_return": 22.19, "captures": 2.2},
    "exp2_cw": {"predator_return": 28.23, "captures": 2.8},
    "exp2_ccw": {"predator_return": 26.25, "captures": 2.6},
    "exp3_iql": {"captures": 3.4, "note": "greedy-prey column mean, all predators"},
    "exp3_oa_iql": {"captures": 3.4, "note": "greedy-prey column mean, all predators"},
    "exp4_iql_random": {"predator_return": 33.5, "captures": 3.35},
    "exp4_mappo_random": {"predator_return": 110.5},
}
"""What the research's writeup (seed 000) gives for each condition."""

LOGGED_SCALE = 4
"""JaxMARL's ``MPELogWrapper`` (the research's loggers) multiplies every agent's
reward by the number of agents (4 in ``simple_tag``) before it sums a logged
return: a capture pays each predator 10 and logs 40, so the writeup's return / 10
is 4x the captures."""

RESEARCH_TAIL = 20
"""Updates at the end of training the research's Exp 4 table averages."""


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed(command: list[str], cwd: Path, log: Path, env: dict | None = None) -> dict:
    """Run ``command`` to completion (output to ``log``); its wall time, the CPU
    time of the process and its children, and the load average around it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_start = _load_average()
    start = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.run(
            command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env
        ).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code:
        tail = log.read_text()[-3000:]
        raise SystemExit(f"{' '.join(command)} failed ({code}):\n{tail}")
    return {
        "command": " ".join(command),
        "wall_s": round(wall, 1),
        "cpu_s": round(
            (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1
        ),
        "load_average_start": load_start,
        "load_average_end": _load_average(),
    }


def once(record: Path, make) -> dict:
    """The JSON at ``record``, made by ``make()`` the first time."""
    if record.exists():
        return json.loads(record.read_text())
    result = make()
    record.write_text(json.dumps(result, indent=1) + "\n")
    return result


def captures_summary(per_seed: list[list[float]]) -> dict:
    """Mean captures, the 95% normal interval over every episode, and the 95%
    Student-t interval over the seeds' means."""
    from mopa.eval.intervals import mean_interval

    seed_means = [float(np.mean(s)) for s in per_seed]
    return {
        "mean": float(np.mean(np.concatenate(per_seed))),
        "ci95_episodes": mean_interval(np.concatenate(per_seed))["ci95"],
        "seed_means": seed_means,
        "ci95_seeds": mean_interval(seed_means, method="t")["ci95"],
        "episodes": int(sum(len(s) for s in per_seed)),
    }


# -- the research's code ---------------------------------------------------------
def research_env() -> dict:
    return {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "WANDB_MODE": "disabled",
        "PYTHONHASHSEED": "0",
    }


def research_versions(python: str) -> dict:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "names = ('jax', 'jaxlib', 'flax', 'optax', 'chex', 'flashbax', 'jaxmarl',"
        " 'hydra-core', 'numpy')\n"
        "print(json.dumps({n: m.version(n) for n in names} |"
        " {'python': sys.version.split()[0]}))"
    )
    return json.loads(subprocess.check_output([python, "-c", code], text=True))


def git_revision(path: Path) -> str | None:
    for candidate in (path / "REVISION",):
        if candidate.exists():
            return candidate.read_text().strip()
    try:
        return subprocess.check_output(
            ["git", "rev-parse", "HEAD"], cwd=path, text=True, stderr=subprocess.DEVNULL
        ).strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def train_research(args, name: str, script: str, alg: str) -> dict:
    """Train one condition with the research's script; ``{"train", "metrics"}``."""
    save = args.work / "research" / name
    save.mkdir(parents=True, exist_ok=True)
    command = [
        "nice", "-n", str(args.nice), args.python,
        str(args.checkout / "src" / f"{script}.py"),
        f"alg={alg}", f"NUM_SEEDS={args.seeds}", f"SAVE_PATH={save}",
        f"hydra.run.dir={save / 'hydra'}",
    ]  # fmt: skip
    if args.steps:
        command.append(f"alg.TOTAL_TIMESTEPS={args.steps}")
    return timed(command, args.checkout, save / "train.log", research_env())


def config_value(path: Path, key: str) -> str:
    """A top-level string of a research config file (``KEY: "value"``)."""
    for line in path.read_text().splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.split("#")[0].strip().strip('"')
    raise SystemExit(f"{path} has no {key}")


def research_metrics(args, name: str, alg_name: str) -> dict:
    """The research's own end-of-training figures from its metrics file."""
    save = args.work / "research" / name / "MPE_simple_tag_v3"
    metrics = np.load(save / f"{alg_name}_MPE_simple_tag_v3_seed0_metrics.npz")
    out = {}
    for key, short in (
        ("test__pred__returned_episode_returns", "test_predator_return"),
        ("test__prey__returned_episode_returns", "test_prey_return"),
        ("pred__returned_episode_returns", "train_predator_return"),
        ("prey__returned_episode_returns", "train_prey_return"),
        ("pred__opp_acc", "predator_opp_acc"),
        ("prey__opp_acc", "prey_opp_acc"),
    ):
        if key in metrics:
            values = np.asarray(metrics[key], np.float64)
            out[f"{short}_final"] = values[:, -1].tolist()
            out[f"{short}_last{RESEARCH_TAIL}"] = (
                values[:, -RESEARCH_TAIL:].mean(1).tolist()
            )
    return out


def evaluate_research(args, name: str, script: str, alg: str) -> dict:
    out = args.work / "research" / name / "eval.json"
    command = [
        "nice", "-n", str(args.nice), args.python, str(RESEARCH_SIDE), "eval",
        "--checkout", str(args.checkout),
        "--save-path", str(args.work / "research" / name),
        "--alg", alg, "--script", script, "--seeds", str(args.seeds),
        "--episodes", str(args.episodes), "--out", str(out),
    ]  # fmt: skip
    timing = timed(command, args.checkout, out.with_suffix(".log"), research_env())
    return {**json.loads(out.read_text()), "timing": timing}


def research_tournament(args) -> dict:
    """The research's own Exp 3 cross-play (``src/tournament.py``) on the two
    Exp 3 runs, laid out where it reads them (``logs/MPE_simple_tag_v3``)."""
    folder = args.work / "research" / "exp3_tournament"
    logs = folder / "logs" / "MPE_simple_tag_v3"
    logs.mkdir(parents=True, exist_ok=True)
    for name in ("exp3_iql", "exp3_oa_iql"):
        for file in (args.work / "research" / name / "MPE_simple_tag_v3").glob(
            "*.safetensors"
        ):
            target = logs / file.name
            if not target.exists():
                target.symlink_to(file)
    out = folder / "tournament.npz"
    command = [
        "nice", "-n", str(args.nice), args.python,
        str(args.checkout / "src" / "tournament.py"),
        "--seeds", str(args.seeds), "--eps", "100", "--K", "5", "--H", "3",
        "--out", str(out),
    ]  # fmt: skip
    timing = timed(command, folder, folder / "tournament.log", research_env())
    data = np.load(out)
    return {
        "timing": timing,
        "policies": [str(p) for p in data["policy_names"]],
        **{
            key: np.asarray(data[key]).tolist()
            for key in data.files
            if key.endswith(("_mean", "_std"))
        },
    }


def command_research(args) -> dict:
    results: dict = {"conditions": {}}
    records = args.work / "records"
    records.mkdir(parents=True, exist_ok=True)
    for name in args.conditions:
        if name == "exp4_mappo_random":
            script, alg = MAPPO
        else:
            script, alg = CONDITIONS[name]
        train = once(
            records / f"research_{name}_train.json",
            lambda n=name, s=script, a=alg: train_research(args, n, s, a),
        )
        alg_name = config_value(args.checkout / f"configs/alg/{alg}.yaml", "ALG_NAME")
        entry = {
            "script": f"src/{script}.py",
            "config": f"configs/alg/{alg}.yaml",
            "train": train,
            "research_metrics": research_metrics(args, name, alg_name),
            "writeup": WRITEUP.get(name),
        }
        if name != "exp4_mappo_random":
            played = once(
                records / f"research_{name}_eval.json",
                lambda n=name, s=script, a=alg: evaluate_research(args, n, s, a),
            )
            scale = 10.0 * played["num_agents"]
            entry["greedy"] = {
                "episode_transitions": [
                    s["episode_transitions"] for s in played["seeds"]
                ],
                "captures": captures_summary([s["captures"] for s in played["seeds"]]),
                "captures_25": captures_summary(
                    [s["captures_25"] for s in played["seeds"]]
                ),
                "logged_return_over_10": captures_summary(
                    [
                        np.asarray(s["logged_predator_return"]) / 10.0
                        for s in played["seeds"]
                    ]
                ),
                "logged_return_over_captures": float(
                    np.mean(
                        np.concatenate(
                            [s["logged_predator_return"] for s in played["seeds"]]
                        )
                    )
                    / np.mean(np.concatenate([s["captures"] for s in played["seeds"]]))
                ),
                "timing": played["timing"],
            }
            test = np.asarray(entry["research_metrics"]["test_predator_return_final"])
            entry["test_as_writeup_reads"] = captures_summary([[v] for v in test / 10])
            entry["test_as_captures"] = captures_summary([[v] for v in test / scale])
        results["conditions"][name] = entry
    if {"exp3_iql", "exp3_oa_iql"} <= set(args.conditions) and args.tournament:
        results["exp3_tournament"] = once(
            records / "research_exp3_tournament.json", lambda: research_tournament(args)
        )
    if args.rollouts:
        rollout = args.work / "research" / "rollouts.json"
        results["rollouts"] = once(
            records / "research_rollouts.json",
            lambda: {
                "path": str(rollout),
                "timing": timed(
                    [
                        args.python,
                        str(RESEARCH_SIDE),
                        "rollout",
                        "--checkout",
                        str(args.checkout),
                        "--states",
                        str(args.rollouts),
                        "--out",
                        str(rollout),
                    ],
                    args.checkout,
                    rollout.with_suffix(".log"),
                    research_env(),
                ),
            },
        )
    return results


# -- mopa ----------------------------------------------------------------------------
def train_mopa(args, name: str) -> dict:
    out = args.work / "mopa" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        "nice", "-n", str(args.nice), sys.executable, "-m", "mopa", "train",
        "--preset", MOPA_PRESETS[name], "--seeds", str(args.seeds),
        "--out", str(out), "--quiet",
    ]  # fmt: skip
    if args.steps:
        command += ["--steps", str(args.steps)]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return timed(command, HERE.parent, args.work / "mopa" / f"{name}.log", env)


def evaluate_mopa(run: Path, episodes: int, seed: int) -> dict:
    """Greedy play of every seed's co-trained teams: captures per episode."""
    import jax

    from mopa.core.checkpoint import read_policy_file
    from mopa.envs import make
    from mopa.eval.evaluate import episode_horizon, play_episodes
    from mopa.players import PolicyPlayer

    data = read_policy_file(run)
    env, params = make(data.env, **data.env_overrides)
    players = tuple(
        PolicyPlayer(data.teams[team][0], greedy=True) for team in env.team_names
    )
    horizon = episode_horizon(params)
    play = jax.jit(
        lambda p, k: play_episodes(
            env, params, players, p, jax.random.split(k, episodes), horizon
        )
    )
    per_seed = []
    for s in range(data.num_seeds):
        team_params = tuple(
            jax.tree.map(lambda x, s=s: x[s], data.teams[team][1])
            for team in env.team_names
        )
        totals = play(team_params, jax.random.fold_in(jax.random.key(seed), s))
        per_seed.append(np.asarray(totals.sums["captures"], np.float64).tolist())
    return {"episode_transitions": horizon, "captures_per_seed": per_seed}


def command_mopa(args) -> dict:
    results: dict = {"conditions": {}}
    records = args.work / "records"
    records.mkdir(parents=True, exist_ok=True)
    for name in args.conditions:
        train = once(
            records / f"mopa_{name}_train.json", lambda n=name: train_mopa(args, n)
        )
        run = args.work / "mopa" / name
        summary = json.loads((run / "summary.json").read_text())
        entry = {
            "preset": MOPA_PRESETS[name],
            "train": train,
            "summary": {
                k: v
                for k, v in summary["final"].items()
                if k.startswith(("return/", "captures", "opp_acc"))
            },
            "writeup": WRITEUP.get(name),
        }
        if name != "exp4_mappo_random":
            played = evaluate_mopa(run, args.episodes, args.seed)
            entry["greedy"] = {
                "episode_transitions": played["episode_transitions"],
                "captures": captures_summary(played["captures_per_seed"]),
            }
        results["conditions"][name] = entry
    return results


# -- the table -----------------------------------------------------------------------
def _cell(summary: dict, key: str = "ci95_seeds") -> str:
    low, high = summary[key]
    return f"{summary['mean']:.2f} [{low:.2f}, {high:.2f}]"


def _inside(value: float, summary: dict, key: str) -> str:
    low, high = summary[key]
    return "yes" if low <= value <= high else "no"


def captures_table(code: dict, mopa: dict) -> list[str]:
    """Each IQL condition: the writeup's figure (its logged return / 10), the
    research's code read the same way, the research's code's captures in the first
    25 transitions of each greedy episode (mopa's episode length), mopa's, whether
    mopa's mean is inside the research code's intervals, and the training wall
    times. Intervals: 95% Student-t over the seeds' means, then 95% normal over
    every episode."""
    lines = [
        "| condition | writeup (return / 10) | writeup / 4 | research code, greedy "
        "return / 10 | research code, captures | mopa, captures | mopa inside "
        "(seeds / episodes) | train wall s (CPU s), research code / mopa |",
        "|---|---:|---:|---:|---:|---:|:---:|---:|",
    ]
    for name, entry in code.items():
        if "greedy" not in entry or name not in mopa:
            continue
        writeup = entry["writeup"] or {}
        read = entry["greedy"]["logged_return_over_10"]
        research = entry["greedy"]["captures_25"]
        mine = mopa[name]["greedy"]["captures"]
        figure = writeup.get("captures")
        quarter = "" if figure is None else f"{figure / LOGGED_SCALE:.2f}"
        figure = "" if figure is None else f"{figure}"
        if "note" in writeup:
            figure = f"{figure} (tournament)"
        train, theirs = entry["train"], mopa[name]["train"]
        lines.append(
            f"| {name} | {figure} | {quarter} | {_cell(read)} "
            f"| {_cell(research)}<br>{_cell(research, 'ci95_episodes')} "
            f"| {_cell(mine)}<br>{_cell(mine, 'ci95_episodes')} "
            f"| {_inside(mine['mean'], research, 'ci95_seeds')} / "
            f"{_inside(mine['mean'], research, 'ci95_episodes')} "
            f"| {train['wall_s']:,.0f} ({train['cpu_s']:,.0f}) "
            f"/ {theirs['wall_s']:,.0f} ({theirs['cpu_s']:,.0f}) |"
        )
    return lines


def tournament_table(tournament: dict) -> list[str]:
    """The research's own Exp 3 cross-play: captures per episode (its script's
    corrected reading, logged return / 40), mean +- std over seed pairs."""
    names = tournament["policies"]
    lines = [
        "| predator \\ prey | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for i, row in enumerate(names):
        cells = [
            f"{tournament['captures_per_ep_mean'][i][j]:.2f} "
            f"+- {tournament['captures_per_ep_std'][i][j]:.2f}"
            for j in range(len(names))
        ]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


def ratio_lines(code: dict, mopa: dict) -> list[str]:
    """Exp 4's MAPPO / IQL predator return ratio, each side read as the research
    reads it: MAPPO's training return at the end of training over IQL's greedy
    return (the research's logged returns carry the same factor 4 in both)."""
    writeup_mappo = WRITEUP["exp4_mappo_random"]["predator_return"]
    writeup_iql = WRITEUP["exp4_iql_random"]["predator_return"]
    lines = [
        f"- writeup: MAPPO {writeup_mappo:+.1f} / IQL {writeup_iql:+.1f} = "
        f"{writeup_mappo / writeup_iql:.2f}x; captures "
        f"{writeup_mappo / (10 * LOGGED_SCALE):.2f} and "
        f"{writeup_iql / (10 * LOGGED_SCALE):.2f}"
    ]
    if {"exp4_mappo_random", "exp4_iql_random"} <= set(code):
        mappo = np.mean(
            code["exp4_mappo_random"]["research_metrics"][
                f"train_predator_return_last{RESEARCH_TAIL}"
            ]
        )
        iql = np.mean(
            code["exp4_iql_random"]["research_metrics"][
                f"test_predator_return_last{RESEARCH_TAIL}"
            ]
        )
        lines.append(
            f"- research code: MAPPO {mappo:+.1f} / IQL {iql:+.1f} (logged, last "
            f"{RESEARCH_TAIL} updates) = {mappo / iql:.2f}x; captures "
            f"{mappo / 40:.2f} and {iql / 40:.2f}"
        )
    if {"exp4_mappo_random", "exp4_iql_random"} <= set(mopa):
        mappo = mopa["exp4_mappo_random"]["summary"]["return/predator"]
        iql = 10.0 * mopa["exp4_iql_random"]["greedy"]["captures"]["mean"]
        iql_train = mopa["exp4_iql_random"]["summary"]["return/predator"]["mean"]
        lines.append(
            f"- mopa: MAPPO {mappo['mean']:+.1f} (training, last 10% of updates) / "
            f"IQL {iql:+.1f} (greedy) = {mappo['mean'] / iql:.2f}x "
            f"({mappo['mean'] / iql_train:.2f}x against IQL's training return, "
            f"{iql_train:+.1f}); captures {mappo['mean'] / 10:.2f} and {iql / 10:.2f}"
        )
    return lines


def command_table(args) -> str:
    code_file = json.loads(args.research.read_text())
    code = code_file["conditions"]
    mopa = json.loads(args.mopa.read_text())["conditions"]
    lines = captures_table(code, mopa)
    if "exp3_tournament" in code_file:
        lines += ["", *tournament_table(code_file["exp3_tournament"])]
    ratio = ratio_lines(code, mopa)
    if ratio:
        lines += ["", *ratio]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    every = [*CONDITIONS, "exp4_mappo_random"]
    for side in ("research", "mopa"):
        sub = commands.add_parser(side)
        sub.add_argument("--work", type=Path, required=True)
        sub.add_argument("--out", type=Path, required=True)
        sub.add_argument("--conditions", nargs="+", default=every, choices=every)
        sub.add_argument("--seeds", type=int, default=3)
        sub.add_argument("--episodes", type=int, default=128)
        sub.add_argument("--steps", type=int, default=None)
        sub.add_argument("--seed", type=int, default=0)
        sub.add_argument("--nice", type=int, default=5)
        if side == "research":
            sub.add_argument("--checkout", type=Path, required=True)
            sub.add_argument("--python", required=True)
            sub.add_argument("--rollouts", type=int, default=256)
            sub.add_argument("--no-tournament", dest="tournament", action="store_false")
    table = commands.add_parser("table")
    table.add_argument("research", type=Path)
    table.add_argument("mopa", type=Path)
    args = parser.parse_args()
    if args.command == "table":
        print(command_table(args))
        return

    from mopa.core.devices import use_cpu_devices

    use_cpu_devices()
    from mopa.core.runinfo import check_clean_for, run_metadata

    check_clean_for(args.out)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    meta = run_metadata(config)
    meta["cpu_model_lscpu"] = (
        subprocess.run(["lscpu"], capture_output=True, text=True)
        .stdout.partition("Model name:")[2]
        .splitlines()[0]
        .strip()
        or None
    )
    meta["shared_machine"] = True
    if args.command == "research":
        meta["research"] = {
            "checkout": str(args.checkout),
            "checkout_commit": git_revision(args.checkout),
            "jaxmarl_revision": git_revision(Path(research_versions_path(args.python))),
            "versions": research_versions(args.python),
        }
        results = command_research(args)
    else:
        results = command_mopa(args)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    args.out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def research_versions_path(python: str) -> str:
    """Where the research's interpreter imports ``jaxmarl`` from (its checkout)."""
    code = "import jaxmarl, pathlib; print(pathlib.Path(jaxmarl.__file__).parents[1])"
    return (
        subprocess.check_output(
            [python, "-c", code], text=True, stderr=subprocess.DEVNULL
        )
        .strip()
        .splitlines()[-1]
    )


if __name__ == "__main__":
    main()
