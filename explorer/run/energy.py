"""A phase's average GPU power and the energy of the run.

A GPU's draw at full clock is its board power W (``hardware.gpu.power_W``, or the power cap when
lower); explorer/physics/power.py splits it into a share S that does not scale with activity (0.40,
fitted there) and a dynamic share.  The dynamic share is drawn while the GPU computes and idles
otherwise (communication waits, the pipeline bubble), so the phase's average is

    P = W x (S + (1 - S) x u),   u = the simulated busy-compute share of the iteration

(compute, recomputation and the optimizer step of the breakdown's GPU class over the iteration).
Facility energy = P x GPUs x computing time x PUE, plus the idle draw S x W for the rest of the
wall-clock time: writing checkpoints, restarting and waiting for repairs (:func:`busy_share`;
redoing the work a failure lost is computing) (The Green Grid, "PUE: a comprehensive
examination of the metric", White Paper 49, 2012: PUE = total facility energy / IT equipment
energy).  The default PUE 1.1 is Google's published fleet-wide figure (1.1 for Q2 2021, as reported
by CNBC, "Google's data center goal", 13 April 2022, beside the Uptime Institute 2021 survey's average
of 1.57 for large data centers): a modern hyperscale AI site rather than the industry average.
Host CPUs, NICs and switches are not counted: GPU energy only.
"""
from __future__ import annotations

import math

from ..config.sections import Scenario
from ..physics.power import STATIC_POWER_SHARE
from ..variants.hetero import dc_gpu, on_gpu
from .goodput import Goodput

BUSY = ("compute", "recompute", "optimizer")


def compute_share(breakdown_s: dict[str, float], iteration_s: float) -> float:
    """Share of the iteration the GPU spends computing (u above), 0..1."""
    busy = sum(breakdown_s.get(k, 0.0) for k in BUSY)
    return min(max(busy / iteration_s, 0.0), 1.0) if iteration_s > 0 else 0.0


def board_W(sc: Scenario) -> float | None:
    """The GPU's draw at full clock: its board power, or the power cap when lower; None if unknown."""
    w = sc.hardware.gpu.power_W
    cap = sc.hardware.power_cap_W
    if w is None:
        return cap
    return min(w, cap) if cap is not None else w


def average_W(sc: Scenario, u: float) -> float | None:
    """Average draw of one GPU at compute share ``u`` (:func:`one_average_W`); on datacenters of
    different GPU presets (cluster.datacenters[].gpu) the node-weighted mean of each datacenter's
    GPUs at their own board power, ``u`` being the run's (a hunt found an all-B200 list charged at
    hardware.gpu's H100 700 W).  None if some GPU's power is unknown."""
    c = sc.cluster
    if not c.datacenter_gpus:
        return one_average_W(sc, u)
    draws = [one_average_W(on_gpu(sc, dc_gpu(sc, d)), u) for d in range(c.datacenters)]
    if any(w is None for w in draws):
        return None
    nodes = [c.nodes_of(d) for d in range(c.datacenters)]
    return sum(n * w for n, w in zip(nodes, draws, strict=True) if w is not None) / sum(nodes)


def one_average_W(sc: Scenario, u: float) -> float | None:
    """Average draw of one GPU at compute share ``u``: its static share S of the board power W0,
    which no clock lowers (physics/power.py, whose clock under a cap assumes the same), plus the
    rest up to its draw while computing, W = min(W0, cap), u of the time: S W0 + (W - S W0) u
    (W (S + (1 - S) u) without a cap; a hunt found the static share scaled with the cap, capped
    energy 9 % low).  None if no power is known."""
    w = board_W(sc)
    if w is None:
        return None
    static = STATIC_POWER_SHARE * (sc.hardware.gpu.power_W or w)
    return static + (w - static) * u


def busy_share(g: Goodput, elastic: bool) -> float:
    """Share of a phase's wall-clock time its GPUs compute (run/goodput.py's shares): training and
    redoing lost work, 1 - checkpoint - restart - rejoin shares; a job that waits for repairs computes
    only while no node is down (x the repair factor), an elastic one trains on the survivors."""
    if math.isinf(g.job_mtbf_s):
        return 1.0
    working = max(1.0 - g.checkpoint_share - g.restart_share - g.rejoin_share, 0.0)
    return working if elastic else working * g.whole_share


def energy_MWh(avg_W: float, gpus: int, seconds: float, pue: float) -> float:
    """Facility energy in MWh: P x GPUs x seconds x PUE (J -> MWh: / 3.6e9)."""
    return avg_W * gpus * seconds * pue / 3.6e9
