"""The collective-algorithm registry (explorer/collective_algorithms/registry.py): one entry is all an
algorithm needs — config accepts its name, the network prices it with its own cost function, the
fallback warning reads its reason — and nothing else keeps a copy of the names."""
from __future__ import annotations

import ast
from dataclasses import fields

import pytest

from explorer import simulate
from explorer.collective_algorithms import registry
from explorer.collective_algorithms.base import Family, LinkCost, crossing, spanned
from explorer.config.schema import ScenarioError
from explorer.config.sections import Communication
from explorer.network.collectives import NcclOptions, cost
from explorer.network.groups import Network
from explorer.network.topology import GroupShape
from explorer.scenario import from_dict

from conftest import ROOT

GB = 1e9


def one_shot(op: str, S: float, sh, wiring) -> LinkCost:
    """A one-shot all-reduce: every rank sends its whole buffer to each of the n - 1 others at once and
    reduces locally (one alpha, (n-1) x S out of every GPU; the "one-shot" kernels of TensorRT-LLM's
    custom all-reduce).  Each domain sends (n - g) x S per member it holds."""
    n = sh.n
    egress = {0: (n - 1) * S}
    for b in spanned(sh, 0.0):
        g = sh.per_domain[b]
        egress[b] = g * (n - g) * S
    lat = sh.latencies[sh.outer]
    t, b = crossing(sh, egress)
    return LinkCost(lat + t, b, egress, lat)


ONE_SHOT = registry.Algorithm("one-shot", Family.OTHER, ("all-reduce",), alpha_beta=one_shot,
                              citation="test entry")


@pytest.fixture
def with_one_shot(monkeypatch):
    monkeypatch.setitem(registry.ALGORITHMS, ONE_SHOT.name, ONE_SHOT)


def small(algorithm: str) -> dict:
    """Two nodes of four GPUs, DP 8 over both (every DP all-reduce crosses the NICs)."""
    return {"model": {"layers": 2, "hidden": 1024, "heads": 8, "vocab": 1000, "seq_len": 512},
            "training": {"global_batch": 8, "micro_batch": 1},
            "cluster": {"gpus_per_node": 4, "nodes": 2},
            "parallelism": {"tp": 1, "pp": 1, "dp": 8, "zero": 0},
            "communication": {"algorithm": algorithm}}


def test_config_takes_its_choices_from_the_registry():
    algorithm = next(f for f in fields(Communication) if f.name == "algorithm")
    library = next(f for f in fields(Communication) if f.name == "library")
    assert tuple(algorithm.metadata["choices"]) == (
        "auto", "ring", "tree", "nvls", "nvls-tree", "collnet", "pat", "halving-doubling", "hierarchical")
    assert tuple(algorithm.metadata["choices"]) == ("auto",) + tuple(
        a.name for a in registry.ALGORITHMS.values() if a.family is not Family.POINT_TO_POINT)
    assert library.metadata["choices"] == registry.LIBRARIES == ("nccl", "mpi", "gloo")


def test_an_unregistered_algorithm_is_a_one_line_error_listing_the_registry():
    with pytest.raises(ScenarioError) as err:
        from_dict(small("one-shot"))
    msg = str(err.value)
    assert msg.startswith("communication.algorithm: 'one-shot' is not one of auto, ring, tree,")
    assert "\n" not in msg and "one-shot, " not in msg.split("one of", 1)[1]


def test_a_registered_algorithm_is_accepted_by_config_and_priced_by_the_network(with_one_shot):
    sc = from_dict(small("one-shot"))
    assert sc.communication.algorithm == "one-shot"
    net = Network(sc)
    S = 64 * 2**20
    cc = net.cost("all-reduce", float(S), "dp", 0)
    sh = net.shape("dp", 0)
    # Closed form: one alpha of the outermost boundary crossed, then the slowest boundary's egress:
    # the NICs of a node carry 4 members x 4 outside peers x S over the group's node share, and the
    # same bytes cross the 4 members' PCIe links to their NICs (network/pcie_link.py), which bind here.
    assert sh.n == 8 and sh.per_domain[1] == 4 and sh.spans(1) and not sh.spans(2)
    t_nic = 4 * 4 * S / sh.shares[1]
    t_pcie = 4 * 4 * S / (4 * net.options.pcie_Bps)
    assert t_pcie > t_nic > 7 * S / sh.shares[0]
    assert (cc.algorithm, cc.protocol, cc.requested, cc.boundary) == ("one-shot", "none", "", "scale-out")
    assert cc.time_s == pytest.approx(sh.latencies[1] + t_pcie, rel=1e-12)
    assert cc.latency_s == sh.latencies[1]
    # The message's list names the new entry too.
    with pytest.raises(ScenarioError, match=r"one of auto, .*hierarchical, one-shot$"):
        from_dict(small("none-such"))


def test_a_registered_algorithm_runs_through_the_simulator(with_one_shot):
    """The whole model prices the DP all-reduce with it: 16 S of NIC egress per node instead of the
    ring's 2 (n-1)/n S, so the exposed DP time grows (dp_overlap off: the reduction is all exposed)."""
    raw = small("one-shot")
    raw["communication"]["dp_overlap"] = False
    mine = simulate(from_dict(raw))
    raw["communication"]["algorithm"] = "ring"
    ring = simulate(from_dict(raw))
    assert mine.breakdown_s["dp"] > 3 * ring.breakdown_s["dp"] > 0


def test_a_registered_algorithm_that_cannot_run_an_operation_falls_back_with_its_reason(with_one_shot):
    sh = GroupShape(4, (1, 4, 4, 4), (100 * GB, 50 * GB, 50 * GB, 1 * GB), (1e-6, 3e-6, 3e-6, 1e-3))
    got = cost("reduce-scatter", 1e8, sh, "one-shot", False, NcclOptions())
    assert (got.algorithm, got.requested) == ("ring", "one-shot")


def test_mpi_auto_weighs_only_its_libraries_algorithms(with_one_shot):
    """The test entry names no library, so MPI's automatic choice never takes it."""
    assert [a.name for a in registry.library_candidates("all-reduce", "mpi")] == [
        "ring", "halving-doubling", "hierarchical"]
    assert [a.name for a in registry.nccl_candidates("all-reduce")] == [
        "ring", "tree", "nvls", "nvls-tree", "collnet"]
    assert [a.name for a in registry.nccl_candidates("reduce-scatter")] == ["ring", "nvls", "pat"]


def test_the_fallback_reason_is_the_entrys():
    sc = from_dict({**small("tree"), "cluster": {"gpus_per_node": 8, "nodes": 1}})
    net = Network(sc)
    net.cost("all-reduce", 1e8, "dp", 0)
    assert net.fallbacks == {("all-reduce", "dp"): registry.get("tree").why_unavailable(net.options)
                             + "; ring used"}
    assert "between nodes only" in net.fallbacks[("all-reduce", "dp")]


NAME_BRANCHING = ("explorer/network/collectives.py", "explorer/network/groups.py",
                  "explorer/config/sections.py")


@pytest.mark.parametrize("path", NAME_BRANCHING)
def test_no_module_that_prices_or_validates_compares_algorithm_names(path):
    """The if-chains by name are gone: no comparison or membership test against a registered
    algorithm's name, and no literal tuple of two or more of them (a second copy of the list)."""
    known = set(registry.names())
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    compares = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)
                and any(isinstance(c, ast.Constant) and c.value in known
                        for side in (n.left, *n.comparators) for c in ast.walk(side))]
    lists = [n for n in ast.walk(tree) if isinstance(n, (ast.Tuple, ast.List, ast.Set, ast.Dict))
             and sum(isinstance(e, ast.Constant) and e.value in known
                     for e in (n.keys if isinstance(n, ast.Dict) else n.elts)) >= 2]
    assert [ast.unparse(n) for n in compares + lists] == []


def test_the_registry_imports_nothing_above_the_foundations():
    """config (layer 1) imports it, so it may import nothing of explorer outside its package."""
    for path in (ROOT / "explorer" / "collective_algorithms").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 1 or not (node.module or "").startswith("explorer"), (path, node.module)
                assert node.level <= 1, (path.name, node.module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("explorer") for a in node.names), path
