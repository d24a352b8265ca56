"""The ``alerts`` settings: where alerts go. Used by the live monitor and by ``monitor relay``.

Example (a monitor settings file, or a file of its own given to ``monitor relay --config``)::

    alerts:
      dashboard_url: https://grafana.example.com/d/training-run-overview?var-run={run}
      runbook_base: https://git.example.com/ml/training-monitor/-/blob/main/runbooks
      sinks:
        - {name: oncall, type: feishu, url_env: FEISHU_WEBHOOK, secret_env: FEISHU_SECRET}
        - {name: infra, type: dingtalk, url_env: DINGTALK_WEBHOOK, secret_env: DINGTALK_SECRET,
           min_severity: critical}
        - {name: am, type: alertmanager, url: http://127.0.0.1:9093}

Webhook URLs that carry a token and every signing secret are read from the environment (``url_env``,
``secret_env``), never from the file, and never appear in logs or events.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError, did_you_mean, read_yaml
from ..rules import SEVERITIES
from .platforms import PLATFORMS

SINK_KEYS = ("name", "type", "url", "url_env", "secret_env", "timeout_s", "min_severity", "rate_limits")
KEYS = ("sinks", "dashboard_url", "runbook_base", "queue_size", "ranks")


@dataclass(frozen=True)
class SinkSpec:
    """One destination. ``limits``: (messages, seconds) windows; the platform's documented ones by default."""

    name: str
    type: str
    url: str
    secret: str | None = None
    timeout_s: float = 5.0
    min_severity: str = "warning"
    limits: tuple[tuple[int, float], ...] = ()

    def wants(self, severity: str) -> bool:
        rank = SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES) - 1
        return rank >= SEVERITIES.index(self.min_severity)


@dataclass(frozen=True)
class AlertsConfig:
    """Attributes:
        sinks: the destinations (those whose environment variables are missing are left out, logged).
        dashboard_url: link added to every alert; ``{run}`` is replaced by the run name.
        runbook_base: URL of the ``runbooks/`` folder; empty keeps the rules file's ``runbook_base``.
        queue_size: alerts each sink holds while it is slow or down; beyond that they are dropped and counted.
        ranks: ``rank0`` (only rank 0 sends rule alerts: with rank consensus every rank sees the same
            events; a ``stall`` is sent by whichever rank sees it) or ``all``.
    """

    sinks: tuple[SinkSpec, ...] = ()
    dashboard_url: str = ""
    runbook_base: str = ""
    queue_size: int = 1000
    ranks: str = "rank0"

    @classmethod
    def load(cls, data, source: str = "<alerts>", environ=None) -> tuple["AlertsConfig", list[str]]:
        """Parse a mapping, or the path of a YAML file (its ``alerts:`` key, or the whole file).

        Returns:
            the config and a list of problems that only disable one sink (a missing environment variable).
        Raises:
            ConfigError: unreadable file, unknown key or sink type, bad value; the message names the source.
        """
        if isinstance(data, (str, Path)):
            source, data = str(data), read_yaml(data, "alerts")
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: alerts: expected a mapping")
        _known(data, KEYS, f"{source}: alerts")
        env = os.environ if environ is None else environ
        sinks, problems = [], []
        for i, raw in enumerate(data.get("sinks") or []):
            where = f"{source}: alerts.sinks[{i}]"
            if not isinstance(raw, dict):
                raise ConfigError(f"{where}: expected a mapping")
            spec, problem = _sink(raw, where, env)
            if problem:
                problems.append(problem)
            elif spec:
                sinks.append(spec)
        names = [s.name for s in sinks]
        if len(set(names)) != len(names):
            raise ConfigError(f"{source}: alerts.sinks: names must be unique, got {names}")
        queue_size = data.get("queue_size", 1000)
        if not isinstance(queue_size, int) or isinstance(queue_size, bool) or queue_size < 1:
            raise ConfigError(f"{source}: alerts.queue_size: expected a positive integer, got {queue_size!r}")
        ranks = data.get("ranks", "rank0")
        if ranks not in ("rank0", "all"):
            raise ConfigError(f"{source}: alerts.ranks: expected rank0 or all, got {ranks!r}")
        return cls(tuple(sinks), str(data.get("dashboard_url") or ""), str(data.get("runbook_base") or ""),
                   queue_size, ranks), problems


def _known(data: dict, keys, where: str) -> None:
    for key in data:
        if key not in keys:
            raise ConfigError(f"{where}: unknown key {key!r} ({did_you_mean(key, keys)}known: {', '.join(keys)})")


def _sink(raw: dict, where: str, env) -> tuple[SinkSpec | None, str]:
    if "secret" in raw:
        raise ConfigError(f"{where}: secret: put the secret in an environment variable and name it with secret_env")
    _known(raw, SINK_KEYS, where)
    kind = raw.get("type")
    if kind not in PLATFORMS:
        raise ConfigError(f"{where}: type: expected one of {', '.join(PLATFORMS)}, got {kind!r}")
    name = str(raw.get("name") or kind)
    if ("url" in raw) == ("url_env" in raw):
        raise ConfigError(f"{where}: give exactly one of url and url_env")
    url = raw.get("url") or env.get(str(raw["url_env"]))
    if not url:
        return None, f"alert sink {name}: environment variable {raw['url_env']} is not set; sink disabled"
    secret = None
    if raw.get("secret_env"):
        secret = env.get(str(raw["secret_env"]))
        if not secret:
            return None, f"alert sink {name}: environment variable {raw['secret_env']} is not set; sink disabled"
    timeout = raw.get("timeout_s", 5.0)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError(f"{where}: timeout_s: expected a positive number of seconds, got {timeout!r}")
    severity = raw.get("min_severity", "warning")
    if severity not in SEVERITIES:
        raise ConfigError(f"{where}: min_severity: expected one of {', '.join(SEVERITIES)}, got {severity!r}")
    limits = raw.get("rate_limits", PLATFORMS[kind].limits)
    try:
        limits = tuple((int(n), float(s)) for n, s in limits)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: rate_limits: expected a list of [messages, seconds] pairs, "
                          f"got {limits!r}") from None
    if any(n < 1 or s <= 0 for n, s in limits):
        raise ConfigError(f"{where}: rate_limits: counts and periods must be positive, got {limits!r}")
    return SinkSpec(name, kind, str(url), secret, float(timeout), severity, limits), ""
