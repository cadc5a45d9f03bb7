"""``pbr-calib fit``: fit a recalibrator (on a file, a sample of a dataset, or every row by streamed
passes) and save it; alpha by cross-validation with ``--select-alpha`` (:class:`~pbr_core.recalibrators.PBRCV`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pbr_core.cli._common import (VACUOUS, CLIError, EXIT_BAD_INPUT, EXIT_FIT_FAILED, EXIT_OK, EXIT_USAGE,  # noqa: F401
                                  _binary_ece_words, _check_output, _fit_progress, _load, bound_shown, parse_params)
from pbr_core.cli.stream import fit_all_rows, fit_sample, is_dataset


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
        rec.save(args.out, fit_rows=not args.no_fit_rows)
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}", EXIT_USAGE) from exc
    print(f"fitted {rec!r} on {preds.n} rows, K = {preds.n_classes} ({preds.kind}) in {seconds:.2f} s")
    _warn_small_file(preds.n)
    report = getattr(rec, "fit_report_", None)
    if report:  # the GP family: what the optimiser did, KL and the paper's bounds for this fit
        b = rec.bounds_
        from pbr_core.recalibrators.gp import mc_description

        draws = mc_description(report)
        draws = f" with {draws}" if draws else ""
        print(f"KL = {rec.kl_:.4g}; {report['iterations']} iterations on {report['device']}{draws}, "
              f"{'converged' if report['converged'] else 'NOT converged'} ({report['stop_reason']})")
        print(f"Corollary 1 (E_rho ECE generalisation gap) <= {bound_shown(b['corollary1'])}; Corollary 2 "
              f"(E_rho |TCE - ECE|) <= {bound_shown(b['corollary2'])} (n = {b['n']}, B = {b['n_bins']}, "
              f"eps = {b['eps']:g}, L = {b['lipschitz']:g})")
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


def _warn_small_file(n: int) -> None:
    """A warning on stderr when the file is below the size ``compare`` and the dashboard's pages need for a
    measured result (pbr_core.experiments.MIN_MEASURED_ROWS): the recalibrator is saved, but unmeasured."""
    from pbr_core.experiments import MIN_FIT_ROWS, MIN_MEASURED_ROWS, MIN_TEST_ROWS

    if n >= MIN_MEASURED_ROWS:
        return
    print(f"pbr-calib: warning: fitted on {n} rows, fewer than the {MIN_MEASURED_ROWS} that `compare` and the "
          f"dashboard need to measure a recalibrator: {MIN_FIT_ROWS} to fit it on and {MIN_TEST_ROWS} other rows to "
          "test it on. On fewer test rows, Theorem 1's bound on the test ECE's error is above 1, so it says nothing. "
          "On fewer fitting rows, recalibrators were mostly noise in simulations. The "
          "recalibrator is saved but unmeasured, and a fit on so few rows may have learned only noise: measure it "
          f"with `pbr-calib apply` on at least {MIN_TEST_ROWS} new labelled rows before relying on it.",
          file=sys.stderr)


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
