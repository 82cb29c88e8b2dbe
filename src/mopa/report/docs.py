"""The documentation's results pages and RESULTS.md's summary, rendered from the
committed result folders (``mopa docs render``).

Every figure a results page or RESULTS.md shows is read here from a folder's
``results.json``, ``meta.json`` (the commit and processor that wrote it),
``config.json`` (the command) and ``verify.json`` (the last ``mopa verify`` of the
folder, :func:`mopa.report.compare.verify_record`); none is typed into a page.
What a page claims is declared once, in :mod:`mopa.report.claims`: a
:class:`Claim` names its folder, the measure that reads its figure from the
folder's results (:class:`Value`, :class:`Ratio`, :class:`MeanOf`, :class:`MinOf`),
the seed's figure and the criterion that decides whether it is met.
The short hand-written text around a page's tables lives in
``docs/narrative/SLUG.md``; a figure in it is a placeholder that renders a value:
``{{ claim:ID }}`` (the claim's figure as its table shows it) or
``{{ FOLDER:PATH }}`` / ``{{ FOLDER:PATH:FORMAT }}`` (a leaf of the folder's
``results.json`` by its dotted path, list items by index, e.g.
``{{ intent:conditions.belief_planner.mean:.2f }}``).

:mod:`mopa.report.site` renders every page of :mod:`mopa.report.claims` with
these: its :func:`~mopa.report.site.render_all` returns every generated file's
text, :func:`~mopa.report.site.stale_files` the committed files that differ from
it (the test suite fails on any), and :func:`~mopa.report.site.write_all` writes
them. It reads the experiments' registry (each folder's command and tables), so
it sits above :mod:`mopa.experiments` in the package's layers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from mopa.errors import InvalidParameterError
from mopa.report.page import demote_headings

RESULTS_PAGES = Path("docs/results")
"""Where the results pages are written, relative to the repository's root."""
NARRATIVE = Path("docs/narrative")
"""The hand-written text of each page (``SLUG.md``), relative to the root."""
SUMMARY_FILE = Path("RESULTS.md")
"""The file whose marked region holds the summary table."""
SUMMARY_BEGIN = "<!-- mopa docs render: summary begins; edit mopa.report.claims -->"
SUMMARY_END = "<!-- mopa docs render: summary ends -->"
FIGURE_URI = "results/figures"
"""Where the site serves a folder's plots: ``results/figures/FOLDER/NAME.png``
(``docs/_hooks/results_figures.py`` adds them to the site from ``results/``)."""
NOT_VERIFIED = "not verified"


def lookup(tree: Any, path: str) -> Any:
    """The leaf of a JSON tree at a dotted path (list items by index, ``-1`` for
    the last).

    Raises:
        InvalidParameterError: the path is not in the tree.
    """
    node = tree
    for part in path.split("."):
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise InvalidParameterError(f"no {path!r} in results.json") from None
    return node


def _number(value: Any, fmt: str) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        text = format(value, fmt)
        if text.startswith("-") and not any(c in "123456789" for c in text):
            text = format(0.0, fmt)  # a negative that rounds to zero shows as zero
        return text
    return str(value)


@dataclasses.dataclass(frozen=True)
class Reading:
    """A figure read from a results tree."""

    value: Any
    """The number (or boolean) a criterion judges."""
    interval: tuple[float, float] | None
    """Its 95% interval, where the folder records one."""
    text: str
    """As the pages show it, e.g. ``4.93 [4.50, 5.37]``."""


class Measure(Protocol):
    """How a claim reads its figure from a folder's ``results.json``."""

    def read(self, results: Any) -> Reading: ...


@dataclasses.dataclass(frozen=True)
class Value:
    """The leaf at ``path``, with its interval where one is recorded.

    Args:
        path: dotted path of the figure.
        fmt: its format (``".2f"``, ``".1%"``, ...).
        interval: dotted path of its ``[low, high]`` interval.
        half_width: dotted path of its interval's half-width (``mean +- h``).
        unit: appended to the shown figure (``"x"``).
    """

    path: str
    fmt: str = ".2f"
    interval: str | None = None
    half_width: str | None = None
    unit: str = ""

    def read(self, results: Any) -> Reading:
        value = lookup(results, self.path)
        interval = None
        if self.interval is not None:
            low, high = lookup(results, self.interval)
            interval = (float(low), float(high))
        elif self.half_width is not None:
            h = float(lookup(results, self.half_width))
            interval = (value - h, value + h)
        text = _number(value, self.fmt) + self.unit
        if interval is not None:
            text += (
                f" [{_number(interval[0], self.fmt)}, {_number(interval[1], self.fmt)}]"
            )
        return Reading(value, interval, text)


def mean(path: str, fmt: str = ".2f") -> Value:
    """The ``{"mean", "ci95"}`` record at ``path`` (a condition's captures)."""
    return Value(f"{path}.mean", fmt, interval=f"{path}.ci95")


@dataclasses.dataclass(frozen=True)
class Ratio:
    """``numerator / denominator`` of two recorded figures (means of
    ``{"mean", ...}`` records where the path names one), shown with both."""

    numerator: str
    denominator: str
    fmt: str = ".2f"

    def read(self, results: Any) -> Reading:
        top, bottom = (_scalar(results, p) for p in (self.numerator, self.denominator))
        value = top / bottom
        return Reading(
            value,
            None,
            f"{_number(value, self.fmt)}x ({_number(top, self.fmt)} / "
            f"{_number(bottom, self.fmt)})",
        )


def _scalar(results: Any, path: str) -> float:
    node = lookup(results, path)
    return float(node["mean"] if isinstance(node, dict) else node)


@dataclasses.dataclass(frozen=True)
class MeanOf:
    """The mean of the list at ``path`` (a mean calibration error over steps)."""

    path: str
    fmt: str = ".3f"

    def read(self, results: Any) -> Reading:
        values = [float(v) for v in lookup(results, self.path)]
        value = sum(values) / len(values)
        return Reading(
            value, None, f"{_number(value, self.fmt)} (mean of {len(values)})"
        )


@dataclasses.dataclass(frozen=True)
class MinOf:
    """The smallest item of the list at ``path`` (the worst seed), shown with
    every item."""

    path: str
    fmt: str = ".3f"

    def read(self, results: Any) -> Reading:
        values = [float(v) for v in lookup(results, self.path)]
        items = " / ".join(_number(v, self.fmt) for v in values)
        return Reading(min(values), None, f"{_number(min(values), self.fmt)} ({items})")


class Criterion(Protocol):
    """What a figure must do for its claim to be met."""

    text: str

    def met(self, reading: Reading, results: Any) -> bool: ...


@dataclasses.dataclass(frozen=True)
class AtLeast:
    """The figure is at least ``threshold``."""

    threshold: float

    @property
    def text(self) -> str:
        return f">= {self.threshold:g}"

    def met(self, reading: Reading, results: Any) -> bool:
        return reading.value >= self.threshold


@dataclasses.dataclass(frozen=True)
class AtMost:
    """The figure is at most ``threshold``."""

    threshold: float

    @property
    def text(self) -> str:
        return f"<= {self.threshold:g}"

    def met(self, reading: Reading, results: Any) -> bool:
        return reading.value <= self.threshold


@dataclasses.dataclass(frozen=True)
class IntervalAbove:
    """The figure's whole 95% interval lies above ``threshold``."""

    threshold: float = 0.0

    @property
    def text(self) -> str:
        return f"interval above {self.threshold:g}"

    def met(self, reading: Reading, results: Any) -> bool:
        return reading.interval is not None and reading.interval[0] > self.threshold


@dataclasses.dataclass(frozen=True)
class IntervalBelow:
    """The figure's whole 95% interval lies below ``threshold``."""

    threshold: float = 0.0

    @property
    def text(self) -> str:
        return f"interval below {self.threshold:g}"

    def met(self, reading: Reading, results: Any) -> bool:
        return reading.interval is not None and reading.interval[1] < self.threshold


@dataclasses.dataclass(frozen=True)
class NotBelow:
    """The figure's 95% interval reaches ``threshold``: it is not shown to be
    below it."""

    threshold: float = 0.0

    @property
    def text(self) -> str:
        return f"not below {self.threshold:g} (interval reaches it)"

    def met(self, reading: Reading, results: Any) -> bool:
        return reading.interval is not None and reading.interval[1] >= self.threshold


@dataclasses.dataclass(frozen=True)
class Exceeds:
    """The figure is above another of the same folder: with ``apart``, its
    interval lies wholly above the other's; without, its value is at least the
    other's."""

    other: Value
    name: str
    apart: bool = True

    @property
    def text(self) -> str:
        return f"above {self.name}" + (", intervals apart" if self.apart else "")

    def met(self, reading: Reading, results: Any) -> bool:
        other = self.other.read(results)
        if not self.apart:
            return reading.value >= other.value
        return (
            reading.interval is not None
            and other.interval is not None
            and reading.interval[0] > other.interval[1]
        )


@dataclasses.dataclass(frozen=True)
class Under:
    """The figure is below another of the same folder: with ``apart``, its
    interval lies wholly below the other's; without, its value is less."""

    other: Value
    name: str
    apart: bool = True

    @property
    def text(self) -> str:
        return f"below {self.name}" + (", intervals apart" if self.apart else "")

    def met(self, reading: Reading, results: Any) -> bool:
        other = self.other.read(results)
        if not self.apart:
            return reading.value < other.value
        return (
            reading.interval is not None
            and other.interval is not None
            and reading.interval[1] < other.interval[0]
        )


@dataclasses.dataclass(frozen=True)
class IsTrue:
    """The recorded finding (a boolean) holds."""

    text: str = "holds"

    def met(self, reading: Reading, results: Any) -> bool:
        return reading.value is True


@dataclasses.dataclass(frozen=True)
class Recorded:
    """A finding the results record as a boolean at ``path`` holds (e.g. two
    figures' intervals are apart), whatever the claim's own figure."""

    path: str
    text: str

    def met(self, reading: Reading, results: Any) -> bool:
        return lookup(results, self.path) is True


@dataclasses.dataclass(frozen=True)
class AllOf:
    """Every one of ``criteria`` holds."""

    criteria: tuple[Criterion, ...]

    @property
    def text(self) -> str:
        return ", ".join(c.text for c in self.criteria)

    def met(self, reading: Reading, results: Any) -> bool:
        return all(c.met(reading, results) for c in self.criteria)


@dataclasses.dataclass(frozen=True)
class Claim:
    """One headline claim of an experiment, as RESULTS.md's summary lists it.

    Args:
        id: a short name, unique, for ``{{ claim:ID }}`` in a page's narrative.
        folder: the result folder under ``results/`` whose figure decides it.
        text: the claim, one line.
        seed: the research's figure: text, or a measure of the folder's
            ``results.json`` where the folder records it.
        figure: how mopa's figure is read from ``results.json``.
        criterion: what "met" means; ``None`` for a figure reported beside the
            seed's without a criterion.
    """

    id: str
    folder: str
    text: str
    seed: str | Value
    figure: Value | Ratio | MeanOf | MinOf
    criterion: Criterion | None = None


@dataclasses.dataclass(frozen=True)
class Folder:
    """A result folder on a page, under its own heading."""

    name: str
    label: str


@dataclasses.dataclass(frozen=True)
class Page:
    """One results page of the site (``docs/results/SLUG.md``): an experiment,
    one section per result folder."""

    slug: str
    title: str
    folders: tuple[Folder, ...]


@dataclasses.dataclass(frozen=True)
class Record:
    """A result folder as committed."""

    name: str
    results: Any
    config: Any
    meta: Any
    verify: Any | None
    """The folder's ``verify.json``, or ``None`` where it has none."""
    figures: tuple[str, ...]
    """The folder's PNG plots, by name."""
    digest: str = ""
    """The SHA-256 of the folder's ``results.json`` as committed (hex)."""


def read_folder(root: str | Path, name: str) -> Record:
    """Read ``results/NAME`` under the repository's ``root``.

    Raises:
        InvalidParameterError: the folder or one of its JSON files is missing or
            not JSON.
    """
    folder = Path(root) / "results" / name
    if not folder.is_dir():
        raise InvalidParameterError(f"{folder} is not a result folder")

    def read(file: str, required: bool = True) -> Any:
        path = folder / file
        if not path.exists() and not required:
            return None
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise InvalidParameterError(f"{path} is missing") from None
        except ValueError as error:
            raise InvalidParameterError(f"{path} is not JSON ({error})") from None

    figures = tuple(sorted(p.name for p in folder.glob("*.png")))
    results = read("results.json")
    digest = hashlib.sha256((folder / "results.json").read_bytes()).hexdigest()
    meta = read("meta.json")
    return Record(
        name,
        results,
        read("config.json"),
        meta,
        _verify_of(read("verify.json", required=False), meta),
        figures,
        digest,
    )


def _verify_of(verify: Any, meta: Any) -> Any:
    """``verify`` where it checked the figures the folder holds now (its
    ``written_at`` is the commit ``meta.json`` names), else ``None``: a folder
    rewritten since its last verification is not verified."""
    if not isinstance(verify, dict) or not isinstance(meta, dict):
        return verify
    written_at, sha = verify.get("written_at"), meta.get("git_sha")
    if not isinstance(written_at, str) or not isinstance(sha, str):
        return verify
    same = sha.startswith(written_at) or written_at.startswith(sha)
    return verify if same else None


def processor_text(cpu: Any) -> str:
    """A processor as a table names it: its model and widest vector extension
    (``Intel(R) Xeon(R) Processor, AVX-512, AMX``), from a meta.json's
    ``machine.cpu``; where the process saw other extensions than the host lists
    (an emulated processor), both."""
    if not isinstance(cpu, dict) or not cpu.get("model"):
        return "not recorded"
    isa = cpu.get("isa") or []
    extensions = (
        ["AVX-512"] if "avx512f" in isa else ["AVX2"] if "avx2" in isa else ["no AVX2"]
    )
    if "amx_tile" in isa:
        extensions.append("AMX")
    model = re.sub(r"\s*\((R|TM)\)", "", cpu["model"])
    if cpu.get("listed_isa") is not None:  # the process saw another processor
        host = processor_text({"model": "host", "isa": cpu["listed_isa"]})
        extensions.append(f"emulated or masked (the {host.replace(', ', ' with ')})")
    return ", ".join([model, *extensions])


def commit_text(meta: Any) -> str:
    """The commit a meta.json records, short, with ``-dirty`` where it says so."""
    sha = meta.get("git_sha") if isinstance(meta, dict) else None
    if not sha:
        return "not recorded"
    dirty = sha.endswith("-dirty") or meta.get("git_dirty") is True
    return sha.removesuffix("-dirty")[:7] + ("-dirty" if dirty else "")


def verify_text(record: Any) -> str:
    """A folder's verification as the tables show it, from its ``verify.json``:
    ``passed, 107 of 107 figures at abc1234 (processor), 2025-01-01``; or
    :data:`NOT_VERIFIED` where there is none."""
    if not isinstance(record, dict):
        return NOT_VERIFIED
    verdict = "**passed**" if record.get("passed") else "**failed**"
    commit = commit_text(
        {"git_sha": record.get("git_sha"), "git_dirty": record.get("git_dirty")}
    )
    where = processor_text(record.get("cpu"))
    return (
        f"{verdict}, {record.get('matched')} of {record.get('compared')} figures at "
        f"`{commit}` ({where}), {record.get('date', '')[:10]}"
    )


def verifications(record: Record) -> list[dict[str, Any]]:
    """Every ``mopa verify`` of the folder's figures kept in its ``verify.json``,
    oldest first (its ``history`` and then the record itself)."""
    if not isinstance(record.verify, dict):
        return []
    history = record.verify.get("history")
    earlier = [h for h in history if isinstance(h, dict)] if history else []
    return [*earlier, record.verify]


def _with_cache(cpu: Any) -> str:
    text = processor_text(cpu)
    l1d = cpu.get("l1d_kib") if isinstance(cpu, dict) else None
    return text if l1d is None else f"{text}, L1d {l1d} KiB"


def verification_table(record: Record) -> list[str]:
    """The processors a folder's figures were computed on, as Markdown table
    lines: the run that wrote them, then each verification (:func:`verifications`)
    with its date, numerics, commit, figures matched and those that differ."""
    meta = record.meta if isinstance(record.meta, dict) else {}
    written_in = meta.get("numerics", {}).get("mode", "native")
    lines = [
        "| | processor | numerics | date | commit | figures matched | differing |",
        "|---|---|---|---|---|---|---|",
        f"| wrote | {_with_cache(_cpu(meta))} | {written_in} | "
        f"{str(meta.get('date', ''))[:10] or '-'} | `{commit_text(meta)}` | - | - |",
    ]
    for check in verifications(record):
        failures = check.get("failures") or (
            [check["first_failure"]] if check.get("first_failure") else []
        )
        differing = ", ".join(f"`{f}`" for f in failures[:6]) or "none"
        if len(failures) > 6:
            differing += f" and {len(failures) - 6} more"
        verdict = "**passed**" if check.get("passed") else "**failed**"
        sha = commit_text(
            {"git_sha": check.get("git_sha"), "git_dirty": check.get("git_dirty")}
        )
        lines.append(
            f"| {verdict} | {_with_cache(check.get('cpu'))} | "
            f"{check.get('numerics', 'native')} | {str(check.get('date', ''))[:10]} | "
            f"`{sha}` | {check.get('matched')} of {check.get('compared')} | "
            f"{differing} |"
        )
    return lines


def flatten(tree: Any) -> dict[str, Any]:
    """Every leaf of a JSON tree by its dotted path
    (:func:`mopa.report.compare.flatten`, which ``mopa verify`` compares)."""
    from mopa.report.compare import flatten as flatten_tree

    return flatten_tree(tree)


def command_text(config: Any) -> str:
    """The command a folder's ``config.json`` records (``mopa experiment NAME
    --profile PRESET``; the preset as the code names it now, where it was
    renamed since)."""
    from mopa.runs.verify import RecordedRun, recorded_preset

    name, preset = config["experiment"], config["preset"]
    seeds = config.get("seeds")
    # Where the config is no longer a preset's, the recorded name is shown.
    with contextlib.suppress(InvalidParameterError):
        preset = recorded_preset(name, preset, config.get("config"))
    draws = config.get("draws")
    return RecordedRun(name, preset, seeds, None, None, None, draws=draws).command


def _verdict(claim: Claim, reading: Reading, results: Any) -> str:
    if claim.criterion is None:
        return "reported"
    return "**met**" if claim.criterion.met(reading, results) else "**not met**"


def _seed_text(claim: Claim, results: Any) -> str:
    if isinstance(claim.seed, str):
        return claim.seed
    return claim.seed.read(results).text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def claim_row(claim: Claim, record: Record, columns: Sequence[str]) -> str:
    """One claim as a markdown table row with the given columns, of ``claim``,
    ``seed``, ``mopa``, ``criterion``, ``verdict``, ``folder``, ``commit``,
    ``processor``, ``verify``."""
    reading = claim.figure.read(record.results)
    figure, verdict = reading.text, _verdict(claim, reading, record.results)
    draws = record.results.get("draws") if isinstance(record.results, dict) else None
    if isinstance(draws, list):  # pooled draws: each draw's figure and verdict too
        readings = [claim.figure.read(tree) for tree in draws]
        figure += "; by draw " + ", ".join(r.text.split(" [")[0] for r in readings)
        if claim.criterion is not None:
            verdict = f"{verdict} pooled; by draw " + ", ".join(
                _verdict(claim, r, tree).strip("*")
                for r, tree in zip(readings, draws, strict=True)
            )
    cells = {
        "claim": claim.text,
        "seed": _seed_text(claim, record.results),
        "mopa": figure,
        "criterion": _criterion_text(claim.criterion, record.results),
        "verdict": verdict,
        "folder": f"`{record.name}`",
        "commit": f"`{commit_text(record.meta)}`",
        "processor": written_on(record.meta),
        "verify": verify_text(record.verify),
    }
    return "| " + " | ".join(_cell(cells[c]) for c in columns) + " |"


def _criterion_text(criterion: Criterion | None, results: Any) -> str:
    """A criterion as the tables show it, with the figure it compares against
    where it has one (``above oracle, intervals apart (2.80 [2.21, 3.39])``)."""
    if criterion is None:
        return "-"
    other = getattr(criterion, "other", None)
    if other is None:
        return criterion.text
    return f"{criterion.text} ({other.read(results).text})"


def _cpu(meta: Any) -> Any:
    machine = meta.get("machine") if isinstance(meta, dict) else None
    return machine.get("cpu") if isinstance(machine, dict) else None


def numerics_text(meta: Any) -> str:
    """The numerics mode a meta.json records (:mod:`mopa.core.numerics`):
    ``portable`` or ``native`` (folders written before the mode was kept computed
    natively)."""
    numerics = meta.get("numerics") if isinstance(meta, dict) else None
    mode = numerics.get("mode") if isinstance(numerics, dict) else None
    return mode if isinstance(mode, str) else "native"


def written_on(meta: Any) -> str:
    """Where a folder was computed, as the tables show it: the processor and the
    numerics mode (``AMD EPYC, AVX-512; portable``)."""
    return f"{processor_text(_cpu(meta))}; {numerics_text(meta)}"


_PLACEHOLDER = re.compile(r"\{\{\s*([\w-]+):([\w.\-]+)(?::([^}\s]+))?\s*\}\}")


def fill_placeholders(
    text: str, records: dict[str, Record], claims: Sequence[Claim]
) -> str:
    """``text`` with each ``{{ claim:ID }}`` and ``{{ FOLDER:PATH[:FORMAT] }}``
    replaced by the figure it names (see the module docstring).

    Raises:
        InvalidParameterError: a placeholder names an unknown claim, a folder
            not on the page or a path not in its results.
    """
    by_id = {claim.id: claim for claim in claims}

    def fill(match: re.Match) -> str:
        source, path, fmt = match.groups()
        if source == "claim":
            if path not in by_id:
                raise InvalidParameterError(f"{match.group(0)}: no claim {path!r}")
            claim = by_id[path]
            return claim.figure.read(records[claim.folder].results).text
        if source not in records:
            raise InvalidParameterError(
                f"{match.group(0)}: folder {source!r} is not on this page"
            )
        return _number(lookup(records[source].results, path), fmt or ".2f")

    return _PLACEHOLDER.sub(fill, text)


CLAIM_COLUMNS = ("claim", "seed", "mopa", "criterion", "verdict")
SUMMARY_COLUMNS = (
    "claim", "seed", "mopa", "criterion", "verdict", "folder", "commit", "processor",
    "verify",
)  # fmt: skip


def _header(columns: Sequence[str]) -> list[str]:
    names = {
        "claim": "claim",
        "seed": "seed's figure",
        "mopa": "mopa [95% interval]",
        "criterion": "criterion",
        "verdict": "met",
        "folder": "folder",
        "commit": "written at",
        "processor": "processor; numerics",
        "verify": "`mopa verify`",
    }
    return [
        "| " + " | ".join(names[c] for c in columns) + " |",
        "|" + "---|" * len(columns),
    ]


def _experiment_markdown(record: Record) -> str | None:
    """The folder's tables as its experiment writes ``results.md``, from the
    committed ``results.json``."""
    import mopa.experiments  # noqa: F401  (registers every experiment)
    from mopa.runs.registry import get_experiment, results_markdown

    experiment = get_experiment(record.config["experiment"])
    return results_markdown(experiment, record.results)


def render_page(
    page: Page, records: dict[str, Record], claims: Sequence[Claim], narrative: str
) -> str:
    """The text of ``docs/results/SLUG.md``.

    Args:
        page: the page.
        records: its folders, read (:func:`read_folder`), by name.
        claims: every claim (those of the page's folders are shown).
        narrative: the page's hand-written text, placeholders unfilled.
    """
    names = [folder.name for folder in page.folders]
    mine = [claim for claim in claims if claim.folder in names]
    out = [
        f"<!-- Written by `mopa docs render` from results/{{{','.join(names)}}}: "
        f"edit docs/narrative/{page.slug}.md or mopa.report.claims, then run it "
        "again. -->",
        "",
        f"# {page.title}",
        "",
        fill_placeholders(narrative.strip(), records, claims),
        "",
    ]
    if mine:
        out += ["## Claims", ""]
        for folder in page.folders:
            rows = [c for c in mine if c.folder == folder.name]
            if not rows:
                continue
            out += [f"**{folder.label}** (`results/{folder.name}`)", ""]
            out += _header(CLAIM_COLUMNS)
            out += [claim_row(c, records[folder.name], CLAIM_COLUMNS) for c in rows]
            out.append("")
    for folder in page.folders:
        record = records[folder.name]
        out += [f"## {folder.label}", ""]
        out += _provenance(record)
        for figure in record.figures:
            stem = figure.removesuffix(".png").replace("_", " ")
            out += [f"![{stem}](figures/{folder.name}/{figure})", ""]
        tables = _experiment_markdown(record)
        if tables is not None:
            out += [
                "The folder's tables, as the experiment writes them from its "
                "`results.json`:",
                "",
                demote_headings(tables.strip(), 2),
                "",
            ]
    return "\n".join(out).rstrip() + "\n"


def _provenance(record: Record) -> list[str]:
    meta = record.meta
    wall = meta.get("wall_s") if isinstance(meta, dict) else None
    lines = [
        "```bash",
        command_text(record.config) + f" --out runs/{record.name}",
        "```",
        "",
        f"- Folder: `results/{record.name}`, written at `{commit_text(meta)}` on "
        f"{processor_text(_cpu(meta))}, in {numerics_text(meta)} numerics"
        + ("" if wall is None else f" ({wall:,.0f} s wall)")
        + ".",
        f"- `mopa verify results/{record.name}`: {verify_text(record.verify)}.",
        f"- Rendered from `results.json` of {len(flatten(record.results)):,} "
        f"figures, SHA-256 `{record.digest[:16]}` (any change to it changes this "
        "page).",
        "",
    ]
    if record.name == REFERENCE or len(verifications(record)) > 1:
        lines += ["Every verification of these figures:", ""]
        lines += [*verification_table(record), ""]
    return lines


REFERENCE = "reference"
"""The result folder rerun on every processor (:mod:`mopa.experiments.reference`):
not an experiment with claims, but the check of each processor the results were
computed or verified on (its page, and a table in RESULTS.md)."""

REFERENCE_PAGE = Page(
    REFERENCE,
    "Portable numerics: the reference run on each processor",
    (Folder(REFERENCE, "Training, evaluation and belief, each with a digest"),),
)


def processors_text(record: Record) -> str:
    """RESULTS.md's table of the processors the reference run was computed and
    verified on (:func:`verification_table`), with the command that adds a row."""
    return "\n".join(
        [
            "**The reference run on each processor** (`results/reference`: a "
            "training run, an evaluation and a belief, each with a digest of its "
            "figures; a row is added by `mopa verify results/reference`, see "
            f"[its page]({RESULTS_PAGES.as_posix()}/{REFERENCE}.md)):",
            "",
            *verification_table(record),
        ]
    )


def render_summary(
    pages: Sequence[Page],
    records: dict[str, Record],
    claims: Sequence[Claim],
    link_prefix: str = f"{RESULTS_PAGES.as_posix()}/",
) -> str:
    """RESULTS.md's generated region (and the results index page's table): one
    table, a row per claim, grouped by page, each group linking to its page
    (``link_prefix`` + ``SLUG.md``)."""
    out = _header(("claim", *SUMMARY_COLUMNS[1:]))
    for page in pages:
        names = [folder.name for folder in page.folders]
        rows = [c for c in claims if c.folder in names]
        if not rows:
            continue
        link = f"[**{page.title}**]({link_prefix}{page.slug}.md)"
        out.append("| " + link + " |" + " |" * (len(SUMMARY_COLUMNS) - 1))
        out += [claim_row(c, records[c.folder], SUMMARY_COLUMNS) for c in rows]
    return "\n".join(out)
