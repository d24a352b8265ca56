"""``TrainingMonitor``: the MindSpore callback that feeds the engine, exports metrics and rolls back."""
from __future__ import annotations

import itertools
import math
import os
import re
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import mindspore as ms
from mindspore.train import Callback

from training_monitor.alerts import AlertsConfig, AlertSender
from training_monitor.config import MonitorConfig
from training_monitor.engine import Engine
from training_monitor.eventlog import EventLog, said
from training_monitor.file_sd import remove_file_sd_target, write_file_sd_target
from training_monitor.files import lock, unlock
from training_monitor.flops import ModelFlops, mfu
from training_monitor.hardware import peak_flops
from training_monitor.ledger import DELETED, HEALTHY, PENDING, CheckpointEntry, Ledger, read_ledger
from training_monitor.log import logger
from training_monitor.metrics import Metrics
from training_monitor.mindformers_layout import write_health_json, write_iteration_status
from training_monitor.policy import FAR, Decision, RollbackPolicy
from training_monitor.record import StepRecord
from training_monitor.recordlog import RecordLog
from training_monitor.replay.fields import evaluation_loss
from training_monitor.resume import ChangedCheckpoint, NoCheckpoint, NotLoaded, ResumeError, restore, trajectory
from training_monitor.ruleset import Rules
from training_monitor.schema import ConfigError
from training_monitor.sinks import EventList, LoggedEvents, Sink, overrides
from training_monitor.watchdog import Watchdog

from .checkpoints import ModelCheckpointFiles
from .consensus import RankConsensus, communication_ready, rank_own_rules
from .data import SkippableSource, find_skippable
from .lr import lr_reader, lr_scale_parameters, schedule_scales, set_lr_scale
from .outputs import read_step_outputs
from .peers import evaluators, hook_eval, hook_lr_function, hook_step_end, nan_checks, schedulers, unhook
from .rollback import (
    global_step,
    holds_checkpoint,
    lr_scale,
    nonfinite_parameters,
    restore_train_state,
    save_train_state,
    train_optimizer,
)

# the project's own packages: strict mode raises the errors their modules log (see TrainingMonitor._strict)
_PACKAGES = {Engine.__module__.split(".")[0], __name__.split(".")[0]}
_NOTHING = nullcontext()
# why no rollback can be done, said at train begin and again when one is needed
_NONE_SAVED = "no checkpoint is saved: checkpoint_every is 0 and there is no ModelCheckpoint callback"
_INSTANCES = itertools.count(1)  # the monitors of this process, for each one's own ledger and checkpoint folder


class MonitorFailure(RuntimeError):
    """A monitor failure raised into the trainer because ``strict`` is set; the message is the logged error."""


def _env_rank() -> int:
    return int(os.environ.get("RANK_ID", os.environ.get("RANK", "0")) or 0)


def local_rank(rank: int) -> int:
    """This process's rank within its node: ``LOCAL_RANK``, else MindSpore's communication API once it is
    initialised, else ``rank``."""
    if os.environ.get("LOCAL_RANK", "").isdigit():
        return int(os.environ["LOCAL_RANK"])
    if not communication_ready():  # (get_local_rank() says 0 before init(): every rank would take one port)
        return rank
    try:
        from mindspore.communication import get_local_rank

        return get_local_rank()
    except Exception:
        return rank


def detect_device() -> str | None:
    """The accelerator's model name: Ascend SoC name from pyACL, a GPU name from MindSpore; else the device
    target (``CPU``: no peak FLOP/s, so no MFU); None when detection failed."""
    target = ms.get_context("device_target")
    try:
        if target == "Ascend":
            import acl  # pyACL, shipped with the Ascend toolkit

            return acl.get_soc_name()
        if target == "GPU":
            return ms.hal.get_device_name(0)
    except Exception as exc:  # detection is best effort; the table lookup then warns once
        logger.warning("device name not detected on {} ({!r})", target, exc)
        return None
    return target


class OwnAlerts(Sink):
    """The alerts a rank other than 0 sends under ``ranks: rank0``: those of ``rules`` only, the rules judged on
    its own measurements (:func:`training_monitor.callbacks.consensus.rank_own_rules`: a slow data loader on
    one node shows on that node alone); rank 0 sends the rest, which the consensus makes the same everywhere."""

    def __init__(self, alerts: AlertSender, rules: frozenset[str]):
        self.alerts, self.rules = alerts, rules

    def on_action(self, events: list, action: str) -> None:
        own = [e for e in events if e.rule in self.rules]
        if own:
            self.alerts.on_action(own, action)


class TrainingMonitor(Callback):
    """Per-step metrics, anomaly rules and automatic rollback for ``Model.train`` (MindSpore/MindFormers).

    Use it as ``Model.train(..., callbacks=[TrainingMonitor(...)])``, from a MindFormers YAML
    ``callbacks: - type: TrainingMonitor`` entry (its other keys are the settings), or from a settings
    file: ``TrainingMonitor("monitor.yaml")``; a functional training loop drives it through
    :class:`training_monitor.callbacks.LoopMonitor`. Settings are those of
    :class:`training_monitor.config.MonitorConfig`; keyword arguments override the file or dict.

    Each step becomes a :class:`training_monitor.record.StepRecord` (loss, grad norm, loss scale, overflow, LR,
    step time, data wait, tokens) for the engine and for ``/metrics``. Events go to
    ``<output_dir>/events_rank<r>.jsonl``, and the run's first ones (:data:`training_monitor.sinks.MAX_EVENTS`)
    stay in ``kept.events``. When a rule asks for a rollback, the newest healthy checkpoint
    before the onset is loaded into the train network (weights, optimizer state, global step, loss scale),
    the LR multiplier is scaled by ``lr_factor``, and training continues in the same process; the data
    iterator is not rewound, so the batches consumed since that checkpoint are not seen again (the
    rollback record's ``skipped_batches`` gives their 1-based positions in the data stream, first and
    last). A rule whose actions include ``skip_batches`` also skips its ``skip_extra_batches`` further
    batches ahead of the data reader when the dataset is fed by a :class:`training_monitor.callbacks.SkippableSource`
    (found in the pipeline by itself); the event log records the skipped positions. Past
    ``max_rollbacks`` the run is stopped (``stop_reason`` says why) and, with ``exit_on_stop``, the
    process exits with status 1 and that reason once ``Model.train`` has wound
    down. A rollback that is needed and cannot be done (no loadable healthy checkpoint, an LR that cannot
    be scaled in place) stops the run the same way unless ``on_failed_rollback`` is ``continue``. Each
    process keeps its own ledger (``ledger_rank<r>.json``; an older one is renamed
    ``ledger_rank<r>.before-<instance>.json``) and checkpoint folder
    (``checkpoints/rank_<r>/<instance>/``); the monitor deletes none of its checkpoints. ``ModelCheckpoint``
    files are followed through retention (``keep_checkpoint_max``) and hard-linked under ``kept/`` there
    while they may become the newest healthy one. Checkpoints are checksummed in the background and verified
    before a load. A job restarted from a checkpoint of the same run (``resume_from``) takes up that
    checkpoint's step, detector windows and earlier checkpoints (:mod:`training_monitor.resume`). Callbacks that
    raise on a NaN step (MindSpore's ``LossMonitor``, MindFormers' ``TrainingStateMonitor``) are found at
    train begin: the monitor judges each step before them and they skip the steps it rolled back or stops
    at (:mod:`training_monitor.callbacks.peers`). With more than one rank, the step values are reduced across ranks
    first (:class:`training_monitor.callbacks.consensus.RankConsensus`), so every rank decides the same.

    ``count_tokens(cb_params) -> int``, when given, counts the real tokens of each step over all
    data-parallel ranks (for example the loss-mask sum when padding is masked) instead of the fixed
    ``tokens_per_step``; what it reads from the device is its own cost.

    Monitor failures are logged and survived unless ``strict`` is set (then :class:`MonitorFailure`).

    Raises:
        training_monitor.schema.ConfigError, training_monitor.ruleset.RulesError: bad settings, at construction.
        MonitorFailure: with ``strict``, a failure logged at construction (an unwritable ``output_dir``).
    """

    def __init__(self, config: MonitorConfig | dict | str | Path | None = None,
                 count_tokens: Callable[[Any], int] | None = None, **settings):
        super().__init__()
        self._count_tokens = count_tokens
        if isinstance(config, (str, Path)):
            if not os.path.exists(config) and not str(config).endswith((".yaml", ".yml")):
                raise ConfigError(f"{config}: no such settings file (the first argument is a settings file; "
                                  f"name the run with run={str(config)!r})")
            cfg = MonitorConfig.from_yaml(config)
        else:
            cfg = config if isinstance(config, MonitorConfig) else MonitorConfig.from_dict(config)
        if settings:
            cfg = MonitorConfig.from_dict({**cfg.__dict__, **settings},
                                          "TrainingMonitor arguments (or a MindFormers callbacks entry's keys)")
        self.cfg = cfg
        with self._strict():
            self._setup(cfg)

    def _setup(self, cfg: MonitorConfig) -> None:
        self.rank = _env_rank() if cfg.rank is None else cfg.rank
        rules = Rules.load(cfg.rules) if not isinstance(cfg.rules, dict) else Rules(cfg.rules)
        self.instance = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{next(_INSTANCES)}"
        self._held: str | None = None  # the lock file of this rank's files in the output folder (see _claim)
        self._lock_file: str | None = None  # ... held or not (given up at train end, taken again at the next begin)
        out = self.output_dir = self._claim(Path(cfg.output_dir))
        self.event_log = EventLog(str(out / f"events_rank{self.rank}.jsonl"))
        self.record_log = RecordLog(str(out / f"records_rank{self.rank}.csv")) if cfg.record_log else None
        self.world_size = cfg.world_size or int(os.environ.get("RANK_SIZE", "1") or 1)
        self.metrics = Metrics(cfg.run, self.rank, self.world_size, rules.rules)
        self._flops_per_token = cfg.model_flops_per_token()
        self._peak = None
        if self._flops_per_token is not None:
            self._peak = peak_flops(cfg.device or detect_device(), cfg.peak_tflops)
        self._model_checked = self._flops_per_token is not None  # (else: from the network's config, at train begin)
        self.metrics_url: str | None = None
        self.alerts: AlertSender | None = None
        if cfg.alerts is not None:
            alerts_cfg, problems = AlertsConfig.load(cfg.alerts, "alerts")
            for problem in problems:
                logger.error(problem)
            if alerts_cfg.sinks:
                self.alerts = AlertSender(alerts_cfg, cfg.run)
                self.metrics.alert_stats = self.alerts.stats
        self.kept = EventList()  # the run's first events (MAX_EVENTS), for whoever drives the training
        self._own: tuple = (None, None)  # under consensus: this rank's own loss and grad norm of the step judged
        sinks = [self.event_log, LoggedEvents(self._own_values, cfg.rollback), self.metrics, self.kept,
                 self.record_log]
        if self.alerts is not None and (self.rank == 0 or self.alerts.config.ranks == "all"):
            sinks.append(self.alerts)  # a step's alerts; every rank sends its stalls (see _on_stall)
        elif self.alerts is not None:  # the rules on this rank's own measurements: rank 0 cannot see them
            sinks.append(OwnAlerts(self.alerts, rank_own_rules()))
        sinks = [s for s in sinks if s is not None]
        self.engine = Engine(rules, [s for s in sinks if overrides(s, "on_event")])
        self._on_record = [s.on_record for s in sinks if overrides(s, "on_record")]
        self._on_action = [s.on_action for s in sinks if overrides(s, "on_action")]
        # A new process (or a new monitor in this one) starts a new ledger and checkpoint folder: the previous
        # one's checkpoints hold another trajectory (perhaps another run) and must never be rolled back to by
        # step number.
        ledger = out / f"ledger_rank{self.rank}.json"
        if ledger.exists():
            if (earlier := self._ledger_run(ledger)) not in (None, cfg.run):
                logger.warning("{} holds run {!r} (its ledger); run {!r} appends its records and events to the same "
                               "logs, which a replay reads as one run: give each run its own output_dir", out,
                               earlier, cfg.run)
            ledger.rename(out / f"ledger_rank{self.rank}.before-{self.instance}.json")
        self.ledger = Ledger(str(ledger), cfg.healthy_after, self._mirror_to_mindformers, cfg.run, checksums=True)
        self.resumed = None  # set at the first begin when resume_from names a checkpoint of this run
        self._resume_from = cfg.resume_from  # (its {rank} stands for the rank: resume.checkpoint_file)
        self.ckpt_dir = out / "checkpoints" / f"rank_{self.rank}" / self.instance
        self.model_checkpoints = ModelCheckpointFiles(self.ledger, self.ckpt_dir, self._lineage)
        self.policy = RollbackPolicy(self.ledger, cfg, cfg.rollback, cfg.on_failed_rollback,
                                     {rule: c.skip_extra_batches for rule, c in rules.rules.items()},
                                     self.model_checkpoints.follow_retention)
        self.rollbacks = self.policy.rollbacks  # what was done: {"at_step", "to_step", "lr_multiplier", ...}
        self.stop_reason: str | None = None
        self.last_record: StepRecord | None = None
        self._prev_trainer_step = 0
        self._batches_before = 0  # batches the earlier train calls of this monitor consumed (see _continue)
        # perf_counter() seconds of the step marks, and the later callbacks' seconds (None: not yet)
        self._t_begin: float | None = None
        self._t_end: float | None = None
        self._t_judged: float | None = None
        self._callbacks_s: float | None = None
        self._slow: str | None = None  # why the next step is slow (the monitor's own save, rollback or resume)
        self._epoch = None
        self._tokens = cfg.tokens_per_step
        self._watchdog: Watchdog | None = None
        self._consensus: RankConsensus | None = None
        self._sd_file: str | None = None
        self._sd_port = 0
        self._source: tuple[SkippableSource, int] | None = None  # (find_skippable)
        self._judged: int | None = None  # trainer step (cur_step_num) the monitor has judged
        self._undone: int | None = None  # trainer step a rollback undid or the run stops at
        self._finite_at = 0  # the last step whose weights were checked finite (_weights_finite)
        self._hooked: list = []  # other callbacks whose step end the monitor wraps (training_monitor.callbacks.peers)
        self._recovery_checked = False
        self._read_lr: Callable[[], float | None] | None = None  # lr_reader(..): for cells not outputting it
        self._idle = False  # another TrainingMonitor earlier in this train call's callback list monitors it
        self._unsaved: str | None = None  # why the monitor's last checkpoint was not written (None: it was)

    # MindSpore callback API -------------------------------------------------------------------------
    def on_train_begin(self, run_context):
        self._guard(self._begin, run_context)

    def on_train_step_begin(self, run_context):
        self._t_begin = time.perf_counter()

    def on_train_step_end(self, run_context):
        if not self._idle:
            self._judge(run_context)

    def on_eval_end(self, run_context):
        """``Model.fit`` evaluated (``valid_dataset``): its results (``cb_params.eval_results``) are judged."""
        if not self._idle:
            self._guard(lambda rc: self.evaluated(rc.original_args().get("eval_results") or {}), run_context)

    def on_train_end(self, run_context):
        self._unhook_peers()
        self._guard(self._end, run_context)
        if self.stop_reason and self.cfg.exit_on_stop:
            raise SystemExit(f"training-monitor: stopped the run: {self.stop_reason}")

    def __exit__(self, *err):
        """``Model.train`` leaves its callbacks' context, also when training raised: unhook the others. An
        exception that ends training (not the monitor's own stop or failure, not an interrupt) is reported
        (:meth:`_crashed`)."""
        self._unhook_peers()
        exc_type, exc, tb = (*err, None, None, None)[:3]
        if exc_type is not None and issubclass(exc_type, Exception) and not issubclass(exc_type, MonitorFailure):
            self._guard(lambda _: self._crashed(exc, tb), None)

    def _crashed(self, exc: BaseException, tb) -> None:
        """Training raised ``exc`` (``Model.train`` does not end its callbacks then): a ``trainer_crash`` event at
        the last step judged, the traceback (its last 8000 characters) as details, alerted by every rank (the
        crash may be any rank's own), then what the end of training does (the record log written out, the
        ledger's checksums, the event log closed) but the file_sd target stays: a post-mortem finds the step it
        died at and why, and Prometheus sees the exporter go down with the process (``TrainingExporterDown``)."""
        step = self.last_record.step if self.last_record is not None else 0
        first = next((line.strip() for line in str(exc).splitlines() if _SAYS.match(line)), "")[:300]
        text = "".join(traceback.format_exception(type(exc), exc, tb))[-8000:]
        event = self.engine.report("trainer_crash", step, None, f"training raised {type(exc).__name__} after step "
                                   f"{step}: {first}", self.rank, "monitor", text)
        if self.alerts is not None:
            self.alerts.on_action([event], "training ended")
        self._end(None, crashed=True)

    # ------------------------------------------------------------------------------------------------
    def evaluated(self, results: dict) -> list:
        """An evaluation after the last step judged: ``results``, metric name -> value (MindSpore's
        ``eval_results``, MindFormers' evaluation output); its loss (the first name the replay alias table reads
        as a loss, :func:`training_monitor.replay.fields.evaluation_loss`) is judged by the engine's evaluation
        rules (``eval_loss_spike``, ``eval_nan``), as replay judges a log's evaluation lines. Their events are
        logged and alerted; a rollback, skip or stop they ask for is not carried out (those act on step records),
        and a warning says so. Returns the events."""
        loss = evaluation_loss(results)
        if loss is None or self.last_record is None:
            return []
        events = self.engine.evaluate(self.last_record.step, loss, self.rank)
        for e in events:
            if set(e.actions) - {"alert"}:
                asked = ", ".join(a for a in e.actions if a != "alert")
                logger.bind(report=True).warning(f"{e.rule} at step {e.step} asks for {asked}: not carried out on an "
                                                 "evaluation (alerted only); act on it by hand")
        if events:
            for on_action in self._on_action:
                on_action(events, "alerted")
        return events

    def _unhook_peers(self) -> None:
        for peer in self._hooked:
            unhook(peer)
        self._hooked = []

    @staticmethod
    def _ledger_run(path: Path) -> str | None:
        """The run the ledger file ``path`` names; None when it names none or is no ledger."""
        try:
            return read_ledger(str(path))[0]
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    @property
    def _batches(self) -> int:
        """Batches consumed by this monitor's train calls, rolled-back steps' included: the trainer's step counted
        over them, its last ``cb.cur_step_num`` after the steps of the calls before (and the trainer's initial step:
        :meth:`_initial_step`; a script calling
        ``Model.train(1, ..)`` once an epoch: its second call's step 1 follows the first call's last). Events
        name it as their ``trainer_step`` where it is not the monitor's step (after a rollback), so a console
        log's ``LossMonitor`` lines, numbered on by replay, agree with them."""
        return self._batches_before + self._prev_trainer_step

    @property
    def trainer_step(self) -> int:
        """The trainer's own step count (``cb_params.cur_step_num``): steps run, rolled-back ones included."""
        return self._prev_trainer_step

    def close(self) -> None:
        """Stop the watchdog and ``/metrics``, remove the file_sd target, close the event log, and give the
        alert sinks up to 5 s to deliver what is queued."""
        self._finish()
        self.metrics.close()
        if self.alerts is not None:
            stats = self.alerts.close(5.0)
            logger.info("alert delivery: {}", stats)

    def _end(self, _run_context, crashed: bool = False) -> None:
        self.model_checkpoints.follow_retention()
        if self.last_record is not None:
            logger.info(self._summary(self.last_record.step))
        self._finish(crashed)

    def _summary(self, step: int) -> str:
        """What this train call's monitoring came to, in one line: the ``step`` it ended at (the monitor's), the
        trainer's step when it differs, the events by rule, the rollbacks and the stop (``rank 0: training ended at
        step 45 (trainer step 60): 1 event(s) (nan_inf x1), 1 rollback(s); event log ..``)."""
        rules = Counter(e.rule for e in self.kept.events)  # (the first MAX_EVENTS; the rest counted)
        n = sum(rules.values()) + self.kept.events_dropped
        events = f"{n} event(s) ({', '.join(f'{r} x{k}' for r, k in rules.most_common())})" if n else "no event"
        trainer = f" (trainer step {self.trainer_step})" if self.trainer_step != step else ""
        stop = f"; stopped: {self.stop_reason}" if self.stop_reason else ""
        return (f"rank {self.rank}: training ended at step {step}{trainer}: {events}, "
                f"{len(self.rollbacks)} rollback(s){stop}; event log {self.event_log.path}")

    def _own_values(self) -> str:
        """This rank's own loss and grad norm of the step judged, as text ("" without consensus): the event
        carries the ranks' mean, this rank's log line says what this rank saw."""
        loss, norm = self._own
        if loss is None:
            return ""
        return f"this rank's own loss {loss:.6g}" + ("" if norm is None else f", grad norm {norm:.6g}")

    def _claim(self, out: Path) -> Path:
        """The folder this monitor writes its rank's files in: ``out``, locked for this rank from now to the end
        of training (:func:`training_monitor.files.lock` on ``.rank<r>.lock``), or, when another process holds
        that lock (a second run, or a run not yet stopped, given the same ``output_dir``: their record logs
        would interleave and the newcomer would take over the other's ledger), a folder of its own below it,
        ``rank<r>-<instance>``, with an error saying so. The monitors of one process share the lock. An
        unwritable folder is reported by the files written there."""
        own = out / f"rank{self.rank}-{self.instance}"
        for folder in (out, own):
            try:
                folder.mkdir(parents=True, exist_ok=True)
                lock_file = str(folder / f".rank{self.rank}.lock")
                holder = lock(lock_file)
            except OSError:
                return folder
            if holder is None:
                self._held = self._lock_file = lock_file
                return folder
            logger.error("{}: rank {}'s files there are in use by process {} (another monitored run on this "
                         "output_dir); this monitor writes to {} instead. Give each run its own output_dir",
                         out, self.rank, holder, own)
        return own

    def _finish(self, crashed: bool = False) -> None:
        """The end of training: the file_sd target is removed unless training ``crashed`` (Prometheus then sees the
        exporter go down with the process: ``TrainingExporterDown``)."""
        if self.alerts is not None and not self.alerts.flush(5.0):
            logger.error("alerts not all delivered at the end of training: {}", self.alerts.stats())
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        if self._sd_file and not crashed:
            remove_file_sd_target(self._sd_file, self._sd_port)
        self._sd_file = None
        if self.last_record is not None:  # saved at the last step, or by a ModelCheckpoint's end() before ours
            self.model_checkpoints.ledger_new(self.last_record.step, self._batches)
        # the last checksums land in the ledger file before training returns: a monitor made next in this
        # process takes that file over (the process's exit would wait for them all the same)
        self.ledger.wait()
        self.event_log.close()
        if self.record_log is not None:
            self.record_log.close()
        if self._held is not None:  # training is over: a monitor made next (this process or another) may take over
            unlock(self._held)
            self._held = None

    def _guard(self, fn, run_context):
        try:
            with self._strict():
                fn(run_context)
        except Exception as exc:
            if self.cfg.strict:
                raise
            logger.opt(exception=exc).error("training monitor failed at this step (training goes on): {!r}", exc)

    def _strict(self):
        """With ``strict``, a context that raises :class:`MonitorFailure` for the first error that the project's
        modules log in this thread meanwhile (a taken metrics port, an unwritable event log or ledger, ...);
        else one that does nothing (a shared ``nullcontext``: the hot path pays no generator)."""
        return self._raise_logged_errors() if self.cfg.strict else _NOTHING

    @contextmanager
    def _raise_logged_errors(self):
        caught: list = []
        thread = threading.get_ident()
        sink = logger.add(caught.append, level="ERROR", format="{message}", filter=lambda r: (
            r["thread"].id == thread and r["name"].split(".")[0] in _PACKAGES and not r["extra"].get("report")))
        try:
            yield
        finally:
            logger.remove(sink)
        if caught:
            raise MonitorFailure(f"strict: {caught[0].strip()}")

    def _judge(self, run_context) -> None:
        """Judge this step once: at the monitor's place in the callback list, or before it, when a callback
        that raises on a NaN step comes first (see :mod:`training_monitor.callbacks.peers`)."""
        step = run_context.original_args().cur_step_num
        if step != self._judged:
            self._judged = step
            self._guard(self._step_end, run_context)

    def _skip_peer(self) -> bool:
        """A NaN-raising callback skips its step end on a step the monitor rolled back or stops at."""
        return self._undone is not None and self._undone == self._judged

    def _skip_loss_check(self) -> bool:
        """A callback that raises on a non-finite loss alone (``LossMonitor``) skips it on such a step only when
        the loss is not finite: with a finite one its line is printed, and the log keeps a spike rolled back."""
        rec = self.last_record
        return self._skip_peer() and not (rec is not None and rec.loss is not None and math.isfinite(rec.loss))

    def _stamp_step_end(self) -> None:
        # after the last callback: data wait excludes the callbacks' time, which the next record carries
        self._t_end = time.perf_counter()
        if self._t_judged is not None:
            self._callbacks_s, self._t_judged = self._t_end - self._t_judged, None

    def _begin(self, run_context):
        cb = run_context.original_args()
        cfg = self.cfg
        first = next((c for c in cb.list_callback if isinstance(c, TrainingMonitor) and c.rank == self.rank), self)
        self._idle = first is not self
        if self._idle:  # two would both roll back (the LR cut twice) and write the same record log and ledger
            message = (f"two TrainingMonitor callbacks of rank {self.rank} in one callback list: this one "
                       f"({self.output_dir}) does nothing in this train call, the one before it ({first.output_dir}) "
                       f"monitors the run; give the list one TrainingMonitor")
            if cfg.strict:
                raise MonitorFailure(f"strict: {message}")
            logger.bind(report=True).error(message)
            return
        if self.last_record is not None:
            self._continue(cb, self.last_record.step)
        if self.stop_reason:
            logger.bind(report=True).error("this monitor stopped the run ({}); a new train call is stopped after its "
                                           "first step", self.stop_reason)
            run_context.request_stop()
        serves = cfg.metrics_port is not None and (cfg.export_ranks == "all" or self.rank == 0)
        if self.metrics_url is None and serves:
            port = cfg.metrics_port + local_rank(self.rank) if cfg.metrics_port else 0
            self.metrics_url = self.metrics.serve(cfg.metrics_host, port)
            if self.metrics_url:
                logger.info("rank {} metrics at {}", self.rank, self.metrics_url)
        if self.metrics_url and cfg.file_sd_dir and not self._sd_file:
            self._sd_port = self.metrics.server.port
            self._sd_file = write_file_sd_target(cfg.file_sd_dir, cfg.run, self.rank, cfg.metrics_host,
                                                 self._sd_port)
        if self.world_size > 1 and cfg.consensus is not False and self._consensus is None:
            if communication_ready():
                self._consensus = RankConsensus(self.world_size)
            else:
                logger.error("world size {} but MindSpore's communication is not initialised (call "
                             "mindspore.communication.init() before training): the ranks' steps are judged each "
                             "on its own (no consensus), so they may decide differently", self.world_size)
        stall = self.engine.rules.rules["stall"]
        if cfg.watchdog and stall.enabled and self._watchdog is None:
            p = stall.params
            self._watchdog = Watchdog(self._on_stall, p["factor"], p["min_seconds"], p["startup_seconds"],
                                      p["startup_steps"]).start()
        if self.last_record is None:
            self._batches_before = self._initial_step(cb)
        self._prev_trainer_step = cb.cur_step_num
        if self._resume_from is not None:  # detector windows and ledger of the run, on every rank or none
            try:
                consensus = self._consensus
                self.resumed = restore(self.engine, self.ledger, self._resume_from, cfg.output_dir, self.rank,
                                       cfg.run, self.record_log, consensus.all_ok if consensus else None,
                                       lambda path: self._holds(cb, path),
                                       (lambda n: consensus.least(n, self.rank)) if consensus else None)
            except ResumeError as exc:
                self._not_resumed(run_context, cb, exc)
            self._resume_from = None
            if self.resumed:  # this process's first step follows the checkpoint's
                self.engine, self._slow = self.resumed.engine, "resume"
                self.policy.carry(self.resumed.entry)
                self._carry_lr_scale(cb.train_network)
                entry = self.resumed.entry  # the trainer counts the batches consumed, rolled-back steps' too
                saved = entry.step if entry.batches_consumed is None else entry.batches_consumed
                if 0 < self._batches_before != saved:
                    logger.bind(report=True).error(
                        "the trainer resumed at step {} but resume_from is the checkpoint of step {}{} ({}): the "
                        "detectors and the rollback targets are that step's, not the weights loaded; give "
                        "resume_from the file the trainer loads", self._batches_before, saved,
                        "" if saved == entry.step else f" (the monitor's step {entry.step}, after a rollback)",
                        self.resumed.path)
                self.engine.offset = self._batches - entry.step
                self.metrics.set_healthy(self.ledger.last_healthy_step)
                self._check_resumed_steps(run_context, entry.step, self.resumed.path)
                self._check_resumed_weights(run_context, cb.train_network, self.resumed)
        elif self.last_record is None and (loaded := global_step(cb.train_network, cb.get("optimizer"))):
            logger.warning("the network's global step is {} at the start: if this job resumed from a checkpoint, set "
                           "resume_from to it, or the detectors start empty and no checkpoint from before the "
                           "restart is a rollback target", loaded)
        elif self.last_record is None and self.record_log is not None and self.record_log.inherited:
            logger.warning("{} holds the records of an earlier process; this one's follow them without its state "
                           "(no resume_from), and a replay reads them as a restart: give a new run its own "
                           "output_dir, or set resume_from to the checkpoint this job resumed from",
                           self.record_log.path)
        self._source = find_skippable(cb.get("train_dataset"))
        checks = self._hook_peers(cb.list_callback)
        # the monitor judges a step at its place in the list or at a NaN check before it
        mine = min((i for i, c in enumerate(cb.list_callback) if c is self or c in checks), default=0)
        self.model_checkpoints.follow(cb.list_callback, mine)
        self._read_lr = self._optimizer_lr(cb)
        self._check_recovery(cb)
        if not self._model_checked:
            self._model_checked = True
            self._network_flops(cb.get("network") or cb.train_network)

    def _network_flops(self, network) -> None:
        """No model given (``flops_per_token``, ``n_params``, ``model_config``): the FLOPs per token from the
        config of the MindFormers model in ``network`` (a cell's ``config`` with ``num_layers``, its
        ``to_dict()`` read as ``model_config``); none there, or one the count cannot use: MFU is not exported,
        with a warning saying why."""
        why = "no model given (flops_per_token, n_params or model_config) and no MindFormers model config found"
        try:
            configs = (getattr(c, "config", None) for _, c in network.cells_and_names())
            found = next((c for c in configs if hasattr(c, "num_layers") and callable(getattr(c, "to_dict", None))),
                         None)
            if found is not None:
                flops = ModelFlops.from_mindformers(found.to_dict()).per_token()
                self._flops_per_token = flops
                self._peak = peak_flops(self.cfg.device or detect_device(), self.cfg.peak_tflops)
                logger.info("MFU from the network's model config: {:.4g} FLOPs per token", flops)
                return
        except Exception as exc:  # (a config the count cannot use, or a network that cannot be walked)
            why = f"the network's model config: {exc!r}"
        logger.warning("MFU is not exported: {}", why)

    @staticmethod
    def _initial_step(cb) -> int:
        """The trainer's steps before its count ``cb.cur_step_num`` starts, as its own loss monitor numbers its
        lines: MindFormers' resume gives ``MFLossMonitor`` the resumed step as ``initial_step`` and restarts
        ``cur_step_num`` at 1 (its lines print their sum); MindSpore's ``Model`` sets ``cb_params.initial_step``
        when it restarts a step itself (then counted in ``cur_step_num``: 0). 0 when no callback says."""
        given = cb.get("initial_step")
        if given is None:
            given = next((c.initial_step for c in cb.list_callback if isinstance(getattr(c, "initial_step", None), int)
                          and not isinstance(c.initial_step, bool)), 0)
        return int(given)

    def _carry_lr_scale(self, train_network) -> None:
        """Resumed: the LR multiplier of the run's rollbacks is in force. A loader that leaves the
        :class:`~.lr.ScaledLearningRate` scale out (MindFormers' resume loads the optimizer's parameters, not
        ``monitor_lr_scale``) starts the schedule at x1: the scale is set to the multiplier, with a warning."""
        multiplier = self.policy.multiplier
        scales = schedule_scales(train_network)
        if scales and any(abs(float(p.asnumpy()) - multiplier) > 1e-6 * multiplier for p in scales):
            logger.warning("resumed: the LR scale loaded is x{:g}, the run's rollbacks left x{:g}: set to x{:g}",
                           float(scales[0].asnumpy()), multiplier, multiplier)
            set_lr_scale(scales, multiplier)

    @staticmethod
    def _holds(cb, path: str) -> bool:
        """The train network holds the weights of checkpoint ``path`` (:func:`~.rollback.holds_checkpoint`); with
        no optimizer to compare them by, taken on trust."""
        try:
            return holds_checkpoint(cb.train_network, cb.get("optimizer"), path)
        except TypeError:
            return True

    def _not_resumed(self, run_context, cb, exc: ResumeError) -> None:
        """``resume_from`` could not be restored (:func:`~training_monitor.resume.restore`): the run goes on
        afresh. No checkpoint there yet is a first start (said at INFO; a warning when the trainer did resume
        from somewhere: its global step or initial step is not 0); otherwise the event log records why, and a
        checkpoint written over since it was saved stops the run as a failed rollback does (the weights loaded
        are not its step's; ``on_failed_rollback: continue`` trains on them). The trainer not resuming from it
        (the network does not hold its weights: a fresh start with a config that names it) is a warning."""
        checkpoint = self._resume_from
        if isinstance(exc, NoCheckpoint):
            resumed = self._batches_before or global_step(cb.train_network, cb.get("optimizer"))
            (logger.bind(report=True).warning if resumed else logger.info)(
                "resume from {}: {}; the run starts afresh{}", checkpoint, exc,
                " although the trainer resumed from a checkpoint: give resume_from the file it loads" if resumed
                else " (no checkpoint saved there yet)")
            return
        self.event_log.write({"action": "resume_failed", "checkpoint": checkpoint, "reason": str(exc),
                              "rank": self.rank, "time": time.time()})
        if isinstance(exc, ChangedCheckpoint) and self.cfg.on_failed_rollback == "stop":
            self._stop(run_context, f"resumed from a checkpoint written over since it was saved: {exc} (the weights "
                                    "loaded are not that step's)")
            return
        then = ("; training goes on with the weights loaded (on_failed_rollback: continue)"
                if isinstance(exc, ChangedCheckpoint) else "")
        report = logger.bind(report=True)
        (report.warning if isinstance(exc, NotLoaded) else report.error)(
            "resume from {}: run state not restored ({}); the detectors start empty and no checkpoint from before "
            "the restart is a rollback target{}", checkpoint, exc, then)

    def _continue(self, cb, last_step: int) -> None:
        """A train begin after a train end (``Model.train`` called again, as a loop of one epoch's training and an
        evaluation does; another ``LoopMonitor`` block): the same run goes on. Its steps are numbered on from
        the last one judged (the trainer counts each call's steps from ``cb.cur_step_num`` again), its files are
        written again, and the first step's wait is not measured from the last call's end (an evaluation came
        between); the first step may compile: its slowness is known."""
        self._batches_before += self._prev_trainer_step - cb.cur_step_num  # (0 when the trainer counts on)
        self._prev_trainer_step = cb.cur_step_num
        self.engine.offset = self._batches - last_step
        self._judged = self._undone = None
        self._t_begin = self._t_end = self._t_judged = None
        self._epoch, self._slow = None, "epoch"
        self.event_log.open()
        if self.record_log is not None:
            self.record_log.open()
        if self._lock_file is not None and self._held is None and lock(self._lock_file) is None:
            self._held = self._lock_file

    def _hook_peers(self, callbacks: list) -> list:
        """Judge each step before a NaN-raising callback sees it, let that callback skip the steps the monitor
        undid, stamp the step's end after the last callback (data wait then excludes the callbacks), and judge
        the evaluations of MindFormers' ``EvalCallBack``. Returns the NaN-raising callbacks."""
        checks = nan_checks(callbacks)
        for peer, what, loss_only in checks:
            if self.cfg.rollback:
                logger.info("{}: the monitor judges each step first and that check skips the steps it rolls "
                            "back or stops at", what)
            hook_step_end(peer, before=self._judge, skip=self._skip_loss_check if loss_only else self._skip_peer)
            self._hooked.append(peer)
        if callbacks:
            hook_step_end(callbacks[-1], after=self._stamp_step_end)
            self._hooked.append(callbacks[-1])
        for peer in evaluators(callbacks):  # MindFormers' evaluation in training: its results are judged too
            hook_eval(peer, lambda results: self._guard(lambda _: self.evaluated(results), None))
            self._hooked.append(peer)
        for peer in schedulers(callbacks):  # LearningRateScheduler: keeps a rollback's LR cut, the LR recorded
            hook_lr_function(peer, lambda: self.policy.multiplier, self._lr_applied)
            self._hooked.append(peer)
        return [peer for peer, _, _ in checks]

    def _lr_applied(self, lr: float) -> None:
        self._read_lr = lambda: lr

    def _saves_none(self) -> bool:
        """No checkpoint is saved: neither the monitor's own (checkpoint_every 0) nor a ModelCheckpoint's."""
        return not self.cfg.checkpoint_every and not self.model_checkpoints

    def _check_recovery(self, cb) -> None:
        """Once, at the first train begin: warn (strict: raise) when a rollback could not be done."""
        if not self.cfg.rollback or self._recovery_checked:
            return
        self._recovery_checked = True
        problems = []
        if self._saves_none():
            problems.append(_NONE_SAVED)
        elif self.cfg.checkpoint_every:
            try:
                self.ckpt_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                problems.append(f"the monitor's checkpoints cannot be written ({exc})")
        try:
            lr_scale_parameters(cb.train_network, train_optimizer(cb.train_network, cb.get("optimizer")))
        except TypeError as exc:
            problems.append(str(exc))
        then = ("stops the run (on_failed_rollback: stop)" if self.cfg.on_failed_rollback == "stop"
                else "is only reported (on_failed_rollback: continue)")
        if problems:
            message = (f"rollback is on but cannot be done: {'; '.join(problems)}. An anomaly that asks for a "
                       f"rollback {then}; set rollback: false to only report anomalies")
            if self.cfg.strict:
                raise MonitorFailure(f"strict: {message}")
            logger.warning(message)
        elif self.ledger.last_healthy_step is None:
            every, start = self.cfg.checkpoint_every, self.engine.last_step or 0
            first = f"step {(start // every + 1) * every + self.ledger.healthy_after}" if every else (
                f"{self.ledger.healthy_after} steps after the first ModelCheckpoint save")
            logger.info("the first rollback target turns healthy at {} (a checkpoint and {} clean steps after it): "
                        "an anomaly that asks for a rollback before then {}", first, self.ledger.healthy_after, then)

    @staticmethod
    def _optimizer_lr(cb):
        """:func:`~.lr.lr_reader` of the run's optimizer (None without one)."""
        opt = cb.get("optimizer") or getattr(cb.train_network, "optimizer", None)
        return lr_reader(opt) if opt is not None else None

    def _step_end(self, run_context):
        cb = run_context.original_args()
        loss, overflow, scale, lr, norm = read_step_outputs(cb.net_outputs)
        now = time.perf_counter()  # the outputs are on the host: the step's compute is over
        if lr is None and self._read_lr is not None:
            lr = self._read_lr()
        steps = max(cb.cur_step_num - self._prev_trainer_step, 1)
        self._prev_trainer_step = cb.cur_step_num
        step = self._batches - self.engine.offset
        # a ModelCheckpoint that saved since our previous step end slowed this step (in its data wait or, listed
        # before us, in its compute); a lag-1 file is the state after the previous step: ledgered now
        saved = self.model_checkpoints.ledger_new(step - 1, self._batches - 1, lag=1)
        saved = saved or self.model_checkpoints.saved(lag=0)  # ledgered after this step's record
        promotes = self.ledger.next_promotion
        check = promotes is not None and step >= promotes or saved and self.ledger.healthy_after == 0
        if self._consensus is not None:  # (the weights check is a collective: on every rank when due on one)
            self._own = (loss, norm)
            loss, norm, overflow, check = self._consensus.step_values(loss, norm, overflow, check)
        if cb.get("dataset_sink_mode"):
            step_time = (now - self._t_end) / steps if self._t_end is not None else None
            wait = None
        else:
            step_time = now - self._t_begin if self._t_begin is not None else None
            wait = self._t_begin - self._t_end if self._t_end is not None and self._t_begin else None
        self._t_end = self._t_judged = now
        callbacks_s, self._callbacks_s = self._callbacks_s, None
        tokens: int | None
        if self._count_tokens is not None:
            tokens = self._count_tokens(cb)
        else:
            if self._tokens is None:
                self._tokens = self._infer_tokens(cb)
            tokens = self._tokens or None  # (0: the batch holds no token ids)
        epoch_end = self._epoch is not None and cb.cur_epoch_num != self._epoch
        slow = self._slow or ("checkpoint" if saved else "epoch" if epoch_end else None)
        self._slow, self._epoch = None, cb.cur_epoch_num
        rec = StepRecord(step, loss, norm, scale, overflow, lr, step_time, wait, tokens, self.rank,
                         time.time(), steps, slow_reason=slow, callbacks_s=callbacks_s,
                         trainer_step=self._batches if self.engine.offset else None)
        tps = rec.tokens_per_second
        if self._peak and tps is not None:
            rec.mfu = mfu(self._flops_per_token, tps, self.world_size, self._peak)
        self.last_record = rec
        if self._watchdog is not None:
            self._watchdog.beat(step, step_time)
            if self.model_checkpoints.due(cb):  # a ModelCheckpoint after this one saves now, after the beat
                self._watchdog.busy()
        events = self.engine.observe(rec)
        for on_record in self._on_record:
            on_record(rec, events)
        self.model_checkpoints.ledger_new(step, self._batches, lag=0)
        if check and not any("rollback" in e.actions for e in events):  # (a step asking for none promotes)
            events = events + self._weights_finite(cb, step)
        d = self.policy.decide(step, events)
        if d.promoted:
            self.metrics.set_healthy(self.ledger.last_healthy_step)
        if d.promoted or d.onset is not None:
            self.model_checkpoints.unpin()
        if d.save:
            self._save(cb, step)
        if not events:
            return
        # (a rollback not decided: rollback is off, or the budget is exhausted and the stop below says so)
        action = "alerted" if d.onset is None else self._rollback(cb, d) if d.rollback else "rollback is off"
        if d.skip:
            action += f"; {self._skip(d.skip, step)}"
        if d.stop:
            self._stop(run_context, d.stop)
        if self.stop_reason:
            action = f"run stopped: {self.stop_reason}"
        for on_action in self._on_action:
            on_action(events, action)

    def _check_resumed_steps(self, run_context, step: int, path: str) -> None:
        """Every rank must resume from the checkpoint of the same step (two collectives with consensus): ranks
        that loaded different steps train different weights, and their per-step collectives no longer pair up
        (a checkpoint check on one rank meets a gradient AllReduce on another). Not the same: the run stops."""
        if self._consensus is None:
            return
        first = self._consensus.first_rank(step, self.rank)
        if not self._consensus.all_ok(step == first):
            self._stop(run_context, f"the ranks resumed from checkpoints of different steps (rank 0's is step "
                                    f"{first}, this rank's step {step}, {path}): every rank must load the "
                                    "checkpoint of one step (resume_from names each rank's file of that step)")

    def _check_resumed_weights(self, run_context, network, resumed) -> None:
        """The weights the trainer loaded to resume must be finite (on every rank): a checkpoint written after
        the weights went bad (the trainer's own save at the end of a run the monitor stopped, one the ledger
        quarantined) would have training go on over them. Not finite: the run stops, naming the last healthy
        checkpoint to resume from."""
        where = self._nonfinite(network)
        if where is None:
            self._finite_at = resumed.entry.step
            return
        healthy = self.ledger.last_healthy_step
        self._stop(run_context, f"the weights resumed from {resumed.path} (step {resumed.entry.step}) are "
                                f"not finite ({where}): resume from an earlier checkpoint"
                                + (f" (the last healthy one is of step {healthy})" if healthy is not None else ""))

    def _nonfinite(self, network) -> str | None:
        """Where ``network``'s trainable parameters are not finite on some rank (``d1.weight and 2 more``, ``on
        another rank``), None when they are finite on every rank (a collective with consensus)."""
        bad = nonfinite_parameters(network)
        if not bad if self._consensus is None else self._consensus.all_ok(not bad):
            return None
        return f"{bad[0]} and {len(bad) - 1} more" if len(bad) > 1 else bad[0] if bad else "on another rank"

    def _weights_finite(self, cb, step: int) -> list:
        """Before a checkpoint is promoted to healthy: the weights must be finite (on every rank). A NaN that
        reaches the weights stays there, and the loss can stay finite over them (a ReLU turns a NaN activation
        into 0, and the model predicts a constant): a checkpoint saved since the last check may hold them.
        Returns the ``nan_inf`` event when they are not (onset: the step after the last check that passed), or
        nothing."""
        where = self._nonfinite(cb.train_network)
        if where is None:
            self._finite_at = step
            return []
        return [self.engine.report("nan_inf", step, math.nan, f"weights not finite at step {step} ({where}); "
                                   f"finite at step {self._finite_at}", source="monitor",
                                   rank=self.rank, onset=self._finite_at + 1)]

    def _infer_tokens(self, cb) -> int | None:
        """Batch x sequence of the first 2-D integer input (token ids), times the data-parallel device count;
        0 when the batch has none (a float feature matrix holds no tokens: the throughput rules then judge samples
        or steps), None before a batch is seen. A causal LM fed ``seq + 1`` ids per row shifts the labels inside
        and predicts ``seq`` tokens: the row counts one token less when another 2-D input of the batch (a loss
        mask, the labels) is one narrower, or when the model's ``config.seq_length`` (MindFormers) is. Logged
        when inferred, and when there is none (TPS is then not exported)."""
        inputs = cb.get("train_dataset_element")
        if not inputs:
            return None
        matrices = [x for x in inputs if len(getattr(x, "shape", ())) == 2]
        ids = [x for x in matrices if str(getattr(x, "dtype", "")).lower().startswith(("int", "uint"))]
        if not ids:
            logger.info("TPS is not exported: the batch holds no token ids (a 2-D integer input); set "
                        "tokens_per_step to export it (the throughput rules judge samples or steps)")
            return 0
        rows, width = ids[0].shape
        if (rows, width - 1) in [tuple(x.shape) for x in matrices] or width - 1 == _seq_length(cb.train_network):
            width -= 1
        devices = max(cb.get("device_number") or 1, 1)
        tokens = int(rows * width * devices)
        logger.info("tokens per step inferred as {} (token ids of shape {} x {} device(s)); set tokens_per_step "
                    "if that is not the global batch's", tokens, tuple(ids[0].shape), devices)
        return tokens

    def _save(self, cb, step: int) -> None:
        if self._watchdog is not None:
            self._watchdog.busy()
        try:
            self.ckpt_dir.mkdir(parents=True, exist_ok=True)
            path = self.ckpt_dir / f"step_{step:08d}.ckpt"
            if path.exists():  # same step again after a rollback: keep the old file, it is evidence
                path = self.ckpt_dir / f"step_{step:08d}_r{self.policy.done}.ckpt"
            save_train_state(cb.train_network, str(path))
            self._unsaved = None
        except OSError as exc:  # logged by _guard; a failed rollback names it
            self._unsaved = f"the monitor's checkpoint of step {step} was not written: {exc}"
            raise
        finally:
            if self._watchdog is not None:
                self._watchdog.done()
        self.ledger.add(step, os.path.abspath(path), self._batches, **self._lineage())
        self._slow = "checkpoint"  # the save is in the next step's data wait
        self._retain()

    def _retain(self) -> None:
        """Delete the monitor's own checkpoint files beyond ``keep_checkpoints`` (see :class:`MonitorConfig`):
        of those pending or healthy, all but the newest N, the pending ones and the newest healthy one. Its own
        are those in this rank's checkpoint folders, this process's and those of the run's earlier processes
        that a resume carried over (``checkpoints/rank_<r>/<instance>/``; not the trainer's, pinned under
        ``kept/``), so a run restarted many times keeps N files, not N per process."""
        keep = self.cfg.keep_checkpoints
        if not keep:
            return
        ranks_dir, newest = os.path.dirname(os.path.abspath(self.ckpt_dir)), self.ledger.last_healthy_step
        own = [e for e in self.ledger.entries
               if e.status in (PENDING, HEALTHY) and os.path.dirname(os.path.dirname(e.path)) == ranks_dir]
        for e in own[:-keep]:
            if e.status == PENDING or e.step == newest:
                continue
            try:
                os.remove(e.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                logger.warning("checkpoint {} not deleted (keep_checkpoints={}): {}", e.path, keep, exc)
                continue
            self.ledger.quarantine(e, f"file deleted (keep_checkpoints={keep})", DELETED)

    def _not_yet(self, onset: int) -> str | None:
        """Why the newest checkpoint before step ``onset`` is no target when it was saved in the ``healthy_after``
        steps before the excursion (so not yet healthy, now quarantined by it), None otherwise."""
        after = self.ledger.healthy_after
        e = max((e for e in self.ledger.entries if e.step < onset), key=lambda e: e.step, default=None)
        if e is None or e.status == HEALTHY or e.step + after <= onset:
            return None
        return (f"the checkpoint of step {e.step} was not healthy yet: it turns healthy after {after} clean steps, "
                f"at step {e.step + after}")

    def _lineage(self) -> dict:
        """The ledger fields of a checkpoint saved now that a resumed run takes up (:class:`CheckpointEntry`)."""
        return {"records": trajectory(self.record_log, self.resumed.entry.records if self.resumed else None),
                "rollbacks": self.policy.done, "lr_multiplier": self.policy.multiplier}

    def _rollback(self, cb, d: Decision) -> str:
        """Carry out the rollback ``d`` (to ``d.target``, or an older one when that does not load); return what
        was done, in words. When that cannot be done, :meth:`_rollback_failed` reports it to the policy."""
        step, factor = d.step, 1.0 if d.batch else self.cfg.lr_factor  # (a bad batch's: no LR cut)
        if self._watchdog is not None:
            self._watchdog.busy()
        try:
            target = self._load_healthy(cb, d, factor)
        except TypeError as exc:  # the LR cannot be scaled in place, or no optimizer
            return self._rollback_failed(d, str(exc))
        if target is None:
            unsaved = self._unsaved or (_NONE_SAVED if self._saves_none() else None) or self._not_yet(d.onset)
            why = f" ({unsaved})" if unsaved else ""
            return self._rollback_failed(d, f"no loadable healthy checkpoint before step {d.onset}{why}")
        if self._watchdog is not None:
            self._watchdog.done()
        self.engine.offset += step - target.step  # trainer step minus monitor step: the steps undone
        self._finite_at = min(self._finite_at, target.step)
        self._undone = cb.cur_step_num
        self.engine.rewind(target.step)
        self._slow = "rollback"
        rb = self.policy.rolled_back(d, rewound=True, lr_scale=factor, checkpoint=target.path)
        if target.batches_consumed is not None:  # the iterator goes on: these batches are not seen again
            rb["skipped_batches"] = [target.batches_consumed + 1, self._batches]
        record = {"action": "rollback", **rb, "rank": self.rank, "time": time.time()}
        self.event_log.write(record)
        self.metrics.on_rollback(self.ledger.last_healthy_step)
        self._read_lr = self._optimizer_lr(cb)
        left = max(self.cfg.max_rollbacks - self.policy.done, 0)
        budget = (f"; {left} rollback(s) left of max_rollbacks={self.cfg.max_rollbacks}" if left else
                  f"; the rollback budget is used up (max_rollbacks={self.cfg.max_rollbacks}): the next anomaly that "
                  "asks for a rollback stops the run")
        logger.bind(report=True).warning("{}{}", said(record), budget)
        return said(record, rank=False)

    def _load_healthy(self, cb, d: Decision, factor: float) -> CheckpointEntry | None:
        """Load ``d.target``, or the next target the policy gives when it does not load (on every rank), the LR
        multiplier in force times ``factor``. Returns the one loaded, or None when none is left.

        Raises:
            TypeError: the learning rate cannot be scaled in place (nothing is loaded then).
        """
        optimizer = train_optimizer(cb.train_network, cb.get("optimizer"))
        scale = lr_scale(cb.train_network, optimizer) * factor  # one cut, however many loads it takes
        target = d.target
        while target is not None:
            error = None
            try:
                self.ledger.verify(target)
                kept = restore_train_state(cb.train_network, optimizer, target.path, scale)
                if kept:
                    logger.info("checkpoint {} holds no {}: the current loss scale is kept", target.path, kept[0])
            except (ValueError, RuntimeError, OSError) as exc:
                error = exc
            # every rank must have loaded the same checkpoint, or all try the next one
            if (error is None) if self._consensus is None else self._consensus.all_ok(error is None):
                return target
            reason = f"failed to load: {error}" if error else "failed to load on another rank"
            logger.bind(report=True).error("checkpoint {}: {}; trying an older one", target.path, reason)
            target = self.policy.next_target(d, reason)
        return None

    def _rollback_failed(self, d: Decision, reason: str) -> str:
        """The rollback ``d`` could not be done: the policy stops the run (``on_failed_rollback: stop``; the
        caller carries out ``d.stop``) or it is logged and training goes on; the event log records either.
        Returns what was done, in words."""
        step = d.step
        if self.policy.failed(d, reason):
            return "rollback failed"
        self.event_log.write({"action": "rollback_failed", "at_step": step, "reason": reason, "rank": self.rank,
                              "time": time.time()})
        logger.bind(report=True).error("step {}: rollback failed ({}); training goes on with the state it has "
                                       "(on_failed_rollback: continue)", step, reason)
        return f"not rolled back: {reason}"

    def _skip(self, n: int, step: int) -> str:
        """The ``skip_batches`` action: skip ``n`` batches ahead of the data reader; return it in words."""
        if self._source is None:
            logger.warning("step {}: skip_batches asks to skip {} batches, but the dataset is not fed by a "
                           "training_monitor.callbacks.SkippableSource; nothing skipped", step, n)
            return "batches not skipped (the dataset is not skippable)"
        source, items = self._source  # (items: of the source in one batch, .batch(B) in the pipeline)
        first, last = (i + 1 for i in source.skip(n * items) or (-1, -1))  # positions counted from 1
        record = {"action": "skip_batches", "at_step": step, "batches": n, "source_positions": [first, last],
                  "rank": self.rank, "time": time.time()}
        self.event_log.write(record)
        logger.bind(report=True).warning("{}", said(record))
        return said(record, rank=False)

    def _stop(self, run_context, reason: str) -> None:
        self.stop_reason = reason
        self._undone = self._judged  # NaN-raising callbacks skip this step: the run stops with this reason
        healthy = self.ledger.rollback_target(FAR)  # (a trainer's save at the end of training is after the stop)
        resume = "" if healthy is None else f" (resume from the last healthy checkpoint, step {healthy.step}: " \
                                            f"{healthy.path})"
        logger.bind(report=True).error("stopping the run: {}{}", reason, resume)
        self.event_log.write({"action": "stop", "reason": reason, "rank": self.rank, "time": time.time()})
        run_context.request_stop()

    def _mirror_to_mindformers(self, entries) -> None:
        """Keep MindFormers' own health records in step with the ledger (see training_monitor.mindformers_layout)."""
        if self.cfg.mf_health_json:
            write_health_json(entries, self.cfg.mf_health_json)
        write_iteration_status(entries)

    def _on_stall(self, idle: float, step: int, allowed: float, stacks: str) -> None:
        """Watchdog thread: report the stall with every thread's stack; exit if the rule says ``stop``."""
        event = self.engine.report("stall", step, idle, f"no step finished for {idle:.0f} s since step {step} "
                                   f"(allowed {allowed:.0f} s)", self.rank, "watchdog", stacks)
        logger.bind(report=True).error("rank {} stack dump at stall:\n{}", self.rank, stacks)
        if self.alerts is not None:  # every rank sends its own stall: the hung rank may be any of them
            self.alerts.on_action([event], "process exits (status 3)" if "stop" in event.actions
                                  else "thread stacks written to the event log")
        if "stop" in event.actions:
            logger.bind(report=True).error("rank {}: stall rule asks to stop; exiting with status 3", self.rank)
            if self.alerts is not None:
                self.alerts.flush(5.0)
            self.event_log.close()
            if self.record_log is not None:  # the rows of the steps before the stall
                self.record_log.close()
            os._exit(3)


# a line of an exception's message that says something: not blank, not a rule (`-----`), not a section heading as
# MindSpore's RuntimeErrors put them between rules (`- C++ Call Stack: (For framework developers)`), which begin
# the message with an empty line
_SAYS = re.compile(r"\s*(?![-=*_\s]*$)(?!- [^:]*:(?: \(.*\))?\s*$)")


def _seq_length(network) -> int | None:
    """The ``config.seq_length`` of the first cell in ``network`` that has one (MindFormers models), else None."""
    for _, cell in network.cells_and_names():
        n = getattr(getattr(cell, "config", None), "seq_length", None)
        if isinstance(n, int):
            return n
    return None
