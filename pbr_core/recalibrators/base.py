"""The one interface every recalibrator implements, and its save/load format.

scikit-learn style: ``__init__`` only stores parameters, ``fit(X, y)`` returns ``self``, learned
state ends in ``_``, ``predict_proba(X)`` returns an (n, K) probability matrix.

``X`` is a :class:`~pbr_core.predictions.Predictions` value or a plain array of logits or
probabilities (shape (n, K), or (n,) for binary p(y=1)); ``y`` is required with arrays and taken
from the value otherwise.

Saved files are JSON (never pickle): ``{"format": "pbr-calib-recalibrator", "format_version": 1,
"method": ..., "params": {...}, "state": {...}, "n_classes": K, "input_type": ...,
"class_names": [...] or null, "fit_rows": {...}}``, no other field (the classes' names where the fit data had
them, so that predictions whose class columns come in another order are matched by name; files written
before this field are matched by position). "fit_rows" is the fingerprint of the rows it was fitted on
(:mod:`pbr_core.fit_rows`: a 64-bit hash of each row's scores and label, every distinct row up to 100,000,
a sample beyond, and how finely the fit's probabilities were written), so that a check on other rows can
leave out the fit rows (``fit_row_overlap``); it tells whoever holds the file whether a row was a fit row
and, from a fit row's scores, its label. It is
optional: a file written before it (or saved with ``save(path, fit_rows=False)``) has none, still reads
as format version 1, and says its fit rows are "not recorded". A reader older than the field refuses a
file that holds it, naming the field (as it refuses every field it does not know). Arrays in
``state`` are stored as ``{"__ndarray__": nested lists, "dtype": "float64", "shape": [...]}``;
Python's float repr round-trips float64 exactly, so a loaded recalibrator predicts identically.

A file is untrusted input. Loading checks every field (each family's ``_set_state`` checks its
own state with the checkers of :mod:`pbr_core.recalibrators._state`) and refuses a damaged file
with one error type, :class:`RecalibratorFileError`, whose message starts with the file name. The
parameters are checked against the same ``_parameter_constraints`` as a fit, whose sizes have
upper bounds (:mod:`pbr_core.recalibrators._params`), so a file cannot demand unbounded work; a
field pbr-calib does not write (at the top or anywhere in the state but the records of a fit) is
refused, and counts are whole numbers written as such.
"""

from __future__ import annotations

import inspect
import json
import stat
from pathlib import Path
from typing import Any, ClassVar, Hashable, Literal, Sequence

import numpy as np

from pbr_core.predictions import (TOP_LABEL_NOT_RECALIBRATED, InputType, Predictions, PredictionsError,
                                   real_class_names)
# The progress protocol lives in pbr_core.progress; these names stay importable from here.
from pbr_core.fit_rows import FitRowOverlap, FitRows
from pbr_core.fit_rows import overlap as fit_row_overlap
from pbr_core.progress import report_progress, track  # noqa: F401
from pbr_core.recalibrators import _state
from pbr_core.recalibrators._params import Constraint, check_params
from pbr_core.recalibrators._state import StateError

def case_matched(got: Sequence[str], fitted: Sequence[str]) -> dict[str, str] | None:
    """Each name of ``got`` with the name of ``fitted`` it equals ignoring case, when the two lists
    are the same names but for case and case-folding keeps the names of each list distinct; else None.

    >>> case_matched(("NO", "YES"), ("no", "yes"))
    {'NO': 'no', 'YES': 'yes'}
    >>> case_matched(("a", "B"), ("A", "a")) is None
    True
    """
    folded = {n.casefold(): n for n in fitted}
    if len(folded) != len(fitted) or len({n.casefold() for n in got}) != len(got):
        return None
    if sorted(n.casefold() for n in got) != sorted(folded):
        return None
    return {n: folded[n.casefold()] for n in got}


FORMAT_NAME = "pbr-calib-recalibrator"
FORMAT_VERSION = 1

#: name -> class, filled by :func:`register`; ``load_recalibrator`` uses it.
REGISTRY: dict[str, type["Recalibrator"]] = {}


#: Modules that register recalibrators but are imported only when a registry lookup needs them,
#: because their own imports are heavy (the GP family imports torch and gpytorch).
LAZY_MODULES: list[str] = []


def ensure_registered() -> None:
    """Import the lazily registered modules (a no-op once done, or for modules not written yet)."""
    import importlib

    for name in LAZY_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


def register(cls: type["Recalibrator"]) -> type["Recalibrator"]:
    """Class decorator: make a recalibrator loadable by its ``method`` name."""
    existing = REGISTRY.get(cls.method)
    if existing is not None and existing is not cls and (
        (existing.__module__, existing.__qualname__) != (cls.__module__, cls.__qualname__)
    ):  # the same class defined again (a module reload, e.g. by Streamlit) simply replaces itself
        raise RuntimeError(f"two recalibrators are registered as {cls.method!r}")
    REGISTRY[cls.method] = cls
    return cls


class NotFittedError(RuntimeError):
    """Raised when ``predict_proba`` or ``save`` is called before ``fit``.

    Where scikit-learn is imported, the error raised is also an instance of scikit-learn's
    ``sklearn.exceptions.NotFittedError`` (``_not_fitted_error``), so code and estimator checks that
    catch scikit-learn's class catch it; pbr_core does not import scikit-learn for that (~1-5 CPU s).
    """


_SKLEARN_NOT_FITTED: type[NotFittedError] | None = None


def _not_fitted_error(message: str) -> NotFittedError:
    """A :class:`NotFittedError`, also scikit-learn's ``NotFittedError`` where scikit-learn is loaded."""
    global _SKLEARN_NOT_FITTED
    import sys

    if _SKLEARN_NOT_FITTED is None and "sklearn.exceptions" in sys.modules:
        sklearn_error = sys.modules["sklearn.exceptions"].NotFittedError
        _SKLEARN_NOT_FITTED = type("NotFittedError", (NotFittedError, sklearn_error), {"__module__": __name__})
    return (_SKLEARN_NOT_FITTED or NotFittedError)(message)


class ClassCaseWarning(UserWarning):
    """Classes matched ignoring case ('NO' / 'YES' against a fit on 'no' / 'yes'): a front end that says so
    in its own words (the dashboard's Fit & apply page) filters this category."""


class RecalibratorFileError(ValueError):
    """A saved recalibrator that cannot be loaded: not JSON, not a pbr-calib recalibrator, another
    format version, an unknown method, or a missing or invalid field.

    The message starts with the file's name (or the ``source`` given to ``loads`` / ``from_dict``)
    and says in plain words what is wrong and in which field, e.g.
    ``model.json: Damaged 'temperature' recalibrator file: state.temperature must be a finite number
    above 0, but the file holds -1.5.`` A ``ValueError``, so code that caught ``ValueError`` still works.
    """


#: The ``input_type`` values of a fitted recalibrator ("auto" is resolved by ``fit``).
SAVED_INPUT_TYPES = ("probabilities", "logits")

#: The largest recalibrator file read (64 MiB): the files pbr-calib writes hold a few numbers per class
#: (a GP with 1,000 inducing points and a Cholesky factor, or matrix scaling of 1,000 classes: ~20 MB).
#: Parsing takes about twice the file's size in memory; a larger file is refused before it is read.
MAX_FILE_BYTES = 64 * 2**20

#: The fields of a saved file (``to_dict``); a file holding any other is refused. "calibrated_model"
#: is optional: the note :meth:`pbr_core.CalibratedModel.save` adds (the model's class, classes and input).
FILE_FIELDS = ("format", "format_version", "method", "params", "n_classes", "input_type", "class_names", "state",
               "calibrated_model", "fit_rows")


def _check_model_note(note: Any, n_classes: int) -> None:
    """The optional "calibrated_model" note: {"model": text, "classes": n_classes texts, "input": ...}."""
    if note is None:
        return
    words = ('a note {"model": the model\'s class, "classes": its classes, "input": "predict_proba" or '
             '"decision_function"}')
    ok = (isinstance(note, dict) and set(note) == {"model", "classes", "input"}
          and isinstance(note["model"], str) and len(note["model"]) <= 300
          and isinstance(note["classes"], list) and len(note["classes"]) == n_classes
          and all(isinstance(c, str) and len(c) <= 2000 for c in note["classes"])
          and note["input"] in ("predict_proba", "decision_function"))
    if not ok:
        raise StateError(f"calibrated_model must be {words}, but the file holds {_state.shown(note)}")


def as_predictions(X: Predictions | np.ndarray, y: np.ndarray | None = None,
                   input_type: InputType = "auto", class_names: Sequence[str] | None = None) -> Predictions:
    """Coerce the public ``(X, y)`` arguments into a validated :class:`Predictions`.

    With a Predictions value, ``y`` must be None (the labels are in the value). With arrays and no
    labels (prediction time), dummy zero labels are used; only the scores matter then.
    ``class_names``: the classes of an array's columns, in their order (a DataFrame's headers, matched
    to a fitted recalibrator's classes by :meth:`Recalibrator._input_predictions`).
    """
    if isinstance(X, Predictions):
        if y is not None:
            raise ValueError("Pass labels either inside the Predictions value or as y, not both.")
        if X.kind == "top_label":
            raise PredictionsError(TOP_LABEL_NOT_RECALIBRATED)
        return X
    if type(X).__module__.startswith("scipy.sparse"):  # np.asarray would make a 0-d object array of it
        raise TypeError(f"A {type(X).__name__} was passed: sparse input is not supported by recalibrators; pass a "
                        "dense array of probabilities or logits (e.g. X.toarray()).")
    if class_names is None:
        class_names = header_class_names(X)
    X = np.asarray(X)
    if np.iscomplexobj(X):
        raise ValueError("Complex data not supported: recalibrators take real probabilities or logits.")
    labels = np.zeros(X.shape[0] if X.ndim >= 1 else 0, dtype=np.int64) if y is None else y
    return Predictions.from_arrays(X, labels, input_type=input_type, class_names=class_names)


def header_class_names(X: Any) -> list[str] | None:
    """The classes a table's headers name (a DataFrame's ``.columns``: ``cat``, ``dog``; ``p_cat``,
    ``p_dog`` without their shared prefix, as the file loader reads them), or None: not a table, one
    column, or headers that are only positions (0..K-1). A recalibrator fitted on such a table keeps
    the names, so that a table with the columns in another order is matched by name later."""
    columns = getattr(X, "columns", None)
    if columns is None or isinstance(X, Predictions):
        return None
    headers = [str(c) for c in list(columns)]
    if len(headers) < 2 or len(set(headers)) != len(headers) or real_class_names(headers) is None:
        return None
    from pbr_core.loading._roles import strip_prefix

    names = strip_prefix(headers) or headers
    return names if real_class_names(names) is not None else None


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any, where: str = "state") -> Any:
    """The inverse of ``_encode``; raises :class:`~pbr_core.recalibrators._state.StateError` naming
    the field (``where``) of an array that is not a clean numeric array."""
    return _state.decode(value, where)


class Recalibrator:
    """Base class. Subclasses set ``method`` and implement ``_fit``, ``_predict_proba``,
    ``_get_state`` and ``_set_state``; everything else (validation, save/load) lives here.

    Subclasses take their parameters as keyword arguments of ``__init__`` and store them under the
    same names, so ``get_params`` can find them (as in scikit-learn), and declare what each may be
    in ``_parameter_constraints`` (:mod:`pbr_core.recalibrators._params`).

    The class attributes are the registry's facts about a method; front ends read them instead of
    keeping their own lists of method names.

    scikit-learn's conventions hold where they apply, checked by scikit-learn's own estimator checks
    (tests/recalibrators/test_sklearn_checks.py): ``clone``, ``get_params`` / ``set_params``, repr,
    only parameters set in ``__init__``, ``fit`` returns ``self``, :class:`NotFittedError` (also
    scikit-learn's ``NotFittedError`` where scikit-learn is loaded) before ``fit``, ``fit(X, None)``
    refused, sparse and complex input refused, tags (``__sklearn_tags__``: not a classifier; labels
    required). Not followed, by design: the input is a probability vector or logits of K classes with
    labels 0..K-1, not arbitrary features, so the checks that feed arbitrary features and targets
    fail (the same properties are tested on real scores instead), a single column or a 1-D array is
    binary p(y=1), and ``n_features_in_`` is replaced by ``n_classes_`` (predictions with another
    number of classes are refused). The test file lists each excluded check with its reason.
    """

    method: ClassVar[str] = "base"
    #: The method's name for people (tables, pages, reports), e.g. "Temperature scaling".
    label: ClassVar[str] = ""
    #: "classical": a closed-form or small convex fit; "binary": a map of one probability to one,
    #: fitted one-vs-all or on the top label on multiclass data (``_binary``); "gp": the GP family
    #: (slow, may use the GPU).
    family: ClassVar[Literal["classical", "binary", "gp"]] = "classical"
    #: How the number of fitted parameters grows with the classes K: 1 (a vector, a temperature) or 2
    #: (a K x K matrix: its fit's time grows faster still, and a front end queues and bounds it).
    class_power: ClassVar[int] = 1
    #: "probs": the method works on probabilities; "scores": on logits (or log-probabilities).
    uses: ClassVar[Literal["probs", "scores"]] = "probs"
    #: What each constructor parameter may be, checked in this order by ``_validate_params``.
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {}

    # ------------------------------------------------------------------ public API
    def fit(self, X: Predictions | np.ndarray, y: np.ndarray | None = None,
            input_type: InputType = "auto") -> "Recalibrator":
        """Learn the recalibration map from a recalibration set; returns ``self``.

        Parameters
        ----------
        X : Predictions or array of shape (n, K) or (n,)
            Predictions value, or logits / probabilities (a 1-D array is binary p(y=1)).
        y : array of shape (n,) or None
            Integer labels 0..K-1; required with arrays, must be None with a Predictions value.
        input_type : {"auto", "probabilities", "logits"}
            How to read an array ``X``; "auto" inspects the values.

        Raises
        ------
        ValueError
            Invalid parameters (checked before the data) or invalid data
            (:class:`~pbr_core.predictions.PredictionsError`, a ``ValueError``).
        RuntimeError
            The optimiser failed; the message quotes its reason.
        """
        self._validate_params()
        if y is None and not isinstance(X, Predictions):
            # Without this, as_predictions' dummy labels (meant for prediction) would be fitted.
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None: pass the "
                             "true labels of the rows (integers 0..K-1), or a Predictions value that holds them.")
        return self._fit_predictions(as_predictions(X, y, input_type))

    def _fit_predictions(self, preds: Predictions, **fit_args: Any) -> "Recalibrator":
        """The checked fit of validated predictions: ``_fit(preds, **fit_args)`` between the marks of a
        fitted recalibrator (``n_classes_``, ``input_type_``, ``class_names_``), which a failure removes.
        A family's other ways to fit (``fit_continued``: ``start=``) pass their arguments explicitly."""
        if preds.n < 2:
            raise ValueError(f"Expected at least 2 recalibration samples, but got {preds.n} sample(s).")
        self.n_classes_ = preds.n_classes  # _fit implementations read these
        self.input_type_ = preds.input_type
        try:
            self._fit(preds, **fit_args)
        except BaseException:
            # A failed fit (or refit) must not leave an object that looks fitted with half-set state.
            for name in ("n_classes_", "input_type_", "class_names_", "fit_rows_"):
                self.__dict__.pop(name, None)
            raise
        self.class_names_ = real_class_names(preds.class_names)  # None: matched by position only
        self.fit_rows_ = FitRows.of(preds) if preds.has_labels else None
        return self

    def fit_row_overlap(self, X: Predictions) -> FitRowOverlap:
        """How many rows of ``X`` (labelled predictions) are rows this recalibrator was fitted on.

        A row matches a fit row when its scores and label are exactly equal (the fingerprint of
        :mod:`pbr_core.fit_rows`, kept in the saved file). Identical rows cannot be told apart: see
        :class:`~pbr_core.fit_rows.FitRowOverlap` for what is counted as a fit row and what only may be
        one. ``recorded`` is False where this recalibrator holds no fingerprint (a file written before
        them, or saved with ``fit_rows=False``, or a fit that did not see its rows).

        Raises
        ------
        ValueError
            ``X`` has no labels, or other classes than the fit.
        """
        self._check_fitted()
        if not isinstance(X, Predictions) or not X.has_labels:
            raise ValueError("fit_row_overlap needs labelled predictions (a Predictions value with labels): a row is "
                             "matched on its scores and its label.")
        if X.n_classes != self.n_classes_:
            raise ValueError(self._class_count_words(X.n_classes))
        return fit_row_overlap(getattr(self, "fit_rows_", None), self._in_fitted_class_order(X)[0])

    @classmethod
    def from_state(cls, state: dict[str, Any], *, n_classes: int, input_type: str,
                   class_names: Sequence[str] | None = None, fit_rows: FitRows | None = None,
                   **params: Any) -> "Recalibrator":
        """A fitted recalibrator made from its learned state, checked as a saved file's is.

        For fits made outside ``fit`` (:mod:`pbr_core.stream`'s fits on every row of a dataset, by
        streamed passes): ``cls(**params)`` with the state set by the family's own ``_set_state``,
        which checks every field, and the marks of a fitted recalibrator. ``state`` holds what
        ``_get_state`` returns (e.g. ``{"temperature": 1.7}``); a bad value raises ``ValueError``
        naming it. Example: ``TemperatureScaling.from_state({"temperature": 1.5}, n_classes=10,
        input_type="logits")``. ``fit_rows``: the fingerprint of the rows it was fitted on
        (:class:`~pbr_core.fit_rows.FitSketch` of a streamed fit's chunks), None: not recorded.
        """
        obj = cls(**params)
        obj._validate_params()
        try:
            obj.n_classes_ = _state.whole_number(n_classes, "n_classes", low=2)
            obj.input_type_ = _state.choice(input_type, "input_type", SAVED_INPUT_TYPES)
            obj.class_names_ = None if class_names is None else tuple(class_names)
            obj._set_state(_decode(_encode(state), "state"))
        except StateError as exc:
            for name in ("n_classes_", "input_type_", "class_names_"):
                obj.__dict__.pop(name, None)
            raise ValueError(f"{cls.__name__}.from_state: {str(exc).rstrip('.')}.") from None
        obj.fit_rows_ = fit_rows
        return obj

    def _class_count_words(self, got: int) -> str:
        """A wrong number of classes, and what to do (audit 9a: the message named the problem only)."""
        return (f"Expected predictions with {self.n_classes_} classes (as in fit), but got {got}: this recalibrator "
                f"was fitted on the scores of a {self.n_classes_}-class model; apply it to new predictions of that "
                "model (the same classes), or fit a new recalibrator on labelled predictions of this one.")

    def predict_proba(self, X: Predictions | np.ndarray, input_type: InputType = "auto") -> np.ndarray:
        """Recalibrated probabilities, an (n, K) array whose rows sum to one (binary: K = 2), its
        columns in the input's class order.

        A DataFrame whose headers name the classes is matched by name (any column order); headers
        naming other classes are refused (:meth:`_input_predictions`); an array is read by position.

        Raises :class:`NotFittedError` before ``fit`` and ``ValueError`` when the number of classes
        differs from the one seen in ``fit``.
        """
        self._check_fitted()
        preds = self._input_predictions(X, input_type)
        if preds.n_classes != self.n_classes_:
            raise ValueError(self._class_count_words(preds.n_classes))
        ordered, back = self._in_fitted_class_order(preds)
        probs = self._predict_proba(ordered)
        return probs if back is None else probs[:, back]  # back in the input's class order

    def classes_matched_by_case(self, X: Predictions) -> dict[str, str] | None:
        """Each class name of ``X`` with the name it was fitted under, when the two differ only in
        case ('NO' / 'YES' against a fit on 'no' / 'yes'); None when they are the same names (in any
        order), or other classes, or either side has no names. :meth:`predict_proba` matches such
        names ignoring case, with a warning; the front ends say so in their own words."""
        names = getattr(self, "class_names_", None)
        got = tuple(X.class_names) if isinstance(X, Predictions) and X.named_classes else None
        if names is None or got is None or sorted(got) == sorted(names):
            return None
        return case_matched(got, names)

    def _input_predictions(self, X: Any, input_type: InputType = "auto") -> Predictions:
        """``X`` to apply this fitted recalibrator to, as validated predictions.

        A table with headers (a pandas or polars DataFrame: anything with ``.columns``) whose headers
        name this recalibrator's classes (``cat``, or ``p_cat`` / ``cat_prob`` as the file loader reads
        them) is matched by name, in any column order, as the CLI and ``load_predictions`` match a
        file's columns (audit 10a: a DataFrame with the classes in another order was read by position,
        silently, and test log loss went from 0.48 to 2.06). Headers that name other classes are
        refused. Arrays, tables whose headers are only positions (0..K-1), and recalibrators fitted
        without class names are read by position.
        """
        names = getattr(self, "class_names_", None)
        columns = getattr(X, "columns", None)
        if isinstance(X, Predictions) or columns is None or names is None:
            return as_predictions(X, None, input_type)
        headers = [str(c) for c in list(columns)]
        if len(headers) != len(names) or real_class_names(headers) is None:
            return as_predictions(X, None, input_type)  # by position (another count: the count error follows)
        from pbr_core.loading._roles import _named_class

        matched = [h if h in names else _named_class(h, names) for h in headers]
        if None in matched or len(set(matched)) != len(matched):
            raise ValueError(
                f"The columns of X are named {headers}, but this recalibrator was fitted on the classes {list(names)}: "
                "name the columns after those classes (in any order: they are matched by name), or pass an array "
                "(X.to_numpy()) to have the columns read by position, in the fit's order.")
        return as_predictions(X, None, input_type, class_names=matched)

    def _in_fitted_class_order(self, preds: Predictions) -> tuple[Predictions, list[int] | None]:
        """``preds`` with its classes in the order seen in ``fit``, and the column index that puts an
        (n, K) result back in the input's order (None: already in it). Classes are matched by name
        where both sides have names: a file whose class columns come in another order gets each
        class's own parameters (by position it got another class's). Names that differ only in case
        are the same classes (audit 10a: labels 0/1 were applied to a fit on 'no'/'yes' by position,
        but 'NO'/'YES' were refused), matched with a warning; case-folding must keep each side's
        names distinct ('a' and 'A' as two classes are never matched this way)."""
        names = getattr(self, "class_names_", None)
        if names is None or not preds.named_classes or tuple(preds.class_names) == names:
            return preds, None
        if sorted(preds.class_names) != sorted(names):
            by_case = case_matched(tuple(preds.class_names), names)
            if by_case is None:
                raise ValueError(
                    f"These predictions name the classes {list(preds.class_names)}, but the recalibrator was fitted "
                    f"on {list(names)}: apply it to predictions of the same classes."
                )
            import warnings

            warnings.warn(f"These predictions name the classes {list(preds.class_names)} and the recalibrator was "
                          f"fitted on {list(names)}: matched ignoring case ("
                          + ", ".join(f"{a!r} as {b!r}" for a, b in by_case.items()) + ").", ClassCaseWarning,
                          stacklevel=3)
            from dataclasses import replace

            preds = replace(preds, class_names=tuple(by_case[c] for c in preds.class_names))
            if tuple(preds.class_names) == names:
                return preds, None
        return preds.in_class_order(names), [names.index(c) for c in preds.class_names]

    def n_fits(self) -> int:
        """How many model fits one :meth:`fit` runs (1; ``PBRCV``: one per alpha and inner fold, then
        the final one): what the front ends count when they say how much work a run is."""
        return 1

    def fit_key(self) -> Hashable | None:
        """What determines this recalibrator's fitted state, or None when it cannot share a fit.

        Two recalibrators with the same (not None) key learn the same state from the same data and
        differ only in how they predict, so one fit can serve both through :meth:`fit_from` (the
        experiment protocols do this for ``gp``/``gp_app``, ``pbr``/``pbr_app`` and
        ``pbr_total``/``pbr_total_app``). The classical methods return None.
        """
        return None

    def fit_from(self, other: "Recalibrator", X: Predictions | np.ndarray, y: np.ndarray | None = None,
                 input_type: InputType = "auto") -> "Recalibrator":
        """Become fitted on ``X`` by reusing ``other``'s fit on the same ``X``, where that is exact.

        ``other`` must be fitted on the same recalibration data and have the same :meth:`fit_key`;
        otherwise (or for methods that cannot share) this is a plain ``fit(X, y, input_type)``.
        Returns ``self``.
        """
        return self.fit(X, y, input_type)

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]

    # The settings of a method by name: what ``get_recalibrator(method, ...)`` takes, what a saved file's
    # "params" hold and what ``pbr-calib methods`` lists. For every method but a wrapper they are the
    # constructor's parameters; a wrapper of another recalibrator (PBRCV) takes its estimator's flat.
    @classmethod
    def _settings_defaults(cls) -> dict[str, Any]:
        """Each setting with its default value (the registry's ``default_params``, ``param_names``)."""
        signature = inspect.signature(cls.__init__)
        return {p: signature.parameters[p].default for p in cls._param_names()}

    @classmethod
    def _settings_constraints(cls) -> dict[str, Constraint]:
        """What each setting may be (checked on a saved file's "params")."""
        return cls._parameter_constraints

    @classmethod
    def _from_settings(cls, **settings: Any) -> "Recalibrator":
        """A new, unfitted recalibrator from its settings (``get_recalibrator``, loading a file)."""
        return cls(**settings)

    def _settings(self) -> dict[str, Any]:
        """This recalibrator's settings (what ``to_dict`` saves as "params")."""
        return self.get_params()

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        """The constructor parameters (``deep`` is accepted for scikit-learn compatibility)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "Recalibrator":
        """Set constructor parameters by name (scikit-learn style); returns ``self``."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(
                    f"Invalid parameter {name!r} for {type(self).__name__}; valid parameters: {valid}."
                )
            setattr(self, name, value)
        return self

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "n_classes_")

    def to_dict(self, fit_rows: bool = True) -> dict[str, Any]:
        """The saved file's fields (:meth:`save`); ``fit_rows=False`` leaves out the fingerprint of the fit rows,
        which tells whoever holds the fields whether a row was a fit row and, from a fit row's scores, its
        label (see :meth:`save`)."""
        self._check_fitted()
        recorded = getattr(self, "fit_rows_", None) if fit_rows else None
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "method": self.method,
            "params": _encode(self._settings()),
            "n_classes": self.n_classes_,
            "input_type": self.input_type_,
            "class_names": None if getattr(self, "class_names_", None) is None else list(self.class_names_),
            "state": _encode(self._get_state()),
            **({} if recorded is None else {"fit_rows": recorded.to_field()}),
        }

    def save(self, path: str | Path, fit_rows: bool = True) -> Path:
        """Write the recalibrator's JSON file (see the module's docstring for its fields).

        Parameters
        ----------
        path : str or Path
        fit_rows : bool
            Keep the fingerprint of the rows it was fitted on (a 64-bit hash of each row's scores
            and label, :mod:`pbr_core.fit_rows`), so that ``pbr-calib apply`` and the Fit & apply page
            measure it on the other rows of a file. The fingerprint tells membership and labels:
            whoever holds the file and a row can tell whether the row was a fit row, and whoever
            knows a fit row's scores can hash them with each label and so learn its true label.
            ``False`` saves a file with nothing derived from the data's rows, whose checks then
            cannot tell which rows were used to fit it.
        """
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(fit_rows=fit_rows)))
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "recalibrator data") -> "Recalibrator":
        """A recalibrator from the dict of :meth:`to_dict` (a parsed file).

        Every field is checked (the method's own state by its ``_set_state``), so a loaded
        recalibrator predicts exactly as the one that was saved, or loading fails.

        Raises
        ------
        RecalibratorFileError
            The message starts with ``source`` and names the field that is missing or invalid.
        """
        try:
            return cls._from_dict(data)
        except StateError as exc:
            raise RecalibratorFileError(f"{source}: {str(exc).rstrip('.')}.") from None

    @classmethod
    def _from_dict(cls, data: Any) -> "Recalibrator":
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise StateError("Not a pbr-calib recalibrator file (missing 'format': 'pbr-calib-recalibrator')")
        _check_version(data)
        method = _state.field(data, "method", "the file")
        if not isinstance(method, str):
            raise StateError(f"the \"method\" field must name a recalibration method, but the file holds "
                             f"{_state.shown(method)}")
        if method not in REGISTRY:
            ensure_registered()
        target = REGISTRY.get(method) if cls is Recalibrator else cls
        if target is None:
            raise StateError(f"Unknown recalibration method {method!r} in file; known: {sorted(REGISTRY)}")
        if target.method != method:
            raise StateError(f"File holds a {method!r} recalibrator, but {target.__name__} ({target.method!r}) "
                             "was asked to load it")
        try:
            obj = target._from_fields(data)
        except StateError as exc:
            raise StateError(f"Damaged {method!r} recalibrator file: {exc}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError) as exc:
            # A check a family's _set_state does not make: still the file's fault, still one error type.
            raise StateError(f"Damaged {method!r} recalibrator file: its state cannot be read "
                             f"({type(exc).__name__}: {exc})") from None
        return obj

    @classmethod
    def _from_fields(cls, data: dict[str, Any]) -> "Recalibrator":
        """Build and check the recalibrator of a file whose format, version and method are right."""
        extra = [name for name in data if name not in FILE_FIELDS]
        if extra:
            raise StateError(f"the file holds a field named {_state.quoted(extra[0])}, which a recalibrator "
                             f"file does not have (its fields: {', '.join(FILE_FIELDS)})")
        params = _state.mapping(_state.field(data, "params", "the file"), "params")
        valid = list(cls._settings_defaults())
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise StateError(f"params holds {unknown}, which {cls.__name__} does not take (it takes {valid})")
        values = _decode(params, "params")
        for name, constraint in cls._settings_constraints().items():  # the fit's checks, sizes bounded
            if name in values and not constraint.test(values[name]):
                raise StateError(f"params.{name} must be {constraint.words}, but the file holds "
                                 f"{_state.shown(values[name])}")
        try:
            obj = cls._from_settings(**values)
            obj._validate_saved_params()  # what involves several parameters
        except (TypeError, ValueError) as exc:
            raise StateError(f"its parameters are invalid: {str(exc).rstrip('.')}") from None
        obj.n_classes_ = _state.whole_number(_state.field(data, "n_classes", "the file"), "n_classes", low=2)
        obj.input_type_ = _state.choice(_state.field(data, "input_type", "the file"), "input_type", SAVED_INPUT_TYPES)
        _check_model_note(data.get("calibrated_model"), obj.n_classes_)
        names = data.get("class_names")  # absent from files written before class names were saved
        if names is not None:
            if (not isinstance(names, list) or len(names) != obj.n_classes_ or not all(isinstance(n, str) for n in names)
                    or len(set(names)) != len(names)):
                raise StateError(f"\"class_names\" must be {obj.n_classes_} distinct names, but the file holds "
                                 f"{_state.shown(names)}")
            names = tuple(names)
        obj.class_names_ = names
        # Absent from files written before it and from files saved without it: not recorded.
        obj.fit_rows_ = None if data.get("fit_rows") is None else FitRows.from_field(data["fit_rows"])
        state = _state.mapping(_state.field(data, "state", "the file"), "state")
        obj._set_state(_decode(state, "state"))
        _state.no_extra_fields(state, _encode(obj._get_state()), "state")
        return obj

    @classmethod
    def load(cls, path: str | Path) -> "Recalibrator":
        """A recalibrator from a file written by :meth:`save`.

        Raises :class:`RecalibratorFileError` (message starting with ``path``) for a file that is
        not a valid recalibrator (also one that is not a regular file, such as a FIFO or a device, or
        one larger than :data:`MAX_FILE_BYTES`, refused before it is read), and ``OSError`` when the
        file cannot be read at all.
        """
        path = Path(path)
        info = path.stat()  # OSError for a missing file, as documented
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block, /dev/zero never end
            raise RecalibratorFileError(f"{path}: not a regular file; a recalibrator is a JSON file written by "
                                        "pbr-calib.")
        if info.st_size > MAX_FILE_BYTES:
            raise _too_large(str(path))  # refused unread
        with path.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)  # never more, whatever the file grows to meanwhile
        return cls.loads(data, source=str(path))

    @classmethod
    def loads(cls, text: str | bytes, source: str = "recalibrator") -> "Recalibrator":
        """A recalibrator from the text of a file written by :meth:`save` (e.g. an upload's bytes).

        Raises :class:`RecalibratorFileError` (a ``ValueError``) whose message starts with
        ``source``: not JSON, not a pbr-calib recalibrator, another format version, an unknown
        method or damaged contents (the message names the field).
        """
        if len(text) > MAX_FILE_BYTES:
            raise _too_large(source)
        if isinstance(text, (bytes, bytearray)) and text.startswith(b"\xef\xbb\xbf"):
            text = text[3:]  # a UTF-8 byte-order mark, as some Windows editors write
        try:
            data = json.loads(text)
        except RecursionError:
            raise RecalibratorFileError(
                f"{source}: not a JSON recalibrator file (its lists or objects are nested too deeply; "
                "a recalibrator file nests only a few levels)."
            ) from None
        except (ValueError, UnicodeDecodeError, TypeError) as exc:  # JSONDecodeError is a ValueError
            raise RecalibratorFileError(f"{source}: not a JSON recalibrator file ({exc}).") from None
        return cls.from_dict(data, source=source)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's estimator tags (read by ``clone``, ``check_estimator`` and meta-estimators).

        Not a classifier (no ``predict`` or ``classes_``: :class:`pbr_core.CalibratedModel` is the
        classifier); fitting needs the labels; the input is a score matrix without missing values.
        scikit-learn is imported here, on first use, not with pbr_core.
        """
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=True),
                    input_tags=InputTags(two_d_array=True, one_d_array=False, allow_nan=False),
                    requires_fit=True)

    # ------------------------------------------------------------------ for subclasses
    def _validate_params(self) -> None:
        """Check the constructor parameters; raise ``ValueError`` naming the bad one.

        Called at the start of ``fit`` (scikit-learn validates there, not in ``__init__``) and by
        the CLI before it reads any data. Checks ``_parameter_constraints``; a class adds checks
        that involve several parameters by overriding this (and calling it).
        """
        check_params(self, self._parameter_constraints)

    def _validate_saved_params(self) -> None:
        """Check the parameters read from a saved file; raise ``ValueError`` naming the bad one.

        The default is ``_validate_params``. A family overrides it where ``_validate_params``
        checks the machine rather than the values (the GP family refuses ``device="cuda"`` on a
        machine without a GPU, but a model fitted on a GPU still predicts on a CPU).
        """
        self._validate_params()

    @classmethod
    def _test_params(cls) -> dict[str, Any]:
        """Parameters for a quick but meaningful fit in the shared test suite
        (``tests/recalibrators/test_common.py``); slow methods override this."""
        return {}

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise _not_fitted_error(f"This {type(self).__name__} is not fitted yet: call fit(...) first.")

    def _fit(self, preds: Predictions, **fit_args: Any) -> None:
        raise NotImplementedError

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:
        """Set the learned attributes from a saved state (arrays decoded), checking every field.

        ``n_classes_`` and ``input_type_`` are set (and checked) before. A value that would make
        the recalibrator predict nonsense raises
        :class:`~pbr_core.recalibrators._state.StateError` naming the field; the checkers of
        :mod:`pbr_core.recalibrators._state` do that.
        """
        raise NotImplementedError


def _too_large(source: str) -> RecalibratorFileError:
    return RecalibratorFileError(
        f"{source}: larger than {MAX_FILE_BYTES // 2**20} MiB; a recalibrator file written by pbr-calib holds a few "
        "numbers per class and is far smaller, so this is not one (or it is damaged).")


def _check_version(data: dict[str, Any]) -> None:
    """The file's ``format_version`` must be the number FORMAT_VERSION.

    JSON does not tell 1 from 1.0, so both are accepted; text ("1") and true/false are refused, and
    the message shows what the file holds as it is spelled there (it used to print a text "1" as 1,
    which read "has format version 1, but ... reads version 1").
    """
    version = _state.field(data, "format_version", "the file")
    if isinstance(version, bool) or not isinstance(version, (int, float)):
        raise StateError(f"the \"format_version\" field must be the number {FORMAT_VERSION}, but the file "
                         f"holds {_state.shown(version)}")
    if version != FORMAT_VERSION:
        raise StateError(f"Recalibrator file has format version {_state.shown(version)}, but this version "
                         f"of pbr-calib reads version {FORMAT_VERSION}")


def load_recalibrator(path: str | Path) -> Recalibrator:
    """Load any saved recalibrator (the method is read from the file).

    Raises :class:`RecalibratorFileError` (the message starts with ``path`` and names the problem)
    for a file that is not a valid recalibrator, ``OSError`` when it cannot be read.
    """
    return Recalibrator.load(path)
