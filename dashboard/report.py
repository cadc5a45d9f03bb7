"""A self-contained HTML report of the session: the calibration audit and the recalibration results
(pure: no Streamlit).

:func:`build_report` writes one HTML file: a header (data name, date), then one section per part
(the audit's sections come from :mod:`dashboard.audit`) with its tables and interactive plotly charts. plotly.js is inlined ONCE in the head,
so the file opens offline and never fetches anything (no CDN). The ``*_section`` functions turn
the results of :mod:`dashboard.runs` into sections with the same builders the pages use.
"""

from __future__ import annotations

import datetime as _dt
import html
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from pandas.io.formats.style import Styler

from dashboard import figures, tables, texts
from dashboard import figures_recal as FR
from pbr_core.experiments import best_mask, summarize, summary_table

_PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
NOTHING_RUN = "No recalibration has been run in this session yet."


@dataclass
class ReportSection:
    """One part of the report: a heading, paragraphs, settings, a bullet list, tables and figures, in that order."""

    title: str
    paragraphs: list[str] = field(default_factory=list)       # plain text; **bold** is honoured
    settings: Mapping[str, Any] = field(default_factory=dict)
    settings_title: str = "Settings"
    bullets: list[str] = field(default_factory=list)
    bullets_title: str = ""
    tables: list[tuple[str, pd.DataFrame | Styler]] = field(default_factory=list)
    figures: list[tuple[str, go.Figure]] = field(default_factory=list)   # (caption, figure)


def _text(s: str) -> str:
    out = html.escape(str(s))
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)


def _settings_table(settings: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th>{_text(k)}</th><td>{_text(v)}</td></tr>" for k, v in settings.items())
    return f'<table class="settings">{rows}</table>'


def _table_html(table: pd.DataFrame | Styler) -> str:
    if isinstance(table, Styler):  # formatted by its builder (tables.fold_styler, FR.summary_styler)
        return table.hide(axis="index", names=True).to_html()
    return table.to_html(border=0, classes="data", float_format=lambda v: f"{v:.4f}", na_rep="–")


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
figure { margin: 1em 0; } figcaption { color: #555; font-size: 14px; }
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
        parts.extend(f"<p>{_text(p)}</p>" for p in s.paragraphs)
        if s.settings:
            parts.append(f"<h3>{_text(s.settings_title)}</h3>" + _settings_table(s.settings))
        if s.bullets:
            parts.append((f"<h3>{_text(s.bullets_title)}</h3>" if s.bullets_title else "") + "<ul>" +
                         "".join(f"<li>{_text(b)}</li>" for b in s.bullets) + "</ul>")
        for caption, table in s.tables:
            parts.append(f"<h3>{_text(caption)}</h3>{_table_html(table)}")
        for caption, fig in s.figures:
            parts.append(f"<figure>{_figure_html(fig)}<figcaption>{_text(caption)}</figcaption></figure>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


# --------------------------------------------------------------------------- sections from results
def _stamp(result: Any) -> str:
    return _dt.datetime.fromtimestamp(result.created).strftime("%Y-%m-%d %H:%M")


def _partial(result: Any, done: int, total: int) -> list[str]:
    return [texts.PARTIAL_NOTE.format(done=done, total=total)] if result.stopped else []


def pbr_metrics_frame(result: Any) -> pd.DataFrame:
    """Test metrics before and after, one column each (for the page's table and the report)."""
    rows = ["ece", "accuracy", "nll", "brier"]
    return pd.DataFrame({"before (uncalibrated)": [result.before[k] for k in rows],
                         "after": [result.after[k] for k in rows]},
                        index=[FR.metric_title(k) for k in rows])


def alpha_scores_frame(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Display form of ``AlphaSelection.summary``: α, mean ± std of the held-out score, mean KL."""
    out = pd.DataFrame({"α": summary["alpha"], f"held-out {metric} (mean)": summary["mean"],
                        "std": summary.get("std")})
    if "kl_mean" in summary:
        out["KL (mean)"] = summary["kl_mean"]
    return out


def pbr_reliability_figures(result: Any, binary_positive: bool, ece_name: str = "test ECE",
                            method: str | None = None) -> tuple[go.Figure, go.Figure]:
    """Reliability diagrams before and after of a result with ``before`` / ``after`` metrics and
    ``reliability_before`` / ``reliability_after`` tables (PBR page, Fit & apply page)."""
    b, a = result.before["ece"], result.after["ece"]
    method = method or texts.method_label(result.settings.method)
    x_title, y_title = axis_titles(binary_positive)
    common = dict(x_title=x_title, y_title=y_title, binary_positive=binary_positive, height=520)
    return (figures.reliability_figure(result.reliability_before,
                                       title=f"Before: uncalibrated · {ece_name} {b:.4f}", **common),
            figures.reliability_figure(result.reliability_after,
                                       title=f"After: {method} · {ece_name} {a:.4f}", **common))


def axis_titles(binary_positive: bool) -> tuple[str, str]:
    if binary_positive:
        return "Predicted probability p(y=1)", "Observed frequency of y = 1"
    return "Confidence (probability of the predicted class)", "Accuracy"


def pbr_section(result: Any) -> ReportSection:
    s = result.settings
    binary_positive = result.preds.kind == "binary" and s.binary_ece == "positive"
    before, after = pbr_reliability_figures(result, binary_positive)
    settings = dict(s.describe())
    if result.alpha is not None and s.alpha is None:
        settings["α chosen"] = f"{result.alpha:g}"
    settings["Computed"] = _stamp(result)
    fr = result.fit_report
    if fr:
        settings["Fit"] = (f"{fr.get('iterations', '?')} iterations, {fr.get('wall_time_s', float('nan')):.1f} s "
                           f"on {fr.get('device', '?')}")
    paragraphs = [f"{texts.method_label(s.method)} fitted on {s.n_re:,} rows, evaluated on the other "
                  f"{result.n_te:,} rows (test part)."]
    note = texts.at_prior_note(result.at_prior, result.alpha, s.n_re)
    if note:
        paragraphs.append(note)
    shown: list[tuple[str, Any]] = [("Test metrics before and after", pbr_metrics_frame(result))]
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
        figs.append(("Automatic choice of α: " + texts.ALPHA_SCORES_HELP,
                     FR.alpha_selection_figure(result.alpha_scores, result.alpha, score_name=score)))
        shown.append(("Cross-validated score per α", alpha_scores_frame(result.alpha_scores, score)))
    return ReportSection(title=f"Recalibration: {texts.method_label(s.method)}", paragraphs=paragraphs,
                         settings=settings, tables=shown, figures=figs)


def apply_section(result: Any) -> ReportSection:
    """A recalibrator fitted on the Fit & apply page, or loaded from a file and applied there."""
    label = texts.method_label(result.method)
    binary_positive = result.preds.kind == "binary" and result.binary_ece == "positive"
    before, after = pbr_reliability_figures(result, binary_positive, ece_name="ECE", method=label)
    if result.settings is not None:
        settings = dict(result.settings.describe())
    else:
        settings = {"Recalibrator": result.origin, "Settings": recalibrator_settings(result.recalibrator)}
    settings["Computed"] = _stamp(result)
    paragraphs = [f"{result.origin}; measured on {result.evaluated_on}."]
    if result.in_sample:
        paragraphs.append(texts.SHIP_IN_SAMPLE)
    note = texts.at_prior_note(result.at_prior, result.recalibrator.get_params().get("alpha"), result.n_fit)
    if note:
        paragraphs.append(note)
    paragraphs += [f"Note: {texts.fit_words(n)}" for n in result.notes]
    return ReportSection(title=f"{'Fitted for download' if result.settings is not None else 'Saved recalibrator'}: {label}",
                         paragraphs=paragraphs, settings=settings,
                         tables=[("Metrics before and after", pbr_metrics_frame(result))],
                         figures=[("Before recalibration", before), ("After recalibration", after)])


def recalibrator_settings(rec: Any) -> str:
    """A fitted recalibrator's settings in words: those that differ from the method's defaults."""
    from pbr_core.experiments import make_recalibrator

    params = rec.get_params()
    try:
        defaults = make_recalibrator(rec.method, None).get_params()
    except Exception:  # noqa: BLE001 - an unknown method: list every setting
        defaults = {}
    return texts.params_text(params, defaults)


def compare_tables(table: pd.DataFrame, multiclass: bool) -> tuple[pd.DataFrame, Styler]:
    """(summary long form, highlighted display table) of a per-fold compare table.

    The display table has a column *Folds at the prior* ("k of F") when a method has a prior.
    """
    ok = table[table["error"].isna()] if "error" in table else table
    summ = summarize(ok, metrics=[m for m in ("ece", "accuracy", "nll", "brier", "kl", "fit_seconds")
                                  if m in ok and ok[m].notna().any()])
    labels = {m: texts.method_label(m, multiclass) for m in table["method"].unique()}
    text = summary_table(summ)
    counts = tables.at_prior_counts(ok)
    if counts:
        text["at_prior"] = [counts.get(m, "–") for m in text.index]
    return summ, FR.summary_styler(text, best_mask(summ), labels=labels)


_METRIC_WORDS = {"ece": "ECE", "accuracy": "accuracy", "nll": "NLL", "brier": "Brier score"}


def paired_frame(table: pd.DataFrame, multiclass: bool, metric: str = "ece",
                 pairs: Sequence[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Paired tests over folds (``pbr_core.experiments.paired_tests``) in the page's words.

    Default pairs: each method against the uncalibrated one and against the best mean. Failed
    fits are left out (a method's failed folds are not paired). Empty with fewer than 2 folds.
    """
    from pbr_core.experiments import paired_tests

    ok = table[table["error"].isna()] if "error" in table else table
    if ok.empty or ok["fold"].nunique() < 2:
        return pd.DataFrame()
    tests = paired_tests(ok, metric, pairs)
    label = {m: texts.method_label(m, multiclass) for m in ok["method"].unique()}

    def p(v: float) -> str:
        return "–" if pd.isna(v) else f"{v:.3g}"

    return pd.DataFrame({
        "A": [label[a] for a in tests["a"]], "B": [label[b] for b in tests["b"]],
        f"mean {_METRIC_WORDS.get(metric, metric)} A − B": [f"{d:+.4f}" for d in tests["mean_diff"]],
        "95% interval": [f"[{lo:+.4f}, {hi:+.4f}]" for lo, hi in zip(tests["ci_low"], tests["ci_high"])],
        "t-test p": [p(v) for v in tests["t_p"]], "Wilcoxon p": [p(v) for v in tests["wilcoxon_p"]],
        "corrected t p": [p(v) for v in tests["corrected_t_p"]],
        "A better on": [f"{k} of {n} folds" for k, n in zip(tests["a_better_folds"], tests["n_folds"])],
        "verdict": [f"{label[b]} better" if b else "no difference shown" for b in tests["better"]],
    })


def _alpha_of(settings: Any, method: str) -> float | None:
    return dict(dict(settings.params).get(method, ())).get("alpha")


def compare_at_prior_notes(result: Any) -> list[str]:
    """One note per method whose fit ended at its prior in some fold of a comparison."""
    multiclass = result.kind == "multiclass"
    folds = tables.at_prior_folds(result.table)
    return [texts.at_prior_folds_note(texts.method_label(m, multiclass), f, result.settings.n_folds,
                                      _alpha_of(result.settings, m), result.settings.n_re)
            for (m,), f in folds.items()]


def sweep_at_prior_notes(result: Any) -> list[str]:
    """One note per method whose fit ended at its prior at some n_re of the sweep."""
    multiclass = result.kind == "multiclass"
    per_method: dict[str, dict[int, list[int]]] = {}
    for (m, n_re), f in tables.at_prior_folds(result.table, by=("method", "n_re")).items():
        per_method.setdefault(m, {})[int(n_re)] = f
    return [texts.at_prior_sweep_note(texts.method_label(m, multiclass), where, result.settings.n_folds,
                                      _alpha_of(result.settings, m))
            for m, where in per_method.items()]


def compare_figures(result: Any, binary_positive: bool, multiclass: bool) -> list[tuple[str, go.Figure]]:
    if not result.diagrams:
        return []
    x_title, y_title = axis_titles(binary_positive)
    labels = {m: texts.method_label(m, multiclass) for m in result.diagrams}
    t0 = result.table[result.table["fold"] == 0].set_index("method")["ece"]
    return [
        (texts.GRID_CAPTION, FR.reliability_grid_figure(result.diagrams, labels=labels, ece=t0.to_dict(),
                                                        x_title=x_title, y_title=y_title,
                                                        binary_positive=binary_positive)),
        (texts.OVERLAY_CAPTION, FR.reliability_overlay_figure(result.diagrams, labels=labels,
                                                              x_title=x_title, y_title=y_title)),
    ]


def compare_section(result: Any) -> ReportSection:
    kind = result.kind
    multiclass = kind == "multiclass"
    binary_positive = kind == "binary" and result.settings.binary_ece == "positive"
    settings = {**result.settings.describe(multiclass), "Computed": _stamp(result)}
    paragraphs = _partial(result, len(result.table), result.planned) + [texts.SUMMARY_HELP]
    shown: list[tuple[str, Any]] = []
    if kind == "binary":
        paragraphs.append("ECE: " + texts.binary_ece_caption(result.settings.binary_ece))
    if len(result.table):
        paragraphs += compare_at_prior_notes(result)
        _, styled = compare_tables(result.table, multiclass)
        shown.append(("Test metrics, mean ± std over folds", styled))
        paired = paired_frame(result.table, multiclass)
        if len(paired):
            paragraphs += [texts.PAIRED_INTRO, texts.PAIRED_HELP.replace("**", "").replace("*", "")]
            shown.append(("Paired tests over folds (test ECE)", paired))
        shown.append(("Every fold", tables.fold_styler(result.table, multiclass)))
    return ReportSection(title="Comparison of recalibrators", paragraphs=paragraphs, settings=settings,
                         tables=shown, figures=compare_figures(result, binary_positive, multiclass))


def sweep_section(result: Any) -> ReportSection:
    multiclass = result.kind == "multiclass"
    settings = {**result.settings.describe(multiclass), "Computed": _stamp(result)}
    figs, shown = [], []
    total = len(result.settings.methods) * len(result.settings.n_re_values) * result.settings.n_folds
    paragraphs = _partial(result, len(result.table), total) + [texts.SWEEP_INTRO]
    if len(result.table):
        summ = summarize(result.table, metrics=["ece"], by=["method", "n_re"])
        labels = {m: texts.method_label(m, multiclass) for m in result.table["method"].unique()}
        figs.append((texts.SWEEP_CAPTION, FR.n_re_sweep_figure(summ, labels=labels)))
        paragraphs += sweep_at_prior_notes(result)
        shown.append(("Every fit", tables.fold_styler(result.table, multiclass)))
    return ReportSection(title="Test ECE against the recalibration set size", settings=settings,
                         paragraphs=paragraphs, tables=shown, figures=figs)


def group_gap_section(result: Any) -> ReportSection:
    """Does recalibration close the gaps between groups (Compare page)?"""
    from pbr_core.experiments.group_gaps import MIN_FIT_ROWS, group_gap_summary

    multiclass = result.kind == "multiclass"
    settings = {**result.settings.describe(multiclass), "Computed": _stamp(result)}
    paragraphs = _partial(result, result.table["fold"].nunique() if len(result.table) else 0,
                          result.settings.n_folds) + [texts.GROUP_GAP_INTRO.format(m=MIN_FIT_ROWS)]
    figs, shown = [], []
    if len(result.table):
        per_group, _ = group_gap_summary(result.table)
        wide, gaps = tables.group_gap_frames(result.table)
        figs.append((texts.GROUP_GAP_CAPTION, FR.group_gap_figure(per_group)))
        shown += [("Test ECE of each group", wide.set_index("Group")),
                  ("The gap between groups: " + texts.GROUP_GAP_GAPS_HELP, gaps.set_index("Strategy"))]
    return ReportSection(title="Does recalibration close the gaps between groups?", settings=settings,
                         paragraphs=paragraphs, tables=shown, figures=figs)


def correlations_frame(res: Any) -> pd.DataFrame:
    c = res.correlations()
    c.index = ["Pearson r", "Kendall τ"]
    return c


def generalization_section(result: Any) -> ReportSection:
    res = result.result
    s = result.settings
    settings = {**s.describe(), "Computed": _stamp(result)}
    paragraphs = _partial(result, len(res.table), len(s.alphas) * s.n_folds) + [
        texts.GEN_INTRO, texts.correlation_reading(res.pearson_r, res.pearson_p, res.kendall_tau, res.kendall_p)]
    figs, shown = [], []
    if len(res.table):
        figs.append((texts.KL_GAP_CAPTION, FR.kl_gap_figure(res.table, eps=s.eps)))
        shown.append(("Correlation between KL and ECE gap", correlations_frame(res)))
        shown.append(("Every fit", tables.fold_styler(res.table)))
    return ReportSection(title=f"Generalization: KL against ECE gap ({texts.method_label(s.objective)})",
                         paragraphs=paragraphs, settings=settings, tables=shown, figures=figs)
