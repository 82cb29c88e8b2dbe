"""Train two teams and cross-play them.

Co-trains predators and prey on the pursuit game ``tag`` with two learners, IQL
and MAPPO (weights shared inside a team, every seed vmapped in one program), then
plays every predator team against every prey team, seed i against seed i, in one
jitted tournament. ``STEPS`` is tiny so that the script runs in seconds; the
research's runs train 2M steps per seed (``mopa train --list-presets``).
"""

# --8<-- [start:code]
import jax

from mopa.algos import make_config, run_training
from mopa.envs import make
from mopa.eval import TournamentEntry, play_tournament
from mopa.players import PolicyPlayer

STEPS = 4_096  # environment steps per seed
SEEDS = 2

env, params = make("tag")  # three predators chase one prey
runs = {
    algo: run_training(
        make_config(algo, env="tag", total_steps=STEPS, num_seeds=SEEDS, num_chunks=1)
    )
    for algo in ("iql", "mappo")
}


def entry(algo: str, team: str) -> TournamentEntry:
    """One run's team as a contestant: its policy, greedy, for every seed."""
    spec, team_params = runs[algo].policies[team]  # params: [SEEDS, ...]
    return TournamentEntry(algo, PolicyPlayer(spec, greedy=True), team_params)


result = play_tournament(
    env,
    params,
    [entry(algo, "predator") for algo in runs],  # rows: the game's first team
    [entry(algo, "prey") for algo in runs],  # columns: its second team
    jax.random.key(0),
    num_episodes=16,
    pairing="paired",
)
captures = result.summary("captures")  # {"mean": [2, 2], "ci95": [2, 2, 2], ...}
print(result.to_markdown("captures"))
# --8<-- [end:code]
