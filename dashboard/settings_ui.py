"""The choices one page's features share, read in one place (no Streamlit: tests pass a dict).

The Compare page's comparison controls (its methods, n_re, split seed, PBR's alpha and the GP fits'
iteration budget) also set the n_re sweep and the group gaps below it: the same splits and method
settings. Each feature reads them through :class:`CompareChoices` and gets its typed settings from
``pbr_core.experiments.settings`` (``CompareSettings.of``, ``SweepSettings.of``,
``GroupGapSettings.of``), instead of reading the other widgets' session keys and deciding their
defaults itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pbr_core.experiments.settings import GroupGapSettings, SweepSettings

# Session keys of the comparison's controls (dashboard/views/compare.py draws them).
K_METHODS = "cmp_methods"
K_N_RE = "cmp_n_re"
K_SEED = "cmp_seed"
K_ALPHA = "cmp_alpha"
K_MAX_ITER = "cmp_max_iter"

#: PBR's alpha before its slider is first shown (the slider's own default).
DEFAULT_ALPHA = 0.5


@dataclass(frozen=True)
class CompareChoices:
    """What the comparison's controls hold now, as the sweep and the group gaps use it."""

    methods: tuple[str, ...]
    n_re: int
    seed: int
    alpha: float
    max_iter: int | None  # None: each method's default

    @classmethod
    def read(cls, session: Mapping[str, Any], available: Sequence[str], n: int) -> "CompareChoices":
        """The choices in ``session`` (Streamlit's session state) for a file of ``n`` rows: the chosen
        methods that are registered (``available``), n_re (before its control is drawn: 1,000 or
        all rows but one), the split seed, alpha and the iteration budget (0 or unset: the default)."""
        return cls(methods=tuple(m for m in session.get(K_METHODS, []) if m in available),
                   n_re=int(session.get(K_N_RE, min(1000, n - 1))),
                   seed=int(session.get(K_SEED, 0)),
                   alpha=float(session.get(K_ALPHA, DEFAULT_ALPHA)),
                   max_iter=int(session.get(K_MAX_ITER) or 0) or None)

    def sweep(self, n_re_values: Sequence[int], n_folds: int, binary_ece: str) -> SweepSettings:
        """The n_re sweep of the chosen methods, with the comparison's seed and method settings."""
        return SweepSettings.of(self.methods, n_re_values, n_folds, self.seed, alpha=self.alpha,
                                max_iter=self.max_iter, binary_ece=binary_ece)

    def group_gaps(self, method: str, by: str, n_folds: int, binary_ece: str) -> GroupGapSettings:
        """One recalibrator for everyone against one per group of ``by``, on the comparison's splits."""
        return GroupGapSettings.of(method, (by,), self.n_re, n_folds, self.seed, alpha=self.alpha,
                                   max_iter=self.max_iter, binary_ece=binary_ece)
