"""training.framework moves iteration time the way its mechanisms demand (explorer/config/frameworks.py).

The baseline is a Llama 3 8B run on 4 H100 nodes with tp 2, pp 2 and dp 8 — element-wise kernels,
pipeline transfers and a data-parallel reduction all present — so each framework's mechanisms
have something to act on.
"""
from __future__ import annotations

from functools import cache

import pytest

from explorer.scenario import from_dict
from explorer.simulate import Result, simulate

COVERED = {"training.framework": "test_unfused_kernels_blocking_p2p_and_late_reduction_are_slower"}


@cache
def _run(framework: str, comm_sms: int | None = None) -> Result:
    return simulate(from_dict({
        # one attention kernel for all (the frameworks' default kernels: tests/test_attention_kernels.py)
        "model": {"preset": "llama3-8b"},
        "training": {"global_batch": 64, "framework": framework, "attention_kernel": "flash2"},
        "hardware": {"gpu": "h100-sxm"}, "cluster": {"gpus_per_node": 8, "nodes": 4},
        "parallelism": {"tp": 2, "pp": 2, "zero": 1}, "communication": {"comm_sms": comm_sms}}))


def test_unfused_kernels_blocking_p2p_and_late_reduction_are_slower():
    mega, md, ds, fsdp = (_run(f) for f in ("megatron", "megatron-deepspeed", "deepspeed", "fsdp"))
    # Megatron-DeepSpeed keeps Megatron's fused kernels (same compute) but blocks on pipeline
    # sends and reduces gradients after the backward: strictly slower, and its pipeline transfers
    # are charged to the pp category of the compute stream.
    assert md.breakdown_s["compute"] == pytest.approx(mega.breakdown_s["compute"], rel=1e-12)
    assert md.iteration_time_s > mega.iteration_time_s
    assert md.breakdown_s["pp"] > mega.breakdown_s["pp"]
    # Plain DeepSpeed adds the eager element-wise kernels on top: slower still.
    assert ds.breakdown_s["compute"] > md.breakdown_s["compute"]
    assert ds.iteration_time_s > md.iteration_time_s
    # FSDP (eager kernels, non-blocking point-to-point, overlapped reduction) sits between when its
    # overlapped reduction is free: slower than Megatron, faster than DeepSpeed's blocking pipeline.
    free = _run("fsdp", 0)
    assert mega.iteration_time_s < free.iteration_time_s < ds.iteration_time_s
    # By default its overlapped buckets are NCCL kernels holding 16 SMs (a group across nodes,
    # explorer/config/nccl_channels.py), which slow the backward they run under.
    assert fsdp.scenario.communication.comm_sms == 16
    assert fsdp.breakdown_s["compute"] > free.breakdown_s["compute"]
    assert fsdp.iteration_time_s > free.iteration_time_s


def test_a_faster_pcie_scale_up_never_takes_sms_from_compute():
    """A hunt: resnet50-cloud-dp (FSDP's overlapped buckets, GPUs on PCIe) with 8 NICs per node ran
    33.6 ms at a 32 GB/s scale-up and 34.6 ms at 450: NCCL's channel count was read as NVLinks off
    the PCIe rate (2 -> 16 SMs held beside compute) while the NIC-bound reduction got no faster.  A
    PCIe box counts no NVLink: NCCL's minimum 2 channels, at any rate."""
    from explorer.scenario import load

    from conftest import ROOT

    def run(bw: float) -> Result:
        return simulate(load(ROOT / "scenarios" / "resnet50-cloud-dp.yaml", {
            "cluster.scale_out.nics_per_node": 8, "communication.compression.kind": "fp16",
            "cluster.scale_up.bandwidth_GBps": bw}))

    slow, fast = run(32.0), run(450.0)
    assert slow.scenario.communication.comm_sms == fast.scenario.communication.comm_sms == 2
    assert fast.iteration_time_s <= slow.iteration_time_s
