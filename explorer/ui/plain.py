"""Model text shown through Streamlit's Markdown as written.

Messages the model writes (a rule's error, a warning, a bottleneck sentence) are plain text, but
st.error, st.warning, st.info and st.markdown read Markdown: ``tp*pp*cp = 6`` came out as
"tppp cp = 6" with "pp" in italics, ``micro_batch*dp = 3*2`` lost both signs, and a ``$`` would
open LaTeX.  :func:`plain` escapes what Markdown reads as emphasis, strikethrough, math, links,
headings, tables or HTML, outside the backtick spans the model writes on purpose (a field name as
code), where a backslash would show.  Underscores stay: inside a word (``micro_batch``) CommonMark
never reads them as emphasis, and field names are what the messages name.
"""
from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\*~$\[\]#|<>])")


def plain(text: str) -> str:
    """``text`` with Markdown's special characters backslash-escaped outside `code` spans.

    >>> plain("tp*pp*cp = 6; set `parallelism.tp` * 2")
    'tp\\\\*pp\\\\*cp = 6; set `parallelism.tp` \\\\* 2'
    """
    parts = str(text).split("`")
    if len(parts) % 2 == 0:              # an unpaired backtick: no code span, escape it all
        return _SPECIAL.sub(r"\\\1", str(text)).replace("`", "\\`")
    return "`".join(p if i % 2 else _SPECIAL.sub(r"\\\1", p) for i, p in enumerate(parts))
