"""Rules of the run plan (``training.phases``, ``training.total_tokens``): each phase has exactly
one length, unique names, and overrides whose keys are scenario fields a ``--set`` could set (so a
typo fails at load, naming ``training.phases[i].overrides.<key>``).  The values are checked when a
phase's scenario is built (explorer/run/phases.py), which relabels an error the same way."""
from __future__ import annotations

from .overrides import is_settable
from .schema import ScenarioError, unknown_key_error
from .sections import Scenario

# Keys a phase may not override: the run plan itself (a phase of phases has no meaning) and the
# scenario's title.
RUN_PLAN_KEYS = frozenset({"training.phases", "training.total_tokens", "name", "description"})


def rule_phase_length(sc: Scenario) -> None:
    """Every phase gives tokens or steps, not both; names are unique; not phases and total_tokens."""
    t = sc.training
    if t.phases and t.total_tokens is not None:
        raise ScenarioError("training.total_tokens", "is given with training.phases; give one: total_tokens "
                                                      "for a single-phase run, phases for several")
    seen: set[str] = set()
    for i, ph in enumerate(t.phases):
        where = f"training.phases[{i}]"
        if (ph.tokens is None) == (ph.steps is None):
            raise ScenarioError(where, f"phase {ph.name!r} must give exactly one of tokens or steps")
        if ph.name in seen:
            raise ScenarioError(f"{where}.name", f"{ph.name!r} names two phases; give each its own name")
        seen.add(ph.name)


def rule_phase_overrides(sc: Scenario) -> None:
    """Each override key names a settable scenario field other than the run plan's own."""
    for i, ph in enumerate(sc.training.phases):
        for key, _ in ph.overrides:
            where = f"training.phases[{i}].overrides"
            if key in RUN_PLAN_KEYS or key.startswith("reliability."):
                raise ScenarioError(f"{where}.{key}", "cannot change within a run; a phase overrides "
                                                      "the model, training, hardware, cluster or parallelism")
            if not is_settable(key):
                top = sorted({k.split(".")[0] for k in ("model.", "training.", "hardware.", "cluster.",
                                                        "parallelism.", "communication.")})
                if "." in key and key.split(".")[0] in top:
                    raise ScenarioError(f"{where}.{key}", "unknown key (not a scenario field; the keys are "
                                                          "those of --set, e.g. training.global_batch)")
                raise unknown_key_error(key, top, where)


RUN_RULES = (rule_phase_length, rule_phase_overrides)
