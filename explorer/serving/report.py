"""The readable summary ``run`` prints for a serving scenario (the --json object's ``inference``)."""
from __future__ import annotations

from ..config import Scenario
from ..result.record import Result


def serving_text(res: Result, name: str) -> str:
    """TTFT, TPOT, tokens/s, requests/s, KV cache and the bottleneck sentence of ``res``; ``name`` is
    the scenario's title, already escaped for one line."""
    f = res.inference
    assert f is not None
    sc = res.scenario
    inf = sc.inference
    assert inf is not None
    lines = [
        name, f"  serving on {f['gpus']:,} × {sc.hardware.gpu.name}: {serving_layout(sc)}",
        f"  requests of {_lengths(f, inf)}, "
        + (f"arriving at {f['arrival_rate']:,.4g}/s: {f['batch']:,} decoding per replica (at most "
           f"{inf.batch:,}), load {f['load']:.0%}" if "arrival_rate" in f
           else f"batch {inf.batch} per replica")
        + f"; weights {inf.weight_dtype}, activations {inf.activation_dtype}, KV {inf.kv_dtype}", "",
        f"  TTFT                 {f['ttft_s'] * 1e3:,.1f} ms"
        + (f"  (of which {f['queue_wait_s'] * 1e3:,.1f} ms waiting for a prefill)" if "arrival_rate" in f
           else ""),
        f"  TPOT                 {f['tpot_s'] * 1e3:,.2f} ms  "
        f"(decode step alone {f['decode_step_s'] * 1e3:,.2f} ms)",
        f"  output tokens/s/GPU  {f['output_tokens_per_s_per_gpu']:,.0f}",
        f"  output tokens/s      {res.tokens_per_s:,.0f}  "
        f"({f['output_tokens_per_s_per_replica']:,.0f} per replica)",
        f"  requests/s           {f['requests_per_s']:,.2f}  (bound by {f['bound']})",
        f"  KV cache per GPU     {f['kv_cache_GB']:,.2f} GB of the batch; max batch {f['max_batch']:,}; "
        f"weights {f['weights_GB']:,.1f} GB",
    ]
    if f["kv_transfer_bytes"]:
        lines.append(f"  KV transfer          {f['kv_transfer_bytes'] / 1e6:,.1f} MB per request, "
                     f"{f['kv_transfer_s'] * 1e3:,.2f} ms per prefill GPU's share")
    curve = ", ".join(f"{p['batch']}: {p['tpot_s'] * 1e3:.1f} ms {p['output_tokens_per_s_per_gpu']:,.0f}/s"
                      for p in f["batch_curve"])
    lines += ["", f"  bottleneck: {f['bottleneck']}",
              f"  batch curve (batch: TPOT, output tokens/s per GPU): {curve}; "
              f"knee at batch {f['knee_batch']}"
              + (" (no batch fits in memory: see the warning)" if f["max_batch"] == 0 else "")]
    said = targets_text(f)
    if said:
        lines.append("  " + said)
    lines += [f"  warning: {w}" for w in res.warnings]
    return "\n".join(lines)


def serving_layout(sc: Scenario) -> str:
    """The serving scenario ``sc``'s layout in serving terms (run's summary, diff): each replica's
    tp, pp and ep and the replicas, co-located, or each pool's of a disaggregated deployment."""
    inf = sc.inference
    assert inf is not None
    p = sc.parallelism
    if inf.disaggregated is None:
        return (f"tp {p.tp} · pp {p.pp} · ep {p.ep} · {sc.dp} replica{'s' if sc.dp != 1 else ''}, "
                "prefill and decode co-located")
    d = inf.disaggregated
    pools = (("prefill", d.prefill), ("decode", d.decode))
    return ", ".join(f"{name} {pool.gpus} GPUs (tp {pool.tp} · pp {pool.pp} · ep {pool.ep} · "
                     f"{pool.replicas} replicas)" for name, pool in pools)


def targets_text(f: dict) -> str:
    """The latency targets and the requests/s that meet them at a batch that fits in memory, in one
    line ('' without a target)."""
    named = []
    if "tpot_target_s" in f:
        named.append(f"TPOT {f['tpot_target_s'] * 1e3:,.4g} ms")
    if "ttft_target_s" in f:
        named.append(f"mean TTFT {f['ttft_target_s'] * 1e3:,.4g} ms")
    if not named:
        return ""
    head = "target " + " and ".join(named) + ": "
    # Only batches that fit are answers (serving/result.py): a miss says so, with the memory's limit.
    if f["max_batch"] == 0:
        return head + "no batch fits in memory (0 requests/s)"
    if f["target_batch"] is None:
        return head + f"missed at every batch that fits in memory (1 to {f['max_batch']:,}; 0 requests/s)"
    return head + f"{f['requests_per_s_at_target']:,.2f} requests/s at batch {f['target_batch']:,}"


def _lengths(f: dict, inf) -> str:
    """The requests' lengths: one kind's, or a mix's kinds and means."""
    if "mix" not in f:
        return f"{inf.prompt_tokens:,} prompt + {inf.output_tokens:,} output tokens"
    kinds = "; ".join(f"{k['share']:.0%} {k['prompt_tokens']:,} + {k['output_tokens']:,}" for k in f["mix"])
    return (f"a mix ({kinds}; means {f['mean_prompt_tokens']:,.0f} prompt + "
            f"{f['mean_output_tokens']:,.0f} output tokens)")
