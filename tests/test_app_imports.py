"""Issue 32: under 16 concurrent users a fresh server showed 3 internal errors, one session's chart
code finding pandas half-imported by another session's thread (Plotly peeks at sys.modules without
the import lock).  Importing the page module (what app.py does first, under that module's import
lock) now imports every module the app's threads would otherwise import lazily
(explorer/ui/preload.py).  Each check runs in a fresh interpreter, as a fresh server starts."""
from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from conftest import ROOT

# Lazy imports the app never runs: Dask is the CLI's --executor dask and the process pool its
# --workers (the app's design view runs in-process, explorer/ui/views/design_runs.IN_PROCESS);
# tqdm draws the CLI's progress line (explorer/design/progress.py), the app its own bars.
NOT_IN_THE_APP = {"distributed", "explorer.design.pool", "tqdm"}
# What a fresh server's first session thread, and every one after it, must find complete.
MUST_BE_LOADED = ("pandas", "numpy", "pyarrow", "plotly.graph_objects", "plotly.io", "plotly.subplots",
                  "networkx", "PIL.Image", "orjson", "kaleido",
                  # Property classes Plotly imports on first use (go.Bar(marker=dict(line=...)), ...).
                  "plotly.graph_objs.bar.marker._line", "plotly.graph_objs.layout._annotation",
                  "plotly.graph_objs.heatmap.colorbar._title", "plotly.graph_objs.scatter.hoverlabel._font")


def fresh_modules_after_page_import() -> set[str]:
    """sys.modules of a new interpreter once it has imported explorer.ui.page (no Streamlit run)."""
    code = "import json, sys, explorer.ui.page; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout.splitlines()[-1]))


def lazy_imports(module: str, path) -> set[str]:
    """The absolute names of the modules ``path`` imports inside a function (or method)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    out.add(".".join(parts + ([node.module] if node.module else [])))
                else:
                    out.add(node.module)
    return out


@pytest.mark.slow
def test_importing_the_page_loads_every_module_the_views_import_lazily():
    loaded = fresh_modules_after_page_import()
    assert [m for m in MUST_BE_LOADED if m not in loaded] == []
    # Every function-level import in every module of explorer/ that the app has imported.
    missing = {}
    for path in sorted((ROOT / "explorer").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module not in loaded:
            continue                      # the CLI's modules: no session thread runs them
        for name in lazy_imports(module, path):
            top = name.split(".")[0]
            if (name not in loaded and top not in sys.stdlib_module_names
                    and not {top, name} & NOT_IN_THE_APP):
                missing.setdefault(name, []).append(module)
    assert missing == {}, missing
    assert "explorer.ui.page" in loaded and "streamlit" in loaded


# Eight sessions of a fresh server, started at the same moment, each on its own thread (as Streamlit
# runs them), on views that draw charts and tables.  Before: 3 of the 8 showed "Internal error"
# (AttributeError: partially initialized module 'pandas' has no attribute 'Series').
CONCURRENT_SESSIONS = """
import sys, threading
from streamlit.testing.v1 import AppTest
views = ["timeline", "memory", "traffic", "topology", "scenario", "compare", "design", "timeline"]
scenarios = ["teaching-8gpu", "two-datacenters", "llama3-405b-16k"]
barrier, results = threading.Barrier(8), []

def session(i):
    at = AppTest.from_file("app.py", default_timeout=600)
    at.query_params.update(view=views[i], scenario=scenarios[i % 3])
    barrier.wait()
    at.run()
    results.append([str(e.value)[:200] for e in [*at.exception, *at.error]])

threads = [threading.Thread(target=session, args=(i,)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(repr(results))
"""


@pytest.mark.slow
def test_eight_sessions_starting_at_once_on_a_fresh_server_show_no_error():
    proc = subprocess.run([sys.executable, "-c", CONCURRENT_SESSIONS], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert len(results) == 8 and results == [[]] * 8, results


def test_app_py_imports_the_page_before_it_runs():
    """app.py is the script every session thread runs: its first import is the page module."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports and getattr(imports[0], "module", None) == "explorer.ui.page"


def test_every_plotly_trace_the_figures_draw_is_preloaded():
    """A figure module drawing a new trace type (go.Pie) must add it to preload.PLOTLY_PACKAGES."""
    from explorer.ui import preload

    used = set()
    for path in (ROOT / "explorer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "go"
                    and node.attr[:1].isupper() and node.attr not in ("Figure", "FigureWidget")):
                used.add(node.attr.lower())
    assert used and used <= set(preload.PLOTLY_PACKAGES), used - set(preload.PLOTLY_PACKAGES)
