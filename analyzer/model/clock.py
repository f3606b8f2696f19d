"""Now, as the views that depend on it read it: the clock's, or ``$LLM_FORENSICS_NOW``.

``$LLM_FORENSICS_NOW`` (an ISO time, UTC unless it names a zone) sets "now" for the commands
whose answer depends on it (``blocks``' active block, the status line's today), so that a test
or an example gives the same answer any day.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from analyzer.errors import ForensicsError

NOW_ENV = "LLM_FORENSICS_NOW"


def now() -> datetime:
    """Now, naive UTC: ``$LLM_FORENSICS_NOW`` if set (an ISO time), else the clock."""
    given = os.environ.get(NOW_ENV, "").strip()
    if not given:
        return datetime.now(UTC).replace(tzinfo=None)
    try:
        when = datetime.fromisoformat(given.replace("Z", "+00:00"))
    except ValueError:
        raise ForensicsError(f"${NOW_ENV}: {given!r} is not an ISO time") from None
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when
