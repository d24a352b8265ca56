"""``monitor relay``: an HTTP service that takes Alertmanager webhooks and forwards them to chat.

Alertmanager has receivers for Slack and generic webhooks but none for Feishu/Lark, DingTalk or WeCom.
Point an Alertmanager ``webhook_configs`` receiver at this service and it re-sends each notification,
signed where the platform wants it, through the same background sender as the live monitor (rate
limits, digests, retries).

Endpoints:
    ``POST /alerts``: an Alertmanager webhook payload (version 4), forwarded to every sink.
    ``POST /alerts/<sink>``: the same, to one sink by name.
    ``GET /healthz``: 200 ``{"status": "ok"}`` while every sink's sender thread runs, 503 ``{"status":
    "down"}`` when one is dead or stuck; an authenticated caller also gets each sink's counters.
    ``GET /metrics``: the sinks' counters for Prometheus (``monitor_relay_alerts_total{sink, outcome}``: sent,
    failed, dropped; read-only, no credentials needed), which the shipped ``AlertRelayUndelivered`` alert reads.

Answers to a POST: 200 ``{"queued": n}`` (and ``"truncated": k`` for the alerts of a notification beyond
its first 1000, not forwarded: set ``max_alerts: 1000`` in Alertmanager's ``webhook_configs``); 400 naming the
bad field (nothing of that payload is queued); 401 without valid credentials; 404 for an unknown sink; 413 for
a body over 1 MiB; 503 with ``Retry-After`` when a queue had no room for some alert, so Alertmanager sends
the notification again: the relay remembers, for the last 64 notifications it answered so, which sink took
which alert, and the notification sent again goes only where it found no place (no sink gets an alert
twice). Each refusal is logged as a warning with its status and the caller's address, nothing of the
request's own text (repeats of one status: see :class:`training_monitor.log.Repeats`); the HTTP server's own
refusals (413, a bad ``Content-Length``), made before the relay reads the request, are not.

Authentication (what Alertmanager's ``http_config`` sends): a bearer token from ``MONITOR_RELAY_TOKEN``
(``authorization: {credentials_file: ...}``) and/or basic auth from ``MONITOR_RELAY_USER`` and
``MONITOR_RELAY_PASSWORD`` (``basic_auth: {username: ..., password_file: ...}``). Without either, the relay
listens only on a loopback address unless told otherwise (``allow_unauthenticated``).
"""
from __future__ import annotations

import base64
import binascii
import hmac
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from http import HTTPStatus

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .alerts import Alert, AlertsConfig, AlertSender
from .http import Limits, Server, is_loopback
from .log import logger
from .metrics import alert_counters

MAX_BODY = 1 << 20
MAX_ALERTS = 1000  # alerts of one payload forwarded; the rest are counted as truncated
MAX_RETRIED = 64  # payloads answered 503 whose alerts' places the relay remembers (see the module docstring)
LIMITS = Limits(threads=4, connections=256, backlog=1024, idle_s=30.0, max_body=MAX_BODY)
RETRY_AFTER_S = 30
MIN_SECRET = 16  # characters of a token or password
TOKEN_ENV, USER_ENV, PASSWORD_ENV = "MONITOR_RELAY_TOKEN", "MONITOR_RELAY_USER", "MONITOR_RELAY_PASSWORD"
# top-level fields of Alertmanager's webhook payload (version 4) and their JSON types
PAYLOAD_FIELDS = {"version": str, "groupKey": str, "truncatedAlerts": int, "status": str, "receiver": str,
                  "groupLabels": dict, "commonLabels": dict, "commonAnnotations": dict, "externalURL": str,
                  "alerts": list}


class RelayError(ValueError):
    """A relay that must not start: credentials too short, or no credentials on a non-loopback address."""


@dataclass(frozen=True)
class Auth:
    """Accepted credentials: a bearer ``token`` and/or basic ``user``/``password``; none: no check."""

    token: str = ""
    user: str = ""
    password: str = ""

    @classmethod
    def from_env(cls, environ=None) -> Auth:
        """From ``MONITOR_RELAY_TOKEN``, ``MONITOR_RELAY_USER`` and ``MONITOR_RELAY_PASSWORD``.

        Raises:
            RelayError: a token or password set but empty or shorter than 16 characters (``$(cat FILE)`` of a file
                that is not there sets it empty), or only one of user and password.
        """
        env = os.environ if environ is None else environ
        for name in (TOKEN_ENV, PASSWORD_ENV):
            if name in env and not env[name].strip():
                raise RelayError(f"{name} is set but empty (a token file not read?); set it to the secret, or unset it")
        auth = cls(env.get(TOKEN_ENV, ""), env.get(USER_ENV, ""), env.get(PASSWORD_ENV, ""))
        if bool(auth.user) != bool(auth.password):
            raise RelayError(f"set both {USER_ENV} and {PASSWORD_ENV} for basic auth, or neither")
        for name, value in ((TOKEN_ENV, auth.token), (PASSWORD_ENV, auth.password)):
            if value and len(value) < MIN_SECRET:
                raise RelayError(f"{name} is shorter than {MIN_SECRET} characters")
        return auth

    @property
    def required(self) -> bool:
        return bool(self.token or self.user)

    def allows(self, header: str) -> bool:
        """Whether an ``Authorization`` header value carries accepted credentials (constant-time compares)."""
        if not self.required:
            return True
        scheme, _, value = header.partition(" ")
        if self.token and scheme.lower() == "bearer":
            return hmac.compare_digest(value.strip().encode(), self.token.encode())
        if self.user and scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return False
            return hmac.compare_digest(user.encode(), self.user.encode()) & \
                hmac.compare_digest(password.encode(), self.password.encode())
        return False


def _not_json(constant: str):
    """``NaN``, ``Infinity`` and ``-Infinity`` are no JSON (RFC 8259), though Python's parser reads them."""
    raise ValueError(f"{constant} is not JSON")


class Relay:
    """The relay server. ``start()`` serves in a background thread, ``serve_forever()`` in this one.

    Args:
        config: the ``alerts`` settings (sinks, dashboard link).
        host, port: where to listen (port 0: any free port; the chosen one is :attr:`port`).
        auth: accepted credentials (default: from the environment, :meth:`Auth.from_env`).
        allow_unauthenticated: listen on a non-loopback address without credentials.
        limits: the HTTP server's bounds (:data:`LIMITS`: 4 threads, 256 connections, 30 s idle, 1 MiB body).
    Raises:
        RelayError: no credentials for a non-loopback address (and not allowed), or bad credentials.
        OSError: the address cannot be bound.
    """

    def __init__(self, config: AlertsConfig, host: str = "127.0.0.1", port: int = 9095, auth: Auth | None = None,
                 allow_unauthenticated: bool = False, limits: Limits = LIMITS):
        self.config = config
        self.auth = Auth.from_env() if auth is None else auth
        if not self.auth.required and not allow_unauthenticated and not is_loopback(host):
            raise RelayError(f"refusing to listen on {host} without credentials: set {TOKEN_ENV} (bearer token) "
                             f"or {USER_ENV} and {PASSWORD_ENV} (basic auth), or allow it explicitly (monitor relay "
                             "--allow-unauthenticated)")
        self.sender = AlertSender(config)
        # payload -> sink name -> hashes of the alerts that sink took, for payloads answered 503
        self._taken: OrderedDict[int, dict[str, set[int]]] = OrderedDict()
        self._lock = threading.Lock()
        self._runbook_said = False  # a runbook link outside alerts.runbook_base was logged as left out
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # (collect: the sinks' counters, read at each scrape)
        try:
            self.server = Server(self.app, host, port, limits, name="monitor-relay")
        except OSError:
            self.sender.close(0)
            raise
        self.port = self.server.port

    def start(self) -> Relay:
        self.server.start()
        return self

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def close(self, timeout_s: float = 5.0) -> dict:
        """Stop listening, deliver what is queued for up to ``timeout_s``; return the sinks' counters."""
        self.server.close()
        return self.sender.close(timeout_s)

    def forward(self, payload, sink: str | None) -> tuple[HTTPStatus, dict]:
        """Queue the alerts of one webhook payload; return the HTTP answer."""
        if not isinstance(payload, dict):
            return HTTPStatus.BAD_REQUEST, {"error": "expected an Alertmanager webhook payload (a JSON object)"}
        for key, kind in PAYLOAD_FIELDS.items():
            if key in payload and (not isinstance(payload[key], kind) or isinstance(payload[key], bool)):
                return HTTPStatus.BAD_REQUEST, {"error": f"{key}: expected a JSON {kind.__name__}"}
        items = payload.get("alerts")
        if items is None:
            return HTTPStatus.BAD_REQUEST, {"error": "alerts: missing"}
        truncated = max(0, len(items) - MAX_ALERTS)
        try:
            alerts = [Alert.from_alertmanager(a, self.config.dashboard_url, self.config.runbook_base, f"alerts[{i}]")
                      for i, a in enumerate(items[:MAX_ALERTS])]
        except ValueError as exc:
            return HTTPStatus.BAD_REQUEST, {"error": str(exc)}
        if not self._runbook_said and any(a.get("annotations", {}).get("runbook_url") and not b.runbook
                                          for a, b in zip(items, alerts)):
            self._runbook_said = True
            logger.warning("relay: a runbook_url outside alerts.runbook_base ({}) is left out of the messages (set "
                           "alerts.runbook_base to the base the alert rules' links use); logged once",
                           self.config.runbook_base or "not set")
        targets = self.sender.targets(sink)
        if not targets:
            return HTTPStatus.NOT_FOUND, {"error": f"no sink named {sink!r}"}
        if truncated:
            logger.warning("relay: a notification of {} alerts; the {} after the first {} are not forwarded (set "
                           "max_alerts: {} in Alertmanager's webhook_configs)", len(items), truncated, MAX_ALERTS,
                           MAX_ALERTS)
        keys = [hash(a.key()) for a in alerts]
        payload_key = hash((sink, tuple(keys)))
        with self._lock:
            taken = self._taken.pop(payload_key, {})
        refused = 0
        for target in targets:
            done = taken.setdefault(target.spec.name, set())
            offer = [(a, k) for a, k in zip(alerts, keys) if k not in done]
            lost = {hash(a.key()) for a in target.put([a for a, _ in offer])}
            done.update(k for _, k in offer if k not in lost)
            refused += len(lost)
        if refused:
            with self._lock:
                self._taken[payload_key] = taken
                while len(self._taken) > MAX_RETRIED:
                    self._taken.popitem(last=False)
            return HTTPStatus.SERVICE_UNAVAILABLE, {"error": "alert queue full; send again later", "refused": refused}
        return HTTPStatus.OK, {"queued": len(alerts), **({"truncated": truncated} if truncated else {})}

    def collect(self):
        """The sinks' counters as Prometheus metrics (:class:`prometheus_client.registry.Collector`)."""
        yield alert_counters("monitor_relay_alerts", "Alerts the relay handed to each sink", self.sender.stats())

    def app(self, environ, start_response):
        """The WSGI application."""
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "").rstrip("/")
        if path == "/metrics" and method in ("GET", "HEAD"):
            data = generate_latest(self.registry)
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(data)))])
            return [data]
        authed = self.auth.allows(environ.get("HTTP_AUTHORIZATION", ""))
        headers = []
        if path == "/healthz" and method in ("GET", "HEAD"):
            ok = self.sender.healthy()
            body: dict = {"status": "ok" if ok else "down"}
            if authed:
                body["sinks"] = self.sender.stats()
            status = HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
        elif path != "/alerts" and not path.startswith("/alerts/"):
            status, body = HTTPStatus.NOT_FOUND, {"error": "the relay answers GET /healthz, GET /metrics and POST "
                                                           "/alerts or /alerts/<sink>"}
        elif method != "POST":
            status, body = HTTPStatus.METHOD_NOT_ALLOWED, {"error": "POST to /alerts or /alerts/<sink>"}
            headers.append(("Allow", "POST"))
        elif not authed:
            status, body = HTTPStatus.UNAUTHORIZED, {"error": "credentials required"}
            headers.append(("WWW-Authenticate", 'Bearer realm="monitor-relay"' if self.auth.token
                            else 'Basic realm="monitor-relay"'))
        else:
            length = int(environ.get("CONTENT_LENGTH") or 0)  # digits only, at most MAX_BODY: waitress checks
            problem = ""
            try:
                payload = json.loads(environ["wsgi.input"].read(length) or b"null", parse_constant=_not_json)
            except ValueError:
                problem = "body is not JSON"
            except RecursionError:
                problem = "body JSON nested too deep"
            if problem:
                status, body = HTTPStatus.BAD_REQUEST, {"error": problem}
            else:
                status, body = self.forward(payload, path[len("/alerts/"):] if path != "/alerts" else None)
            if status == HTTPStatus.SERVICE_UNAVAILABLE:
                headers.append(("Retry-After", str(RETRY_AFTER_S)))
        if status >= 400 and path != "/healthz":  # (status and address only: the request's text is the caller's)
            logger.warning("relay: answered {} {} to a {} from {}", status.value, status.phrase, method[:8],
                           environ.get("REMOTE_ADDR", "?"))
        data = json.dumps(body).encode()
        start_response(f"{status.value} {status.phrase}", [("Content-Type", "application/json"),
                                                           ("Content-Length", str(len(data))), *headers])
        return [data]
