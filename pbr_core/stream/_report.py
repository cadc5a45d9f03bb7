"""The numbers ``pbr-calib evaluate`` prints, from streamed statistics."""

from __future__ import annotations

from typing import Any

from pbr_core.bounds import optimal_n_bins, theorem1_bound
from pbr_core.stream._source import Dataset
from pbr_core.stream._stats import CalibrationStatistics

__all__ = ["copies_notes", "evaluate_dataset"]


def copies_notes(dataset: Dataset, stats: CalibrationStatistics) -> list[str]:
    """The notes on copies a streamed pass can give: files with the same contents as another file of
    the dataset (exact, from their bytes), else rows that are exact copies of another row far beyond
    chance (from the pass's :class:`~pbr_core.loading._duplicates.RowHashes`)."""
    from pbr_core.loading._duplicates import identical_files_note

    note = identical_files_note(dataset.identical_files()) or stats.duplicate_note()
    return [note] if note else []


def test_columns(test, table=None) -> dict:
    """The test of calibration of all rows as ``evaluate`` reports it (in memory and streamed); with
    ``table``, the reliability table of the ECE's B bins (with consistency bands), how many of its bins
    lie outside their 90 % band and the p-value of that count under calibration
    (:func:`pbr_core.significance.bins_outside_test`), and the verdict says so when it is below
    :data:`~pbr_core.significance.ALPHA_BINS` (0.005) and the test found nothing at
    :data:`~pbr_core.significance.ALPHA_TEST` (0.035) (:func:`pbr_core.significance.bins_note`), as the Reliability page does."""
    from pbr_core.significance import bins_note, bins_outside_test, outside_chances, verdict

    out = {"calibration_test_p": test.p_value, "calibration_test": test.method,
           "detectable_shift": test.detectable_shift, "calibration_verdict": verdict(test)}
    if table is not None:
        k, m, p = bins_outside_test(table)
        out["calibration_verdict"] += bins_note(test, k, m, f"bins with rows of the ECE (B = {len(table)})",
                                                chances=outside_chances(table))
        out.update({"bins_outside_band": k, "bins_with_rows": m, "bins_outside_p": p})
    return out


def evaluate_dataset(dataset: Dataset, stats: CalibrationStatistics, n_bins: int | None = None,
                     lipschitz: float = 1.0, eps: float = 0.05, curve: bool = False) -> dict[str, Any]:
    """The keys of :func:`pbr_core.cli.evaluation_table` that one pass can give, from ``stats``.

    The estimators that need the rows themselves (equal-mass bins, the debiased ECE, smooth ECE)
    are not computed (None). ``n_bins`` must be among the B values the statistics were kept for.
    With ``curve`` the ECE of every kept B is added as ``ece_curve`` ({B: ECE}).
    """
    lay = dataset.layout()
    B_opt = stats.config.n_bins
    lo, hi = stats.ece_interval()
    row: dict[str, Any] = {
        "file": dataset.spec,
        "files": len(dataset.files),
        "n": stats.n,
        "K": lay.n_classes or None,
        "kind": lay.kind,
        "input_type": lay.input_type,
        "accuracy": stats.accuracy,
        "ece_type": {"binary": "binary ECE on p(y=1) (Appendix A)"}.get(lay.kind, "top-label ECE (Eq. 2)"),
        "optimal_n_bins": optimal_n_bins(stats.n),
        "ece": stats.ece(),
        "ece_ci_low": lo,
        "ece_ci_high": hi,
        "ci_method": f"split interval, Poisson bootstrap ({stats.config.n_boot} replicates)",
        "mce": stats.mce(),
        "ece_equal_mass": None,
        "ece_debiased": None,
        "smooth_ece": None,
    }
    if B_opt != row["optimal_n_bins"]:
        row["ece_bins"] = B_opt
    if n_bins is not None:
        row["n_bins"] = n_bins
        row["ece_at_n_bins"] = stats.ece(n_bins)
        row["mce_at_n_bins"] = stats.mce(n_bins)
    row["brier"] = stats.brier
    row["nll"] = stats.nll
    row["classwise_ece"] = stats.classwise_ece()
    test = stats.calibration_test()
    if test is not None:
        row.update(test_columns(test, stats.reliability_diagram(B_opt)))
    row["lipschitz"] = lipschitz
    row["eps"] = eps
    row["theorem1_bound"] = theorem1_bound(stats.n, B_opt, lipschitz=lipschitz, eps=eps)
    if n_bins is not None:
        row["theorem1_bound_at_n_bins"] = theorem1_bound(stats.n, n_bins, lipschitz=lipschitz, eps=eps)
    row["columns"] = dict(lay.column_roles)
    if curve:
        row["ece_curve"] = {int(b): float(v) for b, v in zip(stats.config.curve_bins, stats.ece_curve())}
    return row
