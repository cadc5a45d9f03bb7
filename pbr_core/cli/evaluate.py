"""``pbr-calib evaluate``: the metrics of a prediction file (in memory, or streamed: :mod:`pbr_core.cli.stream`),
by group, with the estimators of other libraries beside the paper's ECE."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pbr_core.cli._common import (CLIError, EXIT_BAD_INPUT, EXIT_GATE_FAILED, EXIT_OK, EXIT_USAGE, _load, bound_shown,
                                  cli_words, json_text)
from pbr_core.cli.stream import evaluate_stream, find_slices_cli, is_dataset


def evaluation_table(preds, n_bins: int | None = None, lipschitz: float = 1.0, eps: float = 0.05,
                     interval: bool = True) -> dict[str, Any]:
    """The numbers ``evaluate`` prints, as a dict (JSON-ready; None where a metric does not apply).

    With ``interval`` the 95% interval of the ECE (``pbr_core.ece_bootstrap_ci``, default method,
    seed 0, ``pbr_core.default_n_boot(n)`` resamples: the dashboard's Reliability page computes
    the same one) is added for each B; it costs O(n x resamples), so callers that need only the
    ECE pass False.
    """
    import pbr_core

    def ci(B: int) -> tuple[float, float]:
        return pbr_core.ece_bootstrap_ci(probs, labels, n_bins=B, n_boot=pbr_core.default_n_boot(preds.n),
                                         binary_target=target)

    # ``evaluate`` measures binary data as every page does (the app's one choice: p(y=1), Appendix A).
    target = pbr_core.metrics.DEFAULT_BINARY_TARGET
    probs, labels = pbr_core.metrics.ece_inputs(*preds.metric_inputs(), target)
    B_opt = pbr_core.optimal_n_bins(preds.n)
    row: dict[str, Any] = {
        "file": preds.source,
        "n": preds.n,
        "K": preds.n_classes or None,  # None: top-label-only data without class names
        "kind": preds.kind,
        "input_type": preds.input_type,
        "accuracy": preds.accuracy,
        "ece_type": {"binary": "binary ECE on p(y=1) (Appendix A)"}.get(preds.kind, "top-label ECE (Eq. 2)"),
        "optimal_n_bins": B_opt,
        "ece": pbr_core.ece(probs, labels, n_bins=B_opt, binary_target=target),
    }
    if interval:
        row["ece_ci_low"], row["ece_ci_high"] = ci(B_opt)
    row["mce"] = pbr_core.mce(probs, labels, n_bins=B_opt, binary_target=target)
    if interval:  # the estimators beside the paper's ECE (pbr_core.estimators), as evaluate prints them
        from pbr_core import estimators

        row["ece_equal_mass"] = estimators.ece_equal_mass(probs, labels, n_bins=B_opt)
        try:
            row["ece_debiased"] = estimators.ece_debiased(probs, labels, n_bins=B_opt)
        except ValueError:  # a bin of one row: too little data to debias
            row["ece_debiased"] = None
        row["smooth_ece"] = estimators.smooth_ece(probs, labels)
    if n_bins is not None:
        row["n_bins"] = n_bins
        row["ece_at_n_bins"] = pbr_core.ece(probs, labels, n_bins=n_bins, binary_target=target)
        if interval:
            row["ece_at_n_bins_ci_low"], row["ece_at_n_bins_ci_high"] = ci(n_bins)
        row["mce_at_n_bins"] = pbr_core.mce(probs, labels, n_bins=n_bins, binary_target=target)
    # The Brier score and NLL of what the ECE measures: p(y=1) of binary data, the confidence of a
    # top-label file against correctness, the probability vector of multiclass data.
    row.update(pbr_core.metrics.target_brier_nll(*preds.metric_inputs(), target))
    if interval:  # the same scores split into miscalibration, discrimination and uncertainty (CORP)
        row.update(corp_columns(probs, labels))
    if interval:  # is the model calibrated? (pbr_core.significance: what the Reliability page says)
        from pbr_core.significance import calibration_test
        from pbr_core.stream._report import test_columns

        conf, out = pbr_core.metrics.confidence_and_outcome(probs, labels)
        row.update(test_columns(calibration_test(conf, out, written=preds.as_written(conf)),
                                pbr_core.reliability_diagram(probs, labels, B_opt, binary_target=target)))
    row["lipschitz"] = lipschitz
    row["eps"] = eps
    row["theorem1_bound"] = pbr_core.theorem1_bound(preds.n, B_opt, lipschitz=lipschitz, eps=eps)
    if n_bins is not None:
        row["theorem1_bound_at_n_bins"] = pbr_core.theorem1_bound(preds.n, n_bins, lipschitz=lipschitz, eps=eps)
    if preds.column_roles:
        row["columns"] = dict(preds.column_roles)
    return row


#: The keys :func:`corp_columns` adds to ``evaluate``'s table, in order.
CORP_KEYS = ("corp_brier", "corp_brier_mcb", "corp_brier_dsc", "corp_brier_unc",
             "corp_log", "corp_log_mcb", "corp_log_dsc", "corp_log_unc", "corp_log_infinite_rows",
             "corp_brier_mcb_chance", "corp_log_mcb_chance", "corp_mcb_verdict")


def corp_columns(probs, labels) -> dict[str, Any]:
    """The CORP decomposition score = MCB - DSC + UNC (:func:`pbr_core.corp.score_decomposition`) of
    the Brier score and the log loss of the probability the ECE bins: p(y=1) against y for binary
    data (``corp_brier`` is then ``brier``, ``corp_log`` is ``nll``), the top-label confidence against
    correctness otherwise (a binary score: not the multiclass ``brier`` / ``nll`` of the whole vector).

    MCB is what recalibrating that probability by isotonic regression (PAV) would gain on these
    rows, DSC what the recalibrated forecast gains over the base rate, UNC the base rate's score.
    MCB is measured on the rows the PAV was fitted to, so calibrated files show some by chance:
    ``corp_*_mcb_chance`` is what calibrated predictions of this size stay at or below in 99 % of
    199 draws (1 - :data:`pbr_core.significance.ALPHA_MCB`, the MCB's share of the 5 % that the test,
    the bins note and this claim share) with outcomes drawn from the predictions (:func:`pbr_core.corp.mcb_against_chance`, seeded,
    at most 10^5 rows), and ``corp_mcb_verdict`` says whether the Brier MCB is beyond it (only then
    partly removable).
    The log loss floors the probability given to the outcome at ``pbr_core.metrics.NLL_EPS``, as
    ``nll`` does, so that a confident mistake gives a large finite number instead of infinity
    (which JSON cannot hold); ``corp_log_infinite_rows`` counts the rows where that probability was
    exactly 0 or 1 and wrong: above 0, the log loss and its MCB are infinite and ``corp_log`` and
    ``corp_log_mcb`` are numbers set by the floor (the text output says "infinite"). For binary data
    it equals ``nll_infinite_rows``; for multiclass data it counts only a top probability of exactly
    1 that was wrong. Needs every row sorted: in-memory ``evaluate`` only."""
    import numpy as np

    from pbr_core.corp import mcb_against_chance, mcb_verdict, score_decomposition
    from pbr_core.metrics import NLL_EPS, confidence_and_outcome, nll_infinite_rows

    c, o = confidence_and_outcome(probs, labels)
    out: dict[str, Any] = {}
    floored = np.clip(c, NLL_EPS, 1.0 - NLL_EPS)
    for kind, name, p in (("brier", "corp_brier", c), ("log", "corp_log", floored)):
        d = score_decomposition(p, o, kind=kind)
        out.update({name: d.score, f"{name}_mcb": d.mcb, f"{name}_dsc": d.dsc, f"{name}_unc": d.unc})
    chance = mcb_against_chance(c, o)
    if not np.array_equal(floored, c):  # the log loss's reference on the floored p, as its MCB (~2 s more)
        chance["log"] = mcb_against_chance(floored, o)["log"]
    out["corp_log_infinite_rows"] = nll_infinite_rows(c, o)  # the CORP probability of what happened is 0
    out.update({"corp_brier_mcb_chance": chance["brier"].chance_high, "corp_log_mcb_chance": chance["log"].chance_high,
                "corp_mcb_verdict": mcb_verdict(chance["brier"])})
    return out


def _format_table(rows: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        if v is None:
            return "n/a"
        if isinstance(v, dict):  # column -> role: one group per role, in file order
            by_role: dict[str, list[str]] = {}
            for column, role in v.items():
                by_role.setdefault(role, []).append(column)
            return "; ".join(f"{role}: {', '.join(cols) if len(cols) <= 6 else f'{len(cols)} columns'}"
                             for role, cols in by_role.items())
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    width = max(len(k) for k in rows)
    return "\n".join(f"{k:<{width}}  {fmt(v)}" for k, v in rows.items())


def _evaluation_text(table: dict[str, Any]) -> str:
    """``evaluate``'s table as the terminal shows it (in memory and streamed): the metrics, the ECE
    curve where asked, then the loader's notes (which column was read as what, which class is 1,
    what was dropped or renormalised)."""
    shown = {k: v for k, v in table.items() if k not in ("ece_curve", "notes")}
    if shown.get("nll_infinite_rows"):  # the NLL is infinite; the JSON keeps the floored value beside the count
        from pbr_core.metrics import nll_shown

        shown["nll"] = nll_shown(shown["nll"], shown["nll_infinite_rows"])
    from pbr_core.significance import at_floor, format_p

    for key in ("calibration_test_p", "bins_outside_p"):  # as every page writes a p-value ("> 0.99", never 1)
        if isinstance(shown.get(key), float):  # a Monte Carlo p at its floor: "≤ X", as the pages write it
            floor = key == "calibration_test_p" and at_floor(shown[key], str(shown.get("calibration_test", "")))
            shown[key] = format_p(shown[key], floor)
    for key in ("theorem1_bound", "theorem1_bound_at_n_bins"):  # at least 1 (a few rows): says nothing, said so
        if isinstance(shown.get(key), float) and shown[key] >= 1.0:
            shown[key] = bound_shown(shown[key])
    if shown.get("corp_log_infinite_rows"):  # a wrong exact 0 or 1: the log loss and its MCB are infinite
        rows = shown["corp_log_infinite_rows"]
        for key in ("corp_log", "corp_log_mcb"):
            shown[key] = f"infinite ({rows:,} row{'s' if rows != 1 else ''}; {shown[key]:.6g} with it floored)"
    lines = [_format_table(shown)]
    if "ece_curve" in table:
        lines.append("ece curve  " + ", ".join(f"B={b}: {v:.4g}" for b, v in table["ece_curve"].items()))
    notes = table.get("notes", ())
    lines += ["how the file was read:", *(f"  {cli_words(n)}" for n in notes)] if notes else [""]
    return "\n".join(lines)


def cmd_evaluate(args: argparse.Namespace) -> int:
    if len(args.by) > 2:
        raise CLIError("--by: one or two columns", EXIT_USAGE)
    if args.every and not args.by:
        raise CLIError("--every needs --by (a date column)", EXIT_USAGE)
    if args.max_group_gap is not None and not args.by:
        raise CLIError("--max-group-gap needs --by (the column whose groups are compared)", EXIT_USAGE)
    from pbr_core.groups import EACH_CLASS, PREDICTED_CLASS, TRUE_CLASS, TRUE_CLASS_REFUSED

    # Choices of --by that no file could make valid are usage errors (2), as an invalid value is; the
    # library's refusal came back as a bad input file (3) (audit 10a, finding 9).
    if TRUE_CLASS in args.by:
        raise CLIError(f"--by {TRUE_CLASS!r}: {cli_words(TRUE_CLASS_REFUSED)}", EXIT_USAGE)
    if EACH_CLASS in args.by and len(args.by) > 1:
        raise CLIError(f"--by {EACH_CLASS!r} (one class against the rest, over all rows) cannot be combined with "
                       "another --by", EXIT_USAGE)
    wanted = [c for c in args.by if c not in (PREDICTED_CLASS, EACH_CLASS)]
    if wanted:  # a column to group by is never read as a score
        named = [c.strip() for c in (args.group_columns or "").split(",") if c.strip()]
        args.group_columns = ",".join(dict.fromkeys([*named, *wanted]))
    if args.stream or args.scheduler or args.local_cluster or is_dataset(args.file):
        if args.scheduler and args.local_cluster:
            raise CLIError("give --scheduler or --local-cluster, not both", EXIT_USAGE)
        table, report = evaluate_stream(args)
        # CORP needs every row sorted by its forecast: n/a in one pass, as the other estimators that need the rows.
        table = _insert_after(table, "nll", {k: None for k in CORP_KEYS})
        slices = find_slices_cli(args) if args.find_slices else None
        return _emit(args, table, report, slices, calibration_gates(args, table, report))
    preds = _mapped(args) if args.map_scores else _load(args.file, args)
    table = evaluation_table(preds, args.n_bins, args.lipschitz, args.eps)
    if args.curve:  # the ECE for every B = 1..200 (and --n-bins), as on a streamed dataset
        import pbr_core

        bins = sorted(set(range(1, 201)) | ({args.n_bins} if args.n_bins else set()))
        target = pbr_core.metrics.DEFAULT_BINARY_TARGET
        probs, labels = pbr_core.metrics.ece_inputs(*preds.metric_inputs(), target)
        curve = pbr_core.ece_curve(probs, labels, bins, binary_target=target)
        table["ece_curve"] = {int(b): float(v) for b, v in zip(bins, curve)}
    table["notes"] = list(preds.notes)  # how the file was read: which column is what, which class is 1
    report = None
    if args.by:
        from pbr_core.groups import calibration_by_group, default_every

        try:
            # A date column without --every: the dashboard's default period (the dates as they are gave
            # the audit's fraud file 180 one-day groups of ~44 rows, none big enough to compare).
            chosen = None if args.every else default_every(preds, args.by)
            report = calibration_by_group(preds, args.by, every=args.every or chosen)
            report.every_chosen = chosen is not None
        except ValueError as exc:
            raise CLIError(f"{preds.source}: {cli_words(str(exc))}", EXIT_BAD_INPUT) from exc
    slices = find_slices_cli(args, preds) if args.find_slices else None
    gates = calibration_gates(args, table, report)
    conventions = None
    if args.libraries:
        from pbr_core.estimators import library_conventions

        probs, labels = preds.metric_inputs()
        conventions = library_conventions(probs, labels, one_dimensional="confidence"
                                          if preds.kind == "top_label" else "positive")
    return _emit(args, table, report, slices, gates, conventions)


def _emit(args: argparse.Namespace, table: dict[str, Any], report: Any, slices: Any, gates: list,
          conventions: Any = None) -> int:
    """Print ``evaluate``'s results (JSON or text; in memory and streamed alike) and return its exit code."""
    from pbr_core.slices import slices_json, slices_text

    if args.format == "json":
        if report is not None:
            table["groups"] = _groups_json(report)
        if conventions is not None:
            table["libraries"] = json.loads(conventions.to_json(orient="records", double_precision=15))
        if slices is not None:
            table["slices"] = slices_json(slices)
        if gates:
            table["gates"] = gates
        print(json_text(table))
        return _gate_exit(gates)
    print(_evaluation_text(table))
    if conventions is not None:
        print()
        print("the same predictions, measured the ways other estimators and libraries do by default:")
        shown = conventions[["convention", "measures", "bins", "ece", "difference"]]
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if report is not None:
        print()
        print(group_text(report))
    if slices is not None:
        print()
        print(slices_text(slices))
    _print_gates(gates)
    return _gate_exit(gates)


def _insert_after(table: dict[str, Any], key: str, extra: dict[str, Any]) -> dict[str, Any]:
    """``table`` with ``extra``'s items placed right after ``key`` (at the end when it is absent)."""
    if key not in table:
        return {**table, **extra}
    out: dict[str, Any] = {}
    for k, v in table.items():
        out[k] = v
        if k == key:
            out.update(extra)
    return out


# ---------------------------------------------------------------------- calibration gates (CI)


def calibration_gates(args: argparse.Namespace, table: dict[str, Any], report) -> list[dict[str, Any]]:
    """The outcome of ``--fail-above``, ``--require-below`` and ``--max-group-gap`` (empty when none
    was given).

    Each gate is ``{"gate", "limit", "value", "status", "message"}`` with status "passed", "failed",
    "undecided" (``--fail-above`` only) or "not checked", and the message one line naming the value,
    the limit and why.

    * ``--fail-above X`` and ``--require-below X`` read the ``ece`` field (the paper's ECE with
      B = floor(n^(1/3)), of p(y=1) for binary data, of the top label otherwise) and its 95 %
      interval (``ece_ci_low``, ``ece_ci_high``: :func:`pbr_core.ece_bootstrap_ci`, row 7 of
      docs/claims.md; the Poisson-bootstrap one on a streamed dataset), as printed: see
      :func:`ece_gate`. ``--fail-above`` fails only when the calibration error is shown above X,
      ``--require-below`` unless it is shown at most X.
    * ``--max-group-gap X`` (with ``--by``) compares the largest gap between two groups as
      :func:`pbr_core.groups.largest_gap` states it: the difference of the worst and best groups'
      **bias-corrected** calibration errors (``gap``, whose mean is 0 between calibrated groups of
      any sizes; the plug-in ECEs differ by ~0.04 between calibrated groups of 135 and 13,946 rows),
      and it fails only when that gap is **real** (``real``: its interval, adjusted for every pair of
      groups, excludes 0, and the worst group fails its own calibration test after Holm's
      correction) **and** ``gap > X``. So calibrated data fails the gate at most 5 % of the time
      whatever X and the group sizes (the "real" claim's false-alarm rate; tests/test_cli_gates.py
      counts it), and a gap the rows cannot tell from noise never fails a CI job, whatever its
      estimate; its message then gives the interval only, not the estimate (the worst minus the best
      of many noisy estimates is large between calibrated groups: 0.126 on average for 30 groups of
      100-200 rows), which stays in ``value`` and ``groups.largest_gap``. Fewer than two groups
      with enough rows: "not checked" (a warning, exit 0).
    """
    gates: list[dict[str, Any]] = []
    for name in ("fail_above", "require_below"):
        if getattr(args, name, None) is not None:
            gates.append(ece_gate(name, float(getattr(args, name)), table))
    if args.max_group_gap is not None:
        limit = float(args.max_group_gap)
        g = report.largest_gap if report is not None else {}
        if not g:
            gates.append({"gate": "max_group_gap", "limit": limit, "value": None, "status": "not checked",
                          "message": f"--max-group-gap {limit:g} not checked: fewer than two groups of "
                                     f"{' × '.join(args.by)} have enough rows to compare"})
        else:
            gap = float(g["gap"])
            from pbr_core.groups import group_label

            pair = f"{group_label(report, g['worst'])} against {group_label(report, g['best'])}"
            interval = f"{g['level']:.0%} interval {g['low']:.4f} to {g['high']:.4f}, adjusted for every pair of groups"
            failed = bool(g["real"]) and gap > limit
            if failed:
                message = (f"largest group gap {gap:.4f} ({pair}, bias-corrected; real: {interval}) is above "
                           f"--max-group-gap {limit:g}")
            elif g["real"]:
                message = f"largest group gap {gap:.4f} ({pair}, bias-corrected) is real but at most --max-group-gap {limit:g}"
            else:
                # No point figure: between calibrated groups the worst-minus-best estimate is large by
                # construction (0.126 on average for 30 groups of 100-200 rows, true gap 0); the JSON
                # keeps it as ``value``, the sentence gives the interval only.
                why = ("consistent with no difference" if g["low"] <= 0
                       else "the worst group's own test finds no miscalibration")
                message = (f"largest group gap ({pair}, bias-corrected) is not shown to be real ({interval}; "
                           f"{why}), so it does not count against --max-group-gap {limit:g}")
            gates.append({"gate": "max_group_gap", "limit": limit, "value": gap,
                          "status": "failed" if failed else "passed", "message": message})
    return gates


#: What each ECE gate's sentence calls its limit.
_ECE_GATE_OPTION = {"fail_above": "--fail-above", "require_below": "--require-below"}


def ece_gate(name: str, limit: float, table: dict[str, Any]) -> dict[str, Any]:
    """``--fail-above X`` (``name`` "fail_above") or ``--require-below X`` ("require_below"): the
    ECE's 95 % interval [lo, hi] (``table["ece_ci_low"]``, ``table["ece_ci_high"]``) against X.

    The plug-in ECE is biased upward by noise, the more the fewer the rows, so comparing the ECE
    itself with X failed calibrated models most of the time on small files (audit 7: rows from
    Adult's p(y=1) with outcomes drawn from it, true CE_B = 0, X = 0.02: 272 of 300 files of 200
    rows failed, 236 of 300 at 500 rows, 67 of 300 at 2,000; a model exactly at X failed 54-96 %).
    The interval decides instead, each end erring on its own side at most about 2.5 % of the time:

    * ``fail_above``: "failed" (exit 5) when lo > X, the calibration error is above X beyond noise;
      "passed" when hi <= X, shown at most X; "undecided" otherwise (lo <= X < hi: these rows cannot
      show it above X, nor at most X): exit 0 with a warning. A model whose true CE_B is at most X
      fails at most about 2.5 % of the time (at every n simulated, 200-10,000 rows: at most 4 of 300
      files; docs/claims.md row 5b; tests/test_cli_gates.py counts it). The price is power on few
      rows: where the true CE_B is X + 0.02, Adult-like files fail about 1 % of the time at 200
      rows, 3-4 % at 500, 16-36 % at 2,000, 94-100 % at 10,000.
      No number of rows needed is given for an undecided gate: it depends on how far the unknown
      true error lies from X (at exactly X, no number of rows would show it above).
    * ``require_below`` (the opposite burden of proof, for a team that must show calibration):
      "passed" only when hi <= X, shown at most X; "failed" (exit 5) otherwise, the message saying
      whether the error is shown above X (lo > X) or these rows cannot show it at most X. A model
      whose true CE_B is above X passes at most about 2.5 % of the time.

    ``value`` is the ECE; an interval that is missing (None) gives "not checked" (a warning).
    """
    from pbr_core.wording import rows as count_rows, these_rows

    option = f"{_ECE_GATE_OPTION[name]} {limit:g}"
    ece, lo, hi = table["ece"], table.get("ece_ci_low"), table.get("ece_ci_high")
    B = table.get("ece_bins", table["optimal_n_bins"])
    bins = f"B = {B}, {table['ece_type']}"
    rows = f"{count_rows(table['n'])}, {bins}"
    if lo is None or hi is None:
        return {"gate": name, "limit": limit, "value": None if ece is None else float(ece), "status": "not checked",
                "message": f"{option} not checked: the ECE has no interval here ({rows})"}
    ece, lo, hi = float(ece), float(lo), float(hi)
    figures = f"ECE {ece:.4f}, its 95% interval {lo:.4f} to {hi:.4f}"
    if lo > limit:
        status = "failed"
        message = f"the calibration error is above {limit:g} beyond noise: {figures} lies above {option} ({rows})"
    elif hi <= limit:
        status = "passed"
        message = f"the calibration error is shown at most {limit:g}: {figures} lies at or below {option} ({rows})"
    elif name == "fail_above":
        status = "undecided"
        message = (f"{these_rows(table['n'])} cannot show that the calibration error is above {limit:g}: {figures} "
                   f"contains {limit:g} ({bins}), so {option} does not fail")
    else:
        status = "failed"
        message = (f"{these_rows(table['n'])} cannot show that the calibration error is at most {limit:g}: "
                   f"{figures} reaches above {option} ({bins})")
    return {"gate": name, "limit": limit, "value": ece, "status": status, "message": message}


def _print_gates(gates: list[dict[str, Any]]) -> None:
    if gates:
        print()
        print("calibration gates:")
        for gate in gates:
            print(f"  {gate['status']}: {gate['message']}")


def _gate_exit(gates: list[dict[str, Any]]) -> int:
    """EXIT_GATE_FAILED with one line on stderr per failed gate; warnings for gates not checked or
    undecided (exit 0: an undecided ``--fail-above`` does not fail the job)."""
    import sys

    for gate in gates:
        if gate["status"] == "failed":
            print(f"pbr-calib: calibration gate failed: {gate['message']}", file=sys.stderr)
        elif gate["status"] in ("not checked", "undecided"):
            print(f"pbr-calib: warning: {gate['message']}", file=sys.stderr)
    return EXIT_GATE_FAILED if any(g["status"] == "failed" for g in gates) else EXIT_OK


def _mapped(args: argparse.Namespace):
    """``evaluate --map-scores``: the rows not used to fit the score -> probability map, as predictions."""
    from pbr_core import PredictionsError
    from pbr_core.loading import read_table
    from pbr_core.scores import map_scores

    if not args.label_column:
        raise CLIError("--map-scores needs --label-column (the binary outcome)", EXIT_USAGE)
    try:
        frame = read_table(args.file)
        return map_scores(frame, args.map_scores, args.label_column, share=args.map_share, method=args.map_method,
                          source=Path(args.file).name).preds
    except PredictionsError as exc:
        raise CLIError(cli_words(str(exc)), EXIT_BAD_INPUT) from exc


def _groups_json(report) -> dict[str, Any]:
    from pbr_core.groups import gap_statement, group_statements

    return {"by": report.by, "measured": report.measures, "every": report.every, "every_chosen": report.every_chosen, "test": report.test,
            "interval": report.interval, "largest_gap": report.largest_gap,
            "statements": {"largest_gap": gap_statement(report), "groups": group_statements(report)},
            "rows": json.loads(report.table.to_json(orient="records", double_precision=15)),
            "warnings": list(report.warnings)}


def group_text(report) -> str:
    """The per-group table as text, with the test, the small groups and the largest gap."""
    from pbr_core.groups import DATE_MAX_GROUPS, MEASURED_WORDS, MIN_ROWS, gap_statement, group_statements
    from pbr_core.significance import NOT_LOCAL, format_p

    t = report.table
    shown = t[["group", "n", "rate", "mean_predicted", "ece", "ece_low", "ece_high", "ece_corrected", "mce",
               "brier"]].copy()
    measured, rate = MEASURED_WORDS[report.measures]
    shown.columns = ["group", "n", rate, "mean predicted", "ECE", "ECE low", "ECE high", "ECE corrected", "MCE",
                     "Brier"]
    from pbr_core.significance import at_floor

    shown["p (Holm)"] = [format_p(p, at_floor(v, m)) for p, v, m in zip(t["p_holm"], t["p_value"], t["test_method"])]
    shown.insert(1, "", ["(too few rows)" if small else "" for small in t["too_small"]])
    every = (f"dates by {report.every}" + (f", chosen from the data: the finest of day, week and month giving at most "
                                         f"{DATE_MAX_GROUPS} groups, half of them with {MIN_ROWS} rows or more (month "
                                         "when none does); --every to choose" if report.every_chosen else "") + "; "
             if report.every else "")
    # A grouping column that restates the outcome is warned of once, above the table (as the Groups page does).
    lines = [*report.warnings, f"calibration by {' × '.join(report.by)} ({every}{measured}; "
             f"ECE with B = floor(n_group^(1/3)), {report.level:.0%} {report.interval}; ECE corrected: with the "
             f"part noise adds removed; test: {report.test})",
             shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"),
             "largest gap: " + gap_statement(report), "each group:", *(f"  {s}" for s in group_statements(report)),
             f"  {NOT_LOCAL}"]
    return "\n".join(lines)
