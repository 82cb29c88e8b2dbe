"""The population tutorial (``docs/tutorials/population.py``, the site's "Model a
family of opponents") runs as written, and what it leaves behind is right: each
clone explains its own adversary's moves best, the online belief finds the
adversary that played and says that it fits (as the scanned belief does), random
moves say "none fits", and the planner returns one valid move per good agent, the
best of its scores."""

import contextlib
import io
import re
import runpy
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.opponent import population as P  # noqa: N812

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorials" / "population.py"
PLAYED = 1  # the member the tutorial watches: ``record(1, ...)``


@pytest.fixture(scope="module")
def example():
    """The script's globals after running it, and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        namespace = runpy.run_path(str(TUTORIAL), run_name="__main__")
    return namespace, printed.getvalue()


def test_each_clone_explains_its_own_adversary_best(example):
    ns, _ = example
    config, clones, members = ns["config"], ns["clones"], ns["members"]
    assert P.num_members(clones) == len(members) == 3
    for m, data in enumerate(members):
        log_probs = P.population_log_probs(config, clones, data.obs)  # [N, 1, 3, 5]
        taken = np.take_along_axis(
            np.asarray(log_probs[:, 0]), data.actions[:, None, None], -1
        )[..., 0]  # [N, 3]
        mean = taken.mean(0)
        assert np.argmax(mean) == m, (m, mean)
        # The scripted moves are deterministic: the own clone is near-certain.
        assert np.exp(mean[m]) > 0.7, (m, mean)


def test_the_belief_finds_the_adversary_that_played(example):
    ns, printed = example
    belief = ns["belief"]
    members = np.asarray(P.member_belief(belief))
    np.testing.assert_allclose(members.sum(), 1.0, rtol=1e-5)
    assert np.argmax(members) == PLAYED and members[PLAYED] > 0.9, members
    assert float(P.none_fits_probability(belief)) < 0.5
    assert not bool(P.none_fits(belief))
    assert int(belief.steps) == 25
    # It printed the belief as it concentrated, at steps 0, 6, 12, 18 and 24.
    steps = re.findall(r"^(\d+) \[", printed, flags=re.M)
    assert len(steps) >= 2 and steps[0] == "0" and steps[-1] == "24", printed


def test_the_tutorial_loop_equals_the_scanned_belief_and_random_moves_fit_none(
    example,
):
    ns, _ = example
    config, clones, seen = ns["config"], ns["clones"], ns["seen"]
    obs = jnp.asarray(seen["obs.adversary"][0])  # [25, 1, 8]
    actions = jnp.asarray(seen["actions.adversary"][0])  # [25, 1]
    prior = P.init_population_belief(num_intents=1, num_members=3)

    def final(moves):
        log_probs = P.population_log_probs(config, clones, obs)  # [25, 1, 1, 3, 5]
        return jax.tree.map(
            lambda x: x[-1], P.population_beliefs(prior, log_probs, moves)
        )

    scanned = final(actions)
    np.testing.assert_allclose(
        P.member_belief(scanned), P.member_belief(ns["belief"]), atol=1e-5
    )
    # Moves drawn at random in the same positions: no member plays like that.
    random_moves = jax.random.randint(jax.random.key(0), actions.shape, 0, 5)
    outsider = final(random_moves)
    assert float(P.none_fits_probability(outsider)) > 0.5
    np.testing.assert_allclose(P.member_belief(outsider), 1 / 3, atol=0.1)


def test_the_plan_is_one_valid_move_per_good_agent_the_best_scored(example):
    ns, _ = example
    planner, actions = ns["planner"], np.asarray(ns["actions"])
    assert actions.shape == (2,) and np.issubdtype(actions.dtype, np.integer)
    assert np.all((actions >= 0) & (actions < 5)), actions
    plan = jax.jit(planner.plan)(
        ns["plan_params"],
        jax.random.key(6),
        ns["state"],
        ns["obs"][1],
        ns["carry"],
        ns["reset"],
    )
    scores = np.asarray(plan.scores)  # [2 good agents, 5 candidate moves]
    assert scores.shape == (2, 5) and np.all(np.isfinite(scores))
    np.testing.assert_array_equal(plan.actions, actions)
    np.testing.assert_array_equal(actions, np.argmax(scores, -1))
