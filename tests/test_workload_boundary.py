"""The workload boundary (issue 33, point 3): outside explorer/workloads/ (and explorer/config/,
which defines the model sections) no module tests the model's family or reaches into a family's
package — they ask the registry (explorer/workloads/registry.py) and read its WorkloadSpec; the
layers below the workloads (config, physics, network) import nothing of them."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from explorer.config.model_parts import STAGE_BLOCKS, Conv
from explorer.estimate.many import needs_simulation
from explorer.physics.work import ZERO_WORK
from explorer.scenario import ScenarioError, load
from explorer.ui.controls import MODEL_KEYS, hidden_model_keys
from explorer.workloads import registry
from explorer.workloads.convnet import arch
from explorer.workloads.spec import EdgeCost, LayerCost, WorkloadSpec

from conftest import ROOT

EXPLORER = ROOT / "explorer"
FAMILIES = sorted(p.parent.name for p in (EXPLORER / "workloads").glob("*/__init__.py"))
# Identifiers that name one family's branch (conv_active, CONV_KEYS, is_conv, convnet, ...);
# plain ``conv`` stays allowed as a local name (estimate/overrides.py converts values).
FAMILY_NAME = re.compile(r"convnet|is_conv|(^|_)conv_|_conv($|_)|transformer_keys", re.IGNORECASE)
FAMILY_TEXT = re.compile(r"model\.conv|convnet|workloads[./](" + "|".join(FAMILIES) + r")\b")
# Modules the lead restructures in parallel (issue 33, point 4); each entry must still offend, so
# that it is dropped the day the module asks the registry.
PENDING: dict[str, str] = {}


def _module_of(at: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved from ``at``)."""
    if node.level == 0:
        return node.module or ""
    parts = list(at.relative_to(ROOT).with_suffix("").parts)
    base = parts[:-node.level] if at.name != "__init__.py" else parts[:len(parts) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: Path, at: Path | None = None) -> set[str]:
    """Every module ``path`` imports, in-function and TYPE_CHECKING imports included; ``at``: where
    the module sits in the tree, to resolve its relative imports (``path`` itself by default)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mod = _module_of(at or path, node)
            out |= {mod} | {f"{mod}.{a.name}" for a in node.names}
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def family_branches(path: Path, at: Path | None = None) -> list[str]:
    """Where ``path`` tests or names a model family: a ``.conv`` attribute, an identifier naming a
    family's branch, a string naming a family's field or package (docstrings and comments may
    cite one), or an import of a family's package (``at``: as for :func:`_imports`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr == "conv":
            found.append(f"{line}: .conv")
        names = ([node.id] if isinstance(node, ast.Name) else [node.attr] if isinstance(node, ast.Attribute)
                 else [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
                 [a.asname or a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom))
                 else [])
        found += [f"{line}: {n}" for n in names if FAMILY_NAME.search(n)]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                and FAMILY_TEXT.search(node.value):
            found.append(f"{line}: {node.value[:40]!r}")
    packages = tuple(f"explorer.workloads.{f}" for f in FAMILIES)
    found += [f"import {m}" for m in sorted(_imports(path, at))
              if any(m == pkg or m.startswith(pkg + ".") for pkg in packages)]
    return found


def _outside() -> list[Path]:
    return [p for p in sorted(EXPLORER.rglob("*.py"))
            if p.relative_to(EXPLORER).parts[0] not in ("workloads", "config")]


@pytest.mark.slow
def test_no_module_outside_the_workloads_branches_on_the_model_family():
    """Each hit is a place a new family would have to be added by hand (the CNN work touched 24
    files); they ask explorer/workloads/registry.py instead."""
    assert len(FAMILIES) >= 2 and len(_outside()) > 100
    offenders = {str(p.relative_to(ROOT)): hits for p in _outside() if (hits := family_branches(p))}
    assert {k: v for k, v in offenders.items() if k not in PENDING} == {}
    assert set(PENDING) <= set(offenders), "a PENDING module no longer branches: drop it from the list"


def test_the_family_check_finds_what_it_forbids(tmp_path):
    """The check above cannot pass vacuously: each kind of branch it forbids is found."""
    cases = {"x = sc.model.conv is not None": ".conv",
             "from .workloads.convnet import blocks": "import explorer.workloads.convnet",
             "from ..workloads.transformer.layer import layer_cost": "import explorer.workloads.transformer",
             "def conv_active():\n    return 1": "conv_active",
             "KEY = 'model.conv.depth'": "model.conv"}
    for source, expect in cases.items():
        path = tmp_path / "probe.py"
        path.write_text(source, encoding="utf-8")
        at = EXPLORER / ("probe.py" if source.startswith("from .w") else "taskgraph/probe.py")
        hits = family_branches(path, at)
        assert any(expect in h for h in hits), (source, hits)


@pytest.mark.parametrize("layer", ["config", "physics", "network"])
def test_the_layers_below_the_workloads_import_none_of_them(layer):
    """config validates, physics prices kernels and network prices collectives without a workload
    module: the Work record lives in physics/work.py, the ResNet depth table in config, and the
    PowerSGD factor reaches the network as an argument (workloads/registry.compression_plan)."""
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p)
                                                  if m.startswith("explorer.workloads"))
                 for p in sorted((EXPLORER / layer).rglob("*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_config_depth_table_is_the_layer_tables():
    """The loader derives a ResNet's layers and width from config's own table; they are the
    blocks and the classifier's input of the layer table the workload builds (He et al. Table 1)."""
    for depth in STAGE_BLOCKS:
        for width in (32, 64):
            net = arch.build(depth, width=width)
            c = Conv(depth=depth, width=width)
            assert (c.blocks, c.features) == (len(net.blocks), net.features)
    assert (Conv(depth=50).blocks, Conv(depth=50).features) == (16, 2048)


RESNET = ROOT / "scenarios" / "resnet50-cloud-dp.yaml"


def test_what_the_registry_says_a_family_supports_is_what_it_is_asked():
    """The convolutional family communicates over pp and dp (issue 36: pipelined CNNs; config
    refuses the other degrees at load); the estimator leaves it to the simulation; its sidebar
    controls and the transformer's split the model's controls between them."""
    conv, tr = registry.get("convnet"), registry.get(registry.DEFAULT)
    sc = load(RESNET)
    assert registry.workload_for(sc.model) is conv and conv.dimensions == ("pp", "dp") and conv.pipeline_split
    for dim in ("tp", "ep", "cp"):
        with pytest.raises(ScenarioError):
            load(RESNET, {f"parallelism.{dim}": 2, "parallelism.dp": 32})
    assert needs_simulation(sc) and not conv.estimator and tr.estimator
    # Every family's controls are hidden while another family's model is shown (transformer,
    # convnet, dlrm, gnn), and together they are the model's controls.
    families = [registry.get(n) for n in registry.names()]
    for w in families:
        assert hidden_model_keys(w) == frozenset().union(*(o.control_keys for o in families if o is not w))
    assert frozenset().union(*(w.control_keys for w in families)) == set(MODEL_KEYS)
    dlrm = registry.get("dlrm")
    assert dlrm.dimensions == ("dp", "emb") and not dlrm.estimator and not dlrm.pipeline_split
    gnn = registry.get("gnn")
    assert gnn.dimensions == ("dp", "gnn") and not gnn.pipeline_split and not gnn.estimator
    assert registry.nouns(sc.model).layers == "residual blocks of a ResNet-50"


def _layer(params: float) -> LayerCost:
    return LayerCost(ZERO_WORK, ZERO_WORK, ZERO_WORK, ZERO_WORK, ZERO_WORK, ZERO_WORK, params, 0.0, 0.0,
                     (), (), (), (), (), 0.0)


def test_a_spec_cuts_its_runs_of_layers_into_a_chunks_segments():
    """Three layers of kind 0 then five of kind 1: layers 2-5 are one of kind 0 and three of kind 1."""
    a, b = _layer(1.0), _layer(2.0)
    edge = EdgeCost(ZERO_WORK, ZERO_WORK, ZERO_WORK, 0.0, 0.0)
    spec = WorkloadSpec((a, b), ((0, 3), (1, 5)), edge, edge)
    assert spec.layers == 8 and spec.segments(2, 4) == [(a, 1), (b, 3)] and spec.segments(3, 5) == [(b, 5)]
    assert spec.first_layer_of(1) == 3 and spec.kind_of_layers() == [0, 0, 0, 1, 1, 1, 1, 1]
    assert WorkloadSpec((a, b), ((1, 8),), edge, edge).first_layer_of(0) is None
