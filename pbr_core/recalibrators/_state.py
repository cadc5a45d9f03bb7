"""Reading the fields of a saved recalibrator safely: one small checker per kind of value.

A saved file is untrusted input (a dashboard upload, a file passed to ``pbr-calib apply``). Each
family's ``_set_state`` reads its fields with these checkers, so that every value that would make
the recalibrator predict nonsense (a negative temperature, a NaN weight, a table of the wrong
shape) is refused with a :class:`StateError` naming the field, e.g.::

    state.temperature must be a finite number above 0, but the file holds -1.5

``Recalibrator.from_dict`` turns it into a :class:`~pbr_core.recalibrators.base.RecalibratorFileError`
that starts with the file name. Fields are named by their path in the file (``state.maps[2].values``)
so that a person can find them with a text editor.

Values pass through unchanged: a checker returns the same number or a float64 copy of the same
array, so a file that passes predicts exactly as the recalibrator that wrote it.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

#: Array element kinds a saved file may hold (bool, signed and unsigned integers, floats).
NUMERIC_KINDS = "biuf"

#: Dicts and lists nest at most this deep outside an array in a file pbr-calib writes (about 5);
#: deeper nesting can only be a damaged or hostile file, refused before Python's recursion limit.
MAX_NESTING = 64


class StateError(ValueError):
    """A field of a saved recalibrator is missing or invalid; the message names the field."""


# ---------------------------------------------------------------------- how values are shown
def shown(value: Any) -> str:
    """A value as a person reading the file would recognise it (JSON spelling, short)."""
    if value is None:
        return "null (no value)"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "NaN (not a number)"
        if math.isinf(v):
            return "infinity" if v > 0 else "minus infinity"
        return repr(v)
    if isinstance(value, str):
        return f"the text {quoted(value)}"
    if isinstance(value, np.ndarray):
        return f"an array of shape {_shape(value.shape)}"
    if isinstance(value, Mapping):
        return "a group of fields"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    return f"a {type(value).__name__}"


def quoted(name: object) -> str:
    """A field's name in quotes, shortened as :func:`shown` shortens texts (a hostile file's names can be long)."""
    text = str(name)
    return f'"{text[:40]}{"..." if len(text) > 40 else ""}"'


def _shape(shape: Iterable[int | str | None]) -> str:
    """(3,) or (3, 4); None is shown as "n" (any length)."""
    dims = ["n" if d is None else str(d) for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _position(index: tuple[int, ...]) -> str:
    return str(index[0]) if len(index) == 1 else _shape(index)


# ---------------------------------------------------------------------- decoding
def decode_array(encoded: Mapping[str, Any], where: str) -> np.ndarray:
    """The array of ``{"__ndarray__": nested lists, "dtype": ..., "shape": [...]}``, checked.

    Only numeric dtypes are accepted (never "object", which could hold anything); the nested lists
    must be numbers, not ragged, and hold exactly as many numbers as the shape needs.
    """
    name = encoded.get("dtype")
    try:
        dtype = np.dtype(name) if isinstance(name, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in NUMERIC_KINDS:
        spelled = f'"{name}"' if isinstance(name, str) else shown(name)
        raise StateError(f"{where} must be an array of numbers, but its dtype is {spelled} "
                         "(expected a numeric type such as \"float64\")")
    shape = encoded.get("shape")
    if (not isinstance(shape, list) or len(shape) > 32
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise StateError(f"{where} must have a \"shape\" that is a list of whole numbers >= 0, "
                         f"but the file holds {shown(shape)}")
    values = _numbers(encoded.get("__ndarray__"), where)
    if values.size != math.prod(shape):  # checked before any reshape, so a huge "shape" costs nothing
        raise StateError(f"{where} holds {values.size} numbers, but its shape {_shape(shape)} needs "
                         f"{math.prod(shape)} (the array is truncated or damaged)")
    cast = values.astype(dtype)
    if dtype.kind in "biu" and not np.array_equal(cast, values):
        raise StateError(f"{where} has dtype \"{dtype}\" but holds numbers that are not of that type")
    return cast.reshape(shape)


def _numbers(data: Any, where: str) -> np.ndarray:
    """Nested lists of numbers as an array (any shape), or StateError."""
    if isinstance(data, (bool, int, float)) and not isinstance(data, np.ndarray):
        return np.asarray(data)
    if not isinstance(data, (list, np.ndarray)):
        raise StateError(f"{where} must be a list of numbers, but the file holds {shown(data)}")
    try:
        values = np.array(data)
    except (ValueError, TypeError, RecursionError, OverflowError, MemoryError):
        raise StateError(f"{where} must be a list of numbers with rows of equal length, "
                         "but its rows differ in length or it nests too deeply") from None
    if values.dtype.kind not in NUMERIC_KINDS:
        if values.dtype.kind == "O":
            what = next((shown(v) for v in np.ravel(values) if not isinstance(v, (bool, int, float))),
                        "values that are not numbers")
        else:
            what = "text" if values.dtype.kind in "US" else "values that are not numbers"
        raise StateError(f"{where} must hold only numbers, but holds {what}")
    return values


def decode(value: Any, where: str, depth: int = 0) -> Any:
    """The JSON tree of a file with its encoded arrays decoded (see :func:`decode_array`)."""
    if depth > MAX_NESTING:
        raise StateError(f"{where} is nested more than {MAX_NESTING} levels deep")
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return decode_array(value, where)
        return {k: decode(v, f"{where}.{k}", depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    return value


# ---------------------------------------------------------------------- checkers
def mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` when it is a group of named fields (a JSON object)."""
    if not isinstance(value, Mapping):
        raise StateError(f"{where} must be a group of named fields, but the file holds {shown(value)}")
    return value


def field(state: Mapping[str, Any], name: str, where: str) -> Any:
    """``state[name]``, or StateError saying that the field is missing."""
    if name not in state:
        raise StateError(f"{where} has no \"{name}\" field")
    return state[name]


def number(value: Any, where: str, *, low: float | None = None, low_open: bool = False,
           high: float | None = None, finite: bool = True) -> float:
    """A real number (a JSON number or a 0-d array), optionally bounded, as a Python float.

    ``low_open`` makes the lower bound strict ("above 0" rather than "at least 0").
    """
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise StateError(f"{where} must be a number, but the file holds {shown(value)}")
    v = float(value)
    wanted = _number_words(low, low_open, high, finite)
    ok = (not finite or math.isfinite(v)) and not math.isnan(v)
    ok = ok and (low is None or (v > low if low_open else v >= low)) and (high is None or v <= high)
    if not ok:
        raise StateError(f"{where} must be {wanted}, but the file holds {shown(value)}")
    return v


def _number_words(low: float | None, low_open: bool, high: float | None, finite: bool) -> str:
    words = "a finite number" if finite else "a number"
    if low is not None and high is not None:
        return f"{words} between {low:g} and {high:g}"
    if low is not None:
        return f"{words} {'above' if low_open else 'of at least'} {low:g}"
    if high is not None:
        return f"{words} of at most {high:g}"
    return words


def whole_number(value: Any, where: str, *, low: int = 0) -> int:
    """An integer >= ``low``, written as one (``10``; pbr-calib writes counts so).

    ``10.0`` is refused although it equals 10: a count written with a decimal point was not written
    by pbr-calib, and accepting it would make the file mean something its writer did not write.
    """
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu":
        value = value.item()
    v = number(value, where, low=low)
    if v != int(v):
        raise StateError(f"{where} must be a whole number, but the file holds {shown(value)}")
    if not isinstance(value, (int, np.integer)):
        raise StateError(f"{where} must be a whole number written without a decimal point ({int(v)}, as pbr-calib "
                         f"writes it), but the file holds {shown(value)}")
    return int(v)


def choice(value: Any, where: str, options: Sequence[str]) -> str:
    """One of the texts ``options``."""
    if not isinstance(value, str) or value not in options:
        listed = ", ".join(f'"{o}"' for o in options)
        raise StateError(f"{where} must be one of {listed}, but the file holds {shown(value)}")
    return value


def array(value: Any, where: str, shape: tuple[int | None, ...], *, low: float | None = None,
          high: float | None = None, nondecreasing: bool = False, min_size: int = 0,
          shape_note: str = "") -> np.ndarray:
    """A finite float64 array of the given shape (None: any length), optionally bounded and sorted.

    ``value`` is a decoded array or plain nested lists of numbers. ``shape_note`` says where the
    expected shape comes from ("for 10 classes"), for the message.
    """
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in NUMERIC_KINDS:
            raise StateError(f"{where} must hold only numbers, but has dtype \"{value.dtype}\"")
        values = value
    elif isinstance(value, list):
        values = _numbers(value, where)
    else:
        raise StateError(f"{where} must be an array of numbers, but the file holds {shown(value)}")
    if values.ndim != len(shape) or any(s is not None and s != d for s, d in zip(shape, values.shape)):
        wanted = _shape(shape)
        note = f" {shape_note}" if shape_note else ""
        raise StateError(f"{where} must have shape {wanted}{note}, but has shape {_shape(values.shape)}")
    if values.size < min_size:
        raise StateError(f"{where} must hold at least {min_size} number{'s' if min_size > 1 else ''}, but is empty")
    out = values.astype(np.float64)
    bad = ~np.isfinite(out)
    if low is not None:
        bad |= out < low
    if high is not None:
        bad |= out > high
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        wanted = _number_words(low, False, high, True).replace("a finite number", "finite numbers")
        at = f" at position {_position(index)}" if index else ""
        raise StateError(f"{where} must hold {wanted}, but holds {shown(out[index])}{at}")
    if nondecreasing and out.ndim == 1 and out.size > 1 and np.any(np.diff(out) < 0):
        i = int(np.flatnonzero(np.diff(out) < 0)[0])
        raise StateError(f"{where} must be sorted in increasing order, but {shown(out[i + 1])} at position "
                         f"{i + 1} follows {shown(out[i])}")
    return out


def same_length(a: np.ndarray, b: np.ndarray, where_a: str, where_b: str, *, offset: int = 0) -> None:
    """``len(b) == len(a) + offset`` (e.g. a step function has one value more than inner edges)."""
    if b.shape[0] != a.shape[0] + offset:
        more = f" + {offset}" if offset else ""
        raise StateError(f"{where_b} must have {a.shape[0] + offset} entries (the length of {where_a}{more}), "
                         f"but has {b.shape[0]}")


def no_extra_fields(given: Any, kept: Any, where: str) -> None:
    """StateError naming the first field of ``given`` (a file's state, as read) that ``kept`` lacks.

    ``kept`` is the same state as the loaded recalibrator writes it back (encoded), so a field that
    no check read, and that the recalibrator would drop on saving, is refused instead of passed
    over: a file holds what pbr-calib writes and nothing else. Both are walked together through
    groups and lists; the numbers of an array are not walked (their count is checked on decoding).
    """
    if isinstance(given, Mapping) and isinstance(kept, Mapping):
        extra = [name for name in given if name not in kept]
        if extra:
            raise StateError(f"{where} holds a field named {quoted(extra[0])}, which a saved recalibrator of "
                             f"this kind does not have (its fields: {', '.join(map(str, kept))})")
        for name, value in given.items():
            if name != "__ndarray__":
                no_extra_fields(value, kept[name], f"{where}.{name}")
    elif isinstance(given, list) and isinstance(kept, list):
        for i, (a, b) in enumerate(zip(given, kept)):
            no_extra_fields(a, b, f"{where}[{i}]")


#: Longest text a record of a saved fit (a GP's ``fit_report``) may hold: its warnings are sentences
#: of at most a few hundred characters; the record is shown on pages and in reports.
MAX_RECORD_TEXT = 2_000


def record(value: Any, where: str, depth: int = 0) -> None:
    """A record of a fit (shown, never used to predict): JSON numbers, true/false, null, texts of at
    most :data:`MAX_RECORD_TEXT` characters, and lists and groups of those, at most 3 levels deep."""
    if isinstance(value, str):
        if len(value) > MAX_RECORD_TEXT:
            raise StateError(f"{where} must be a text of at most {MAX_RECORD_TEXT:,} characters, but holds "
                             f"{len(value):,}")
    elif isinstance(value, Mapping) or isinstance(value, list):
        if depth >= 3:
            raise StateError(f"{where} nests deeper than a record of a fit does")
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            record(item, f"{where}.{key}" if isinstance(value, Mapping) else f"{where}[{key}]", depth + 1)
    elif value is not None and not isinstance(value, (bool, int, float)):
        raise StateError(f"{where} must hold numbers, texts, true/false or null, but holds {shown(value)}")


class Fields:
    """The named fields of one group of a saved state, read with the checkers above.

    ``Fields(state, "state").number("temperature", low=0, low_open=True)`` reads
    ``state["temperature"]`` and names it ``state.temperature`` in any error.

    Parameters
    ----------
    group : mapping
        The decoded group (checked to be one).
    where : str
        Its path in the file, e.g. ``"state"`` or ``"state.maps[2]"``.
    """

    def __init__(self, group: Any, where: str) -> None:
        self.group = mapping(group, where)
        self.where = where

    def path(self, name: str) -> str:
        return f"{self.where}.{name}"

    def get(self, name: str) -> Any:
        return field(self.group, name, self.where)

    def number(self, name: str, **bounds: Any) -> float:
        return number(self.get(name), self.path(name), **bounds)

    def whole_number(self, name: str, low: int = 0) -> int:
        return whole_number(self.get(name), self.path(name), low=low)

    def choice(self, name: str, options: Sequence[str]) -> str:
        return choice(self.get(name), self.path(name), options)

    def array(self, name: str, shape: tuple[int | None, ...], **checks: Any) -> np.ndarray:
        return array(self.get(name), self.path(name), shape, **checks)

    def fields(self, name: str) -> "Fields":
        return Fields(self.get(name), self.path(name))
