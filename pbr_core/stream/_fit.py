"""Fitting on every row of a dataset by streamed passes (temperature and Platt scaling)."""

from __future__ import annotations

import math

import numpy as np
from pbr_core._special import softmax

from pbr_core.fit_rows import FitSketch, prediction_hashes
from pbr_core.predictions import TOP_LABEL_NOT_RECALIBRATED, PredictionsError, real_class_names
from pbr_core.progress import Progress
from pbr_core.stream._source import Dataset

__all__ = ["fit_platt", "fit_temperature"]


def _zeros_pass(dataset: Dataset, sketch: FitSketch | None = None) -> tuple[int, bool]:
    """One pass over probability input: (rows, whether any probability is exactly 0), which decide
    the in-memory fit's input smoothing (:func:`pbr_core.recalibrators.temperature.input_smoothing`);
    ``sketch`` hears every row (the fingerprint of the fit rows)."""
    n, zeros = 0, False
    for unit in dataset.units():
        for _, preds in dataset.predictions(unit):
            _record(sketch, preds)
            n += preds.n
            zeros = zeros or (preds.logits is None and preds.probs is not None and bool(np.any(preds.probs == 0.0)))
    return n, zeros


def _record(sketch: FitSketch | None, preds) -> None:
    """The fit rows' fingerprint (:mod:`pbr_core.fit_rows`) of a streamed fit, built in its first pass."""
    if sketch is not None:
        sketch.add(prediction_hashes(preds), preds.probs)


def _slope_pass(dataset: Dataset, beta: float, smoothing: float = 0.0,
                sketch: FitSketch | None = None) -> tuple[float, float, int]:
    """One pass: sum over rows of g_n = E_{softmax(beta z_n)}[z_n] - z_{n, y_n} (the NLL's derivative in
    beta) and of its derivative Var_{softmax(beta z_n)}[z_n] (>= 0: the NLL is convex in beta); z are
    the scores the in-memory fit reads (``smoothed_scores``: ln((1 - c) p + c / K) when ``smoothing`` c > 0)."""
    from pbr_core.recalibrators.temperature import smoothed_scores

    g = h = 0.0
    n = 0
    for unit in dataset.units():
        for _, preds in dataset.predictions(unit):
            _record(sketch, preds)
            z = smoothed_scores(preds, smoothing)
            p = softmax(beta * z, axis=1)
            mean = np.einsum("nk,nk->n", p, z)
            second = np.einsum("nk,nk->n", p, z * z)
            g += float((mean - z[np.arange(z.shape[0]), preds.labels]).sum())
            h += float((second - mean * mean).sum())
            n += preds.n
    return g, h, n


def fit_temperature(dataset: Dataset, *, min_temperature: float = 1e-3, max_temperature: float = 1e3,
                    tol: float = 1e-10, max_passes: int = 60, progress: Progress | None = None):
    """Temperature scaling fitted on EVERY row of ``dataset``, one streamed pass per step.

    The objective and the answer are those of :class:`pbr_core.recalibrators.TemperatureScaling`
    (the NLL of softmax(z / T) on all rows, convex in beta = 1 / T): its derivative and second
    derivative in beta are sums over rows, so each pass gives both, and a safeguarded Newton
    iteration (a Newton step when it stays inside the current bracket of the root, else bisection)
    finds the root in a handful of passes (typically 4-8) from beta = 1. Probability input (no logits)
    takes one counting pass first: where it holds probabilities of exactly 0, the scores are
    ln((1 - c) p + c / K) with c = 1 / (n + 1) for the n rows, as the in-memory fit's
    (:func:`~pbr_core.recalibrators.temperature.input_smoothing`), so both fits learn the same map
    and the saved ``input_smoothing`` says so (without it, the KITTI random forest's hard zeros read
    ln 0 = -708 and drove T to 1.38 where the smoothed fit finds 0.48).

    Returns
    -------
    TemperatureScaling
        Fitted (``temperature_``), as if ``fit`` had seen every row; ``fit_passes_`` records the passes.

    Raises
    ------
    PredictionsError
        A bad row, or top-label-only data.
    RuntimeError
        No convergence within ``max_passes`` passes.
    """
    from pbr_core.recalibrators import TemperatureScaling

    lay = dataset.layout()
    if lay.kind == "top_label":
        raise PredictionsError(f"{dataset.spec}: {TOP_LABEL_NOT_RECALIBRATED}")
    rec = TemperatureScaling(min_temperature=min_temperature, max_temperature=max_temperature)
    rec._validate_params()
    lo, hi = 1.0 / max_temperature, 1.0 / min_temperature
    beta = min(max(1.0, lo), hi)
    passes = 0
    smoothing = 0.0
    sketch = FitSketch()  # heard by the first pass only
    if lay.input_type == "probabilities":
        n_rows, zeros = _zeros_pass(dataset, sketch)
        passes += 1
        smoothing = float(1.0 / (n_rows + 1)) if zeros else 0.0
    g_lo = g_hi = None
    while True:
        g, h, n = _slope_pass(dataset, beta, smoothing, sketch if passes == 0 else None)
        passes += 1
        if progress is not None:  # the passes' count is not known ahead
            progress(passes, None, f"T = {1.0 / beta:.6g}")
        if n < 2:
            raise PredictionsError(f"{dataset.spec}: at least 2 rows are needed to fit, but the dataset has {n}.")
        g, h = g / n, h / n
        if g > 0:
            hi, g_hi = beta, g
        else:
            lo, g_lo = beta, g
        step = beta - g / h if h > 0 else math.nan
        if abs(g) <= tol * max(1.0, h) or hi - lo <= 1e-15 * hi:
            break
        if passes >= max_passes:
            raise RuntimeError(f"Temperature scaling on every row did not converge in {max_passes} passes "
                               f"(|slope| = {abs(g):.3g}).")
        beta = step if lo < step < hi else 0.5 * (lo + hi)
        if beta == lo or beta == hi:
            break
    # The state a fit on every row learned, checked as a saved file's is (not written into the object).
    rec = TemperatureScaling.from_state({"temperature": float(1.0 / beta), "input_smoothing": smoothing},
                                        n_classes=lay.n_classes,
                                        input_type=lay.input_type, class_names=real_class_names(lay.class_names),
                                        fit_rows=sketch.result(), **rec.get_params())
    rec.fit_passes_ = passes
    return rec


# ---------------------------------------------------------------------------------------- Platt scaling
#: Trial step sizes of the backtracking line search evaluated together in one pass (1, 1/2, 1/4, 1/8):
#: a pass reads every row anyway, and the few extra sigmoids per row cost far less than another pass,
#: while a smaller scale than 1/8 is rarely needed (then the next pass tries the next four).
_TRIALS_PER_PASS = 4
#: The in-memory line search gives up below this scale (``_logistic.fit_logistic``).
_MIN_SCALE = 1e-10


def _count_pass(dataset: Dataset, hard: list[int] | None = None, sketch: FitSketch | None = None
                ) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """The first pass: n, K, and per map the positives, sum x over positives and negatives, sum x^2.

    These give the objective, gradient and Hessian at the start point (slope 0, where eta is the
    constant intercept) in closed form, and the Gram matrix X^T X of the separation check. ``hard``
    (a list [rows with an exact 0 or 1, such rows that were wrong, batches not all 0 or 1]) is
    filled for the warning of ``_logistic.hard_scores_warning`` (probabilities only); ``sketch`` hears
    every row (the fingerprint of the fit rows).
    """
    from pbr_core.recalibrators._logistic import hard_score_rows

    n = 0
    K = None
    binary = False
    pos = sx_pos = sx_neg = sxx = None
    for unit in dataset.units():
        for _, preds in dataset.predictions(unit):
            _record(sketch, preds)
            if hard is not None and preds.logits is None and preds.probs is not None:
                n_hard, n_wrong, all_hard = hard_score_rows(preds.probs, preds.labels)
                hard[0] += n_hard
                hard[1] += n_wrong
                hard[2] += not all_hard
            if K is None:
                K = preds.n_classes
                binary = K == 2
                m = 1 if binary else K
                pos, sx_pos, sx_neg, sxx = (np.zeros(m) for _ in range(4))
            x, y = _features(preds, binary)
            pos += y.sum(axis=0)
            sx_pos += (x * y).sum(axis=0)
            sx_neg += (x * (1.0 - y)).sum(axis=0)
            sxx += (x * x).sum(axis=0)
            n += preds.n
    if K is None:
        return 0, 0, *(np.zeros(0) for _ in range(4)), False
    return n, K, pos, sx_pos, sx_neg, sxx, binary


def _features(preds, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """(logit(p), 1[y = k]) of a batch, one column per map: p(y=1) for binary data, else each class."""
    from pbr_core.recalibrators._logistic import logit

    probs = preds.probs
    if binary:
        return logit(probs[:, 1])[:, None], (preds.labels == 1).astype(np.float64)[:, None]
    K = probs.shape[1]
    return logit(probs), (preds.labels[:, None] == np.arange(K)[None, :]).astype(np.float64)


class _Map:
    """One map's damped Newton iteration, step for step that of ``_logistic.fit_logistic`` on
    features ``logit(p)``, with the per-row sums supplied by streamed passes.

    States: "trial" (waiting for the objective, gradient and Hessian at the trial points
    theta - s * step, s = ``scales``), "done" (``message`` is None when converged).
    """

    def __init__(self, name: str, targets: str, n: int, n_pos: float, sx_pos: float, sx_neg: float,
                 sxx: float, max_iter: int, tol: float) -> None:
        from scipy.special import expit, log_expit

        self.name, self.targets, self.n = name, targets, n
        self.max_iter, self.tol = max_iter, tol
        self.gram = np.array([[sxx, sx_pos + sx_neg], [sx_pos + sx_neg, float(n)]])
        if targets == "platt":
            self.t_pos = (n_pos + 1.0) / (n_pos + 2.0)
            self.t_neg = 1.0 / (n - n_pos + 2.0)
        else:
            self.t_pos, self.t_neg = 1.0, 0.0
        total_t = self.t_pos * n_pos + self.t_neg * (n - n_pos)
        sum_xt = self.t_pos * sx_pos + self.t_neg * sx_neg
        rate = min(max(total_t / n, 1e-12), 1 - 1e-12)
        b = math.log(rate / (1 - rate))
        self.theta = np.array([0.0, b])
        # At slope 0 every row has eta = b: the objective, gradient and Hessian from the counts.
        mu = float(expit(b))
        w = mu * (1.0 - mu)
        self.loss = float(-(total_t * log_expit(b) + (n - total_t) * log_expit(-b)))
        self.grad = np.array([mu * (sx_pos + sx_neg) - sum_xt, n * mu - total_t])
        self.hess = w * self.gram
        self.any_w = w > 0
        self.it = 0
        self.state = "trial"
        self.message: str | None = None
        self.converged = False
        self._newton()

    # -- the iteration
    def _finish(self, it: int, converged: bool, message: str | None) -> None:
        self.it, self.converged, self.message, self.state = it, converged, message, "done"

    def _newton(self) -> None:
        """At an accepted point (objective, gradient and Hessian known): converge, fail or propose trials."""
        from pbr_core.recalibrators._logistic import _SEPARATED

        self.it += 1
        if self.it > self.max_iter:
            self._finish(self.max_iter, False,
                         f"Newton's method did not converge in {self.max_iter} iterations; the coefficients "
                         f"reached {abs(self.theta[0]):.3g}: most likely the two classes are (almost) separated "
                         "by the feature(s), so the maximum-likelihood fit does not exist")
            return
        if not self.any_w:
            self._finish(self.it, False, _SEPARATED)
            return
        self.step = np.linalg.lstsq(self.hess, self.grad, rcond=None)[0]
        self.slope = float(self.grad @ self.step)
        big = np.max(np.abs(self.step))
        if big <= self.tol * (1.0 + np.max(np.abs(self.theta))) or self.slope <= 1e-15 * (1.0 + self.loss):
            if self._flat():
                self._finish(self.it - 1, False, _SEPARATED)
            else:
                self._finish(self.it - 1, True, None)
            return
        self.scale = 1.0
        self._propose()

    def _propose(self) -> None:
        scales = []
        s = self.scale
        while s >= _MIN_SCALE and len(scales) < _TRIALS_PER_PASS:
            scales.append(s)
            s *= 0.5
        self.scales = np.array(scales)
        self.trials = self.theta[None, :] - self.scales[:, None] * self.step[None, :]
        self.acc = np.zeros((len(scales), 7))  # loss, grad (2), hess (a a, a b, b b), count of w > 0

    def _line_search_failed(self) -> None:
        from pbr_core.recalibrators._logistic import _SEPARATED

        gmax = float(np.max(np.abs(self.grad))) / self.n
        if (gmax < 1e-9 and np.max(np.abs(self.step)) < 1e-4 * (1.0 + np.max(np.abs(self.theta)))
                and not self._flat()):
            self._finish(self.it - 1, True, None)
        else:
            self._finish(self.it - 1, False, _SEPARATED if self.loss < 1e-6 * self.n else
                         f"the line search found no decrease (gradient {gmax:.3g})")

    def after_pass(self) -> None:
        """Take the first trial scale that gives enough decrease (Armijo), as the in-memory search does."""
        from pbr_core.recalibrators._logistic import _DIVERGENCE, _SEPARATED

        for j, s in enumerate(self.scales):
            loss = self.acc[j, 0]
            if np.isfinite(loss) and loss <= self.loss - 1e-4 * s * self.slope:
                a = self.acc[j]
                self.theta, self.loss = self.trials[j], float(loss)
                self.grad = a[1:3].copy()
                self.hess = np.array([[a[3], a[4]], [a[4], a[5]]])
                self.any_w = a[6] > 0
                if np.max(np.abs(self.theta)) > _DIVERGENCE:
                    self._finish(self.it, False, _SEPARATED)
                    return
                self._newton()
                return
        self.scale = float(self.scales[-1]) * 0.5
        if self.scale < _MIN_SCALE:
            self._line_search_failed()
        else:
            self._propose()

    def _flat(self, threshold: float = 1e-9) -> bool:
        """``_logistic._flat_direction`` from sums: U^T diag(w) U = S^-1 V^T (X^T W X) V S^-1 with
        X^T X = V S^2 V^T. The Gram matrix's eigenvalues carry an absolute rounding of about
        eps * largest, so a direction is kept only above 1e-14 of the largest (the in-memory SVD
        keeps singular values above 1e-12 of the largest): a constant feature is still excluded."""
        evals, V = np.linalg.eigh(self.gram)
        keep = evals > evals[-1] * 1e-14
        Vk = V[:, keep] / np.sqrt(evals[keep])[None, :]
        return bool(np.linalg.eigvalsh(Vk.T @ self.hess @ Vk)[0] < threshold)

    # -- one batch
    def accumulate(self, x: np.ndarray, y: np.ndarray) -> None:
        from scipy.special import expit, log_expit

        t = self.t_neg + (self.t_pos - self.t_neg) * y
        eta = self.trials[:, :1] * x[None, :] + self.trials[:, 1:]
        mu = expit(eta)
        r = mu - t
        w = mu * (1.0 - mu)
        acc = self.acc
        acc[:, 0] += -(t * log_expit(eta) + (1.0 - t) * log_expit(-eta)).sum(axis=1)
        acc[:, 1] += r @ x
        acc[:, 2] += r.sum(axis=1)
        acc[:, 3] += w @ (x * x)
        acc[:, 4] += w @ x
        acc[:, 5] += w.sum(axis=1)
        acc[:, 6] += (w > 0).sum(axis=1)


def fit_platt(dataset: Dataset, *, targets: str = "auto", max_iter: int = 100, tol: float = 1e-10,
              progress: Progress | None = None):
    """Platt scaling fitted on EVERY row of ``dataset`` by streamed passes.

    The objective, the iteration and the answer are those of
    :class:`pbr_core.recalibrators.PlattScaling` (``_logistic.fit_logistic``: damped Newton with a
    backtracking line search on (slope, intercept) of sigmoid(a * logit(p) + b), p clipped at float64
    eps, the intercept started at the log-odds of the base rate): binary data one map on p(y=1),
    multiclass data one one-vs-all map per class, all K fitted in the same passes.

    Passes: the first counts (rows, positives and sums of logit(p) per map), which gives the
    objective, gradient and Hessian at the start point in closed form. Each later pass evaluates,
    for every map still iterating, the objective, gradient and Hessian at the line search's trial
    points theta - s * step for four scales s = 1, 1/2, 1/4, 1/8 at once; the first scale with
    enough decrease is taken exactly as the in-memory search takes it, and its gradient and Hessian
    give the next Newton step, so one pass is one Newton iteration (a further pass only when no
    scale down to 1/8 decreases enough). A typical fit takes 5-10 passes.

    With ``targets="auto"`` a map whose labels are separated by p is refitted on Platt's smoothed
    targets in the following passes (with the same warning as ``fit``).

    Parameters
    ----------
    dataset : Dataset
    targets : {"auto", "labels", "platt"}
        As :class:`~pbr_core.recalibrators.PlattScaling`.
    max_iter, tol : int, float
        Newton iterations per map at most, and the step tolerance, as ``fit_logistic``.
    progress : callable ``progress(passes, None, message)``, optional
        Called after every pass.

    Returns
    -------
    PlattScaling
        Fitted (``maps_``), as if ``fit`` had seen every row; ``fit_passes_`` records the passes.

    Raises
    ------
    PredictionsError
        A bad row (naming the file and row), top-label-only data, fewer than 2 rows.
    RuntimeError
        A map's fit failed (as ``PlattScaling.fit`` raises it).
    """
    import warnings

    from pbr_core.recalibrators import PlattScaling

    lay = dataset.layout()
    if lay.kind == "top_label":
        raise PredictionsError(f"{dataset.spec}: {TOP_LABEL_NOT_RECALIBRATED}")
    rec = PlattScaling(targets=targets)
    rec._validate_params()
    hard = [0, 0, 0]
    sketch = FitSketch()
    n, K, pos, sx_pos, sx_neg, sxx, binary = _count_pass(dataset, hard, sketch)
    passes = 1
    if n < 2:
        raise PredictionsError(f"{dataset.spec}: at least 2 rows are needed to fit, but the dataset has {n}.")
    from pbr_core.recalibrators._logistic import hard_scores_message

    hard_message = hard_scores_message("PlattScaling", n, hard[0], hard[1], hard[2] == 0, K)
    if hard_message:
        warnings.warn(hard_message, RuntimeWarning, stacklevel=2)
    from pbr_core.recalibrators._binary import map_names

    names = map_names(lay.class_names, 2 if binary else K)

    def start(k: int, used: str) -> _Map:
        return _Map(names[k], used, n, float(pos[k]), float(sx_pos[k]), float(sx_neg[k]), float(sxx[k]),
                    max_iter, tol)

    maps = [start(k, "platt" if targets == "platt" else "labels") for k in range(len(names))]
    notes: list[str] = []

    def settle() -> None:
        # "auto": a map whose labels' fit does not exist restarts on Platt's targets; else a failure raises.
        for k, m in enumerate(maps):
            if m.state == "done" and not m.converged:
                if m.targets == "labels" and targets == "auto":
                    notes.append(m.name)
                    maps[k] = start(k, "platt")
                    continue
                hint = " Use targets='auto' or 'platt' (Platt's smoothed targets)." if m.targets == "labels" else ""
                raise RuntimeError(f"Platt scaling failed for {m.name}: {m.message}.{hint}")

    settle()
    if progress is not None:
        progress(passes, None, f"{sum(m.state != 'done' for m in maps)} map(s) still iterating")
    while any(m.state != "done" for m in maps):
        active = [(k, m) for k, m in enumerate(maps) if m.state != "done"]
        for unit in dataset.units():
            for _, preds in dataset.predictions(unit):
                x, y = _features(preds, binary)
                for k, m in active:
                    m.accumulate(x[:, k], y[:, k])
        passes += 1
        for _, m in active:
            m.after_pass()
        settle()
        if progress is not None:
            progress(passes, None, f"{sum(m.state != 'done' for m in maps)} map(s) still iterating")
    if notes:
        warnings.warn("PlattScaling: " + PlattScaling._fit_note_message.format(names=", ".join(notes)),
                      RuntimeWarning, stacklevel=2)
    maps_ = [{"slope": float(m.theta[0]), "intercept": float(m.theta[1]), "targets": m.targets} for m in maps]
    rec = PlattScaling.from_state({"maps": maps_}, n_classes=lay.n_classes, input_type=lay.input_type,
                                  class_names=real_class_names(lay.class_names), fit_rows=sketch.result(),
                                  **rec.get_params())
    rec.fit_passes_ = passes
    return rec
