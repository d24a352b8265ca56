"""Abuse of the relay, the /metrics exporter, replay and the settings and rules loaders: every break an
attack pass found (issue 13), reproduced against the real servers, the real CLI and real files on this
machine, all traffic to 127.0.0.1, and shown to hold. Memory is RSS read from /proc, threads the count in
/proc; the bounds asserted are those README "Security and limits" lists."""
import gzip
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.error
from concurrent.futures import ThreadPoolExecutor

import pytest

from services import Receiver, http_json, secret, text_of, wait_until
from training_monitor.alerts import Alert, AlertsConfig, AlertSender
from training_monitor.alerts.platforms import MAX_LINES
from training_monitor.config import MonitorConfig
from training_monitor.http import Limits
from training_monitor.metrics import Metrics
from training_monitor.relay import LIMITS, Auth, Relay, RelayError, is_loopback
from training_monitor.replay.sources import MAX_LINE, MAX_LINE_READ, MAX_RANKS
from training_monitor.ruleset import Rules, RulesError
from training_monitor.schema import ConfigError
from training_monitor.yamlfile import MAX_YAML_DEPTH

TOKEN = secret("abuse-relay-token-0123456789")
BEARER = {"Authorization": f"Bearer {TOKEN}"}
PLATFORMS = ("slack", "feishu", "dingtalk", "wecom")
MiB = 1 << 20


def status(pid="self") -> dict:
    """VmRSS and VmHWM (peak RSS) in bytes, and Threads, from /proc/PID/status."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
            elif key == "Threads":
                out[key] = int(value)
    return out


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def start_relay(receiver, limits=LIMITS, **settings):
    sinks = settings.pop("sinks", None) or [{"name": p, "type": p, "url": f"{receiver.url}/{p}/hook?key=K"}
                                            for p in PLATFORMS]
    cfg, problems = AlertsConfig.load({"runbook_base": "https://runbooks.example/rb",
                                       "dashboard_url": "https://grafana.example/d/run?var-run={run}",
                                       "sinks": sinks, **settings}, "test", {})
    assert not problems
    return Relay(cfg, port=0, auth=Auth(token=TOKEN), limits=limits).start()


def alert(name="TrainingStalled", summary="no step for 10 min", labels=None, notes=None) -> dict:
    return {"status": "firing", "labels": {"alertname": name, "run": "r1", "severity": "critical", **(labels or {})},
            "annotations": {"summary": summary, "runbook_url": "runbooks/stall.md", **(notes or {})},
            "startsAt": "2026-11-30T14:00:00Z"}


def post(relay, alerts, path="/alerts", headers=BEARER):
    """(HTTP status, JSON answer) of a webhook POST to the relay."""
    try:
        return 200, http_json(f"http://127.0.0.1:{relay.port}{path}", {"version": "4", "alerts": alerts},
                              timeout=30, headers=headers)
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def raw_http(port: int, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection, 64 KiB at a time, as long as the server has not answered (a server
    that refuses a body answers without reading it, then closes: a client still sending then gets a reset that
    may discard the answer); the server's answer (read until it closes or resets)."""
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            for i in range(0, len(data), 65536):
                if i and select.select([s], [], [], 0.05)[0]:
                    break  # answered
                s.sendall(data[i:i + 65536])
        except (BrokenPipeError, ConnectionResetError):  # closed while the rest of a refused body was sent
            pass
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:  # answered, then closed without reading the rest of a refused body
            pass
    return b"".join(chunks)


# 1. one request silenced the relay for good ------------------------------------------------------------
@pytest.mark.parametrize("bad, field", [
    (alert(summary=["a", "list"]), "alerts[1].annotations.summary: expected a string"),
    (alert(labels={"severity": 5}), "alerts[1].labels.severity: expected a string"),
    ({"labels": ["alertname"]}, "alerts[1].labels: expected a mapping"),
    ({**alert(), "status": {"state": "active"}}, "alerts[1].status: expected a string"),
    ({**alert(), "status": "exploded"}, "alerts[1].status: expected firing or resolved"),
    ("not an alert", "alerts[1]: expected a mapping"),
])
def test_a_wrongly_typed_field_gets_400_naming_it_and_never_reaches_a_sender(receiver, bad, field):
    relay = start_relay(receiver)
    try:
        code, answer = post(relay, [alert(summary="fine"), bad])
        assert code == 400 and field in answer["error"], answer
        assert post(relay, [alert()]) == (200, {"queued": 1})
        for p in PLATFORMS:  # the valid alert after it goes out everywhere, the first payload nowhere
            (msg,) = receiver.wait_for(f"/{p}", 1, timeout=10)
            assert "no step for 10 min" in text_of(msg) and "fine" not in text_of(msg)
        # a sender counts its post once the answer is back, after the receiver recorded it
        def health():
            return http_json(f"http://127.0.0.1:{relay.port}/healthz", headers=BEARER)
        wait_until(lambda: all(s["sent"] == 1 for s in health()["sinks"].values()), 10, "every post counted")
        h = health()
        assert h["status"] == "ok" and all(s["sender"] == "ok" and s["sent"] == 1 for s in h["sinks"].values()), h
    finally:
        relay.close(2)


def test_a_sender_thread_goes_on_after_a_batch_it_cannot_post(receiver, log_lines):
    s = AlertSender(AlertsConfig.load({"sinks": [{"name": "s", "type": "slack", "url": f"{receiver.url}/slack/x"}]})[0])
    s.send([Alert("bad", "critical", "value of the wrong type", value="not a number")])  # format raises
    wait_until(lambda: s.stats()["s"]["failed"] == 1, 10, "the bad alert to be counted as failed")
    s.send([Alert("nan_inf", "critical", "loss is nan")])
    (msg,) = receiver.wait_for("/slack", 1, timeout=10)
    assert "loss is nan" in text_of(msg) and s.healthy()
    assert s.close(2)["s"] == {"type": "slack", "sent": 1, "failed": 1, "dropped": 0, "retries": 0, "queued": 0, "sending": 0,
                               "down": False, "sender": "ok"}
    assert sum("could not post 1 alert(s) (TypeError); the sender goes on" in line for line in log_lines) == 1


class Exits:
    """A value whose conversion to float ends the thread that formats it (SystemExit ends a thread quietly)."""

    def __float__(self):
        raise SystemExit


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's end, on purpose
def test_healthz_says_down_when_a_sender_thread_is_dead(receiver):
    relay = start_relay(receiver, sinks=[{"name": "s", "type": "slack", "url": f"{receiver.url}/slack/x"}])
    base = f"http://127.0.0.1:{relay.port}/healthz"
    try:
        assert http_json(base) == {"status": "ok"}
        relay.sender.send([Alert("x", "critical", "kills its sender", value=Exits())])
        wait_until(lambda: not relay.sender.sinks["s"]._thread.is_alive(), 10, "the sender thread to end")
        with pytest.raises(urllib.error.HTTPError) as err:
            http_json(base, headers=BEARER)
        assert err.value.code == 503 and json.loads(err.value.read()) == {
            "status": "down", "sinks": {"s": {**relay.sender.stats()["s"], "sender": "dead or stuck"}}}
    finally:
        relay.close(0)


def test_metrics_count_each_sink_s_alerts_by_outcome_without_credentials(promtool):
    """The relay answers Alertmanager before it posts: a sink that fails (a wrong Feishu secret) showed only on an
    authenticated /healthz, which nothing scraped. /metrics counts them for Prometheus (AlertRelayUndelivered)."""
    from prometheus_client.parser import text_string_to_metric_families

    receiver = Receiver({"feishu": secret("feishu-right")})
    cfg, problems = AlertsConfig.load({"sinks": [
        {"name": "oncall", "type": "feishu", "url": f"{receiver.url}/feishu/hook", "secret_env": "FS"},
        {"name": "ml", "type": "slack", "url": f"{receiver.url}/slack/hook"}]}, "test", {"FS": secret("feishu-wrong")})
    assert not problems
    relay = Relay(cfg, port=0, auth=Auth(token=TOKEN)).start()
    try:
        assert post(relay, [alert()]) == (200, {"queued": 1})
        url = f"http://127.0.0.1:{relay.port}/metrics"

        def counts():
            with urllib.request.urlopen(url, timeout=5) as r:  # no credentials
                text = r.read().decode()
            return {(s.labels["sink"], s.labels["outcome"]): s.value for f in text_string_to_metric_families(text)
                    for s in f.samples if s.name == "monitor_relay_alerts_total"}, text
        wait_until(lambda: counts()[0].get(("oncall", "failed")) == 1 and counts()[0].get(("ml", "sent")) == 1, 15,
                   "the failed and the sent alert counted")
        got, text = counts()
        assert got == {("ml", "sent"): 1, ("ml", "failed"): 0, ("ml", "dropped"): 0, ("oncall", "sent"): 0,
                       ("oncall", "failed"): 1, ("oncall", "dropped"): 0}
        checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        relay.close(2)
        receiver.close()


@pytest.mark.slow
def test_healthz_says_down_while_a_sender_is_stuck_on_a_trickling_endpoint(receiver):
    """An endpoint that answers one byte every 0.3 s never trips the client's 0.5 s read timeout: after 3
    timeouts + 5 s on that post the sender is stuck, /healthz says so, and it is ok again once the post ends."""
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle():
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n")
            for _ in range(200):  # bounded: 60 s at most
                if stop.wait(0.3):
                    break
                conn.sendall(b" ")

    threading.Thread(target=trickle, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    relay = start_relay(receiver, sinks=[{"name": "g", "type": "webhook", "url": url, "timeout_s": 0.5}])
    base = f"http://127.0.0.1:{relay.port}/healthz"
    try:
        relay.sender.send([Alert("x", "critical", "to a trickling endpoint")])

        def down():
            try:
                http_json(base)
            except urllib.error.HTTPError as err:
                return err.code == 503 and json.loads(err.read()) == {"status": "down"}
            return False

        wait_until(down, 20, "/healthz to report the stuck sender")
        assert relay.sender.sinks["g"].busy  # still on that one post
        stop.set()
        wait_until(lambda: http_json(base) == {"status": "ok"}, 10, "/healthz to be ok again")
    finally:
        stop.set()
        listener.close()
        relay.close(1)


# 2. no authentication, verbatim injection, queue flooding -----------------------------------------------
def test_the_relay_wants_credentials_and_healthz_tells_strangers_nothing(receiver):
    relay = start_relay(receiver)
    try:
        assert post(relay, [alert()], headers={})[0] == 401
        assert post(relay, [alert()], headers={"Authorization": "Bearer " + TOKEN[:-1]})[0] == 401
        assert post(relay, [alert()], headers={"Authorization": "Basic " + "dXNlcjpwYXNz"})[0] == 401
        assert http_json(f"http://127.0.0.1:{relay.port}/healthz") == {"status": "ok"}
        assert not receiver.requests
    finally:
        relay.close(1)
    basic = Auth(user="alertmanager", password=secret("basic-password-0123456789"))
    cfg, _ = AlertsConfig.load({"sinks": [{"type": "slack", "url": f"{receiver.url}/slack/x"}]})
    relay = Relay(cfg, port=0, auth=basic).start()
    try:
        import base64
        good = base64.b64encode(f"alertmanager:{basic.password}".encode()).decode()
        assert post(relay, [alert()], headers={"Authorization": f"Basic {good}"}) == (200, {"queued": 1})
        assert post(relay, [alert()], headers=BEARER)[0] == 401
    finally:
        relay.close(1)
    with pytest.raises(RelayError, match="refusing to listen on 0.0.0.0 without credentials"):
        Relay(cfg, host="0.0.0.0", port=0, auth=Auth())
    assert is_loopback("localhost") and not is_loopback("0.0.0.0")
    with pytest.raises(RelayError, match="shorter than 16"):
        Auth.from_env({"MONITOR_RELAY_TOKEN": "short"})
    # `MONITOR_RELAY_TOKEN=$(cat FILE)` of a file that is not there: set but empty, not "no credentials"
    with pytest.raises(RelayError, match="MONITOR_RELAY_TOKEN is set but empty"):
        Auth.from_env({"MONITOR_RELAY_TOKEN": ""})


@pytest.mark.slow
def test_the_relay_cli_refuses_an_open_address_without_credentials(tmp_path):
    (tmp_path / "relay.yaml").write_text("alerts:\n  sinks: [{type: slack, url: 'http://127.0.0.1:9/x'}]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONITOR_RELAY_")}
    out = subprocess.run([sys.executable, "-m", "training_monitor.cli", "relay", "--config", str(tmp_path / "relay.yaml"),
                          "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "refusing to listen on 0.0.0.0 without credentials" in out.stderr, out.stderr


INJECTED = {"labels": {"run": "<!channel>", "rank": "3"},
            "notes": {"summary": '<!here> <at user_id="all">all</at> <@all> <https://evil.example/a|Click to '
                                 'acknowledge> [Click](https://evil.example/b) ![x](https://evil.example/c.png) '
                                 'see https://evil.example/d \u202edecnalab\u202c \u2067x\u2069',
                      "runbook_url": "javascript:alert(1)", "dashboard_url": "https://evil.example/grafana",
                      "action": "<!everyone>"}}
MARKUP = ("<!channel>", "<!here>", "<!everyone>", "<at user_id", "<@all>", "<https://evil", "](https://evil",
          "https://evil", "javascript:", "\u202e", "\u202c", "\u2067", "\u2069")  # (bidi overrides: spoofed text)


def test_chat_text_cannot_mention_anyone_or_link_anywhere(receiver):
    relay = start_relay(receiver)
    try:
        assert post(relay, [alert(**INJECTED)]) == (200, {"queued": 1})
        for p in PLATFORMS:
            (msg,) = receiver.wait_for(f"/{p}", 1, timeout=10)
            text = text_of(msg) + json.dumps(msg["body"].get("at", {}))
            assert not [m for m in MARKUP if m in text], (p, text)
            assert "evil.example" in text and "Click to acknowledge" in text  # shown, as inert text
            assert "https://grafana.example/d/run?var-run=%3C%21channel%3E" in text, text  # the configured link
            assert "runbooks.example" not in text  # the javascript: runbook was not under the base: dropped
            assert "at" not in msg["body"]
    finally:
        relay.close(2)


def test_a_runbook_link_cannot_climb_out_of_runbook_base():
    base = "https://git.example.com/ml/monitor/-/blob/main/runbooks"
    for url in (f"{base}/../../../../evil.md", f"{base}/%2e%2e/%2E%2E/evil.md", f"{base}/x/..\\..\\evil.md",
                f"{base}s/evil.md", "runbooks/..", "runbooks/../../etc/passwd"):
        a = Alert.from_alertmanager({"labels": {"alertname": "X"}, "annotations": {"runbook_url": url}}, "", base)
        assert a.runbook == "", url
    a = Alert.from_alertmanager({"labels": {"alertname": "X"}, "annotations": {"runbook_url": f"{base}/stall.md"}},
                                "", base)
    assert a.runbook == f"{base}/stall.md"


def test_mentions_only_where_the_operator_configures_them(receiver):
    sinks = [{"name": "s", "type": "slack", "url": f"{receiver.url}/slack/x", "mentions": ["all"]},
             {"name": "d", "type": "dingtalk", "url": f"{receiver.url}/dingtalk/x", "mentions": ["u123"]}]
    relay = start_relay(receiver, sinks=sinks)
    try:
        assert post(relay, [alert(**INJECTED)])[0] == 200
        (slack,) = receiver.wait_for("/slack", 1, timeout=10)
        assert text_of(slack).count("<!") == 1 and text_of(slack).endswith("<!channel>")
        (ding,) = receiver.wait_for("/dingtalk", 1, timeout=10)
        assert ding["body"]["at"] == {"isAtAll": False, "atUserIds": ["u123"]} and "@u123" in text_of(ding)
    finally:
        relay.close(2)
    for bad in ({"runbook_base": "javascript:alert(1)"}, {"dashboard_url": "ftp://x/"},
                {"sinks": [{"type": "slack", "url": "http://x/", "mentions": ["<!here>"]}]},
                {"sinks": [{"type": "slack", "url": "file:///etc/passwd"}]}):
        with pytest.raises(ConfigError):
            AlertsConfig.load(bad, "relay.yaml", {})


def test_a_flood_gets_503_and_cannot_push_out_a_real_alert(receiver):
    """3 x 1000 junk alerts against a rate-limited sink (one post a minute): the first goes out as one digest,
    the second fills the queue, the third is answered 503 (Alertmanager sends it again later), and a real alert
    still gets a place."""
    relay = start_relay(receiver, sinks=[{"name": "w", "type": "wecom", "url": f"{receiver.url}/wecom/x?key=K",
                                          "rate_limits": [[1, 60]]}], queue_size=1000)
    try:
        junk = [[alert("Junk", f"junk {i}") for i in range(k * 1000, (k + 1) * 1000)] for k in (0, 1, 2)]
        assert post(relay, junk[0]) == (200, {"queued": 1000})
        [digest] = receiver.wait_for("/wecom/", 1)  # one message, its first lines and the count of the rest
        assert text_of(digest).count("junk ") == MAX_LINES and f"and {1000 - MAX_LINES} more: " in text_of(digest)
        assert post(relay, junk[1]) == (200, {"queued": 1000})
        code, answer = post(relay, junk[2])
        assert code == 503 and answer["refused"] == 1000, answer
        assert post(relay, [alert("TrainingStalled", "rank 3 has not finished a step for 10 min")]) == \
            (200, {"queued": 1})
        assert post(relay, [alert("TrainingStalled", "rank 3 has not finished a step for 10 min")])[0] == 200
        queue = list(relay.sender.sinks["w"].queue)
        assert [a.rule for a in queue].count("TrainingStalled") == 1 and len(queue) <= 1000  # once, not twice
        # a flood of distinct names (each holds one place) gets 503 for what does not fit, never a silent 200
        code, answer = post(relay, [alert(f"Junk{i}", "x") for i in range(1000)])
        assert code == 503 and answer["refused"] > 0
        assert [a.rule for a in relay.sender.sinks["w"].queue].count("TrainingStalled") == 1
    finally:
        relay.close(0)


def test_a_notification_sent_again_after_503_reaches_no_sink_twice(receiver, log_lines):
    """A fast sink, and a rate-limited one (a post a minute) whose queue of 8 is full: a notification of 8
    alerts is taken by the fast sink and refused by the slow one (503). Alertmanager sends it again, twice: the
    fast sink is not offered it again. A notification over 1000 alerts is forwarded cut, not refused."""
    relay = start_relay(receiver, queue_size=8, sinks=[
        {"name": "fast", "type": "webhook", "url": f"{receiver.url}/webhook/fast"},
        {"name": "slow", "type": "wecom", "url": f"{receiver.url}/wecom/x?key=K", "rate_limits": [[1, 60]]}])
    try:
        assert post(relay, [alert("Before", f"b {i}") for i in range(8)], path="/alerts/slow")[0] == 200
        receiver.wait_for("/wecom/", 1)  # its one post of the minute
        assert post(relay, [alert("Full", f"f {i}") for i in range(8)], path="/alerts/slow")[0] == 200
        eight = [alert("Dup", f"dup {i}") for i in range(8)]
        for _ in range(3):  # (the Dup alerts push out some of the Full ones: the rest find no place)
            code, answer = post(relay, eight)
            assert code == 503 and answer["refused"] >= 1, answer
        wait_until(lambda: sum(len(r["body"]["alerts"]) for r in receiver.delivered("/webhook/fast")) >= 8, 10,
                   "the fast sink's deliveries")
        time.sleep(0.3)  # (a duplicate would be posted by now)
        summaries = [a["summary"] for r in receiver.delivered("/webhook/fast") for a in r["body"]["alerts"]]
        assert sorted(summaries) == sorted(f"dup {i}" for i in range(8))
    finally:
        relay.close(0)
    relay = start_relay(receiver, sinks=[{"name": "fast", "type": "webhook", "url": f"{receiver.url}/webhook/big"}])
    try:
        assert post(relay, [alert("Big", f"rank {i} down") for i in range(1200)]) == \
            (200, {"queued": 1000, "truncated": 200})
        assert any("the 200 after the first 1000 are not forwarded" in line for line in log_lines)
    finally:
        relay.close(0)


# 4. negative Content-Length, huge bodies --------------------------------------------------------------
def test_bad_content_lengths_and_huge_bodies_are_refused_without_reading_them(receiver):
    relay = start_relay(receiver)
    head = (f"POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n"
            "Content-Type: application/json\r\n")
    try:
        before = status()
        for length in ("-1", "-300000000", "abc", "1e9"):
            answer = raw_http(relay.port, f"{head}Content-Length: {length}\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 400"), (length, answer[:200])
        answer = raw_http(relay.port, f"{head}Content-Length: {300 * MiB}\r\n\r\n".encode() + b"[" * MiB)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        answer = raw_http(relay.port, f"{head}Transfer-Encoding: chunked\r\n\r\n".encode() +
                          b"".join(b"100000\r\n" + b"x" * MiB + b"\r\n" for _ in range(3)))
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        nested = b"[" * 200_000 + b"]" * 200_000
        answer = raw_http(relay.port, f"{head}Content-Length: {len(nested)}\r\n\r\n".encode() + nested)
        assert answer.startswith(b"HTTP/1.1 400") and b"body JSON nested too deep" in answer
        nan = b'{"version": "4", "truncatedAlerts": NaN, "alerts": []}'  # Python's parser reads it; JSON has no NaN
        answer = raw_http(relay.port, f"{head}Content-Length: {len(nan)}\r\n\r\n".encode() + nan)
        assert answer.startswith(b"HTTP/1.1 400") and b"body is not JSON" in answer
        assert status()["VmRSS"] - before["VmRSS"] < 32 * MiB, (before, status())
        assert post(relay, [alert()]) == (200, {"queued": 1}) and relay.sender.healthy()
    finally:
        relay.close(1)


# 8. bursts and idle connections ------------------------------------------------------------------------
def test_two_hundred_concurrent_posts_all_get_an_answer(receiver):
    relay = start_relay(receiver, sinks=[{"name": "g", "type": "webhook", "url": f"{receiver.url}/webhook/in"}])
    try:
        with ThreadPoolExecutor(200) as pool:
            codes = list(pool.map(lambda i: post(relay, [alert(summary=f"burst {i}")])[0], range(200)))
        assert codes == [200] * 200  # no reset: the listen backlog (1024) holds what the workers have not taken
        assert relay.sender.flush(30) and relay.sender.stats()["g"]["sent"] == 200
    finally:
        relay.close(1)


def hold(port: int, n: int, partial: bytes) -> list[socket.socket]:
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if i % 2:
            s.sendall(partial)  # a request that never ends
        socks.append(s)
    return socks


@pytest.mark.slow
def test_held_connections_cost_no_thread_and_idle_ones_are_closed(receiver):
    """600 held connections (half idle, half with a request that never ends) to the relay and to /metrics:
    no thread is added (waitress serves connections from one loop thread, requests from a fixed pool), RSS
    grows by less than 48 MiB, and the relay closes them after its idle timeout (2 s here)."""
    relay = start_relay(receiver, limits=Limits(threads=4, connections=256, backlog=1024, idle_s=2.0, max_body=MiB))
    metrics = Metrics("r1", 0)
    url = metrics.serve("127.0.0.1", 0)
    socks = []
    try:
        before = status()
        socks = hold(relay.port, 600, b"POST /alerts HTTP/1.1\r\nHost: x\r\n") + \
            hold(metrics.server.port, 600, b"GET /metrics HTTP/1.1\r\n")
        during = status()
        assert during["Threads"] <= before["Threads"], (before, during)
        assert during["VmRSS"] - before["VmRSS"] < 48 * MiB, (before, during)

        def closed(s):
            try:
                s.settimeout(0.01)
                return s.recv(1 << 16) == b""
            except TimeoutError:
                return False
            except OSError:
                return True

        relayed = socks[:600]
        wait_until(lambda: all(closed(s) for s in relayed), 60, "the relay to close 600 idle connections")
        assert post(relay, [alert()]) == (200, {"queued": 1})
    finally:
        for s in socks:
            s.close()
        relay.close(1)
        metrics.close()
    assert url.endswith("/metrics")


@pytest.mark.slow
def test_a_request_trickled_a_byte_at_a_time_is_dropped_after_request_s(receiver):
    """Slowloris: 300 connections each sending a header byte every 0.5 s are never idle; the relay (256
    connections) drops each after its request_s (2 s here), and a real request is answered meanwhile."""
    relay = start_relay(receiver, limits=Limits(threads=4, connections=256, backlog=1024, idle_s=30.0, max_body=MiB,
                                                request_s=2.0))
    socks = hold(relay.port, 300, b"")
    stop = threading.Event()

    def trickle():
        while not stop.is_set():
            for s in socks:
                try:
                    s.send(b"X")
                except OSError:
                    pass
            stop.wait(0.5)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        time.sleep(1.0)
        t0 = time.monotonic()
        assert post(relay, [alert()]) == (200, {"queued": 1})
        assert time.monotonic() - t0 < 20  # not until the trickling clients go away
    finally:
        stop.set()
        thread.join(5)
        for s in socks:
            s.close()
        relay.close(1)


# 3. a wrongly typed setting ----------------------------------------------------------------------------
@pytest.mark.parametrize("key, value", [
    ("run", 2024), ("run", ""), ("run", "a\nb"), ("run", "x" * 129), ("rank", -1), ("lr_factor", float("nan")),
    ("lr_factor", float("inf")), ("n_params", float("inf")), ("peak_tflops", True), ("metrics_host", 5),
    ("output_dir", None), ("tokens_per_step", 2**60), ("world_size", 0), ("checkpoint_every", 10**12),
    ("device", 7), ("metrics_port", 70000),
])
def test_a_wrongly_typed_setting_fails_at_construction_naming_the_key(key, value):
    with pytest.raises(ConfigError, match=f"^monitor.yaml: {key}: expected"):
        MonitorConfig.from_dict({key: value}, "monitor.yaml")


def test_settings_from_a_file_are_checked_and_a_scrape_of_a_valid_run_answers(tmp_path):
    (tmp_path / "monitor.yaml").write_text("monitor:\n  run: 2024\n")
    with pytest.raises(ConfigError, match=r"monitor.yaml:2: monitor.run: expected a string"):
        MonitorConfig.from_yaml(tmp_path / "monitor.yaml")
    (tmp_path / "monitor.yaml").write_text("monitor:\n  run: '2024'\n  lr_factor: .nan\n")
    with pytest.raises(ConfigError, match=r"monitor.yaml:3: monitor.lr_factor: expected a finite number"):
        MonitorConfig.from_yaml(tmp_path / "monitor.yaml")
    m = Metrics(MonitorConfig.from_dict({"run": "2024"}).run, 0)
    url = m.serve("127.0.0.1", 0)
    try:
        import urllib.request
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert resp.status == 200 and 'run="2024"' in resp.read().decode()
    finally:
        m.close()


@pytest.mark.slow
def test_a_logged_traceback_shows_no_variable_values(tmp_path):
    """loguru's variable-dumping traceback printed a sink's repr with a webhook token; the product's
    handlers (and those added after it first logs) show the frames without values."""
    token = secret("hook-access-token-9f8e7d6c5b4a")
    code = (f"from training_monitor.log import logger\n"
            f"def post(sink):\n    url = sink['url']\n    raise TypeError('cannot post')\n"
            f"try:\n    post({{'url': 'https://oapi.dingtalk.com/robot/send?access_token={token}'}})\n"
            f"except TypeError as exc:\n    logger.opt(exception=exc).error('alert sink failed')\n")
    log = tmp_path / "child.log"
    with open(log, "w") as out:
        subprocess.run([sys.executable, "-c", code], stderr=out, timeout=60, check=True)
    text = log.read_text()
    assert "alert sink failed" in text and "TypeError: cannot post" in text and "line 4, in post" in text
    assert "access_token" not in text  # the autouse check also greps child.log for the token


# 6. replay memory --------------------------------------------------------------------------------------
def replay_child(*args) -> tuple[subprocess.CompletedProcess, int]:
    """``monitor replay ARGS`` in a fresh process; (its result, its peak RSS in bytes from /proc)."""
    code = ("import atexit, sys\n"
            "def peak():\n    sys.stderr.write([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0])\n"
            "atexit.register(peak)\nfrom training_monitor.cli import main\nsys.argv = ['monitor', 'replay', *sys.argv[1:]]\n"
            "main()\n")
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300)
    (line,) = [line for line in out.stderr.splitlines() if line.startswith("VmHWM")]
    return out, int(line.split()[1]) * 1024


def records(path, steps, start=0):
    with open(path, "a") as f:
        for i in range(start, start + steps):
            f.write(json.dumps({"step": i, "loss": 3.0 - i * 0.001}) + "\n")


@pytest.mark.slow
def test_an_over_long_line_is_cut_and_memory_stays_bounded(tmp_path):
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    records(small, 60)
    records(big, 30)
    with open(big, "a") as f:  # 160 MiB without a newline, then the rest of the log
        for _ in range(160):
            f.write("x" * MiB)
        f.write("\n")
    records(big, 30, 30)
    base, base_peak = replay_child("--json", small)
    out, peak = replay_child("--json", big)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["steps"] == json.loads(base.stdout)["steps"] == 60
    assert f"1 line(s) longer than {MAX_LINE >> 10} KiB cut there; {160 * MiB - MAX_LINE} bytes" in out.stderr
    assert peak - base_peak < 8 * MAX_LINE + 16 * MiB, (peak, base_peak)  # the 160 MiB line took 1 GB before


@pytest.mark.parametrize("packed", [False, True])
def test_the_bounded_stream_cuts_each_line_at_the_limit_and_keeps_the_rest(tmp_path, packed):
    from training_monitor.replay.sources import open_bytes

    lengths = [0, 5, MAX_LINE - 1, MAX_LINE, MAX_LINE + 1, 3 * MAX_LINE + 7, 10, 2 * MAX_LINE, 1, 300_000]
    lines = [bytes([97 + i % 26]) * n for i, n in enumerate(lengths)]
    data = b"\n".join(lines) + b"\n" + b"x" * (MAX_LINE + 3)  # the last line has no newline
    path = tmp_path / ("log.txt.gz" if packed else "log.txt")
    path.write_bytes(gzip.compress(data, 1) if packed else data)
    expected = b"\n".join(line[:MAX_LINE] for line in lines) + b"\n" + b"x" * MAX_LINE
    with open_bytes(str(path)) as f:
        got = b"".join(iter(lambda: f.read(1 << 18), b""))
        cut = (f.raw.cut_lines, f.raw.cut_bytes)
    assert got == expected
    assert cut == (4, 1 + 2 * MAX_LINE + 7 + MAX_LINE + 3)
    with open_bytes(str(path)) as f:
        assert [len(line) for line in f] == [min(n, MAX_LINE) + 1 for n in lengths] + [MAX_LINE]


@pytest.mark.slow
def test_a_gzip_bomb_line_ends_the_file_with_an_error_naming_it(tmp_path):
    small, bomb = tmp_path / "small.jsonl", tmp_path / "bomb.jsonl.gz"
    records(small, 30)
    with gzip.open(bomb, "wb", compresslevel=1) as f:  # 30 records, then 256 MiB of one line
        f.write(small.read_bytes())
        for _ in range(256):
            f.write(b"a" * MiB)
    assert bomb.stat().st_size < 2 * MiB
    _, base_peak = replay_child(small)
    out, peak = replay_child(bomb)
    assert out.returncode == 2 and f"bomb.jsonl.gz:31: a line over {MAX_LINE_READ >> 20} MiB (after decompression)" \
        in out.stderr, out.stderr
    assert peak - base_peak < 8 * MAX_LINE + 16 * MiB, (peak, base_peak)


@pytest.mark.slow
def test_too_many_distinct_ranks_is_an_error_naming_the_file(tmp_path):
    log = tmp_path / "ranks.csv"  # a rank column
    log.write_text("step,loss,rank\n" + "".join(f"{1 + i // 1000},2.0,{i}\n" for i in range(20_000)))
    _, base_peak = replay_child(tmp_path / "nothing.jsonl")
    out, peak = replay_child(log)
    assert out.returncode == 2 and f"ranks.csv: more than {MAX_RANKS} distinct ranks in one log" in out.stderr
    assert peak - base_peak < 256 * MiB, (peak, base_peak)  # 200,000 ranks took 5 GB before
    prefixed = tmp_path / "workers.log"  # torchrun's [defaultN]: line prefixes, each a parser of its own
    prefixed.write_text("".join(f"[default{i}]:iter {i}: loss 2.5, time 100ms\n" for i in range(5000)))
    out, _ = replay_child(prefixed)
    assert out.returncode == 2 and f"workers.log: more than {MAX_RANKS} distinct ranks in one log" in out.stderr


# 10. special files, symlinks, file names, --html of an event log -------------------------------------------
@pytest.mark.slow
def test_special_files_symlinks_and_names_are_reported_per_file(tmp_path):
    os.mkfifo(tmp_path / "pipe.log")
    out, _ = replay_child(tmp_path / "pipe.log")  # no writer: read as empty, not a hang
    assert out.returncode == 2 and "pipe.log: empty file" in out.stderr, out.stderr
    out, _ = replay_child("/dev/zero")
    assert out.returncode == 2 and "/dev/zero: not a regular file" in out.stderr

    folder = tmp_path / "run"
    folder.mkdir()
    records(folder / "good.jsonl", 40)
    os.symlink(folder / "missing.log", folder / "dangling.log")
    os.symlink(folder / "loop.log", folder / "loop.log")
    os.mkfifo(folder / "fifo.log")
    forged = folder / "evil\nFORGED 0 anomalies.jsonl"
    records(forged, 40)
    out, _ = replay_child(folder)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "dangling.log: dangling symlink" in text and "loop.log: cannot read: Too many levels of symbolic links" \
        in text and "fifo.log: empty file" in text, text
    assert "good.jsonl: text" in text and "'" + str(forged).replace("\n", "\\n") + "'" in text
    assert not [line for line in text.splitlines() if line.startswith("FORGED")]


@pytest.mark.slow
def test_unreadable_folders_and_files_are_named_as_such():
    """As an unprivileged user (root reads everything): an unreadable folder named on the command line is
    "cannot read this folder", not "no log files"; below a folder, an unreadable subfolder is a warning and
    an unreadable file an error of its own, and the rest is replayed."""
    import shutil
    import tempfile

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv (util-linux) to run replay as another user")
    top = tempfile.mkdtemp(prefix="abuse-perm-")  # tmp_path's parents are closed to other users
    try:
        os.chmod(top, 0o755)
        records(os.path.join(top, "ok.jsonl"), 30)
        records(os.path.join(top, "secret.jsonl"), 30)
        os.makedirs(os.path.join(top, "closed"))
        records(os.path.join(top, "closed", "x.jsonl"), 30)
        for path, mode in (("ok.jsonl", 0o644), ("secret.jsonl", 0o600), ("closed", 0o700)):
            os.chmod(os.path.join(top, path), mode)

        def replay(path):
            return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                                   "-m", "training_monitor.cli", "replay", path], capture_output=True, text=True, timeout=120,
                                  cwd="/")
        out = replay(top)
        assert out.returncode == 0, out.stderr
        text = out.stdout + out.stderr
        assert "closed: cannot read this folder: Permission denied" in text and "ok.jsonl: text" in text
        assert "secret.jsonl: cannot read: Permission denied" in text, text
        out = replay(os.path.join(top, "closed"))
        assert out.returncode == 2 and "closed: cannot read this folder: Permission denied" in out.stderr, out.stderr
    finally:
        shutil.rmtree(top)


@pytest.mark.slow
def test_html_of_an_event_log_works(tmp_path):
    import math

    from training_monitor.engine import Engine
    from training_monitor.record import StepRecord

    engine = Engine()
    events = [e for i in range(40) for e in engine.observe(StepRecord(i, loss=math.nan if i == 30 else 2.0))]
    (tmp_path / "events_rank0.jsonl").write_text("".join(json.dumps(e.to_dict()) + "\n" for e in events))
    out = subprocess.run([sys.executable, "-m", "training_monitor.cli", "replay", str(tmp_path / "events_rank0.jsonl"),
                          "--html", str(tmp_path / "r.html")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "r.html").read_text()
    assert "no plots: this log has no step series" in page and "nan_inf" in page


# 7. rules and settings YAML ----------------------------------------------------------------------------
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{k}: &{k} [{', '.join(['*' + p] * 9)}]\n" for p, k in zip("abcdefgh", "bcdefghi")) + \
    "loss_spike: {threshold: *i}\n"


def test_a_yaml_alias_bomb_is_refused_before_anything_expands_it(tmp_path):
    (tmp_path / "rules.yaml").write_text(BOMB)
    assert len(BOMB) < 1200
    before = status()
    with pytest.raises(RulesError, match=r"rules.yaml:2: not valid YAML: YAML aliases"):
        Rules.load(tmp_path / "rules.yaml")
    with pytest.raises(ConfigError, match="YAML aliases"):
        AlertsConfig.load(tmp_path / "rules.yaml")  # monitor relay --config
    assert status()["VmRSS"] - before["VmRSS"] < 16 * MiB


def test_deep_nesting_is_an_error_not_a_recursion_error(tmp_path):
    (tmp_path / "deep.yaml").write_text("loss_spike: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(RulesError, match=f"deep.yaml:1: not valid YAML: nested deeper than {MAX_YAML_DEPTH}"):
        Rules.load(tmp_path / "deep.yaml")
    for load in (MonitorConfig.from_yaml, AlertsConfig.load):
        with pytest.raises(ConfigError, match=f"nested deeper than {MAX_YAML_DEPTH}"):
            load(tmp_path / "deep.yaml")


@pytest.mark.parametrize("text, error", [
    ("loss_spike:\n  window: 1000000000000\n", ":2: loss_spike.window: expected an integer 1..10000000, got 1000000000000"),
    ("loss_spike:\n  threshold: .inf\n", ":2: loss_spike.threshold: expected a finite number, got .inf"),
    ("loss_spike:\n  threshold: 1.0e+400\n", ":2: loss_spike.threshold: expected a finite number"),
    ("loss_spike:\n  threshold: 1e400\n", ":2: loss_spike.threshold: expected a finite number 0..1e+07, got '1e400'"),
    ("stall:\n  min_seconds: 1.0e+29\n", ":2: stall.min_seconds: expected a finite number 0..1e+07, got 1e+29"),
])
def test_rule_numbers_are_finite_and_bounded_and_errors_name_the_rules_file(tmp_path, text, error):
    (tmp_path / "rules.yaml").write_text(text)
    with pytest.raises(RulesError) as err:
        Rules.load(tmp_path / "rules.yaml")
    assert str(err.value).startswith(str(tmp_path / "rules.yaml")) and error in str(err.value), str(err.value)
