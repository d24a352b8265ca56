"""What replay's bounded byte stream (``training_monitor.replay.sources.open_bytes``: lines cut at 1 MiB) costs.

Reads the same log, in turns, the way replay's fast path does (blocks of 256 KiB) through a plain
``open(path, "rb")`` (the baseline) and through ``open_bytes``, then replays it end to end
(``replay_paths``) for scale. Uses the log that ``benchmarks/replay_speed.py`` writes (282 MB MindFormers
log of 1,000,000 steps) or any FILE given.

    .venv/bin/python benchmarks/bounded_reader.py [--rounds 5] [FILE]
"""
import argparse
import os
import statistics
import tempfile
import time

from training_monitor.replay.runner import replay_paths
from training_monitor.replay.sources import open_bytes

BLOCK = 1 << 18


def read_plain(path):
    with open(path, "rb") as f:
        while f.read(BLOCK):
            pass


def read_bounded(path):
    with open_bytes(path) as f:
        while f.read(BLOCK):
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("file", nargs="?",
                    default=os.path.join(tempfile.gettempdir(), "replay-speed", "mindformers_1000000_steps.log"))
    args = ap.parse_args()
    if not os.path.exists(args.file):
        raise SystemExit(f"{args.file}: missing; run benchmarks/replay_speed.py once to write it")
    times = {"read, plain open": [], "read, open_bytes (bounded)": [], "replay --json, end to end": []}
    for _ in range(args.rounds):
        for name, fn in zip(times, (read_plain, read_bounded, lambda p: replay_paths([p]))):
            start = time.perf_counter()
            fn(args.file)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["read, plain open"])
    print(f"{args.file}: {os.path.getsize(args.file) / 1e6:.0f} MB, median of {args.rounds} rounds")
    print("| what | median s | vs plain read |\n|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.3f} | {statistics.median(ts) / base:.2f}x |")


if __name__ == "__main__":
    main()
