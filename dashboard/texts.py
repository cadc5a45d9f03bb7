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
    "95% bootstrap interval: the ECE recomputed on many resamples of the rows. It shows how much the "
    "number would move on another test set of the same size."
)
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

BAND_CAPTION = (
    "Dark line: the ECE measured with B bins. Shaded band: where the true calibration error lies with "
    "probability 1 − ε (ECE ± Theorem 1's bound, cut at 0). Dashed orange and dotted green: the two "
    "parts of the bound. Vertical lines: B = floor(n^(1/3)) and the B with the smallest bound."
)
