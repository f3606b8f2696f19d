"""The replay's ground truth: the incidents a guard should stop, the calls their waste is made
of, where each lies in its stream, and the labels a user gives (``backtest --labels``)."""

from __future__ import annotations

import csv
from pathlib import Path

from analyzer.engine.store import Store
from analyzer.errors import ForensicsError

GROUND_TRUTH_SEVERITIES = ("medium", "high")


def prepare_truth(store: Store, labels: Path | None = None) -> None:
    """The incidents a guard should stop (``lf_truth``: medium and high severity, or as
    labelled), the calls their waste is made of (``lf_truth_calls``), their extent per stream
    (``lf_truth_span``), and which incidents are one event (they share wasted calls: an empty
    stream found by two detectors counts once)."""
    engine = store.engine
    sev = ", ".join(f"'{s}'" for s in GROUND_TRUTH_SEVERITIES)
    engine.run("detect/truth.sql", severities=sev)
    if labels is not None:
        apply_labels(store, labels)
    for _ in range(20):  # events: incidents joined through shared calls, named by the least id
        if not engine.scalar("detect/truth_events.sql"):
            break
    engine.run("detect/truth_spans.sql")


def apply_labels(store: Store, path: Path) -> None:
    """``id,label`` rows: an incident or call id, ``runaway`` or ``legitimate``.

    A legitimate incident, or one holding a call labelled legitimate, is not ground truth; a
    runaway incident is (whatever its severity); runaway calls not already in an incident form
    one incident per stream, made of those calls (a target of every guard).
    """
    rows: list[tuple[str, str]] = []
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            for n, rec in enumerate(csv.reader(fh), 1):
                if not rec or (n == 1 and rec[0].strip().lower() in ("id", "call_id")):
                    continue
                if len(rec) < 2 or rec[1].strip().lower() not in ("runaway", "legitimate"):
                    raise ForensicsError("expected id,runaway|legitimate", path=path, line=n)
                rows.append((rec[0].strip(), rec[1].strip().lower()))
    except OSError as exc:
        raise ForensicsError(f"cannot read: {exc.strerror or exc}", path=path) from exc
    with store.engine.step() as engine:  # lf_labels lives as long as this step
        engine.run("CREATE OR REPLACE TEMP TABLE lf_labels (id VARCHAR, label VARCHAR)")
        engine.many("INSERT INTO lf_labels VALUES (?, ?)", rows)
        engine.run("detect/truth_labels.sql")
