"""Releasing a session's data when its tab is gone (dashboard/sessions.py), without a browser.

A fake runtime stands in for Streamlit's (which sessions are connected, closing one, removing its
uploaded files); the session state is Streamlit's real ``SessionState``. The fake keeps a strong
reference to a closed session's object, as Streamlit's message loop does for the last session it
served, so the test also checks that the state is emptied while the session object lives on.
The end-to-end check (a real server and browser, the upload gone after the tab closes) is in
tests/browser/test_memory_browser.py; the measured memory is in benchmarks/RESULTS_memory.md.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from streamlit.runtime.state import SessionState

from dashboard import memory, sessions

GRACE = 30.0


class FakeApp:
    """Stands in for Streamlit's AppSession: it has a ``session_state``."""

    def __init__(self) -> None:
        self.session_state = SessionState()


class FakeRuntime:
    def __init__(self) -> None:
        self.active: set[str] = set()
        self.closed: list[str] = []
        self.removed: list[str] = []
        self.uploaded_file_mgr = self
        self.held: dict[str, FakeApp] = {}   # what the runtime still refers to after closing
        self.fail_close = False

    def is_active_session(self, session_id: str) -> bool:
        return session_id in self.active

    def clear_user_info_for_session(self, session_id: str) -> None:
        if self.fail_close:
            raise RuntimeError("event loop closed")
        self.closed.append(session_id)

    def remove_session_files(self, session_id: str) -> None:
        self.removed.append(session_id)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Payload:
    """Big data a session holds (weak-referenceable, to see when it is freed)."""

    def __init__(self) -> None:
        self.values = np.ones(100_000)


@pytest.fixture
def world():
    runtime, clock, releases = FakeRuntime(), Clock(), []
    sweeper = sessions.Sweeper(runtime=lambda: runtime, clock=clock, release=lambda: (gc.collect(), releases.append(1)),
                               grace_s=GRACE)
    return runtime, clock, releases, sweeper


def _open(runtime: FakeRuntime, sweeper: sessions.Sweeper, session_id: str):
    app = FakeApp()
    payload = Payload()
    app.session_state["pbr_loaded"] = payload
    runtime.active.add(session_id)
    runtime.held[session_id] = app
    sweeper.track(session_id, app.session_state, app)
    return app, weakref.ref(payload)


def test_a_closed_tab_is_released_after_the_grace_period(world):
    runtime, clock, releases, sweeper = world
    app, payload = _open(runtime, sweeper, "s1")
    assert sweeper.sweep() == [] and sweeper.tracked == {"s1"}

    runtime.active.discard("s1")           # the tab closed
    clock.t = GRACE - 1
    assert sweeper.sweep() == [] and runtime.closed == []   # a reconnect may still come
    clock.t = GRACE + 1
    assert sweeper.sweep() == ["s1"]
    assert runtime.closed == ["s1"] and runtime.removed == ["s1"] and sweeper.tracked == set()
    assert payload() is not None and releases == []   # closing happens on the event loop first

    clock.t += 5
    sweeper.sweep()
    # The runtime still refers to the session object (runtime.held), yet its data is gone and the
    # memory was handed back once.
    assert runtime.held["s1"] is app
    assert payload() is None and releases == [1]
    with pytest.raises(KeyError):
        app.session_state["pbr_loaded"]
    clock.t += 5
    sweeper.sweep()
    assert releases == [1]  # nothing more to release


def test_a_reconnect_within_the_grace_period_keeps_the_session(world):
    runtime, clock, releases, sweeper = world
    app, payload = _open(runtime, sweeper, "s1")
    runtime.active.discard("s1")
    clock.t = 20
    sweeper.sweep()
    runtime.active.add("s1")               # a network blip: the browser reconnected
    clock.t = 25
    sweeper.sweep()
    runtime.active.discard("s1")
    clock.t = 25 + GRACE - 1               # counted from when it was last seen connected
    sweeper.sweep()
    clock.t = 200
    runtime.active.add("s1")
    assert sweeper.sweep() == []
    assert runtime.closed == [] and payload() is not None and app.session_state["pbr_loaded"] is payload()


def test_only_the_gone_session_is_released(world):
    runtime, clock, releases, sweeper = world
    _, kept = _open(runtime, sweeper, "stays")
    _, gone = _open(runtime, sweeper, "leaves")
    runtime.active.discard("leaves")
    clock.t = GRACE + 1
    assert sweeper.sweep() == ["leaves"]
    clock.t += 5
    sweeper.sweep()
    assert gone() is None and kept() is not None and sweeper.tracked == {"stays"}


def test_state_freed_by_streamlit_itself_is_noticed_and_trimmed(world):
    """When Streamlit drops a session on its own, the token's finalizer tells the sweeper."""
    runtime, clock, releases, sweeper = world
    app, payload = _open(runtime, sweeper, "s1")
    del runtime.held["s1"], app
    gc.collect()
    assert payload() is None
    sweeper.sweep()
    assert releases == [1]


def test_a_failing_close_does_not_stop_the_sweeper(world):
    runtime, clock, releases, sweeper = world
    runtime.fail_close = True
    _open(runtime, sweeper, "s1")
    runtime.active.discard("s1")
    clock.t = GRACE + 1
    assert sweeper.sweep() == ["s1"]   # logged, not raised
    clock.t += 5
    sweeper.sweep()                    # the state is still emptied and the memory trimmed
    assert releases == [1]


def test_without_a_runtime_nothing_happens():
    sweeper = sessions.Sweeper(runtime=lambda: None, release=lambda: pytest.fail("no release expected"))
    state = SessionState()
    sweeper.track("s1", state)
    assert sweeper.sweep() == []
    assert isinstance(state[sessions._TOKEN_KEY], sessions.SessionToken)


def test_memory_release_runs_anywhere():
    memory.configure()
    memory.configure()  # once per process; a second call changes nothing
    memory.release_free_memory()
    import pyarrow as pa

    assert pa.default_memory_pool().backend_name == "system"


def test_the_app_under_apptest_registers_no_session():
    """AppTest's sessions are not served over a connection: nothing to release, no sweeper thread
    (which would otherwise remove AppTest's uploaded files after the grace period)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(sessions.__file__).replace("sessions.py", "app.py"), default_timeout=120).run()
    assert not at.exception
    assert sessions._SWEEPER.tracked == set() and sessions._SWEEPER._thread is None
