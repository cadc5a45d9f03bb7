"""The server's queue of big reads (audit 12c, finding 1): reads are queued by the loader's estimate
of their memory, not by the file's compressed bytes, and the same bytes uploaded by several sessions
at once are parsed once.

The uploads are made through :func:`dashboard.state.load_upload` in threads (each a session: bare
Streamlit keeps one session state, which these tests do not read), with the queue's line scaled down
through the administrator's variable ``PBR_CALIB_SERIAL_LOAD_MEMORY``.
"""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

from dashboard import load_cache, state
from dashboard.load_cache import SharedLoads
from pbr_core import Predictions
from pbr_core.loading._limits import table_memory


def _onehot_npz(n: int, k: int, seed: int = 0) -> bytes:
    """A small-bomb NPZ: n rows of one-hot probabilities over k classes, compressed to a few KB."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    probs = np.zeros((n, k))
    probs[np.arange(n), labels] = 1.0
    buf = io.BytesIO()
    np.savez_compressed(buf, probs=probs, labels=labels)
    return buf.getvalue()


@pytest.fixture(autouse=True)
def _fresh_cache():
    load_cache.SHARED.clear()
    yield
    load_cache.SHARED.clear()


def _load_in_thread(data: bytes, name: str, errors: list) -> threading.Thread:
    def run():
        errors.append(state.load_upload(data, name))
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_small_file_that_expands_beyond_the_line_waits_for_the_big_read_turn(monkeypatch):
    data = _onehot_npz(2000, 200)  # ~20 KB; the loader estimates its read at 6.5 MB
    assert len(data) < 100_000 and table_memory(2000, 200) > 4 << 20
    monkeypatch.setenv("PBR_CALIB_SERIAL_LOAD_MEMORY", str(4 << 20))
    errors: list = []
    with state.big_read_turn():  # another session's big read
        thread = _load_in_thread(data, "onehot.npz", errors)
        thread.join(1.5)
        assert thread.is_alive() and not errors  # waits: counted by its memory, not its 20 KB
    thread.join(30)
    assert errors == [None]


def test_a_file_estimated_below_the_line_does_not_wait(monkeypatch):
    data = _onehot_npz(200, 10)
    monkeypatch.setenv("PBR_CALIB_SERIAL_LOAD_MEMORY", str(4 << 20))
    errors: list = []
    with state.big_read_turn():
        thread = _load_in_thread(data, "small.npz", errors)
        thread.join(30)
        assert not thread.is_alive() and errors == [None]


def test_a_file_over_the_real_limit_is_refused_without_waiting(monkeypatch):
    monkeypatch.setenv("PBR_CALIB_SERIAL_LOAD_MEMORY", str(1 << 20))
    monkeypatch.setenv("PBR_CALIB_MAX_READ_MEMORY", str(4 << 20))
    errors: list = []
    with state.big_read_turn():
        thread = _load_in_thread(_onehot_npz(2000, 200), "onehot.npz", errors)
        thread.join(30)
        assert not thread.is_alive()
    assert errors[0] and "more than the limit of 4 MB of memory" in errors[0]


def test_big_reads_of_different_files_run_one_at_a_time(monkeypatch):
    monkeypatch.setenv("PBR_CALIB_SERIAL_LOAD_MEMORY", str(4 << 20))
    active, peak, lock = [0], [0], threading.Lock()
    real_read = state._read

    def counting_read(*args, **kwargs):
        limits = args[5] if len(args) > 5 else kwargs.get("limits")
        full = limits.max_memory != 4 << 20  # the read in its turn, not the first estimate
        with lock:
            active[0] += full
            peak[0] = max(peak[0], active[0])
        try:
            if full:
                time.sleep(0.3)
            return real_read(*args, **kwargs)
        finally:
            with lock:
                active[0] -= full

    monkeypatch.setattr(state, "_read", counting_read)
    errors: list = []
    threads = [_load_in_thread(_onehot_npz(2000, 200, seed), f"f{seed}.npz", errors) for seed in range(3)]
    for thread in threads:
        thread.join(60)
    assert errors == [None, None, None]
    assert peak[0] == 1


def test_the_same_bytes_uploaded_by_several_sessions_at_once_are_parsed_once(monkeypatch):
    calls, lock = [0], threading.Lock()
    real_read = state._read

    def counting_read(*args, **kwargs):
        with lock:
            calls[0] += 1
        time.sleep(0.5)  # the others arrive while it parses
        return real_read(*args, **kwargs)

    monkeypatch.setattr(state, "_read", counting_read)
    errors: list = []
    data = _onehot_npz(500, 20)
    threads = [_load_in_thread(data, "same.npz", errors) for _ in range(4)]
    for thread in threads:
        thread.join(60)
    assert errors == [None] * 4
    assert calls[0] == 1


def test_waiters_share_the_first_parse_or_its_error():
    cache = SharedLoads()
    calls, results, started = [0], [], threading.Event()

    def failing():
        calls[0] += 1
        started.set()
        time.sleep(0.3)
        raise ValueError("bad file")

    def ask():
        try:
            cache.get_or_parse("k", failing, keep_unheld=False)
        except ValueError as exc:
            results.append(str(exc))

    first = threading.Thread(target=ask)
    first.start()
    started.wait(5)
    others = [threading.Thread(target=ask) for _ in range(3)]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join(10)
    assert calls[0] == 1 and results == ["bad file"] * 4


def test_a_parse_stopped_without_an_outcome_lets_a_waiter_parse():
    cache = SharedLoads()
    started, got = threading.Event(), []

    class Stopped(BaseException):
        pass

    def stopped():
        started.set()
        time.sleep(0.3)
        raise Stopped

    def first():
        try:
            cache.get_or_parse("k", stopped, keep_unheld=False)
        except Stopped:
            pass

    t1 = threading.Thread(target=first)
    t1.start()
    started.wait(5)
    sentinel = Predictions.from_arrays(np.array([[0.8, 0.2], [0.3, 0.7]]), np.array([0, 1]))
    t2 = threading.Thread(target=lambda: got.append(cache.get_or_parse("k", lambda: sentinel, keep_unheld=False)))
    t2.start()
    for t in (t1, t2):
        t.join(10)
    assert len(got) == 1 and got[0] is sentinel


def test_a_streamed_upload_waits_for_the_big_read_turn(monkeypatch, tmp_path):
    """An upload too large for memory, read in a stream, takes the same turn (audit 12c: 4 tabs streaming
    the project's 1.8 MB bomb at once took the server to 2 GB)."""
    import gzip

    monkeypatch.setenv("PBR_CALIB_MAX_READ_MEMORY", str(1 << 20))  # 50,000 rows: over it, streamed
    monkeypatch.setenv("PBR_CALIB_UPLOAD_STREAM_ROWS", "100000")
    rng = np.random.default_rng(1)
    p = np.round(rng.random(50_000), 4)
    y = (rng.random(50_000) < p).astype(int)
    data = gzip.compress(("p,label\n" + "".join(f"{a},{b}\n" for a, b in zip(p, y))).encode())
    streamed: list = []
    real_scan = __import__("pbr_core.stream", fromlist=["scan_dataset"]).scan_dataset

    def scan(*args, **kwargs):
        streamed.append(True)
        return real_scan(*args, **kwargs)

    monkeypatch.setattr("pbr_core.stream.scan_dataset", scan)
    errors: list = []
    with state.big_read_turn():
        thread = _load_in_thread(data, "big.csv.gz", errors)
        thread.join(2.0)
        assert thread.is_alive() and not streamed  # written to its temporary file, waiting for its turn
    thread.join(60)
    assert errors == [None] and streamed == [True]


def test_the_line_is_written_as_the_read_limits_are(monkeypatch):
    """``PBR_CALIB_SERIAL_LOAD_MEMORY`` takes sizes as the read limits do: ``4MB`` is 4 MiB (it was ignored
    for not being digits, the default used without a word), ``0`` / ``none`` means no read waits, and text
    that is no size is an error naming the variable."""
    data = _onehot_npz(2000, 200)  # estimated at 6.5 MB
    monkeypatch.setenv("PBR_CALIB_SERIAL_LOAD_MEMORY", "4MB")
    assert state.serial_load_memory() == 4 << 20
    errors: list = []
    with state.big_read_turn():
        thread = _load_in_thread(data, "onehot.npz", errors)
        thread.join(1.5)
        assert thread.is_alive() and not errors  # over the 4 MiB line: waits
    thread.join(30)
    assert errors == [None]
    for off in ("0", "none"):
        monkeypatch.setenv("PBR_CALIB_SERIAL_LOAD_MEMORY", off)
        assert state.serial_load_memory() is None
        load_cache.SHARED.clear()
        errors = []
        with state.big_read_turn():
            thread = _load_in_thread(data, "onehot.npz", errors)
            thread.join(30)
            assert not thread.is_alive() and errors == [None]  # no line: never waits
    monkeypatch.setenv("PBR_CALIB_SERIAL_LOAD_MEMORY", "lots")
    load_cache.SHARED.clear()
    message = state.load_upload(data, "onehot.npz")
    assert message and "PBR_CALIB_SERIAL_LOAD_MEMORY" in message and "512MB" in message
