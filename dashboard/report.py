"""A self-contained HTML report of the session: the calibration audit and the recalibration results
(pure: no Streamlit).

:func:`build_report` writes one HTML file: a header (data name, date), then one section per part
(the audit's sections come from :mod:`dashboard.audit`) with its tables and interactive plotly charts. plotly.js is inlined ONCE in the head,
so the file opens offline and never fetches anything (no CDN). The ``*_section`` functions turn
the results of :mod:`dashboard.runs` into sections; they only assemble: every figure, table and
sentence comes from the pure builders the pages call too (:mod:`dashboard.figures_recal`,
:mod:`dashboard.tables`, :mod:`dashboard.texts`), so a page and its report part cannot drift apart.
"""

from __future__ import annotations

import datetime as _dt
import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from pandas.io.formats.style import Styler

from dashboard import tables, texts
from dashboard import figures_recal as FR
from dashboard.report_markdown import inline_html, markdown_html

if TYPE_CHECKING:
    from dashboard import runs

_PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
NOTHING_RUN = "No recalibration has been run in this session yet."


@dataclass
class ReportSection:
    """One part of the report: a heading, paragraphs, settings, a bullet list, tables and figures, in that order."""

    title: str
    paragraphs: list[str] = field(default_factory=list)       # Markdown blocks (dashboard.report_markdown)
    settings: Mapping[str, Any] = field(default_factory=dict)
    settings_title: str = "Settings"
    bullets: list[str] = field(default_factory=list)          # Markdown, one line each
    bullets_title: str = ""
    #: (caption, table): the caption's title, then after a blank line what the table holds (caption text)
    tables: list[tuple[str, pd.DataFrame | Styler]] = field(default_factory=list)
    figures: list[tuple[str, go.Figure]] = field(default_factory=list)   # (Markdown caption, figure)


def _text(s: str) -> str:
    out = html.escape(str(s))
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)


def _settings_table(settings: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th>{_text(k)}</th><td>{_text(v)}</td></tr>" for k, v in settings.items())
    return f'<table class="settings">{rows}</table>'


def _table_html(table: pd.DataFrame | Styler) -> str:
    if isinstance(table, Styler):  # formatted by its builder (tables.fold_styler, FR.summary_styler)
        # hide(axis="index") hides the row numbers; names=True alone hid only the index's name, and the
        # report's "Every fold" table showed a 0, 1, 2... column (a user audit)
        return table.hide(axis="index").to_html()
    # A plain 0..n-1 index means nothing to a reader (the pages hide it too); a named or labelled one
    # (the bounds' "KL", "ECE on the rows"...) is part of the table.
    plain = isinstance(table.index, pd.RangeIndex) and table.index.name is None
    return table.to_html(border=0, classes="data", float_format=lambda v: f"{v:.4f}", na_rep="–", index=not plain)


#: A table caption longer than this, with no title of its own, is not a heading.
_HEADING_MAX_CHARS = 100


def _table_caption_html(caption: str) -> str:
    """A table's caption: its title as a small heading, and what follows a blank line (``"Title\\n\\n
    what the table holds..."``) as ordinary caption text above the table. A long caption with no
    title is caption text as a whole (audit 12a: two paragraphs were set as large bold headings)."""
    title, _, note = caption.partition("\n\n")
    if len(title) > _HEADING_MAX_CHARS:
        title, note = "", caption.replace("\n\n", " ")
    head = f"<h3>{inline_html(title)}</h3>" if title else ""
    return head + (f'<div class="caption">{markdown_html(note)}</div>' if note.strip() else "")


def _figure_html(fig: go.Figure) -> str:
    return pio.to_html(fig, include_plotlyjs=False, full_html=False, config=_PLOTLY_CONFIG)


_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: #1f2430;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; line-height: 1.45; }
h1 { margin-bottom: .2em; } h2 { border-bottom: 2px solid #3b6fb6; padding-bottom: .2em; margin-top: 2em; }
.meta { color: #555; }
table { border-collapse: collapse; margin: .8em 0; font-size: 14px; }
th, td { border: 1px solid #d8dce6; padding: 4px 10px; text-align: right; }
th { background: #f3f5f9; }
table.settings th { text-align: left; } table.settings td { text-align: left; }
figure { margin: 1em 0; } figcaption, .caption { color: #555; font-size: 14px; }
nav ul { columns: 2; }
"""


def build_report(sections: Sequence[ReportSection], *, data_name: str,
                 created: _dt.datetime | None = None, title: str = "pbr-calib report") -> str:
    """The whole HTML document as a string (self-contained: plotly.js is inlined once).

    Parameters
    ----------
    sections : sequence of ReportSection
        In order; an empty sequence gives a report that says nothing has been run yet.
    data_name : str
        The prediction file the results are about (shown in the header).
    created : datetime, optional
        Time stamp of the header (default: now).
    """
    from plotly.offline import get_plotlyjs

    created = created or _dt.datetime.now()
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_text(title)}: {_text(data_name)}</title>", f"<style>{_CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>', "</head><body>",
        f"<header><h1>{_text(title)}</h1>",
        f'<p class="meta">Data: <b>{_text(data_name)}</b> · created {created:%Y-%m-%d %H:%M} · '
        "calibration measured with the binned ECE of Fujisawa &amp; Futami (ICML 2025); each part says "
        "its number of bins B.</p></header>",
    ]
    if not sections:
        parts.append(f"<p>{_text(NOTHING_RUN)}</p>")
    else:
        parts.append("<nav><b>Contents</b><ul>" + "".join(
            f'<li><a href="#s{i}">{_text(s.title)}</a></li>' for i, s in enumerate(sections)) + "</ul></nav>")
    for i, s in enumerate(sections):
        parts.append(f'<section id="s{i}"><h2>{_text(s.title)}</h2>')
        parts.extend(markdown_html(p) for p in s.paragraphs)
        if s.settings:
            parts.append(f"<h3>{_text(s.settings_title)}</h3>" + _settings_table(s.settings))
        if s.bullets:
            parts.append((f"<h3>{_text(s.bullets_title)}</h3>" if s.bullets_title else "") + "<ul>" +
                         "".join(f"<li>{inline_html(b)}</li>" for b in s.bullets) + "</ul>")
        for caption, table in s.tables:
            parts.append(_table_caption_html(caption) + _table_html(table))
        for caption, fig in s.figures:
            parts.append(f"<figure>{_figure_html(fig)}<figcaption>{markdown_html(caption)}</figcaption></figure>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


# --------------------------------------------------------------------------- sections from results
def _stamp(result: runs.JobResult) -> str:
    return _dt.datetime.fromtimestamp(result.created).strftime("%Y-%m-%d %H:%M")


def _partial(result: runs.JobResult, done: int, total: int) -> list[str]:
    return [texts.PARTIAL_NOTE.format(done=done, total=total)] if result.stopped else []


def pbr_section(result: runs.PBRResult) -> ReportSection:
    s = result.settings
    binary_positive = result.binary_positive
    before, after = FR.pbr_reliability_figures(result, binary_positive)
    settings = dict(texts.settings_words(s))
    if result.alpha is not None and s.alpha is None:
        settings["α chosen"] = f"{result.alpha:g}"
    settings["Computed"] = _stamp(result)
    fr = result.fit_report
    if fr:
        from pbr_core.recalibrators.gp import mc_description

        settings["Fit"] = (f"{fr.get('iterations', '?')} iterations, {fr.get('wall_time_s', float('nan')):.1f} s "
                           f"on {fr.get('device', '?')}"
                           + (f", {mc_description(fr)}" if mc_description(fr) else ""))
    paragraphs = [f"{texts.method_label(s.method)} fitted on {s.n_re:,} rows, evaluated on the other "
                  f"{result.n_te:,} rows (test part)."]
    if result.preds.kind == "binary":  # which ECE, as on the page
        paragraphs.append("ECE: " + texts.binary_ece_caption(s.binary_ece))
    note = texts.at_prior_note(result.at_prior, result.alpha, s.n_re,
                               cv_grid=tables.cv_scored_alphas(s.alpha, result.alpha_scores))
    if note:
        paragraphs.append(note)
    worse = tables.pbr_worse_on_test_note(result)
    if worse:
        paragraphs.append(worse)
    fall = tables.pbr_ece_fall_note(result)
    if fall:
        paragraphs.append(fall)
    extreme = tables.pbr_extreme_kl_note(result)
    if extreme:
        paragraphs.append(extreme)
    # What the page shows under the fit's cards: the optimiser's warnings, failed fits of the α grid.
    paragraphs += ["Warning: " + texts.fit_words(w) for w in (fr or {}).get("warnings") or []]
    shown: list[tuple[str, pd.DataFrame | Styler]] = [("Test metrics before and after", tables.pbr_metrics_frame(result))]
    if result.bounds:
        eps = s.eps
        n = result.n_bound or s.n_re
        c1, c2 = result.bounds["corollary1"], result.bounds["corollary2"]
        paragraphs += [f"KL = {result.kl:.4g}. " + texts.BOUNDS_INTRO,
                       "Bounds: " + texts.bound_validity(result.bound_prior, n, s.n_re),
                       "Corollary 1: " + texts.corollary1_reading(c1, n, eps, result.ece_re),
                       "Corollary 2: " + texts.corollary2_reading(c2, eps, result.ece_re)]
        if s.objective == "pbr_total":
            paragraphs.append(texts.PBR_TOTAL_BOUND_NOTE)
        validity = "valid as stated" if result.bound_prior == "split" else "approximate: prior fitted on the same rows"
        shown.append((f"Bounds ({validity})", pd.DataFrame({"value": [result.kl, result.ece_re, c1, c2]}, index=[
            "KL(ρ‖π)", f"ECE on the {n:,} bound rows (B = {result.n_bins_re})",
            f"Corollary 1 bound on E_ρ gap ({1 - eps:.0%})",
            f"Corollary 2 bound on E_ρ |TCE − ECE| ({1 - eps:.0%}, L = {s.lipschitz:g})"])))
    figs = [("Before recalibration (test part)", before), ("After recalibration (test part)", after)]
    if result.alpha_scores is not None and len(result.alpha_scores):
        score = texts.CV_SCORE_LABELS.get(s.cv_score, s.cv_score)
        figs.append(("Automatic choice of α: " + texts.alpha_scores_help(s.cv_score, s.n_re, s.cv_folds, result.n_te),
                     FR.alpha_selection_figure(result.alpha_scores, result.alpha, score_name=score)))
        shown.append(("Cross-validated score per α", tables.alpha_scores_frame(result.alpha_scores, score)))
    return ReportSection(title=f"Recalibration: {texts.method_label(s.method)}", paragraphs=paragraphs,
                         settings=settings, tables=shown, figures=figs)


def apply_section(result: runs.ApplyResult) -> ReportSection:
    """A recalibrator fitted on the Fit & apply page, or loaded from a file and applied there."""
    label = texts.method_label(result.method)
    binary_positive = result.binary_positive
    before, after = FR.pbr_reliability_figures(result, binary_positive, ece_name="ECE", method=label)
    if result.settings is not None:
        settings = dict(texts.settings_words(result.settings))
    else:
        settings = {"Recalibrator": result.origin, "Settings": texts.recalibrator_settings(result.recalibrator)}
    settings["Computed"] = _stamp(result)
    paragraphs = [f"{result.origin}; measured on {result.evaluated_on}."]
    if result.fit_row_check is not None:  # as on the page: were these rows used to fit it?
        from pbr_core.experiments import MIN_TEST_ROWS

        paragraphs.append(texts.fit_rows_check(result.fit_row_check, MIN_TEST_ROWS))
    if result.tests is not None:  # as on the page: is each side calibrated beyond chance on these rows?
        paragraphs.append(texts.held_out_tests(result.tests, result.n_eval,
                                               (result.reliability_before, result.reliability_after),
                                               (result.before["ece"], result.after["ece"])))
    if result.preds.kind == "binary":  # which ECE, as on the page
        paragraphs.append("ECE: " + texts.binary_ece_caption(result.binary_ece))
    if result.unmeasured_small_file:  # as on the page: unmeasured, below the other pages' size
        from pbr_core.experiments import MIN_FIT_ROWS, MIN_TEST_ROWS

        paragraphs.append("Warning: " + texts.ship_small_file_warning(result.preds.n, MIN_FIT_ROWS, MIN_TEST_ROWS,
                                                                          result.in_sample))
    elif result.in_sample and result.fit_row_check is None:  # a check's own sentence says it is in-sample
        paragraphs.append(texts.SHIP_IN_SAMPLE)
    note = texts.at_prior_note(result.at_prior, result.recalibrator.get_params().get("alpha"), result.n_fit)
    if note:
        paragraphs.append(note)
    paragraphs += [f"Note: {texts.fit_words(n)}" for n in result.notes]
    if result.interval is not None:  # a Venn-Abers predictor's intervals, as on the page
        paragraphs.append(texts.venn_abers_interval_words(result.interval))
    return ReportSection(title=f"{'Fitted for download' if result.settings is not None else 'Saved recalibrator'}: {label}",
                         paragraphs=paragraphs, settings=settings,
                         tables=[("Metrics before and after", tables.pbr_metrics_frame(result))],
                         figures=[("Before recalibration", before), ("After recalibration", after)])


def compare_section(result: runs.CompareResult) -> ReportSection:
    kind = result.kind
    multiclass = kind == "multiclass"
    binary_positive = result.binary_positive
    settings = {**texts.settings_words(result.settings, multiclass), "Computed": _stamp(result)}
    paragraphs = _partial(result, len(result.table), result.planned) + [texts.SUMMARY_HELP]
    shown: list[tuple[str, pd.DataFrame | Styler]] = []
    if kind == "binary":
        paragraphs.append("ECE: " + texts.binary_ece_caption(result.settings.binary_ece))
    if len(result.table):
        paragraphs += tables.compare_at_prior_notes(result)
        _, styled = tables.compare_tables(result.table, multiclass)
        shown.append(("Test metrics, mean ± std over folds", styled))
        paragraphs.append(tables.best_note(result.table))  # what is green, or why nothing is
        paired = tables.paired_frame(result.table, multiclass)
        if len(paired):
            paragraphs += [texts.PAIRED_INTRO, texts.PAIRED_HELP]
            shown.append(("Paired tests over folds (test ECE)", paired))
        shown.append(("Every fold", tables.fold_styler(result.table, multiclass)))
    return ReportSection(title="Comparison of recalibrators", paragraphs=paragraphs, settings=settings,
                         tables=shown, figures=FR.compare_figures(result, binary_positive, multiclass))


def sweep_section(result: runs.SweepResult) -> ReportSection:
    multiclass = result.kind == "multiclass"
    settings = {**texts.settings_words(result.settings, multiclass), "Computed": _stamp(result)}
    figs, shown = [], []
    total = len(result.settings.methods) * len(result.settings.n_re_values) * result.settings.n_folds
    paragraphs = _partial(result, len(result.table), total) + [texts.SWEEP_INTRO]
    if len(result.table):
        figs.append((texts.SWEEP_CAPTION, FR.sweep_figure(result)))
        paragraphs += tables.sweep_at_prior_notes(result)
        shown.append(("Every fit", tables.fold_styler(result.table, multiclass)))
    return ReportSection(title="Test ECE against the recalibration set size", settings=settings,
                         paragraphs=paragraphs, tables=shown, figures=figs)


def group_gap_section(result: runs.GroupGapResult) -> ReportSection:
    """Does recalibration close the gaps between groups (Compare page)?"""
    from pbr_core.experiments.group_gaps import MIN_FIT_ROWS, MIN_GROUP_TEST_ROWS, group_gap_summary, group_gap_tests

    multiclass = result.kind == "multiclass"
    settings = {**texts.settings_words(result.settings, multiclass), "Computed": _stamp(result)}
    paragraphs = _partial(result, result.table["fold"].nunique() if len(result.table) else 0,
                          result.settings.n_folds) + [texts.GROUP_GAP_INTRO.format(m=MIN_FIT_ROWS, t=MIN_GROUP_TEST_ROWS)]
    figs, shown = [], []
    unmeasured = tables.group_gap_unmeasured(result.table) if len(result.table) else []
    if unmeasured:
        paragraphs.append(texts.group_gap_unmeasured(unmeasured, MIN_GROUP_TEST_ROWS))
    if len(result.table):
        per_group, _ = group_gap_summary(result.table)
        wide, gaps = tables.group_gap_frames(result.table)
        figs.append((texts.GROUP_GAP_CAPTION, FR.group_gap_figure(per_group)))
        paragraphs.append(texts.group_gap_verdicts(group_gap_tests(result.table), int(result.table["fold"].nunique())))
        shown += [("Test ECE of each group", wide.set_index("Group")),
                  ("The gap between groups\n\n" + texts.GROUP_GAP_GAPS_HELP, gaps.set_index("Strategy"))]
    return ReportSection(title="Does recalibration close the gaps between groups?", settings=settings,
                         paragraphs=paragraphs, tables=shown, figures=figs)


def generalization_section(result: runs.GenResult) -> ReportSection:
    from pbr_core.experiments import folds_overlap_too_much

    res = result.result
    s = result.settings
    settings = {**texts.settings_words(s), "Computed": _stamp(result)}
    fk = res.across_folds
    paragraphs = _partial(result, len(res.table), len(s.alphas) * s.n_folds) + [
        texts.GEN_INTRO, texts.correlation_reading(fk.verdict, fk.mean_tau, fk.folds_positive, fk.folds_negative,
                                                   fk.folds, fk.smallest_p, n_re=s.n_re, n_rows=result.n_rows)]
    figs, shown = [], []
    if result.n_classes == 2:  # binary data: which ECE the gaps are of, as on the page
        paragraphs.append("ECE: " + texts.binary_ece_caption(s.binary_ece))
    if len(res.table):
        extreme = tables.extreme_kl_note(res.table, result.n_classes) if result.n_classes else None
        if extreme:  # as on the page: said, marked on the chart (log KL), out of the KL and bound means
            paragraphs.append(extreme)
        figs.append((texts.kl_gap_caption(s.n_re, s.eps),
                     FR.kl_gap_figure(res.table, eps=s.eps, n_classes=result.n_classes)))
        not_read = result.n_rows is not None and folds_overlap_too_much(s.n_re, result.n_rows)
        shown.append(("Correlation between KL and ECE gap", tables.correlations_frame(res, not_read=not_read)))
        shown.append(("Per α, mean over folds",
                      tables.per_alpha_styler(tables.per_alpha_frame(res.table, s.eps, result.n_classes))))
        shown.append(("Every fit", tables.fold_styler(res.table)))
    return ReportSection(title=f"Generalization: KL against ECE gap ({texts.method_label(s.objective)})",
                         paragraphs=paragraphs, settings=settings, tables=shown, figures=figs)
