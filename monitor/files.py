"""Small file helpers: atomic replacement, Prometheus file_sd targets."""
from __future__ import annotations

import json
import os
import socket
import tempfile


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` via a temporary file in the same folder, fsync and rename: readers
    see the old or the new content, never a part. Raises OSError."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_file_sd_target(folder: str, run: str, rank: int, host: str, port: int) -> str:
    """Write ``<folder>/<run>_rank<rank>.json`` for Prometheus ``file_sd_configs`` (``files: [<folder>/*.json]``)
    and return its path. A wildcard host (0.0.0.0, ::) is advertised as this machine's FQDN."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.getfqdn()
    path = os.path.join(folder, f"{run}_rank{rank}.json")
    target = [{"targets": [f"{host}:{port}"], "labels": {"run": run, "rank": str(rank)}}]
    write_atomic(path, json.dumps(target, indent=1) + "\n")
    return path
