"""A faster ``dataclasses.replace`` for the scenario's frozen sections.

``dataclasses.replace`` re-runs ``__init__`` through introspection of every field, about 5 us per
call; a sweep of five thousand overrides makes some 67,000 of them.  The sections have no
``__post_init__`` and no ``__slots__`` (config/sections.py), so a copy of the instance dictionary
with the changed fields is the same object ``replace`` would build.
"""
from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def evolve(obj: T, **changes: Any) -> T:
    """``obj`` with ``changes`` (field name -> value), like ``dataclasses.replace``; an unknown name
    raises TypeError as ``replace`` does.

    >>> from explorer.config.sections import Parallelism
    >>> evolve(Parallelism(), tp=4).tp, Parallelism().tp
    (4, 1)
    """
    if not changes:
        return obj
    # ``obj`` is any dataclass instance; a TypeVar cannot say so and still return its own type.
    fields = type(obj).__dataclass_fields__          # type: ignore[attr-defined]
    for name in changes:
        if name not in fields:
            raise TypeError(f"{type(obj).__name__} has no field {name!r}")
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new
