"""``mopa envs`` lists the registered games; ``mopa render`` draws an episode as a
GIF."""

from __future__ import annotations

import argparse
from pathlib import Path

from mopa.errors import InvalidParameterError


def add_parsers(commands: argparse._SubParsersAction) -> None:
    listing = commands.add_parser("envs", help="list the registered games")
    listing.set_defaults(run=run_list)
    render = commands.add_parser(
        "render", help="play one episode with random actions and save it as a GIF"
    )
    render.add_argument("--env", default="tag", help="registered game (default tag)")
    render.add_argument("--out", type=Path, required=True, help="GIF path to write")
    render.add_argument(
        "--steps", type=int, help="steps to play (default: one episode)"
    )
    render.add_argument("--seed", type=int, default=0, help="random seed")
    render.add_argument("--fps", type=float, default=8, help="frames per second")
    render.set_defaults(run=run_render)


def run_list(args: argparse.Namespace) -> int:
    from mopa.envs import make, registered_envs

    for name in registered_envs():
        env, _ = make(name)
        teams = ", ".join(
            f"{size} {team} (obs {env.observation_space(t).shape[0]})"
            for t, (team, size) in enumerate(
                zip(env.team_names, env.team_sizes, strict=True)
            )
        )
        print(f"{name:14s} {teams}")
    return 0


def run_render(args: argparse.Namespace) -> int:
    import jax

    from mopa.core.checks import check_seed
    from mopa.core.files import check_output_file
    from mopa.envs import make, random_policy
    from mopa.report.render import episode_gif

    if args.steps is not None and args.steps < 1:
        raise InvalidParameterError(f"--steps must be >= 1, got {args.steps}")
    check_seed("--seed", args.seed)
    check_output_file(args.out, "--out")
    env, params = make(args.env)
    path = episode_gif(
        env,
        params,
        random_policy(env),
        jax.random.key(args.seed),
        args.out,
        num_steps=args.steps,
        fps=args.fps,
    )
    print(f"wrote {path}")
    return 0
