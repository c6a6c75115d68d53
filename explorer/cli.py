"""Command line: ``python -m explorer run|collective|validate|list`` and the commands of
:mod:`explorer.commands` (diff, sweep, search, sensitivity, scaling).

Every invalid input ends in one line on stderr naming the field and what would be valid, and
exit code 2; no traceback.  Ctrl-C ends a command within a second or two, with one line
(``interrupted: search stopped after 12,345 of 65,076 layouts (estimating)``) and exit code 130.
Anything else that goes wrong is one line ``internal error
(<ExceptionType>): <message>`` and exit code 1.  Text that came from the user (a scenario's
name, a key) is printed with control characters escaped, so a name cannot rewrite the terminal;
``--json`` never prints Infinity or NaN.  SCENARIO is a path to a YAML/JSON file or the name of a
file in ``scenarios/`` (``llama3-405b-16k``).  Writing into a closed pipe (``| head``) ends
quietly with exit code 0.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from .commands import commands
from .config.domains import domain_words
from .config.dormant import dormant_settings
from .config.schema import excerpt, one_line
from .config.shipped import resolve_scenario_path, shipped_scenarios
from .errors import InternalError
from .fidelity.band import band_of, with_band
from .network.collectives import OPS
from .network.compression_quality import convergence_cost
from .network.nccl_table import collective_rows
from .numbers import figure
from .run.phases import plan
from .run.report import run_json, run_lines
from .scenario import Scenario, ScenarioError, load, load_raw, parse_assignments
from .variants.hetero import gpu_summary
from .workloads.registry import nouns

__all__ = ["collective_rows", "load_scenario", "main", "parse_sizes", "result_json", "resolve_scenario_path",
           "scenario_list", "summary_text"]

DEFAULT_SIZES = "1K,64K,1M,16M,256M,1G,4G,16G"
_SIZE = re.compile(r"^\s*([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
MAX_MESSAGE_CHARS = 400        # an error line quotes user input; keep it readable


class UsageError(Exception):
    """Bad command-line usage (exit 2, one line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, not argparse's usage block; ``argument --top: ...`` reads ``--top: ...``, as
        every other error names its field first."""
        raise UsageError(message.removeprefix("argument "))


def load_scenario(name: str, sets: Sequence[str] = ()) -> Scenario:
    return load(resolve_scenario_path(name), parse_assignments(sets))


MAX_SWEEP_SIZES = 64     # doublings from 1 byte to 1 PiB are 51; more is a typo, not a sweep


def _one_size(part: str) -> int:
    mt = _SIZE.match(part)
    if not mt:
        raise ScenarioError("--sizes", f"{excerpt(part)} is not a size like 1K, 16M, 1G or 1073741824")
    value = float(mt.group(1)) * 1024 ** " KMGT".index((mt.group(2) or " ").upper())
    if not 1 <= value <= 2**50:
        raise ScenarioError("--sizes", f"{excerpt(part)} must be between 1 byte and 1P")
    if value != int(value):
        # (1.5 had been priced as 1 byte)
        raise ScenarioError("--sizes", f"{excerpt(part)} is not a whole number of bytes; give e.g. 1536 "
                                       "or 1.5K")
    return int(value)


def parse_sizes(text: str) -> list[int]:
    """``1M,16M,1G`` -> bytes (K/M/G/T are powers of 1024, as nccl-tests' -b/-e flags); ``A:B``
    -> A, 2A, 4A, ... up to B, as nccl-tests ``-b A -e B -f 2`` sweeps (items may be mixed:
    ``8:1K,1M``)."""
    out: list[int] = []
    for part in text.split(","):
        if ":" not in part:
            out.append(_one_size(part))
            continue
        lo_text, _, hi_text = part.partition(":")
        lo, hi = _one_size(lo_text), _one_size(hi_text)
        if lo > hi:
            raise ScenarioError("--sizes", f"{excerpt(part)}: the start must not exceed the end "
                                "(A:B with A <= B)")
        size = lo
        while size <= hi:
            out.append(size)
            size *= 2
    if len(out) > MAX_SWEEP_SIZES:
        raise ScenarioError("--sizes", f"{len(out)} sizes; at most {MAX_SWEEP_SIZES} "
                            "(a 1-byte-to-1-PiB doubling sweep has 51)")
    return out


def _fmt_bytes(n: float) -> str:
    for unit, k in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= k:
            return f"{n / k:.2f} {unit}"
    return f"{n:.0f} B"


def _fmt_s(t: float) -> str:
    return f"{t * 1e3:.1f} ms" if t < 10 else f"{t:.2f} s"


def summary_text(res) -> str:
    """The readable summary ``run`` prints without --json (user text escaped, see one_line)."""
    sc = res.scenario
    if res.inference is not None:      # a serving scenario (issue 37)
        from .serving.report import serving_text
        return serving_text(res, one_line(sc.name))
    p = sc.parallelism
    said = nouns(sc.model)              # tokens or images; what the layers are
    lines = [
        f"{one_line(sc.name)}",
        f"  {gpu_summary(sc)} · tp {p.tp} · pp {p.pp} · dp {sc.dp} · cp {p.cp} · "
        f"ep {p.ep} · "
        f"vpp {p.vpp} · {p.schedule} · ZeRO {p.zero} · {sc.micro_batches} micro-batches",
        f"  stage layers: {', '.join(map(str, res.stage_layers))}"
        + (f"  ({said.layers})" if said.layers else ""),
        # The replicas the stages ran on (what ``stage_replicas: auto`` resolved to: simulate.py).
        *([f"  stage replicas: {', '.join(map(str, p.stage_replicas))}  (replicas per stage, tp x cp GPUs "
           "each)"] if p.stage_replicas else []),
        "",
        f"  iteration time   {_fmt_s(res.iteration_time_s)}"
        + ("" if res.sync_window is None else f"  (inner step; {_fmt_s(res.time_per_step_s)} per step "
                                              "with synchronisation)"),
        f"  {said.per_second + '/s':<16} {figure(res.tokens_per_s)}",
        f"  TFLOP/s per GPU  {figure(res.tflops_per_gpu, 1, small=1.0)}  "
        "(hardware FLOPs, recompute included)",
        f"  MFU              {res.mfu:.1%}"
        # Against the bf16 peak (PaLM App. B's convention): an FP8 run can pass 100 %; its FP8 figure beside.
        + ("" if res.mfu_fp8_peak is None
           else f"  (of the bf16 peak; {res.mfu_fp8_peak:.1%} of the FP8 peak)"),
        f"  bubble           {res.bubble_fraction:.1%}",
        # How far to trust the figures above (explorer/fidelity/band.py): the regime's published runs.
        f"  expected error   {one_line(band_of(sc).label)}",
        "",
        f"  breakdown ({res.classes[res.breakdown_class].label}):",
    ]
    T = res.iteration_time_s
    for k, v in res.breakdown_s.items():
        if v > 0:
            lines.append(f"    {k:<10} {_fmt_s(v):>10}  {v / T:6.1%}  {'#' * int(round(40 * v / T))}")
    binding, cap = res.binding_memory
    mem = binding.as_GB()
    lines += ["", f"  memory per GPU: {mem['total']:.1f} of {cap / 1e9:.1f} GB "
                  f"({cap / 2**30:g} GiB) "
                  f"(params {mem['params']:.1f}, grads {mem['grads']:.1f}, optimizer {mem['optimizer']:.1f}, "
                  f"activations {mem['activations']:.1f})",
              "  bytes sent per GPU: "
              + ", ".join(f"{k} {_fmt_bytes(v)}" for k, v in res.comm_bytes_per_gpu.items() if v),
              "", f"  bottleneck: {one_line(res.bottleneck)}"]
    if res.sync_window is not None:
        from .variants.lowcomm.report import sync_sentences
        lines += [f"  sync: {one_line(x)}" for x in sync_sentences(res.sync_window)]
    if res.exchange is not None:
        from .variants.lowcomm.report import exchange_sentences
        lines += [f"  dp: {one_line(x)}" for x in exchange_sentences(res.exchange)]
    if res.scenario.parallelism.pp > 1:
        from .teaching.bubble import explain_bubble  # three more simulations: only for the readable summary
        lines.append(f"  bubble: {one_line(explain_bubble(res))}")
    lines += run_lines(res)             # the whole run's phases and totals (explorer/run/report.py)
    cc = convergence_cost(res.scenario.communication.compression)
    if cc is not None:
        lines.append(f"  compression: {one_line(cc.sentence())}")
    for n in res.notices:
        # A moved split is what the run did, not a fault of the scenario: a note, not a warning.
        lines.append(f"  {'note' if n.kind == 'split' else 'warning'}: {one_line(n.message)}")
    return "\n".join(lines)


def scenario_list() -> list[tuple[str, str]]:
    """(file name, title) of every shipped scenario; the title is the file's ``name``, escaped."""
    out = []
    for name, path in shipped_scenarios().items():
        try:
            title = load_raw(path).get("name", "")
        except ScenarioError as exc:
            title = f"(unreadable: {exc})"
        out.append((name, one_line(str(title))))
    return out


def result_json(res) -> str:
    """The ``--json`` object as one line; raises InternalError rather than print Infinity/NaN
    (which is not JSON)."""
    summary = res.to_json_dict()
    try:
        json.dumps(summary, allow_nan=False)
    except ValueError:
        raise InternalError("the simulation produced a non-finite number") from None
    summary.update(run_json(res))      # run_total (explorer/run, issue 38): finite, or a ScenarioError
    # The result's figures and how far to trust them (expected_error: explorer/fidelity/band.py).
    return json.dumps(with_band(summary, res.scenario), allow_nan=False)


def _say(message: str) -> None:
    """One line on stderr, escaped and cut to a readable length."""
    text = one_line(message)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS - 3] + "..."
    print(text, file=sys.stderr)


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush does not
    raise again (the recipe of the Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # stdout replaced by an object without a file
        pass


def _after_interrupt() -> None:
    """After a Ctrl-C: ignore a second one, which would cut the last line short with a traceback
    (the command is ending anyway, its workers gone: explorer/design/executors.py); and make sure
    the process exits with our code, 130.  CPython marks a KeyboardInterrupt that leaves code run
    by ``exec`` of a string (dataclasses build their methods so, at import) as unhandled even when
    caught later, and then ends the process by SIGINT instead of its exit code; the mark is
    cleared when the next such ``exec`` starts (Python/pythonrun.c, run_eval_code_obj)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    exec("")


def _program_name() -> str:
    """How the user called us, for the usage line: the ``commexplorer`` console script (installed
    by pyproject.toml, equal in every other way) or ``python -m explorer``."""
    return "commexplorer" if Path(sys.argv[0]).stem == "commexplorer" else "python -m explorer"


BUILTIN_COMMANDS = ("run", "collective", "validate", "list")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the exit code (0 ok, 1 internal error, 2 invalid input or usage,
    130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        ap, extra = _parser(argv)
        if not argv:
            print(ap.format_help(), end="", file=sys.stderr)
            return 2
        return _run(ap, argv, extra)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except (ScenarioError, UsageError) as exc:
        _say(f"error: {exc}")
        return 2
    except OSError as exc:
        _say(f"error: {getattr(exc, 'filename', '') or ''}: {exc.strerror or exc}")
        return 2
    except SystemExit as exc:          # argparse's -h/--help
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt as exc:   # Ctrl-C: a design command says how far it got (design/progress.py)
        _after_interrupt()
        _say(f"interrupted: {exc}" if str(exc) else "interrupted")
        return 130
    except Exception as exc:           # noqa: BLE001 - the promise: one line, never a traceback
        _say(f"internal error ({type(exc).__name__}): {exc}")
        return 1


def _parser(argv: list[str]) -> tuple[argparse.ArgumentParser, dict]:
    """The parser of every command, and the modules of the commands beyond the built-in ones."""
    ap = _Parser(prog=_program_name(),
                 description="CommExplorer: simulate communication in distributed training.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="simulate one training iteration")
    r.add_argument("scenario")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field (YAML value)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace")
    r.add_argument("--csv", metavar="OUT.csv", help="write the timeline table")
    c = sub.add_parser("collective", help="nccl-tests-like table for one collective")
    c.add_argument("scenario")
    c.add_argument("--op", required=True, help="|".join(OPS))
    c.add_argument("--ranks", required=True, type=int)
    c.add_argument("--algorithm", default=None,
                   help="default: the scenario's communication.algorithm (auto: the library's choice)")
    c.add_argument("--sizes", default=DEFAULT_SIZES)
    c.add_argument("--gpus-per-thread", type=int, default=1, metavar="G",
                   help="GPUs one thread drives, as nccl-tests -g (default 1: one process per GPU)")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--json", action="store_true")
    v = sub.add_parser("validate", help="check a scenario and explain it")
    v.add_argument("scenario")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    sub.add_parser("list", help="list shipped scenarios with their titles")
    extra = {}
    # The other commands' modules import the design tools (search, sweeps: ~30 ms); a built-in
    # command never needs them, so they are imported only when another command (or help) is asked.
    if not argv or argv[0] not in BUILTIN_COMMANDS:
        for mod in commands():
            extra[mod.NAME] = mod
            mod.add_arguments(sub.add_parser(mod.NAME, help=mod.HELP))
    return ap, extra


def _run(ap: argparse.ArgumentParser, argv: list[str], extra: dict | None = None) -> int:
    """The command itself; errors propagate to :func:`main`, which turns each into one line."""
    args = ap.parse_args(argv)
    if extra and args.command in extra:
        code = extra[args.command].run(args)
        sys.stdout.flush()
        return code
    if args.command == "list":
        rows = scenario_list()
        width = max((len(name) for name, _ in rows), default=0)
        for name, title in rows:
            print(f"{name:<{width}}  {title}")
        sys.stdout.flush()             # a closed pipe shows up here, inside main's handler
        return 0
    sc = load_scenario(args.scenario, args.set)
    if args.command == "validate" and sc.inference is not None:       # a serving scenario (issue 37)
        from .serving.deploy import layouts
        pre, dec = layouts(sc)
        d = dec.parallelism
        pools = (f"tp {d.tp} x pp {d.pp} x {dec.dp} replicas, ep {d.ep}"
                 if pre is dec else f"prefill {pre.gpus} GPUs, decode {dec.gpus} GPUs")
        print(f"ok: {one_line(sc.name)}: serving on {sc.gpus:,} GPUs ({pools}); batch {sc.inference.batch}")
        sys.stdout.flush()
        return 0
    if args.command == "validate":
        p = sc.parallelism
        from .fold.replica_choice import describe  # deferred: only PipeDream's replicas need it
        # PipeDream's per-stage replicas replace dp x pp; ``auto`` as the partitioner resolves it.
        shape = f"replicas {describe(sc)} on pp {p.pp}" if p.stage_replicas else f"dp {sc.dp} x pp {p.pp}"
        phases = plan(sc)            # each phase's own scenario is checked too (explorer/run/phases.py)
        print(f"ok: {one_line(sc.name)}: {sc.gpus:,} GPUs = tp {p.tp} x cp {p.cp} x {shape}; "
              f"{sc.micro_batches} micro-batches of {sc.training.micro_batch} per pipeline; "
              f"ep {p.ep}; order {p.order}" + (f"; a run of {len(phases)} phases" if phases else "")
              + domain_words(sc))
        for field, why in dormant_settings(sc):
            print(f"note: {field} is not read: {why}")
        sys.stdout.flush()
        return 0
    if args.command == "collective":
        # The scenario's algorithm unless the flag names one (a hunt found --set
        # communication.algorithm=ring ignored here while library and protocol applied).
        algorithm = sc.communication.algorithm if args.algorithm is None else args.algorithm
        calls = collective_rows(sc, args.op, args.ranks, parse_sizes(args.sizes), algorithm,
                                args.gpus_per_thread)
        if args.json:
            try:
                print(json.dumps(calls, allow_nan=False))
            except ValueError:
                raise InternalError("the collective model produced a non-finite number") from None
        else:
            g = f", {args.gpus_per_thread} GPUs per thread" if args.gpus_per_thread > 1 else ""
            c = sc.cluster
            # The hardware priced, not only the scenario's name: --set may have replaced its GPU or
            # cluster (a hunt read "one 8-GPU node" over 1,440 GB200s).
            where = (f"{gpu_summary(sc)} ({c.nodes:,} x {c.gpus_per_node} GPUs), {c.scale_up.kind} "
                     f"{c.scale_up.bandwidth_GBps:g} GB/s, {c.scale_out.nics_per_node} x "
                     f"{c.scale_out.nic_Gbps:g} Gb/s per node")
            edited = ", with --set" if args.set else ""
            print(f"# {args.op} on {args.ranks} ranks of {where}{g} (scenario {one_line(sc.name)}{edited}; "
                  "GB = 1e9 bytes)")
            print(f"{'size_bytes':>14} {'time_us':>12} {'algbw_GBps':>11} {'busbw_GBps':>11}  "
                  "algorithm/protocol (limit)")
            for row in calls:
                fell = f" ({row['requested']} cannot run here)" if row["requested"] else ""
                ran = f"{row['algorithm']}/{row['protocol']} ({row['tier']}){fell}"
                print(f"{row['size_bytes']:>14} {row['time_s'] * 1e6:>12.2f} {row['algbw_GBps']:>11.2f} "
                      f"{row['busbw_GBps']:>11.2f}  {ran}")
        sys.stdout.flush()
        return 0
    from .simulate import simulate  # deferred: validate/collective need no engine
    res = simulate(sc)
    text = result_json(res)         # checks every figure is finite, for the summary too
    if args.trace or args.csv:
        tl = res.timeline
        if args.trace:
            Path(args.trace).write_text(tl.to_trace_json(), encoding="utf-8")
        if args.csv:
            Path(args.csv).write_text(tl.to_csv(), encoding="utf-8")
    notes = "".join(f"\n  note: {f} is not read: {w}" for f, w in dormant_settings(sc))
    print(text if args.json else summary_text(res) + notes)
    sys.stdout.flush()
    return 0
