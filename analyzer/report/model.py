"""The report's content as small typed objects: what ``analyzer.report.build`` computes from the
store and the templates in ``reports/`` lay out (no SQL in templates). Money from the store is an
exact ``Decimal`` up to the printed text (the guards' figures are the replay's, rounded to 10
places)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

from analyzer.detect.reconcile import BillRow, BillTotals, Totals, Unit
from analyzer.model.records import JsonForm, json_record
from analyzer.views.view import View

# -- the context ---------------------------------------------------------------------------


@dataclass
class Headline:
    period_start: str | None
    period_end: str | None
    days: float
    calls: int
    total_usd: Decimal
    wasted_usd: Decimal
    wasted_share: float
    incidents: int
    incidents_by_severity: dict[str, int]
    calls_by_cost_basis: dict[str, int]
    usd_by_cost_basis: dict[str, Decimal]
    unpriced_calls: int
    calls_without_time: int = 0
    unpriced_models: dict[str, int] = field(default_factory=dict)
    sessions: int = 0
    checked: list[tuple[str, str]] = field(default_factory=list)  # detectors run: name, title
    # What placeholder output counts do to the totals (a sentence; "" when no call has one),
    # and the same figures for the JSON.
    placeholder_note: str = ""
    placeholder_output: dict[str, Any] | None = None


@dataclass
class Breakdown:
    name: str
    calls: int
    usd: Decimal
    wasted_usd: Decimal  # of the incidents attributed to it (``Incident.app`` and so on)
    incidents: int


@dataclass
class ProjectSpend:
    """A project's line of the page's spend by project (``usage project``'s figures), or the
    rest summed in one line (``name`` None, ``count`` the projects it sums)."""

    name: str | None  # the full name (in the cell's title), as ``usage project`` keys it
    short: str  # as a person tells it apart (``analyzer.model.projects.short_names``)
    count: int
    calls: int
    tokens: int
    usd: Decimal
    wasted_usd: Decimal  # of the incidents attributed to it
    incidents: int
    share: float  # of the total spend


@dataclass
class SessionSpend:
    """A session's line of the page's spend by session (``usage session``'s figures), or the
    rest summed in one line (``session_id`` None, ``count`` the sessions it sums)."""

    session_id: str | None
    project: str | None  # the full name (in the cell's title)
    project_short: str
    count: int
    first_ts: str | None
    last_ts: str | None
    duration: str  # from the first call to the last, in words ("1 h 05 min"), or ""
    calls: int
    tokens: int
    usd: Decimal
    wasted_usd: Decimal  # of the incidents found in it
    incidents: int
    models: list[str]
    share: float  # of the total spend


@dataclass
class Spend:
    """Spend by project and by session, the first question of a lead with a surprising bill:
    the top ``shown`` of each, most dollars first, the rest summed in one line."""

    projects: list[ProjectSpend]
    projects_total: int
    sessions: list[SessionSpend]
    sessions_total: int
    total_usd: Decimal


@dataclass
class IncidentRow:
    rank: int
    incident_id: str
    detector: str
    severity: str
    start_ts: str | None
    end_ts: str | None
    stream_key: str | None
    session_id: str | None
    n_calls: int
    wasted_usd: Decimal
    cost_basis: str | None
    summary: str
    first_call_id: str | None
    last_call_id: str | None
    first_provider_id: str | None = None
    last_provider_id: str | None = None
    title: str = ""  # the detector's plain title ("Same context re-sent, near-empty answers")
    where: str = ""  # app · API key · model, as the CLI shows it (``Incident.place``)
    run: str = ""  # how its run ended, in its log's words (``Verdict.describe``), if said

    @property
    def anchor(self) -> str:
        """The section's id in the page: the number ``show N`` takes, the same on every run."""
        return f"incident-{self.rank}"


@dataclass
class CallRow:
    ts: str | None
    call_id: str
    provider_id: str | None  # the id to look up in the provider's dashboard (generation id)
    prompt_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    response_kind: str | None
    cost_usd: Decimal | None
    cost_basis: str | None = None
    http_status: int | None = None
    event_count: int | None = None
    content_chars: int | None = None


@dataclass
class IncidentSection:
    # In JSON: the evidence as a mapping of label to value; the chart is the page's alone.
    JSON_FORM: ClassVar[JsonForm] = JsonForm(omit=("chart_svg",), convert={"evidence": dict})

    incident: IncidentRow
    calls: list[CallRow]
    calls_omitted: int
    evidence: list[tuple[str, str]]  # (label in words, value as shown)
    chart_svg: str = ""
    chart_label: str = ""  # what the chart shows, for its aria-label
    bases: str = ""  # the cost bases of its calls when they are not all the incident's own


@dataclass
class RunRow:
    """A run whose log says it ended other than as it should (or says nothing)."""

    session_id: str
    agent: str | None
    outcome: str | None
    exit_status: str | None
    calls: int
    stated_usd: Decimal | None
    said: str  # the verdict in words


@dataclass
class Runs:
    """How the runs ended, by their own logs' verdicts."""

    total: int
    by_outcome: dict[str, int]  # "none": no verdict written
    not_completed: list[RunRow]  # the first of them (``shown``), in stream order
    not_completed_total: int


@dataclass
class SourceRow:
    path: str
    format: str
    bytes: int
    rows_read: int
    rows_loaded: int
    rows_rejected: int
    rows_duplicate: int
    rows_skipped: int


@dataclass
class RejectRow:
    path: str
    line: int | None
    reason: str
    excerpt: str | None


@dataclass
class GuardRow:
    policy: str
    description: str
    kind: str
    stop: float
    incidents_stopped: int
    incidents_total: int
    waste_prevented_usd: Decimal
    waste_missed_usd: Decimal
    false_trips: int
    harm_usd: Decimal
    net_usd: Decimal
    median_latency_events: float | None
    nudges: int
    blind: str  # "blind on N of M calls", or ""
    per_session: str = ""  # "counted per session on ...": the calls had no turns, or ""


@dataclass
class IncidentGuards:
    rank: int
    detector: str
    wasted_usd: Decimal
    # (policy, latency in its events, waste prevented), as ``GuardRun.stops`` orders them
    stopped_by: list[tuple[str, int, Decimal]]


@dataclass
class Guards:
    rows: list[GuardRow]
    incidents: list[IncidentGuards]
    # Every threshold replayed (the sweep and the policy's own): stop, prevented, false, harm $
    sweep: dict[str, list[tuple[float, float, int, float]]]
    # The (policy, stop) ``backtest --recommend`` names with its default budget (no false
    # trip), by its rule (``analyzer.guards.recommend.best``), if any.
    recommended: tuple[str, float] | None = None
    recommended_net_usd: Decimal | None = None  # what the recommended guard saves, net of harm
    # Why no guard is recommended, when there was waste to stop (a clause; "" otherwise).
    no_saving: str = ""

    @property
    def any_waste(self) -> bool:
        """Whether any guard had an incident with waste to stop (else the page says so in a
        sentence instead of a table of zeros)."""
        return any(r.incidents_total for r in self.rows)

    @property
    def false_trips(self) -> list[tuple[str, int]]:
        return [(r.policy, r.false_trips) for r in self.rows if r.false_trips]


@dataclass
class BucketBill:
    """A row of ``usage bills`` as the page lays it out: its bucket, provider and model as
    words, and the row itself."""

    bucket: str
    provider: str
    model: str
    row: BillRow


@dataclass
class BucketUnit:
    """A unit of ``usage reconcile`` (a bill against the logs) as the page lays it out."""

    bucket: str
    provider: str
    model: str
    unit: Unit


@dataclass
class BucketBills:
    """The providers' bills per time bucket and how much of them the logs explain: the very
    objects ``usage bills``, ``usage reconcile`` and the audit summary show
    (``analyzer.detect.reconcile``), the first ``shown`` of each list; the totals are of them
    all."""

    bills: list[BucketBill]
    bills_total: int
    bill_totals: BillTotals
    units: list[BucketUnit]
    units_total: int
    totals: Totals
    explained: str  # the totals in one sentence, as ``usage reconcile`` says it
    remainder: list[str]  # one sentence per bucket the logs do not explain (the first shown)
    remainder_total: int

    def to_json(self) -> dict[str, Any]:
        """As ``usage bills --json`` and ``usage reconcile --json`` write them."""
        return {
            "rows": [b.row.to_json() for b in self.bills],
            "rows_total": self.bills_total,
            "units": [u.unit.to_json() for u in self.units],
            "units_total": self.units_total,
            "totals": self.totals.to_json(),
        }


@dataclass
class Report(View):
    """The page: a composition of views (the headline, breakdowns, incidents and their
    sections, runs, bills, guards) and charts, laid out by ``reports/report.*``."""

    name = "report"
    template = "report"  # reports/report.html.j2, report.md.j2, report.css
    JSON_FORM: ClassVar[JsonForm] = JsonForm(
        omit=("charts",), unless_none=("guards", "runs", "bucket_bills", "spend")
    )

    title: str
    version: str
    headline: Headline
    days: list[tuple[str, Decimal, Decimal]]  # (date, spend, wasted)
    by_detector: list[Breakdown]
    by_model: list[Breakdown]
    by_app: list[Breakdown]
    by_key: list[Breakdown]
    incidents: list[IncidentRow]
    sections: list[IncidentSection]
    sources: list[SourceRow]
    rejects: list[RejectRow]
    rejects_total: int
    reconciliation: dict[str, int] | None
    guards: Guards | None = None  # the backtest's results; without them the section is absent
    runs: Runs | None = None  # how runs ended, where logs say (else the section is absent)
    spend: Spend | None = None  # spend by project and by session (absent with no call)
    # spend and waste by label and value (calls.labels; empty where no call has labels)
    by_label: list[Breakdown] = field(default_factory=list)
    # The providers' bills per bucket against the logs, when a usage or cost report is loaded.
    bucket_bills: BucketBills | None = None
    charts: dict[str, str] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        return self.to_json()

    def to_json(self) -> dict[str, Any]:
        """The page's data (``-o report.json``): its views, with neither charts nor the
        sections it has none of; the bills per bucket as ``usage`` writes them."""
        return json_record(self)
