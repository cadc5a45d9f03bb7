"""The audit report: a plain calibration audit (no recalibration) ends in a self-contained HTML file
with the file, n, K, what is measured, the loader's decisions, the metrics with the ECE interval,
the reliability diagram and bin choice, the classwise ECE, Bins & bias and Theorem 1's bound; every
number is pbr_core's (independent calls here), built without a browser."""

from __future__ import annotations

import html as html_lib
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

import pbr_core
from dashboard import audit, recal_ui, report, runs, state
from dashboard.state import SAMPLE_DIR, describe_sample

_VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}


class _Checker(HTMLParser):
    """Parses the document, checks every non-void tag is closed in order, and collects the text."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.text: list[str] = []
        self.script_src: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "script" and any(k == "src" for k, _ in attrs):
            self.script_src.append(dict(attrs)["src"])
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] not in ("script", "style"):
            self.text.append(data)


def _parse(doc: str) -> str:
    checker = _Checker()
    checker.feed(doc)
    checker.close()
    assert checker.stack == [], checker.stack
    assert checker.script_src == []  # nothing is fetched: self-contained
    return re.sub(r"\s+", " ", " ".join(checker.text))


def _loaded(file_name: str) -> state.Loaded:
    preds = pbr_core.load_predictions(SAMPLE_DIR / file_name)
    return state.Loaded(preds=preds, name=describe_sample(file_name), file_name=file_name, origin="sample",
                        key=f"test:{file_name}")


def _arr(value) -> np.ndarray:
    """A plotly JSON array: a list, or a typed array {"dtype": "f8", "bdata": base64}."""
    if isinstance(value, dict):
        import base64

        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return np.asarray(value, dtype=float)


def _figures(doc: str) -> list[dict]:
    """The plotly figures of the document (their JSON data as plotly.io.to_html writes it)."""
    out = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{"displaylogo"', doc, re.S):
        out.append({"data": json.loads(m.group(1)), "layout": json.loads(m.group(2))})
    return out


@pytest.fixture(scope="module")
def cifar10_audit() -> tuple[state.Loaded, state.MetricView, audit.AuditChoices, str]:
    loaded = _loaded("cifar10_resnet110.npz")
    view = state.metric_view(loaded, "top_label")
    choices = audit.AuditChoices(n_bins=7, lipschitz=2.0, eps=0.1, bmax=40)
    return loaded, view, choices, recal_ui.session_report(loaded, view, choices, {})


def test_a_plain_audit_report_holds_every_part(cifar10_audit):
    loaded, view, choices, doc = cifar10_audit
    text = _parse(doc)
    p = loaded.preds
    # The file, n, K, kind, what is measured, and the loader's decisions as a list.
    for part in ("cifar10_resnet110.npz", "Rows n 10,000", "Classes K 10", "Kind multiclass", "Scores logits",
                 "the confidence of the predicted class (top-label calibration)"):
        assert part in text, part
    assert p.notes and all(f"<li>{html_lib.escape(n)}</li>" in doc for n in p.notes)
    # The metric cards at the page's B = 7, with the ECE interval (pbr_core's, same bootstrap).
    s = pbr_core.calibration_summary(p.probs, p.labels, n_bins=7)
    assert f"ECE {s['ece']:.4f} {s['ece_ci_low']:.4f} – {s['ece_ci_high']:.4f}" in text
    # multiclass: of the whole vector, named so as on the page's cards (audit 13 item 10)
    for name, key in (("MCE", "mce"), ("Brier score (all classes)", "brier"), ("NLL (true class)", "nll")):
        assert f"{name} {s[key]:.4f}" in text
    assert f"Accuracy {s['accuracy']:.2%}" in text
    # The bin choice and Theorem 1 at that B, with the Bins & bias page's L and eps.
    assert "B = 7 bins of equal width, chosen on the Reliability page" in text
    assert f"floor(n^(1/3)) = {pbr_core.optimal_n_bins(p.n)}" in text
    # the test in plain words, its names in a paragraph after it (audit 14, item 2)
    sentence = text.split("Is this model calibrated?")[1].split("About the test:")[0]
    assert "neither too extreme nor too timid" in sentence and "Cox" not in sentence
    assert "About the test: The test of calibration over all rows" in text and "Spiegelhalter's z" in text
    bound = pbr_core.theorem1_bound(p.n, 7, lipschitz=2.0, eps=0.1)
    assert f"Theorem 1 at B = 7 (L = 2, ε = 0.1): with probability 90%, |TCE − ECE| ≤ {bound:.4f}" in text
    # Classwise ECE (multiclass), the mean and every class.
    mean = pbr_core.classwise_ece(p.probs, p.labels, n_bins=7)
    assert f"Classwise ECE (mean over the 10 classes) at B = 7: {mean:.4f}" in text
    per_class = pbr_core.classwise_ece(p.probs, p.labels, n_bins=7, reduce=False)
    assert f"{per_class.max():.4f}" in text
    # Bins & bias: the chosen L, eps, largest B and the bound-minimising B.
    b_min = pbr_core.bound_minimizing_n_bins(p.n, lipschitz=2.0, eps=0.1)
    assert "Lipschitz constant L 2" in text and "ε (failure probability) 0.1" in text and "Largest B shown 40" in text
    assert f"Bound-minimising B {b_min}" in text
    assert "No recalibration has been run in this session yet." in text
    # plotly.js once, three interactive charts: the reliability diagram at B = 7, the CORP diagram and
    # ECE against B = 1..40.
    assert doc.count("* plotly.js") == 1 and doc.count("Plotly.newPlot") == 3
    rel, corp, bins = _figures(doc)
    # CORP: the PAV curve of the library, the score decomposition and the log loss's split in words.
    conf, out = pbr_core.metrics.confidence_and_outcome(p.probs, p.labels)
    curve = next(t for t in corp["data"] if t.get("name") == "CORP: PAV-recalibrated probability")
    np.testing.assert_allclose(_arr(curve["y"]), pbr_core.corp.corp_reliability(conf, out).recalibrated, rtol=0,
                               atol=1e-12)
    brier = pbr_core.corp.score_decomposition(conf, out, "brier")
    assert f"Brier score {brier.score:.4f} = miscalibration {brier.mcb:.4f} − discrimination {brier.dsc:.4f}" in text
    chance = pbr_core.corp.mcb_against_chance(conf, out)  # whether MCB is more than chance (audit 3, A2)
    assert "more than chance alone gives" in text and f"at or below {chance['brier'].chance_high:.4f}" in text
    assert "MCB beyond chance?" in text and "yes: partly removable" in text
    split = pbr_core.corp.log_loss_split(p.logits, p.labels)
    assert f"whole probability vector is {split['log_loss']:.4f}" in text
    acc = next(t for t in rel["data"] if t.get("name") == "Accuracy per bin")
    np.testing.assert_allclose(_arr(acc["y"]), pbr_core.reliability_diagram(p.probs, p.labels, 7)["accuracy"],
                               rtol=0, atol=1e-12, equal_nan=True)
    ece_trace = next(t for t in bins["data"] if t.get("name") == "ECE (this data)")
    np.testing.assert_allclose(_arr(ece_trace["y"]), pbr_core.ece_curve(p.probs, p.labels, range(1, 41)), rtol=0, atol=1e-12)


def test_binary_audit_uses_the_p_positive_words_and_has_no_classwise_part():
    loaded = _loaded("kitti_xgboost.csv")
    view = state.metric_view(loaded, "positive")
    doc = recal_ui.session_report(loaded, view, audit.AuditChoices.defaults(view.n), {})
    text = _parse(doc)
    assert "the predicted probability of the positive class, p(y=1)" in text and "Classwise" not in text
    rel = _figures(doc)[0]
    names = [t.get("name") for t in rel["data"] if t.get("showlegend") is not False]
    assert names[:3] == ["Observed frequency of y = 1 per bin", "Over-prediction gap", "Under-prediction gap"]
    assert f"B = {pbr_core.optimal_n_bins(view.n)} bins of equal width, the paper's choice" in text


def test_top_label_only_audit_scores_the_confidence_against_correctness():
    loaded = _loaded("cifar10_resnet110_toplabel.csv")
    view = state.metric_view(loaded)
    text = _parse(recal_ui.session_report(loaded, view, audit.AuditChoices.defaults(view.n), {}))
    scores = pbr_core.metrics.target_brier_nll(*loaded.preds.metric_inputs())
    assert f"Brier score {scores['brier']:.4f}" in text and f"NLL {scores['nll']:.4f}" in text
    assert "n/a" not in text and "Kind top-label" in text


def test_the_session_report_puts_the_audit_before_the_recalibration_results(cifar10_audit):
    loaded, view, choices, _ = cifar10_audit
    preds = loaded.preds.subset(np.arange(2000))
    result = runs.run_compare(preds, runs.CompareSettings.of(["uncalibrated", "temperature"], 400, 2, 0),
                              runs.NullReporter(), data_name="CIFAR-10 slice", data_key="k")
    doc = recal_ui.session_report(loaded, view, choices, {"compare": result})
    titles = re.findall(r"<h2>(.*?)</h2>", doc)
    assert titles == ["The data", "Calibration: the reliability diagram",
                      "Without bins: the CORP reliability diagram, and what the score is made of",
                      "Classwise ECE (every class, not only the predicted one)",
                      "Bins &amp; bias: how far the ECE can be from the truth (Theorem 1)", "Comparison of recalibrators"]
    text = _parse(doc)
    assert "No recalibration has been run" not in text
    assert f"Data: {loaded.name}, CIFAR-10 slice" in text


def test_audit_choices_follow_the_pages_for_this_data_only():
    loaded = _loaded("cifar10_resnet110.npz")
    view = state.metric_view(loaded, "top_label")
    d = audit.AuditChoices.defaults(view.n)
    assert (d.n_bins, d.lipschitz, d.eps, d.bmax) == (21, 1.0, 0.05, 100)
    assert recal_ui.audit_choices(view, session={}) == d
    visited = {"rel_n_bins": 9, "rel_n_bins_for": view.key, "bins_lipschitz": 3.0, "bins_eps": 0.01,
               "bins_bmax": 60, "bins_for": view.key}
    assert recal_ui.audit_choices(view, session=visited) == audit.AuditChoices(9, 3.0, 0.01, 60)
    assert recal_ui.audit_choices(view, n_bins=12, session=visited).n_bins == 12   # the Reliability page's own B
    other = {**visited, "rel_n_bins_for": "another file", "bins_for": "another file"}
    assert recal_ui.audit_choices(view, session=other) == audit.AuditChoices(21, 3.0, 0.01, 100)


def test_report_sections_list_bullets_and_name_their_settings():
    sec = report.ReportSection(title="T", settings={"a": 1}, settings_title="The file", bullets=["x < y", "**b**"],
                               bullets_title="Decisions")
    doc = report.build_report([sec], data_name="d")
    assert "<h3>The file</h3>" in doc and "<h3>Decisions</h3><ul><li>x &lt; y</li><li><b>b</b></li></ul>" in doc
    _parse(doc)


def test_report_tables_show_no_plain_row_numbers():
    """The HTML reports leaked pandas' 0, 1, 2... index as an unlabelled first column (Compare's
    every-fold table, the Generalization tables); a labelled index (the bounds' names) stays."""
    import pandas as pd

    plain = report._table_html(pd.DataFrame({"method": ["a", "b"], "ece": [0.01, 0.02]}))
    assert "<th></th>" not in plain and "<th>0</th>" not in plain and "<th>method</th>" in plain
    labelled = report._table_html(pd.DataFrame({"value": [1.5]}, index=["KL"]))
    assert "<th>KL</th>" in labelled


def test_a_top_label_report_says_the_file_cannot_be_recalibrated():
    """Audit 12a: on top-label (confidence, correct) data the Recalibration part said the pages'
    results "join this report when run", while those pages refuse such a file."""
    from dashboard import texts

    loaded = _loaded("cifar10_resnet110_toplabel.csv")
    assert not loaded.preds.can_recalibrate
    view = state.metric_view(loaded)
    text = _parse(recal_ui.session_report(loaded, view, audit.AuditChoices.defaults(view.n), {}))
    assert "join this report when run" not in text and "No recalibration has been run" not in text
    assert "so it cannot be recalibrated" in text and re.sub(r"\s+", " ", texts.NO_RECAL_TOP_LABEL) in text
    full = _loaded("kitti_xgboost.csv")
    view = state.metric_view(full, "positive")
    text = _parse(recal_ui.session_report(full, view, audit.AuditChoices.defaults(view.n), {}))
    assert "No recalibration has been run in this session yet. " + texts.NO_RECAL_YET in text


def test_long_table_captions_are_caption_text_not_headings(cifar10_audit):
    """Audit 12a: the estimators' and the slices' explanations were set as large bold <h3> headings;
    a caption is its short title as a heading and its explanation as caption text."""
    _, _, _, doc = cifar10_audit
    heads = re.findall(r"<h3>(.*?)</h3>", doc, re.S)
    assert heads and max(len(h) for h in heads) <= report._HEADING_MAX_CHARS, max(heads, key=len)
    assert "<h3>Other estimators, and the ECE other libraries would report</h3><div class=\"caption\"><p>" in doc
    caption = report._table_caption_html("Every slice tested on held-out rows\n\nEach row is **one** slice.")
    assert caption == ('<h3>Every slice tested on held-out rows</h3><div class="caption"><p>Each row is '
                       '<b>one</b> slice.</p></div>')
    long = "A caption of many words " * 6
    assert report._table_caption_html(long).startswith('<div class="caption"><p>A caption')
    assert report._table_caption_html("Every fold") == "<h3>Every fold</h3>"
