"""Every sidebar control of every shipped preset, driven through the app under streamlit.testing.

The controls are discovered from the rendered sidebar (number inputs, select boxes, toggles, each
keyed by its dotted scenario field), never from a hard-coded list, so a control added tomorrow is
swept too.  Each control is driven through every option (select boxes, toggles) or through its
minimum, its maximum and a typical value (number inputs, bounds read from the widget), then set
back to the preset's value.  After every change the page must show no exception, no traceback and
no internal error, and either the metrics or a one-line reason; after setting a control back the
iteration time must be the preset's again.  Every model preset and every GPU preset is also
chosen on every shipped scenario.

AppTest renders only the open tab: the control sweep runs on the Timeline view (the default), and
each other view is opened on every preset with a seeded sample of control changes.

Cost.  Every value of every control on every preset is about 4,600 app runs (25 CPU-minutes on
this 2-core machine, 2026-12-01), most of them repeating a code path another preset already took.
The default sweep therefore covers the grid once and the presets' own features everywhere:
- ``FULL_PRESETS`` (a single-node transformer pipeline and a CNN)
  take every control through its whole range: every (control, value) pair of the grid runs at
  least there;
- every other preset takes, through their whole range, the controls its file sets that no full
  preset's file sets (its own feature: DiLoCo's ``training.sync.*``, gossip's peers, the parameter
  server's servers, DeepSeek's MoE routing, ...), and one seeded value of every tenth control
  (every twelfth on the heavy presets, whose scenarios cost 0.25-0.75 s each to simulate and draw),
  rotating with the preset so that each control still runs on at least one other preset
  (the sweep was the suite's longest part: a third of CI's time at one in three, and at one in
  six and seven it still was, with CI near its 15-minute limit).
- each other view opens on the light presets and on every fifth other preset (rotating with
  the view), and every second GPU preset (rotating) is chosen on the presets that are not light.
The YAML download uploaded back is tests/test_ui.py's, on every shipped file.
Every control that is changed is set back and must restore the preset's numbers.
``COMMEXPLORER_FULL_SWEEP=1`` sweeps everything in full, in every view (opt-in: about 25 CPU-minutes).
"""
from __future__ import annotations

import os
import random
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from explorer import share
from explorer.scenario import model_presets

from conftest import ROOT, SCENARIO_FILES

# Tens to hundreds of app runs per test, the longest part of the suite: the full suite only.
pytestmark = pytest.mark.slow

APP = str(ROOT / "app.py")
# Serving scenarios (issue 37) have their own sidebar (the Serving section; no training controls) and
# their own sweep below (test_every_serving_control_through_its_range); the training tests leave them out.
PRESETS = [p.stem for p in SCENARIO_FILES if not p.stem.startswith("serve-")]
SERVING_PRESETS = [p.stem for p in SCENARIO_FILES if p.stem.startswith("serve-")]
# The presets whose controls are swept: llama3-405b-pretraining runs llama3-405b-16k's layout and its
# own fields (phases, reliability) have no sidebar control, so sweeping it again would only repeat
# llama3-405b-16k at five times the cost (each change validates every phase); tests/test_app_run.py
# and the whole-run tour open it.
SWEPT = [p for p in PRESETS if p != "llama3-405b-pretraining"]
HEAVY = {"llama3-405b-16k", "llama3-405b-pretraining", "deepseek-v3", "megatron-gpt3-175b", "straggler-16k"}
# One preset per family of code paths the sidebar reaches: pipeline schedules on one node, a CNN's
# own controls, the WAN between datacenters.
FULL_PRESETS = ("teaching-8gpu", "resnet50-cloud-dp")
FULL = os.environ.get("COMMEXPLORER_FULL_SWEEP", "") == "1"
# Select boxes swept by their own tests (their options are presets, not field values).
PRESET_SELECTS = {"_scenario", "model.preset", "hardware.gpu"}
TRACEBACK_MARKERS = ("Traceback (most recent call last)", 'File "/')


def open_app(preset: str, view: str | None = None) -> AppTest:
    """The app on a shipped preset (and, if given, a view: AppTest renders only the open tab)."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["scenario"] = preset
    if view:
        at.query_params["view"] = view
    at.run()
    problems = page_problems(at, f"{preset} as shipped ({view or 'default'} view)")
    assert not problems, problems
    assert iteration_time(at) is not None, f"{preset}: no metrics on first load"
    return at


def iteration_time(at: AppTest) -> str | None:
    # The first card: the iteration, or the amortised step of replicas that train apart; a serving
    # scenario's TTFT and TPOT together.
    cards = {m.label: m.value for m in at.metric}
    if "TTFT" in cards:
        return f"{cards['TTFT']} / {cards.get('TPOT')}"
    return next((v for k, v in cards.items() if k in ("Iteration time", "Time per step")), None)


def _texts(at: AppTest) -> list[str]:
    out = []
    for group in (at.markdown, at.code, at.error, at.warning, at.info, at.caption, at.text):
        out.extend(str(e.value) for e in group)
    return out


def page_problems(at: AppTest, what: str) -> list[str]:
    """What is wrong with the page after a change: [] when it shows a result or a one-line reason."""
    problems = []
    if at.exception:
        problems.append(f"{what}: exception {[str(e.value)[:300] for e in at.exception]}")
    if any(marker in t for t in _texts(at) for marker in TRACEBACK_MARKERS):
        problems.append(f"{what}: a traceback is on the page")
    errors = [str(e.value).strip() for e in at.error]
    internal = [e for e in errors if e.startswith("Internal error")]
    if internal:
        problems.append(f"{what}: {internal[0]}")
    multi = [e for e in errors if "\n" in e]
    if multi:
        problems.append(f"{what}: error message of several lines: {multi[0][:200]!r}")
    if iteration_time(at) is None and not errors:
        problems.append(f"{what}: neither the metrics nor a reason on screen")
    return problems


def number_values(w: Any) -> list:
    """Minimum, maximum and a typical value (twice the preset's, or half when that is out of range)."""
    lo, hi, cur = w.min, w.max, w.value
    cast = int if isinstance(cur, int) and not isinstance(cur, bool) else float
    typical = cur * 2 if cur else 1
    if typical > hi:
        typical = cur / 2
    values = [cast(lo), cast(hi), cast(max(lo, min(hi, typical)))]
    return [v for v in dict.fromkeys(values) if v != cur]


def sample(values: list, k: int, seed: str) -> list:
    """``k`` of ``values``, the same ones on every run (seeded by preset and field)."""
    return values if len(values) <= k else random.Random(seed).sample(values, k)


def sweep_widget(at: AppTest, preset: str, kind: str, key: str, values: list) -> list[str]:
    """Set widget ``key`` to each value, check the page, then set it back and check the preset's
    iteration time is on screen again."""
    problems = []
    getter = {"number": at.sidebar.number_input, "select": at.sidebar.selectbox,
              "toggle": at.sidebar.toggle}[kind]
    original = getter(key=key).value
    baseline = iteration_time(at)
    for v in values:
        getter(key=key).set_value(v).run()
        problems += page_problems(at, f"{preset}: {key} = {v!r}")
    getter(key=key).set_value(original).run()
    problems += page_problems(at, f"{preset}: {key} back to {original!r}")
    if iteration_time(at) != baseline:
        problems.append(f"{preset}: {key} back to {original!r} shows {iteration_time(at)} "
                        f"instead of {baseline}")
    return problems


def discovered(at: AppTest) -> dict[str, list]:
    return {"number": [w.key for w in at.sidebar.number_input],
            "select": [w.key for w in at.sidebar.selectbox if w.key not in PRESET_SELECTS],
            "toggle": [w.key for w in at.sidebar.toggle]}


def sweep(at: AppTest, preset: str, k_num: int, k_opt: int, controls: int | None = None,
          seed: str = "", full_keys: frozenset[str] = frozenset(),
          stride: tuple[int, int] | None = None) -> list[str]:
    """Drive the discovered controls (``k_num`` of min/max/typical per number input, ``k_opt``
    options per select box, every toggle flipped; ``controls``: a seeded sample of that many
    controls instead of all of them; ``stride`` (n, r): only the controls whose position is r
    modulo n; ``full_keys``: controls always driven, through every value) and collect what went
    wrong."""
    keys = discovered(at)
    items = [(kind, key) for kind in ("number", "select", "toggle") for key in keys[kind]]
    if controls is not None:
        items = sample(items, controls, f"{preset}/{seed}/controls")
    if stride is not None:
        n, r = stride
        items = [it for i, it in enumerate(items) if it[1] in full_keys or i % n == r % n]
    problems: list[str] = []
    for kind, key in items:
        kn, ko = (3, 10**6) if key in full_keys else (k_num, k_opt)
        if kind == "number":
            values = sample(number_values(at.sidebar.number_input(key=key)), kn, f"{preset}/{key}")
        elif kind == "select":
            w = at.sidebar.selectbox(key=key)
            values = sample([o for o in w.options if o != w.value], ko, f"{preset}/{key}")
        else:
            values = [not at.sidebar.toggle(key=key).value]
        problems += sweep_widget(at, preset, kind, key, values)
    return problems


# The presets whose files' fields are no other preset's own feature: the full presets and two
# datacenters over a WAN, whose WAN fields are its own (swept in full there) and which every
# multi-datacenter preset also sets (swept through their whole range on a 16K-GPU preset, the
# datacenter count alone doubled its sweep).
COVERING = (*FULL_PRESETS, "two-datacenters")


def own_keys(preset: str) -> frozenset[str]:
    """The fields ``preset``'s file sets that no file of the other :data:`COVERING` presets sets:
    its own feature."""
    def keys(name: str) -> set[str]:
        return set(share.flatten(share.preset_raw(name)))
    return frozenset(keys(preset) - set().union(*(keys(p) for p in COVERING if p != preset)))


# One control in this many is driven (one seeded value) on each other preset, rotating with it.
STRIDE_LIGHT, STRIDE_HEAVY = 10, 12


def sweep_plan(preset: str, part: int = 0) -> dict[str, Any]:
    """How :func:`test_every_sidebar_control_through_its_range` drives ``preset``'s controls (see the
    module docstring): everything in full — on a full preset in two parts, alternate controls, so
    that two workers share its minute — or its own fields in full plus a rotating stride of one
    value per control."""
    if FULL:
        return {"k_num": 3, "k_opt": 10**6}
    if preset in FULL_PRESETS:
        return {"k_num": 3, "k_opt": 10**6, "stride": (2, part)}
    # The rank within its group (light or heavy), so that the group's strides take turns.
    group = [p for p in SWEPT if p not in FULL_PRESETS and (p in HEAVY) == (preset in HEAVY)]
    return {"k_num": 1, "k_opt": 1, "full_keys": own_keys(preset),
            "stride": (STRIDE_HEAVY if preset in HEAVY else STRIDE_LIGHT, group.index(preset))}


VIEWS = list(share.VIEWS)
# Compare simulates B and Design space runs a sweep after each change: on every preset that would
# double the suite; the light presets exercise their code paths (FULL_SWEEP runs them everywhere).
COSTLY_VIEWS = {"compare", "design"}
LIGHT = [p for p in SWEPT if p not in HEAVY][:3]
# The Serving curve is a serving scenario's tab only (a training preset opens on its Timeline).
# Each other view on the light presets and on every fifth other preset, rotating with the view,
# so that each view reaches every code path of the light presets and a fifth of the rest (all of them
# with FULL_SWEEP).
VIEW_CASES = [(p, v) for vi, v in enumerate(VIEWS[1:]) if v != "serving" for pi, p in enumerate(SWEPT)
              if FULL or (v not in COSTLY_VIEWS or p in LIGHT) and (p in LIGHT or (pi + vi) % 5 == 0)] \
    + [(p, "serving") for p in SERVING_PRESETS]


# A full preset's sweep runs in two parts (alternate controls, sweep_plan); the others in one.
SWEEP_CASES = [(p, part) for p in SWEPT for part in ((0, 1) if p in FULL_PRESETS and not FULL else (0,))]


@pytest.mark.parametrize(("preset", "part"), SWEEP_CASES)
def test_every_sidebar_control_through_its_range(preset, part):
    """Every number input through min, max and a typical value, every select box through every
    option, every toggle flipped: no exception, no traceback, a result or a one-line reason; and
    setting it back restores the preset's numbers (the controls hold no hidden state).  On the
    presets outside ``FULL_PRESETS``: the preset's own fields in full and a rotating stride of the
    other controls with one seeded value each (all of them with FULL_SWEEP; module docstring)."""
    at = open_app(preset)
    keys = discovered(at)
    # The sidebar really was found (a sweep over nothing would pass vacuously).
    assert len(keys["number"]) >= 20 and len(keys["select"]) >= 5 and len(keys["toggle"]) >= 3, keys
    problems = sweep(at, preset, **sweep_plan(preset, part))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("preset", SERVING_PRESETS)
def test_every_serving_control_through_its_range(preset):
    """A serving preset's sidebar (Serving section, the layout, the network, the model): one seeded
    value of every control (min, max or typical; one other option), its toggles flipped — no
    exception or traceback, a result or a one-line reason, and the preset's figures back when the
    control is set back."""
    at = open_app(preset)
    keys = discovered(at)
    assert {"inference.batch", "inference.prompt_tokens"} <= set(keys["number"]), keys
    # The serving home preset drives every control; the others their Serving section and a third of
    # the rest (the layout, network and model controls are the home preset's too).
    own = frozenset(k for group in keys.values() for k in group if k.startswith("inference."))
    plan = {} if preset == "serve-llama3-70b-tp8" else {"full_keys": own, "stride": (3, 0)}
    problems = sweep(at, preset, k_num=1, k_opt=1, **plan)
    assert not problems, "\n".join(problems)


def test_the_default_sweep_still_reaches_every_control_and_value():
    """The reduced default sweep (module docstring) loses no control: the full presets drive every
    discovered control through every value, each other preset its own fields in full, and the
    rotating strides together touch every control on at least one other preset."""
    at = open_app(FULL_PRESETS[0])
    keys = discovered(at)
    items = [key for kind in ("number", "select", "toggle") for key in keys[kind]]
    rest = [p for p in SWEPT if p not in FULL_PRESETS]
    assert set(FULL_PRESETS) <= set(SWEPT) and len(rest) >= 10, rest
    # A full preset's two parts together drive every control, each through every value.
    plans = [sweep_plan(FULL_PRESETS[0], part) for part in (0, 1)]
    if all("stride" in pl for pl in plans):
        covered = {i for pl in plans for i in range(len(items)) if i % pl["stride"][0] == pl["stride"][1]}
        assert covered == set(range(len(items))) and all(pl["k_num"] == 3 for pl in plans)
    touched = {key: 0 for key in items}
    for preset in rest:
        plan = sweep_plan(preset)
        if "stride" not in plan:
            return                               # FULL_SWEEP: nothing is reduced
        n, r = plan["stride"]
        for i, key in enumerate(items):
            touched[key] += key in plan["full_keys"] or i % n == r % n
    assert min(touched.values()) >= len(rest) // (STRIDE_HEAVY + 1), \
        sorted(touched.items(), key=lambda kv: kv[1])[:5]
    # The features the other presets exist for are among their own, fully swept fields.
    assert {"training.sync.inner_steps", "training.sync.kind"} <= own_keys("diloco-cross-region")
    assert {"parallelism.gossip_peers", "parallelism.dp_kind"} <= own_keys("gossip-exponential")
    assert "parallelism.ps_servers" in own_keys("parameter-server")
    assert "model.moe.max_nodes" in own_keys("deepseek-v3")


@pytest.mark.parametrize(("preset", "view"), VIEW_CASES)
def test_every_view_survives_control_changes(preset, view):
    """AppTest renders only the open tab, so each other view is opened on every preset and a
    seeded sample of controls is changed under it (every control with FULL_SWEEP): the view must
    draw without an internal error after each change."""
    at = open_app(preset, view)
    problems = sweep(at, preset, *((3, 10**6, None) if FULL else (1, 1, 2)), seed=view)
    assert not problems, "\n".join(problems)


def _preset_options(at: AppTest, key: str) -> list[str]:
    """The preset names of a chooser but its current one; the model presets are shown with their
    family ("resnet-50 · convnet": explorer/ui/sidebar.py), the name is what comes before it."""
    w = at.sidebar.selectbox(key=key)
    names = [o.split(" · ")[0] for o in w.options]
    return [o for o in names if o != "(custom)" and o != w.value]


@pytest.mark.parametrize("preset", SWEPT)
def test_every_model_preset_on_every_scenario(preset):
    """Choosing any model preset on any shipped scenario fills the model controls and shows a
    result or a one-line reason (issue 7 item 1: this used to crash the page)."""
    at = open_app(preset)
    models = _preset_options(at, "model.preset")
    assert len(models) >= 10, models
    if not FULL and preset not in LIGHT:
        # Every third model preset, rotating with the scenario: each model still reaches a third
        # of the scenarios and every one of the light ones (all of them with FULL_SWEEP).
        models = models[SWEPT.index(preset) % 3::3]
    problems: list[str] = []
    for name in models:
        at.sidebar.selectbox(key="model.preset").set_value(name).run()
        found = page_problems(at, f"{preset}: model.preset = {name}")
        problems += found
        if not found:
            # The preset's dimensions reached the controls (a ResNet's depth; its transformer
            # fields are derived and not shown).
            conv = model_presets()[name].get("conv")
            dlrm = model_presets()[name].get("dlrm")
            gnn = model_presets()[name].get("gnn")
            if conv is not None:
                got, expected, what = (at.sidebar.selectbox(key="model.conv.depth").value, conv["depth"],
                                       "model.conv.depth")
            elif dlrm is not None:          # a recommendation model: its tables reach the controls
                got, expected, what = (at.sidebar.number_input(key="model.dlrm.tables").value,
                                       dlrm["tables"], "model.dlrm.tables")
            elif gnn is not None:           # a GNN: its feature width reaches the controls
                got, expected, what = (at.sidebar.number_input(key="model.gnn.features").value,
                                       gnn["features"], "model.gnn.features")
            elif model_presets()[name].get("rnn") is not None:    # GNMT: its depth reaches the controls
                got, expected, what = (at.sidebar.number_input(key="model.rnn.depth").value,
                                       model_presets()[name]["rnn"]["depth"], "model.rnn.depth")
            else:
                got, expected, what = (at.sidebar.number_input(key="model.layers").value,
                                       model_presets()[name]["layers"], "model.layers")
            if got != expected:
                problems.append(f"{preset}: model.preset = {name} left {what} at {got}, not {expected}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("preset", SWEPT)
def test_every_gpu_preset_on_every_scenario(preset):
    """Every GPU preset on every shipped cluster: no exception, a result or a one-line reason."""
    at = open_app(preset)
    gpus = _preset_options(at, "hardware.gpu")
    assert len(gpus) >= 3, gpus
    if not FULL and preset not in LIGHT:
        # Every second GPU preset, rotating with the scenario: each GPU still reaches half of the
        # scenarios and every light one (all of them with FULL_SWEEP).
        gpus = gpus[SWEPT.index(preset) % 2::2]
    problems: list[str] = []
    for name in gpus:
        at.sidebar.selectbox(key="hardware.gpu").set_value(name).run()
        problems += page_problems(at, f"{preset}: hardware.gpu = {name}")
    assert not problems, "\n".join(problems)


def test_the_scenario_chooser_reaches_every_preset():
    """The sidebar's scenario select box loads each shipped preset in turn, each with its metrics."""
    at = open_app("teaching-8gpu")
    problems: list[str] = []
    seen = set()
    for name in PRESETS:
        at.sidebar.selectbox(key="_scenario").set_value(name).run()
        problems += page_problems(at, f"scenario chooser -> {name}")
        if iteration_time(at) is None:
            problems.append(f"scenario chooser -> {name}: no metrics")
        # The title with the figure: llama3-405b-pretraining runs llama3-405b-16k's layout (the same
        # iteration time), so the time alone cannot tell two presets apart.
        # Off the projector the title is a level-3 heading (page._title_row).
        titles = [str(m.value) for m in at.markdown if str(m.value).startswith("### ")]
        seen.add((iteration_time(at), titles[0] if titles else None))
    assert not problems, "\n".join(problems)
    assert len(seen) == len(PRESETS), "two presets show the same title and time: the chooser did not switch"


@pytest.mark.parametrize("family", ["gnn-sage-papers100m", "dlrm-dcnv2", "pipedream-vgg16"])
def test_a_file_of_another_family_uploaded_links_to_its_own_family(family):
    """A modified GNN uploaded onto teaching-8gpu showed 8.5 ms, but its link named teaching-8gpu
    and reopened a 1.3B transformer (75.7 s, ten "ignored" warnings).  The preset becomes the
    nearest shipped scenario of the file's family, so the link reopens what is shown."""
    from urllib.parse import parse_qsl, urlsplit

    from explorer.scenario import apply_overrides, from_dict, load, to_yaml
    from explorer.simulate import simulate
    mine = load(ROOT / "scenarios" / f"{family}.yaml", {"cluster.scale_out.nic_Gbps": 200})
    at = open_app("teaching-8gpu", "scenario")
    at.file_uploader(key="_upload").set_value((f"{family}.yaml", to_yaml(mine).encode(),
                                               "application/x-yaml")).run()
    assert not page_problems(at, f"upload {family}") and not at.error
    view = share.parse_query(dict(parse_qsl(urlsplit(at.session_state["_share_link"]).query)))
    assert view.scenario == family and view.warnings == []
    back = from_dict(apply_overrides(share.preset_raw(view.scenario), view.overrides))
    assert simulate(back).iteration_time_s == simulate(mine).iteration_time_s
