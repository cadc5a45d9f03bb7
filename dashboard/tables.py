"""Pure table builders for display (pandas in/out, no Streamlit): previews and per-class listings."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pbr_core import Predictions

#: The preview shows at most this many class columns (CIFAR-100 has 100; nobody reads them all).
MAX_PREVIEW_CLASSES = 8


def _names(preds: Predictions, ids: np.ndarray) -> np.ndarray:
    names = preds.class_names
    if names and len(names) == preds.n_classes and ids.size and ids.max() < len(names):
        return np.asarray(names, dtype=object)[ids]
    return ids


#: At most this many metadata columns are shown in the preview.
MAX_PREVIEW_METADATA = 4

ROLE_WORDS = {"label": "label", "score": "score", "confidence": "confidence (top label)",
              "predicted": "predicted class (top label)", "correct": "whether the prediction was right",
              "group": "group", "metadata": "metadata (kept)", "ignored": "ignored"}


def roles_frame(preds: Predictions) -> pd.DataFrame:
    """Every column of the file and what the loader used it as."""
    return pd.DataFrame({"column": [c for c, _ in preds.column_roles],
                         "used as": [ROLE_WORDS.get(r, r) for _, r in preds.column_roles]})


def preview_column_config(frame: pd.DataFrame) -> dict:
    """Readable numbers: probabilities with 4 decimals (not 0.00000000000000000000000008), logits with 3."""
    import streamlit as st

    config = {}
    for c in frame.columns:
        if not pd.api.types.is_float_dtype(frame[c].dtype):
            continue
        if c == "confidence" or c.startswith("p("):
            config[c] = st.column_config.NumberColumn(format="%.4f")
        elif c.startswith("logit("):
            config[c] = st.column_config.NumberColumn(format="%.3f")
    return config


def preview_frame(preds: Predictions, rows: int = 10) -> pd.DataFrame:
    """The first ``rows`` rows as the loader understood them: label, prediction, confidence, scores,
    then the first metadata columns."""
    k = min(rows, preds.n)
    if not preds.has_class_ids:  # (confidence, correct) records: no class to show
        out = pd.DataFrame({"confidence": preds.confidence[:k], "correct": preds.correct[:k] == 1})
        return _with_metadata(out, preds, k)
    out = pd.DataFrame({
        "true label": _names(preds, preds.labels[:k]),
        "predicted": _names(preds, preds.predicted[:k]),
        "confidence": preds.confidence[:k],
        "correct": preds.predicted[:k] == preds.labels[:k],
    })
    if preds.kind == "binary" and preds.probs is not None:
        out["p(y=1)"] = preds.probs[:k, 1]
    elif preds.probs is not None:
        names = preds.class_names or tuple(str(i) for i in range(preds.n_classes))
        shown = min(preds.n_classes, MAX_PREVIEW_CLASSES)
        for j in range(shown):
            out[f"p({names[j]})"] = preds.probs[:k, j]
        if preds.logits is not None:
            for j in range(min(shown, 3)):
                out[f"logit({names[j]})"] = preds.logits[:k, j]
    return _with_metadata(out, preds, k)


def _with_metadata(out: pd.DataFrame, preds: Predictions, k: int) -> pd.DataFrame:
    if preds.metadata is not None:
        for c in list(preds.metadata.columns)[:MAX_PREVIEW_METADATA]:
            if c not in out.columns:
                out[c] = preds.metadata[c].iloc[:k].to_numpy()
    return out


def classwise_frame(per_class: np.ndarray, class_names: tuple[str, ...], top: int | None = None) -> pd.DataFrame:
    """Per-class ECE sorted worst first."""
    per_class = np.asarray(per_class, dtype=float)
    names = class_names if len(class_names) == per_class.size else tuple(str(i) for i in range(per_class.size))
    df = pd.DataFrame({"class": names, "ECE of this class": per_class})
    df = df.sort_values("ECE of this class", ascending=False, kind="stable").reset_index(drop=True)
    return df.head(top) if top else df
