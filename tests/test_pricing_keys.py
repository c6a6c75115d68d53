"""The memo tables' bound (pricing/keys.bound_memory): looked at every _CHECK_EVERY rows, not every row."""
from __future__ import annotations

from explorer.pricing import keys


class _Counted(dict):
    """A memo table that counts how often its size is read."""

    looks = 0

    def __len__(self) -> int:
        _Counted.looks += 1
        return super().__len__()


def test_tables_are_sized_once_per_check_interval_and_cleared_when_full(monkeypatch):
    # Appended to the real tables, not in place of them: the clear this test provokes must empty
    # every memo table with the interning tables, or later rows would read stale entries under
    # reused integers (patching _TABLES alone once did exactly that to the rest of the session).
    table = _Counted()
    monkeypatch.setattr(keys, "_TABLES", [*keys._TABLES, table])
    monkeypatch.setattr(keys, "_rows", [0])
    _Counted.looks = 0
    for _ in range(keys._CHECK_EVERY):
        keys.bound_memory()
    assert _Counted.looks == 1                  # one look in 64 rows (each row looked before)
    table.update((i, i) for i in range(keys._MAX))
    for _ in range(keys._CHECK_EVERY - 1):
        keys.bound_memory()
    assert len(table) == keys._MAX              # full, not yet looked at
    keys.bound_memory()
    assert dict.__len__(table) == 0             # the next look clears it
