"""The charts' log axes as a browser draws them (audit 13, item 5): powers of ten, never SI prefixes.

Plotly's default tick labels on a log axis are SI-prefixed ("100p, 10μ, 100k, 10B"): the Generalization
chart's KL axis read so where a fit at its prior has a KL of 1e-8 and one at α = 0 of 1e5. The figure is
written as the page sends it and drawn by Chromium; the ticks are read from the drawn SVG.
"""

from __future__ import annotations

import re

from dashboard import figures_recal as FR
from kl_studies import election_study

SI = re.compile(r"\d\s*[yzafpnμumkMGTPEB]$")


_study = election_study  # the audit's election file's study (tests/kl_studies.py)


def test_the_kl_axes_read_in_powers_of_ten(page, tmp_path):
    fig = FR.kl_gap_figure(_study(), eps=0.05, n_classes=2)
    path = tmp_path / "kl_gap.html"
    fig.write_html(path, include_plotlyjs=True, full_html=True)
    page.goto(path.as_uri())
    page.wait_for_selector(".xtick text", timeout=30_000)
    ticks = page.eval_on_selector_all(".xtick text, .x2tick text, .y2tick text", "els => els.map(e => e.textContent)")
    assert ticks, "no tick labels drawn"
    assert not [t for t in ticks if SI.search(t.strip())], ticks
    assert any(t.startswith("10") and len(t) > 2 for t in ticks), ticks  # 10 with an exponent: 10⁻⁸ … 10⁵
