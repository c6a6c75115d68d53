"""How long a share link's values may be (explorer/share.py reads links with these limits), and
which of a link's values are too long for it to carry."""
from __future__ import annotations

from collections.abc import Mapping

B_PREFIX = "b."                # a link's overrides of the Compare view's scenario B (on top of A)
MAX_VALUE_CHARS = 200          # a field value is a number, a word or a short list
# The run plan's phases, as compact JSON (issue 38): a batch ramp's phase is about 110 characters
# (a hunt found 36 phases, 4,000 characters, dropped on reopening).  A link is one HTTP request,
# which the app's server (Tornado) caps at 64 KB; percent-encoding JSON's punctuation makes the
# value about 1.45x longer: 32,000 characters (256 such phases, MAX_PHASES) stay inside it.
LONG_VALUES = {"training.phases": 32_000}


def limit_of(key: str) -> int:
    """The longest value a link's parameter ``key`` may hold (B's overrides as A's)."""
    return LONG_VALUES.get(key.removeprefix(B_PREFIX), MAX_VALUE_CHARS)


def unlinked(query: Mapping[str, str]) -> list[str]:
    """The parameters of ``query`` (explorer/share.to_query's) that a link cannot carry because their
    value is over the length a reopened link accepts (share.parse_query would ignore them), each
    as "key (N characters, limit M)"; empty when the link reopens exactly what it was made of."""
    out = []
    for key, value in query.items():
        limit = limit_of(key)
        if len(value) > limit:
            out.append(f"{key} ({len(value):,} characters, limit {limit:,})")
    return out
