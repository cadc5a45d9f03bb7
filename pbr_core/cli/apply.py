"""``pbr-calib apply``: a saved recalibrator applied to a file (or, streamed, to a dataset)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pbr_core.cli._common import (CLIError, EXIT_BAD_INPUT, EXIT_OK, EXIT_USAGE, _binary_ece_words, _check_output,
                                  _load, regular_file)
from pbr_core.cli.stream import apply_stream, is_dataset
from pbr_core.cli.evaluate import evaluation_table


def cmd_apply(args: argparse.Namespace) -> int:
    import pbr_core
    from pbr_core.loading import save_predictions
    from pbr_core.loading.writing import probability_columns
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
    as_written = _columns_as_written(args.file, preds, csv_out=Path(args.out).suffix.lower() == ".csv")
    try:
        # The file's own column names and order (p_dem, won; not 0, 1, label).
        save_predictions(calibrated, path_or_buffer=args.out, spreadsheet_safe=not args.raw_csv, headers_from=preds,
                         intervals=intervals, as_written=as_written)
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}", EXIT_USAGE) from exc
    except PredictionsError as exc:  # an interval column's name taken by a column of the file
        raise CLIError(f"{preds.source}: {exc}", EXIT_BAD_INPUT) from exc
    from pbr_core.experiments import small_test_set_problem

    too_few = small_test_set_problem(preds.n) if preds.has_labels else None
    if too_few:  # an ECE before / after on so few rows says nothing: not printed, and why
        print(f"applied {rec.method} to {preds.n} rows of {preds.source}; ECE not measured: {too_few}")
    elif preds.has_labels:
        _measured_ece(rec, preds, calibrated, args.model)
    else:
        print(f"applied {rec.method} to {preds.n} unlabelled rows of {preds.source} (no labels: ECE not measured)")
    if intervals is not None:
        print("with each probability column's Venn-Abers interval (p0, p1) in the columns <column>_low and "
              "<column>_high")
    # Said for every CSV: how it is written (audit 9a: "every other column is as it was" read as if the
    # file's format were kept; audit 12a: now it is, a ';' export's too) and how the probabilities are.
    dialect = ""
    if Path(args.out).suffix.lower() == ".csv":
        dialect = _csv_words(as_written)
    kept = ""
    if as_written is not None and not dialect and as_written.shape[1]:  # text in a typed file: said, and why
        shown = ", ".join(map(repr, as_written.columns[:5])) + (", ..." if as_written.shape[1] > 5 else "")
        kept = (f" ({shown} as text, as the CSV wrote them: as numbers they would lose leading zeros or "
                "digits, or they are not numbers; the other columns keep their types)")
    print(f"wrote {args.out}{dialect}: {_calibrated_columns_words(probability_columns(calibrated, preds))}{kept}")
    return EXIT_OK


def _csv_words(as_written) -> str:
    """How a CSV written by apply is written, in words: in the input CSV's own format (``as_written``'s
    dialect, :func:`pbr_core.loading.read_as_written`), or the standard one for another input."""
    from pbr_core.loading.dialect import CsvDialect

    if as_written is None:
        return " (comma-separated, '.' decimal points, the probabilities as fractions from 0 to 1)"
    dialect = CsvDialect.of(as_written)
    percent = dialect.percent_words()
    return (f" (in your file's own format: {dialect.words()}; your other columns as written; "
            + (f"{percent})" if percent else "the probabilities as fractions from 0 to 1)"))


def _columns_as_written(path: str, preds, csv_out: bool):
    """The columns of a CSV input that apply does not change, as the text written in them, with the
    file's dialect (:func:`pbr_core.loading.read_as_written`): the loader reads a ZIP code 01234 as the number 1234,
    which written back would no longer match the rows it came from. Into a CSV every such column,
    the label's too. Into a Parquet file, which is typed, only the other columns whose numbers would
    not give back what was written (leading zeros, more digits than a float holds) or that are not
    numbers (:func:`~pbr_core.loading.writing.numbers_as_written`): a number column (an amount 4.50)
    keeps its type (audit 11: every column had become text), and the label keeps its type as the
    streamed apply of a folder writes it. None for other inputs."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    from pbr_core.loading import read_as_written
    from pbr_core.loading.writing import numbers_as_written
    from pbr_core.predictions import PredictionsError

    kept = ("metadata", "label") if csv_out else ("metadata",)
    columns = [c for c, role in preds.column_roles if role in kept]
    try:  # also with no such column: the file's dialect, which the written CSV keeps
        text = read_as_written(path, preds, columns)
    except PredictionsError as exc:
        raise CLIError(f"{path}: could not read the columns again as written, to write them back unchanged: "
                       f"{exc}", EXIT_BAD_INPUT) from exc
    if text is None or csv_out:
        return text
    meta = preds.metadata

    def typed(c: str) -> bool:  # the loader's numbers, and the text says they give it back
        return (meta is not None and c in meta.columns and is_numeric_dtype(meta[c]) and not is_bool_dtype(meta[c])
                and numbers_as_written(text[c], text.attrs.get("decimal", ".")) is not None)

    return text[[c for c in text.columns if not typed(c)]]


def _calibrated_columns_words(columns: list[str]) -> str:
    """Which columns of the written file now hold the calibrated probabilities: under the file's own
    names (an earlier issue: downloads keep the user's names), the file alone cannot tell."""
    shown = ", ".join(repr(c) for c in columns[:5]) + (f", ... ({len(columns)} columns)" if len(columns) > 5 else "")
    one = len(columns) == 1
    return (f"column{'' if one else 's'} {shown} now hold{'s' if one else ''} the calibrated probabilities "
            "(in place of the scores); every other column is as it was")


def _measured_ece(rec, preds, calibrated, model: str) -> None:
    """The ECE before -> after on the rows of ``preds`` the recalibrator was not fitted on (its file's
    fingerprint of its fit rows), with a line saying how many rows were fit rows; no ECE where they
    cannot be left out (every row is one, too few others, or a sampled fingerprint cannot say which).
    Rows that only may be fit rows (identical rows) are kept and said to be: leaving them out would
    pick new rows by their label (:class:`pbr_core.fit_rows.FitRowOverlap`, whose ``verdict`` and
    ``found`` decide the words, as on the Fit & apply page)."""
    import pbr_core
    from pbr_core.experiments import MIN_TEST_ROWS, small_test_set_problem
    from pbr_core.fit_rows import coarser_words

    check = rec.fit_row_overlap(preds)
    head = f"applied {rec.method} to {preds.n} rows of {preds.source}"
    verdict = check.verdict(MIN_TEST_ROWS)
    flatters = "if some were fit rows, the ECE above flatters it"
    if verdict == "sampled":
        print(f"{head}; ECE not measured: about {check.estimated:,.0f} of these rows are rows it was fitted on "
              f"(estimated: {model} keeps a sample of its {check.n_fit:,} fit rows), and which ones cannot be told, so "
              "it cannot be measured on the others; apply it to rows it was not fitted on to measure it")
        return
    if verdict == "in-sample":
        print(f"{head}; ECE not measured: in-sample: {_fit_rows_found(check)}, and no row is left that it was "
              "not fitted on (an ECE on its own fit rows flatters a recalibrator); apply it to rows it was "
              "not fitted on to measure it")
        return
    if verdict == "too few left":
        print(f"{head}; ECE not measured: {_fit_rows_found(check)}, and only {check.n_other} other row{' is' if check.n_other == 1 else 's are'} left: "
              f"{small_test_set_problem(check.n_other)}")
        return
    rows = check.rows_to_measure()
    if rows is not None:
        preds, calibrated = preds.subset(rows), calibrated.subset(rows)
    before = evaluation_table(preds, interval=False)["ece"]
    after = evaluation_table(calibrated, interval=False)["ece"]
    what = f"{_binary_ece_words()}, " if preds.kind == "binary" else ""
    on = "" if rows is None else f"; ECE on the {preds.n} rows it was not fitted on"
    print(f"{head}{on}: ECE {before:.4f} -> {after:.4f} ({what}B = {pbr_core.optimal_n_bins(preds.n)})")
    if verdict == "not recorded":
        print(f"fit rows: not recorded in {model} (saved before pbr-calib recorded them, or with --no-fit-rows): "
              "cannot tell whether these rows were used to fit it; if they were, the ECE above flatters it")
    elif verdict == "coarser":
        print(f"fit rows: cannot tell: {coarser_words(check)}; ECE on all {check.n_rows} rows: {flatters}")
    elif verdict == "none":
        none = "this row does not have" if check.n_rows == 1 else f"none of these {check.n_rows} rows has"
        print(f"fit rows: {none} exactly the scores and label of one of the "
              f"{check.n_fit} rows it was fitted on ({model} records them all)")
    elif verdict == "none of the sample":
        print(f"fit rows: none of the {check.n_checkable} rows its sample of {check.n_fit:,} fit rows can check is a "
              f"fit row; at most about {check.bound_if_none:,.0f} of the {check.n_rows} can be (95 %)")
    elif verdict == "shared":
        print(f"fit rows: {_fit_rows_found(check)}; kept in the ECE ({flatters})")
    else:
        print(f"fit rows: {_fit_rows_found(check)}; left out of the ECE, which on its own fit rows flatters a "
              "recalibrator" + (f"; {_possible(check, more=True)}; kept in the ECE (if some were fit rows, it "
                                "flatters it)" if check.n_possible else ""))


def _possible(check, more: bool = False) -> str:
    """Rows that have the values of fit rows but cannot be told from new rows with the same values."""
    from pbr_core.fit_rows import chance_words

    words = (f"{check.n_possible} {'more ' if more else ''}rows may be rows it was fitted on: they have the scores "
             f"and label of a fit row, but this file holds identical rows ({check.n_distinct} different "
             f"rows among {check.n_rows}), so they may equally be new rows with the same values; leaving them out "
             "would pick rows by their label and bias the ECE")
    if check.holds_all:
        words += (f"; every value of its {check.n_fit} fit rows occurs here at least as often, as it would if this "
                  f"file held them, but a file of new rows this size would do so by chance (estimated chance: "
                  f"{chance_words(check.chance_contains)}), so it cannot be told")
    return words


def _fit_rows_found(check) -> str:
    """How many checked rows are rows the recalibrator was fitted on (``check.found``), or (identical rows)
    may be."""
    from pbr_core.fit_rows import chance_words

    if check.found == "contains":
        same = check.n_rows == check.n_fit
        return (f"this file appears to {'be' if same else 'contain'} the {check.n_fit} rows it was fitted on: every "
                f"value (scores and label) of its fit rows occurs here {'as' if same else 'at least as'} often "
                f"as among them, which a file of new rows this size would rarely do by chance (estimated chance: "
                f"{chance_words(check.chance_contains)})"
                + ("" if same else f"; identical rows cannot be told apart, but leaving out {check.n_excluded} rows "
                   "with the fit rows' values leaves exactly the values of the other rows"))
    if check.found == "identified":
        found = ("this row is one" if check.n_rows == 1 else f"{check.n_identified} of these {check.n_rows} rows "
                 f"{'is a row' if check.n_identified == 1 else 'are rows'}")
        return f"{found} it was fitted on (the same scores and label, found once here and once among its fit rows)"
    return _possible(check)
