"""The layers for given per-stage replica counts, and a price of such a plan close to what the
simulation runs: what fold/replica_choice.py ranks its candidates by before it simulates them.

With every stage's replica count fixed, the cost PipeDream's search (taskgraph/replica_split.py)
prices a cut by becomes exact per stage, in the same min-max dynamic programme over the layer cuts
(Narayanan et al., SOSP 2019, Sec. 3.1, its A(j, m) with m fixed per stage): a replica's sends to
*both* neighbours run on its one ``pp`` stream (taskgraph/replicas.py puts every transfer on its
sender replica's stream), so the gradients it sends back across its first cut add to the
activations it sends on across its last, replica by replica — the search over free replica counts
prices each cut alone, since the next stage's count is not known when a cut is priced.  Beside
them each stage's compute and gradient all-reduce, as replica_split._Costs prices them.

:meth:`LayerPricer.in_flight` adds what 1F1B-RR's order allows at most (PipeDream Sec. 3.2;
replicas.replica_order), over the chosen layers.  A replica of stage s admits NOAM_s =
ceil(replicas from stage s on / r_s) micro-batches (replicas.warm_up) and starts the forward of
micro-batch j + NOAM_s r_s only after the backward of j.  That backward waits for the backward of
j on every later stage e, which a replica of e runs only after its forward of j + (NOAM_e - 1) r_e;
that forward waits for micro-batch j + (NOAM_e - 1) r_e to reach stage e.  In a steady state of
P seconds per micro-batch (m P an iteration) the chain from stage s to e and back gives
(NOAM_s r_s - (NOAM_e - 1) r_e) P >= the compute of one unit on stages s..e plus its transfers
there and back — Little's law (Little, "A proof for the queuing formula L = lambda W", Operations
Research 9(3), 1961) over the micro-batches in flight between the two.  With e = s it is the
stage's own compute, t_s / r_s; with e the last stage (NOAM 1) a unit's whole round trip over the
NOAM_s r_s micro-batches stage s admits.  A schedule that flushes every iteration (1f1b) also fills
and drains: a stage's busiest replica computes its units after the first unit's way to it and
before the last one's way back (the pipeline's fill and drain bubble: Huang et al., GPipe,
NeurIPS 2019).
"""
from __future__ import annotations

import numpy as np

from .replica_split import _Costs
from .replicas import warm_up

INF = float("inf")


class LayerPricer:
    """Best layers for fixed replica counts over one scenario's costs (memoised per stage shape)."""

    def __init__(self, c: _Costs) -> None:
        self.c = c
        n = c.n
        idx = np.arange(n + 1)
        i, j = idx[:, None], idx[None, :]
        t = c.compute[j] - c.compute[i] + np.where(i == 0, c.first, 0.0) + np.where(j == n, c.last, 0.0)
        self.valid = j > i                              # a stage of layers [i, j) holds at least one
        self.tmat = np.where(self.valid, t, INF)        # one unit's seconds over layers [i, j)
        self._sync: dict[tuple[int, int], np.ndarray] = {}
        self._link: dict[tuple[int, int], np.ndarray] = {}
        self._sends: dict[tuple[int, int, int, int], tuple[np.ndarray, np.ndarray]] = {}

    def sync(self, offset: int, r: int) -> np.ndarray:
        """(n+1, n+1) seconds of the all-reduce of layers [i, j)'s gradients among ``r`` replicas
        from slot ``offset`` (0 for one replica): replica_split._Costs.stage's sync term."""
        key = (offset, r)
        got = self._sync.get(key)
        if got is None:
            c, n = self.c, self.c.n
            got = np.zeros((n + 1, n + 1))
            if r > 1:
                slots = tuple(range(offset, offset + r))
                for i in range(n):
                    for j in range(i + 1, n + 1):
                        params = c.params[j] - c.params[i] + (c.edge_params[0] if i == 0 else 0.0) + \
                            (c.edge_params[1] if j == n else 0.0)
                        got[i, j] = c.call("all-reduce", params * c.grad_bytes, slots)
            self._sync[key] = got
        return got

    def link(self, a: int, b: int) -> np.ndarray:
        """(n+1,) seconds of one transfer from replica slot ``a`` to slot ``b`` across the cut at
        each position (cut k: after layer k - 1; 0 at the ends, which no transfer crosses)."""
        got = self._link.get((a, b))
        if got is None:
            c = self.c
            got = np.zeros(c.n + 1)
            for k in range(1, c.n):
                size = c.out_bytes[k - 1]
                got[k] = c.call("send-recv", size, (a, b)) if size > 0 else 0.0
            self._link[(a, b)] = got
        return got

    def sends(self, off_a: int, ra: int, off_b: int, rb: int) -> tuple[np.ndarray, np.ndarray]:
        """Per iteration and cut position, the seconds each of ``ra`` replicas (from slot ``off_a``)
        sends forward and each of the next stage's ``rb`` (from ``off_b``) sends back: arrays of
        shape (ra, n+1) and (rb, n+1); units paired as replica_split._Costs.pairs pairs them."""
        key = (off_a, ra, off_b, rb)
        got = self._sends.get(key)
        if got is None:
            n = self.c.n
            fwd, bwd = np.zeros((ra, n + 1)), np.zeros((rb, n + 1))
            for (a, b), units in self.c.pairs(ra, rb).items():
                seconds = units * self.link(off_a + a, off_b + b)
                fwd[a] += seconds
                bwd[b] += seconds
            got = self._sends[key] = (fwd, bwd)
        return got

    def stage_costs(self, replicas: tuple[int, ...], s: int) -> np.ndarray:
        """(n+1, n+1) per-iteration seconds of stage ``s`` over layers [i, j): the most of its
        compute, its all-reduce and its busiest replica's sends to both neighbours."""
        c, r = self.c, replicas[s]
        offset = sum(replicas[:s])
        cost = np.maximum(c.units(r) * self.tmat, self.sync(offset, r))
        back = np.zeros((r, c.n + 1)) if s == 0 else \
            self.sends(offset - replicas[s - 1], replicas[s - 1], offset, r)[1]
        on = np.zeros((r, c.n + 1)) if s == len(replicas) - 1 else \
            self.sends(offset, r, offset + r, replicas[s + 1])[0]
        pp = (back[:, :, None] + on[:, None, :]).max(axis=0)
        return np.where(self.valid, np.maximum(cost, pp), INF)

    def best_layers(self, replicas: tuple[int, ...],
                    given: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], float]:
        """The layers per stage (``given``, else the split minimising the slowest stage) and the
        slowest stage's seconds, by the recurrence V_s(j) = min over i of max(V_(s-1)(i),
        cost_s(i, j)) over the cut positions (module docstring)."""
        n = self.c.n
        if given is not None:
            at = np.concatenate(([0], np.cumsum(given))).astype(int)
            worst = max(float(self.stage_costs(replicas, s)[at[s], at[s + 1]])
                        for s in range(len(replicas)))
            return tuple(given), worst
        value = np.full(n + 1, INF)
        value[0] = 0.0
        back: list[np.ndarray] = []
        for s in range(len(replicas)):
            both = np.maximum(value[:, None], self.stage_costs(replicas, s))
            arg = both.argmin(axis=0)                 # the first (fewest layers before) of equals
            back.append(arg)
            value = both[arg, np.arange(n + 1)]
        cuts: list[int] = [n]
        for s in range(len(replicas) - 1, 0, -1):
            cuts.append(int(back[s][cuts[-1]]))
        cuts.append(0)
        cuts.reverse()
        return tuple(b - a for a, b in zip(cuts, cuts[1:], strict=False)), float(value[n])

    def in_flight(self, replicas: tuple[int, ...], layers: tuple[int, ...]) -> float:
        """Per-iteration seconds the order of 1F1B-RR allows at least (module docstring): over every
        run of stages s..e, m x (their units' compute and transfers there and back) /
        (NOAM_s r_s - (NOAM_e - 1) r_e); with a flush per iteration, also each stage's units after
        the first unit's way to it and before the last one's way back."""
        c = self.c
        cuts = np.concatenate(([0], np.cumsum(layers))).astype(int)
        p = len(replicas)
        unit = [float(self.tmat[cuts[s], cuts[s + 1]]) for s in range(p)]
        offsets = np.concatenate(([0], np.cumsum(replicas))).astype(int)
        # One unit's transfer across each cut, there and back, on average over the pairs it takes.
        trip = [2.0 * sum(units * float(self.link(int(offsets[b]) + a, int(offsets[b + 1]) + d)[cuts[b + 1]])
                          for (a, d), units in c.pairs(replicas[b], replicas[b + 1]).items()) / c.m
                for b in range(p - 1)]
        noam = [warm_up(replicas, s) for s in range(p)]
        worst = 0.0
        for s in range(p):
            way = 0.0
            for e in range(s, p):
                way += unit[e] + (trip[e - 1] if e > s else 0.0)
                worst = max(worst, c.m * way / (noam[s] * replicas[s] - (noam[e] - 1) * replicas[e]))
            if not c.overlap:
                worst = max(worst, c.units(replicas[s]) * unit[s] + sum(unit[:s]) + sum(trip[:s]))
        return worst
