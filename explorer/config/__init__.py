"""Scenario configuration: what a training setup is, how it is written, checked and changed.

==============  ================================================================================
module          holds
==============  ================================================================================
sections        the frozen dataclasses (Scenario, Model, ..., Communication), bounds in metadata
schema          strict mapping -> dataclass conversion; ScenarioError and one-line messages
inputs          the bounded YAML/JSON parser every text input goes through
yaml_core       plain numbers as YAML 1.2 reads them (no base-60 1:30, no octal 030)
presets         named GPUs and models (explorer/data/*.yaml)
overrides       dotted keys: SETTABLE, set_dotted, apply_overrides, parse_assignment(s)
rules           one function per cross-field rule; RULES, validate
budget          the work budget: simulation size known before simulating
loading         from_dict, load, load_raw, parse_text, to_dict, to_yaml, to_json; derived defaults
shipped         the shipped scenarios (scenarios/ in the repository, explorer/scenarios installed)
docs            the README's field table, generated from the sections
==============  ================================================================================

Most code imports from :mod:`explorer.scenario`, the facade that re-exports this package's API.
"""
from .loading import (
    FALLBACK_SCALE_UP_GBPS,
    fill_defaults,
    from_dict,
    load,
    load_raw,
    parse_text,
    resolve_presets,
    to_dict,
    to_json,
    to_yaml,
)
from .model_parts import MoE
from .model_section import Model
from .overrides import (
    SETTABLE,
    SETTABLE_ROOTS,
    apply_overrides,
    is_phase_key,
    is_settable,
    parse_assignment,
    parse_assignments,
    set_dotted,
)
from .presets import gpu_presets, model_presets
from .rules import RULES, validate
from .schema import ScenarioError
from .sections import (
    GPU,
    MAX_GPUS,
    ORDER_DIMS,
    SCHEDULES,
    Cluster,
    Communication,
    Hardware,
    Parallelism,
    ScaleAcross,
    ScaleOut,
    ScaleUp,
    Scenario,
    Training,
)
from .shipped import SCENARIO_DIR, resolve_scenario_path, shipped_scenarios

__all__ = [
    "FALLBACK_SCALE_UP_GBPS", "GPU", "MAX_GPUS", "ORDER_DIMS", "RULES", "SCENARIO_DIR", "SCHEDULES",
    "SETTABLE", "SETTABLE_ROOTS", "Cluster", "Communication", "Hardware", "Model", "MoE", "Parallelism",
    "ScaleAcross", "ScaleOut", "ScaleUp", "Scenario", "ScenarioError", "Training", "apply_overrides",
    "fill_defaults", "from_dict", "gpu_presets", "is_phase_key", "is_settable", "load", "load_raw",
    "model_presets",
    "parse_assignment", "parse_assignments", "parse_text", "resolve_presets", "resolve_scenario_path",
    "set_dotted", "shipped_scenarios", "to_dict", "to_json", "to_yaml", "validate",
]
