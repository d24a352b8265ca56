"""MindFormers checkpoint layouts: tell MindFormers' own resume which checkpoints the ledger trusts.

* Legacy layout (``checkpoint/rank_<i>/<prefix>-<epoch>_<step>.ckpt``): MindFormers' resume drops every
  file listed in ``health_ckpts.json`` with ``is_health != 0`` (``mindformers/tools/resume_ckpt.py``).
  :func:`write_health_json` writes that list from the ledger: healthy -> 0; pending or quarantined -> 1.
* Iteration layout (``<root>/iteration_<08d>/common.json`` and ``<root>/latest_checkpointed_iteration.txt``):
  MindFormers resumes from the newest ``iteration_*`` whose ``common.json`` has ``ckpt_status == 0``
  (``mindformers/checkpoint/utils.py``). :func:`write_iteration_status` sets ``ckpt_status`` (0 healthy,
  1 otherwise) and points the tracker at the newest healthy iteration; :func:`read_iterations` builds
  ledger entries from such a folder, so a restarted job knows what MindFormers saved.
"""
from __future__ import annotations

import json
import os
import re
from glob import glob

from .files import write_atomic
from .ledger import HEALTHY, QUARANTINED, CheckpointEntry

_ITERATION = re.compile(r"iteration_(\d{8})$")
_LEGACY = re.compile(r"-(\d+)_(\d+)\.ckpt$")


def iteration_dir(path: str) -> str | None:
    """The ``iteration_<08d>`` folder ``path`` is or lies in, or None."""
    p = os.path.abspath(path)
    while p != os.path.dirname(p):
        if _ITERATION.search(os.path.basename(p)):
            return p
        p = os.path.dirname(p)
    return None


def write_health_json(entries: list[CheckpointEntry], path: str) -> None:
    """Write MindFormers' ``health_ckpts.json`` for the legacy checkpoints among ``entries``. Raises OSError."""
    items = [{"is_health": 0 if e.status == HEALTHY else 1, "ckpt_name": os.path.basename(e.path)}
             for e in entries if iteration_dir(e.path) is None]
    write_atomic(path, json.dumps(items, indent=4))


def write_iteration_status(entries: list[CheckpointEntry]) -> None:
    """Set ``ckpt_status`` in the ``common.json`` of every iteration-layout entry and point each root's
    ``latest_checkpointed_iteration.txt`` at its newest healthy iteration. Raises OSError."""
    newest: dict[str, int] = {}
    for e in entries:
        folder = iteration_dir(e.path)
        if folder is None or not os.path.isdir(folder):  # not that layout, or deleted by retention
            continue
        common = os.path.join(folder, "common.json")
        data = {}
        if os.path.exists(common):
            with open(common, encoding="utf-8") as f:
                data = json.load(f)
        data["ckpt_status"] = 0 if e.status == HEALTHY else 1
        write_atomic(common, json.dumps(data, indent=4))
        if e.status == HEALTHY:
            root, it = os.path.dirname(folder), int(_ITERATION.findall(folder)[0])
            newest[root] = max(newest.get(root, -1), it)
    for root, it in newest.items():
        write_atomic(os.path.join(root, "latest_checkpointed_iteration.txt"), str(it))


def read_iterations(root: str) -> list[CheckpointEntry]:
    """Ledger entries for the ``iteration_*`` folders under ``root``: step from ``common.json``'s
    ``global_step`` (else the folder's number), healthy when ``ckpt_status`` is 0, quarantined otherwise
    (also when ``common.json`` is missing or unreadable, with the reason)."""
    out = []
    for folder in sorted(glob(os.path.join(root, "iteration_*"))):
        m = _ITERATION.search(folder)
        if not m or not os.path.isdir(folder):
            continue
        step, status, reason = int(m.group(1)), QUARANTINED, ""
        try:
            with open(os.path.join(folder, "common.json"), encoding="utf-8") as f:
                data = json.load(f)
            step = int(data.get("global_step") or step)
            if data.get("ckpt_status") == 0:
                status = HEALTHY
            else:
                reason = f"MindFormers ckpt_status {data.get('ckpt_status')}"
        except (OSError, ValueError) as exc:
            reason = f"common.json unreadable: {exc}"
        out.append(CheckpointEntry(step, folder, status, reason))
    return out


def read_legacy(rank_dir: str, health_json: str | None, steps_per_epoch: int) -> list[CheckpointEntry]:
    """Ledger entries for the ``<prefix>-<epoch>_<step>.ckpt`` files in a legacy ``rank_<i>`` folder.

    The global step is ``(epoch - 1) * steps_per_epoch + step`` (MindFormers names files by the step within
    the epoch). Health comes from ``health_ckpts.json`` when given: ``is_health == 0`` -> healthy, any other
    value -> quarantined, not listed -> pending.
    """
    health = {}
    if health_json and os.path.exists(health_json):
        with open(health_json, encoding="utf-8") as f:
            health = {item.get("ckpt_name"): item.get("is_health") for item in json.load(f)}
    out = []
    for path in glob(os.path.join(rank_dir, "*.ckpt")):
        m = _LEGACY.search(path)
        if not m:
            continue
        step = (int(m.group(1)) - 1) * steps_per_epoch + int(m.group(2))
        flag = health.get(os.path.basename(path))
        if flag is None:
            out.append(CheckpointEntry(step, path))
        elif flag == 0:
            out.append(CheckpointEntry(step, path, HEALTHY))
        else:
            out.append(CheckpointEntry(step, path, QUARANTINED, f"MindFormers is_health {flag}"))
    return sorted(out, key=lambda e: e.step)
