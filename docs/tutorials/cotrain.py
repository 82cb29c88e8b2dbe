"""Run the co-training loop: red adapts, blue improves and re-models it.

Red's population starts as a family of red policies (co-trained prey and scripted
prey, cloned) and grows each generation by a best response trained against blue.
Here two blues face it with the same budgets: ``blind`` (a MAPPO team trained
against the population) and ``remodel`` (it re-fits a population model of red
every generation, red's intents found without labels, and its policy observes the
belief's intent marginal). The budgets are the quick profile's, tiny; ``mopa
cotrain --out runs/cotrain`` runs the full league. Every stage is kept under
``STAGES``: run the script again and each finished stage is reused.
"""

# --8<-- [start:code]
import dataclasses
import sys
from pathlib import Path

from mopa.core.stages import Stages
from mopa.cotrain import run_cotrain
from mopa.experiments.cotrain import PROFILES

STAGES = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/cotrain_tutorial/stages")

config = dataclasses.replace(
    PROFILES["quick"],  # tag_intent, 2 seeds, a few thousand steps per stage
    blues=("blind", "remodel"),
    generations=1,
)
results = run_cotrain(config, print, Stages(STAGES, print))

# Blue's captures per episode at the last generation: against red's population,
# against reds no blue trained against, and against a fresh best response (its
# exploitability at that budget).
for blue, last in results["final"].items():
    population = last["score_vs_population"]
    held_out = last["score_vs_held_out"]
    exploit = last["exploitability"]["score_vs_best_response"]
    low, high = population["ci95"]
    print(
        f"{blue:8s} population {population['mean']:.2f} [{low:.2f}, {high:.2f}], "
        f"held out {held_out['mean']:.2f}, best response {exploit['mean']:.2f}"
    )
# Bradley-Terry ratings (Elo scale, 95% intervals) of every blue and red
# checkpoint, every evaluation episode a match.
ratings = results["ratings"]["players"]
for name in sorted(ratings, key=lambda n: -ratings[n]["rating"]):
    low, high = ratings[name]["ci95"]
    print(f"{name:32s} {ratings[name]['rating']:7.1f} [{low:.1f}, {high:.1f}]")
# --8<-- [end:code]
