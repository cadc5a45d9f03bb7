"""The streamed forms of ``pbr-calib evaluate``, ``fit`` and ``apply`` (datasets beyond memory: :mod:`pbr_core.stream`).

Kept here so that the command line module only decides *whether* to stream; the messages and exit
codes are the command line's own (``CLIError``, ``EXIT_*``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pbr_core.cli._common import CLIError, EXIT_BAD_INPUT, EXIT_FIT_FAILED, EXIT_OK, EXIT_USAGE, cli_words

__all__ = ["is_dataset", "evaluate_stream", "find_slices_cli", "fit_all_rows", "fit_sample", "apply_stream"]


def is_dataset(spec: str) -> bool:
    """True for what only the streamed path reads: a folder, a glob, a URL."""
    s = str(spec)
    try:
        folder = Path(s).is_dir()
    except OSError:  # a name too long for the file system: the loader names the problem
        folder = False
    return any(ch in s for ch in "*?[") or "://" in s or folder


def _open(args: argparse.Namespace, require_labels: bool = True):
    from pbr_core.predictions import PredictionsError
    from pbr_core.stream import open_dataset

    try:
        ds = open_dataset(str(args.file), label_column=args.label_column, score_columns=args.score_columns,
                          group_columns=args.group_columns, ignore_columns=args.ignore_columns,
                          input_type=args.input_type, renormalize=args.renormalize, percent=args.percent,
                          positive_class=getattr(args, "positive_class", None))
        if not require_labels:
            from dataclasses import replace

            ds.options = replace(ds.options, require_labels=False)
        ds.layout()
        return ds
    except PredictionsError as exc:
        raise CLIError(cli_words(str(exc)), EXIT_BAD_INPUT) from exc
    except OSError as exc:
        raise CLIError(f"{args.file}: cannot read: {exc.strerror or exc}", EXIT_BAD_INPUT) from exc


class _Bar:
    """tqdm over rows on stderr (hidden by --quiet); the total is known for Parquet."""

    def __init__(self, quiet: bool, desc: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=None, unit="row", unit_scale=True, desc=desc, file=sys.stderr, disable=quiet,
                        leave=False)

    def __call__(self, done: int, total: int | None, message: str = "") -> None:
        """``progress(done, total, message)`` (pbr_core.progress.Progress); a message other than "rows"
        names the pass ("counting the groups") and becomes the bar's description."""
        if message and message != "rows":
            self.bar.set_description(message, refresh=False)
        if total is not None and self.bar.total != total:
            self.bar.total = total
        self.bar.n = done
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def _run_guarded(fn, what: str):
    from pbr_core.predictions import PredictionsError

    try:
        return fn()
    except PredictionsError as exc:
        raise CLIError(cli_words(str(exc)), EXIT_BAD_INPUT) from exc
    except ImportError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from exc
    except OSError as exc:
        raise CLIError(f"{what}: {exc.strerror or exc}", EXIT_BAD_INPUT) from exc


def evaluate_stream(args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    """``evaluate`` on a dataset in one pass (this process, or Dask with --scheduler / --local-cluster).

    Returns the evaluation table and, with ``--by``, the :class:`~pbr_core.groups.GroupReport`
    (the groups are counted in a pass over their columns, then measured in the same pass as the rest).
    """
    from pbr_core.predictions import PredictionsError
    from pbr_core.stream import compute_group_statistics, compute_statistics, copies_notes, evaluate_dataset, stats_config

    for option, given in (("--map-scores", args.map_scores), ("--libraries", args.libraries)):
        if given:
            raise CLIError(f"{option} needs every row in memory and is not available on a streamed dataset; "
                           "run it on one file (without --stream), or on a sample of the rows", EXIT_USAGE)
    ds = _open(args)
    curve = range(1, 201)
    if args.n_bins is not None:
        curve = sorted(set(curve) | {args.n_bins})
    bar = _Bar(args.quiet, "evaluate")
    report = None
    try:
        if args.by:
            config = _run_guarded(lambda: stats_config(ds, curve_bins=curve, n_boot=args.n_boot, seed=args.seed),
                                  str(args.file))

            try:
                groups, stats = _run_guarded(lambda: compute_group_statistics(
                    ds, args.by, every=args.every, n_boot=args.n_boot, seed=args.seed, overall=config,
                    progress=bar, scheduler=args.scheduler, local_cluster=args.local_cluster), str(args.file))
            except PredictionsError:
                raise
            except ValueError as exc:  # the grouping itself: an unknown column, too many groups
                raise CLIError(f"{ds.spec}: {cli_words(str(exc))}", EXIT_BAD_INPUT) from exc
            report = groups.report()
        else:
            stats = _run_guarded(lambda: compute_statistics(
                ds, curve_bins=curve, n_boot=args.n_boot, seed=args.seed, progress=bar,
                scheduler=args.scheduler, local_cluster=args.local_cluster), str(args.file))
    finally:
        bar.close()
    table = evaluate_dataset(ds, stats, args.n_bins, args.lipschitz, args.eps, curve=args.curve)
    # how the first batch was read (the same for every batch), and files or rows that are copies
    table["notes"] = [*ds.layout().notes, *copies_notes(ds, stats)]
    return table, report


def find_slices_cli(args: argparse.Namespace, preds=None):
    """``evaluate --find-slices``: :func:`pbr_core.slices.find_slices` on ``preds`` (a file in memory),
    or :func:`pbr_core.stream.compute_slices` on the dataset (``preds`` None: a streamed pass of its
    own, on Dask with --scheduler / --local-cluster). Returns the :class:`~pbr_core.slices.SliceReport`."""

    try:
        if preds is not None:
            from pbr_core.slices import find_slices

            return find_slices(preds, seed=args.seed)
        from pbr_core.stream import compute_slices

        ds = _open(args)
        bar = _Bar(args.quiet, "slices")

        try:
            return _run_guarded(lambda: compute_slices(ds, seed=args.seed, progress=bar, scheduler=args.scheduler,
                                                       local_cluster=args.local_cluster), str(args.file))
        finally:
            bar.close()
    except CLIError:
        raise
    except ValueError as exc:  # no column to slice, an unreadable row
        raise CLIError(f"{args.file}: {cli_words(str(exc))}", EXIT_BAD_INPUT) from exc


def fit_sample(args: argparse.Namespace):
    """``fit`` on a dataset: a uniform random sample of --sample rows (seed --seed), as Predictions."""
    from pbr_core.stream import sample_dataset

    ds = _open(args)
    bar = _Bar(args.quiet, "sample")
    try:
        preds = _run_guarded(lambda: sample_dataset(ds, args.sample, seed=args.seed, progress=bar), str(args.file))
    finally:
        bar.close()
    print(f"sampled {preds.n:,} rows of {ds.spec} ({len(ds.files)} file(s); seed {args.seed})")
    return preds


def apply_stream(args: argparse.Namespace, rec) -> int:
    """``apply`` to a dataset: Parquet files under the --out folder, written batch by batch."""
    from pbr_core.stream import apply_to_dataset

    out = Path(args.out)
    if out.suffix.lower() in (".csv", ".parquet", ".pq"):
        raise CLIError(f"--out {out}: a dataset is written as a folder of Parquet files; give a folder name "
                       "(e.g. calibrated/)", EXIT_USAGE)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CLIError(f"--out {out}: exists and is not empty; choose a new folder", EXIT_USAGE)
    if not out.absolute().parent.exists():
        raise CLIError(f"--out {out}: the folder {out.absolute().parent} does not exist", EXIT_USAGE)
    ds = _open(args, require_labels=False)
    bar = _Bar(getattr(args, "quiet", False), "apply")
    try:
        written = _run_guarded(lambda: apply_to_dataset(rec, ds, out, progress=bar), str(args.file))
    finally:
        bar.close()
    added = ("calibrated_<class> with its Venn-Abers interval (p0, p1) in calibrated_<class>_low and "
             "calibrated_<class>_high" if hasattr(rec, "predict_interval") else "calibrated_<class>")
    print(f"applied {rec.method} to {len(ds.files)} file(s) of {ds.spec}; wrote {len(written)} Parquet file(s) "
          f"under {out} (original columns plus {added}"
          + ("; the label and score columns as numbers; in each file, another column is the text written in "
             "the CSV file where a cell is not a number or would lose leading zeros or digits as one, and "
             "numbers otherwise)" if ds.fmt != "parquet" else ")"))
    return EXIT_OK


def fit_all_rows(args: argparse.Namespace, rec) -> int:
    """``fit --all-rows``: temperature or Platt scaling on every row by streamed passes, saved to --out."""
    from pbr_core.recalibrators import PlattScaling, TemperatureScaling
    from pbr_core.stream._fit import fit_platt, fit_temperature

    if type(rec) not in (TemperatureScaling, PlattScaling):
        raise CLIError(f"--all-rows fits temperature or Platt scaling only (--method temperature or platt), not "
                       f"{args.method}; other methods fit on a random sample (--sample N)", EXIT_USAGE)
    if args.sample is not None or args.select_alpha:
        raise CLIError("--all-rows fits on every row: do not also give --sample or --select-alpha", EXIT_USAGE)
    ds = _open(args)
    from tqdm import tqdm

    platt = type(rec) is PlattScaling
    bar = tqdm(unit="pass", desc=f"{'Platt' if platt else 'temperature'} (passes over the data)", file=sys.stderr,
               disable=args.quiet, leave=False)

    def progress(passes: int, total: int | None, message: str) -> None:
        bar.update(1)
        bar.set_postfix_str(message)

    if platt:
        def run():
            return fit_platt(ds, targets=rec.targets, progress=progress)
    else:
        def run():
            return fit_temperature(ds, min_temperature=rec.min_temperature, max_temperature=rec.max_temperature,
                                   progress=progress)
    try:
        fitted = _run_guarded(run, str(args.file))
    except RuntimeError as exc:
        raise CLIError(f"fitting {'Platt scaling' if platt else 'temperature'} failed: {exc}", EXIT_FIT_FAILED) from exc
    finally:
        bar.close()
    try:
        fitted.save(args.out, fit_rows=not args.no_fit_rows)
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}", EXIT_USAGE) from exc
    where = f"every row of {ds.spec} ({len(ds.files)} file(s)) in {fitted.fit_passes_} passes"
    if platt:
        shown = "; ".join(f"a = {m['slope']:.6g}, b = {m['intercept']:.6g}" for m in fitted.maps_[:3])
        more = f"; ... ({len(fitted.maps_)} maps)" if len(fitted.maps_) > 3 else ""
        print(f"fitted Platt scaling on {where}: {shown}{more}")
    else:
        print(f"fitted temperature scaling on {where}: T = {fitted.temperature_:.6g}")
    print(f"saved to {args.out}")
    return EXIT_OK
