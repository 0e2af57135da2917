"""Python API for sandboxrun: a thin caller of the ``sandboxrun`` command's JSON contract.

    from sandboxrun import Sandbox
    r = Sandbox().run("print(open('data.csv').read())", files={"data.csv": b"a,b\\n1,2\\n"})
    r.stdout, r.exit_code, r.outputs        # outputs: {relative path: bytes}

Standard library only. Every run goes through the real binary, so the isolation, the
assessment and the audit log are exactly those of ``sandboxrun run``.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

__all__ = [
    "Sandbox", "RunResult", "Assessment", "Finding", "FileRecord", "AuditReport",
    "SandboxError", "SetupError", "BlockedError", "OverrideRefusedError", "UsageError", "DeadlineError",
    "Session", "CellResult", "CellError",
]

# Exit statuses of `sandboxrun run` that belong to sandboxrun, not to the program (README).
EXIT_USAGE = 2
EXIT_SETUP = 125
EXIT_BLOCKED = 126


class SandboxError(Exception):
    """Base class; ``result`` holds the parsed JSON result when there was one."""

    def __init__(self, message: str, result: Optional["RunResult"] = None):
        super().__init__(message)
        self.result = result


class SetupError(SandboxError):
    """The sandbox could not be set up (exit 125): config, image, inputs over a cap ..."""


class BlockedError(SandboxError):
    """The assessor blocked the code (exit 126); ``result.assessment`` says why."""


class OverrideRefusedError(BlockedError):
    """The code was blocked and ``override=`` was refused by the override policy of
    security.yaml (exit 126): a reason too short or saying nothing, or a caller who may not
    override. The message says why and what is required; nothing ran."""


class UsageError(SandboxError):
    """The request itself was wrong (exit 2): a bad option, label, run id ..."""


class DeadlineError(SandboxError):
    """The whole call took longer than ``deadline=``: the launcher was stopped (its sandbox ends
    with it and the audit log records the end); ``result`` holds what it reported, if anything."""


@dataclass
class Finding:
    rule: str
    severity: str
    line: int
    message: str


@dataclass
class Assessment:
    level: str  # LOW | MEDIUM | HIGH | BLOCKED
    score: int
    findings: List[Finding] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Assessment":
        return cls(level=j.get("level", ""), score=int(j.get("score", 0)),
                   findings=[Finding(f.get("rule", ""), f.get("severity", ""), int(f.get("line", 0)),
                                     f.get("message", "")) for f in j.get("findings", [])],
                   notes=list(j.get("notes", [])))


@dataclass
class FileRecord:
    path: str
    size: int
    sha256: str
    mode: int

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "FileRecord":
        return cls(j["path"], int(j["size"]), j["sha256"], int(j["mode"]))


@dataclass
class RunResult:
    """The ``--json`` result of one run (README: the contract), with the collected files."""

    run_id: str
    status: str  # exited | signaled | timeout | oom | blocked | error
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_ms: int = 0
    resources: Dict[str, Any] = field(default_factory=dict)
    limits: Optional[Dict[str, Any]] = None
    trust: Optional[str] = None
    assessment: Optional[Assessment] = None
    inputs: List[FileRecord] = field(default_factory=list)
    output_manifest: List[FileRecord] = field(default_factory=list)
    outputs: Dict[str, bytes] = field(default_factory=dict)  # relative path -> bytes
    outputs_truncated: bool = False
    outputs_skipped: List[Dict[str, str]] = field(default_factory=list)
    caller: Optional[str] = None
    labels: Dict[str, str] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    error: Optional[str] = None
    # With error: usage | config | image | limits | audit | deps | host | interrupted | other (README).
    error_kind: Optional[str] = None
    audit_seq: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict)  # the whole JSON object

    @property
    def stdout_bytes(self) -> bytes:
        """The program's standard output exactly (``stdout`` is text: bytes that are not UTF-8
        read as U+FFFD there)."""
        return _stream_bytes(self.raw, "stdout", self.stdout)

    @property
    def stderr_bytes(self) -> bytes:
        return _stream_bytes(self.raw, "stderr", self.stderr)

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "RunResult":
        return cls(
            run_id=j.get("run_id", ""), status=j.get("status", "error"), exit_code=int(j.get("exit_code", EXIT_SETUP)),
            stdout=j.get("stdout", ""), stderr=j.get("stderr", ""),
            stdout_truncated=bool(j.get("stdout_truncated", False)),
            stderr_truncated=bool(j.get("stderr_truncated", False)),
            duration_ms=int(j.get("duration_ms", 0)), resources=dict(j.get("resources") or {}),
            limits=j.get("limits"), trust=j.get("trust"),
            assessment=Assessment.from_json(j["assessment"]) if j.get("assessment") else None,
            inputs=[FileRecord.from_json(f) for f in j.get("inputs", [])],
            output_manifest=[FileRecord.from_json(f) for f in j.get("outputs", [])],
            outputs_truncated=bool(j.get("outputs_truncated", False)),
            outputs_skipped=list(j.get("outputs_skipped", [])),
            caller=j.get("caller"), labels=dict(j.get("labels") or {}), warnings=list(j.get("warnings", [])),
            error=j.get("error"), error_kind=j.get("error_kind"), audit_seq=j.get("audit_seq"), raw=dict(j))


@dataclass
class AuditReport:
    ok: bool
    records: int
    raw: Dict[str, Any]


FileSource = Union[bytes, str, os.PathLike]


def _stream_bytes(raw: Mapping[str, Any], name: str, text: str) -> bytes:
    b64 = raw.get(name + "_base64")
    return base64.b64decode(b64) if b64 is not None else text.encode()


def _verdict_summary(a: "Assessment", most: int = 3) -> str:
    """'BLOCKED (score 100): line 1: SR-INTENT-072 does not compile ...; ...' for messages."""
    worst = sorted(a.findings, key=lambda f: -_SEVERITY_ORDER.get(f.severity, 0))[:most]
    parts = [f"line {f.line}: {f.rule} {f.message}" for f in worst]
    more = len(a.findings) - len(worst)
    return f"{a.level} (score {a.score})" + (": " + "; ".join(parts) if parts else "") + (
        f"; {more} more finding(s)" if more > 0 else "")


_SEVERITY_ORDER = {"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}


def _plain_relative(name: str) -> bool:
    p = PurePosixPath(name)
    return bool(name) and not p.is_absolute() and all(part not in ("", ".", "..") for part in name.split("/"))


def _installed_binary() -> Optional[str]:
    """The binary of the installation this package belongs to: installed by the .deb or
    ``cmake --install`` as P/lib/python3/dist-packages/sandboxrun, the command is P/bin/sandboxrun.
    None for a package used from the checkout or installed by pip."""
    up = Path(__file__).resolve().parent.parents  # dist-packages, python3, lib, P, ...
    if len(up) < 4 or (up[0].name, up[1].name, up[2].name) != ("dist-packages", "python3", "lib"):
        return None
    candidate = up[3] / "bin" / "sandboxrun"
    return str(candidate) if os.access(candidate, os.X_OK) else None


class Sandbox:
    """One configuration of sandboxrun. ``config``: sandbox.yaml or its directory (default: the
    binary's own search order); ``binary``: the sandboxrun executable (default: $SANDBOXRUN_BIN,
    then the binary installed with this package (P/bin/sandboxrun beside
    P/lib/python3/dist-packages), then ``sandboxrun`` on PATH); ``audit_log``: overrides the log
    audit.yaml names."""

    def __init__(self, config: Optional[FileSource] = None, binary: Optional[FileSource] = None,
                 audit_log: Optional[FileSource] = None):
        found = binary or os.environ.get("SANDBOXRUN_BIN") or _installed_binary() or shutil.which("sandboxrun")
        if not found:
            raise SetupError("sandboxrun binary not found: pass binary=, set SANDBOXRUN_BIN or put it on PATH")
        self.binary = os.fspath(found)
        self.config = os.fspath(config) if config is not None else None
        self.audit_log = os.fspath(audit_log) if audit_log is not None else None

    def _common(self) -> List[str]:
        args: List[str] = []
        if self.config:
            args += ["--config", self.config]
        if self.audit_log:
            args += ["--audit-log", self.audit_log]
        return args

    def run(self, code: Union[str, bytes], *, trust: Optional[str] = None,
            files: Optional[Mapping[str, FileSource]] = None, stdin: Optional[Union[str, bytes]] = None,
            args: Sequence[str] = (), timeout: Optional[float] = None, memory: Optional[str] = None,
            cpus: Optional[float] = None, pids: Optional[int] = None, override: Optional[str] = None,
            caller: Optional[str] = None, labels: Optional[Mapping[str, str]] = None,
            run_id: Optional[str] = None, name: str = "main.py", image: Optional[str] = None,
            requirements: Optional[Union[str, Sequence[str]]] = None,
            env: Optional[Mapping[str, str]] = None, deadline: Optional[float] = None) -> RunResult:
        """Runs ``code`` with ``files`` copied into /work (bytes, or a path on this host) and
        returns the result with every file the program created or changed under /work in
        ``outputs``. ``image`` names an image (``science``), a rootfs directory or an OCI
        layout; ``requirements`` (pip requirement lines, as one text or a list) are installed
        first in a separate, cached phase; ``env`` is set in the program's environment (the
        audit log records the names only). ``deadline`` bounds the whole call in seconds (set-up,
        dependency phase and run, where ``timeout`` bounds the program alone): past it the
        launcher gets SIGTERM (it kills the sandbox and records the end), SIGKILL 10 s later, and
        DeadlineError is raised. Raises BlockedError, SetupError, UsageError or DeadlineError; a
        program that fails is not an error (see ``exit_code`` and ``status``)."""
        if not _plain_relative(name) or "/" in name:
            raise UsageError(f"name: {name!r} is not a plain file name (no '/', '.' or '..')")
        with tempfile.TemporaryDirectory(prefix="sandboxrun-py-") as tmp:
            base = Path(tmp)
            script = base / "job" / name
            script.parent.mkdir()
            script.write_bytes(code.encode() if isinstance(code, str) else code)
            out_dir = base / "out"
            cmd = [self.binary, "run", "--json", *self._common(), "--output", str(out_dir)]
            for rel, src in (files or {}).items():
                # ':' separates SRC from NAME on the command line, so a name may not hold one.
                if not _plain_relative(rel) or ":" in rel:
                    raise UsageError(f"files: {rel!r} is not a plain relative path inside /work (no ':')")
                if isinstance(src, (bytes, bytearray)):
                    staged = base / "in" / rel
                    staged.parent.mkdir(parents=True, exist_ok=True)
                    staged.write_bytes(bytes(src))
                    src = staged
                cmd += ["--input", f"{os.fspath(src)}:{rel}"]
            if trust is not None:
                cmd += ["--trust", trust]
            if requirements is not None:
                req_file = base / "requirements.txt"
                text = requirements if isinstance(requirements, str) else "".join(f"{r}\n" for r in requirements)
                req_file.write_text(text)
                cmd += ["--requirements", str(req_file)]
            for opt, val in (("--timeout", timeout), ("--memory", memory), ("--cpus", cpus), ("--pids", pids),
                             ("--override", override), ("--caller", caller), ("--run-id", run_id),
                             ("--image", image)):
                if val is not None:
                    cmd += [opt, str(val)]
            for k, v in (labels or {}).items():
                cmd += ["--label", f"{k}={v}"]
            for k, v in (env or {}).items():
                cmd += ["--env", f"{k}={v}"]
            data = None
            if stdin is not None:
                cmd.append("--stdin")
                data = stdin.encode() if isinstance(stdin, str) else stdin
            cmd.append(str(script))
            if args:
                cmd += ["--", *[str(a) for a in args]]
            proc = self._launch(cmd, data, deadline)
            result = self._parse(proc)
            for rec in result.output_manifest:
                result.outputs[rec.path] = (out_dir / rec.path).read_bytes()
            return result

    @staticmethod
    def _launch(cmd: List[str], data: Optional[bytes], deadline: Optional[float]) -> "subprocess.CompletedProcess[bytes]":
        if deadline is not None and not deadline > 0:
            raise UsageError(f"deadline: {deadline!r} is not a positive number of seconds")
        with subprocess.Popen(cmd, stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
            try:
                out, err = p.communicate(data, timeout=deadline)
            except subprocess.TimeoutExpired:
                p.terminate()  # the launcher tears the sandbox down and records the end
                try:
                    out, err = p.communicate(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, err = p.communicate()
                raise DeadlineError(f"the run took longer than its deadline of {deadline} s and was stopped "
                                    f"(exit status {p.returncode})", Sandbox._result_of(out)) from None
        return subprocess.CompletedProcess(cmd, p.returncode, out, err)

    @staticmethod
    def _result_of(stdout: bytes) -> Optional[RunResult]:
        """The launcher's JSON result (its last line), or None when it printed none."""
        text = stdout.decode("utf-8", "replace").strip()
        try:
            return RunResult.from_json(json.loads(text.splitlines()[-1])) if text else None
        except (ValueError, KeyError, IndexError):
            return None

    @staticmethod
    def _parse(proc: "subprocess.CompletedProcess[bytes]") -> RunResult:
        err = proc.stderr.decode("utf-8", "replace").strip()
        result = Sandbox._result_of(proc.stdout)
        # The program's own exit status may be 2 or 125 too: only a run that did not run is an error.
        if result is None or result.status in ("error", "blocked"):
            why = (result.error if result and result.error else "") or err or f"exit status {proc.returncode}"
            code = result.exit_code if result else proc.returncode
            if result is not None and result.raw.get("override_refused"):
                raise OverrideRefusedError(f"blocked by the assessor and {why}", result)
            if code == EXIT_BLOCKED or (result and result.status == "blocked"):
                if result is not None and result.assessment is not None and not result.error:
                    why = _verdict_summary(result.assessment)
                raise BlockedError(f"blocked by the assessor: {why}", result)
            if code == EXIT_USAGE:
                raise UsageError(why, result)
            raise SetupError(why, result)
        return result

    def assess(self, code: Union[str, bytes]) -> Assessment:
        """The assessor's verdict on ``code`` (nothing runs)."""
        with tempfile.TemporaryDirectory(prefix="sandboxrun-py-") as tmp:
            f = Path(tmp) / "main.py"
            f.write_bytes(code.encode() if isinstance(code, str) else code)
            cmd = [self.binary, "assess", "--json"]
            if self.config:
                cfg = Path(self.config)
                cmd += ["--config-dir", str(cfg if cfg.is_dir() else cfg.parent)]
            cmd.append(str(f))
            proc = subprocess.run(cmd, capture_output=True, check=False, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise (UsageError if proc.returncode == EXIT_USAGE else SetupError)(
                    proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}")
            return Assessment.from_json(json.loads(proc.stdout.decode().splitlines()[0]))

    def session(self, *, trust: Optional[str] = None, image: Optional[str] = None, timeout: Optional[float] = None,
                memory: Optional[str] = None, cpus: Optional[float] = None, lifetime: Optional[float] = None,
                idle_timeout: Optional[float] = None, caller: Optional[str] = None,
                labels: Optional[Mapping[str, str]] = None, env: Optional[Mapping[str, str]] = None,
                svg_figures: bool = False) -> "Session":
        """Starts a session: one sandboxed interpreter whose cells keep their state (see
        sandboxrun.session). ``timeout`` bounds each cell; ``lifetime`` and ``idle_timeout`` the
        session (both may only shorten sandbox.yaml's ``sessions``); ``svg_figures``: figures come
        back as image/svg+xml as well as PNG. Raises SetupError or
        UsageError when it cannot start."""
        args = self._common()
        for opt, val in (("--trust", trust), ("--image", image), ("--timeout", timeout), ("--memory", memory),
                         ("--cpus", cpus), ("--lifetime", lifetime), ("--idle-timeout", idle_timeout),
                         ("--caller", caller)):
            if val is not None:
                args += [opt, str(val)]
        for k, v in (labels or {}).items():
            args += ["--label", f"{k}={v}"]
        for k, v in (env or {}).items():
            args += ["--env", f"{k}={v}"]
        if svg_figures:
            args.append("--svg-figures")
        return Session(self.binary, args)

    def audit_verify(self) -> AuditReport:
        """Checks the audit log's hash chain; ``ok`` is False when it was tampered with."""
        cmd = [self.binary, "audit", "verify", "--json"]
        if self.audit_log:
            cmd += ["--log", self.audit_log]
        elif self.config:
            cfg = Path(self.config)
            cmd += ["--config", str((cfg if cfg.is_dir() else cfg.parent) / "audit.yaml")]
        proc = subprocess.run(cmd, capture_output=True, check=False, stdin=subprocess.DEVNULL)
        try:
            raw = json.loads(proc.stdout.decode("utf-8", "replace"))
        except ValueError:
            raise SetupError(proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}")
        return AuditReport(ok=bool(raw.get("ok")) and proc.returncode == 0, records=int(raw.get("records", 0)), raw=raw)


from .session import CellError, CellResult, Session  # noqa: E402  (they use the types above)
