"""``blocks`` (and ``usage blocks``): ccusage's 5-hour billing blocks over the store's calls."""

from __future__ import annotations

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


class TokenLimit(click.ParamType[str]):
    """``--token-limit``: a whole number of tokens above 0, or ``max``."""

    name = "tokens"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip().replace(",", "").replace("_", "")
        if text == "max" or (text.isdigit() and int(text) > 0):
            return text
        self.fail(f"{value!r} is not a number of tokens above 0, nor max", param, ctx)


@click.command("blocks")
@db_option()
@refresh_option
@view_options
@keep_cache_option
@click.option(
    "--token-limit",
    "-t",
    type=TokenLimit(),
    default=None,
    metavar="N|max",
    help="Hold the active block's projection to this many tokens (max: the most a past block "
    "used): a % column, and a warning when the projection passes 80% of it.",
)
@click.option("--active", "-a", is_flag=True, help="Only the active block, with its projection.")
@click.option(
    "--recent", "-r", is_flag=True, help="Only the blocks of the last 3 days (and the active)."
)
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV on stdout.")
@chatter_options
@json_option
def blocks_command(
    db: str | None,
    view: View,
    token_limit: str | None,
    active: bool,
    recent: bool,
    as_csv: bool,
    as_json: bool,
) -> None:
    """Usage in ccusage's 5-hour billing blocks: each block's start, length (or, for the
    active one, the minutes left), models, calls, tokens and dollars; for the active block its
    burn rate and where it will end if the rate holds. A block starts at its first call's hour
    (UTC) and lasts 5 hours; a call after its end, or 5 hours after the call before, starts
    the next. --json writes ccusage's `blocks --json` (gaps included), with the store's
    figures added.

    \b
    Examples:
      llm-forensics blocks --recent
      llm-forensics blocks --active --token-limit max
      llm-forensics blocks --since 7d --json
    """
    show_blocks(db, view, output_choice(as_json, as_csv), token_limit, recent, active)


def show_blocks(
    db: str | None,
    view: View,
    fmt: str,
    token_limit: str | None = None,
    recent: bool = False,
    active: bool = False,
) -> None:
    """The blocks of the store at ``db`` in ``fmt`` (``blocks`` and ``usage blocks``)."""
    from analyzer.views.blocks import BlocksView, blocks

    with reading(db, view, content=False) as store:
        shown = blocks(store, token_limit=token_limit, recent=recent, active_only=active)
    before = [view.window.describe(view.tz)] if view.window else []
    emit(BlocksView(shown, before), fmt, view.tz)
