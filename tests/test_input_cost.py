"""The cost of parsing is bounded, not only the size (issue 32): a 198 KB upload of 99,000 list
values took 7.5 s of CPU in the app (the server blocked meanwhile), a 520 KB file 18 s before it
was rejected.  The loader now counts tokens, values and items of one list or mapping while it
parses (explorer/config/inputs.py) and stops at the first one over its bound.

Times are CPU seconds of this process (time.process_time), bounded generously (2 s) against a
shared machine; measured on the 2-core CI box: ~0.1 s for each document below, 0.25 s at most."""
from __future__ import annotations

import time

import pytest

from explorer import cli
from explorer.config.inputs import MAX_BYTES, MAX_ITEMS, MAX_NODES, MAX_TOKENS, parse_document
from explorer.scenario import ScenarioError, from_dict, parse_text

BOUND_S = 2.0
HEAD = "model: {preset: llama3-8b}\ntraining: {global_batch: 8}\n"


def cost(text: str) -> tuple[float, str]:
    """CPU seconds the upload path (parse_text, then from_dict) takes on ``text``, and its error."""
    start = time.process_time()
    try:
        from_dict(parse_text(text, "upload.yaml"))
        message = ""
    except ScenarioError as exc:
        message = str(exc)
    return time.process_time() - start, message


def flow_list(n: int) -> str:
    return HEAD + "parallelism: {stage_layers: [" + ",".join(["1"] * n) + "]}\n"


def block_list(n: int) -> str:
    return HEAD + "parallelism:\n  stage_layers:\n" + "  - 1\n" * n


@pytest.mark.parametrize("text", [flow_list(99_000), block_list(33_000)], ids=["flow", "block"])
def test_the_198_kb_upload_of_99k_values_is_rejected_fast(text):
    """Before: parsed whole (2-7.5 s), then refused by the rules."""
    assert 190_000 < len(text) < 200_000      # the app's upload limit is 200,000 bytes
    seconds, message = cost(text)
    assert message.startswith(f"upload.yaml: parallelism.stage_layers: a list of more than {MAX_ITEMS:,} "
                              "items; no field takes one that long (stage_layers, the longest, has pp*vpp)")
    assert seconds < BOUND_S, seconds


def test_the_520_kb_file_is_rejected_fast(capsys, tmp_path):
    """Before: 18 s (260,000 values parsed, then the node limit)."""
    path = tmp_path / "big.yaml"
    path.write_text(flow_list(260_000), encoding="utf-8")
    assert path.stat().st_size > 520_000
    start = time.process_time()
    assert cli.main(["validate", str(path)]) == 2
    assert time.process_time() - start < BOUND_S
    err = capsys.readouterr().err
    assert err == f"error: {path}: is larger than the {MAX_BYTES:,} bytes accepted\n"


# Documents just under the byte limit, each as costly as its shape can be: the bounds on tokens,
# values and items stop every one in well under a second.
WORST = {
    "flow list": ("x: [" + ",".join(["1"] * 130_000) + "]", f"x: a list of more than {MAX_ITEMS:,} items"),
    "two long lists": (HEAD + "".join(f"x{j}: [" + ",".join(["1"] * MAX_ITEMS) + "]\n" for j in range(2)),
                       "x0: unknown key"),
    "many small mappings": (HEAD + "x:\n" + "- {a: 1, b: 2}\n" * 16_000,
                            f"more than {MAX_NODES:,} values in one document"),
    "many keys": ("x: {" + ",".join(f"k{i}: 1" for i in range(20_000)) + "}",
                  f"x: a mapping of more than {MAX_ITEMS:,} keys"),
    "document-end markers": ("name: x\n" + "...\n" * 60_000,
                             f"more than {MAX_TOKENS:,} YAML tokens in one document"),
    "empty collections": ("x: [" + ",".join(["[]", "{}"] * 40_000) + "]",
                          f"x: a list of more than {MAX_ITEMS:,} items"),
    "comments": ("name: x\n" + ("#" + "c" * 78 + "\n") * 3_000, "model: is required"),
}


@pytest.mark.parametrize("name", list(WORST))
def test_costly_documents_within_the_byte_limit_stop_fast(name):
    text, fragment = WORST[name]
    text = text[:MAX_BYTES - 200] if len(text) > MAX_BYTES else text
    seconds, message = cost(text)
    assert fragment in message and "\n" not in message, message
    assert seconds < BOUND_S, seconds


def test_the_longest_list_a_scenario_needs_still_parses():
    """stage_layers of 64 stages x 64 chunks (pp*vpp = 4,096) is read; one item more is not."""
    raw = parse_document("parallelism: {stage_layers: [" + ",".join(["1"] * MAX_ITEMS) + "]}")
    assert len(raw["parallelism"]["stage_layers"]) == MAX_ITEMS == 64 * 64
    with pytest.raises(ScenarioError, match="more than 4,096 items"):
        parse_document("parallelism: {stage_layers: [" + ",".join(["1"] * (MAX_ITEMS + 1)) + "]}")
