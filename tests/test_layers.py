"""The import graph of explorer/ is layered (issue 33): no module imports one of a higher layer,
and there is no import cycle at all — counting imports inside functions, imports under
TYPE_CHECKING and the implicit import of every parent package's ``__init__``.

A record another layer fills lives below the code that fills it (explorer/result: the Result, its
timeline and windows, below the variants that combine results); code that needs something from a
higher layer receives it as an argument (explorer/variants get the inner simulate function).
"""
from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import networkx as nx

from conftest import ROOT

# Lowest first; a module belongs to the layer of the longest prefix that names it.  Within a layer
# imports may go either way (they must still be acyclic).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundations", ("explorer.vocabulary", "explorer.schedules", "explorer.units", "explorer.numbers",
                     "explorer.dimensions",
                     "explorer.errors", "explorer.collective_algorithms")),
    ("config", ("explorer.config",)),
    ("physics", ("explorer.physics",)),
    ("network", ("explorer.network",)),
    ("workloads", ("explorer.workloads",)),
    ("engine", ("explorer.engine",)),
    ("taskgraph", ("explorer.taskgraph",)),
    ("analysis", ("explorer.analysis",)),
    ("pricing", ("explorer.pricing",)),
    ("fold", ("explorer.fold",)),
    ("result", ("explorer.result",)),
    ("variants", ("explorer.variants",)),
    ("serving", ("explorer.serving",)),      # inference: its own passes on the engine, a Result
    ("runnable", ("explorer.runnable", "explorer.scenario")),
    ("simulate", ("explorer.simulate",)),
    ("run", ("explorer.run",)),              # the whole run: phases simulated, failures, energy
    ("estimate", ("explorer.estimate",)),
    ("teaching", ("explorer.teaching",)),
    # the link codec: tours' names below
    ("share", ("explorer.share", "explorer.share_limits", "explorer.share_reference")),
    ("design", ("explorer.design", "explorer.fidelity")),
    ("figures", ("explorer.figures",)),
    ("report", ("explorer.report",)),        # the HTML report: figures and share link in one page
    ("traces", ("explorer.traces",)),        # measured runs read and set beside a simulation
    ("commands", ("explorer.commands", "explorer.cli", "explorer.docs",
                  "explorer.__main__")),
    ("ui", ("explorer.ui",)),
    ("package", ("explorer",)),      # explorer/__init__.py: the public API, on top of everything
)


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of explorer/."""
    out = {}
    for p in (ROOT / "explorer").rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def layer_of(module: str) -> int:
    best = max(((len(prefix), i) for i, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
                if module == prefix or module.startswith(prefix + ".")), default=None)
    assert best is not None, f"{module} is in no layer of tests/test_layers.py LAYERS: add it"
    return best[1]


def _targets(module: str, path: Path, node: ast.AST) -> list[str]:
    """The modules of explorer/ an import statement loads (a name that is a submodule counts as it)."""
    mods = modules()
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            pkg = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(pkg[: len(pkg) - (node.level - 1)] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    else:
        return []
    out = []
    for name in names:
        # Importing a.b.c from outside a.b runs a.b's __init__ first (a package's own modules are
        # not counted as importing their package: it is already running).
        parts = name.split(".")
        own = module.split(".")
        out += [p for k in range(2, len(parts) + 1) if (p := ".".join(parts[:k])) in mods
                and (p == name or own[:k] != parts[:k])]
    return out


@cache
def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for module, path in modules().items():
        g.add_node(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for t in _targets(module, path, node):
                if t != module:
                    g.add_edge(module, t, line=node.lineno)
    return g


def test_every_module_has_a_layer():
    for m in modules():
        layer_of(m)


def test_no_import_points_up_the_layers():
    g = graph()
    up = [f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]}) at line {d['line']}"
          for a, b, d in g.edges(data=True) if layer_of(b) > layer_of(a)]
    assert not up, "imports pointing up the layer order:\n" + "\n".join(sorted(up))


def test_no_import_cycle():
    g = graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert not cycles, f"{len(cycles)} import cycles, e.g. {nx.find_cycle(g.subgraph(cycles[0]))}"


def test_config_imports_nothing_above_itself():
    """config validates a scenario without the simulator (issue 33)."""
    g = graph()
    cfg = layer_of("explorer.config")
    bad = sorted(f"{a} -> {b}" for a, b in g.edges() if layer_of(a) == cfg and layer_of(b) > cfg)
    assert not bad, bad


def test_the_checker_sees_what_it_must():
    """The graph catches an in-function import, a TYPE_CHECKING one and a parent package."""
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..simulate import Result\n"
           "def f():\n    from ..design import search\n")
    tree = ast.parse(src)
    found = [t for node in ast.walk(tree) for t in _targets("explorer.analysis.x",
                                                            Path("x.py"), node)]
    assert {"explorer.simulate", "explorer.design", "explorer.design.search"} <= set(found)
    assert layer_of("explorer.analysis.x") < layer_of("explorer.simulate")
