"""The layout search of the Design-space tab, bounded to what a page should wait for.

A search waits for its button.  At its depth (:data:`DEPTHS`: about 5 s, 30 s, or the whole
space) it is priced first (:func:`plan_search`): the estimator is timed on a sample of layouts
(its cost is a compile per pipeline shape plus a little per layout), A's own full simulation
prices the top K, and a space too large is narrowed step by step (sequence parallelism always
on, the scenario's ZeRO stage, ...; :func:`_steps`) and the top K shrunk until it fits.  The page
says what was dropped and gives the command that searches everything.  The search itself runs
in this process (the server's threads share the machine's cores, and a search in process stops
at the next chunk when the user moves on), reporting progress per chunk.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ...design import Base, Layout, Space, search
from ...design.executors import Progress
from ...design.scores import score
from ...design.search import SearchResult
from ...design.space import LayoutBuilder, enumerate_layouts, search_raw
from ...scenario import Scenario, ScenarioError
from .design_runs import IN_PROCESS, probe_seconds

DEFAULT_TOP = 10
DEPTHS = {"quick": 5.0, "thorough": 30.0, "exhaustive": None}     # seconds a search may take (None: all)
FULL_FACTOR = 12             # a top layout's full simulation against A's own (llama3-405b-16k: 3-15x)
SAMPLE = 64                  # layouts timed to price a search of this scenario
BATCH_FACTOR = 0.6           # a search's chunk of 250 against the sample's 64, per layout


@dataclass(frozen=True)
class SearchPlan:
    """The space a search in the app covers: ``space``, its ``layouts``, the full space's count,
    what was narrowed (one phrase each), the top K, the measured seconds per layout and the
    expected seconds in all."""

    space: Space
    layouts: int
    full_layouts: int
    narrowed: tuple[str, ...]
    top: int
    per_layout_s: float
    seconds: float


def _steps(own: Layout) -> list[tuple[str, Callable[[Space], Space]]]:
    """Narrowing steps, least informative choices first."""
    vpp = own.vpp if own.vpp > 1 else 2
    recompute = tuple(dict.fromkeys((own.recompute, "selective")))
    schedules = tuple(dict.fromkeys((own.schedule, "1f1b", "interleaved")))
    return [
        ("sequence parallelism on wherever tp > 1", lambda s: replace(s, sequence_parallel=(True,))),
        (f"ZeRO stage {own.zero} only", lambda s: replace(s, zero=(own.zero,))),
        (f"recompute {' or '.join(recompute)}", lambda s: replace(s, recompute=recompute)),
        (f"interleaving at vpp {vpp} only", lambda s: replace(s, vpp=(vpp,))),
        ("micro-batches up to 2", lambda s: replace(s, max_micro_batch=2)),
        (f"schedules {', '.join(schedules)}", lambda s: replace(s, schedules=schedules)),
        ("micro-batch 1", lambda s: replace(s, max_micro_batch=1)),
        (f"schedule {own.schedule} only", lambda s: replace(s, schedules=(own.schedule,))),
    ]


def _shape(lay: Layout, gpus: int, batch: int) -> tuple[str, int, int, int]:
    """What the estimator compiles once per layout shape: schedule, pp, vpp, micro-batches per
    pipeline (batch / (dp · micro-batch))."""
    return lay.schedule, lay.pp, lay.vpp, batch * lay.tp * lay.pp * lay.cp // (gpus * lay.micro_batch)


def _extent(parsed: Scenario, space: Space) -> tuple[int, int]:
    """Layouts in ``space`` and their distinct shapes (:func:`_shape`)."""
    gpus, batch = parsed.cluster.gpus, parsed.training.global_batch
    n, shapes = 0, set()
    for lay in enumerate_layouts(parsed, space):
        n += 1
        shapes.add(_shape(lay, gpus, batch))
    return n, len(shapes)


@dataclass(frozen=True)
class _Price:
    """What a search costs here: seconds per layout once its shape is compiled, seconds per new
    shape, and the seconds the pricing itself took."""

    per_layout: float
    per_shape: float
    spent: float

    def seconds(self, layouts: int, shapes: int) -> float:
        return layouts * self.per_layout + shapes * self.per_shape


def _price(raw: Mapping[str, Any], parsed: Scenario, n: int) -> _Price:
    """SAMPLE layouts spread over the enumeration, scored twice: the first pass compiles their
    shapes (memoised, so the search reuses them), the second runs compiled.  A search scores
    chunks of 250, cheaper per layout than the sample's 64 (BATCH_FACTOR).  Within 30 % of the
    estimate phase on teaching-8gpu and llama3-405b-16k."""
    sample = list(itertools.islice(enumerate_layouts(parsed), 0, None, max(1, n // SAMPLE)))[:SAMPLE]
    builder = LayoutBuilder(raw)
    passes = []
    for _ in range(2):
        t0 = time.perf_counter()
        scenarios = []
        for layout in sample:
            try:
                scenarios.append(builder.scenario(layout))
            except ScenarioError:
                pass
        score(scenarios, "estimate")
        passes.append(time.perf_counter() - t0)
    gpus, batch = parsed.cluster.gpus, parsed.training.global_batch
    shapes = len({_shape(lay, gpus, batch) for lay in sample}) or 1
    n = max(1, len(sample))
    return _Price(BATCH_FACTOR * passes[1] / n, max(0.0, passes[0] - passes[1]) / shapes, sum(passes))


def plan_search(base: Base, probe_s: float, top: int = DEFAULT_TOP,
                budget_s: float | None = 5.0) -> SearchPlan:
    """The widest space whose search is expected within ``budget_s`` (None: the whole space), and
    a top K small enough that re-simulating it on the full engine takes under 40 % of the budget
    (module docstring)."""
    raw = search_raw(base.raw)
    parsed = LayoutBuilder(raw).parsed
    own = Layout.of(base.scenario())
    space, narrowed = Space(), []
    full, shapes = _extent(parsed, space)
    n = full
    price = _price(raw, parsed, full)
    k = top if budget_s is None else max(1, min(top, int(0.4 * budget_s / (FULL_FACTOR * probe_s))))
    fixed = price.spent + (k + 1) * FULL_FACTOR * probe_s
    # Steps in order; one that saves under a tenth (fewer layouts when the shapes cost most) is
    # left for a second pass, taken only if the first did not reach the budget.
    pending = _steps(own) if budget_s is not None else []
    for min_saving in (0.1, 0.0):
        for phrase, step in list(pending):
            cost = price.seconds(n, shapes)
            if cost + fixed <= budget_s:
                break
            trial = step(space)
            n2, shapes2 = _extent(parsed, trial)
            if price.seconds(n2, shapes2) < (1 - min_saving) * cost:
                space, n, shapes = trial, n2, shapes2
                narrowed.append(phrase)
                pending.remove((phrase, step))
    return SearchPlan(space, n, full, tuple(narrowed), k, price.per_layout, price.seconds(n, shapes) + fixed)


@dataclass(frozen=True)
class SearchRun:
    """A search as the tab shows it: its plan, the result and the wall seconds of both."""

    plan: SearchPlan
    result: SearchResult
    seconds: float


def run_search(base: Base, raw_json: str, top: int, depth: str,
               progress: Progress | None = None) -> SearchRun:
    """Plan (:func:`plan_search`) and run the search in this process: the estimator ranks the
    layouts, the full engine re-simulates the top K."""
    t0 = time.perf_counter()
    plan = plan_search(base, probe_seconds(raw_json), top, DEPTHS[depth])
    result = search(base, top=plan.top, space=plan.space, executor=IN_PROCESS, progress=progress)
    return SearchRun(plan, result, time.perf_counter() - t0)


def cli_command(name: str, query: Mapping[str, str], top: int) -> str:
    """The command that searches A's whole space: ``python -m explorer search NAME --top K --set ...``."""
    sets = " ".join(f"--set {k}={v}" for k, v in query.items()
                    if "." in k and not k.startswith(("b.", "d.")))
    return f"python -m explorer search {name} --top {top}" + (f" {sets}" if sets else "")
