"""Live resume: a restarted job takes up the run's detector windows and checkpoint ledger where the
checkpoint it restarted from left them.

Each ledger entry written by the live callback names the stretches of the record log
(``records_rank<r>.csv``) whose steps led to its state: ``records``, a list of ``[start, end]`` byte
ranges, one per process on the way (a resumed process's checkpoints carry the ranges of the checkpoint it
resumed from, then its own). Resuming from a checkpoint:

1. finds its entry in this rank's earlier ledgers (``ledger_rank<r>.before-*.json``, newest first) whose
   ``run`` is this run: by path, else by checksum (a copied file);
2. checks the file against the checksum recorded when it was saved;
3. feeds the records of those ranges, in order, through the engine with its sinks detached (no event is
   published again), which leaves every detector exactly as it was when the checkpoint was saved; the last
   record must be the checkpoint's step;
4. carries over the checkpoints of that ledger that lie on the same trajectory (saved on the way to the
   resumed one, with no later record going back to or before their step) and whose files still exist, with
   their health and checksums; they are verified again before any load.
"""
from __future__ import annotations

import json
import os
from array import array
from dataclasses import dataclass, replace
from glob import escape, glob, has_magic

from .engine import Engine
from .ledger import QUARANTINED, CheckpointEntry, Ledger, file_checksum
from .log import logger
from .record import StepRecord
from .recordlog import RecordLog


class ResumeError(Exception):
    """The run's state cannot be restored for this checkpoint; the message says why."""


@dataclass
class Resumed:
    """What :func:`resume` restored: the checkpoint's entry, the entries carried over (it included when its
    file is there), how many records were fed again, and the engine they were fed to."""

    entry: CheckpointEntry
    carried: list[CheckpointEntry]
    records: int
    engine: Engine


def trajectory(record_log: RecordLog | None, base: list | None) -> list | None:
    """The ``records`` ranges of a checkpoint saved now: ``base`` (the resumed checkpoint's), then this
    process's rows so far. Flushes and syncs the record log first. None without a record log."""
    end = record_log.sync() if record_log is not None else None
    if record_log is None or end is None:
        return None
    return [*(base or []), [record_log.start, end]]


def _ledgers(output_dir: str, rank: int) -> list[str]:
    paths = glob(os.path.join(escape(output_dir), f"ledger_rank{rank}.before-*.json"))
    return sorted(paths, key=lambda p: (os.path.getmtime(p), p), reverse=True)


def _find(checkpoint: str, output_dir: str, rank: int, run: str) -> tuple[CheckpointEntry, list, str]:
    """The entry of ``checkpoint`` in this run's newest ledger that has it, that ledger's entries, and the
    file's checksum."""
    checksum, _ = file_checksum(checkpoint)
    others = set()
    for path in _ledgers(output_dir, rank):
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            entries = [CheckpointEntry(**e) for e in data["checkpoints"]]
        except (OSError, ValueError, TypeError, KeyError) as exc:
            logger.warning("ledger {} not readable ({}); not searched for {}", path, exc, checkpoint)
            continue
        if data.get("run") != run:
            others.add(str(data.get("run")))
            continue
        for e in reversed(entries):
            same = os.path.exists(e.path) and os.path.samefile(e.path, checkpoint)
            if same or (e.checksum is not None and e.checksum == checksum):
                return e, entries, checksum
    also = f" (ledgers of other runs: {', '.join(sorted(others))})" if others else ""
    raise ResumeError(f"{checkpoint} is in no ledger of run {run!r} under {output_dir}{also}")


def _rows(path: str, ranges: list, marks: dict):
    """The records of ``ranges`` of the record log, in order. ``marks`` maps ``(range index, end offset)`` to
    None; each is set to the number of records before that offset."""
    from .replay.csvlog import Parser  # the reader replay uses: the same records as replaying the file

    parser, count = Parser(), 0
    with open(path, "rb") as f:
        parser.feed(f.readline().decode())  # the header
        for i, (start, end) in enumerate(ranges):
            f.seek(start)
            pos = start
            while pos < end:
                line = f.readline()
                if not line:
                    raise ResumeError(f"{path}: ends at byte {pos}, the ledger says its records go to {end}")
                pos += len(line)
                rec = parser.feed(line.decode("utf-8", "replace"))
                if isinstance(rec, StepRecord):
                    count += 1
                    yield rec
                if (i, pos) in marks:
                    marks[(i, pos)] = count


def checkpoint_file(pattern: str) -> str:
    """The file ``pattern`` names: itself, or, a glob pattern (``*``, ``?``, ``[..]``: the monitor's own
    checkpoints are under a folder per process, ``checkpoints/rank_0/*/step_00000120.ckpt``), the newest
    matching file (by modification time). Raises ResumeError when the pattern matches no file."""
    if not has_magic(pattern):
        return pattern
    found = [p for p in glob(pattern) if os.path.isfile(p)]
    if not found:
        raise ResumeError(f"no file matches {pattern}")
    return max(found, key=lambda p: (os.path.getmtime(p), p))


def resume(engine: Engine, checkpoint: str, output_dir: str, rank: int, run: str, record_log: str) -> Resumed:
    """Restore ``engine``'s detectors and the run's checkpoints for a job restarted from ``checkpoint`` (a
    file, or a glob pattern: :func:`checkpoint_file`; see the module docstring). ``record_log``: this rank's
    record log.

    Raises:
        ResumeError: no file matches the pattern, the checkpoint is not in a ledger of this run, its file
            changed since it was saved, or the record log does not hold the steps that led to it.
        OSError: the checkpoint or the record log cannot be read.
    """
    checkpoint = checkpoint_file(checkpoint)
    entry, entries, checksum = _find(checkpoint, output_dir, rank, run)
    if checksum != entry.checksum:
        raise ResumeError(f"{checkpoint}: checksum {checksum[:20]}... is not the {entry.checksum or 'none'} "
                          f"recorded when step {entry.step} was saved")
    if not entry.records:
        raise ResumeError(f"the ledger does not say which records led to {entry.path}")
    ranges = entry.records
    # an earlier entry is on the way to this one when its ranges are a prefix of this one's
    on_way = {}
    for e in entries:
        k = len(e.records or ()) - 1
        if k < 0 or k >= len(ranges) or e.step > entry.step or e.records[:k] != ranges[:k]:
            continue
        (start, end), (here_start, here_end) = e.records[k], ranges[k]
        if start == here_start and end <= here_end:
            on_way[id(e)] = (k, end)
    marks = dict.fromkeys(on_way.values())
    steps = array("q")
    sinks, engine.sinks = engine.sinks, []
    try:
        for rec in _rows(record_log, ranges, marks):
            engine.observe(rec)
            steps.append(rec.step)
    finally:
        engine.sinks = sinks
    if not steps or steps[-1] != entry.step:
        raise ResumeError(f"{record_log}: the records that led to {entry.path} end at step "
                          f"{steps[-1] if steps else None}, not at its step {entry.step}")
    carried = []
    for e in entries:
        if id(e) not in on_way or marks[on_way[id(e)]] is None:
            continue
        later = steps[marks[on_way[id(e)]]:]
        if (not later or min(later) > e.step) and os.path.exists(e.path):
            carried.append(replace(e, batches_consumed=None))  # this process's data stream is another
    if entry.status == QUARANTINED:
        logger.warning("resumed from {}, which the ledger quarantined ({}): it is no rollback target",
                       entry.path, entry.reason)
    return Resumed(entry, carried, len(steps), engine)


def restore(engine: Engine, ledger: Ledger, checkpoint: str, output_dir: str, rank: int, run: str,
            record_log: RecordLog | None, agree=None) -> Resumed | None:
    """:func:`resume` for the live callback, into a new engine with ``engine``'s rules and sinks (the
    returned ``engine``, to use from now on); the carried checkpoints join ``ledger``. ``agree(ok) -> bool``,
    with several ranks: True when every rank restored (they all restore, or all start afresh). On failure
    (None) the run goes on with empty detector windows and no earlier checkpoint, and an error says why."""
    done, why = None, "not restored on every rank"
    try:
        if record_log is None:
            raise ResumeError("the record log is off (record_log: false)")
        done = resume(Engine(engine.rules, engine.sinks), checkpoint, output_dir, rank, run, record_log.path)
    except (ResumeError, OSError) as exc:
        why = str(exc)
    except Exception as exc:  # a bug or a malformed ledger: still reach the agreement, or the other ranks wait
        logger.opt(exception=exc).error("resume from {} failed", checkpoint)
        why = repr(exc)
    if agree is not None and not agree(done is not None):
        done = None
    if done is None:
        logger.error("resume from {}: run state not restored ({}); the detectors start empty and no "
                     "checkpoint from before the restart is a rollback target", checkpoint, why)
        return None
    ledger.extend(done.carried)
    logger.info("resumed run {} from step {} ({}): {} records fed to the detectors again, {} checkpoints "
                "from before the restart kept", run, done.entry.step, done.entry.path, done.records, len(done.carried))
    return done
