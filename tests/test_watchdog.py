"""The hang watchdog on its own: allowance learned from step times, one report per stall, stacks."""
import time

from training_monitor.watchdog import Watchdog


def stuck_in_a_collective(seconds):
    time.sleep(seconds)


def test_stall_reported_once_with_the_blocking_call_in_the_stack():
    calls = []
    dog = Watchdog(lambda *a: calls.append(a), factor=5, min_seconds=0.3, startup_seconds=30, startup_steps=2,
                   interval=0.05).start()
    try:
        for step in range(1, 6):
            time.sleep(0.02)
            dog.beat(step, 0.02)
        assert dog.allowance() == 0.3  # max(min_seconds, 5 x median 0.02 s)
        stuck_in_a_collective(1.0)
        assert len(calls) == 1
        idle, step, allowed, stacks = calls[0]
        assert step == 5 and 0.3 < idle < 1.0 and allowed == 0.3
        assert "stuck_in_a_collective" in stacks and "MainThread" in stacks
        dog.beat(6, 0.02)  # the run moved on: a later stall is reported again
        stuck_in_a_collective(0.6)
        assert len(calls) == 2
    finally:
        dog.stop()


def test_startup_allowance_covers_compilation():
    calls = []
    dog = Watchdog(lambda *a: calls.append(a), min_seconds=0.1, startup_seconds=1.0, interval=0.05).start()
    try:
        time.sleep(0.5)  # "compiling": under the startup allowance
        assert calls == [] and dog.allowance() == 1.0
    finally:
        dog.stop()
