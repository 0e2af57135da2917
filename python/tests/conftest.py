"""Runs the Python API against the real binary: $SANDBOXRUN_BIN (ctest sets it), else the
checkout's build/sandboxrun; the checkout's config/ unless $SANDBOXRUN_CONFIG is set."""
import os
from pathlib import Path

import pytest

from sandboxrun import Sandbox

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def sandbox(tmp_path):
    binary = os.environ.get("SANDBOXRUN_BIN") or str(REPO / "build" / "sandboxrun")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"no sandboxrun binary at {binary}: build it, or set SANDBOXRUN_BIN")
    config = os.environ.get("SANDBOXRUN_CONFIG") or str(REPO / "config")
    return Sandbox(config=config, binary=binary, audit_log=tmp_path / "audit.log")
