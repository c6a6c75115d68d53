"""Plain numbers as YAML 1.2 reads them, for the bounded loader of inputs.py.

PyYAML implements YAML 1.1, whose implicit number forms surprise anyone who writes a scenario:
``layers: 1:30`` is the base-60 (sexagesimal) integer 90, ``layers: 030`` the octal 24 and
``0b11`` binary.  YAML 1.2's core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution,
"Core Schema") dropped all three, and so does this module:

=================  ===========================  =========================================
plain scalar       YAML 1.1 (PyYAML)            here (YAML 1.2 core)
=================  ===========================  =========================================
``1:30``           int 90                       the string '1:30' (then "not an integer")
``1:30.5``         float 90.5                   the string '1:30.5'
``030``            int 24 (octal)               int 30 (decimal; leading zeros are digits)
``08``             the string '08'              int 8
``0o17``           the string '0o17'            int 15 (1.2's octal form)
``0x1F``           int 31                       int 31
``0b11``           int 3                        the string '0b11'
``1e6``, ``-.5``   the strings '1e6', '-.5'     float 1000000.0, float -0.5 (as JSON)
=================  ===========================  =========================================

Two YAML 1.1 conveniences stay, because they cannot change a value's meaning: ``_`` between
digits (``1_000`` is 1000) and a ``+`` sign.  Booleans keep YAML 1.1's words (``yes``/``no``,
``on``/``off`` as well as ``true``/``false``): scenario files in use write them.
"""
from __future__ import annotations

import re
from typing import Any

INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"

# YAML 1.2 core int: [-+]? [0-9]+ | 0o [0-7]+ | 0x [0-9a-fA-F]+ (underscores allowed after the
# first digit, as YAML 1.1 allowed them; a prefix must be followed by a digit: "0x_" stays text).
INT_RE = re.compile(r"""^(?:[-+]?[0-9][0-9_]*
                        |[-+]?0o[0-7][0-7_]*
                        |[-+]?0x[0-9a-fA-F][0-9a-fA-F_]*)$""", re.X)
# YAML 1.2 core float: [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?, minus the
# plain integers above, plus .inf / .nan.  No base-60 form.
FLOAT_RE = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?
                          |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                          |[-+]?\.(?:inf|Inf|INF)
                          |\.(?:nan|NaN|NAN))$""", re.X)
INT_FIRST = list("-+0123456789")
FLOAT_FIRST = list("-+0123456789.")


def core_resolvers(resolvers: dict[Any, list[tuple[str, Any]]]) -> dict[Any, list[tuple[str, Any]]]:
    """A copy of a loader's ``yaml_implicit_resolvers`` with YAML 1.1's int and float resolvers
    replaced by YAML 1.2 core's (the int first: FLOAT_RE would not match an integer anyway)."""
    out = {first: [(tag, rx) for tag, rx in entries if tag not in (INT_TAG, FLOAT_TAG)]
           for first, entries in resolvers.items()}
    for tag, rx, firsts in ((INT_TAG, INT_RE, INT_FIRST), (FLOAT_TAG, FLOAT_RE, FLOAT_FIRST)):
        for first in firsts:
            out.setdefault(first, []).append((tag, rx))
    return out


def core_int(text: str) -> int:
    """The integer a plain scalar that matched :data:`INT_RE` denotes: decimal unless it starts
    with ``0x`` (hex) or ``0o`` (octal); leading zeros are decimal digits (``030`` is 30).

    >>> core_int("030"), core_int("-0x1F"), core_int("0o17"), core_int("1_000")
    (30, -31, 15, 1000)
    """
    value = text.replace("_", "")
    sign = -1 if value[0] == "-" else 1
    value = value.lstrip("+-")
    if value[:2] in ("0x", "0o"):
        return sign * int(value[2:], 16 if value[1] == "x" else 8)
    return sign * int(value, 10)
