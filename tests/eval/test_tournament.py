"""Cross-play tournaments: one jitted call equals a loop over its cells, keys,
statistics, files, and the episode player behind ``evaluate``."""

from __future__ import annotations

import dataclasses

import imageio.v3 as iio
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.pursuit import ACTION_DIRECTIONS
from mopa.errors import InvalidParameterError
from mopa.eval import (
    TournamentEntry,
    cell_keys,
    episode_horizon,
    evaluate,
    play_episodes,
    play_tournament,
)
from mopa.players import PolicyPlayer
from mopa.report.tournament import (
    load_tournament,
    plot_tournament_heatmap,
    save_tournament,
)
from tests.concurrency import CALLS, DEVICE_COUNTS, q_spec, run_stress, seeded_params

NUM_EPISODES = 3
NUM_SEEDS = 2


@dataclasses.dataclass(frozen=True)
class FleeingPrey:
    """A player that reads the true state: the prey pushes straight away from the
    nearest predator (the action whose direction best matches that heading)."""

    num_predators: int = 3
    num_agents: int = 1
    carry_size: int = 0

    def act(self, params, key, state, obs, carry, reset):
        predators = state.pos[: self.num_predators]  # [P, 2]
        prey = state.pos[self.num_predators :]  # [Y, 2]
        gap = prey[:, None, :] - predators[None, :, :]  # [Y, P, 2]
        nearest = jnp.argmin(jnp.sum(gap * gap, -1), -1)  # [Y]
        away = jnp.take_along_axis(gap, nearest[:, None, None], 1)[:, 0]  # [Y, 2]
        scores = away @ jnp.asarray(ACTION_DIRECTIONS, jnp.float32).T  # [Y, 5]
        return jnp.argmax(scores, -1).astype(jnp.int32), carry


@pytest.fixture(scope="module")
def game():
    return make("tag")


@pytest.fixture(scope="module")
def sides(game):
    """Rows: three Q predators (one group; ``pred_a_copy`` has ``pred_a``'s
    weights). Columns: a Q prey and the fleeing prey (two groups)."""
    env, _ = game
    predator, prey = q_spec(env, 0), q_spec(env, 1)
    pred_a = seeded_params(predator, 1, NUM_SEEDS)
    side_a = [
        TournamentEntry("pred_a", PolicyPlayer(predator), pred_a),
        TournamentEntry(
            "pred_b", PolicyPlayer(predator), seeded_params(predator, 2, NUM_SEEDS)
        ),
        TournamentEntry("pred_a_copy", PolicyPlayer(predator), pred_a),
    ]
    side_b = [
        TournamentEntry(
            "prey_q", PolicyPlayer(prey), seeded_params(prey, 3, NUM_SEEDS)
        ),
        TournamentEntry("fleeing", FleeingPrey(), {}),
    ]
    return side_a, side_b


@pytest.fixture(scope="module")
def result(game, sides):
    env, params = game
    return play_tournament(
        env, params, *sides, jax.random.key(7), num_episodes=NUM_EPISODES
    )


@pytest.mark.slow
def test_arrays_have_one_axis_per_row_column_seed_pair_and_episode(result):
    # "all" pairs 2 row seeds with 2 column seeds, row-major.
    np.testing.assert_array_equal(result.seed_pairs, [[0, 0], [0, 1], [1, 0], [1, 1]])
    assert result.returns.shape == (3, 2, 4, NUM_EPISODES, 2)
    assert result.totals["captures"].shape == (3, 2, 4, NUM_EPISODES)
    assert result.row_names == ("pred_a", "pred_b", "pred_a_copy")
    assert result.column_names == ("prey_q", "fleeing")
    assert result.metric_names == ("captures", "return/predator", "return/prey")
    # Tag pays each predator +10 per capture: the predators' return is 10 x captures.
    np.testing.assert_allclose(
        result.metric("return/predator"), 10 * result.totals["captures"], rtol=1e-6
    )


def _loop_over_cells(env, params, sides, key, pairs, fold_cells=True):
    """Every cell and seed pair played alone with ``play_episodes``."""
    side_a, side_b = sides
    returns = np.zeros((len(side_a), len(side_b), len(pairs), NUM_EPISODES, 2))
    captures = np.zeros(returns.shape[:-1])
    for r, row in enumerate(side_a):
        for c, column in enumerate(side_b):
            keys = cell_keys(
                key, row.name, column.name, len(pairs), NUM_EPISODES, fold_cells
            )
            for p, (seed_a, seed_b) in enumerate(pairs):
                totals = play_episodes(
                    env,
                    params,
                    (row.player, column.player),
                    (
                        jax.tree.map(lambda x, s=seed_a: x[s], row.params),
                        jax.tree.map(lambda x, s=seed_b: x[s], column.params),
                    ),
                    keys[p],
                    episode_horizon(params),
                )
                returns[r, c, p] = totals.returns
                captures[r, c, p] = totals.sums["captures"]
    return returns, captures


@pytest.mark.slow
@pytest.mark.parametrize("pairing", ["all", "paired"])
def test_one_jitted_tournament_equals_a_loop_over_its_cells(
    game, sides, result, pairing
):
    env, params = game
    key = jax.random.key(7)
    if pairing == "all":
        played = result
    else:
        played = play_tournament(
            env, params, *sides, key, num_episodes=NUM_EPISODES, pairing="paired"
        )
        np.testing.assert_array_equal(played.seed_pairs, [[0, 0], [1, 1]])
    returns, captures = _loop_over_cells(env, params, sides, key, played.seed_pairs)
    np.testing.assert_array_equal(played.returns, returns)
    np.testing.assert_array_equal(played.totals["captures"], captures)
    assert played.returns.dtype == np.float32


def test_same_key_same_numbers_and_cells_fold_their_own_keys(game, sides, result):
    env, params = game
    again = play_tournament(
        env, params, *sides, jax.random.key(7), num_episodes=NUM_EPISODES
    )
    np.testing.assert_array_equal(again.returns, result.returns)
    np.testing.assert_array_equal(again.totals["captures"], result.totals["captures"])
    # pred_a_copy has pred_a's weights: only the folded cell keys set them apart.
    assert not np.array_equal(result.returns[0], result.returns[2])
    common = play_tournament(
        env,
        params,
        *sides,
        jax.random.key(7),
        num_episodes=NUM_EPISODES,
        fold_cells=False,
    )
    np.testing.assert_array_equal(common.returns[0], common.returns[2])
    assert not np.array_equal(common.returns[0], common.returns[1])
    other = play_tournament(
        env, params, *sides, jax.random.key(8), num_episodes=NUM_EPISODES
    )
    assert not np.array_equal(other.returns, result.returns)


def test_summary_is_numpy_over_the_episodes_of_each_cell(result):
    for metric in result.metric_names:
        stats = result.summary(metric)
        values = np.asarray(result.metric(metric), np.float64).reshape(3, 2, -1)
        n = values.shape[-1]
        assert stats["num_episodes"] == n == 4 * NUM_EPISODES
        np.testing.assert_allclose(stats["mean"], values.mean(-1))
        np.testing.assert_allclose(stats["std"], values.std(-1, ddof=1))
        half = 1.96 * values.std(-1, ddof=1) / np.sqrt(n)
        np.testing.assert_allclose(stats["ci95"][..., 0], values.mean(-1) - half)
        np.testing.assert_allclose(stats["ci95"][..., 1], values.mean(-1) + half)
        np.testing.assert_allclose(
            stats["seed_means"], np.asarray(result.metric(metric)).mean(-1)
        )
    with pytest.raises(InvalidParameterError, match="unknown metric 'wins'"):
        result.summary("wins")


def test_json_round_trip_markdown_and_heatmap(result, tmp_path):
    path = save_tournament(result, tmp_path / "t.json")
    loaded = load_tournament(path)
    assert loaded.row_names == result.row_names
    assert loaded.column_names == result.column_names
    assert loaded.teams == ("predator", "prey") and loaded.pairing == "all"
    np.testing.assert_array_equal(loaded.seed_pairs, result.seed_pairs)
    np.testing.assert_array_equal(loaded.returns, result.returns)
    np.testing.assert_array_equal(loaded.totals["captures"], result.totals["captures"])
    assert loaded.to_json() == result.to_json()

    table = result.to_markdown("captures")
    for name in (*result.row_names, *result.column_names):
        assert name in table
    stats = result.summary("captures")
    half = (stats["ci95"][1, 0, 1] - stats["ci95"][1, 0, 0]) / 2
    assert f"| pred_b | {stats['mean'][1, 0]:.2f} ± {half:.2f} |" in table
    assert len(table.strip().splitlines()) == 2 + 2 + 3  # caption, blank, head, rows

    png = plot_tournament_heatmap(result, tmp_path / "plots" / "h.png", "return/prey")
    image = iio.imread(png)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert image[..., :3].std() > 10  # not a blank canvas


def test_evaluate_reports_the_episode_player(game, sides):
    env, params = game
    (row, *_), (column, _) = sides
    first = [jax.tree.map(lambda x: x[0], p) for p in (row.params, column.params)]
    policies = ((row.player.spec, first[0]), (column.player.spec, first[1]))
    key = jax.random.key(5)
    report = evaluate(env, params, policies, key, num_episodes=NUM_EPISODES)
    totals = play_episodes(
        env,
        params,
        (row.player, column.player),
        tuple(first),
        jax.random.split(key, NUM_EPISODES),
        episode_horizon(params),
    )
    returns = np.asarray(totals.returns, np.float64)
    captures = np.asarray(totals.sums["captures"], np.float64)
    assert report["return/predator"]["per_episode"] == returns[:, 0].tolist()
    assert report["return/prey"]["per_episode"] == returns[:, 1].tolist()
    assert report["captures_per_episode"]["mean"] == pytest.approx(captures.mean())
    assert report["captures_per_episode"]["ci95"] == pytest.approx(
        1.96 * captures.std(ddof=1) / np.sqrt(NUM_EPISODES)
    )


def test_bad_tournaments_name_the_problem(game, sides):
    env, params = game
    side_a, side_b = sides
    key = jax.random.key(0)

    def play(a, b, **kwargs):
        return play_tournament(env, params, a, b, key, **kwargs)

    with pytest.raises(InvalidParameterError, match="num_episodes must be >= 1"):
        play(side_a, side_b, num_episodes=0)
    with pytest.raises(InvalidParameterError, match="pairing must be one of"):
        play(side_a, side_b, pairing="best")
    with pytest.raises(InvalidParameterError, match="two entries named 'pred_a'"):
        play([side_a[0], side_a[0]], side_b)
    with pytest.raises(InvalidParameterError, match="acts for 1 agents"):
        play(side_b, side_b)
    three_seeds = jax.tree.map(lambda x: jnp.concatenate([x, x[:1]]), side_a[0].params)
    three = side_a[0]._replace(name="three", params=three_seeds)
    with pytest.raises(InvalidParameterError, match="different seed counts"):
        play([side_a[0], three], side_b)
    with pytest.raises(InvalidParameterError, match="one seed count on both sides"):
        play([three], side_b, pairing="paired")
    one_team, one_team_params = make("battalion_vs_red")
    with pytest.raises(InvalidParameterError, match="needs a two-team game"):
        play_tournament(one_team, one_team_params, side_a, side_b, key)


@pytest.mark.slow
def test_long_tournaments_spread_episodes_over_devices_with_the_same_numbers(
    game, sides
):
    """From ``MIN_SPREAD_EPISODES`` episodes per cell the episode axis is sharded
    over the test session's 3 CPU devices; the numbers are those of one device."""
    from mopa.eval.tournament import (
        MIN_SPREAD_EPISODES,
        _episode_mesh,
        _spread_episodes,
    )

    env, params = game
    num_episodes = MIN_SPREAD_EPISODES + 1  # 33 = 3 x 11
    keys = jax.random.split(jax.random.key(0), num_episodes).reshape(1, 1, 1, -1)
    spread = _spread_episodes(keys, _episode_mesh(num_episodes))
    assert len(spread.sharding.device_set) == 3
    row, column = sides[0][1], sides[1][1]
    played = play_tournament(
        env, params, [row], [column], jax.random.key(8), num_episodes=num_episodes
    )
    episode_keys = cell_keys(
        jax.random.key(8), row.name, column.name, NUM_SEEDS, num_episodes
    )
    for seed in range(NUM_SEEDS):
        alone = play_episodes(
            env,
            params,
            (row.player, column.player),
            (jax.tree.map(lambda x, s=seed: x[s], row.params), {}),
            episode_keys[seed],
            episode_horizon(params),
        )
        np.testing.assert_allclose(
            played.returns[0, 0, seed], alone.returns, rtol=1e-6, atol=1e-6
        )


@pytest.mark.slow
@pytest.mark.parametrize("num_devices", DEVICE_COUNTS)
def test_programs_side_by_side_never_hang(num_devices):
    """A tournament whose tree search is a program of its own beside the other
    rows, against a prey that solves linear systems at every step, called 20 times
    in a process with ``num_devices`` CPU devices, each call under a watchdog: it
    must finish with the same numbers every call (it hung while the prey's solve
    was a batched LAPACK kernel; see :mod:`mopa.core.linalg`)."""
    assert run_stress("tournament", num_devices) == (
        f"tournament: {CALLS} calls of 2 programs side by side on {num_devices} "
        "CPU device(s), the same numbers every call"
    )
