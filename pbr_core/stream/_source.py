"""A dataset of prediction files read as a stream of record batches.

A dataset is one Parquet / CSV file, a folder of them, or a glob; local paths, or any fsspec URL
(``s3://bucket/logs/*.parquet``) whose filesystem package is installed. It is cut into *units*
(a Parquet row group, or a whole CSV file) that are read independently: the single-process stream
walks them in order, a Dask cluster gets one task per unit, and both see the same batches in the
same units, so their random draws (bootstrap, sample) agree.

Column roles and layouts are the loader's (:mod:`pbr_core.loading`): the first non-empty batch goes
through the loader's own detection, which fixes the layout (full vector, binary, top-label,
(confidence, correct)), the label and score columns and the input type (probabilities or logits);
every later batch is converted with those roles named, so it is validated by the same code
(NaN, labels out of range, rows that do not sum to one) and a bad row stops the run with its file,
row group and row.

CSV files are read with pyarrow's streaming CSV reader: UTF-8, comma (``.csv``) or tab (``.tsv``)
separated, optionally gzip-compressed. The in-memory loader's extra leniency for spreadsheet exports
(Latin-1, semicolons, decimal commas) is not repeated here: convert such files, or load them whole.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from pbr_core.loading._limits import ReadLimits, default_limits
from pbr_core.loading._roles import ColumnChoice, column_list
from pbr_core.loading._source import _Options, _Source
from pbr_core.loading._tables import PANDAS_NA_VALUES, offset_text_types
from pbr_core.predictions import DEFAULT_SUM_TOLERANCE, InputType, Predictions, PredictionsError, real_class_names

__all__ = ["Dataset", "Layout", "Unit", "open_dataset"]

#: Rows per record batch: 256k rows of a K = 10 file are ~20 MB of float64 scores.
BATCH_ROWS = 1 << 18
#: Bytes of CSV text Arrow's streaming reader parses at a time. Its peak is many times the block
#: (type inference, field offsets): for a 10-class file 930 MB with 32 MB blocks, 410 MB with 8 MB, at
#: the same speed; 220 MB with 4 MB, but a whole pass then took 18 % more CPU (benchmarks/RESULTS_bombs.md).
_CSV_BLOCK = 8 << 20
WHOLE_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz", ".xlsx", ".xlsm")
NOT_STREAMED = (" JSON, JSON Lines and Excel files are read whole, one file at a time (pbr-calib evaluate "
                "FILE.jsonl); to stream many, convert them to Parquet, e.g. with pandas: "
                "pd.read_json(f, lines=True).to_parquet(...).")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv", ".csv.gz": "csv", ".tsv.gz": "tsv"}


def _file_format(name: str) -> str | None:
    lower = name.lower()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return _SUFFIXES[suffix]
    return None


@dataclass(frozen=True)
class Unit:
    """An independently readable piece of a dataset: a Parquet row group, or a whole CSV file."""

    file_index: int
    path: str
    fmt: str
    row_group: int | None
    first_row: int  # 0-based row of the file where the unit starts (CSV: 0)
    n_rows: int | None  # None when unknown before reading (CSV)


@dataclass(frozen=True)
class Layout:
    """What the first batch said about the columns; fixed for the whole dataset."""

    kind: str  # "multiclass" | "binary" | "top_label"
    input_type: str
    read_columns: tuple[str, ...]  # the columns read from every later batch
    label: str | None
    scores: tuple[str, ...]
    class_names: tuple[str, ...]
    n_classes: int
    has_class_ids: bool
    column_roles: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]


@dataclass
class Dataset:
    """The files of a dataset, their units and the options of :func:`pbr_core.load_predictions`.

    Build it with :func:`open_dataset`. It is small and picklable (paths and options only), so a
    Dask task receives it and reads its own unit.
    """

    spec: str
    files: list[str]
    fmt: str
    columns: list[str]
    options: _Options
    storage_options: dict = field(default_factory=dict)
    batch_rows: int = BATCH_ROWS
    _layout: Layout | None = None
    #: How each CSV file's header reads (``_csv_dialect``), sniffed once per file, not per pass.
    _dialects: dict = field(default_factory=dict, repr=False, compare=False)
    #: Each file's columns (read by name, in any order), from :func:`_check_schemas`; an empty CSV file has none.
    file_columns: dict = field(default_factory=dict, repr=False, compare=False)
    #: The column sets :meth:`require_columns` found in every file (checked once, not per batch).
    _required: set = field(default_factory=set, repr=False, compare=False)

    # ------------------------------------------------------------------ columns
    def partial_columns(self) -> dict[str, list[str]]:
        """The columns that some files of the dataset lack (ignored columns left out), each with the
        files that lack it, in file order. Every file is read by column name, so such a column is
        harmless until a run needs it (:meth:`require_columns`)."""
        ignored = set(self.options.columns.ignore)
        held = [(path, cols) for path, cols in self.file_columns.items() if cols]
        lacking: dict[str, list[str]] = {}
        for column in self.columns:
            if column not in ignored:
                absent = [path for path, cols in held if column not in cols]
                if absent:
                    lacking[column] = absent
        return lacking

    def column_notes(self) -> list[str]:
        """A note naming the columns some files lack (:meth:`partial_columns`), or none."""
        lacking = self.partial_columns()
        if not lacking:
            return []
        n = sum(1 for cols in self.file_columns.values() if cols)

        def absent(paths: list[str]) -> str:
            others = len(paths) - 1
            return (f"not in {Path(paths[0]).name}" + (f" and {others} other file{'s' if others > 1 else ''}"
                                                        if others else "") + f"; in {n - len(paths)} of {n} files")

        shown = "; ".join(f"{c!r} ({absent(paths)})" for c, paths in list(lacking.items())[:5])
        more = f" and {len(lacking) - 5} more" if len(lacking) > 5 else ""
        return [f"Not in every file of the dataset, so not read: {shown}{more}. A column the run reads (the label, a "
                "score, a column to group by) must be in every file; the files may hold their columns in any order."]

    def require_columns(self, columns: Sequence[str]) -> None:
        """Every file of the dataset holds ``columns``, or a PredictionsError naming the first file that
        lacks one, and what the column is for. Checked before a pass reads its first batch, so that a
        file lacking the label stops the run at once, not when the pass reaches it."""
        key = frozenset(columns)
        if key in self._required or not self.file_columns:
            return
        somewhere = [c for c in columns if c in self.columns]  # a name in no file: the reader's own message
        for path, cols in self.file_columns.items():
            missing = [c for c in somewhere if cols and c not in cols]
            if missing:
                have = next(p for p, other in self.file_columns.items() if missing[0] in other)
                words = _column_words(missing, self._layout, self.options.columns)
                raise PredictionsError(
                    f"{path}: this file has no column {words}, which {Path(have).name} has; every file of a "
                    "dataset must hold the columns the run reads (the label, the scores and any column to group "
                    "by), in any order. Add the column to this file, or put the files without it in another "
                    "folder.")
        self._required.add(key)

    # ------------------------------------------------------------------ files
    def _fs(self):
        return _filesystem(self.files[0], self.storage_options)[0] if _is_url(self.files[0]) else None

    def _open(self, path: str):
        fs = self._fs()
        return fs.open(path, "rb") if fs is not None else open(path, "rb")

    def _parquet(self, path: str):
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(self._open(path) if _is_url(path) else path)
        except Exception as exc:  # noqa: BLE001 - a broken file is the caller's input
            raise PredictionsError(f"{path}: could not read the Parquet file (truncated, empty or not "
                                   f"Parquet?): {_first_line(exc)}") from exc

    def units(self) -> list[Unit]:
        """Every unit of every file, in file order (reads only the Parquet footers)."""
        out: list[Unit] = []
        for i, path in enumerate(self.files):
            if self.fmt == "parquet":
                meta = self._parquet(path).metadata
                start = 0
                for g in range(meta.num_row_groups):
                    rows = meta.row_group(g).num_rows
                    out.append(Unit(i, path, "parquet", g, start, rows))
                    start += rows
            else:
                out.append(Unit(i, path, self.fmt, None, 0, None))
        return out

    def num_rows(self) -> int | None:
        """Rows of the whole dataset when the files say so without being read (Parquet), else None."""
        if self.fmt != "parquet":
            return None
        return int(sum(u.n_rows for u in self.units()))

    def identical_files(self, min_rows: int = 10) -> list[list[str]]:
        """Files of the dataset with the same bytes as another of its files (a day's log copied into the
        folder again: its rows would count twice), as lists of two or more paths in file order. Only
        files of equal size are read, in 1 MB blocks; a file that cannot be sized or read is left out,
        and so are files of fewer than ``min_rows`` rows (a header-only or empty quiet day, or a few rows
        of coarse scores, can be equal to another by chance)."""
        import hashlib

        fs = self._fs()
        by_size: dict[int, list[str]] = {}
        for path in self.files:
            try:
                size = int(fs.size(path)) if fs is not None else os.path.getsize(path)
            except (OSError, ValueError, TypeError):
                continue
            if size > 0:
                by_size.setdefault(size, []).append(path)
        same: list[list[str]] = []
        for paths in by_size.values():
            if len(paths) < 2:
                continue
            by_digest: dict[bytes, list[str]] = {}
            for path in paths:
                digest = hashlib.blake2b(digest_size=20)
                lines = 0
                try:
                    with self._open(path) as fh:
                        for block in iter(lambda: fh.read(1 << 20), b""):
                            digest.update(block)
                            lines += block.count(b"\n")
                except OSError:
                    continue
                if self._rows_at_least(path, lines, min_rows):
                    by_digest.setdefault(digest.digest(), []).append(path)
            same += [group for group in by_digest.values() if len(group) > 1]
        order = {path: i for i, path in enumerate(self.files)}
        return sorted(same, key=lambda group: order[group[0]])

    def _rows_at_least(self, path: str, newlines: int, min_rows: int) -> bool:
        """Whether a file holds at least ``min_rows`` rows: a Parquet file's footer says; a CSV's lines
        after its header (a quoted line break counts as a row: only ever more)."""
        if self.fmt == "parquet":
            try:
                return self._parquet(path).metadata.num_rows >= min_rows
            except PredictionsError:
                return False
        return newlines >= min_rows  # a header line, then at least min_rows - 1 more line breaks

    # ------------------------------------------------------------------ batches
    def raw_batches(self, unit: Unit, columns: Sequence[str] | None = None,
                    as_text: bool = False) -> Iterator[tuple[int, "object"]]:
        """(first row of the batch in its file, pyarrow RecordBatch) for every batch of ``unit``.

        ``as_text`` (CSV only): every column as the text written in it, an empty cell the empty text
        (what ``pbr-calib apply`` writes back: a ZIP code 01234 is not the number 1234)."""
        cols = list(columns) if columns is not None else None
        if cols and not as_text:  # the text reader reads this file's own other columns (apply)
            self.require_columns(cols)
        if unit.fmt == "parquet":
            pf = self._parquet(unit.path)
            start = unit.first_row
            try:
                for rb in pf.iter_batches(batch_size=self.batch_rows, row_groups=[unit.row_group], columns=cols,
                                          use_threads=False):
                    yield start, rb
                    start += rb.num_rows
            except PredictionsError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise PredictionsError(f"{unit.path}: could not read row group {unit.row_group + 1} "
                                       f"(truncated or corrupt?): {_first_line(exc)}") from exc
            return
        import pyarrow.csv as pacsv

        dialect = self._csv_dialect(unit)
        start = 0
        text_types: dict = {}  # columns of time stamps with UTC offsets, read as text (as in memory)
        try:
            for _ in range(2):
                with self._open(unit.path) as raw:
                    stream = raw
                    if dialect.compression == "gzip" or unit.path.lower().endswith(".gz"):
                        import gzip

                        stream = gzip.open(raw)
                    # The loader's reading of the header (separator, encoding, decimal comma), and its
                    # names: stripped, an empty one named by its position as in memory ("Unnamed: 2").
                    names = [c or f"Unnamed: {i}" for i, c in enumerate(dialect.columns)]
                    # Missing cells as the in-memory reader sees them (empty text is missing, not "").
                    convert = {"decimal_point": dialect.decimal, "null_values": list(PANDAS_NA_VALUES),
                               "strings_can_be_null": True}
                    if cols:
                        convert["include_columns"] = cols
                    if as_text:
                        import pyarrow as pa

                        text_types = {c: pa.string() for c in (cols or names)}
                        convert.update(null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False)
                    if text_types:
                        convert["column_types"] = text_types
                    reader = pacsv.open_csv(
                        stream,
                        read_options=pacsv.ReadOptions(block_size=_CSV_BLOCK, column_names=names, skip_rows=1,
                                                       encoding="latin-1" if dialect.encoding != "utf-8" else "utf8"),
                        parse_options=pacsv.ParseOptions(delimiter=dialect.sep),
                        convert_options=pacsv.ConvertOptions(**convert),
                    )
                    if not text_types:
                        text_types = offset_text_types(reader.schema)
                        if text_types:
                            continue  # open again with those columns read as text
                    for block in reader:
                        # A 32 MB block of short rows holds millions of them: cut it into batches of at most
                        # batch_rows, as a Parquet row group is, so that the work on a batch (bootstrap
                        # weights: rows x resamples) stays bounded (a streamed 2-column CSV took 1.2 GB).
                        for offset in range(0, block.num_rows, self.batch_rows):
                            rb = block.slice(offset, self.batch_rows)
                            yield start, rb
                            start += rb.num_rows
                    return
        except PredictionsError:
            raise
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001
            if "Empty CSV file" in str(exc):
                return
            raise PredictionsError(f"{unit.path}: could not read the CSV file near data row {start + 1}: "
                                   f"{_first_line(exc)}") from exc

    def _decimal(self, unit: Unit) -> str:
        """The file's decimal mark, for its cells written as percentages ("93,3%" in a ';' export)."""
        return "." if unit.fmt == "parquet" else self._csv_dialect(unit).decimal

    def _csv_dialect(self, unit: Unit):
        """How the in-memory loader reads this CSV file's header (``_csv_header``: separator, encoding,
        decimal comma, compression, the column names), so that a streamed file is read as the same
        file loaded whole. Read once per file."""
        if unit.path in self._dialects:
            return self._dialects[unit.path]
        from pbr_core.loading._source import _SNIFF_BYTES
        from pbr_core.loading._tables import _csv_header

        dataset = self

        class _Head:  # the part of the loader's _Source that _csv_header uses
            name = unit.path

            def open(self):
                return dataset._open(unit.path)

            def head(self, n: int = _SNIFF_BYTES) -> bytes:
                with dataset._open(unit.path) as f:
                    return f.read(n)

            def error(self, message: str) -> PredictionsError:
                return PredictionsError(f"{unit.path}: {message}")

        src = _Head()
        self._dialects[unit.path] = _csv_header(src, "tsv" if unit.fmt == "tsv" else "csv", src.head())
        return self._dialects[unit.path]

    def layout(self) -> Layout:
        """The layout and column roles, detected by the loader on the first non-empty batch."""
        if self._layout is None:
            lay = self._detect()
            self._layout = replace(lay, notes=(*lay.notes, *self.column_notes()))
        return self._layout

    def _detect(self) -> Layout:
        # The columns named for a role are read from every file: one that some files lack is refused
        # now, naming such a file (a name in no file is left to the loader's "is not a column").
        named = self.options.columns
        self.require_columns([c for c in (named.label, *(named.scores or ()), *named.groups) if c])
        # The columns some files lack are not read (column_notes says so): the first batch's detection
        # leaves them out too, or a first file holding one saw it (audit 11: a numeric one made the
        # scores "ambiguous" and refused the run, a text one was listed as metadata), while the same
        # files in another order ran. The detection then sees what the folder without them shows.
        # (A column to ignore that some files lack is left out as well: read, it would be required.)
        held = [set(cols) for cols in self.file_columns.values() if cols]
        everywhere = set.intersection(*held) if held else set()
        if all(set(cols) <= everywhere for cols in held):
            return self._detect_on(None)
        try:
            return self._detect_on(everywhere)
        except PredictionsError as exc:
            # Without them the first batch has no label or no score: where the first file's own columns
            # give one that some files lack (the label missing from a later day), that file is named.
            try:
                lay = self._detect_on(None)
            except PredictionsError:
                raise exc from None
            self._layout = lay  # the columns' roles in the message ("'label' (the label)")
            try:
                self.require_columns(lay.read_columns)
            finally:
                self._layout = None
            raise

    def _detect_on(self, everywhere: set | None) -> Layout:
        """The layout read from the first non-empty batch, of the columns in ``everywhere`` only (None:
        all the file's columns)."""
        import pyarrow as pa

        from pbr_core.loading._tables import OneLabelNameError, _arrow_frame, _from_table

        named = self.options.columns
        for unit in self.units():
            own = self.file_columns.get(unit.path, ())
            wanted = None if everywhere is None else [c for c in own if c in everywhere]
            for start, rb in self.raw_batches(unit, wanted or None):
                if rb.num_rows == 0:
                    continue
                src = _Source(f"{unit.path} (first batch, used to detect the columns)")
                header_notes = list(self._csv_dialect(unit).notes) if unit.fmt != "parquet" else []
                # A column to ignore that this file lacks (other files hold it) is ignored already.
                ignore = tuple(c for c in named.ignore if c in rb.schema.names or c not in self.columns)
                options = replace(self.options, columns=replace(named, ignore=ignore))

                def read(opts: _Options, notes: Sequence[str] = ()) -> Predictions:
                    df = _arrow_frame(pa.Table.from_batches([rb]), csv=unit.fmt != "parquet")
                    return _from_table(df, src, opts, [*header_notes, *notes], self._decimal(unit))

                try:  # binary labels of one name in the first rows: the later rows settle the two classes
                    preds = read(replace(options, one_label_name=False))
                except OneLabelNameError as exc:
                    preds = self._settle_label_names(exc, unit, read, options)
                return _layout_of(preds, self.options)
        raise PredictionsError(f"{self.spec}: the dataset has no data rows ({len(self.files)} file(s)).")

    def _settle_label_names(self, exc, first: Unit, read, options: _Options) -> Predictions:
        """The first batch's binary labels hold one name only (a quiet first day, all 'no'; a file
        sorted by its outcome): the classes are decided as the in-memory loader decides them for the
        whole dataset. The label column of the later rows is read until another name appears; the two
        names are then decided as two names in one file are (:func:`binary_classes`: the class the score
        column names, else the "yes" of a known pair). Where no other name appears, the one name is
        read as one name in one file is (a word of a known pair, else an error)."""
        from pbr_core.loading._roles import binary_classes, binary_classes_note
        from pbr_core.loading._tables import OneLabelNameError, one_label_name_message, two_label_names_message

        found = self._other_label_name(exc.label, exc.name)
        if found is None:
            try:
                return read(options)
            except OneLabelNameError:
                raise PredictionsError(
                    f"{self.spec}: every row of the dataset ({len(self.files)} file(s)) is of one class: "
                    + one_label_name_message(exc.name, exc.header, exc.label)) from None
        other, where = found
        a, b = sorted((exc.name, other))
        decided = binary_classes([a, b], exc.header)
        if decided is None:
            raise PredictionsError(
                f"{self.spec}: the first rows ({first.path}) hold only {exc.name!r} and {where} also holds "
                f"{other!r}: " + two_label_names_message(a, b, exc.header, exc.label))
        negative, positive, how = decided
        note = (f"The first rows ({first.path}) hold only {exc.name!r} in column {exc.label!r}; {other!r} first "
                f"appears in {where}. " + binary_classes_note(negative, positive, how, exc.header,
                                                              options.input_type == "logits"))
        return read(replace(options, binary_names=(negative, positive)), [note])

    def _other_label_name(self, label: str, name: str) -> tuple[str, str] | None:
        """(the first label value other than ``name``, the file holding it) in the dataset's label column
        ``label``, read alone (one column: a whole pass over it where every row holds ``name``); None
        where every row holds ``name``."""
        import pandas as pd

        for unit in self.units():
            for start, rb in self.raw_batches(unit, [label]):
                if rb.num_rows == 0:
                    continue
                values = pd.Series(rb.column(0).to_pandas()).dropna().astype(str).str.strip()
                other = np.flatnonzero((values != name).to_numpy())
                if other.size:
                    r = int(values.index[other[0]])
                    return str(values.iloc[other[0]]), f"{unit.path} (row {start + r + 1} of the file)"
        return None

    def predictions(self, unit: Unit, groups: Sequence[str] = ()) -> Iterator[tuple[int, Predictions]]:
        """(first row in the file, validated Predictions) for every batch of ``unit``.

        ``groups``: other columns read as well and kept in ``Predictions.metadata`` (for calibration
        by group); by default only the label and score columns are read.

        A problem in a batch raises :class:`~pbr_core.predictions.PredictionsError` naming the
        file, the row group (Parquet) and the row, counted in the file (data rows from 1).
        """
        import pyarrow as pa

        from pbr_core.loading._tables import _arrow_frame, _from_table

        lay = self.layout()
        groups = tuple(g for g in dict.fromkeys(groups) if g not in lay.read_columns)
        opts = _batch_options(self.options, lay, groups)
        for start, rb in self.raw_batches(unit, (*lay.read_columns, *groups)):
            if rb.num_rows == 0:
                continue
            src = _Source(unit.path)
            df = _arrow_frame(pa.Table.from_batches([rb]), csv=unit.fmt != "parquet")
            try:
                preds = _from_table(df, src, opts, [], self._decimal(unit))
            except PredictionsError as exc:
                raise PredictionsError(_where(str(exc), unit, start)) from None
            if lay.kind != "top_label" and preds.class_names != lay.class_names and preds.kind == "binary":
                raise PredictionsError(
                    f"{unit.path}: rows {start + 1}..{start + rb.num_rows} name the classes "
                    f"{list(preds.class_names)}, but the first batch of the dataset named {list(lay.class_names)}; "
                    "use 0/1 labels so that every batch means the same classes.")
            yield start, preds


def _column_words(missing: Sequence[str], lay: Layout | None, named: ColumnChoice) -> str:
    """The missing columns and what each is for ("'label' (the label)", "'segment' (a column to group
    or slice by)"), from the layout once detected, else from the roles named."""
    def role(c: str) -> str:
        if c == named.label or (lay is not None and c == lay.label):
            return "the label"
        if c in (named.scores or ()) or (lay is not None and c in lay.scores):
            return "a score"
        if lay is not None and c in lay.read_columns:
            return "read for the predictions"
        return "a column to group or slice by"

    return ", ".join(f"{c!r} ({role(c)})" for c in missing[:5]) + (f" and {len(missing) - 5} more"
                                                                 if len(missing) > 5 else "")


def _where(message: str, unit: Unit, start: int) -> str:
    """A loader message about a batch, with its row counted in the file and the row group named."""
    group = f"row group {unit.row_group + 1}, " if unit.row_group is not None else ""

    def row(m: re.Match) -> str:
        r = int(m.group(1))
        return f"{group}row {start + r} of the file (data row, header excluded)"

    return re.sub(r"\brow (\d+) \(data row, header excluded\)", row, message)


def _batch_options(opts: _Options, lay: Layout, groups: tuple[str, ...] = ()) -> _Options:
    if lay.kind == "top_label":  # the first batch's confidence / predicted columns; (confidence, correct) by name
        roles = dict((r, c) for c, r in lay.column_roles)
        choice = ColumnChoice(label=lay.label, groups=groups, confidence=roles.get("confidence") if "predicted" in roles
                              else None, predicted=roles.get("predicted"))
    else:
        choice = ColumnChoice(label=lay.label, scores=lay.scores, groups=groups)
    # Binary labels given as names: every batch maps them as the first did (a batch may hold only one).
    return replace(opts, columns=choice, input_type=lay.input_type,
                   binary_names=real_class_names(lay.class_names) if lay.kind == "binary" else None)


def _layout_of(preds: Predictions, opts: _Options) -> Layout:
    label = next((c for c, r in preds.column_roles if r == "label"), None)
    scores = tuple(c for c, r in preds.column_roles if r == "score")
    used = tuple(c for c, r in preds.column_roles if r in ("label", "score", "confidence", "predicted", "correct"))
    if preds.kind == "top_label":
        scores = ()
    return Layout(
        kind=preds.kind, input_type=preds.input_type, read_columns=used, label=label, scores=scores,
        class_names=tuple(preds.class_names), n_classes=preds.n_classes, has_class_ids=preds.has_class_ids,
        column_roles=tuple(preds.column_roles), notes=tuple(preds.notes),
    )


# ---------------------------------------------------------------------------------------- opening
def _is_url(spec: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", spec)) and not spec.startswith("file://")


def _filesystem(spec: str, storage_options: dict):
    try:
        import fsspec
    except ImportError:
        raise PredictionsError(f"{spec}: reading URLs needs the fsspec package (pip install fsspec).") from None
    try:
        return fsspec.core.url_to_fs(spec, **storage_options)
    except (ImportError, ValueError) as exc:
        raise PredictionsError(f"{spec}: no filesystem for this URL is installed ({exc}).") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _expand(spec: str, storage_options: dict) -> list[str]:
    if _is_url(spec):
        fs, path = _filesystem(spec, storage_options)
        protocol = spec.split("://", 1)[0]
        if any(ch in path for ch in "*?["):
            found = fs.glob(path)
        elif fs.isdir(path):
            found = [p for p in fs.find(path) if _file_format(p)]
        else:
            found = [path] if fs.exists(path) else []
        return [f"{protocol}://{p}" if "://" not in p else p for p in sorted(found)]
    if spec.startswith("file://"):
        spec = spec[len("file://"):]
    p = Path(spec).expanduser()
    if any(ch in spec for ch in "*?["):
        return bounded_glob(str(p), spec)
    if p.is_dir():
        return _dataset_folder(p, spec)
    return [str(p)] if p.is_file() else []


#: A folder read as a dataset is walked up to this many entries (files and folders): a larger one is
#: refused, not read (``pbr-calib evaluate /usr`` walked the whole system folder as a dataset).
MAX_FOLDER_ENTRIES = 100_000
#: A dataset's folder holds its files (and hidden or ``_``-prefixed ones such as ``_SUCCESS``, which are
#: skipped); one with more than this many other files is not a dataset's folder, and is refused.
MAX_OTHER_FILES = 1_000


def _component_regex(part: str) -> str:
    """One path component of a glob as a regular expression (``*`` and ``?`` never cross a ``/``)."""
    out, i = [], 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            j = i + 1 + (part[i + 1:i + 2] == "!")
            j += part[j:j + 1] == "]"  # a "]" first in a class is part of it
            k = part.find("]", j)
            if k < 0:
                out.append(re.escape(ch))
            else:
                body = part[i + 1:k]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
                i = k
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def bounded_glob(pattern: str, spec: str | None = None) -> list[str]:
    """The files that the glob ``pattern`` matches (``**`` any number of folders), found by walking only
    the folders the pattern can reach, within :data:`MAX_FOLDER_ENTRIES` entries.

    ``glob.glob`` walks every folder a pattern reaches before it can say how many it found: ``/**/*.csv``
    or ``/*/*/*`` walked a whole system. Here the walk starts at the pattern's fixed folder, descends only as
    deep as the pattern does (any depth only with ``**``), and stops with an error past the limit. Hidden
    names are matched only by a pattern component that starts with a dot, as ``glob`` does.

    Raises
    ------
    PredictionsError
        When the walk passes :data:`MAX_FOLDER_ENTRIES` entries.
    """
    shown = pattern if spec is None else spec
    parts = Path(pattern).parts
    fixed = next(i for i, part in enumerate(parts) if any(ch in part for ch in "*?[")) if any(
        any(ch in part for ch in "*?[") for part in parts) else len(parts)
    base = Path(*parts[:fixed]) if fixed else Path(".")
    rest = parts[fixed:]
    if not rest:
        return [str(base)] if base.is_file() else []
    regex = re.compile("/".join("(?:[^/]+/)*[^/]*" if part == "**" else _component_regex(part) for part in rest)
                       .replace("(?:[^/]+/)*[^/]*/", "(?:[^/]+/)*") + r"\Z")
    hidden_ok = {i for i, part in enumerate(rest) if part.startswith(".")}
    max_depth = None if "**" in rest else len(rest)
    found, entries = [], 0
    # Links to folders are followed, as glob follows them (a loop of links ends at the limit).
    for root, dirs, files in os.walk(base, followlinks=True):
        rel_root = os.path.relpath(root, base)
        depth = 0 if rel_root == "." else rel_root.count(os.sep) + 1
        entries += len(dirs) + len(files)
        if entries > MAX_FOLDER_ENTRIES:
            raise PredictionsError(
                f"{shown}: more than {MAX_FOLDER_ENTRIES:,} files and folders to look through, far more than a "
                "dataset's; name the dataset's files more narrowly (e.g. 'logs/*.parquet').")
        if max_depth is not None and depth + 1 >= max_depth:
            dirs[:] = []  # the pattern goes no deeper
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") or depth in hidden_ok)
        for name in files:
            if name.startswith(".") and (max_depth is None or depth not in hidden_ok):
                continue
            rel = name if rel_root == "." else os.path.join(rel_root, name).replace(os.sep, "/")
            if regex.match(rel):
                found.append(str(base / rel) if fixed else rel)
    return sorted(found)


def _dataset_folder(folder: Path, spec: str) -> list[str]:
    """The Parquet / CSV files under ``folder`` (hidden and ``_``-prefixed names skipped, symbolic
    links to folders not followed), walked within :data:`MAX_FOLDER_ENTRIES` and
    :data:`MAX_OTHER_FILES`."""
    found, others, entries = [], [], 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        entries += len(dirs) + len(files)
        if entries > MAX_FOLDER_ENTRIES:
            raise PredictionsError(
                f"{spec}: this folder holds more than {MAX_FOLDER_ENTRIES:,} files and folders, far more than a "
                "dataset's folder; name the dataset's files with a glob (e.g. 'logs/*.parquet') or give the folder "
                "that holds only them.")
        for name in sorted(files):
            if name.startswith((".", "_")):
                continue
            path = os.path.join(root, name)
            if not _file_format(name):
                others.append(path)
                if len(others) > MAX_OTHER_FILES:
                    raise PredictionsError(
                        f"{spec}: this folder holds more than {MAX_OTHER_FILES:,} files that are not .parquet / .csv "
                        f"(e.g. {others[0]!r}): it does not look like a dataset's folder; name the dataset's files "
                        "with a glob (e.g. 'logs/*.parquet') or give the folder that holds only them.")
            elif os.path.isfile(path):
                found.append(path)
    return sorted(found)


def open_dataset(
    spec: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    label_column: str | None = None,
    score_columns: str | Sequence[str] | None = None,
    group_columns: str | Sequence[str] | None = None,
    ignore_columns: str | Sequence[str] | None = None,
    input_type: InputType = "auto",
    renormalize: bool = False,
    tolerance: float = DEFAULT_SUM_TOLERANCE,
    percent: bool = False,
    positive_class: str | None = None,
    storage_options: dict | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Dataset:
    """A dataset of prediction files: one file, a folder (every Parquet / CSV file under it, hidden
    and ``_``-prefixed names skipped), a glob, or a list of these; a URL for any installed fsspec
    filesystem. The options are those of :func:`pbr_core.load_predictions`.

    Every file is read by column name: the files may hold their columns in any order, and a column
    that some files lack is not read (a note says so, unless ``ignore_columns`` names it) until a
    run needs it (the label, a score, a column to group by), which is then an error naming the
    first file that lacks it. One format: all Parquet or all CSV / TSV.

    Raises
    ------
    PredictionsError
        No file matches, mixed formats, an unreadable file; a needed column absent from a file (when
        a pass reads it).

    Examples
    --------
    >>> import pbr_core.stream as ps
    >>> ds = ps.open_dataset("sample_data/kitti_mlp.parquet")
    >>> ds.layout().kind, len(ds.files)
    ('binary', 1)
    """
    specs = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    storage_options = dict(storage_options or {})
    files: list[str] = []
    for s in specs:
        found = _expand(os.fspath(s), storage_options)
        if not found:
            whole_files = os.path.isdir(os.fspath(s)) and any(
                n.lower().endswith(WHOLE_FILE_SUFFIXES) for n in os.listdir(os.fspath(s)))
            raise PredictionsError(f"{s}: no file found (a file, a folder of .parquet / .csv files, or a glob "
                                   "such as 'logs/*.parquet')." + (NOT_STREAMED if whole_files else ""))
        files.extend(found)
    shown = ", ".join(map(os.fspath, specs))
    formats = {f: _file_format(f) for f in files}
    unknown = [f for f, v in formats.items() if v is None]
    if unknown:
        raise PredictionsError(f"{unknown[0]}: not a Parquet or CSV file (by its name); a dataset holds "
                               ".parquet / .pq or .csv / .tsv (optionally .gz) files."
                               + (NOT_STREAMED if unknown[0].lower().endswith(WHOLE_FILE_SUFFIXES) else ""))
    kinds = {"parquet" if v == "parquet" else "csv" for v in formats.values()}
    if len(kinds) > 1:
        raise PredictionsError(f"{shown}: the dataset mixes Parquet and CSV files; use one format.")
    fmt = formats[files[0]]
    try:
        choice = ColumnChoice(
            label=label_column.strip() if label_column and label_column.strip() else None,
            scores=column_list(score_columns, "score_columns") or None,
            groups=column_list(group_columns, "group_columns") or (),
            ignore=column_list(ignore_columns, "ignore_columns") or (),
        )
    except TypeError as exc:
        raise PredictionsError(f"{shown}: {exc}") from None
    # A batch holds a bounded number of rows, so only the cell limit applies (a page that shows a group
    # value of 300 MB fails): the loader's own check, batch by batch.
    cells = ReadLimits(max_bytes=None, max_memory=None, max_cell_bytes=default_limits().max_cell_bytes)
    opts = _Options(choice, input_type, bool(renormalize), float(tolerance), None, True, percent=bool(percent),
                    positive_class=None if positive_class is None or not str(positive_class).strip()
                    else str(positive_class), limits=cells)
    ds = Dataset(shown, files, fmt, [], opts, storage_options, int(batch_rows))
    ds.columns = _check_schemas(ds)
    return ds


def _columns_of(ds: Dataset, index: int, path: str) -> list[str]:
    """A file's columns as its batches are read: Parquet's schema; a CSV file's header as the loader
    reads it (separator, quotes; an empty name is "Unnamed: i"), none for an empty file."""
    if ds.fmt == "parquet":
        return list(ds._parquet(path).schema_arrow.names)
    with ds._open(path) as raw:
        stream = raw
        if path.lower().endswith(".gz"):
            import gzip

            stream = gzip.open(raw)
        line = stream.readline().decode("utf-8-sig", errors="replace").rstrip("\r\n")
    if not line.strip():
        return []  # an empty CSV file: no header, no rows
    dialect = ds._csv_dialect(Unit(index, path, ds.fmt, None, 0, None))
    return [c or f"Unnamed: {i}" for i, c in enumerate(dialect.columns)]


def _check_schemas(ds: Dataset) -> list[str]:
    """Every file's columns (``ds.file_columns``), and all of them in the order first met. Files that
    differ are not refused here (audit 10a: one added column on a later day, or a CSV day written with
    its columns in another order, stopped the whole folder, and --ignore-columns did not help): every
    batch is read by name, a column some files lack is noted (:meth:`Dataset.column_notes`), and one
    the run needs is refused when a pass starts (:meth:`Dataset.require_columns`)."""
    union: dict[str, None] = {}
    for i, path in enumerate(ds.files):
        cols = _columns_of(ds, i, path)
        ds.file_columns[path] = tuple(cols)
        union.update(dict.fromkeys(cols))
    if not union:
        raise PredictionsError(f"{ds.spec}: every file of the dataset is empty.")
    return list(union)
