"""Sessions from Python: one sandboxed interpreter whose cells keep their state.

    with Sandbox().session(image="science") as s:
        s.run("import pandas as pd\\ndf = pd.DataFrame({'x': [1, 2]})")
        r = s.run("df.x.sum()")
        r.text                        # '3'
        s.upload("data.csv", b"a,b\\n1,2\\n")
        s.download("out.png")         # bytes

A session is kept by a holder process (``sandboxrun session start``) and each call is a
``sandboxrun session`` command, so the assessment of every cell, the audit records and the
isolation are exactly the command's (docs/sessions.md).
"""
from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:
    from . import Assessment

MimeBundle = Dict[str, str]


@dataclass
class CellError:
    """The exception a cell raised; the traceback's line numbers are the cell's ("<cell N>")."""

    ename: str
    evalue: str
    traceback: List[str] = field(default_factory=list)


@dataclass
class CellResult:
    """One cell (``sandboxrun session run --json``). status: ok, error (it raised: ``error``),
    timeout (interrupted; the session goes on), blocked (the verdict refused it; nothing ran) or
    lost (the session ended with it)."""

    status: str
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    result: Optional[MimeBundle] = None  # the trailing expression's MIME bundle
    display: List[MimeBundle] = field(default_factory=list)  # display() and figures, in order
    error: Optional[CellError] = None
    assessment: Optional["Assessment"] = None
    message: Optional[str] = None
    duration_ms: int = 0
    # The session's cgroup after the cell (cpu_ms the cell's own, peaks the session's); None with
    # monitoring off.
    resources: Optional[Dict[str, Any]] = None
    audit_seq: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> Optional[str]:
        """The trailing expression's text/plain (as a notebook shows ``Out[n]``), or None."""
        return self.result.get("text/plain") if self.result else None

    @property
    def images(self) -> List[bytes]:
        """The PNG images among the display items (matplotlib figures), decoded."""
        return [base64.b64decode(d["image/png"]) for d in self.display if "image/png" in d]

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "CellResult":
        from . import Assessment
        err = j.get("error")
        return cls(status=j["status"], stdout=j.get("stdout", ""), stderr=j.get("stderr", ""),
                   stdout_truncated=bool(j.get("stdout_truncated")), stderr_truncated=bool(j.get("stderr_truncated")),
                   result=j.get("result"), display=list(j.get("display", [])),
                   error=CellError(err["ename"], err["evalue"], list(err["traceback"])) if err else None,
                   assessment=Assessment.from_json(j["assessment"]) if j.get("assessment") else None,
                   message=j.get("message"), duration_ms=int(j.get("duration_ms", 0)),
                   resources=j.get("resources"),
                   audit_seq=j.get("audit_seq"), raw=dict(j))


class Session:
    """A started session; use ``Sandbox.session()``. A context manager: leaving it stops the
    session (so does ``close()``; the session's idle timeout ends a forgotten one)."""

    def __init__(self, binary: str, start_args: Sequence[str]):
        self._binary = binary
        out = self._call(["start", "--json", *start_args], what="start the session")
        self.info: Dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
        self.id: str = self.info["session_id"]
        self.closed = False

    def _call(self, args: Sequence[str], data: Optional[bytes] = None, what: str = "",
              ok: Sequence[int] = (0,)) -> bytes:
        from . import SetupError, UsageError, EXIT_USAGE
        proc = subprocess.run([self._binary, "session", *args], input=data, capture_output=True, check=False,
                              stdin=None if data is not None else subprocess.DEVNULL)
        if proc.returncode not in ok:
            why = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
            raise (UsageError if proc.returncode == EXIT_USAGE else SetupError)(f"cannot {what}: {why}")
        return proc.stdout

    def run(self, code: Union[str, bytes], *, stdin: Optional[Union[str, bytes]] = None,
            timeout: Optional[float] = None, override: Optional[str] = None) -> CellResult:
        """Runs ``code`` as the next cell and returns what it gave, whatever its status (a cell
        that raised, timed out or was blocked is a result, not an exception). Raises SetupError
        when the session cannot be reached (stopped, or its holder is gone)."""
        args = ["run", self.id, "-", "--json"]
        if timeout is not None:
            args += ["--timeout", str(timeout)]
        if override is not None:
            args += ["--override-reason", override]
        tmp = None
        if stdin is not None:
            import tempfile
            tmp = tempfile.NamedTemporaryFile(prefix="sandboxrun-stdin-")
            tmp.write(stdin.encode() if isinstance(stdin, str) else stdin)
            tmp.flush()
            args += ["--stdin", tmp.name]
        try:
            out = self._call(args, code.encode() if isinstance(code, str) else code, "run the cell",
                             ok=(0, 1, 124, 125, 126))
        finally:
            if tmp is not None:
                tmp.close()
        text = out.decode("utf-8", "replace").strip()
        if not text:
            from . import SetupError
            raise SetupError(f"session {self.id} gave no result for the cell")
        return CellResult.from_json(json.loads(text.splitlines()[-1]))

    def upload(self, path: str, data: Union[str, bytes], *, override: Optional[str] = None) -> Dict[str, Any]:
        """Writes ``data`` to /work/``path``. A .py file is assessed with the session's code;
        BlockedError when the verdict refuses it (nothing is written)."""
        from . import Assessment, BlockedError
        args = ["put", self.id, "-", path, "--json"]
        if override is not None:
            args += ["--override-reason", override]
        out = self._call(args, data.encode() if isinstance(data, str) else data, f"put {path}", ok=(0, 126))
        reply = json.loads(out.decode().strip().splitlines()[-1])
        if reply.get("refused"):
            err = BlockedError(reply.get("message", f"{path} was refused"))
            err.assessment = Assessment.from_json(reply["assessment"]) if reply.get("assessment") else None
            raise err
        return reply

    def download(self, path: str) -> bytes:
        """The bytes of /work/``path``."""
        return self._call(["get", self.id, path, "-"], what=f"get {path}")

    def files(self, path: str = "") -> List[Dict[str, Any]]:
        """The files and directories under /work/``path``: {path, size, type}."""
        return json.loads(self._call(["files", self.id, *([path] if path else []), "--json"], what="list /work"))

    def close(self) -> None:
        """Stops the session (its interpreter, sandbox and holder). Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._call(["stop", self.id], what="stop the session", ok=(0, 1))

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
