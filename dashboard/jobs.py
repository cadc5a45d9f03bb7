"""Long jobs of the recalibration pages: a background thread per job, one fit at a time per server.

Why a thread and not the script run itself: a Streamlit script run is interrupted by any widget
interaction (and by leaving the page), which would kill a ten-minute fit half-way and lose it.
Here the page only *starts* a job; the work runs in a daemon thread that reports into a plain
:class:`Job` object kept in ``st.session_state``. A small fragment (:func:`show_progress`) polls
that object twice a second and draws the progress bar, so the page stays responsive, the user can
switch pages and come back, and a Stop button can end the job within about a second: the work
runs inside ``pbr_core.cancel.cancel_when(ctx.cancelled)`` (see ``dashboard.runs.watched``), so
the library stops at its next checkpoint (every optimiser evaluation, every prediction batch);
the experiment protocols keep the fits that finished and drop the interrupted one.

One fit at a time across browser sessions: every job that fits a GP (PBR, GP calibration) takes
the process-wide :class:`FitLock` (``st.cache_resource`` makes it one object per server). A job
that finds it taken *waits in line* and starts by itself when the running one ends; its page says
what it is waiting for and offers to cancel the wait. We queue rather than ask the user to retry:
the settings are already chosen, a retry button would need to be pressed at the right moment, and
the user can leave the page meanwhile. Jobs with only classical methods (seconds of numpy) do not
take the lock, so a quick temperature-scaling comparison never waits behind a long GP run.

A job whose browser session has ended (tab closed; a reload starts a new session, which cannot see
the old one's results) stops and frees the lock: nobody could see its result. Streamlit keeps a
disconnected session for two minutes (or more) in case the tab reconnects, so "the session still
exists" would hold the lock for minutes after the tab was closed. :class:`SessionWatch` asks instead
whether the session's websocket is connected, and stops the job once it has been disconnected for
``DISCONNECT_GRACE_SECONDS`` (a network blip or a reconnecting tab, which keeps its session id, is
shorter).

Time left (:func:`time_left`). A run announces its steps with ``JobContext.plan`` (each with a
cost class, e.g. the method, and a size, e.g. the rows it fits); the estimate adds up, for the
steps still to come, the measured seconds per unit of size of finished steps of the same class.
It is shown only when every step still to come has such a measurement, except for last steps
whose cost cannot be known yet (the final fit of an alpha selection: "about 3 min left before the
last fit"): a single fit, or a comparison whose GP fits have not run once yet, shows none. Why not
"elapsed x (1 - done) / done": a GP fit's progress is its iteration count against ``max_iter``,
but fits stop on tolerance long before it (a PBR fit read "20 % done" when it was at its end, and
the page promised 2.4 min with 23 s to go), and a comparison's millisecond fits (temperature
scaling) count as much as its GP fits.

Everything above :func:`fit_lock` is plain Python (testable without Streamlit).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Literal, Sequence, TypeVar

import streamlit as st

from dashboard import texts
from dashboard.runs import JobResult, PlannedStep  # PlannedStep: (cost classes, size) of a step; see time_left
from pbr_core.experiments import Cancelled

JobStatus = Literal["waiting", "running", "done", "stopped", "failed"]

#: A failed job's traceback goes here (the server's log), never to the page.
logger = logging.getLogger(__name__)

#: How often the progress fragment redraws (seconds).
POLL_SECONDS = 0.5
_K_JOBS = "recal_jobs"

#: A job's browser session whose websocket has been closed this long is treated as gone (tab closed).
DISCONNECT_GRACE_SECONDS = 5.0

#: What the runtime says about a browser session (see :func:`session_connection`).
Connection = Literal["connected", "disconnected", "gone"]

#: What a job's work function returns (the pages' jobs: :data:`dashboard.runs.JobResult`).
R = TypeVar("R")


@dataclass(eq=False)
class Job(Generic[R]):
    """One background job and everything its page needs to show about it."""

    kind: str                      # "pbr", "compare", "sweep", "generalization"
    label: str                     # what it does, in words ("PBR fit, α = 0.5, n_re = 1,000")
    heavy: bool                    # fits a GP: takes the server-wide lock
    session_id: str = ""
    status: JobStatus = "waiting"
    done: int = 0                  # finished steps (fits) of ``total``
    total: int = 0
    message: str = ""              # what it is doing now ("Fitting PBR on 1,000 rows")
    last: str = ""                 # the step that finished last ("temperature, fold 2/10")
    inner: float | None = None     # progress inside the current fit (optimiser iterations), 0..1
    iteration: tuple[int, int] | None = None   # (optimiser iteration, its budget) of the running GP fit
    iteration_of: str = ""         # that fit's method ("pbr"), so the line names the fit the count is of
    plan: list[PlannedStep] | None = None      # the steps of ``total``, for the time-left estimate
    step_seconds: list[float | None] = field(default_factory=list)   # how long each finished step took
    step_started: float | None = None          # when the running step started
    result: R | None = None        # the work function's return value (may be partial when stopped)
    error: str | None = None       # of a failed job, in words for the page (the traceback is logged)
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        return self.status in ("waiting", "running")

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def request_cancel(self) -> None:
        self._cancel.set()

    def fraction(self, now: float | None = None) -> float:
        """Overall progress in [0, 1]: elapsed / (elapsed + time left) when there is an estimate
        (:func:`remaining_seconds`), else finished steps plus the share of the current fit."""
        if self.status == "done":
            return 1.0
        left = remaining_seconds(self, now)
        if left is not None:
            spent = self.elapsed(now)
            return min(spent / (spent + left), 1.0) if spent + left > 0 else 0.0
        if self.total <= 0:
            return float(self.inner or 0.0)
        inner = min(max(self.inner or 0.0, 0.0), 1.0)
        return min((self.done + inner) / self.total, 1.0)

    def elapsed(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or now or time.time()) - self.started

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread (tests, scripts); True when the job has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.active


class JobContext:
    """What a work function gets: report progress, ask whether to stop.

    ``progress``, ``fit_progress`` and ``cancelled`` follow the library's one protocol
    (:mod:`pbr_core.progress` and :mod:`pbr_core.cancel`): ``progress(done, total, message)`` counts
    the fits of ``compare`` and friends; ``dashboard.runs.watched`` installs ``fit_progress`` with
    ``pbr_core.progress.report_progress`` (progress inside the running fit: GP optimiser iterations,
    one-vs-all maps) and ``cancelled`` with ``pbr_core.cancel.cancel_when``, so the library checks it
    at every optimiser evaluation and prediction batch. ``fit_progress`` raises ``Cancelled`` when a
    stop was asked for. ``plan`` announces the steps ``progress`` will count (for :func:`time_left`).
    """

    def __init__(self, job: Job, alive: Callable[[], bool] | None = None) -> None:
        self.job = job
        self._alive = alive

    def plan(self, steps: Sequence[PlannedStep]) -> None:
        """The steps ``progress`` will count, in order, each ``(cost classes, size)``."""
        self.job.plan = [(tuple(keys), float(size)) for keys, size in steps]

    def progress(self, done: int, total: int, message: str = "") -> None:
        """``done`` of ``total`` steps finished; ``message`` names the one that just finished."""
        job = self.job
        now = time.time()
        done = max(int(done), 0)
        if done < len(job.step_seconds):  # counted back (a new phase): forget the later steps
            del job.step_seconds[done:]
            job.step_started = now
        elif done > len(job.step_seconds):
            # The time since the last count, shared by the steps it finished (normally one).
            n_new = done - len(job.step_seconds)
            took = None if job.step_started is None else (now - job.step_started) / n_new
            job.step_seconds += [took] * n_new
            job.step_started = now
        job.done, job.total, job.last = done, int(total), str(message)
        job.message = ""
        job.inner = None
        job.iteration = None
        job.iteration_of = ""

    def step(self, message: str) -> None:
        """Say what is happening now without counting a step."""
        self.job.message = message

    def cancelled(self) -> bool:
        if not self.job.cancel_requested and self._alive is not None and not self._alive():
            # Its browser session is gone (tab closed, or reloaded into a new session): nobody can
            # see the result any more, so free the machine for others.
            self.job.message = "Stopped: its browser session has ended"
            self.job.request_cancel()
        return self.job.cancel_requested

    def fit_progress(self, done: int, total: int, message: str = "") -> None:
        """Progress inside the running fit (``done`` of ``total``); honours Stop.

        A GP fit (``message`` "<method> fit") counts optimiser iterations against ``max_iter``;
        fits usually stop on tolerance long before it, so that count is shown as such ("iteration
        120, budget 1,000"), never turned into a time.
        """
        if total:
            self.job.inner = min(max(done / total, 0.0), 1.0)
            if message.endswith(" fit"):
                self.job.iteration = (int(done), int(total))
                self.job.iteration_of = message[: -len(" fit")]
        if self.cancelled():
            raise Cancelled()


class FitLock:
    """A process-wide lock for GP fits that knows which job holds it (for the waiting message)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.holder: Job | None = None

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def acquire(self, job: Job, poll: float = 0.2, cancelled: Callable[[], bool] | None = None) -> bool:
        """Wait for the lock until it is free or the job is cancelled; True when acquired."""
        cancelled = cancelled or (lambda: job.cancel_requested)
        while not cancelled():
            if self._lock.acquire(timeout=poll):
                self.holder = job
                return True
        return False

    def release(self) -> None:
        self.holder = None
        self._lock.release()

    # For tests and admin: take the lock as if a job held it.
    def hold(self, label: str = "a fit started elsewhere") -> Job:
        job = Job(kind="external", label=label, heavy=True, status="running", started=time.time())
        if not self.acquire(job):
            raise RuntimeError("could not take the fit lock")
        return job


def time_left(job: Job, now: float | None = None) -> tuple[float, int] | None:
    """``(seconds, n_unknown)``: the time the steps still to come will take, from the measured cost
    of finished steps like them, except the last ``n_unknown`` steps, whose cost cannot be told
    yet; or None when there is nothing honest to say.

    Each planned step (``JobContext.plan``) is ``(cost classes, size)``. A step still to come is
    estimated as its size times the seconds per unit of size of the finished steps with its first
    cost class (a finished step counts for each of its classes, so a broad class such as "any
    alpha" pools several); the running step counts with what is left of its estimate. Steps whose
    first class has no finished step yet are unknown. Unknown steps are allowed only at the end
    (e.g. the final fit of an alpha selection, whose alpha is chosen last): anywhere else, and
    without a plan, the result is None. So a single GP fit gets none (its length cannot be told from
    its iteration count: it stops on tolerance), and neither does a comparison before each method
    has run once (its GP fits cannot be told from its temperature-scaling fits).
    """
    plan = job.plan
    if job.status != "running" or not plan or len(plan) != job.total or not 0 <= job.done < job.total:
        return None
    rates: dict[str, list[float]] = {}   # cost class -> [seconds, size] of its finished steps
    for (keys, size), took in zip(plan, job.step_seconds):
        if took is None or size <= 0:
            continue
        for key in keys:
            r = rates.setdefault(key, [0.0, 0.0])
            r[0] += took
            r[1] += size
    estimates = [rates[keys[0]][0] / rates[keys[0]][1] * size if keys and keys[0] in rates else None
                 for keys, size in plan[job.done:]]
    known = 0
    while known < len(estimates) and estimates[known] is not None:
        known += 1
    if known == 0 or any(e is not None for e in estimates[known:]):
        return None
    now = time.time() if now is None else now
    in_step = 0.0 if job.step_started is None else max(now - job.step_started, 0.0)
    return max(estimates[0] - in_step, 0.0) + sum(estimates[1:known]), len(estimates) - known


def remaining_seconds(job: Job, now: float | None = None) -> float | None:
    """Seconds left when every step still to come can be estimated (see :func:`time_left`), else None."""
    left = time_left(job, now)
    return left[0] if left is not None and left[1] == 0 else None


def run_job(job: Job[R], work: Callable[[JobContext], R], lock: FitLock | None,
            alive: Callable[[], bool] | None = None) -> None:
    """Body of a job's thread: wait for the lock if needed, run ``work``, record the outcome.

    ``alive()`` says whether the browser session that started the job still exists; when it
    returns False the job stops at its next check (and leaves the queue if it is waiting).
    """
    ctx = JobContext(job, alive)
    acquired = False
    try:
        if lock is not None and job.heavy:
            job.message = "Waiting for another fit to finish"
            if not lock.acquire(job, cancelled=ctx.cancelled):
                job.status, job.message = "stopped", "Cancelled while waiting; nothing was run."
                return
            acquired = True
        job.status, job.started = "running", time.time()
        job.step_started = job.started
        job.message = "Starting"
        result = work(ctx)
        job.result = result
        stopped = bool(getattr(result, "stopped", False))
        job.status = "stopped" if stopped else "done"
    except Cancelled as exc:
        job.result = getattr(exc, "partial", None) if not _empty(getattr(exc, "partial", None)) else None
        job.status = "stopped"
    except Exception as exc:  # noqa: BLE001 - shown on the page, never crashes the server
        logger.exception("job %r (%s) failed", job.kind, job.label)
        job.error = failure_message(exc)
        job.status = "failed"
    finally:
        job.finished = time.time()
        if job.started is None:
            job.started = job.finished
        if acquired and lock is not None:
            lock.release()


def failure_message(exc: BaseException) -> str:
    """What the page says about a job that raised ``exc``: the message alone.

    The library's ``ValueError`` and ``RuntimeError`` messages are written for the user (bad
    input, a fit that failed, with advice); anything else is a bug, whose message means nothing to
    the user: the page says so and points to the server's log, where the traceback is.
    """
    text = str(exc).strip()
    if isinstance(exc, MemoryError):
        return "the computer ran out of memory. Try fewer rows, fewer folds or a smaller model."
    if isinstance(exc, (ValueError, RuntimeError)) and text:
        return text
    return (f"an unexpected error in pbr-calib ({type(exc).__name__}). The details are in the server's log; "
            "please include them in a bug report.")


def _empty(value: Any) -> bool:
    return value is None or (hasattr(value, "empty") and bool(value.empty))


class SessionWatch:
    """``alive()`` of a job started from a browser session: False once the session is gone, or once
    its websocket has stayed closed for ``grace`` seconds (the tab was closed).

    A reconnecting tab keeps its session id, so a disconnect shorter than ``grace`` (a network blip,
    a laptop waking up) leaves the job running. ``connection(session_id)`` defaults to
    :func:`session_connection` (Streamlit's session manager); tests pass their own, and a clock.
    """

    def __init__(self, session_id: str, grace: float = DISCONNECT_GRACE_SECONDS,
                 connection: Callable[[str], Connection] | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.session_id = session_id
        self.grace = grace
        self._connection = connection
        self._clock = clock
        self._since: float | None = None   # when it was first seen disconnected (this time)

    def __call__(self) -> bool:
        state = (self._connection or session_connection)(self.session_id)
        if state == "connected":
            self._since = None
            return True
        if state == "gone":
            return False
        now = (self._clock or time.monotonic)()
        if self._since is None:
            self._since = now
        return now - self._since < self.grace


def start_job(kind: str, label: str, work: Callable[[JobContext], R], *, heavy: bool,
              lock: FitLock | None, session_id: str = "", alive: Callable[[], bool] | None = None) -> Job[R]:
    """Create the job and start its daemon thread (no Streamlit needed; :func:`start` wraps this)."""
    job = Job(kind=kind, label=label, heavy=heavy, session_id=session_id)
    job._thread = threading.Thread(target=run_job, args=(job, work, lock, alive), name=f"pbr-job-{kind}",
                                   daemon=True)
    job._thread.start()
    return job


# --------------------------------------------------------------------------- Streamlit side
@st.cache_resource(show_spinner=False)
def fit_lock() -> FitLock:
    """The one :class:`FitLock` of this server process (shared by every browser session)."""
    return FitLock()


def _session_id() -> str:
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        return ctx.session_id if ctx is not None else ""
    except Exception:  # noqa: BLE001 - only used to word a message
        return ""


def session_connection(session_id: str) -> Connection:
    """Whether the browser session's websocket is open ("connected"), closed but the session kept
    for a reconnect ("disconnected"), or the session no longer exists ("gone").

    Streamlit has no public API for this; the runtime's session manager is asked, and anything
    unexpected counts as connected (a job is never stopped by mistake).
    """
    if not session_id:
        return "connected"
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return "connected"
        mgr = Runtime.instance()._session_mgr
        if mgr.is_active_session(session_id):
            return "connected"
        return "disconnected" if mgr.get_session_info(session_id) is not None else "gone"
    except Exception:  # noqa: BLE001
        return "connected"


def session_alive(session_id: str) -> bool:
    """Whether the browser session still exists (connected, or disconnected but resumable)."""
    return session_connection(session_id) != "gone"


def jobs() -> dict[str, Job[JobResult]]:
    return st.session_state.setdefault(_K_JOBS, {})


def get(kind: str) -> Job[JobResult] | None:
    """The latest job of this kind in this session (running or finished), or None."""
    return jobs().get(kind)


def start(kind: str, label: str, work: Callable[[JobContext], JobResult], *, heavy: bool) -> Job[JobResult]:
    """Start a job for this session; replaces the previous job of the same kind (kept results go)."""
    old = get(kind)
    if old is not None and old.active:
        return old  # a double click never starts two
    sid = _session_id()
    job = start_job(kind, label, work, heavy=heavy, lock=fit_lock(), session_id=sid, alive=SessionWatch(sid))
    jobs()[kind] = job
    return job


def _minutes(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def waiting_message(job: Job, lock: FitLock) -> str:
    """The sentence shown while ``job`` waits for the lock."""
    holder = lock.holder
    if holder is None:
        return "Another fit is running, waiting for it to finish …"
    where = "in this browser session" if holder.session_id and holder.session_id == job.session_id else \
        "in another browser session"
    pct = f", {holder.fraction():.0%} done" if holder.total or holder.inner else ""
    # The label may name another session's file (an upload's name): shown as text (issue 34).
    return (f"Another fit is running, waiting for it to finish: **{texts.md(holder.label)}** ({where}, "
            f"running for {_minutes(holder.elapsed())}{pct}). Only one GP fit runs at a time on this "
            "server so that fits do not fight over the GPU (or the CPU cores). Yours starts by itself "
            "when it ends; you can leave this page meanwhile.")


def _fit_name(method: str) -> str:
    """The running GP fit's method for people ("PBR"); "a GP method" when unnamed or unknown."""
    if not method:
        return "a GP method"
    try:
        return texts.md(texts.method_label(method))
    except Exception:  # noqa: BLE001 - an unregistered name: shown as it is
        return texts.md(method)


def progress_text(job: Job) -> str:
    """The line above the progress bar: fits done, what runs now, what finished last, time."""
    parts = []
    if job.total > 1:
        parts.append(f"{job.done} of {job.total} fits done")
    if job.message:  # the library's progress words: shown as text
        parts.append(texts.md(job.message))
    elif job.last and job.total > 1:
        parts.append(f"last finished: {texts.md(job.last)}")
    if job.iteration is not None:  # the running GP fit's, named: never beside "last finished" alone (audit 14 D)
        parts.append(f"now fitting {_fit_name(job.iteration_of)}: optimiser iteration {job.iteration[0]:,} "
                     f"(budget {job.iteration[1]:,})")
    left = time_left(job)
    when = ""
    if left is not None:
        when = f", about {_minutes(left[0])} left"
        if left[1]:
            when += " before the last fit" if left[1] == 1 else f" before the last {left[1]} fits"
    parts.append(_minutes(job.elapsed()) + when)
    return " · ".join(parts)




@st.fragment(run_every=POLL_SECONDS)
def show_progress(kind: str) -> None:
    """Progress bar, status line and Stop button of the job of ``kind``; reruns the page when it ends."""
    job = get(kind)
    if job is None or not job.active:
        st.rerun()  # finished since the page was drawn: redraw it with the results
        return
    if job.status == "waiting":
        st.info(waiting_message(job, fit_lock()), icon=":material/hourglass_top:")
        st.button("Cancel", key=f"{kind}_job_cancel", on_click=job.request_cancel, icon=":material/close:",
                  help="Leave the queue; nothing has been computed yet.")
        return
    st.progress(job.fraction(), text=progress_text(job))
    if job.cancel_requested:
        st.caption("Stopping … finished fits are kept.")
    else:
        st.button("Stop", key=f"{kind}_job_cancel", on_click=job.request_cancel, icon=":material/stop:",
                  help="Stop now (within about a second). Fits that have finished are kept and shown; "
                       "the one running is dropped.")
