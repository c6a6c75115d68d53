"""A calibrated scenario written as a YAML file that ``run``, the app and share links load like any
other: the base scenario's own file with the fitted constants set (``calibrate-fabric --out``,
``import-trace --fit --out``), and a first comment line saying what was fitted to what."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..config.loading import apply_overrides, load_raw


def calibrated_yaml(base: Path, overrides: Mapping[str, Any], source: str, header: str) -> str:
    """The YAML text of ``base`` with ``overrides`` (dotted keys) applied, renamed "..., calibrated
    to SOURCE", under the one-line comment ``header``."""
    raw = apply_overrides(load_raw(base), dict(overrides))
    raw["name"] = f"{raw.get('name', base.stem)}, calibrated to {Path(source).name}"
    return f"# {header}\n" + yaml.safe_dump(raw, sort_keys=False)


def write_calibrated(out: Path, base: Path, overrides: Mapping[str, Any], source: str, header: str) -> None:
    out.write_text(calibrated_yaml(base, overrides, source, header), encoding="utf-8")
