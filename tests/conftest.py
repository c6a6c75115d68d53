"""Shared fixtures: the repository root and small scenario builders.

The repository root and tests/ are importable through pyproject.toml's pytest ``pythonpath``."""
from __future__ import annotations

import copy
import signal
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _sigint_kept():
    """Each test leaves SIGINT's handler as it found it.  A command's Ctrl-C path run in-process
    (cli._after_interrupt ignores a second Ctrl-C for good) left a pytest worker ignoring SIGINT,
    and every command it started afterwards inherited SIG_IGN: the full suite's Ctrl-C tests
    (tests/test_interrupt.py) then saw commands run to the end."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if main else None
    yield
    if main and before is not None and signal.getsignal(signal.SIGINT) is not before:
        signal.signal(signal.SIGINT, before)


# Tests of tens of seconds each start first: pytest-xdist hands tests out in collection order, and
# one of these collected last (mypy's is, alphabetically) leaves the other worker idle at the end.
LONG_FIRST = ("tests/test_types.py::test_mypy_finds_no_error_in_explorer",
              "tests/test_app_sweep.py::test_every_sidebar_control_through_its_range",
              "tests/test_app_tours.py::test_every_tour_step_fits_a_projector_in_chromium",
              "tests/test_verdicts.py::test_search_and_advise_rank_replicas")


def pytest_collection_modifyitems(config, items):
    """Move the :data:`LONG_FIRST` tests to the front, the order otherwise kept."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))


SCENARIO_FILES = sorted((ROOT / "scenarios").glob("*.yaml"))

# An "ideal" GPU: HBM so fast that element-wise work and the optimizer vanish, so schedule tests
# see pure GEMM time.
# One SM at the whole peak: GEMMs pay no wave quantisation (kernels.py), so the near-empty output
# layer of pipeline_raw costs next to nothing.
IDEAL_GPU = {"name": "ideal", "peak_tflops": 1000, "memory_GB": 80, "hbm_GBps": 1e7, "sms": 1}


def pipeline_raw(p: int, m: int, schedule: str = "1f1b", v: int = 1, dp: int = 1, **extra) -> dict:
    """A pipeline-only scenario with uniform layers, no edge work and negligible communication."""
    raw = {"model": {"layers": 2 * p * v, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 1024},
           "training": {"global_batch": m * dp, "micro_batch": 1},
           "hardware": {"gpu": copy.deepcopy(IDEAL_GPU)},
           "cluster": {"gpus_per_node": p * dp, "nodes": 1,
                       "scale_up": {"bandwidth_GBps": 1e6, "latency_us": 0}},
           "parallelism": {"tp": 1, "pp": p, "dp": dp, "schedule": schedule, "vpp": v, "zero": 0}}
    for key, value in extra.items():
        section, _, field = key.partition("__")
        raw.setdefault(section, {})[field] = value
    return raw
