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
import re
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError, did_you_mean, is_http_url, is_int, is_label, is_number, read_yaml
from ..rules import SEVERITIES
from .platforms import PLATFORMS

SINK_KEYS = ("name", "type", "url", "url_env", "secret_env", "timeout_s", "min_severity", "rate_limits",
             "mentions")
_MENTION = re.compile(r"^[A-Za-z0-9_.@+-]{1,64}$")  # a platform user id (or "all")
KEYS = ("sinks", "dashboard_url", "runbook_base", "queue_size", "ranks")


@dataclass(frozen=True)
class SinkSpec:
    """One destination. ``limits``: (messages, seconds) windows; the platform's documented ones by default.
    ``mentions``: platform user ids (``all``: everyone) mentioned in every message of this sink; nothing
    else in a message can mention anyone."""

    name: str
    type: str
    url: str
    secret: str | None = None
    timeout_s: float = 5.0
    min_severity: str = "warning"
    limits: tuple[tuple[int, float], ...] = ()
    mentions: tuple[str, ...] = ()

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
        if not is_int(queue_size, 1, 100_000):
            raise ConfigError(f"{source}: alerts.queue_size: expected an integer 1..100000, got {queue_size!r}")
        ranks = data.get("ranks", "rank0")
        if ranks not in ("rank0", "all"):
            raise ConfigError(f"{source}: alerts.ranks: expected rank0 or all, got {ranks!r}")
        links = {key: data.get(key) or "" for key in ("dashboard_url", "runbook_base")}
        for key, url in links.items():
            if url and not is_http_url(url):
                raise ConfigError(f"{source}: alerts.{key}: expected an http:// or https:// URL, got {url!r}")
        return cls(tuple(sinks), links["dashboard_url"], links["runbook_base"], queue_size, ranks), problems


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
    name = raw.get("name", kind)
    if not is_label(name) or "/" in name:
        raise ConfigError(f"{where}: name: expected 1 to 128 printable characters without '/', got {name!r}")
    if ("url" in raw) == ("url_env" in raw):
        raise ConfigError(f"{where}: give exactly one of url and url_env")
    for key in ("url_env", "secret_env"):
        if key in raw and not is_label(raw[key]):
            raise ConfigError(f"{where}: {key}: expected the name of an environment variable, got {raw[key]!r}")
    if "url" in raw and not is_http_url(raw["url"]):
        raise ConfigError(f"{where}: url: expected an http:// or https:// URL, got {raw['url']!r}")
    url = raw.get("url") or env.get(raw["url_env"])
    if not url:
        return None, f"alert sink {name}: environment variable {raw['url_env']} is not set; sink disabled"
    if not is_http_url(url):  # never echoed: it holds a token
        return None, f"alert sink {name}: environment variable {raw['url_env']} is not an http(s) URL; sink disabled"
    secret = None
    if raw.get("secret_env"):
        secret = env.get(raw["secret_env"])
        if not secret:
            return None, f"alert sink {name}: environment variable {raw['secret_env']} is not set; sink disabled"
    timeout = raw.get("timeout_s", 5.0)
    if not is_number(timeout, 0, 300) or timeout <= 0:
        raise ConfigError(f"{where}: timeout_s: expected a number of seconds in 0..300, got {timeout!r}")
    mentions = raw.get("mentions", [])
    if not isinstance(mentions, list) or not all(isinstance(m, str) and _MENTION.match(m) for m in mentions):
        raise ConfigError(f"{where}: mentions: expected a list of user ids (letters, digits, _.@+-) or all, "
                          f"got {mentions!r}")
    severity = raw.get("min_severity", "warning")
    if severity not in SEVERITIES:
        raise ConfigError(f"{where}: min_severity: expected one of {', '.join(SEVERITIES)}, got {severity!r}")
    limits = raw.get("rate_limits", PLATFORMS[kind].limits)
    if not isinstance(limits, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and is_int(p[0], 1, 10_000) and is_number(p[1], 0, 86400)
            and p[1] > 0 for p in limits):
        raise ConfigError(f"{where}: rate_limits: expected a list of [messages 1..10000, seconds 0..86400] pairs, "
                          f"got {limits!r}")
    return SinkSpec(name, kind, url, secret, float(timeout), severity, tuple((n, float(s)) for n, s in limits),
                    tuple(mentions)), ""
