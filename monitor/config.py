"""Monitor settings: a flat mapping, from keyword arguments, a dict, a MindFormers YAML entry or a file."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from pathlib import Path

import yaml


class ConfigError(ValueError):
    """A bad monitor setting; the message names the source and the key."""


def read_yaml(path: str | Path, key: str):
    """The YAML document at ``path``; its ``key`` mapping when it has one at top level (``monitor:``,
    ``alerts:``), else the whole document.

    Raises:
        ConfigError: unreadable file or invalid YAML, naming the file.
    """
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return data[key] if isinstance(data, dict) and isinstance(data.get(key), dict) else data


def did_you_mean(name: str, known) -> str:
    """``"did you mean 'x'? "`` for the known name closest to a mistyped ``name``, else ``""``."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


@dataclass
class MonitorConfig:
    """All settings of :class:`callbacks.TrainingMonitor`, with their defaults.

    Attributes:
        run: run name, the ``run`` label of every series.
        rank: this process's rank; None reads ``RANK_ID``/``RANK`` from the environment (msrun sets them).
        output_dir: folder for ``events_rank<r>.jsonl``, ``records_rank<r>.csv``, ``ledger_rank<r>.json``
            and the monitor's checkpoints.
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
        rules: a rules YAML file (see ``monitor/default_rules.yaml``) or a mapping of overrides.
        checkpoint_every: save a checkpoint of the train network every N steps (0: only checkpoints
            written by a ``ModelCheckpoint`` callback in the same ``Model.train`` call are used).
        healthy_after: clean steps after a checkpoint before it counts as healthy.
        rollback: roll back on rules whose actions include ``rollback``.
        lr_factor: multiply the learning rate by this at each rollback (0 < f <= 1).
        max_rollbacks: rollback budget; one more rollback request stops the run.
        exit_on_stop: when the monitor stopped the run (budget exhausted, a ``stop`` action), end the
            process with exit status 1 and the reason (``SystemExit`` from ``on_train_end``).
        rollback_margin: the target checkpoint must be at least this many steps before the onset.
        tokens_per_step: tokens per step over all data-parallel ranks (global batch x sequence length);
            None infers it from the first input's shape times the device count.
        world_size: devices in the job, for TPS per device and MFU; None reads ``RANK_SIZE`` (msrun) or 1.
        flops_per_token, n_params, model_config: the model, for MFU, in that order of precedence: training
            FLOPs per token; a non-embedding parameter count (``6 N``); or a MindFormers
            ``model.model_config`` mapping (see :mod:`monitor.flops`). None of them: no MFU.
        device: device name for the peak FLOP/s table (:mod:`monitor.hardware`); None detects it.
        peak_tflops: peak dense TFLOP/s of one device, overriding the table.
        alerts: where alerts go (chat platforms, Alertmanager): a mapping or a YAML file, see
            :class:`monitor.alerts.AlertsConfig`. None: no alerts, events are only logged and exported.
        resume_from: the checkpoint file this job was restarted from (what it loaded into the network
            before ``Model.train``; MindFormers: the file ``load_checkpoint``/``resume_training`` loads);
            ``{rank}`` in it stands for the rank. When it is a checkpoint of this ``run`` in the output
            folder's ledgers, the detectors' windows and the checkpoints on its trajectory are restored and
            steps continue from its step (:mod:`monitor.resume`); with several ranks, only when every rank
            restored. Otherwise an error says why and the run starts afresh. None: a new run.
        strict: raise monitor failures into the trainer instead of logging and surviving them.
    """

    run: str = "default"
    rank: int | None = None
    output_dir: str = "monitor_output"
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = 9400
    export_ranks: str = "all"
    file_sd_dir: str | None = None
    watchdog: bool = True
    record_log: bool = True
    consensus: bool | None = None
    mf_health_json: str | None = None
    rules: str | dict | None = None
    checkpoint_every: int = 0
    healthy_after: int = 20
    rollback: bool = True
    lr_factor: float = 0.5
    max_rollbacks: int = 3
    exit_on_stop: bool = True
    rollback_margin: int = 0
    tokens_per_step: int | None = None
    world_size: int | None = None
    flops_per_token: float | None = None
    n_params: float | None = None
    model_config: dict | None = None
    device: str | None = None
    peak_tflops: float | None = None
    alerts: dict | str | None = None
    resume_from: str | None = None
    strict: bool = False

    @classmethod
    def from_dict(cls, data: dict | None, source: str = "<config>") -> "MonitorConfig":
        """Build from a mapping; ``type`` (a MindFormers registry key) is ignored.

        Raises:
            ConfigError: unknown key or a value of the wrong type, naming ``source`` and the key.
        """
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        for key, value in dict(data or {}).items():
            if key == "type":
                continue
            if key not in known:
                raise ConfigError(f"{source}: unknown monitor setting {key!r} ({did_you_mean(key, known)}"
                                  f"known: {', '.join(known)})")
            kwargs[key] = value
        cfg = cls(**kwargs)
        cfg._validate(source)
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
    def from_yaml(cls, path: str | Path) -> "MonitorConfig":
        """Read a YAML file holding the settings (optionally under a top-level ``monitor:`` key)."""
        data = read_yaml(path, "monitor")
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings")
        return cls.from_dict(data, str(path))

    def _validate(self, source: str) -> None:
        def need(ok: bool, key: str, what: str):
            if not ok:
                raise ConfigError(f"{source}: {key}: expected {what}, got {getattr(self, key)!r}")

        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        for key in ("checkpoint_every", "healthy_after", "max_rollbacks", "rollback_margin"):
            need(is_int(getattr(self, key)) and getattr(self, key) >= 0, key, "a non-negative integer")
        need(self.metrics_port is None or (is_int(self.metrics_port) and 0 <= self.metrics_port < 65536),
             "metrics_port", "a port number or null")
        need(isinstance(self.lr_factor, (int, float)) and 0 < self.lr_factor <= 1, "lr_factor", "0 < f <= 1")
        need(self.tokens_per_step is None or (is_int(self.tokens_per_step) and self.tokens_per_step > 0),
             "tokens_per_step", "a positive integer or null")
        need(self.rules is None or isinstance(self.rules, (str, dict)), "rules", "a file path or a mapping")
        need(self.world_size is None or (is_int(self.world_size) and self.world_size > 0), "world_size",
             "a positive integer or null")
        for key in ("flops_per_token", "n_params", "peak_tflops"):
            v = getattr(self, key)
            need(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0), key,
                 "a positive number or null")
        need(self.model_config is None or isinstance(self.model_config, dict), "model_config", "a mapping")
        need(self.alerts is None or isinstance(self.alerts, (str, dict)), "alerts", "a file path or a mapping")
        need(self.export_ranks in ("all", "rank0"), "export_ranks", "all or rank0")
        need(self.consensus in (None, True, False), "consensus", "true, false or null")
        need(self.file_sd_dir is None or isinstance(self.file_sd_dir, str), "file_sd_dir", "a folder or null")
        need(self.resume_from is None or isinstance(self.resume_from, str), "resume_from", "a file path or null")
        for key in ("rollback", "strict", "watchdog", "exit_on_stop", "record_log"):
            need(isinstance(getattr(self, key), bool), key, "true or false")
