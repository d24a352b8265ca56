"""Real servers for the alerting tests: a chat-platform receiver on 127.0.0.1 that checks signatures the
way Feishu and DingTalk document them, and Prometheus / Alertmanager processes from Debian's packages."""
import base64
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

SECRETS: set[str] = set()  # every secret a test configures; tests/conftest.py greps each test's logs for them


def secret(value: str) -> str:
    """``value``, registered as a secret that must appear in no log the test writes."""
    SECRETS.add(value)
    return value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(name: str) -> str:
    """Path of a server binary; skip when missing, fail under CI (dev.sh test installs it)."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} not installed: dev.sh test installs it (Debian prometheus, prometheus-alertmanager)")
        pytest.skip(f"{name} not installed")
    return path


def feishu_sign_ok(body: dict, secret: str) -> bool:
    """Feishu custom bot check: ``base64(HMAC-SHA256(key="{timestamp}\\n{secret}", msg=""))``, timestamp in
    seconds and within an hour of now (Feishu open platform docs, "custom bot", signature verification)."""
    ts = body.get("timestamp", "")
    expected = base64.b64encode(hmac.new(f"{ts}\n{secret}".encode(), b"", hashlib.sha256).digest()).decode()
    return str(ts).isdigit() and abs(time.time() - int(ts)) < 3600 and hmac.compare_digest(expected, body.get("sign", ""))


def dingtalk_sign_ok(query: dict, secret: str) -> bool:
    """DingTalk robot check: query ``timestamp`` (ms, within an hour) and ``sign`` =
    ``urlencode(base64(HMAC-SHA256(key=secret, msg="{timestamp}\\n{secret}")))`` (DingTalk open platform
    docs, "custom robot security settings"); ``query`` is already URL-decoded once."""
    ts = query.get("timestamp", [""])[0]
    sign = query.get("sign", [""])[0]
    expected = base64.b64encode(hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()).decode()
    return ts.isdigit() and abs(time.time() * 1000 - int(ts)) < 3600_000 and hmac.compare_digest(expected, sign)


class Receiver:
    """HTTP server standing in for the chat platforms' webhook endpoints, on 127.0.0.1.

    The first path segment picks the platform: ``/feishu/...``, ``/dingtalk/...``, ``/wecom/...``,
    ``/slack/...``, ``/webhook/...``. Replies follow each platform's documented success / error bodies.
    ``fail[path_prefix] = n`` answers HTTP 500 to the next n requests there (``busy``: HTTP 429); ``hang[path_prefix] = s``
    sleeps s seconds before answering. Every request is kept in :attr:`requests`.
    """

    def __init__(self, secrets: dict[str, str] | None = None):
        self.secrets = secrets or {}
        SECRETS.update(self.secrets.values())
        self.requests: list[dict] = []
        self.fail: dict[str, int] = {}
        self.busy: dict[str, int] = {}
        self.hang: dict[str, float] = {}
        self.arrived = 0  # requests that reached the server, answered or not yet
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # a short poll: close() waits for the serving loop to see the shutdown (0.5 s per test by default)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def delivered(self, prefix: str) -> list[dict]:
        """Requests to ``prefix`` that the platform would have accepted."""
        with self.lock:
            return [r for r in self.requests if r["path"].startswith(prefix) and r["accepted"]]

    def wait_for(self, prefix: str, n: int = 1, timeout: float = 30.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.delivered(prefix)
            if len(got) >= n:
                return got
            time.sleep(0.05)
        raise AssertionError(f"{len(self.delivered(prefix))} of {n} messages reached {prefix} in {timeout} s: "
                             f"{self.requests}")

    def _reply(self, path: str, query: dict, body, size: int = 0) -> tuple[int, dict | str, bool]:
        """The vendor's answer to a POST of ``body`` (parsed JSON; ``size``: its bytes), with the vendors'
        documented size bounds: Feishu's request body 20 KB, DingTalk's message 20000 bytes, WeCom's markdown
        content 4096 bytes (UTF-8)."""
        for prefix, n in list(self.fail.items()):
            if path.startswith(prefix) and n > 0:
                self.fail[prefix] = n - 1
                return 500, {"error": "injected failure"}, False
        for prefix, n in list(self.busy.items()):
            if path.startswith(prefix) and n > 0:
                self.busy[prefix] = n - 1
                return 429, {"error": "too many requests"}, False
        platform = path.strip("/").split("/")[0]
        secret = self.secrets.get(platform)
        if platform == "feishu":
            if size > 20 * 1024:
                return 200, {"code": 9499, "msg": "request body too large"}, False
            ok = isinstance(body, dict) and body.get("msg_type") == "text" and (
                secret is None or feishu_sign_ok(body, secret))
            return 200, ({"code": 0, "msg": "success"} if ok else {"code": 19021, "msg": "sign match fail"}), ok
        if platform == "dingtalk":
            if size > 20000:
                return 200, {"errcode": 460101, "errmsg": "message too long"}, False
            ok = isinstance(body, dict) and body.get("msgtype") == "markdown" and (
                secret is None or dingtalk_sign_ok(query, secret))
            return 200, ({"errcode": 0, "errmsg": "ok"} if ok else {"errcode": 310000, "errmsg": "sign not match"}), ok
        if platform == "wecom":
            content = body.get("markdown", {}).get("content", "") if isinstance(body, dict) else ""
            if len(content.encode()) > 4096:
                return 200, {"errcode": 40058, "errmsg": "markdown.content exceed max length 4096"}, False
            ok = isinstance(body, dict) and body.get("msgtype") == "markdown" and "key" in query
            return 200, {"errcode": 0 if ok else 40008, "errmsg": "ok" if ok else "invalid message type"}, ok
        if platform == "slack":
            ok = isinstance(body, dict) and "text" in body
            return (200, "ok", True) if ok else (400, "invalid_payload", False)
        return 200, {"ok": True}, True

    def _handler(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                parsed = urllib.parse.urlparse(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                query = urllib.parse.parse_qs(parsed.query)
                with receiver.lock:
                    receiver.arrived += 1
                for prefix, seconds in list(receiver.hang.items()):
                    if parsed.path.startswith(prefix):
                        time.sleep(seconds)
                with receiver.lock:
                    status, reply, accepted = receiver._reply(parsed.path, query, body, len(raw))
                    receiver.requests.append({"path": parsed.path, "query": query, "body": body,
                                              "accepted": accepted, "status": status})
                data = (reply if isinstance(reply, str) else json.dumps(reply)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a hang test)
                    pass

            def log_message(self, *args):
                pass

        return Handler


def text_of(request: dict) -> str:
    """The human text of a delivered chat message, whatever the platform."""
    b = request["body"]
    if not isinstance(b, dict) or "alerts" in b:
        return json.dumps(b, ensure_ascii=False)
    if "blocks" in b:  # Slack: the text field is the notification fallback, the blocks hold the message
        return b["blocks"][0]["text"]["text"]
    return b.get("content", {}).get("text") or b.get("markdown", {}).get("text") or b["markdown"]["content"]


def http_json(url: str, data=None, timeout: float = 5.0, headers: dict | None = None):
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_until(fn, timeout: float, what: str, interval: float = 0.25):
    """Call ``fn`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            result = fn()
            if result:
                return result
        except OSError as exc:  # server not up yet
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last error: {last})")


class Process:
    """A server process started for a test; its output is kept in a log file for failure messages."""

    def __init__(self, args: list[str], log_path: str, env: dict | None = None):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()[-4000:]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def start_server(folder, exe_name: str, config: dict, args: list[str], ready_path: str,
                 port: int | None = None) -> tuple[Process, str]:
    """Run ``exe_name`` (a Debian package's server) with ``config`` written to ``folder`` and on a free
    port (``{port}`` and ``{url}`` in ``args`` are filled in); wait until ``ready_path`` answers."""
    exe = binary(exe_name)
    port = port or free_port()
    path = os.path.join(folder, f"{exe_name}.yml")
    with open(path, "w") as f:
        json.dump(config, f)
    url = f"http://127.0.0.1:{port}"
    proc = Process([exe, f"--config.file={path}", *(a.format(port=port, url=url, folder=folder) for a in args)],
                   os.path.join(folder, f"{exe_name}.log"))
    try:
        wait_until(lambda: http_json(url + ready_path), 30, f"{exe_name} to start")
    except AssertionError:
        proc.stop()
        raise AssertionError(f"{exe_name} did not start:\n{proc.output()}") from None
    return proc, url


def start_alertmanager(folder, config: dict) -> tuple[Process, str]:
    """Run Debian's ``prometheus-alertmanager`` with ``config`` on a free port; return it and its URL."""
    return start_server(folder, "prometheus-alertmanager", config, [
        "--storage.path={folder}/am-data", "--web.listen-address=127.0.0.1:{port}", "--web.external-url={url}",
        f"--cluster.listen-address=127.0.0.1:{free_port()}"], "/api/v2/status")


def training_prometheus_config(sd_dir) -> dict:
    """The shipped ``deploy/prometheus/prometheus.yml`` for a test: its rule files by absolute path, scraping every
    second only the training job's file_sd targets in ``sd_dir`` (re-read every second), sending no alert (a shared
    machine: nothing goes to whatever listens on 9093)."""
    import yaml

    deploy = os.path.join(os.path.dirname(__file__), "..", "deploy", "prometheus")
    with open(os.path.join(deploy, "prometheus.yml")) as f:
        cfg = yaml.safe_load(f)
    cfg["global"].update(scrape_interval="1s", scrape_timeout="1s")
    cfg["rule_files"] = [os.path.abspath(os.path.join(deploy, f)) for f in cfg["rule_files"]]
    del cfg["alerting"]
    cfg["scrape_configs"] = [j for j in cfg["scrape_configs"] if j["job_name"] == "training"]
    cfg["scrape_configs"][0]["file_sd_configs"][0].update(files=[f"{sd_dir}/*.json"], refresh_interval="1s")
    return cfg


def start_prometheus(folder, config: dict, *args: str) -> tuple[Process, str]:
    """Run Debian's ``prometheus`` with ``config`` (and extra command-line ``args``) on a free port; return
    it and its URL."""
    return start_server(folder, "prometheus", config, [
        "--storage.tsdb.path={folder}/prom-data", "--web.listen-address=127.0.0.1:{port}", *args],
        "/api/v1/status/buildinfo")
