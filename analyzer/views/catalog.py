"""What the tool knows, as views: the detectors (``detectors``) and the guard policies
(``policies``), each a line or two on a terminal (what it is, then its parameters), or JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analyzer.detect.detectors import Detector
from analyzer.guards.policy import Policy
from analyzer.views.view import How, View


class Listing(View):
    """Things the tool knows: for each, its lines on a terminal and its JSON."""

    def __init__(
        self,
        name: str,
        items: list[Any],
        lines: Callable[[Any], list[str]],
        record: Callable[[Any], Any],
    ) -> None:
        self.name, self.items, self.lines, self.record = name, items, lines, record

    def text(self, how: How) -> str:
        return "".join(line + "\n" for item in self.items for line in self.lines(item))

    def json(self) -> list[Any]:
        return [self.record(item) for item in self.items]


def _params(params: dict[str, Any]) -> str:
    return "    " + ", ".join(f"{k}={v}" for k, v in params.items())


def _detector_lines(d: Detector) -> list[str]:
    return [f"{d.name}  [{d.severity}]  {d.title}", *([_params(d.params)] if d.params else [])]


def _detector_record(d: Detector) -> dict[str, Any]:
    return {
        "name": d.name,
        "severity": d.severity,
        "title": d.title,
        "params": d.params,
        "description": d.reasoning,
        "path": str(d.path),
    }


def detectors_view(detectors: list[Detector]) -> Listing:
    """The detectors: name, severity and title, then their parameters (if any)."""
    return Listing("detectors", detectors, _detector_lines, _detector_record)


def _policy_lines(p: Policy) -> list[str]:
    params = {k: v for k, v in p.params().items() if k not in ("type", "scope")}
    return [f"{p.name}  [{p.type}, per {p.scope}]  {p.description}", _params(params)]


def policies_view(policies: list[Policy]) -> Listing:
    """The guard policies: name, type, scope and description, then their parameters."""
    return Listing("policies", policies, _policy_lines, Policy.to_json)
