"""What the tool knows, as views: the detectors (``detectors``) and the guard policies
(``policies``), a line or two each on a terminal, or JSON."""

from __future__ import annotations

from typing import Any

from analyzer.detect.detectors import Detector
from analyzer.guards.policy import Policy
from analyzer.views.view import How, View


class DetectorsView(View):
    """The detectors: name, severity and title, then their parameters."""

    name = "detectors"

    def __init__(self, detectors: list[Detector]) -> None:
        self.detectors = detectors

    def text(self, how: How) -> str:
        lines = []
        for d in self.detectors:
            lines.append(f"{d.name}  [{d.severity}]  {d.title}")
            if d.params:
                lines.append("    " + ", ".join(f"{k}={v}" for k, v in d.params.items()))
        return "".join(line + "\n" for line in lines)

    def json(self) -> list[dict[str, Any]]:
        return [
            {
                "name": d.name,
                "severity": d.severity,
                "title": d.title,
                "params": d.params,
                "description": d.reasoning,
                "path": str(d.path),
            }
            for d in self.detectors
        ]


class PoliciesView(View):
    """The guard policies: name, type, scope and description, then their parameters."""

    name = "policies"

    def __init__(self, policies: list[Policy]) -> None:
        self.policies = policies

    def text(self, how: How) -> str:
        lines = []
        for p in self.policies:
            lines.append(f"{p.name}  [{p.type}, per {p.scope}]  {p.description}")
            params = p.params().items()
            lines.append(
                "    " + ", ".join(f"{k}={v}" for k, v in params if k not in ("type", "scope"))
            )
        return "".join(line + "\n" for line in lines)

    def json(self) -> list[dict[str, Any]]:
        return [p.to_json() for p in self.policies]
