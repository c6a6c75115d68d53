"""Cross-field rules of the scale-across fields: WAN links that exist, and a ``parallelism.span``
whose dimensions really cross datacenters.

Kept beside :data:`explorer.config.rules.RULES` (run right after them by ``rules.validate``) with
one case each in tests/test_scale_across.py (``WAN_RULE_CASES``, checked to cover every entry).
"""
from __future__ import annotations

from .schema import ScenarioError, excerpt
from .sections import Scenario
from .wan import datacenter_index, topology_pairs


def rule_wan_links(sc: Scenario) -> None:
    """Each ``links`` override names two datacenters joined by a link of the topology, once."""
    c = sc.cluster
    wan = c.scale_across
    pairs = topology_pairs(wan.topology, c.datacenters)
    seen: set[tuple[int, int]] = set()
    for i, link in enumerate(wan.links):
        path = f"cluster.scale_across.links[{i}]"
        if c.datacenters < 2:
            raise ScenarioError(path, "a WAN link needs at least 2 datacenters (cluster.datacenters)")
        ends = []
        for end in ("a", "b"):
            d = datacenter_index(getattr(link, end), c.datacenter_names, c.datacenters)
            if d is None:
                valid = ", ".join(c.datacenter_names) + " or " if c.datacenter_names else ""
                raise ScenarioError(f"{path}.{end}", f"{excerpt(getattr(link, end))} names no datacenter "
                                    f"(valid: {valid}an index 0..{c.datacenters - 1})")
            ends.append(d)
        pair = (min(ends), max(ends))
        if pair[0] == pair[1]:
            raise ScenarioError(path, "joins a datacenter to itself; a link joins two datacenters")
        if pair not in pairs:
            shown = ", ".join(f"{c.datacenter_name(a)}-{c.datacenter_name(b)}" for a, b in pairs[:6])
            raise ScenarioError(path, f"{c.datacenter_name(pair[0])}-{c.datacenter_name(pair[1])} is not a "
                                f"link of a {wan.topology} WAN over {c.datacenters} datacenters (its links: "
                                f"{shown}{', ...' if len(pairs) > 6 else ''})")
        if pair in seen:
            raise ScenarioError(path, f"{c.datacenter_name(pair[0])}-{c.datacenter_name(pair[1])} is "
                                "given twice; give each link once")
        seen.add(pair)


def rule_span_crosses(sc: Scenario) -> None:
    """``parallelism.span`` (which set the order at load) names the dimensions that cross."""
    p, c = sc.parallelism, sc.cluster
    D = c.datacenters
    if p.span == "auto" or D < 2:
        return
    replica = p.tp * p.cp * p.pp
    odd = [d for d in range(D) if c.nodes_of(d) * c.gpus_per_node % replica]
    if p.span == "dp" and odd:
        where = (f"datacenter {c.datacenter_name(odd[0])} of {c.nodes_of(odd[0]) * c.gpus_per_node} GPUs"
                 if c.datacenter_nodes else f"one datacenter of {c.gpus // D} GPUs")
        raise ScenarioError("parallelism.span", f"dp keeps each pipeline (tp*cp*pp = {replica} GPUs) inside "
                            f"{where}, which it does not divide; use "
                            f"{'span pp or ' if not c.datacenter_nodes else ''}fewer tp*cp*pp")
    if p.span == "pp" and p.pp % D:
        raise ScenarioError("parallelism.span", f"pp puts whole stages in each datacenter: pp = {p.pp} must "
                            f"be a multiple of the {D} datacenters")
    if p.span == "dp+pp" and not (1 < p.pp < D and D % p.pp == 0):
        raise ScenarioError("parallelism.span", f"dp+pp spreads each of the pp stages over D/pp datacenters: "
                            f"pp = {p.pp} must divide the {D} datacenters and lie between 2 and {D - 1}")


WAN_RULES = (rule_wan_links, rule_span_crosses)
