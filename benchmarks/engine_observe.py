"""Host time of ``Engine.observe`` per record, all default rules, on a healthy record stream.

50,000 records (a falling noisy loss, grad norm, loss scale, tokens, step time and data wait); each round
judges them all with a fresh engine. Run: ``.venv/bin/python benchmarks/engine_observe.py [--rounds 7]
[--disable RULE ...] [--uncompiled]``; prints the median and the fastest round in µs per record.
``--uncompiled``: the detectors' source, ``monitor/detectors.py``, run as plain Python (as installed without
a C compiler).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
if "--uncompiled" in sys.argv:  # in the compiled module's place before the package imports it
    _package = os.path.dirname(importlib.util.find_spec("training_monitor").origin)
    _spec = importlib.util.spec_from_file_location("training_monitor.detectors", os.path.join(_package, "detectors.py"))
    sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_spec.name])

from training_monitor.engine import Engine  # noqa: E402
from training_monitor.record import StepRecord  # noqa: E402
from training_monitor.ruleset import Rules  # noqa: E402
from training_monitor.sinks import EventList  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--disable", nargs="*", default=[], help="rules to turn off (to see one rule's share)")
    ap.add_argument("--uncompiled", action="store_true", help="the detectors' source as plain Python")
    args = ap.parse_args()
    rng = random.Random(0)
    recs = [StepRecord(i + 1, loss=(2 + 4 * 2.718 ** (-i / 8000)) * (1 + 0.02 * rng.gauss(0, 1)),
                       grad_norm=1 + 0.1 * rng.random(), loss_scale=65536.0, overflow=False, lr=1e-4,
                       step_time_s=0.5 + 0.01 * rng.random(), data_wait_s=0.001, tokens=4096)
            for i in range(args.records)]
    rules = Rules({r: {"enabled": False} for r in args.disable})
    per = []
    for _ in range(args.rounds):
        kept = EventList()
        eng = Engine(rules, [kept])
        t = time.perf_counter()
        for r in recs:
            eng.observe(r)
        per.append((time.perf_counter() - t) / len(recs) * 1e6)
    print(f"Engine.observe: median {statistics.median(per):.2f} µs, fastest {min(per):.2f} µs per record "
          f"({args.rounds} rounds x {len(recs)} records; events raised: {len(kept.events)})")


if __name__ == "__main__":
    main()
