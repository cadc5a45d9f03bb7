"""Helpers of the streamed-path tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def write_parts(df: pd.DataFrame, folder: Path, n_parts: int, fmt: str = "parquet", row_group_size: int = 700) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, rows in enumerate(np.array_split(np.arange(len(df)), n_parts)):
        path = folder / f"part{i}.{fmt}"
        part = df.iloc[rows]
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pandas(part, preserve_index=False), path, row_group_size=row_group_size)
        else:
            part.to_csv(path, index=False)
        paths.append(path)
    return paths
