"""The HTML report's table captions in a real browser (audit 12a, shots c_rep1 / c_rep2): the
explanations above the estimators' and the slices' tables were large bold headings. Their title is a
small heading, the explanation ordinary caption text (the size and weight of a figure caption)."""

from __future__ import annotations

import pbr_core
from dashboard import audit, recal_ui, state
from dashboard.state import SAMPLE_DIR, describe_sample


def test_a_long_table_caption_is_set_as_caption_text(page, tmp_path):
    name = "cifar10_resnet110.npz"
    loaded = state.Loaded(preds=pbr_core.load_predictions(SAMPLE_DIR / name), name=describe_sample(name),
                          file_name=name, origin="sample", key=f"test:{name}")
    view = state.metric_view(loaded, "top_label")
    path = tmp_path / "report.html"
    path.write_text(recal_ui.session_report(loaded, view, audit.AuditChoices.defaults(view.n), {}))
    page.route("http*://**", lambda route: route.abort())  # the report fetches nothing
    page.goto(path.as_uri())
    explanation = page.get_by_text("The same predictions, measured the ways people do.")
    style = explanation.evaluate("e => { const s = getComputedStyle(e); return [s.fontSize, s.fontWeight, "
                                 "e.closest('h1, h2, h3, h4') !== null]; }")
    assert style == ["14px", "400", False], style
    title = page.locator("h3", has_text="Other estimators, and the ECE other libraries would report")
    assert title.count() == 1
    # Every heading of the document is short: none of them is a paragraph set large and bold.
    heads = page.locator("h3").all_inner_texts()
    assert max(len(h) for h in heads) <= 100, max(heads, key=len)
