"""``TrainingMonitor``: the MindSpore callback that feeds the engine, exports metrics and rolls back."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import mindspore as ms
from mindspore.train import Callback, ModelCheckpoint

from monitor.alerts import Alert, AlertsConfig, AlertSender
from monitor.config import MonitorConfig
from monitor.engine import Engine
from monitor.events import Event, EventLog
from monitor.files import write_file_sd_target
from monitor.hardware import peak_flops
from monitor.ledger import Ledger
from monitor.log import logger
from monitor.metrics import Metrics
from monitor.mindformers_layout import write_health_json, write_iteration_status
from monitor.policy import RollbackPolicy
from monitor.recordlog import RecordLog
from monitor.record import StepRecord
from monitor.rules import Rules
from monitor.watchdog import Watchdog

from .consensus import RankConsensus
from .data import SkippableSource, find_skippable
from .outputs import read_step_outputs
from .rollback import restore_train_state, save_train_state, train_optimizer


def _env_rank() -> int:
    return int(os.environ.get("RANK_ID", os.environ.get("RANK", "0")) or 0)


def local_rank(rank: int) -> int:
    """This process's rank within its node: ``LOCAL_RANK``, else MindSpore's communication API, else ``rank``."""
    if os.environ.get("LOCAL_RANK", "").isdigit():
        return int(os.environ["LOCAL_RANK"])
    try:
        from mindspore.communication import get_local_rank

        return get_local_rank()
    except Exception:  # communication not initialised: a single-process job
        return rank


def detect_device() -> str | None:
    """The accelerator's model name: Ascend SoC name from pyACL, a GPU name from MindSpore; None on CPU."""
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


class TrainingMonitor(Callback):
    """Per-step metrics, anomaly rules and automatic rollback for ``Model.train`` (MindSpore/MindFormers).

    Use it as ``Model.train(..., callbacks=[TrainingMonitor(...)])``, from a MindFormers YAML
    ``callbacks: - type: TrainingMonitor`` entry (its other keys are the settings), or from a settings
    file: ``TrainingMonitor("monitor.yaml")``. Settings are those of :class:`monitor.config.MonitorConfig`;
    keyword arguments override the file or dict.

    Each step becomes a :class:`monitor.record.StepRecord` (loss, grad norm, loss scale, overflow, LR,
    step time, data wait, tokens) for the engine and for ``/metrics``. Events go to
    ``<output_dir>/events_rank<r>.jsonl``. When a rule asks for a rollback, the newest healthy checkpoint
    before the onset is loaded into the train network (weights, optimizer state, global step, loss scale),
    the LR multiplier is scaled by ``lr_factor``, and training continues in the same process; the data
    iterator is not rewound, so the batches consumed since that checkpoint are not seen again (the
    rollback record's ``skipped_batches`` gives their 1-based positions in the data stream, first and
    last). A rule whose actions include ``skip_batches`` also skips its ``skip_extra_batches`` further
    batches ahead of the data reader when the dataset is fed by a :class:`callbacks.SkippableSource`
    (found in the pipeline by itself); the event log records the skipped positions. Past
    ``max_rollbacks`` the run is stopped (``stop_reason`` says why) and, with ``exit_on_stop``, the
    process exits with status 1 and that reason once ``Model.train`` has wound
    down. Each process keeps its own ledger (``ledger_rank<r>.json``; an older one is renamed
    ``ledger_rank<r>.before-<instance>.json``) and checkpoint folder
    (``checkpoints/rank_<r>/<instance>/``); nothing is deleted. With more than one rank, the step values
    are reduced across ranks first (:class:`callbacks.consensus.RankConsensus`), so every rank decides
    the same.

    ``count_tokens(cb_params) -> int``, when given, counts the real tokens of each step over all
    data-parallel ranks (for example the loss-mask sum when padding is masked) instead of the fixed
    ``tokens_per_step``; what it reads from the device is its own cost.

    Monitor failures are logged and survived unless ``strict`` is set.

    Raises:
        monitor.config.ConfigError, monitor.rules.RulesError: bad settings, at construction.
    """

    def __init__(self, config: MonitorConfig | dict | str | Path | None = None,
                 count_tokens: Callable[[Any], int] | None = None, **settings):
        super().__init__()
        self._count_tokens = count_tokens
        if isinstance(config, (str, Path)):
            cfg = MonitorConfig.from_yaml(config)
        else:
            cfg = config if isinstance(config, MonitorConfig) else MonitorConfig.from_dict(config)
        if settings:
            cfg = MonitorConfig.from_dict({**cfg.__dict__, **settings}, "TrainingMonitor arguments")
        self.cfg = cfg
        self.rank = _env_rank() if cfg.rank is None else cfg.rank
        rules = Rules.load(cfg.rules) if not isinstance(cfg.rules, dict) else Rules(cfg.rules)
        out = Path(cfg.output_dir)
        self.event_log = EventLog(str(out / f"events_rank{self.rank}.jsonl"))
        self.record_log = RecordLog(str(out / f"records_rank{self.rank}.csv")) if cfg.record_log else None
        self.world_size = cfg.world_size or int(os.environ.get("RANK_SIZE", "1") or 1)
        self.metrics = Metrics(cfg.run, self.rank, self.world_size, rules.rules)
        self._flops_per_token = cfg.model_flops_per_token()
        self._peak = None
        if self._flops_per_token is not None:
            self._peak = peak_flops(cfg.device or detect_device(), cfg.peak_tflops)
        self.metrics_url: str | None = None
        self.engine = Engine(rules, [self._on_event, self.metrics.on_event])
        self.alerts: AlertSender | None = None
        if cfg.alerts is not None:
            alerts_cfg, problems = AlertsConfig.load(cfg.alerts, "alerts")
            for problem in problems:
                logger.error(problem)
            if alerts_cfg.sinks:
                self.alerts = AlertSender(alerts_cfg)
                self.metrics.alert_stats = self.alerts.stats
        # A new process starts a new ledger and checkpoint folder: the previous process's checkpoints hold
        # another trajectory (perhaps another run) and must never be rolled back to by step number.
        self.instance = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
        ledger = out / f"ledger_rank{self.rank}.json"
        if ledger.exists():
            ledger.rename(out / f"ledger_rank{self.rank}.before-{self.instance}.json")
        self.ledger = Ledger(str(ledger), cfg.healthy_after, self._mirror_to_mindformers)
        self.policy = RollbackPolicy(self.ledger, cfg.checkpoint_every, cfg.rollback_margin, cfg.lr_factor,
                                     cfg.max_rollbacks)
        self.rollbacks = self.policy.rollbacks  # what was done: {"at_step", "to_step", "lr_multiplier", ...}
        self.ckpt_dir = out / "checkpoints" / f"rank_{self.rank}" / self.instance
        self.stop_reason: str | None = None
        self.last_record: StepRecord | None = None
        self._offset = 0  # trainer step minus monitor step: grows by the steps undone at each rollback
        self._prev_trainer_step = 0
        self._t_begin = self._t_end = None
        self._slow: str | None = None  # why the next step is slow (the monitor's own save or rollback)
        self._epoch = None
        self._tokens = cfg.tokens_per_step
        self._ckpt_watch: list[tuple[ModelCheckpoint, int, str]] = []
        self._watchdog: Watchdog | None = None
        self._consensus: RankConsensus | None = None
        self._sd_file: str | None = None
        self._source: SkippableSource | None = None

    # MindSpore callback API -------------------------------------------------------------------------
    def on_train_begin(self, run_context):
        self._guard(self._begin, run_context)

    def on_train_step_begin(self, run_context):
        self._t_begin = time.perf_counter()

    def on_train_step_end(self, run_context):
        self._guard(self._step_end, run_context)

    def on_train_end(self, run_context):
        self._guard(lambda _: self._finish(), run_context)
        if self.stop_reason and self.cfg.exit_on_stop:
            raise SystemExit(f"training-monitor: stopped the run: {self.stop_reason}")

    # ------------------------------------------------------------------------------------------------
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

    def _finish(self) -> None:
        if self.alerts is not None and not self.alerts.flush(5.0):
            logger.error("alerts not all delivered at the end of training: {}", self.alerts.stats())
        if self._watchdog is not None:
            self._watchdog.stop()
            self._watchdog = None
        if self._sd_file and os.path.exists(self._sd_file):
            os.unlink(self._sd_file)
        self.event_log.close()
        if self.record_log is not None:
            self.record_log.close()

    def _guard(self, fn, run_context):
        try:
            fn(run_context)
        except Exception as exc:
            if self.cfg.strict:
                raise
            logger.opt(exception=exc).error("training monitor failed at this step (training goes on): {!r}", exc)

    def _begin(self, run_context):
        cb = run_context.original_args()
        cfg = self.cfg
        serves = cfg.metrics_port is not None and (cfg.export_ranks == "all" or self.rank == 0)
        if self.metrics_url is None and serves:
            port = cfg.metrics_port + local_rank(self.rank) if cfg.metrics_port else 0
            self.metrics_url = self.metrics.serve(cfg.metrics_host, port)
            if self.metrics_url:
                logger.info("rank {} metrics at {}", self.rank, self.metrics_url)
                if cfg.file_sd_dir:
                    self._sd_file = write_file_sd_target(cfg.file_sd_dir, cfg.run, self.rank, cfg.metrics_host,
                                                         self.metrics.server.server_port)
        if self.world_size > 1 and cfg.consensus is not False and self._consensus is None:
            self._consensus = RankConsensus(self.world_size)
        stall = self.engine.rules.rules["stall"]
        if cfg.watchdog and stall.enabled and self._watchdog is None:
            p = stall.params
            self._watchdog = Watchdog(self._on_stall, p["factor"], p["min_seconds"], p["startup_seconds"],
                                      p["startup_steps"]).start()
        self._prev_trainer_step = cb.cur_step_num
        self._source = find_skippable(cb.get("train_dataset"))
        mine = cb.list_callback.index(self) if self in cb.list_callback else 0
        # a ModelCheckpoint after us in the list saves after our step_end: we see its file one step later
        self._ckpt_watch = [(c, 1 if i > mine else 0, c.latest_ckpt_file_name)
                            for i, c in enumerate(cb.list_callback) if isinstance(c, ModelCheckpoint)]
        if cfg.rollback and not cfg.checkpoint_every and not self._ckpt_watch:
            logger.warning("rollback is on but no checkpoint is saved (checkpoint_every is 0 and there is no "
                           "ModelCheckpoint callback): anomalies will be reported, not rolled back")

    def _step_end(self, run_context):
        cb = run_context.original_args()
        loss, overflow, scale, lr, norm = read_step_outputs(cb.net_outputs)
        now = time.perf_counter()  # the outputs are on the host: the step's compute is over
        if self._consensus is not None:
            loss, norm, overflow = self._consensus.step_values(loss, norm, overflow)
        steps = max(cb.cur_step_num - self._prev_trainer_step, 1)
        self._prev_trainer_step = cb.cur_step_num
        if cb.get("dataset_sink_mode"):
            step_time = (now - self._t_end) / steps if self._t_end is not None else None
            wait = None
        else:
            step_time = now - self._t_begin if self._t_begin is not None else None
            wait = self._t_begin - self._t_end if self._t_end is not None and self._t_begin else None
        self._t_end = now
        if self._count_tokens is not None:
            tokens = self._count_tokens(cb)
        else:
            if self._tokens is None:
                self._tokens = self._infer_tokens(cb)
            tokens = self._tokens
        step = cb.cur_step_num - self._offset
        saved = self._watch_model_checkpoints(step)
        epoch_end = self._epoch is not None and cb.cur_epoch_num != self._epoch
        slow = self._slow or ("checkpoint" if saved else "epoch" if epoch_end else None)
        self._slow, self._epoch = None, cb.cur_epoch_num
        rec = StepRecord(step, loss, norm, scale, overflow, lr, step_time, wait, tokens, self.rank,
                         time.time(), steps, slow_reason=slow)
        if self._peak and step_time and tokens:
            rec.mfu = self._flops_per_token * tokens / step_time / (self.world_size * self._peak)
        self.last_record = rec
        if self._watchdog is not None:
            self._watchdog.beat(step, step_time)
        events = self.engine.observe(rec)
        self.metrics.observe(rec)
        if self.record_log is not None:
            self.record_log.write(rec)
        # only a rule that asks for a rollback distrusts the model state (an alert-only throughput drop
        # does not): then checkpoints since its onset are suspect, else this step counts as clean
        onset = self.policy.rollback_onset(events)
        if onset is None:
            if self.policy.clean(step):
                self.metrics.set_healthy(self.ledger.last_healthy_step)
            if self.policy.checkpoint_due(step):
                self._save(cb, step)
            if not events:
                return
            action = "alerted"
        else:
            self.policy.anomaly(onset)
            action = self._rollback(run_context, cb, step, onset) if self.cfg.rollback else "rollback is off"
        extra = max((self.engine.rules.rules[e.rule].skip_extra_batches for e in events
                     if "skip_batches" in e.actions), default=0)
        if extra:
            action += f"; {self._skip(extra, step)}"
        if any("stop" in e.actions for e in events):
            self._stop(run_context, f"rule {events[0].rule} asks to stop at step {step}")
        if self.stop_reason:
            action = f"run stopped: {self.stop_reason}"
        if self.alerts is not None and (self.rank == 0 or self.alerts.config.ranks == "all"):
            self._alert(events, action)

    def _infer_tokens(self, cb) -> int | None:
        """Batch x sequence of the first 2-D input, times the data-parallel device count."""
        for x in cb.get("train_dataset_element") or ():
            shape = getattr(x, "shape", ())
            if len(shape) == 2:
                return int(shape[0] * shape[1] * max(cb.get("device_number") or 1, 1))
        return None

    def _watch_model_checkpoints(self, step: int) -> bool:
        """Add the files ModelCheckpoint wrote since the last step to the ledger; True when there is one (its
        save slowed this step: in its compute or, saved after our previous step end, in its data wait)."""
        saved = False
        for i, (mc, lag, seen) in enumerate(self._ckpt_watch):
            name = mc.latest_ckpt_file_name
            if name and name != seen:
                self._ckpt_watch[i] = (mc, lag, name)
                self.ledger.add(step - lag, name, self._prev_trainer_step - lag)
                saved = True
        return saved

    def _save(self, cb, step: int) -> None:
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        path = self.ckpt_dir / f"step_{step:08d}.ckpt"
        if path.exists():  # same step again after a rollback: keep the old file, it is evidence
            path = self.ckpt_dir / f"step_{step:08d}_r{len(self.rollbacks)}.ckpt"
        save_train_state(cb.train_network, str(path))
        self.ledger.add(step, str(path), self._prev_trainer_step)
        self._slow = "checkpoint"  # the save is in the next step's data wait

    def _alert(self, events: list[Event], action: str) -> None:
        """Queue the events for the alert sinks (returns at once; delivery is in the background)."""
        c = self.alerts.config
        self.alerts.send([Alert.from_event(e, self.cfg.run, action, c.runbook_base, c.dashboard_url, time.time())
                          for e in events])

    def _rollback(self, run_context, cb, step: int, onset: int) -> str:
        """Roll back to the newest healthy checkpoint before ``onset``; return what was done, in words."""
        reason = self.policy.exhausted(step)
        if reason:
            self._stop(run_context, reason)
            return "rollback budget exhausted"
        target = self.policy.target(onset)
        while target is not None:
            error = None
            try:
                scale = restore_train_state(cb.train_network, train_optimizer(cb.train_network, cb.get("optimizer")),
                                            target.path, self.cfg.lr_factor)
            except (ValueError, RuntimeError, OSError) as exc:
                error = exc
            # every rank must have loaded the same checkpoint, or all try the next one
            if (error is None) if self._consensus is None else self._consensus.all_ok(error is None):
                break
            reason = f"failed to load: {error}" if error else "failed to load on another rank"
            logger.error("checkpoint {}: {}; trying an older one", target.path, reason)
            self.ledger.quarantine(target, reason)
            target = self.policy.target(onset)
        if target is None:
            logger.error("step {}: no healthy checkpoint before step {}; cannot roll back", step, onset)
            return f"not rolled back: no healthy checkpoint before step {onset}"
        self._offset += step - target.step
        self.engine.rewind(target.step)
        self._slow = "rollback"
        rb = self.policy.rolled_back(step, onset, target, scale, lr_scale=self.cfg.lr_factor, checkpoint=target.path)
        if target.batches_consumed is not None:  # the iterator goes on: these batches are not seen again
            rb["skipped_batches"] = [target.batches_consumed + 1, self._prev_trainer_step]
        self.event_log.write({"action": "rollback", **rb, "rank": self.rank, "time": time.time()})
        self.metrics.on_rollback(self.ledger.last_healthy_step)
        logger.warning("rank {}: rolled back from step {} to healthy checkpoint at step {} ({}), LR x{}",
                       self.rank, step, target.step, target.path, self.cfg.lr_factor)
        return f"rolled back to the healthy checkpoint at step {target.step}, LR x{self.cfg.lr_factor:g} (now x{scale:g})"

    def _skip(self, n: int, step: int) -> str:
        """The ``skip_batches`` action: skip ``n`` batches ahead of the data reader; return it in words."""
        if self._source is None:
            logger.warning("step {}: skip_batches asks to skip {} batches, but the dataset is not fed by a "
                           "callbacks.SkippableSource; nothing skipped", step, n)
            return "batches not skipped (the dataset is not skippable)"
        first, last = self._source.skip(n)
        self.event_log.write({"action": "skip_batches", "at_step": step, "source_positions": [first, last],
                              "rank": self.rank, "time": time.time()})
        logger.warning("rank {}: skipped data source positions {}-{} at step {}", self.rank, first, last, step)
        return f"skipped data positions {first}-{last}"

    def _stop(self, run_context, reason: str) -> None:
        self.stop_reason = reason
        logger.error("stopping the run: {}", reason)
        self.event_log.write({"action": "stop", "reason": reason, "rank": self.rank, "time": time.time()})
        run_context.request_stop()

    def _mirror_to_mindformers(self, entries) -> None:
        """Keep MindFormers' own health records in step with the ledger (see monitor.mindformers_layout)."""
        if self.cfg.mf_health_json:
            write_health_json(entries, self.cfg.mf_health_json)
        write_iteration_status(entries)

    def _on_stall(self, idle: float, step: int, allowed: float, stacks: str) -> None:
        """Watchdog thread: report the stall with every thread's stack; exit if the rule says ``stop``."""
        event = self.engine.report("stall", step, idle, f"no step finished for {idle:.0f} s since step {step} "
                                   f"(allowed {allowed:.0f} s)", self.rank, "watchdog", stacks)
        logger.error("rank {} stack dump at stall:\n{}", self.rank, stacks)
        if self.alerts is not None:  # every rank sends its own stall: the hung rank may be any of them
            self._alert([event], "process exits (status 3)" if "stop" in event.actions
                        else "thread stacks written to the event log")
        if "stop" in event.actions:
            logger.error("rank {}: stall rule asks to stop; exiting with status 3", self.rank)
            if self.alerts is not None:
                self.alerts.flush(5.0)
            self.event_log.close()
            os._exit(3)

    def _on_event(self, event: Event) -> None:
        self.event_log.write({**event.to_dict(), "time": time.time()})
        log = logger.error if event.severity == "critical" else logger.warning
        log("rank {} {} at step {} (onset {}): {} -> {}", event.rank, event.rule, event.step, event.onset_step,
            event.message, ", ".join(event.actions))
