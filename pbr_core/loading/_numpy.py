"""Arrays: reading NPZ archives (scores, labels and optional class names by array name) and NPY
arrays (scores, then the label in the last column) into a validated Predictions, never unpickling
anything; row numbers in their messages are 0-based array indices.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from pbr_core.loading._limits import ReadLimits, format_bytes, limit_error, table_memory
from pbr_core.loading._source import (
    NPZ_LABEL_KEYS,
    NPZ_FLOAT_SCORE_KEYS,
    NPZ_SCORE_KEYS,
    FileFormat,
    _describe,
    _Options,
    _Source,
    _too_many_rows,
)
from pbr_core.loading._tables import _first_line, _names, _validated
from pbr_core.predictions import Predictions, PredictionsError, rows_sum_to_one


# ---------------------------------------------------------------------------------- NPZ / NPY
def _array_row(i: int) -> str:
    return f"row {i} (0-based array index)"


def _load_numpy(src: _Source, fmt: FileFormat, head: bytes, opts: _Options) -> Predictions:
    notes: list[str] = []
    what = _describe(head)
    if head.startswith(b"\x93NUMPY"):
        if fmt == "npz":
            notes.append("The .npz file is really a single NPY array: read it as NPY.")
        return _load_npy(src, opts, notes)
    if head.startswith(b"PK"):
        if fmt == "npy":
            notes.append("The .npy file is really an NPZ archive: read it as NPZ.")
        return _load_npz(src, opts, notes)
    if what == "Python pickle data" or head[:1] == b"\x80":
        raise src.error("pickled data is not accepted (it could run code); save arrays with numpy.save / numpy.savez.")
    raise src.error(f"this is not an {fmt.upper()} file: it looks like {what or 'something else'}.")


def _numpy_error(src: _Source, exc: Exception, what: str) -> PredictionsError:
    text = str(exc)
    if "allow_pickle" in text or "pickled" in text or "Python objects" in text or "Object arrays" in text:
        return src.error(f"{what}: pickled object arrays are not accepted; store numbers (and class names as a unicode array).")
    return src.error(f"could not read {what} (truncated or corrupt?): {_first_line(exc)}")


def _npz_array(src: _Source, npz, key: str) -> np.ndarray:
    try:
        arr = npz[key]
    except Exception as exc:
        raise _numpy_error(src, exc, f"array {key!r}") from exc
    if not isinstance(arr, np.ndarray):
        raise src.error(f"member {key!r} of the archive is not a NumPy array.")
    if arr.dtype.hasobject:
        raise src.error(f"array {key!r}: pickled object arrays are not accepted.")
    return arr


def _npy_header(f) -> tuple[tuple[int, ...], np.dtype, int] | None:
    """(shape, dtype, header bytes) of the NPY array that ``f`` starts with; None when it is no NPY
    header (the reader then names the problem)."""
    try:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
        return tuple(int(d) for d in shape), np.dtype(dtype), int(f.tell())
    except Exception:  # noqa: BLE001 - not an NPY header: the reader's own message follows
        return None


def _array_memory(shapes: list[tuple[int, ...]], stored: int) -> int:
    """Estimated memory of reading arrays of ``shapes`` (``stored`` bytes as they are) into
    Predictions: the arrays, and per row of the largest the predictions' own (n, K) float64 blocks
    (probabilities, and logits when the scores are logits) and per-row columns (:func:`table_memory`)."""
    rows = max((s[0] for s in shapes if len(s) >= 1), default=0)
    k = max((s[1] for s in shapes if len(s) == 2), default=2)
    return table_memory(rows, k, stored)


def check_npz(src: _Source, limits: ReadLimits) -> None:
    """Refuse an NPZ archive before any array is read when its members are over ``limits``: their
    declared sizes (Python's zipfile never decompresses a member past it) against ``max_bytes``, the
    arrays their NPY headers declare against ``max_memory``; a member whose header declares more
    data than the member holds is damaged (numpy would allocate the declared array first)."""
    import zipfile

    try:
        with src.open() as raw, zipfile.ZipFile(raw) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            declared = sum(m.file_size for m in members)
            if limits.max_bytes is not None and declared > limits.max_bytes:
                raise limit_error(src.name, kind="bytes", size=declared, limit=limits.max_bytes,
                                  what=f"the archive's arrays, once decompressed (as its {len(members)} member(s) "
                                       "declare),")
            shapes = []
            for m in members:
                with z.open(m) as f:
                    header = _npy_header(f)
                if header is None:
                    continue
                shape, dtype, header_bytes = header
                data = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
                if not dtype.hasobject and header_bytes + data != m.file_size:
                    raise src.error(f"array {m.filename.removesuffix('.npy')!r} is damaged: its header declares shape "
                                    f"{shape} ({format_bytes(data)} of {dtype}), but the member holds "
                                    f"{format_bytes(max(m.file_size - header_bytes, 0))}.")
                shapes.append(shape)
    except zipfile.BadZipFile:
        return  # numpy names the problem
    estimate = _array_memory(shapes, declared)
    if limits.max_memory is not None and estimate > limits.max_memory:
        raise limit_error(src.name, kind="memory", size=estimate, limit=limits.max_memory,
                          rows=max((s[0] for s in shapes if s), default=None),
                          what=f"its arrays of {format_bytes(declared)}; reading them")


def _load_npz(src: _Source, opts: _Options, notes: list[str]) -> Predictions:
    check_npz(src, opts.limits)
    try:
        npz = np.load(src.reader_arg(), allow_pickle=False)
    except Exception as exc:
        raise _numpy_error(src, exc, "the NPZ archive") from exc
    if not hasattr(npz, "files"):
        raise src.error("this is not an NPZ archive.")
    src.seen["columns"] = list(npz.files)
    with npz:
        read: dict[str, np.ndarray] = {}

        def array(key: str) -> np.ndarray:  # each member decompressed once, however often it is asked for
            if key not in read:
                read[key] = _npz_array(src, npz, key)
            return read[key]

        present = {k.lower(): k for k in npz.files}
        choice = opts.columns
        for wanted in (*(choice.scores or ()), *choice.groups, *choice.ignore):
            if wanted.lower() not in present:
                raise src.error(f"no array {wanted!r} in the archive; it holds {_names(sorted(npz.files))}.")
        if choice.scores is not None and len(choice.scores) != 1:
            raise src.error(f"an NPZ archive holds its scores in one array: name one, not {len(choice.scores)}.")
        prefer = {"logits": ("logits",), "probabilities": ("probs", "probabilities", "scores")}.get(opts.input_type, ())
        score_keys = ([present[choice.scores[0].lower()]] if choice.scores is not None else
                      [present[k] for k in (*prefer, *NPZ_SCORE_KEYS) if k in present]
                      or [present[k] for k in NPZ_FLOAT_SCORE_KEYS
                          if k in present and array(present[k]).dtype.kind == "f"])
        wanted = (opts.label_column.lower(),) if opts.label_column is not None else NPZ_LABEL_KEYS
        label_keys = [present[k] for k in wanted if k in present]
        if not score_keys or (not label_keys and opts.require_labels):
            missing = []
            if not score_keys:
                missing.append(f"scores ({' or '.join(NPZ_SCORE_KEYS)})")
            if not label_keys:
                missing.append(f"labels ({' or '.join(repr(k) if opts.label_column else k for k in wanted)})")
            raise src.error(
                f"missing array(s): {'; '.join(missing)}. The archive holds: {_names(sorted(npz.files)) or 'nothing'}."
            )
        score_key, label_key = score_keys[0], (label_keys[0] if label_keys else None)
        labels = array(label_key) if label_key is not None else None
        if opts.max_rows is not None and labels is not None and labels.ndim >= 1 and labels.shape[0] > opts.max_rows:
            raise _too_many_rows(src, labels.shape[0], opts.max_rows)
        scores = array(score_key)
        if opts.max_rows is not None and scores.ndim >= 1 and scores.shape[0] > opts.max_rows:
            raise _too_many_rows(src, scores.shape[0], opts.max_rows)
        class_names = None
        names_key = present.get("class_names")
        if names_key is not None:
            arr = array(names_key)
            if arr.dtype.kind == "S":
                arr = np.char.decode(arr, "utf-8", errors="replace")
            if arr.ndim != 1:
                raise src.error(f"array {names_key!r} must be 1-D (one name per class), but has shape {arr.shape}.")
            class_names = [str(v) for v in arr.tolist()]
        used = {score_key, label_key, names_key}
        n_rows = scores.shape[0] if scores.ndim >= 1 else -1
        groups = [present[g.lower()] for g in choice.groups]
        asked_ignored = {present[g.lower()] for g in choice.ignore}
        meta: dict[str, np.ndarray] = {}
        for k in [*groups, *(k for k in npz.files if k not in used and k not in groups and k not in asked_ignored)]:
            arr = array(k)
            if arr.ndim == 1 and arr.shape[0] == n_rows and arr.dtype.kind in "biufUSM":
                meta[k] = np.char.decode(arr, "utf-8", errors="replace") if arr.dtype.kind == "S" else arr
            elif k in groups:
                raise src.error(f"group array {k!r} must be 1-D with one value per row ({n_rows}), "
                                f"but has shape {arr.shape}.")
        ignored = sorted(k for k in npz.files if k not in used and k not in meta)
    notes.append(f"Read arrays {score_key!r} (scores) and {label_key!r} (labels)." if label_key is not None
                 else f"Read array {score_key!r} (scores); the archive has no labels.")
    others = [k for k in meta if k not in groups]
    if groups:
        notes.append(f"Group arrays (kept for analysis by group): {_names(groups)}.")
    if others:
        notes.append(f"Kept as metadata (one value per row): {_names(others)}.")
    if ignored:
        notes.append(f"Ignored other arrays in the archive: {_names(ignored)}.")
    input_type = opts.input_type
    if (input_type == "auto" and score_key.lower() == "logits" and np.issubdtype(scores.dtype, np.number)
            and scores.ndim == 2 and not rows_sum_to_one(scores, opts.tolerance)):
        # The archive says "logits": trust it unless every row sums to 1 (inspection alone would call
        # e.g. small logits in [0, 1] broken probabilities; rows that all sum to 1 are probabilities,
        # mislabelled, and a cell outside [0, 1] among them is an error naming it).
        input_type = "logits"
        notes.append(f"Read array {score_key!r} as logits, as its name says.")
    preds = _validated(
        lambda: Predictions.from_arrays(
            scores, labels, input_type=input_type, class_names=class_names, renormalize=opts.renormalize,
            tolerance=opts.tolerance, source=src.name, notes=notes, copy=False,  # arrays read just now
        ),
        _array_row, None,
    )
    roles = [(score_key, "score")] + ([(label_key, "label")] if label_key is not None else [])
    roles += [(k, "group" if k in groups else "metadata") for k in meta]
    roles += [(k, "ignored") for k in ignored]
    return replace(preds, metadata=pd.DataFrame(meta) if meta else None, column_roles=tuple(roles))


def check_npy(src: _Source, limits: ReadLimits) -> tuple[int, ...]:
    """The shape an NPY file's header declares, once checked: the data must be all there (a file
    cut short is refused by name, not read), and within ``limits`` (``max_bytes`` for the data,
    ``max_memory`` for the estimate of :func:`_array_memory`)."""
    with src.open() as f:
        header = _npy_header(f)
    if header is None:
        try:  # numpy's own message says what is wrong with the header
            np.load(src.reader_arg() if src.path is None else str(src.path), mmap_mode="r", allow_pickle=False)
        except Exception as exc:
            raise _numpy_error(src, exc, "the NPY array") from exc
        raise src.error("could not read the NPY array's header.")
    shape, dtype, header_bytes = header
    data = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    if dtype.hasobject:
        raise src.error("pickled object arrays are not accepted.")
    held = src.size() - header_bytes
    if held < data:
        raise src.error(f"the file is truncated: its header declares an array of shape {shape} "
                        f"({format_bytes(data)} of {dtype}), but only {format_bytes(max(held, 0))} follow.")
    if limits.max_bytes is not None and data > limits.max_bytes:
        raise limit_error(src.name, kind="bytes", size=data, limit=limits.max_bytes, what="its array")
    estimate = _array_memory([shape], data)
    if limits.max_memory is not None and estimate > limits.max_memory:
        raise limit_error(src.name, kind="memory", size=estimate, limit=limits.max_memory,
                          rows=shape[0] if shape else None, what=f"its array of shape {shape}; reading it")
    return shape


def _load_npy(src: _Source, opts: _Options, notes: list[str]) -> Predictions:
    shape = check_npy(src, opts.limits)
    if opts.max_rows is not None and len(shape) >= 1 and shape[0] > opts.max_rows:
        raise _too_many_rows(src, shape[0], opts.max_rows)
    # Read into memory, never memory-mapped: a file cut short while mapped (a copy still being
    # written) ends the process with SIGBUS ("Bus error") at the first touch of the missing pages;
    # read, it is a short read that numpy reports, and the loader names.
    try:
        arr = np.load(src.reader_arg() if src.path is None else str(src.path), allow_pickle=False)
    except Exception as exc:
        raise _numpy_error(src, exc, "the NPY array") from exc
    if arr.dtype.hasobject:
        raise src.error("pickled object arrays are not accepted.")
    if arr.dtype.names is not None or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise src.error(f"the array must be numeric, but its dtype is {arr.dtype}.")
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise src.error(
            f"expected a 2-D array of shape (n, K + 1): K score columns, then the integer label in the last "
            f"column; but got shape {arr.shape}."
        )
    scores = np.ascontiguousarray(arr[:, :-1])
    labels = np.ascontiguousarray(arr[:, -1])
    del arr
    notes.append(f"NPY array of shape {shape}: the last column is the label, the other {shape[1] - 1} are scores.")
    return _validated(
        lambda: Predictions.from_arrays(
            scores, labels, input_type=opts.input_type, renormalize=opts.renormalize,
            tolerance=opts.tolerance, source=src.name, notes=notes, copy=False,  # arrays read just now
        ),
        _array_row, None,
    )
