"""A kind of data-parallel replica: the record the variants that simulate once per kind share
(stragglers in replicas.py, datacenters that differ in hetero.py, gossip and parameter servers in
lowcomm/decentral.py)."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Scenario


@dataclass(frozen=True)
class Variant:
    """A kind of pipeline replica: its scenario (what the builder simulates), how many replicas
    are of this kind, and the text appended to its classes' names."""

    tag: str
    sc: Scenario
    replicas: int
    # Heterogeneous datacenters with DP across (explorer/variants/hetero.py): the datacenters of this kind.
    datacenters: tuple[int, ...] = ()
