"""The files of a training run's ``ModelCheckpoint`` callbacks: ledgered as they appear, and kept from the
callbacks' retention (``keep_checkpoint_max``) while they may become the newest healthy checkpoint."""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mindspore.train import ModelCheckpoint

from training_monitor.ledger import DELETED, HEALTHY, PENDING, QUARANTINED, CheckpointEntry, Ledger
from training_monitor.log import logger


def _saving(mc: ModelCheckpoint) -> tuple:
    """``(save_checkpoint_steps, save_checkpoint_seconds, step of its last save)`` of a ``ModelCheckpoint``, each
    None when it has none (MindSpore keeps them in private attributes)."""
    config = getattr(mc, "_config", None)
    return (getattr(config, "save_checkpoint_steps", None), getattr(config, "save_checkpoint_seconds", None),
            getattr(mc, "_last_triggered_step", None))


_GONE = "its file since deleted (checkpoint retention)"  # a quarantined checkpoint's, once retention took it


class ModelCheckpointFiles:
    """Follows the ``ModelCheckpoint`` callbacks of a ``Model.train`` call for one rank.

    Args:
        ledger: the rank's checkpoint ledger; new files are added to it, deleted ones marked there.
        own_dir: the monitor's checkpoint folder for this process; its files are never pinned (the monitor's
            own retention, ``keep_checkpoints``, keeps its rollback target), and pins are hard links under
            ``own_dir/kept/``.
        lineage: returns the ledger fields a new checkpoint takes from the run (``records``, its trajectory, see
            :func:`training_monitor.resume.trajectory`; ``rollbacks``, ``lr_multiplier``).
    """

    def __init__(self, ledger: Ledger, own_dir: Path, lineage: Callable[[], dict]):
        self.ledger = ledger
        self.own_dir = own_dir
        self._lineage = lineage
        self._watch: list[tuple[ModelCheckpoint, int, str]] = []  # callback, lag in steps, last file seen
        self._pins: list[tuple[CheckpointEntry, str, str]] = []  # kept from retention: entry, link, original

    def __bool__(self) -> bool:
        """True when a ``ModelCheckpoint`` callback is followed."""
        return bool(self._watch)

    def follow(self, callbacks: list, judged_at: int) -> None:
        """Follow the ``ModelCheckpoint`` callbacks in ``callbacks`` (``cb_params.list_callback``) of a
        ``Model.train`` call starting. One after index ``judged_at`` (where the monitor judges a step) saves
        after the judging: its file is seen one step later (lag 1), the others' at once (lag 0). A callback
        that saved in an earlier call saves nothing in this one before its step ``last save + interval``
        (``ModelCheckpoint`` compares the call's step, which MindSpore counts from 1 again, with the step of
        its last save): a warning says so."""
        self._watch = [(c, 1 if i > judged_at else 0, c.latest_ckpt_file_name)
                       for i, c in enumerate(callbacks) if isinstance(c, ModelCheckpoint)]
        for mc, _, _ in self._watch:
            steps, _, last = _saving(mc)
            if last and steps:
                logger.warning("ModelCheckpoint {!r} saved its last file at step {} of an earlier Model.train call, "
                               "and MindSpore counts each call's steps from 1 again: it saves nothing in this call "
                               "before the call's step {} (no new rollback target, no weights check at its saves); "
                               "give each call a new ModelCheckpoint, or set checkpoint_every for the monitor's "
                               "own checkpoints", getattr(mc, "_prefix", "?"), last, last + steps)

    def ledger_new(self, step: int, batches: int, lag: int | None = None) -> bool:
        """Ledger the new files of the callbacks of ``lag`` (None: all) as the state after monitor step
        ``step`` with ``batches`` batches consumed. True when there was one."""
        saved = False
        for i, mc, after, name in list(self._new(lag)):
            self._watch[i] = (mc, after, name)
            self.ledger.add(step, os.path.abspath(name), batches, **self._lineage())
            self.follow_retention()
            saved = True
        return saved

    def due(self, cb_params) -> bool:
        """True when a callback saving after the judging (lag 1) saves at this step: its steps since the last
        save reach ``save_checkpoint_steps`` (``ModelCheckpoint._check_save_ckpt``'s test; without its
        ``_last_triggered_step``, at each multiple of them), or its ``save_checkpoint_seconds`` have passed."""
        now = time.time()
        for mc, after, _ in self._watch:
            if after != 1:
                continue
            steps, seconds, last = _saving(mc)
            if steps and (cb_params.cur_step_num >= last + steps if last is not None
                          else cb_params.cur_step_num % steps == 0):
                return True
            if not steps and seconds and now - getattr(mc, "_last_time", now) > seconds:
                return True
        return False

    def saved(self, lag: int) -> bool:
        """True when a callback of ``lag`` wrote a file not ledgered yet."""
        return any(self._new(lag))

    def _new(self, lag: int | None) -> Iterator[tuple[int, ModelCheckpoint, int, str]]:
        """``(index, callback, lag, file)`` of each callback of ``lag`` (None: all) whose latest file is not
        ledgered yet."""
        for i, (mc, after, seen) in enumerate(self._watch):
            name = mc.latest_ckpt_file_name
            if lag in (None, after) and name and name != seen:
                yield i, mc, after, name

    def follow_retention(self) -> None:
        """A ``ModelCheckpoint`` saved, and its ``keep_checkpoint_max`` may have deleted older files: a pinned
        checkpoint is read from its link from now on; the others whose file is gone are marked ``deleted``
        (a quarantined one stays quarantined, its reason saying the file is gone);
        a file not pinned yet (the new one, or one an asynchronous save had not written at the last look) is
        pinned while it is pending or the newest healthy. Also run before a rollback and at train end (a
        file may go after the last save seen)."""
        pins, newest = {id(e): link for e, link, _ in self._pins}, self.ledger.last_healthy_step
        for e in self.ledger.entries:
            if e.status == QUARANTINED and _GONE not in e.reason and not os.path.exists(e.path):
                self.ledger.quarantine(e, f"{e.reason}; {_GONE}")  # (the ledger says the evidence is gone)
            if e.status not in (PENDING, HEALTHY) or id(e) in pins and e.path == pins[id(e)]:
                continue
            if not os.path.exists(e.path):
                if id(e) in pins:
                    self.ledger.moved(e, pins[id(e)])
                elif e.path.startswith(str(self.own_dir)):
                    self.ledger.quarantine(e, "file deleted (not by the monitor, which keeps its own)", DELETED)
                else:
                    self.ledger.quarantine(e, "file deleted (checkpoint retention)", DELETED)
            elif id(e) not in pins and (e.status == PENDING or e.step == newest):
                self._pin(e)

    def _pin(self, entry: CheckpointEntry) -> None:
        """Keep ``entry``'s file safe from retention: a hard link under ``own_dir/kept/`` (no disk space while
        the original exists; a copy when the folders are on different file systems). :meth:`unpin` releases
        it once it cannot become the newest healthy checkpoint any more."""
        if entry.path.startswith(str(self.own_dir)) or not os.path.isfile(entry.path):
            return  # the monitor's own checkpoints are never deleted; folders (iteration_*) are not pinned
        link = self.own_dir / "kept" / f"{len(self.ledger.entries)}-{os.path.basename(entry.path)}"  # unique
        try:
            link.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(entry.path, link)
            except OSError:  # another file system (or no hard links there): a copy
                shutil.copyfile(entry.path, link)
        except OSError as exc:
            logger.error("checkpoint {} not kept from retention ({}); retention may delete it", entry.path, exc)
            return
        self._pins.append((entry, str(link), entry.path))

    def unpin(self) -> None:
        """Release the pins of checkpoints that are neither pending nor the newest healthy one; one whose
        original retention deleted is then ``deleted`` too."""
        newest, pins = self.ledger.last_healthy_step, []
        for pin in self._pins:
            e, link, original = pin
            if e.status == PENDING or (e.status == HEALTHY and e.step == newest):
                pins.append(pin)
                continue
            Path(link).unlink(missing_ok=True)
            if e.path == link:
                self.ledger.moved(e, original)
                if e.status != QUARANTINED:
                    self.ledger.quarantine(e, "file deleted (checkpoint retention)", DELETED)
        self._pins = pins
