"""Background jobs and the server-wide fit lock (dashboard.jobs), without Streamlit, plus stopping runs."""

from __future__ import annotations

import threading
import time
import types

import numpy as np
import pandas as pd
import pytest

import pbr_core
from dashboard import jobs, runs
from pbr_core.experiments import Cancelled
from pbr_core.progress import track


def _wait(cond, timeout: float = 10.0) -> None:
    end = time.time() + timeout
    while not cond():
        if time.time() > end:
            raise AssertionError("timed out")
        time.sleep(0.01)


def test_a_job_reports_progress_and_its_result():
    def work(ctx: jobs.JobContext):
        for i in range(3):
            ctx.progress(i + 1, 3, f"fit {i + 1}")
        return "result"

    job = jobs.start_job("compare", "three fits", work, heavy=False, lock=None)
    assert job.join(5)
    assert (job.status, job.result, job.done, job.total, job.last) == ("done", "result", 3, 3, "fit 3")
    assert job.fraction() == 1.0 and job.elapsed() >= 0


def test_progress_text_says_what_is_done_and_what_runs():
    job = jobs.Job(kind="compare", label="x", heavy=False, status="running", started=time.time())
    ctx = jobs.JobContext(job)
    ctx.progress(4, 16, "isotonic, fold 1/3")
    assert jobs.progress_text(job).startswith("4 of 16 fits done · last finished: isotonic, fold 1/3 · ")
    ctx.step("Fitting PBR on 300 rows")
    assert jobs.progress_text(job).startswith("4 of 16 fits done · Fitting PBR on 300 rows · ")


def test_the_optimiser_count_is_named_for_the_gp_fit_it_belongs_to():
    """Audit 14 D: "last finished: Isotonic regression … · optimiser iteration 130 (budget 1,000)" read as
    if isotonic regression had an optimiser; the count is the running GP fit's, and the line says so."""
    job = jobs.Job(kind="sweep", label="x", heavy=True, status="running", started=time.time())
    ctx = jobs.JobContext(job)
    ctx.progress(5, 24, "Isotonic regression, n_re = 10, fold 2/3")
    ctx.fit_progress(130, 1000, "pbr fit")   # the GP fit that runs next reports its iterations
    line = jobs.progress_text(job)
    assert line.startswith("5 of 24 fits done · last finished: Isotonic regression, n_re = 10, fold 2/3 · "
                           "now fitting PBR: optimiser iteration 130 (budget 1,000) · "), line
    ctx.progress(6, 24, "PBR, n_re = 10, fold 2/3")   # the fit ended: no count left over
    assert "optimiser" not in jobs.progress_text(job)
    ctx.fit_progress(3, 7, "one-vs-all maps")           # inner progress of a fit without an optimiser
    assert "optimiser" not in jobs.progress_text(job)


def test_a_failing_job_keeps_a_plain_message_logs_the_traceback_and_releases_the_lock(caplog):
    lock = jobs.FitLock()
    with caplog.at_level("ERROR", logger="dashboard.jobs"):
        job = jobs.start_job("pbr", "bad", lambda ctx: 1 / 0, heavy=True, lock=lock)
        assert job.join(5)
    # A bug: the page gets words and a pointer to the log; the log gets the traceback.
    assert job.status == "failed" and job.error.startswith("an unexpected error in pbr-calib (ZeroDivisionError)")
    assert "server's log" in job.error and "Traceback" not in job.error and "line" not in job.error
    assert not hasattr(job, "traceback")
    record = next(r for r in caplog.records if r.name == "dashboard.jobs")
    assert "'pbr' (bad) failed" in record.getMessage() and record.exc_info[0] is ZeroDivisionError
    assert not lock.busy


@pytest.mark.parametrize("exc,message", [
    (RuntimeError("GP fit diverged: NaN objective."), "GP fit diverged: NaN objective."),   # the library's words
    (ValueError("Expected at least 2 recalibration samples, but got 1."), "Expected at least 2 recalibration"),
    (MemoryError(), "the computer ran out of memory"),
    (KeyError("maps"), "an unexpected error in pbr-calib (KeyError)"),
    (RuntimeError(""), "an unexpected error in pbr-calib (RuntimeError)"),
])
def test_the_failure_message_is_the_library_s_words_or_a_pointer_to_the_log(exc, message):
    assert jobs.failure_message(exc).startswith(message)


def test_stop_keeps_the_partial_table():
    def work(ctx: jobs.JobContext):
        rows = []
        for i in range(1000):
            if ctx.cancelled():
                raise Cancelled(pd.DataFrame(rows), len(rows), 1000)
            rows.append({"fold": i})
            time.sleep(0.005)
        return pd.DataFrame(rows)

    job = jobs.start_job("compare", "long", work, heavy=False, lock=None)
    _wait(lambda: job.status == "running")
    time.sleep(0.05)
    job.request_cancel()
    assert job.join(5)
    assert job.status == "stopped" and 0 < len(job.result) < 1000


def test_fit_progress_and_track_honour_stop():
    job = jobs.Job(kind="pbr", label="x", heavy=True)
    ctx = jobs.JobContext(job)
    ctx.fit_progress(50, 200)
    assert job.inner == 0.25 and job.fraction() == 0.25
    with runs.watched(ctx):  # a library loop (one-vs-all maps) reports to fit_progress
        seen = list(track(range(4), total=4))
    assert seen == [0, 1, 2, 3]
    job.request_cancel()
    with pytest.raises(Cancelled):
        ctx.fit_progress(60, 200)
    with pytest.raises(Cancelled), runs.watched(ctx):
        list(track(range(4), total=4))


def test_heavy_jobs_wait_for_the_lock_and_light_ones_do_not():
    lock = jobs.FitLock()
    holder = lock.hold("someone's PBR fit")
    heavy = jobs.start_job("pbr", "mine", lambda ctx: "heavy done", heavy=True, lock=lock)
    light = jobs.start_job("compare", "temperature only", lambda ctx: "light done", heavy=False, lock=lock)
    assert light.join(5) and light.result == "light done"
    time.sleep(0.3)
    assert heavy.status == "waiting"
    message = jobs.waiting_message(heavy, lock)
    assert "Another fit is running" in message and "someone's PBR fit" in message
    assert "another browser session" in message
    lock.release()
    assert heavy.join(5) and heavy.status == "done" and heavy.result == "heavy done"
    assert not lock.busy and holder.label


def test_cancelling_while_waiting_runs_nothing():
    lock = jobs.FitLock()
    lock.hold()
    ran = threading.Event()
    job = jobs.start_job("pbr", "mine", lambda ctx: ran.set(), heavy=True, lock=lock)
    _wait(lambda: job.status == "waiting")
    job.request_cancel()
    assert job.join(5)
    assert job.status == "stopped" and job.result is None and not ran.is_set()
    lock.release()


def test_a_job_whose_session_ended_stops_and_frees_the_lock():
    lock = jobs.FitLock()
    alive = threading.Event()
    alive.set()

    def work(ctx):
        for i in range(2000):
            if ctx.cancelled():
                raise Cancelled()
            time.sleep(0.005)
        return "finished"

    job = jobs.start_job("pbr", "orphan", work, heavy=True, lock=lock, alive=alive.is_set)
    _wait(lambda: job.status == "running")
    alive.clear()  # the browser tab was closed
    assert job.join(5) and job.status == "stopped" and not lock.busy
    assert "session has ended" in job.message
    # One waiting in line for a session that is gone leaves the queue without running.
    lock.hold()
    waiting = jobs.start_job("pbr", "queued orphan", lambda ctx: "ran", heavy=True, lock=lock, alive=lambda: False)
    assert waiting.join(5) and waiting.status == "stopped" and waiting.result is None
    lock.release()


def test_a_closed_tab_stops_its_job_after_a_grace_period_and_a_blip_does_not():
    """SessionWatch: connected -> alive; disconnected -> alive for `grace` seconds, then not;
    reconnecting within the grace period (same session id) restarts the count; gone -> not alive."""
    clock = [0.0]
    state = {"s1": "connected"}
    watch = jobs.SessionWatch("s1", grace=5.0, connection=state.get, clock=lambda: clock[0])
    assert watch()
    state["s1"] = "disconnected"           # a blip: back within the grace period
    assert watch()
    clock[0] = 4.0
    assert watch()
    state["s1"] = "connected"
    assert watch()
    state["s1"] = "disconnected"           # the tab is closed: the count starts again from here
    clock[0] = 6.0
    assert watch()
    clock[0] = 10.9
    assert watch()
    clock[0] = 11.0
    assert not watch()
    state["s1"] = "gone"                    # Streamlit forgot the session: stop at once
    assert not jobs.SessionWatch("s1", connection=state.get)()


def test_session_connection_asks_whether_the_websocket_is_open(monkeypatch):
    """Outside a Streamlit server (or for a job without a session) the job counts as connected."""
    assert jobs.session_connection("") == "connected"
    assert jobs.session_connection("no-such-session") == "connected"   # no runtime here

    class Manager:
        def is_active_session(self, sid):
            return sid == "open"

        def get_session_info(self, sid):
            return object() if sid in ("open", "kept") else None

    class FakeRuntime:
        @staticmethod
        def exists():
            return True

        @staticmethod
        def instance():
            return types.SimpleNamespace(_session_mgr=Manager())

    import streamlit.runtime

    monkeypatch.setattr(streamlit.runtime, "Runtime", FakeRuntime)
    assert [jobs.session_connection(s) for s in ("open", "kept", "gone")] == ["connected", "disconnected", "gone"]
    assert jobs.session_alive("kept") and not jobs.session_alive("gone")


def test_one_heavy_job_at_a_time():
    lock = jobs.FitLock()
    running = []
    overlap = []

    def work(ctx):
        running.append(1)
        overlap.append(len(running))
        time.sleep(0.05)
        running.pop()

    started = [jobs.start_job("pbr", f"fit {i}", work, heavy=True, lock=lock) for i in range(4)]
    assert all(j.join(10) for j in started)
    assert max(overlap) == 1 and all(j.status == "done" for j in started)


class _StopAfter(runs.NullReporter):
    """Asks to stop once ``n`` fits have been reported."""

    def __init__(self, n: int) -> None:
        self.n, self.done = n, 0

    def progress(self, done: int, total: int, message: str = "") -> None:
        self.done = done

    def cancelled(self) -> bool:
        return self.done >= self.n


def test_run_compare_stopped_keeps_finished_folds(cifar10):
    logits, labels = cifar10
    preds = pbr_core.Predictions.from_arrays(logits[:1500], labels[:1500])
    s = runs.CompareSettings.of(["uncalibrated", "temperature"], 300, 5, 0)
    result = runs.run_compare(preds, s, _StopAfter(4))
    assert result.stopped and len(result.table) == 4
    assert list(result.table["fold"]) == [0, 0, 1, 1]
    # fold 1 (index 0) finished before the stop, so its diagrams are there, taken from its own fits
    assert set(result.diagrams) == {"uncalibrated", "temperature"}
    from pbr_core.evaluation import reliability_table
    from pbr_core.experiments import fit_and_test
    from pbr_core.recalibrators import get_recalibrator

    h = fit_and_test(preds, get_recalibrator("temperature"), 300, fold=0, seed=0)
    test_set, probs = h.test_set, h.test_probs
    expected = reliability_table(probs, test_set.labels, preds.kind, "positive")
    pd.testing.assert_frame_equal(result.diagrams["temperature"], expected)
    full = runs.run_compare(preds, runs.CompareSettings.of(["uncalibrated", "temperature"], 300, 2, 0), runs.NullReporter())
    assert not full.stopped and set(full.diagrams) == {"uncalibrated", "temperature"}
    np.testing.assert_allclose(full.table["ece"], result.table["ece"])  # the same folds, the same numbers
    none = runs.run_compare(preds, runs.CompareSettings.of(["uncalibrated"], 300, 1, 0, diagrams=False),
                            runs.NullReporter())
    assert none.diagrams == {} and len(none.table) == 1


def test_run_sweep_stopped_keeps_finished_fits(cifar10):
    logits, labels = cifar10
    preds = pbr_core.Predictions.from_arrays(logits[:1500], labels[:1500])
    s = runs.SweepSettings(methods=("temperature",), n_re_values=(50, 100, 200), n_folds=3)
    result = runs.run_sweep(preds, s, _StopAfter(2))
    assert result.stopped and len(result.table) == 2


def test_device_label_names_the_cpu_or_a_gpu():
    label = runs.device_label()
    assert label == "CPU" or label.startswith("GPU: ")


def test_fits_per_fold_counts_a_shared_fit_once():
    s = runs.CompareSettings.of(["uncalibrated", "temperature", "pbr", "pbr_app", "gp_app"], 300, 5, 0, alpha=0.3)
    assert s.fits_per_fold() == (4, 2)  # pbr_app reuses pbr's fit; gp_app has no gp to share with
    assert runs.CompareSettings.of(["gp", "gp_app", "pbr_total", "pbr_total_app"], 300, 5, 0).fits_per_fold() == (2, 2)
    assert runs.CompareSettings.of(["uncalibrated", "isotonic"], 300, 5, 0).fits_per_fold() == (2, 0)
    # alpha by inner cross-validation: one fit per alpha of the paper's grid (8) and inner fold (5), then the final fit
    assert runs.CompareSettings.of(["temperature", "pbr_cv"], 300, 5, 0).fits_per_fold() == (1 + 8 * 5 + 1, 8 * 5 + 1)


def test_at_prior_note_only_for_fits_at_the_prior():
    """The note follows the fit's own record (runs' ``at_prior``), not a KL threshold."""
    from dashboard import texts

    assert texts.at_prior_note(False, 0.5, 1000) is None
    assert texts.at_prior_note(None, 0.5, 1000) is None   # methods without a prior
    note = texts.at_prior_note(True, 0.75, 1000)
    assert note.startswith("The fit ended at the prior") and "α = 0.75 and n_re = 1,000" in note
    assert "GP calibration" in texts.at_prior_note(True, None, 300)
