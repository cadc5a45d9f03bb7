"""Plain-language explanations shown next to charts and in help tooltips.

Kept in one place so the wording stays consistent across pages (later pages, e.g. PBR and the
generalisation bounds, reuse the L and eps texts). Written for someone who has never read the paper.
"""

from __future__ import annotations

N_BINS_HELP = (
    "The confidences are split into B equal-width bins, (0, 1/B], (1/B, 2/B], …, ((B-1)/B, 1]. "
    "The default B = floor(n^(1/3)) is the number the paper (Theorem 1) shows keeps the error of the "
    "ECE itself smallest. Few bins hide miscalibration; many bins make each bin noisy."
)
ECE_HELP = (
    "Expected calibration error: the average gap between how confident the model is and how often "
    "it is right, weighted by how many predictions fall in each bin (paper Eq. 2). 0 is perfect."
)
ECE_INTERVAL_HELP = (
    "95% interval for the calibration error that these B bins would show on unlimited data of the same "
    "kind (computed by resampling the rows). The ECE of a limited number of rows overstates it on average, "
    "most in thinly filled bins, where chance alone creates gaps, so the interval always contains the ECE "
    "but can reach further below it than above it. Miscalibration finer than the bins averages out and is "
    "not counted (the binning bias of the Bins & bias page)."
)
RELIABILITY_RANGE_MEANING = (
    "The 95% interval under the ECE is where the model's calibration error, as these B bins would measure "
    "it on unlimited data, lies with 95% confidence: it answers “how miscalibrated is my model?”, while the "
    "much wider range on the Bins & bias page (Theorem 1) is a worst-case guarantee, not an estimate."
)


def ece_interval_caption(low: float, high: float) -> str:
    """The line under the ECE card: the interval, and what a lower end of 0 means."""
    text = f"95% interval {low:.4f} – {high:.4f}"
    if low <= 0.0:
        return text + " (these rows cannot rule out a calibrated model)"
    return text


MCE_HELP = "Maximum calibration error: the largest gap in any non-empty bin (sensitive to small bins)."
BRIER_HELP = (
    "Brier score: mean squared distance between the predicted probability vector and the true "
    "one-hot label. Lower is better; it rewards both accuracy and calibration."
)
NLL_HELP = "Negative log-likelihood: how surprised the model is by the true labels. Lower is better."
ACCURACY_HELP = "Share of rows where the most probable class is the true class."
TOP_LABEL_NA = "Needs the full probability vector of every row; this file holds only the top label."

HOW_TO_READ_RELIABILITY = """
**How to read the diagram**

* Each blue bar is one bin of predictions with similar confidence. Its height is how often those
  predictions were right (the black whisker is a 95% Wilson interval: the bar could plausibly lie
  anywhere on it).
* The dashed diagonal is perfect calibration: "80% confident" should be right 80% of the time.
* **Red boxes above a bar** reach up to the bin's average confidence: the model is
  **over-confident** there (bars below the diagonal). Red boxes below a bar mean under-confidence.
* The ECE is the average size of the red boxes, weighted by how many predictions each bin holds,
  which the histogram underneath shows. Bins with few predictions have long whiskers: do not
  over-read them.
"""

HOW_TO_READ_BINARY = """
**How to read the diagram**

* Each blue bar is one bin of rows with a similar predicted p(y=1). Its height is how often y = 1
  really was in those rows (the black whisker is a 95% Wilson interval).
* The dashed diagonal is perfect calibration: of the rows given p(y=1) = 0.3, 30% should be positive.
* **Red boxes above a bar** reach up to the bin's average prediction: the model **over-predicts**
  the positive class there (bars below the diagonal). Red boxes below a bar: it under-predicts.
* The ECE is the average size of the red boxes, weighted by how many rows each bin holds (the
  histogram underneath). Bins with few rows have long whiskers: do not over-read them.
"""


def how_to_read(binary_positive: bool) -> str:
    """The reading guide for the diagram: p(y=1) wording for binary data measured on p(y=1)."""
    return HOW_TO_READ_BINARY if binary_positive else HOW_TO_READ_RELIABILITY


RENORMALISE_HINT = (
    "In the dashboard: open **Reading options** and tick *Renormalise rows that do not sum to 1*, "
    "or set *The score columns hold* to *logits* if they are logits."
)
LABEL_HINT = "In the dashboard: open **Reading options** and type the name of the label column."


LIPSCHITZ_HELP = (
    "L: how fast the true accuracy can change as the confidence changes (the Lipschitz constant of "
    "P(correct | confidence)). 1 is a safe default; a larger L makes coarse bins look worse."
)
EPS_HELP = (
    "ε: the chance that the bound fails. With ε = 0.05 the shaded band contains the true "
    "calibration error with probability at least 95%."
)
BMAX_HELP = "Largest number of bins shown on the chart."
LOG_Y_HELP = "A log scale makes small ECE values and the two bias terms easier to compare."
SUBSAMPLE_HELP = (
    "Recompute everything on a random subset of n rows to see how the ECE curve and the bound move "
    "with the amount of data. The same subset is kept until you press 'New subset'."
)

WHY_CUBE_ROOT = """
**Why B = floor(n^(1/3))?** The ECE only estimates the *true* calibration error (TCE). Theorem 1
of the paper bounds how far off it can be, with probability 1 − ε:

|TCE − ECE| ≤ (1 + L)/B  +  2·√(2·(B·log 2 + log(1/ε)) / n)

* the **binning bias** (1 + L)/B: coarse bins average away real miscalibration; it *falls* like 1/B;
* the **estimation bias**: with more bins each bin holds fewer rows and its accuracy is noisy; it
  *grows* like √(B/n).

Their sum is smallest when B grows like n^(1/3), which is why the paper (and this dashboard)
use B = floor(n^(1/3)) by default. The exact minimiser of the bound is marked too; it depends on L
and ε but grows at the same rate. The shaded band is where the TCE lies: ECE ± bound.
"""

THEOREM1_RANGE_MEANING = (
    "This range (Theorem 1) is a worst-case guarantee, valid with probability at least 1 − ε for any model "
    "whose accuracy changes by at most L per unit of confidence, so it is far wider than the 95% interval "
    "on the Reliability page, which is the one that answers “how miscalibrated is my model?”."
)
BAND_CAPTION = (
    "Dark line: the ECE measured with B bins. Shaded band: where the true calibration error lies with "
    "probability 1 − ε (ECE ± Theorem 1's bound, cut at 0). Dashed orange and dotted green: the two "
    "parts of the bound. Vertical lines: B = floor(n^(1/3)) and the B with the smallest bound."
)


# =========================================================================== recalibration pages
METHOD_LABELS: dict[str, str] = {
    "uncalibrated": "Uncalibrated",
    "temperature": "Temperature scaling",
    "vector_scaling": "Vector scaling",
    "matrix_scaling": "Matrix scaling",
    "platt": "Platt scaling",
    "isotonic": "Isotonic regression",
    "histogram_binning": "Histogram binning",
    "beta": "Beta calibration",
    "bbq": "BBQ",
    "gp": "GP calibration",
    "gp_app": "GP calibration (app.)",
    "pbr": "PBR",
    "pbr_total": "PBR total",
    "pbr_app": "PBR (app.)",
    "pbr_total_app": "PBR total (app.)",
}

#: Methods fitted one-vs-all on multiclass data (they map one probability to one probability).
ONE_VS_ALL = ("platt", "isotonic", "histogram_binning", "beta", "bbq")


def method_label(name: str, multiclass: bool = False) -> str:
    label = METHOD_LABELS.get(name, name)
    return f"{label} (one-vs-all)" if multiclass and name in ONE_VS_ALL else label


TOP_LABEL_NO_RECAL = (
    "This file holds only the top label (confidence, predicted class, true class). Recalibration "
    "needs the **full probability (or logit) vector of every row**: a recalibrator reshapes the whole "
    "vector, and the paper's protocols score it on every class. Load a file with one column per class "
    "(or a binary p(y=1) column) on the Data page to use this page."
)
GP_MISSING = (
    "The GP-based methods (GP calibration and PBR) are not available in this installation: the module "
    "`pbr_core.recalibrators.gp` is missing or failed to import. The classical recalibrators still work "
    "on the Compare page."
)
GP_MISSING_COMPARE = (
    "GP calibration and PBR are not offered: the module `pbr_core.recalibrators.gp` is missing or failed "
    "to import in this installation. The classical recalibrators are all here."
)

OBJECTIVE_LABELS: dict[str, str] = {
    "pbr": "PBR: Brier + α·KL/n",
    "pbr_total": "PBR total: CE + Brier + α·KL/n",
    "gp": "GP calibration (Wenger et al.)",
}
OBJECTIVE_HELP = (
    "What the Gaussian-process recalibrator minimises on the recalibration set. **PBR** (the paper's "
    "Section 5.2): the Brier score plus α times the KL divergence of the posterior from the prior, divided by "
    "n. **PBR total**: adds the cross-entropy, which protects accuracy. **GP calibration** "
    "(Wenger et al., 2020): cross-entropy + KL/n, the baseline PBR extends."
)
MEAN_APPROX_HELP = (
    "How the fitted GP predicts. Off: average the softmax over 100 draws from the posterior (the "
    "paper's Algorithm 1). On (the tables' 'app.' variants): the softmax of the posterior mean, which "
    "is faster and deterministic. Training is the same."
)
ALPHA_HELP = (
    "α weighs the KL term: how strongly the fit is pulled back to the prior (the uncalibrated model). "
    "α = 0 fits the recalibration data as closely as it can; larger α trusts it less. The paper's "
    "Corollary 1 says a small KL keeps the ECE on new data close to the ECE on the recalibration data."
)
ALPHA_AUTO_HELP = (
    "Fit PBR for every α of the grid on k − 1 parts of the recalibration set and score it on the part "
    "left out, k times (k-fold cross-validation); the α with the best mean score wins. The test part "
    "is never used for the choice. Costs k × (grid size) extra fits."
)
ALPHA_AUTO_MISSING = "α by hand: automatic choice needs pbr_core.alpha_selection (not installed yet)."
N_TE_HELP = (
    "How many rows each fold tests on. 0 uses every row not used to fit. A fixed number reproduces "
    "protocols with a set test size (the paper's KITTI runs: n_re = 1000, n_te = 8000); the ECE then "
    "uses B = floor(n_te^(1/3)) bins."
)
N_RE_HELP = (
    "How many rows are used to fit the recalibrator (the recalibration set, n_re). The rest is the "
    "test part on which everything is evaluated. The paper uses n_re = 1000."
)
SEED_HELP = "Which random split into recalibration and test rows. The same seed gives the same split on every page."
MAX_ITER_HELP = "Upper limit on the optimiser's iterations per fit (it usually stops earlier, on tolerance)."
DEVICE_HELP = (
    "GP fits run on a CUDA GPU when PyTorch sees one, else on the CPU. Only one GP fit runs at a time "
    "on this server; a second one waits in line."
)
KL_HELP = (
    "KL(ρ‖π): how far the fitted posterior moved from the prior. It is the data-dependent part of the "
    "paper's bounds: the smaller, the more the recalibration-set ECE can be trusted on new data."
)
FIT_INFO_HELP = "What the optimiser did: iterations, wall time and the device it ran on."


def at_prior_note(kl: float, alpha: float | None, n_re: int) -> str | None:
    """What a fit that ended at the prior (KL ~ 0) means for the user, or None for any other fit."""
    if not (kl < 1e-3):
        return None
    what = "The fit ended at the prior (KL ≈ 0): the recalibrated predictions are the uncalibrated ones. "
    if alpha is None:
        return what + "GP calibration found no change worth its KL price on these rows."
    return (what + f"With α = {alpha:g} and n_re = {n_re:,} rows, no change was worth its KL price (α·KL/n_re). "
            "A smaller α or more recalibration rows let the GP move away from the prior.")
RELIABILITY_PAIR_CAPTION = (
    "Both diagrams use the same test rows (never seen by the fit) and B = floor(n_te^(1/3)) bins. "
    "Blue bars closer to the diagonal and smaller red boxes mean better calibration."
)
ALPHA_SCORES_HELP = (
    "The cross-validated score of each α (mean over the k folds, whisker ± one std). Lower is better; "
    "the circled α was used for the final fit on the whole recalibration set."
)
BOUNDS_INTRO = (
    "The paper's PAC-Bayes bounds use the fitted KL to say how far the ECE measured on the "
    "recalibration set can be from the truth. They hold with probability 1 − ε over the draw of the "
    "recalibration set, for any L-Lipschitz calibration curve (L below), with λ chosen validly from a "
    "fixed grid (a union bound, GP_SPEC §6)."
)
L_RECAL_HELP = (
    "L: how fast the true accuracy can change with the recalibrated confidence (Assumption of "
    "Corollary 2). 1 is a safe default."
)


def corollary1_reading(bound: float, n_re: int, eps: float, ece_re: float) -> str:
    """Plain-language reading of Corollary 1 (the ECE generalisation gap)."""
    if bound >= 1.0:
        return (f"**Vacuous here ({bound:.3f} ≥ 1).** An ECE lies between 0 and 1, so a bound of 1 or more "
                f"says nothing. The bound shrinks with a smaller KL (a larger α) and a larger n_re.")
    return (f"With probability {1 - eps:.0%}, the ECE on **fresh data of the same size** (n = {n_re:,}) "
            f"differs from the ECE measured on the recalibration set ({ece_re:.4f}) by at most "
            f"**{bound:.4f}** (on average over the fitted posterior).")


COROLLARY2_RANGE_MEANING = (
    "This range is a worst-case guarantee computed from the recalibration rows and the KL alone, not an "
    "estimate, so it is wide; the answer to “how miscalibrated is the recalibrated model?” is the test ECE "
    "at the top of this page, measured on rows the fit never saw."
)


def corollary2_reading(bound: float, eps: float, ece_re: float) -> str:
    """Plain-language reading of Corollary 2 (total bias: TCE against the recalibration-set ECE)."""
    if bound >= 1.0:
        return (f"**Vacuous here ({bound:.3f} ≥ 1).** The true calibration error lies between 0 and 1 "
                "anyway. It needs a smaller KL or more recalibration rows to say something.")
    lo, hi = max(0.0, ece_re - bound), min(1.0, ece_re + bound)
    return (f"With probability {1 - eps:.0%}, the **true calibration error (TCE)** of the recalibrated "
            f"model is within **{bound:.4f}** of the recalibration-set ECE ({ece_re:.4f}), i.e. between "
            f"{lo:.4f} and {hi:.4f}.")


COMPARE_METHODS_HELP = (
    "Recalibrators to compare. Every method is fitted on the same recalibration rows of each fold and "
    "scored on the same test rows. GP-based methods (GP calibration, PBR) take minutes; the others "
    "seconds. On multiclass data the binary methods run one-vs-all."
)
N_FOLDS_HELP = (
    "How many random splits into recalibration and test rows (the paper: 10). The table shows the "
    "mean ± standard deviation over them."
)
DIAGRAMS_HELP = (
    "Keep every method's predictions on fold 1's test set to draw its reliability diagram (no extra fit)."
)
COMPARE_ALPHA_HELP = "α of the PBR methods in this comparison (the PBR page can choose it automatically)."
SUMMARY_HELP = (
    "Mean ± standard deviation over folds of each test metric. ECE uses B = floor(n_te^(1/3)) bins. "
    "Green: the best method in that column (lowest, or highest accuracy). KL exists only for GP methods."
)
GRID_CAPTION = (
    "One reliability diagram per method on fold 1's test rows (the same rows for every method). "
    "The panel title gives that fold's test ECE."
)
OVERLAY_CAPTION = (
    "Every method's reliability curve on one chart: each point is a bin (its mean confidence and its "
    "accuracy). The closer a curve runs to the dashed diagonal, the better calibrated the method."
)
SWEEP_INTRO = (
    "How much recalibration data does each method need? The paper's Figure 3: the test ECE for growing "
    "recalibration sets n_re. Within a fold the test rows stay the same for every n_re, so the curve "
    "shows the effect of n_re alone."
)
SWEEP_CAPTION = (
    "Line: mean test ECE over folds; band: ± one standard deviation. A method that overfits small "
    "recalibration sets shows a high ECE on the left."
)
N_RE_VALUES_HELP = "Recalibration set sizes to try (the paper: 10 to 5000). Values that leave no test rows are skipped."
PARTIAL_NOTE = "Stopped after {done} of {total} fits: the results below use the fits that finished."

GEN_INTRO = (
    "Does the KL term of the bound explain how well the recalibration-set ECE carries over to new data? "
    "For each α, PBR is fitted on n_re rows and the **ECE gap** |ECE(test rows) − ECE(recalibration "
    "rows)| is measured on a disjoint test subset of the same size, with B = floor(n_re^(1/3)) bins on "
    "both sides (paper Section 6.1, Figure 2). Corollary 1 bounds the expected gap by a function of "
    "the KL, so the two should rise together."
)
ALPHAS_HELP = "The KL weights to try (the paper's grid). Each α is fitted once per fold."
GEN_N_RE_HELP = (
    "Size of the recalibration set and of the disjoint test subset (the gap compares equal sizes, as "
    "Corollary 1 assumes). Needs 2·n_re ≤ n."
)
EPS_RECAL_HELP = "ε: the bounds hold with probability at least 1 − ε over the draw of the recalibration set."
PEARSON_HELP = "Pearson's r between KL and ECE gap over all fits: +1 a perfect rising line, 0 no linear relation."
KENDALL_HELP = (
    "Kendall's τ: the share of pairs of fits ordered the same way by KL and by gap, minus the share "
    "ordered oppositely. Robust to outliers. The p-value is the chance of a τ this large with no relation."
)
KL_GAP_CAPTION = (
    "Left: one point per fit (α, fold), colour = α. Right: Corollary 1's bound for each fit (dotted, "
    "log scale) against the measured gaps: the bound is valid but loose; what matters here is that "
    "both grow with the KL. The ECE gap itself is noisy: at n_re = 1000 the ECE's own estimation error "
    "is of order 0.1 (paper Section 6.1)."
)


def correlation_reading(r: float, p: float, tau: float, tp: float) -> str:
    """One sentence on what the correlations say."""
    import math

    if any(math.isnan(v) for v in (r, tau)):
        return "Not enough fits (or no variation in KL or gap) to compute correlations: use more α values or folds."
    sign = "positive" if tau > 0 else "negative"
    strength = "no clear" if abs(tau) < 0.1 else ("a weak" if abs(tau) < 0.3 else ("a moderate" if abs(tau) < 0.5 else "a strong"))
    sig = "statistically significant at 5%" if tp < 0.05 else "not statistically significant at 5%"
    verdict = ("as Corollary 1 predicts: a larger KL comes with a larger gap." if tau > 0 and tp < 0.05 else
               "so these fits do not show the relation clearly (the gap is noisy; more folds or a larger n_re help).")
    if strength == "no clear":
        return f"There is no clear relation between KL and gap (τ = {tau:.2f}, {sig}); {verdict}"
    return f"There is {strength} {sign} relation (τ = {tau:.2f}, {sig}), {verdict}"


REPORT_HELP = (
    "One HTML file with every chart and table of this session's recalibration runs (PBR, Compare, "
    "n_re sweep, Generalization) and their settings. It is self-contained: it opens offline in any "
    "browser, with interactive charts."
)
STALE_RESULT = (
    "These results were computed on **{name}**, not on the data loaded now. Run again to use the "
    "loaded data; the downloads below still refer to {name}."
)


# --------------------------------------------------------------------------- Fit & apply page
APPLY_INTRO = (
    "Take a recalibrator away: fit one on the loaded predictions and download it, to apply to new "
    "predictions of the same model in Python or with `pbr-calib apply`. Or upload a recalibrator you "
    "saved earlier and check how it does on the loaded data (for example this month's predictions)."
)
SHIP_METHOD_HELP = (
    "Any recalibrator of the Compare page (compare them there first). The GP methods use their default "
    "settings and the α set here; the PBR page offers their other settings and chooses α by cross-validation."
)
SHIP_HOLDOUT_HELP = (
    "Share of the rows kept out of the fit and used to check it. 0 %: fit on every row (the most data "
    "for the recalibrator you ship), but then the check below is measured on the rows it was fitted on."
)
SHIP_IN_SAMPLE = (
    "Nothing is held out, so the numbers are measured on the rows the recalibrator was fitted on and "
    "look better than they will on new data."
)
APPLY_CHECK_INTRO = (
    "Upload a recalibrator file (JSON) saved by this page, the PBR page or `pbr-calib fit`. It is applied "
    "as it is (not refitted) to every row of the loaded data, which must come from the same model."
)
APPLY_UPLOAD_HELP = (
    "A pbr-calib recalibrator file. It is read as JSON only (never unpickled) and checked: format "
    "version, method, number of classes."
)


def ship_snippet(file_name: str) -> str:
    return (
        "from pbr_core.recalibrators import load_recalibrator\n\n"
        f'recalibrator = load_recalibrator("{file_name}")\n'
        "calibrated = recalibrator.predict_proba(logits)   # (n, K) logits or probabilities of new rows\n\n"
        "# or from the command line:\n"
        f"# pbr-calib apply {file_name} new_predictions.csv --out calibrated.csv"
    )
