"""The audit part of the report: what the Data, Reliability and Bins & bias pages show, as sections.

A calibration audit with no recalibration ends in a report too: :func:`audit_sections` turns the
loaded data and the pages' choices (B of the Reliability page; L, ε and the largest B of Bins &
bias) into :class:`~dashboard.report.ReportSection` values, with the numbers of the same cached
calls the pages make (:mod:`dashboard.compute`, e.g. ``theorem1_reading``) and the same figure, table
and text builders (:mod:`dashboard.figures`, :mod:`dashboard.tables`, :mod:`dashboard.texts`): this
module only assembles. No Streamlit call and no formula here: the bounds are ``pbr_core``'s; session
state is read by ``recal_ui``.
"""

from __future__ import annotations

import pbr_core
from dashboard import compute, figures, figures_corp, state, tables, texts
from dashboard.report import ReportSection
from pbr_core.corp import CHANCE_OUTSIDE_SHARE
from dashboard.state import AuditChoices  # noqa: F401 - also audit.AuditChoices, beside the sections it shapes

#: How many classes the classwise table lists (worst first); CIFAR-100 has 100.
CLASSWISE_ROWS = 100


def data_section(loaded: state.Loaded, view: state.MetricView) -> ReportSection:
    """The file, its size, its kind, what is measured and every decision the loader took."""
    p = loaded.preds
    source = {"upload": "uploaded file", "server": "dataset on the server"}.get(loaded.origin,
                                                                              "bundled sample (sample_data/)")
    facts = {
        "File": f"{loaded.file_name} ({source})",
        "Rows n": f"{view.rows:,}",
        "Classes K": state.classes_label(p),
        "Kind": state.kind_label(p),
        "Scores": "logits" if p.input_type == "logits" else "probabilities",
        "What is measured": view.what,
    }
    notes = [texts.for_the_page(n) for n in p.notes] or ["The file was read as it is: nothing had to be decided."]
    return ReportSection(title="The data", settings=facts, settings_title="The file", bullets=notes,
                         bullets_title="How the file was read (the loader's decisions)")


def reliability_section(loaded: state.Loaded, view: state.MetricView, choices: AuditChoices) -> ReportSection:
    """Metric cards, the bin choice, Theorem 1 at the chosen B and the diagram, at the page's B."""
    B = int(choices.n_bins)
    s = compute.summary(view, B)
    bound = float(pbr_core.theorem1_bound(view.rows, B, lipschitz=choices.lipschitz, eps=choices.eps))
    reading = texts.bound_at_b_reading(B, choices.lipschitz, choices.eps, bound, float(s["ece"]))
    fig = figures.reliability_figure(compute.reliability(view, B), x_title=view.x_title, y_title=view.y_title,
                                     binary_positive=view.binary_positive,
                                     title=f"Reliability diagram · B = {B} · ECE {s['ece']:.4f}")
    shown: list[tuple[str, object]] = [
        (f"Calibration metrics at B = {B}", tables.metric_cards_frame(
            s, texts.measured_probability(view.binary_positive, view.top_label_only))),
        ("Theorem 1's bound at the chosen B", tables.bound_at_b_frame(bound, s["ece"], choices.eps)),
    ]
    shown.append((texts.ESTIMATORS_EXPANDER + "\n\n" + texts.ESTIMATORS_INTRO,
                  tables.conventions_frame(compute.conventions(view)).set_index(
                      "Estimator or library (default settings)")))
    paragraphs = [f"Measured on {view.what} of {texts.md(loaded.name)} (n = {view.rows:,}).", texts.ECE_HELP,
                  "The ECE's " + texts.ECE_INTERVAL_HELP, texts.bin_choice(view.rows, B), reading,
                  texts.bands_caption(compute.reliability(view, B))]
    test = compute.calibration_test(view)
    if test is not None:
        paragraphs.append(texts.overall_test_sentence(test, compute.reliability(view, B), names_in_help=False))
        paragraphs.append("About the test: " + texts.OVERALL_TEST_HELP)
    if view.stats is not None:
        paragraphs.append(texts.server_sample_note(view.rows, view.n, "the other estimators"))
    return ReportSection(title="Calibration: the reliability diagram", paragraphs=paragraphs, tables=shown,
                         figures=[(texts.how_to_read(view.binary_positive),
                                   fig)])


def corp_section(loaded: state.Loaded, view: state.MetricView) -> ReportSection:
    """The Reliability page's CORP part: the diagram without bins and its band, the score
    decomposition MCB − DSC + UNC and the log loss's refinement / calibration split."""
    diagram, brier, log, rows_outside = compute.corp(view)
    chance = compute.mcb_chance(view)
    fig = figures_corp.corp_figure(diagram, x_title=view.x_title, y_title=view.y_title,
                                   title="CORP reliability diagram (no bins)")
    paragraphs = [texts.CORP_INTRO, texts.corp_decomposition_words(brier, log, view.what, chance["brier"]),
                  texts.log_loss_split_words(*compute.log_loss_split(loaded.preds, loaded.key))]
    if view.stats is not None:
        paragraphs.append(texts.server_sample_note(view.rows, view.n, "the CORP part"))
    return ReportSection(title=texts.CORP_EXPANDER, paragraphs=paragraphs,
                         tables=[("Score decomposition", tables.score_decomposition_frame(brier, log, chance))],
                         figures=[(texts.corp_band_reading(rows_outside, CHANCE_OUTSIDE_SHARE, compute.corp_grid(view)), fig)])


def classwise_section(loaded: state.Loaded, n_bins: int) -> ReportSection | None:
    """Multiclass data: the classwise ECE (mean, and every class worst first); None for other data."""
    if loaded.preds.kind != "multiclass":
        return None
    mean, per_class = compute.classwise(state.metric_view(loaded, "top_label"), int(n_bins))
    frame = tables.classwise_frame(per_class, loaded.preds.class_names, top=CLASSWISE_ROWS).set_index("class")
    return ReportSection(
        title="Classwise ECE (every class, not only the predicted one)",
        paragraphs=[f"Classwise ECE (mean over the {per_class.size} classes) at B = {n_bins}: {mean:.4f}. For each "
                    "class k the same binned ECE is computed on the predicted probability of k against whether the "
                    "label is k, over all rows; it catches miscalibration that the top-label ECE cannot see (e.g. "
                    "on second choices).", texts.CLASSWISE_NOT_A_TEST],
        tables=[(f"Per-class ECE, largest first (B = {n_bins})", frame)])


def bins_section(view: state.MetricView, choices: AuditChoices) -> ReportSection:
    """ECE against B with Theorem 1's band at the page's L and ε, and the bound's two B's."""
    n, lip, eps = view.rows, choices.lipschitz, choices.eps
    bmax = max(2, int(choices.bmax))
    curve = compute.ece_curve(view, bmax)
    t = compute.theorem1_reading(view, curve, lip, eps)
    fig = compute.ece_vs_bins_chart(curve, bmax, t, title=f"ECE against the number of bins B (n = {n:,})")
    numbers = tables.theorem1_frame(t)
    paragraphs = [texts.WHY_CUBE_ROOT]
    if t.b_min > bmax:
        paragraphs.append(f"The bound-minimising B = {t.b_min} lies beyond the chart (largest B shown: {bmax}).")
    return ReportSection(title="Bins & bias: how far the ECE can be from the truth (Theorem 1)",
                         paragraphs=paragraphs,
                         settings={"Lipschitz constant L": f"{lip:g}", "ε (failure probability)": f"{eps:g}",
                                   "Largest B shown": bmax}, settings_title="Chosen on the Bins & bias page",
                         tables=[(f"At n = {n:,}, L = {lip:g}, ε = {eps:g}", numbers)],
                         figures=[(texts.BAND_CAPTION, fig)])


def groups_section(loaded: state.Loaded, view: state.MetricView, choices: AuditChoices) -> ReportSection | None:
    """Calibration by the group column(s) chosen on the Groups page; None when it was not visited."""
    if not choices.group_by:
        return None
    from dashboard import figures_recal as FR
    from pbr_core.groups import MIN_ROWS

    try:
        # A server dataset: only a grouping already measured on the Groups page (a pass over every row).
        rep = compute.group_report(loaded, view, choices.group_by, choices.group_every,
                                   cached_only=loaded.stream is not None)
    except ValueError as exc:
        return ReportSection(title="Calibration by group", paragraphs=[f"Not measured: {texts.groups_problem(str(exc))}"])
    if rep is None:
        return ReportSection(title="Calibration by group", paragraphs=[texts.GROUPS_STREAM_NOT_MEASURED])
    by = " × ".join(rep.by) + (f" (dates by {choices.group_every})" if choices.group_every else "")
    from pbr_core.groups import group_statements

    paragraphs = [texts.GROUPS_INTRO, *(texts.groups_outcome_warning(found) for found in rep.restating),
                  texts.groups_measured_on(texts.groups_what(rep.measures, view.what),
                                           loaded.stream.n_total if loaded.stream is not None else None, rep.by,
                                           f"dates by {choices.group_every}" if choices.group_every else "",
                                           len(rep.table)) + " " + texts.groups_headline(rep), texts.GROUPS_TEST_CAPTION, texts.GROUPS_INTERVAL_NOTE, "**Largest gap.** " + texts.gap_sentence(rep),
                  "**What each group's test says.**\n\n" + "\n".join(f"- {texts.md(line)}" for line in group_statements(rep))]
    below = rep.table.loc[rep.table["ece_corrected"] < 0, "group"].tolist()
    if below:  # the table writes them "≈ 0 (-0.0108: noise)": why, as on the page
        paragraphs.append(texts.groups_below_zero_note(below))
    if loaded.stream is not None:
        paragraphs.append(texts.GROUPS_STREAM_NOTE)
    if rep.small:
        paragraphs.append(texts.groups_small_note(rep.small, MIN_ROWS, False))
    x_title, y_title = texts.groups_axis_titles(rep.measures, view.x_title, view.y_title)
    fig = FR.groups_overlay_figure(rep.diagrams, rep.small, rep.table["group"].tolist(), x_title=x_title,
                                   y_title=y_title, flagged=rep.miscalibrated)
    return ReportSection(title=f"Calibration by group: {by}", paragraphs=paragraphs,
                         tables=[("Every group", tables.groups_frame(rep).set_index("Group"))],
                         figures=[(texts.GROUPS_OVERLAY_CAPTION, fig)])


def slices_section(loaded: state.Loaded, view: state.MetricView) -> ReportSection | None:
    """The slices found on the Groups page (Find the slices), with their sentences, the guarantee, every slice
    tested and each held-up slice's diagram (held-out rows) beside the whole file's; None when not searched."""
    rep = compute.slice_report(loaded, view, cached_only=True)
    if rep is None:
        return None
    from dashboard import figures_recal as FR

    guarantee = texts.slices_guarantee(rep)  # None when nothing was searched
    paragraphs = [texts.SLICES_INTRO, "**" + texts.slices_headline(rep) + "**",
                  *(f"- {line}" for line in texts.slices_lines(rep)), *texts.slices_left_out(rep),
                  *([guarantee] if guarantee else []),
                  texts.slices_searched(rep)]
    shown = [("Every slice tested on held-out rows\n\n" + texts.SLICES_TABLE_HELP,
              tables.slices_frame(rep).set_index("Slice"))] if len(rep.table) else []
    figs = []
    for name in rep.held_up[:3]:
        left, _ = texts.slices_diagram_captions(rep, name)
        figs.append((f"{left} {texts.SLICES_DIAGRAM_HELP}",
                     FR.group_diagram_figure(rep.diagrams[name], x_title=view.x_title, y_title=view.y_title,
                                             binary_positive=view.binary_positive)))
    if figs:
        _, whole = texts.slices_diagram_captions(rep, rep.held_up[0])
        figs.append((f"The whole file. {whole}", FR.group_diagram_figure(
            rep.overall, x_title=view.x_title, y_title=view.y_title, binary_positive=view.binary_positive)))
    return ReportSection(title="Find the slices: calibration that departs from the rest, confirmed on held-out rows",
                         paragraphs=paragraphs, tables=shown, figures=figs)


def audit_sections(loaded: state.Loaded, view: state.MetricView, choices: AuditChoices) -> list[ReportSection]:
    """The audit part of the report, in page order: the data, the reliability diagram, the CORP
    diagram and score decomposition, the classwise ECE
    (multiclass data), bins & bias, calibration by group (when the Groups page was used) and the slices
    found there (when searched)."""
    parts = [data_section(loaded, view), reliability_section(loaded, view, choices), corp_section(loaded, view),
             classwise_section(loaded, choices.n_bins), bins_section(view, choices),
             groups_section(loaded, view, choices), slices_section(loaded, view)]
    return [p for p in parts if p is not None]
