"""The package's import graph: no circle, and every import points down the layers.

The graph is read from the source with :mod:`ast` (nothing is imported): an edge
``a -> b`` for every ``import mopa.b`` or ``from mopa.b import name`` in module
``a`` (``from mopa.pkg import sub`` resolves to the submodule ``mopa.pkg.sub`` when
there is one). An import inside a function counts as one at the top of the module:
deferring it hides a circle from the interpreter, not from the design (the two
modules still need each other). Imports under ``if TYPE_CHECKING:`` do not count:
they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mopa

SOURCE = Path(mopa.__file__).parent

LAYERS = (
    ("mopa.errors",),
    ("mopa.core", "mopa.models"),
    ("mopa.envs",),
    ("mopa.policy", "mopa.players"),
    ("mopa.algos", "mopa.opponent", "mopa.eval"),
    ("mopa.planning", "mopa.league", "mopa.worldmodel"),
    ("mopa.report",),
    ("mopa.runs",),
    ("mopa.envs.pettingzoo",),
    ("mopa.cotrain", "mopa.experiments"),
    ("mopa.report.docs", "mopa.report.claims", "mopa.report.site"),
    ("mopa.bench",),
    ("mopa.cli",),
    ("mopa", "mopa.__main__"),
)
"""The layers, bottom first: a module may import its own layer and those below.
A module belongs to the layer of the longest prefix naming it. The PettingZoo
adapter draws its frames with :mod:`mopa.report.render`, so it sits above the
report although it lives beside the games; the documentation site's renderer
reads the experiments' registry (each folder's command and tables), so it sits
above the experiments although it lives beside the report. The runs' registry
sits below the experiments that register into it, and names the package of mopa's
own experiments (``EXPERIMENT_PACKAGES``) rather than importing it."""


def module_files() -> dict[str, Path]:
    """``{module name: file}`` of every module of the package."""
    modules = {}
    for path in SOURCE.rglob("*.py"):
        parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.AST, package: str) -> list[str]:
    """The dotted names ``node`` imports (``from x import a`` gives ``x.a``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parent = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(parent + ([node.module] if node.module else []))
        return [f"{base}.{alias.name}" for alias in node.names] + [base]
    return []


def import_graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` within the package."""
    modules = module_files()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()

        def visit(node: ast.AST, package=package, targets=targets) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child):
                    for other in child.orelse:
                        visit(other)
                    continue
                dotted = _imported(child, package)
                if isinstance(child, ast.ImportFrom):
                    # ``from x import a``: the submodule x.a if there is one, else x
                    *names, base = dotted
                    dotted = [n if n in modules else base for n in names]
                targets.update(
                    resolved
                    for d in dotted
                    if d.split(".")[0] == "mopa" and (resolved := resolve(d))
                )
                visit(child)

        visit(ast.parse(path.read_text(), str(path)))
        targets.discard(name)
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the longest prefix naming ``module``."""
    best, found = -1, None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(
                prefix
            ) > best:
                best, found = len(prefix), index
    assert found is not None, f"{module} is in no layer of LAYERS"
    return found


def test_the_import_graph_has_no_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_every_import_points_down_the_layers():
    upward = [
        f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
        for a, targets in sorted(import_graph().items())
        for b in sorted(targets)
        if layer_of(b) > layer_of(a)
    ]
    assert not upward, "imports up the layers:\n" + "\n".join(upward)


def test_the_walk_finds_a_circle_and_an_upward_import():
    # A graph with a circle through three modules and one without: the walk
    # reports the circle it closes, in order.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    # The real graph holds the edges the source states, function-local ones too.
    graph = import_graph()
    assert "mopa.planning.lookahead" in graph["mopa.planning"]
    assert "mopa.report.intent_report" in graph["mopa.experiments.intent"]
    assert layer_of("mopa.envs.pettingzoo") > layer_of("mopa.report.render")
    assert layer_of("mopa.envs.pursuit") < layer_of("mopa.policy")
