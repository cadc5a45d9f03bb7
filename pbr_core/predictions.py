"""The `Predictions` value: one validated set of classifier outputs and true labels.

Everything in the product (metrics, recalibrators, experiments, the dashboard) works on this value
or on the plain arrays it holds. It is built either by :func:`pbr_core.load_predictions` (files) or
by :meth:`Predictions.from_arrays` (arrays already in memory); both validate the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Sequence

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

Kind = Literal["multiclass", "binary", "top_label"]
InputType = Literal["auto", "probabilities", "logits"]

#: Two label names whose meaning fixes which is class 1 (compared case-insensitively): (class 0, class 1).
#: The loader (pbr_core.loading._roles) and Predictions.from_predictions' one-label rule read it.
BINARY_NAME_PAIRS = (("no", "yes"), ("n", "y"), ("false", "true"), ("f", "t"), ("negative", "positive"),
                     ("neg", "pos"), ("incorrect", "correct"), ("wrong", "right"), ("fail", "pass"))

#: Rows of a probability matrix may differ from 1 by at most this much before they count as
#: "not summing to one" (float32 softmax outputs routinely drift by ~1e-6).
DEFAULT_SUM_TOLERANCE = 1e-3

#: Probabilities this little outside [0, 1] are float rounding (1.0000001 or -1e-12 written to a
#: text file): they are clipped to [0, 1], with a note, instead of refused or read as logits.
UNIT_SLACK = 1e-6

#: Why top-label-only data (confidence, predicted label, true label) goes through no recalibrator:
#: the one sentence the places that refuse it say (Predictions.scores, the protocols, the streamed
#: fits and applications after the dataset's name, recalibrators.base.as_predictions).
TOP_LABEL_NOT_RECALIBRATED = ("Top-label-only data (confidence, predicted label, true label) cannot be recalibrated: "
                              "recalibration needs the full probability or logit vector of every row.")


class PredictionsError(ValueError):
    """Raised for any invalid prediction input; the message names the problem and where it is."""


#: The note on one score column read as the log-odds of class 1 (turned into p(y=1) by the logistic
#: function, not a softmax over several columns).
LOG_ODDS_NOTE = "One score column read as the log-odds of class 1 (binary logits), as asked."


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large logits."""
    z = np.asarray(z, dtype=np.float64)
    e = z - z.max(axis=1, keepdims=True)
    # In place on the one new array: the same values as exp(e) / sum, without two more (n, K) copies.
    np.exp(e, out=e)
    e /= e.sum(axis=1, keepdims=True)
    return e


def log_probs(probs: np.ndarray) -> np.ndarray:
    """log(p) clipped at the smallest positive float (GP_SPEC section 1: z = log p)."""
    return np.log(np.clip(np.asarray(probs, dtype=np.float64), np.finfo(np.float64).tiny, None))


def real_class_names(names: Sequence[str]) -> tuple[str, ...] | None:
    """``names`` as a tuple when they are real class names, None when they are only the positions
    "0".."K-1" (what arrays without names get) or empty."""
    names = tuple(str(n) for n in names)
    return names if names and names != tuple(str(k) for k in range(len(names))) else None


#: The words of :func:`_rounding_note` that say the rows are off by rounding alone (the loader reads them:
#: such a file's score columns are the right ones, so it does not ask to name others).
ROUNDED_WORDS = "the probabilities were rounded when the file was written"


def _rounding_note(s: np.ndarray, sums: np.ndarray) -> str:
    """A sentence when the rows are off only as far as rounding the values to a few decimals
    explains (every value a multiple of 10^-d, every row within K * 0.5 * 10^-d of 1): the file's
    probabilities were rounded when written, so renormalising removes just that; "" otherwise."""
    k = s.shape[1]
    for d in range(1, 7):
        step = 10.0 ** -d
        if np.all(np.abs(s / step - np.round(s / step)) <= 1e-6):
            if np.all(np.abs(sums - 1.0) <= k * step / 2 + 1e-9):
                return (f"Every value has at most {d} decimal{'s' if d > 1 else ''}, and no row is further from 1 "
                        f"than rounding the {k} values to {d} decimal{'s' if d > 1 else ''} can make it "
                        f"({k} x {step / 2:g} = {k * step / 2:g}): {ROUNDED_WORDS}, and renormalising removes "
                        "just that rounding. ")
            return ""
    return ""


def _percent_hint(values: np.ndarray) -> str:
    """A hint when values outside [0, 1] all lie in [0, 100]: percentages; "" otherwise."""
    return (" (percentages? divide them by 100, or load the file with percent=True)"
            if np.all((values >= 0) & (values <= 100)) else "")


def _label_hint(y: np.ndarray, k: int) -> str:
    """What labels outside 0..k-1 most likely are, and how to fix them: 1..k (counted from 1) or
    -1/+1 (a binary convention); "" when they are neither."""
    values = np.unique(y)
    if values.size and values.min() == 1 and values.max() == k:
        return f" (the labels run 1..{k}: counted from 1? subtract 1, so that the first score column is class 0)"
    if k == 2 and set(values.tolist()) <= {-1, 1}:
        return " (labels -1/+1? write -1 as 0)"
    return ""


def _first_bad_row(mask: np.ndarray) -> int:
    """Index of the first row where ``mask`` (n,) or (n, K) is True."""
    rows = mask if mask.ndim == 1 else mask.any(axis=1)
    return int(np.flatnonzero(rows)[0])


def _clip_rounding(s: np.ndarray, own: bool, notes: list[str]) -> np.ndarray:
    """``s`` with values within ``UNIT_SLACK`` outside [0, 1] clipped to it (a copy unless ``own``),
    noted; unchanged (the same array) when no value is outside [0, 1] or any is further out (the
    caller's range check then names it)."""
    low, high = s < 0, s > 1
    if not (low.any() or high.any()) or np.any(s < -UNIT_SLACK) or np.any(s > 1 + UNIT_SLACK):
        return s
    count = int(low.sum() + high.sum())
    notes.append(f"Clipped {count:,} probabilit{'y' if count == 1 else 'ies'} within {UNIT_SLACK:g} outside "
                 f"[0, 1] (float rounding, e.g. {s[low | high][0]:.10g}) to [0, 1].")
    return np.clip(s, 0.0, 1.0, out=s if own else None)


def _check_unit_range(s: np.ndarray, source: str, decided: bool, tolerance: float) -> None:
    """A ``PredictionsError`` naming the first cell of the probability matrix ``s`` below 0 (else the
    first above 1), by row and column, with how many cells are outside [0, 1]; nothing when all are
    inside. ``decided``: the loader chose "probabilities" itself, from rows that sum to 1."""
    for outside, what in ((s < 0, "negative probability {:.10g}"), (s > 1, "probability above 1 ({:.10g})")):
        if not outside.any():
            continue
        r = _first_bad_row(outside)
        c = int(np.flatnonzero(outside[r])[0])
        count = int(np.count_nonzero((s < 0) | (s > 1)))
        why = " Every row sums to 1, so the columns hold probabilities, not logits." if decided else ""
        fix = ("Values this close to 0 usually come from rounding: clip them at 0 before saving, or "
               if 0 > s[r, c] >= -tolerance else "Fix the file, or ")
        raise PredictionsError(
            f"{source}: {what.format(s[r, c])} at row {r}, column {c} "
            f"({count:,} value{' is' if count == 1 else 's are'} outside [0, 1]).{why} {fix}"
            "load the columns as logits (input_type='logits') if that is what they are."
        )


def _percent_rows(s: np.ndarray, tolerance: float) -> bool:
    """Whether non-negative scores sum to 100 in every row (within rounding): probabilities in percent."""
    if s.ndim != 2 or np.any(s < 0) or np.any(s > 100):
        return False
    # Rounding each of K percentages to whole numbers moves a row's sum by up to 0.5 K (capped: rows of
    # many non-negative logits do not sum to 100 +- 5 by chance).
    slack = max(100.0 * tolerance, min(0.5 * s.shape[1], 5.0))
    return bool(np.all(np.abs(s.sum(axis=1) - 100.0) <= slack))


def looks_like_probabilities(values: np.ndarray, tolerance: float = DEFAULT_SUM_TOLERANCE) -> bool:
    """True when every entry lies in [0, 1] and every row sums to 1 within ``tolerance``.

    This is the inspection rule that decides "probabilities or logits" when the user does not say.
    A one-column matrix counts as probabilities when all values lie in [0, 1] (binary p(y=1)).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1 or v.shape[1] == 1:
        return bool(np.all((v >= 0) & (v <= 1)))
    if np.any(v < 0) or np.any(v > 1):
        return False
    return bool(np.all(np.abs(v.sum(axis=1) - 1.0) <= tolerance))


def detect_input_type(values: np.ndarray, tolerance: float = DEFAULT_SUM_TOLERANCE) -> Literal["probabilities", "logits"]:
    """Decide by inspection whether a score matrix holds probabilities or logits."""
    return "probabilities" if looks_like_probabilities(values, tolerance) else "logits"


def rows_sum_to_one(values: np.ndarray, tolerance: float = DEFAULT_SUM_TOLERANCE) -> bool:
    """True when a score matrix of two or more columns has every row summing to 1 within ``tolerance``.

    Such a matrix holds probabilities even if some entries lie outside [0, 1] (a corrupted cell:
    an error to name, not a reason to read the columns as logits). Logits do not sum to 1 row after
    row: they are free up to a constant per row, so a row's sum is whatever the network left there
    (the CIFAR logits in ``sample_data`` are centred, every row of 10,000 summing to 0 within 2e-4),
    or 0 when centred on purpose; log-probabilities sum to less than 0. Only a deliberate shift of
    every row by its own amount would make logits pass, so a file of real logits is not taken for
    probabilities.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] < 2:
        return False
    return bool(np.all(np.abs(v.sum(axis=1) - 1.0) <= tolerance))


@dataclass(frozen=True)
class Predictions:
    """Validated predictions of one classifier on one data set.

    Attributes
    ----------
    probs : ndarray of shape (n, K) or None
        Predicted class probabilities (float64, rows sum to 1). For binary data K = 2 and
        ``probs[:, 1]`` is p(y=1). None for top-label-only data.
    labels : ndarray of shape (n,)
        True labels as integers 0..K-1 (top-label-only: the true label ids as given).
    logits : ndarray of shape (n, K) or None
        The logits when the input held logits, else None.
    class_names : tuple of str
        One name per class (top-label-only: the distinct names seen, may be empty).
    kind : {"multiclass", "binary", "top_label"}
        "top_label" holds only (confidence, predicted label, true label): enough for ECE and
        reliability diagrams, not for recalibration.
    confidence : ndarray of shape (n,)
        Top-label confidence max_k p_k (binary: also max(p, 1-p)).
    predicted : ndarray of shape (n,)
        Predicted label argmax_k p_k.
    input_type : {"probabilities", "logits"}
        What the score columns held.
    notes : tuple of str
        Plain-language record of what the loader decided (e.g. why it treated columns as logits).
    source : str
        Where the data came from (file name or "arrays").
    metadata : pandas.DataFrame or None
        The columns of the file that are not predictions (group columns, ids, dates, text
        segments...), one row per prediction in the same order; None when there are none.
    column_roles : tuple of (column, role)
        What the loader used every column of the file as: "label", "score", "confidence",
        "predicted", "group", "metadata" or "ignored", in file order (empty for arrays).
    labels_as_names : bool
        True when the file wrote each label as its class's name (``cat``, ``yes``) rather than a
        number: :func:`~pbr_core.loading.save_predictions` then writes the labels back as names.
    """

    labels: np.ndarray
    confidence: np.ndarray
    predicted: np.ndarray
    kind: Kind
    input_type: Literal["probabilities", "logits"]
    probs: np.ndarray | None = None
    logits: np.ndarray | None = None
    class_names: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    source: str = "arrays"
    #: False when the file had no labels (``load_predictions(..., require_labels=False)``): enough to
    #: apply a fitted recalibrator, not to measure calibration. ``labels`` then holds zeros.
    has_labels: bool = True
    #: False for (confidence, correct) records (:meth:`from_confidence_correct`): their rows carry no
    #: predicted or true class, only whether the prediction was right.
    has_class_ids: bool = True
    metadata: "pd.DataFrame | None" = field(default=None, repr=False, compare=False)
    column_roles: tuple[tuple[str, str], ...] = ()
    labels_as_names: bool = False
    #: (n,) each row's sum as the file wrote it, where the loader divided the rows by it (``renormalize=True``
    #: and rows that did not sum to 1); None when the probabilities are as written. How finely the file
    #: rounded its values (:mod:`pbr_core.resolution`: a "1.000" may stand for 0.9995) is read from the
    #: values as written (:meth:`as_written`): divided by 0.998, a value of a 3-decimal file is off its grid.
    row_sums_as_written: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: Scores that were not probabilities, mapped to p(y=1) (:func:`pbr_core.scores.map_scores`): the map, as
    #: JSON-ready numbers, for new scores of the same model (:func:`pbr_core.scores.apply_score_map`); else None.
    score_map: "dict | None" = field(default=None, repr=False, compare=False)

    # ------------------------------------------------------------------ basic facts
    @property
    def n(self) -> int:
        return int(self.labels.shape[0])

    @property
    def n_classes(self) -> int:
        if self.probs is not None:
            return int(self.probs.shape[1])
        return len(self.class_names)

    @property
    def correct(self) -> np.ndarray:
        """1.0 where the predicted label equals the true label, else 0.0."""
        return (self.predicted == self.labels).astype(np.float64)

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean())

    def columns_with_role(self, *roles: str) -> list[str]:
        """The file's columns that the loader used as one of ``roles`` (e.g. "group", "metadata")."""
        return [c for c, r in self.column_roles if r in roles]

    @property
    def can_recalibrate(self) -> bool:
        return self.kind != "top_label"

    @property
    def p_positive(self) -> np.ndarray:
        """p(y=1) for binary data."""
        if self.kind != "binary":
            raise PredictionsError(f"p_positive is only defined for binary data, but this data is {self.kind}.")
        return self.probs[:, 1]

    @property
    def scores(self) -> np.ndarray:
        """The recalibrators' input z (GP_SPEC section 1): logits when present, else log(p)."""
        if self.probs is None:
            raise PredictionsError(TOP_LABEL_NOT_RECALIBRATED)
        return self.logits if self.logits is not None else log_probs(self.probs)

    def metric_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """The (probs, labels) pair the metrics take: full vector, or (confidence, correct) for top-label-only.

        ``pbr_core.ece(conf, correct)`` on top-label-only data is exactly the top-label ECE, because
        a 1-D input is binned on its value and compared with the 0/1 outcome. The confidence comes
        marked (:class:`pbr_core.metrics.TopLabelConfidence`, a NumPy array) so that the accuracy of
        ``calibration_summary(*preds.metric_inputs())`` and ``accuracy(*preds.metric_inputs())`` is the
        share of right predictions, not that of a 1-D p(y=1) thresholded at 0.5.
        """
        if self.probs is None:
            from pbr_core.metrics import top_label_confidence

            return top_label_confidence(self.confidence), self.correct
        return self.probs, self.labels

    @property
    def named_classes(self) -> bool:
        """Whether ``class_names`` are real names (a file's headers or label names), not the
        positions "0".."K-1" that arrays without names get."""
        return real_class_names(self.class_names) is not None

    def only_label(self) -> str | None:
        """The class every row's true label is, when all are the same class (a filtered export, a
        slice of one outcome) and there are at least two rows; else None (also without labels or
        class ids)."""
        if not self.has_labels or not self.has_class_ids or self.n < 2 or np.any(self.labels != self.labels[0]):
            return None
        k = int(self.labels[0])
        return str(self.class_names[k]) if 0 <= k < len(self.class_names) else str(k)

    def in_class_order(self, names: Sequence[str]) -> "Predictions":
        """The same predictions with their classes (columns, labels, predicted class) in the order of
        ``names``, a reordering of ``class_names``."""
        if sorted(names) != sorted(self.class_names) or self.probs is None:
            raise PredictionsError(f"{self.source}: cannot put the classes {list(self.class_names)} in the order "
                                   f"{list(names)}.")
        perm = np.array([self.class_names.index(n) for n in names])
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size)
        return replace(self, probs=self.probs[:, perm], logits=None if self.logits is None else self.logits[:, perm],
                       labels=inv[self.labels], predicted=inv[self.predicted], class_names=tuple(names))

    def as_written(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per row: a column of ``probs``, the confidence, p(y=1)) as the file wrote them,
        before the loader renormalised the rows (:attr:`row_sums_as_written`); ``values`` when it did not."""
        if self.row_sums_as_written is None:
            return values
        values = np.asarray(values, dtype=np.float64)
        return values * (self.row_sums_as_written[:, None] if values.ndim == 2 else self.row_sums_as_written)

    def subset(self, index: np.ndarray | Sequence[int]) -> "Predictions":
        """A new Predictions with only the rows in ``index`` (integer positions or boolean mask)."""
        idx = np.asarray(index)
        take = (lambda a: None if a is None else a[idx])
        return Predictions(
            labels=self.labels[idx],
            confidence=self.confidence[idx],
            predicted=self.predicted[idx],
            kind=self.kind,
            input_type=self.input_type,
            probs=take(self.probs),
            logits=take(self.logits),
            class_names=self.class_names,
            notes=self.notes,
            source=self.source,
            has_labels=self.has_labels,
            has_class_ids=self.has_class_ids,
            metadata=None if self.metadata is None else self.metadata.iloc[idx].reset_index(drop=True),
            column_roles=self.column_roles,
            labels_as_names=self.labels_as_names,
            row_sums_as_written=take(self.row_sums_as_written),
        )

    def with_probs(self, probs: np.ndarray, source: str | None = None) -> "Predictions":
        """The same labels (and metadata columns) with new (e.g. recalibrated) probabilities; logits are dropped."""
        out = Predictions.from_arrays(
            probs, self.labels if self.has_labels else None, input_type="probabilities", class_names=self.class_names,
            source=source or self.source,
        )
        return replace(out, metadata=self.metadata, column_roles=self.column_roles, labels_as_names=self.labels_as_names)

    def _repr_html_(self) -> str:
        """What a notebook shows: the facts of the predictions, the ECE, and how the file was read."""
        from pbr_core import _html
        from pbr_core.metrics import DEFAULT_BINARY_TARGET, ece, ece_inputs, optimal_n_bins

        rows: list[tuple[str, object]] = [("source", self.source), ("kind", self.kind), ("rows", f"{self.n:,}"),
                                          ("classes", self.n_classes or "not in file"), ("input", self.input_type)]
        if self.has_labels:
            B = optimal_n_bins(self.n)
            what = "ECE of p(y=1)" if self.kind == "binary" else "top-label ECE"
            rows += [("accuracy", f"{self.accuracy:.2%}"),
                     (f"{what}, B = {B}", ece(*ece_inputs(*self.metric_inputs(), DEFAULT_BINARY_TARGET), n_bins=B))]
        if self.metadata is not None:
            rows.append(("other columns", ", ".join(map(str, self.metadata.columns[:12]))
                         + (" ..." if self.metadata.shape[1] > 12 else "")))
        rows += [(f"note {i + 1}", note) for i, note in enumerate(self.notes)]
        return _html.key_values("Predictions", rows)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_predictions(cls, y_true, y_prob, *, class_names: Sequence[object] | None = None,
                         source: str = "arrays") -> "Predictions":
        """Predictions from what scikit-learn users pass around: true labels and predicted probabilities.

        Parameters
        ----------
        y_true : array-like of shape (n,)
            The true labels, in any type scikit-learn accepts (integers, text, -1/+1...).
        y_prob : array-like of shape (n,) or (n, K)
            A 1-D array is binary, p(y = positive class), as in ``calibration_curve`` /
            ``brier_score_loss``; an (n, K) matrix holds each class's probability, its columns in the
            order of ``class_names``.
        class_names : sequence, optional
            The classes in the columns' order (a model's ``classes_``). Default: the sorted distinct
            labels, scikit-learn's order (so the positive class of a 1-D ``y_prob`` is the larger
            label, ``classes_[1]``). With a 1-D ``y_prob`` and one label value in ``y_true`` (a
            slice of one outcome), that value's class is decided as scikit-learn's ``pos_label``
            default does: 1 and True are the positive class, 0, -1 and False the negative one; a
            text label is placed by its meaning where it is one of a pair such as no/yes or
            negative/positive (the file loader's words), and otherwise ``class_names`` must say.

        Examples
        --------
        >>> import numpy as np
        >>> preds = Predictions.from_predictions(["no", "yes", "yes"], np.array([0.2, 0.7, 0.9]))
        >>> preds.kind, preds.class_names, preds.labels.tolist()
        ('binary', ('no', 'yes'), [0, 1, 1])
        >>> Predictions.from_predictions([1, 1, 1], np.array([0.2, 0.7, 0.9])).labels.tolist()
        [1, 1, 1]
        """
        y = np.asarray(y_true)
        p = np.asarray(y_prob, dtype=np.float64)
        if y.ndim != 1:
            raise PredictionsError(f"{source}: expected y_true of shape (n,), but got shape {y.shape}.")
        classes = np.unique(y) if class_names is None else np.asarray(list(class_names), dtype=object)
        if class_names is None and p.ndim == 2 and p.shape[1] > classes.size:
            raise PredictionsError(f"{source}: y_prob has {p.shape[1]} columns but y_true shows only {classes.size} "
                                   "classes: give class_names (e.g. the model's classes_) to say which column is which.")
        if p.ndim == 1 and classes.size > 2:
            raise PredictionsError(f"{source}: a 1-D y_prob is p(y = positive class) of binary data, but y_true has "
                                   f"{classes.size} classes: pass the (n, K) probability matrix.")
        index = {c: k for k, c in enumerate(classes.tolist())}
        try:
            labels = np.array([index[v] for v in y.tolist()], dtype=np.int64)
        except KeyError as exc:
            raise PredictionsError(f"{source}: label {exc.args[0]!r} is not one of the classes "
                                   f"{[str(c) for c in classes.tolist()]}.") from None
        if p.ndim == 1 and classes.size == 1:  # one class seen: which of the two is it?
            classes = _lone_binary_classes(classes[0], source)
            labels = np.full(labels.shape, classes.tolist().index(y[0]), dtype=np.int64)
        names = [str(c) for c in classes.tolist()]
        return cls.from_arrays(p, labels, input_type="probabilities", class_names=names, source=source)

    @classmethod
    def from_estimator(cls, model, X, y, *, source: str | None = None) -> "Predictions":
        """The predictions of a fitted scikit-learn classifier on ``X``, scored against ``y``.

        ``model.predict_proba(X)`` gives the probabilities, ``model.classes_`` the classes (their
        names and column order), as scikit-learn's ``CalibrationDisplay.from_estimator`` reads them.

        Examples
        --------
        >>> from sklearn.linear_model import LogisticRegression
        >>> from sklearn.datasets import load_iris
        >>> X, y = load_iris(return_X_y=True)
        >>> Predictions.from_estimator(LogisticRegression(max_iter=500).fit(X, y), X, y).n_classes
        3
        """
        name = source or type(model).__name__
        if not hasattr(model, "predict_proba"):
            raise PredictionsError(f"{name}: the model has no predict_proba; a fitted classifier that gives "
                                   "probabilities is needed (for a decision_function only, use a recalibrator on "
                                   "its scores).")
        classes = getattr(model, "classes_", None)
        if classes is None:
            raise PredictionsError(f"{name}: the model has no classes_: is it fitted?")
        return cls.from_predictions(y, model.predict_proba(X), class_names=list(classes), source=name)

    @classmethod
    def from_arrays(
        cls,
        scores: np.ndarray,
        labels: np.ndarray | None,
        *,
        input_type: InputType = "auto",
        class_names: Sequence[str] | None = None,
        renormalize: bool = False,
        tolerance: float = DEFAULT_SUM_TOLERANCE,
        source: str = "arrays",
        notes: Sequence[str] = (),
        copy: bool = True,
    ) -> "Predictions":
        """Validate a score matrix (probabilities or logits) and integer labels.

        Parameters
        ----------
        scores : array of shape (n, K) or (n,)
            Probabilities or logits. A 1-D array (or one column) is binary: p(y=1), or with
            ``input_type="logits"`` the log-odds of class 1 (read as the logits (0, s)).
        labels : array of shape (n,) or None
            Integer labels in 0..K-1 (binary: 0/1). None: the labels are unknown (``has_labels`` is
            False), which is enough to apply a fitted recalibrator, not to measure calibration.
        input_type : {"auto", "probabilities", "logits"}
            "auto" inspects the values (all in [0, 1] and rows summing to 1 -> probabilities).
        renormalize : bool
            Divide each probability row by its sum when rows do not sum to one (never done silently:
            without it such rows are an error).
        copy : bool
            True (default): ``scores`` is never modified and never becomes part of the result.
            False: a float64 ``scores`` may be normalised in place and kept as the probabilities or
            logits, which saves one or two copies of an (n, K) matrix (the file loader hands over
            the block it has just built). The values are the same either way.
        """
        if labels is None:
            n_rows = np.shape(scores)[0] if np.ndim(scores) else 0
            built = cls.from_arrays(
                scores, np.zeros(n_rows, dtype=np.int64), input_type=input_type, class_names=class_names,
                renormalize=renormalize, tolerance=tolerance, source=source,
                notes=[*notes, "No labels: predictions can be recalibrated, but calibration cannot be measured."],
                copy=copy,
            )
            return replace(built, has_labels=False)
        notes = list(notes)
        s = np.asarray(scores)
        y = np.asarray(labels)
        if s.size == 0 or y.size == 0:
            raise PredictionsError(f"{source}: no rows: the predictions are empty.")
        if not np.issubdtype(s.dtype, np.number) or np.issubdtype(s.dtype, np.complexfloating):
            raise PredictionsError(f"{source}: the scores are not numeric (dtype {s.dtype}).")
        given = s
        s = s.astype(np.float64, copy=False)
        # May s be changed in place and kept? Only if it is a fresh conversion or the caller said so.
        own = (s is not given or not copy) and s.flags.writeable
        if s.ndim == 2 and s.shape[1] == 1:
            s = s[:, 0]
        if s.ndim not in (1, 2):
            raise PredictionsError(f"{source}: expected scores of shape (n, K) or (n,), but got shape {s.shape}.")
        if y.ndim != 1:
            raise PredictionsError(f"{source}: expected labels of shape (n,), but got shape {y.shape}.")
        if s.shape[0] != y.shape[0]:
            raise PredictionsError(
                f"{source}: mismatched lengths: {s.shape[0]} rows of scores but {y.shape[0]} labels."
            )
        bad = ~np.isfinite(s)
        if bad.any():
            r = _first_bad_row(bad)
            col = int(np.flatnonzero(bad[r])[0]) if s.ndim == 2 else 0
            raise PredictionsError(f"{source}: NaN or infinite score at row {r}, column {col}.")
        y = _integer_labels(y, source)
        n = s.shape[0]

        if s.ndim == 1 and input_type == "logits":
            # The log-odds of class 1 (a logistic model's decision function, XGBoost's margin): the
            # logits (0, s), whose softmax is (1 - sigmoid(s), sigmoid(s)); read as two logit columns.
            s, own = np.column_stack([np.zeros_like(s), s]), True
            notes.append(LOG_ODDS_NOTE)
        if s.ndim == 1:  # binary p(y=1)
            s = _clip_rounding(s, own, notes)
            if np.any(s < 0) or np.any(s > 1):
                r = _first_bad_row((s < 0) | (s > 1))
                hint = _percent_hint(s) or ("; if the column holds the log-odds of class 1, load the columns as "
                                            "logits (input_type='logits')")
                raise PredictionsError(
                    f"{source}: single-column binary input must be p(y=1) in [0, 1], but row {r} holds "
                    f"{s[r]:.10g}{hint}."
                )
            bad_lab = (y != 0) & (y != 1)
            if bad_lab.any():
                r = _first_bad_row(bad_lab)
                raise PredictionsError(
                    f"{source}: one probability column means binary data, so labels must be 0 or 1, "
                    f"but row {r} has label {y[r]}{_label_hint(y, 2)}."
                )
            probs = np.column_stack([1.0 - s, s])
            names = tuple(class_names) if class_names is not None else ("0", "1")
            notes.append("One score column: read as binary p(y=1).")
            return cls._build(probs, None, y, "binary", "probabilities", names, notes, source)

        K = s.shape[1]
        if K < 2:
            raise PredictionsError(f"{source}: need at least 2 classes, got {K}.")
        bad_lab = (y < 0) | (y >= K)
        if bad_lab.any():
            r = _first_bad_row(bad_lab)
            raise PredictionsError(
                f"{source}: label {y[r]} at row {r} is outside the classes 0..{K - 1} of the {K} score "
                f"columns{_label_hint(y, K)}."
            )
        if class_names is not None and len(class_names) != K:
            raise PredictionsError(f"{source}: {len(class_names)} class names for {K} score columns.")
        names = tuple(class_names) if class_names is not None else tuple(str(k) for k in range(K))

        chosen = input_type
        if input_type == "auto":
            chosen = detect_input_type(s, tolerance)
            if chosen == "logits" and not (np.any(s < -UNIT_SLACK) or np.any(s > 1 + UNIT_SLACK)):
                # All in [0, 1] (up to float rounding) but rows off: far likelier broken probabilities than logits, so the
                # sum check below reports it (or renormalises when asked) instead of a silent softmax.
                chosen = "probabilities"
            elif chosen == "logits" and rows_sum_to_one(s, tolerance):
                # Every row sums to 1: probabilities with a corrupted entry (negative, or above 1),
                # which the range checks below name by row and column, never logits (they do not sum
                # to 1 row after row: see rows_sum_to_one).
                chosen = "probabilities"
            if chosen == "logits" and _percent_rows(s, tolerance):
                raise PredictionsError(
                    f"{source}: the scores look like percentages: every row sums to 100 (the first row to "
                    f"{s[0].sum():.6g}). Divide them by 100 (or load the file with percent=True) to load them as probabilities, or load the columns "
                    "as logits (input_type='logits') if that is what they are."
                )
            if chosen == "logits":
                notes.append(f"Read the {K} score columns as logits because some values lie outside [0, 1]. "
                             "Override with input_type='probabilities'.")
            else:
                notes.append(f"Read the {K} score columns as probabilities (all in [0, 1], rows sum to 1).")
        if chosen == "logits":
            logits = s if own else s.copy()
            return cls._build(softmax(logits), logits, y, "binary" if K == 2 else "multiclass", "logits", names,
                              notes, source)

        clipped = _clip_rounding(s, own, notes)
        own, s = own or clipped is not s, clipped
        _check_unit_range(s, source, input_type == "auto", tolerance)
        sums = s.sum(axis=1)
        off = np.abs(sums - 1.0) > tolerance
        if off.any():
            r = _first_bad_row(off)
            if not renormalize:
                raise PredictionsError(
                    f"{source}: probabilities in row {r} sum to {sums[r]:.6g}, not 1 "
                    f"({int(off.sum())} rows are off by more than {tolerance:g}). "
                    + _rounding_note(s, sums) + "Fix the file, load the columns as logits, or ask to renormalise."
                )
            if np.any(sums <= 0):
                r = _first_bad_row(sums <= 0)
                raise PredictionsError(f"{source}: probabilities in row {r} are all zero; cannot renormalise.")
            notes.append(f"Renormalised {int(off.sum())} rows whose probabilities did not sum to 1 (as asked).")
        # Tiny float drift (within tolerance) is always removed so that downstream maths is exact.
        s = np.divide(s, sums[:, None], out=s if own else None)
        built = cls._build(s, None, y, "binary" if K == 2 else "multiclass", "probabilities", names, notes, source)
        # Renormalised: the values as written (and how finely they were rounded) are s * sums.
        return replace(built, row_sums_as_written=sums) if off.any() else built

    @classmethod
    def from_top_label(
        cls,
        confidence: np.ndarray,
        predicted: np.ndarray,
        labels: np.ndarray,
        *,
        class_names: Sequence[str] = (),
        source: str = "arrays",
        notes: Sequence[str] = (),
    ) -> "Predictions":
        """Validate top-label-only data: confidence of the predicted label, predicted label, true label."""
        c = np.asarray(confidence)
        if c.size == 0:
            raise PredictionsError(f"{source}: no rows: the predictions are empty.")
        if not np.issubdtype(c.dtype, np.number):
            raise PredictionsError(f"{source}: the confidence column is not numeric (dtype {c.dtype}).")
        c = c.astype(np.float64)
        p = _integer_labels(np.asarray(predicted), source, what="predicted label")
        y = _integer_labels(np.asarray(labels), source)
        if not (c.ndim == p.ndim == y.ndim == 1):
            raise PredictionsError(f"{source}: confidence, predicted label and label must be 1-D.")
        if not (c.shape[0] == p.shape[0] == y.shape[0]):
            raise PredictionsError(
                f"{source}: mismatched lengths: {c.shape[0]} confidences, {p.shape[0]} predicted labels, {y.shape[0]} labels."
            )
        bad = ~np.isfinite(c)
        if bad.any():
            raise PredictionsError(f"{source}: NaN or infinite confidence at row {_first_bad_row(bad)}.")
        bad = (c < 0) | (c > 1)
        if bad.any():
            r = _first_bad_row(bad)
            raise PredictionsError(f"{source}: confidence {c[r]:g} at row {r} is outside [0, 1]{_percent_hint(c)}.")
        notes = list(notes) + ["Top-label-only data: ECE and reliability diagrams work, recalibration needs full vectors."]
        return cls(labels=y, confidence=c, predicted=p, kind="top_label", input_type="probabilities",
                   probs=None, logits=None, class_names=tuple(class_names), notes=tuple(notes), source=source)

    @classmethod
    def from_confidence_correct(
        cls,
        confidence: np.ndarray,
        correct: np.ndarray,
        *,
        source: str = "arrays",
        notes: Sequence[str] = (),
    ) -> "Predictions":
        """Validate (confidence, correct) records, e.g. an LLM's confidence in its answer and whether
        the answer was right: top-label data without class ids.

        ``correct`` holds 0/1 or booleans. The value is a top-label Predictions whose ``correct`` is
        ``correct`` (internally: predicted class 1 for every row, true class 1 where correct and 0
        where not), so every top-label metric applies unchanged, and ``labels`` is the outcome the
        confidence predicts: ``ece(preds.confidence, preds.labels)`` is the top-label ECE, as
        ``ece(*preds.metric_inputs())`` is (audit 9a: with class 0 predicted, ``labels`` was 1 - correct
        and that call gave 0.632 for a true 0.178, without a warning).
        """
        k = np.asarray(correct)
        if k.dtype != bool:
            if not np.issubdtype(k.dtype, np.number):
                raise PredictionsError(f"{source}: the correct column must hold 0/1 or true/false (dtype {k.dtype}).")
            kf = k.astype(np.float64)
            bad = ~np.isin(kf, (0.0, 1.0))
            if bad.any():
                r = _first_bad_row(bad)
                raise PredictionsError(f"{source}: 'correct' must be 0 or 1 (or true/false), but row {r} holds {k[r]}.")
            k = kf == 1.0
        notes = [*notes, "Confidence and correctness only (no class ids): ECE and reliability diagrams work, "
                         "recalibration needs full probability vectors."]
        built = cls.from_top_label(confidence, np.ones(k.shape[0], dtype=np.int64), k.astype(np.int64),
                                   source=source, notes=())
        return replace(built, notes=tuple(notes), has_class_ids=False)

    @classmethod
    def _build(cls, probs, logits, y, kind, input_type, names, notes, source) -> "Predictions":
        return cls(
            labels=y, confidence=probs.max(axis=1), predicted=probs.argmax(axis=1).astype(np.int64),
            kind=kind, input_type=input_type, probs=probs, logits=logits, class_names=names,
            notes=tuple(notes), source=source,
        )


def _lone_binary_classes(value: object, source: str) -> np.ndarray:
    """The two classes (negative, positive) of binary labels of which ``y_true`` holds only ``value``.

    As scikit-learn's ``pos_label`` default (``brier_score_loss``, ``calibration_curve``): 1 / True
    is the positive class, 0 / -1 / False the negative one. A text label is placed by the loader's
    pairs of words whose meaning fixes class 1 (no/yes, false/true, negative/positive...), its
    partner written in the same case; any other value would be a guess that inverts every number
    when wrong (audit 10a: ``[1, 1, 1]`` was made class 0, with ECE 0.6 for a true 0.4), so it is
    refused, asking for ``class_names``.
    """
    value = value.item() if isinstance(value, np.generic) else value  # shown as '>50K', not np.str_('>50K')
    if isinstance(value, bool):
        return np.asarray([False, True], dtype=object)
    if isinstance(value, (int, float)):
        if value == 1:  # the other class in the label's own type: 0 beside 1, 0.0 beside 1.0
            return np.asarray([value * 0, value], dtype=object)
        if value in (0, -1):
            return np.asarray([value, value * 0 + 1], dtype=object)
    elif isinstance(value, str):
        word = value.strip().lower()
        for no, yes in BINARY_NAME_PAIRS:
            if word in (no, yes):
                other = yes if word == no else no
                other = other.upper() if value.isupper() else other.title() if value.istitle() else other
                return np.asarray([value, other] if word == no else [other, value], dtype=object)
    raise PredictionsError(
        f"{source}: every label in y_true is {value!r}, so it does not say whether {value!r} is the class whose "
        "probability y_prob holds (the positive class) or the other one. Give class_names=[negative, positive] "
        "(e.g. the model's classes_), or write the labels as 0/1 with 1 for the class of y_prob.")


def _integer_labels(y: np.ndarray, source: str, what: str = "label") -> np.ndarray:
    """Labels as int64; floats are accepted only when they are whole numbers."""
    if y.dtype == bool:
        return y.astype(np.int64)
    if not np.issubdtype(y.dtype, np.number):
        raise PredictionsError(f"{source}: {what}s are not numeric (dtype {y.dtype}); map class names to integers first.")
    if np.issubdtype(y.dtype, np.floating):
        bad = ~np.isfinite(y)
        if bad.any():
            raise PredictionsError(f"{source}: missing or non-finite {what} at row {_first_bad_row(bad)}.")
        frac = y != np.round(y)
        if frac.any():
            r = _first_bad_row(frac)
            raise PredictionsError(f"{source}: {what} {y[r]:g} at row {r} is not a whole number.")
    if y.dtype.kind in "fu":  # would wrap around in the int64 cast and be reported as a wrong value
        huge = np.abs(y.astype(np.float64)) >= 2.0**62
        if huge.any():
            r = _first_bad_row(huge)
            raise PredictionsError(f"{source}: {what} {y[r]:g} at row {r} is far outside any range of classes.")
    return y.astype(np.int64)

