"""The parsed predictions shared by every session, bounded in entries, bytes and time, and freed when
no session holds them.

Why not ``st.cache_resource``: it bounds entries and age, not bytes, and an entry past its ``ttl`` is
only dropped when it is asked for again. Before this module the parse cache (6 entries, no expiry,
uploads of up to 16 MB by their *compressed* size) kept a 2 MB upload's 3 GB of predictions after
its session had ended, and served a re-upload from it: the server held 6.1 GB with no connection for
ten minutes (issue 34).

Here an entry is one parsed file (a key of content hash and reading options). Each session that
loads it registers the object it keeps (its ``Loaded``) as a *holder*, by weak reference, so the
entry knows when no session holds the data any more:

* an upload's entry leaves as soon as no session holds it (its memory is then freed with the
  session's; the cache never keeps an upload alive on its own);
* a bundled sample's entry stays while unheld (every new session loads the default sample), for at
  most :data:`TTL_S` seconds since its last use, and within :data:`MAX_ENTRIES` / :data:`MAX_BYTES`
  of unheld entries (the least recently used leave first);
* predictions larger than :data:`MAX_BYTES` are not cached at all.

:meth:`SharedLoads.prune` applies these rules; it runs on every lookup and store, and from the
session sweeper (:mod:`dashboard.sessions`) after a closed tab's session was released, so that an
idle server frees what nobody holds without waiting for the next visitor.

Several sessions that upload the same bytes with the same options at the same time parse them once
(:meth:`SharedLoads.get_or_parse`): the first parses, the others wait for it and get its predictions
(or its error). Before, four tabs uploading one 94 KB NPZ that expands to 2 GB parsed it four times
at once, and the server went from 208 MB to 5.75 GB (audit 12c).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from pbr_core import Predictions

#: At most this many entries that no session holds (bundled samples) are kept.
MAX_ENTRIES = 8
#: At most this many bytes of predictions that no session holds are kept; larger predictions are not
#: cached at all. ``PBR_CALIB_CACHE_BYTES`` (bytes) overrides it.
MAX_BYTES = 256 << 20
#: An entry that no session holds leaves this long after its last use. ``PBR_CALIB_CACHE_TTL_S`` overrides it.
TTL_S = 1800.0


def env_number(name: str, default: float) -> float:
    """``$name`` as a number when it is a positive one, else ``default`` (the dashboard's numeric settings)."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def predictions_nbytes(preds: Predictions) -> int:
    """Bytes held by ``preds``: its arrays and its metadata frame (text counted as stored)."""
    total = 0
    for array in (preds.probs, preds.logits, preds.labels, preds.confidence, preds.predicted):
        if isinstance(array, np.ndarray):
            total += array.nbytes
    if preds.metadata is not None:
        total += int(preds.metadata.memory_usage(index=False, deep=True).sum())
    return total


@dataclass
class _Entry:
    preds: Predictions
    nbytes: int
    keep_unheld: bool
    last_used: float
    #: id -> weak reference of each holder (a WeakSet needs hashable items; a Loaded is not: it holds arrays)
    holders: dict[int, weakref.ref] = field(default_factory=dict)

    @property
    def held(self) -> bool:
        return any(ref() is not None for ref in self.holders.values())


class _Flight:
    """A parse in progress: the sessions that ask for the same key meanwhile wait for its outcome."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.preds: Predictions | None = None
        self.error: Exception | None = None


class SharedLoads:
    """The cache (see the module docstring). Thread-safe; ``clock`` is a parameter for the tests."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int | None = None, ttl_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.max_bytes = int(max_bytes if max_bytes is not None else env_number("PBR_CALIB_CACHE_BYTES", MAX_BYTES))
        self.ttl_s = float(ttl_s if ttl_s is not None else env_number("PBR_CALIB_CACHE_TTL_S", TTL_S))
        self._clock = clock
        self._lock = threading.RLock()
        self._entries: "OrderedDict[str, _Entry]" = OrderedDict()
        self._flights: dict[str, _Flight] = {}

    def get(self, key: str) -> Predictions | None:
        """The shared predictions for ``key``, or None; a hit counts as a use."""
        with self._lock:
            self.prune()
            entry = self._entries.get(key)
            if entry is None:
                return None
            entry.last_used = self._clock()
            self._entries.move_to_end(key)
            return entry.preds

    def put(self, key: str, preds: Predictions, keep_unheld: bool) -> bool:
        """Store freshly parsed predictions; ``keep_unheld``: keep them while no session holds them
        (bundled samples). Returns whether they were stored (not when larger than ``max_bytes``)."""
        nbytes = predictions_nbytes(preds)
        if nbytes > self.max_bytes:
            return False
        with self._lock:
            self._entries[key] = _Entry(preds, nbytes, keep_unheld, self._clock())
            self._entries.move_to_end(key)
            return True

    def get_or_parse(self, key: str, parse: Callable[[], Predictions], keep_unheld: bool) -> Predictions:
        """The shared predictions for ``key``, parsed by ``parse()`` (then stored as :meth:`put` does)
        when there are none. While one session parses a key, every other one asking for the same key
        waits for it and gets the same predictions, or the same error: the same bytes are never parsed
        twice at once, whether or not the result is small enough to be kept afterwards. A parse that
        ended without an outcome (the user's run was stopped) lets the next waiter parse instead."""
        while True:
            with self._lock:
                preds = self.get(key)
                if preds is not None:
                    return preds
                flight = self._flights.get(key)
                first = flight is None
                if first:
                    flight = self._flights[key] = _Flight()
            if first:
                return self._parse_first(key, flight, parse, keep_unheld)
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            if flight.preds is not None:
                return flight.preds

    def _parse_first(self, key: str, flight: _Flight, parse: Callable[[], Predictions],
                     keep_unheld: bool) -> Predictions:
        try:
            flight.preds = parse()
            self.put(key, flight.preds, keep_unheld)
            return flight.preds
        except Exception as exc:  # shared with the waiters: the same file fails the same way for them
            flight.error = exc
            raise
        finally:  # also on a stopped run (not an Exception): the waiters then parse themselves
            with self._lock:
                self._flights.pop(key, None)
            flight.done.set()

    def hold(self, key: str, holder: Any) -> None:
        """``holder`` (a session's ``Loaded``, referenced weakly) keeps the entry's data in use."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.holders = {k: r for k, r in entry.holders.items() if r() is not None}
                entry.holders[id(holder)] = weakref.ref(holder)
                entry.last_used = self._clock()

    def prune(self) -> list[str]:
        """Drop what the rules say (module docstring); returns the keys dropped."""
        with self._lock:
            now = self._clock()
            dropped = [k for k, e in self._entries.items()
                       if not e.held and (not e.keep_unheld or now - e.last_used > self.ttl_s)]
            for k in dropped:
                del self._entries[k]
            unheld = [k for k, e in self._entries.items() if not e.held]  # least recently used first
            total = sum(self._entries[k].nbytes for k in unheld)
            while unheld and (len(unheld) > self.max_entries or total > self.max_bytes):
                k = unheld.pop(0)
                total -= self._entries.pop(k).nbytes
                dropped.append(k)
            return dropped

    def stats(self) -> dict[str, int]:
        """Entries and bytes, all and unheld (for the tests and the logs)."""
        with self._lock:
            unheld = [e for e in self._entries.values() if not e.held]
            return {"entries": len(self._entries), "bytes": sum(e.nbytes for e in self._entries.values()),
                    "unheld_entries": len(unheld), "unheld_bytes": sum(e.nbytes for e in unheld)}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The one cache of the server process.
SHARED = SharedLoads()
