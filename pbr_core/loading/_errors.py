"""What the loader says when a reader fails in a way its own checks did not foresee, in plain words.

Why: a reader's own error text is not written for the person who uploaded the file. Arrow's may quote
hundreds of characters of a cell ("Unknown error: Wrapping 5721..."), Python's JSON decoder says
"maximum recursion depth exceeded while decoding", and running out of memory surfaced as "unexpected
error (ArrowMemoryError)" (audit 12c). The messages here say what happened and what to do; the reader's
own text goes to the log (the exception's cause), at most its first line, cut short, in the message.
"""

from __future__ import annotations

#: The most characters of a reader's own message quoted (its first line only): enough for "CSV parse
#: error: Expected 3 columns, got 2", never a whole cell.
QUOTE_CHARS = 120

OUT_OF_MEMORY = ("ran out of memory reading this file{where}: once read, its text takes several times its size "
                 "(long text cells most of all). Remove or shorten the long text columns, use fewer rows, or read it "
                 "streamed (pbr-calib evaluate FILE --stream).")
TOO_DEEP = ("could not read the file as {fmt}: it is nested too deeply (lists or objects inside each other, "
            "more levels than can be read). A table of predictions needs one record per row, each a flat set of fields.")

#: Words of Arrow's messages when an allocation failed inside it (it wraps a C++ bad_alloc as "Unknown error").
_ARROW_MEMORY_WORDS = ("out of memory", "bad_alloc", "cannot allocate", "failed to allocate", "wrapping")


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed allocation: MemoryError (Arrow's ArrowMemoryError is one), or an Arrow
    error whose text says so."""
    if isinstance(exc, MemoryError):
        return True
    if type(exc).__module__.startswith("pyarrow"):
        text = str(exc).lower()[:400]
        return any(w in text for w in _ARROW_MEMORY_WORDS)
    return False


def plain_read_error(exc: BaseException, doing: str, fmt: str, where: str = "") -> str:
    """The message for a reader's unforeseen failure ``exc`` while it tried to ``doing`` a ``fmt`` file
    ("read the file as", "CSV"). ``where``: the column it was reading, when known."""
    if out_of_memory(exc):
        return OUT_OF_MEMORY.format(where=f" (column {where!r})" if where else "")
    if isinstance(exc, RecursionError):
        return TOO_DEEP.format(fmt=fmt.upper())
    first = (str(exc).strip().splitlines() or [""])[0]
    if len(first) > QUOTE_CHARS:
        first = first[:QUOTE_CHARS].rstrip() + "..."
    return f"could not {doing} {fmt.upper()}: {type(exc).__name__}{': ' + first if first else ''}"
