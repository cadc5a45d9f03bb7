"""The one interface every recalibrator implements, and its save/load format.

scikit-learn style: ``__init__`` only stores parameters, ``fit(X, y)`` returns ``self``, learned
state ends in ``_``, ``predict_proba(X)`` returns an (n, K) probability matrix.

``X`` is a :class:`~pbr_core.predictions.Predictions` value or a plain array of logits or
probabilities (shape (n, K), or (n,) for binary p(y=1)); ``y`` is required with arrays and taken
from the value otherwise.

Saved files are JSON (never pickle): ``{"format": "pbr-calib-recalibrator", "format_version": 1,
"method": ..., "params": {...}, "state": {...}, "n_classes": K, "input_type": ...}``. Arrays in
``state`` are stored as ``{"__ndarray__": nested lists, "dtype": "float64", "shape": [...]}``;
Python's float repr round-trips float64 exactly, so a loaded recalibrator predicts identically.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
from pathlib import Path
from typing import Any, Callable, ClassVar, Hashable, Iterable, Iterator, Literal, TypeVar

import numpy as np

from pbr_core import cancel as _cancel
from pbr_core.predictions import InputType, Predictions, PredictionsError

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
    """Raised when ``predict_proba`` or ``save`` is called before ``fit``."""


# ---------------------------------------------------------------------- progress reporting
# The library never prints; a front end (the CLI, the dashboard) that wants a progress bar for a
# slow fit installs a factory with ``report_progress`` and the fitting loops wrap their iterables
# with ``track``. Without a factory ``track`` returns the iterable untouched.
_T = TypeVar("_T")
_PROGRESS: contextvars.ContextVar[Callable[..., Iterable] | None] = contextvars.ContextVar(
    "pbr_core_progress", default=None
)


@contextlib.contextmanager
def report_progress(factory: Callable[..., Iterable] | None) -> Iterator[None]:
    """Within the block, slow loops in ``fit`` report progress through ``factory``.

    ``factory(iterable, total=..., desc=...)`` must return an iterable over the same items;
    ``tqdm.tqdm`` fits. Example: ``with report_progress(tqdm): rec.fit(X, y)``.
    """
    token = _PROGRESS.set(factory)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def track(iterable: Iterable[_T], total: int | None = None, desc: str = "") -> Iterable[_T]:
    """Wrap a slow loop so that an installed progress factory (see ``report_progress``) sees it,
    and so that a stop asked for with :func:`pbr_core.cancel.cancel_when` ends it before each item."""
    factory = _PROGRESS.get()
    wrapped = iterable if factory is None else factory(iterable, total=total, desc=desc)
    return _checked(wrapped) if _cancel.watching() else wrapped


def _checked(iterable: Iterable[_T]) -> Iterator[_T]:
    for item in iterable:
        _cancel.checkpoint()
        yield item


def as_predictions(X: Predictions | np.ndarray, y: np.ndarray | None = None,
                   input_type: InputType = "auto") -> Predictions:
    """Coerce the public ``(X, y)`` arguments into a validated :class:`Predictions`.

    With a Predictions value, ``y`` must be None (the labels are in the value). With arrays and no
    labels (prediction time), dummy zero labels are used; only the scores matter then.
    """
    if isinstance(X, Predictions):
        if y is not None:
            raise ValueError("Pass labels either inside the Predictions value or as y, not both.")
        if X.kind == "top_label":
            raise PredictionsError(
                "Top-label-only data (confidence, predicted label, true label) cannot be recalibrated: "
                "recalibration needs the full probability or logit vector of every row."
            )
        return X
    X = np.asarray(X)
    labels = np.zeros(X.shape[0] if X.ndim >= 1 else 0, dtype=np.int64) if y is None else y
    return Predictions.from_arrays(X, labels, input_type=input_type)


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


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return np.asarray(value["__ndarray__"], dtype=value["dtype"]).reshape(value["shape"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


class Recalibrator:
    """Base class. Subclasses set ``method`` and implement ``_fit``, ``_predict_proba``,
    ``_get_state`` and ``_set_state``; everything else (validation, save/load) lives here.

    Subclasses take their parameters as keyword arguments of ``__init__`` and store them under the
    same names, so ``get_params`` can find them (as in scikit-learn).
    """

    method: ClassVar[str] = "base"
    #: "probs": the method works on probabilities; "scores": on logits (or log-probabilities).
    uses: ClassVar[Literal["probs", "scores"]] = "probs"

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
        preds = as_predictions(X, y, input_type)
        if preds.n < 2:
            raise ValueError(f"Expected at least 2 recalibration samples, but got {preds.n}.")
        self.n_classes_ = preds.n_classes  # _fit implementations read these
        self.input_type_ = preds.input_type
        try:
            self._fit(preds)
        except BaseException:
            # A failed fit (or refit) must not leave an object that looks fitted with half-set state.
            for name in ("n_classes_", "input_type_"):
                self.__dict__.pop(name, None)
            raise
        return self

    def predict_proba(self, X: Predictions | np.ndarray, input_type: InputType = "auto") -> np.ndarray:
        """Recalibrated probabilities, an (n, K) array whose rows sum to one (binary: K = 2).

        Raises :class:`NotFittedError` before ``fit`` and ``ValueError`` when the number of classes
        differs from the one seen in ``fit``.
        """
        self._check_fitted()
        preds = as_predictions(X, None, input_type)
        if preds.n_classes != self.n_classes_:
            raise ValueError(
                f"Expected predictions with {self.n_classes_} classes (as in fit), but got {preds.n_classes}."
            )
        return self._predict_proba(preds)

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

    def to_dict(self) -> dict[str, Any]:
        self._check_fitted()
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "method": self.method,
            "params": _encode(self.get_params()),
            "n_classes": self.n_classes_,
            "input_type": self.input_type_,
            "state": _encode(self._get_state()),
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict()))
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Recalibrator":
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise ValueError("Not a pbr-calib recalibrator file (missing 'format': 'pbr-calib-recalibrator').")
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"Recalibrator file has format version {version}, but this version of pbr-calib reads version {FORMAT_VERSION}."
            )
        method = data.get("method")
        if method not in REGISTRY:
            ensure_registered()
        target = REGISTRY.get(method) if cls is Recalibrator else cls
        if target is None:
            raise ValueError(f"Unknown recalibration method {method!r} in file; known: {sorted(REGISTRY)}.")
        if target.method != method:
            raise ValueError(f"File holds a {method!r} recalibrator, but {target.__name__} ({target.method!r}) was asked to load it.")
        try:
            obj = target(**_decode(data["params"]))
            obj.n_classes_ = int(data["n_classes"])
            obj.input_type_ = data["input_type"]
            obj._set_state(_decode(data["state"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"Damaged {method!r} recalibrator file: {type(exc).__name__}: {exc}."
            ) from exc
        return obj

    @classmethod
    def load(cls, path: str | Path) -> "Recalibrator":
        return cls.loads(Path(path).read_bytes(), source=str(path))

    @classmethod
    def loads(cls, text: str | bytes, source: str = "recalibrator") -> "Recalibrator":
        """A recalibrator from the text of a file written by :meth:`save` (e.g. an upload's bytes).

        Raises ``ValueError`` whose message starts with ``source``: not JSON, not a pbr-calib
        recalibrator, another format version, an unknown method or damaged contents.
        """
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{source}: not a JSON recalibrator file ({exc}).") from exc
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from exc

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    # ------------------------------------------------------------------ for subclasses
    def _validate_params(self) -> None:
        """Check the constructor parameters; raise ``ValueError`` naming the bad one.

        Called at the start of ``fit`` (scikit-learn validates there, not in ``__init__``) and by
        the CLI before it reads any data. The default accepts everything.
        """

    @classmethod
    def _test_params(cls) -> dict[str, Any]:
        """Parameters for a quick but meaningful fit in the shared test suite
        (``tests/recalibrators/test_common.py``); slow methods override this."""
        return {}

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise NotFittedError(f"This {type(self).__name__} is not fitted yet: call fit(...) first.")

    def _fit(self, preds: Predictions) -> None:
        raise NotImplementedError

    def _predict_proba(self, preds: Predictions) -> np.ndarray:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


def load_recalibrator(path: str | Path) -> Recalibrator:
    """Load any saved recalibrator (the method is read from the file)."""
    return Recalibrator.load(path)
