"""The ``pbr-calib`` argument parser: every command's options (no recalibrator import: the GP family
imports torch, which ``evaluate`` does not need)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pbr_core.evaluation import CV_SCORES, EVALUATION_METRICS
from pbr_core.cli._common import (_EPILOG, _alpha_grid, _fail_limit, _jobs, _non_negative_float, _pass_limit, _port,
                                  _positive_int, _probability)


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
                            "divide them by 100 (a column written with %% signs, '93.3%%', is read so without it)")
        p.add_argument("--positive-class", default=None, metavar="NAME",
                       help="for one score column beside labels written as two names: the class the score is the "
                            "probability of, when the file does not say it (e.g. approved)")

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
                   help="with --by on a date column: group the dates by day, week or month (default, for a file "
                        "in memory: chosen from the data, the finest giving at most 60 groups, half of them with "
                        "100 rows or more; a streamed dataset groups the dates as they are)")
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
    gate = p.add_argument_group("calibration gates (for CI: exit code 5 when one fails, the results still printed)")
    gate.add_argument("--fail-above", type=_fail_limit, default=None, metavar="X",
                      help="fail (exit 5) when the calibration error is shown above X: the ECE evaluate reports "
                           "(B = floor(n^(1/3)), the 'ece' field) has its 95%% interval (ece_ci_low, ece_ci_high) "
                           "above X; an interval that contains X is undecided (a warning, exit 0)")
    gate.add_argument("--require-below", type=_pass_limit, default=None, metavar="X",
                      help="fail (exit 5) unless the calibration error is shown at most X: the ECE's 95%% "
                           "interval lies at or below X (the opposite burden of proof to --fail-above)")
    gate.add_argument("--max-group-gap", type=_fail_limit, default=None, metavar="X",
                      help="with --by: fail (exit 5) when the largest gap between groups is real (its adjusted "
                           "interval excludes 0 and the worst group fails its own test) and its bias-corrected "
                           "estimate is above X; a gap within noise never fails")
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
    p.add_argument("--no-fit-rows", action="store_true",
                   help="save the recalibrator without the fingerprint of the rows it was fitted on (a 64-bit hash "
                        "of each row's scores and label, which `apply` uses to leave those rows out of its ECE, but "
                        "which also tells whoever holds the file whether a given row was a fit row and, from a fit "
                        "row's scores, its label: hashed with each label, one matches); `apply` then cannot tell "
                        "whether the rows it measures on were fitted on")
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
            "Recalibrate the predictions in FILE with a saved recalibrator and write them as CSV or Parquet (from "
            "the suffix of --out): the file's score columns, under their own names, hold the calibrated "
            "probabilities (scores read as logits: one column per class), with the label and the other columns.")
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

    p = add("dashboard", "start the Streamlit dashboard",
            "Start the dashboard (streamlit run of the app shipped in the package, with its serving settings: "
            "this machine only, no usage statistics) on the bundled sample data; open http://localhost:PORT.")
    p.add_argument("--port", type=_port, default=8501, metavar="N", help="the port to listen on (default 8501)")
    p.add_argument("--data-root", type=Path, default=None, metavar="DIR",
                   help="a folder on this machine whose prediction logs the Data page may read as datasets "
                        "(sets PBR_CALIB_DATA_ROOT; default: none, uploads and the bundled samples only)")
    return parser
