"""Bad input gets a clear error that names what is wrong."""

import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.core.checks import BOUNDS, Bounds, field_kinds
from mopa.envs import make, registered_envs
from mopa.errors import (
    InvalidActionError,
    InvalidParameterError,
    MopaError,
    UnknownNameError,
)


def test_unknown_env_name_lists_choices():
    with pytest.raises(
        UnknownNameError, match=r"unknown environment 'tagg'.*did you mean 'tag'"
    ):
        make("tagg")
    with pytest.raises(MopaError, match="registered: .*tag, tag_balanced"):
        make("nonsense")


def test_unknown_parameter_named():
    with pytest.raises(
        InvalidParameterError, match=r"unknown parameter 'prey_speed'.*prey_max_speed"
    ):
        make("tag", prey_speed=1.0)


def test_r_in_above_r_out():
    with pytest.raises(
        InvalidParameterError, match="shape_r_in .* must not exceed shape_r_out"
    ):
        make("tag_static", shape_r_in=0.7, shape_r_out=0.6)


@pytest.mark.parametrize(
    "field", ["predator_max_speed", "prey_max_speed", "predator_accel", "prey_accel"]
)
def test_negative_speeds(field):
    with pytest.raises(InvalidParameterError, match=f"parameter {field} must be >= 0"):
        make("tag", **{field: -0.5})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_predators": 0}, "num_predators must be >= 1"),
        ({"num_predators": 2.5}, "num_predators must be a whole number"),
        ({"shape_dir": 2.0}, "shape_dir must be -1, 0 or 1"),
        ({"resource_placement": "spiral"}, "resource_placement must be one of"),
        ({"max_steps": 0}, "max_steps must be >= 1"),
        ({"belief_alpha_low": 0.8, "belief_alpha_high": 0.2}, "belief_alpha_low/high"),
        ({"obstacle_pos": [[0.0, 0.0]]}, r"obstacle_pos must have shape \(2, 2\)"),
        ({"predator_intent_obs": True}, "predator_intent_obs needs num_intents"),
    ],
)
def test_invalid_overrides(overrides, message):
    with pytest.raises(InvalidParameterError, match=message):
        make("tag", **overrides)


def test_invalid_params_passed_to_reset_and_step():
    env, params = make("tag")
    bad = params.replace(prey_max_speed=jnp.asarray(-1.0))
    with pytest.raises(InvalidParameterError, match="prey_max_speed"):
        env.reset(jax.random.key(0), bad)
    _, state = env.reset(jax.random.key(0), params)
    actions = (jnp.zeros(3, jnp.int32), jnp.zeros(1, jnp.int32))
    with pytest.raises(InvalidParameterError, match="prey_max_speed"):
        env.step(jax.random.key(0), state, actions, bad)


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        (
            (jnp.zeros(2, jnp.int32), jnp.zeros(1, jnp.int32)),
            r"team 'predator' must have shape \(3,\), got \(2,\)",
        ),
        (
            (jnp.zeros((3, 1), jnp.int32), jnp.zeros(1, jnp.int32)),
            r"must have shape \(3,\), got \(3, 1\)",
        ),
        (
            (jnp.zeros(3, jnp.float32), jnp.zeros(1, jnp.int32)),
            "team 'predator' must be integers, got dtype float32",
        ),
        (
            (jnp.array([0, 5, 1]), jnp.zeros(1, jnp.int32)),
            r"action 5 for team 'predator' is out of range \[0, 4\]",
        ),
        (
            (jnp.zeros(3, jnp.int32), np.array([-1])),
            r"action -1 for team 'prey' is out of range",
        ),
        ((jnp.zeros(3, jnp.int32),), "actions must be a tuple of 2 arrays"),
        (jnp.zeros(4, jnp.int32), "actions must be a tuple of 2 arrays"),
    ],
)
def test_bad_actions(actions, message):
    env, params = make("tag")
    _, state = env.reset(jax.random.key(0), params)
    with pytest.raises(InvalidActionError, match=message):
        env.step(jax.random.key(0), state, actions, params)


def test_bad_action_shape_and_dtype_caught_under_jit():
    """Shapes and dtypes are static, so they are checked inside jit too."""
    env, params = make("tag")
    _, state = env.reset(jax.random.key(0), params)
    step = jax.jit(env.step)
    with pytest.raises(InvalidActionError, match="must be integers"):
        step(jax.random.key(0), state, (jnp.zeros(3), jnp.zeros(1, jnp.int32)), params)
    with pytest.raises(InvalidActionError, match="must have shape"):
        step(
            jax.random.key(0),
            state,
            (jnp.zeros(4, jnp.int32), jnp.zeros(1, jnp.int32)),
            params,
        )


def _outside(kind, bounds, default):
    """A value the field refuses: a number for a flag, else one past its declared
    bounds (below the low end, above the high end, beside the choices), or NaN
    where every finite number is allowed; shaped like an array default."""
    if kind is bool:
        return 2
    if bounds.choices is not None:
        value = max(bounds.choices) + 1
    elif math.isfinite(bounds.low):
        value = bounds.low - 1
    elif math.isfinite(bounds.high):
        value = bounds.high + 1
    else:
        value = math.nan
    if np.ndim(default):
        return np.full(np.shape(default), value, np.float32)
    return int(value) if kind is int else float(value)


def _fields(name):
    """``[(field, kind, bounds, default)]`` of every structure and parameter
    field of the registered game ``name``, read off its dataclasses."""
    env, params = make(name)
    game = env.unwrapped if hasattr(env, "unwrapped") else env
    rows = []
    for owner in (game, params):
        kinds = field_kinds(type(owner))
        for field in dataclasses.fields(owner):
            if not field.init or field.name in ("name", "base_params"):
                continue
            bounds = field.metadata.get(BOUNDS)
            kind = kinds[field.name]
            rows.append((field.name, kind, bounds, getattr(owner, field.name)))
    return rows


@pytest.mark.parametrize("name", registered_envs())
def test_every_field_of_every_game_refuses_a_value_out_of_range(name):
    """Walk the fields of each registered game (its structure and its parameter
    dataclasses): every field but a flag declares its bounds, and a value outside
    them is refused with an error that names the field."""
    rows = _fields(name)
    assert "max_steps" in [field for field, *_ in rows]  # the walk reaches params
    for field, kind, bounds, default in rows:
        assert kind is bool or bounds is not None, f"{name}.{field} declares no bounds"
        value = _outside(kind, bounds, default)
        with pytest.raises(InvalidParameterError) as refused:
            make(name, **{field: value})
        assert re.search(rf"\b{field}\b", str(refused.value)), (field, refused.value)
    assert Bounds(low=0.0).holds(0.0) and not Bounds(low=0.0, open_low=True).holds(0.0)
    assert not Bounds(low=0.0).holds(math.nan)


def test_an_intent_game_needs_its_intents():
    with pytest.raises(
        InvalidParameterError, match="tag_intent: num_intents must be >= 1, got 0"
    ):
        make("tag_intent", num_intents=0)
    env, _ = make("tag", num_intents=4)  # intents may be added to the other games
    assert env.num_intents == 4
