"""Arrays: reading NPZ archives (scores, labels and optional class names by array name) and NPY
arrays (scores, then the label in the last column) into a validated Predictions, never unpickling
anything; row numbers in their messages are 0-based array indices.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

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


def _load_npz(src: _Source, opts: _Options, notes: list[str]) -> Predictions:
    try:
        npz = np.load(src.reader_arg(), allow_pickle=False)
    except Exception as exc:
        raise _numpy_error(src, exc, "the NPZ archive") from exc
    if not hasattr(npz, "files"):
        raise src.error("this is not an NPZ archive.")
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


def _load_npy(src: _Source, opts: _Options, notes: list[str]) -> Predictions:
    try:  # a path is memory-mapped, so max_rows is checked before anything is read
        arr = (np.load(src.path, mmap_mode="r", allow_pickle=False) if src.path is not None
               else np.load(src.reader_arg(), allow_pickle=False))
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
    if opts.max_rows is not None and arr.shape[0] > opts.max_rows:
        raise _too_many_rows(src, arr.shape[0], opts.max_rows)
    scores = np.asarray(arr[:, :-1])
    labels = np.asarray(arr[:, -1])
    notes.append(f"NPY array of shape {arr.shape}: the last column is the label, the other {arr.shape[1] - 1} are scores.")
    return _validated(
        lambda: Predictions.from_arrays(
            scores, labels, input_type=opts.input_type, renormalize=opts.renormalize,
            tolerance=opts.tolerance, source=src.name, notes=notes, copy=False,  # read-only when memory-mapped
        ),
        _array_row, None,
    )
