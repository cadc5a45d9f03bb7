"""Every table, figure and command reads the one table of metrics (pbr_core.evaluation.METRICS, issue 36)."""

from __future__ import annotations

from dashboard import figures_recal, tables, texts
from pbr_core.cli import build_parser
from pbr_core.evaluation import CV_SCORES, EVALUATION_METRICS, METRICS


def test_the_pages_words_and_formats_come_from_the_metrics_table() -> None:
    for name, metric in METRICS.items():
        assert texts.metric_title(name) == metric.label
        assert texts.COLUMN_TITLES[name] == ("Test ECE" if name == "ece" else metric.label)
        assert tables._FORMATS[name].format(0.123456) == metric.format(0.123456)
    assert texts.CV_SCORE_LABELS == {"ece": "ECE", "brier": "Brier score", "nll": "NLL"}
    assert list(texts.CV_SCORE_LABELS) == list(CV_SCORES)
    assert figures_recal.HIGHLIGHTED == EVALUATION_METRICS


def test_the_commands_choices_come_from_the_metrics_table() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    paired = next(a for a in sub["compare"]._actions if a.dest == "paired_metric")
    alpha = next(a for a in sub["fit"]._actions if a.dest == "alpha_metric")
    assert tuple(paired.choices) == EVALUATION_METRICS and tuple(alpha.choices) == CV_SCORES
