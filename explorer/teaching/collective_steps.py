"""Step-through of one collective (issue 14.2): which rank sends which chunk to whom at every step,
the running byte count on every link, and the alpha-beta time of each step with a scenario's
numbers — the textbook picture behind a collective bar of the Gantt.

Algorithms, each as its paper draws it (S = the call's buffer, n ranks, g ranks per node):
- ring (Patarasuk & Yuan, JPDC 2009; NCCL's ring): reduce-scatter then all-gather around the ring,
  n-1 steps each; at step k rank i sends chunk (i-k) mod n, S/n bytes, to rank i+1.  Every link
  carries 2(n-1)/n x S for an all-reduce, (n-1)/n x S for either half.
- tree: a binary tree (heap order, parent (i-1)//2) reduces S to rank 0 level by level, then
  broadcasts it back: every tree edge carries S up and S down.  NCCL pipelines chunks through two
  complementary binary trees (its "double binary tree", after Sanders et al., Parallel Computing
  2009) so that each half of S takes one; one tree keeps the picture readable.
- halving-doubling (Rabenseifner; Thakur et al., IJHPCA 2005, Sec. 4): log2 n steps of recursive
  halving (partner at distance n/2, n/4, ...; half of the remaining data each time), then the same
  steps in reverse doubling: each rank sends S/2 + S/4 + ... = (n-1)/n x S per half.
- hierarchical (level by level): ring reduce-scatter inside each node on S/g chunks, ring
  all-reduce across nodes among the ranks with the same local index on their S/g slice, ring
  all-gather inside each node — the node NICs carry 2(k-1)/k x S/g per rank (k nodes).
- nvls (NVLink SHARP, NVSwitch multicast): every rank sends its S into the switch, which reduces
  and multicasts the sum back: S up and S down per rank, two steps.
- all-to-all (pairwise exchange): n-1 steps, at step k rank i sends S/n to rank (i+k) mod n; every
  ordered pair carries S/n.

Times (``step_seconds``): each step's alpha-beta cost, alpha the per-message latency of the
slowest link it uses and beta that link's bandwidth per GPU (Hockney 1994; Thakur et al. Sec. 2).
Their sum is the textbook estimate; the Gantt's bar is NCCL's tuning model on the same call
(explorer/network/collectives.py), which adds protocols, channels and pipelining.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

SWITCH = -1                    # the NVSwitch (nvls): transfers into and out of the switch
ALGORITHMS = ("ring", "tree", "halving-doubling", "hierarchical", "nvls", "pairwise")
OPS = {"ring": ("all-reduce", "reduce-scatter", "all-gather"), "tree": ("all-reduce",),
       "halving-doubling": ("all-reduce", "reduce-scatter", "all-gather"),
       "hierarchical": ("all-reduce",), "nvls": ("all-reduce",), "pairwise": ("all-to-all",)}
MIN_RANKS, MAX_RANKS = 2, 16


@dataclass(frozen=True)
class Transfer:
    """``src`` sends ``nbytes`` of ``chunk`` to ``dst`` (SWITCH for the NVSwitch)."""

    src: int
    dst: int
    chunk: str
    nbytes: float


@dataclass(frozen=True)
class Step:
    """One step: its phase (reduce-scatter, all-gather, reduce, broadcast, ...) and transfers."""

    phase: str
    transfers: tuple[Transfer, ...]


@dataclass(frozen=True)
class Walkthrough:
    """The steps of one ``op`` of ``size`` bytes over ``n`` ranks (``per_node`` to a node)."""

    algorithm: str
    op: str
    n: int
    size: float
    per_node: int
    steps: tuple[Step, ...]

    def link_bytes(self, upto: int | None = None) -> dict[tuple[int, int], float]:
        """Bytes carried by each directed link (src, dst) over the first ``upto`` steps (all)."""
        out: dict[tuple[int, int], float] = {}
        for st in self.steps[:upto]:
            for t in st.transfers:
                out[(t.src, t.dst)] = out.get((t.src, t.dst), 0.0) + t.nbytes
        return out

    def sent_by(self, rank: int) -> float:
        """Bytes ``rank`` sends over the whole call."""
        return sum(t.nbytes for st in self.steps for t in st.transfers if t.src == rank)

    def crosses_nodes(self, t: Transfer) -> bool:
        """Whether a transfer leaves its node (the switch is inside the node)."""
        return t.src != SWITCH and t.dst != SWITCH and t.src // self.per_node != t.dst // self.per_node


def _ring(op: str, n: int, S: float, ranks: list[int] | None = None, tag: str = "") -> list[Step]:
    """Ring reduce-scatter and/or all-gather over ``ranks`` (default 0..n-1)."""
    ranks = ranks if ranks is not None else list(range(n))
    n = len(ranks)
    c = S / n
    steps = []
    if op in ("all-reduce", "reduce-scatter"):
        for k in range(n - 1):
            steps.append(Step(f"{tag}reduce-scatter", tuple(
                Transfer(ranks[i], ranks[(i + 1) % n], f"{tag}chunk {(i - k) % n}", c)
                for i in range(n))))
    if op in ("all-reduce", "all-gather"):
        for k in range(n - 1):
            steps.append(Step(f"{tag}all-gather", tuple(
                Transfer(ranks[i], ranks[(i + 1) % n], f"{tag}chunk {(i + 1 - k) % n}", c)
                for i in range(n))))
    return steps


def _tree(n: int, S: float) -> list[Step]:
    depth = max((i + 1).bit_length() - 1 for i in range(n))
    level = {i: (i + 1).bit_length() - 1 for i in range(n)}
    up = [Step("reduce", tuple(Transfer(i, (i - 1) // 2, "partial sum", S)
                               for i in range(1, n) if level[i] == d)) for d in range(depth, 0, -1)]
    down = [Step("broadcast", tuple(Transfer((i - 1) // 2, i, "sum", S)
                                    for i in range(1, n) if level[i] == d)) for d in range(1, depth + 1)]
    return up + down


def _halving_doubling(op: str, n: int, S: float) -> list[Step]:
    rounds = int(math.log2(n))
    steps = []
    if op in ("all-reduce", "reduce-scatter"):
        for j in range(rounds):
            d = n >> (j + 1)
            steps.append(Step("recursive halving", tuple(
                Transfer(i, i ^ d, f"half {j + 1}", S / 2 ** (j + 1)) for i in range(n))))
    if op in ("all-reduce", "all-gather"):
        for j in reversed(range(rounds)):
            d = n >> (j + 1)
            steps.append(Step("recursive doubling", tuple(
                Transfer(i, i ^ d, f"block {rounds - j}", S / 2 ** (j + 1)) for i in range(n))))
    return steps


def _hierarchical(n: int, S: float, g: int) -> list[Step]:
    k = n // g
    nodes = [list(range(a * g, (a + 1) * g)) for a in range(k)]
    inner = [_ring("reduce-scatter", g, S, r, "") for r in nodes]
    steps = [Step("reduce-scatter in the node", sum((s[i].transfers for s in inner), ()))
             for i in range(g - 1)]
    if k > 1:
        across = [_ring("all-reduce", k, S / g, [node[j] for node in nodes], "") for j in range(g)]
        steps += [Step(f"all-reduce across nodes ({across[0][i].phase})",
                       sum((s[i].transfers for s in across), ())) for i in range(2 * (k - 1))]
    outer = [_ring("all-gather", g, S, r, "") for r in nodes]
    steps += [Step("all-gather in the node", sum((s[i].transfers for s in outer), ())) for i in range(g - 1)]
    return steps


def _pairwise(n: int, S: float) -> list[Step]:
    return [Step("pairwise exchange", tuple(Transfer(i, (i + k) % n, f"block for {(i + k) % n}", S / n)
                                            for i in range(n))) for k in range(1, n)]


def walkthrough(algorithm: str, op: str, n: int, size: float, per_node: int | None = None) -> Walkthrough:
    """The steps of ``op`` with ``algorithm`` over ``n`` ranks (MIN_RANKS..MAX_RANKS; a power of two
    for halving-doubling, a multiple of ``per_node`` for hierarchical).  ValueError names what is
    not drawable."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm {algorithm!r}: one of {', '.join(ALGORITHMS)}")
    if op not in OPS[algorithm]:
        raise ValueError(f"{algorithm} runs {', '.join(OPS[algorithm])}, not {op}")
    if not MIN_RANKS <= n <= MAX_RANKS:
        raise ValueError(f"{n} ranks: the step-through draws {MIN_RANKS} to {MAX_RANKS}")
    g = per_node or n
    if algorithm == "halving-doubling" and n & (n - 1):
        raise ValueError(f"halving-doubling needs a power of two ranks, not {n}")
    if algorithm == "hierarchical" and (n % g or g < 2):
        raise ValueError(f"hierarchical needs whole nodes of at least 2 ranks ({n} ranks, {g} per node)")
    if algorithm == "ring":
        steps = _ring(op, n, size)
    elif algorithm == "tree":
        steps = _tree(n, size)
    elif algorithm == "halving-doubling":
        steps = _halving_doubling(op, n, size)
    elif algorithm == "hierarchical":
        steps = _hierarchical(n, size, g)
    elif algorithm == "nvls":
        steps = [Step("into the switch (reduced there)", tuple(Transfer(i, SWITCH, "own data", size)
                                                             for i in range(n))),
                 Step("multicast of the sum", tuple(Transfer(SWITCH, i, "sum", size) for i in range(n)))]
    else:
        steps = _pairwise(n, size)
    return Walkthrough(algorithm, op, n, size, g, tuple(steps))


@dataclass(frozen=True)
class Links:
    """Alpha (s) and per-GPU bandwidth (B/s) inside a node and across nodes."""

    alpha_in: float
    beta_in: float
    alpha_out: float
    beta_out: float


def step_seconds(w: Walkthrough, links: Links) -> list[tuple[float, float, float, bool]]:
    """Per step (alpha, largest transfer's bytes, seconds, crosses nodes): alpha + bytes / bandwidth
    of the slowest link the step uses (every transfer of a step runs at once)."""
    out = []
    for st in w.steps:
        worst = (0.0, 0.0, 0.0, False)
        for t in st.transfers:
            cross = w.crosses_nodes(t)
            a, b = (links.alpha_out, links.beta_out) if cross else (links.alpha_in, links.beta_in)
            sec = a + t.nbytes / b
            if sec > worst[2]:
                worst = (a, t.nbytes, sec, cross)
        out.append(worst)
    return out
