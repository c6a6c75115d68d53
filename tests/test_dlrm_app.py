"""The app shows a recommendation model's controls (the registry record's ``controls``) and its
emb lane, and a control moves the card (streamlit.testing, no browser)."""
from __future__ import annotations

from app_support import run_app, seconds


def test_the_sidebar_shows_the_dlrm_controls_and_they_move_the_card():
    at = run_app(scenario="dlrm-dcnv2")
    assert at.sidebar.number_input(key="model.dlrm.tables").value == 26
    assert at.sidebar.number_input(key="model.dlrm.dim").value == 128
    assert at.sidebar.selectbox(key="model.dlrm.sharding").value == "column_wise"
    assert [m.label for m in at.metric][1] == "Samples/s"
    before = seconds(at)                                         # 3.6 ms
    at.sidebar.number_input(key="model.dlrm.tables").set_value(52).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert seconds(at) > before
    at.sidebar.selectbox(key="model.dlrm.sharding").set_value("table_wise").run()
    assert not at.exception and not at.error
    assert seconds(at) > 1.5 * before                             # the 100-hot table on one GPU
