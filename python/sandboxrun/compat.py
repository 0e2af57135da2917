"""The original design's names, on top of :class:`sandboxrun.Sandbox` (the migration path).

The first version of this project was a Python application built around ``SandboxExecutor``,
``SecurityAssessor`` and ``SafetyCoordinator`` driving Docker. Code written against those names
keeps working here; new code should use :class:`sandboxrun.Sandbox` directly.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional

from . import Assessment, BlockedError, Finding, RunResult, Sandbox, _verdict_summary

__all__ = ["SecurityLevel", "SecurityReport", "SecurityAssessor", "SandboxExecutor", "SafetyCoordinator"]


class SecurityLevel(enum.Enum):
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"
    BLOCKED = "BLOCKED"


@dataclass
class SecurityReport:
    level: SecurityLevel
    score: int
    findings: List[Finding] = field(default_factory=list)

    @property
    def is_safe(self) -> bool:
        return self.level is not SecurityLevel.BLOCKED


class SecurityAssessor:
    def __init__(self, sandbox: Optional[Sandbox] = None):
        self.sandbox = sandbox or Sandbox()

    def assess(self, code: str) -> SecurityReport:
        a: Assessment = self.sandbox.assess(code)
        return SecurityReport(SecurityLevel(a.level), a.score, a.findings)


class SandboxExecutor:
    def __init__(self, sandbox: Optional[Sandbox] = None, trust_level: Optional[str] = None):
        self.sandbox = sandbox or Sandbox()
        self.trust_level = trust_level

    def execute(self, code: str, *, timeout: Optional[float] = None, files: Optional[Mapping[str, Any]] = None,
                stdin: Optional[bytes] = None, **kwargs: Any) -> RunResult:
        return self.sandbox.run(code, trust=self.trust_level, timeout=timeout, files=files, stdin=stdin, **kwargs)


class SafetyCoordinator:
    """Assess, then run: BLOCKED code runs only with an explanation, which is audited. The
    override policy of security.yaml judges the explanation (and who may give one): a refused
    one raises :class:`sandboxrun.OverrideRefusedError`."""

    def __init__(self, sandbox: Optional[Sandbox] = None, trust_level: Optional[str] = None):
        self.sandbox = sandbox or Sandbox()
        self.assessor = SecurityAssessor(self.sandbox)
        self.executor = SandboxExecutor(self.sandbox, trust_level)

    def execute_safely(self, code: str, *, override_explanation: Optional[str] = None, **kwargs: Any) -> RunResult:
        a = self.sandbox.assess(code)
        if a.level == SecurityLevel.BLOCKED.value and override_explanation is None:
            raise BlockedError(f"blocked by the assessor: {_verdict_summary(a)}; pass override_explanation= to run "
                               "it anyway (audited)")
        return self.executor.execute(code, override=override_explanation, **kwargs)
