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
    con = store.con
    sev = ", ".join(f"'{s}'" for s in GROUND_TRUTH_SEVERITIES)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE lf_truth AS
            SELECT incident_id, detector, incident_id AS event_id FROM incidents
            WHERE severity IN ({sev})"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_truth_calls AS
           SELECT t.incident_id, e.* FROM lf_truth t
           JOIN incident_calls ic USING (incident_id) JOIN lf_events e USING (call_id)"""
    )
    if labels is not None:
        apply_labels(store, labels)
    for _ in range(20):  # events: incidents joined through shared calls, named by the least id
        changed = con.execute(
            """WITH pairs AS (
                   SELECT a.incident_id, min(tb.event_id) AS ev
                   FROM lf_truth_calls a JOIN lf_truth_calls b USING (call_id)
                   JOIN lf_truth tb ON tb.incident_id = b.incident_id GROUP BY a.incident_id)
               UPDATE lf_truth SET event_id = p.ev FROM pairs p
               WHERE lf_truth.incident_id = p.incident_id AND p.ev < lf_truth.event_id"""
        ).fetchall()
        if not changed or not changed[0][0]:
            break
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_truth_span AS
           WITH ends AS (
               SELECT t.incident_id, f.u_stream, f.pos AS first_pos,
                      l.pos AS last_pos, f.ts AS first_ts
               FROM lf_truth t JOIN incidents i USING (incident_id)
               JOIN lf_events f ON f.call_id = i.first_call_id
               JOIN lf_events l ON l.call_id = i.last_call_id AND l.u_stream = f.u_stream)
           SELECT incident_id, u_stream,
                  min(first_pos) AS first_pos, max(last_pos) AS last_pos,
                  min(first_ts) AS first_ts
           FROM (SELECT * FROM ends
                 UNION ALL
                 SELECT incident_id, u_stream, pos, pos, ts FROM lf_truth_calls)
           GROUP BY incident_id, u_stream"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_waste AS
           SELECT DISTINCT call_id FROM lf_truth_calls"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE lf_children AS
           SELECT e.parent_session_id, n.id AS parent_sid, e.u_stream,
                  min(e.ts) AS first_ts, count(*) AS n,
                  coalesce(sum(e.cost_usd), 0) AS usd,
                  coalesce(sum(e.cost_usd) FILTER (WHERE w.call_id IS NOT NULL), 0) AS waste
           FROM lf_events e LEFT JOIN lf_waste w USING (call_id)
           LEFT JOIN lf_names n ON n.name = e.parent_session_id
           WHERE e.parent_session_id IS NOT NULL GROUP BY ALL"""
    )


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
    con = store.con
    con.execute("CREATE OR REPLACE TEMP TABLE lf_labels (id VARCHAR, label VARCHAR)")
    con.executemany("INSERT INTO lf_labels VALUES (?, ?)", rows)
    con.execute(
        """INSERT INTO lf_truth SELECT id, detector, id FROM lf_labels
           JOIN incidents ON incident_id = id
           WHERE label = 'runaway' AND id NOT IN (SELECT incident_id FROM lf_truth)"""
    )
    con.execute(
        """INSERT INTO lf_truth_calls
           SELECT t.incident_id, e.* FROM lf_truth t
           JOIN incident_calls ic USING (incident_id) JOIN lf_events e USING (call_id)
           WHERE t.incident_id NOT IN (SELECT incident_id FROM lf_truth_calls)"""
    )
    legit = """SELECT id FROM lf_labels WHERE label = 'legitimate'
               UNION SELECT ic.incident_id FROM incident_calls ic
                     JOIN lf_labels l ON l.id = ic.call_id AND l.label = 'legitimate'"""
    con.execute(f"DELETE FROM lf_truth WHERE incident_id IN ({legit})")
    con.execute(f"DELETE FROM lf_truth_calls WHERE incident_id IN ({legit})")
    con.execute(
        """INSERT INTO lf_truth_calls
           SELECT 'label:' || k.stream_key, e.* FROM lf_events e
           JOIN lf_streams k ON k.sk = e.u_stream
           JOIN lf_labels l ON l.id = e.call_id AND l.label = 'runaway'
           WHERE e.call_id NOT IN (SELECT call_id FROM incident_calls)"""
    )
    con.execute(
        """INSERT INTO lf_truth SELECT DISTINCT incident_id, NULL, incident_id
           FROM lf_truth_calls WHERE incident_id LIKE 'label:%'"""
    )
