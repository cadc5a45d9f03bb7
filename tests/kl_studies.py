"""A KL-gap study table shared by the Generalization page's tests (AppTest and the browser's)."""

from __future__ import annotations

import pandas as pd


def election_study() -> pd.DataFrame:
    """A KL-gap table of α = 0, 0.01, 0.75 × 3 folds (n_re = 250, 2 classes: the line is 250 ln 2 = 173
    nats) as the audit's election file gave it: every α = 0 fit extreme, α = 0.01 extreme in fold 3,
    α = 0.75 at its prior (KL 1e-8)."""
    rows = []
    for fold in range(3):
        for alpha, kl in ((0.0, 5e4 * (fold + 1)), (0.01, 211.3 if fold == 2 else 40.0), (0.75, 1e-8)):
            rows.append({"alpha": alpha, "fold": fold, "n_re": 250, "n_bins": 6, "kl": kl, "ece_re": 0.03,
                         "ece_te": 0.05 + 0.01 * fold, "gap": 0.02 + 0.01 * fold, "bound": 0.9, "fit_seconds": 1.0,
                         "error": None})
    return pd.DataFrame(rows)
