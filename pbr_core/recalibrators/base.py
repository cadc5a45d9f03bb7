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

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from pbr_core.predictions import InputType, Predictions, PredictionsError

FORMAT_NAME = "pbr-calib-recalibrator"
FORMAT_VERSION = 1

#: name -> class, filled by :func:`register`; ``load_recalibrator`` uses it.
REGISTRY: dict[str, type["Recalibrator"]] = {}


def register(cls: type["Recalibrator"]) -> type["Recalibrator"]:
    """Class decorator: make a recalibrator loadable by its ``method`` name."""
    if cls.method in REGISTRY and REGISTRY[cls.method] is not cls:
        raise RuntimeError(f"two recalibrators are registered as {cls.method!r}")
    REGISTRY[cls.method] = cls
    return cls


class NotFittedError(RuntimeError):
    """Raised when ``predict_proba`` or ``save`` is called before ``fit``."""


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
        preds = as_predictions(X, y, input_type)
        if preds.n < 2:
            raise ValueError(f"Expected at least 2 recalibration samples, but got {preds.n}.")
        self.n_classes_ = preds.n_classes
        self.input_type_ = preds.input_type
        self._fit(preds)
        return self

    def predict_proba(self, X: Predictions | np.ndarray, input_type: InputType = "auto") -> np.ndarray:
        self._check_fitted()
        preds = as_predictions(X, None, input_type)
        if preds.n_classes != self.n_classes_:
            raise ValueError(
                f"Expected predictions with {self.n_classes_} classes (as in fit), but got {preds.n_classes}."
            )
        return self._predict_proba(preds)

    def get_params(self) -> dict[str, Any]:
        import inspect

        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

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
        target = REGISTRY.get(method) if cls is Recalibrator else cls
        if target is None:
            raise ValueError(f"Unknown recalibration method {method!r} in file; known: {sorted(REGISTRY)}.")
        if target.method != method:
            raise ValueError(f"File holds a {method!r} recalibrator, but {target.__name__} ({target.method!r}) was asked to load it.")
        obj = target(**_decode(data["params"]))
        obj.n_classes_ = int(data["n_classes"])
        obj.input_type_ = data["input_type"]
        obj._set_state(_decode(data["state"]))
        return obj

    @classmethod
    def load(cls, path: str | Path) -> "Recalibrator":
        try:
            data = json.loads(Path(path).read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a JSON recalibrator file ({exc}).") from exc
        return cls.from_dict(data)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    # ------------------------------------------------------------------ for subclasses
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
