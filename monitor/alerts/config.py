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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..detectors import SEVERITIES
from ..schema import ConfigError, check, is_http_url, is_int, is_label, is_number, located
from ..yamlfile import load_yaml
from .platforms import PLATFORMS

_MENTION = re.compile(r"^[A-Za-z0-9_.@+-]{1,64}$")  # a platform user id (or "all")
_URL = (is_http_url, "an http:// or https:// URL")
_LINK = (lambda v: not v or is_http_url(v), "an http:// or https:// URL")  # empty: none
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_ENV = (lambda v: isinstance(v, str) and _ENV_NAME.fullmatch(v) is not None,
        "the name of an environment variable (letters, digits, _)")


def _limits(v) -> bool:
    return isinstance(v, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and is_int(p[0], 1, 10_000) and is_number(p[1], 0, 86400)
        and p[1] > 0 for p in v)


@dataclass(frozen=True)
class _SinkSettings:
    """One ``alerts.sinks`` entry as written; :func:`_sink` resolves it into a :class:`SinkSpec`."""

    type: str = field(metadata={"choices": tuple(PLATFORMS)})
    name: str | None = field(default=None, metadata={"check": (lambda v: is_label(v) and "/" not in v,
                                                               "1 to 128 printable characters without '/'")})
    # ("secret": a wrong value is not echoed in the error, a webhook URL given by mistake as url_env among them)
    url: str | None = field(default=None, metadata={"check": _URL, "secret": True})
    url_env: str | None = field(default=None, metadata={"check": _ENV, "secret": True})
    secret_env: str | None = field(default=None, metadata={"check": _ENV, "secret": True})
    timeout_s: float = field(default=5.0, metadata={"min": 0, "min_open": True, "max": 300})
    min_severity: str = field(default="warning", metadata={"choices": SEVERITIES})
    rate_limits: list | None = field(default=None, metadata={"check": (
        _limits, "a list of [messages 1..10000, seconds 0..86400] pairs")})
    mentions: Sequence = field(default=(), metadata={"check": (
        lambda v: isinstance(v, list) and all(isinstance(m, str) and _MENTION.match(m) for m in v),
        "a list of user ids (letters, digits, _.@+-) or all")})


@dataclass(frozen=True)
class _AlertsSettings:
    """The ``alerts`` mapping as written (see :class:`AlertsConfig`)."""

    sinks: list | None = None
    dashboard_url: str | None = field(default=None, metadata={"check": _LINK})
    runbook_base: str | None = field(default=None, metadata={"check": _LINK})
    queue_size: int = field(default=1000, metadata={"min": 1, "max": 100_000})
    ranks: str = field(default="rank0", metadata={"choices": ("rank0", "all")})


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
        ranks: ``rank0`` (rank 0 sends the rule alerts that rank consensus makes the same on every rank; those
            of the rules on a rank's own measurements, ``throughput_drop`` and ``low_mfu``, and a ``stall`` are
            sent by whichever rank sees them) or ``all``.
    """

    sinks: tuple[SinkSpec, ...] = ()
    dashboard_url: str = ""
    runbook_base: str = ""
    queue_size: int = 1000
    ranks: str = "rank0"

    @classmethod
    def load(cls, data, source: str = "<alerts>", environ=None, lines: dict | None = None,
             path: tuple = ("alerts",)) -> tuple[AlertsConfig, list[str]]:
        """Parse a mapping, or the path of a YAML file (its ``alerts:`` key, or the whole file). ``lines``, ``path``:
        where the mapping is in its file (see :func:`training_monitor.schema.check`; a file's are read with it).

        Returns:
            the config and a list of problems that only disable one sink (a missing environment variable).
        Raises:
            ConfigError: unreadable file, unknown key or sink type, bad value; ``FILE:LINE: key.path: reason``.
        """
        if isinstance(data, (str, Path)):
            source = str(data)
            data, lines = load_yaml(data, "alerts file")
            nested = isinstance(data, dict) and isinstance(data.get("alerts"), dict)
            data, path = (data["alerts"], ("alerts",)) if nested else (data, ())
        if not isinstance(data, dict):
            raise ConfigError(f"{located(source, lines, path or ('alerts',))}: expected a mapping")
        settings = check(_AlertsSettings, data, source, lines, path, what="key")
        env = os.environ if environ is None else environ
        sinks, problems = [], []
        for i, raw in enumerate(settings.sinks or []):
            if not isinstance(raw, dict):
                raise ConfigError(f"{located(source, lines, (*path, 'sinks', i))}: expected a mapping")
            spec, problem = _sink(raw, source, lines, (*path, "sinks", i), env)
            if problem:
                problems.append(problem)
            elif spec:
                sinks.append(spec)
        names = [s.name for s in sinks]
        if len(set(names)) != len(names):
            raise ConfigError(f"{located(source, lines, (*path, 'sinks'))}: names must be unique, got {names}")
        return cls(tuple(sinks), settings.dashboard_url or "", settings.runbook_base or "", settings.queue_size,
                   settings.ranks), problems


def _sink(raw: dict, source: str, lines: dict | None, path: tuple, env) -> tuple[SinkSpec | None, str]:
    if "secret" in raw:
        raise ConfigError(f"{located(source, lines, (*path, 'secret'))}: put the secret in an environment variable "
                          "and name it with secret_env")
    s = check(_SinkSettings, raw, source, lines, path, what="key")
    name = s.name or s.type
    if (s.url is None) == (s.url_env is None):
        raise ConfigError(f"{located(source, lines, path)}: give exactly one of url and url_env")
    url = s.url or env.get(s.url_env)
    if not url:
        return None, f"alert sink {name}: environment variable {s.url_env} is not set; sink disabled"
    if not is_http_url(url):  # never echoed: it holds a token
        return None, f"alert sink {name}: environment variable {s.url_env} is not an http(s) URL; sink disabled"
    secret = None
    if s.secret_env:
        secret = env.get(s.secret_env)
        if not secret:
            return None, f"alert sink {name}: environment variable {s.secret_env} is not set; sink disabled"
    limits = PLATFORMS[s.type].limits if s.rate_limits is None else s.rate_limits
    return SinkSpec(name, s.type, url, secret, float(s.timeout_s), s.min_severity,
                    tuple((n, float(m)) for n, m in limits), tuple(s.mentions)), ""
