"""``pbr-calib compare``: recalibrators side by side over folds (:class:`~pbr_core.experiments.CompareSettings`,
:func:`~pbr_core.experiments.runs.run_compare`), with paired tests and the method the folds show best."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pbr_core.evaluation import EVALUATION_METRICS
from pbr_core.cli._common import (CLIError, EXIT_BAD_INPUT, EXIT_FIT_FAILED, EXIT_OK, EXIT_USAGE, _check_output,
                                  _fit_progress, _load, cli_words, parse_params)


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


def _refuse_small_test_set(preds, n_re: int, n_te: int | None) -> None:
    """``compare``'s refusal of a split that cannot give a measured result (pbr_core.experiments.split_problem:
    a file below MIN_MEASURED_ROWS rows, a recalibration set below MIN_FIT_ROWS, a test set below
    MIN_TEST_ROWS): why, and which option to change; never an --n-re the file cannot take."""
    from pbr_core.experiments import MIN_FIT_ROWS, MIN_TEST_ROWS, max_n_re, split_problem

    if n_te is None and n_re >= preds.n:
        return  # none left to test on: the protocol's own message
    found = split_problem(preds.n, n_re, n_te)
    if found is None:
        return
    which, problem = found
    top = max_n_re(preds.n)
    if which == "file":  # the sentence says what to do: more rows
        todo = ""
    elif which == "fit":
        todo = (f"Give --n-re {MIN_FIT_ROWS} or more ({top} at most on this file, so that at least {MIN_TEST_ROWS} "
                "rows are left to test on).")
    elif n_te is not None and n_re <= top:
        todo = f"Give --n-te {MIN_TEST_ROWS} or more (or leave it out to test on every row not used to fit)."
    else:
        todo = f"Give --n-re {top} or less, so that at least {MIN_TEST_ROWS} rows are left to test on."
    raise CLIError(f"{preds.source}: {problem} {todo}".rstrip(), EXIT_USAGE)


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
    return (f"best ECE: {best} (better than every other method: each t-test for overlapping folds p < 0.05, "
            "the Wilcoxon test agreeing)")


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
    from pbr_core.experiments import too_few_folds, verdict_kind
    from pbr_core.significance import p_words

    few = too_few_folds(int(tests["n_folds"].max()))
    if few:  # the tests could only say "no difference shown": not reported, and why
        return f"paired tests: not run. {few}"
    independent = bool(tests["folds_assumed_independent"].any())
    family = int(tests["holm_pairs"].max())
    decider = TEST_NAMES["t_p"] if independent else TEST_NAMES["corrected_t_p"]
    together = (f", the {family} intervals holding together (each widened for the {family} pairs)"
                if family > 1 else "")
    interval = ("95% t interval of the mean difference, folds assumed independent" + together if independent else
                "95% interval of the mean difference for overlapping folds, the corrected t-test's" + together +
                ": an interval that leaves out 0 comes with 'decides' below 0.05")
    lines = [f"paired tests over folds, {metric} (A - B; {interval}). The verdict uses "
             f"the {decider} p-value after Holm's correction over {family} pair{'s' if family != 1 else ''} "
             f"(decides), the {TEST_NAMES['wilcoxon_p']} agreeing; the other p-values are for reading:"]
    for r in tests.itertuples(index=False):
        if r.n_folds < 2:
            lines.append(f"  {r.a} vs {r.b}: fewer than 2 folds with both values, no test")
            continue
        if r.a_infinite_folds or r.b_infinite_folds:  # the NLL is infinite on some folds: no test reads the floor
            from pbr_core.experiments import infinite_nll_verdict

            lines.append(f"  {r.a} - {r.b}: {infinite_nll_verdict(r.a, r.a_infinite_folds, r.b, r.b_infinite_folds, r.n_folds)}")
            continue
        verdict = {"better": f"{r.better} better",
                   "wilcoxon_disagrees": "no difference shown at the 5% level (the Wilcoxon test does not agree)",
                   "no_difference": "no difference shown at the 5% level"}[verdict_kind(r.better, r.decisive_p,
                                                                                         r.wilcoxon_p)]
        # p_words: "p = 0.081" or "p < 0.001", never "p = < 0.001".
        lines.append(f"  {r.a} - {r.b}: {r.mean_diff:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}]; decides "
                     f"{p_words(r.decisive_p)}; t-test for overlapping folds {p_words(r.corrected_t_p)}, "
                     f"t-test {p_words(r.t_p)}, Wilcoxon {p_words(r.wilcoxon_p)}; "
                     f"A better on {r.a_better_folds}/{r.n_folds} folds: {verdict}")
    folds = int(tests["n_folds"].max())
    lines.append("  The folds are random splits of one file, so they share rows and their differences lean the same "
                 "way: the plain t-test and Wilcoxon, which assume independent folds, are far too sure (between "
                 "two equally good methods they call one better in about half of simulated files). The t-test for "
                 "overlapping folds (Nadeau & Bengio, variance factor 1/F + n_te/n_re) allows for that; Holm's "
                 "correction allows for several pairs, each a separate claim (every pair of the methods for the "
                 "default pairs, whose best mean was picked from these results). Wilcoxon needs no normality; "
                 f"with {folds} folds its smallest possible p is 2/2^{folds} = {2 / 2 ** folds:.3g}.")
    if independent:
        lines.append("  The table has no n_re / n_te columns: the verdicts assumed the folds independent.")
    return "\n".join(lines)
