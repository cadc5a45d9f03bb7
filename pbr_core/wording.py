"""Counts of rows in words, one row said in the singular: "this row cannot show ...", never "these 1
rows cannot show ..." (audit 10a, on a one-row file). Shared by the library's messages, the CLI and
the dashboard's texts, so that every sentence about "these n rows" agrees with n.

Examples
--------
>>> these_rows(1), these_rows(9090), other_rows(1), rows(1000, thousands=False)
('this row', 'these 9,090 rows', 'the other row', '1000 rows')
"""

from __future__ import annotations

__all__ = ["other_rows", "rows", "these_rows"]


def _count(n: int, thousands: bool) -> str:
    return f"{n:,}" if thousands else f"{n}"


def rows(n: int, *, thousands: bool = True) -> str:
    """"1 row", "9,090 rows" (``thousands=False``: "9090 rows")."""
    return f"{_count(n, thousands)} row{'' if n == 1 else 's'}"


def these_rows(n: int, *, thousands: bool = True) -> str:
    """"this row" for one row, else "these 9,090 rows"."""
    return "this row" if n == 1 else f"these {rows(n, thousands=thousands)}"


def other_rows(n: int, *, thousands: bool = True) -> str:
    """"the other row" for one row, else "the other 9,090 rows"."""
    return "the other row" if n == 1 else f"the other {rows(n, thousands=thousands)}"
