"""pandas ``category`` columns and Arrow dictionary columns read as the plain columns they encode:
in a DataFrame, a Parquet file written by pandas, a pyarrow Table, a streamed folder grouped by one,
and as the label (audit 10a, finding 2: every path refused them with pandas' ``.as_ordered()`` advice)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pbr_core
from pbr_core.cli import EXIT_OK, main
from pbr_core.loading import read_table


def _frame(n: int = 500, seed: int = 0) -> pd.DataFrame:
    """Scores with known outcomes, a segment stored as category (two names of different lengths, which
    made pandas' Categorical.map return an unordered Categorical) and a numeric category."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 1, n)
    return pd.DataFrame({
        "p_positive": p,
        "label": (rng.uniform(size=n) < p).astype(int),
        "segment": pd.Categorical(rng.choice(["Male", "Female"], n)),
        "tier": pd.Categorical(rng.choice([1, 20, 300], n)),
    })


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    return df.astype({"segment": str, "tier": np.int64})


def _same_as_plain(preds: pbr_core.Predictions, df: pd.DataFrame) -> None:
    plain = pbr_core.load_predictions(_plain(df))
    np.testing.assert_array_equal(preds.labels, plain.labels)
    np.testing.assert_array_equal(preds.probs, plain.probs)
    assert preds.metadata["segment"].tolist() == df["segment"].astype(str).tolist()
    assert preds.metadata["tier"].tolist() == df["tier"].astype(int).tolist()
    assert not isinstance(preds.metadata["segment"].dtype, pd.CategoricalDtype)


def test_a_dataframe_with_category_columns_loads_as_the_plain_one() -> None:
    df = _frame()
    _same_as_plain(pbr_core.load_predictions(df), df)
    ignored = pbr_core.load_predictions(df, ignore_columns=["segment"])
    assert "segment" not in ignored.metadata.columns


def test_a_parquet_file_written_by_pandas_from_category_columns(tmp_path) -> None:
    df = _frame()
    path = tmp_path / "cat.parquet"
    df.to_parquet(path)
    assert pa.types.is_dictionary(pq.read_schema(path).field("segment").type)  # what pandas writes
    _same_as_plain(pbr_core.load_predictions(path), df)
    table = read_table(path)
    assert table["segment"].tolist() == df["segment"].astype(str).tolist()


def test_a_pyarrow_table_with_a_dictionary_column() -> None:
    df = _plain(_frame())
    table = pa.Table.from_pandas(df, preserve_index=False)
    i = table.schema.get_field_index("segment")
    table = table.set_column(i, "segment", table.column(i).dictionary_encode())
    preds = pbr_core.load_predictions(table)
    assert preds.metadata["segment"].tolist() == df["segment"].tolist()
    assert pa.types.is_dictionary(table.schema.field("segment").type)  # the caller's table is left as it was


@pytest.mark.parametrize("names", [("no", "yes"), ("No", "Yes")])
def test_a_category_label(names) -> None:
    df = _frame()
    df["label"] = pd.Categorical(np.where(df["label"] == 1, names[1], names[0]))
    preds = pbr_core.load_predictions(df)
    assert preds.class_names == names
    np.testing.assert_array_equal(preds.labels, (df["label"] == names[1]).astype(int))


def test_a_streamed_folder_grouped_by_a_category_column(tmp_path, capsys) -> None:
    """Day 1 plain text, day 2 the same column as category (as a real log folder had): the streamed
    groups equal the in-memory ones."""
    folder = tmp_path / "logs"
    folder.mkdir()
    day1, day2 = _plain(_frame(400, 1)), _frame(300, 2)
    day1.to_parquet(folder / "day1.parquet")
    day2.to_parquet(folder / "day2.parquet")
    code = main(["evaluate", str(folder), "--by", "segment", "--format", "json", "--quiet"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert "Traceback" not in err
    groups = {g["group"]: g for g in json.loads(out)["groups"]["rows"]}
    both = pd.concat([day1, _plain(day2)], ignore_index=True)
    for name, rows in both.groupby("segment"):
        assert groups[name]["n"] == len(rows)
        assert groups[name]["ece"] == pytest.approx(
            pbr_core.ece(rows["p_positive"].to_numpy(), rows["label"].to_numpy()), abs=1e-12)


def test_the_cli_reads_a_category_parquet_file(tmp_path, capsys) -> None:
    df = _frame()
    path = tmp_path / "cat.parquet"
    df.to_parquet(path)
    code = main(["evaluate", str(path), "--by", "segment", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert json.loads(out)["n"] == len(df)


def test_the_cell_limit_measures_a_categorical_by_its_values() -> None:
    """A Categorical reaching the cell check itself (no reader makes one now) is measured, not refused
    with pandas' TypeError."""
    from pbr_core.loading._limits import ReadLimitError
    from pbr_core.loading._source import _Source
    from pbr_core.loading._tables import _check_cells

    df = pd.DataFrame({"s": pd.Categorical(["Male", "Female", "Male"])})
    _check_cells(df, _Source("t"), 6)
    with pytest.raises(ReadLimitError, match="column 's' at row 2"):
        _check_cells(df, _Source("t"), 5)


def test_a_category_column_of_long_text_is_measured_before_it_is_decoded(tmp_path, monkeypatch) -> None:
    """A small bomb: one 1,000-character category on each of 10,000 rows is 10 KB as the file stores it
    (a dictionary of one value) and 10 MB decoded. The memory estimate counts a dictionary column's
    decoded text (at what reading it costs, 2.5 times: pbr_core.loading._limits.parquet_text_memory), so a
    4 MB limit refuses the file before any text is decoded; 26 MB reads it."""
    import pyarrow.compute as pc

    from pbr_core.loading import ReadLimitError, ReadLimits

    df = pd.DataFrame({"p": np.full(10_000, 0.5), "label": np.ones(10_000, dtype=int),
                       "note": pd.Categorical(["n" * 1000] * 10_000)})
    path = tmp_path / "category_text.parquet"
    df.to_parquet(path, index=False)
    assert pa.types.is_dictionary(pq.read_schema(path).field("note").type)
    casts = []
    real_cast = pc.cast
    monkeypatch.setattr(pc, "cast", lambda *a, **k: casts.append(1) or real_cast(*a, **k))
    with pytest.raises(ReadLimitError) as info:
        pbr_core.load_predictions(path, limits=ReadLimits(max_memory=4 * 2**20))
    assert info.value.kind == "memory" and casts == []
    preds = pbr_core.load_predictions(path, limits=ReadLimits(max_memory=26 * 2**20))
    assert preds.metadata["note"].tolist() == ["n" * 1000] * 10_000
