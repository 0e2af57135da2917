"""Sessions from Python (sandboxrun.session): cells keep their state and come back with text,
display items and errors; files go in and out of /work; the types are the command's."""
import json
import os
import shutil
import tempfile
from dataclasses import fields

import pytest

from sandboxrun import BlockedError, CellError, CellResult, SetupError


@pytest.fixture
def sessions_dir(monkeypatch):
    # A unix socket's path has room for 107 bytes: a short directory of its own, not tmp_path.
    d = tempfile.mkdtemp(prefix="sbs-", dir="/run" if os.access("/run", os.W_OK) else "/dev/shm")
    monkeypatch.setenv("SANDBOXRUN_SESSIONS_DIR", d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_cells_keep_state_and_come_back_as_a_notebook_shows_them(sandbox, sessions_dir):
    with sandbox.session(timeout=5) as s:
        assert s.run("import math\nx = 41\nprint('hi')").stdout == "hi\n"
        r = s.run("x + 1")
        assert (r.status, r.text) == ("ok", "42")
        err = s.run("def f():\n    return 1 / 0\nf()")
        assert err.status == "error" and err.error.ename == "ZeroDivisionError"
        assert any('<cell 3>", line 2' in line for line in err.error.traceback), err.error.traceback
        shown = s.run("class T:\n    def _repr_html_(self):\n        return '<b>t</b>'\ndisplay(T())\nT()")
        assert shown.display[0]["text/html"] == "<b>t</b>" and shown.result["text/html"] == "<b>t</b>"
        t = s.run("import time\nwhile True: time.sleep(0.05)", timeout=1)
        assert t.status == "timeout" and t.error.ename == "KeyboardInterrupt"
        assert s.run("x", stdin="unused").text == "41"
        assert s.run("input()", stdin="typed\n").text == "'typed'"
        session_id = s.id
    with pytest.raises(SetupError):
        s.closed = False
        s.run("x")
    assert session_id


def test_files_go_in_and_out_and_python_files_are_assessed(sandbox, sessions_dir):
    with sandbox.session(trust="untrusted") as s:
        s.upload("data/in.bin", bytes(range(256)))
        assert s.run("open('data/in.bin', 'rb').read() == bytes(range(256))").text == "True"
        s.run("open('out.txt', 'w').write('made here')")
        assert s.download("out.txt") == b"made here"
        assert {"path": "data/in.bin", "size": 256, "type": "file"} in s.files()
    # A trusted session runs LOW code only: a file whose code rates HIGH with the cells is refused.
    with sandbox.session(trust="trusted") as s:
        s.run("import os\nname = 'sys' + 'tem'")
        with pytest.raises(BlockedError) as e:
            s.upload("helper.py", "import os\ndef go():\n    return getattr(os, name)('id')\n")
        assert e.value.assessment.level == "HIGH"
        assert all(f["path"] != "helper.py" for f in s.files())


def test_cell_types_name_the_fields_the_command_writes(sandbox, sessions_dir):
    with sandbox.session() as s:
        r = s.run("1 / 0")
    assert {f.name for f in fields(CellError)} == set(r.raw["error"])
    for name in {f.name for f in fields(CellResult)} - {"raw", "message"}:
        assert name in r.raw, f"CellResult.{name} reads '{name}', which the command does not write"
    assert json.dumps(r.raw)
