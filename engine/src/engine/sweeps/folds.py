"""The k-fold rows of a sweep summary: the jobs that differ only in `dataset.fold` form a
group, and each group gets one row of every metric's mean and standard deviation over its
finished folds.

The row is only given when the jobs' fold.json files agree: one deal (the same fingerprints of
all K folds in every job, each job's own fold among them), folds that do not overlap and,
once all K finished, together the whole train split. Otherwise the row is a `fold mismatch`
without a mean. A failed fold's job is said (`2 of 3` folds, and a line naming the job),
never averaged over silently.

Columns: `folds` (`<finished> of <K>`), the metric columns hold the mean and `<metric>_std`
the sample standard deviation (n-1; empty for one fold).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from engine.data.folds import FOLD_FILE, fingerprint, read_fold_file

FOLD_KEY = "dataset.fold"  # the override that tells a group's jobs apart
FOLDS = "folds"  # column: `<finished> of <K>`
# the status of a group's row
MEAN_STD, MISMATCH, NO_FOLD = "mean ± std", "fold mismatch", "no fold finished"


def fold_columns(metric_keys: Sequence[str]) -> list[str]:
    """The columns a k-fold sweep adds to summary.csv."""
    return [FOLDS, *(f"{k}_std" for k in metric_keys)]


def is_group_row(row: dict[str, str]) -> bool:
    """Whether `row` is a group's mean ± std row (not a job's)."""
    return row.get("status") in (MEAN_STD, MISMATCH, NO_FOLD)


def group_of(overrides: str) -> str | None:
    """The group of a job: its overrides without dataset.fold; None without that override."""
    items = overrides.split()
    if not any(o.lstrip("+~").partition("=")[0] == FOLD_KEY for o in items):
        return None
    return " ".join(o for o in items if o.lstrip("+~").partition("=")[0] != FOLD_KEY)


def fold_of(overrides: str) -> str:
    """The value of dataset.fold in a job's overrides."""
    items = (o.lstrip("+~").partition("=") for o in overrides.split())
    return next((value for key, _, value in items if key == FOLD_KEY), "")


def _record(row: dict[str, str]) -> dict[str, Any] | None:
    """The job's fold.json (None: it has none); a malformed one is a ValueError naming it."""
    path = Path(row.get("dir") or "") / FOLD_FILE
    return asdict(read_fold_file(path)) if row.get("dir") and path.exists() else None


def _records(
    members: list[dict[str, str]], labels: list[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The fold.json of each finished job, and what is wrong with each malformed one, both
    by label: a hand-edited file makes its group a mismatch, never the summary fail."""
    records, malformed = {}, {}
    for label, row in zip(labels, members, strict=True):
        try:
            record = _record(row) if row["status"] == "ok" else None
        except ValueError as err:
            malformed[label] = f"{label}: {err}"
            continue
        if record is not None:
            records[label] = record
    return records, malformed


def _checked(records: dict[str, dict[str, Any]]) -> list[str]:
    """What is wrong with the fold.json of the jobs `records` (by `job N`) of one group."""
    first_job, first = next(iter(records.items()))
    deal = ("folds", "fold_seed", "train_split_size", "fingerprints")
    problems = [
        f"{job}'s folds (fold_seed {r['fold_seed']}, {r['folds']} folds of "
        f"{r['train_split_size']} samples, fingerprints {r['fingerprints']}) differ from "
        f"{first_job}'s (fold_seed {first['fold_seed']}, {first['folds']} folds of "
        f"{first['train_split_size']}, fingerprints {first['fingerprints']})"
        for job, r in records.items()
        if any(r[k] != first[k] for k in deal)
    ]
    problems += [
        f"{job}'s val indices do not match its fold {r['fold']}'s fingerprint"
        for job, r in records.items()
        if fingerprint_of(r) != r["fingerprints"][r["fold"]]
    ]
    seen: dict[int, str] = {}
    for job, r in records.items():
        overlap = next((seen[i] for i in r["val_indices"] if i in seen), None)
        if overlap is not None:
            problems.append(f"the val folds of {overlap} and {job} overlap")
        seen |= dict.fromkeys(r["val_indices"], job)
    size = first["train_split_size"]
    if any(not 0 <= i < size for i in seen):
        problems.append(f"val indices outside the train split 0..{size - 1}")
    finished = {r["fold"] for r in records.values()}
    if not problems and len(finished) == first["folds"] and len(seen) != size:
        problems.append(f"the {first['folds']} folds cover {len(seen)} of {size} samples")
    return problems


def fingerprint_of(record: dict[str, Any]) -> str:
    """The fingerprint of a fold.json's val indices, recomputed."""
    return fingerprint(np.asarray(record["val_indices"], dtype=np.int64))


def _stats(rows: list[dict[str, str]], key: str) -> dict[str, str]:
    try:
        values = [float(r[key]) for r in rows]
    except (KeyError, TypeError, ValueError):  # not measured by every fold: no mean
        return {}
    if not values:
        return {}
    std = statistics.stdev(values) if len(values) > 1 else None
    return {key: repr(statistics.fmean(values)), f"{key}_std": "" if std is None else repr(std)}


def fold_groups(
    rows: list[dict[str, str]], metric_keys: Sequence[str], folds: int | None
) -> tuple[list[dict[str, str]], list[str]]:
    """One row per group of the job `rows` (`folds`: the K of a group none of whose jobs
    wrote fold.json), and the lines saying what each row does not: failed folds, mismatches."""
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        group = group_of(row["overrides"])
        if group is not None:
            groups[group].append(row)
    out, lines = [], []
    for group, members in groups.items():
        name = f"`{group}`" if group else "the sweep"
        # a fold's job run again into the sweep dir (a failed one, under summary.skip_completed)
        # replaces its earlier row; job numbers repeat when several sweeps share the dir
        members = list({fold_of(r["overrides"]): r for r in members}.values())
        labels = _labels(members)
        records, malformed = _records(members, labels)
        ok = [r for i, r in enumerate(members) if labels[i] in records]
        problems = _checked(records) if records else []
        problems += malformed.values()
        problems += [
            f"{labels[i]} finished without fold.json (dataset.folds unset?)"
            for i, r in enumerate(members)
            if r["status"] == "ok" and labels[i] not in records | malformed
        ]
        k = next(iter(records.values()))["folds"] if records else folds
        row = {"job": "", "overrides": group, "dir": "", "runs_as": group, "error": ""}
        row[FOLDS] = f"{len({rec['fold'] for rec in records.values()})} of {k}"
        if problems:
            row |= {"status": MISMATCH, "error": "; ".join(problems)}
            lines.append(
                f"FOLD MISMATCH in {name}: {'; '.join(problems).rstrip('.')}. No mean is given: rerun the "
                "jobs with one dataset.folds and dataset.fold_seed."
            )
        elif not ok:
            row["status"] = NO_FOLD
        else:
            row["status"] = MEAN_STD
            for key in metric_keys:
                row |= _stats(ok, key)
        # failed jobs of folds not finished since (a fold outside 0..K-1 stays failed until
        # all K finished: then it is no fold of the group's)
        complete = records and len({rec["fold"] for rec in records.values()}) == k
        failed = [i for i, r in enumerate(members) if r["status"] == "failed" and not complete]
        if failed:
            said = ", ".join(f"{labels[i]} ({members[i]['error']})" for i in failed)
            lines.append(
                f"{name}: {row[FOLDS]} folds finished; failed: {said}; the mean and std are "
                f"over the {len(ok)} that finished."
            )
        elif records and not complete and not problems and isinstance(k, int):
            missing = sorted(set(range(k)) - {rec["fold"] for rec in records.values()})
            lines.append(
                f"{name}: {row[FOLDS]} folds finished; no job ran fold "
                f"{', '.join(map(str, missing))} (dataset.fold); the mean and std are over the "
                f"{len(ok)} that finished."
            )
        out.append(row)
    return out, lines


def _labels(rows: list[dict[str, str]]) -> list[str]:
    """`job N` for each row, with its folder's name where job numbers repeat (several sweeps
    into one dir)."""
    labels = [f"job {r['job']}" for r in rows]
    return [
        f"{label} ({Path(r.get('dir') or '').name})" if labels.count(label) > 1 else label
        for label, r in zip(labels, rows, strict=True)
    ]


def fold_mean(row: dict[str, str], key: str) -> str:
    """`0.912 ± 0.013`, the mean alone for one fold, empty without a mean."""
    mean, std = row.get(key) or "", row.get(f"{key}_std") or ""
    if not mean:
        return ""
    return f"{float(mean):.4g} ± {float(std):.2g}" if std else f"{float(mean):.4g}"


def fold_markdown(groups: list[dict[str, str]], lines: list[str], keys: Sequence[str]) -> str:
    """The summary.md section of the groups' rows (and their lines), mean ± std per cell."""
    columns = ["overrides", FOLDS, "status", *keys]
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in groups:
        cells = [row["overrides"] or "(all)", row[FOLDS], row["status"]]
        cells += [fold_mean(row, k) for k in keys]
        table.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    said = "".join(f"{line}\n\n" for line in lines)
    return (
        "## k-fold cross-validation\n\nOne row per group of jobs that differ only in "
        "`dataset.fold`: each metric's mean ± standard deviation over its finished folds.\n\n"
        + said
        + "\n".join(table)
        + "\n"
    )
