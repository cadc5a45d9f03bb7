"""Sampling a dataset for a fit, and applying a fitted recalibrator to every row of a dataset."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Callable

import numpy as np

from pbr_core.loading.writing import interval_columns
from pbr_core.progress import Progress
from pbr_core.predictions import TOP_LABEL_NOT_RECALIBRATED, Predictions, PredictionsError
from pbr_core.stream._source import Dataset

__all__ = ["RowSample", "apply_to_dataset", "sample_dataset"]


def _check_size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"Expected argument `size` to be an integer larger than 0, but got {size!r}.")
    return int(size)


class RowSample:
    """A mergeable uniform sample of exactly ``size`` rows (bottom-k: the rows with the smallest
    random keys; see :func:`sample_dataset`). Feed batches with :meth:`update`, combine partial
    samples with :meth:`merge`, read the rows with :meth:`predictions`."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size = _check_size(size)
        self.seed = int(seed)
        self.keys = np.zeros(0)
        self.where = np.zeros((0, 2), dtype=np.int64)  # (file, row) of each kept row: file order at the end
        self.columns: dict[str, np.ndarray] = {}
        self.seen = 0
        self.first: Predictions | None = None

    @staticmethod
    def _arrays(preds: Predictions) -> dict[str, np.ndarray]:
        if preds.probs is None:
            return {"confidence": preds.confidence, "predicted": preds.predicted, "labels": preds.labels}
        return {"scores": preds.logits if preds.logits is not None else preds.probs, "labels": preds.labels}

    def update(self, preds: Predictions, key: tuple[int, int]) -> "RowSample":
        """Offer a batch; ``key`` = (file number, first row of the batch in its file) seeds its keys."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed & 0xFFFFFFFF, *map(int, key)]))
        k = rng.random(preds.n)
        if self.keys.size >= self.size:  # only rows that can still enter the sample are kept
            take = np.flatnonzero(k < self.keys.max())
        else:
            take = np.arange(preds.n)
        arrays = {name: a[take] for name, a in self._arrays(preds).items()}
        where = np.column_stack([np.full(take.size, key[0]), key[1] + take])
        self._add(k[take], where, arrays)
        self.seen += preds.n
        if self.first is None:
            self.first = preds
        return self

    def _add(self, keys: np.ndarray, where: np.ndarray, arrays: dict[str, np.ndarray]) -> None:
        self.keys = np.concatenate([self.keys, keys])
        self.where = np.concatenate([self.where, where])
        self.columns = {name: np.concatenate([self.columns[name], a]) if name in self.columns else a.copy()
                        for name, a in arrays.items()}
        if self.keys.size > 2 * self.size:  # amortised: cut back to the size smallest keys
            self._cut()

    def _cut(self) -> None:
        if self.keys.size > self.size:
            keep = np.argpartition(self.keys, self.size - 1)[:self.size]
            self.keys, self.where = self.keys[keep], self.where[keep]
            self.columns = {name: a[keep] for name, a in self.columns.items()}

    def merge(self, other: "RowSample") -> "RowSample":
        """The sample of both sets of rows (in place; returns self)."""
        if other.first is not None:
            self._add(other.keys, other.where, other.columns)
            self.seen += other.seen
            self.first = self.first or other.first
        return self

    def predictions(self, layout, source: str) -> Predictions:
        """The sampled rows in file order, validated again as :class:`Predictions`."""
        if self.first is None:
            raise PredictionsError(f"{source}: the dataset has no data rows.")
        self._cut()
        order = np.lexsort((self.where[:, 1], self.where[:, 0]))
        cols = {name: a[order] for name, a in self.columns.items()}
        n = order.size
        notes = (f"A uniform random sample of {n:,} of {self.seen:,} rows (seed {self.seed}).",)
        shown = f"{source} (random sample of {n:,} rows, seed {self.seed})"
        if "scores" not in cols:
            # Class names are numbered per batch (sorted names of that batch), so across batches only
            # "predicted == label" is meaningful: such a sample keeps (confidence, correct).
            if not layout.has_class_ids or layout.class_names:
                return Predictions.from_confidence_correct(cols["confidence"], cols["predicted"] == cols["labels"],
                                                           source=shown, notes=notes)
            return Predictions.from_top_label(cols["confidence"], cols["predicted"], cols["labels"],
                                              class_names=layout.class_names, source=shown, notes=notes)
        scores = cols["scores"]
        if layout.kind == "binary" and layout.input_type == "probabilities":
            scores = scores[:, 1]
        return Predictions.from_arrays(scores, cols["labels"], input_type=layout.input_type,
                                       class_names=layout.class_names or None, source=shown, notes=notes)


def sample_dataset(dataset: Dataset, size: int, *, seed: int = 0,
                   progress: Progress | None = None) -> Predictions:
    """A uniform random sample of exactly ``min(size, n)`` rows, without replacement, in one pass.

    Bottom-k sampling: every row gets an independent uniform key (seeded per batch by ``seed``,
    the file and the batch's first row, so the sample does not depend on how batches are read) and
    the ``size`` rows with the smallest keys are kept, so every subset of ``size`` rows is equally
    likely (the mergeable form of reservoir sampling: two partial samples merge by keeping the
    smallest keys of both, :class:`RowSample`). Memory: O(size) rows. The rows come back in file
    order: scores (probabilities or logits, as in the files) and labels, or for top-label files
    (confidence, predicted, label).

    Raises
    ------
    PredictionsError
        A bad row anywhere in the dataset (every row is read and validated).
    """
    sample = RowSample(size, seed)
    total = dataset.num_rows()
    for unit in dataset.units():
        for start, preds in dataset.predictions(unit):
            sample.update(preds, (unit.file_index, start))
            if progress is not None:
                progress(sample.seen, total, "rows")
    return sample.predictions(dataset.layout(), dataset.spec)


def _output_names(dataset: Dataset, out: Path) -> list[Path]:
    common = os.path.commonpath([os.path.dirname(os.path.abspath(f)) for f in dataset.files]) \
        if not any("://" in f for f in dataset.files) else None
    names = []
    for f in dataset.files:
        rel = os.path.relpath(os.path.abspath(f), common) if common else f.split("://", 1)[1].replace("/", "_")
        stem = rel
        for suffix in (".csv.gz", ".tsv.gz", ".parquet", ".pq", ".csv", ".tsv"):
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
                break
        names.append(Path(stem + ".parquet"))
    return names


def apply_to_dataset(recalibrator, dataset: Dataset, out: str | os.PathLike, *, prefix: str = "calibrated_",
                     progress: Progress | None = None) -> list[Path]:
    """Apply a fitted recalibrator to every row of ``dataset`` and write Parquet files under ``out``.

    One output file per input file (same relative name, ``.parquet``), holding every original
    column unchanged followed by one column ``<prefix><class>`` per class with the calibrated
    probabilities; written batch by batch, so memory stays at one batch whatever the size. A
    recalibrator with intervals (a Venn-Abers predictor's ``predict_interval``) adds each class's
    interval (p0, p1) right after its column, as ``<prefix><class>_low`` and ``<prefix><class>_high``
    (:func:`pbr_core.loading.writing.interval_columns`, the in-memory file's names).

    The files are written into a temporary folder next to ``out`` (``.<name>.partial-<id>``),
    which is renamed to ``out`` only when every file is complete: a failed or interrupted run
    leaves no folder under the name ``out`` (the temporary folder is removed on a failure that
    Python sees). ``out`` must not exist yet, or be an empty folder.

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    PredictionsError
        A bad row (named with its file, row group and row), top-label-only data, a class count or a
        column name that clashes with the recalibrator's output.
    FileExistsError
        ``out`` exists and is not an empty folder.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: exists and is not an empty folder; choose a new output folder.")
    if not out.parent.exists():
        raise FileNotFoundError(f"{out.parent}: the folder to write {out.name} in does not exist.")
    lay = dataset.layout()
    if lay.kind == "top_label":
        raise PredictionsError(f"{dataset.spec}: {TOP_LABEL_NOT_RECALIBRATED}")
    names = list(lay.class_names) or [str(k) for k in range(lay.n_classes)]
    prob_cols = [f"{prefix}{c}" for c in names]
    # A Venn-Abers predictor's (p0, p1) interval of each class, right after its probability column.
    with_intervals = hasattr(recalibrator, "predict_interval")
    new_cols = [name for c in prob_cols for name in ((c, *interval_columns(c)) if with_intervals else (c,))]
    clash = [c for c in new_cols if c in dataset.columns]
    if clash:
        raise PredictionsError(f"{dataset.spec}: the files already have column(s) {clash[:5]}; pass another prefix.")
    tmp = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    written: list[Path] = []
    done = 0
    total = dataset.num_rows()
    try:
        targets = _output_names(dataset, out)
        units_by_file: dict[int, list] = {}
        for u in dataset.units():
            units_by_file.setdefault(u.file_index, []).append(u)
        for i, rel in enumerate(targets):
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            writer = None
            try:
                for unit in units_by_file.get(i, []):
                    for start, raw, preds in _batches_with_rows(dataset, unit):
                        try:
                            probs = recalibrator.predict_proba(preds)
                            low, high = recalibrator.predict_interval(preds) if with_intervals else (None, None)
                        except ValueError as exc:
                            raise PredictionsError(f"{unit.path}: {exc}") from None
                        table = raw if isinstance(raw, pa.Table) else pa.Table.from_batches([raw])
                        for k, c in enumerate(prob_cols):
                            table = table.append_column(c, pa.array(probs[:, k], type=pa.float64()))
                            if with_intervals:
                                for name, values in zip(interval_columns(c), (low, high)):
                                    table = table.append_column(name, pa.array(values[:, k], type=pa.float64()))
                        if writer is None:
                            writer = pq.ParquetWriter(str(path), table.schema)
                        writer.write_table(table)
                        done += preds.n
                        if progress is not None:
                            progress(done, total, "rows")
            finally:
                if writer is not None:
                    writer.close()
            if writer is None:  # a file without rows: an empty file with the output schema
                schema = pa.schema([*(_schema_of(dataset, i)), *[pa.field(c, pa.float64()) for c in new_cols]])
                pq.write_table(schema.empty_table(), str(path))
            written.append(out / rel)
        if out.exists():
            out.rmdir()  # empty (checked above): replaced by the finished folder
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written


def _schema_of(dataset: Dataset, file_index: int):
    if dataset.fmt == "parquet":
        return list(dataset._parquet(dataset.files[file_index]).schema_arrow)
    import pyarrow as pa

    return [pa.field(c, pa.string()) for c in dataset.columns]


def _batches_with_rows(dataset: Dataset, unit):
    """(first row, the batch with all its columns, validated Predictions of it) for every batch of ``unit``;
    a CSV's batch is a Table whose columns other than the label and scores hold the text written."""
    import pyarrow as pa

    from pbr_core.loading._source import _Source
    from pbr_core.loading._tables import _arrow_frame, _from_table
    from pbr_core.stream._source import _batch_options, _where

    lay = dataset.layout()
    opts = _batch_options(dataset.options, lay)
    dataset.require_columns(lay.read_columns)  # every batch is read by name: a file lacking one is refused
    csv = unit.fmt != "parquet"
    # A CSV's other columns are written back as the text they hold (a ZIP code 01234, not the number
    # 1234 its reading as a number gives), read by a second reader in step with the first.
    names = [c or f"Unnamed: {i}" for i, c in enumerate(dataset._csv_dialect(unit).columns)] if csv else []
    others = [c for c in names if c not in lay.read_columns]
    text = _text_rows(dataset, unit, others) if csv else None
    decimal = dataset._csv_dialect(unit).decimal if csv else "."
    kinds = _number_columns(dataset, unit, others, decimal) if text is not None else {}
    for start, rb in dataset.raw_batches(unit, list(lay.read_columns) if text is not None else None):
        if rb.num_rows == 0:
            continue
        sel = pa.Table.from_batches([rb]).select(list(lay.read_columns))
        df = _arrow_frame(sel, csv=csv)
        try:
            preds = _from_table(df, _Source(unit.path), opts, [])
        except PredictionsError as exc:
            raise PredictionsError(_where(str(exc), unit, start)) from None
        if text is not None:
            rb = _in_file_order(pa.Table.from_batches([rb]), _typed(text.take(rb.num_rows), kinds, decimal), names)
        yield start, rb, preds


def _number_columns(dataset: Dataset, unit, columns: list[str], decimal: str) -> dict[str, str]:
    """The text columns of a CSV file that are written as numbers, ``"int"`` or ``"float"``: those whose
    every cell in the file is a missing value or a number that gives back what was written
    (:func:`~pbr_core.loading.writing.numbers_as_written`). Decided over the whole file (one pass over
    these columns' text before the file is written), so that each output file has one schema: a ZIP
    column of 01234 is text, an amount of 4.50 stays a number (audit 11: every column had become
    text). Another file of the folder may decide otherwise (a day whose ids all lack leading zeros)."""
    from pbr_core.loading.writing import numbers_as_written

    kinds: dict[str, str | None] = {}
    rank = {"empty": 0, "int": 1, "float": 2}
    for _, rb in dataset.raw_batches(unit, columns, as_text=True):
        for c in columns:
            if c in kinds and kinds[c] is None:
                continue
            kind = numbers_as_written(rb.column(rb.schema.get_field_index(c)), decimal, empty="empty")
            before = kinds.get(c, "empty")
            kinds[c] = None if kind is None else max(before, kind, key=rank.__getitem__)
    return {c: ("float" if k == "empty" else k) for c, k in kinds.items() if k is not None}


def _typed(text, kinds: dict[str, str], decimal: str):
    """The text columns of a batch, those of ``kinds`` as numbers."""
    import pyarrow as pa

    from pbr_core.loading.writing import typed_as_written

    if not kinds:
        return text
    cols = {}
    for name in text.column_names:
        if name in kinds:
            cols[name] = typed_as_written(text.column(name), decimal, kinds[name])
        else:
            cols[name] = text.column(name)
    return pa.table(cols)


class _TextRows:
    """The rows of a CSV unit's ``columns`` as text, handed out ``take(k)`` rows at a time in file order
    (the typed reader's batches may be cut elsewhere: the rows are re-cut to its counts)."""

    def __init__(self, batches) -> None:
        self._batches = batches
        self._pending: list = []
        self._rows = 0

    def take(self, k: int):
        import pyarrow as pa

        while self._rows < k:
            _, rb = next(self._batches)
            self._pending.append(pa.Table.from_batches([rb]))
            self._rows += rb.num_rows
        table = pa.concat_tables(self._pending)
        head, rest = table.slice(0, k), table.slice(k)
        self._pending, self._rows = [rest], rest.num_rows
        return head


def _text_rows(dataset: Dataset, unit, columns: list[str]) -> _TextRows | None:
    return _TextRows(iter(dataset.raw_batches(unit, columns, as_text=True))) if columns else None


def _in_file_order(typed, text, columns: list[str]):
    """One table of the typed columns and the text columns, in the file's column order."""
    import pyarrow as pa

    parts = {name: typed.column(name) for name in typed.column_names}
    parts.update({name: text.column(name) for name in text.column_names})
    order = [c for c in columns if c in parts] + [c for c in parts if c not in columns]
    return pa.table({c: parts[c] for c in order})
