"""The report's headline cards: the numbers the app's metric row shows (explorer/ui/views/metrics.py),
read from the run JSON, each with the exact value it shows (a test reads them back and compares them
with ``run --json``'s)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..numbers import figure
from ..run.report import percent
from ..scenario import Scenario
from ..workloads.registry import nouns


@dataclass(frozen=True)
class Card:
    """One card: its label, the value as shown, the run-JSON key it reads (dotted for a nested key)
    and that key's exact value (None: the run has none), and a second line (capacity, error band) or ""."""

    label: str
    text: str
    key: str
    value: float | None
    note: str = ""


def fmt_time(s: float) -> str:
    """Seconds as the app's cards write them (explorer/ui/views/metrics.py)."""
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


# The serving cards, in the app's order (explorer/ui/views/metrics.py reads these labels).
SERVING_CARDS = ("TTFT", "TPOT", "Output tokens/s per GPU", "Requests/s", "KV cache per GPU", "Max batch")


def tpot_text(s: float) -> str:
    """A TPOT for its card: two decimals of a millisecond below a second (a TPOT of a few ms moves in
    its hundredths), else in seconds (a hunt found "9627002.91 ms" cut at the card's edge)."""
    return f"{s * 1e3:.2f} ms" if s < 1 else f"{s:,.3g} s" if s < 1000 else f"{s:,.0f} s"


def serving_cards(j: Mapping[str, Any]) -> list[Card]:
    """The cards of a serving run (``run --json``'s ``inference``, explorer/serving/result.py), as
    the app shows them: TTFT, TPOT, output tokens/s per GPU, requests/s, KV cache, largest batch."""
    f = j["inference"]
    loaded = "arrival_rate" in f
    return [
        Card(SERVING_CARDS[0], fmt_time(f["ttft_s"]), "inference.ttft_s", f["ttft_s"],
             f"wait {fmt_time(f['queue_wait_s'])}" if loaded else "the prefill"),
        Card(SERVING_CARDS[1], tpot_text(f["tpot_s"]), "inference.tpot_s", f["tpot_s"],
             f"step {fmt_time(f['decode_step_s'])}"),
        Card(SERVING_CARDS[2], f"{f['output_tokens_per_s_per_gpu']:,.0f}",
             "inference.output_tokens_per_s_per_gpu", f["output_tokens_per_s_per_gpu"]),
        Card(SERVING_CARDS[3], f"{f['requests_per_s']:,.2f}", "inference.requests_per_s", f["requests_per_s"],
             f"load {f['load']:.0%}" if loaded else f"bound by {f['bound']}"),
        Card(SERVING_CARDS[4], f"{f['kv_cache_GB']:.1f} GB", "inference.kv_cache_GB", f["kv_cache_GB"],
             "the batch at full context, one decode GPU"),
        Card(SERVING_CARDS[5], f"{f['max_batch']:,}", "inference.max_batch", float(f["max_batch"]),
             f"batch {f['batch']:,}")]


def cards(j: Mapping[str, Any], sc: Scenario) -> list[Card]:
    """The cards of a run JSON ``j`` (``run --json``'s object) of scenario ``sc``: a serving run's
    (:func:`serving_cards`), else iteration time (and the time per step of a synchronisation
    window), throughput in the family's units, MFU, TFLOP/s per GPU, bubble, memory per GPU against
    capacity; and the expected-error band."""
    out: list[Card] = serving_cards(j) if j.get("inference") else []
    err = j.get("expected_error")
    band = f"±{err * 100:.0f} % expected error" if err is not None else "no published run like this one"
    if out:
        return out + [_error_card(err)]
    out.append(Card("Iteration time", fmt_time(j["iteration_time_s"]), "iteration_time_s",
                    j["iteration_time_s"], band))
    if j.get("sync"):
        # Replicas that train apart: the step's cost amortised over the window (variants/lowcomm).
        step = j["time_per_step_s"]
        out.append(Card("Time per step", fmt_time(step), "time_per_step_s", step,
                        "amortised over the synchronisation window"))
    # What the family's throughput counts: tokens for a transformer, images or clips for a ResNet.
    rate = j["tokens_per_s"]
    out.append(Card(f"{nouns(sc.model).per_second.capitalize()}/s", figure(rate), "tokens_per_s", rate))
    fp8 = j.get("mfu_fp8_peak")
    out.append(Card("MFU", f"{j['mfu']:.1%}", "mfu", j["mfu"], "model FLOPs / (time × GPUs × bf16 peak)"
                    + ("" if fp8 is None else f"; {fp8:.1%} of the FP8 peak")))
    tflops = j["tflops_per_gpu"]
    out.append(Card("TFLOP/s per GPU", figure(tflops, small=1.0), "tflops_per_gpu", tflops,
                    "hardware FLOPs, recompute included"))
    busiest = j.get("bubble_fraction_busiest")
    out.append(Card("Bubble", f"{j['bubble_fraction']:.1%}", "bubble_fraction", j["bubble_fraction"],
                    f"busiest stage {busiest:.1%}" if busiest is not None else "pipeline idle share"))
    mem, cap = j["memory_GB"]["total"], j["memory_capacity_GB"]
    out.append(Card("Memory per GPU", f"{mem:.1f} GB", "memory_GB.total", mem,
                    f"over {cap:.1f} GB" if mem > cap else f"of {cap:.1f} GB"))
    return out + [_error_card(err)]


def _error_card(err: float | None) -> Card:
    """Always shown: with no published run like this one the card says so (the band's label)."""
    shown = f"±{err * 100:.0f} %" if err is not None else "n/a"
    says = "validation error of similar published runs" if err is not None else "no similar published run"
    return Card("Expected error", shown, "expected_error", err, says)


def run_cards(t: Mapping[str, Any]) -> list[Card]:
    """The whole run's cards of ``run --json``'s ``run_total`` ``t``, as the app's Run tab shows them
    (explorer/ui/views/run.py): days, GPU-hours, goodput, energy, and the cost when priced."""
    days, hours, e, tok = t["days"], t["gpu_hours"], t["energy_MWh"], t["tokens"]
    phases = len(t["phases"])
    tokens = f"{tok / 1e12:,.2f}T" if tok >= 1e12 else f"{tok / 1e9:,.2f}B"
    # The CLI's digits (explorer/run/report.run_lines): a run of hours is not "0.0" days.
    out = [Card("Days", f"{days:,.{1 if days >= 10 else 3}f}", "run_total.days", days,
                f"{tokens} tokens in {phases} phase{'' if phases == 1 else 's'}"),
           Card("GPU-hours", f"{hours / 1e6:,.2f}M" if hours >= 1e5 else f"{hours:,.0f}",
                "run_total.gpu_hours", hours),
           Card("Goodput", percent(t["goodput"]), "run_total.goodput", t["goodput"],
                "training time / wall-clock time (failures, checkpoints, restarts)"),
           Card("Energy", "unknown" if e is None else f"{e:,.0f} MWh" if e >= 10 else f"{e:,.3f} MWh",
                "run_total.energy_MWh", e)]
    if "price" in t:
        out.append(Card("Cost", f"{t['price']:,.0f}", "run_total.price", t["price"]))
    return out
