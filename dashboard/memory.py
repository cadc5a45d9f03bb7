"""Handing freed memory back to the system, in the dashboard's server process.

A server that has parsed a 300 MB upload frees most of what the parsing used once the predictions
are built, but the allocators keep it for reuse, so the process stays large (measured in
benchmarks/RESULTS_memory.md):

* glibc's malloc raises its mmap threshold to 32 MB after the first large block is freed, so the
  numpy and pandas temporaries of a few MB up to 32 MB are then carved out of the heap, and what
  they leave behind is fragmented and stays resident;
* Arrow's default pool (mimalloc) caches what the CSV reader freed.

:func:`configure` (once per process, from app.py): blocks of 4 MiB and more get their own mapping,
which goes back to the system when freed (glibc ``M_MMAP_THRESHOLD``, which also stops the
threshold from growing), and Arrow allocates through the same malloc. :func:`release_free_memory`
(after a load, and when a session ended): collect garbage cycles, then trim glibc's heap
(``malloc_trim(0)``, which returns every free page, not only the top of the heap) and Arrow's pool.
Both do nothing where the C library is not glibc (macOS, Windows, musl).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading

logger = logging.getLogger(__name__)

#: Allocations of at least this size are mapped on their own and unmapped when freed.
MMAP_THRESHOLD_BYTES = 4 << 20
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)

_lock = threading.Lock()
_configured = False


def _glibc():
    """The C library when it is glibc (it has malloc_trim), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def configure() -> None:
    """Allocator settings that let freed memory go back to the system (once per process)."""
    global _configured
    with _lock:
        if _configured:
            return
        _configured = True
        libc = _glibc()
        if libc is not None and not libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES):
            logger.info("mallopt(M_MMAP_THRESHOLD) was refused; freed memory may stay in the process")
        try:
            import pyarrow as pa

            # Arrow's buffers then follow the same rule as numpy's; what Arrow already holds keeps
            # its own pool, which release_free_memory trims as well.
            pa.set_memory_pool(pa.system_memory_pool())
        except Exception:  # noqa: BLE001 - an Arrow without the system pool just keeps its default
            logger.info("could not switch Arrow to the system allocator", exc_info=True)


def release_free_memory() -> None:
    """Collect garbage cycles and hand the memory the allocators keep back to the system."""
    gc.collect()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
    try:
        import pyarrow as pa
    except ImportError:
        return
    # The default pool, and mimalloc's, which holds what was allocated before configure() ran.
    for get_pool in (pa.default_memory_pool, getattr(pa, "mimalloc_memory_pool", None)):
        try:
            get_pool().release_unused()
        except Exception:  # noqa: BLE001 - a pool that is missing or cannot be trimmed keeps its memory
            logger.debug("could not trim an Arrow memory pool", exc_info=True)
