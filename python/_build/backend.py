"""A PEP 517 build backend for this pure-Python package, standard library only: a wheel is a
zip of sandboxrun/ plus the dist-info files (PEP 427), so an offline `pip install ./python`
needs no setuptools or wheel from an index."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME, VERSION = "sandboxrun", "0.1.0"
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
METADATA = (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            "Summary: Run untrusted Python in sandboxrun from Python\nRequires-Python: >=3.9\n")
WHEEL = "Wheel-Version: 1.0\nGenerator: sandboxrun-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files():
    return sorted(p for p in (ROOT / NAME).rglob("*.py") if "__pycache__" not in p.parts)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    filename = f"{NAME}-{VERSION}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as whl:
        entries = [(p.relative_to(ROOT).as_posix(), p.read_bytes()) for p in _package_files()]
        entries += [(f"{DIST_INFO}/METADATA", METADATA.encode()), (f"{DIST_INFO}/WHEEL", WHEEL.encode())]
        for arcname, data in entries:
            whl.writestr(arcname, data)
            records.append(_record_line(arcname, data))
        records.append(f"{DIST_INFO}/RECORD,,")
        whl.writestr(f"{DIST_INFO}/RECORD", "\n".join(records) + "\n")
    return filename


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tar:
        for p in [ROOT / "pyproject.toml", ROOT / "_build" / "backend.py", *_package_files()]:
            tar.add(p, arcname=f"{base}/{p.relative_to(ROOT).as_posix()}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(METADATA.encode())
        tar.addfile(info, io.BytesIO(METADATA.encode()))
    return filename
