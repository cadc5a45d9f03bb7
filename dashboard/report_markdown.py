"""The Markdown of the dashboard's sentences as HTML, for the report (pure: no Streamlit).

The pages hand their sentences (:mod:`dashboard.texts`) to Streamlit, which renders Markdown; the
HTML report shows the same sentences, so it renders the subset they use: paragraphs (blank lines
between them), lists (lines starting with ``* `` or ``- ``, or ``1. ``; indented lines continue an
item), ``**bold**``, ``*italic*``, ```code``` and backslash escapes (``\\_``: how :func:`dashboard.texts.md`
writes user-provided names as literal text). Everything else is text: HTML in a sentence or a name is
escaped, so a column named ``<script>`` is shown as typed; links and images are not rendered.
"""

from __future__ import annotations

import html
import re

__all__ = ["markdown_html", "inline_html"]

_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")      # CommonMark: a backslash before ASCII punctuation
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_BULLET = re.compile(r"^\s{0,3}[*-]\s+(.*)$")
_NUMBERED = re.compile(r"^\s{0,3}\d{1,3}[.)]\s+(.*)$")
_HARD_BREAK = re.compile(r"(?: {2,}|\\)\n")
_PLACEHOLDER = "\x00{}\x00"


def inline_html(text: str) -> str:
    """One line (or paragraph) of Markdown as HTML: escapes, code, bold, italic; the rest escaped."""
    kept: list[str] = []

    def keep(fragment: str) -> str:
        kept.append(fragment)
        return _PLACEHOLDER.format(len(kept) - 1)

    text = str(text).replace("\x00", "")
    text = _CODE.sub(lambda m: keep(f"<code>{html.escape(m.group(1))}</code>"), text)
    text = _ESCAPED.sub(lambda m: keep(html.escape(m.group(1))), text)
    text = html.escape(text)
    text = _BOLD.sub(r"<b>\1</b>", text)
    text = _ITALIC.sub(r"<em>\1</em>", text)
    return re.sub("\x00(\\d+)\x00", lambda m: kept[int(m.group(1))], text)


def markdown_html(text: str) -> str:
    """A block of Markdown (paragraphs and lists) as HTML: ``<p>``, ``<ul>`` / ``<ol>`` with ``<li>``."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", str(text).strip()):
        out.extend(_block(block))
    return "\n".join(out)


def _block(block: str) -> list[str]:
    """A block without blank lines: paragraph lines, then list items (an item's indented or plain
    following lines continue it, as in Markdown)."""
    out: list[str] = []
    para: list[str] = []
    items: list[list[str]] = []
    kind = ""
    for line in block.splitlines():
        bullet, numbered = _BULLET.match(line), _NUMBERED.match(line)
        m = bullet or numbered
        if m and (not items or kind == ("ul" if bullet else "ol")):
            if para:
                out.append(_paragraph(para))
                para = []
            kind = "ul" if bullet else "ol"
            items.append([m.group(1)])
        elif m:  # the other kind of list starts: close this one
            out.append(_list(kind, items))
            kind, items = ("ul" if bullet else "ol"), [[m.group(1)]]
        elif items:
            items[-1].append(line.strip())
        else:
            para.append(line)
    if para:
        out.append(_paragraph(para))
    if items:
        out.append(_list(kind, items))
    return out


def _paragraph(lines: list[str]) -> str:
    text = _HARD_BREAK.sub("\x01", "\n".join(lines))
    text = " ".join(part.strip() for part in text.splitlines())
    return "<p>" + inline_html(text).replace("\x01", "<br>") + "</p>"


def _list(kind: str, items: list[list[str]]) -> str:
    return f"<{kind}>" + "".join(f"<li>{inline_html(' '.join(i))}</li>" for i in items) + f"</{kind}>"
