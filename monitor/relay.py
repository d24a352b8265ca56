"""``monitor relay``: an HTTP service that takes Alertmanager webhooks and forwards them to chat.

Alertmanager has receivers for Slack and generic webhooks but none for Feishu/Lark, DingTalk or WeCom.
Point an Alertmanager ``webhook_configs`` receiver at this service and it re-sends each notification,
signed where the platform wants it, through the same background sender as the live monitor (rate
limits, digests, retries).

Endpoints:
    ``POST /alerts``: an Alertmanager webhook payload (version 4), forwarded to every sink.
    ``POST /alerts/<sink>``: the same, to one sink by name.
    ``GET /healthz``: 200 and each sink's counters as JSON.
"""
from __future__ import annotations

import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .alerts import Alert, AlertsConfig, AlertSender
from .log import logger

MAX_BODY = 1 << 20


class Relay:
    """The relay server. ``start()`` serves in a background thread, ``serve_forever()`` in this one.

    Args:
        config: the ``alerts`` settings (sinks, dashboard link).
        host, port: where to listen (port 0: any free port; the chosen one is :attr:`port`).
    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, config: AlertsConfig, host: str = "127.0.0.1", port: int = 9095):
        self.config = config
        self.sender = AlertSender(config)
        self.server = ThreadingHTTPServer((host, port), _handler(self))
        self.port = self.server.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> "Relay":
        self._thread = threading.Thread(target=self.server.serve_forever, name="monitor-relay", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def close(self, timeout_s: float = 5.0) -> dict:
        """Stop listening, deliver what is queued for up to ``timeout_s``; return the sinks' counters."""
        self.server.shutdown()
        self.server.server_close()
        return self.sender.close(timeout_s)

    def forward(self, payload, sink: str | None) -> tuple[HTTPStatus, dict]:
        """Queue the alerts of one webhook payload; return the HTTP answer."""
        if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
            return HTTPStatus.BAD_REQUEST, {"error": "expected an Alertmanager webhook payload with an alerts list"}
        try:
            alerts = [Alert.from_alertmanager(a, self.config.dashboard_url, self.config.runbook_base)
                      for a in payload["alerts"]]
        except ValueError as exc:
            return HTTPStatus.BAD_REQUEST, {"error": str(exc)}
        if not self.sender.send(alerts, sink):
            return HTTPStatus.NOT_FOUND, {"error": f"no sink named {sink!r}", "sinks": list(self.sender.sinks)}
        return HTTPStatus.OK, {"queued": len(alerts)}


def _handler(relay: Relay):
    class Handler(BaseHTTPRequestHandler):
        server_version = "monitor-relay"

        def do_POST(self):
            path = self.path.split("?")[0].rstrip("/")
            if path != "/alerts" and not path.startswith("/alerts/"):
                return self._answer(HTTPStatus.NOT_FOUND, {"error": "POST to /alerts or /alerts/<sink>"})
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                return self._answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "body over 1 MiB"})
            try:
                payload = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                return self._answer(HTTPStatus.BAD_REQUEST, {"error": "body is not JSON"})
            sink = path[len("/alerts/"):] if path.startswith("/alerts/") else None
            self._answer(*relay.forward(payload, sink))

        def do_GET(self):
            if self.path.rstrip("/") == "/healthz":
                return self._answer(HTTPStatus.OK, relay.sender.stats())
            self._answer(HTTPStatus.NOT_FOUND, {"error": f"no GET {self.path}: the relay answers GET /healthz "
                                                         "and POST /alerts or /alerts/<sink>"})

        def _answer(self, status: HTTPStatus, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt, *args):
            logger.debug("relay: {}", fmt % args)

    return Handler
