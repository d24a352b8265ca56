"""The HTTP server of ``/metrics`` and ``monitor relay``: waitress, with bounds on connections and time.

waitress serves every connection from one event loop thread and runs requests on a fixed pool of worker
threads, so held or idle connections cost a socket each, never a thread. The bounds (``Limits``):

* ``threads``: worker threads (requests served at once);
* ``connections``: open connections; beyond it the server stops accepting and new ones wait in the
  listen ``backlog`` (the kernel's queue) until one closes;
* ``idle_s``: a connection with no traffic for this long is closed (checked every ``idle_s / 4``, at
  least every second);
* ``request_s``: a request not received in full this long after its first byte is dropped with its
  connection (a client trickling a byte a second, never idle, would hold a connection for ever: with a few
  hundred of them, every slot; both checked every quarter of the shorter, at least every second);
* ``max_body``: a request body over this many bytes is answered 413 (a ``Content-Length`` that is not
  digits, negative included, is answered 400).
"""
from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from dataclasses import dataclass

from waitress import wasyncore
from waitress.server import create_server

logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "task queue depth" warnings under a burst


@dataclass(frozen=True)
class Limits:
    """Bounds of one server (see the module docstring); the defaults are those of ``/metrics``."""

    threads: int = 2
    connections: int = 64
    backlog: int = 1024
    idle_s: float = 30.0
    max_body: int = 1 << 16
    request_s: float = 10.0


class Server:
    """A WSGI ``app`` served on ``host:port`` (port 0: any free port, then :attr:`port`).

    Raises:
        OSError: the address cannot be bound, or the host does not resolve.
    """

    def __init__(self, app, host: str, port: int, limits: Limits | None = None, name: str = "monitor-http"):
        limits = limits or Limits()
        self.name, self.limits = name, limits
        every = max(min(limits.idle_s, limits.request_s) / 4, 1.0)
        try:
            self._server = create_server(app, host=host, port=port, threads=limits.threads,
                                         connection_limit=limits.connections, backlog=limits.backlog,
                                         channel_timeout=limits.idle_s, cleanup_interval=every,
                                         max_request_body_size=limits.max_body, asyncore_use_poll=True,
                                         ident=name, expose_tracebacks=False, clear_untrusted_proxy_headers=True)
        except ValueError:  # waitress's word for a host that does not resolve
            raise OSError(f"{host} is not an address of this machine") from None
        self._started: dict[int, float] = {}  # id of a request being received -> when maintenance first saw it
        idle = self._server.maintenance

        def maintenance(now: float) -> None:
            idle(now)
            self._deadline(now)
        self._server.maintenance = maintenance
        self.host, self.port = host, self._server.effective_port
        self._thread: threading.Thread | None = None

    def _deadline(self, now: float) -> None:
        """Close the connections whose request has been arriving for over ``request_s`` (waitress's maintenance
        pass, on the server's thread)."""
        started = {}
        for channel in list(self._server.active_channels.values()):
            request = channel.request  # (waitress: the request being received; None between requests)
            if request is None:
                continue
            since = started[id(request)] = self._started.get(id(request), now)
            if now - since > self.limits.request_s:
                channel.will_close = True
        self._started = started

    def start(self) -> Server:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._server.run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`close` (from another thread or a signal handler)."""
        self._server.run()

    def close(self) -> None:
        """Stop accepting, close every connection, stop the worker threads."""
        self._server.task_dispatcher.shutdown(timeout=2)
        wasyncore.close_all(self._server._map)
        if self._thread is not None:
            self._thread.join(5)


def is_loopback(host: str) -> bool:
    """``host`` (a name or an address) resolves to loopback addresses only."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback for i in infos)
