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
   resumed one, with no later record going back to or before their step) and whose files are found
   (:func:`_located`), with their health and checksums; they are verified again before any load.
"""
from __future__ import annotations

import os
from array import array
from dataclasses import dataclass, replace
from glob import escape, glob, has_magic

from .engine import Engine
from .ledger import DELETED, HEALTHY, PENDING, QUARANTINED, CheckpointEntry, Ledger, file_checksum, read_ledger
from .log import logger
from .record import StepRecord
from .recordlog import RecordLog


class ResumeError(Exception):
    """The run's state cannot be restored for this checkpoint; the message says why."""


class NoCheckpoint(ResumeError):
    """No file matches the checkpoint pattern to resume from: nothing was saved there yet (a run's first start)."""


class NotLoaded(ResumeError):
    """The network does not hold the weights of the checkpoint to resume from: the trainer did not resume from it (a
    fresh start, or another checkpoint loaded)."""


class ChangedCheckpoint(ResumeError):
    """The checkpoint resumed from is the run's, but its bytes changed since it was saved (same size, another
    checksum: written over in place): the weights loaded from it are not its step's."""


@dataclass
class Resumed:
    """What :func:`resume` restored: the checkpoint's entry, the entries carried over (it included when its
    file is there), how many records were fed again, the engine they were fed to, and the file resumed from."""

    entry: CheckpointEntry
    carried: list[CheckpointEntry]
    records: int
    engine: Engine
    path: str


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


def _find(checkpoint: str, output_dir: str, rank: int, run: str) -> tuple[CheckpointEntry, list, str, int]:
    """The entry of ``checkpoint`` in this run's newest ledger that has it, that ledger's entries, and the
    file's checksum and size."""
    checksum, size = file_checksum(checkpoint)
    others = set()
    for path in _ledgers(output_dir, rank):
        try:
            named, entries = read_ledger(path)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            logger.warning("ledger {} not readable ({}); not searched for {}", path, exc, checkpoint)
            continue
        if named != run:
            others.add(str(named))
            continue
        for e in reversed(entries):
            same = os.path.exists(e.path) and os.path.samefile(e.path, checkpoint)
            if same or (e.checksum is not None and e.checksum == checksum):
                return e, entries, checksum, size
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


def _located(e: CheckpointEntry, moved: tuple[str, str] | None, output_dir: str, rank: int) -> str | None:
    """Where the file of ``e`` is now, or None: when the run's files moved (``moved``: the differing heads of the
    resumed checkpoint's path in the ledger and of where it was found), the same place under the new head, if
    there; else its path; else a hard link the monitor kept of it from retention
    (``checkpoints/rank_<r>/<process>/kept/<n>-<name>``, of the size saved). The file is verified against its
    checksum before any load."""
    saved = os.path.abspath(e.path)  # (as _moved takes it: a path saved relative to another working directory too)
    if moved is not None and saved.startswith(moved[0]):
        rebased = moved[1] + saved[len(moved[0]):]
        if os.path.exists(rebased):
            return rebased
    if os.path.exists(e.path):
        return e.path
    pins = glob(os.path.join(escape(output_dir), "checkpoints", f"rank_{rank}", "*", "kept",
                             "*-" + escape(os.path.basename(e.path))))
    return next((p for p in sorted(pins) if e.size is None or os.path.getsize(p) == e.size), None)


def _moved(saved: str, found: str) -> tuple[str, str] | None:
    """The differing heads of the path ``saved`` and the path ``found`` of the same file (a run folder moved:
    ``/a/run/ckpt/x.ckpt`` found at ``/b/run2/ckpt/x.ckpt`` gives ``("/a/run/", "/b/run2/")``), or None when it
    is where it was saved."""
    old, new = os.path.abspath(saved).split(os.sep), os.path.abspath(found).split(os.sep)
    if old == new:
        return None
    k = 0
    while k < min(len(old), len(new)) - 1 and old[-1 - k] == new[-1 - k]:
        k += 1
    return os.sep.join(old[:len(old) - k]) + os.sep, os.sep.join(new[:len(new) - k]) + os.sep


def checkpoint_file(pattern: str, rank: int | None = None) -> str:
    """The file ``pattern`` names for ``rank`` (``{rank}`` in it stands for the rank, when given): itself, or,
    a glob pattern (``*``, ``?``, ``[..]``: the monitor's own checkpoints are under a folder per process,
    ``checkpoints/rank_{rank}/*/step_00000120.ckpt``), the newest matching file (by modification time). Raises
    ResumeError when the pattern matches no file."""
    if rank is not None:
        pattern = pattern.replace("{rank}", str(rank))
    if not has_magic(pattern):
        return pattern
    found = [p for p in glob(pattern) if os.path.isfile(p)]
    if not found:
        raise NoCheckpoint(f"no file matches {pattern}")
    return max(found, key=lambda p: (os.path.getmtime(p), p))


def resume(engine: Engine, checkpoint: str, output_dir: str, rank: int, run: str, record_log: str) -> Resumed:
    """Restore ``engine``'s detectors and the run's checkpoints for a job restarted from ``checkpoint`` (a
    file, or a pattern: :func:`checkpoint_file` for ``rank``; see the module docstring). ``record_log``: this rank's
    record log.

    Raises:
        ChangedCheckpoint: the checkpoint's file was written over since it was saved (same size).
        ResumeError: no file matches the pattern, the checkpoint is not in a ledger of this run, its file
            has another size than saved or no checksum was recorded, or the record log does not hold the
            steps that led to it.
        OSError: the checkpoint or the record log cannot be read.
    """
    checkpoint = checkpoint_file(checkpoint, rank)
    entry, entries, checksum, size = _find(checkpoint, output_dir, rank, run)
    if checksum != entry.checksum:
        error = ChangedCheckpoint if entry.checksum and size == entry.size else ResumeError
        raise error(f"{checkpoint}: checksum {checksum[:20]}... is not the {(entry.checksum or 'none')[:20]}... "
                    f"recorded when step {entry.step} was saved ({size} bytes, {entry.size} then)")
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
    carried, gone, moved = [], [], _moved(entry.path, checkpoint)
    for e in entries:
        if id(e) not in on_way or marks[on_way[id(e)]] is None:
            continue
        later = steps[marks[on_way[id(e)]]:]
        if later and min(later) <= e.step or e.status == DELETED:
            continue  # left behind by a rollback past it; its file deleted by retention, as the ledger knew
        path = _located(e, moved, output_dir, rank)
        if path is None:
            gone.append(e)
        else:  # (this process's data stream is another: no batch counts)
            carried.append(replace(e, path=path, batches_consumed=None))
    if gone:  # (a trainer's retention deletes most of a long run's files: their steps, and the newest's path)
        named = (", ".join(e.path for e in gone) if len(gone) <= 3 else
                 f"steps {min(e.step for e in gone)} to {max(e.step for e in gone)}; the newest "
                 f"{max(gone, key=lambda e: e.step).path}")
        logger.warning("{} checkpoint(s) from before the restart on the way to step {} are no rollback target: "
                       "their files are gone ({})", len(gone), entry.step, named)
    if entry.status == QUARANTINED:
        logger.warning("resumed from {}, which the ledger quarantined ({}): it is no rollback target",
                       entry.path, entry.reason)
    return Resumed(entry, carried, len(steps), engine, checkpoint)


def restore(engine: Engine, ledger: Ledger, checkpoint: str, output_dir: str, rank: int, run: str,
            record_log: RecordLog | None, agree=None, holds=None, least=None) -> Resumed:
    """:func:`resume` for the live callback, into a new engine with ``engine``'s rules and sinks (the
    returned ``engine``, to use from now on); the carried checkpoints join ``ledger``. ``agree(ok) -> bool``,
    with several ranks: True when every rank's ``ok`` is True; called twice on every rank (restored; its
    checkpoint not written over), so the ranks all restore or all start afresh, and all stop on a changed one.
    ``least(n) -> int``, with several ranks: the least of the ranks' ``n``; called once on every rank that
    restores: a carried checkpoint is healthy only when it is on every rank (a job stopped between two ranks'
    promotions of a checkpoint leaves it healthy in one rank's ledger, pending in another's), so the ranks have
    the same rollback targets and check the weights before the same promotions.
    ``holds(path) -> bool``: the network holds the weights of the checkpoint file ``path`` (the trainer loaded it).

    Raises:
        ChangedCheckpoint: this rank's (or another rank's) checkpoint was written over since it was saved: the
            weights loaded are not its step's.
        NoCheckpoint, NotLoaded, ResumeError: not restored (no file matches the pattern; the network does not
            hold the checkpoint's weights; any other reason, a malformed ledger's too, or another rank's); the run
            may go on afresh, with empty detector windows and no earlier checkpoint.
    """
    done, failure, changed = None, ResumeError("not restored on every rank"), None
    try:
        if record_log is None:
            raise ResumeError("the record log is off (record_log: false)")
        done = resume(Engine(engine.rules, engine.sinks), checkpoint, output_dir, rank, run, record_log.path)
        if holds is not None and not holds(done.path):
            path, done = done.path, None
            raise NotLoaded(f"the network does not hold the weights of {path}: the trainer did not resume from it")
    except ChangedCheckpoint as exc:
        changed = str(exc)
    except ResumeError as exc:
        failure = exc
    except OSError as exc:
        failure = ResumeError(str(exc))
    except Exception as exc:  # a bug or a malformed ledger: still reach the agreement, or the other ranks wait
        logger.opt(exception=exc).error("resume from {} failed", checkpoint)
        failure = ResumeError(repr(exc))
    if agree is not None:
        restored, intact = agree(done is not None), agree(changed is None)
        changed = changed or (None if intact else "another rank's checkpoint was written over since it was saved")
        done = done if restored else None
    if changed:
        raise ChangedCheckpoint(changed)
    if done is None:
        raise failure
    if least is not None:
        newest = least(max((e.step + 1 for e in done.carried if e.status == HEALTHY), default=0)) - 1
        pending = [e.step for e in done.carried if e.status == HEALTHY and e.step > newest]
        if pending:
            logger.info("checkpoint(s) of step(s) {} are healthy in this rank's ledger but not in every rank's (the "
                        "job stopped between their promotions): pending again, promoted after the weights check "
                        "like any other", ", ".join(map(str, pending)))
            done.carried[:] = [replace(e, status=PENDING) if e.step in pending else e for e in done.carried]
    ledger.extend(done.carried)
    logger.info("resumed run {} from step {} ({}): {} records fed to the detectors again, {} checkpoints "
                "from before the restart kept", run, done.entry.step, done.path, done.records, len(done.carried))
    return done
