"""Reproduce a research table and verify it.

Runs the experiment behind Fig. 3 of the POLA paper (seed 002: how often LOLA and
POLA find tit-for-tat on the exact iterated prisoner's dilemma) at its quick
profile, prints its table, then reruns it from nothing with ``mopa verify``'s
library call and compares every number of the two ``results.json``. The same
from the command line::

    mopa experiment pola-fig3 --profile quick --out runs/fig3
    mopa verify runs/fig3
"""

# --8<-- [start:code]
import json
import sys
import tempfile
from pathlib import Path

from mopa.experiments import run_experiment
from mopa.runs.verify import verify_folder

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/fig3")

results = run_experiment("pola-fig3", preset="quick", out=OUT)
# results.json, config.json (the experiment, its preset and config) and meta.json
# (versions, the commit, the processor) are now in OUT, beside the plot.
print(sorted(p.name for p in OUT.iterdir()))
# The table: per method and cooperation factor, the share of seeds that found
# tit-for-tat (the quick profile plays one factor, 1.6, with 4 seeds).
for method, by_factor in results["p_tft"].items():
    cells = ", ".join(f"cf {cf}: {p:.2f}" for cf, p in by_factor.items())
    print(f"{method:24s} {cells}")
print("recorded:", json.loads((OUT / "meta.json").read_text())["git_sha"])

with tempfile.TemporaryDirectory() as scratch:
    report = verify_folder(OUT, scratch)  # reruns from nothing, compares
print(f"{len(report.comparisons)} figures compared, verified: {report.ok}")
for comparison in report.failures:  # none, on the same machine and commit
    print(comparison.path, comparison.committed, comparison.rerun)
# --8<-- [end:code]
