"""Plain-language explanations shown next to charts and in help tooltips.

Kept in one place so the wording stays consistent across pages (later pages, e.g. PBR and the
generalisation bounds, reuse the L and eps texts). Written for someone who has never read the paper.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, NamedTuple, Sequence

from pbr_core import groups as _G
from pbr_core.evaluation import CV_SCORES, METRICS
from pbr_core.significance import ALPHA_MCB, ALPHA_TEST
from pbr_core.wording import other_rows, these_rows

if TYPE_CHECKING:
    from pbr_core.loading.dialect import CsvDialect
    from pbr_core.recalibrators import Recalibrator

# ---------------------------------------------------------------------- user-provided text
#: Characters that make Markdown wherever they stand: code, emphasis, links and images ("[", with
#: "!" and "(" inert without it), HTML and autolinks ("<"), GFM tables and strikethrough, LaTeX,
#: entities, e-mail autolinks.
_MD_ALWAYS = re.compile(r"([\\`*\[\]<|~$&@])")
#: "_" makes emphasis only at a word's edge (CommonMark: never between two letters or digits).
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
#: Markdown that needs the start of a line: headings, quotes, lists, thematic breaks, setext lines.
_MD_LINE_START = re.compile(r"^(\s*)([-+=#>]|\d+[.)])")
#: GFM autolinks of bare URLs ("http://", "www.") and shortcodes (":smile:", ":material/home:").
_MD_AUTOLINK = re.compile(r"(?i)(?<![\w.])(www)\.|:(?=//)|:(?=[\w+\-/]+:)")
_LINE_BREAKS = re.compile(r"[\r\n\t\v\f\x85\u2028\u2029]+")


def _md_line(text: str) -> str:
    text = _MD_ALWAYS.sub(r"\\\1", text)
    text = _MD_UNDERSCORE.sub(r"\\_", text)
    text = _MD_AUTOLINK.sub(lambda m: f"{m[1]}\\." if m[1] else "\\:", text)
    return _MD_LINE_START.sub(lambda m: m[1] + (m[2][:-1] + "\\" + m[2][-1]), text, count=1)


def md(value: object) -> str:
    r"""A user-provided string (a file, column, class or group name, a path, a value from a saved file)
    as literal text inside the Markdown of a Streamlit element (``st.markdown``, captions, alerts,
    titles, widget labels and help, metric labels, tab and expander labels).

    Every character that could start Markdown gets a backslash, which CommonMark reads as that
    character and nothing more, so ``![x](http://host/x.png)`` is shown as typed and never fetched,
    and no name makes a link, an image, HTML, emphasis, a heading, a list, a colour directive, LaTeX
    or an emoji. Characters that make nothing on their own stay as they are, so a sentence keeps
    its look in the source (``bad.json: row 2 (label)``; ``p_cat``: an underscore inside a word).
    Line breaks are shown as spaces (a name is one line).

    Examples
    --------
    >>> print(md("![x](http://127.0.0.1:9/x.png)"))
    !\[x\](http\://127.0.0.1:9/x.png)
    >>> print(md("<img src=x onerror=alert(1)>"), md("cifar10_resnet110.npz"), md("_x_ *y* # z"))
    \<img src=x onerror=alert(1)> cifar10_resnet110.npz \_x\_ \*y\* # z
    """
    return _md_line(_LINE_BREAKS.sub(" ", str(value)))


def md_message(message: object, replacements: "Iterable[tuple[str, str]]" = ()) -> str:
    """A plain-text message (the library's errors and notes quote file, column, class and group names)
    as literal Markdown text, its line breaks kept; the only Markdown in the result is what
    ``replacements`` put there: each ``(regex, markdown)`` pair replaces what the regex finds in the
    plain text (page words for the library's Python advice, :func:`for_the_page`)."""
    marks: list[str] = []

    def stash(words: str) -> str:
        marks.append(words)
        return f"\ue000{len(marks) - 1}\ue001"  # private-use characters: no Markdown, never in a message

    text = str(message)
    for pattern, words in replacements:
        text = re.sub(pattern, lambda _m, w=words: stash(w), text)
    lines = re.split(r"\r\n?|\n", text)
    escaped = "  \n".join(_md_line(_LINE_BREAKS.sub(" ", line)) for line in lines)
    return re.sub("\ue000(\\d+)\ue001", lambda m: marks[int(m[1])], escaped)


def md_list(values: "Iterable[object]", sep: str = ", ") -> str:
    """Several user-provided strings as literal Markdown text, joined with ``sep``."""
    return sep.join(md(v) for v in values)


def plot_text(value: object) -> str:
    """A user-provided string as literal text in a plotly title, axis title, legend or hover label:
    :func:`pbr_core.plot.plot_text`, the one the figures use (``&``, ``<``, ``>`` as entities, which
    plotly shows as the characters themselves; line breaks as spaces)."""
    from pbr_core.plot.style import plot_text as library_plot_text  # plotly is loaded by then: state imports it

    return library_plot_text(value)


N_BINS_HELP = (
    "The confidences are split into B equal-width bins, (0, 1/B], (1/B, 2/B], …, ((B-1)/B, 1]. "
    "The default B = floor(n^(1/3)) grows with the rows at the rate that, by the paper's Theorem 1, keeps "
    "the bound on the error of the ECE itself smallest (the bound's exact minimiser, on the Bins & bias "
    "page, depends on the assumed smoothness L and on ε and differs from it by a constant factor: 6 "
    "instead of 3 at 40 rows with the page's default L = 1). Few bins hide miscalibration; many bins "
    "make each bin noisy."
)
ECE_HELP = (
    "Expected calibration error: the average gap between how confident the model is and how often "
    "it is right, weighted by how many predictions fall in each bin (paper Eq. 2). 0 is perfect."
)
#: The "ECE after" cards' colour (``recal_ui.ece_change``): red only where a test shows the rise.
ECE_CARD_COLOUR = (
    " The change under the value is red only when these rows show the ECE higher after beyond its own "
    "noise; otherwise it is grey: a change of ECE alone is not a test (on a few hundred rows it goes "
    "either way by chance), and nothing here tests a fall."
)
#: Where the rows were not the fit's own: what does test them (``held_out_tests``, under the cards).
ECE_CARD_SEE_TEST = " The test of calibration under the cards says whether the predictions after are calibrated."
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


def server_sample_note(n_total: int, n_sample: int, what: str) -> str:
    """Where a page of a dataset read in a stream (on the server, or an upload too large for memory)
    works on its random sample instead of every row."""
    if n_sample >= n_total:
        return f"This dataset has {n_total:,} rows: {what} uses all of them."
    return (f"This dataset has {n_total:,} rows, too many to hold in memory: {what} works on "
            f"a uniform random sample of {n_sample:,} of them. The Reliability and Bins & bias numbers "
            "(ECE, MCE, Brier, NLL, accuracy, the diagram, the ECE curve) use every row.")


def server_interval_caption(n_bins: int) -> str:
    """Under the ECE card of a server dataset at a B other than the one its interval was computed at."""
    return (f"95% interval: computed at B = {n_bins} only (the dataset is read once, and the interval's "
            "resampling is done for one B during that pass)")


def ece_interval_caption(low: float, high: float) -> str:
    """The line under the ECE card: the interval, and a pointer to :data:`ECE_INTERVAL_ZERO_NOTE` (drawn
    under the cards at full width) where its lower end is 0. The note is too long for the card's fifth
    of the page (audit 4: about 10 lines in a narrow column)."""
    text = f"95% interval {low:.4f} – {high:.4f}"
    return text + " (reaches 0: see below the cards)" if low <= 0.0 else text


#: Under the metric cards, at full width, where the ECE's interval reaches 0 (:func:`ece_interval_caption`).
#: A lower end of 0 is not a verdict on calibration: the interval of an error estimate is a weaker check
#: than the test of calibration under the chart (it can reach 0 where the test finds the model
#: miscalibrated, as on a 1,500-row file with p = 0.01), so the words send the reader there instead of
#: saying "cannot rule out a calibrated model" beside a test that rules it out.
ECE_INTERVAL_ZERO_NOTE = (
    "The ECE's 95% interval reaches 0: the interval alone cannot tell this error from none. The test of "
    "calibration below the chart says whether the predictions are off on average or in how confident they "
    "are, and the diagram's bands show single bins."
)


MCE_HELP = "Maximum calibration error: the largest gap in any non-empty bin (sensitive to small bins)."
BRIER_HELP = (
    "Brier score over all classes: mean squared distance between the predicted probability vector and the "
    "true one-hot label (the paper's tables report this one, so it can be compared with them). It is not of "
    "the confidence the ECE measures: that one (confidence against whether the prediction was right) is the "
    "score the CORP decomposition below splits. Lower is better; it rewards both accuracy and calibration."
)
NLL_HELP = ("Negative log-likelihood of the true class: the mean of −log of the probability the model gave to "
            "the class that happened (the paper's tables report this one). Lower is better.")
#: The Brier and NLL cards' names where they are of the whole probability vector (multiclass), not of the
#: one probability the ECE measures: a user audit read "Measured on the confidence of the predicted class"
#: above a Brier of 0.2459 that is the all-classes one (the confidence's is 0.1054).
BRIER_ALL_CLASSES = "Brier score (all classes)"
NLL_TRUE_CLASS = "NLL (true class)"


def brier_label(one_probability: str | None) -> str:
    """The Brier card's (and the report's row's) name: "(all classes)" when it is of the vector."""
    return "Brier score" if one_probability is not None else BRIER_ALL_CLASSES


def nll_label(one_probability: str | None) -> str:
    """The NLL card's name, like :func:`brier_label`."""
    return "NLL" if one_probability is not None else NLL_TRUE_CLASS
ACCURACY_HELP = "Share of rows where the most probable class is the true class."


def brier_help(one_probability: str | None) -> str:
    """The Brier card's help: of the probability vector, or (``one_probability``: "p(y=1)" or "the
    confidence") of the one probability per row that the ECE measures."""
    if one_probability is None:
        return BRIER_HELP
    return (f"Brier score of {one_probability}, the probability the ECE measures: the mean of (probability − "
            "outcome)², the outcome being 1 or 0. Lower is better; it rewards both sharp and calibrated "
            "predictions. (Summed over both classes it would be twice this.)")


def nll_help(one_probability: str | None) -> str:
    """The NLL card's help, like :func:`brier_help`."""
    if one_probability is None:
        return NLL_HELP
    return (f"Negative log-likelihood of {one_probability} against the 0/1 outcome: the mean of −log of the "
            "probability given to what happened. Lower is better.")


def nll_value(value: float, infinite_rows: int) -> str:
    """The NLL on a card or in a table: "infinite" where rows gave what happened a probability of 0."""
    return "infinite" if infinite_rows else f"{value:.4f}"


def nll_infinite_help(infinite_rows: int, floored: float) -> str:
    """Why the NLL card says infinite (``pbr_core.metrics.nll_infinite_rows``), and what the floored mean is."""
    rows = f"{infinite_rows:,} row{'s' if infinite_rows != 1 else ''}"
    return (f"Infinite: {rows} gave what happened a probability of 0 (a score of exactly 0 or 1 that was wrong, "
            "or one within 2.2e-16 of it, which counts as 0), and −log 0 is infinite. With that probability floored at 2.2e-16 (scikit-learn's "
            f"convention) the mean would be {floored:.4f}, a number set by the floor, not by the data.")


#: The change of NLL where the NLL before was infinite: no difference can be computed.
NLL_FROM_INFINITE = "from infinite"
#: ... where the NLL after is infinite.
NLL_STILL_INFINITE = "still infinite"


def nll_to_infinite(before: float) -> str:
    return f"from {before:.4f}"


def measured_probability(binary_positive: bool, top_label_only: bool) -> str | None:
    """What one probability per row the Reliability page's ECE, Brier and NLL measure, in words; None
    when they measure the whole probability vector."""
    if binary_positive:
        return "p(y=1)"
    if top_label_only:
        return "the confidence (against whether the prediction was right)"
    return None

HOW_TO_READ_RELIABILITY = """
**How to read the diagram**

* Each blue bar is one bin of predictions with similar confidence. Its height is how often those
  predictions were right (the black whisker is a 95% exact (Clopper-Pearson) interval for the bin's
  true frequency, per bar, not for all bars at once: with many bars, one or two may miss theirs by
  chance).
* The dashed diagonal is perfect calibration: "80% confident" should be right 80% of the time.
* **Red boxes on top of a bar** reach up to the bin's average confidence: the model is
  **over-confident** there (bars below the diagonal).
* **Orange hatched outlines inside the top of a bar** reach down to the bin's average confidence:
  the model is **under-confident** there (bars above the diagonal).
* The ECE is the average height of these red and orange boxes, weighted by how many predictions
  each bin holds, which the histogram underneath shows. Bins with few predictions have long
  whiskers: do not over-read them.
"""

HOW_TO_READ_BINARY = """
**How to read the diagram**

* Each blue bar is one bin of rows with a similar predicted p(y=1). Its height is how often y = 1
  really was in those rows (the black whisker is a 95% exact (Clopper-Pearson) interval for the bin's
  true frequency, per bar, not for all bars at once: with many bars, one or two may miss theirs by
  chance).
* The dashed diagonal is perfect calibration: of the rows given p(y=1) = 0.3, 30% should be positive.
* **Red boxes on top of a bar** reach up to the bin's average prediction: the model
  **over-predicts** the positive class there (bars below the diagonal).
* **Orange hatched outlines inside the top of a bar** reach down to the bin's average prediction:
  the model **under-predicts** it there (bars above the diagonal).
* The ECE is the average height of these red and orange boxes, weighted by how many rows each bin
  holds (the histogram underneath). Bins with few rows have long whiskers: do not over-read them.
"""


def how_to_read(binary_positive: bool) -> str:
    """The reading guide for the diagram: p(y=1) wording for binary data measured on p(y=1)."""
    return HOW_TO_READ_BINARY if binary_positive else HOW_TO_READ_RELIABILITY


RENORMALISE_HINT = (
    "Open **Columns and reading options** below and tick *Renormalise rows that do not sum to 1*, "
    "or set *The score columns hold* to *logits* if they are logits; then press *Read the file again*."
)
COLUMNS_HINT = (
    "Open **Columns and reading options** below: it lists this file's columns. Choose the *Label column* "
    "and, where needed, the *Score columns* (or the *Columns to ignore*); then press *Read the file again*."
)
#: COLUMNS_HINT for an error about the score columns alone (the loader's "the score columns are ambiguous"),
#: where choosing the label column would not help (audit 4: an R export's 'risk_30d' beside 'bmi').
SCORE_COLUMNS_HINT = (
    "Open **Columns and reading options** below: it lists this file's columns. Choose the *Score columns* "
    "(or the *Columns to ignore*); then press *Read the file again*."
)
UPLOAD_HELP = (
    "One column per class (probabilities or logits) plus a label column; or one p(y=1) column plus a 0/1 "
    "label; or confidence, predicted label and true label. Other columns (ids, dates, segments, groups) "
    "may stay in the file: they are kept as metadata. Download a template to see the layouts."
)
COLUMN_ROLES_INTRO = (
    "Say which column is what when the detection got it wrong. Columns that are not scores (ids, dates, "
    "text, group codes) are kept next to the predictions and never read as a class."
)
LABEL_COLUMN_HELP = "The column that holds the true class of each row. Found by its name when left as it is."
SCORE_COLUMNS_HELP = (
    "The columns that hold the model's probabilities or logits, one per class, in class order (integer "
    "labels count from 0 in this order). Leave empty to detect them; every other column is then kept as "
    "metadata."
)
GROUP_COLUMNS_HELP = "Columns that describe groups of rows (segment, region, model version): kept to compare groups."
IGNORE_COLUMNS_HELP = "Columns to leave out entirely."
INPUT_TYPE_HELP = (
    "'detect' decides by inspection: values in [0, 1] with rows summing to 1 are probabilities, anything "
    "else logits. The summary says what was chosen."
)
RENORMALISE_HELP = (
    "Off: rows whose probabilities do not sum to 1 are an error that names the row. On: each row is divided "
    "by its sum (only do this if you know why the rows are off)."
)
PERCENT_HELP = (
    "On: the score columns (or the confidence) are written as percentages, 31.1 for 0.311; they are "
    "divided by 100, and the summary says so. Never done on its own: numbers up to 100 may as well be logits. "
    "Not needed for a column written with % signs (93.3%, or 93,3% with decimal commas): it is read as "
    "percentages without this."
)
POSITIVE_CLASS_LABEL = "The score is the probability of:"


def positive_class_help(score: str, label: str) -> str:
    """The help of the Data page's choice of the class a lone score column is the probability of."""
    return (f"The file does not say which of the two values of {label!r} the score column {score!r} is the "
            "probability of (a header such as p_approved, or values such as no/yes, would). Choose it: that value "
            "is class 1, the other class 0. A wrong choice turns every probability into its opposite.")
ROW_LIMIT_HELP = (
    "Refuse files with more rows than this, with a message, instead of reading them (the check comes "
    "before the data is parsed). Useful on a shared server; to analyse a huge file, upload a random "
    "sample of its rows."
)
ROLES_CAPTION = (
    "label: the true class · score: a class's probability or logit · group / metadata: kept next to the "
    "predictions (never read as a score) · ignored: left out, as asked."
)

#: Library advice (Python arguments) -> the control on the Data page that does the same.
_PAGE_WORDS = (
    (r"\s*To divide each row by its sum: renormalize=True; if the columns are logits: input_type='logits'\.", ""),
    (r"\(label_column=\)", "(choose the *Label column* under **Columns and reading options**)"),
    (r"\(score_columns=\)", "(*Score columns* under **Columns and reading options**)"),
    (r"\(score_columns=\[[^\]]*\]\)", "(the *Score columns* under **Columns and reading options**)"),
    (r"\(ignore_columns=\)", "(*Columns to ignore* there)"),
    (r"Override with input_type='probabilities'\.",
     "To read them as probabilities, set *The score columns hold* under **Columns and reading options**."),
    (r"load the columns as logits \(input_type='logits'\) if that is what they are\.",
     "if they are logits, set *The score columns hold* to logits under **Columns and reading options**."),
    (r"load the columns as logits \(input_type='logits'\)\.",
     "set *The score columns hold* to logits under **Columns and reading options**."),
    (r"pass format= or a file name ending in", "use a file name ending in"),
    (r"divide them by 100, or load the file with percent=True",
     "tick *Scores are percentages* under **Columns and reading options**"),
    (r"Divide them by 100 \(or load the file with percent=True\)",
     "Tick *Scores are percentages* under **Columns and reading options**"),
    (r"Read them as percentages \(percent=True\)", "Tick *Scores are percentages* under **Columns and reading options**"),
    (r"\(percent=True with input_type='logits'\)", "(*Scores are percentages* with *The score columns hold* logits)"),
    (r"Read them without the percentages option\.", "Untick *Scores are percentages*."),
    (r"say which \(positive_class='[^']*' or positive_class='[^']*'\)",
     "choose it under *The score is the probability of* in **Columns and reading options**"),
    (r"Say which \(positive_class='[^']*' or positive_class='[^']*'\)",
     "Choose it under *The score is the probability of* in **Columns and reading options**"),
    (r"positive_class=('[^']*') is not one of the values", r"the class \1 chosen is not one of the values"),
    (r"\(pbr_core\.scores\.map_scores; --map-scores on the command line\)",
     "(open *My scores are not probabilities* below **Columns and reading options**)"),
)


def for_the_page(message: str) -> str:
    """A loader message as Markdown for the page: its Python advice replaced by the Data page control that
    does the same, the rest (names from the file included) literal text (:func:`md_message`)."""
    return md_message(message, _PAGE_WORDS)


LIPSCHITZ_HELP = (
    "L: how fast the true accuracy can change as the confidence changes (the Lipschitz constant of "
    "P(correct | confidence)). 1 is a safe default; a larger L makes coarse bins look worse."
)
EPS_HELP = (
    "ε: the chance that the bound fails. With ε = 0.05 the shaded band at any one B contains the true "
    "calibration error with probability at least 95% (one B at a time, not every B of the chart at once)."
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
* the **estimation bias** (the paper's name for it) 2·√(2·(B·log 2 + log(1/ε)) / n): the *sampling
  noise* of the binned estimate. The n rows are shared among B bins, about n/B rows each, and each
  bin's observed accuracy is off its true value by chance, as any rate measured on a sample is; this
  term bounds how far that chance can move the ECE (with probability 1 − ε). It is not a fixed offset
  that could be subtracted, and it *grows* like √(B/n): more bins, fewer rows in each.

Their sum is smallest when B grows like n^(1/3), which is why the paper (and this dashboard)
use B = floor(n^(1/3)) by default. The exact minimiser of the bound is marked too; it depends on L
and ε but grows at the same rate. The shaded band is where the TCE lies: ECE ± bound, at each B
with probability 1 − ε (for one B at a time, not for every B at once).
"""

THEOREM1_RANGE_MEANING = (
    "This range (Theorem 1) is a worst-case guarantee, valid with probability at least 1 − ε for any model "
    "whose accuracy changes by at most L per unit of confidence, so it is far wider than the 95% interval "
    "on the Reliability page, which is the one that answers “how miscalibrated is my model?”."
)
BAND_CAPTION = (
    "Dark line: the ECE measured with B bins. Shaded band: at each B, where the true calibration error lies "
    "with probability 1 − ε (ECE ± Theorem 1's bound at that B, cut at 0); the guarantee holds for one B at a "
    "time, not for every B of the chart at once. Dashed orange and dotted green: the two parts of the bound. "
    "Vertical lines: B = floor(n^(1/3)) and the B with the smallest bound."
)


# =========================================================================== recalibration pages
def method_label(name: str, multiclass: bool = False) -> str:
    """The method's name for people (the registry's ``label``), "(one-vs-all)" or "(top label)" added
    for a binary map on multiclass data."""
    from pbr_core.recalibrators import method_label as label

    return label(name, multiclass)


TOP_LABEL_NO_RECAL = (
    "This file holds only the top label (the confidence of the predicted class and whether it was "
    "right). Recalibration "
    "needs the **full probability (or logit) vector of every row**: a recalibrator reshapes the whole "
    "vector, and the paper's protocols score it on every class. Load a file with one column per class "
    "(or a binary p(y=1) column) on the Data page to use this page."
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
    "Corollary 1 says a small KL keeps the ECE on new data close to the ECE on the recalibration data, "
    "on average over maps drawn from the fitted posterior."
)
ALPHA_AUTO_HELP = (
    "Fit PBR for every α of the grid on k − 1 parts of the recalibration set and score it on the part "
    "left out, k times (k-fold cross-validation); the α with the best mean score wins. The test part "
    "is never used for the choice. Costs k × (grid size) extra fits. With about 1,000 recalibration rows "
    "the choice is noisy: on the paper's four CIFAR-100 networks (10 splits each) it changed from split to "
    "split across the whole grid and was not better than the paper's α = 0.5 on any network."
)
N_TE_HELP = (
    "How many rows each fold tests on. 0 uses every row not used to fit. A fixed number reproduces "
    "protocols with a set test size (the paper's KITTI runs: n_re = 1000, n_te = 8000); the ECE then "
    "uses B = floor(n_te^(1/3)) bins."
)
N_RE_HELP = (
    "How many rows are used to fit the recalibrator (the recalibration set, n_re). The rest is the "
    "test part on which everything is evaluated. The paper uses n_re = 1000; the default is 1000 when the "
    "file has at least 2,000 rows, else half of them, so that enough rows are left to test on (at least "
    "144: below that the test ECE says nothing)."
)


def fewer_fit_rows_todo(n: int, top: int, min_rows: int, control: str = "n_re", min_fit: int | None = None) -> str:
    """What to do when n_re leaves fewer than ``min_rows`` test rows: lower ``control`` to ``top``
    (``pbr_core.experiments.max_n_re``), or, when no n_re of at least ``min_fit`` rows
    (``pbr_core.experiments.MIN_FIT_ROWS``; default ``min_rows``) can, load a larger file. Never a
    value below ``min_fit``: on a 150-row file "lower n_re to at most 6" would advise a fit on noise."""
    min_fit = min_rows if min_fit is None else min_fit
    if top < min_fit:
        return (f"This file has {n:,} rows, too few to measure a recalibrator, which needs at least {min_fit:,} rows "
                f"to fit on and {min_rows:,} other rows to test on: load a file with at least "
                f"{min_fit + min_rows:,} labelled rows.")
    return f"Lower {control} to at most {top:,}, so that at least {min_rows:,} rows are left to test on."


def more_fit_rows_todo(top: int, min_fit: int, min_rows: int, control: str = "n_re") -> str:
    """What to do when ``control`` (n_re) is below ``min_fit`` rows on a file that allows up to ``top``."""
    return (f"Raise {control} to at least {min_fit:,} (at most {top:,} on this file, so that at least "
            f"{min_rows:,} rows are left to test on).")


def split_refusal(n: int, n_re: int, n_te: int | None = None) -> str | None:
    """Why the PBR or Compare page refuses ``n_re`` recalibration rows and ``n_te`` test rows (None:
    every row not fitted on) of a file of ``n`` rows, with what to do; None when it does not. A file
    below ``MIN_MEASURED_ROWS`` rows gets one sentence (load more rows), never an n_re to set."""
    from pbr_core.experiments import MIN_FIT_ROWS, MIN_TEST_ROWS, max_n_re, split_problem

    found = split_problem(n, n_re, n_te)
    if found is None:
        return None
    which, problem = found
    top = max_n_re(n)
    if which == "file":  # the same sentence as small_file_problem's, in the page's words
        return fewer_fit_rows_todo(n, top, MIN_TEST_ROWS, min_fit=MIN_FIT_ROWS)
    if which == "fit":
        return f"{problem} {more_fit_rows_todo(top, MIN_FIT_ROWS, MIN_TEST_ROWS)}"
    if n_te is not None and n_re <= top:
        return f"{problem} {more_test_rows_todo(MIN_TEST_ROWS)}"
    return f"{problem} {fewer_fit_rows_todo(n, top, MIN_TEST_ROWS, min_fit=MIN_FIT_ROWS)}"


def ship_small_file_warning(n: int, min_fit: int, min_rows: int, in_sample: bool = True) -> str:
    """Fit & apply (page and report) on a file below the size the other pages need for a measured result;
    ``in_sample``: nothing held out (else a few rows held out, the fit on fewer than ``min_fit``)."""
    size = (f"This file has {n:,} rows, fewer than the {min_fit + min_rows:,} the other pages need to measure a "
            f"recalibrator: {min_fit:,} rows to fit it on and {min_rows:,} other rows to test it on. On fewer test rows, "
            f"Theorem 1's bound on the test ECE's error is above 1, so it says nothing. On fewer fitting rows, "
            f"recalibrators were mostly noise in simulations. ")
    if in_sample:
        what = ("So this recalibrator is unmeasured: the numbers below come from the rows it was fitted on and do "
                "not say whether it helps on new data, and a fit on so few rows may have learned only noise. ")
    else:
        what = (f"So this recalibrator was fitted on fewer than {min_fit:,} rows and may have learned only noise; "
                "the check below measures that fit on the held-out rows. ")
    return (size + what + f"You can still download it; measure it on at least {min_rows:,} new labelled rows "
            "(apply it below) before relying on it.")


def more_test_rows_todo(min_rows: int) -> str:
    """What to do when the Compare page's own number of test rows per fold is below ``min_rows``."""
    return f"Set “Test rows per fold” to at least {min_rows:,}, or to 0 to test on every row not used to fit."


def gen_too_small_todo(n: int, min_rows: int) -> str:
    """What to do when the Generalization page's n_re (= its test subset) is below ``min_rows``."""
    if n < 2 * min_rows:
        return (f"The study needs two disjoint sets of at least {min_rows:,} rows each ({2 * min_rows:,} rows); "
                f"this file has {n:,}. Load a larger file.")
    return (f"Raise n_re to at least {min_rows:,}: the gap is measured on a test subset of n_re rows "
            f"(at most {n // 2:,} here, as 2·n_re ≤ n).")


def holdout_todo(n: int, min_rows: int, min_percent: int | None) -> str:
    """What to do when the Fit & apply page holds out fewer than ``min_rows`` rows: hold out at least
    ``min_percent`` % (None: no share up to 50 % is enough), or nothing."""
    fit_all = "or 0 % to fit on every row (it is then measured on the rows it was fitted on)."
    if min_percent is None:
        return (f"This file has {n:,} rows, too few to hold out {min_rows:,} and still fit on the rest: set the "
                f"share held out to 0 % to fit on every row (it is then measured on the rows it was fitted on).")
    return f"Hold out at least {min_percent} % ({min_rows:,} of the {n:,} rows) to check it, {fit_all}"


def apply_too_small(name: str, n: int, min_rows: int) -> str:
    """The Fit & apply page's refusal to measure a saved recalibrator on a file of fewer than ``min_rows`` rows."""
    return (f"Checking a recalibrator needs at least {min_rows:,} labelled rows (below that, Theorem 1's bound on "
            f"the ECE's error is above 1, so the ECE says nothing); {name} has {n:,}. Check it on a "
            "larger file of the same model's predictions; `pbr-calib apply` recalibrates any file without "
            "measuring it.")

SEED_HELP = "Which random split into recalibration and test rows. The same seed gives the same split on every page."
MAX_ITER_HELP = "Upper limit on the optimiser's iterations per fit (it usually stops earlier, on tolerance)."
GEN_BATCHED_HELP = (
    "Fit every α and fold at once, as one batch on the GPU, instead of one after another. Much faster "
    "(the paper's 80 fits of a CIFAR-100 network: about 16 s on an H200 instead of about 2.5 minutes), "
    "but with the Adam optimiser instead of the default L-BFGS, so the fits differ slightly from the "
    "page's usual ones."
)
DEVICE_HELP = (
    "GP fits run on a CUDA GPU when PyTorch sees one, else on the CPU. Only one GP fit runs at a time "
    "on this server; a second one waits in line."
)
KL_HELP = (
    "KL(ρ‖π): how far the fitted posterior moved from the prior. It is the data-dependent part of the "
    "paper's bounds: the smaller, the more the recalibration-set ECE can be trusted on new data."
)
FIT_INFO_HELP = "What the optimiser did: iterations, wall time and the device it ran on."


def kl_card(kl: float) -> str:
    """The KL for the PBR page's metric card, short enough for its width: 4 significant digits, and
    from 10^4 on whole numbers with thousands separators ("1,571,217", not "1.571e+06", which the
    card cut to "1.571e…": CIFAR-10 ResNet-110, alpha = 0, 100 rows)."""
    return f"{kl:,.0f}" if 1e4 <= abs(kl) < 1e7 else f"{kl:.4g}"


def _extreme_kl_why(alphas: "Iterable[float]") -> str:
    """Why the flagged fits' α let their KL grow: no KL term at α = 0; a cheap one at a small α > 0
    (audit 13: "α = 0.01, fold 3: KL = 211.3" was explained by "At α = 0 the objective has no KL term")."""
    alphas = sorted(set(float(a) for a in alphas))
    zero = ("At α = 0 the objective has no KL term, so nothing holds the posterior near its prior and the "
            "optimiser can move it arbitrarily far")
    small = [a for a in alphas if a > 0]
    if not small:
        return zero
    which = ", ".join(f"{a:g}" for a in small)
    cheap = (f"At α = {which} the KL enters the objective only as α·KL/n_re, so a small α makes each nat of KL "
             "cheap: the optimiser moves the posterior far from its prior for a small gain in fitting the "
             "recalibration rows")
    return f"{zero}; {cheap[0].lower() + cheap[1:]}" if 0.0 in alphas else cheap


def extreme_kl_note(kls: "Iterable[float]", where: "Iterable[str]", n_re: int, n_classes: int, limit: float,
                    alphas: "Iterable[float]" = (0.0,)) -> str:
    """Why some fits' KL is extreme (``pbr_core.experiments.extreme_kl``: above n_re·ln K nats) and
    what the page does with them; ``where`` names each fit ("α = 0, fold 2"), ``alphas`` their α
    (the explanation is that of the α values flagged)."""
    kls, where = list(kls), list(where)
    fits = "; ".join(f"{w}: KL = {kl_card(k)}" for w, k in zip(where[:5], kls[:5])) + (" …" if len(kls) > 5 else "")
    one = len(kls) == 1
    return (f"{'One fit has' if one else f'{len(kls)} fits have'} an extreme KL ({fits}), above n_re·ln K = "
            f"{n_re:,}·ln {max(n_classes, 2)} = {limit:,.0f} nats, more information than the labels of the "
            f"{n_re:,} recalibration rows can carry. {_extreme_kl_why(alphas)}: such a KL measures that "
            "drift, not what was learned, and its Corollary 1 bound says nothing. "
            f"{'It is' if one else 'They are'} marked ✕ on the chart (KL on a log scale) and left out of the mean "
            "KL and mean bound below; the ECE gap is measured as for any fit.")


def extreme_kl_fit_note(kl: float, n_re: int, n_classes: int, limit: float, alpha: float | None) -> str:
    """The PBR page's note on one fit whose KL is extreme (above n_re·ln K nats)."""
    why = ("At α = 0 the objective has no KL term, so nothing holds the posterior near its prior"
           if alpha == 0 else "The KL term's weight α was too small to hold the posterior near its prior")
    return (f"Extreme KL: {kl_card(kl)} nats, above n_re·ln K = {n_re:,}·ln {max(n_classes, 2)} = {limit:,.0f}, "
            f"more information than the labels of the recalibration rows can carry. {why}: the KL measures how "
            "far the optimiser moved it, not what was learned, and the bounds below say nothing. A larger α "
            "keeps the fit near the prior.")


def at_prior_note(at_prior: bool | None, alpha: float | None, n_re: int,
                  cv_grid: Sequence[float] | None = None) -> str | None:
    """What a fit that ended at the prior means for the user, or None for any other fit.

    ``at_prior`` is the fit's own record (``pbr_core.experiments.ended_at_prior``), not a KL
    threshold: a fit at the prior can keep a KL of a few hundredths. ``cv_grid``: the α values that
    cross-validation scored when it chose ``alpha`` (None: α set by hand).
    """
    if not at_prior:
        return None
    what = "The fit ended at the prior: the recalibrated predictions are (nearly) the uncalibrated ones. "
    if cv_grid is not None and alpha is not None:
        return what + _at_prior_by_cv(alpha, n_re, cv_grid)
    return what + _at_prior_advice(alpha, n_re)


def _at_prior_by_cv(alpha: float, n_re: int, grid: Sequence[float]) -> str:
    """A fit at its prior at an α that cross-validation chose: the choice itself preferred no change, so
    "a smaller α" would be advice against it (audit 14, C). The selection takes the lowest mean held-out
    score, ties to the larger α (``pbr_core.alpha_selection.select_alpha_of``): no smaller α of its grid
    scored better."""
    smaller = [a for a in grid if a < alpha]
    if not smaller:  # the smallest α of the grid: a smaller one was never scored
        return (f"Cross-validation chose α = {alpha:g}, the smallest of its grid, and even at it no change was worth "
                f"its KL price on {n_re:,} recalibration rows. More recalibration rows let the GP move away from the "
                "prior.")
    return (f"Cross-validation chose α = {alpha:g}, and with it a fit at its prior: on these {n_re:,} recalibration "
            "rows the smaller α values, which let the GP move further from the prior, did not score better on the "
            "held-out folds. Within what its folds can measure, it preferred leaving the predictions as they are "
            "to the changes the smaller α values make; lowering α by hand would go against that choice. More "
            "recalibration rows can show a change if there is one.")


def alpha_scores_help(cv_score: str, n_re: int, folds: int, n_te: int) -> str:
    """The caption under the automatic choice of α; for the ECE, why its values are larger than the test
    ECE at the top of the page (audit 14, C: 0.05-0.075 beside a test ECE of 0.0151): each fold's ECE is
    measured on its n_re / k held-out rows (``pbr_core.alpha_selection._HeldOut``, B = floor(n_val^(1/3))),
    and an ECE on fewer rows per bin is biased upward (each bin's |observed − predicted| takes its noise
    as a gap, E|x̄ − p| ≥ |E x̄ − p|)."""
    from pbr_core.bounds import optimal_n_bins

    if cv_score != "ece":
        return ALPHA_SCORES_HELP
    n_val = n_re // folds
    return (ALPHA_SCORES_HELP + f" Each fold's ECE is measured on its about {n_val:,} held-out rows "
            f"(B = {optimal_n_bins(n_val)} bins), not on the {n_te:,} test rows (B = {optimal_n_bins(n_te)}) of the "
            "test ECE above: on fewer rows per bin the ECE is biased upward, as each bin's noise counts as a gap, so "
            "these values are larger than the test ECE; they serve to compare the α values with one another.")


def _at_prior_advice(alpha: float | None, n_re: int) -> str:
    if alpha is None:
        return (f"GP calibration found no change worth its KL price on {n_re:,} recalibration rows; more "
                "recalibration rows (n_re) let the GP move away from the prior.")
    return (f"With α = {alpha:g} and n_re = {n_re:,} rows, no change was worth its KL price (α·KL/n_re). "
            "A smaller α or more recalibration rows let the GP move away from the prior.")


def worse_on_test_note(before: float, after: float, ece_re: float, alpha: float | None, n_re: int, n_te: int,
                       at_prior: bool | None, worse_shown: bool | None) -> str | None:
    """What a fit whose test ECE is above the uncalibrated model's means, or None for any other fit
    (and for a fit that ended at the prior, which :func:`at_prior_note` explains).

    ``worse_shown`` is the library's rule (:func:`pbr_core.evaluation.ece_rise_shown`, carried by the
    run as ``worse_shown``): only then does the note say the fit is worse calibrated. Otherwise it says
    that the rise is within the noise of two ECEs on ``n_te`` rows: "after > before" alone called a
    fit worse in 42 % of simulated files of 150 test rows where it was in truth better calibrated
    (tests/test_claims_small_n.py).

    The case that matters: at alpha near 0 the KL term hardly restrains the fit, and the paper's
    objective can fit the recalibration rows more closely than new data reward (CIFAR-10 ResNet-50 at
    alpha = 0, 1,000 rows: test ECE .0393 against .0188 uncalibrated; benchmarks/RESULTS_fast_pbr.md,
    round 10)."""
    if at_prior or not after > before:
        return None
    if not worse_shown:
        return _change_within_noise("higher", before, after, n_te)
    text = (f"**On the test rows this fit is worse calibrated than no recalibration**: ECE {after:.4f} against "
            f"{before:.4f} before, more than the ECE's noise on {n_te:,} test rows explains. ")
    if ece_re < before:
        text += (f"On the {n_re:,} rows it was fitted on, its ECE is {ece_re:.4f}: it follows those rows more "
                 "closely than new data reward. ")
    if alpha is None:
        text += "More recalibration rows, or another method (the Compare page), may do better."
    elif alpha < 0.1:
        text += (f"With α = {alpha:g} the KL term hardly holds the fit back. A larger α, more recalibration rows, "
                 "or “Choose α automatically” (cross-validation) guard against this.")
    else:
        text += "More recalibration rows, or “Choose α automatically” (cross-validation), may do better."
    return text


def ece_fall_note(before: float, after: float, n_te: int, at_prior: bool | None, better_shown: bool | None) -> str | None:
    """What a fit whose test ECE is below the uncalibrated model's means, or None for any other fit
    (and for a fit that ended at the prior, which :func:`at_prior_note` explains): the mirror of
    :func:`worse_on_test_note`, by the same rule (:func:`pbr_core.evaluation.ece_change_shown`, the
    run's ``better_shown``). Audit 13: "Test ECE after 0.0106 (−0.0045), before 0.0151" read as a
    gain while only a rise was checked against the ECEs' noise; a recalibration no better in truth
    has the lower ECE about half the time."""
    if at_prior or not after < before:
        return None
    if better_shown:
        return (f"The test ECE is lower after this fit than without it ({after:.4f} against {before:.4f}), by more "
                f"than the two ECEs' own noise on {n_te:,} test rows: on these rows the fit is better calibrated "
                "than no recalibration.")
    return _change_within_noise("lower", before, after, n_te)


def _change_within_noise(direction: str, before: float, after: float, n_te: int) -> str:
    """A change of the test ECE (``direction``: "higher" or "lower") within the two ECEs' noise: the same
    words both ways (:func:`worse_on_test_note`, :func:`ece_fall_note`)."""
    return (f"The test ECE is {direction} after this fit than without it ({after:.4f} against {before:.4f}), by less "
            f"than the two ECEs' own noise on {n_te:,} test rows: these rows cannot tell whether the fit is better or "
            "worse than no recalibration. More test rows (a larger file) would tell them apart.")


def _numbers(values: list[int]) -> str:
    return ", ".join(str(v) for v in values[:-1]) + (" and " if len(values) > 1 else "") + str(values[-1])


def at_prior_folds_note(method_label: str, folds: list[int], n_folds: int, alpha: float | None, n_re: int) -> str:
    """Compare page: ``method_label`` ended at its prior in ``folds`` (numbered from 1) of ``n_folds``."""
    which = f"fold{'s' if len(folds) > 1 else ''} {_numbers(folds)} of {n_folds}"
    return (f"**{method_label} ended at its prior in {which}**: in "
            f"{'those folds' if len(folds) > 1 else 'that fold'} it did not recalibrate at all. Its predictions "
            "there are the uncalibrated ones, so the mean ± std above mixes uncalibrated folds with recalibrated "
            "ones (the column *Folds at the prior* counts them; *Every fold* marks them). "
            + _at_prior_advice(alpha, n_re))


def at_prior_sweep_note(method_label: str, where: dict[int, list[int]], n_folds: int, alpha: float | None) -> str:
    """n_re sweep: ``where`` maps each n_re to the folds (from 1) in which ``method_label`` ended at its prior."""
    parts = [f"n_re = {n:,} (fold{'s' if len(f) > 1 else ''} {_numbers(f)} of {n_folds})" for n, f in sorted(where.items())]
    tip = ("A smaller α (α of PBR above) or more recalibration rows let the GP move away from the prior."
           if alpha is not None else "More recalibration rows let the GP move away from the prior.")
    return (f"**{method_label} ended at its prior at {'; '.join(parts)}**: there it did not recalibrate at all, "
            "so its point on the curve is (partly) the uncalibrated model's ECE"
            + (f" (α = {alpha:g})" if alpha is not None else "") + ". " + tip)


RELIABILITY_PAIR_CAPTION = (
    "Both diagrams use the same test rows (never seen by the fit) and B = floor(n_te^(1/3)) bins. "
    "Blue bars closer to the diagonal and smaller red and orange boxes mean better calibration."
)
ALPHA_SCORES_HELP = (
    "The cross-validated score of each α (mean over the k folds, whisker ± one std). Lower is better; "
    "the circled α was used for the final fit on the whole recalibration set."
)
BOUNDS_INTRO = (
    "The paper's PAC-Bayes bounds (Corollaries 1 and 2) use the fitted KL to say how far the ECE measured "
    "on the recalibration set can be from the truth. They are about the **fitted posterior**, a "
    "distribution over recalibration maps: each bounds an **average over maps drawn from it**, not the "
    "one recalibrated model you download (the mean of 100 draws, or softmax of the mean with the mean "
    "approximation). They hold with probability 1 − ε over the draw of the recalibration set, for any "
    "L-Lipschitz calibration curve (L below), with λ chosen validly from a fixed grid of candidates (a "
    "union bound over the grid, so choosing the best λ costs a little), and only for a prior chosen "
    "without looking at the rows the bound is computed on (see the label above the bounds)."
)
BOUND_VALIDITY_WORDS = {
    "split": ("**Valid as stated.** The prior (the GP's kernel settings and inducing points) was chosen on "
              "{n_prior:,} recalibration rows, the posterior fitted and the bounds computed on the other "
              "{n_bound:,}. The price: the bounds use n = {n_bound:,} instead of {n_rows:,} rows."),
    "same_rows": ("**Approximate: prior fitted on the same rows.** As in the paper's experiments, the prior's "
                  "kernel settings and inducing points were fitted on the same {n_bound:,} rows as the "
                  "posterior, while the corollaries assume a prior chosen independently of them; the values "
                  "below are what the formulas give, not a guarantee. For a bound that holds as stated, "
                  "choose the prior on separate rows (Bound and fit settings)."),
}


def bound_validity(prior: str, n_bound: int, n_rows: int) -> str:
    """Which of the two kinds of bound a page shows ('valid as stated' or 'approximate')."""
    return BOUND_VALIDITY_WORDS["split" if prior == "split" else "same_rows"].format(
        n_prior=n_rows - n_bound, n_bound=n_bound, n_rows=n_rows)


PBR_TOTAL_BOUND_NOTE = (
    "PBR total adds the cross-entropy to its objective, and the cross-entropy is unbounded, while the "
    "paper's bounds assume a loss between 0 and 1. The values shown here are Corollaries 1 and 2, which "
    "involve only the ECE, the KL and n: they cover the ECE of this fit's posterior as they would any "
    "posterior. They say nothing about the cross-entropy or the accuracy on new data; the paper's bound "
    "that combines accuracy and calibration (its Corollary in Appendix E) needs a loss in [0, 1] and is "
    "not reported for this objective."
)
PRIOR_SPLIT_HELP = (
    "Corollaries 1 and 2 need a prior chosen independently of the rows the bound is computed on. Off (the "
    "paper's experiments): the prior's kernel settings and inducing points are fitted on the same rows, "
    "so the bounds are approximate. On: this share of the recalibration rows chooses the prior (a full "
    "fit there), the posterior is fitted from that fixed prior on the other rows and the bounds use only "
    "those: valid as stated, at the price of fewer rows in the bound and in the fit."
)
L_RECAL_HELP = (
    "L: how fast the true accuracy can change with the recalibrated confidence (Assumption of "
    "Corollary 2). 1 is a safe default."
)


def corollary1_reading(bound: float, n_re: int, eps: float, ece_re: float) -> str:
    """Plain-language reading of Corollary 1 (the ECE generalisation gap, averaged over the posterior)."""
    if bound >= 1.0:
        return (f"**Vacuous here ({bound:.3f} ≥ 1).** An ECE lies between 0 and 1, so a bound of 1 or more "
                f"says nothing. The bound shrinks with a smaller KL (a larger α) and a larger n_re.")
    return (f"With probability {1 - eps:.0%}: for recalibration maps drawn from the fitted posterior, the "
            f"ECE expected on **fresh data of the same size** (n = {n_re:,}) differs from the ECE on the "
            f"recalibration rows by at most **{bound:.4f} on average over the draws**. (The ECE on the "
            f"recalibration rows of the model you download is {ece_re:.4f}; the bound is not about that "
            f"one model.)")


COROLLARY2_RANGE_MEANING = (
    "This is a worst-case guarantee computed from the recalibration rows and the KL alone, not an "
    "estimate, and it is about maps drawn from the posterior, so it is wide and it is not a range for "
    "the downloaded model's calibration error: for that, read the test ECE at the top of this page, "
    "measured on rows the fit never saw."
)


def corollary2_reading(bound: float, eps: float, ece_re: float) -> str:
    """Plain-language reading of Corollary 2: E over the posterior of |TCE − recalibration-set ECE|."""
    if bound >= 1.0:
        return (f"**Vacuous here ({bound:.3f} ≥ 1).** The true calibration error lies between 0 and 1 "
                "anyway. It needs a smaller KL or more recalibration rows to say something.")
    return (f"With probability {1 - eps:.0%}: for recalibration maps drawn from the fitted posterior, the "
            f"distance between a map's **true calibration error (TCE)** and its ECE on the recalibration "
            f"rows is at most **{bound:.4f} on average over the draws**. It is not a range for the TCE of "
            f"the one recalibrated model you download (recalibration-set ECE {ece_re:.4f}).")


# --------------------------------------------------------------------------- Compare page
COMPARE_TITLE = "Compare recalibrators"
COMPARE_INTRO = (
    "Which recalibrator suits this model? The paper's protocol (Section 6.2): split the rows at random "
    "into a **recalibration set** (to fit on) and a **test set** (to score on), fit every method on the "
    "same split, repeat over several folds and report the mean ± std of the test metrics."
)
CHOOSE_A_METHOD = "Choose at least one method."
NO_FIT_FINISHED = "No fit finished."
SUMMARY_TITLE = "**Test metrics, mean ± std over folds**"
PAIRED_TITLE = "**Is the difference real? Paired tests over folds**"
PAIRED_TWO_METHODS = "Paired tests need at least two methods."
PAIRED_SAME_METHOD = "Choose two different methods to compare them."
PAIRED_DEFAULT_PAIRS = "Each method against the uncalibrated model and against the best mean:"


def compare_plan(n_folds: int, fits: int, n_gp: int, device: str, n_re: int, n: int, n_te: int | None) -> str:
    """What a comparison will fit: fits in all (GP fits and where they run), each fold's rows."""
    return (f"{n_folds * fits} fits in all" + (f", of which {n_folds * n_gp} GP fits (on {device})" if n_gp else "")
            + f"; each fold fits on {n_re:,} rows and tests on "
            + (f"the other {n - n_re:,}." if n_te is None else f"{n_te:,} of the other {n - n_re:,}."))


def compare_rows_too_many(n_re: int, n_te: int, n: int) -> str:
    """The recalibration and test rows asked for are more than the file has."""
    return (f"{n_re:,} recalibration rows and {n_te:,} test rows need {n_re + n_te:,} rows, "
            f"but the file has {n:,}. Lower one of them (0 test rows = all the others).")


def compare_job_label(n_methods: int, n_folds: int, n_re: int) -> str:
    return f"comparison of {n_methods} methods × {n_folds} folds (n_re = {n_re:,})"


def failed_fits(failed: Iterable[tuple[str, int, str]], multiclass: bool) -> str:
    """The fits that failed, ``(method, fold, error)`` each (fold from 0), left out of the means."""
    return "Some fits failed and are left out of the means: " + "; ".join(
        f"{method_label(m, multiclass)} fold {fold + 1}: {md(error)}" for m, fold, error in failed)


def compare_summary_caption(n_folds: int, n_te: int, n_bins: int, binary_ece: str | None, best_note: str) -> str:
    """Under the summary table: folds, test rows, B, which ECE (binary data: ``binary_ece``), the best note."""
    return (f"{n_folds} folds · {n_te:,} test rows per fold · ECE with B = {n_bins} bins"
            + (f" · {binary_ece_caption(binary_ece)}" if binary_ece is not None else ".") + " " + best_note)


COMPARE_METHODS_HELP = (
    "Recalibrators to compare. Every method is fitted on the same recalibration rows of each fold and "
    "scored on the same test rows. GP-based methods (GP calibration, PBR) take minutes; the others "
    "seconds. On multiclass data a method that maps one probability (Platt, beta) runs one-vs-all; "
    "isotonic regression, histogram binning, BBQ and Venn-Abers map the top label's probability."
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
    "Green: the method with the best mean in that column (lowest, or highest accuracy) when the paired "
    "tests show it better than every other method, by a test that allows for the folds sharing rows (the "
    "t-test for overlapping folds, with the Wilcoxon test agreeing); no green when they do not. KL exists only for GP methods."
)
BEST_SHOWN = (
    "Green: the best mean in its column, shown better than every other method: against each of them, the "
    "paired tests below give a p-value under 0.05 and their rank test agrees (the ? beside the paired "
    "tests' title names the tests). \"Better than every other\" is one claim that needs each of its tests to pass, "
    "so no correction for the number of methods is needed; each row of the table below is a claim of its "
    "own and is corrected, so a row against the green method can still say \"no difference shown\"."
)
NO_BEST_SHOWN = (
    "No cell is green: in no column is the best mean better than every other method's beyond the "
    "fold-to-fold noise (the paired tests below). The lowest mean alone is not a better method."
)
SUMMARY_CSV_HELP = (
    "One row per (method, metric): mean, std, number of folds, and *best*: True only where the paired tests "
    "show the method better than every other one, allowing for the folds sharing rows (as the green cells)."
)
PAIRED_INTRO = (
    "A smaller mean is not yet a better method: the folds differ from each other, and a difference "
    "smaller than that spread can be chance. Every method is scored on the same test rows of each fold, "
    "so each fold gives one difference A − B; the tests ask how surprising these differences would be "
    "if A and B were equally good."
)
PAIRED_INTERVAL_COLUMN = "95% interval"
PAIRED_INTERVAL_MEANING = (
    "the range of the mean difference A − B that the folds support, from the same t-test for overlapping "
    "folds (mean ± t · sd · √(1/F + n_te/n_re)), widened for the number of pairs compared so that all the "
    "table's intervals hold together with 95% confidence. An interval that leaves out 0 always comes with "
    "*p-value* below 0.05; a verdict can stand with its interval just reaching 0, since the correction "
    "behind *p-value* is a little less strict than this widening for all but the clearest pair. Without "
    "the fold sizes (a table from elsewhere) it is the plain t interval, which treats the folds as "
    "independent and is too narrow."
)
PAIRED_HELP = (
    "**Which test decides** (column *p-value*). What this is for: a method is called better than another "
    "only when a test that allows for the folds sharing rows says so; the tests behind that are named here "
    "for readers who want to check them. The folds are random splits of the same file, so "
    "they share rows, and a fold that favours A makes the others lean the same way. Tests that treat "
    "the folds as independent come out far too sure of themselves: between two equally good methods the "
    "plain t-test and the Wilcoxon test both said \"better\" in about half of simulated files. So the "
    "verdict uses the **t-test for overlapping folds** (Nadeau & Bengio, 2003: variance factor "
    "1/F + n_te/n_re instead of 1/F), and, because every row of the table is a separate claim, its "
    "p-value is raised for the number of pairs compared (Holm's correction; over every pair of the "
    "methods for the default table, since its \"best mean\" was picked from these results). A method "
    "is called better when that p is below 0.05 and the Wilcoxon test agrees (p below 0.05): then equally "
    "good methods are called different in at most about 5 % of files. "
    "The other columns are for reading, not deciding: *p-value, this pair alone* is the same test "
    "for this pair alone, before the correction; *p-value, folds as independent* is the **paired t-test**, "
    "which assumes independent, roughly normal fold differences; *p-value, rank test* is the **Wilcoxon "
    "signed-rank test**, which assumes independent "
    "differences symmetric about their median, no normality, and with F folds its smallest possible p is "
    "2/2^F (0.002 for 10 folds, 0.0625 for 5). "
    f"*{PAIRED_INTERVAL_COLUMN}*: {PAIRED_INTERVAL_MEANING}"
)
PAIRED_PICK_HELP = "Choose two methods of this comparison to test against each other, fold by fold."


def paired_pick_caption(n_methods: int, n_pairs: int) -> str:
    """Under the pair picker's row: which correction its *p-value* has (the default table's)."""
    return (f"*p-value* and the verdict of the pair you pick are corrected for all {n_pairs} pair"
            f"{'s' if n_pairs != 1 else ''} of the {n_methods} methods with results, as in "
            "the table below: the pair is picked after seeing the results, and tested alone it would look more "
            "certain than it is. A pair in both tables has the same verdict in both.")
#: The paired-test table's p-value columns (dashboard.tables.paired_frame) and what each one is.
#: Plain names in the header (a user audit: "p: t-test for overlapping folds" is jargon to most readers,
#: and cut off at 1,400 px); the tests' names are in each column's help.
PAIRED_P_COLUMNS = {
    "p-value": ("the p-value the verdict uses: the t-test for overlapping folds (Nadeau & Bengio, 2003), which "
                "allows for the folds sharing rows, raised for the number of pairs compared (Holm's correction: "
                "every row is a separate claim). Below 0.05, with the rank test (Wilcoxon) agreeing: a method is "
                "called better"),
    "p-value, this pair alone": ("the same t-test for overlapping folds (Nadeau & Bengio), for this pair alone, "
                                 "before the correction for several pairs"),
    "p-value, folds as independent": ("the plain paired t-test over the folds; it treats them as independent, so "
                                      "it is too sure here"),
    "p-value, rank test": ("the Wilcoxon signed-rank test over the folds (no normality assumed, but independent "
                           "folds); it must also be below 0.05 for a verdict"),
}


def paired_verdict(better: str | None, decisive_p: float, wilcoxon_p: float, independent: bool = False,
                   infinite: tuple[str, int, str, int, int] | None = None) -> str:
    """The verdict cell of a paired-test row: the better method's name, or why none is named.

    ``independent``: the table had no fold sizes, so the verdict treated the folds as independent.
    ``infinite``: (A, its folds with an infinite NLL, B, its, folds paired) where either count is above 0
    (:func:`infinite_nll_verdict`).
    """
    from pbr_core.experiments import verdict_kind

    if infinite is not None and (infinite[1] or infinite[3]):
        return infinite_nll_verdict(*infinite)
    text = {"better": f"{better} better", "wilcoxon_disagrees": "no difference shown (the Wilcoxon test does not agree)",
            "no_difference": "no difference shown"}[verdict_kind(better, decisive_p, wilcoxon_p)]
    return text + (" (folds assumed independent)" if independent else "")


def infinite_nll_verdict(a: str, a_folds: int, b: str, b_folds: int, folds: int) -> str:
    """:func:`pbr_core.experiments.infinite_nll_verdict`: the CLI's words too."""
    from pbr_core.experiments import infinite_nll_verdict as words

    return words(a, a_folds, b, b_folds, folds)
P_VALUE_MEANING = (
    "p-value: how often a difference at least this large would come up by chance if A and B were equally good. "
    "Below 0.05: unlikely to be chance."
)


def p_value(p: float | None, at_most: bool = False) -> str:
    """A p-value as every page, table and report writes it (:func:`pbr_core.significance.format_p`, the
    CLI's format too: two significant digits cut from 0.001 to 0.99, "< 0.001" below 0.001, "> 0.99" above 0.99), "–" when there is
    none.

    Examples
    --------
    >>> [p_value(v) for v in (0.04912, 0.0004, 4.69e-7, 1.0, float("nan"), None)]
    ['0.049', '< 0.001', '< 0.001', '> 0.99', '–', '–']
    """
    from pbr_core.significance import format_p

    return "–" if p is None or p != p else format_p(p, at_most)


#: The sidebar's choice of ECE on binary data (``pbr_core.metrics.BINARY_TARGET``'s values), as it names them.
BINARY_TARGET_LABELS: dict[str, str] = {
    "positive": "p(y=1): binary calibration",
    "top_label": "Top-label confidence",
}


def binary_ece_caption(binary_ece: str) -> str:
    """Which ECE a recalibration page measures on binary data: the app's one choice (the sidebar)."""
    if binary_ece == "positive":
        return ("ECE of p(y=1) (the paper's binary ECE, Appendix A), with the Brier score and NLL of p(y=1), "
                "as on every page; the sidebar's “Measure calibration of” changes it for the whole app. "
                "(The paper's tables use the top-label ECE.)")
    return ("Top-label ECE (confidence of the predicted class), as in the paper's tables, which use it for "
            "binary data too; the sidebar's “Measure calibration of” changes it for the whole app.")


BINARY_TARGET_HELP = (
    "Binary data: calibrate p(y=1) itself (the paper's binary setting, Appendix A) or the confidence of "
    "whichever class is predicted (top-label). One choice for the whole app: every page, the recalibration "
    "pages' test ECE and the report measure what is chosen here."
)

GRID_CAPTION = (
    "One reliability diagram per method on fold 1's test rows (the same rows for every method). "
    "The panel title gives that fold's test ECE."
)
def _sparse_bins_words() -> str:
    """What the hollow circles of an overlaid reliability chart are (plot.diagrams.MIN_CURVE_BIN_ROWS)."""
    from pbr_core.plot.diagrams import MIN_CURVE_BIN_ROWS as m

    return (f"A bin of fewer than {m} rows is a hollow circle, not joined to its curve: with so few rows its "
            f"observed rate can lie almost anywhere (its 95% interval, the whisker on the Reliability page's "
            f"bars, spans a third of the axis or more); it still counts in the ECE.")


OVERLAY_CAPTION = (
    "Every method's reliability curve on one chart: each point is a bin (its mean confidence and its "
    "accuracy). The closer a curve runs to the dashed diagonal, the better calibrated the method. "
    + _sparse_bins_words()
)
COMPARE_FOLDS_CAPTION = (
    "Each method's test ECE on every fold (a dot per fold) and its mean ± one standard deviation over the "
    "folds (the diamond and its whiskers). Dots of two methods that overlap fold after fold are not told "
    "apart by these folds; the paired tests say whether one is better."
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
SWEEP_TITLE = "How much recalibration data is needed? (n_re sweep)"
SWEEP_FOLDS_HELP = "Random splits per n_re (fewer than the comparison: the sweep fits every method for every n_re)."


def sweep_below_fit_rows(values: Iterable[int], min_fit: int, min_test: int) -> str | None:
    """Under the sweep's values and its chart, when some n_re is below what the comparison fits on (audit
    14 D: 10, 50 and 100 ran and were drawn by default while Compare refuses a split with fewer than 144
    rows to fit on, with no word): why they are there and that they are no advice. None when none is."""
    small = sorted(int(v) for v in values if int(v) < min_fit)
    if not small:
        return None
    named = (", ".join(f"{v:,}" for v in small[:-1]) + " and " if len(small) > 1 else "") + f"{small[-1]:,}"
    return (f"n_re = {named} {'are' if len(small) > 1 else 'is'} below the {min_fit:,} rows the comparison above "
            f"needs to fit on: {'they are' if len(small) > 1 else 'it is'} here to show what so few recalibration "
            f"rows do, measured on the same test rows (at least {min_test:,}) as the larger values. "
            f"{'They are' if len(small) > 1 else 'It is'} not a recommended n_re.")


def sweep_plan(labels: Iterable[str], fits: int) -> str:
    """Under the sweep's controls: the methods (those of the comparison, by their labels) and the fits."""
    return f"Methods: those chosen above ({', '.join(labels) or 'none'}); {fits} fits."


def sweep_job_label(n_sizes: int, n_methods: int) -> str:
    return f"n_re sweep ({n_sizes} sizes × {n_methods} methods)"



GEN_INTRO = (
    "Does the KL term of the bound explain how well the recalibration-set ECE carries over to new data? "
    "For each α, PBR is fitted on n_re rows and the **ECE gap** |ECE(test rows) − ECE(recalibration "
    "rows)| is measured on a disjoint test subset of the same size, with B = floor(n_re^(1/3)) bins on "
    "both sides (paper Section 6.1, Figure 2). Corollary 1 bounds the gap, averaged over maps drawn from "
    "the fitted posterior, by a function of the KL, so the two should rise together. Its bound column "
    "is approximate here: the prior is fitted on the same rows (as in the paper's experiments)."
)
GEN_BOUND_CAPTION = (
    "Bound column: Corollary 1, approximate: prior fitted on the same rows (the GP's kernel settings and "
    "inducing points are fitted on each fold's recalibration rows, as in the paper's Figure 2). It bounds "
    "the gap averaged over maps drawn from each fit's posterior. For a bound valid as stated, use the PBR "
    "page's separate prior rows."
)
ALPHAS_HELP = "The KL weights to try (the paper's grid). Each α is fitted once per fold."
GEN_N_RE_HELP = (
    "Size of the recalibration set and of the disjoint test subset (the gap compares equal sizes, as "
    "Corollary 1 assumes). Needs 2·n_re ≤ n, and at least 144 rows (below that a test ECE says nothing). "
    "Keep it at most n / 4 (the default): above that the folds re-split mostly the same rows, and whether "
    "the KL goes with the gap is not read."
)
EPS_RECAL_HELP = "ε: the bounds hold with probability at least 1 − ε over the draw of the recalibration set."
#: The Generalization page's four numbers on "does the KL go with the gap" (pbr_core.experiments.fold_kendall).
#: Plain words on the cards and rows (a user audit: "Kendall τ within folds (mean)", "p-value (Wilcoxon, over
#: folds)" are jargon to most readers); each card's help names the statistic and the test.
FOLD_METRICS = ("Agreement of KL and gap", "Folds agreeing", "p-value (size of agreement)",
                "p-value (folds agreeing)")
FOLD_TAU_ROW = "Agreement of KL and gap, fold {fold}"
FOLDS_NEGATIVE = "Folds disagreeing"
FOLD_TAU_HELP = (
    "Agreement of KL and gap: Kendall's τ within one fold, over that fold's fits (one per α, all on the same "
    "rows): the share of pairs of fits ordered the same way by KL and by gap, minus the share ordered "
    "oppositely; +1 when a larger KL always comes with a larger gap, 0 when the order is unrelated. Shown: "
    "the mean over the folds."
)
FOLDS_POSITIVE_HELP = (
    "How many folds agree: a larger KL goes with a larger gap (Kendall's τ above 0; the rest disagree, τ "
    "below 0, or are exactly 0). If KL and gap were unrelated, each "
    "fold would be as likely to fall on either side."
)
FOLD_WILCOXON_HELP = (
    "Wilcoxon signed-rank test of the folds' τ against 0: how often τs this far to one side would come up by "
    "chance if KL and gap were unrelated. The folds are the units, not the fits: the fits of one fold share "
    "its rows and so its noise, and counting them one by one would make the p-value far too small."
)
FOLD_SIGN_HELP = (
    "Sign test: the chance that this many folds, or more, fall on one side of 0 if each were a coin toss. "
    "With F folds it cannot go below 2 / 2^F: 3 folds can never show a relation at 5%, 6 only when all agree."
)
KL_GAP_EXTREME_TRACE = "Extreme KL (drifted from the prior; left out of the means)"
def kl_gap_caption(n_re: int, eps: float) -> str:
    """The KL-gap chart's caption; how noisy one ECE is, by Theorem 1 at the run's own n_re and ε with the
    page's B = floor(n_re^(1/3)) and L = 1 (``pbr_core.bounds.theorem1_bound``). It said "at n_re = 1000
    … of order 0.1" under every run (audit 14, B: a run at n_re = 250), the paper's order of the bound
    (Section 6: 1/n_re^(1/3)), not its value (0.48 at n_re = 1000, ε = 0.05): both are said now."""
    from pbr_core.bounds import optimal_n_bins, theorem1_bound

    n_bins = optimal_n_bins(n_re)
    bound = theorem1_bound(n_re, n_bins, eps=eps)
    figure = (f"is {bound:.2f}" if bound < 1 else "is at least 1, so it says nothing")
    return ("Left: one point per fit (α, fold), colour = α. Right: Corollary 1's bound for each fit (dotted, "
            "log scale) against the measured gaps: a worst-case bound, far above a typical gap (and only "
            "approximate when the prior was fitted on the same rows). Whether the gaps grow with the KL on these "
            "rows is what the fold-by-fold test above answers, not the chart. The ECE gap itself is noisy: at "
            f"this run's n_re = {n_re:,} (B = {n_bins}), Theorem 1's worst-case bound on the error of one ECE "
            f"({1 - eps:.0%}, a curve of Lipschitz constant 1) {figure}. The paper reads its order, "
            f"1/n_re^(1/3) ({n_re ** (-1 / 3):.2f} here; 0.1 at n_re = 1,000), as noise that can hide the relation "
            "when the ECEs are that small.")


#: The fold test's two p-value cards where its verdict is not read (the folds overlap too much).
FOLD_P_NOT_READ = "not read"
FOLD_P_NOT_READ_HELP = ("Not read on this run: the folds share most of their rows (see the sentence below), so this "
                        "p-value would claim a relation too often.")


def fold_test_not_read_before_run(n_re: int, n_rows: int) -> str:
    """Under the Generalization controls, before the run: with n_re above a quarter of the rows
    (``pbr_core.experiments.folds_overlap_too_much``) the fits are measured but the fold test will be
    "Not read"; said before a minute or more of fits (audit 14, B: 81 s on 500 rows, then "Not read")."""
    return (f"With these settings the chart and the tables will show every fit's KL and gap, but the fold test "
            f"cannot give a verdict: n_re = {n_re:,} is more than a quarter of the {n_rows:,} rows, so the folds "
            f"share most of their rows and the test would claim a relation too often. To test it, "
            f"{_fold_overlap_todo(n_rows)}.")


def _fold_overlap_todo(n_rows: int) -> str:
    """What makes the fold test readable: a smaller n_re, or, when a quarter of the rows is below the
    smallest recalibration set, more rows."""
    from pbr_core.experiments import MIN_FIT_ROWS

    top = n_rows // 4
    return (f"choose n_re of at most {top:,} (a quarter of the rows)" if top >= MIN_FIT_ROWS else
            f"load a file of at least {4 * MIN_FIT_ROWS:,} rows, so that n_re can be {MIN_FIT_ROWS} or more "
            "and at most a quarter of the rows")


def correlation_reading(verdict: str, mean_tau: float, positive: int, negative: int, folds: int,
                        smallest_p: float, *, n_re: int | None = None, n_rows: int | None = None) -> str:
    """What the fold-by-fold test of KL against the gap says (``pbr_core.experiments.FoldKendall``):
    its verdict, how many folds carry it, and, when nothing is shown, why that is not "no relation".

    With ``n_re`` and ``n_rows`` (the file's rows) given and n_re above n_rows / 4
    (``pbr_core.experiments.folds_overlap_too_much``), no verdict is read: the folds re-split mostly
    the same rows, and the test claims a relation too often there (8-9 % of null studies at 5 %)."""
    if verdict == "undefined":
        return ("No fold has enough fits to compare their order (at least 3 α values that did not fail, with "
                "different KLs and gaps): choose more α values.")
    from pbr_core.experiments import folds_overlap_too_much

    if n_re is not None and n_rows is not None and folds_overlap_too_much(n_re, n_rows):
        return fold_overlap_reading(positive, negative, folds, mean_tau, n_re, n_rows)
    if verdict == "positive":
        return (f"A larger KL comes with a larger gap in {positive} of {folds} folds (mean agreement {mean_tau:+.2f}): "
                "more than chance explains (both tests below 5%), as Corollary 1 predicts.")
    if verdict == "negative":
        return (f"A larger KL comes with a smaller gap in {negative} of {folds} folds (mean agreement {mean_tau:+.2f}): "
                "more than chance explains (both tests below 5%), the opposite of what Corollary 1 suggests. "
                "Look at the fits: at small α a fit can follow the noise of its rows.")
    if smallest_p >= 0.05:
        return (f"With {folds} folds no test can show a relation at 5% (the smallest possible p-value is "
                f"{smallest_p:.2f}, when every fold agrees): use at least 6 folds, or 10 as the paper does.")
    return (f"No relation shown: a larger KL comes with a larger gap in {positive} of {folds} folds and with a "
            f"smaller one in {negative} (mean agreement {mean_tau:+.2f}), which chance gives often when KL and gap are unrelated. That is not evidence of "
            "no relation: the gap is noisy (the ECE's own estimation error is of its size); more folds or a "
            "larger n_re help.")


def fold_overlap_reading(positive: int, negative: int, folds: int, mean_tau: float, n_re: int, n_rows: int) -> str:
    """The fold test's reading when n_re is above a quarter of the file's rows: no verdict, why, what to do
    (a smaller n_re, or, when a quarter of the rows is below the smallest recalibration set, more rows)."""
    used = f"all {n_rows:,} of them" if 2 * n_re >= n_rows else f"{2 * n_re:,} of them"
    todo = _fold_overlap_todo(n_rows)
    return (f"Not read: a larger KL comes with a larger gap in {positive} of {folds} folds and with a smaller "
            f"one in {negative} (mean agreement {mean_tau:+.2f}), but the folds re-split one sample of {n_rows:,} rows, each using {used} "
            f"({n_re:,} to fit on, {n_re:,} to test on), so any two folds share most of their rows. Their fits "
            "then follow this sample's own pattern together, and the fold test cannot tell a relation between KL and gap from that pattern "
            "(with half the rows in each set it claims a relation in about 9% of samples where there is none, "
            f"not 5%). To test it, {todo}.")


REPORT_HELP = (
    "One HTML file with this session's calibration audit (the loaded file and how it was read, the metrics "
    "with the ECE's interval, the reliability diagram at the Reliability page's B, the classwise ECE, Bins & "
    "bias with Theorem 1's bound) and every recalibration result (PBR, Compare, n_re sweep, Generalization, "
    "Fit & apply) with its settings. It is self-contained: it opens offline in any browser, with "
    "interactive charts."
)
AUDIT_REPORT_HELP = (
    "The calibration audit as one HTML file to keep or send: the file, n, K, what is measured, the loader's "
    "decisions, the metrics with the ECE's 95% interval, the reliability diagram and bin choice shown here, "
    "the classwise ECE, the Bins & bias chart with Theorem 1's bound, and any recalibration run in this "
    "session. Self-contained: it opens offline in any browser."
)
NO_RECAL_YET = (
    "The pages under Recalibration (PBR, Compare, Generalization, Fit & apply) fit recalibrators; their "
    "results join this report when run."
)
#: The same for a file that cannot be recalibrated (audit 12a: the report promised results the pages refuse).
NO_RECAL_TOP_LABEL = (
    "This file holds only the top label (the confidence of the predicted class and whether it was right), "
    "so it cannot be recalibrated: a recalibrator reshapes the probability of every class, and the pages "
    "under Recalibration (PBR, Compare, Generalization, Fit & apply) say so and run nothing on it. To "
    "recalibrate, load a file with one probability (or logit) column per class, or a binary p(y=1) column; "
    "its recalibration results then join this report."
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
    "Share of the rows kept out of the fit and used to check it: at least 144 rows (below that the check's "
    "ECE says nothing). 0 %: fit on every row (the most data for the recalibrator you ship), but then the "
    "check below is measured on the rows it was fitted on."
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
    "version, method, number of classes, and every learned value (a damaged file is refused with the "
    "field that is wrong)."
)
#: An upload that fails in a way the library does not foresee (a bug): the details go to the server log.
APPLY_UPLOAD_UNEXPECTED = (
    "{name}: this file could not be read because of an unexpected error in pbr-calib (not a problem "
    "the file checks know). The details are in the server's log; please include them in a bug report."
)
def read_unexpected(error: str) -> str:
    """The load message for a file or dataset that failed with an error the file checks do not know
    (a fault in pbr-calib, not in the file): it says so, rather than the bare error's type."""
    return (f"it could not be read because of an unexpected error in pbr-calib ({error}), not a problem the file "
            "checks know. The details are in the server's log; please include them in a bug report.")


APPLY_TRIAL_UNEXPECTED = (
    "it failed on the first row with an unexpected error in pbr-calib. The details are in the server's "
    "log; please include them in a bug report."
)
APPLY_TITLE = "Fit & apply"
SHIP_TITLE = "Fit a recalibrator to take away"
APPLY_CHECK_TITLE = "Check a saved recalibrator on this data"
APPLY_ECE_BEFORE_HELP = "The uncalibrated predictions of the same rows."
SHIP_RECALIBRATOR_JSON_HELP = "The fitted recalibrator, to apply to new predictions of the same model."
#: Beside every download of a fitted recalibrator (Fit & apply, PBR): what its file's fingerprint of the fit
#: rows tells whoever holds it, and the way to leave it out (:mod:`pbr_core.fit_rows`).
LEAVE_OUT_FIT_ROWS = ("Leave out the fit rows' fingerprint (the file then cannot tell which rows it was fitted on; "
                      "with it, anyone holding the file can tell whether a row was a fit row and, from a row's scores, "
                      "its label)")
LEAVE_OUT_FIT_ROWS_HELP = ("The file keeps a 64-bit hash of each fit row's scores and label, so that a check of it "
                           "(this page, `pbr-calib apply`) leaves its fit rows out. Whoever holds the file can hash a "
                           "row and see whether it was a fit row, and can hash a fit row's scores with each label to "
                           "learn its true label. Tick this for a file that must carry nothing derived from the rows; "
                           "its checks then say they cannot tell whether the rows they measure on were used to fit it.")
SHIP_SNIPPET_TITLE = "**Use it on new predictions of the same model**"


def ship_job_label(method: str) -> str:
    """The fit-to-take-away job's name (``method``: its label)."""
    return f"{method} for download"


def apply_job_label(method: str, file_name: str) -> str:
    """The check-a-saved-recalibrator job's name (``method``: its label; ``file_name``: the upload's)."""
    return f"{method} from {file_name}"


def ship_split_caption(n_fit: int, n_held: int, device: str | None) -> str:
    """Where the fit to take away runs: its rows, the held-out rows (0: none) and, for a GP method,
    the device it runs on (None otherwise)."""
    where = f" on {device}" if device else ""
    return (f"Fits on **{n_fit:,}** rows{where} and checks on the **{n_held:,}** held-out rows."
            if n_held else f"Fits on all **{n_fit:,}** rows{where}. " + SHIP_IN_SAMPLE)


def saved_recalibrator_words(rec: Recalibrator) -> str:
    """An uploaded recalibrator in Markdown: its method, classes, input, KL and fit (from its saved
    fit report; saved files leave the wall time out, it differs run to run), then its settings."""
    fitted = f"K = {rec.n_classes_} classes, fitted on {rec.input_type_}"
    extra = ""
    report_ = getattr(rec, "fit_report_", None) or {}
    if getattr(rec, "kl_", None) is not None:
        extra = f" · KL = {rec.kl_:.4g}"
    if report_.get("device"):
        extra += f" · fitted on {md(report_['device'])}"
        if report_.get("iterations") is not None:
            extra += f", {report_['iterations']} iterations" + ("" if report_.get("converged", True) else " (not converged)")
    return f"**{method_label(rec.method)}** · {fitted}{extra}  \nSettings: {recalibrator_settings(rec)}"


def apply_other_model(file_name: str, n_fitted: int, data_name: str, n_data: int) -> str:
    """An uploaded recalibrator fitted on another number of classes (names as Markdown-safe text already)."""
    return (f"{file_name} was fitted on predictions with {n_fitted} classes, but {data_name} has "
            f"{n_data}: it belongs to another model.")


def apply_classes_by_case(data_name: str, by_case: dict[str, str]) -> str:
    """The loaded data names the recalibrator's classes in other upper / lower case ('NO' for 'no'):
    matched ignoring case (``Recalibrator.classes_matched_by_case``; data name Markdown-safe already)."""
    pairs = ", ".join(f"{md(a)} as {md(b)}" for a, b in by_case.items())
    return (f"{data_name} names the classes as the recalibrator's file does but for upper and lower case: they are "
            f"matched ignoring case ({pairs}).")


def apply_cannot(file_name: str, data_name: str, problem: str) -> str:
    """An uploaded recalibrator that failed its trial prediction (``problem``: the library's words, as
    page text already; names as Markdown-safe text already)."""
    return f"{file_name} cannot be applied to {data_name}: {problem}"


def apply_ece_help(n_bins: int, n_eval: int, tested: bool = False) -> str:
    """The Fit & apply page's "ECE after" help; ``tested``: the test of calibration is shown under the cards."""
    return ECE_HELP + f" B = {n_bins} bins on {n_eval:,} rows." + ECE_CARD_COLOUR + (ECE_CARD_SEE_TEST if tested else "")


def held_out_tests(tests, n_rows: int, tables=None, ece: tuple[float, float] | None = None) -> str:
    """Under the after / before cards of rows a recalibrator was not fitted on: the test of calibration
    of those rows before and after (:func:`pbr_core.significance.verdict`), since a change of ECE on a
    few hundred rows says nothing by itself about whether it is more than chance. ``tables``: the
    before and after reliability tables drawn beside it: more of their bins outside their bands than
    chance puts there keep "no evidence" from reading as an all-clear (:func:`bands_beside_test`);
    what the test does not look at is said once, when a side found no evidence. ``ece``: the ECE before
    and after on these rows; when it fell while the test found no evidence before and miscalibration
    after, :func:`held_out_tests_disagree` follows."""
    from pbr_core.significance import NOT_LOCAL, verdict

    tables = tables or (None, None)
    sides = [verdict(t, scope_note=False) + bands_beside_test(t, table, f"{side} diagram")
             for t, table, side in zip(tests, tables, ("before", "after"))]
    scope = f" {NOT_LOCAL}" if any(_no_evidence(t) for t in tests) else ""
    # Audit 8: "ECE after 0.0108 (-0.0176)" above "Before: no evidence (p = 0.173)... After: miscalibrated
    # beyond chance (p = 0.034)" read as a contradiction; the sentence says why both can hold.
    fell = ece is not None and ece[1] < ece[0]
    reconcile = (" " + held_out_tests_disagree(n_rows) if fell and _no_evidence(tests[0]) and not _no_evidence(tests[1])
                 and tests[1].p_value == tests[1].p_value else "")
    return (f"**Test of calibration on {these_rows(n_rows)}** (the change of ECE alone cannot say whether it "
            f"is more than chance). Before: {sides[0]} After: {sides[1]}{scope}{reconcile}")


def held_out_tests_disagree(n_rows: int) -> str:
    """After :func:`held_out_tests` when the ECE fell but the test finds the rows after miscalibrated and
    found no evidence before: why both can hold, and that neither difference is a test of "worse"."""
    return (f"Why the ECE fell while the test now finds miscalibration: the two measure different things. The ECE "
            "averages the gaps between the predictions and the outcomes within bins of predictions; the test asks "
            "whether the predictions as a whole are off on average or too confident or not confident enough, which "
            "small gaps that all lean one way can show. And on "
            f"{n_rows:,} rows neither change has been tested here: a fall of the ECE is not a test, and a p-value "
            f"above {ALPHA_TEST:g} before and below it after is not a test of the difference between them.")


def _no_evidence(test, alpha: float = ALPHA_TEST) -> bool:
    """Whether a test of calibration found no evidence (the sentences that say what it did not look at)."""
    p = test.p_value
    return not test.method.startswith("certain") and p == p and p >= alpha


def bins_outside(table) -> tuple[int, int]:
    """(bins outside their consistency band, bins with rows) of a reliability table (band_low, band_high):
    :func:`pbr_core.significance.bins_outside`."""
    from pbr_core.significance import bins_outside as count

    return count(table)


def bands_beside_test(test, table, where: str = "diagram above") -> str:
    """After a test that found no evidence: when more bins of the reliability diagram shown with it (the
    ``where``) lie outside their 90 % band than chance puts there (:func:`pbr_core.significance.bins_outside_p`
    below its share of the 5 % the page's claims share, ``ALPHA_BINS``), the sentence that keeps it from
    reading as an all-clear
    (:func:`pbr_core.significance.bins_note`); empty otherwise. One bin in ten outside is the chance rate
    and says nothing (audit 4: the earlier "any bin outside" rule fired on 64-89 % of calibrated files)."""
    from pbr_core.significance import bins_note, outside_chances

    if table is None or "band_low" not in table:
        return ""
    k, m = bins_outside(table)
    return bins_note(test, k, m, f"bins with rows in the {where}",
                     chances=outside_chances(table) if "mean_confidence" in table else None)


def apply_measured_on(origin: str, evaluated_on: str, seconds: float) -> str:
    """Where the result comes from and which rows it is measured on (both as literal text here)."""
    return f"{md(origin)}; measured on **{md(evaluated_on)}** ({seconds:.1f} s)."


#: What the calibrated-predictions downloads hold (pbr_core.loading.save_predictions' ``headers_from``).
CALIBRATED_COLUMNS_WORDS = (
    "the score columns now hold the calibrated probabilities in place of your scores (scores read as "
    "logits become probabilities: one column per class, or, for a single log-odds column, one column "
    "named p_ and the class it is the probability of), the label and your other columns as they were"
)
#: The same where a CSV upload is too large for its cells to be kept as written (state.AS_WRITTEN_MAX_BYTES):
#: its numbers come back as read (audit 11: "as they were" while a ZIP code 01234 came back as 1234).
CALIBRATED_COLUMNS_AS_READ_WORDS = (
    "the score columns now hold the calibrated probabilities in place of your scores (scores read as "
    "logits become probabilities: one column per class, or, for a single log-odds column, one column "
    "named p_ and the class it is the probability of); the label and your other columns hold what was "
    "read from them, with numbers written as read: this file is too large to keep its cells as written, "
    "so a code written 01234 comes back as 1234 and 4.50 as 4.5"
)


def calibrated_columns_words(as_written: bool = True) -> str:
    """What a calibrated-predictions download's columns hold: the other columns as they were, or
    (``as_written`` False: a large CSV upload) their numbers as read."""
    return CALIBRATED_COLUMNS_WORDS if as_written else CALIBRATED_COLUMNS_AS_READ_WORDS


#: How a calibrated-predictions download is written when the upload's own CSV format is not kept (not a
#: CSV, or too large a CSV: state.AS_WRITTEN_MAX_BYTES).
STANDARD_CSV_WORDS = ("Written as a standard CSV: comma-separated, '.' decimal points, the calibrated probabilities "
                      "as fractions from 0 to 1.")
#: The same for a CSV whose format is kept but not known before the download is made (a bundled sample).
OWN_CSV_WORDS = ("Written in your file's own CSV format (its separator, decimal mark, byte-order mark and line "
                 "ends); a score column that held percentages (93,3% or, read with the percentages option, 93,3) "
                 "gets the calibrated probabilities as percentages in the same style (84,55% for 0.8455), the "
                 "others as fractions from 0 to 1, so that the file reads back as yours did.")


def download_format_words(written_as: "CsvDialect | bool") -> str:
    """How a calibrated-predictions download is written (``state.download_format``): in the upload's
    own CSV dialect (audit 12a: a ';' export with decimal commas came back comma-separated, one column
    in a European spreadsheet), percentages where the file wrote percentages; or a standard CSV."""
    if written_as is False:
        return STANDARD_CSV_WORDS
    if written_as is True:
        return OWN_CSV_WORDS
    percent = md(written_as.percent_words())  # names the file's columns: literal text
    return (f"Written in your file's own CSV format: {written_as.words()}; "
            + (f"{percent}." if percent else "the calibrated probabilities as fractions from 0 to 1."))


def calibrated_predictions_help(data_name: str, method: str, fit_column: str | None, n_fit: int,
                                venn_abers: bool, as_written: bool = True,
                                written_as: "CsvDialect | bool" = False) -> str:
    """The Fit & apply page's calibrated-predictions download: its columns (``fit_column``: the column
    marking the rows it was fitted on, None when there is none), and a Venn-Abers predictor's intervals."""
    marked = (f" and a last column *{fit_column}*: True for the {n_fit:,} rows it was fitted on, "
              "False for the held-out rows" if fit_column is not None else "")
    return (f"Every row of {md(data_name)} recalibrated by the {method}, under your file's own column "
            f"names and order: {calibrated_columns_words(as_written)}{marked} (reads back on the Data page). "
            + download_format_words(written_as) + (VENN_ABERS_DOWNLOAD_NOTE if venn_abers else ""))


# ----------------------------------------------------------------------- Venn-Abers intervals (issue 37)
#: The inductive predictor's guarantee, with its condition (audit 6: "whatever the data" overstated it; when
#: the new rows drift from the fitting rows the true label's probability failed the test, p = 2e-14).
VENN_ABERS_GUARANTEE_WORDS = (
    "The method gives each row two probabilities, a low one and a high one, and guarantees that one of them is "
    "calibrated, as long as the new rows come from the same population as the rows it was fitted on (not after "
    "the model or its data drifted)."
)
#: Cross Venn-Abers: the folds' intervals averaged carry no such guarantee (audit 6: on 50-row files of an
#: over-confident model the true label's averaged probability failed the test of calibration, p = 6e-11 with 2
#: folds, 1e-58 with 5).
VENN_ABERS_CROSS_WORDS = (
    "This cross Venn-Abers predictor gives each row two probabilities, a low one and a high one: the average of "
    "the low and of the high ones of predictors fitted on parts of the rows. Unlike a single Venn-Abers "
    "predictor, the averaged pair carries no guarantee that one of them is calibrated."
)


def venn_abers_interval_words(summary) -> str:
    """The Fit & apply page's (and the report's) reading of a Venn-Abers predictor's intervals
    (``pbr_core.experiments.runs.IntervalSummary``), in Markdown."""
    what = ("p(y = 1)" if summary.target == "positive"
            else "the probability of the class each row ranks first")
    text = (f"**Venn-Abers interval** of {what}: on average **{summary.mean_width:.3f}** wide (half the rows "
            f"{summary.median_width:.3f} or less, 90 % of them {summary.p90_width:.3f} or less). "
            + (VENN_ABERS_CROSS_WORDS if getattr(summary, "cross", False) else VENN_ABERS_GUARANTEE_WORDS)
            + " The probability shown is a compromise between the two. A wide interval means the rows it was "
            "fitted on say little about predictions like this one (few similar rows).")
    if summary.inside < 1:
        why = {"renormalised": "the classes' probabilities were rescaled to add up to 1",
               "folds": ("the probability combines the predictors fitted on each part of the rows, while the "
                         "interval shown is the average of their intervals")}.get(summary.outside_reason,
                                                                                   "it was computed separately")
        text += f" On {1 - summary.inside:.1%} of the rows the probability shown lies outside its interval: {why}."
    return text


#: What the calibrated-predictions download holds beside the probabilities, for a Venn-Abers predictor.
VENN_ABERS_DOWNLOAD_NOTE = (
    " Each probability column is followed by its Venn-Abers interval, in two columns named after it and ending "
    "in _low and _high."
)


# ----------------------------------------------------------------------- CORP (Reliability page, issue 37)
CORP_EXPANDER = "Without bins: the CORP reliability diagram, and what the score is made of"
CORP_INTRO = (
    "The diagram above changes with the number of bins. The **CORP** diagram (Dimitriadis, Gneiting & Jordan, "
    "2021) has no bins to choose: its curve is the best rising line through the outcomes, which says, for each "
    "predicted probability, how often the event really happened among the rows with that prediction and its "
    "neighbours. A calibrated model's curve follows the diagonal; the grey band shows how far it strays by chance "
    "alone (where it lies 90 % of the time when the outcomes are drawn from the predictions themselves). Where the "
    "curve leaves the band (red dots), the predictions are off by more than chance explains."
)


def corp_band_reading(rows_outside: float, chance: float, grid: str = "") -> str:
    """How much of the CORP curve lies outside its consistency band (``rows_outside``: the share of
    rows whose predicted probability is at such a place; ``chance``: the most a calibrated model's
    curve reaches by chance, ``pbr_core.corp.CHANCE_OUTSIDE_SHARE``), one sentence. ``grid``: how coarsely
    the file wrote its scores (:func:`dashboard.compute.corp_grid`, "" for fine scores): "the predictions
    are off there" is then said of the values as written, which an export's rounding alone can make off
    (audit 12b: Adult rounded to 1 decimal, outcomes from the unrounded scores, 300 rows: 82 % of files read
    "off"), so the sentence says so, as the test of calibration's coarse caveat does."""
    # Inside the band is no verdict of calibration: the band is a weaker check than the test of calibration
    # (40 overconfident rows: 20 % outside, "no more than chance", beside a test with p = 0.008).
    stronger = " The test of calibration (under the reliability diagram) is the stronger check."
    if rows_outside == 0:
        return "The curve stays inside the band everywhere: the band alone shows no miscalibration." + stronger
    if rows_outside <= chance:
        return (f"For {rows_outside:.0%} of the rows the curve lies outside the band: no more than chance gives a "
                f"calibrated model (in simulations it stays at or below about {chance:.0%}), so the band alone "
                "shows no miscalibration." + stronger)
    rounding = (f" But every score in this file is {grid}: if the file was exported rounded, part of this can be the "
                "rounding itself (a true 1.2 % written as 0.0 is off by 1.2 points), not the model's own predictions."
                if grid else "")
    return (f"For {rows_outside:.0%} of the rows the curve lies outside the band, more than chance gives a calibrated "
            f"model (in simulations at most about {chance:.0%}): the predictions are off there, as written." + rounding
            if grid else
            f"For {rows_outside:.0%} of the rows the curve lies outside the band, more than chance gives a calibrated "
            f"model (in simulations at most about {chance:.0%}): the predictions are off there.")


def mcb_chance_words(chance) -> str:
    """Whether the Brier score's miscalibration MCB is more than chance gives calibrated predictions of
    this size (``pbr_core.corp.McbChance``), one or two sentences. MCB is measured on the rows its
    curve was fitted to, so calibrated files show some by chance alone (150 calibrated rows: 37 % of the
    score on average): only an MCB beyond the draws' reference is called removable."""
    subset = (f" (compared on a random {chance.n_rows:,} of the {chance.n_total:,} rows, where it is "
              f"{chance.mcb:.4f})" if chance.n_rows < chance.n_total else "")
    reference = (f"when the outcomes are drawn from these predictions themselves (so that they are calibrated), the "
                 f"same measure stays at or below {chance.chance_high:.4f} in {chance.level:.0%} of {chance.n_draws} "
                 "draws")
    if chance.beyond_chance:
        return (f"This is more than chance alone gives{subset}: {reference}. So part of it is real miscalibration "
                "that recalibrating could remove; the curve is fitted on these same rows, so on new data the gain is "
                "at most this.")
    return (f"This is within what chance alone gives on {chance.n_rows:,} calibrated rows{subset}: {reference} "
            f"({chance.chance_mean:.4f} on average), because the curve is fitted on these same rows. So it is no "
            "evidence that recalibrating would gain anything on new data.")


#: The score decomposition table's columns for MCB against chance (``pbr_core.corp.mcb_against_chance``).
MCB_CHANCE_COLUMN = f"MCB by chance alone ({1 - ALPHA_MCB:.0%} of calibrated draws stay at or below)"
MCB_BEYOND_COLUMN = "MCB beyond chance?"


def mcb_beyond_cell(chance) -> str:
    """The table cell: is this MCB more than calibrated predictions of this size give by chance?"""
    where = f" (on {chance.n_rows:,} of the rows)" if chance.n_rows < chance.n_total else ""
    return ("yes: partly removable" if chance.beyond_chance else "no: within chance") + where


def corp_decomposition_words(brier, log, what: str, chance=None) -> str:
    """The score decomposition MCB - DSC + UNC of the Brier score and the log loss
    (``pbr_core.corp.ScoreDecomposition`` each), in Markdown for a non-programmer; ``chance``: the
    Brier MCB against chance (``pbr_core.corp.McbChance``), which says whether MCB is removable."""
    def share(d) -> str:
        return f" ({d.mcb / d.score:.0%} of the score)" if 0 < d.score < float("inf") and d.mcb < float("inf") else ""

    if chance is None:  # no reference: say only what MCB measures, and that it is in-sample
        removable = ("the part that recalibrating could remove on these rows; the curve is fitted on these same rows, "
                     "so on new data the gain is at most this")
    else:
        removable = ("measured on the rows the curve was fitted to. " + mcb_chance_words(chance)).rstrip(".")

    if log.score < float("inf"):
        log_part = f"; log loss **{log.score:.4f}** = {log.mcb:.4f} − {log.dsc:.4f} + {log.unc:.4f}."
    else:  # a wrong prediction of exactly 0 or 1: an infinite loss, and an infinite miscalibration
        log_part = (". The log loss is infinite: some predictions of exactly 0 or 1 were wrong, which the log loss "
                    "punishes without limit, so its miscalibration is infinite too.")
    return (
        f"**What the score is made of.** Any proper score of {what} splits into three parts: "
        f"Brier score **{brier.score:.4f}** = miscalibration {brier.mcb:.4f} − discrimination {brier.dsc:.4f} "
        f"+ uncertainty {brier.unc:.4f}{log_part}\n\n"
        f"- **Miscalibration (MCB)**: how much the score would improve if each prediction were replaced by the CORP "
        f"curve's value{share(brier)}, {removable}. Lower is better.\n"
        "- **Discrimination (DSC)**: how much better those recalibrated predictions are than always predicting the "
        "overall rate; how well the model tells rows apart. Higher is better, and recalibration does not change it.\n"
        "- **Uncertainty (UNC)**: the score of always predicting the overall rate. It depends on the data only, not "
        "on the model."
    )


def log_loss_split_words(split: dict | None, why_not: str | None = None) -> str:
    """The refinement / calibration split of the full vector's log loss (``pbr_core.corp.log_loss_split``),
    or why it was not computed (``why_not``), in Markdown."""
    if split is None:
        return f"**How much a temperature could gain**: not computed: {why_not}"
    part = split["calibration"] / split["log_loss"] if split["log_loss"] > 0 else 0.0
    return (
        f"**How much a temperature could gain.** The log loss of the whole probability vector is "
        f"**{split['log_loss']:.4f}**. Rescaling the model's confidence by the best single temperature "
        f"(T = {split['temperature']:.3g}) brings it to {split['refinement']:.4f}, the *refinement* part, which no "
        f"rescaling of the confidence removes; the other **{split['calibration']:.4f}** ({part:.1%}) is the "
        "*calibration* part that temperature scaling removes. The temperature is fitted on these same rows, so on "
        "new data the gain is at most this."
    )


#: Why the log-loss split is not computed for some data.
LOG_LOSS_SPLIT_TOP_LABEL = "the file holds only the top class's confidence, not every class's probability."
LOG_LOSS_SPLIT_ZEROS = ("some probabilities are exactly 0, whose logarithm is minus infinity; a temperature "
                        "cannot rescale them.")


def score_map_file_name(score_column: str) -> str:
    """The saved score map's file name: the column's name, made safe for a file name."""
    import re

    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', score_column).strip('_') or 'score'}_map.json"


def ship_mapped_scores_warning(score_column: str, code_below: bool = True) -> str:
    """A recalibrator fitted on scores mapped to probabilities (the Data page's map), Fit & apply and PBR: it
    takes probabilities, but the model's new predictions are scores on their own scale (audit 14, finding A).
    ``code_below``: the page shows the code applying both (Fit & apply); else it points there."""
    c = md(score_column)
    how = "as the code below does" if code_below else "as the code on the Fit & apply page does"
    return (f"These predictions are **{c}** mapped to probabilities on the Data page, and the recalibrator takes "
            f"probabilities, not {c}. New predictions of the model must first go through **the same map**: "
            f"download it (**Score map (JSON)**) with the recalibrator and apply both, {how}; "
            f"a recalibrator given raw {c} values would take them for probabilities and its output would mean nothing.")


SCORE_MAP_JSON_HELP = ("The map from the model's score to p(y=1) fitted on the Data page (the steps of the isotonic "
                       "regression, or the logistic curve's intercept and slope): new scores of the model go through it "
                       "before the recalibrator (pbr_core.scores.apply_score_map).")


def ship_snippet_mapped(file_name: str, map_file: str, score_column: str) -> str:
    """The code to use a recalibrator fitted on mapped scores: the map first, then the recalibrator."""
    return (
        "import json\n\n"
        "import numpy as np\n"
        "from pbr_core.recalibrators import load_recalibrator\n"
        "from pbr_core.scores import apply_score_map\n\n"
        f"# new_scores: the model's {score_column} on new rows, on its own scale (not probabilities)\n"
        f'with open("{map_file}") as f:\n'
        "    score_map = json.load(f)\n"
        "p = apply_score_map(score_map, new_scores)   # the same map as on the Data page: p(y=1)\n"
        f'recalibrator = load_recalibrator("{file_name}")\n'
        "calibrated = recalibrator.predict_proba(np.column_stack([1 - p, p]))   # (n, 2): p(y=0), p(y=1)\n\n"
        "# pbr-calib apply reads probabilities: write 1 - p and p as the new file's score columns first, then\n"
        f"# pbr-calib apply {file_name} new_predictions.csv --out calibrated.csv"
    )


def ship_snippet(file_name: str) -> str:
    return (
        "from pbr_core.recalibrators import load_recalibrator\n\n"
        f'recalibrator = load_recalibrator("{file_name}")\n'
        "calibrated = recalibrator.predict_proba(logits)   # (n, K) logits or probabilities of new rows\n\n"
        "# or from the command line:\n"
        f"# pbr-calib apply {file_name} new_predictions.csv --out calibrated.csv"
    )


# --------------------------------------------------------------------------- names people see
# The library and the CSV downloads speak in registry names and snake_case columns (`isotonic`,
# `fit_seconds`); every page, progress line and report uses the words below instead.

#: Column headers of the per-fold tables on the pages and in the report (Compare, n_re sweep,
#: Generalization). The CSV downloads keep the library's column names (see tables.csv_frame).
COLUMN_TITLES: dict[str, str] = {
    "method": "Method", "fold": "Fold", "alpha": "α", "n_re": "Recalibration rows (n_re)",
    "n_te": "Test rows", "n_bins": "Bins B", **{name: m.label for name, m in METRICS.items()},
    "ece": "Test ECE",  # a per-fold table's ECE is measured on the fold's test rows
    "at_prior": "Ended at the prior", "fit_shared_with": "Fit shared with", "error": "Error",
    # pbr_core.metrics.nll_infinite_rows: above 0, the NLL is infinite (a probability of 0 for what happened)
    "nll_infinite_rows": "Rows that make the NLL infinite",
}


def metric_title(metric: str) -> str:
    """A metric's name on a figure or a summary (``pbr_core.evaluation.METRICS``' label)."""
    if metric == "at_prior":
        return "Folds at the prior"
    return METRICS[metric].label if metric in METRICS else metric

#: Recalibrator settings in words (Fit & apply's description of a saved file, the report's settings).
PARAM_LABELS: dict[str, str] = {
    "alpha": "α", "max_iter": "max optimiser iterations", "n_inducing": "inducing points",
    "n_mc": "Monte Carlo draws (fit)", "mc_draws": "kind of Monte Carlo draws (fit)",
    "mc_classes": "classes drawn per row (fit)", "n_predict_samples": "posterior draws (prediction)",
    "random_state": "seed", "device": "device", "optimizer": "optimiser", "variational": "variational family",
    "ce_estimator": "cross-entropy estimate", "min_temperature": "smallest temperature",
    "max_temperature": "largest temperature", "bias": "bias", "bias_reg": "bias penalty",
    "off_diagonal_reg": "off-diagonal penalty", "tol": "tolerance", "targets": "targets", "n_bins": "bins",
    "strategy": "binning", "n_prime": "BBQ prior strength", "bin_range_factor": "BBQ bin range",
    "staged": "fit in stages (many rows)", "floor": "probability floor", "multiclass": "multiclass data",
    "centred": "centred isotonic regression", "reg_lambda": "off-diagonal penalty (λ)", "reg_mu": "intercept penalty (μ)",
}


def param_value(name: str, value: object) -> str:
    if name == "objective":
        return OBJECTIVE_LABELS.get(str(value), str(value))
    if name == "mean_approx":
        return ("softmax of the posterior mean (app.)" if value else
                "average over posterior draws (the paper's Algorithm 1)")
    if name == "n_mc" and value == "auto":
        from pbr_core.gp.objectives import MANY_CLASSES, MC_DRAWS_FEW_CLASSES, MC_DRAWS_MANY_CLASSES

        return (f"automatic ({MC_DRAWS_FEW_CLASSES} below {MANY_CLASSES} classes, "
                f"{MC_DRAWS_MANY_CLASSES} from {MANY_CLASSES} on)")
    if name == "mc_classes" and value in ("auto", "all"):
        from pbr_core.gp.objectives import MANY_CLASSES, MC_EXACT_CLASSES

        return ("all" if value == "all" else
                f"automatic (all below {MANY_CLASSES} classes; from {MANY_CLASSES} on the {MC_EXACT_CLASSES} or more "
                "largest scores and the label, the other classes through their expectation)")
    if name == "multiclass":
        return {"top_label": "one map of the top class's probability, the others in the model's proportions",
                "one_vs_all": "one map per class (one-vs-all), renormalised"}.get(str(value), str(value))
    if name == "floor" and value is None:
        return "1/(n+1) for n fit rows"
    if name in ("reg_lambda", "reg_mu") and value is None:
        return "automatic (1 up to 10 classes, K(K-1)/90 for K classes beyond)"
    if name == "staged" and value == "auto":
        from pbr_core.gp.staged import STAGE_ROWS, STAGED_MIN_ROWS

        return (f"automatic (from {STAGED_MIN_ROWS:,} rows on: first on {STAGE_ROWS:,} rows drawn at random, "
                "then on every row with fewer Monte Carlo draws per row)")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def params_text(params: dict, defaults: dict | None = None) -> str:
    """A recalibrator's settings in words: those that differ from ``defaults`` (α always)."""
    defaults = defaults or {}
    shown = {k: v for k, v in params.items() if k == "alpha" or k not in defaults or defaults[k] != v}
    shown = dict(sorted(shown.items(), key=lambda kv: kv[0] != "alpha"))  # α first, as on the pages
    if not shown:
        return "the method's defaults"
    words = []
    for k, v in shown.items():
        if k == "objective":
            words.append(f"objective {param_value(k, v)}")
        elif k == "mean_approx":
            words.append(f"prediction: {param_value(k, v)}")
        else:
            words.append(f"{PARAM_LABELS.get(k, k.replace('_', ' '))} = {param_value(k, v)}")
    return ", ".join(words) + ("; the other settings are the method's defaults" if defaults else "")


def axis_titles(binary_positive: bool) -> tuple[str, str]:
    """(x, y) axis titles of a reliability diagram: p(y=1) against the frequency of y = 1 for binary
    calibration, else confidence against accuracy (every diagram of every page and the report)."""
    if binary_positive:
        return "Predicted probability p(y=1)", "Observed frequency of y = 1"
    return "Confidence (probability of the predicted class)", "Accuracy"


def bin_choice(n: int, n_bins: int) -> str:
    """Why B: the paper's floor(n^(1/3)) or the user's own choice, said in one paragraph."""
    from pbr_core import optimal_n_bins

    default = optimal_n_bins(n)
    if n_bins == default:
        chosen = f"B = {n_bins} bins of equal width, the paper's choice B = floor(n^(1/3)) for n = {n:,}. "
    else:
        chosen = (f"B = {n_bins} bins of equal width, chosen on the Reliability page (the paper's default "
                  f"for n = {n:,} is B = floor(n^(1/3)) = {default}). ")
    return chosen + N_BINS_HELP


def bound_at_b_reading(n_bins: int, lipschitz: float, eps: float, bound: float, ece: float) -> str:
    """What Theorem 1's bound on |TCE − ECE| at B (``bound``) says about the true calibration error."""
    lo, hi = max(0.0, ece - bound), min(1.0, ece + bound)
    text = (f"Theorem 1 at B = {n_bins} (L = {lipschitz:g}, ε = {eps:g}): with probability {1 - eps:.0%}, "
            f"|TCE − ECE| ≤ {bound:.4f}, so the true calibration error lies between {lo:.4f} and {hi:.4f}.")
    if bound >= 1.0:
        text += " The bound is at least 1 here, so it says nothing yet: it shrinks like n^(-1/3)."
    return text


def recalibrator_settings(rec: Recalibrator) -> str:
    """A fitted recalibrator's settings in words: those that differ from the method's defaults."""
    from pbr_core.recalibrators import get_recalibrator

    params = rec.get_params()
    try:
        defaults = get_recalibrator(rec.method).get_params()
    except Exception:  # noqa: BLE001 - an unknown method: list every setting
        defaults = {}
    return params_text(params, defaults)


# --------------------------------------------------------------------------- a study's settings and origin, in words
def settings_words(s: object, multiclass: bool = False) -> dict[str, object]:
    """A study's settings (``pbr_core.experiments.settings``) as the report lists them, in the page's words."""
    from pbr_core.experiments.settings import (CompareSettings, FitSettings, GroupGapSettings, KLGapSettings,
                                               PBRSettings, SweepSettings)

    def label(method: str) -> str:
        return method_label(method, multiclass)

    out: dict[str, object]
    if isinstance(s, PBRSettings):
        out = {"Method": method_label(s.method), "Recalibration rows (n_re)": f"{s.n_re:,}", "Split seed": s.seed,
               "ε (failure probability)": f"{s.eps:g}", "Lipschitz constant L": f"{s.lipschitz:g}"}
        if s.uses_alpha:
            score = CV_SCORE_LABELS.get(s.cv_score, s.cv_score)
            out["α (weight of the KL term)"] = (
                f"chosen by {s.cv_folds}-fold cross-validation on the recalibration rows (score: {score}) "
                f"from {', '.join(f'{a:g}' for a in s.alpha_grid)}" if s.alpha is None else f"{s.alpha:g}")
        if s.max_iter:
            out["Max optimiser iterations"] = s.max_iter
        out["Prior of the bounds"] = (
            f"chosen on {s.prior_split:.0%} of the recalibration rows, bounds on the others (valid as stated)"
            if s.prior_split else "fitted on the same rows as the posterior (bounds approximate)")
    elif isinstance(s, CompareSettings):
        out = {"Methods": ", ".join(label(m) for m in s.methods), "Recalibration rows (n_re)": f"{s.n_re:,}",
               "Folds": s.n_folds, "Split seed": s.seed}
        if s.n_te is not None:
            out["Test rows per fold"] = f"{s.n_te:,}"
        for m, p in s.params:
            out[f"{label(m)} settings"] = params_text(dict(p))
    elif isinstance(s, SweepSettings):
        out = {"Methods": ", ".join(label(m) for m in s.methods),
               "Recalibration rows (n_re) tried": ", ".join(f"{v:,}" for v in s.n_re_values),
               "Folds": s.n_folds, "Split seed": s.seed}
        for m, p in s.params:
            out[f"{label(m)} settings"] = params_text(dict(p))
    elif isinstance(s, KLGapSettings):
        out = {"Method": method_label(s.objective), "α values": ", ".join(f"{a:g}" for a in s.alphas),
               "Recalibration rows n_re (= test subset size)": f"{s.n_re:,}", "Folds": s.n_folds,
               "Split seed": s.seed, "ε (failure probability)": f"{s.eps:g}"}
        if s.max_iter:
            out["Max optimiser iterations"] = s.max_iter
        if s.batched:
            out["Fitting"] = "all fits together on the GPU (Adam optimiser)"
    elif isinstance(s, FitSettings):
        out = {"Method": method_label(s.method)}
        if s.params():
            out["Settings"] = params_text(s.params())
        out["Held out"] = f"{s.holdout:.0%} (split seed {s.seed})" if s.holdout > 0 else "nothing"
    elif isinstance(s, GroupGapSettings):
        out = {"Method": label(s.method), "Grouped by": " × ".join(s.by), "Recalibration rows (n_re)": f"{s.n_re:,}",
               "Folds": s.n_folds, "Split seed": s.seed}
        if s.params:
            out["Settings"] = params_text(dict(s.params))
    else:
        raise TypeError(f"No words for settings of type {type(s).__name__}.")
    return out


def fitted_origin(method: str, n_fit: int, data_name: str) -> str:
    """How a recalibrator fitted on the Fit & apply page came to be, one sentence (data_name as text)."""
    return f"{method_label(method)} fitted on {n_fit:,} rows of {data_name or 'the loaded file'}"


def applied_origin(method: str, source: str) -> str:
    """How a recalibrator loaded on the Fit & apply page came to be."""
    return f"{method_label(method)} loaded from {source}"


def evaluated_on_words(n_eval: int, n_fit: int, in_sample: bool) -> str:
    """Which rows a fitted recalibrator's before / after are measured on."""
    return f"the {n_fit:,} rows it was fitted on" if in_sample else f"the {n_eval:,} held-out rows"


def evaluated_on_all(n: int, data_name: str, check=None) -> str:
    """Which rows a loaded recalibrator's before / after are measured on: all of them, or (``check``, a
    :class:`pbr_core.fit_rows.FitRowOverlap` with some fit rows) those that are not fit rows."""
    where = data_name or "the loaded file"
    if check is not None and check.state == "some":
        return f"the {check.n_other:,} rows of {where} it was not fitted on (of {n:,})"
    if check is not None and check.state == "all":
        return f"all {n:,} rows of {where}, the rows it was fitted on"
    return f"all {n:,} rows of {where}"


#: The Fit & apply page's check of a saved recalibrator, when the loaded rows include rows it was
#: fitted on: measured there, a recalibrator looks better than it is (tests/test_fit_rows.py measures how much).
FIT_ROWS_WHY = "on the rows it was fitted on, a recalibrator looks better than it will on new data"


def _repeated_rows(check) -> str:
    """Rows that may be fit rows or new rows with the same values (``check.n_possible`` > 0), and why the
    page keeps them: leaving them out would pick rows by their label."""
    from pbr_core.fit_rows import chance_words

    one = check.n_possible == 1
    words = (f"{check.n_possible:,} {'row has' if one else 'rows have'} exactly the scores and label of a row it was "
             f"fitted on, but this file holds identical rows ({check.n_distinct:,} different rows among "
             f"{check.n_rows:,}), so the page cannot tell {'it' if one else 'them'} from new rows with the same values. "
             "It keeps them: leaving them out would pick rows by their label (for each score, it would keep mostly "
             "rows of the label the fit rows have less of) and bias the check")
    if check.holds_all:
        words += (f". Every value (scores and label) of its {check.n_fit:,} fit rows occurs here at least as often as "
                  "among them, as it would if this file held its fit rows, but a file of new rows this size would do "
                  f"so by chance too (estimated chance: {chance_words(check.chance_contains)}), so the page cannot "
                  "tell whether it does")
    return words


def _found_rows(check) -> str:
    """How the rows left out were found (``check.found``): the file appears to contain the fit rows, or
    rows found once here and once among them (and, besides, rows that only may be fit rows)."""
    from pbr_core.fit_rows import chance_words

    if check.found == "contains":
        same = check.n_rows == check.n_fit
        return (f"This file appears to {'be' if same else 'contain'} the {check.n_fit:,} rows it was fitted on: every "
                f"value (scores and label) of its fit rows occurs here {'exactly as' if same else 'at least as'} often "
                "as among them, which a file of new rows this size would rarely do by chance (estimated chance: "
                f"{chance_words(check.chance_contains)})" + ("" if same else
                f". Identical rows cannot be told apart, but leaving out {check.n_excluded:,} rows with the values of "
                f"its fit rows leaves exactly the values of {other_rows(check.n_other)}"))
    found = ("This row is one" if check.n_rows == 1 else f"{check.n_identified:,} of these {check.n_rows:,} rows "
             f"{'is a row' if check.n_identified == 1 else 'are rows'}")
    words = (f"{found} it was fitted on (each has exactly the scores "
             "and label of one of its fit rows, and no other row here has them)")
    return words + (f". Besides, {_repeated_rows(check)}" if check.n_possible else "")


def fit_rows_check(check, min_rows: int) -> str:
    """Whether the loaded rows include rows the saved recalibrator was fitted on (``check``: a
    :class:`pbr_core.fit_rows.FitRowOverlap`, whose ``verdict`` and ``found`` decide the sentence), and
    which rows it is therefore measured on. Never says that identical rows are the fit rows: rows that
    other rows of the file (or the fit rows) repeat are only said to be possible fit rows, and are kept
    (leaving them out would pick rows by label), unless the file appears to contain the fit rows. Says
    what was checked (exact scores and label), and that it cannot tell where the rows are written more
    coarsely than the fit rows. ``min_rows``: the fewest rows a check measures on."""
    from pbr_core.fit_rows import coarser_words

    n, verdict = check.n_rows, check.verdict(min_rows)
    asked = "**Were these rows used to fit it?**"
    flatter = f"if some of them were used to fit it, {FIT_ROWS_WHY}, and the figures below flatter it."
    if verdict == "not recorded":
        return (f"{asked} The page cannot tell: this recalibrator's file does not record the rows it was fitted on (a "
                f"file saved before pbr-calib recorded them, or saved without them). It is measured on all {n:,} rows; "
                f"{flatter}")
    if verdict == "coarser":
        return (f"{asked} The page cannot tell: {coarser_words(check)} among them. It is measured on all {n:,} "
                f"rows; {flatter}")
    if verdict == "none":
        none = "this row does not have" if n == 1 else f"none of these {n:,} rows has"
        return (f"{asked} Not as far as its file can tell: {none} exactly the scores and label "
                f"of one of the {check.n_fit:,} rows it was fitted on (its file records them all), so it is measured "
                "on all of them.")
    if verdict == "none of the sample":
        return (f"{asked} None of the {check.n_checkable:,} of these rows that its file's sample of its "
                f"{check.n_fit:,} fit rows can check is a fit row; at most about {check.bound_if_none:,.0f} of the "
                f"{n:,} can be (95 %). It is measured on all of them.")
    if verdict == "sampled":
        about = ("This row may be one" if n == 1 else f"About {check.estimated:,.0f} of these {n:,} rows "
                 f"{'is a row' if f'{check.estimated:,.0f}' == '1' else 'are rows'}")
        return (f"**Some of these rows were used to fit it.** {about} it was fitted on (an estimate: its file keeps "
                f"a sample of its {check.n_fit:,} fit rows, enough to count them but not to tell which they are), "
                f"and {FIT_ROWS_WHY}. The page cannot measure it on "
                "the others: load rows it was not fitted on to check it.")
    if verdict == "shared":
        return (f"**Some of these rows may have been used to fit it.** {_repeated_rows(check)}. It is measured on all "
                f"{n:,} rows: {flatter}")
    found = _found_rows(check)
    if verdict == "in-sample":
        return (f"**This check is in-sample and cannot be used as a check.** {found}. No row is left that it was "
                f"not fitted on, so the figures below are measured on the rows it was fitted on: {FIT_ROWS_WHY}. "
                "Load rows it was not fitted on to check it.")
    head = ("**These rows include the rows it was fitted on.**" if check.found == "contains"
            else "**Some of these rows were used to fit it.**")
    if verdict == "too few left":
        left = f"{check.n_other:,} other row{' is' if check.n_other == 1 else 's are'} left"
        return (f"{head} {found}. Only {left}, fewer than the {min_rows:,} a check "
                "needs (below that the ECE says nothing), so the page does not measure it: load more rows it was "
                "not fitted on.")
    kept = (f" (the {check.n_possible:,} that only may be fit rows among them: if some were, the figures flatter it)"
            if check.n_possible else "")
    return f"{head} {found}. It is measured on {other_rows(check.n_other)} only{kept}, since {FIT_ROWS_WHY}."


def people_progress(message: str, multiclass: bool = False) -> str:
    """The library's progress messages in page words: "pbr alpha=0.5, fold 1/10" -> "PBR, α = 0.5,
    fold 1 of 10"; "isotonic, n_re=100, fold 2/3" -> "Isotonic regression, n_re = 100, fold 2 of 3".
    Anything else comes back unchanged."""
    import re

    m = re.fullmatch(r"(?:(?P<method>[a-z_]+)(?:,| )\s*)?(?:alpha=(?P<alpha>[^,\s]+),\s*)?"
                     r"(?:n_re=(?P<n_re>\d+),\s*)?fold (?P<fold>\d+)/(?P<folds>\d+)", message.strip())
    if m is None:
        b = re.fullmatch(r"batched fit of (\d+) GPs, iteration (\d+)", message.strip())
        return f"fitting {b[1]} GPs together, iteration {b[2]}" if b else message
    parts = []
    if m["method"]:
        parts.append(method_label(m["method"], multiclass))
    if m["alpha"]:
        parts.append(f"α = {m['alpha']}")
    if m["n_re"]:
        parts.append(f"n_re = {int(m['n_re']):,}")
    parts.append(f"fold {m['fold']} of {m['folds']}")
    return ", ".join(parts)

#: The scores the automatic choice of α can use.
CV_SCORE_LABELS: dict[str, str] = {name: METRICS[name].label for name in CV_SCORES}

FOLDS_CSV_HELP = (
    "One row per fit. For scripts and spreadsheets the columns keep the library's names (ece, nll, brier, kl, "
    "at_prior, fit_seconds, …) and methods their short names (temperature, pbr, …); folds are numbered from 1 "
    "as on this page."
)


def fit_words(text: str) -> str:
    """The optimiser's stop reasons and notes (``fit_report_``) in page words, as literal Markdown text:
    "reached max_iter=20" -> "reached the limit of 20 iterations", "alpha" -> "α", "rtol=1e-05" ->
    "tolerance 1e-05"."""
    import re

    # The restarts from the prior (pbr_core.gp.training.RESTARTED / NOT_RESTARTED) in words, without
    # the objective's values, which say nothing to a reader of the page.
    text = re.sub(r"\(restarted: the first fit ended at the prior, objective [^;]*; from an alpha = ([^ ]+) fit it "
                  r"reached [^)]*\)",
                  r"(fitted twice: the first fit left the probabilities as they were (it ended at the prior); "
                  r"started again from a fit with α = \1, it found a better fit, which is the one used)", text)
    text = text.replace("(ended at the prior; restarts from smaller alpha did not do better)",
                        "(the fit left the probabilities as they were: it ended at the prior; starting again from "
                        "fits with a smaller α did not do better)")
    text = re.sub(r"reached max_iter=(\d+)", r"reached the limit of \1 iterations", text)
    text = re.sub(r"\b(?:adam_)?rtol=", "tolerance ", text)
    text = re.sub(r"\balpha\b", "α", text)
    # Markdown of literal text: the reasons and warnings of a saved file's fit report are the file's text.
    return md_message(text.replace("torch L-BFGS: ", "L-BFGS: "))


# --------------------------------------------------------------------------- Groups page
GROUPS_INTRO = (
    "Is the model calibrated **for everyone**, or only on average? Each group of rows gets its own ECE "
    "(with B = floor(n^(1/3)) of the group's rows), its 95 % interval (as under the Reliability page's ECE), "
    "the ECE without the part "
    "that noise adds, a test of calibration and what it supports, and its own reliability curve."
)
#: Under the Groups table, in plain words (a user audit: "Cox's test", "Spiegelhalter's z beside them",
#: "Holm's method" are jargon to most readers); the tests' names are in GROUPS_TEST_HELP, the "?" of the
#: p-value column.
GROUPS_TEST_CAPTION = (
    "The test asks whether the group's outcomes could come from its predicted probabilities: is the mean "
    "outcome the mean prediction, and are the predictions too extreme or too timid? It needs no bins. For a "
    "small group the p-value comes from redrawing the outcomes from the predictions thousands of times, so "
    "it is exact at any size. The p-values are corrected for testing several groups at once: below 0.05, "
    "the group is miscalibrated beyond chance. Above it, the rows show no evidence that the predictions are "
    "off on average, too confident or not confident enough, which is not proof of calibration: the column "
    "*What the test says* says how large a miscalibration would have shown, and the test does not look at "
    "single ranges of predictions (the group's reliability curve and its bands do)."
)
GROUPS_TEST_HELP = (
    "The test of calibration: calibration in the large (is the mean outcome the mean prediction) and the "
    "slope (are the predictions too extreme or too timid), together Cox's test, with Spiegelhalter's z "
    "beside them; for a small group a Monte Carlo p-value (outcomes redrawn from the predictions). The "
    "p-values are corrected for the number of groups with Holm's method: below 0.05, the group is "
    "miscalibrated beyond chance."
)
#: Under the Groups table (audit 5: with 30 calibrated groups of 100-200 rows, some group's interval left
#: out 0 in 20 of 100 files; no sentence claims anything from them, but a reader scanning the column would).
GROUPS_INTERVAL_NOTE = (
    "Each group's ECE interval (*ECE 95 % from … to*) is that group's own, not adjusted for comparing many "
    "groups: among many calibrated groups, one of them or more often has an interval that leaves out 0 by "
    "chance (we simulated files of 30 calibrated groups of 100 to 200 rows each: about 1 file in 10 had such "
    "a group). Which groups are miscalibrated "
    "is what the test's column says, corrected for the number of groups."
)
GROUPS_CORRECTED_HELP = (
    "The ECE with the part that noise adds removed (the split estimate: the rows are cut into two random "
    "halves and a bin counts only where both halves err the same way). Noise makes every ECE look larger, "
    "more so the fewer rows a group has; this estimate is 0 on average for a calibrated group of any size, "
    "so groups of different sizes can be compared with it. Below 0 (e.g. -0.11): noise pushed the estimate "
    "under 0, as it does about half the time for a calibrated group, the more so the fewer its rows; read it "
    "as about 0, not as better than perfect. The value is kept as it is (the downloaded table too), since "
    "clipping it at 0 would bias it upward again."
)
GROUPS_VERDICT_HELP = (
    "What the corrected test supports. 'No evidence' comes with the shift (in points of probability) "
    "between the predictions and the observed frequency that the test would have found at least 80 % of "
    "the time at this group's size: smaller miscalibration could go unnoticed."
)
GROUPS_BY_HELP = (
    "A column of the file; the predicted class (rows by the class the model predicted); or each class "
    "against the rest (the probability of each class against whether the row is of that class, over all "
    "rows). Grouping by the true class is not offered: it selects rows by their outcome, so even a "
    "perfectly calibrated model would look miscalibrated in every group."
)
#: The rule of pbr_core.groups.default_group_column in numbers: a file of 16 subjects of ~31 rows each
#: (audit 13, item 11) was told "enough rows" without how many.
GROUPS_NO_DEFAULT = (
    f"No column of this file makes groups worth comparing by itself: that takes 2 to {_G.DEFAULT_MAX_LEVELS} "
    f"values, at least two of them with {_G.MIN_ROWS} rows or more, holding 80 % of the rows together (ids and "
    "per-row values give groups of a row or two; smaller groups can be chosen, with wide intervals). Pick a "
    "column, the predicted class, or a date column with *Dates* set to by week or by month."
)
#: What a bar outside its band does and does not show (audit 5: "a bar outside its band is a gap larger
#: than chance" was read per bar, and 18.4 % of calibrated groups of 100-200 rows had one).
BANDS_READING = ("One bar outside is not evidence by itself; more bars outside than chance puts there are. "
                 "Inside its band, a bar's gap may be noise.")
BANDS_HELP = (
    "The grey band of each bin is where its observed frequency would fall at least 90 % of the time if the "
    "predictions were calibrated, given the bin's rows (consistency bands, Bröcker & Smith 2007): about 1 "
    "bar in 10 falls outside by chance. " + BANDS_READING
)


def bands_caption(table) -> str:
    """How many bins fall outside their 90 % consistency band, and what that means."""
    outside, n_full = bins_outside(table)
    if n_full <= 1:  # no "0 of 1 bins" (audit 4, a slice of Adult whose rows all fell in one bin)
        if n_full == 0:
            return ""
        return (f"The one bin with rows lies {'outside' if outside else 'inside'} its 90 % consistency band (grey). "
                + BANDS_READING)
    return (f"{outside} of {n_full} bins with rows fall outside their 90 % consistency band (grey): if the "
            f"predictions were calibrated, at most about 1 in 10 would, by chance. " + BANDS_READING)


def group_bands_caption(counts: dict, name: str, what: str = "group", table=None, not_held=None) -> str:
    """The bands of one group's (or slice's) diagram: how many bars lie outside, and whether that is more
    than chance after correcting for the groups one can look through (``counts``:
    :func:`pbr_core.groups.bins_outside_by_group` of every group's diagram; ``what``: "group" or "slice").

    The Reliability page's count rule (:func:`pbr_core.significance.bins_outside_test`, its p below 0.05
    here), Holm-corrected over the groups: a bar outside its band is no finding by itself (18.4 % of calibrated groups of 100-200 rows had one,
    some group of every file of 30 such groups, audit 5).

    ``table``: the group's diagram. Where even every bin outside could not have been beyond chance
    (:func:`pbr_core.significance.bins_outside_smallest_p` at or above 0.05: a few bins holding rows),
    the caption says that the count cannot tell, never "no more than chance"; otherwise a count within
    chance says that it weighs neither how far a bar lies outside nor how many rows it holds, and names
    a bar outside that holds most of the rows.

    ``not_held``: for a slice that did not hold up, its verdict's corrected p-values and level
    (``p_holm``, ``rest_p_holm``, ``alpha``, whether ``p_holm`` is at its floor): a count beyond chance is
    then worded as what it is beside the verdict (:func:`_count_beside_verdict`), never "this slice's
    predictions are off" under a label that says it did not hold up (audit 13, item 8)."""
    from pbr_core.significance import bins_outside_smallest_p, p_words

    k, m, _, p_holm = counts[name]
    if m == 0:
        return ""
    many = sum(1 for v in counts.values() if v[1] > 0)
    corrected = f" after correcting for the {many} {what}s" if many > 1 else ""
    if m == 1:
        head = f"The one bin with rows lies {'outside' if k else 'inside'} its 90 % consistency band (grey)"
    else:
        head = f"{k} of {m} bins with rows fall outside their 90 % consistency band (grey)"
    if k == 0:
        said = "."
    elif p_holm < 0.05 and not_held is not None:
        said = _count_beside_verdict(f"{p_words(p_holm)}{corrected}", *not_held)
    elif p_holm < 0.05:
        said = (f": more than chance puts there ({p_words(p_holm)}{corrected}), so some ranges of this {what}'s "
                "predictions are off.")
    elif table is not None and bins_outside_smallest_p(table) >= 0.05:
        said = (f": with only {m} bins holding rows, this count cannot tell (even every bin outside would not be "
                f"beyond chance); read the bars themselves and the {what}'s own test.")
    else:
        said = (f": no more than chance puts there ({p_words(p_holm)}{corrected}); the count weighs neither how "
                f"far a bar lies outside nor how many rows it holds{_crowded_bar_outside(table)}.")
    tail = " If the predictions were calibrated, about 1 bar in 10 would fall outside by chance"
    if many > 1:
        tail += (f", and looking through {many} {what}s finds bars outside in some of them by chance: the count is "
                 f"corrected for the {many} {what}s, as the tests are.")
    else:
        tail += "."
    return head + said + tail


def _count_beside_verdict(count_p: str, p_holm: float, rest_p_holm: float, alpha: float, at_floor: bool) -> str:
    """The bins-outside count of a slice that did not hold up, beyond chance by itself (``count_p``), in
    words that keep to the verdict: the slice's two tests, corrected for every slice tested, decide
    whether it is a finding. Miscalibrated but not shown different from the rest: the rest of the file
    may be off the same way; not shown miscalibrated by its test: the count alone makes no finding."""
    from pbr_core.significance import p_words

    if p_holm < alpha:
        return (f": more than chance puts there ({count_p}), and its test finds it miscalibrated, but not calibrated "
                f"differently from the rest of the file ({p_words(rest_p_holm)} after correcting for the slices "
                "tested): the rest of the file may be off in the same way, so this is no finding about the slice.")
    return (f": more than chance puts there by this count alone ({count_p}), but the slice's own test of "
            f"miscalibration, which decides whether it holds up, finds nothing beyond chance "
            f"({p_words(p_holm, at_floor)} after correcting for the slices tested): the count alone does not make "
            "the slice a finding.")


def _crowded_bar_outside(table) -> str:
    """", and the bar outside holds 396 of the 402 rows" where a bar outside its band holds most rows."""
    if table is None or not len(table):
        return ""
    import numpy as np

    count = np.asarray(table["count"], dtype=np.float64)
    acc = np.asarray(table["accuracy"], dtype=np.float64)
    out = (count > 0) & ((acc < np.asarray(table["band_low"]) - 1e-12) | (acc > np.asarray(table["band_high"]) + 1e-12))
    if not out.any() or count[out].max() * 2 <= count.sum():
        return ""
    return f", and a bar outside holds {int(count[out].max()):,} of the {int(count.sum()):,} rows"


def group_verdict(p_corrected: float, shift: float, alpha: float, method: str = "", shift_drawn: bool = True,
                  rounded_rows: int = 0) -> str:
    """A group's test in a table cell: what it supports, in a few words (``shift_drawn=False``: a group
    too small to compare, whose detectable shift was not worked out, pbr_core.groups.shift_drawn;
    ``rounded_rows``: outcomes against a score of exactly 0 or 1 that the file's rounding may have made,
    tested within it rather than called impossible)."""
    from pbr_core.significance import shift_words

    if method.startswith("certain"):
        from pbr_core.resolution import COARSE_CAVEAT_MARK

        if COARSE_CAVEAT_MARK in method:  # coarse values: the 0 / 1 may be an export's rounding (audit 9b)
            return ("miscalibrated (an outcome it called impossible happened, unless the file's 0 and 1 are an "
                    "export's rounding: its scores have few decimals)")
        return "miscalibrated (an outcome it called impossible happened)"
    if p_corrected != p_corrected:
        return "not tested"
    rounded = (f" ({rounded_rows:,} wrong at a rounded 0 or 100 %)" if rounded_rows else "")
    if p_corrected < alpha:
        return "miscalibrated beyond chance" + rounded
    if not shift_drawn:
        return "no evidence; too few rows to say what would show"
    if shift != shift:  # none, however large, would show 80 % of the time
        return "no evidence; too few rows for any shift to show"
    return f"no evidence; a shift of {shift_words(shift)} would show"


#: The "?" of the Reliability page's test sentence (and a paragraph after it in the report): the test's
#: names, which the sentence itself says in plain words (audit 14, item 2).
OVERALL_TEST_HELP = (
    "The test of calibration over all rows: calibration in the large (is the mean outcome the mean "
    "prediction) and the slope (are the predictions too extreme or too timid), together Cox's test of "
    "calibration in the large and slope, with Spiegelhalter's z beside them; for few rows or rare events, a "
    "Monte Carlo p-value (outcomes redrawn from the predictions) instead. It needs no bins, and it does not "
    "look at single ranges of predictions."
)
#: The analytic test in plain words (audit 14, item 2: "Cox's test of calibration in the large and slope,
#: with Spiegelhalter's z" in the sentence itself).
OVERALL_TEST_PLAIN = "a test of whether the predictions are right on average and neither too extreme nor too timid"


def overall_test_sentence(test, table=None, names_in_help: bool = True) -> str:
    """The Reliability page's answer to "is this model calibrated?" (:func:`pbr_core.significance.verdict`),
    with the test in plain words (its names are in :data:`OVERALL_TEST_HELP`: the page's "?" when
    ``names_in_help``, a paragraph after it in the report otherwise); ``table``: the reliability table of
    the diagram above it (its bins outside their bands keep "no evidence" from reading as an all-clear,
    :func:`bands_beside_test`)."""
    from pbr_core.significance import NOT_LOCAL, verdict

    how = ("exact: outcomes redrawn from the predictions" if test.method.startswith("Monte Carlo") else
           test.method if test.method != "analytic" else
           OVERALL_TEST_PLAIN + ("; the test's name is in the help" if names_in_help else ""))
    if test.method.startswith("certain"):  # the verdict says what happened; no test was needed
        return f"**Is this model calibrated?** Over all {test.n:,} rows: {verdict(test)}"
    scope = f" {NOT_LOCAL}" if _no_evidence(test) else ""
    return (f"**Is this model calibrated?** Over all {test.n:,} rows: {verdict(test, scope_note=False)} ({how}.)"
            f"{scope}{bands_beside_test(test, table)}")


def groups_headline(report) -> str:
    """One line above the groups table: how many groups the corrected tests find miscalibrated."""
    from pbr_core.groups import group_label

    bad = [group_label(report, name) for name in report.miscalibrated]  # "fold = 0", not a bare "0"
    if not bad:
        return ("**No group shows evidence of miscalibration** at its size (corrected tests at 5 %); see the "
                "column *What the test says* for how large a miscalibration each test would have found.")
    shown = md_list(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    return (f"**{len(bad)} of {len(report.table)} groups are miscalibrated beyond chance** (corrected tests at 5 %): "
            f"{shown}.")
def groups_csv_help() -> str:
    """The Groups CSV download's "?": its columns keep the library's short names (scripts read them,
    ``pbr_core.groups.TABLE_COLUMNS``), so this says what each one is."""
    from pbr_core.groups import TABLE_COLUMN_MEANINGS

    return ("The table with the library's column names, for scripts: "
            + "; ".join(f"`{k}`: {v}" for k, v in TABLE_COLUMN_MEANINGS.items()) + ".")


def corrected_ece_cell(value: float) -> str:
    """An ECE without noise in a table cell: below 0 (noise pushed the estimate under 0, as it does about
    half the time for a calibrated group) written "≈ 0 (-0.0108: noise)", so that a reader never takes it
    for an error below zero; the estimate itself stays in the cell, the download and the report (clipping
    it at 0 would bias it upward)."""
    if value != value:
        return "–"
    return f"{value:.4f}" if value >= 0 else f"≈ 0 ({value:.4f}: noise)"


def groups_below_zero_note(groups: "list[str]") -> str:
    """Under the Groups table when some group's ECE without noise is below 0: why, in plain words."""
    return (f"*≈ 0* in *ECE without noise* ({md_list(list(groups)[:5])}{' and more' if len(groups) > 5 else ''}): "
            "the estimate came out below 0 (the number in brackets). It subtracts the part of the ECE that noise "
            "is expected to add, and for a group whose error is about 0 noise pushes it under 0 about half the "
            "time: read it as no error that this measure can tell from 0, not as better than perfect. The "
            "estimate is kept as it is in the downloaded table.")


GROUPS_SMALL_NOTE = (
    "Groups with fewer than {m} rows are marked *too few rows*: their reliability curve has only a few bins "
    "of a few rows, and their ECE is mostly noise. They stay in the table, and out of the largest gap."
)
GROUPS_NONE = (
    "This file has no other columns to group by. Columns such as a segment, a region, a model version or "
    "a date may stay in the file: they are kept next to the predictions (see the Data page). You can "
    "still group by the predicted class."
)
GROUPS_STREAM_NOTE = (
    "A dataset on the server: every row is measured (the page reads the dataset again for the columns you "
    "pick: once to count the groups, once to measure them). The numbers are those the whole file would give "
    "in memory; the intervals come from a bootstrap that weights the rows at random as they stream by "
    "(Poisson bootstrap), so they can differ slightly from a file's."
)

GROUPS_STREAM_PROMPT = (
    "Pick the column (or two) to group by, then **Measure the groups**: every one of the {n:,} rows of the "
    "dataset is read again for it, which takes a while on a large dataset."
)
GROUPS_STREAM_NOT_MEASURED = (
    "Not measured: on a dataset on the server, press *Measure the groups* on the Groups page first (it reads "
    "every row again)."
)
GROUPS_STREAM_STOPPED = "Stopped: the groups were not measured. Press *Measure the groups* to read the dataset again."
GROUPS_STREAM_BUTTON_HELP = "Reads the {n:,} rows of the dataset again: once to count the groups, once to measure them."


def groups_problem(message: str) -> str:
    """A library message about a grouping in the page's words (its choices, not Python arguments), as
    Markdown whose names (columns, groups) are literal text."""
    return md_message(message, [
        (re.escape("or a date with every='day', 'week' or 'month'"),
         "or a date column with *Dates* set to by day, week or month"),
        (re.escape("a wider bucket of dates (every='week' or 'month')"), "wider periods of time (*Dates* by week or by month)"),
        (re.escape("a wider bucket of dates (every='week')"), "wider periods of time (*Dates* by week)"),
        (re.escape("a wider bucket of dates (every='month')"), "wider periods of time (*Dates* by month)"),
        (re.escape("(or 'predicted class', or 'each class' alone)"), "(or the predicted class, or each class)")])


GROUPS_OVERLAY_CAPTION = (
    "One curve per group: each point is a bin of that group (its mean confidence and its observed rate). "
    "The closer to the dashed diagonal, the better calibrated the group. " + _sparse_bins_words()
)


def gap_sentence(report) -> str:
    """What the largest gap between groups supports (:func:`pbr_core.groups.gap_statement`, the sentence
    the CLI and the report say too), as literal Markdown text (group names are the user's)."""
    from pbr_core.groups import gap_statement

    return md(gap_statement(report))


# --------------------------------------------------------------------------- Groups page: find the slices
SLICES_INTRO = (
    "Which groups should you look at? The app can find them: it searches every other column of the file (text "
    "as it is, numbers in five bands of equal size, dates by month), each column alone and every pair of "
    "them, for the **slices whose calibration departs most from the rest** (women aged 25-34, a product line "
    "in one month), and reports only those that **hold up on rows the search never saw**: calibrated "
    "differently from the rest of the file there, and miscalibrated. A model wrong everywhere alike has no such "
    "slice: the whole file's verdict says so."
)
SLICES_BUTTON_HELP = (
    "Splits the rows at random into two halves: the search looks at one, the slices it proposes are tested "
    "on the other. About a second for 10,000 rows of 10 columns."
)
SLICES_STREAM_BUTTON_HELP = (
    "Reads the {n:,} rows of the dataset three times: to plan the slices, to search them and to test them."
)
SLICES_NONE = (
    "This file has no columns besides the predictions, so there is nothing to cut into slices. Columns such as "
    "a segment, a region, an age or a date may stay in the file: they are kept next to the predictions."
)
SLICES_DIAGRAM_LABEL = "One slice's reliability diagram (its held-out rows), beside the whole file's"


def _one_outcome_each(found) -> str:
    """Which value goes with which outcome, in words ("rows with grade Correct were always right; rows with
    grade Wrong or Unparseable were always wrong"), at most three values an outcome."""
    by_outcome: dict[str, list[str]] = {}
    for value, outcome in found.outcomes.items():
        by_outcome.setdefault(outcome, []).append(value)
    parts = []
    for outcome, values in by_outcome.items():
        shown = " or ".join(md(v) for v in values[:3]) + (f" (and {len(values) - 3} more values)" if len(values) > 3 else "")
        if found.outcome == "whether the prediction was right":
            then = f"the prediction was always {outcome}"
        elif found.outcome == "the label":
            then = f"the label was always {md(outcome)}"
        else:
            then = f"the true class was always {md(outcome)}"
        parts.append(f"where {md(found.column)} is {shown}, {then}")
    return "; ".join(parts)


def slices_left_out(report) -> list[str]:
    """One sentence per column the search left out because it restates the outcome (audit 9a: 'grade')."""
    return [f"**Left out {md(f.column)}**: each of its values goes with a single outcome on these rows ("
            f"{_one_outcome_each(f)}), so this column restates the outcome instead of describing the rows. Slices "
            f"by it would look miscalibrated whatever the model did, so the search does not use it."
            for f in report.restating]


def groups_outcome_warning(found) -> str:
    """The warning above the groups of a column that restates the outcome (it is measured all the same)."""
    return (f"**{md(found.column)} restates the outcome.** Each of its values goes with a single outcome on these "
            f"rows ({_one_outcome_each(found)}). A group that is always right, or always wrong, cannot match any "
            "confidence short of 100 % or 0 %, so these groups look miscalibrated whatever the model did: their "
            "tests and the largest gap below say nothing about the model. Group by something known before the "
            "outcome, such as a segment, a model or a date.")
#: The label when no slice held up: the slices offered are the search's proposals (audit 8: the diagram of
#: "region = North and amount from 71.66 to under 128.4" followed "No slice holds up" without a word).
SLICES_DIAGRAM_LABEL_PROPOSED = ("One slice the search proposed, which did not hold up: its reliability diagram (its "
                                 "held-out rows), beside the whole file's")
#: Under a slice's diagram when it did not hold up (its caption starts with it).
SLICES_NOT_HELD = ("Proposed by the search, this slice did **not** hold up on its held-out rows (it was not both "
                   "calibrated differently from the rest and miscalibrated beyond chance there): its diagram is here "
                   "to look at, not a finding.")
SLICES_DIAGRAM_HELP = (
    "The slice's diagram is drawn from its held-out rows only, those its test was made on: the rows the search "
    "looked at would exaggerate its gaps, since the search picks the largest. Grey bands: where each bar would "
    "fall 90 % of the time if the predictions were calibrated."
)
#: The slices table's columns measured on the held-out rows only (so named: the Groups table's figures
#: for the same rows are on all of them and differ a little).
SLICES_HELD_MEAN = "Mean predicted (held-out rows)"
SLICES_HELD_GAP = "Gap = predicted − observed (points, held-out rows)"
SLICES_HELD_REST = "Rest of the file: predicted − observed (points, held-out rows)"
#: The two corrected p-values of a slice: is it calibrated differently from the rest, is it miscalibrated.
SLICES_P_REST = "p-value: differs from the rest (corrected)"
SLICES_P_OWN = "p-value: miscalibrated (corrected)"
#: The help of the two gap columns: the sign, which the sentences say in words ("8.1 points too low").
SLICES_GAP_HELP = (
    "The mean prediction minus the observed frequency, in points: below 0 the predictions are too low (too "
    "cautious, for a confidence), above 0 too high (too confident). −8.1 here is what the sentences call "
    "“8.1 points too low”."
)
SLICES_HELD_SLOPE = "Calibration slope (held-out rows)"


def slices_held_rate(top: bool) -> str:
    return ("Accuracy" if top else "Frequency of y = 1") + " (held-out rows)"


SLICES_TABLE_HELP = (
    "Every slice the search proposed, in the order it chose them, tested on its held-out rows. Rows: all the "
    "slice's rows; every figure after Held-out rows is on the held-out rows only (the rows the search looked "
    "at would exaggerate the gaps), so it differs a little from the Groups table's, on all rows. Gap: mean "
    "prediction minus the observed frequency (predicted − observed), in points: below 0 the predictions are too "
    "low, above 0 too high. Calibration slope: "
    "1 is right, below 1 the predictions are too extreme, above 1 too timid. A slice that shares rows with "
    "one chosen before it (named in brackets) is measured on its other rows, and the rest it is compared with "
    "leaves out the slices chosen before it. A slice holds up when both p-values are below 0.05: it is "
    "calibrated differently from the rest (at the same predicted probabilities, its outcomes differ from the "
    "rest's), and it is miscalibrated. Both p-values are corrected for the number of slices tested (Holm's "
    "method)."
)
SLICES_RECAL_INTRO = (
    "Does recalibration close this slice's gap? In every fold the same test rows are scored uncalibrated, with "
    "**one recalibrator for everyone** and with **one for the slice and one for the rest** (the Compare page's "
    "protocol, with the slice as the group)."
)
SLICES_RECAL_SERVER = (
    "On a dataset on the server this comparison is not offered: it fits recalibrators on rows in memory, and the "
    "rows in memory are a random sample, which holds only a part of the slice."
)
#: The two groups of the per-slice recalibration.
SLICE_IN = "this slice"
SLICE_REST = "the rest"
SLICES_STOPPED = "Stopped: the slices were not searched. Press *Find the slices* to read the dataset again."


def slice_label(row) -> str:
    """A slice as a table cell shows it (plain text: a table cell is never Markdown)."""
    from pbr_core.slices import slice_words

    return slice_words(row)


def slices_headline(report) -> str:
    """What the search found, as literal Markdown text (slice names hold the file's values)."""
    from pbr_core.slices import slice_headline

    return md(slice_headline(report))


def slices_lines(report) -> list[str]:
    """One sentence per held-up slice (:func:`pbr_core.slices.slice_statements`), as literal Markdown text."""
    from pbr_core.slices import slice_statements

    return [md(line) for line in slice_statements(report) if line.startswith("Predictions for")]


def slices_guarantee(report) -> str | None:
    """How the search is guarded, as literal Markdown text; None when nothing was searched."""
    from pbr_core.slices import guarantee_statement

    words = guarantee_statement(report)
    return None if words is None else md(words)


def slices_searched(report) -> str:
    """Which columns were searched and how they were cut, and which were not and why."""
    from pbr_core.slices import searched

    cut = ", ".join(f"{md(c)} ({how})" for c, how in report.columns) or "none"
    out = (f"Columns searched: {cut}." if searched(report) or not report.columns else
           f"Columns cut, but no slice of them has {report.min_rows:,} rows: {cut}.")
    if report.skipped:
        out += " Not searched: " + "; ".join(f"{md(c)} ({md(why)})" for c, why in report.skipped) + "."
    for note in report.notes:
        out += f" Note: {md(note)}."
    return out


def slices_diagram_captions(report, name: str) -> tuple[str, str]:
    """Captions of a slice's diagram and of the whole file's."""
    from pbr_core.slices import overall_sentence

    row = report.table.set_index("slice").loc[name]
    from pbr_core.groups import bins_outside_by_group

    from pbr_core.significance import at_floor

    held = name in report.held_up
    lead = "" if held else SLICES_NOT_HELD + " "
    verdict = None if held else (float(row["p_holm"]), float(row["rest_p_holm"]), report.alpha,
                                 at_floor(row["p_value"], row["test_method"]))
    return (f"{lead}{md(name)}: {int(row['n_confirm']):,} held-out rows. "
            + group_bands_caption(bins_outside_by_group(report.diagrams), name, "slice", report.diagrams.get(name),
                                  not_held=verdict),
            md(overall_sentence(report)))


# --------------------------------------------------------------------------- Compare page: group gaps
GROUP_GAP_TITLE = "Does recalibration close the gaps between groups?"
#: A column box's first entry when no column is chosen for the user (Groups page, Compare's group gaps).
CHOOSE_COLUMN = "(choose a column)"
GROUP_GAP_CHOOSE = (
    "No column of this file makes groups worth comparing by itself (a few values, each with enough rows; "
    "ids give groups of one row): choose the column to group by."
)
GROUP_GAP_NO_COLUMN = (
    "This needs a column that groups the rows (a segment, a region, a model version...). The file "
    "has none besides the predictions; see the Groups page for what such a file looks like."
)
GROUP_GAP_CSV_HELP = (
    "One row per (fold, group, strategy): rows, test ECE, whether the group had too few rows for a "
    "recalibrator of its own, and whether it had enough test rows in that fold to be measured (else its ECE "
    "is empty)."
)


def group_gap_splits(n_re: int, seed: int) -> str:
    """Under the group gaps' controls: the comparison's splits they reuse."""
    return (f"The splits of the comparison above: n_re = {n_re:,}, split seed {seed}. Each fold fits one "
            "recalibrator for everyone and one per group.")


def group_gap_job_label(method: str, by: str) -> str:
    """The job's name: ``method`` (its label) for everyone against one per group of column ``by``."""
    return f"{method} for everyone vs per {by}"


GROUP_GAP_INTRO = (
    "Does recalibration close the calibration gaps between groups? In every fold the same test rows of each "
    "group are scored three ways: uncalibrated, with **one recalibrator for everyone** (fitted on the whole "
    "recalibration set) and with **one per group** (each fitted on its group's recalibration rows). A group "
    "with fewer than {m} recalibration rows keeps the one for everyone, and the table says so. A group with "
    "fewer than {t} test rows in a fold is not measured in that fold: its ECE on so few rows would be mostly "
    "noise, and the gap between the worst and the best group would be that noise."
)


def group_gap_unmeasured(groups: list[str], t: int) -> str:
    """The groups of a group-gap run that no fold measured (fewer than ``t`` test rows in each)."""
    names = ", ".join(md(str(g)) for g in groups[:12]) + (f" and {len(groups) - 12} more" if len(groups) > 12 else "")
    return (f"Not measured in any fold (fewer than {t} test rows each time), so not in the gap: {names}. "
            "A larger file, or fewer rows for the recalibration set, gives them more test rows.")
GROUP_GAP_CAPTION = (
    "Each group's test ECE, mean over folds (whisker: ± one standard deviation), with B = floor(n^(1/3)) of the "
    "group's test rows. A group's ECE on its own test rows is noisy, and on a small group biased upward, so the "
    "bars alone do not say whether a strategy closed the gap: the paired test below does."
)


def group_gap_verdicts(tests, n_folds: int) -> str:
    """Whether each strategy changed the largest gap between groups (``group_gap_tests``' rows), as
    the comparison of methods decides; or why no difference can be shown with this few folds."""
    from pbr_core.experiments import too_few_folds

    from pbr_core.significance import p_words

    head = ("**Did the gap change?** Each strategy's largest gap on the same folds, compared by the Compare page's "
            "paired test (corrected for folds that share rows and for the three comparisons; a second test, on "
            "the ranks of the folds' differences, must agree).")
    few = too_few_folds(n_folds)
    if few is not None:
        return head + " " + few.replace("between methods", "between strategies").replace(
            " and name a best method", "")
    if tests is None or len(tests) == 0:
        return head + " Fewer than two folds measured two groups or more: there is no gap to compare."
    lines = [head, ""]
    for r in tests.itertuples():
        if not r.n_folds:
            continue
        if isinstance(r.better, str):
            words = f"**{r.better.capitalize()}** leaves the smaller gap ({p_words(r.decisive_p)})"
        else:
            words = f"no difference shown ({p_words(r.decisive_p)})"
        lines.append(f"- {r.a.capitalize()} against {r.b}: largest gap {r.mean_a:.4f} against {r.mean_b:.4f} "
                     f"(mean over {r.n_folds} folds): {words}.")
    return "\n".join(lines)
GROUP_GAP_GAPS_HELP = (
    "Worst group's ECE minus best group's ECE, within each fold on the same test rows, then mean ± std over "
    "folds: the smaller, the more alike the groups are calibrated."
)


# --------------------------------------------------------------------------- estimators (Reliability, Bins & bias)
BINNING_HELP = (
    "Equal width: B bins of the same width, (0, 1/B], ..., the paper's ECE (the number on the card). Equal "
    "mass: B bins holding the same number of rows each, finer where most rows are (a confident model puts "
    "most of them near 1). The card's ECE stays the paper's."
)
SMOOTH_HELP = (
    "A kernel average of the outcome around each confidence, instead of bins (Blasiok & Nakkiran 2023); the "
    "window's width sigma is the smooth ECE's own bandwidth (the legend gives it). Shaded: at each confidence, "
    "a 95% interval for the smoothed curve (the outcome frequency averaged over that window), not for the true "
    "calibration curve, which it can miss where the curve bends; one point at a time, not the whole curve at "
    "once. Drawn where there are rows."
)
EQUAL_MASS_CAPTION = (
    "Equal-mass bins: {B} bins of about the same number of rows; their ECE is {ece:.4f} (the card shows the "
    "paper's equal-width ECE)."
)
ESTIMATORS_INTRO = (
    "The same predictions, measured the ways people do. The paper's binned ECE is this dashboard's number; "
    "the others are shown so that a number from elsewhere can be matched, and each row says in one line why it "
    "differs. The debiased and the smooth ECE estimate the calibration error with less bias from the "
    "binning noise."
)
ESTIMATORS_CAPTION = (
    "netcal, torchmetrics, scikit-learn and relplot are computed here with each library's own conventions "
    "(checked against the packages in the tests); scikit-learn's calibration_curve is for binary data only."
)
CONVENTION_COLUMNS = {"convention": "Estimator or library (default settings)", "measures": "What it measures",
                      "bins": "Bins", "ece": "ECE", "difference": "How it differs from the paper's ECE"}
ESTIMATORS_SIM_INTRO = (
    "**Which estimator to trust?** On **simulated** data, where the true calibration error is known "
    "(confidences spread evenly over 0.5 to 1, a model over-confident by up to {shift:.2f} at confidence 1: "
    "TCE = {tce:.3f}), each estimator is computed on many data sets of each size n. Binned estimators are "
    "biased upward on few rows (each bin's noise only ever widens its gap); the debiased ECE removes most "
    "of that bias; all of them approach the truth as n grows."
)
ESTIMATORS_SIM_CAPTION = (
    "Simulated data, not your file. Lines: the mean estimate over {repeats} simulated data sets per n; bands: "
    "± one standard deviation (how much one data set's estimate moves). Dashed: the true calibration error."
)


MAP_SCORES_INTRO = (
    "Calibration is about probabilities, so a score on another scale (a risk decile 1-10, a margin, a credit "
    "score) cannot be measured as it is. What can be audited is whether it **can be turned into calibrated "
    "probabilities**: a monotone map from score to probability is fitted on a random share of the rows, and "
    "every page then measures the **other** rows, which the map has not seen."
)
MAP_SCORE_HELP = (
    "The column of the model's scores (a risk decile, a margin, a credit score). An identifier (a person or "
    "row number) is refused: a map from it would fit row numbers, not the model."
)
class MapNote(NamedTuple):
    """Why a box of the map panel is left empty; ``nothing_to_map``: no column of the file can be the
    outcome, so the button is off (no choice of the user's could make the map work)."""

    text: str
    nothing_to_map: bool


def map_columns_note(score: str | None, outcome: str | None, two: list[str] | None,
                     n_classes: int | None) -> MapNote | None:
    """The map panel's plain sentence when it offers no score or no outcome column, or None.

    ``two``: the file's columns of exactly two values (None: not known, a file that is no table);
    ``n_classes``: the class count of a multiclass file that loaded (its probabilities need no map)."""
    if two is not None and not two:
        if n_classes:
            return MapNote(f"This file already loaded as the model's predictions for its {n_classes} classes, and "
                           "none of its columns holds exactly two values to be the outcome a score predicts: there is "
                           "nothing here to map.", True)
        return MapNote("No column of this file holds exactly two values (0 and 1, yes and no), so none can be the "
                       "outcome the scores predict: the map needs one.", True)
    parts = []
    if outcome is None and two:
        parts.append(f"Several columns hold two values ({', '.join(md(repr(c)) for c in two[:6])}): choose the "
                     "one the scores predict as the outcome.")
    if score is None:
        parts.append("No column looks like scores to map (numbers of more than two values that are not an "
                     "identifier, a split, a date or a count): choose the column of the model's scores.")
    return MapNote(" ".join(parts), False) if parts else None


MAP_CHOOSE_FIRST = "Choose the score column and the outcome column first."

MAP_SCORES_HINT = (
    "If a column holds scores on another scale than probabilities (a risk decile, a margin), open *My scores "
    "are not probabilities* under the reading options: the page can map them to probabilities on part of the "
    "rows and audit the rest."
)


SERVER_DATA_INTRO = (
    "Prediction logs too large to upload, in a folder on this server: a Parquet or CSV file, a folder of "
    "them, or a pattern such as `logs/2026-*/*.parquet`, relative to the data folder below. The whole "
    "dataset is read once, batch by batch (never all in memory): Reliability and Bins & bias use every "
    "row; PBR, Compare and Fit & apply use a random sample."
)


# --------------------------------------------------------------------------- Bins & bias page
BINS_TITLE = "Bins & bias"
BINS_TEACHING_TITLE = "**Teaching: how do the ECE and the bound move with n?**"
ESTIMATORS_SIM_TITLE = "Which estimator to trust? Simulated data with a known truth"
SIM_SHIFT_HELP = "0: a perfectly calibrated model (TCE = 0)."


def bins_intro(what: str) -> str:
    """The Bins & bias page's first paragraph; ``what`` is what the metrics measure (``MetricView.what``)."""
    return ("The ECE depends on the number of bins B. The paper's Theorem 1 says how far the measured ECE "
            "can be from the **true calibration error (TCE)** and which B makes that distance smallest. "
            f"Measured on {what}.")


def subset_all_rows(rows: int) -> str:
    return f"Using all {rows:,} rows. Move the slider left to see a smaller test set."


def subset_caption(n_sub: int, rows: int, seed: int) -> str:
    return (f"Using a random subset of {n_sub:,} of {rows:,} rows (subset #{seed}). "
            "The grey line is the ECE on all rows, for comparison.")


def theorem1_card_helps(b_opt: int, n: int, lipschitz: float, eps: float, bound_min: float) -> tuple[str, ...]:
    """The help of Theorem 1's four cards (``tables.theorem1_cards``' order)."""
    return (ECE_HELP, f"At B = {b_opt}, n = {n:,}, L = {lipschitz:g}, ε = {eps:g}.",
            "ECE ± bound at B = floor(n^(1/3)), cut to [0, 1]: where the TCE lies with probability at least 1 − ε.",
            f"The B with the smallest bound (± {bound_min:.4f}) for this n, L and ε.")


def bound_says_nothing(n: int) -> str:
    return (f"With n = {n:,} rows the bound is at least 1 for every B, so it says nothing yet: the "
            "true calibration error always lies between 0 and 1. It shrinks like n^(-1/3); try a larger n.")


def b_min_beyond_chart(b_min: int) -> str:
    return f"The bound-minimising B = {b_min} lies beyond the chart: raise 'Largest B shown'."


# --------------------------------------------------------------------------- Generalization page
GEN_TITLE = "Generalization: KL against ECE gap"
GEN_TOO_FEW_ROWS = "This needs at least 4 rows (two disjoint sets of at least 2)."
CHOOSE_AN_ALPHA = "Choose at least one α."
PER_ALPHA_TITLE = "**Per α, mean over folds**"
GEN_CSV_HELP = ("One row per (α, fold): KL, ECE on both sides, gap, Corollary 1 bound, fit time. "
                + FOLDS_CSV_HELP)


def gen_plan(n_alphas: int, n_folds: int, device: str) -> str:
    return (f"{n_alphas * n_folds} GP fits on {device} ({n_alphas} α values × {n_folds} folds); "
            "the paper uses 8 × 10 with n_re = 1000.")


def gen_rows_too_few(n_re: int, n: int) -> str:
    return f"n_re = {n_re:,} needs 2 × n_re ≤ n = {n:,} rows."


def gen_job_label(n_alphas: int, n_folds: int, n_re: int) -> str:
    return f"KL vs ECE gap, {n_alphas} α × {n_folds} folds (n_re = {n_re:,})"


def gen_failed_fits(n_failed: int, shown: Iterable[tuple[float, int, str]]) -> str:
    """``n_failed`` fits failed; ``shown``: the first few as (alpha, fold from 0, error)."""
    return f"{n_failed} fits failed and are left out: " + "; ".join(
        f"α = {alpha:g} fold {fold + 1}: {md(error)}" for alpha, fold, error in shown)


# --------------------------------------------------------------------------- Groups page (the page's own lines)
GROUPS_BY2_HELP = "Two columns give every combination of their values."
GROUPS_EVERY_HELP = "For a date or time column: calibration over time, so that a drift after a deployment shows."
GROUPS_STOP_HELP = "Stops reading the dataset; nothing measured so far is kept."
def groups_curves_drawn(drawn: list[str], flagged: Iterable[str], n_groups: int) -> str:
    """Which groups' curves the overlay draws when it cannot draw them all (``n_groups`` with enough rows):
    the flagged ones first, then the largest (:func:`pbr_core.plot.diagrams.overlay_groups`)."""
    bad = [g for g in drawn if g in set(flagged)]
    why = (f"the {len(bad)} miscalibrated beyond chance" + (f", then the {len(drawn) - len(bad)} largest"
                                                            if len(drawn) > len(bad) else "")
           if bad else "the largest")
    return (f"The curves of {len(drawn)} of the {n_groups} groups ({why}; the table lists every group): "
            f"{md_list(drawn)}.")


def groups_every_chosen(every: str, min_rows: int, max_groups: int) -> str:
    """Which period the page chose for a date column (pbr_core.groups.default_every), and why."""
    return (f"Dates are grouped **{every}**, chosen from the data: the finest of by day, by week and by month that "
            f"gives at most {max_groups} groups, half of them or more with {min_rows} rows or more (by month when none "
            "does). Choose another period under *Dates*.")


def groups_small_note(small: list[str], m: int, date_as_is: bool) -> str:
    """The groups with too few rows, sorted, the first 10 named; for a date grouped as it is, the advice
    to group it by week or month (a day each is rarely enough rows)."""
    names = sorted(small)
    shown = md_list(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    advice = (" The column is a date, grouped by its values as they are: set *Dates* to by week or by month "
              "for groups of enough rows." if date_as_is else "")
    return GROUPS_SMALL_NOTE.format(m=m) + f" Here {len(names)}: {shown}." + advice
SLICES_TITLE = "Find the slices"
SLICES_STOP_HELP = "Stops reading the dataset; nothing found so far is kept."
SLICES_UNREADABLE = ("Cannot search for slices: the data could not be read again. Read it again on the Data page; if "
                     "this persists, the server's log has the details.")
SLICES_WHOLE_FILE_TITLE = "**The whole file**"


#: The Groups table's column of each group's outcome rate, by ``GroupReport.measures``: grouped by each
#: class, the rate is the class's frequency (p_k against 1[y = k]), not an accuracy (audit 10a).
GROUPS_RATE_COLUMN = {"positive": "Frequency of y = 1", "top_label": "Accuracy",
                      "each class": "Frequency of the class"}
#: What the Groups page measures when it is grouped by each class (the page's metric view says top label).
GROUPS_EACH_CLASS_WHAT = ("each class's predicted probability against whether the row is of that class "
                          "(one class against the rest)")


def groups_what(measures: str, what: str) -> str:
    """What the group table measures: ``what`` (``MetricView.what``), except each class against the rest."""
    return GROUPS_EACH_CLASS_WHAT if measures == "each class" else what


def groups_axis_titles(measures: str, x_title: str, y_title: str) -> tuple[str, str]:
    """(x, y) axis titles of the groups' reliability curves: the view's (:func:`axis_titles`), except each
    class against the rest (a class's probability against how often the rows are of that class)."""
    if measures == "each class":
        return "Predicted probability of the class", "Observed frequency of the class"
    return x_title, y_title


def groups_measured_on(what: str, n_total: int | None, by: Iterable[object], every: str, n_groups: int) -> str:
    """What the group table measures: ``what`` (``MetricView.what``), over every row of a server dataset
    (``n_total``), grouped by ``by`` (user column names), by period ``every`` (its words, or "")."""
    rows = f" of all {n_total:,} rows of the dataset" if n_total is not None else ""
    return (f"Measured on **{what}**{rows}, grouped by **{md_list(by, ' × ')}**"
            + (f" ({every})" if every else "") + f": {n_groups} groups.")


def cannot_group(by: Iterable[object], problem: str) -> str:
    """The grouping was refused; ``problem`` is ``groups_problem``'s sentence."""
    return f"Cannot group by {md_list(by, ' and ')}: {problem}"


def cannot_group_unreadable(by: Iterable[object]) -> str:
    return (f"Cannot group by {md_list(by, ' and ')}: the data could not be read again. Read it again on the "
            "Data page; if this persists, the server's log has the details.")


def largest_gap(report) -> str:
    return "**Largest gap.** " + gap_sentence(report)


def cannot_search_slices(message: str) -> str:
    """The slice search was refused; ``message`` is the library's (quoted as literal text)."""
    return f"Cannot search for slices: {md_message(message)}"


def bullet(line: str) -> str:
    """One Markdown list item of a sentence already in Markdown (``slices_lines``)."""
    return f"- {line}"


def slice_title(name: str, held_up: bool = True) -> str:
    """A slice's name (user values) as the bold title of its diagram; one that did not hold up says so."""
    return f"**{md(name)}**" + ("" if held_up else " (proposed by the search; did not hold up)")


def slice_recal_intro(name: str) -> str:
    return f"**Does recalibration close the gap of {md(name)}?** " + SLICES_RECAL_INTRO


def slice_gap_job_label(method: str, name: str) -> str:
    """The job's name: ``method`` (its label) for everyone against one for the slice ``name``."""
    return f"{method} for everyone vs for {name}"


# --------------------------------------------------------------------------- PBR page (the page's own lines)
PBR_TITLE = "PBR recalibration"
PBR_INTRO = (
    "Recalibrate the loaded model with **PAC-Bayes recalibration** (the paper's Section 5.2): a Gaussian "
    "process reshapes the predicted probabilities, fitted to minimise the Brier score plus α times the "
    "KL divergence from its prior. The fit uses a random **recalibration set** of n_re rows; everything "
    "shown is measured on the other rows (the **test part**)."
)
DEVICE_TITLE = "**Device**"
CV_FOLDS_HELP = "k of the k-fold cross-validation inside the recalibration set."
CV_SCORE_HELP = "What the held-out part is scored with (ECE with B = floor(n_val^(1/3)) by default)."
GP_NO_ALPHA = "GP calibration has no α: its objective is cross-entropy + KL/n (α = 1, no Brier term)."
ECE_BEFORE_HELP = "The uncalibrated model on the same test rows."
BOUNDS_TITLE = "What the PAC-Bayes bounds guarantee"
NO_KL_NO_BOUNDS = "This method reports no KL divergence, so the paper's bounds do not apply to it."
COROLLARY1_CARD_HELP = ("Average over maps V drawn from the posterior ρ of |E ECE(fresh data of n rows) − "
                        "ECE(recalibration rows)|.")
COROLLARY2_CARD_HELP = ("Average over maps V drawn from the posterior ρ of the total bias |TCE − ECE|: the "
                        "binning bias (1+L)/B plus the KL-dependent estimation term.")
RECALIBRATOR_JSON_HELP = ("Load it in Python with pbr_core.recalibrators.load_recalibrator(path) and call "
                          ".predict_proba(logits) on new predictions of the same model.")


def device_line(device: str) -> str:
    return f":material/memory: {device}"


def pbr_split(n_re: int, n: int) -> str:
    return f"Fit on **{n_re:,}** rows, test on **{n - n_re:,}** rows."


def recal_too_long(labels: list[str], k: int, n: int, seconds: float, limit: float, folds: int = 1,
                   fits_per_fold: int = 1) -> str:
    """A run of K^2 fits (matrix scaling, Dirichlet calibration, SMS) refused for its estimated time
    (``fit_estimate.recal_run_seconds``), with what to do instead. ``fits_per_fold`` > 1: each fold fits
    several sets of rows (the sweep's n_re values, a group-gap run's groups), of at most ``n`` rows."""
    from dashboard.fit_estimate import _words

    what = " and ".join(labels)
    runs_ = f" over {folds:,} folds" if folds > 1 else ""
    if fits_per_fold > 1:
        runs_ = f" ({fits_per_fold:,} fits{' per fold' if folds > 1 else ''}){runs_}"
        n_words = f"up to {n:,} rows"
    else:
        n_words = f"{n:,} rows"
    fewer = "fewer folds, " if folds > 1 else ""
    return (f"{what} fit{'s' if len(labels) == 1 else ''} a {k:,} × {k:,} matrix here: on {n_words}{runs_} that "
            f"would take about {_words(seconds)} (estimated), more than the {_words(limit)} this server allows "
            f"for one run. Choose vector scaling or temperature scaling instead, which fit {k:,} numbers or one "
            f"and take seconds, or use {fewer}fewer rows or a file with fewer classes.")


def recal_too_many_classes(labels: list[str], k: int, limit: int) -> str:
    """A K^2 fit refused for its number of classes, whatever the rows (``fit_estimate.RECAL_MAX_CLASSES``)."""
    what = " and ".join(labels)
    return (f"{what} fit{'s' if len(labels) == 1 else ''} a {k:,} × {k:,} matrix here, more than this server fits "
            f"(up to {limit:,} classes): its memory and time grow with the square of the classes. Choose vector "
            f"scaling or temperature scaling instead, which fit {k:,} numbers or one and take seconds.")


def saved_too_large(name: str, size: str, limit: str) -> str:
    """A saved recalibrator upload refused unread for its bytes (``recal_ui.SAVED_MAX_BYTES``)."""
    return (f"{name}: {size}, more than the {limit} a recalibrator file may be here; it was not read. A file "
            f"written by this page or `pbr-calib fit` for data this page can use is smaller (matrix scaling on "
            f"1,000 classes, the largest, is about 21 MB).")


def saved_too_many_classes(name: str, label: str, k: int, limit: int) -> str:
    """A saved K^2 recalibrator refused for its declared classes (before it is parsed where it says so first)."""
    return (f"{name}: a saved {label} of {k:,} classes, more than the {limit:,} classes this page applies for "
            f"that method (a {k:,} × {k:,} matrix). Fit vector scaling or temperature scaling instead, which "
            f"apply to any number of classes.")


def estimate_caption(sentence: str) -> str:
    """A short fit's time estimate (``fit_estimate``'s sentence) as a caption."""
    return f":material/schedule: {sentence}"


def prior_split_caption(n_prior: int, n_re: int) -> str:
    return (f"The prior is chosen on {n_prior:,} of the {n_re:,} recalibration rows; the posterior and "
            f"the bounds use the other {n_re - n_prior:,}.")


def pbr_job_label(method: str, uses_alpha: bool, alpha: float | None, n_re: int) -> str:
    """The job's name: ``method`` (its label), its α (fixed, or chosen by CV; None) and n_re."""
    what = method
    if uses_alpha:
        what += f", α = {alpha:g}" if alpha is not None else ", α chosen by CV"
    return f"{what} (n_re = {n_re:,})"


#: The PBR page's "ECE after" card, whose change is tested both ways (``PBRRun.worse_shown`` / ``better_shown``).
ECE_CARD_COLOUR_BOTH = (
    " The change under the value is red when these rows show the ECE higher after beyond the two ECEs' own "
    "noise, green when they show it lower beyond that noise, and grey otherwise: a change of ECE alone is not "
    "a test (on a few hundred rows it goes either way by chance)."
)


def ece_after_help(before: float, n_bins: int, n_te: int) -> str:
    return ECE_HELP + f" Before: {before:.4f}. B = {n_bins} bins on {n_te:,} test rows." + ECE_CARD_COLOUR_BOTH


def fit_details(device: str, alpha: float | None, alpha_by_cv: bool, draws: str | None, stop_reason: str | None,
                converged: bool) -> str:
    """The caption under a fit's cards: its device (from the fit report), α (chosen by CV or not) and, in
    plain words, whether the fit converged; then, for experts, the Monte Carlo draws (the library's
    description) and the optimiser's own stop reason (a user audit: "stopped: tolerance (L-BFGS: gradient
    or objective change)" and "32 Monte Carlo draws per entry" said nothing to most readers)."""
    extra = [f"device: **{md(device)}**"]
    if alpha is not None:
        extra.append(f"α = **{alpha:g}**" + (" (chosen by cross-validation)" if alpha_by_cv else ""))
    if stop_reason:
        extra.append(FIT_CONVERGED if converged else FIT_NOT_CONVERGED)
    details = []
    if draws:
        details.append(f"{draws} (the fit averages its objective over that many random draws)")
    if stop_reason:
        details.append(f"optimiser's stop reason: {fit_words(stop_reason)}")
    return " · ".join(extra) + (f"  \nDetails: {'; '.join(details)}." if details else "")


#: fit_details' plain words on whether the optimiser converged.
FIT_CONVERGED = "the fit stopped because it had converged"
FIT_NOT_CONVERGED = "the fit stopped before it had converged (see the details)"


def fit_warning(warning: str) -> str:
    return f":material/warning: {fit_words(warning)}"


def bounds_caption(n: int, n_bins: int, kl: float, eps: float, lipschitz: float, ece_re: float) -> str:
    return (f"n = {n:,} rows, B = floor(n^(1/3)) = {n_bins} bins, KL = {kl:.4g}, "
            f"ε = {eps:g}, L = {lipschitz:g}. ECE on these rows after the fit: {ece_re:.4f}.")


def result_title(method: str) -> str:
    """A recalibration result's heading (PBR, Fit & apply)."""
    return f"Result: {method}"


def alpha_choice_title(alpha: float) -> str:
    return f"Automatic choice of α: α = {alpha:g}"


def pbr_predictions_help(data_name: str, method: str, fit_column: str, n_re: int, n_te: int,
                         as_written: bool = True, written_as: "CsvDialect | bool" = False) -> str:
    """The calibrated-predictions download of the PBR page: what its columns are, which rows to score,
    how it is written (:func:`download_format_words`)."""
    return (f"Every row of {md(data_name)} recalibrated by the fitted {method}, under your file's own "
            f"column names and order: {calibrated_columns_words(as_written)}, and a last column "
            f"*{fit_column}*: True for the {n_re:,} recalibration rows "
            f"it was fitted on, False for the {n_te:,} rows of the test part. Score it only "
            "on the False rows. Reads back on the Data page. " + download_format_words(written_as))


# --------------------------------------------------------------------------- Reliability page (the page's own lines)
ONE_ROW_ONE_BIN = "One row only: B = 1."
CLASSWISE_EXPANDER = "Classwise ECE (every class, not only the predicted one)"
CLASSWISE_INTRO = (
    "For each class k the same binned ECE is computed on the predicted probability of k "
    "against whether the label is k, over all rows; the headline number is their average. "
    "It catches miscalibration that the top-label ECE cannot see (e.g. on second choices)."
)
WORST_CLASSES_TITLE = "**Per-class ECE, largest first**"
#: Under the per-class table: the order is not a test (audit 5: on outcomes drawn from CIFAR-10's and
#: CIFAR-100's own probabilities, every class calibrated, two draws ranked the classes with a rank
#: correlation of only 0.42-0.48, and the top class's ECE was 1.5-2.4 times the median).
CLASSWISE_NOT_A_TEST = (
    "Not a test: each class's ECE is measured on few informative rows and is noisy, so on a calibrated model "
    "too some class comes first, and the order is no evidence that one class is calibrated worse than another. "
    "To test each class, corrected for testing all of them at once, group by **each class** on the Groups page."
)
ESTIMATORS_EXPANDER = "Other estimators, and the ECE other libraries would report"
#: What the Reliability page computes on a server dataset's sample (``server_sample_note``'s ``what``).
RELIABILITY_ON_SAMPLE = "the equal-mass bins, the smoothed curve and the other estimators"


def reliability_intro(what: str, name: str, rows: int) -> str:
    return (f"How well does the confidence match reality? Measured on **{what}** for "
            f"**{md(name)}** (n = {rows:,}).")


def bins_slider_label(default: int) -> str:
    """The Reliability slider's label: the default in words (audit 14 G: "floor(n^(1/3))" in a label),
    the formula being in the Bins & bias page's text."""
    return f"Number of bins B (default {default}: the paper's choice, the cube root of n rounded down)"


# --------------------------------------------------------------------------- Data page (the page's own lines)
DATA_INTRO = ("Load the predictions of a classifier on a test set: a bundled sample or your own file. "
              "The other pages then show how well calibrated the model is.")
NOTHING_LOADED = "Nothing is loaded yet."
BUNDLED_SAMPLES_TITLE = "Bundled samples"
YOUR_FILE_TITLE = "Your file"
TEMPLATES_CAPTION = "Download a template: a small example file in each accepted layout."
LOAD_FIRST = "Load a file first: its columns will be listed here."
MAP_SHARE_HELP = ("Drawn at random; the other rows are audited. More rows for the map: a steadier map, "
                  "fewer rows to audit it on.")
#: The Data page's warning on a file whose rows all have the same true label ({name}: the class, in Markdown).
ONE_CLASS_WARNING = ("Every row's true label is the same class (**{name}**). Calibration is then measured against "
                     "that one outcome only, and a recalibrator fitted on these rows learns to predict only that "
                     "class. If the file should hold all outcomes, check how it was exported (a filter?).")
ROWS_HELP = "Number of predictions (test examples)."
CLASSES_HELP = "Number of classes the model chooses from."
DATA_ACCURACY_HELP = "Share of rows where the predicted class is the true class."
KIND_HELP = ("multiclass: full probability vectors; binary: p(y=1) and a 0/1 label; "
             "top-label: only confidence, predicted and true label (enough for ECE, not for recalibration).")
FIRST_ROWS_TITLE = "**First rows, as read**"


def samples_help(folder: str) -> str:
    """The samples' help; ``folder``: where the app reads them (``state.sample_folder()``: ``sample_data``
    in a clone, ``dashboard/sample_data`` in an installed wheel)."""
    return f"Test-set predictions of real models (see {folder}/SOURCES.md for origin and license)."


def samples_caption(n: int, folder: str) -> str:
    """How many samples there are and where (``folder``: as for :func:`samples_help`)."""
    return f"{n} files in {folder}/; their origin and license are in {folder}/SOURCES.md."


def server_folder_caption(folder: str) -> str:
    """The operator's data folder (its last part), as the server section names it."""
    return f"Data folder: `{folder}/` (set by the operator; nothing outside it can be opened)."


def read_stopped_note(name: str, at_start: bool = False) -> str:
    """``at_start``: the data in use is the bundled sample loaded on first start, not one the user chose."""
    kept = "the bundled sample shown at start stays in use" if at_start else "the data loaded before stays in use"
    return f"Stopped reading {md(name)}: nothing of it was kept; {kept}."


def load_failed(file_name: str, message: str, hints: list[str], kept: str | None, at_start: bool = False) -> str:
    """A file that could not be loaded: its name, the loader's message (already for the page), the
    hints that apply, and the data still in use (its name) if any; ``at_start``: that data is the
    bundled sample loaded on first start (a new user never loaded it: "loaded before" would puzzle)."""
    before = "The bundled sample shown at start" if at_start else "The data loaded before"
    still = f"{before} (**{md(kept)}**) is still in use." if kept else ""
    return "\n\n".join([f"Could not load **{md(file_name)}**: {message}", *hints, still]).strip()


def loaded_title(name: str) -> str:
    return f"Loaded: {md(name)}"


def scores_read_as(input_type: str, log_odds: bool = False, mapped: str | None = None) -> str:
    """How the score columns were read: logits (turned into probabilities) or probabilities;
    ``log_odds``: one column of the log-odds of class 1 (the logistic function, not a softmax); ``mapped``:
    the score column that was mapped to probabilities (``pbr_core.scores.map_scores``): it was not read as
    probabilities, and saying so right under "… mapped to probabilities" would contradict it (audit 14, A)."""
    if mapped:
        return (f"The score column **{md(mapped)}** was not read as probabilities: it was **mapped to "
                "probabilities** by a map fitted on part of the rows (below, what the loader decided).")
    if log_odds:
        return ("The score column was read as **the log-odds of class 1** (turned into a probability with the "
                "logistic function, 1 / (1 + exp(−x))).")
    scores = "logits (turned into probabilities with a softmax)" if input_type == "logits" else "probabilities"
    return f"The score columns were read as **{scores}**."


def loader_notes(notes: Iterable[str]) -> str:
    """What the loader decided, as a Markdown list of its notes (each made fit for the page)."""
    return "**What the loader decided**\n\n" + "\n".join(f"* {for_the_page(n)}" for n in notes)


def columns_expander(n: int) -> str:
    return f"Every column and what it was used as ({n} columns)"


def preview_classes_caption(shown: int, total: int) -> str:
    return f"Showing {shown} of {total} class columns."


# ---------------------------------------------------------------------- serving (dashboard/serving.py)
#: What Streamlit's default of each setting of dashboard.serving.SAFE_SETTINGS would do here.
SERVING_DEFAULTS = {
    "server.address": "answer on every network interface of the server (the dashboard has no login)",
    "client.showErrorDetails": "show error details (tracebacks, server paths) in the browser",
    "browser.gatherUsageStats": "send usage statistics to Streamlit",
}
SERVING_UNSAFE = (
    "This dashboard was started without its safety settings, so it does not open. Its settings file "
    "(`.streamlit/config.toml`, also beside `dashboard/app.py`) was not read, and Streamlit's defaults would:\n\n"
    "{problems}\n\nStart it from the project's folder (`streamlit run dashboard/app.py`), or give each setting "
    "on the command line (for instance `--server.address localhost --client.showErrorDetails none "
    "--browser.gatherUsageStats false`). The README's *Serving* section says how to serve a team."
)
HOST_REFUSED = (
    "This dashboard does not answer to the address *{host}*. Open it under the name it is served under "
    "(for instance http://localhost:8501). To serve it under another name, the operator lists the name in "
    "`PBR_CALIB_ALLOWED_HOSTS` (README, *Serving*)."
)



def serving_unsafe(keys: "Iterable[str]") -> str:
    """Why the app refuses to open: the settings left at Streamlit's default and what each would do."""
    return SERVING_UNSAFE.format(problems="\n".join(f"- `{k}`: {SERVING_DEFAULTS[k]}" for k in keys))


# --------------------------------------------------------------------------- files too large for memory
#: After "Could not load FILE: " when the user pressed "Stop reading" while an upload was read in a stream.
UPLOAD_READ_STOPPED = "you stopped reading it; nothing of it was kept."
#: Shown while a big read waits for another session's big read to finish (dashboard.state.big_read_turn).
WAITING_FOR_READ_TURN = ("Another large file is being read on this server; this one is read as soon as that "
                         "read is done (one large read at a time keeps the server's memory for everyone).")


def too_large(exc) -> str:
    """Why an upload over the server's read limits (pbr_core.loading.ReadLimitError) was not read, and
    what to do, in a user's words (after "Could not load FILE: ")."""
    if exc.kind == "cell":
        return (f"{exc.finding}. Remove or shorten that column (in your spreadsheet program, say) and upload the "
                "file again.")
    if exc.streamable:  # a CSV or Parquet file that this server does not read in a stream either
        return (f"{exc.finding}. This server does not read uploads that large, not even in a stream: upload a "
                f"random sample of the rows, or {_ADMIN_ADVICE}")
    return (f"{exc.finding}. Files that large are read only in a stream, which works for CSV and Parquet files: "
            f"save the data as CSV or Parquet and upload that, or upload a random sample of the rows. (The server's "
            "administrator sets these limits.)")


_ADMIN_ADVICE = ("ask the server's administrator to put the file in the server's data folder (it is then read as a "
                 "dataset on the server).")


def too_many_rows_to_stream(exc, rows: int, limit: int, exact: bool = True) -> str:
    """An upload too large for memory that also holds more rows than this server reads in a stream
    (``exact``: ``rows`` is the file's count, else the count at which reading stopped)."""
    return (f"it is too large to read in memory ({exc.finding}), and it holds {'' if exact else 'more than '}"
            f"{rows if exact else limit:,} rows, more than the {limit:,} this server reads from an upload even in "
            f"a stream. Upload a random sample of the rows, or {_ADMIN_ADVICE}")


def too_much_text_to_stream(exc) -> str:
    """A Parquet upload too large for memory whose text would not fit in memory even read in a stream."""
    return (f"it is too large to read in memory, and even in a stream {exc.finding}. Its text columns repeat "
            "very long values: remove or shorten those columns and upload the file again.")


def streaming_upload(file_name: str, exc, done: int = 0, total: int | None = None) -> str:
    """The progress bar's text while an upload too large for memory is read in a stream."""
    rows = f"{done:,} of {total:,} rows" if total else f"{done:,} rows"
    return f"Reading {md(file_name)} in a stream (too large to hold in memory): {rows}"


def streamed_upload_caption(file_name: str, n_sample: int) -> str:
    """The sidebar's line under an upload read in a stream."""
    return (f"Uploaded file: {md(file_name)}, read in a stream (too large for memory); pages that need rows in "
            f"memory use a random sample of {n_sample:,} rows.")
