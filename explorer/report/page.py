"""The report as one HTML page that opens offline: Plotly's JavaScript inlined once (with the
first chart, ``include_plotlyjs=True``; the other charts reuse it), no external file, font or
script, so a lecturer can mail it or put it on a USB stick and it opens without a server.

The run JSON is embedded as it is (``<script type="application/json" id="run-json">``) and each
card carries the exact value of the run-JSON key it shows (``data-key``/``data-value``), so a
reader — or a test — can check the page against ``run --json``.  A scenario with a run plan adds
the whole run's cards (days, GPU-hours, goodput, energy, cost), as the app's Run tab shows them.
"""
from __future__ import annotations

import json
from html import escape

import plotly.graph_objects as go

from ..config.schema import one_line
from ..variants.hetero import gpu_summary
from .cards import Card, cards, run_cards
from .charts import Chart, charts
from .inputs import ReportInputs, with_run

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1400px; padding: 16px 24px; color: #262730; }
h1 { font-size: 1.6rem; margin: 0 0 4px; } h2 { font-size: 1.15rem; margin: 20px 0 6px; }
.sub { color: #555; margin: 0 0 12px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 10px; }
.card { border: 1px solid #ddd; border-radius: 8px; padding: 8px 12px; }
.card .label { font-size: .85rem; color: #555; } .card .value { font-size: 1.5rem; font-weight: 600; }
.card .note { font-size: .75rem; color: #777; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.wide { grid-column: 1 / -1; }
.chart { border: 1px solid #eee; border-radius: 8px; padding: 4px 8px; min-width: 0; }
pre { background: #f6f6f8; padding: 12px; overflow-x: auto; font-size: .8rem; }
.bottleneck { background: #eef4fb; border-radius: 8px; padding: 8px 12px; }
.warning { background: #fff6e0; border-radius: 8px; padding: 6px 12px; margin: 4px 0; }
.note { background: #e8f1fb; border-radius: 8px; padding: 6px 12px; margin: 4px 0; }
a { word-break: break-all; }
"""


def _card(c: Card) -> str:
    note = f'<div class="note">{escape(c.note)}</div>' if c.note else ""
    return (f'<div class="card" data-key="{escape(c.key)}" data-value="{escape(json.dumps(c.value))}">'
            f'<div class="label">{escape(c.label)}</div>'
            f'<div class="value">{escape(c.text)}</div>{note}</div>')


def _chart(c: Chart, first: bool) -> str:
    # Every axis's labels inside the figure: outside Streamlit (whose template the app's charts are
    # drawn with) Plotly's default margin cuts a horizontal bar chart's labels at the left edge, as
    # the app's exported files do (explorer/ui/export.for_file).  A copy: the app's cached Gantt
    # stays untouched.
    fig = go.Figure(c.fig)
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    # Plotly's bundle goes into the first chart only; the others call the same global Plotly.
    div = fig.to_html(full_html=False, include_plotlyjs=first, div_id=f"chart-{c.key}",
                        config={"displaylogo": False, "responsive": True})
    return (f'<section class="chart{" wide" if c.wide else ""}" data-chart="{escape(c.key)}">'
            f'<h2>{escape(c.title)}</h2>{div}</section>')


def _json_script(obj: object) -> str:
    """JSON inside a <script> element: ``</`` escaped so no string can close the element."""
    return json.dumps(obj, allow_nan=False).replace("</", "<\\/")


def report_html(r: ReportInputs) -> str:
    """The whole page of run ``r``."""
    sc = r.scenario
    j = with_run(r.run_json, sc)     # the app's cached JSON lacks run_total; the CLI's has it
    p = sc.parallelism
    title = one_line(sc.name)
    m = j["micro_batches"]
    if sc.inference is not None:     # a serving deployment: no schedule, ZeRO or micro-batches
        inf, d = sc.inference, sc.inference.disaggregated
        pools = (" · ".join(f"{what} {q.gpus} GPUs ({q.replicas} x tp {q.tp} · pp {q.pp}, ep {q.ep})"
                            for what, q in (("prefill", d.prefill), ("decode", d.decode)))
                 if d is not None else f"tp {p.tp} · pp {p.pp} · ep {p.ep}")
        layout = (f"{gpu_summary(sc)} · {pools} · serving a batch of {inf.batch} · "
                  f"{inf.prompt_tokens} prompt and {inf.output_tokens} output tokens")
    else:
        layout = (f"{gpu_summary(sc)} · tp {p.tp} · pp {p.pp} · dp {sc.dp} · cp {p.cp} · ep {p.ep} · "
                  f"{p.schedule} · ZeRO {p.zero} · {m} micro-batch{'' if m == 1 else 'es'}")
    drawn = charts(r)
    band = j.get("expected_error_label") or ""
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>CommExplorer · {escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>", f'<p class="sub">{escape(layout)}</p>',
        '<div class="cards">' + "".join(_card(c) for c in cards(j, sc)) + "</div>",
        f'<p class="sub">Expected error — {escape(band)}</p>' if band else "",
        *(['<h2>The whole run</h2>', '<div class="cards" id="run-cards">'
           + "".join(_card(c) for c in run_cards(j["run_total"])) + "</div>"] if "run_total" in j else []),
        f'<p class="bottleneck">{escape(j["bottleneck"])}</p>',
        *(f'<p class="{"note" if k == "split" else "warning"}">{escape(w)}</p>'
          for w, k in zip(j["warnings"], j.get("warning_kinds") or [""] * len(j["warnings"]), strict=True)),
        '<div class="grid">' + "".join(_chart(c, i == 0) for i, c in enumerate(drawn)) + "</div>",
        "<h2>Open it in the app</h2>",
        f'<p>Share link: <a id="share-link" href="{escape(r.link)}">{escape(r.link)}</a></p>',
        "<p class=\"sub\">The link opens this scenario in CommExplorer where it is served "
        "(<code>streamlit run app.py</code>, or the Dockerfile: see the README's "
        "“Host it for a team”); the YAML below runs with "
        "<code>python -m explorer run scenario.yaml</code>.</p>",
        "<h2>Scenario (YAML)</h2>", f'<pre id="scenario-yaml">{escape(r.yaml)}</pre>',
        f'<script type="application/json" id="run-json">{_json_script(j)}</script>',
        "</body></html>"]
    return "\n".join(x for x in parts if x)
