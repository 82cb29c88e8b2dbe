"""Labelled trajectory datasets: generate them from any pair of players on any game,
save and load them as one ``.npz``, split them by episode, and pool several.

:func:`generate` plays ``num_chains`` chains in one jitted ``vmap`` of a
``lax.scan`` over steps. A *chain* is ``episodes_per_chain`` (E) consecutive
episodes of the same players, joined by :class:`~mopa.envs.wrappers.AutoReset`, so
an encoder can read across episodes (the research's Exp 5 observes up to six); with
E = 1 a chain is one episode. Every array of a :class:`TrajectoryDataset` has the
chain on its leading axis:

* per step (``[C, S, ...]``, ``S = E x horizon``): ``pos`` ``[C, S, N, 2]`` (every
  agent's position in the state the step's action was taken in, when the state has
  a ``pos`` field), ``obs.<team>`` ``[C, S, A_t, D_t]``, ``actions.<team>``
  ``[C, S, A_t]``, ``rewards.<team>`` ``[C, S, A_t]``, ``episode`` (index of the
  episode inside the chain), ``step`` (index inside the episode), ``done`` (the
  step ended its episode) and ``valid`` (the step belongs to one of the chain's
  first E episodes; always true when episodes last exactly ``horizon`` steps);
* per episode (``[C, E, ...]``): the state fields of :data:`EPISODE_STATE_FIELDS`
  the game has (``intent`` on ``tag_intent``, the resource ``placement`` and
  ``resource_pos`` on the resource games, ``obstacle_pos``), read at the episode's
  first step, and ``episode_valid``;
* per chain (``[C]``): ``policy_id``, ``seed_index`` (labels given by the caller,
  e.g. which specialist and which of its training seeds) and ``chain`` (the index
  of the chain's key in its :func:`generate` call).

Keys: the chain key is split into ``(key_reset, key_steps)``; ``key_steps`` into one
key per step; each step key into ``num_teams + 1`` keys, the first for
``env.step`` and key ``1 + t`` for team ``t``'s player.

Splits (:func:`split`) keep chains whole, so they never split an episode.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.checkpoint import check_header
from mopa.core.checks import check_fraction
from mopa.core.files import atomic_write
from mopa.envs import make
from mopa.envs.base import Env
from mopa.envs.rollout import has_auto_reset
from mopa.envs.wrappers import AutoReset
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.players import Player, PolicyPlayer, act_all, initial_player_carry

DATASET_FORMAT = "mopa-trajectories"
FORMAT_VERSION = 1
HEADER_KEY = "__header__"
"""Name of the ``.npz`` entry holding the JSON header (a 0-d unicode array)."""

EPISODE_STATE_FIELDS = ("intent", "placement", "resource_pos", "obstacle_pos")
"""Game-state fields recorded once per episode when the state has them."""


class _Step(NamedTuple):
    """What the scan records at one step of one chain."""

    obs: tuple  # per team [A_t, D_t]
    actions: tuple  # per team [A_t]
    rewards: tuple  # per team [A_t]
    pos: Any  # [N, 2], or None when the state has no positions
    episode: jax.Array  # [] int32
    step: jax.Array  # [] int32
    done: jax.Array  # [] bool
    state_fields: dict  # name -> value of the state field at this step


@dataclasses.dataclass(frozen=True)
class TrajectoryDataset:
    """Trajectory arrays (NumPy, chain-major) and a JSON-able header.

    Build one with :func:`generate`, :func:`load_dataset` or :func:`concatenate`.
    The header names every array and its kind (``step_fields`` ``[C, S, ...]``,
    ``episode_fields`` ``[C, E, ...]``, ``chain_fields`` ``[C]``), the game
    (``env``, ``team_names``, ``team_sizes``), ``horizon``, ``episodes_per_chain``,
    ``policy_names`` and free-form ``metadata``.
    """

    header: dict[str, Any]
    arrays: dict[str, np.ndarray]

    def __post_init__(self):
        problem = _dataset_problem(self.header, self.arrays)
        if problem:
            raise InvalidParameterError(f"inconsistent trajectory dataset: {problem}")

    # -- sizes ---------------------------------------------------------------------
    @property
    def num_chains(self) -> int:
        return int(self.header["num_chains"])

    @property
    def episodes_per_chain(self) -> int:
        return int(self.header["episodes_per_chain"])

    @property
    def horizon(self) -> int:
        return int(self.header["horizon"])

    @property
    def steps_per_chain(self) -> int:
        return self.episodes_per_chain * self.horizon

    @property
    def num_episodes(self) -> int:
        return self.num_chains * self.episodes_per_chain

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            raise InvalidParameterError(
                f"the dataset has no array {name!r}; it has {sorted(self.arrays)}"
            )
        return self.arrays[name]

    # -- views ---------------------------------------------------------------------
    def agent_index(self, team: str, member: int = 0) -> int:
        """Index in ``pos``'s agent axis of agent ``member`` of ``team`` (agents are
        ordered team by team)."""
        names, sizes = self.header["team_names"], self.header["team_sizes"]
        if team not in names:
            raise InvalidParameterError(f"unknown team {team!r}; teams are {names}")
        t = names.index(team)
        if not 0 <= member < sizes[t]:
            raise InvalidParameterError(
                f"member must be in [0, {sizes[t] - 1}] for team {team!r}, got {member}"
            )
        return int(sum(sizes[:t]) + member)

    def positions(self, team: str, member: int = 0) -> np.ndarray:
        """``[C, S, 2]`` positions of one agent over each chain."""
        return self["pos"][:, :, self.agent_index(team, member)]

    def episodes(self, name: str) -> np.ndarray:
        """Per-step array ``name`` cut into episodes: ``[C x E, horizon, ...]``
        (chain-major), for games whose episodes last exactly ``horizon`` steps.

        Raises:
            InvalidParameterError: ``name`` is not a per-step array, or an episode
                ended early (the chain's episodes are not ``horizon`` long).
        """
        if name not in self.header["step_fields"]:
            raise InvalidParameterError(f"{name!r} is not a per-step array")
        expected = np.arange(self.steps_per_chain) // self.horizon
        if not np.all(self["episode"] == expected[None]):
            raise InvalidParameterError(
                "episodes of this dataset do not all last horizon "
                f"({self.horizon}) steps; index steps with the 'episode' array"
            )
        array = self[name]
        return array.reshape(self.num_episodes, self.horizon, *array.shape[2:])

    def episode_steps(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Per-step array ``name`` cut into the chains' first ``E`` episodes, each on
        a row of its own from its first step, for games whose episodes can end
        early: ``(array [C x E, horizon, ...], played [C x E, horizon])``
        (chain-major), the steps past an episode's end zeros and not ``played``.
        Where every episode lasts ``horizon`` steps, ``array`` is
        :meth:`episodes`'s and every step is played.

        Raises:
            InvalidParameterError: ``name`` is not a per-step array, or an episode
                lasted longer than ``horizon`` steps.
        """
        if name not in self.header["step_fields"]:
            raise InvalidParameterError(f"{name!r} is not a per-step array")
        array = self[name]
        chain, at = np.nonzero(self["valid"])
        step = self["step"][chain, at]
        if step.size and int(step.max()) >= self.horizon:
            raise InvalidParameterError(
                f"an episode of this dataset lasts more than horizon ({self.horizon}) "
                "steps"
            )
        row = chain * self.episodes_per_chain + self["episode"][chain, at]
        out = np.zeros((self.num_episodes, self.horizon, *array.shape[2:]), array.dtype)
        played = np.zeros((self.num_episodes, self.horizon), bool)
        out[row, step] = array[chain, at]
        played[row, step] = True
        return out, played

    def episode_labels(self, name: str) -> np.ndarray:
        """``[C x E, ...]``: a per-episode array flattened chain-major, or a
        per-chain array repeated for each of the chain's episodes."""
        if name in self.header["episode_fields"]:
            array = self[name]
            return array.reshape(self.num_episodes, *array.shape[2:])
        if name in self.header["chain_fields"]:
            return np.repeat(self[name], self.episodes_per_chain, axis=0)
        raise InvalidParameterError(
            f"{name!r} is neither a per-episode nor a per-chain array"
        )

    def select(self, chains: Sequence[int] | np.ndarray) -> TrajectoryDataset:
        """The dataset of the chains at indices ``chains`` (in that order)."""
        index = np.asarray(chains, np.int64)
        if index.ndim != 1 or np.any((index < 0) | (index >= self.num_chains)):
            raise InvalidParameterError(
                f"chain indices must be a 1-D array in [0, {self.num_chains - 1}]"
            )
        arrays = {k: v[index] for k, v in self.arrays.items()}
        return TrajectoryDataset({**self.header, "num_chains": len(index)}, arrays)


# -- generation ------------------------------------------------------------------------
def generate(
    env: Env,
    params: Any,
    players: tuple[Player, ...],
    player_params: tuple[Any, ...],
    key: jax.Array,
    *,
    num_chains: int,
    episodes_per_chain: int = 1,
    horizon: int | None = None,
    policy_id: int = 0,
    seed_index: int = 0,
    policy_names: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> TrajectoryDataset:
    """Play ``num_chains`` chains of ``episodes_per_chain`` episodes and record them.

    Args:
        env: the game (wrapped in :class:`AutoReset` here unless it already is).
        params: the game's parameter pytree.
        players: one player per team, in ``env.team_names`` order.
        player_params: each player's parameters (weights), same order.
        key: PRNG key; chain ``i`` uses ``split(key, num_chains)[i]``.
        num_chains: chains played in parallel (``C``).
        episodes_per_chain: consecutive episodes per chain (``E``).
        horizon: steps per episode (default ``params.max_steps``); each chain runs
            ``E x horizon`` steps.
        policy_id: label stored in ``policy_id`` for every chain.
        seed_index: label stored in ``seed_index`` for every chain.
        policy_names: names of the policy ids, kept in the header.
        metadata: JSON-able facts to keep in the header (e.g. checkpoint paths).

    Returns:
        The :class:`TrajectoryDataset`; see the module docstring for its arrays.
    """
    if len(players) != env.num_teams or len(player_params) != env.num_teams:
        raise InvalidParameterError(
            f"{env.name}: give one player and one parameter set per team "
            f"{env.team_names}; got {len(players)} and {len(player_params)}"
        )
    for name, value in (
        ("num_chains", num_chains),
        ("episodes_per_chain", episodes_per_chain),
    ):
        if int(value) < 1:
            raise InvalidParameterError(f"{name} must be >= 1, got {value}")
    if horizon is None:
        if not hasattr(params, "max_steps"):
            raise InvalidParameterError(
                f"{env.name}: give horizon; the game's params have no max_steps"
            )
        horizon = int(np.asarray(params.max_steps))
    if int(horizon) < 1:
        raise InvalidParameterError(f"horizon must be >= 1, got {horizon}")
    for t, player in enumerate(players):
        if player.num_agents != env.team_sizes[t]:
            raise InvalidParameterError(
                f"player {t} acts for {player.num_agents} agents but team "
                f"{env.team_names[t]!r} has {env.team_sizes[t]}"
            )
    if not has_auto_reset(env):
        env = AutoReset(env)
    keys = jax.random.split(key, num_chains)
    record = _play_chains(
        env,
        tuple(players),
        int(episodes_per_chain),
        int(horizon),
        params,
        tuple(player_params),
        keys,
    )
    return _to_dataset(
        env,
        jax.device_get(record),
        episodes_per_chain=int(episodes_per_chain),
        horizon=int(horizon),
        policy_id=policy_id,
        seed_index=seed_index,
        policy_names=policy_names,
        metadata=metadata,
    )


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _play_chains(env, players, episodes_per_chain, horizon, params, team_params, keys):
    num_steps = episodes_per_chain * horizon
    play = functools.partial(_play_chain, env, players, episodes_per_chain, num_steps)
    return jax.vmap(play, in_axes=(None, None, 0))(params, team_params, keys)


def _play_chain(env, players, episodes_per_chain, num_steps, params, team_params, key):
    """One chain: a ``lax.scan`` over ``num_steps`` steps through auto-resets.

    Returns:
        ``(steps, episode_fields, episode_valid)``: the per-step record
        (:class:`_Step`, leaves ``[S, ...]``), the state fields at each episode's
        first step (``[E, ...]``) and whether episode ``e`` started (``[E]``).
    """
    key_reset, key_steps = jax.random.split(key)
    obs, state = env.reset(key_reset, params)
    carries = tuple(initial_player_carry(p) for p in players)
    fields = tuple(f for f in EPISODE_STATE_FIELDS if hasattr(state, f))

    def body(carry, key_t):
        obs, state, carries, first, episode, step = carry
        key_env, actions, next_carries = act_all(
            players, team_params, key_t, state, obs, carries, first
        )
        next_obs, next_state, rewards, _, _, info = env.step(
            key_env, state, actions, params
        )
        done = info["done"]
        record = _Step(
            obs=obs,
            actions=actions,
            rewards=rewards,
            pos=getattr(state, "pos", None),
            episode=episode,
            step=step,
            done=done,
            state_fields={f: getattr(state, f) for f in fields},
        )
        next_carry = (
            next_obs,
            next_state,
            next_carries,
            done,
            episode + done.astype(jnp.int32),
            jnp.where(done, 0, step + 1),
        )
        return next_carry, record

    zero = jnp.zeros((), jnp.int32)
    init = (obs, state, carries, jnp.ones((), bool), zero, zero)
    _, steps = jax.lax.scan(body, init, jax.random.split(key_steps, num_steps))
    # Each episode's first step: the first step whose episode index is e.
    starts = steps.episode[None, :] == jnp.arange(episodes_per_chain)[:, None]
    first_step = jnp.argmax(starts, axis=1)  # [E]
    episode_fields = {f: v[first_step] for f, v in steps.state_fields.items()}
    return steps._replace(state_fields={}), episode_fields, jnp.any(starts, axis=1)


def _to_dataset(
    env: Env,
    record: tuple,
    *,
    episodes_per_chain: int,
    horizon: int,
    policy_id: int,
    seed_index: int,
    policy_names: Sequence[str],
    metadata: dict[str, Any] | None,
) -> TrajectoryDataset:
    steps, episode_fields, episode_valid = record
    num_chains = int(np.shape(steps.episode)[0])
    step_arrays: dict[str, np.ndarray] = {}
    if steps.pos is not None:
        step_arrays["pos"] = np.asarray(steps.pos, np.float32)
    for t, team in enumerate(env.team_names):
        step_arrays[f"obs.{team}"] = np.asarray(steps.obs[t])
        step_arrays[f"actions.{team}"] = np.asarray(steps.actions[t])
        step_arrays[f"rewards.{team}"] = np.asarray(steps.rewards[t], np.float32)
    episode = np.asarray(steps.episode, np.int32)
    step_arrays.update(
        episode=episode,
        step=np.asarray(steps.step, np.int32),
        done=np.asarray(steps.done, bool),
        valid=episode < episodes_per_chain,
    )
    episode_arrays = {k: np.asarray(v) for k, v in episode_fields.items()}
    episode_arrays["episode_valid"] = np.asarray(episode_valid, bool)
    chain_arrays = {
        "policy_id": np.full((num_chains,), policy_id, np.int32),
        "seed_index": np.full((num_chains,), seed_index, np.int32),
        "chain": np.arange(num_chains, dtype=np.int32),
    }
    header = {
        "format": DATASET_FORMAT,
        "version": FORMAT_VERSION,
        "env": env.name,
        "team_names": list(env.team_names),
        "team_sizes": [int(n) for n in env.team_sizes],
        "num_chains": num_chains,
        "episodes_per_chain": episodes_per_chain,
        "horizon": horizon,
        "step_fields": sorted(step_arrays),
        "episode_fields": sorted(episode_arrays),
        "chain_fields": sorted(chain_arrays),
        "policy_names": [str(n) for n in policy_names],
        "metadata": dict(metadata or {}),
    }
    _check_json(header)
    return TrajectoryDataset(header, {**step_arrays, **episode_arrays, **chain_arrays})


def _check_json(header: dict[str, Any]) -> None:
    try:
        json.dumps(header)
    except TypeError as error:
        raise InvalidParameterError(
            f"dataset metadata must be JSON-able ({error})"
        ) from None


# -- consistency -----------------------------------------------------------------------
_REQUIRED_HEADER = {
    "format": str,
    "version": int,
    "env": str,
    "team_names": list,
    "team_sizes": list,
    "num_chains": int,
    "episodes_per_chain": int,
    "horizon": int,
    "step_fields": list,
    "episode_fields": list,
    "chain_fields": list,
    "policy_names": list,
    "metadata": dict,
}


def _dataset_problem(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """What is wrong with ``header`` and ``arrays`` together ('' if nothing)."""
    if not isinstance(header, dict):
        return "the header is not a JSON object"
    for field, kind in _REQUIRED_HEADER.items():
        if not isinstance(header.get(field), kind):
            return f"header field {field!r} is missing or not a {kind.__name__}"
    chains, per_chain = header["num_chains"], header["episodes_per_chain"]
    leading = {
        "step_fields": (chains, per_chain * header["horizon"]),
        "episode_fields": (chains, per_chain),
        "chain_fields": (chains,),
    }
    named = set()
    for kind, shape in leading.items():
        for name in header[kind]:
            named.add(name)
            if name not in arrays:
                return f"array {name!r} named in the header is missing"
            got = tuple(np.shape(arrays[name])[: len(shape)])
            if got != shape:
                return f"array {name!r} has leading shape {got}, expected {shape}"
    extra = sorted(set(arrays) - named)
    if extra:
        return f"array {extra[0]!r} is not named in the header"
    return ""


# -- files -----------------------------------------------------------------------------
def save_dataset(path: str | Path, dataset: TrajectoryDataset) -> Path:
    """Write ``dataset`` as one ``.npz`` (atomically): its arrays plus the JSON
    header in the entry :data:`HEADER_KEY`. Nothing in it needs pickle."""
    header = np.asarray(json.dumps(dataset.header))

    def write(file):
        np.savez(file, **{HEADER_KEY: header}, **dataset.arrays)

    return atomic_write(path, write)


def load_dataset(path: str | Path) -> TrajectoryDataset:
    """Read a dataset written by :func:`save_dataset` (``allow_pickle=False``).

    Raises:
        CheckpointError: the file is missing, not an ``.npz``, holds no mopa
            header, has another format version, or its arrays disagree with the
            header.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no trajectory dataset at {path}")
    try:
        with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise CheckpointError(
            f"{path} is not a readable .npz trajectory dataset ({type(error).__name__})"
        ) from None
    if HEADER_KEY not in arrays:
        raise CheckpointError(f"{path} is not a mopa trajectory dataset (no header)")
    try:
        header = json.loads(str(arrays.pop(HEADER_KEY)))
    except ValueError:
        raise CheckpointError(f"{path}: the dataset header is not JSON") from None
    check_header(path, header, DATASET_FORMAT, FORMAT_VERSION)
    problem = _dataset_problem(header, arrays)
    if problem:
        raise CheckpointError(f"{path}: {problem}")
    return TrajectoryDataset(header, arrays)


# -- pooling and splits ----------------------------------------------------------------
def concatenate(
    datasets: Sequence[TrajectoryDataset], policy_names: Sequence[str] | None = None
) -> TrajectoryDataset:
    """Pool datasets of the same game and shape along the chain axis.

    Args:
        datasets: datasets with equal ``env``, teams, ``horizon``,
            ``episodes_per_chain`` and array names.
        policy_names: if given (one per dataset), dataset ``i``'s chains get
            ``policy_id = i`` and the header ``policy_names``; otherwise the
            datasets keep their own ids and the first one's names.

    Returns:
        One dataset; ``chain`` indexes the pooled chains ``0..C-1``.
    """
    if not datasets:
        raise InvalidParameterError("concatenate needs at least one dataset")
    first = datasets[0].header
    same = ("env", "team_names", "team_sizes", "horizon", "episodes_per_chain")
    for i, dataset in enumerate(datasets[1:], start=1):
        for field in (*same, "step_fields", "episode_fields", "chain_fields"):
            if dataset.header[field] != first[field]:
                raise InvalidParameterError(
                    f"dataset {i} differs from dataset 0 in {field!r}: "
                    f"{dataset.header[field]!r} vs {first[field]!r}"
                )
    if policy_names is not None and len(policy_names) != len(datasets):
        raise InvalidParameterError(
            f"give one policy name per dataset ({len(datasets)}), "
            f"got {len(policy_names)}"
        )
    arrays = {
        name: np.concatenate([d.arrays[name] for d in datasets])
        for name in datasets[0].arrays
    }
    if policy_names is not None:
        arrays["policy_id"] = np.concatenate(
            [np.full((d.num_chains,), i, np.int32) for i, d in enumerate(datasets)]
        )
    num_chains = sum(d.num_chains for d in datasets)
    arrays["chain"] = np.arange(num_chains, dtype=np.int32)
    header = {
        **first,
        "num_chains": num_chains,
        "policy_names": list(policy_names or first["policy_names"]),
        "metadata": {"parts": [d.header["metadata"] for d in datasets]},
    }
    return TrajectoryDataset(header, arrays)


def split_indices(
    num_units: int,
    test_fraction: float,
    seed: int,
    labels: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic train/test split of ``num_units`` units (sorted index arrays).

    With ``labels`` (``[num_units]``), each label's units are split separately
    (stratified): ``round(test_fraction x n)`` of a label's ``n`` units go to test,
    at least one when ``n >= 2`` and ``test_fraction > 0``.
    """
    check_fraction("test_fraction", test_fraction)
    if labels is None:
        labels = np.zeros((num_units,), np.int64)
    labels = np.asarray(labels)
    if labels.shape != (num_units,):
        raise InvalidParameterError(
            f"labels must have shape ({num_units},), got {labels.shape}"
        )
    rng = np.random.default_rng(seed)
    test = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        count = int(round(test_fraction * len(members)))
        if test_fraction > 0 and len(members) >= 2:
            count = min(max(count, 1), len(members) - 1)
        test.append(rng.permutation(members)[:count])
    test_index = np.sort(np.concatenate(test)).astype(np.int64)
    train_index = np.setdiff1d(np.arange(num_units), test_index)
    return train_index, test_index


def split(
    dataset: TrajectoryDataset,
    test_fraction: float = 0.2,
    seed: int = 0,
    stratify: str | None = None,
) -> tuple[TrajectoryDataset, TrajectoryDataset]:
    """Split ``dataset`` into ``(train, test)`` by whole chains (so never inside an
    episode), deterministically for ``seed``.

    Args:
        stratify: a per-chain label (``policy_id``, ``seed_index``) or a per-episode
            one (``placement``, ``intent``) that is constant within every chain;
            each of its values is split in the same proportion.
    """
    labels = None
    if stratify is not None:
        if stratify in dataset.header["chain_fields"]:
            labels = dataset[stratify]
        elif stratify in dataset.header["episode_fields"]:
            values = dataset[stratify].reshape(dataset.num_chains, -1)
            if values.shape[1] != dataset.episodes_per_chain or np.any(
                values != values[:, :1]
            ):
                raise InvalidParameterError(
                    f"cannot stratify by {stratify!r}: it is not one scalar per chain"
                )
            labels = values[:, 0]
        else:
            raise InvalidParameterError(
                f"cannot stratify by {stratify!r}: not a per-chain or per-episode array"
            )
    train_index, test_index = split_indices(
        dataset.num_chains, test_fraction, seed, labels
    )
    return dataset.select(train_index), dataset.select(test_index)


def play_dataset(
    env_name: str,
    env_overrides: dict[str, Any],
    teams: dict[str, tuple[Any, Any]],
    key: jax.Array,
    *,
    num_seeds: int,
    num_chains: int,
    episodes_per_chain: int,
    policy_id: int,
    policy_names: tuple[str, ...],
) -> TrajectoryDataset:
    """Chains of every seed of one co-trained run, each seed against itself.

    Seed ``s``'s predators play seed ``s``'s prey (co-trained pairs); chains of
    all seeds are pooled, ``seed_index`` telling them apart.
    """
    env, params = make(env_name, **env_overrides)
    players, stacks = [], []
    for team in env.team_names:
        if team not in teams:
            raise InvalidParameterError(f"the run has no policy for team {team!r}")
        spec, stack = teams[team]
        players.append(PolicyPlayer(spec))
        stacks.append(stack)
    parts = []
    for seed in range(num_seeds):
        parts.append(
            generate(
                env,
                params,
                tuple(players),
                tuple(jax.tree.map(lambda x, seed=seed: x[seed], s) for s in stacks),
                jax.random.fold_in(key, seed),
                num_chains=num_chains,
                episodes_per_chain=episodes_per_chain,
                policy_id=policy_id,
                seed_index=seed,
                policy_names=policy_names,
            )
        )
    return concatenate(parts)
