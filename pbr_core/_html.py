"""Readable HTML tables for Jupyter (``_repr_html_``): what a notebook shows for a value of the library.

User-provided text (file, column, class and group names) is escaped: a notebook renders the HTML.
"""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

_STYLE = "border-collapse:collapse;font-size:0.9em"
_CELL = "padding:2px 8px;text-align:left;border-bottom:1px solid #ddd"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}" if value == value else "n/a"
    else:
        text = str(value)
    return html.escape(text)


def key_values(title: str, rows: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of (name, value) under a bold title."""
    body = "".join(f"<tr><th style='{_CELL}'>{html.escape(k)}</th><td style='{_CELL}'>{_cell(v)}</td></tr>"
                   for k, v in rows)
    return f"<div><b>{html.escape(title)}</b><table style='{_STYLE}'>{body}</table></div>"


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "") -> str:
    """A table with a header row, and a caption below it (plain text, escaped)."""
    head = "".join(f"<th style='{_CELL}'>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td style='{_CELL}'>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    cap = f"<p style='font-size:0.9em'>{html.escape(caption)}</p>" if caption else ""
    return f"<div><table style='{_STYLE}'><tr>{head}</tr>{body}</table>{cap}</div>"
