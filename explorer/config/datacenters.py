"""Raw-level resolution of the scale-across fields, before the sections are built.

Three shorthands are expanded on the raw mapping (like ``model.preset`` in loading.py), because
the sections hold the resolved form:

- ``cluster.datacenters`` as a list of ``{name, nodes, gpu}`` becomes the datacenter count, the
  total ``cluster.nodes`` and the derived ``cluster.datacenter_names``; datacenters of different
  sizes add ``cluster.datacenter_nodes`` and datacenters of different GPU presets (``gpu`` a name
  of explorer/data/gpus.yaml; left out = ``hardware.gpu``) add ``cluster.datacenter_gpus``.  How
  such a cluster is simulated, and which placements it admits, is explorer/variants/hetero.py.
- ``cluster.scale_across.preset`` fills ``bandwidth_Gbps`` and ``latency_ms`` where the scenario
  leaves them out (or gives null); link ends given as integers become their text.
- ``parallelism.span`` sets ``parallelism.order`` (SPAN_ORDERS); an explicit order that disagrees
  is an error, so a scenario never says two different things about its placement.
"""
from __future__ import annotations

from typing import Any

from .presets import DEFAULT_GPU, gpu_presets
from .schema import ScenarioError, excerpt, unknown_key_error
from .wan import WAN_PRESETS

# parallelism.span -> the placement order it implies (innermost first; Megatron's RankGenerator).
# dp: a pipeline replica (tp*cp*pp GPUs) is contiguous, so replicas - DP - are what crosses.
# pp: stages outermost, so consecutive datacenters hold consecutive stages and DP stays inside.
# dp+pp: the same order with fewer stages than datacenters: each stage spans D/pp datacenters
# (its DP groups cross them) and the stage boundaries cross datacenters too (rules check it).
SPAN_ORDERS = {"dp": "tp-cp-ep-pp-dp", "pp": "tp-cp-ep-dp-pp", "dp+pp": "tp-cp-ep-dp-pp"}
_DC_KEYS = ["name", "nodes", "gpu"]


def resolve_scale_across(raw: dict[str, Any]) -> None:
    """Expand the shorthands of the module docstring in ``raw`` (a private copy), in place."""
    cluster = raw.get("cluster")
    if isinstance(cluster, dict):
        if isinstance(cluster.get("datacenters"), list):
            _resolve_list(raw, cluster)
        wan = cluster.get("scale_across")
        if isinstance(wan, dict):
            _resolve_wan(wan)
    par = raw.get("parallelism")
    if isinstance(par, dict) and isinstance(par.get("span"), str) and par["span"] in SPAN_ORDERS:
        order = SPAN_ORDERS[par["span"]]
        if par.get("order") is not None and par["order"] != order:
            raise ScenarioError("parallelism.span", f"{par['span']} places ranks as {order} but "
                                f"parallelism.order is {excerpt(par['order'])}; drop order or set span: auto")
        par["order"] = order


def _resolve_list(raw: dict[str, Any], cluster: dict[str, Any]) -> None:
    """``cluster.datacenters: [{name, nodes, gpu}, ...]`` -> count, nodes and names."""
    items = cluster["datacenters"]
    path = "cluster.datacenters"
    if not 1 <= len(items) <= 1024:
        raise ScenarioError(path, f"a list of {len(items)} datacenters; give 1 to 1024")
    names, nodes, gpus = [], [], []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ScenarioError(f"{path}[{i}]", f"{excerpt(item)} is not a mapping {{name, nodes, gpu}}")
        for key in item:
            if key not in _DC_KEYS:
                raise unknown_key_error(key, _DC_KEYS, f"{path}[{i}]")
        name = item.get("name", f"dc{i}")
        n = item.get("nodes")
        if not isinstance(name, str) or not name or len(name) > 200:
            raise ScenarioError(f"{path}[{i}].name",
                                f"{excerpt(name)} is not a name (text of 1-200 characters)")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ScenarioError(f"{path}[{i}].nodes", f"{excerpt(n)} is not a positive integer (nodes "
                                "of this datacenter)")
        names.append(name)
        nodes.append(n)
        gpus.append(item.get("gpu"))
    if len(set(names)) != len(names):
        raise ScenarioError(path, f"names {excerpt(names)} repeat; give each datacenter its own name")
    hw = raw.get("hardware") if isinstance(raw.get("hardware"), dict) else None
    cluster_gpu = hw.get("gpu") if hw is not None else None
    table = gpu_presets()
    for i, g in enumerate(gpus):
        if g is not None and (not isinstance(g, str) or g not in table):
            raise ScenarioError(f"{path}[{i}].gpu", f"{excerpt(g)} is not a GPU preset (valid: "
                                f"{', '.join(table)}); leave it out for hardware.gpu")
    given = [g for g in gpus if g is not None]
    if cluster_gpu is None:
        # No hardware.gpu: the first datacenter's GPU (else the default) is the scenario's.
        cluster_gpu = given[0] if given else DEFAULT_GPU
        raw["hardware"] = {**(hw or {}), "gpu": cluster_gpu}
    name_of = cluster_gpu if isinstance(cluster_gpu, str) else None
    own = [g if g is not None else name_of for g in gpus]
    if any(g != name_of for g in own):
        if name_of is None:
            raise ScenarioError("hardware.gpu", "is a custom mapping, but cluster.datacenters names GPU "
                                "presets; give hardware.gpu a preset name (valid: " + ", ".join(table) + ")")
        cluster["datacenter_gpus"] = own
    total = sum(nodes)
    if len(set(nodes)) > 1:
        cluster["datacenter_nodes"] = nodes
    if "nodes" in cluster and cluster["nodes"] != total:
        sizes = " + ".join(map(str, nodes))
        raise ScenarioError("cluster.nodes", f"{excerpt(cluster['nodes'])} but cluster.datacenters holds "
                            f"{sizes} = {total} nodes; drop cluster.nodes or make them agree")
    cluster["nodes"] = total
    cluster["datacenters"] = len(names)
    cluster["datacenter_names"] = names


def _resolve_wan(wan: dict[str, Any]) -> None:
    """The WAN preset's bandwidth and latency under the scenario's own; integer link ends as text."""
    for key in ("bandwidth_Gbps", "latency_ms"):
        if key in wan and wan[key] is None:
            del wan[key]                 # null = "the preset's (or the default)"
    chosen = wan.get("preset")
    if isinstance(chosen, str) and chosen in WAN_PRESETS:
        for key, value in WAN_PRESETS[chosen].items():
            wan.setdefault(key, value)
    links = wan.get("links")
    if isinstance(links, list):
        for link in links:
            if isinstance(link, dict):
                for end in ("a", "b"):
                    if isinstance(link.get(end), int) and not isinstance(link.get(end), bool):
                        link[end] = str(link[end])
