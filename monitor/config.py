"""Monitor settings: a flat mapping, from keyword arguments, a dict, a MindFormers YAML entry or a file."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .alerts.config import AlertsConfig
from .policy import RollbackSettings
from .ruleset import Rules, RulesError
from .schema import LABEL, ConfigError, check, is_label, located
from .yamlfile import load_yaml


@dataclass
class MonitorConfig(RollbackSettings):
    """All settings of :class:`training_monitor.callbacks.TrainingMonitor`, with their defaults: those below and
    the rollback settings of :class:`training_monitor.policy.RollbackSettings` (``checkpoint_every``,
    ``healthy_after``, ``rollback_margin``, ``lr_factor``, ``max_rollbacks``).

    Attributes:
        run: run name, the ``run`` label of every series.
        rank: this process's rank; None reads ``RANK_ID``/``RANK`` from the environment (msrun sets them).
        output_dir: folder for ``events_rank<r>.jsonl``, ``records_rank<r>.csv``, ``ledger_rank<r>.json``
            and the monitor's checkpoints.
        keep_checkpoints: the monitor's own checkpoints (``checkpoint_every``) kept on disk: the newest N, and
            always the pending ones and the newest healthy one (the rollback target); an older file is deleted
            after each save and its ledger entry marked ``deleted``; those a resume carried over from the run's
            earlier processes count with this process's. Quarantined ones stay (evidence). 0 keeps all.
        metrics_host, metrics_port: where ``/metrics`` is served. Each rank serves on ``metrics_port +
            local rank`` (so the ranks of one node do not collide); ``null`` serves nothing, 0 takes any
            free port.
        export_ranks: ``all`` (every rank serves its series) or ``rank0`` (only global rank 0 serves: for
            jobs of thousands of ranks; the others still run the rules and the watchdog).
        file_sd_dir: folder where each serving rank writes ``<run>_rank<r>.json``, a Prometheus
            ``file_sd_configs`` target (host:port with ``run``/``rank`` labels); removed at a clean end.
        watchdog: run the hang watchdog (rule ``stall`` in the rules file sets its timing).
        mf_health_json: path of MindFormers' ``health_ckpts.json`` to keep in step with the ledger (legacy
            checkpoint layout); checkpoints in ``iteration_*`` folders always get their ``common.json``
            ``ckpt_status`` and the ``latest_checkpointed_iteration.txt`` tracker kept in step.
        consensus: with more than one rank, reduce loss, grad norm and overflow across ranks every step
            (one small AllReduce) so all ranks take the same decisions; null: on when world_size > 1.
        record_log: write every step record to ``<output_dir>/records_rank<r>.csv`` (replayable).
        rules: a rules YAML file (see ``monitor/default_rules.yaml``; in a settings file, a relative path is
            beside that file) or a mapping of overrides.
        rollback: roll back on rules whose actions include ``rollback``.
        exit_on_stop: when the monitor stopped the run (budget exhausted, a ``stop`` action), end the
            process with exit status 1 and the reason (``SystemExit`` from ``on_train_end``).
        on_failed_rollback: ``stop`` (default): when a rollback is needed and cannot be done (no loadable
            healthy checkpoint before the onset, an LR that cannot be scaled in place), stop the run with the
            reason (exit status 1 with ``exit_on_stop``); ``continue``: log it and train on.
        tokens_per_step: tokens per step over all data-parallel ranks (global batch x sequence length);
            None infers it from the first input's shape times the device count.
        world_size: devices in the job, for TPS per device and MFU; None reads ``RANK_SIZE`` (msrun) or 1.
        flops_per_token, n_params, model_config: the model, for MFU, in that order of precedence: training
            FLOPs per token; a non-embedding parameter count (``6 N``); or a MindFormers
            ``model.model_config`` mapping (see :mod:`training_monitor.flops`). None of them: no MFU.
        device: device name for the peak FLOP/s table (:mod:`training_monitor.hardware`); None detects it.
        peak_tflops: peak dense TFLOP/s of one device, overriding the table.
        alerts: where alerts go (chat platforms, Alertmanager): a mapping or a YAML file (as ``rules``), see
            :class:`training_monitor.alerts.AlertsConfig`. None: no alerts, events are only logged and exported.
        resume_from: the checkpoint file this job was restarted from (what it loaded into the network
            before ``Model.train``; MindFormers: the file ``load_checkpoint``/``resume_training`` loads);
            ``{rank}`` in it stands for the rank. When it is a checkpoint of this ``run`` in the output
            folder's ledgers, the detectors' windows and the checkpoints on its trajectory are restored and
            steps continue from its step (:mod:`training_monitor.resume`); with several ranks, only when every rank
            restored. A checkpoint written over since its save stops the run (as a failed rollback does);
            otherwise an error says why and the run starts afresh. None: a new run.
        strict: raise monitor failures into the trainer instead of logging and surviving them.
    """

    run: str = field(default="default", metadata={"check": (is_label, LABEL)})
    rank: int | None = field(default=None, metadata={"max": 10**7})
    output_dir: str = field(default="monitor_output", metadata={"min": 1})
    keep_checkpoints: int = field(default=5, metadata={"min": 0})
    metrics_host: str = field(default="127.0.0.1", metadata={"min": 1})
    metrics_port: int | None = field(default=9400, metadata={"max": 65535})
    export_ranks: str = field(default="all", metadata={"choices": ("all", "rank0")})
    file_sd_dir: str | None = None
    watchdog: bool = True
    record_log: bool = True
    consensus: bool | None = None
    mf_health_json: str | None = None
    rules: str | dict | None = None
    rollback: bool = True
    exit_on_stop: bool = True
    on_failed_rollback: str = field(default="stop", metadata={"choices": ("stop", "continue")})
    tokens_per_step: int | None = field(default=None, metadata={"min": 1, "max": 1 << 50})
    world_size: int | None = field(default=None, metadata={"min": 1, "max": 10**7})
    flops_per_token: float | None = field(default=None, metadata={"min": 0, "min_open": True, "max": 1e18})
    n_params: float | None = field(default=None, metadata={"min": 0, "min_open": True, "max": 1e15})
    model_config: dict | None = None
    device: str | None = None
    peak_tflops: float | None = field(default=None, metadata={"min": 0, "min_open": True, "max": 1e6})
    alerts: dict | str | None = None
    resume_from: str | None = None
    strict: bool = False

    @classmethod
    def from_dict(cls, data: dict | None, source: str = "<config>", lines: dict | None = None,
                  path: tuple = ()) -> MonitorConfig:
        """Build from a mapping; ``type`` (a MindFormers registry key) is ignored. ``lines``, ``path``: see
        :func:`training_monitor.schema.check`.

        Raises:
            ConfigError: unknown key or a value of the wrong type, naming ``source``, the line and the key.
            training_monitor.ruleset.RulesError: the same for a ``rules`` mapping.
        """
        settings = {k: v for k, v in dict(data or {}).items() if k != "type"}
        cfg = check(cls, settings, source, lines, path, what="monitor setting")
        if isinstance(cfg.rules, dict):  # checked here, where its file and lines are known
            Rules(cfg.rules, source, lines, (*path, "rules"))
        if isinstance(cfg.alerts, dict):  # (a file of its own is checked, with its lines, when read)
            AlertsConfig.load(cfg.alerts, source, lines=lines, path=(*path, "alerts"))
        return cfg

    def model_flops_per_token(self) -> float | None:
        """Training FLOPs per token from ``flops_per_token``, ``n_params`` or ``model_config``; None if unset."""
        from .flops import ModelFlops

        if self.flops_per_token:
            return float(self.flops_per_token)
        if self.n_params:
            return ModelFlops(n_params=self.n_params).per_token()
        if self.model_config:
            return ModelFlops.from_mindformers(self.model_config).per_token()
        return None

    @classmethod
    def from_yaml(cls, path: str | Path) -> MonitorConfig:
        """Read a YAML file holding the settings (optionally under a top-level ``monitor:`` key). A ``rules`` or
        ``alerts`` file named in it is read now, relative to its folder.

        Raises:
            ConfigError: as :meth:`from_dict`, also naming the line.
        """
        data, lines = load_yaml(path)
        nested = isinstance(data, dict) and isinstance(data.get("monitor"), dict)
        if nested:
            assert isinstance(data, dict)
            data = data["monitor"]
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings")
        prefix = ("monitor",) if nested else ()
        cfg = cls.from_dict(data, str(path), lines, prefix)
        for key, load in (("rules", Rules.load), ("alerts", AlertsConfig.load)):
            name = getattr(cfg, key)
            if isinstance(name, str):  # a file of its own: beside this one when relative, read now
                setattr(cfg, key, os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(name)))
                try:
                    load(getattr(cfg, key))
                except (ConfigError, RulesError) as exc:
                    raise type(exc)(f"{located(str(path), lines, (*prefix, key))}: {exc}") from None
        return cfg
