"""Small files that expand at read time (audit 12c): the loader's work after the read stays within the
memory its read limit estimates (:func:`pbr_core.loading._limits.table_memory`), or the file is refused
before the memory is spent, with a message in plain words.

Item by item: the rounding check reads the score table a block at a time (:func:`pbr_core.resolution.
evidence_counts`), with the same counts as over all values at once.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from pbr_core import PredictionsError, load_predictions
from pbr_core.loading import ReadLimitError, ReadLimits
from pbr_core import resolution as res
from pbr_core.loading._limits import table_memory


def _whole(p: np.ndarray) -> np.ndarray:
    """The counts over every value at once (what evidence_counts computed before it read blocks)."""
    return np.array([t.sum() for t in res.evidence_terms(np.ravel(np.asarray(p, dtype=np.float64)))])


def _samples(rng: np.random.Generator) -> list[np.ndarray]:
    raw = rng.dirichlet(np.ones(7), size=301)
    one_hot = np.eye(5)[rng.integers(0, 5, 200)]
    return [raw, np.round(raw, 3), raw.astype(np.float32), np.round(raw, 6) * 100 / 100, one_hot,
            np.concatenate([np.round(raw[:, :3], 4), np.zeros((301, 1)), np.ones((301, 1))], axis=1),
            rng.random(1000), np.array([1e-320, 0.5, 0.25, 0.999, 1.0, 0.0])]


@pytest.mark.parametrize("chunk", [1, 7, 64, res.CHUNK_VALUES])
def test_evidence_counts_in_blocks_equal_the_counts_over_all_values(monkeypatch, chunk):
    monkeypatch.setattr(res, "CHUNK_VALUES", chunk)
    for p in _samples(np.random.default_rng(0)):
        blocks = np.zeros(len(res.EVIDENCE_NAMES))
        for b in res.value_blocks(p, chunk=chunk):
            blocks += [t.sum() for t in res.evidence_terms(b)]
        np.testing.assert_array_equal(blocks, _whole(p))
        np.testing.assert_array_equal(res.evidence_counts(p), _whole(p))


def test_the_rounding_note_with_row_scale_is_the_note_of_the_scaled_values():
    rng = np.random.default_rng(1)
    written = np.round(rng.dirichlet(np.ones(4), size=500), 3)
    written[:20] = [1.0, 0.0, 0.0, 0.0]
    sums = written.sum(axis=1)
    probs = written / sums[:, None]
    note = res.rounding_note(probs, "Probabilities", row_scale=sums)
    assert note and note == res.rounding_note(probs * sums[:, None], "Probabilities")
    assert "1.000 stand for anything from 0.9995" in note


def test_the_bundled_samples_give_the_same_counts_in_blocks():
    from pathlib import Path

    files = sorted((Path(__file__).resolve().parents[1] / "sample_data").glob("*.*"))
    assert files
    for f in files:
        try:
            preds = load_predictions(f)
        except Exception:  # noqa: BLE001 - a sample meant to fail (bad input) has nothing to count
            continue
        values = preds.probs if preds.probs is not None else preds.confidence
        np.testing.assert_array_equal(res.evidence_counts(values), _whole(values))


def _peak_of(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_loading_many_one_hot_scores_stays_within_the_estimate(tmp_path):
    """A one-hot NPZ of 2,000 rows x 1,000 classes (compressed to a few KB): the rounding check took
    ~160 bytes a score (~320 MB), where the read limit counts 16 (32 MB)."""
    n, k = 2000, 1000
    rng = np.random.default_rng(2)
    labels = rng.integers(0, k, n)
    probs = np.eye(k)[labels]
    path = tmp_path / "onehot.npz"
    np.savez_compressed(path, probs=probs, labels=labels)
    del probs
    peak = _peak_of(lambda: load_predictions(path))
    estimate = table_memory(n, k)
    assert peak <= 1.5 * estimate, (peak, estimate)


# ------------------------------------------------------------------------------ score vectors in one cell
def _vector_csv(k: int, rows: int) -> bytes:
    """A CSV of ``rows`` one-hot score vectors of ``k`` classes in a ``probs`` column, and labels."""
    zeros = " ".join(["0"] * (k - 1))
    lines = ["probs,label"] + [f'"[1 {zeros}]",0' for _ in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def test_a_vector_of_more_classes_than_the_limit_is_refused_before_the_matrix(monkeypatch):
    from pbr_core.loading import _limits, _vectors

    monkeypatch.setattr(_vectors, "MAX_VECTOR_CLASSES", 500)
    built = []
    plain = np.empty

    def spy(shape, *a, **kw):  # the (rows, K) matrix only: other code allocates 1-D arrays meanwhile
        if isinstance(shape, tuple) and len(shape) == 2:
            built.append(shape)
        return plain(shape, *a, **kw)

    monkeypatch.setattr(_vectors.np, "empty", spy)
    with pytest.raises(PredictionsError) as info:
        load_predictions(_vector_csv(501, 3), name="vec.csv")
    assert "this file has 501 classes; at most 500 can be read" in str(info.value)
    assert not built  # refused before the (rows, K) matrix was allocated
    assert _limits.MAX_VECTOR_CLASSES == 20_000  # the number the cell limit's documentation promises
    assert load_predictions(_vector_csv(500, 3), name="vec.csv").n_classes == 500


def test_a_vector_table_over_the_memory_limit_is_refused_with_its_size():
    """Rows x K counted before the matrix is built: the vector column was counted as one column (50 rows
    of 2,000 one-hot scores: 1.5 MB estimated once spread)."""
    import pandas as pd

    from pbr_core.loading._source import ColumnChoice, _resolve_source
    from pbr_core.loading._vectors import expand_score_vectors

    one = [1.0] + [0.0] * 1999
    df = pd.DataFrame({"probs": [list(one) for _ in range(50)], "label": [0] * 50})
    src = _resolve_source(b"", "vec.parquet")
    with pytest.raises(ReadLimitError) as info:
        expand_score_vectors(df, ColumnChoice(), src, [], ReadLimits(max_memory=1 << 20))
    assert info.value.kind == "memory" and info.value.size == table_memory(50, 2001)
    assert "its 50 rows of 2,000 scores each (in column 'probs'), once spread into one column per class" in \
        str(info.value)
    out, _, expanded = expand_score_vectors(df, ColumnChoice(), src, [], ReadLimits(max_memory=4 << 20))
    assert out.shape == (50, 2001) and len(expanded["probs"]) == 2000


def test_a_parquet_list_column_counts_its_values_before_the_file_is_read(monkeypatch, tmp_path):
    """The footer's value count of a list column gives its width: 1.2 KB of Parquet held 100 rows of
    100,000 scores (audit 12c), read whole before the vector was checked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    probs = np.eye(2000)[np.zeros(50, dtype=int)]
    path = tmp_path / "vec.parquet"
    pq.write_table(pa.table({"probs": list(probs), "label": np.zeros(50, dtype=int)}), path)
    monkeypatch.setattr(pq.ParquetFile, "read", lambda *a, **kw: pytest.fail("read"))
    with pytest.raises(ReadLimitError) as info:
        load_predictions(path, limits=ReadLimits(max_memory=1 << 20))
    assert info.value.kind == "memory" and info.value.size == table_memory(50, 2 + 2000)
    monkeypatch.undo()
    assert load_predictions(path, limits=ReadLimits(max_memory=4 << 20)).n_classes == 2000


def test_named_roles_looks_each_name_up_in_a_set():
    """20,000 class names were each searched for in a list (K^2: 1.6 s; 200,000: ~160 s)."""
    from pbr_core.loading._roles import named_roles
    from pbr_core.loading._source import ColumnChoice, _resolve_source

    class Columns(list):
        searched = 0

        def __contains__(self, item):
            Columns.searched += 1
            return super().__contains__(item)

    names = [str(i) for i in range(3000)]
    columns = Columns([*names, "label"])
    roles = named_roles(columns, ColumnChoice(label="label", scores=tuple(names)), _resolve_source(b"", "t.csv"))
    assert roles.scores == names and roles.label == "label"
    assert Columns.searched == 0


# ------------------------------------------------------------------------------ long text cells
def _long_text_csv_gz(path, rows: int, cell: int):
    import gzip

    with gzip.open(path, "wt", compresslevel=6) as f:
        f.write("confidence,correct,note\n")
        for i in range(rows):
            f.write(f"0.{(i * 7) % 1000:03d},{i % 2},{i}{'x' * cell}\n")
    return path


def test_numbers_are_estimated_as_before_and_long_text_at_its_parsed_cost():
    from pbr_core.loading._limits import NUMBER_CELL_BYTES, TEXT_PEAK_FACTOR, text_table_memory

    # 1.85 M rows x 14 columns in 300 MB (benchmarks/RESULTS_memory.md): no text beyond numbers' width
    assert text_table_memory(1_850_000, 14, 300 << 20) == table_memory(1_850_000, 14, 300 << 20)
    text = 1000 * 900_000
    excess = text - NUMBER_CELL_BYTES * 1000 * 3
    assert text_table_memory(1000, 3, text) == table_memory(1000, 3, text) + (TEXT_PEAK_FACTOR - 1) * excess


def test_long_text_cells_are_refused_before_they_are_parsed(monkeypatch, tmp_path):
    """20 rows of a 100 KB note (2 MB of text, each cell under the cell limit) peak near 8 times the
    text once parsed: over a 10 MB limit, refused before the parser runs, the message in plain words."""
    from pbr_core.loading import _tables

    path = _long_text_csv_gz(tmp_path / "notes.csv.gz", 20, 100_000)
    limits = ReadLimits(max_memory=10 << 20)
    monkeypatch.setattr(_tables, "_read_csv_frame", lambda *a, **kw: pytest.fail("parsed"))
    with pytest.raises(ReadLimitError) as info:
        load_predictions(path, limits=limits)
    message = str(info.value)
    assert info.value.kind == "memory"
    assert "most of it is long text (the longest line holds 97.7 KB)" in message
    assert "xxxx" not in message
    monkeypatch.undo()
    assert load_predictions(path, limits=ReadLimits(max_memory=40 << 20)).n == 20


def test_a_failed_allocation_while_reading_is_a_plain_message(monkeypatch):
    """Arrow's own text quoted the cell ("Unknown error: Wrapping 5721xxxx..."); its ArrowMemoryError went
    on as an "unexpected error"."""
    import pyarrow as pa

    from pbr_core.loading import _tables

    for exc in (pa.ArrowMemoryError("malloc of size 1234 failed"), pa.ArrowException("Unknown error: Wrapping " + "7x" * 400),
                MemoryError()):
        def fail(*a, _exc=exc, **kw):
            raise _exc

        monkeypatch.setattr(_tables, "_read_csv_frame", fail)
        with pytest.raises(PredictionsError) as info:
            load_predictions(b"p,label\n0.5,1\n", name="t.csv")
        message = str(info.value)
        assert message.startswith("t.csv: ran out of memory reading this file") and "7x7x" not in message
        assert "Arrow" not in message


def test_an_unforeseen_reader_error_is_quoted_short():
    from pbr_core.loading._errors import QUOTE_CHARS, plain_read_error

    text = plain_read_error(ValueError("bad cell " + "y" * 5000 + "\nsecond line"), "read the file as", "csv")
    assert text.startswith("could not read the file as CSV: ValueError: bad cell yyy") and text.endswith("...")
    assert len(text) < QUOTE_CHARS + 60 and "second line" not in text


def test_deeply_nested_json_says_so_in_plain_words():
    data = b'{"a":' * 5000 + b"1" + b"}" * 5000
    with pytest.raises(PredictionsError) as info:
        load_predictions(data, name="deep.json")
    assert "it is nested too deeply" in str(info.value)
    assert "RecursionError" not in str(info.value) and "recursion" not in str(info.value)


# ------------------------------------------------------------------------------ many text columns
def _reference_text_profile(series):
    """What profile() decided for a mostly non-numeric column with pandas' string methods (before)."""
    import pandas as pd

    from pbr_core.loading._roles import _DATE_RE, _TRUE_FALSE, DECIMAL_COMMA_NUMBER

    texts = series.dropna().astype(object).map(str)
    texts = pd.Series(texts.tolist(), dtype=object)
    lowered = set(texts.str.strip().str.lower().unique()[:10])
    if lowered <= _TRUE_FALSE:
        return "bool", False
    if texts.str.match(_DATE_RE).mean() > 0.9:
        return "date", False
    return "text", bool(texts.str.strip().str.fullmatch(DECIMAL_COMMA_NUMBER, case=False).mean() > 0.9)


TEXT_COLUMNS = {
    "yes_no": ["yes", "No", " t", "F", "TRUE", "false"] * 5,
    "many_words": ["yes", "no", "maybe"] * 10,
    "dates": ["2024-01-02", "2024/3/4 10:00", "1.2.24"] * 10,
    "some_dates": ["2024-01-02"] * 9 + ["soon"] * 2,
    "comma": ["0,25", "-1,5e-3", " 3,0 ", "0,5E-2"] * 5,
    "comma_few": ["0,25"] * 9 + ["x"] * 2,
    "words": ["alpha", "beta", "gamma delta", ""] * 5,
    "ten_plus": [f"w{i}" for i in range(12)] + ["yes"],
}


@pytest.mark.parametrize("name", list(TEXT_COLUMNS))
def test_a_text_column_s_profile_is_what_pandas_string_methods_gave(name):
    import pandas as pd

    from pbr_core.loading._roles import profile

    series = pd.Series(TEXT_COLUMNS[name], dtype="string[pyarrow]")
    got = profile(series, name)
    assert (got.kind, got.decimal_comma) == _reference_text_profile(series)


def test_profiling_text_columns_uses_no_per_column_pandas_string_methods(monkeypatch):
    """pandas' string methods cost ~1.5 ms a column in overhead: 200 rows x 20,000 text columns took
    35 CPU s to load (audit 12c); the sample is now read in plain Python (linear, ~0.2 ms a column)."""
    import pandas as pd
    from pandas.core.strings.accessor import StringMethods

    from pbr_core.loading._roles import profile_columns

    for method in ("match", "fullmatch", "strip", "lower"):
        monkeypatch.setattr(StringMethods, method, lambda *a, **kw: pytest.fail("a pandas string method"))
    df = pd.DataFrame({f"m{c}": pd.Series(["a", "b"] * 10, dtype="string[pyarrow]") for c in range(50)})
    assert all(p.kind == "text" for p in profile_columns(df, list(df.columns)))


def test_a_failed_allocation_is_not_retried_with_the_next_reader(monkeypatch):
    """The CSV reader fell back to two more readers after Arrow ran out of memory, each taking it again."""
    import pyarrow as pa

    from pbr_core.loading import _tables

    def fail(*a, **kw):
        raise pa.ArrowMemoryError("malloc of size 1234 failed")

    monkeypatch.setattr(_tables, "_read_csv_typed", fail)
    monkeypatch.setattr(_tables, "_read_csv_whole", lambda *a, **kw: pytest.fail("retried"))
    with pytest.raises(PredictionsError, match="ran out of memory reading this file"):
        load_predictions(b"p,label\n0.5,1\n", name="t.csv")
