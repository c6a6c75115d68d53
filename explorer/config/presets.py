"""Named GPUs and models (explorer/data/gpus.yaml, models.yaml) that a scenario may start from.

``hardware.gpu: h100-sxm`` and ``model.preset: llama3-8b`` are replaced, at load, by the table's
mapping; fields the scenario gives itself win over the preset's (see
:func:`explorer.config.loading.resolve_presets`).
"""
from __future__ import annotations

import copy
from functools import cache
from importlib import resources
from typing import Any

import yaml

from .frozen import evolve
from .schema import ScenarioError, excerpt
from .sections import GPU, ScaleOut

DEFAULT_GPU = "h100-sxm"       # the GPU of a scenario without a hardware section


@cache
def _presets(kind: str) -> dict[str, dict[str, Any]]:
    """The table ``explorer/data/<kind>.yaml``, read once (through importlib.resources, so it is
    found in an installed package as in the repository)."""
    text = resources.files("explorer").joinpath("data", f"{kind}.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def gpu_presets() -> dict[str, dict[str, Any]]:
    """GPU name -> its fields (peak_tflops, memory_GB, hbm_GBps, scale_up_GBps, ...)."""
    return _presets("gpus")


def model_presets() -> dict[str, dict[str, Any]]:
    """Model name -> its fields (layers, hidden, heads, ...)."""
    return _presets("models")


def fabric_presets() -> dict[str, dict[str, Any]]:
    """Scale-out link technology -> {name, nic_Gbps, latency_us, efficiency} (fabrics.yaml)."""
    return _presets("fabrics")


def datasheet_name(gpu: GPU) -> str:
    """The name physics matches a GPU's generation on: its origin preset's (a renamed or changed
    preset keeps its architecture: ``hardware.gpu.based_on``), else the GPU's own display name."""
    origin = gpu.origin
    if origin is not None and origin in gpu_presets():
        return str(gpu_presets()[origin].get("name") or gpu.name)
    return gpu.name


def preset(kind: str, name: Any, path: str) -> dict[str, Any]:
    """A copy of preset ``name`` of table ``kind`` ("gpus" or "models"); a one-line
    ScenarioError on ``path`` listing the valid names when there is none."""
    table = _presets(kind)
    if not isinstance(name, str) or name not in table:
        raise ScenarioError(path, f"unknown preset {excerpt(name)} (valid: {', '.join(table)})")
    return copy.deepcopy(table[name])


def resolved_scale_out(out: ScaleOut) -> ScaleOut:
    """``out`` with the fabric preset's NIC speed, latency and efficiency where it leaves them
    unset (a loaded scenario has them filled; sections built directly, as in tests, may not)."""
    if out.nic_Gbps is not None and out.latency_us is not None and out.efficiency is not None:
        return out
    fab = fabric_presets()[out.fabric]
    return evolve(out, nic_Gbps=out.nic_Gbps if out.nic_Gbps is not None else float(fab["nic_Gbps"]),
                  latency_us=out.latency_us if out.latency_us is not None else float(fab["latency_us"]),
                  efficiency=out.efficiency if out.efficiency is not None else float(fab["efficiency"]))
