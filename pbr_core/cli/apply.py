"""``pbr-calib apply``: a saved recalibrator applied to a file (or, streamed, to a dataset)."""

from __future__ import annotations

import argparse

from pbr_core.cli._common import (CLIError, EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, _binary_ece_words, _check_output,
                                  _load, regular_file)
from pbr_core.cli.stream import apply_stream, is_dataset
from pbr_core.cli.evaluate import evaluation_table


def cmd_apply(args: argparse.Namespace) -> int:
    import pbr_core
    from pbr_core.loading import save_predictions
    from pbr_core.predictions import PredictionsError
    from pbr_core.recalibrators import RecalibratorFileError, load_recalibrator

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
    # A Venn-Abers predictor's (p0, p1) interval of each class, beside its probability column.
    intervals = rec.predict_interval(preds) if hasattr(rec, "predict_interval") else None
    try:
        # The file's own column names and order (p_dem, won; not 0, 1, label).
        save_predictions(calibrated, path_or_buffer=args.out, spreadsheet_safe=not args.raw_csv, headers_from=preds,
                         intervals=intervals)
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}", EXIT_USAGE) from exc
    except PredictionsError as exc:  # an interval column's name taken by a column of the file
        raise CLIError(f"{preds.source}: {exc}", EXIT_BAD_INPUT) from exc
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
    if intervals is not None:
        print("with each probability column's Venn-Abers interval (p0, p1) in the columns <column>_low and "
              "<column>_high")
    print(f"wrote {args.out}")
    return EXIT_OK
