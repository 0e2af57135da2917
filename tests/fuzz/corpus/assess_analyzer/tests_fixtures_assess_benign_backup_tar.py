import datetime
import shutil
import tarfile
from pathlib import Path

def backup(src: Path, dest_dir: Path) -> Path:
    stamp = datetime.date.today().isoformat()
    target = dest_dir / f"backup-{stamp}.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        tar.add(src, arcname=src.name)
    shutil.copy2(target, dest_dir / "latest.tar.gz")
    return target
