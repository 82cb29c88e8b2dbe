"""Cross-play tournaments: every player of one side against every player of the
other, for every seed pairing, in one jitted call.

Side A (the rows) plays the game's first team, side B (the columns) its second.
An entry is ``(name, player, params)`` with a leading seed axis ``[S, ...]`` on
``params`` (a multi-seed training run is one entry). Seed pairings are ``"all"``
(every seed of the row entry against every seed of the column entry,
``P = S_A x S_B``) or ``"paired"`` (seed ``i`` against seed ``i``, ``P = S``).

How it is one jitted call: entries of a side are grouped by player (hashable, so
static under ``jit``) and parameter structure (tree and leaf shapes), and each
group's parameters are stacked ``[G, S, ...]``. Inside one ``jit``, for every pair
of a row group and a column group, :func:`~mopa.eval.evaluate.play_episode` is
``vmap``-ed over (row entry, column entry, seed pair), flattened into one axis
whose parameters are gathered from the stacks, and over episodes; the block is
written into the full ``[R, C, P, N]`` arrays. Python loops only over the groups,
at trace time. (Three nested ``vmap``-s instead of the flat axis give the same
numbers but took about 2.4 times as long to compile on CPU.) That ``jit`` is
:func:`~mopa.core.program_store.stored_jit`: when the players are mopa's own, a
later process runs the traced program from the cache folder instead of tracing
the players' searches and rollouts again (the same numbers either way).

A player that works through its games one after another (a tree search;
:func:`~mopa.players.plays_games_in_turn`) keeps one core busy. When the tournament
runs on one device (fewer than :data:`MIN_SPREAD_EPISODES` episodes per cell), each
group of such a player, with the groups of the other side it meets, is a program of
its own, and the other blocks are one more; the programs run at the same time, one
thread each, so the other cores do not wait for the search. Each block computes
what it computes in one program, so the numbers are the same (tested). Spread over
devices, the search already plays each device's games on that device's thread.
Programs side by side (and the devices of a spread one) share XLA's CPU thread
pool, so a player must not solve a batch of linear systems with ``jnp.linalg``: on
CPU that is a LAPACK kernel that waits on the pool, and a few at once hang the
process. :func:`mopa.core.linalg.solve` is the safe solve (mopa's players use it).

Keys: by default cell ``(row, column)`` draws its episode keys from
``key`` folded with a hash of the row name and then of the column name, so cells
play independent episodes and a cell's numbers depend only on ``key``, its two
names and ``(P, N)``, not on which other entries are in the tournament. With
``fold_cells=False`` every cell plays the same episode keys (common random
numbers: the same start states and game noise in every cell).
"""

from __future__ import annotations

import dataclasses
import functools
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.devices import dividing_devices
from mopa.core.program_store import stored_jit
from mopa.envs.base import Env, episode_sum_keys
from mopa.errors import InvalidParameterError
from mopa.eval.evaluate import (
    EpisodeTotals,
    check_games_fit,
    episode_horizon,
    play_episode,
)
from mopa.eval.intervals import half_width
from mopa.players import Player, plays_games_in_turn

PAIRINGS = ("all", "paired")
"""Seed pairings: every seed against every seed, or seed ``i`` against seed ``i``."""

MIN_SPREAD_EPISODES = 32
"""Fewer episodes per cell than this play on one device: a sharded program takes
longer to compile, which only pays off for long tournaments. (Splitting such cells
over their seed pairs instead was tried: it saved a tenth of the main job's
common-opponent protocol but changed float rounding, and 9 of its figures; see
BENCHMARKS.md.)"""


class TournamentEntry(NamedTuple):
    """One contestant: a player and its parameters for every seed."""

    name: str
    """Unique within its side; the row or column label."""
    player: Player
    """How it acts (hashable)."""
    params: Any
    """The player's params with a leading seed axis ``[S, ...]`` on every leaf
    (broadcast leaves shared by all seeds, such as a planner's game params); a
    pytree with no leaves (``{}``, a uniform random player) plays for every seed
    of the others."""


def broadcast_seeds(tree: Any, num_seeds: int) -> Any:
    """``tree`` with every leaf broadcast to a leading seed axis ``[S, ...]`` (the
    same values for every seed), e.g. a planner's game params in an entry."""
    return jax.tree.map(
        lambda x: jnp.broadcast_to(jnp.asarray(x), (num_seeds, *np.shape(x))), tree
    )


def entry_num_seeds(entry: TournamentEntry) -> int | None:
    """The entry's seed count ``S`` (``None`` when its params have no leaves).

    Raises:
        InvalidParameterError: leaves disagree on the leading axis.
    """
    sizes = {int(np.shape(leaf)[0]) for leaf in jax.tree.leaves(entry.params)}
    if len(sizes) > 1:
        raise InvalidParameterError(
            f"entry {entry.name!r}: params leaves have different seed axes "
            f"{sorted(sizes)}"
        )
    return sizes.pop() if sizes else None


def seed_pairs(num_seeds_a: int, num_seeds_b: int, pairing: str) -> np.ndarray:
    """Seed indices ``[P, 2]`` (row seed, column seed) of ``pairing``; ``"all"`` is
    row-major (``p = i x S_B + j``).

    Raises:
        InvalidParameterError: unknown pairing, or ``"paired"`` with two seed counts.
    """
    if pairing == "all":
        return np.stack(
            np.meshgrid(np.arange(num_seeds_a), np.arange(num_seeds_b), indexing="ij"),
            -1,
        ).reshape(-1, 2)
    if pairing == "paired":
        if num_seeds_a != num_seeds_b:
            raise InvalidParameterError(
                f"pairing 'paired' needs one seed count on both sides, got "
                f"{num_seeds_a} and {num_seeds_b}"
            )
        return np.stack([np.arange(num_seeds_a)] * 2, -1)
    raise InvalidParameterError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")


def _name_hash(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def cell_keys(
    key: jax.Array,
    row_name: str,
    column_name: str,
    num_pairs: int,
    num_episodes: int,
    fold_cells: bool = True,
) -> jax.Array:
    """Episode keys ``[P, N]`` of one cell (see the module docstring)."""
    if fold_cells:
        key = jax.random.fold_in(key, _name_hash(row_name))
        key = jax.random.fold_in(key, _name_hash(column_name))
    return jax.random.split(key, (num_pairs, num_episodes))


@dataclasses.dataclass(frozen=True, eq=False)
class TournamentResult:
    """Every episode of a tournament, and its per-cell statistics.

    ``R`` rows (side A), ``C`` columns (side B), ``P`` seed pairs, ``N`` episodes.
    """

    row_names: tuple[str, ...]
    """Side A's entries (they play ``teams[0]``)."""
    column_names: tuple[str, ...]
    """Side B's entries (they play ``teams[1]``)."""
    teams: tuple[str, str]
    """The game's team each side plays."""
    pairing: str
    """``"all"`` or ``"paired"``."""
    seed_pairs: np.ndarray
    """``[P, 2]`` int: the row entry's and the column entry's seed of each pair."""
    returns: np.ndarray
    """``[R, C, P, N, 2]`` each side's episode return, averaged over its agents."""
    totals: dict[str, np.ndarray]
    """``{key: [R, C, P, N]}`` every per-episode game total, e.g. ``captures``."""

    @property
    def metric_names(self) -> tuple[str, ...]:
        """``(*totals, "return/<team A>", "return/<team B>")``."""
        return (*self.totals, *(f"return/{team}" for team in self.teams))

    def metric(self, name: str) -> np.ndarray:
        """``[R, C, P, N]`` values of ``name`` (one of :attr:`metric_names`).

        Raises:
            InvalidParameterError: an unknown metric.
        """
        if name in self.totals:
            return self.totals[name]
        for t, team in enumerate(self.teams):
            if name == f"return/{team}":
                return self.returns[..., t]
        raise InvalidParameterError(
            f"unknown metric {name!r}; this tournament has {list(self.metric_names)}"
        )

    def summary(self, metric: str) -> dict[str, np.ndarray | int]:
        """Per-cell statistics of ``metric`` over all ``n = P x N`` episodes of a
        cell, seed pairs pooled.

        The interval is the normal approximation ``mean +- 1.96 std / sqrt(n)``
        with the sample standard deviation (``ddof=1``). It treats the cell's
        episodes as independent, so it leaves out the spread between seeds (which
        shows in ``seed_means``).

        Returns:
            ``{"mean": [R, C], "std": [R, C], "ci95": [R, C, 2] (lo, hi),
            "seed_means": [R, C, P], "num_episodes": n}``.
        """
        values = np.asarray(self.metric(metric), np.float64)
        rows, columns, pairs, episodes = values.shape
        flat = values.reshape(rows, columns, pairs * episodes)
        n = pairs * episodes
        mean = flat.mean(-1)
        std = flat.std(-1, ddof=1) if n > 1 else np.zeros_like(mean)
        half = half_width(flat, axis=-1)
        return {
            "mean": mean,
            "std": std,
            "ci95": np.stack([mean - half, mean + half], -1),
            "seed_means": values.mean(-1),
            "num_episodes": n,
        }

    def to_markdown(self, metric: str = "captures", digits: int = 2) -> str:
        """A markdown table of ``metric``: ``mean ± CI half-width`` per cell."""
        stats = self.summary(metric)
        mean, ci = stats["mean"], stats["ci95"]
        half = (ci[..., 1] - ci[..., 0]) / 2
        pairs, episodes = self.returns.shape[2:4]
        corner = f"{self.teams[0]} \\ {self.teams[1]}"
        lines = [
            f"{metric} per episode: rows play {self.teams[0]}, columns play "
            f"{self.teams[1]}; mean ± 95% CI half-width over {pairs} seed pairs "
            f"({self.pairing}) x {episodes} episodes",
            "",
            "| " + " | ".join([corner, *self.column_names]) + " |",
            "|" + "---|" * (len(self.column_names) + 1),
        ]
        for r, name in enumerate(self.row_names):
            cells = [
                f"{mean[r, c]:.{digits}f} ± {half[r, c]:.{digits}f}"
                for c in range(len(self.column_names))
            ]
            lines.append("| " + " | ".join([name, *cells]) + " |")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        """Everything as JSON-ready data (arrays as nested lists), with each
        metric's :meth:`summary`; :meth:`from_json` reads it back."""
        summaries = {}
        for name in self.metric_names:
            stats = self.summary(name)
            summaries[name] = {
                k: v.tolist() if isinstance(v, np.ndarray) else v
                for k, v in stats.items()
            }
        return {
            "row_names": list(self.row_names),
            "column_names": list(self.column_names),
            "teams": list(self.teams),
            "pairing": self.pairing,
            "seed_pairs": self.seed_pairs.tolist(),
            "returns": self.returns.tolist(),
            "totals": {k: v.tolist() for k, v in self.totals.items()},
            "summary": summaries,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TournamentResult:
        """The result :meth:`to_json` described (its summaries are recomputed)."""
        return cls(
            row_names=tuple(data["row_names"]),
            column_names=tuple(data["column_names"]),
            teams=tuple(data["teams"]),
            pairing=data["pairing"],
            seed_pairs=np.asarray(data["seed_pairs"], np.int64).reshape(-1, 2),
            returns=np.asarray(data["returns"], np.float32),
            totals={k: np.asarray(v, np.float32) for k, v in data["totals"].items()},
        )


class _Group(NamedTuple):
    player: Player
    indices: tuple[int, ...]  # positions of the group's entries in their side
    params: Any  # stacked [G, S, ...]


def _side_seeds(entries: Sequence[TournamentEntry], side: str) -> int | None:
    counts = {entry.name: entry_num_seeds(entry) for entry in entries}
    distinct = sorted({s for s in counts.values() if s is not None})
    if len(distinct) > 1:
        raise InvalidParameterError(
            f"side {side} entries have different seed counts "
            f"{ {k: v for k, v in counts.items() if v is not None} }; "
            "give every entry of a side the same number of seeds"
        )
    return distinct[0] if distinct else None


def _check_side(entries, side, env, team) -> None:
    if not entries:
        raise InvalidParameterError(f"side {side} has no entries")
    names = [entry.name for entry in entries]
    for name in names:
        if names.count(name) > 1:
            raise InvalidParameterError(f"side {side} has two entries named {name!r}")
    for entry in entries:
        if entry.player.num_agents != env.team_sizes[team]:
            raise InvalidParameterError(
                f"entry {entry.name!r} acts for {entry.player.num_agents} agents; "
                f"team {env.team_names[team]!r} of {env.name} has "
                f"{env.team_sizes[team]}"
            )


def _group(entries: Sequence[TournamentEntry]) -> tuple[_Group, ...]:
    """Entries grouped by player and parameter structure, params stacked."""
    groups: dict[Any, list[int]] = {}
    for i, entry in enumerate(entries):
        leaves, treedef = jax.tree.flatten(entry.params)
        shapes = tuple((np.shape(x), jnp.result_type(x)) for x in leaves)
        groups.setdefault((entry.player, treedef, shapes), []).append(i)
    return tuple(
        _Group(
            player=entries[indices[0]].player,
            indices=tuple(indices),
            params=jax.tree.map(
                lambda *xs: jnp.stack(xs), *(entries[i].params for i in indices)
            ),
        )
        for indices in groups.values()
    )


def _episode_mesh(num_episodes: int) -> Any:
    """The mesh the episode axis is split over: as many devices as divide
    ``num_episodes`` (several CPU devices run episodes on separate threads; see
    :mod:`mopa.core.devices`), when ``num_episodes >= MIN_SPREAD_EPISODES``;
    ``None`` (one device) otherwise."""
    from jax.sharding import Mesh

    devices = dividing_devices(num_episodes)
    if len(devices) == 1 or num_episodes < MIN_SPREAD_EPISODES:
        return None
    return Mesh(np.array(devices), ("episode",))


def _spread_episodes(keys: jax.Array, mesh: Any) -> jax.Array:
    """``keys [R, C, P, N]`` placed with the episode axis sharded over ``mesh``
    (:func:`_episode_mesh`; ``None`` leaves them on one device). Placement only: the
    numbers do not change."""
    from jax.sharding import NamedSharding, PartitionSpec

    if mesh is None:
        return keys
    return jax.device_put(
        keys, NamedSharding(mesh, PartitionSpec(None, None, None, "episode"))
    )


def _take(stacked: Any, entries: np.ndarray, seeds: jax.Array) -> Any:
    """``[M, ...]`` params of entry ``entries[m]``, seed ``seeds[m]`` from a
    group's ``[G, S, ...]`` stack."""
    return jax.tree.map(lambda x: x[entries, seeds], stacked)


def _unflatten(tree: Any, shape: tuple[int, ...]) -> Any:
    """Leaves ``[M, ...]`` to ``[*shape, ...]``."""
    return jax.tree.map(lambda x: x.reshape(*shape, *x.shape[1:]), tree)


def _play_cell(env, params, players, params_a, params_b, keys, *, horizon):
    """One cell and seed pair: :func:`play_episode` for every key of ``keys [N]``."""
    return jax.vmap(
        lambda key: play_episode(
            env, params, players, (params_a, params_b), key, horizon
        )
    )(keys)


def _over_episodes(block: Any, mesh: Any) -> Any:
    """``block(cell_a [M, ...], cell_b [M, ...], keys [M, N])``, run on each
    device's share of the episode axis when ``mesh`` is given."""
    if mesh is None:
        return block
    from jax.sharding import PartitionSpec

    return jax.shard_map(
        block,
        mesh=mesh,
        in_specs=(PartitionSpec(), PartitionSpec(), PartitionSpec(None, "episode")),
        out_specs=PartitionSpec(None, "episode"),
        check_vma=False,
    )


@functools.partial(
    stored_jit,
    static_argnames=(
        "env",
        "players_a",
        "players_b",
        "rows",
        "columns",
        "horizon",
        "mesh",
    ),
)
def _play_groups(
    env: Env,
    params: Any,
    players_a: tuple[Player, ...],
    players_b: tuple[Player, ...],
    rows: tuple[tuple[int, ...], ...],
    columns: tuple[tuple[int, ...], ...],
    params_a: tuple[Any, ...],
    params_b: tuple[Any, ...],
    pairs: jax.Array,
    keys: jax.Array,
    horizon: int,
    mesh: Any = None,
) -> EpisodeTotals:
    """Every block of (row group, column group), written into full arrays.

    Args:
        players_a, rows, params_a: per row group, its player, its entries' rows
            and their stacked params ``[G, S_A, ...]`` (the same for columns).
        pairs: ``[P, 2]`` seed indices.
        keys: ``[R, C, P, N]`` episode keys.
        mesh: when given, every block runs under ``shard_map`` with the episode
            axis split over the mesh, so each device plays its own episodes only,
            whatever the players compute inside (a tree search that maps over its
            games one after another is not partitioned by sharding annotations
            alone, and every device would play every game).

    Returns:
        :class:`EpisodeTotals` with leaves ``[R, C, P, N, ...]``.
    """
    num_rows, num_columns, num_pairs, num_episodes = keys.shape
    indices, blocks = [], []
    for player_a, rows_g, group_a in zip(players_a, rows, params_a, strict=True):
        for player_b, columns_g, group_b in zip(
            players_b, columns, params_b, strict=True
        ):
            # Flatten (row entry, column entry, seed pair) into one axis of M
            # cells: one vmap over it compiles far faster than three nested ones.
            shape = (len(rows_g), len(columns_g), num_pairs)
            row, column, pair = (x.ravel() for x in np.indices(shape))
            cell_a = _take(group_a, row, pairs[pair, 0])  # [M, ...]
            cell_b = _take(group_b, column, pairs[pair, 1])
            index = np.ix_(rows_g, columns_g)
            play = functools.partial(
                _play_cell, env, params, (player_a, player_b), horizon=horizon
            )
            block = _over_episodes(jax.vmap(play), mesh)(
                cell_a, cell_b, keys[index].reshape(-1, num_episodes)
            )  # [M, N, ...]
            indices.append(index)
            blocks.append(_unflatten(block, shape))

    def assemble(*leaves):  # one leaf of every block -> [R, C, P, N, ...]
        full = jnp.zeros((num_rows, num_columns, *leaves[0].shape[2:]), leaves[0].dtype)
        for index, leaf in zip(indices, leaves, strict=True):
            full = full.at[index].set(leaf)
        return full

    return jax.tree.map(assemble, *blocks)


def _programs(
    groups_a: Sequence[_Group], groups_b: Sequence[_Group], mesh: Any
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``(row groups, column groups)`` of every program the tournament runs (see
    the module docstring): one program for all blocks, unless the tournament is on
    one device and a player works through its games in turn; then each such row
    group with every column group, each such column group with the other row
    groups, and the rest."""
    in_turn_a = [plays_games_in_turn(g.player) for g in groups_a]
    in_turn_b = [plays_games_in_turn(g.player) for g in groups_b]
    everything = (tuple(range(len(groups_a))), tuple(range(len(groups_b))))
    if mesh is not None or not any(in_turn_a + in_turn_b):
        return [everything]
    plain_a = tuple(i for i, t in enumerate(in_turn_a) if not t)
    plain_b = tuple(j for j, t in enumerate(in_turn_b) if not t)
    programs = [(plain_a, plain_b)] if plain_a and plain_b else []
    programs += [((i,), everything[1]) for i, t in enumerate(in_turn_a) if t]
    if plain_a:
        programs += [(plain_a, (j,)) for j, t in enumerate(in_turn_b) if t]
    return programs


def _program_cells(groups: Sequence[_Group], chosen: tuple[int, ...]) -> np.ndarray:
    """The entries (rows or columns) of the groups ``chosen`` of a side."""
    return np.array([i for g in chosen for i in groups[g].indices], np.int64)


def _play_program(
    env, params, groups_a, groups_b, pairs, keys, rows, columns, *, horizon, mesh
) -> EpisodeTotals:
    """:func:`_play_groups` for the row groups ``rows`` and column groups
    ``columns`` only: full ``[R, C, P, N, ...]`` leaves, zero in the cells of the
    other groups."""
    return _play_groups(
        env,
        params,
        tuple(groups_a[g].player for g in rows),
        tuple(groups_b[g].player for g in columns),
        tuple(groups_a[g].indices for g in rows),
        tuple(groups_b[g].indices for g in columns),
        tuple(groups_a[g].params for g in rows),
        tuple(groups_b[g].params for g in columns),
        pairs,
        keys,
        horizon,
        mesh,
    )


def _merge(programs, groups_a, groups_b, played) -> EpisodeTotals:
    """Every program's own cells, taken from its full leaves (:func:`_play_program`)
    into one set of ``[R, C, ...]`` arrays."""

    def merge(*leaves):
        out = np.array(leaves[0])
        for (rows, columns), leaf in zip(programs[1:], leaves[1:], strict=True):
            index = np.ix_(
                _program_cells(groups_a, rows), _program_cells(groups_b, columns)
            )
            out[index] = np.asarray(leaf)[index]
        return out

    return jax.tree.map(merge, *played)


def play_tournament(
    env: Env,
    params: Any,
    side_a: Sequence[TournamentEntry],
    side_b: Sequence[TournamentEntry],
    key: jax.Array,
    *,
    num_episodes: int = 100,
    pairing: str = "all",
    horizon: int | None = None,
    fold_cells: bool = True,
) -> TournamentResult:
    """Play every entry of ``side_a`` (the game's first team) against every entry
    of ``side_b`` (its second team), every seed pairing, ``num_episodes`` each, in
    one jitted call (see the module docstring).

    Args:
        env, params: a two-team game and its parameters.
        side_a, side_b: :class:`TournamentEntry` (or plain ``(name, player,
            params [S, ...])`` tuples); every entry of a side with parameters has
            the same ``S``.
        key: the tournament's key; the same key gives the same numbers.
        num_episodes: ``N``, episodes per seed pair and cell.
        pairing: ``"all"`` or ``"paired"`` (see :func:`seed_pairs`).
        horizon: steps per episode (default ``params.max_steps``).
        fold_cells: independent keys per cell (see :func:`cell_keys`); ``False``
            plays the same episode keys in every cell.

    Returns:
        A :class:`TournamentResult` with arrays ``[R, C, P, N, ...]``.

    Raises:
        InvalidParameterError: not a two-team game, ``num_episodes < 1``, an
            unknown pairing, duplicate names, a player for the wrong team size,
            seed counts that do not fit, or more games than this machine's memory
            holds at once (:func:`~mopa.eval.evaluate.check_games_fit`).
    """
    if env.num_teams != 2:
        raise InvalidParameterError(
            f"a tournament needs a two-team game; {env.name} has teams {env.team_names}"
        )
    if num_episodes < 1:
        raise InvalidParameterError(f"num_episodes must be >= 1, got {num_episodes}")
    side_a = [TournamentEntry(*entry) for entry in side_a]
    side_b = [TournamentEntry(*entry) for entry in side_b]
    _check_side(side_a, "A", env, 0)
    _check_side(side_b, "B", env, 1)
    seeds_a, seeds_b = _side_seeds(side_a, "A"), _side_seeds(side_b, "B")
    if pairing == "paired":  # an entry without params plays every seed
        seeds_a = seeds_a or seeds_b or 1
        seeds_b = seeds_b or seeds_a
    pairs = seed_pairs(seeds_a or 1, seeds_b or 1, pairing)
    horizon = episode_horizon(params, horizon)
    check_games_fit(
        env,
        params,
        len(side_a) * len(side_b) * len(pairs) * num_episodes,
        "num_episodes",
    )

    keys = jnp.stack(
        [
            jnp.stack(
                [
                    cell_keys(key, a.name, b.name, len(pairs), num_episodes, fold_cells)
                    for b in side_b
                ]
            )
            for a in side_a
        ]
    )  # [R, C, P, N]
    groups_a, groups_b = _group(side_a), _group(side_b)
    mesh = _episode_mesh(num_episodes)
    keys = _spread_episodes(keys, mesh)
    programs = _programs(groups_a, groups_b, mesh)
    pairs_on_device = jnp.asarray(pairs)

    def play(program):
        rows, columns = program
        return jax.block_until_ready(
            _play_program(
                *(env, params, groups_a, groups_b, pairs_on_device, keys),
                *(rows, columns),
                horizon=horizon,
                mesh=mesh,
            )
        )

    if len(programs) == 1:
        totals = play(programs[0])
    else:
        # Programs side by side share XLA's CPU thread pool (one thread per core,
        # or per device if there are more). XLA's own operations never wait on a
        # pool thread; jaxlib's batched LAPACK kernels do, for the parts of their
        # batch: as many of them at once as the pool has threads hang the process
        # (two programs on a 2-core machine did). mopa's players solve linear
        # systems through mopa.core.linalg, which never issues such a kernel, so
        # the programs are safe side by side on any device count
        # (tests/eval/test_tournament.py runs them 20 times on 1 and 2 devices).
        with ThreadPoolExecutor(len(programs)) as pool:
            played = list(pool.map(play, programs))
        totals = _merge(programs, groups_a, groups_b, played)
    return TournamentResult(
        row_names=tuple(entry.name for entry in side_a),
        column_names=tuple(entry.name for entry in side_b),
        teams=(env.team_names[0], env.team_names[1]),
        pairing=pairing,
        seed_pairs=pairs,
        returns=np.asarray(totals.returns),
        totals={k: np.asarray(totals.sums[k]) for k in episode_sum_keys(env, params)},
    )
