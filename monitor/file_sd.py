"""Prometheus ``file_sd`` targets: one JSON file per serving rank, so Prometheus finds every rank's
``/metrics`` by a glob (``file_sd_configs: - files: [<folder>/*.json]``)."""
from __future__ import annotations

import ipaddress
import json
import os
import socket

from .files import write_atomic
from .http import is_loopback
from .log import logger

WILDCARDS = ("", "0.0.0.0", "::")
_ROUTE_PROBE = ("192.0.2.1", 9)  # TEST-NET-1 (RFC 5737): a UDP connect there picks the default route's address


def advertised_host(host: str) -> str:
    """The address other machines reach a server listening on ``host`` at: ``host`` itself, unless it is a
    wildcard (0.0.0.0, ::); then this machine's FQDN when it resolves to an address other than loopback, else
    the address of its default route's interface (a UDP socket connected to a TEST-NET address: no packet is
    sent), else the FQDN with a warning (a machine whose name maps to 127.0.0.1 in ``/etc/hosts`` and with
    no route: set ``metrics_host`` to the address Prometheus should scrape)."""
    if host not in WILDCARDS:
        return host
    name = socket.getfqdn()
    if not is_loopback(name):
        return name
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(_ROUTE_PROBE)
            address = probe.getsockname()[0]
        ip = ipaddress.ip_address(address)
        if not ip.is_loopback and not ip.is_unspecified:
            return address
    except (OSError, ValueError):
        pass
    logger.warning("file_sd: this machine's name {} resolves to loopback and no other address was found: "
                   "Prometheus on another host cannot scrape it; set metrics_host to this node's address", name)
    return name


def _targets(path: str) -> list[str]:
    """The ``host:port`` targets a file_sd file names (none when it is missing or not one)."""
    try:
        with open(path, encoding="utf-8") as f:
            return [t for group in json.load(f) for t in group.get("targets", [])]
    except (OSError, ValueError, TypeError, AttributeError):
        return []


def _answers(target: str) -> bool:
    """Something accepts TCP connections at ``target`` (``host:port``, ``[v6]:port``) within half a second."""
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=0.5):
            return True
    except (OSError, ValueError):
        return False


def write_file_sd_target(folder: str, run: str, rank: int, host: str, port: int) -> str:
    """Write ``<folder>/<run>_rank<rank>.json`` for Prometheus ``file_sd_configs`` (``files: [<folder>/*.json]``)
    and return its path. The target is ``host`` as other machines reach it (:func:`advertised_host`). A file
    there that names another endpoint which still answers (another job of the same ``run`` name) is replaced
    with a warning: that job is no longer scraped (a process that ended without removing its file answers no
    more, and its file is replaced silently)."""
    host = advertised_host(host)
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    path = os.path.join(folder, f"{run}_rank{rank}.json")
    mine = f"{host}:{port}"
    others = [t for t in _targets(path) if t != mine and _answers(t)]
    if others:
        logger.warning("file_sd: {} names {}, which still answers: another job of run {!r}, no longer scraped "
                       "now that this rank's {} replaces it; give each job its own run", path, ", ".join(others),
                       run, mine)
    target = [{"targets": [mine], "labels": {"run": run, "rank": str(rank)}}]
    write_atomic(path, json.dumps(target, indent=1) + "\n")
    return path


def remove_file_sd_target(path: str, port: int) -> None:
    """Remove ``path`` (written by :func:`write_file_sd_target` for ``port``) unless another process wrote its own
    target there since (a job of the same ``run`` name that started later keeps being scraped)."""
    targets = _targets(path)
    if targets and all(t.endswith(f":{port}") for t in targets):
        os.unlink(path)
