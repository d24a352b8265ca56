"""Prometheus ``file_sd`` targets: one JSON file per serving rank, so Prometheus finds every rank's
``/metrics`` by a glob (``file_sd_configs: - files: [<folder>/*.json]``)."""
from __future__ import annotations

import json
import os
import socket

from .files import write_atomic


def write_file_sd_target(folder: str, run: str, rank: int, host: str, port: int) -> str:
    """Write ``<folder>/<run>_rank<rank>.json`` for Prometheus ``file_sd_configs`` (``files: [<folder>/*.json]``)
    and return its path. A wildcard host (0.0.0.0, ::) is advertised as this machine's FQDN."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.getfqdn()
    path = os.path.join(folder, f"{run}_rank{rank}.json")
    target = [{"targets": [f"{host}:{port}"], "labels": {"run": run, "rank": str(rank)}}]
    write_atomic(path, json.dumps(target, indent=1) + "\n")
    return path
