"""NVLink domains: how many GPUs share one NVLink switch fabric (``cluster.scale_up.domain_gpus``).

A node is what one operating system sees (a GB200 compute tray: 4 GPUs); a *domain* is the set of
GPUs one NVLink switch fabric joins.  On an 8-GPU HGX server both are the node; on a GB200 NVL72
rack 18 trays of 4 GPUs share nine NVLink switch trays, so 72 GPUs talk over NVLink 5 and only
traffic between racks takes the NICs (NVIDIA GB200 NVL72 datasheet, 2024).  NCCL does the same: with
multi-node NVLink (MNNVL, NCCL 2.19+) the ranks of one NVLink clique are one "node" of its topology
(NCCL 2.19.3 release notes, "MNNVL support"), so the network model prices a domain as NCCL prices a
node (explorer/network/topology.py).

Defaults (filled once at load, :func:`default_domain`): a GPU preset with a rack in
explorer/data/domains.yaml (gb200, gb300) supplies ``gpus_per_node`` 4, ``nics_per_node`` 4 and a
72-GPU domain where the scenario gives none; a scenario that keeps other nodes (say 8 GPUs) gets the
largest whole number of its nodes up to 72 that tiles each datacenter (64 for 8-GPU nodes), so the
GPU count never changes behind the user's back.  Without a rack the domain is the node, as before.
"""
from __future__ import annotations

import math
from typing import Any

from .presets import _presets
from .schema import ScenarioError
from .sections import Cluster, Scenario


def racks() -> dict[str, dict[str, Any]]:
    """GPU preset -> the cluster defaults of its rack (explorer/data/domains.yaml)."""
    return _presets("domains")


def rack_of(gpu: Any) -> dict[str, Any] | None:
    """The rack of a GPU preset name, or of a GPU's display name (``hardware.gpu.power_W=...`` turns
    the preset into a mapping that keeps the name ``GB200``); None for GPUs without one."""
    table = racks()
    if not isinstance(gpu, str) or not gpu:
        return None                       # a bad name is reported when the GPU section is built
    if gpu in table:
        return table[gpu]
    return next((r for k, r in table.items() if k.lower() == gpu.strip().lower()), None)


def apply_rack_defaults(raw: dict[str, Any], gpu: Any) -> None:
    """Fill ``cluster.gpus_per_node`` and ``cluster.scale_out.nics_per_node`` of the raw mapping from
    the rack of GPU ``gpu`` (preset or display name) where the scenario leaves them out (module
    docstring)."""
    rack = rack_of(gpu)
    if rack is None:
        return
    cluster = raw.get("cluster")
    if cluster is None:
        cluster = raw["cluster"] = {}
    if not isinstance(cluster, dict):
        return                            # building the section reports the bad value
    cluster.setdefault("gpus_per_node", rack["gpus_per_node"])
    out = cluster.get("scale_out")
    if out is None:
        out = cluster["scale_out"] = {}
    if isinstance(out, dict):
        out.setdefault("nics_per_node", rack["nics_per_node"])


def datacenter_gpus(c: Cluster) -> int:
    """GPUs every datacenter's count is a multiple of (their gcd; all of them with one datacenter)."""
    return math.gcd(*(c.nodes_of(d) * c.gpus_per_node for d in range(c.datacenters)))


def default_domain(c: Cluster, gpu: str | None) -> int:
    """``domain_gpus`` when the scenario gives none: the node, or for a GPU with a rack the largest
    multiple of ``gpus_per_node`` up to the rack's domain that tiles every datacenter.

    >>> from explorer.config.sections import Cluster
    >>> default_domain(Cluster(gpus_per_node=4, nodes=360), "gb200")
    72
    >>> default_domain(Cluster(gpus_per_node=8, nodes=2048), "gb200"), default_domain(Cluster(), "b200")
    (64, 8)
    """
    rack = rack_of(gpu)
    gpn = c.gpus_per_node
    if rack is None:
        return gpn
    per_dc = datacenter_gpus(c)
    if per_dc <= rack["domain_gpus"]:
        return per_dc                     # a cluster smaller than a rack: all of it on NVLink
    best = gpn
    for d in range(gpn, rack["domain_gpus"] + 1, gpn):
        if per_dc % d == 0:
            best = d
    return best


def effective_domain(c: Cluster) -> int:
    """GPUs of one NVLink domain as the network sees it: ``domain_gpus`` (the node when unset), at
    most a datacenter (a domain larger than the cluster holds all of it)."""
    d = c.scale_up.domain_gpus or c.gpus_per_node
    return min(d, datacenter_gpus(c))


def domain_words(sc: Scenario) -> str:
    """How ``validate`` states NVLink domains that span nodes: their size, and when a rack GPU's
    domain falls short of its rack because the GPUs do not tile whole racks, why (a hunt found 80
    GB200s silently split into two 40-GPU domains); "" when the domain is the node."""
    c = sc.cluster
    d = effective_domain(c)
    rack = rack_of(sc.hardware.gpu.origin or sc.hardware.gpu.name)
    per_dc = datacenter_gpus(c)
    # Short of the rack because the GPUs do not tile it (a domain set smaller by hand is not that,
    # and one of a single node on a rack GPU is said too: 76 GB200s have only their 4-GPU trays).
    untiled = rack is not None and d < min(rack["domain_gpus"], per_dc) and per_dc % rack["domain_gpus"] != 0
    if d <= c.gpus_per_node and not untiled:
        return ""
    out = f"; NVLink domains of {d} GPUs"
    if untiled:
        assert rack is not None
        out += (f" ({per_dc} GPUs per datacenter do not tile whole {rack['domain_gpus']}-GPU racks: "
                f"the largest whole number of {c.gpus_per_node}-GPU nodes up to {rack['domain_gpus']} "
                "that tiles them; cluster.scale_up.domain_gpus says otherwise)")
    return out


def rule_domain_gpus(sc: Scenario) -> None:
    """``cluster.scale_up.domain_gpus`` is whole nodes, tiles each datacenter (or holds all of it) and
    needs an NVSwitch fabric to span nodes."""
    c = sc.cluster
    d, gpn = c.scale_up.domain_gpus, c.gpus_per_node
    if d is None or d == gpn:
        return
    field = "cluster.scale_up.domain_gpus"
    if d % gpn:
        raise ScenarioError(field, f"{d} is not a whole number of {gpn}-GPU nodes; use a multiple of "
                                   f"cluster.gpus_per_node {gpn} (GB200 NVL72: 72 with 4-GPU nodes)")
    if c.scale_up.kind != "nvswitch":
        raise ScenarioError(field, f"{d} spans nodes, which only an NVLink switch fabric does; use "
                                   f"{gpn} (the node) or cluster.scale_up.kind nvswitch")
    per_dc = datacenter_gpus(c)
    if d < per_dc and per_dc % d:
        raise ScenarioError(field, f"{d} does not tile the {per_dc} GPUs of a datacenter; use a multiple "
                                   f"of {gpn} that divides {per_dc}, or {per_dc} or more (one domain)")


DOMAIN_RULES = (rule_domain_gpus,)
