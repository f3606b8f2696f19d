"""``usage``: tokens, calls and dollars by day, week, month, session, project or model, and the
providers' bills per bucket. The command a user runs most, so it imports only what it shows
(no detectors, formats or pyarrow on a warm store)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import click

from analyzer.cli.options import (
    View,
    chatter_options,
    db_option,
    emit,
    json_option,
    keep_cache_option,
    output_choice,
    refresh_option,
    view_options,
)
from analyzer.cli.reading import reading
from analyzer.engine.store import Store
from analyzer.model.formatting import money
from analyzer.views.bill_views import BILL_VIEWS
from analyzer.views.usage import ORDERS, PERIODS, VIEWS


def usage_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``usage`` and of ``daily``, ``weekly``, ``monthly``, ``session``."""
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        db_option(),
        refresh_option,
        view_options,
        keep_cache_option,
        click.option("--breakdown", is_flag=True, help="Each row's models below it."),
        click.option(
            "--order",
            type=click.Choice(ORDERS),
            default=None,
            help="The rows' order: most dollars first (cost), latest activity first "
            "(recent), oldest first (time). Default: time for daily, weekly and "
            "monthly; cost for session, project and model - ccusage lists sessions "
            "most expensive first, and the session to look at is the one that cost most.",
        ),
        click.option(
            "--sub-agents",
            "sub_agents",
            is_flag=True,
            help="session: each sub-agent a row of its own, under the session that "
            "started it. Default: its calls count in that session's row (as ccusage "
            "counts them); a fork (Codex) is always a session of its own.",
        ),
        click.option(
            "--by",
            metavar="LABEL",
            default=None,
            help="Each row broken down by one label of its calls, as a log states it: an "
            "OpenTelemetry resource attribute (team.id, department, cost_center, "
            "service.name, whatever OTEL_RESOURCE_ATTRIBUTES set), a record's user.email, "
            "user.id or organization.id, a trace platform's user or tags. Calls without it "
            "count under LABEL=(none); a label no call has is an error naming the ones "
            "there are.",
        ),
        click.option("--csv", "as_csv", is_flag=True, help="Print CSV on stdout."),
        chatter_options,
        json_option,
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.command("usage")
@click.argument(
    "view_name",
    metavar="VIEW",
    type=click.Choice((*VIEWS, "blocks", *BILL_VIEWS)),
)
@usage_options
def usage_command(view_name: str, **options: Any) -> None:
    """Tokens, calls and dollars by day, week, month, session, project or model; and the
    providers' bills per time bucket (bills), against the logs (reconcile).

    Tokens: input (fresh prompt), cache write, cache read, output (reasoning included) and
    reasoning; dollars by cost basis (billed, reported by the log, estimated from list
    prices), and the calls left unpriced; each row's models. A project is the Claude Code
    project folder, the Codex working directory or the OpenRouter app, shortened to what
    tells the projects apart (--json has the whole name). Days and weeks (from Monday) are
    counted in --tz. `llm-forensics daily` is `usage daily` (weekly, monthly, session too).

    bills: what Anthropic's usage and cost reports and OpenAI's usage and costs say per
    bucket (a day, an hour) and model: tokens, requests, dollars billed, and the tokens at
    list prices. They are not calls: the other views never count them. reconcile: per bucket
    and model, the bill against the logged calls of that provider and model in the bucket,
    and the dollars no log explains, named. Buckets are in UTC, as the providers bill them.

    blocks: ccusage's 5-hour billing blocks (as `llm-forensics blocks`, which has their
    options: --token-limit, --active, --recent).

    \b
    Examples:
      llm-forensics usage daily --breakdown
      llm-forensics usage session --since 7d --json
      llm-forensics usage reconcile
      llm-forensics usage monthly --by team.id
    """
    _usage_view(view_name, **options)


def _usage_view(
    view_name: str,
    db: str | None,
    view: View,
    breakdown: bool,
    order: str | None,
    sub_agents: bool,
    by: str | None,
    as_csv: bool,
    as_json: bool,
) -> None:
    from analyzer.views.terminal import UsageView
    from analyzer.views.usage import usage

    fmt = output_choice(as_json, as_csv)
    if view_name == "blocks":  # the 5-hour blocks: `blocks` has their own options
        from analyzer.cli.blocks_command import show_blocks

        show_blocks(db, view, fmt)
        return
    if view_name in BILL_VIEWS:
        _bill_view(view_name, db, view, fmt)
        return
    with reading(db, view, content=False) as store:
        u = usage(
            store,
            view_name,
            view.tz,
            breakdown,
            order=order,
            sub_agents=sub_agents,
            models=fmt != "text",
            by=by,
        )
        bucketed = _bucketed_note(store) if view_name in PERIODS else ""
    before = [view.window.describe(view.tz)] if view.window else []
    emit(UsageView(u, before, [bucketed] if bucketed else []), fmt)


_WHAT = {
    "daily": "day",
    "weekly": "week (from Monday)",
    "monthly": "month",
    "session": "session (its sub-agents' calls in it; the latest call's time beside it)",
}


def _top_level(name: str) -> click.Command:
    """``llm-forensics NAME``: ``usage NAME`` under ccusage's name for it."""

    def command(**options: Any) -> None:
        _usage_view(name, **options)

    command.__doc__ = f"""Tokens, calls, dollars and models by {_WHAT[name]}: `usage {name}`.

    The command a ccusage user knows by this name, with the same options as `usage
    {name}`; --json has ccusage's fields (`{name}` rows and `totals`) and ours beside
    them. See `llm-forensics usage --help`.

    \b
    Examples:
      llm-forensics {name}
      llm-forensics {name} --since 7d --json
    """
    return click.command(name)(usage_options(command))


daily_command = _top_level("daily")
weekly_command = _top_level("weekly")
monthly_command = _top_level("monthly")
session_command = _top_level("session")


def _bucketed_note(store: Store) -> str:
    """The line under a period view when the store holds bills per bucket (not in it)."""
    from analyzer.detect.reconcile import bills

    rows = bills(store)
    if not rows:
        return ""
    billed = sum((r.billed_usd or r.estimate_usd or Decimal(0) for r in rows), Decimal(0))
    return (
        f"Not in this table: {money(billed)} of provider bills per bucket ({len(rows):,} "
        "buckets): `usage bills`, and `usage reconcile` against the logs"
    )


def _bill_view(name: str, db: str | None, view: View, fmt: str) -> None:
    from analyzer.detect.reconcile import bills, totals, units
    from analyzer.views.bill_views import BillsView, ReconcileView

    with reading(db, view, content=False) as store:
        if name == "bills":
            shown: BillsView | ReconcileView = BillsView(bills(store))
        else:
            found = units(store)
            shown = ReconcileView(found, totals(found))
    emit(shown, fmt)
