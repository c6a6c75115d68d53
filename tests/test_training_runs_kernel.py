"""The attention kernel of each published training run (explorer/data/reference/training_runs.csv,
column ``attention_kernel``, read by explorer/fidelity/training.py): MosaicML's llm-foundry MPT
benchmarks ran ``attn_impl: triton`` (scripts/train/benchmarking/submit_benchmarks.py at commit
061f2c7 defaults to it, sweep.sh never overrides it), the Triton FlashAttention kernel that
explorer/physics/attention.py prices from the FlashAttention-2 paper's A100 benchmark.  The MPT rows
are validation: the kernel's rates are fitted on that kernel benchmark, never on these rows."""
from __future__ import annotations

from functools import cache

from explorer.fidelity.calibration import read_csv
from explorer.fidelity.report import ReferenceRow
from explorer.fidelity.training import sourced_rows, training_raw, training_scenario

MPT = "MPT llm-foundry"


@cache
def _mpt() -> tuple[ReferenceRow, ...]:
    return tuple(r for r in sourced_rows() if r.group.startswith(MPT))


def test_rows_say_which_kernel_they_ran():
    rows = read_csv("training_runs.csv")
    mpt = [r for r in rows if r["group"].startswith(MPT)]
    assert len(mpt) == 19
    assert {r["attention_kernel"] for r in mpt} == {"triton"}
    assert {r["attention_kernel"] for r in rows if not r["group"].startswith(MPT)} == {"auto"}
    assert training_scenario(mpt[0]).training.attention_kernel == "triton"
    # a blank cell is the framework's default
    assert training_raw({**mpt[0], "attention_kernel": ""})["training"]["attention_kernel"] == "auto"


def test_mpt_rows_within_the_issue_targets_on_their_kernel():
    """Issue 34's training target (mean |error| <= 12 %, max <= 30 %) on the 19 MPT rows.  Priced as
    FlashAttention-2 (before the Triton kernel existed here) they were 24.6 % mean, 60.6 % max, worst
    at 32K-65K context (+37 % to +61 %): the Triton kernel's backward is 2.2-2.7x slower than FA2's."""
    rows = _mpt()
    errors = [abs(r.error) for r in rows]
    assert all(r.role == "validation" for r in rows)
    assert sum(errors) / len(errors) <= 0.12
    assert max(errors) <= 0.30
    long_context = [r for r in rows if int(r.label.split("seq ")[1].split()[0]) >= 32768]
    assert len(long_context) == 4
    worst = max(long_context, key=lambda r: abs(r.error))
    assert abs(worst.error) <= 0.25, f"{worst.label} {worst.error:+.1%}"
