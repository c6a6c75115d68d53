"""Model messages reach the page as written (explorer/ui/plain.py).

Found walking the app: with tp 3 on teaching-8gpu the rule's message "tp*pp*cp = 6 does not divide
the 8 GPUs" showed as "tpppcp = 6" with "pp" in italics (Streamlit reads st.error as Markdown).
"""
from __future__ import annotations

import pytest

from explorer.scenario import ScenarioError, apply_overrides, from_dict
from explorer.share import preset_raw
from explorer.ui.plain import plain

from app_support import run_app


@pytest.mark.parametrize("text, shown", [
    ("tp*pp*cp = 6", r"tp\*pp\*cp = 6"),
    ("micro_batch*dp = 3*2 = 6", r"micro_batch\*dp = 3\*2 = 6"),
    ("costs $5 ~ 2 [x](y) #1 a|b <b>", r"costs \$5 \~ 2 \[x\](y) \#1 a\|b \<b\>"),
    ("set `parallelism.tp*2` then a*b", r"set `parallelism.tp*2` then a\*b"),
    ("one ` tick*", r"one \` tick\*"),
])
def test_markdown_characters_are_escaped_outside_code(text, shown):
    assert plain(text) == shown


def test_a_rule_message_keeps_its_signs_on_the_page():
    with pytest.raises(ScenarioError) as info:
        from_dict(apply_overrides(preset_raw("teaching-8gpu"), {"parallelism.tp": 3}))
    assert "tp*pp*cp" in str(info.value)
    # A link with the bad value: the override is ignored with a warning that quotes the rule.
    at = run_app(scenario="teaching-8gpu", **{"parallelism.tp": "3"})
    linked = [w.value for w in at.warning]
    assert any(r"tp\*pp\*cp" in b for b in linked), linked
    # The same value typed in the sidebar: the error under the control and the page's banner.
    at = run_app(scenario="teaching-8gpu")
    at.number_input(key="parallelism.tp").set_value(3).run()
    typed = [e.value for e in at.error]
    assert len(typed) >= 2 and all(r"tp\*pp\*cp" in b for b in typed), typed
    assert not any("tp*pp*cp" in b for b in [*linked, *typed])


@pytest.mark.parametrize("x, text", [(2.56, "2.56"), (0.0273, "0.0273"), (58.24, "58.2"), (362.8, "363"),
                                     (6605.4, "6,605"), (15.2e6, "15.2 M")])
def test_card_rates_keep_three_digits_below_a_hundred(x, text):
    """Found walking the app: 2.56 full-graph passes per second read "3", 1.3 TFLOP/s read "1"."""
    from explorer.ui.views.metrics import rate_text

    assert rate_text(x) == text


@pytest.mark.parametrize("name, present, two_lines", [
    ("stage 15 (straggler replica)", True, True), ("stage 0", True, False),
    ("stage 15 (straggler replica)", False, False)])
def test_a_long_breakdown_title_wraps_on_a_projector(name, present, two_lines):
    """Found walking the app at 1280x720: "Where the time goes · stage 15 (straggler rep" was cut."""
    from explorer.figures.charts import breakdown
    from explorer.ui.views.timeline import _breakdown_title

    title = _breakdown_title(name, present)
    assert ("<br>" in title) is two_lines and name in title
    fig = breakdown({"compute": 1.0}, 1.0, title=title, font_size=18)
    assert fig.layout.margin.t == (30 + 24 if two_lines else 30)


@pytest.mark.parametrize("url, base", [
    ("http://127.0.0.1:8611", "http://127.0.0.1:8611/"),
    ("http://127.0.0.1:8611/?scenario=x", "http://127.0.0.1:8611/"),
    ("https://host/app/?a=1", "https://host/app/"),
    ("", "")])
def test_the_copied_link_keeps_the_roots_slash(url, base):
    """Found walking the app: Copy link gave ``http://127.0.0.1:8611?scenario=...``."""
    from explorer.ui.page import page_base

    assert page_base(url) == base


def test_the_compare_cards_give_tflops_with_the_run_cards_digits():
    """Found by an app hunt: resnet50-cloud-dp's Compare view read TFLOP/s per GPU "47" beside the
    Run card's "47.3"."""
    from explorer.analysis.compare import Delta
    from explorer.ui.views.compare import _fmt
    from explorer.ui.views.metrics import rate_text

    d = Delta("tflops_per_gpu", "TFLOP/s per GPU", 47.3, 47.3)
    assert _fmt(d, 47.3) == rate_text(47.3) == "47.3"
