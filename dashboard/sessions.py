"""When a browser tab is gone, its session's data leaves the server too.

Why this module exists: Streamlit has no public hook for the end of a session. When a tab closes,
its session is kept for a reconnect (in memory, 2 minutes in Streamlit 1.67); after that its entry
only expires lazily (it is dropped on a later write to that storage), an expired session is never
shut down, and only a shut-down session has its uploaded files removed. Streamlit's message loop
also keeps the last session it served in a local variable until it serves another one. Measured
before this module (benchmarks/RESULTS_memory.md): 200 s after the tab of one 300 MB upload had
closed, the server still held ~770 MB more than when idle, and nothing would have freed it before a
restart.

How: every script run calls :func:`track`, which registers the session's id (with a weak reference
to Streamlit's session object) and stores a small token object in its ``st.session_state``. A
daemon thread (one per server process) looks every ``SWEEP_S`` seconds at the runtime's session
manager. A tracked session that has not been connected for ``GRACE_S`` seconds (a network blip
reconnects well within that) is closed through the runtime (``Runtime.clear_user_info_for_session``,
thread-safe: it makes the session non-resumable and closes it on the event loop, which shuts it
down, drops it from the reconnect storage and removes its uploaded files), and its uploaded files
are removed in any case. At the next sweep its state is emptied (the predictions, the uploaded
file held by the uploader widget), whatever still refers to the session object, then garbage is
collected, the shared parse cache lets go of what no session holds any more
(:mod:`dashboard.load_cache`) and the memory is handed back to the system
(:func:`dashboard.memory.release_free_memory`).
A ``weakref.finalize`` on the token tells the sweeper when a session's state has really been freed
(also when Streamlit frees one on its own), and the sweeper logs it.

``GRACE_S`` and ``SWEEP_S`` can be set with the environment variables ``PBR_SESSION_GRACE_S`` and
``PBR_SESSION_SWEEP_S`` (the browser test uses 1 s). Without a server (bare mode, AppTest) nothing
is tracked.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Callable
from unittest.mock import NonCallableMock

import streamlit as st

from dashboard import memory

logger = logging.getLogger(__name__)


def _seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


#: A closed tab's session is released this long after its connection ended (Streamlit would keep
#: it 120 s for a reconnect, and then not free it).
GRACE_S = _seconds("PBR_SESSION_GRACE_S", 30.0)
#: How often the sweeper looks.
SWEEP_S = _seconds("PBR_SESSION_SWEEP_S", 5.0)

_TOKEN_KEY = "pbr_session_token"


class SessionToken:
    """Kept in a session's state; when it is garbage collected, so is the rest of that state."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id


def _runtime() -> Any | None:
    """Streamlit's runtime when a server runs this app (AppTest runs it with a mock: None)."""
    from streamlit.runtime import Runtime

    runtime = Runtime.instance() if Runtime.exists() else None
    if runtime is None or isinstance(runtime, NonCallableMock):  # AppTest's runtime is a spec'd mock
        return None
    return runtime


class Sweeper:
    """Finds the tracked sessions whose tab is gone and releases them (see the module docstring).

    ``runtime`` returns the Streamlit runtime or None; ``clock`` and ``release`` are parameters so
    that the logic can be tested without a server.
    """

    def __init__(self, runtime: Callable[[], Any | None] = _runtime, clock: Callable[[], float] = time.monotonic,
                 release: Callable[[], None] = memory.release_free_memory, grace_s: float = GRACE_S) -> None:
        self._runtime, self._clock, self._release, self.grace_s = runtime, clock, release, grace_s
        # Re-entrant: a token's finalizer (which takes it) can run inside any allocation, also in a
        # thread that holds it already.
        self._lock = threading.RLock()
        self._last_seen: dict[str, float] = {}
        self._closed: set[str] = set()      # closed, their state not yet seen freed
        self._freed: set[str] = set()       # state freed since the last sweep
        self._apps: dict[str, weakref.ref] = {}
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- registering
    def track(self, session_id: str, state: Any, app_session: Any | None = None) -> None:
        """Register a session (from its script run) and leave a token in its ``state``;
        ``app_session`` (Streamlit's AppSession, held weakly) lets a closed session's state be
        cleared even while something still refers to the session object."""
        with self._lock:
            self._last_seen[session_id] = self._clock()
            if app_session is not None and session_id not in self._apps:
                self._apps[session_id] = weakref.ref(app_session)
        try:
            token = state[_TOKEN_KEY]
        except KeyError:
            token = None
        if not isinstance(token, SessionToken) or token.session_id != session_id:
            token = SessionToken(session_id)
            state[_TOKEN_KEY] = token
            weakref.finalize(token, self._on_freed, session_id)

    def _on_freed(self, session_id: str) -> None:
        # Runs wherever the state is collected (maybe the event loop): only note it.
        with self._lock:
            self._freed.add(session_id)

    @property
    def tracked(self) -> set[str]:
        with self._lock:
            return set(self._last_seen)

    # ---------------------------------------------------------------- sweeping
    def sweep(self) -> list[str]:
        """One look: close the sessions gone for ``grace_s``; trim once their state is freed.
        Returns the ids closed by this sweep."""
        runtime = self._runtime()
        if runtime is None:
            return []
        now = self._clock()
        with self._lock:
            closed = set(self._closed)
            freed, self._freed = self._freed, set()
            seen = dict(self._last_seen)
            apps = [self._apps.pop(session_id, None) for session_id in closed]
        if closed or freed:
            # Sessions closed by the previous sweep (on the event loop, since): Streamlit may still
            # refer to a closed session object (its message loop keeps the last session it served
            # in a variable until it serves another), so its state is emptied here, then the
            # garbage is collected and the memory given back (release_free_memory collects first).
            for ref in apps:
                app = ref() if ref is not None else None
                if app is not None:
                    self._clear_state(app)
            self._release()
            with self._lock:
                freed |= self._freed
                self._freed = set()
                still = self._closed - freed
                self._closed = set()
            if freed:
                logger.info("released the data of %d closed session(s)", len(freed))
            if still:
                logger.info("%d closed session(s) still referenced after collection", len(still))
        gone = []
        for session_id, last in seen.items():
            if runtime.is_active_session(session_id):
                with self._lock:
                    self._last_seen[session_id] = now
            elif now - last >= self.grace_s:
                gone.append(session_id)
        for session_id in gone:
            self._close(runtime, session_id)
        return gone

    @staticmethod
    def _clear_state(app_session: Any) -> None:
        try:
            app_session.session_state.clear()
        except Exception:  # noqa: BLE001 - the collection below still frees what it can
            logger.warning("could not clear the state of a closed session", exc_info=True)

    def _close(self, runtime: Any, session_id: str) -> None:
        with self._lock:
            self._last_seen.pop(session_id, None)
            self._closed.add(session_id)
        try:
            close = getattr(runtime, "clear_user_info_for_session", None)
            if close is not None:
                close(session_id)
            files = getattr(runtime, "uploaded_file_mgr", None)
            if files is not None:
                files.remove_session_files(session_id)
        except Exception:  # noqa: BLE001 - a failed release must never stop the sweeper
            logger.warning("could not close session %s", session_id, exc_info=True)

    # ---------------------------------------------------------------- the thread
    def start(self, every_s: float = SWEEP_S) -> None:
        """Start the sweeping thread (once)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._loop, args=(every_s,), name="pbr-session-sweeper",
                                            daemon=True)
        self._thread.start()

    def _loop(self, every_s: float) -> None:
        while True:
            time.sleep(every_s)
            try:
                self.sweep()
            except Exception:  # noqa: BLE001 - keep sweeping
                logger.warning("session sweep failed", exc_info=True)


def release_unheld() -> None:
    """After sessions were released: drop the shared parse cache's entries that no session holds any
    more (:mod:`dashboard.load_cache`; an upload's predictions leave with its last session), then hand
    the memory back to the system."""
    import gc

    from dashboard.load_cache import SHARED

    gc.collect()  # a released session's state in reference cycles: its Loaded objects leave the cache's holders
    SHARED.prune()
    memory.release_free_memory()


_SWEEPER = Sweeper(release=release_unheld)


def track() -> None:
    """Register the current session for release when its tab is gone (app.py, every run)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    runtime = _runtime()
    # Only sessions a server serves over a connection (not bare mode, not AppTest).
    if ctx is None or runtime is None or not runtime.is_active_session(ctx.session_id):
        return
    get_app_session = getattr(runtime, "get_app_session", None)
    _SWEEPER.track(ctx.session_id, st.session_state,
                   get_app_session(ctx.session_id) if get_app_session is not None else None)
    _SWEEPER.start()
