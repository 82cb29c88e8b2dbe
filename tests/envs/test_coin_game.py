"""The Coin Game variants: rewards, colour alternation, coin placement, the
observations and the scripted players, from hand-built states."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.coin_game import (
    CoinGameState,
    move_towards,
    scripted_action,
    update_tft_mode,
)
from mopa.errors import InvalidParameterError

RIGHT, LEFT, DOWN, UP, STAY = 0, 1, 2, 3, 4


def state(red, blue, coins, colours):
    return CoinGameState(
        pos=jnp.array([red, blue], jnp.int32),
        coin_pos=jnp.array(coins, jnp.int32),
        coin_colour=jnp.array(colours, jnp.int32),
        step=jnp.zeros((), jnp.int32),
    )


def step(env, params, s, red_action, blue_action, key=0):
    return env.step(
        jax.random.key(key),
        s,
        (jnp.array([red_action]), jnp.array([blue_action])),
        params,
    )


def test_pickups_rewards_and_colour_alternation():
    env, params = make("coin_game")
    # Red at (0, 0), blue at (2, 2), a red coin at (0, 1): red steps right onto it.
    s = state([0, 0], [2, 2], [[0, 1]], [0])
    obs, s2, rewards, _, _, info = step(env, params, s, RIGHT, UP)
    assert (float(rewards[0][0]), float(rewards[1][0])) == (1.0, 0.0)
    assert int(s2.coin_colour[0]) == 1  # the next coin is blue
    assert info["own_coin"].tolist() == [1, 0] and info["captures"].tolist() == [1, 0]
    # The new coin is on a cell with no agent.
    assert not (s2.coin_pos[0] == s2.pos).all(-1).any()
    # Red takes a blue coin: red +1, blue -2.
    s = state([0, 0], [2, 2], [[0, 1]], [1])
    _, _, rewards, _, _, info = step(env, params, s, RIGHT, UP)
    assert (float(rewards[0][0]), float(rewards[1][0])) == (1.0, -2.0)
    assert info["own_coin"].tolist() == [0, 0]
    # Both take a red coin at once: each +1, and red loses 2 to blue's taking.
    s = state([1, 0], [1, 2], [[1, 1]], [0])
    _, _, rewards, _, _, _ = step(env, params, s, RIGHT, LEFT)
    assert (float(rewards[0][0]), float(rewards[1][0])) == (-1.0, 1.0)


def test_moves_wrap_around_the_torus():
    env, params = make("coin_game")
    s = state([0, 0], [2, 2], [[1, 1]], [0])
    _, s2, rewards, _, _, _ = step(env, params, s, UP, DOWN)
    assert s2.pos.tolist() == [[2, 0], [0, 2]]
    _, s3, _, _, _, _ = step(env, params, s, LEFT, RIGHT)
    assert s3.pos.tolist() == [[0, 2], [2, 0]]


def test_observation_planes():
    env, params = make("coin_game")
    s = state([0, 0], [2, 1], [[1, 2]], [1])
    obs = env.observe(s, params)
    planes = np.asarray(obs[0][0]).reshape(4, 3, 3)
    assert planes[0, 0, 0] == 1 and planes[1, 2, 1] == 1
    assert planes[2].sum() == 0 and planes[3, 1, 2] == 1  # a blue coin
    np.testing.assert_array_equal(obs[0], obs[1])  # the same red-centric view
    assert planes.sum() == 3


def test_coins_never_spawn_under_agents():
    env, params = make("coin_game")

    def run(key):
        _, s = env.reset(key, params)

        def body(s, k):
            k_act, k_step = jax.random.split(k)
            a = jax.random.randint(k_act, (2, 1), 0, 4)
            _, s, _, _, _, _ = env.step(k_step, s, (a[0], a[1]), params)
            return s, s

        _, states = jax.lax.scan(body, s, jax.random.split(key, 50))
        return states

    states = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 64))
    # Before any agent moves onto it, a coin never shares a cell with an agent at
    # the time it appears: check every new coin position.
    moved = jnp.any(states.coin_pos[:, 1:] != states.coin_pos[:, :-1], axis=(-1, -2))
    on_agent = (
        (states.coin_pos[:, 1:, 0][:, :, None] == states.pos[:, 1:]).all(-1).any(-1)
    )
    assert int(moved.sum()) > 100
    assert not bool(jnp.any(moved & on_agent))


def test_two_coin_variant():
    env, params = make("coin_game_two_coins")
    assert env.action_space(0).n == 5
    # Red at (0, 0) and blue at (2, 2); red coin at (0, 1), blue coin at (1, 0).
    s = state([0, 0], [2, 2], [[0, 1], [1, 0]], [0, 1])
    obs = env.observe(s, params)
    red_view = np.asarray(obs[0][0]).reshape(4, 3, 3)
    blue_view = np.asarray(obs[1][0]).reshape(4, 3, 3)
    # Egocentric: each sees itself at the centre; planes own, other, own coin,
    # other coin. Red's coin is one cell right of red; blue's is (2,2)->(1,0):
    # down 2 (= up 1) and right 1 on the torus.
    assert red_view[0, 1, 1] == 1 and red_view[2, 1, 2] == 1 and red_view[3, 2, 1] == 1
    assert blue_view[0, 1, 1] == 1 and blue_view[2, 0, 2] == 1
    # Red takes blue's coin by moving down; blue stays: red +1, blue -2; both
    # coins stay on the board.
    _, s2, rewards, _, _, _ = step(env, params, s, DOWN, STAY)
    assert (float(rewards[0][0]), float(rewards[1][0])) == (1.0, -2.0)
    assert s2.coin_colour.tolist() == [0, 1] and s2.pos.tolist() == [[1, 0], [2, 2]]
    assert s2.coin_pos[0].tolist() == [0, 1]


def test_scripted_players():
    # Vertical moves first on the shortest path; the torus makes 2 down = 1 up.
    assert int(move_towards(jnp.array([0, 0]), jnp.array([2, 1]), 3)) == UP
    assert int(move_towards(jnp.array([0, 0]), jnp.array([0, 2]), 3)) == LEFT
    assert int(move_towards(jnp.array([0, 0]), jnp.array([1, 2]), 3)) == DOWN
    env, params = make("coin_game")
    blue_coin = env.observe(state([0, 0], [2, 2], [[1, 0]], [1]), params)[0][0]
    no = jnp.zeros((), bool)
    assert int(scripted_action("alld", blue_coin, 0, no)) == DOWN
    assert int(scripted_action("allc", blue_coin, 0, no)) == UP  # away from it
    assert int(scripted_action("allc", blue_coin, 1, no)) == UP  # blue: (2,2)->(1,0)
    assert int(scripted_action("tft", blue_coin, 0, no)) == UP
    assert int(scripted_action("tft", blue_coin, 0, jnp.ones((), bool))) == DOWN
    assert bool(update_tft_mode(no, jnp.float32(-2.0)))
    assert not bool(update_tft_mode(jnp.ones((), bool), jnp.float32(1.0)))
    assert bool(update_tft_mode(jnp.ones((), bool), jnp.float32(0.0)))


def test_bad_parameters_are_named():
    with pytest.raises(InvalidParameterError, match="grid_size"):
        make("coin_game", grid_size=1)
    with pytest.raises(InvalidParameterError, match="max_steps"):
        make("coin_game_two_coins", max_steps=0)
