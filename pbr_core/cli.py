"""The ``pbr-calib`` command line tool: evaluate a prediction file, fit, save and apply recalibrators.

Usage::

    pbr-calib evaluate FILE [--n-bins B] [--format table|json]
    pbr-calib evaluate 'logs/*.parquet' [--stream] [--local-cluster N | --scheduler ADDRESS] [--curve] [--by COLUMN]
    pbr-calib evaluate FILE_OR_GLOB --find-slices [--format json]
    pbr-calib fit FILE --method NAME [--param KEY=VALUE ...] --out MODEL.json
    pbr-calib fit FILE --method pbr --select-alpha [--alpha-grid 0,0.1,0.5,1] [--alpha-metric ece] [--jobs N] --out MODEL.json
    pbr-calib apply MODEL.json FILE --out CALIBRATED.csv|.parquet
    pbr-calib apply MODEL.json 'logs/*.parquet' --out calibrated/
    pbr-calib fit 'logs/*.parquet' --sample 100000 [--seed 0] --method NAME --out MODEL.json
    pbr-calib compare FILE --methods uncalibrated,temperature,pbr [--n-re 1000] [--n-te N] [--folds 10] [--out TABLE.csv]
    pbr-calib methods [--format table|json]

FILE is anything :func:`pbr_core.load_predictions` reads (CSV, TSV, Excel, Parquet, JSON, JSON Lines, NPZ, NPY), with a
label column. A folder, a glob or a URL (or ``--stream``) is a dataset read in one streamed pass
(:mod:`pbr_core.stream`): never all rows in memory. ``--param`` values are read as JSON when they parse (``n_bins=10``,
``bias=false``, ``targets="labels"``) and as text otherwise (``strategy=equal_mass``).

Exit codes (stable, for scripts):

* 0 -- success;
* 2 -- usage error: unknown subcommand, method or parameter, invalid parameter value, output path
  with an unsupported suffix or in a missing folder (argparse's own code for usage errors);
* 3 -- bad input file: unreadable or invalid predictions (the loader's ``PredictionsError``, also a
  file over the read limits, :class:`pbr_core.loading.ReadLimitError`), a path that is not a regular
  file (a FIFO, a device such as /dev/zero, a folder given as the model) or that the system cannot
  open (a name too long), a folder read as a dataset that holds far more than a dataset, a
  file that is not a valid recalibrator saved by pbr-calib (``RecalibratorFileError``: not JSON,
  another format version, a damaged field), predictions whose number of classes differs from the
  recalibrator's;
* 4 -- fitting failed (the optimiser, or a fit that does not exist, e.g. separable labels with
  ``targets=labels``).

Errors are one line on stderr (``pbr-calib: error: ...``), never a traceback. Results go to
stdout; progress bars (tqdm, for slow fits) go to stderr and are hidden by ``--quiet``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

from pbr_core.evaluation import CV_SCORES, EVALUATION_METRICS

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BAD_INPUT = 3
EXIT_FIT_FAILED = 4

_EPILOG = """exit codes:
  0  success
  2  usage error (unknown subcommand/method/parameter, invalid value, bad output path)
  3  bad input file (invalid predictions, not a pbr-calib recalibrator file, wrong number of classes)
  4  fitting failed (optimiser failure, or no maximum-likelihood fit exists)
"""


class CLIError(Exception):
    """An error with the exit code it maps to; the message is printed without a traceback."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    # No recalibrator import here: the GP family imports torch, which `evaluate` does not need.
    parser = argparse.ArgumentParser(
        prog="pbr-calib",
        description="Calibration diagnostics and recalibration of classifier predictions "
                    "(Fujisawa & Futami, PAC-Bayes Analysis for Recalibration in Classification, ICML 2025).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def loading_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--input-type", choices=["auto", "probabilities", "logits"], default="auto",
                       help="how to read the score columns (default: detect)")
        p.add_argument("--label-column", default=None, metavar="COLUMN",
                       help="name of the label column when it is not a usual one")
        p.add_argument("--score-columns", default=None, metavar="A,B,...",
                       help="the columns holding the class scores, in class order (default: detected; other "
                            "columns are kept as metadata)")
        p.add_argument("--group-columns", default=None, metavar="A,B,...",
                       help="columns kept for calibration by group (never read as scores)")
        p.add_argument("--ignore-columns", default=None, metavar="A,B,...", help="columns to leave out")
        p.add_argument("--renormalize", action="store_true",
                       help="divide probability rows that do not sum to 1 by their sum instead of failing")
        p.add_argument("--percent", action="store_true",
                       help="the scores (or the confidence) are percentages, 0 to 100 ('31.1' for 0.311): "
                            "divide them by 100")

    def raw_csv_option(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        p.add_argument("--raw-csv", action="store_true",
                       help="write CSV text cells exactly as they are, for programs that read the file; by default "
                            "a text cell starting with =, +, -, @, a tab or a carriage return (and not a number) gets "
                            "a leading apostrophe, so that a spreadsheet shows it as text instead of running it as a "
                            "formula (OWASP's advice against CSV injection)")

    def add(name: str, help: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description, epilog=_EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = add("evaluate", "metrics table of a prediction file",
            "Accuracy, ECE (paper Eq. 2) with B = floor(n^(1/3)) (Theorem 1) and optionally a given B, "
            "its 95% interval (for the calibration error those B bins would show on unlimited data; the "
            "dashboard's Reliability page shows the same one), MCE, Brier score, NLL and the Theorem 1 "
            "bound on |TCE - ECE| (a worst-case guarantee, much wider).")
    p.add_argument("file", help="prediction file (CSV, TSV, Excel, Parquet, JSON, JSON Lines, NPZ, NPY) with labels")
    p.add_argument("--n-bins", type=_positive_int, default=None, metavar="B",
                   help="also report the ECE and MCE with B bins (default: only B = floor(n^(1/3)))")
    p.add_argument("--lipschitz", type=_non_negative_float, default=1.0, metavar="L",
                   help="Lipschitz constant L in the Theorem 1 bound (default 1)")
    p.add_argument("--eps", type=_probability, default=0.05, help="the bound holds with probability 1 - eps (default 0.05)")
    p.add_argument("--format", choices=["table", "json"], default="table", help="output format (default table)")
    p.add_argument("--by", action="append", default=[], metavar="COLUMN",
                   help="also measure calibration per group of this column (repeat once for pairs of columns; "
                        "'predicted class' groups by the class the model predicted, 'each class' measures "
                        "every class against the rest); the column is kept as a group column")
    p.add_argument("--every", choices=["day", "week", "month"], default=None,
                   help="with --by on a date column: group the dates by day, week or month")
    p.add_argument("--find-slices", action="store_true",
                   help="search the other columns (values, quantile bands of numbers, months; and pairs) for slices "
                        "whose calibration departs from the rest, and report those confirmed on held-out rows "
                        "(pbr_core.groups.find_slices; the random halves are seeded by --seed)")
    p.add_argument("--map-scores", default=None, metavar="COLUMN",
                   help="COLUMN holds scores that are not probabilities (a risk decile, a margin): fit a monotone "
                        "map to p(y=1) on --map-share of the rows and evaluate the other rows (binary labels)")
    p.add_argument("--map-share", type=_probability, default=0.3, metavar="SHARE",
                   help="with --map-scores: the share of rows used to fit the map (default 0.3)")
    p.add_argument("--map-method", choices=["isotonic", "logistic"], default="isotonic",
                   help="with --map-scores: isotonic regression (default) or a logistic curve")
    p.add_argument("--libraries", action="store_true",
                   help="also print the ECE as other estimators and libraries (netcal, torchmetrics, "
                        "scikit-learn, relplot) report it by default, and why each differs")
    g = p.add_argument_group("datasets beyond memory (a folder, a glob such as 'logs/*.parquet', or a URL: "
                             "always streamed)")
    g.add_argument("--stream", action="store_true",
                   help="read FILE in one streamed pass even when it is a single file (bounded memory; the "
                        "interval then uses the Poisson bootstrap, and the estimators that need the rows are n/a)")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the pass on this Dask scheduler (tcp://host:8786); needs pbr-calib[scale]")
    g.add_argument("--local-cluster", type=_positive_int, default=None, metavar="N",
                   help="run the pass on a Dask LocalCluster with N worker processes; needs pbr-calib[scale]")
    g.add_argument("--curve", action="store_true",
                   help="also report the ECE for every B = 1..200 (the ECE curve); on one file too")
    g.add_argument("--n-boot", type=_positive_int, default=None, metavar="R",
                   help="bootstrap replicates of the streamed interval (default: as in memory, about 2e8 / n)")
    g.add_argument("--seed", type=int, default=0, help="seed of the streamed interval's random split and weights")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    loading_options(p)

    p = add("fit", "fit a recalibrator and save it as JSON",
            "Fit a recalibrator on all rows of FILE (the recalibration set) and save it to a JSON file.")
    p.add_argument("file", help="prediction file with labels (the recalibration set)")
    p.add_argument("--method", required=True, metavar="NAME",
                   help="a method name, e.g. temperature, beta, pbr (`pbr-calib methods` lists them all)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of the method (repeatable); values are JSON, else text")
    p.add_argument("--out", required=True, type=Path, metavar="MODEL.json", help="where to save the recalibrator")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--prior-split", type=_probability, default=None, metavar="SHARE",
                   help="GP methods: choose the prior (kernel settings, inducing points) on this share of the rows "
                        "and fit and bound on the rest, so that the printed Corollary 1-2 bounds hold as stated "
                        "(default: prior fitted on the same rows, bounds approximate)")
    p.add_argument("--sample", type=_positive_int, default=None, metavar="N",
                   help="fit on a uniform random sample of N rows, read in one streamed pass (FILE may then be a "
                        "folder, a glob or a URL; a folder or glob needs --sample; an NPZ / NPY file is read whole, "
                        "then sampled)")
    p.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    p.add_argument("--all-rows", action="store_true",
                   help="temperature and Platt scaling only: fit on every row of FILE (a file, folder, glob or "
                        "URL) by streamed passes (one pass per Newton step), never holding the rows in memory")
    g = p.add_argument_group("alpha by cross-validation (PBR methods: pbr, pbr_total, pbr_app, pbr_total_app)")
    g.add_argument("--alpha", type=_non_negative_float, default=None, metavar="A",
                   help="the alpha of a PBR method (the paper's grid runs from 0 to 1; the same as "
                        "--param alpha=A)")
    g.add_argument("--select-alpha", action="store_true",
                   help="choose alpha by k-fold cross-validation inside FILE, then fit on all rows with it")
    g.add_argument("--alpha-grid", type=_alpha_grid, default=None, metavar="A,B,...",
                   help="candidate alpha values (default: the paper's 0,0.01,0.1,0.25,0.5,0.75,0.9,1)")
    g.add_argument("--alpha-metric", choices=CV_SCORES, default="ece",
                   help="held-out score to minimise (default ece, with B = floor(n_val^(1/3)))")
    g.add_argument("--alpha-folds", type=_positive_int, default=5, metavar="K", help="number of folds (default 5)")
    g.add_argument("--alpha-scores", type=Path, default=None, metavar="SCORES.csv",
                   help="also write every (alpha, fold) fit's held-out scores (CSV)")
    raw_csv_option(g)
    g.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="folds fitted at the same time, each in its own process (default 1; -1: one per CPU core); "
                        "the same result, sooner on a machine with free cores")
    loading_options(p)

    p = add("apply", "apply a saved recalibrator to a prediction file",
            "Recalibrate the predictions in FILE with a saved recalibrator and write the probabilities "
            "(one column per class, plus the label) as CSV or Parquet (from the suffix of --out).")
    p.add_argument("model", type=Path, help="recalibrator saved by `pbr-calib fit` (JSON)")
    p.add_argument("file", help="prediction file with labels, or a dataset (a folder, a glob, a URL)")
    p.add_argument("--out", required=True, type=Path, metavar="CALIBRATED.csv",
                   help="output file: .csv or .parquet; for a dataset a new folder of Parquet files (the original "
                        "columns plus calibrated_<class>, written batch by batch)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (datasets)")
    raw_csv_option(p)
    loading_options(p)

    p = add("compare", "cross-validated comparison of recalibrators (paper Section 6.2)",
            "Fit each method on n_re random rows and evaluate on the rest, over several random splits "
            "(the same splits for every method): ECE with B = floor(n_te^(1/3)), accuracy, NLL, Brier; "
            "prints mean ± std per method.")
    p.add_argument("file", help="prediction file with labels")
    p.add_argument("--methods", default="uncalibrated,temperature", metavar="A,B,...",
                   help="comma-separated method names (`pbr-calib methods` lists them; default uncalibrated,temperature)")
    p.add_argument("--n-re", type=_positive_int, default=None,
                   help="recalibration set size (default: the paper's 1000 on a file of 2,000 rows or more, else "
                        "half the rows); at least 144 rows must be left to test on")
    p.add_argument("--n-te", type=_positive_int, default=None,
                   help="test rows per split (default: all rows not used for recalibration; at least 144)")
    p.add_argument("--folds", type=_positive_int, default=10, help="number of random splits (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the splits (default 0)")
    p.add_argument("--param", action="append", default=[], metavar="METHOD.KEY=VALUE",
                   help="a parameter of one method, e.g. pbr.alpha=0.5 (repeatable; values are JSON, else text)")
    p.add_argument("--binary-ece", choices=["positive", "top_label"], default=None,  # BINARY_TARGET.values
                   help="binary data: ECE of p(y=1) (default: paper Appendix A, as evaluate and the dashboard "
                        "measure it) or of the top label (as in the paper's tables)")
    p.add_argument("--pairs", default=None, metavar="A:B,...",
                   help="pairs of methods to test against each other over the folds, e.g. pbr:gp,pbr:temperature "
                        "(default: each method against uncalibrated and against the best mean)")
    p.add_argument("--paired-metric", default="ece", choices=EVALUATION_METRICS,
                   help="the metric of the paired tests (default ece)")
    p.add_argument("--keep-going", action="store_true", help="a failing fit gives NaN metrics instead of stopping")
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="folds fitted at the same time, each in its own process (default 1; -1: one per CPU core); "
                        "the same table, sooner for GP methods on a machine with free cores")
    p.add_argument("--out", type=Path, default=None, metavar="TABLE.csv", help="also write the per-fold table (CSV)")
    raw_csv_option(p)
    p.add_argument("--format", choices=["table", "json"], default="table", help="output format (default table)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    loading_options(p)

    p = add("methods", "list the recalibration methods", "List the recalibration methods and their parameters.")
    p.add_argument("--format", choices=["table", "json"], default="table", help="output format (default table)")
    return parser


def _jobs(text: str) -> int:
    from pbr_core.parallel import N_JOBS_WORDS, is_n_jobs

    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not is_n_jobs(value):
        raise argparse.ArgumentTypeError(f"expected {N_JOBS_WORDS}, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def _probability(text: str) -> float:
    value = _non_negative_float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _alpha_grid(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(not (math.isfinite(v) and v >= 0) for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated finite numbers >= 0, got {text!r}")
    return values


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``["n_bins=10", "strategy=equal_mass"]`` -> ``{"n_bins": 10, "strategy": "equal_mass"}``."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CLIError(f"--param expects KEY=VALUE, got {item!r}", EXIT_USAGE)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        params[key] = value
    return params


# ---------------------------------------------------------------------- commands


def _load(path: str, args: argparse.Namespace, require_labels: bool = True):
    from pbr_core import PredictionsError, load_predictions

    try:
        return load_predictions(path, input_type=args.input_type, label_column=args.label_column,
                                score_columns=args.score_columns, group_columns=args.group_columns,
                                ignore_columns=args.ignore_columns, renormalize=args.renormalize,
                                percent=args.percent, require_labels=require_labels)
    except PredictionsError as exc:
        raise CLIError(cli_words(str(exc)), EXIT_BAD_INPUT) from exc
    except OSError as exc:
        raise CLIError(f"{path}: cannot read the file: {exc.strerror or exc}", EXIT_BAD_INPUT) from exc


#: The loader's advice names Python arguments; on the command line the same is an option.
_CLI_WORDS = (
    ("(label_column=)", "(--label-column)"), ("(score_columns=)", "(--score-columns)"),
    ("(ignore_columns=)", "(--ignore-columns)"), ("label_column=", "--label-column"),
    ("renormalize=True", "--renormalize"), ("input_type='logits'", "--input-type logits"), ("percent=True", "--percent"),
    ("input_type='probabilities'", "--input-type probabilities"),
    ("`n_re`", "--n-re"), ("n_re=", "--n-re "), ("`n_te`", "--n-te"), ("n_te=", "--n-te "),
    ("every='day'", "--every day"), ("every='week'", "--every week"), ("every='month'", "--every month"),
)


def cli_words(message: str) -> str:
    """A loader message with its Python advice replaced by the command-line option that does the same."""
    for python, option in _CLI_WORDS:
        message = message.replace(python, option)
    return message


def evaluation_table(preds, n_bins: int | None = None, lipschitz: float = 1.0, eps: float = 0.05,
                     interval: bool = True) -> dict[str, Any]:
    """The numbers ``evaluate`` prints, as a dict (JSON-ready; None where a metric does not apply).

    With ``interval`` the 95% interval of the ECE (``pbr_core.ece_bootstrap_ci``, default method,
    seed 0, ``pbr_core.default_n_boot(n)`` resamples: the dashboard's Reliability page computes
    the same one) is added for each B; it costs O(n x resamples), so callers that need only the
    ECE pass False.
    """
    import pbr_core

    def ci(B: int) -> tuple[float, float]:
        return pbr_core.ece_bootstrap_ci(probs, labels, n_bins=B, n_boot=pbr_core.default_n_boot(preds.n))

    # ``evaluate`` measures binary data as every page does (the app's one choice: p(y=1), Appendix A).
    target = pbr_core.metrics.DEFAULT_BINARY_TARGET
    probs, labels = pbr_core.metrics.ece_inputs(*preds.metric_inputs(), target)
    B_opt = pbr_core.optimal_n_bins(preds.n)
    row: dict[str, Any] = {
        "file": preds.source,
        "n": preds.n,
        "K": preds.n_classes or None,  # None: top-label-only data without class names
        "kind": preds.kind,
        "input_type": preds.input_type,
        "accuracy": preds.accuracy,
        "ece_type": {"binary": "binary ECE on p(y=1) (Appendix A)"}.get(preds.kind, "top-label ECE (Eq. 2)"),
        "optimal_n_bins": B_opt,
        "ece": pbr_core.ece(probs, labels, n_bins=B_opt),
    }
    if interval:
        row["ece_ci_low"], row["ece_ci_high"] = ci(B_opt)
    row["mce"] = pbr_core.mce(probs, labels, n_bins=B_opt)
    if interval:  # the estimators beside the paper's ECE (pbr_core.estimators), as evaluate prints them
        from pbr_core import estimators

        row["ece_equal_mass"] = estimators.ece_equal_mass(probs, labels, n_bins=B_opt)
        try:
            row["ece_debiased"] = estimators.ece_debiased(probs, labels, n_bins=B_opt)
        except ValueError:  # a bin of one row: too little data to debias
            row["ece_debiased"] = None
        row["smooth_ece"] = estimators.smooth_ece(probs, labels)
    if n_bins is not None:
        row["n_bins"] = n_bins
        row["ece_at_n_bins"] = pbr_core.ece(probs, labels, n_bins=n_bins)
        if interval:
            row["ece_at_n_bins_ci_low"], row["ece_at_n_bins_ci_high"] = ci(n_bins)
        row["mce_at_n_bins"] = pbr_core.mce(probs, labels, n_bins=n_bins)
    # The Brier score and NLL of what the ECE measures: p(y=1) of binary data, the confidence of a
    # top-label file against correctness, the probability vector of multiclass data.
    row.update(pbr_core.metrics.target_brier_nll(*preds.metric_inputs(), target))
    if interval:  # is the model calibrated? (pbr_core.significance: what the Reliability page says)
        from pbr_core.significance import calibration_test
        from pbr_core.stream._report import test_columns

        row.update(test_columns(calibration_test(*pbr_core.metrics.confidence_and_outcome(probs, labels))))
    row["lipschitz"] = lipschitz
    row["eps"] = eps
    row["theorem1_bound"] = pbr_core.theorem1_bound(preds.n, B_opt, lipschitz=lipschitz, eps=eps)
    if n_bins is not None:
        row["theorem1_bound_at_n_bins"] = pbr_core.theorem1_bound(preds.n, n_bins, lipschitz=lipschitz, eps=eps)
    if preds.column_roles:
        row["columns"] = dict(preds.column_roles)
    return row


def _format_table(rows: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        if v is None:
            return "n/a"
        if isinstance(v, dict):  # column -> role: one group per role, in file order
            by_role: dict[str, list[str]] = {}
            for column, role in v.items():
                by_role.setdefault(role, []).append(column)
            return "; ".join(f"{role}: {', '.join(cols) if len(cols) <= 6 else f'{len(cols)} columns'}"
                             for role, cols in by_role.items())
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    width = max(len(k) for k in rows)
    return "\n".join(f"{k:<{width}}  {fmt(v)}" for k, v in rows.items())


def _evaluation_text(table: dict[str, Any]) -> str:
    """``evaluate``'s table as the terminal shows it (in memory and streamed): the metrics, the ECE
    curve where asked, then the loader's notes (which column was read as what, which class is 1,
    what was dropped or renormalised)."""
    lines = [_format_table({k: v for k, v in table.items() if k not in ("ece_curve", "notes")})]
    if "ece_curve" in table:
        lines.append("ece curve  " + ", ".join(f"B={b}: {v:.4g}" for b, v in table["ece_curve"].items()))
    notes = table.get("notes", ())
    lines += ["how the file was read:", *(f"  {cli_words(n)}" for n in notes)] if notes else [""]
    return "\n".join(lines)


def cmd_evaluate(args: argparse.Namespace) -> int:
    if len(args.by) > 2:
        raise CLIError("--by: one or two columns", EXIT_USAGE)
    if args.every and not args.by:
        raise CLIError("--every needs --by (a date column)", EXIT_USAGE)
    from pbr_core.groups import EACH_CLASS, PREDICTED_CLASS

    wanted = [c for c in args.by if c not in (PREDICTED_CLASS, EACH_CLASS, "true class")]
    if wanted:  # a column to group by is never read as a score
        named = [c.strip() for c in (args.group_columns or "").split(",") if c.strip()]
        args.group_columns = ",".join(dict.fromkeys([*named, *wanted]))
    from pbr_core.slices import slices_json, slices_text
    from pbr_core.stream._cli import evaluate_stream, find_slices_cli, is_dataset

    if args.stream or args.scheduler or args.local_cluster or is_dataset(args.file):
        if args.scheduler and args.local_cluster:
            raise CLIError("give --scheduler or --local-cluster, not both", EXIT_USAGE)
        table, report = evaluate_stream(args)
        slices = find_slices_cli(args) if args.find_slices else None
        if args.format == "json":
            if report is not None:
                table["groups"] = _groups_json(report)
            if slices is not None:
                table["slices"] = slices_json(slices)
            print(json.dumps(table, indent=2))
        else:
            print(_evaluation_text(table))
            if report is not None:
                print()
                print(group_text(report))
            if slices is not None:
                print()
                print(slices_text(slices))
        return EXIT_OK
    preds = _mapped(args) if args.map_scores else _load(args.file, args)
    table = evaluation_table(preds, args.n_bins, args.lipschitz, args.eps)
    if args.curve:  # the ECE for every B = 1..200 (and --n-bins), as on a streamed dataset
        import pbr_core

        bins = sorted(set(range(1, 201)) | ({args.n_bins} if args.n_bins else set()))
        probs, labels = pbr_core.metrics.ece_inputs(*preds.metric_inputs(), pbr_core.metrics.DEFAULT_BINARY_TARGET)
        table["ece_curve"] = {int(b): float(v) for b, v in zip(bins, pbr_core.ece_curve(probs, labels, bins))}
    table["notes"] = list(preds.notes)  # how the file was read: which column is what, which class is 1
    report = None
    if args.by:
        from pbr_core.groups import calibration_by_group

        try:
            report = calibration_by_group(preds, args.by, every=args.every)
        except ValueError as exc:
            raise CLIError(f"{preds.source}: {cli_words(str(exc))}", EXIT_BAD_INPUT) from exc
    slices = find_slices_cli(args, preds) if args.find_slices else None
    conventions = None
    if args.libraries:
        from pbr_core.estimators import library_conventions

        probs, labels = preds.metric_inputs()
        conventions = library_conventions(probs, labels, one_dimensional="confidence"
                                          if preds.kind == "top_label" else "positive")
    if args.format == "json":
        if report is not None:
            table["groups"] = _groups_json(report)
        if conventions is not None:
            table["libraries"] = json.loads(conventions.to_json(orient="records", double_precision=15))
        if slices is not None:
            table["slices"] = slices_json(slices)
        print(json.dumps(table, indent=2))
        return EXIT_OK
    print(_evaluation_text(table))
    if conventions is not None:
        print()
        print("the same predictions, measured the ways other estimators and libraries do by default:")
        shown = conventions[["convention", "measures", "bins", "ece", "difference"]]
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if report is not None:
        print()
        print(group_text(report))
    if slices is not None:
        print()
        print(slices_text(slices))
    return EXIT_OK


def _mapped(args: argparse.Namespace):
    """``evaluate --map-scores``: the rows not used to fit the score -> probability map, as predictions."""
    from pbr_core import PredictionsError
    from pbr_core.loading import read_table
    from pbr_core.scores import map_scores

    if not args.label_column:
        raise CLIError("--map-scores needs --label-column (the binary outcome)", EXIT_USAGE)
    try:
        frame = read_table(args.file)
        return map_scores(frame, args.map_scores, args.label_column, share=args.map_share, method=args.map_method,
                          source=Path(args.file).name).preds
    except PredictionsError as exc:
        raise CLIError(cli_words(str(exc)), EXIT_BAD_INPUT) from exc


def _groups_json(report) -> dict[str, Any]:
    from pbr_core.groups import gap_statement, group_statements

    return {"by": report.by, "test": report.test, "interval": report.interval, "largest_gap": report.largest_gap,
            "statements": {"largest_gap": gap_statement(report), "groups": group_statements(report)},
            "rows": json.loads(report.table.to_json(orient="records", double_precision=15))}


def group_text(report) -> str:
    """The per-group table as text, with the test, the small groups and the largest gap."""
    from pbr_core.groups import gap_statement, group_statements
    from pbr_core.significance import format_p

    t = report.table
    shown = t[["group", "n", "rate", "mean_predicted", "ece", "ece_low", "ece_high", "ece_corrected", "mce",
               "brier"]].copy()
    rate = "frequency of y=1" if report.target == "positive" else "accuracy"
    shown.columns = ["group", "n", rate, "mean predicted", "ECE", "ECE low", "ECE high", "ECE corrected", "MCE",
                     "Brier"]
    shown["p (Holm)"] = [format_p(p) for p in t["p_holm"]]
    shown.insert(1, "", ["(too few rows)" if small else "" for small in t["too_small"]])
    lines = [f"calibration by {' × '.join(report.by)} ({'p(y=1)' if report.target == 'positive' else 'top label'}; "
             f"ECE with B = floor(n_group^(1/3)), {report.level:.0%} {report.interval}; ECE corrected: with the "
             f"part noise adds removed; test: {report.test})",
             shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"),
             "largest gap: " + gap_statement(report), "each group:", *(f"  {s}" for s in group_statements(report))]
    return "\n".join(lines)


@contextlib.contextmanager
def _fit_progress(quiet: bool) -> Iterator[None]:
    """Within the block, the slow loops inside a fit (GP optimiser iterations, one-vs-all maps)
    show on one tqdm bar on stderr, opened at their first report (``pbr_core.progress``)."""
    from tqdm import tqdm

    from pbr_core.progress import report_progress, tqdm_progress

    bars: list = []

    def progress(done: int, total: int, message: str) -> None:
        if not bars:
            bars.append(tqdm(total=total, desc=message, file=sys.stderr, disable=quiet, leave=False))
        tqdm_progress(bars[0])(done, total, message)

    try:
        with report_progress(progress):
            yield
    finally:
        for bar in bars:
            bar.close()


def cmd_fit(args: argparse.Namespace) -> int:
    from pbr_core.recalibrators import get_recalibrator

    params = parse_params(args.param)
    if args.alpha is not None:
        from pbr_core.recalibrators import methods_taking  # only here: the GP family imports torch

        if args.method not in methods_taking("alpha"):
            raise CLIError(f"--alpha applies to the PBR methods ({', '.join(methods_taking('alpha'))}), "
                           f"not to {args.method}", EXIT_USAGE)
        if "alpha" in params or args.select_alpha:
            raise CLIError("give alpha once: --alpha, --param alpha=... or --select-alpha", EXIT_USAGE)
        params["alpha"] = args.alpha
    if args.prior_split is not None:
        if "prior_split" in params:
            raise CLIError("give the prior split once: --prior-split or --param prior_split=...", EXIT_USAGE)
        params["prior_split"] = args.prior_split
    try:
        rec = get_recalibrator(args.method, **params)
        rec._validate_params()
    except (ValueError, TypeError) as exc:
        raise CLIError(str(exc), EXIT_USAGE) from exc
    alpha_options = [name for name in ("alpha_grid", "alpha_scores") if getattr(args, name) is not None]
    alpha_options += ["jobs"] if args.jobs != 1 else []
    if alpha_options and not args.select_alpha:
        raise CLIError(f"--{alpha_options[0].replace('_', '-')} needs --select-alpha", EXIT_USAGE)
    if args.select_alpha:
        from pbr_core.recalibrators import methods_taking  # only here: the GP family imports torch

        pbr_methods = methods_taking("alpha")
        if args.method not in pbr_methods:
            raise CLIError(f"--select-alpha applies to the PBR methods ({', '.join(pbr_methods)}), "
                           f"not to {args.method}", EXIT_USAGE)
        if "alpha" in params:
            raise CLIError("--select-alpha chooses alpha: do not also give --param alpha=...", EXIT_USAGE)
        if args.alpha_scores is not None:
            _check_output(args.alpha_scores, (".csv",))
    _check_output(args.out, (".json",))
    from pbr_core.stream._cli import fit_all_rows, fit_sample, is_dataset

    if args.all_rows:
        return fit_all_rows(args, rec)
    if args.sample is None and is_dataset(args.file):
        raise CLIError(f"{args.file} is a dataset: fit on a random sample of it with --sample N (or, for "
                       "temperature or Platt scaling, on every row with --all-rows)", EXIT_USAGE)
    if args.sample is not None and Path(args.file).suffix.lower() in (".npz", ".npy") and not is_dataset(args.file):
        preds = _sample_in_memory(_load(args.file, args), args)
    else:
        preds = fit_sample(args) if args.sample is not None else _load(args.file, args)
    if not preds.can_recalibrate:
        raise CLIError(f"{preds.source}: top-label-only data (confidence, predicted label, true label) cannot be "
                       "recalibrated: recalibration needs the full probability or logit vector of every row.",
                       EXIT_BAD_INPUT)
    start = time.perf_counter()
    try:
        with _fit_progress(args.quiet):
            if args.select_alpha:
                rec = _select_alpha(rec, preds, args)
            else:
                rec.fit(preds)
    except RuntimeError as exc:
        raise CLIError(f"fitting {args.method} failed: {exc}", EXIT_FIT_FAILED) from exc
    except ValueError as exc:  # data the method cannot use (the loader validated the file itself)
        raise CLIError(f"{preds.source}: {exc}", EXIT_BAD_INPUT) from exc
    seconds = time.perf_counter() - start
    try:
        rec.save(args.out)
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}", EXIT_USAGE) from exc
    print(f"fitted {rec!r} on {preds.n} rows, K = {preds.n_classes} ({preds.kind}) in {seconds:.2f} s")
    report = getattr(rec, "fit_report_", None)
    if report:  # the GP family: what the optimiser did, KL and the paper's bounds for this fit
        b = rec.bounds_
        from pbr_core.recalibrators.gp import mc_description

        draws = mc_description(report)
        draws = f" with {draws}" if draws else ""
        print(f"KL = {rec.kl_:.4g}; {report['iterations']} iterations on {report['device']}{draws}, "
              f"{'converged' if report['converged'] else 'NOT converged'} ({report['stop_reason']})")
        print(f"Corollary 1 (E_rho ECE generalisation gap) <= {b['corollary1']:.4f}; Corollary 2 "
              f"(E_rho |TCE - ECE|) <= {b['corollary2']:.4f} (n = {b['n']}, B = {b['n_bins']}, eps = {b['eps']:g}, "
              f"L = {b['lipschitz']:g})")
        print(f"bounds: {_bound_validity(b)}; both are averages over recalibration maps drawn from the fitted "
              "posterior, not bounds on the one saved recalibrator")
        if getattr(rec, "objective", None) == "pbr_total":
            print("note: PBR total adds the cross entropy, which is unbounded; the bounds above cover the ECE of "
                  "the fitted posterior only, not the cross entropy or the accuracy on new data")
        from pbr_core.experiments import ended_at_prior, extreme_kl, kl_limit

        if extreme_kl(rec.kl_, preds.n, preds.n_classes):  # above n ln K nats: drifted from the prior
            print(f"note: extreme KL ({rec.kl_:.4g} nats, above n ln K = {kl_limit(preds.n, preds.n_classes):,.0f}, "
                  "more than the labels can carry): with alpha = 0 (no KL term) nothing holds the posterior near its "
                  "prior, so "
                  "the KL measures how far it drifted and the bounds above say nothing; a larger alpha (--alpha A) "
                  "keeps it near the prior")
        if ended_at_prior(rec):  # the fit's own record; a fit at the prior can keep a KL of a few hundredths
            print("note: the fit ended at the prior: the recalibrator returns (nearly) the uncalibrated predictions; "
                  "a smaller alpha (--alpha A) or more rows let it move away from the prior")
    print(f"saved to {args.out}")
    return EXIT_OK


def _bound_validity(bounds: dict) -> str:
    """'valid as stated ...' or 'approximate ...', with the rows it costs (a fit's ``bounds_``)."""
    if bounds.get("prior") == "split":
        n_rows = int(bounds.get("n_rows", bounds["n"]))
        return (f"valid as stated (prior chosen on {n_rows - int(bounds['n'])} rows, bounds on the other "
                f"{bounds['n']} of {n_rows})")
    return "approximate: prior fitted on the same rows (--prior-split 0.3 for bounds valid as stated)"


def _sample_in_memory(preds, args: argparse.Namespace):
    """``--sample N`` of a NumPy file, which the streamed reader does not read: the file is loaded
    whole, then N of its rows are drawn uniformly without replacement (seed ``--seed``), in file order."""
    import numpy as np

    n = min(int(args.sample), preds.n)
    rows = np.sort(np.random.default_rng(args.seed).choice(preds.n, size=n, replace=False))
    print(f"sampled {n:,} rows of {args.file} (read whole; seed {args.seed})")
    return preds.subset(rows)


def _select_alpha(rec, preds, args: argparse.Namespace):
    """``rec`` with alpha chosen by k-fold CV inside the recalibration set (:class:`PBRCV`), fitted
    on all of it; prints the grid's scores."""
    from tqdm import tqdm

    from pbr_core.loading.writing import csv_text
    from pbr_core.recalibrators import PBRCV

    cv = PBRCV(rec, alphas=args.alpha_grid, cv=args.alpha_folds, scoring=args.alpha_metric, n_jobs=args.jobs)
    with tqdm(total=None, unit="fit", desc="alpha CV", file=sys.stderr, disable=args.quiet, leave=False) as bar:
        def progress(done: int, total: int, message: str) -> None:
            bar.total = total
            bar.n = done
            bar.set_postfix_str(message, refresh=True)

        cv.fit(preds, progress=progress)
    sel = cv.selection_
    if args.alpha_scores is not None:
        try:
            args.alpha_scores.write_text(csv_text(sel.scores, spreadsheet_safe=not args.raw_csv), encoding="utf-8")
        except OSError as exc:
            raise CLIError(f"cannot write {args.alpha_scores}: {exc.strerror or exc}", EXIT_USAGE) from exc
    table = sel.summary[["alpha", "mean", "std", "kl_mean"]].rename(
        columns={"mean": f"{args.alpha_metric} mean", "std": f"{args.alpha_metric} std", "kl_mean": "KL mean"})
    if sel.notes:  # the fits that failed (each also a warning): their alpha has no mean
        table["failed folds"] = sel.summary["failed"]
    table.insert(0, "", ["<-" if a == sel.best_alpha else "" for a in table["alpha"]])
    metric = args.alpha_metric
    if metric == "ece" and preds.kind == "binary":
        metric = _binary_ece_words()
    warm = "; each fold's fits in ascending alpha, each from the previous one's solution" if sel.warm_start else ""
    print(f"alpha by {args.alpha_folds}-fold cross-validation on {preds.n} rows ({metric}, "
          f"held-out folds{warm}; {sel.wall_time_s:.1f} s):")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.5g}"))
    print(f"chosen alpha = {sel.best_alpha:g}")
    if type(cv.best_estimator_) is type(rec):
        return cv.best_estimator_
    # e.g. --method pbr --param objective=pbr_total: saved as asked ("pbr"), not as "pbr_total"
    return rec.set_params(alpha=cv.alpha_).fit(preds)


def shown_path(path: str | Path) -> str:
    """``path`` for a message: a long one (a 5,000-character argument) by its start and end."""
    from pbr_core.loading._source import shorten

    return shorten(str(path))


def _check_output(path: Path, suffixes: tuple[str, ...]) -> None:
    if path.suffix.lower() not in suffixes:
        raise CLIError(f"--out {shown_path(path)}: expected a file name ending in {' or '.join(suffixes)}", EXIT_USAGE)
    try:
        folder = path.parent.exists()
    except OSError as exc:  # a name too long for the file system
        raise CLIError(f"--out {shown_path(path)}: {exc.strerror or exc}", EXIT_USAGE) from None
    if not folder:
        raise CLIError(f"--out {shown_path(path)}: the folder {shown_path(path.parent)} does not exist", EXIT_USAGE)


def regular_file(path: str | Path, what: str = "file") -> Path:
    """``path`` when it names a regular file; otherwise the project's error (exit code 3) saying what
    it is. Only regular files are read: a FIFO waits forever for a writer, a device such as
    /dev/zero never ends, a folder is not a file."""
    import os
    import stat

    from pbr_core.loading._source import special_file_kind

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CLIError(f"{shown_path(path)}: cannot read the {what}: no such file", EXIT_BAD_INPUT) from None
    except OSError as exc:  # a name too long, a folder without permission...
        raise CLIError(f"{shown_path(path)}: cannot read the {what}: {exc.strerror or exc}", EXIT_BAD_INPUT) from None
    if not stat.S_ISREG(mode):
        raise CLIError(f"{shown_path(path)}: {special_file_kind(mode)}, not a regular file; give the path of the "
                       f"{what}", EXIT_BAD_INPUT)
    return Path(path)


def cmd_apply(args: argparse.Namespace) -> int:
    import pbr_core
    from pbr_core.loading import save_predictions
    from pbr_core.recalibrators import RecalibratorFileError, load_recalibrator

    from pbr_core.stream._cli import apply_stream, is_dataset

    streamed = is_dataset(args.file)
    if not streamed:
        _check_output(args.out, (".csv", ".parquet", ".pq"))
    try:
        rec = load_recalibrator(regular_file(args.model, "recalibrator file"))
    except OSError as exc:
        raise CLIError(f"{args.model}: cannot read the file: {exc.strerror or exc}", EXIT_BAD_INPUT) from exc
    except RecalibratorFileError as exc:  # the message starts with the path and names the damaged field
        raise CLIError(str(exc), EXIT_BAD_INPUT) from exc
    if streamed:
        return apply_stream(args, rec)
    preds = _load(args.file, args, require_labels=False)  # shipping a recalibrator: new data has no labels
    try:
        probs = rec.predict_proba(preds)
    except ValueError as exc:  # wrong number of classes, top-label-only data
        raise CLIError(f"{preds.source}: {exc}", EXIT_BAD_INPUT) from exc
    calibrated = preds.with_probs(probs, source=str(args.out))
    try:
        # The file's own column names and order (p_dem, won; not 0, 1, label).
        save_predictions(calibrated, path_or_buffer=args.out, spreadsheet_safe=not args.raw_csv, headers_from=preds)
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}", EXIT_USAGE) from exc
    from pbr_core.experiments import small_test_set_problem

    too_few = small_test_set_problem(preds.n) if preds.has_labels else None
    if too_few:  # an ECE before / after on so few rows says nothing: not printed, and why
        print(f"applied {rec.method} to {preds.n} rows of {preds.source}; ECE not measured: {too_few}")
    elif preds.has_labels:
        before = evaluation_table(preds, interval=False)["ece"]
        after = evaluation_table(calibrated, interval=False)["ece"]
        what = f"{_binary_ece_words()}, " if preds.kind == "binary" else ""
        print(f"applied {rec.method} to {preds.n} rows of {preds.source}: ECE {before:.4f} -> {after:.4f} "
              f"({what}B = {pbr_core.optimal_n_bins(preds.n)})")
    else:
        print(f"applied {rec.method} to {preds.n} unlabelled rows of {preds.source} (no labels: ECE not measured)")
    print(f"wrote {args.out}")
    return EXIT_OK


def methods_table() -> list[dict[str, Any]]:
    """One entry per registered method: name, class, what it works on, default parameters."""
    from pbr_core.recalibrators import REGISTRY, available_methods, default_params

    out = []
    for name in available_methods():
        cls = REGISTRY[name]
        summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        out.append({
            "method": name,
            "class": cls.__name__,
            "input": "p per class (one-vs-all for K > 2)" if cls.family == "binary"
                     else ("scores (logits or log p)" if cls.uses == "scores" else "probabilities"),
            "params": default_params(name),
            "summary": summary,
        })
    return out


def cmd_methods(args: argparse.Namespace) -> int:
    rows = methods_table()
    if args.format == "json":
        print(json.dumps(rows, indent=2, default=str))
        return EXIT_OK
    w = max(len(r["method"]) for r in rows)
    for r in rows:
        params = ", ".join(f"{k}={v!r}" for k, v in r["params"].items()) or "-"
        print(f"{r['method']:<{w}}  {r['class']}({params})")
        print(f"{'':<{w}}  {r['summary']}")
    return EXIT_OK


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"pbr-calib: warning: {message}", file=sys.stderr)


def cmd_compare(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from pbr_core import PredictionsError
    from pbr_core.experiments import BINARY_TARGET, default_n_re, summarize, summary_table, tqdm_progress
    from pbr_core.experiments.runs import run_compare
    from pbr_core.experiments.settings import CompareSettings, params_of
    from pbr_core.loading.writing import csv_text

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    method_params: dict[str, dict[str, Any]] = {}
    for item in args.param:
        method, sep, rest = item.partition(".")
        if not sep or "=" not in rest:
            raise CLIError(f"--param {item!r}: expected METHOD.KEY=VALUE, e.g. pbr.alpha=0.5", EXIT_USAGE)
        method_params.setdefault(method, {}).update(parse_params([rest]))
    pairs = _parse_pairs(args.pairs, methods)
    if args.out is not None:
        _check_output(args.out, (".csv",))
    preds = _load(args.file, args)
    binary_ece = args.binary_ece or BINARY_TARGET.default
    if args.n_re is None:  # the paper's 1000 only on a file large enough to leave as many rows to test on
        args.n_re = default_n_re(preds.n)
    _refuse_small_test_set(preds, args.n_re, args.n_te)
    with tqdm(total=args.folds * len(methods), unit="fit", file=sys.stderr, disable=args.quiet, leave=False) as bar:
        try:
            settings = CompareSettings(methods=tuple(methods), n_re=args.n_re, n_folds=args.folds, seed=args.seed,
                                       n_te=args.n_te, diagrams=False, binary_ece=binary_ece,
                                       params=params_of(method_params), n_jobs=args.jobs,
                                       on_error="warn" if args.keep_going else "raise")
            with _fit_progress(args.quiet):  # an inner bar for slow (GP) fits
                table = run_compare(preds, settings, progress=tqdm_progress(bar)).table
        except PredictionsError as exc:  # top-label-only data
            raise CLIError(f"{preds.source}: {exc}", EXIT_BAD_INPUT) from exc
        except RuntimeError as exc:  # a fit failed (without --keep-going)
            raise CLIError(str(exc), EXIT_FIT_FAILED) from exc
        except ValueError as exc:  # unknown method or parameter, n_re >= n
            raise CLIError(cli_words(str(exc)), EXIT_USAGE) from exc
    if args.out is not None:
        try:
            args.out.write_text(csv_text(table, spreadsheet_safe=not args.raw_csv), encoding="utf-8")
        except OSError as exc:
            raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}", EXIT_USAGE) from exc
    tests = _paired(table, pairs, args.paired_metric)
    if args.format == "json":
        summary = _shown_summary(table, summarize(table)).to_json(orient="records", indent=2)
        if args.pairs is None:  # the summary list stays the default JSON document
            print(summary)
        else:  # asked for pairs: one document with both
            print(json.dumps({"summary": json.loads(summary),
                              "paired_tests": json.loads(tests.to_json(orient="records"))}, indent=2))
        return EXIT_OK
    n_te = preds.n - args.n_re if args.n_te is None else args.n_te
    print(f"{preds.n} rows, K = {preds.n_classes}: n_re = {args.n_re}, n_te = {n_te}, "
          f"{args.folds} folds, seed {args.seed}; mean ± std over folds")
    if preds.kind == "binary":
        print(f"ECE: {BINARY_TARGET.words[binary_ece]} (--binary-ece); Brier and NLL of the same probability")
    print(summary_table(table).to_string())
    print(_best_text(table))
    print()
    print(_paired_text(tests, args.paired_metric))
    return EXIT_OK


def _binary_ece_words() -> str:
    """Which ECE a binary file's numbers are: the app's one choice (pbr_core.metrics.BINARY_TARGET)."""
    from pbr_core.metrics import BINARY_TARGET

    return BINARY_TARGET.words[BINARY_TARGET.default]


def _refuse_small_test_set(preds, n_re: int, n_te: int | None) -> None:
    """``compare``'s refusal of a test set too small to say anything (pbr_core.experiments.MIN_TEST_ROWS):
    why, and which option to change."""
    from pbr_core.experiments import MIN_TEST_ROWS, max_n_re, small_test_set_problem

    rows = preds.n - n_re if n_te is None else n_te
    problem = small_test_set_problem(rows) if rows > 0 else None  # none left: the protocol's own message
    if problem is None:
        return
    top = max_n_re(preds.n)
    if top < 2:
        todo = f"{preds.source} has {preds.n} rows: too few to fit on some and test on {MIN_TEST_ROWS} others."
    elif n_te is not None and n_re <= top:
        todo = f"Give --n-te {MIN_TEST_ROWS} or more (or leave it out to test on every row not used to fit)."
    else:
        todo = f"Give --n-re {top} or less, so that at least {MIN_TEST_ROWS} rows are left to test on."
    raise CLIError(f"{preds.source}: {problem} {todo}", EXIT_USAGE)


def _shown_summary(table, summary):
    """``summarize(table)`` whose ``best`` flags only the methods the paired tests show better than every
    other one (pbr_core.experiments.shown_best), as the dashboard's green cells: never the lowest mean alone."""
    from pbr_core.experiments import shown_best

    shown = {m: shown_best(table, m) for m in summary["metric"].unique() if m in EVALUATION_METRICS}
    return summary.assign(best=[shown.get(metric) == method
                                for method, metric in zip(summary["method"], summary["metric"])])


def _best_text(table) -> str:
    """One line under the summary: the method the folds show best in ECE, or why none is named."""
    from pbr_core.experiments import shown_best, too_few_folds

    ok = table[table["error"].isna()]
    few = too_few_folds(int(ok["fold"].nunique()))
    if few:
        return few
    best = shown_best(table)
    if best is None:
        return ("no method is shown best in ECE: the best mean is not better than every other method's beyond the "
                "fold-to-fold noise (paired tests below)")
    return f"best ECE: {best} (the paired tests show it better than every other method, both p < 0.05)"


def _parse_pairs(text: str | None, methods: list[str]) -> list[tuple[str, str]] | None:
    """``A:B,C:D`` -> [(A, B), (C, D)], every name one of ``methods``; None for the default pairs."""
    if text is None:
        return None
    pairs = []
    for item in (t.strip() for t in text.split(",")):
        a, sep, b = item.partition(":")
        a, b = a.strip(), b.strip()
        if not sep or not a or not b or a == b:
            raise CLIError(f"--pairs {item!r}: expected METHOD_A:METHOD_B with two different methods, "
                           "e.g. pbr:gp", EXIT_USAGE)
        unknown = [m for m in (a, b) if m not in methods]
        if unknown:
            raise CLIError(f"--pairs {item!r}: {', '.join(unknown)} is not among --methods ({', '.join(methods)})",
                           EXIT_USAGE)
        pairs.append((a, b))
    return pairs


def _paired(table, pairs: list[tuple[str, str]] | None, metric: str):
    from pbr_core.experiments import paired_tests

    return paired_tests(table, metric, pairs)


def _paired_text(tests, metric: str) -> str:
    """The paired tests as the terminal shows them, with the names of the tests and what they assume."""
    from pbr_core.experiments import TEST_NAMES

    if tests.empty:
        return "paired tests: none (one method only)"
    from pbr_core.experiments import too_few_folds
    from pbr_core.significance import format_p

    few = too_few_folds(int(tests["n_folds"].max()))
    if few:  # the tests could only say "no difference shown": not reported, and why
        return f"paired tests: not run. {few}"
    lines = [f"paired tests over folds, {metric} (A - B; 95% t interval of the mean difference; p-values of the "
             f"{TEST_NAMES['t_p']}, the {TEST_NAMES['wilcoxon_p']} and the {TEST_NAMES['corrected_t_p']}):"]
    for r in tests.itertuples(index=False):
        if r.n_folds < 2:
            lines.append(f"  {r.a} vs {r.b}: fewer than 2 folds with both values, no test")
            continue
        verdict = (f"{r.better} better (both p < 0.05)" if r.better
                   else "no difference shown at the 5% level (that needs the t-test and Wilcoxon both below 0.05)")
        lines.append(f"  {r.a} - {r.b}: {r.mean_diff:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}]; t-test p = {format_p(r.t_p)}, "
                     f"Wilcoxon p = {format_p(r.wilcoxon_p)}, t-test for overlapping folds p = "
                     f"{format_p(r.corrected_t_p)}; "
                     f"A better on {r.a_better_folds}/{r.n_folds} folds: {verdict}")
    folds = int(tests["n_folds"].max())
    lines.append("  The t-test assumes independent, normal fold differences; Wilcoxon independent differences "
                 f"symmetric about their median (with {folds} folds its smallest possible p is "
                 f"2/2^{folds} = {2 / 2 ** folds:.3g}). The folds are random "
                 "splits of one file, so they overlap and both p-values are optimistic; the corrected t-test "
                 "(variance factor 1/F + n_te/n_re) allows for that and is conservative.")
    return "\n".join(lines)


COMMANDS = {"evaluate": cmd_evaluate, "fit": cmd_fit, "apply": cmd_apply, "compare": cmd_compare, "methods": cmd_methods}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line tool; returns the exit code (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2), message already printed
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            # Library deprecations (torch, gpytorch) are for developers, not for the user of the tool.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            warnings.showwarning = _show_warning
            return COMMANDS[args.command](args)
    except CLIError as exc:
        print(f"pbr-calib: error: {exc}", file=sys.stderr)
        return exc.code
    except OSError as exc:  # a path the checks above did not foresee: still a message, never a traceback
        where = f"{shown_path(exc.filename)}: " if exc.filename else ""
        print(f"pbr-calib: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("pbr-calib: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run the copy of this module that the rest of the package imports (pbr_core.cli), not this
    # __main__ one: the subcommands in pbr_core.stream raise pbr_core.cli.CLIError, which main()
    # here would not recognise as its own class and would show as a traceback.
    from pbr_core.cli import main as _package_main

    sys.exit(_package_main())
