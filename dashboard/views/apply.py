"""Fit & apply page: fit one recalibrator to take away, or check a saved one on the loaded data.

Two background jobs (dashboard.jobs), "ship" and "apply": a progress bar while they run (a GP
fit can take minutes), controls disabled, results kept across page switches and in the report.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging

import streamlit as st

from dashboard import figures_recal as FR
from dashboard import jobs, recal_ui, runs, state, texts
from dashboard.fit_estimate import recal_heavy
from pbr_core.experiments import MIN_FIT_ROWS, MIN_TEST_ROWS, small_test_set_problem
from pbr_core.fit_rows import FitRowOverlap
from pbr_core.recalibrators import (MAX_ITERATIONS, Recalibrator, RecalibratorFileError, available_methods,
                                    method_family, takes)
from pbr_core.recalibrators.base import MAX_FILE_BYTES

#: Unexpected failures (bugs) are logged here with their traceback; the page shows a plain message.
logger = logging.getLogger("dashboard.views.apply")

K_METHOD = "ship_method"
K_ALPHA = "ship_alpha"
K_HOLDOUT = "ship_holdout"
K_SEED = "ship_seed"
K_MAX_ITER = "ship_max_iter"
K_FOR = "ship_for"               # which data the holdout's default belongs to
K_UPLOAD = "apply_upload"
K_PARSED = "apply_parsed"        # (digest, recalibrator or None, error or None) of the last upload
K_TRIAL = "apply_trial"          # ((digest, data key), error or None): a one-row trial prediction
K_FIT_ROWS = "apply_fit_rows"    # ((digest, data key), FitRowOverlap): which loaded rows it was fitted on


def _ship_controls(loaded: state.Loaded, running: bool) -> runs.FitSettings | None:
    preds = loaded.preds
    multiclass = preds.kind == "multiclass"
    # 20 % held out, or more on a small file so that the check has a test set worth measuring.
    state.reset_for_data(K_FOR, loaded.key, {K_HOLDOUT: runs.default_holdout_percent(preds.n)})
    methods = [m for m in available_methods() if m != "uncalibrated"]
    if st.session_state.get(K_METHOD) not in methods:
        st.session_state[K_METHOD] = "temperature" if "temperature" in methods else methods[0]
    c = st.columns([2, 1.4, 1, 1.6], gap="medium", vertical_alignment="bottom")
    method = c[0].selectbox("Method", methods, key=K_METHOD, persist_state="session", disabled=running,
                            format_func=lambda m: texts.method_label(m, multiclass), help=texts.SHIP_METHOD_HELP)
    holdout = c[1].slider("Hold out to check it", 0, runs.HOLDOUT_MAX, step=runs.HOLDOUT_STEP, key=K_HOLDOUT,
                          persist_state="session", disabled=running, format="%d%%", help=texts.SHIP_HOLDOUT_HELP) / 100
    seed = int(c[2].number_input("Split seed", min_value=0, value=0, key=K_SEED, persist_state="session",
                                 disabled=running or holdout == 0, help=texts.SEED_HELP))
    alpha = None
    if takes(method, "alpha"):
        alpha = float(c[3].slider("α (weight of the KL term)", 0.0, 1.0, 0.5, 0.01, key=K_ALPHA,
                                  persist_state="session", disabled=running, help=texts.ALPHA_HELP))
    max_iter = None
    if takes(method, "max_iter"):
        with st.expander("GP fit settings"):
            max_iter = int(st.number_input("Max optimiser iterations (0 = the library's default)", min_value=0,
                                           max_value=MAX_ITERATIONS, value=0, step=50, key=K_MAX_ITER,
                                           persist_state="session", disabled=running, help=texts.MAX_ITER_HELP)) or None
    settings = runs.FitSettings(method=method, alpha=alpha, holdout=holdout, seed=seed, max_iter=max_iter,
                                 binary_ece=state.recal_binary_ece(preds))
    n_fit, n_held = settings.split(preds.n)
    device = runs.device_label() if method_family(method) == "gp" else None
    st.caption(texts.ship_split_caption(n_fit, n_held, device))
    if not recal_ui.matrix_fit_time([method], n_fit, preds.n_classes, max_iter=max_iter):
        return None
    problem = small_test_set_problem(n_held) if n_held else None
    if problem:  # a check on too few held-out rows says nothing: refused, with what to do
        todo = texts.holdout_todo(preds.n, MIN_TEST_ROWS, runs.min_holdout_percent(preds.n))
        st.error(f"{problem} {todo}", icon=":material/block:")
        return None
    # What the fit would warn about that the data alone decide, said before Fit is clicked, in the
    # words the result (and the CLI's fit) use (audit 8: a 60-row file, 55 of its scores exactly 0 or 1).
    from pbr_core.experiments import small_file_problem
    from pbr_core.experiments.runs import fit_warnings_ahead

    if small_file_problem(preds.n) is not None:
        st.warning(texts.ship_small_file_warning(preds.n, MIN_FIT_ROWS, MIN_TEST_ROWS, in_sample=n_held == 0),
                   icon=":material/warning:")
    for note in fit_warnings_ahead(preds, settings):
        st.warning(texts.fit_words(note), icon=":material/warning:")
    return settings


def _start_ship(loaded: state.Loaded, s: runs.FitSettings) -> None:
    preds, name, key = loaded.preds, loaded.name, loaded.key
    recal_ui.start("ship", texts.ship_job_label(texts.method_label(s.method)),
                   lambda ctx: runs.run_ship(preds, s, ctx, data_name=name, data_key=key),
                   heavy=method_family(s.method) == "gp" or recal_heavy(s.method, preds.n_classes))


def _parse_upload() -> tuple[Recalibrator | None, str | None, str]:
    """(recalibrator, error, file name) of the uploaded JSON file, parsed once per upload."""
    upload = st.session_state.get(K_UPLOAD)
    if upload is None:
        return None, None, ""
    data = upload.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    cached = st.session_state.get(K_PARSED)
    if cached is None or cached[0] != digest:
        try:
            cached = (digest, None, recal_ui.saved_file_problem(data, upload.name))
            if cached[2] is None:
                cached = (digest, _read_saved(data, upload.name), None)
        except RecalibratorFileError as exc:  # the message starts with the file name and names the field
            cached = (digest, None, str(exc))
        except Exception:  # noqa: BLE001 - a bug, not a damaged file: logged, never a traceback on the page
            logger.exception("reading the uploaded recalibrator %r failed unexpectedly", upload.name)
            cached = (digest, None, texts.APPLY_UPLOAD_UNEXPECTED.format(name=upload.name))
        st.session_state[K_PARSED] = cached
    return cached[1], cached[2], upload.name


def _read_saved(data: bytes, name: str) -> Recalibrator:
    """The upload read (a large one in the server's one turn for big reads), refused again after reading
    when its method and classes are beyond the page's (a file that declared them late)."""
    turn = state.big_read_turn() if len(data) >= recal_ui.SAVED_SERIAL_BYTES else contextlib.nullcontext()
    with turn:
        rec = Recalibrator.loads(data, source=name)
    problem = recal_ui.saved_classes_problem(rec.method, rec.n_classes_, name)
    if problem:
        raise RecalibratorFileError(problem)
    return rec


def _apply_controls(loaded: state.Loaded, running: bool) -> tuple[Recalibrator, str, FitRowOverlap] | None:
    # The browser refuses a larger file before sending it; the library refuses it again, unparsed.
    st.file_uploader("Recalibrator file (JSON, from this page, the PBR page or `pbr-calib fit`)", type=["json"],
                     key=K_UPLOAD, disabled=running, help=texts.APPLY_UPLOAD_HELP,
                     max_upload_size=max(1, min(MAX_FILE_BYTES, recal_ui.SAVED_MAX_BYTES) // 2**20))
    rec, error, name = _parse_upload()
    if error:  # the library's words, quoting the file's name and values: shown as text
        st.error(texts.md_message(error), icon=":material/error:")
        return None
    if rec is None:
        return None
    st.markdown(texts.saved_recalibrator_words(rec))
    preds = loaded.preds
    if rec.n_classes_ != preds.n_classes:
        st.error(texts.apply_other_model(texts.md(name), rec.n_classes_, texts.md(loaded.name), preds.n_classes),
                 icon=":material/error:")
        return None
    if method_family(rec.method) == "gp":
        runs.preload_gp()
    problem = _trial(rec, loaded)
    if problem:
        st.error(texts.apply_cannot(texts.md(name), texts.md(loaded.name), texts.md_message(problem)),
                 icon=":material/error:")
        return None
    by_case = rec.classes_matched_by_case(preds)
    if by_case:  # 'NO' / 'YES' against a fit on 'no' / 'yes': the same classes, said so
        st.info(texts.apply_classes_by_case(texts.md(loaded.name), by_case), icon=":material/info:")
    if preds.n < MIN_TEST_ROWS:  # its ECE before / after would say nothing
        st.error(texts.apply_too_small(texts.md(loaded.name), preds.n, MIN_TEST_ROWS), icon=":material/block:")
        return None
    check = _fit_row_check(rec, loaded)
    _show_fit_row_check(check, before_run=True)
    if check.verdict(MIN_TEST_ROWS) in ("sampled", "too few left"):
        return None  # refused, and the sentence above says why
    return rec, name, check


def _show_fit_row_check(check: FitRowOverlap, before_run: bool = False) -> None:
    """Whether the loaded rows include rows the recalibrator was fitted on, and which rows it is measured on."""
    words = texts.fit_rows_check(check, MIN_TEST_ROWS)
    verdict = check.verdict(MIN_TEST_ROWS)
    if verdict in ("sampled", "too few left"):
        st.error(words, icon=":material/block:")
    elif verdict not in ("none", "none of the sample"):  # fit rows found, or possible, or it cannot tell
        st.warning(words, icon=":material/visibility:")
    elif before_run:  # none is a fit row: said once, before the run; the result says which rows it measured
        st.info(words, icon=":material/check_circle:")


def _fit_row_check(rec: Recalibrator, loaded: state.Loaded) -> FitRowOverlap:
    """Which loaded rows ``rec`` was fitted on (its file's fingerprint); remembered per (upload, data)."""
    key = (st.session_state[K_PARSED][0], loaded.key)
    cached = st.session_state.get(K_FIT_ROWS)
    if cached is None or cached[0] != key:
        cached = (key, rec.fit_row_overlap(loaded.preds))
        st.session_state[K_FIT_ROWS] = cached
    return cached[1]


def _trial(rec: Recalibrator, loaded: state.Loaded) -> str | None:
    """Why ``rec`` cannot predict on the loaded data (tried on its first row; e.g. a GP fitted on
    logits given probabilities), or None. Remembered per (upload, data)."""
    key = (st.session_state[K_PARSED][0], loaded.key)
    cached = st.session_state.get(K_TRIAL)
    if cached is None or cached[0] != key:
        try:
            rec.predict_proba(loaded.preds.subset([0]))
            cached = (key, None)
        except ValueError as exc:  # e.g. a GP fitted on logits given probabilities: the library says why
            cached = (key, str(exc))
        except Exception:  # noqa: BLE001 - a bug: logged with its traceback, a plain message on the page
            logger.exception("trial prediction of %s (%s) on %r failed unexpectedly", rec.method,
                             st.session_state[K_PARSED][0][:12], loaded.name)
            cached = (key, texts.APPLY_TRIAL_UNEXPECTED)
        st.session_state[K_TRIAL] = cached
    return cached[1]


def _start_apply(loaded: state.Loaded, chosen: tuple[Recalibrator, str, FitRowOverlap]) -> None:
    rec, name, check = chosen
    preds, data_name, key = loaded.preds, loaded.name, loaded.key
    binary_ece = state.recal_binary_ece(preds)
    recal_ui.start("apply", texts.apply_job_label(texts.method_label(rec.method), name),
                   lambda ctx: runs.run_apply(preds, rec, name, ctx, binary_ece=binary_ece, data_name=data_name,
                                              data_key=key, check=check),
                   heavy=method_family(rec.method) == "gp")


def _cards(r: runs.ApplyResult) -> None:
    c = st.columns(4)
    # Red only where the rows show the rise beyond the ECE's noise; otherwise grey (recal_ui.ece_change).
    c[0].metric("ECE after", f"{r.after['ece']:.4f}",
                **recal_ui.ece_change(r.before["ece"], r.after["ece"], r.worse_shown),
                help=texts.apply_ece_help(r.after["n_bins"], r.n_eval, tested=r.tests is not None))
    c[1].metric("ECE before", f"{r.before['ece']:.4f}", help=texts.APPLY_ECE_BEFORE_HELP)
    inf_rows = r.after.get("nll_infinite_rows", 0)
    c[2].metric("NLL after", **recal_ui.nll_card(r.before, r.after),
                help=texts.nll_infinite_help(inf_rows, r.after["nll"]) if inf_rows else texts.NLL_HELP)
    c[3].metric("Accuracy after", f"{r.after['accuracy']:.2%}",
                **recal_ui.change(r.before["accuracy"], r.after["accuracy"], points=True),
                help=texts.ACCURACY_HELP)


def _result(loaded: state.Loaded, r: runs.ApplyResult, kind: str) -> None:
    label = texts.method_label(r.method)
    st.subheader(texts.result_title(label))
    recal_ui.stale_note(r, loaded)
    st.markdown(texts.apply_measured_on(r.origin, r.evaluated_on, r.seconds))
    if r.unmeasured_small_file:  # below the size the other pages measure at: unmeasured, said plainly
        st.warning(texts.ship_small_file_warning(r.preds.n, MIN_FIT_ROWS, MIN_TEST_ROWS, r.in_sample), icon=":material/warning:")
    elif r.fit_row_check is not None:  # a saved recalibrator: were these rows used to fit it?
        _show_fit_row_check(r.fit_row_check)
    elif r.in_sample:
        st.warning(texts.SHIP_IN_SAMPLE, icon=":material/visibility:")
    _cards(r)
    if r.tests is not None:  # rows it was not fitted on: is each side calibrated beyond chance?
        st.markdown(texts.held_out_tests(r.tests, r.n_eval, (r.reliability_before, r.reliability_after),
                                         (r.before["ece"], r.after["ece"])))
    if r.preds.kind == "binary":  # which ECE the cards are: the app's one choice
        st.caption(texts.binary_ece_caption(r.binary_ece))
    for note in r.notes:
        st.caption(texts.fit_warning(note))
    prior = texts.at_prior_note(r.at_prior, r.recalibrator.get_params().get("alpha"), r.n_fit)
    if prior:
        st.info(prior, icon=":material/info:")
    if r.interval is not None:  # a Venn-Abers predictor: how wide its (p0, p1) intervals are
        st.markdown(texts.venn_abers_interval_words(r.interval))
    binary_positive = r.binary_positive
    before, after = FR.pbr_reliability_figures(r, binary_positive, ece_name="ECE", method=label)
    c = st.columns(2, gap="medium")
    c[0].plotly_chart(before, key=f"{kind}_before_chart", config={"displaylogo": False})
    c[1].plotly_chart(after, key=f"{kind}_after_chart", config={"displaylogo": False})
    c = st.columns(3)
    with c[0]:
        # The file's other columns as written (a CSV's ZIP code 01234, not 1234), or said to be as read.
        text, exact = state.as_written_for(r.data_key)
        recal_ui.lazy_button("Calibrated predictions (CSV)", lambda: r.calibrated_csv(as_written=text()),
                             f"{r.method}_calibrated.csv", "text/csv", f"{kind}_dl_predictions",
                             help=texts.calibrated_predictions_help(
                                 r.data_name, label, runs.FIT_ROWS_COLUMN if r.fit_rows is not None else None,
                                 r.n_fit, r.interval is not None, as_written=exact,
                                 written_as=state.download_format(r.data_key)))
    if kind == "ship":
        _ship_downloads(r, c[1])
    with c[2]:
        recal_ui.report_button(f"{kind}_dl_report")


def _ship_downloads(r: runs.ApplyResult, column) -> None:
    """The fitted recalibrator's download and the code to use it; on scores mapped to probabilities (the Data
    page's map), the map's download too and a warning that new scores go through it first (audit 14, A)."""
    file_name = f"{r.method}_recalibrator.json"
    with column:
        recal_ui.recalibrator_download(r, file_name, "ship_dl_recalibrator", help=texts.SHIP_RECALIBRATOR_JSON_HELP)
        score_map = recal_ui.score_map_download(r, "ship_dl_score_map")
    st.markdown(texts.SHIP_SNIPPET_TITLE)
    if not score_map:
        st.code(texts.ship_snippet(file_name), language="python")
        return
    column = score_map["score_column"]
    st.warning(texts.ship_mapped_scores_warning(column), icon=":material/warning:")
    st.code(texts.ship_snippet_mapped(file_name, texts.score_map_file_name(column), column), language="python")


def _ship_result(loaded: state.Loaded, r: runs.ApplyResult) -> None:
    _result(loaded, r, "ship")


def _apply_result(loaded: state.Loaded, r: runs.ApplyResult) -> None:
    _result(loaded, r, "apply")


def render() -> None:
    st.title(texts.APPLY_TITLE)
    st.markdown(texts.APPLY_INTRO)
    loaded = state.current()
    if not recal_ui.recalibratable(loaded):
        return
    running = {k: (j := jobs.get(k)) is not None and j.active for k in ("ship", "apply")}
    st.header(texts.SHIP_TITLE)
    recal_ui.run_panel("ship", loaded, running["ship"], button="Fit", button_key="ship_run",
                       controls=_ship_controls, start_job=_start_ship, results=_ship_result)
    st.divider()
    st.header(texts.APPLY_CHECK_TITLE)
    st.markdown(texts.APPLY_CHECK_INTRO)
    recal_ui.run_panel("apply", loaded, running["apply"], button="Apply", button_key="apply_run",
                       controls=_apply_controls, start_job=_start_apply, results=_apply_result)


render()
