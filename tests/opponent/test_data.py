"""Trajectory datasets and representations: the jitted generator against a plain
loop over ``env.step``, chains across auto-resets, ``.npz`` files, splits, and
occupancy histograms against NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs.registry import make
from mopa.envs.wrappers import AutoReset
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.opponent import data, population
from mopa.opponent import representations as rep
from mopa.players import PolicyPlayer, initial_player_carry
from mopa.policy import PolicySpec, init_params

NUM_CHAINS, EPISODES, HORIZON = 4, 2, 25
DATA_SEED = 7


@pytest.fixture(scope="module")
def game():
    """``tag_resources`` (a fair coin flip of the layout at each reset), a greedy
    Q-network predator team and a uniformly random prey."""
    env, params = make("tag_resources")
    specs = (
        PolicySpec(kind="q", num_agents=3, obs_size=env.predator_obs_size,
                   num_actions=5, hidden=(16,)),
        PolicySpec(kind="random", num_agents=1, obs_size=env.prey_obs_size,
                   num_actions=5),
    )  # fmt: skip
    players = tuple(PolicyPlayer(spec) for spec in specs)
    player_params = (init_params(specs[0], jax.random.key(1)), {})
    return env, params, players, player_params


@pytest.fixture(scope="module")
def dataset(game):
    env, params, players, player_params = game
    return data.generate(
        env, params, players, player_params, jax.random.key(DATA_SEED),
        num_chains=NUM_CHAINS, episodes_per_chain=EPISODES, policy_id=3,
        seed_index=1, policy_names=("a", "b", "c", "d"), metadata={"note": "test"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def loop(game):
    """The first episode of chain 0 of ``dataset`` replayed by a plain Python loop
    over ``AutoReset(env).step`` (each call jitted on its own), following the
    documented key schedule; also the last step's keys."""
    env, params, players, player_params = game
    wrapped = AutoReset(env)
    key = jax.random.split(jax.random.key(DATA_SEED), NUM_CHAINS)[0]
    key_reset, key_steps = jax.random.split(key)
    obs, state = wrapped.reset(key_reset, params)
    step_fn = jax.jit(wrapped.step)
    act_fns = [jax.jit(player.act) for player in players]
    carries = [initial_player_carry(p) for p in players]
    first = True
    record = {"pos": [], "obs0": [], "obs1": [], "act0": [], "act1": []}
    for key_t in jax.random.split(key_steps, EPISODES * HORIZON)[:HORIZON]:
        keys = jax.random.split(key_t, 3)
        actions = []
        for t, player in enumerate(players):
            reset = jnp.full((player.num_agents,), first)
            action, carries[t] = act_fns[t](
                player_params[t], keys[1 + t], state, obs[t], carries[t], reset
            )
            actions.append(action)
        for name, value in zip(
            record, (state.pos, obs[0], obs[1], actions[0], actions[1]), strict=True
        ):
            record[name].append(np.asarray(value))
        obs, state, _, _, _, info = step_fn(keys[0], state, tuple(actions), params)
        first = bool(info["done"])
    return {k: np.stack(v) for k, v in record.items()}, keys


def test_generate_matches_a_python_loop_over_env_step(dataset, loop):
    loop, _ = loop
    np.testing.assert_allclose(dataset["pos"][0, :HORIZON], loop["pos"], atol=1e-5)
    np.testing.assert_allclose(
        dataset["obs.predator"][0, :HORIZON], loop["obs0"], atol=1e-5
    )
    np.testing.assert_allclose(
        dataset["obs.prey"][0, :HORIZON], loop["obs1"], atol=1e-5
    )
    np.testing.assert_array_equal(
        dataset["actions.predator"][0, :HORIZON], loop["act0"]
    )
    np.testing.assert_array_equal(dataset["actions.prey"][0, :HORIZON], loop["act1"])
    # The prey's actions are random: the keys, not only the observations, agree.
    assert len(np.unique(loop["act1"])) > 1


def test_chains_carry_episode_index_across_auto_resets(game, dataset, loop):
    env, params, _, _ = game
    steps = np.arange(EPISODES * HORIZON)
    np.testing.assert_array_equal(
        dataset["episode"], np.broadcast_to(steps // HORIZON, (NUM_CHAINS, len(steps)))
    )
    np.testing.assert_array_equal(dataset["step"][0], steps % HORIZON)
    np.testing.assert_array_equal(dataset["done"][0], steps % HORIZON == HORIZON - 1)
    assert dataset["valid"].all() and dataset["episode_valid"].all()
    # Episode 1 starts from the reset AutoReset made with the last step's key.
    _, keys = loop
    _, fresh = env.reset(jax.random.split(keys[0])[1], params)
    np.testing.assert_allclose(dataset["pos"][0, HORIZON], fresh.pos, atol=1e-6)
    assert dataset["placement"][0, 1] == int(fresh.placement)
    # Per-episode metadata agrees with what the prey saw at each episode's start:
    # its observation holds every resource's position relative to itself.
    prey = dataset.agent_index("prey")
    assert prey == 3
    firsts = dataset["obs.prey"][:, ::HORIZON, 0]  # [C, E, D]
    start_pos = dataset["pos"][:, ::HORIZON, prey]  # [C, E, 2]
    resources = firsts[..., 4 + 4 + 6 :].reshape(NUM_CHAINS, EPISODES, 4, 3)[..., :2]
    np.testing.assert_allclose(
        resources, dataset["resource_pos"] - start_pos[:, :, None], atol=1e-5
    )
    assert set(np.unique(dataset["placement"])) <= {0, 1}
    # Views: episodes and labels, chain-major.
    assert dataset.episodes("pos").shape == (NUM_CHAINS * EPISODES, HORIZON, 4, 2)
    np.testing.assert_array_equal(
        dataset.episodes("pos")[1], dataset["pos"][0, HORIZON:]
    )
    np.testing.assert_array_equal(
        dataset.episode_labels("placement"), dataset["placement"].reshape(-1)
    )
    np.testing.assert_array_equal(dataset.episode_labels("policy_id"), [3] * 8)
    np.testing.assert_array_equal(dataset.positions("prey"), dataset["pos"][:, :, 3])


def test_episodes_that_end_before_the_horizon_are_padded(game, dataset):
    """Episodes of 25 steps played with a horizon of 30: each on a row of its own
    from its first step, the steps past its end zeros and not played, the chain's
    third (unfinished) episode left out; the opponent's episodes of the population
    model read them so. An episode longer than the horizon is an error; where
    every episode lasts the horizon, the rows are :meth:`episodes`'s."""
    env, params, players, player_params = game

    def play(num_chains, horizon):
        return data.generate(
            env, params, players, player_params, jax.random.key(DATA_SEED),
            num_chains=num_chains, episodes_per_chain=2, horizon=horizon,
        )  # fmt: skip

    short = play(2, 30)
    with pytest.raises(InvalidParameterError, match="do not all last horizon"):
        short.episodes("pos")
    pos, played = short.episode_steps("pos")
    assert pos.shape == (4, 30, 4, 2) and played.shape == (4, 30)
    assert played[:, :HORIZON].all() and not played[:, HORIZON:].any()
    np.testing.assert_array_equal(pos[3, :HORIZON], short["pos"][1, 25:50])
    assert not pos[:, HORIZON:].any()
    assert short["episode"][0, 50:].tolist() == [2] * 10  # played, left out
    prey = population.member_episodes(short, "prey")
    np.testing.assert_array_equal(prey.valid, played)
    np.testing.assert_array_equal(
        prey.actions[1, :HORIZON], short["actions.prey"][0, 25:50]
    )
    with pytest.raises(InvalidParameterError, match="lasts more than horizon"):
        play(1, 20).episode_steps("pos")
    with pytest.raises(InvalidParameterError, match="not a per-step array"):
        dataset.episode_steps("placement")
    obs, played = dataset.episode_steps("obs.prey")
    np.testing.assert_array_equal(obs, dataset.episodes("obs.prey"))
    assert played.all()


def test_npz_round_trip_loads_without_pickle(dataset, tmp_path):
    path = data.save_dataset(tmp_path / "d.npz", dataset)
    with np.load(path, allow_pickle=False) as npz:
        assert data.HEADER_KEY in npz.files
    loaded = data.load_dataset(path)
    assert loaded.header == dataset.header
    assert loaded.header["metadata"] == {"note": "test"}
    assert sorted(loaded.arrays) == sorted(dataset.arrays)
    for name, array in dataset.arrays.items():
        np.testing.assert_array_equal(loaded[name], array)
        assert loaded[name].dtype == array.dtype


def test_bad_files_give_clear_errors(dataset, tmp_path):
    with pytest.raises(CheckpointError, match="no trajectory dataset"):
        data.load_dataset(tmp_path / "missing.npz")
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"not a zip file at all")
    with pytest.raises(CheckpointError, match="not a readable .npz"):
        data.load_dataset(corrupt)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, x=np.zeros(3))
    with pytest.raises(CheckpointError, match="no header"):
        data.load_dataset(foreign)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, __header__=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CheckpointError, match="not a readable"):
        data.load_dataset(pickled)
    other = tmp_path / "other.npz"
    np.savez(other, __header__=np.asarray('{"format": "something-else"}'))
    with pytest.raises(CheckpointError, match="not a mopa-trajectories file"):
        data.load_dataset(other)
    truncated = tmp_path / "truncated.npz"
    arrays = {k: v for k, v in dataset.arrays.items() if k != "pos"}
    np.savez(
        truncated,
        __header__=np.asarray(__import__("json").dumps(dataset.header)),
        **arrays,
    )
    with pytest.raises(CheckpointError, match="'pos' named in the header is missing"):
        data.load_dataset(truncated)


def test_splits_never_share_an_episode_and_are_deterministic(dataset):
    pooled = data.concatenate(
        [dataset] * 5, policy_names=("p0", "p1", "p2", "p3", "p4")
    )
    assert pooled.num_chains == 5 * NUM_CHAINS
    np.testing.assert_array_equal(
        pooled["policy_id"], np.repeat(np.arange(5), NUM_CHAINS)
    )
    assert pooled.header["policy_names"] == ["p0", "p1", "p2", "p3", "p4"]
    train, test = data.split(pooled, test_fraction=0.25, seed=3, stratify="policy_id")
    assert set(train["chain"]).isdisjoint(test["chain"])
    assert sorted([*train["chain"], *test["chain"]]) == list(range(pooled.num_chains))
    # Stratified: one of each policy's four chains is held out.
    np.testing.assert_array_equal(np.bincount(test["policy_id"]), [1] * 5)
    # Whole chains move: the held-out chains' episodes are complete and intact.
    np.testing.assert_array_equal(test["pos"], pooled["pos"][test["chain"]])
    again_train, again_test = data.split(pooled, 0.25, seed=3, stratify="policy_id")
    np.testing.assert_array_equal(again_test["chain"], test["chain"])
    np.testing.assert_array_equal(again_train["chain"], train["chain"])
    other = {tuple(data.split(pooled, 0.25, seed=s)[1]["chain"]) for s in range(6)}
    assert len(other) > 1
    varies = np.any(dataset["placement"] != dataset["placement"][:, :1])
    assert varies
    with pytest.raises(InvalidParameterError, match="not one scalar per chain"):
        data.split(dataset, stratify="placement")


def test_concatenate_refuses_another_game(dataset):
    header = {**dataset.header, "env": "tag_intent"}
    other = data.TrajectoryDataset(header, dataset.arrays)
    with pytest.raises(InvalidParameterError, match="differs from dataset 0 in 'env'"):
        data.concatenate([dataset, other])


# -- representations -------------------------------------------------------------------
# Jitted once (grid size static), so the checks below do not compile op by op.
occupancy = jax.jit(rep.occupancy, static_argnums=1)
prefix_occupancies = jax.jit(rep.prefix_occupancies, static_argnums=(1, 2))


@pytest.fixture(scope="module")
def positions():
    return np.random.default_rng(0).uniform(-0.99, 0.99, (30, 2)).astype(np.float32)


def test_occupancy_matches_numpy_histogram2d(positions):
    histogram = np.asarray(occupancy(jnp.asarray(positions), 8))
    counts, _, _ = np.histogram2d(
        positions[:, 0], positions[:, 1], bins=8, range=[[-1, 1], [-1, 1]]
    )
    np.testing.assert_allclose(histogram, counts / counts.sum(), atol=1e-6)
    assert histogram.sum() == pytest.approx(1.0)
    window = np.asarray(occupancy(jnp.asarray(positions), 4, start=10, stop=20))
    counts, _, _ = np.histogram2d(
        positions[10:20, 0], positions[10:20, 1], bins=4, range=[[-1, 1], [-1, 1]]
    )
    np.testing.assert_allclose(window, counts / 10, atol=1e-6)
    # Outside the arena: clipped into the edge cell, never dropped.
    outside = np.asarray(occupancy(jnp.asarray([[1.5, -3.0]]), 4))
    assert outside[3, 0] == 1.0 and outside.sum() == 1.0


def test_prefix_occupancies_and_windows_equal_their_definitions(positions):
    x = jnp.asarray(positions)
    prefixes = np.asarray(prefix_occupancies(x, 6))
    windowed = np.asarray(prefix_occupancies(x, 6, 5))
    for t in (0, 4, 17, 29):
        np.testing.assert_allclose(prefixes[t], occupancy(x, 6, 0, t + 1), atol=1e-6)
        np.testing.assert_allclose(
            windowed[t], occupancy(x, 6, max(0, t - 4), t + 1), atol=1e-6
        )
    np.testing.assert_allclose(prefixes.sum((1, 2)), 1.0, atol=1e-6)
    windows, masks = rep.prefix_windows(x, 4)
    assert windows.shape == (30, 4, 2) and masks.shape == (30, 4)
    # After 2 steps: two pads then steps 0 and 1, latest last.
    np.testing.assert_array_equal(masks[1], [False, False, True, True])
    np.testing.assert_allclose(windows[1], [[0, 0], [0, 0], positions[0], positions[1]])
    np.testing.assert_allclose(windows[29], positions[26:30])
    np.testing.assert_allclose(
        rep.raw_sequence(x, 3, start=2), positions[2:5].reshape(-1)
    )
    # vmappable over episodes
    batch = jax.vmap(lambda p: rep.occupancy(p, 6))(jnp.stack([x, x[::-1]]))
    np.testing.assert_allclose(batch[0], batch[1], atol=1e-6)
