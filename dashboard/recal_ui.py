"""Streamlit pieces shared by the recalibration pages: data checks, job status, downloads, the report.

The pages (views/pbr.py, compare.py, generalization.py, apply.py) stay short by calling these; the
calibration pages (Reliability, Bins & bias) use :func:`report_button` too.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import state, texts
from pbr_core.loading.writing import csv_text

if TYPE_CHECKING:
    from dashboard import jobs, report, runs

# Imported where they are used, not here: the calibration pages (Reliability, Bins & bias, Groups)
# need only report_button, and `dashboard.audit`, `report`, `runs` and `jobs` bring in
# pbr_core.experiments and scipy.stats (~1 s of a fresh server's first page; benchmarks/RESULTS_load.md).

#: The jobs whose results go into the session report, in report order.
REPORT_KINDS = ("pbr", "compare", "sweep", "groupgap", "slicegap", "generalization", "ship", "apply")

#: A page's settings value (runs.PBRSettings, runs.CompareSettings, ...), see :func:`run_panel`.
Settings = TypeVar("Settings")


def recalibratable(loaded: state.Loaded | None, *, needs_gp: bool = False) -> bool:
    """Say why the page cannot run (nothing loaded, top-label-only data); True if it can (with
    ``needs_gp``, the GP family is imported now, while the page is drawn)."""
    if loaded is None:
        state.current_or_prompt()  # says what to do
        return False
    if not loaded.preds.can_recalibrate:
        st.info(texts.TOP_LABEL_NO_RECAL, icon=":material/info:")
        return False
    if loaded.stream is not None:  # a dataset on the server: this page holds rows, so it uses the sample
        st.info(texts.server_sample_note(loaded.stream.n_total, loaded.preds.n, "this page"),
                icon=":material/info:")
    if loaded.preds.n < 3:
        st.info(f"Recalibration needs at least 3 rows (some to fit, some to test); this file has {loaded.preds.n}.")
        return False
    if needs_gp:
        from dashboard import runs

        runs.preload_gp()
    return True


def _jobs_module():
    """dashboard.jobs once some page has imported it; None before that, when no job can exist yet
    (a job is started only through that module), so the calibration pages need not import it."""
    return sys.modules.get("dashboard.jobs")


def result_of(kind: str) -> runs.JobResult | None:
    """The result of the latest finished (or stopped) job of ``kind``, else None."""
    jobs = _jobs_module()
    if jobs is None:
        return None
    job = jobs.get(kind)
    if job is None or job.active:
        return None
    return job.result


def job_status(kind: str) -> jobs.Job | None:
    """Draw the progress panel while the job runs, or its error / stop note; return the job."""
    from dashboard import jobs

    job = jobs.get(kind)
    if job is None:
        return None
    if job.active:
        jobs.show_progress(kind)
    elif job.status == "failed":
        # The message only: the traceback is in the server's log (dashboard.jobs logs it), never on a page.
        st.error(f"The run failed: {texts.md_message(job.error)}", icon=":material/error:")
    elif job.status == "stopped" and job.result is None:
        said = job.message if job.message.startswith(("Cancelled", "Stopped:")) else ""
        st.info(texts.md_message(said) if said else "Stopped before anything finished; nothing to show.",
                icon=":material/stop_circle:")
    return job


def stale_note(result: runs.JobResult, loaded: state.Loaded) -> None:
    if result.data_key and result.data_key != loaded.key:
        st.warning(texts.STALE_RESULT.format(name=texts.md(result.data_name)), icon=":material/history:")


def partial_note(result: runs.JobResult, done: int, total: int) -> None:
    if getattr(result, "stopped", False):
        st.info(texts.PARTIAL_NOTE.format(done=done, total=total), icon=":material/stop_circle:")


#: Session-state keys of the calibration pages' choices (views/reliability.py, views/bins_bias.py and
#: views/groups.py own the widgets), which the report reads.
_CHOICE_KEYS = (state.K_REL_BINS, state.K_REL_BINS_FOR, state.K_BINS_L, state.K_BINS_EPS, state.K_BINS_BMAX,
                state.K_BINS_FOR, state.K_GROUPS_BY, state.K_GROUPS_BY2, state.K_GROUPS_EVERY, state.K_GROUPS_FOR)


def audit_choices(view: state.MetricView, n_bins: int | None = None,
                  session: Mapping[str, Any] | None = None, data_key: str | None = None) -> state.AuditChoices:
    """B of the Reliability page (``n_bins`` when the caller is that page), L, ε and the largest B of
    Bins & bias, and the Groups page's grouping (for the data of ``data_key``), as the user left them for
    this data; the pages' defaults where not visited.
    ``session``: the session state to read (default ``st.session_state``)."""
    ss = st.session_state if session is None else session
    d = state.AuditChoices.defaults(view.rows)
    if n_bins is None and ss.get(state.K_REL_BINS_FOR) == view.key and ss.get(state.K_REL_BINS):
        n_bins = int(ss[state.K_REL_BINS])
    bmax = int(ss[state.K_BINS_BMAX]) if ss.get(state.K_BINS_FOR) == view.key and ss.get(state.K_BINS_BMAX) else d.bmax
    group_by: tuple[str, ...] = ()
    if data_key is not None and ss.get(state.K_GROUPS_FOR) == data_key and ss.get(state.K_GROUPS_BY):
        second = ss.get(state.K_GROUPS_BY2)
        group_by = (ss[state.K_GROUPS_BY],) + ((second,) if second and second != state.GROUPS_NONE else ())
    return state.AuditChoices(n_bins=int(n_bins or d.n_bins), lipschitz=float(ss.get(state.K_BINS_L, d.lipschitz)),
                              eps=float(ss.get(state.K_BINS_EPS, d.eps)), bmax=bmax, group_by=group_by,
                              group_every=str(ss.get(state.K_GROUPS_EVERY) or "") if group_by else "")


def session_report(loaded: state.Loaded | None, view: state.MetricView | None, choices: state.AuditChoices | None,
                   results: Mapping[str, runs.JobResult]) -> str:
    """The report's HTML: the audit of ``loaded`` as ``view`` measures it (the pages' ``choices``), then
    every result of ``results`` (job kind -> result, in :data:`REPORT_KINDS` order). Reads no session
    state, so it can run in the download's thread."""
    from dashboard import audit, report

    secs: list[report.ReportSection] = []
    names = []
    if loaded is not None and view is not None and choices is not None:
        secs += audit.audit_sections(loaded, view, choices)
        names.append(loaded.name)
    recal = [_section_for(k, r) for k, r in results.items()]
    if secs and not recal:
        # A top-label file: not "yet" (the pages refuse it), and what would make recalibration possible
        words = (report.NOTHING_RUN + " " + texts.NO_RECAL_YET if loaded.preds.can_recalibrate
                 else texts.NO_RECAL_TOP_LABEL)
        recal = [report.ReportSection(title="Recalibration", paragraphs=[words])]
    names += [r.data_name for r in results.values() if r.data_name]
    return report.build_report(secs + recal, data_name=", ".join(dict.fromkeys(names)) or "–")


def report_button(key: str, *, label: str = "Session report (HTML)", n_bins: int | None = None,
                  help: str | None = None) -> None:
    """Download the session's HTML report: the audit of the loaded data (the Data, Reliability and
    Bins & bias pages as the user left them; ``n_bins``: the Reliability page's B when it calls) and
    every recalibration result. Built only when clicked."""
    loaded = state.current()
    # The callable runs in another thread when clicked: take what it needs from the session now
    # (the pages' choices as a copy of their session keys; they become AuditChoices on the click).
    results = {k: r for k in REPORT_KINDS if (r := result_of(k)) is not None}
    view = state.metric_view(loaded) if loaded is not None else None
    chosen = {k: st.session_state[k] for k in _CHOICE_KEYS if k in st.session_state}

    def build() -> bytes:
        choices = audit_choices(view, n_bins, session=chosen, data_key=loaded.key) if view is not None else None
        return session_report(loaded, view, choices, results).encode()

    st.download_button(label, data=build, file_name="pbr_calib_report.html", mime="text/html", key=key,
                       icon=":material/description:", on_click="ignore", disabled=loaded is None and not results,
                       help=help or texts.REPORT_HELP)


def _section_for(kind: str, r: runs.JobResult) -> report.ReportSection:
    from dashboard import report

    return {"pbr": report.pbr_section, "compare": report.compare_section, "sweep": report.sweep_section,
            "groupgap": report.group_gap_section, "slicegap": report.group_gap_section,
            "generalization": report.generalization_section, "ship": report.apply_section,
            "apply": report.apply_section}[kind](r)


def change(before: float, after: float, *, points: bool = False) -> dict[str, Any]:
    """``st.metric`` keyword arguments for the change from ``before`` to ``after``: the signed change
    (4 decimals, or percentage points with ``points``), grey and without an arrow.

    No colour: green or red says "better" or "worse", and the change alone is no test of that (on
    144 held-out rows of calibrated data, a temperature scaling's ECE card was green in 44 % of files
    and red in 55 %). A change that rounds to 0 is written "+0…" (Streamlit wrote "-0.00 pt").
    The ECE card is coloured by a test instead (:func:`ece_change`).
    """
    text = f"{100 * (after - before):+.2f} pt" if points else f"{after - before:+.4f}"
    if float(text.replace(" pt", "")) == 0.0:
        text = text.replace("-", "+")
    return {"delta": text, "delta_color": "off", "delta_arrow": "off"}


def ece_change(before: float, after: float, worse_shown: bool | None,
               better_shown: bool | None = None) -> dict[str, Any]:
    """``st.metric`` keyword arguments for the "ECE after" card: the change, red with an up arrow only
    where the rows show the rise beyond the ECE's noise (``worse_shown``, the run's
    :func:`pbr_core.evaluation.ece_rise_shown`), green with a down arrow where they show the fall beyond
    it (``better_shown``: the PBR page's run tests both ways); otherwise grey without an arrow. Without
    ``better_shown`` a fall stays grey:
    the library has no tested rule for "better" (the test of calibration under the cards is what says
    whether the rows after are calibrated); ``texts.ECE_CARD_COLOUR`` says so in the card's help."""
    grey = change(before, after)
    if worse_shown or better_shown:  # inverse: a rise red with the up arrow, a fall green with the down arrow
        return {"delta": grey["delta"], "delta_color": "inverse"}
    return grey


def nll_card(before: dict, after: dict) -> dict[str, Any]:
    """``st.metric`` value and change for the NLL after a recalibration: "infinite" where rows gave what
    happened a probability of 0 (``nll_infinite_rows``), and no difference computed from a floored
    infinity ("from infinite" instead of the improvement the floor makes up)."""
    inf_before, inf_after = before.get("nll_infinite_rows", 0), after.get("nll_infinite_rows", 0)
    value = texts.nll_value(after["nll"], inf_after)
    if not inf_before and not inf_after:
        return {"value": value, **change(before["nll"], after["nll"])}
    delta = (texts.NLL_STILL_INFINITE if inf_before and inf_after else
             texts.NLL_FROM_INFINITE if inf_before else texts.nll_to_infinite(before["nll"]))
    return {"value": value, "delta": delta, "delta_color": "off", "delta_arrow": "off"}


def csv_button(label: str, table: pd.DataFrame, file_name: str, key: str, help: str | None = None) -> None:
    # Formula-like text cells neutralised (pbr_core.loading.writing): the file is opened in spreadsheets.
    st.download_button(label, data=csv_text(table).encode(), file_name=file_name, mime="text/csv",
                       key=key, icon=":material/table_view:", on_click="ignore", help=help)


def lazy_button(label: str, make: Callable[[], bytes], file_name: str, mime: str, key: str, *,
                icon: str = ":material/download:", help: str | None = None) -> None:
    st.download_button(label, data=make, file_name=file_name, mime=mime, key=key, icon=icon,
                       on_click="ignore", help=help)


def recalibrator_download(r: runs.Downloads, file_name: str, key: str, help: str | None = None) -> None:
    """The fitted recalibrator's download (JSON), with beside it the choice to leave out the fingerprint of
    its fit rows and what keeping it tells whoever holds the file (``texts.LEAVE_OUT_FIT_ROWS``)."""
    leave_out = st.checkbox(texts.LEAVE_OUT_FIT_ROWS, key=f"{key}_no_fit_rows", help=texts.LEAVE_OUT_FIT_ROWS_HELP)
    lazy_button("Fitted recalibrator (JSON)", lambda: r.recalibrator_json(fit_rows=not leave_out), file_name,
                "application/json", key, icon=":material/data_object:", help=help)


def score_map_download(r: runs.Downloads, key: str) -> dict | None:
    """Beside a recalibrator's download on scores the Data page mapped to probabilities: the map itself (JSON,
    ``pbr_core.scores.apply_score_map``), which new scores of the model go through first (audit 14, A).
    Returns the map (None, and nothing shown, for data read as probabilities)."""
    import json

    score_map = r.preds.score_map if r.preds is not None else None
    if score_map:
        lazy_button("Score map (JSON)", lambda: json.dumps(score_map, indent=1).encode(),
                    texts.score_map_file_name(score_map["score_column"]), "application/json", key,
                    icon=":material/data_object:", help=texts.SCORE_MAP_JSON_HELP)
    return score_map


#: A saved recalibrator uploaded to Fit & apply is refused unread beyond this many bytes: reading JSON
#: numbers takes ~28 times the file's bytes (a 48 MiB file, matrix scaling at K = 5,000, peaked at 1.37 GB,
#: audit 12c). The largest file the pages can use, matrix scaling at their class limit (1,000 classes:
#: a million numbers), is about 21 MB; the library's own bound (MAX_FILE_BYTES) is 64 MiB.
SAVED_MAX_BYTES = 24 * 2**20
#: Files from this size on are read in the server's one turn for big reads (dashboard.state.big_read_turn).
SAVED_SERIAL_BYTES = 4 * 2**20


def saved_file_problem(data: bytes, name: str) -> str | None:
    """Why an uploaded recalibrator file is refused before it is parsed, or None: over
    :data:`SAVED_MAX_BYTES`, or (from its first 64 KB, where a file written by pbr-calib declares them)
    a K^2 method of more classes than the pages use."""
    import re

    from dashboard import fit_estimate
    from pbr_core.loading._limits import format_bytes

    if len(data) > SAVED_MAX_BYTES:
        return texts.saved_too_large(name, format_bytes(len(data)), format_bytes(SAVED_MAX_BYTES))
    head = bytes(data[:1 << 16])
    method = re.search(rb'"method"\s*:\s*"([a-z_]{1,40})"', head)
    classes = re.search(rb'"n_classes"\s*:\s*(\d{1,12})\b', head)
    if method and classes:
        return saved_classes_problem(method.group(1).decode(), int(classes.group(1)), name)
    return None


def saved_classes_problem(method: str, k: int | None, name: str) -> str | None:
    """Why a saved recalibrator of ``method`` on ``k`` classes is refused (a K^2 method beyond the pages'
    class limit), or None; an unknown method is left to the library's own words."""
    from dashboard import fit_estimate
    from pbr_core.recalibrators import available_methods, class_power

    if method not in available_methods() or class_power(method) < 2 or not k or k <= fit_estimate.RECAL_MAX_CLASSES:
        return None
    return texts.saved_too_many_classes(name, texts.method_label(method), k, fit_estimate.RECAL_MAX_CLASSES)


def gp_fit_time(est) -> None:
    """Say a GP run's time estimate (``fit_estimate.Estimate``) before it starts, as the PBR page does:
    a box when it is long (over a minute), a caption otherwise."""
    if est.long:
        st.info(est.sentence(), icon=":material/hourglass_top:")
    else:
        st.caption(texts.estimate_caption(est.sentence()))


def matrix_fit_time(methods: list[str], n: int | Sequence[int], k: int | None, fits: int = 1,
                    max_iter: int | None = None) -> bool:
    """Before a run with fits of a K x K matrix (matrix scaling, Dirichlet calibration, SMS): say how long
    they will typically take, or refuse the run beyond the server's limit with what to do instead
    (``fit_estimate``; audit 12c: Dirichlet calibration on 1,000 classes ran for minutes unannounced).
    ``n`` is the rows of each method's fit, or the rows of each of its fits in one fold (the sweep fits
    every n_re value; a group-gap run fits every row and each group); ``fits`` is the folds.
    Returns whether the run may start; nothing is shown for runs without such fits."""
    from dashboard import fit_estimate

    sizes = [int(n)] if isinstance(n, (int, np.integer)) else [int(v) for v in n]
    chosen = [m for m in methods if fit_estimate.quadratic(m)]
    if not chosen or not k or not sizes:
        return True
    if k > fit_estimate.RECAL_MAX_CLASSES:
        st.error(texts.recal_too_many_classes([texts.method_label(m) for m in chosen], k,
                                              fit_estimate.RECAL_MAX_CLASSES), icon=":material/block:")
        return False
    seconds = sum(fit_estimate.recal_run_seconds(chosen, size, k, fits, max_iter) for size in sizes)
    if seconds > fit_estimate.recal_max_seconds():
        st.error(texts.recal_too_long([texts.method_label(m) for m in chosen], k, max(sizes), seconds,
                                      fit_estimate.recal_max_seconds(), fits, len(sizes)), icon=":material/block:")
        return False
    sentence = fit_estimate.recal_sentence(seconds, fits * len(chosen) * len(sizes))
    if seconds > 60:
        st.info(sentence, icon=":material/hourglass_top:")
    else:
        st.caption(texts.estimate_caption(sentence))
    return True


def start(kind: str, label: str, work: Callable[[jobs.JobContext], runs.JobResult], *, heavy: bool) -> None:
    """Start the job and rerun, so the page redraws at once with its controls disabled."""
    from dashboard import jobs

    jobs.start(kind, label, work, heavy=heavy)
    st.rerun()


def run_panel(kind: str, loaded: state.Loaded, running: bool, *, button: str, button_key: str,
              controls: Callable[[state.Loaded, bool], Settings | None],
              start_job: Callable[[state.Loaded, Settings], None],
              results: Callable[[state.Loaded, runs.JobResult], None]) -> None:
    """A page's settings box with its Run button, then the job's status, then its last result.

    ``controls(loaded, running)`` draws the settings and returns them (None: not runnable yet);
    the button starts ``start_job(loaded, settings)``; controls and button are disabled while a
    job runs; ``results(loaded, result)`` draws the last finished (or stopped) result.
    """
    with st.container(border=True):
        settings = controls(loaded, running)
        if st.button(button, key=button_key, type="primary", icon=":material/play_arrow:",
                     disabled=running or settings is None) and settings is not None:
            start_job(loaded, settings)
    job_status(kind)
    result = result_of(kind)
    if result is not None:
        results(loaded, result)
