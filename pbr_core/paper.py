"""The seed paper's experimental constants, in one low module every level may read.

Fujisawa & Futami, "PAC-Bayes Analysis for Recalibration in Classification" (ICML 2025), Section 6
and Appendix F. The alpha selection (:mod:`pbr_core.alpha_selection`), the recalibrators
(:class:`~pbr_core.recalibrators.PBRCV`), the protocols (:mod:`pbr_core.experiments`), the front ends
and the reproduction scripts all read them here; nothing below this module is imported, so any
module can.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["PAPER_ALPHAS", "PAPER_BINARY_ECE", "PAPER_N_RE", "PAPER_N_RE_VALUES", "continuation_order"]

#: The paper's grid of KL weights alpha (Section 6.2, Appendix F).
PAPER_ALPHAS: tuple[float, ...] = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)

#: The paper's recalibration set size (Section 6, Appendix F): what a front end proposes when the file
#: is large enough (:func:`pbr_core.experiments.default_n_re`).
PAPER_N_RE = 1000

#: The paper's recalibration set sizes of the n_re sweep (Section 6.2, Figure 3).
PAPER_N_RE_VALUES: tuple[int, ...] = (10, 50, 100, 250, 500, 1000, 3000, 5000)

#: The ECE the paper's tables report on binary data (KITTI, following Wenger et al.): the top label.
#: The app's own choice is p(y=1) (:data:`pbr_core.metrics.BINARY_TARGET`); the reproduction scripts
#: pass this value so that their tables match the paper's.
PAPER_BINARY_ECE = "top_label"


def continuation_order(alphas: Sequence[float]) -> list[int]:
    """Indices of ``alphas`` in the order a continuation along the grid fits them: ascending alpha
    (stable for repeated values), so that each fit starts from the solution for a smaller alpha
    (:meth:`pbr_core.recalibrators.gp.PBR.fit_continued`)."""
    return sorted(range(len(alphas)), key=lambda i: float(alphas[i]))
