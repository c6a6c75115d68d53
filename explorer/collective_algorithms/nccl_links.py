"""NCCL's algorithms on the tiered fabric: the bytes each sends across every boundary, and where NCCL
cannot run it.  NCCL's tuning model (explorer/network/nccl_tuning.py) turns this link cost into its
per-protocol time.

A ring crosses every domain boundary once per domain, so its egress per domain equals the per-GPU
volume 2(n-1)/n*S (Thakur et al., IJHPCA 2005, Sec. 4); NCCL's double binary tree (Sanders, Speck &
Traeff 2009) moves about 2*S per node (S on two nodes); NVLink SHARP (NVLS) sends S to the switch
and gets S back (NVLS-tree: that inside each node, the tree's bytes between nodes); CollNet (InfiniBand
SHARP) reduces in the network, S per node.

Every link function has the registry's signature ``(op, S, shape, options) -> (LinkCost, bus bytes)
| None``: the bus bytes are those whose rate is NCCL's busBw (the ring's per-rank volume, 2*S for
trees), None where NCCL cannot run the algorithm on this group.
"""
from __future__ import annotations

from .base import LinkCost, OptionsLike, ShapeLike, crossing, lesser, pick, spanned

NcclLink = tuple[LinkCost, float] | None

# NVLS achieved fraction of the nominal NVLink bandwidth per GPU generation.  NCCL 2.27's
# nvlsEfficiency gives the ratio between generations (Hopper 0.85, Blackwell 0.74); the scale is
# fitted once to the nvls row of reference/nccl_busbw.csv (B200 8-GPU busbw 838 GB/s -> algbw
# 838/1.75 = 479 GB/s of 900 GB/s = 0.532 -> scale 0.532/0.74 = 0.719).  Hopper: 0.611.
NVLS_SCALE = 0.532 / 0.74
NVLS_EFFICIENCY = {"hopper": NVLS_SCALE * 0.85, "blackwell": NVLS_SCALE * 0.74}
# NVLS in an NVLink domain larger than one NVSwitch board, a rack's NVLink switch trays (GB200 NVL72:
# 18 compute trays of 4 GPUs, no switch on the tray, every GPU's links on the rack's switch trays;
# network/groups.NVSWITCH_BOARD_GPUS), reaches less of the nominal than on an 8-GPU NVSwitch board.
# Fitted to the 4 GiB plateau row of nccl_multinode.csv from a full rack (coreweave/nccl-tests pull
# request #43: 72 ranks, algbw 425.5 GB/s, against 476 at the board's efficiency; 8 GiB's 423.2 is
# left out as a dip): x 0.893, for every group of such a domain
# (its 4 GPUs of a tray too: their links run to the same switch trays).  One measurement, of one
# generation, at one group size; the rack's 0.5-2 GiB rows (validation) reach the plateau later than
# this (+38 % at 0.5 GiB, a known gap in tests/test_collectives_multinode.py; +21 % at 1 GiB, +10 % at 2).
NVLS_MULTI_NODE_RATIO = 0.893
# NVLS-tree across nodes as NCCL's tuning model rates it (src/graph/tuning.cc, ncclTopoTuneModel,
# 2.18-2.25): inter-node bandwidth, halved beyond two nodes, times .70 x nNodes / (2 (nNodes - 1)).  A rating
# only: NCCL chooses with it (nvls_tree_rated), the kernel moves the tree's bytes (nvls_tree).  Until issue 34
# this rating priced the call too, with EFA's 0.60: 2 x p5's all-reduce plateau (128 MiB-16 GiB,
# awsome-distributed-training README) came out -13 % .. -35 %; on its bytes it is NVLS- or NIC-bound,
# -3 % .. +16 % (2 x 8 H100 NDR at 16 GiB: +4.8 % -> +9.5 %).  NOTE: 2.19-2.27 (tags v2.21.5-1, v2.25.1-1,
# v2.27.3-1) rate NVLS-tree at min(bwIntra, bwInter, halved beyond two nodes) x 5/6; the 2.18 rating is kept
# for the choice because the mid-size rows (4 x 8 H100 NDR picking NVLS-tree at 16-64 MiB with 5/6) fit it.
NVLS_TREE_RATIO = 0.70
# What an NVLS-tree's network part reaches beyond two nodes, as a share of the rate its NICs would give
# its bytes (dtree_edges x S/2 per node).  On two nodes each node sends and receives S once and the
# calls run at the NICs' rate (2 x 8 B200 NDR: 717 GB/s busbw, -1.9 %); beyond, every inner node of the
# double binary tree also forwards between parent and children while the NVSwitch reduces, and the
# same clusters measure well below the NICs.  Fitted (minimax |log error|) to two calibration rows of
# nccl_multinode.csv, one per cluster of togethercomputer/together-nccl-tests' NVLS-tree scaling reports
# (B200, 8 x NDR 400 Gb/s per node, NCCL_ALGO=NVLSTree): use3a-ss 8 nodes 274.3 GB/s (NCCL 2.29.7,
# 16 GiB) and flapping-airplanes 4 nodes 343.0 (NCCL 2.30.7, 8 GiB): 0.742 and 0.944 of the NIC rate,
# so 0.837 with +/-12.7 %.  Validation: use3a-ss 4, 16, 32 and 46 nodes.  NCCL itself rates the
# NVLS-tree below its network's rate beyond two nodes (NVLS_TREE_RATIO; 5/6 in 2.19-2.27).
NVLS_TREE_DEEP_EFFICIENCY = 0.837


def _nodes_ppn(sh: ShapeLike) -> tuple[int, int]:
    return sh.n // sh.per_domain[1], sh.per_domain[1]


def ring(op: str, S: float, sh: ShapeLike, o: OptionsLike) -> NcclLink:
    """NCCL's ring (all-reduce, reduce-scatter, all-gather, broadcast)."""
    nodes, ppn = _nodes_ppn(sh)
    vol = {"all-reduce": 2 * (sh.n - 1) / sh.n * S, "reduce-scatter": (sh.n - 1) / sh.n * S,
           "all-gather": (sh.n - 1) / sh.n * S, "broadcast": S, "send-recv": S}[op]
    up = vol
    if nodes > 1 and o.nics_per_node >= ppn:
        # Each channel's ring leaves a node once, through the NIC of one member; with a NIC per
        # member the exits rotate over the members (one NIC per channel: NCCL's graph search,
        # rail-aligned "GPUi <-> NICi"), so a member forwards (ppn-1)/ppn of its ring traffic over
        # NVLink and the rest through its own NIC (PCIe), not both.
        up = vol * (ppn - 1) / ppn
    egress = {0: up, **spanned(sh, vol)}
    t, b = crossing(sh, egress)
    return LinkCost(t, b, egress), vol


def pat(op: str, S: float, sh: ShapeLike, o: OptionsLike) -> NcclLink:
    """PAT (NCCL 2.23+, ncclPatEnable): the ring's bytes, one GPU per node only, all-gather and
    reduce-scatter only."""
    nodes, ppn = _nodes_ppn(sh)
    if ppn != 1 or nodes < 2 or op not in ("all-gather", "reduce-scatter"):
        return None
    return ring(op, S, sh, o)


def _btree_links(nranks: int) -> list[int]:
    """Tree edges at each of ``nranks`` nodes in NCCL's binary tree (src/graph/trees.cc, ncclGetBtree,
    NCCL 2.4-2.30): node r > 0 with lowest set bit b hangs under (r - b) | 2b, or r - b when that is out
    of range, and node 0 is the root.  Counted from the parent links, so every edge is seen once."""
    edges = [0] * nranks
    for r in range(1, nranks):
        b = r & -r
        up = (r ^ b) | (b << 1)
        if up >= nranks:
            up = r ^ b
        edges[r] += 1
        edges[up] += 1
    return edges


def dtree_edges(nodes: int) -> int:
    """The most tree edges any node has in NCCL's double binary tree over ``nodes`` nodes: the binary
    tree plus its mirror (node r as nodes - 1 - r) for an even count, or its shift by one (node r as
    (r + 1) mod nodes) for an odd count (src/graph/trees.cc, ncclGetDtree).  Each tree carries half the
    data and each edge S/2 each way, so a node sends this many times S/2.

    >>> [dtree_edges(n) for n in (2, 3, 4, 5, 8, 16)]
    [2, 3, 4, 4, 4, 4]
    """
    if nodes <= 1:
        return 0
    one = _btree_links(nodes)
    two = [one[nodes - 1 - r] if nodes % 2 == 0 else one[(r - 1) % nodes] for r in range(nodes)]
    return max(a + b for a, b in zip(one, two, strict=True))


# NICs faster than this [GB/s] are the ones NCCL's graph search splits into two channels of half the rate
# (nccl_tuning.DUP_CHANNEL_GBPS, search.cc); tree_nic_factor's rule is observed on them only.
TREE_PAIRED_NIC_GBPS = 25.0


def tree_nic_factor(o: OptionsLike, ppn: int) -> float:
    """How many times its bytes a node's NICs carry for NCCL's tree.  The tree graph's BALANCED_TREE
    pattern spreads each channel's network traffic over two GPUs ("Tree parent + one child on first GPU,
    second child on second GPU": NCCL_TOPO_PATTERN_BALANCED_TREE, src/include/graph.h), and its search counts
    a tree's GPU-NIC path in both directions (search.cc, ``bidir`` for the tree patterns), so a node with a
    400 Gb/s-class NIC per GPU (NICs beyond one per GPU bond into it, as domain_links does) runs its tree on
    the rate of half of them: the factor is 2 there, 1 with one NIC per two GPUs or fewer, between in between.
    Measured, not fitted (no free constant): togethercomputer/together-nccl-tests baselines/use3a-ss
    2026-05-02 report (B200, 8 x NDR 400 Gb/s per node, NCCL 2.29.7, 16 GiB, NCCL_ALGO forced): Tree 335 GB/s
    busbw on 2 nodes and 191-194 on 4-46 nodes against the ring's 345-291, half of what the NICs would give
    the tree's bytes; 5 x 8 H100 with 4 x 400 Gb/s RoCE (one NIC per two GPUs, NVIDIA/nccl issue #1368) run
    the tree at its full NIC rate (150 GB/s).  A better-tuned B200 fabric (flapping-airplanes, same report
    series, NCCL 2.30.7: ring 385 GB/s on 4 nodes) runs its tree at 233, about 0.7 of its NICs: the rule is
    a lower bound there (-28 %, validation).  Limited to NICs above TREE_PAIRED_NIC_GBPS: on 8 x 100 Gb/s
    A100 nodes the two-node tree was measured above the ring (NVIDIA/nccl-tests issue #169, about 100 GB/s
    busbw, the NICs' line rate).  1 with one GPU per node (the TREE pattern,
    nccl_tuning.pattern_discount), when the node's NICs are unknown, and in an NVLink domain whose NICs the
    channels do not all reach (an NVL72 rack: domain_links caps its egress at the channels' NICs, no
    measurement says the tree reaches fewer).

    >>> class O: nics_per_node, gpus_per_node, nic_GBps, net_cap_Bps = 8, 8, 50.0, float("inf")
    >>> tree_nic_factor(O(), 8), tree_nic_factor(O(), 1)
    (2.0, 1.0)
    """
    if ppn < 2 or o.nics_per_node <= 0 or o.gpus_per_node <= 0:
        return 1.0
    nics = min(o.nics_per_node, o.gpus_per_node)
    paired = max(1.0, 2 * nics / o.gpus_per_node)
    # Never slower than a NIC at the threshold: NCCL's graph search accepts the fastest speed whose graph
    # fits (ncclTopoCompute walks its speed array downwards), and a faster NIC fits every graph a slower
    # one does, so the tree on a NIC just above 25 GB/s still runs at 25, not at half its rate (a step
    # from 1 to 2 made 105 Gb/s EFA twice as slow as 100; measured points at 12.5 and 50 GB/s unchanged).
    # (pick/lesser: the NIC rate and the cap may be arrays of network points, network/points.py.)
    return pick((o.nic_GBps <= TREE_PAIRED_NIC_GBPS) | (o.net_cap_Bps < float("inf")), 1.0,
                lesser(paired, o.nic_GBps / TREE_PAIRED_NIC_GBPS))


def tree(op: str, S: float, sh: ShapeLike, o: OptionsLike) -> NcclLink:
    """NCCL's double binary tree all-reduce, between nodes only (inside one node NCCL's ring always
    wins).

    Each tree moves half the data and each of its edges carries S/2 each way, so a node sends
    dtree_edges(nodes) x S/2: 2*S where it is an inner node of one tree (parent and two children) and a
    leaf of the other; S on two nodes (root of one single-edge tree, leaf of the other), where the ring
    still sends 2(n-1)/n*S -- why nccl-tests' busbw on two nodes "can exceed the actual available peak
    BW" (AddyLaddy, NVIDIA, nccl-tests issue #22; again in nccl-tests issue #169, 2023); 1.5*S on three
    nodes, whose trees are chains (0-2-1 and its shift 1-0-2), less than the ring's ~1.9*S, so NCCL's
    tree there beats its ring on the network.  The node with the most edges paces the pipeline.
    """
    nodes, ppn = _nodes_ppn(sh)
    if nodes <= 1 or op != "all-reduce":
        return None
    return _tree_link(S, sh, dtree_edges(nodes) * S / 2, tree_nic_factor(o, ppn))


def _tree_link(S: float, sh: ShapeLike, out: float, nic_factor: float) -> NcclLink:
    """A tree whose busiest node sends ``out`` bytes, on NICs that run it at 1 / ``nic_factor`` of
    their rate (tree_nic_factor).  That factor slows the node's NICs alone: the leaf, spine and WAN
    links beyond carry the tree's bytes at their own rates (it once multiplied every boundary's bytes, so
    a faster NIC doubled a WAN-bound tree's time), and the bytes reported are the bytes sent."""
    egress = {0: 2 * S, **spanned(sh, out)}
    timed = {b: v * nic_factor if b == 1 else v for b, v in egress.items()}
    t, b = crossing(sh, timed)
    return LinkCost(t, b, egress), 2 * S


def tree_rated(op: str, S: float, sh: ShapeLike, o: OptionsLike) -> NcclLink:
    """The tree as NCCL's tuning model rates it when it chooses: on up to two nodes at the intra-node
    graph's bandwidth (a node sends S), beyond at the inter-node bandwidth with algBw = busBw / 2 (2 S
    per node), whatever the node count (src/graph/tuning.cc, ncclTopoTuneModel: ``bw = nNodes <= 2 ?
    bwIntra : bwInter``, ratio .5; NCCL 2.4-2.30).  So on three nodes NCCL rates the tree below its ring
    and runs the ring, although its tree would send only 1.5 S (:func:`tree`): forced with NCCL_ALGO=Tree
    it is the faster there."""
    nodes, ppn = _nodes_ppn(sh)
    if nodes <= 1 or op != "all-reduce":
        return None
    # The tree graph NCCL rates has the channels of its pattern (tree_nic_factor) too.
    return _tree_link(S, sh, S if nodes == 2 else 2 * S, tree_nic_factor(o, ppn))


def _nvls_share(sh: ShapeLike, o: OptionsLike) -> float:
    # shares[0] carries the ring efficiency; NVLS has its own fitted fraction of the nominal instead.
    ratio = NVLS_MULTI_NODE_RATIO if o.multi_node_nvlink else 1.0
    return sh.nominal_up_share * NVLS_EFFICIENCY.get(o.arch, 0.0) * ratio


def _nvls_ok(sh: ShapeLike, o: OptionsLike) -> bool:
    return o.nvls and o.arch in NVLS_EFFICIENCY and sh.per_domain[1] >= 2


def _switch_reduce(S: float, sh: ShapeLike, o: OptionsLike, out: float) -> NcclLink:
    """S into the NVSwitch and the sum back, and ``out`` bytes per node through the NICs."""
    egress = spanned(sh, out)
    t_out, b = crossing(sh, egress) if egress else (0.0, 0)
    t_in = S / _nvls_share(sh, o)
    inner = t_in >= t_out
    return LinkCost(pick(inner, t_in, t_out), pick(inner, 0, b), {0: S, **egress}), S


def nvls(op: str, S: float, sh: ShapeLike, o: OptionsLike) -> NcclLink:
    """NVLink SHARP: the NVSwitch reduces (all-reduce) or multicasts (all-gather, reduce-scatter)."""
    if not _nvls_ok(sh, o):
        return None
    nodes, _ = _nodes_ppn(sh)
    if nodes > 1 and not o.sharp:
        return None     # NVLS across nodes needs CollNet (SHARP) switches (NCCL 2.25)
    if op != "all-reduce":
        if nodes > 1:
            return None  # NVLS all-gather/reduce-scatter across nodes needs CollNet heads
        vol = (sh.n - 1) / sh.n * S
        t = vol / _nvls_share(sh, o)
        return LinkCost(t, 0, {0: vol}), vol
    return _switch_reduce(S, sh, o, S)


def nvls_tree(op: str, S: float, sh: ShapeLike, o: OptionsLike) -> NcclLink:
    """NVLS inside each node, NCCL's double binary tree between nodes (disabled on one node).

    The bytes it moves: S into the NVSwitch and the sum back inside each node, and between nodes the
    tree's, dtree_edges(nodes) x S/2 per node (S on two nodes) -- each GPU's NIC carries its 1/ppn
    slice of the reduce-scattered data up and down the tree."""
    if not _nvls_ok(sh, o):
        return None
    nodes, _ = _nodes_ppn(sh)
    if nodes <= 1 or op != "all-reduce":
        return None
    out = dtree_edges(nodes) * S / 2
    return _switch_reduce(S, sh, o, out if nodes <= 2 else out / NVLS_TREE_DEEP_EFFICIENCY)


def nvls_tree_rated(op: str, S: float, sh: ShapeLike, o: OptionsLike) -> NcclLink:
    """NVLS-tree as NCCL's tuning model rates it when it chooses (NVLS_TREE_RATIO), not what it moves."""
    if not _nvls_ok(sh, o):
        return None
    nodes, _ = _nodes_ppn(sh)
    if nodes <= 1 or op != "all-reduce":
        return None
    # NCCL's NVLS-tree rate (NVLS_TREE_RATIO) as the bytes a node's NICs carry.
    out = (S if nodes <= 2 else 2 * S) * 2 * (nodes - 1) / nodes / NVLS_TREE_RATIO
    return _switch_reduce(S, sh, o, out)


def collnet(op: str, S: float, sh: ShapeLike, o: OptionsLike) -> NcclLink:
    """CollNet (InfiniBand SHARP): in-node reduce-scatter and all-gather, the switches reduce S per
    node (NCCL CollNet)."""
    nodes, ppn = _nodes_ppn(sh)
    if not o.sharp or nodes <= 1 or op != "all-reduce":
        return None
    egress = {0: 2 * (ppn - 1) / ppn * S, **spanned(sh, S)}
    t, b = crossing(sh, egress)
    return LinkCost(t, b, egress), 2 * S


# Why NCCL fell back to its ring (the warning names it once per dimension).
def tree_unavailable(o: OptionsLike) -> str:
    return "NCCL's tree runs between nodes only and these groups are inside one node"


def nvls_unavailable(o: OptionsLike) -> str:
    return ("this GPU and scale-up switch have no NVLink SHARP" if not o.nvls
            else "NVLink SHARP reduces inside one NVSwitch domain only (across nodes it needs "
                 "cluster.scale_out.sharp)")


def nvls_tree_unavailable(o: OptionsLike) -> str:
    return ("this GPU and scale-up switch have no NVLink SHARP" if not o.nvls
            else "NVLS-tree needs several nodes")


def collnet_unavailable(o: OptionsLike) -> str:
    return "CollNet needs switches that reduce (cluster.scale_out.sharp) and groups spanning nodes"


def pat_unavailable(o: OptionsLike) -> str:
    return "PAT runs all-gather/reduce-scatter with one GPU per node only"
