"""The hang watchdog on its own, on a clock the test drives: allowance learned from step times, one report
per stall, the startup allowance, and the stacks its thread takes while the training thread is blocked."""
import threading

from training_monitor.watchdog import Watchdog


class TestClock:
    """Seconds that pass only when the test says: ``advance`` on the test's thread, or ``wait`` on the
    watchdog's, which lets time run only while ``running`` is set (the test's thread is blocked)."""

    __test__ = False  # not a test class

    def __init__(self):
        self.now = 1000.0
        self.running = threading.Event()
        self.stopped = False

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, seconds: float) -> bool:
        self.running.wait()
        self.now += seconds
        return self.stopped


def steady_run(clock, steps, step_time, **settings):
    """A watchdog (not started) that saw ``steps`` steps of ``step_time`` seconds, and its reports."""
    calls = []
    dog = Watchdog(lambda *a: calls.append(a), clock=clock, **settings)
    for step in range(1, steps + 1):
        clock.advance(step_time)
        dog.beat(step, step_time)
    return dog, calls


def test_stall_is_reported_once_after_the_allowance_and_again_after_the_run_moved_on():
    clock = TestClock()
    dog, calls = steady_run(clock, 5, 0.02, factor=5, min_seconds=0.3, startup_seconds=30, startup_steps=2)
    assert dog.allowance() == 0.3  # max(min_seconds, 5 x median 0.02 s)
    clock.advance(0.3)
    dog.check()
    assert calls == []  # at the allowance: not yet
    clock.advance(0.01)
    dog.check()
    clock.advance(100)
    dog.check()  # the same stall: not reported again
    assert len(calls) == 1
    idle, step, allowed, stacks = calls[0]
    assert step == 5 and abs(idle - 0.31) < 1e-9 and allowed == 0.3 and "MainThread" in stacks
    dog.beat(6, 0.02)  # the run moved on: a later stall is reported again
    clock.advance(0.31)
    dog.check()
    assert len(calls) == 2 and calls[1][1] == 6


def test_allowance_follows_the_median_step_time_over_min_seconds():
    clock = TestClock()
    dog, calls = steady_run(clock, 10, 12.0, factor=10, min_seconds=60, startup_steps=3)
    assert dog.allowance() == 120.0
    for step, seconds in enumerate([500.0, 1.0, 1.0], start=11):  # one slow step does not move the median
        dog.beat(step, seconds)
    assert dog.allowance() == 120.0
    clock.advance(119)
    dog.check()
    assert calls == []
    clock.advance(2)
    dog.check()
    assert [c[:3] for c in calls] == [(121.0, 13, 120.0)]


def test_startup_allowance_covers_compilation():
    clock = TestClock()
    dog, calls = steady_run(clock, 2, 0.5, min_seconds=0.1, startup_seconds=1800, startup_steps=3)
    assert dog.allowance() == 1800  # 2 of the 3 startup steps: graph compilation may still come
    clock.advance(1799)
    dog.check()
    assert calls == []
    clock.advance(2)
    dog.check()
    assert [c[1:3] for c in calls] == [(2, 1800)]


def test_a_checkpoint_save_after_a_step_gets_the_startup_allowance_until_the_next_step():
    clock = TestClock()
    dog, calls = steady_run(clock, 10, 2.0, factor=10, min_seconds=60, startup_seconds=1800, startup_steps=3)
    dog.busy()  # a save follows step 10
    assert dog.allowance() == 1800
    clock.advance(600)
    dog.check()
    assert calls == []
    dog.beat(11, 2.0)  # the next step: the normal allowance again
    assert dog.allowance() == 60
    clock.advance(61)
    dog.check()
    assert [c[1:3] for c in calls] == [(11, 60)]


def test_a_save_the_monitor_saw_end_gives_the_next_step_the_normal_allowance_from_then():
    clock = TestClock()
    dog, calls = steady_run(clock, 10, 2.0, factor=10, min_seconds=60, startup_seconds=1800, startup_steps=3)
    dog.busy()  # the monitor's own save after step 10, in the training thread...
    clock.advance(300)
    dog.done()  # ...ends 300 s later: the next step is waited for from now, 60 s
    assert dog.allowance() == 60
    clock.advance(59)
    dog.check()
    assert calls == []
    clock.advance(2)
    dog.check()
    assert [c[1:3] for c in calls] == [(10, 60)]


def stuck_in_a_collective(clock, released):
    clock.running.set()  # time passes on the watchdog's thread only while this thread is blocked here
    assert released.wait(30), "the watchdog's thread did not report the stall"


def test_the_thread_reports_the_blocking_call_in_the_training_thread_s_stack():
    clock = TestClock()
    released = threading.Event()
    calls = []

    def on_stall(*report):
        calls.append(report)
        clock.running.clear()  # time stops until the test blocks again
        released.set()

    dog = Watchdog(on_stall, factor=5, min_seconds=10, startup_steps=1, interval=1.0, clock=clock, wait=clock.wait)
    dog.beat(1, 0.5)
    dog.start()
    try:
        stuck_in_a_collective(clock, released)
        idle, step, allowed, stacks = calls[0]
        assert step == 1 and idle == 11 and allowed == 10  # the first look after 10 s of a 1 s interval
        assert "monitor-watchdog" in stacks and "MainThread" in stacks and "stuck_in_a_collective" in stacks
        released.clear()
        dog.beat(2, 0.5)
        stuck_in_a_collective(clock, released)
        assert len(calls) == 2 and calls[1][1] == 2
    finally:
        clock.stopped = True
        dog.stop()
        clock.running.set()
    dog._thread.join(10)
    assert not dog._thread.is_alive()
