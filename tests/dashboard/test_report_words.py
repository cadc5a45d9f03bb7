"""The report and the words (issue 35): the report renders the pages' Markdown (no raw `*true*`,
list items on their own lines, user names escaped), the session report from any page keeps the
Groups section the user set up, and the words a non-programmer reads: one p-value format, the
paired tests' columns, the restarts from the prior, no 'KITTI included'."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest

import pbr_core
from dashboard import audit, recal_ui, report, state, tables, texts
from dashboard.report_markdown import inline_html, markdown_html
from dashboard.state import SAMPLE_DIR, describe_sample

#: Markdown that a renderer would have turned into formatting: **bold**, *italic*, a list marker.
RAW_MARKDOWN = re.compile(r"\*\*\S|(?<![\w*])\*[A-Za-z][^*\n]*\*(?![\w*])|(?:^|\s)\* [A-Z]")


class _Text(HTMLParser):
    """The text a reader sees (outside scripts, styles and tables' cells) and the list items."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.text: list[str] = []
        self.items = 0

    def handle_starttag(self, tag, attrs):
        if tag not in ("meta", "br"):
            self.stack.append(tag)
        self.items += tag == "li"

    def handle_endtag(self, tag):
        if tag not in ("meta", "br"):
            self.stack.pop()

    def handle_data(self, data):
        if not set(self.stack) & {"script", "style", "table"}:
            self.text.append(data)


def _seen(doc: str) -> tuple[str, int]:
    parser = _Text()
    parser.feed(doc)
    return " ".join(parser.text), parser.items


def test_markdown_subset():
    assert markdown_html("it *falls* like **1/B**") == "<p>it <em>falls</em> like <b>1/B</b></p>"
    assert markdown_html("Intro:\n* one\n  continued\n* two\n\n1. first\n2. second") == (
        "<p>Intro:</p>\n<ul><li>one continued</li><li>two</li></ul>\n<ol><li>first</li><li>second</li></ol>")
    assert inline_html("`pbr-calib apply` and 2*3*4") == "<code>pbr-calib apply</code> and 2*3*4"
    # user-provided names: HTML shown as typed, Markdown escapes (texts.md) as the characters
    name = "<script>alert(1)</script> *v2* p_cat"
    assert inline_html(texts.md(name)) == "&lt;script&gt;alert(1)&lt;/script&gt; *v2* p_cat"
    assert "<script>" not in markdown_html(name) and "&lt;script&gt;" in markdown_html(name)


def _loaded(file_name: str) -> state.Loaded:
    preds = pbr_core.load_predictions(SAMPLE_DIR / file_name)
    return state.Loaded(preds=preds, name=describe_sample(file_name), file_name=file_name, origin="sample",
                        key=f"test:{file_name}", options=state.LoadOptions())


def test_the_audit_report_shows_no_raw_markdown():
    """Every sentence of the audit report (reliability guide, Bins & bias, groups, loader notes) renders:
    before, *true*, *falls* and '* the binning bias ... * the estimation bias' stood in the text."""
    loaded = _loaded("adult_gradient_boosting.csv.gz")
    view = state.metric_view(loaded)
    choices = state.AuditChoices.defaults(view.rows)
    choices = state.AuditChoices(n_bins=choices.n_bins, group_by=("race",))
    doc = report.build_report(audit.audit_sections(loaded, view, choices), data_name=loaded.name)
    text, items = _seen(doc)
    assert not RAW_MARKDOWN.search(text), RAW_MARKDOWN.search(text).group(0)
    assert "<em>true</em>" in doc and "<em>falls</em>" in doc and "<b>binning bias</b>" in doc
    assert items >= 2 + 5  # the bias terms of Bins & bias, the diagram's reading guide
    assert "Calibration by group: race" in text


def test_one_p_value_format_everywhere(compare_result_small):
    assert [texts.p_value(v) for v in (0.04912, 0.0004, 4.69e-7, 1.35e-6, 0.2, float("nan"))] == [
        "0.049", "< 0.001", "< 0.001", "< 0.001", "0.20", "–"]
    paired = tables.paired_frame(compare_result_small.table, multiclass=True)
    p_columns = list(texts.PAIRED_P_COLUMNS)
    assert [c for c in paired.columns if c.startswith("p-value")] == p_columns
    assert not {"t-test p", "Wilcoxon p", "corrected t p"} & set(paired.columns)
    for c in p_columns:
        # two significant digits, cut (0.39, 0.016, 0.0051): one rule in every column (audit 13)
        assert all(v in ("–", "< 0.001", "> 0.99") or re.fullmatch(r"0\.[1-9]\d|0\.0[1-9]\d|0\.00[1-9]\d", v)
                   for v in paired[c]), paired[c]


@pytest.fixture(scope="module")
def compare_result_small(cifar10):
    from dashboard import runs

    logits, labels = cifar10
    preds = pbr_core.Predictions.from_arrays(logits[:1500], labels[:1500])
    s = runs.CompareSettings.of(["uncalibrated", "temperature"], 400, 6, 0)
    return runs.run_compare(preds, s, runs.NullReporter(), data_name="CIFAR-10 sample", data_key="k")


def test_the_words_a_non_programmer_reads():
    restarted = ("L-BFGS: converged (restarted: the first fit ended at the prior, objective 0.181066; from an "
                 "alpha = 0.01 fit it reached 0.172345)")
    words = texts.fit_words(restarted)
    assert "objective" not in words and "0.181066" not in words and "restarted" not in words
    assert "the first fit left the probabilities as they were" in words.replace("\\", "")
    kept = texts.fit_words("reached max_iter=20 (ended at the prior; restarts from smaller alpha did not do better)")
    assert "restarts from smaller alpha" not in kept and "α" in kept
    assert "KITTI" not in texts.binary_ece_caption("top_label")


def test_the_session_report_from_another_page_keeps_the_groups_section():
    """The Groups page's choice outlives the page (persist_state): the report downloaded from PBR or
    Compare groups by it, as the audit report does. Before, Streamlit dropped the widget's value when
    another page showed, and the session report had no Groups section."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(state.ROOT / "dashboard" / "app.py"), default_timeout=120)
    at.run()
    at.selectbox(key="data_sample").set_value("adult_gradient_boosting.csv.gz").run()
    at.switch_page("views/groups.py").run()
    at.selectbox(key="groups_by").set_value("race").run()
    at.switch_page("views/pbr.py").run()
    assert not at.exception
    loaded = at.session_state["pbr_loaded"]
    session = {k: at.session_state[k] for k in recal_ui._CHOICE_KEYS if k in at.session_state}
    view = state.metric_view(loaded)
    choices = recal_ui.audit_choices(view, session=session, data_key=loaded.key)
    assert choices.group_by == ("race",)
    doc = recal_ui.session_report(loaded, view, choices, {})
    assert "Calibration by group: race" in doc
