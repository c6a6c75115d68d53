"""A run as one self-contained HTML file that opens offline (issue 39, item 4): the cards, every
chart of the app (interactive, Plotly inlined once), the scenario YAML and its share link.

- :mod:`.inputs` — what the report shows, from a simulated result (the CLI) or from the app's
  cached view (explorer/ui) alike;
- :mod:`.cards` — the headline numbers, each with its exact value (they equal ``run --json``'s);
- :mod:`.charts` — the figures, drawn by explorer/figures as the app draws them;
- :mod:`.link` — the share link of a scenario given by name or file;
- :mod:`.page` — the HTML page itself.
"""
from .inputs import ReportInputs, inputs_of_result  # noqa: F401
from .link import DEFAULT_BASE_URL, report_link  # noqa: F401
from .page import report_html  # noqa: F401
