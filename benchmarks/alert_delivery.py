"""Does a slow or broken alert sink slow training down? Real MindSpore training steps, measured.

A tiny LM is trained on CPU with ``TrainingMonitor`` under a rules override that makes ``low_mfu`` fire
on every step (floor 100 %, no cool-down; the monitor alerts once for that one excursion), and a callback
after it queues one alert a step through the monitor's sender, so every step queues an alert. Three set-ups take turns,
round after round and in a rotating order, so machine noise hits them alike:

* ``no sink``: alerts off (the events are still detected, logged and exported);
* ``sink answers 500``: a webhook endpoint on 127.0.0.1 that always answers HTTP 500 (retried with backoff);
* ``sink hangs``: an endpoint that never answers within the 2 s client timeout.

Reported: median and p95 of the training loop's wall time per step (between consecutive ``step_end``
calls of a timing callback placed after the monitor, so the monitor's own work and any time its sender
threads take from the training thread are included), each set-up's ratio to ``no sink``, and the sink's
counters at the end (sent, failed, dropped, retries, and queued and sending: not yet given up). The queue holds
100 alerts; the rest are dropped and counted. Last, the training thread's own cost per alert:
``AlertSender.send`` timed alone.

Run: ``.venv/bin/python benchmarks/alert_delivery.py [--steps N] [--rounds R]``; prints a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

COUNTERS = ("sent", "failed", "dropped", "retries", "queued", "sending")
RULES = {"low_mfu": {"floor": 1.0, "min_steps": 1, "warmup_steps": 0, "cooldown_steps": 0}}


def endpoint(behaviour: str) -> str:
    """Start a local HTTP endpoint that answers 500 (``fail``) or sleeps 30 s (``hang``); return its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if behaviour == "hang":
                time.sleep(30)
            try:
                self.send_response(500)
                self.end_headers()
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/hook"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300, help="training steps per run")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="alertbench-")
    from loguru import logger

    logger.remove()  # one event per step: keep the terminal for the table
    import mindspore as ms
    from mindspore import nn
    from mindspore.train import Callback, Model

    from training_monitor.alerts import Alert
    from training_monitor.callbacks import TrainingMonitor
    from training_monitor.callbacks.tinylm import ByteWindows, TinyLM, load_corpus, make_dataset

    class Flood(Callback):  # one alert a step, each its own (the monitor's own: one per excursion)
        def __init__(self, mon):
            super().__init__()
            self.mon = mon

        def on_train_step_end(self, run_context):
            if self.mon.alerts is not None:
                step = run_context.original_args().cur_step_num
                self.mon.alerts.send([Alert("low_mfu", "warning", "MFU below the floor", run="bench", step=step)])

    class Clock(Callback):
        def __init__(self, out):
            super().__init__()
            self.out, self.last = out, None

        def on_train_step_end(self, run_context):
            now = time.perf_counter()
            if self.last is not None:
                self.out.append(now - self.last)
            self.last = now

    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    corpus = load_corpus()
    setups = {"no sink": None, "sink answers 500": endpoint("fail"), "sink hangs": endpoint("hang")}
    times = {name: [] for name in setups}
    counters = {}
    names = list(setups)
    for rnd in range(args.rounds):
        for name in names[rnd % 3:] + names[:rnd % 3]:  # each set-up goes first in some round
            url = setups[name]
            alerts = None if url is None else {"queue_size": 100, "sinks": [
                {"name": "bench", "type": "webhook", "url": url, "timeout_s": 2.0}]}
            mon = TrainingMonitor(run="bench", output_dir=os.path.join(tmp, f"{rnd}-{len(times[name])}"),
                                  metrics_port=None, watchdog=False, rollback=False, record_log=False,
                                  rules=RULES, n_params=1e5, peak_tflops=1.0, alerts=alerts)
            ms.set_seed(rnd)
            net = TinyLM(seq_len=64, hidden=128, layers=2, heads=4)
            source = ByteWindows(corpus, 64, 8, args.steps, rnd)
            run_times = []
            Model(nn.TrainOneStepCell(net, nn.SGD(net.trainable_params(), 0.05))).train(
                1, make_dataset(source), callbacks=[mon, Flood(mon), Clock(run_times)], dataset_sink_mode=False)
            times[name].extend(run_times[10:])  # past compilation
            if mon.alerts is not None:
                counters[name] = mon.alerts.close(0.1)["bench"]
            mon.close()
    base = statistics.median(times["no sink"])
    print("| set-up | median step (ms) | p95 step (ms) | median vs no sink | sink counters at the end |")
    print("|---|---|---|---|---|")
    for name, ts in times.items():
        ts = sorted(ts)
        med, p95 = statistics.median(ts), ts[int(0.95 * len(ts))]
        c = counters.get(name)
        shown = "" if c is None else ", ".join(f"{k} {c[k]}" for k in COUNTERS)
        print(f"| {name} | {med * 1e3:.2f} | {p95 * 1e3:.2f} | {med / base:.3f}x | {shown} |")
    print()
    print(send_cost(setups["sink hangs"]))


def send_cost(url: str, calls: int = 20000) -> str:
    """What the training thread pays per alert: ``AlertSender.send`` timed alone, the sink's queue having
    room and then full (its sender thread stuck on the hung endpoint)."""
    from training_monitor.alerts import Alert, AlertsConfig, AlertSender

    sender = AlertSender(AlertsConfig.load({"queue_size": calls // 2, "sinks": [
        {"name": "bench", "type": "webhook", "url": url, "timeout_s": 30.0}]})[0])
    alerts = [Alert("low_mfu", "warning", "MFU below the floor", run="bench", step=i) for i in range(calls)]
    laps = []
    for alert in alerts:  # one alert per step, as a run raises them (the queue holds an alert only once)
        t = time.perf_counter()
        sender.send([alert])
        laps.append(time.perf_counter() - t)
    half = calls // 2
    room, full = statistics.median(laps[:half]), statistics.median(laps[half:])
    sender.close(0.1)
    return (f"AlertSender.send on the training thread, median of {half} calls each: {room * 1e6:.1f} µs with room "
            f"in the queue, {full * 1e6:.1f} µs with the queue full (dropped and counted)")


if __name__ == "__main__":
    main()
