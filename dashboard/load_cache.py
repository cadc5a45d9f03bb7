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


def _env_number(name: str, default: float) -> float:
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


class SharedLoads:
    """The cache (see the module docstring). Thread-safe; ``clock`` is a parameter for the tests."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int | None = None, ttl_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.max_bytes = int(max_bytes if max_bytes is not None else _env_number("PBR_CALIB_CACHE_BYTES", MAX_BYTES))
        self.ttl_s = float(ttl_s if ttl_s is not None else _env_number("PBR_CALIB_CACHE_TTL_S", TTL_S))
        self._clock = clock
        self._lock = threading.RLock()
        self._entries: "OrderedDict[str, _Entry]" = OrderedDict()

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
