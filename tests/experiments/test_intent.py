"""The hidden-intent experiment end to end (``mopa reproduce intent --profile
quick``): the files it writes, the ``results.json`` schema of the issue, stage
reuse on a second run, and the self-contained report (read as text, and rendered
in a headless browser where Debian's chromium and Playwright are installed).
The quick profile's numbers are not checked: its budgets are tiny."""

import base64
import json
import re
import shutil

import pytest

from mopa.cli.main import main
from mopa.experiments import run_experiment
from mopa.experiments.intent import CONDITIONS, MISSING_CONDITIONS, PROFILES
from tests.browser import assert_plots_unclipped, image_widths, report_page

STAGES = (
    "train_unaware",
    "train_oracle",
    "train_belief",
    "encoders",
    "calibration",
    "world_models",
    "eval_paired",
    "eval_common",
    "gif",
)
IMAGES = ("conditions.png", "belief_calibration.png", "reliability.png")
GIF = "belief_planner.gif"
SCHEMA_KEYS = {
    "profile",
    "conditions",
    "conditions_common_opponent",
    "belief_accuracy_by_step",
    "ece_by_step",
    "wm_rmse_5step",
    "timing_s",
    "versions",
    "git_sha",
}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick-profile run through the CLI (shared by the tests here)."""
    out = tmp_path_factory.mktemp("intent") / "quick"
    assert main(["reproduce", "intent", "--profile", "quick", "--out", str(out)]) == 0
    return out


def _check_condition_table(table: dict, num_seeds: int) -> None:
    assert list(table) == list(CONDITIONS)
    for name, row in table.items():
        assert set(row) == {"mean", "ci95", "n_episodes", "n_seeds"}, name
        assert isinstance(row["mean"], float)
        lo, hi = row["ci95"]
        assert lo <= row["mean"] <= hi
        assert isinstance(row["n_episodes"], int) and row["n_episodes"] >= 1
        assert row["n_seeds"] == num_seeds


def test_quick_run_writes_the_files_and_the_schema(quick_run):
    for name in ("results.json", "results.md", "report.html", GIF, *IMAGES):
        assert (quick_run / name).is_file(), name
        assert (quick_run / name).stat().st_size > 0, name
    results = json.loads((quick_run / "results.json").read_text())
    assert set(results) == SCHEMA_KEYS
    assert results["profile"] == "quick"
    quick = PROFILES["quick"]
    _check_condition_table(results["conditions"], quick.num_seeds)
    _check_condition_table(results["conditions_common_opponent"], quick.num_seeds)
    for name in MISSING_CONDITIONS:
        assert name not in results["conditions"]
    # Every paired row plays eval_episodes per seed.
    for row in results["conditions"].values():
        assert row["n_episodes"] == quick.eval_episodes * quick.num_seeds
    for key in ("belief_accuracy_by_step", "ece_by_step"):
        values = results[key]
        assert len(values) == 25
        assert all(0.0 <= v <= 1.0 for v in values)
    assert set(results["wm_rmse_5step"]) == {"ssm", "jepa"}
    assert all(v > 0 for v in results["wm_rmse_5step"].values())
    assert set(results["timing_s"]) == set(STAGES)
    assert all(v >= 0 for v in results["timing_s"].values())
    assert {"jax", "flax", "numpy"} <= set(results["versions"])
    assert isinstance(results["git_sha"], str)
    markdown = (quick_run / "results.md").read_text()
    assert "| condition | mopa paired |" in markdown
    for name in MISSING_CONDITIONS:
        assert name in markdown
    # The GIF has one frame per step of the episode.
    import imageio.v3 as iio

    frames = iio.imread(quick_run / GIF, index=None)
    assert frames.shape[0] >= 2 and frames.shape[-1] in (3, 4)


def test_a_second_run_reuses_every_stage(quick_run, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(quick_run, out)
    before = json.loads((out / "results.json").read_text())
    lines = []
    results = run_experiment("intent", "quick", out, progress=lines.append)
    for stage in STAGES:
        assert f"[{stage}] reused (finished earlier with this config)" in lines
    assert not any(line.endswith("running") for line in lines)
    assert results["conditions"] == before["conditions"]
    assert results["timing_s"] == before["timing_s"]


def test_report_html_holds_the_table_and_every_image(quick_run):
    page = (quick_run / "report.html").read_text()
    table = re.search(r'<table id="conditions">.*?</table>', page, re.S)
    assert table is not None
    for name in CONDITIONS:
        assert f"<td>{name}</td>" in table.group(0)
    sources = re.findall(
        r'<img alt="[^"]*" src="data:image/(png|gif);base64,([^"]+)"', page
    )
    assert len(sources) == len(IMAGES) + 1
    embedded = {base64.b64decode(data) for _, data in sources}
    for name in (*IMAGES, GIF):
        assert (quick_run / name).read_bytes() in embedded, name
    assert 'src="http' not in page and "src='http" not in page  # self-contained


def test_report_renders_in_a_headless_browser(quick_run):
    with report_page(quick_run / "report.html") as page:
        rows = page.locator("#conditions tbody tr")
        assert rows.count() == len(CONDITIONS)
        assert page.locator("#conditions").is_visible()
        widths = image_widths(page)
        assert len(widths) == len(IMAGES) + 1
        assert all(width > 0 for width in widths), widths
        assert_plots_unclipped(page, len(IMAGES))


# -- the intent predator's online belief --------------------------------------------
def _random_intent_predator(feed: str):
    import jax
    import jax.numpy as jnp

    from mopa.envs.pursuit import INTENT_CORNERS
    from mopa.experiments.intent import intent_game
    from mopa.experiments.intent_players import (
        FEEDS,
        IntentPredator,
        IntentPredatorParams,
    )
    from mopa.opponent.encoders import ClassifierConfig, init_params
    from mopa.policy import PolicySpec
    from mopa.policy import init_params as init_policy

    env, params = intent_game()
    # The occupancy (8 x 8) and the last 8 positions, as the experiment reads.
    classifier = ClassifierConfig(input_size=80, num_classes=len(INTENT_CORNERS))
    spec = PolicySpec(
        kind="actor",
        num_agents=env.num_predators,
        obs_size=env.predator_obs_size,
        num_actions=5,
        hidden=(16,),
    )
    player = IntentPredator(
        env,
        spec,
        sources=("classifier",),
        classifier=classifier,
        commit_step=8,
        recent=8,
    )
    player_params = IntentPredatorParams(
        env_params=params,
        policy_params=init_policy(spec, jax.random.key(1)),
        classifier_params=init_params(classifier, jax.random.key(2)),
        classifier_temperature=jnp.float32(0.5),
        jepa_params=(),
        jepa_temperature=jnp.float32(1.0),
        bayes_params=(),
        planner_params=(),
        source=jnp.int32(0),
        feed=jnp.int32(FEEDS.index(feed)),
    )
    return env, params, player, player_params, classifier


def test_online_belief_equals_the_offline_prefix_beliefs():
    """The belief carried through an episode equals prefix_beliefs computed on
    the recorded prey positions afterwards (two paths to one number)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from mopa.experiments.intent import record_episode
    from mopa.experiments.intent_players import classifier_logits_fn
    from mopa.opponent.beliefs import prefix_beliefs
    from mopa.players import PolicyPlayer
    from mopa.policy import PolicySpec

    env, params, player, player_params, classifier = _random_intent_predator("belief")
    prey = PolicyPlayer(
        PolicySpec(kind="random", num_agents=1, obs_size=env.prey_obs_size,
                   num_actions=5)
    )  # fmt: skip
    states, carries = record_episode(
        env, params, (player, prey), (player_params, {}), jax.random.key(3), 25
    )
    online = np.stack([np.asarray(player.unpack(c[0]).belief) for c in carries])
    # [T, 2] the prey's lead positions (where each state's velocity takes it)
    positions = jnp.asarray(states.pos[:, -1] + params.dt * states.vel[:, -1])
    logits_fn = classifier_logits_fn(
        classifier, player_params.classifier_params, 8, recent=8
    )
    offline = np.asarray(prefix_beliefs(logits_fn, positions, 4, 0.5, 1))
    np.testing.assert_allclose(online, offline, atol=1e-5)
    np.testing.assert_allclose(online.sum(-1), 1.0, atol=1e-5)


def test_hard_inference_commits_at_the_commit_step():
    """The commit feed follows the running argmax up to commit_step positions,
    then keeps the argmax it had there."""
    import jax
    import numpy as np

    from mopa.experiments.intent import record_episode
    from mopa.players import PolicyPlayer
    from mopa.policy import PolicySpec

    env, params, player, player_params, _ = _random_intent_predator("commit")
    prey = PolicyPlayer(
        PolicySpec(kind="random", num_agents=1, obs_size=env.prey_obs_size,
                   num_actions=5)
    )  # fmt: skip
    _, carries = record_episode(
        env, params, (player, prey), (player_params, {}), jax.random.key(4), 25
    )
    unpacked = [player.unpack(c[0]) for c in carries]
    argmax = np.array([int(np.argmax(c.belief)) for c in unpacked])
    committed = np.array([int(c.committed) for c in unpacked])
    np.testing.assert_array_equal(committed[:8], argmax[:8])
    np.testing.assert_array_equal(committed[8:], argmax[7])


def test_lead_position_is_the_position_after_the_next_step():
    """Whatever the actions, the next state puts the prey at its lead position
    (MPE moves a body with its current velocity), so the prefix beliefs read
    nothing the predators could not know."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from mopa.experiments.intent import intent_game
    from mopa.experiments.intent_players import lead_position

    env, params = intent_game()
    _, state = env.reset(jax.random.key(6), params)
    predators = jnp.array([0, 1, 2], jnp.int32)
    for t in range(6):  # a few steps, so the velocity is not zero
        _, state, *_ = env.step(
            jax.random.key(t), state, (predators, jnp.array([t % 5])), params
        )
    assert float(jnp.abs(state.vel[-1]).sum()) > 0
    lead = lead_position(state, params, env.num_predators)
    for action in range(5):
        _, after, *_ = env.step(
            jax.random.key(0), state, (predators, jnp.array([action])), params
        )
        np.testing.assert_allclose(after.pos[-1], lead, atol=1e-6)


def test_infer_prey_action_recovers_the_action_taken():
    import jax
    import jax.numpy as jnp

    from mopa.experiments.intent import intent_game
    from mopa.experiments.intent_players import infer_prey_action

    env, params = intent_game()
    _, state = env.reset(jax.random.key(5), params)
    predators = jnp.array([1, 2, 3], jnp.int32)
    for action in range(5):
        _, after, *_ = env.step(
            jax.random.key(0), state, (predators, jnp.array([action])), params
        )
        found = infer_prey_action(env, params, state, predators, after.vel[-1])
        assert int(found) == action
