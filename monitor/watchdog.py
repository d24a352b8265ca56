"""Hang watchdog: a background thread that notices when no training step has finished for too long."""
from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable

from .detectors import median


def thread_stacks() -> str:
    """Every Python thread's stack, innermost call last, each headed by the thread's name."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f"Thread {names.get(ident, ident)} ({ident}):\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)


def allowance(steps_done: int, step_times, factor: float, min_seconds: float, startup_seconds: float,
              startup_steps: int, busy: bool = False) -> float:
    """Seconds without a finished step before it counts as a stall: ``startup_seconds`` until ``startup_steps``
    steps are done or while no step time is known, then ``max(min_seconds, factor x median(step_times))``;
    at least ``startup_seconds`` while ``busy`` (a checkpoint being saved or loaded: minutes for a large model,
    no hang)."""
    if steps_done < startup_steps or not step_times:
        return startup_seconds
    normal = max(min_seconds, factor * median(sorted(step_times)))
    return max(normal, startup_seconds) if busy else normal


class Watchdog:
    """Calls ``on_stall(idle_seconds, last_step, allowance_seconds, stacks)`` once per stall, from its thread.

    The allowance is ``startup_seconds`` until ``startup_steps`` steps have finished (graph compilation
    makes the first steps minutes long), then ``max(min_seconds, factor x median of the last 50 step
    times)``, learned from the run itself. ``beat`` is the only call on the training thread: a few
    assignments. The thread is a daemon and never stops the run itself.

    :meth:`busy` (training thread) says known slow work follows the last step, a checkpoint save or load: the
    allowance is at least ``startup_seconds`` until the next :meth:`beat`, or until :meth:`done` says it ended.

    The thread looks (:meth:`check`) every ``interval`` seconds. ``clock()`` gives the time in seconds
    (default :func:`time.monotonic`); ``wait(seconds)`` passes the time between looks and returns True
    when the thread should end (default: a wait that :meth:`stop` cuts short).
    """

    def __init__(self, on_stall: Callable[[float, int, float, str], None], factor: float = 10.0,
                 min_seconds: float = 60.0, startup_seconds: float = 1800.0, startup_steps: int = 3,
                 interval: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[float], bool] | None = None):
        self.on_stall, self.factor, self.min_seconds = on_stall, factor, min_seconds
        self.startup_seconds, self.startup_steps, self.interval = startup_seconds, startup_steps, interval
        self.clock = clock
        self.step, self.count, self.fired, self.slow = 0, 0, False, False
        self.last = clock()
        self.times: deque[float] = deque(maxlen=50)
        self._stop = threading.Event()
        self.wait = wait or self._stop.wait
        self._thread = threading.Thread(target=self._run, name="monitor-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self.last = self.clock()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def beat(self, step: int, step_time: float | None) -> None:
        """A step finished (training thread)."""
        self.last = self.clock()
        self.step, self.fired, self.slow = step, False, False
        self.count += 1
        if step_time:
            self.times.append(step_time)

    def busy(self) -> None:
        """Known slow work (a checkpoint save or load) follows the last step (training thread)."""
        self.slow = True

    def done(self) -> None:
        """The known slow work is over (training thread): the wait for the next step starts now, with the
        ordinary allowance (the monitor's own save and a rollback's load end in the training thread)."""
        self.last, self.slow = self.clock(), False

    def allowance(self) -> float:
        """Seconds without a finished step before it counts as a stall."""
        return allowance(self.count, self.times, self.factor, self.min_seconds, self.startup_seconds,
                         self.startup_steps, self.slow)

    def check(self) -> None:
        """One look: call ``on_stall`` when the time since the last finished step is over the allowance,
        once per stall (the next :meth:`beat` re-arms it)."""
        idle, allowed = self.clock() - self.last, self.allowance()
        if not self.fired and idle > allowed:
            self.fired = True
            self.on_stall(idle, self.step, allowed, thread_stacks())

    def _run(self) -> None:
        while not self.wait(self.interval) and not self._stop.is_set():
            self.check()
