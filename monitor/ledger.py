"""Checkpoint ledger: which saved checkpoints are safe to roll back to."""
from __future__ import annotations

import hashlib
import json
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass

from .files import write_atomic
from .log import logger

PENDING, HEALTHY, QUARANTINED = "pending", "healthy", "quarantined"
DELETED = "deleted"  # its file was removed (checkpoint retention): never a rollback target


@dataclass(slots=True)
class CheckpointEntry:
    """A checkpoint holding the state after ``step``. ``reason`` says why it was quarantined;
    ``batches_consumed`` is how many batches the data pipeline had delivered when it was saved (None when
    unknown), so a rollback can name the batches it will not train on again. ``checksum`` (``blake2b:<hex>``
    of the file) and ``size`` (bytes) identify the file as saved; ``records`` lists the ``[start, end]`` byte
    ranges of the record log holding the steps that led to it, so a resumed run can feed them to its
    detectors again (:mod:`training_monitor.resume`); ``rollbacks`` and ``lr_multiplier``, the rollbacks done
    on the way to it and the LR multiplier they left (the product of their LR factors), so it takes up the
    rollback budget and the LR cut where they were."""

    step: int
    path: str
    status: str = PENDING
    reason: str = ""
    batches_consumed: int | None = None
    checksum: str | None = None
    size: int | None = None
    records: list | None = None
    rollbacks: int = 0
    lr_multiplier: float = 1.0


def file_checksum(path: str) -> tuple[str, int]:
    """``("blake2b:<hex>", size in bytes)`` of a file (read in blocks; the hashing releases the GIL).
    Raises OSError."""
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "blake2b").hexdigest()
        return f"blake2b:{digest}", f.tell()


def read_ledger(path: str) -> tuple[str | None, list[CheckpointEntry]]:
    """The run id (None: not named) and the entries of the ledger file ``path``.

    Raises:
        OSError: the file cannot be read. ValueError, TypeError, KeyError, AttributeError: it is no ledger
            (not JSON, or not its fields).
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    run = data.get("run")
    return (run if isinstance(run, str) else None), [CheckpointEntry(**e) for e in data["checkpoints"]]


class Ledger:
    """The run's checkpoints and their health, persisted as JSON with write-then-rename.

    A checkpoint starts *pending*; it becomes *healthy* once ``healthy_after`` further steps have
    finished with no anomaly whose onset falls after it, and *quarantined* when an anomaly's onset
    comes while it is pending (the state it holds may already carry the seed of the excursion) or when
    it cannot be loaded.

    Args:
        path: JSON file to keep the ledger in (None: memory only). An existing file is read back, so a
            restarted job knows its healthy checkpoints.
        healthy_after: clean steps needed after a checkpoint before it is trusted.
        on_change: called with the entries after every change (e.g. to mirror the health into
            MindFormers' layouts, :mod:`training_monitor.mindformers_layout`); its OSError is logged, not raised.
        run: the run id kept in the file (a resumed run only reuses checkpoints of its own run).
        checksums: record each added file's checksum and size, computed on a background thread, and let
            :meth:`verify` check them before a load.
    """

    def __init__(self, path: str | None = None, healthy_after: int = 20, on_change=None, run: str | None = None,
                 checksums: bool = False):
        self.path, self.healthy_after, self.on_change, self.run = path, healthy_after, on_change, run
        self.entries: list[CheckpointEntry] = []
        if path and os.path.exists(path):
            named, self.entries = read_ledger(path)
            self.run = named or run
        self._pending = [e for e in self.entries if e.status == PENDING]
        # the run went back to this step (a rollback, a resume): the checkpoints up to it were proven on the steps
        # before it went back, and an onset on the steps after it is no doubt about them
        self.proven_to: int | None = None
        self._lock = threading.Lock()  # the checksum thread saves too
        self._hasher = ThreadPoolExecutor(1, "checkpoint-checksum") if checksums else None
        self._hashing: dict[int, Future] = {}

    def add(self, step: int, path: str, batches_consumed: int | None = None, **lineage) -> CheckpointEntry:
        """A new pending checkpoint; ``lineage``: its ``records``, ``rollbacks`` and ``lr_multiplier``
        (:class:`CheckpointEntry`)."""
        entry = CheckpointEntry(step, path, batches_consumed=batches_consumed, **lineage)
        self.extend([entry])
        if self._hasher is not None:
            self._hashing = {k: f for k, f in self._hashing.items() if not f.done()}
            self._hashing[id(entry)] = self._hasher.submit(self._checksum, entry)
        return entry

    def extend(self, entries: list[CheckpointEntry]) -> None:
        """Add entries as they are (status, checksum): a resumed run's checkpoints from before the restart."""
        self.entries.extend(entries)
        self._pending = sorted(self._pending + [e for e in entries if e.status == PENDING], key=lambda e: e.step)
        self._save()

    def _checksum(self, entry: CheckpointEntry) -> None:
        try:
            entry.checksum, entry.size = file_checksum(entry.path)
        except OSError as exc:
            logger.error("checkpoint {}: checksum not computed ({})", entry.path, exc)
            return
        self._save()

    def verify(self, entry: CheckpointEntry) -> None:
        """Check that ``entry``'s file is the one saved (size, then checksum), waiting for its checksum if
        the background thread is still computing it.

        Raises:
            ValueError: no checksum was recorded, or the file differs from it (the reason says which).
            OSError: the file cannot be read.
        """
        pending = self._hashing.pop(id(entry), None)
        if pending is not None:
            pending.result()
        if entry.checksum is None:
            raise ValueError(f"{entry.path}: no checksum was recorded for it")
        size = os.path.getsize(entry.path)
        if size != entry.size:
            raise ValueError(f"{entry.path}: {size} bytes, {entry.size} when saved")
        checksum, _ = file_checksum(entry.path)
        if checksum != entry.checksum:
            raise ValueError(f"{entry.path}: checksum mismatch ({checksum[:20]}..., {entry.checksum[:20]}... "
                             "when saved)")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the checksums being computed; True when none is left."""
        return not wait(list(self._hashing.values()), timeout).not_done

    def observe(self, step: int) -> list[CheckpointEntry]:
        """Step ``step`` finished clean: promote pending checkpoints that now have enough clean steps."""
        if not self._pending or step < self._pending[0].step + self.healthy_after:
            return []
        promoted = [e for e in self._pending if step >= e.step + self.healthy_after]
        self._pending = [e for e in self._pending if e.status == PENDING and e not in promoted]
        for e in promoted:
            e.status = HEALTHY
        if promoted:
            self._save()
        return promoted

    @property
    def next_promotion(self) -> int | None:
        """The first step at which :meth:`observe` promotes a checkpoint; None when none is pending."""
        return self._pending[0].step + self.healthy_after if self._pending else None

    def anomaly(self, onset_step: int) -> None:
        """An excursion began at ``onset_step``: quarantine checkpoints not proven before it (pending, or
        promoted on ``healthy_after`` steps that include it: an event found after its onset, as the weights
        check's at a promotion; not one at or before :attr:`proven_to`, promoted on the steps before the run
        went back: a run of bad batches after a rollback does not walk back through good checkpoints)."""
        changed = False
        proven = -1 if self.proven_to is None else self.proven_to
        for e in self.entries:
            if e.status not in (QUARANTINED, DELETED) and (e.status == PENDING or e.step + self.healthy_after
                                                             >= onset_step and e.step > proven):
                e.status, e.reason, changed = QUARANTINED, f"anomaly with onset at step {onset_step}", True
        if changed:
            self._pending = [e for e in self._pending if e.status == PENDING]
            self._save()

    def quarantine(self, entry: CheckpointEntry, reason: str, status: str = QUARANTINED) -> None:
        """Take ``entry`` out of the rollback targets: ``quarantined`` (suspect, or it failed to load) or
        ``deleted`` (its file is gone), with the reason."""
        entry.status, entry.reason = status, reason
        self._pending = [e for e in self._pending if e is not entry]
        self._save()

    def moved(self, entry: CheckpointEntry, path: str) -> None:
        """``entry``'s checkpoint is now read from ``path`` (the same file, pinned elsewhere)."""
        entry.path = path
        self._save()

    def rollback_target(self, onset_step: int, margin: int = 0) -> CheckpointEntry | None:
        """Newest healthy checkpoint with ``step < onset_step - margin``, or None."""
        ok = [e for e in self.entries if e.status == HEALTHY and e.step < onset_step - margin]
        return max(ok, key=lambda e: e.step) if ok else None

    @property
    def last_healthy_step(self) -> int | None:
        steps = [e.step for e in self.entries if e.status == HEALTHY]
        return max(steps) if steps else None

    def _save(self) -> None:
        with self._lock:
            if self.on_change is not None:
                try:
                    self.on_change(self.entries)
                except (OSError, ValueError) as exc:
                    logger.error("checkpoint health not mirrored into MindFormers' files ({})", exc)
            if not self.path:
                return
            try:
                write_atomic(self.path, json.dumps({"run": self.run, "checkpoints": [asdict(e) for e in self.entries]},
                                                   indent=1))
            except OSError as exc:
                logger.error("checkpoint ledger {} not saved ({}); kept in memory", self.path, exc)
