"""Parse the text nccl-tests prints (NVIDIA/nccl-tests, src/common.cu: the header, the
``#  Rank  N Group  G Pid P on HOST device D [BUS] NAME`` lines and the table
``size count type redop root time algbw busbw #wrong time algbw busbw #wrong``, out-of-place then
in-place).

Accepted variants: any of all_reduce/all_gather/reduce_scatter/alltoall/sendrecv/broadcast/reduce
_perf; with or without the ``root`` column (added in nccl-tests 2.10); ``#wrong`` as ``N/A``
(``-c 0``); lines prefixed by mpirun's ``--tag-output`` (``[1,0]<stdout>:``); interleaved NCCL INFO
lines.  The collective is read from the "Collective test starting: X_perf" line when printed, else
from the ratio busbw/algbw, the bus factor of doc/PERFORMANCE.md (all_reduce 2(n-1)/n, all_gather,
reduce_scatter and alltoall (n-1)/n, sendrecv 1), else given by the caller.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..config.schema import ScenarioError

_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+"
                   r"\s+\[[^\]]*\]\s*(.*)$")
_STARTING = re.compile(r"Collective test starting:\s*(\w+?)_perf")
_NUM = re.compile(r"^-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")
# nccl-tests binary stem -> the explorer's op name (explorer/network/collectives.OPS).
OP_OF = {"all_reduce": "all-reduce", "all_gather": "all-gather", "reduce_scatter": "reduce-scatter",
         "alltoall": "all-to-all", "sendrecv": "send-recv", "broadcast": "broadcast", "reduce": "reduce"}
MAX_CHARS = 4_000_000         # a whole sweep with NCCL_DEBUG=INFO is well under 1 MB


@dataclass(frozen=True)
class Row:
    size_bytes: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float


@dataclass(frozen=True)
class NcclTestsRun:
    op: str | None                 # the explorer's name, None when the text does not say
    ranks: int | None
    hosts: tuple[str, ...]         # in rank order, one per distinct host
    gpus_per_host: int | None
    device: str                    # the GPU name the header prints
    rows: tuple[Row, ...]


def _row(tokens: list[str], in_place: bool) -> Row | None:
    """A table row: size, count, type, [redop], [root], then 4 figures per placement."""
    # ASCII digits only: str.isdigit also accepts superscripts, which int() refuses.
    if len(tokens) < 7 or not all(t.isascii() and t.isdigit() for t in tokens[:2]):
        return None
    figures = tokens[-8:] if len(tokens) >= 11 else tokens[-4:]
    if len(figures) == 8:
        figures = figures[4:] if in_place else figures[:4]
    t, alg, bus = figures[0], figures[1], figures[2]
    if not (_NUM.match(t) and _NUM.match(alg) and _NUM.match(bus)):
        return None
    return Row(int(tokens[0]), float(t), float(alg), float(bus))


def parse(text: str, source: str = "text", in_place: bool = False) -> NcclTestsRun:
    """The run ``text`` describes; ScenarioError naming ``source`` when it has no table."""
    if len(text) > MAX_CHARS:
        raise ScenarioError(source, f"is over {MAX_CHARS:,} characters: not one nccl-tests output")
    op, ranks, device = None, {}, ""
    rows: list[Row] = []
    for raw in text.splitlines():
        line = _TAG.sub("", raw).strip()
        if m := _STARTING.search(line):
            op = OP_OF.get(m.group(1))
        elif m := _RANK.match(line):
            ranks[int(m.group(1))] = m.group(2)
            device = device or m.group(3).strip()
        elif line and not line.startswith("#"):
            row = _row(line.split(), in_place)
            if row is not None:
                rows.append(row)
    if not rows:
        raise ScenarioError(source, "has no nccl-tests table (rows of size count type ... time algbw "
                            "busbw): paste the output of e.g. all_reduce_perf -b 8 -e 8G -f 2")
    hosts = tuple(dict.fromkeys(ranks[r] for r in sorted(ranks)))
    per_host = None
    if ranks:
        counts = {h: sum(1 for v in ranks.values() if v == h) for h in hosts}
        per_host = max(counts.values())
    return NcclTestsRun(op=op, ranks=len(ranks) or None, hosts=hosts, gpus_per_host=per_host,
                        device=device, rows=tuple(rows))


def bus_factor_op(run: NcclTestsRun, ranks: int) -> str | None:
    """The op the busbw/algbw ratio of the largest row names, when it is unambiguous."""
    big = max(run.rows, key=lambda r: r.size_bytes)
    if big.algbw_GBps <= 0:
        return None
    ratio = big.busbw_GBps / big.algbw_GBps
    if abs(ratio - 2 * (ranks - 1) / ranks) < 0.02 and ranks > 2:
        return "all-reduce"
    if abs(ratio - 1) < 0.02 and ranks > 2:
        return "send-recv"
    return None


def ranks_from_ratio(run: NcclTestsRun) -> int | None:
    """n from an all-reduce's busbw/algbw = 2(n-1)/n, the only case where the ratio alone says n."""
    big = max(run.rows, key=lambda r: r.size_bytes)
    if big.algbw_GBps <= 0:
        return None
    ratio = big.busbw_GBps / big.algbw_GBps
    if 1.0 < ratio < 2.0:
        n = round(2 / (2 - ratio))
        return n if abs(2 * (n - 1) / n - ratio) < 0.02 else None
    return None


def read(path: Path, in_place: bool = False) -> NcclTestsRun:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CHARS + 1)
    except OSError as exc:
        raise ScenarioError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    return parse(data.decode("utf-8", errors="replace"), str(path), in_place)
