# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Detectors: one per rule id, the one implementation behind the live callback and replay.

Every detector sees the records of one rank in step order and answers, per record, either nothing or
``(value, onset_step, message)``. Detectors hold only bounded state (a window of recent values), so the
same detector serves a live run and a million-line replay. :class:`Judge` runs a rank's detectors over a
record: from Python (:meth:`Judge.observe`, a :class:`~training_monitor.record.StepRecord`; the engine's way) or from
C (``Judge.judge``, a :class:`Rec`; ``monitor/replay/scan.pyx`` reads MindFormers step lines into one without
making Python objects).

Cython pure-Python mode: ``setup.py`` compiles this file with the C types of ``detectors.pxd`` (the
default); without a C compiler it runs as it is, slower (a warning is logged at import). Both give the same
results: the arithmetic is that of the Python formulas in the docstrings, in IEEE doubles (compiled without
contraction, ``-ffp-contract=off``, see ``setup.py``), so every platform and both modes decide alike.
"""
import functools
import logging
import math
import types
from array import array
from dataclasses import dataclass, field

NONE = -(2 ** 63 - 1)  # a step that is not there
RESTORED = ("rollback", "resume")  # StepRecord.slow_reason of the first record after the monitor restored a checkpoint
NAN = math.nan
INF = math.inf


class Rec:
    """What the detectors read of a StepRecord; ``has_*``: the field is not None. With ``has_rate`` (see
    :func:`throughput`): ``rate``, the step's throughput in ``unit`` (:data:`RATE_UNITS`) per second of its
    ``period`` (step time + data wait), ``wait`` its data wait, ``span`` the seconds the record stands for
    (``period`` x its steps). ``overflow``: -1 unknown (None), 0 False, 1 True; ``overflows``: the steps that
    overflowed since the previous record (StepRecord.overflows), -1 unknown; ``applied``: the overflowed step's
    update was applied (StepRecord.overflow_applied); ``next_scale``: the scale the trainer set for the next step
    (StepRecord.loss_scale_next). ``positional``: the step is the record's position in a log
    that numbers no steps (:meth:`Judge.by_position`). ``restored``: the record is the first after the monitor
    restored a checkpoint (StepRecord.slow_reason ``rollback`` or ``resume``). One is filled per record
    (:func:`rec_from`, or the compiled reader)."""

    def __init__(self):
        self.step = 0
        self.loss = self.grad_norm = self.loss_scale = self.rate = self.mfu = self.lr = 0.0
        self.period = self.wait = self.span = self.next_scale = 0.0
        self.has_loss = self.has_grad_norm = self.has_loss_scale = self.has_rate = self.has_mfu = False
        self.has_lr = self.has_next_scale = False
        self.positional = self.applied = self.restored = False
        self.overflow = self.overflows = -1
        self.unit = 0


RATE_UNITS = ("tokens", "samples", "steps")  # Rec.unit: what a throughput counts, finest first


def throughput(r, work, unit, step_time, wait, steps):
    """Set ``r``'s throughput: ``work`` (tokens, samples, or 1 step: ``unit`` 0, 1, 2) per second of the step's
    whole period, ``step_time + wait`` (the host time between the steps counts), the record standing for
    ``steps`` such steps."""
    r.has_rate, r.unit, r.wait = True, unit, wait
    r.period = step_time + wait
    r.rate = work / r.period
    r.span = r.period * steps


def rec_from(r, rec):
    """Fill ``r`` (a :class:`Rec`) from a StepRecord (or any object with its attributes)."""
    r.step = rec.step
    v = rec.loss
    r.has_loss = v is not None
    if r.has_loss:
        r.loss = v
    v = rec.grad_norm
    r.has_grad_norm = v is not None
    if r.has_grad_norm:
        r.grad_norm = v
    v = rec.loss_scale
    r.has_loss_scale = v is not None
    if r.has_loss_scale:
        r.loss_scale = v
    v = rec.lr
    r.has_lr = v is not None
    if r.has_lr:
        r.lr = v
    v = rec.loss_scale_next
    r.has_next_scale = v is not None
    if r.has_next_scale:
        r.next_scale = v
    v = rec.overflow
    r.overflow = -1 if v is None else (1 if v else 0)
    v = rec.overflows
    r.overflows = -1 if v is None else v
    r.applied = rec.overflow_applied is True
    # a step known to be slow (a checkpoint saved, a rollback) is not judged for throughput or MFU
    known_slow = rec.slow_reason is not None
    r.restored = rec.slow_reason in RESTORED
    v = rec.mfu
    r.has_mfu = v is not None and not known_slow
    if r.has_mfu:
        r.mfu = v
    v = rec.step_time_s
    r.has_rate = False
    if v and not known_slow:  # tokens/s when the record counts tokens (0 too: a rate printed as 0.0), else
        # samples/s, else steps/s
        w, c = rec.data_wait_s, rec.callbacks_s
        r.callbacks = c if c is not None and c > 0 else 0.0
        wait = (w if w is not None and w > 0 else 0.0) + r.callbacks
        if rec.tokens is not None:
            throughput(r, rec.tokens, 0, v, wait, rec.steps)
        elif rec.samples is not None:
            throughput(r, rec.samples, 1, v, wait, rec.steps)
        else:
            throughput(r, 1.0, 2, v, wait, rec.steps)
    return 0


def opt(has, x):
    return x if has else None


def finite(x):
    """``math.finite(x)``, in arithmetic (``inf - inf`` and NaN are NaN)."""
    return x - x == 0.0


def timed_steps(r, last):
    """The steps the record ``r`` (its throughput set) times: its own, ``span / period``, or the steps since the
    record before at step ``last`` when more (a log printing every few steps: its line times each of them);
    ``last`` NONE: its own."""
    steps = r.span / r.period
    return r.step - last if last != NONE and r.step - last > steps else steps


def double_array(n):
    """``n`` zeros, an array of doubles (a ``double[::1]`` compiled)."""
    return array("d", bytes(8 * n))


def step_array(n):
    """``n`` zeros, an array of steps (a ``long long[::1]`` compiled)."""
    return array("q", bytes(8 * n))


def sort(v, n):
    """Sort the first ``n`` values of ``v`` (no NaN) ascending: insertion sort when short, else heapsort."""
    if n <= 48:
        for i in range(1, n):
            x, j = v[i], i - 1
            while j >= 0 and x < v[j]:
                v[j + 1] = v[j]
                j -= 1
            v[j + 1] = x
        return
    start, end = n // 2, n
    while end > 1:
        if start > 0:  # building the heap (the largest on top)...
            start -= 1
        else:  # ...then its top goes last, each in turn
            end -= 1
            v[0], v[end] = v[end], v[0]
        i, x = start, v[start]  # x down the heap v[:end] from i to its place
        j = 2 * i + 1
        while j < end:
            if j + 1 < end and v[j] < v[j + 1]:
                j += 1
            if not x < v[j]:
                break
            v[i] = v[j]
            i, j = j, 2 * j + 1
        v[i] = x


def bisect_sorted(v, count, x, right):
    """How many of the first ``count`` values of ``v`` (sorted, no NaN) are ``<= x`` (``right``:
    ``bisect.bisect_right``'s index) or ``< x`` (``bisect_left``'s)."""
    lo, n = 0, count
    if n == 0:
        return 0
    while n > 1:
        half = n >> 1
        if (v[lo + half - 1] <= x) if right else (v[lo + half - 1] < x):
            lo += half
        n -= half
    return lo + ((v[lo] <= x) if right else (v[lo] < x))


def sorted_mad(v, n, m, logs):
    """Median absolute deviation around ``m`` of the first ``n`` values of ``v`` (sorted, no NaN; NaN for
    none); with ``logs``, of their natural logarithms (all values > 0) around ``m``, a logarithm. The
    deviations of the values below ``m`` and of those from ``m`` on are each sorted: merged up to the middle
    one."""
    if n == 0:
        return NAN
    j = bisect_sorted(v, n, math.exp(m) if logs else m, False)
    i, d, prev = j - 1, 0.0, 0.0
    for _ in range(n // 2 + 1):
        prev = d
        lo = abs((math.log(v[i]) if logs else v[i]) - m) if i >= 0 else INF
        hi = abs((math.log(v[j]) if logs else v[j]) - m) if j < n else INF
        if lo <= hi:
            d = lo
            i -= 1
        else:
            d = hi
            j += 1
    return d if n % 2 else 0.5 * (prev + d)


# the number of values from which the excursion test's spread is also estimated from their MAD; below it, from
# their range alone (for normal values the range's estimate of sigma has an efficiency of 0.96 of the standard
# deviation's at 5 values and 0.85 at 10, falling beyond; Montgomery, Introduction to Statistical Quality
# Control, the R chart)
ROBUST_RANGE_FROM = 10

# the MAD's scale factor to a normal law's standard deviation, 1 / Phi^-1(3/4) (Rousseeuw & Croux 1993)
MAD_TO_SIGMA = 1.4826


@functools.cache
def expected_range(n):
    """d2(n): the expected range of ``n`` independent standard normal values (Tippett 1925; the control
    chart constant d2, Montgomery, Introduction to Statistical Quality Control, appendix table VI: 1.128
    for 2, 3.078 for 10, 3.735 for 20), the integral of ``1 - Phi(x)^n - (1 - Phi(x))^n`` over x, by the
    midpoint rule on [-10, 10]."""
    h, total = 0.005, 0.0
    for k in range(4000):
        p = 0.5 * (1.0 + math.erf((-10.0 + (k + 0.5) * h) / math.sqrt(2.0)))
        total += 1.0 - p ** n - (1.0 - p) ** n
    return total * h


def sorted_log_median(v, n):
    """Median of the natural logarithms of the first ``n`` values of ``v`` (sorted, all > 0; NaN for none)."""
    if n == 0:
        return NAN
    mid = n // 2
    return math.log(v[mid]) if n % 2 else 0.5 * (math.log(v[mid - 1]) + math.log(v[mid]))


def sorted_median(v, n):
    """Median of the first ``n`` values of ``v``, sorted (NaN for none)."""
    if n == 0:
        return NAN
    mid = n // 2
    return v[mid] if n % 2 else 0.5 * (v[mid - 1] + v[mid])


def median(sorted_values) -> float:
    """Median of a sorted sequence (the middle value, or the mean of the two middle ones)."""
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else 0.5 * (sorted_values[mid - 1] + sorted_values[mid])


class Window:
    """The last ``size`` ``(step, value)`` pairs in order, and their values sorted (O(1) median). Values are
    never NaN (the detectors leave NaN out).

    Eager (the default), the values are kept sorted as they come: a new value goes after the equal ones held
    (``bisect.insort``), and the value leaving is removed at its first equal (``bisect_left``). ``lazy``: for
    a window read now and then, adding is a write into the ring and the values are sorted when read; the
    same median and sigma.
    """

    def __init__(self, size, lazy=False):
        self.size, self.lazy = max(size, 1), lazy
        self.n = self.head = 0
        self.stale = False
        self.steps, self.values = step_array(self.size), double_array(self.size)
        self.ordered, self.scratch = double_array(self.size), double_array(self.size)

    def __len__(self):
        return self.n

    def value(self, i):
        """The ``i``-th oldest value."""
        return self.values[(self.head + i) % self.size]

    def step_of(self, i):
        return self.steps[(self.head + i) % self.size]

    def _insert(self, x):
        j = bisect_sorted(self.ordered, self.n, x, True)
        for i in range(self.n, j, -1):
            self.ordered[i] = self.ordered[i - 1]
        self.ordered[j] = x

    def _remove(self, x, count):
        """Remove ``x`` from the first ``count`` sorted values (at ``bisect_left``)."""
        for i in range(bisect_sorted(self.ordered, count, x, False), count - 1):
            self.ordered[i] = self.ordered[i + 1]

    def _replace(self, old, x):
        """``_insert(x)`` then ``_remove(old)`` (the same array), in one pass over the values between."""
        k, last = bisect_sorted(self.ordered, self.n, old, False), self.n - 1
        if x >= old:  # the values after old, up to x, move down
            while k < last and self.ordered[k + 1] <= x:
                self.ordered[k] = self.ordered[k + 1]
                k += 1
        else:  # the values before old, down to x, move up
            while k > 0 and self.ordered[k - 1] > x:
                self.ordered[k] = self.ordered[k - 1]
                k -= 1
        self.ordered[k] = x

    def add(self, step, x):
        if self.n == self.size:  # the oldest leaves: its slot takes the new pair
            if self.lazy:
                self.stale = True
            else:
                self._replace(self.values[self.head], x)
            self.steps[self.head], self.values[self.head] = step, x
            self.head = (self.head + 1) % self.size
        else:
            if self.lazy:
                self.stale = True
            else:
                self._insert(x)
            tail = (self.head + self.n) % self.size
            self.steps[tail], self.values[tail] = step, x
            self.n += 1

    def _sort(self):
        if self.stale:
            for i in range(self.n):
                self.ordered[i] = self.value(i)
            sort(self.ordered, self.n)
            self.stale = False

    def median(self):
        self._sort()
        return sorted_median(self.ordered, self.n)

    def log_median(self):
        """Median of the values' natural logarithms (all values > 0)."""
        self._sort()
        return sorted_log_median(self.ordered, self.n)

    def sigma(self, m, logs=False):
        """Robust standard deviation around ``m``: the MAD times :data:`MAD_TO_SIGMA`:
        ``MAD_TO_SIGMA * median(sorted(abs(v - m) for v in values))``; with ``logs``, of the values'
        natural logarithms (all values > 0) around ``m``, a logarithm."""
        self._sort()
        return MAD_TO_SIGMA * sorted_mad(self.ordered, self.n, m, logs)

    def run_start(self, above, step):
        """The step of the oldest value of the newest run of values ``> above`` (``step`` when there is none)."""
        for i in range(self.n - 1, -1, -1):
            if self.value(i) <= above:
                break
            step = self.step_of(i)
        return step

    def median_of(self, start, count):
        """Median of the ``count`` values from the ``start``-th oldest on."""
        v = self.scratch
        for i in range(count):
            v[i] = self.value(start + i)
        sort(v, count)
        return sorted_median(v, count)

    def rewind(self, step):
        """Drop the pairs of steps after ``step``."""
        while self.n:
            tail = (self.head + self.n - 1) % self.size
            if self.steps[tail] <= step:
                break
            if self.lazy:
                self.stale = True
            else:
                self._remove(self.values[tail], self.n)
            self.n -= 1

    def renumber(self, step):
        """Number the pairs of steps after ``step`` ``step``, their values kept (the run went back to ``step``;
        what they measured still holds)."""
        for i in range(self.n):
            j = (self.head + i) % self.size
            if self.steps[j] > step:
                self.steps[j] = step

    def pairs(self) -> list:
        """The ``(step, value)`` pairs held, oldest first."""
        return [(self.step_of(i), self.value(i)) for i in range(self.n)]

    def sorted_values(self) -> list:
        self._sort()
        return [self.ordered[i] for i in range(self.n)]


class Steps:
    """Steps at which something happened (an overflow, a halving), kept while within ``window`` steps of
    the latest; ``first()`` is the oldest kept."""

    def __init__(self, window):
        self.window, self.cap, self.head, self.n = window, 16, 0, 0
        self.buf = step_array(self.cap)

    def _grow(self):
        buf = step_array(2 * self.cap)
        for i in range(self.n):
            buf[i] = self.buf[(self.head + i) % self.cap]
        self.buf, self.head, self.cap = buf, 0, 2 * self.cap

    def add(self, step, times):
        """Record ``times`` occurrences at ``step``, forget those ``window`` steps old; return how many are kept."""
        for _k in range(times):
            if self.n == self.cap:
                self._grow()
            self.buf[(self.head + self.n) % self.cap] = step
            self.n += 1
        while self.n and self.buf[self.head] <= step - self.window:
            self.head = (self.head + 1) % self.cap
            self.n -= 1
        return self.n

    def first(self):
        return self.buf[self.head]

    def rewind_to(self, step):
        while self.n and self.buf[(self.head + self.n - 1) % self.cap] > step:
            self.n -= 1


def _sigmas(d, s) -> str:
    """``d / s`` for a message; a window of identical values (a loss stuck at 0) has ``s == 0``."""
    return f"{d / s:.1f}" if s > 0 else "inf"



def setting(default, doc: str, **bounds):
    """A rule setting: a dataclass field with its one-line ``doc`` and bounds (``min``, ``max``, ``choices``)
    in its ``metadata``, the convention of the settings validator."""
    return field(default=default, metadata={"doc": doc, **bounds})


def override(base, name: str, default):
    """Field ``name`` of the settings class ``base`` with another default (the same doc and bounds)."""
    return field(default=default, metadata=base.__dataclass_fields__[name].metadata)


SEVERITIES = ("info", "warning", "critical")
ACTIONS = ("alert", "rollback", "skip_batches", "stop")
# the actions a hit's fourth item, when it has one, says its event does not ask for: the rollback of a step whose
# update was skipped (its event starts no cooldown), or every action but the alert at a run's start
SPARED = ("rollback",)
AT_START = ("rollback", "skip_batches", "stop")


@dataclass(frozen=True)
class RuleSettings:
    """The settings every rule has; each rule's class sets its own defaults."""

    severity: str = setting("warning", "info, warning or critical", choices=SEVERITIES)
    actions: tuple = setting(("alert",), "list of alert, rollback, skip_batches, stop", choices=ACTIONS)
    warmup_steps: int = setting(0, "first trainer steps never judged (compile and the noisy start)", min=0)
    cooldown_steps: int = setting(0, "no second event of the rule within this many steps of the last", min=0)
    escalation: float = setting(0.0, "...unless it begins after the last and its value is at least this x that "
                                     "event's (0: off)", min=0)
    skipped_run: int = setting(3, "an event whose records are all steps whose update the trainer skipped (an "
                                  "overflow) asks no rollback until this many such steps in a row (0: at once)", min=0)


class Detector:
    """Base detector: ``update(rec)`` returns ``(value, onset_step, message)`` or None (:class:`Judge` may add a
    fourth item, the :data:`SPARED` actions the event does not ask for); ``rewind(step)``
    forgets what was seen after ``step`` (the run went back to it: rollback or resume). The rule's settings
    (``cfg.params``) become the attributes of the same names, which a subclass declares ``public``.

    A subclass is its rule's one home in code: ``rule`` (its id in the rules file and in events), ``reads``
    (the :class:`~training_monitor.record.StepRecord` fields it judges), ``plots`` (the report's row its
    events are marked on) and ``value_is_plotted`` (its event's value is that row's quantity, so the mark
    goes at the value).
    """

    settings = RuleSettings
    rule: str | None = None
    reads: tuple[str, ...] = ()
    plots = "loss"
    value_is_plotted = False

    def __init__(self, cfg):
        self.cfg = cfg
        self.warmup_steps = cfg.warmup_steps or -1  # the warm-up's last step: none at 0 (a log may number from 0)
        for key, value in cfg.params.items():  # (a float setting may be given as an int)
            setattr(self, key, float(value) if isinstance(getattr(self.settings, key), float) else value)

    def update(self, r):
        return None

    def forget(self, step):
        pass

    def resume(self, step):
        """The run went back to ``step`` after steps that raised nothing (:class:`Judge`): by default, forget
        what was seen after it."""
        self.forget(step)

    def rewind(self, step):
        self.forget(step)


@dataclass(frozen=True)
class NanInfSettings(RuleSettings):
    """Loss not finite, or grad norm not finite on a step that was not flagged as a loss-scale overflow
    (an overflow step is skipped by the trainer and handled by the loss scale), or the learning rate the
    trainer logs not finite (its update writes NaN into the weights)."""

    severity: str = override(RuleSettings, "severity", 'critical')
    actions: tuple = override(RuleSettings, "actions", ('alert', 'rollback'))


class NanInf(Detector):
    """Loss not finite; or grad norm not finite on a step not flagged as a loss-scale overflow; or the logged
    learning rate not finite (a schedule dividing by zero, an LR restored as NaN: the step's update writes NaN
    into every weight it touches, so the loss goes NaN a step later). Onset: the first of the records in a row
    that are so (one excursion: a logged run that did not roll back is asked for one rollback, not one per NaN
    step); a record with a finite loss or grad norm and no non-finite LR ends the run."""

    settings = NanInfSettings
    rule = "nan_inf"
    reads = ('loss', 'grad_norm', 'overflow', 'lr')
    plots = "loss"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.since = -1  # step of the first record of the current run of non-finite ones (-1: none)

    def update(self, r):
        if r.has_loss and not finite(r.loss):
            value, what = r.loss, f"loss is {r.loss} at step {r.step}"
        elif r.has_grad_norm and not finite(r.grad_norm) and r.overflow != 1:
            value, what = r.grad_norm, f"grad norm is {r.grad_norm} at step {r.step} without an overflow"
        elif r.has_lr and not finite(r.lr):
            value, what = r.lr, f"learning rate is {r.lr} at step {r.step}"
        else:
            if r.has_loss or r.has_grad_norm:
                self.since = -1
            return None
        if self.since < 0 or self.since > r.step:
            self.since = r.step
        elif self.since < r.step:
            what += f" (not finite since step {self.since})"
        return value, self.since, what

    def forget(self, step):
        self.since = -1


@dataclass(frozen=True)
class LrSurgeSettings(RuleSettings):
    """Learning rate over `ratio` x the most a schedule reaches: lr > ratio * max(top, prev * (step + 1) /
    (prev_step + 1)), with top the highest earlier LR and prev the previous record's LR at prev_step (a
    linear warm-up from 0 grows at most in proportion to the step; a restart returns to the peak, not
    above it). Judged when the trainer logs the LR."""

    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 10)
    ratio: float = setting(3.0, "times the reach that fires; at least 2 (a warm-up from 0 logged from step 1)", min=2)


class LrSurge(Detector):
    """Learning rate over ``ratio`` x the most a schedule reaches: ``lr > ratio * max(top, prev * (step + 1)
    / (prev_step + 1))``, with ``top`` the highest LR of the earlier records and ``prev`` the previous
    record's LR at step ``prev_step``. A linear warm-up from 0, the steepest common schedule, grows the LR
    at most in proportion to the step (``prev * (step + 1) / (prev_step + 1)`` bounds it from 0- and from
    1-based steps for ``ratio >= 2``, at any logging interval); a restart or a cycle returns to the peak,
    ``top``, not above it. Over the bound: a bad schedule edit, an LR restored from another run, a wrong
    unit. The record's LR is the one the step's update used when the trainer logs it (MindFormers' ``lr``,
    MindSpore's train-step outputs). Records without an LR, or with an LR of 0 or not finite, are not
    judged, nor is a record at step 0, which is no reference either: a schedule's first LR is a warm-up's
    smallest, and a log numbering its records by epoch reaches epoch 1 after a whole epoch of warm-up (a
    MindSpore model-zoo log's ``epoch: 0, step: 0, .. lr: 0.000028`` then ``lr: 0.010028`` at epoch 1).
    Onset: the step."""

    settings = LrSurgeSettings
    rule = "lr_surge"
    reads = ('lr',)
    plots = "loss"

    # settings (Detector.__init__ sets them from cfg.params)
    ratio: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.top = self.prev = 0.0
        self.prev_step = 0

    def update(self, r):
        x = r.lr
        if not r.has_lr or not finite(x) or x <= 0 or r.step <= max(self.warmup_steps, 0):
            return None
        out = None
        if self.top > 0 and r.step > self.prev_step:
            reach = max(self.top, self.prev * float(r.step + 1) / float(self.prev_step + 1))
            if x > self.ratio * reach:
                out = (x, r.step, f"learning rate {x:.4g} at step {r.step} is {x / self.top:.3g}x its highest "
                                  f"earlier value {self.top:.4g}")
        self.top, self.prev, self.prev_step = max(self.top, x), x, r.step
        return out

    def forget(self, step):
        self.top = 0.0


@dataclass(frozen=True)
class RobustSpikeSettings(RuleSettings):
    """The robust spike test of one field (see :class:`RobustSpike`)."""

    warmup_steps: int = setting(0, "first trainer steps given only the excursion test (compile and the noisy "
                                   "start)", min=0)
    window: int = setting(100, "finite values the median and MAD are taken over", min=1)
    min_history: int = setting(20, "values needed before the robust test (fewer, or in warm-up: the excursion "
                                   "test, against the last min_history)", min=1)
    threshold: float = setting(6.0, "robust sigmas (MAD x 1.4826) over the median that fire", min=0)
    min_sigma_ratio: float = setting(0.01, "floor of the robust sigma, as a fraction of the median", min=0)
    min_ratio: float = setting(0.2, "the value must also exceed (1 + min_ratio) x the median", min=0)
    confirm_steps: int = setting(1, "2: the next value must stay over half the margin", min=1, max=2)
    log_threshold: float = setting(0.0, "with every value > 0, also this many robust sigmas of the values' "
                                        "logarithms over their median (0: off)", min=0)
    excursion_ratio: float = setting(1.5, "with fewer than min_history values (past them: against the last "
                                          "min_history, when the window's test does not fire): fire over this x "
                                          "their median (in warm-up its margin x (1 + 1/n)) (0: off)", min=0)
    excursion_min: float = setting(1.0, "... at least this far above it (the field's units) x (1 + 1/n), "
                                           "n the earlier values", min=0)
    excursion_spread: float = setting(3.0, "... and above it by more than this x the range of those values (from "
                                                 "10 values on, or this x the range their MAD expects)", min=0)


class RobustSpike(Detector):
    """Upward spike of one field against the median and MAD of its last ``window`` finite values.

    Fires when ``x > m + threshold * s`` and ``x > (1 + min_ratio) * m``, with ``m`` the median, ``s`` the
    MAD times 1.4826 (the normal-consistent scale; Rousseeuw & Croux 1993) floored at
    ``min_sigma_ratio * m``; with ``log_threshold`` and every value held > 0, also ``log(x) > ml + log_threshold
    * sl``, with ``ml`` and ``sl`` the median and robust sigma (floored at ``min_sigma_ratio``) of the values'
    logarithms: noise that grows with the level (a loss near zero: 0.01 to 0.08, its blips to 0.18) is judged
    on its own, multiplicative, scale, while at a level well above its noise the two tests agree. The onset
    is the earliest step of the contiguous run, ending at the detected step, whose values all exceed ``m +
    threshold * s / 2``. With ``confirm_steps: 2`` a value over the bound fires only
    when the next value is still over half the margin, ``m + threshold * s / 2`` and ``(1 + min_ratio / 2)
    * m`` (a one-batch outlier that clipping absorbs is not an event); the event then carries the first
    step.

    With fewer than ``min_history`` values (a short excerpt, a run's first steps, the steps after going
    back) the MAD is not yet a measure of the noise, and on steps up to ``warmup_steps`` (compile, a level
    still falling fast) the window's median is not yet the level: there only an unambiguous excursion fires,
    at once, from the second value on (Megatron-LM's rerun check, loss >= 10x the max of its first 100
    values, also judges from the first value on), against the last ``n`` values, ``n`` at most
    ``min_history`` (a start-up bump leaves them as the level settles): with ``m > 0`` their median,
    ``x > excursion_ratio * m`` (on the steps up to ``warmup_steps``, a run's start, its margin ``x - m`` times
    ``1 + 1 / n``: a fresh run's second loss 1.6x its first is start-up noise, while an excerpt's 2.67 -> 4.37
    in mid-run is an event), ``x - m >= excursion_min * (1 + 1 / n)`` (one value says little about the level:
    the margin is twice as large against one as against many), and ``x - m > excursion_spread`` times their
    range (a noisy excerpt is judged against its own noise) or, from ``ROBUST_RANGE_FROM`` (10) values on, times
    the range expected of ``n`` normal values with their robust sigma, ``d2(n) * 1.4826 * MAD``, both of the
    values and of their logarithms (an earlier burst or a start-up among them stretches their range, not their
    MAD; on logarithms too, as the window's test: a heavy-tailed loss is not judged on its quiet values alone).
    Onset: the earliest
    step of the contiguous run, ending at the detected step, of values over ``(1 + min_ratio) * m``.
    Past ``min_history`` values, a value the window's test leaves that is over every one of the last
    ``min_history`` is given the same excursion test against them: a window holding a run's fast fall (a
    small model's loss 18 -> 0.4 in 40 steps) or an earlier burst overstates the noise, and a 40x jump after
    it would go unjudged for ``window`` steps. ``excursion_ratio: 0`` turns the excursion test off (nothing is
    judged before ``min_history`` values).
    """

    # settings (Detector.__init__ sets them from cfg.params)
    window: int
    min_history: int
    confirm_steps: int
    threshold: float
    min_sigma_ratio: float
    min_ratio: float
    log_threshold: float
    excursion_ratio: float
    excursion_spread: float
    excursion_min: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.history = Window(self.window)
        self.levels = [self.history]  # the windows of values that say the level (resume keeps them)
        self.pending, self.pending_bound = None, 0.0
        self.label = ""  # the field's name in messages (the subclass's)
        self.ratio, self.least = 1.0 + self.min_ratio, self.threshold * self.min_sigma_ratio

    def spike(self, r, x):
        """Judge and learn ``x``, the finite value of a record that did not overflow."""
        hist = self.history
        out, pending, self.pending = None, self.pending, None
        if hist.n < self.min_history or r.step <= self.warmup_steps:
            out = self.excursion(r.step, x)
        elif pending is not None and x > self.pending_bound:
            out = pending
        else:
            m = hist.median()
            # cheap bound first: with s >= min_sigma_ratio * |m| no value under it can fire
            if x > self.ratio * m and x > m + self.least * abs(m):
                s = max(hist.sigma(m), self.min_sigma_ratio * abs(m))
                if x > m + self.threshold * s and self.multiplicative(x, self.log_threshold):
                    event = self.event(r.step, x, m, s)
                    if self.confirm_steps > 1 and not self.corroborated(r):
                        self.pending = event
                        self.pending_bound = max(m + 0.5 * self.threshold * s, (1.0 + 0.5 * self.min_ratio) * m)
                    else:
                        out = event
            if out is None and self.pending is None and x > hist.value(hist.n - 1):
                out = self.excursion(r.step, x)  # against the recent values: a window holding a fall or a burst
        hist.add(r.step, x)
        return out

    def multiplicative(self, x, sigmas):
        """The test on logarithms (see the class docstring) of ``x``: over their median by ``sigmas`` robust sigmas;
        true when ``log_threshold`` is 0 (off) or a value held is not > 0."""
        hist = self.history
        if not self.log_threshold or not hist.ordered[0] > 0:  # (sorted by the median taken before)
            return True
        ml = hist.log_median()
        return math.log(x) > ml + sigmas * max(hist.sigma(ml, True), self.min_sigma_ratio)

    def excursion(self, step, x):
        """The few-values test (see the class docstring) of ``x`` against the last ``min_history`` values held."""
        hist = self.history
        n = min(hist.n, self.min_history)
        # cheap tests first: the median of any values held is at least their smallest; x - m > spread x range
        # (spread >= 1) needs x over every one of them, and so does the robust spread's test
        if not n or not self.excursion_ratio or not x > self.excursion_ratio * hist.ordered[0]:
            return None
        if self.excursion_spread >= 1.0:
            for i in range(hist.n - n, hist.n):
                if hist.value(i) >= x:
                    return None
        m = hist.median_of(hist.n - n, n)  # (sorts them into hist.scratch)
        start = 1.0 + 1.0 / n if step <= self.warmup_steps else 1.0  # a run's start: its level not yet known
        if not (m > 0 and x - m > (self.excursion_ratio - 1.0) * m * start
                and x - m >= self.excursion_min * (1.0 + 1.0 / n)):
            return None
        if not (x - m > self.excursion_spread * (hist.scratch[n - 1] - hist.scratch[0])
                or self.robust_excursion(x, m, n)):
            return None
        return (x, hist.run_start(self.ratio * m, step), f"{self.label} {x:.4g} at step {step} is {x / m:.3g}x the "
                                                         f"median {m:.4g} of the {n} steps before")

    def robust_excursion(self, x, m, n):
        """The excursion test's spread from the MAD (see the class docstring) of the last ``n`` values, sorted in
        ``history.scratch`` with their median ``m``: an earlier burst among them stretches their range, not their
        MAD."""
        v = self.history.scratch
        if n < ROBUST_RANGE_FROM:
            return False
        bound = self.excursion_spread * expected_range(n) * MAD_TO_SIGMA
        if not x - m > bound * sorted_mad(v, n, m, False):
            return False
        if not v[0] > 0:
            return True
        ml = sorted_log_median(v, n)
        return math.log(x) - ml > bound * sorted_mad(v, n, ml, True)

    def event(self, step, x, m, s):
        hist = self.history
        onset = hist.run_start(m + 0.5 * self.threshold * s, step)
        return (x, onset, f"{self.label} {x:.4g} at step {step} vs median {m:.4g} "
                          f"of the last {hist.n} steps ({_sigmas(x - m, s)} robust sigma)")

    def corroborated(self, r):
        """True when the same step's other evidence confirms a spike at once (no waiting for the next step)."""
        return False

    def forget(self, step):
        self.history.rewind(step)
        self.pending = None

    def resume(self, step):
        """Past the warm-up, the values of the steps gone back over raised nothing and say the level the run
        resumes at: they are kept, numbered ``step``; into the warm-up (a run started again), forgotten."""
        if step > self.warmup_steps:
            for w in self.levels:
                w.renumber(step)
        self.forget(step)


@dataclass(frozen=True)
class LossSpikeSettings(RobustSpikeSettings):
    """loss > median + threshold * sigma of the last `window` finite losses, with sigma the MAD scaled to a
    normal sigma (x1.4826) floored at `min_sigma_ratio` * median, and loss > (1 + min_ratio) * median, and
    (`log_threshold`, every loss > 0) the same test on the losses' logarithms; or a level shift
    (shift_steps, shift_sigma). With fewer than `min_history` earlier losses (a short excerpt, a run's first
    steps, the steps after a rollback) only an unambiguous excursion fires (past them too, against the last
    `min_history`, for a loss the window's test leaves), or, warm-up included, a sustained rise (rise_steps,
    rise_ratio)."""

    severity: str = override(RuleSettings, "severity", 'critical')
    actions: tuple = override(RuleSettings, "actions", ('alert', 'rollback'))
    warmup_steps: int = override(RobustSpikeSettings, "warmup_steps", 10)
    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 10)
    escalation: float = override(RuleSettings, "escalation", 2.0)
    log_threshold: float = override(RobustSpikeSettings, "log_threshold", 4.0)
    shift_steps: int = setting(5, "also fire on a level shift: the median of the last shift_steps losses... "
                                  "(0: off)", min=0)
    shift_sigma: float = setting(3.0, "...this many robust sigmas above the window's median", min=0)
    rise_steps: int = setting(3, "with fewer than min_history losses: also fire on this many rises in a row... "
                                 "(0: off)", min=0, max=20)
    rise_ratio: float = setting(1.3, "...to over this x the loss before them, excursion_min above it and over "
                                     "every earlier loss...", min=1)
    rise_spread: float = setting(1.0, "...by more than this x the range of the losses up to the rise's start", min=0)


class LossSpike(RobustSpike):
    """Loss spike (see :class:`RobustSpike`), plus a level shift: the median of the last ``shift_steps``
    losses above the window's median by ``shift_sigma`` robust sigmas (floored as for the spike). An LR
    surge too mild for a one-step spike keeps the loss up for several steps; healthy noise does not.
    Onset: the first step of the shift.

    With fewer than ``min_history`` earlier losses, warm-up included (a loss that rises so from a fresh run's
    first records is no start-up: MindSpeed's SFT baseline 2.51, 4.02, 6.66, 7.40), a sustained rise fires too:
    the loss higher than the record before at each of the last ``rise_steps`` records, the last over
    ``rise_ratio`` times the loss before the rise, at least ``excursion_min`` above it, and over every earlier
    loss held by more than ``rise_spread`` times the range of the losses up to the rise's start. A training
    loss falls; independent noise makes ``rise_steps`` rises in a row with probability ``1 / (rise_steps +
    1)!``, and seldom by that much and to a new high beyond the range the earlier values span (a rise from a
    dip of a noisy per-batch loss stays within it: a tutorial's 151, 56, .., 2.88, 18.0, 25.6, 29.0; a new
    user's MSE regression at 14-34 rising 19.4, 28.4, 29.4, 36.8). Where the rise starts a log there is no
    range, and none is needed (BigScience tr8-104B, logged every 10 iterations: 6.37, 6.60, 7.31, 9.12 fires
    at the 9.12). Onset: the first step of the rise."""

    settings = LossSpikeSettings
    rule = "loss_spike"
    reads = ('loss',)
    plots = "loss"
    value_is_plotted = True

    # settings (Detector.__init__ sets them from cfg.params)
    shift_steps: int
    shift_sigma: float
    rise_steps: int
    rise_ratio: float
    rise_spread: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.label = "loss"
        self.recent = Window(max(self.shift_steps, 1))  # the last shift_steps losses
        self.levels.append(self.recent)

    def rise(self, step):
        """The sustained-rise test (see the class docstring) of the losses held, the newest at ``step``."""
        hist = self.history
        k, n = self.rise_steps, self.history.n
        if n <= k:
            return None
        base = prev = hist.value(n - 1 - k)
        for i in range(n - k, n):
            x = hist.value(i)
            if not x > prev:
                return None
            prev = x
        if not (base > 0 and prev > self.rise_ratio * base and prev - base >= self.excursion_min):
            return None
        if not hist.ordered[n - 2] < prev:  # no new high, the highest held alone (a rise within the excerpt's noise)
            return None
        lo = hi = base
        for i in range(n - 1 - k):
            x = hist.value(i)
            lo, hi = min(lo, x), max(hi, x)
        if not prev - hi > self.rise_spread * (hi - lo):  # a rise out of the losses' own noise
            return None
        return (prev, hist.step_of(n - k), f"loss {prev:.4g} at step {step} rose at each of the last {k} records, "
                                           f"{prev / base:.3g}x the {base:.4g} before the rise")

    def update(self, r):
        x = r.loss
        k = self.shift_steps
        if not r.has_loss or not finite(x):  # (an overflowed step's loss is its batch's real loss)
            return None
        few = self.history.n < self.min_history
        out = self.spike(r, x)
        if out is None and few and self.rise_steps:
            out = self.rise(r.step)
        if not k or r.step <= self.warmup_steps:
            return out
        recent, hist = self.recent, self.history
        recent.add(r.step, x)
        if out is not None or recent.n < k or hist.n < self.min_history + k:
            return out
        level, m = recent.median(), hist.median()
        if level <= m:  # cheap tests first: a falling or flat loss never shifts up...
            return None
        floor = self.min_sigma_ratio * abs(m)
        if level <= m + self.shift_sigma * floor:  # ...nor one under the bound at the floor of s (s >= floor)
            return None
        s = max(hist.sigma(m), floor)
        if level <= m + self.shift_sigma * s or not self.multiplicative(level, self.shift_sigma):
            return None
        onset = recent.run_start(m + 0.5 * self.shift_sigma * s, r.step)
        return (level, onset, f"loss level {level:.4g} over the last {k} steps vs median {m:.4g} of the last "
                              f"{hist.n} ({_sigmas(level - m, s)} robust sigma)")

    def forget(self, step):
        RobustSpike.forget(self, step)
        self.recent.rewind(step)


@dataclass(frozen=True)
class GradNormSpikeSettings(RobustSpikeSettings):
    """Same robust test on the global grad norm (steps that overflowed are not counted). Grad norms are
    heavy-tailed: healthy runs reach 3x their median now and then, hence the larger margins; and they
    fall fast over the first hundred steps, hence the longer warm-up."""

    warmup_steps: int = override(RobustSpikeSettings, "warmup_steps", 100)
    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 10)
    escalation: float = override(RuleSettings, "escalation", 10.0)
    threshold: float = override(RobustSpikeSettings, "threshold", 10.0)
    min_sigma_ratio: float = override(RobustSpikeSettings, "min_sigma_ratio", 0.05)
    min_ratio: float = override(RobustSpikeSettings, "min_ratio", 2.0)
    confirm_steps: int = override(RobustSpikeSettings, "confirm_steps", 2)
    excursion_ratio: float = override(RobustSpikeSettings, "excursion_ratio", 10.0)
    excursion_min: float = override(RobustSpikeSettings, "excursion_min", 0.0)
    confirm_loss_sigma: float = setting(3.0, "no confirmation needed when the same step's loss is this many "
                                             "robust sigmas over its median (0: off)", min=0)
    burst_ratio: float = setting(6.0, "no confirmation needed when the norm is this many times its median "
                                         "(0: off)", min=0)
    joint_ratio: float = setting(1.5, "also fire when the norm is over this x its median... (0: off)", min=0)
    joint_sigma: float = setting(1.2, "...and the loss this many robust sigmas over its median, two steps "
                                      "in a row", min=0)
    climb_window: int = setting(20, "a sustained climb: the median of the last climb_window norms...", min=1)
    climb_ratio: float = setting(2.0, "...over this x the window's median", min=0)
    level: float = setting(1.0e6, "a grad norm at or over this on level_steps records in a row fires, whatever "
                                  "came before (0: off)", min=0)
    level_steps: int = setting(3, "records in a row at or over level that fire", min=1)
    growth_steps: int = setting(8, "records in a row each over growth_ratio x the one before fire (0: off)", min=0)
    growth_ratio: float = setting(1.25, "the growth of each of those records", min=1)


class GradNormSpike(RobustSpike):
    """Grad-norm spike (see :class:`RobustSpike`), plus a sustained climb: the median of the last
    ``climb_window`` norms above ``climb_ratio`` x the median of the whole window, which often precedes a
    loss spike (checked every ``climb_window // 2`` steps once the window is full).

    A spike needs no confirmation by the next step when the same step's loss is also above the median of
    its last ``window`` finite values by ``confirm_loss_sigma`` robust sigmas: a damaging update (an LR
    surge) lifts both at once, while a one-batch grad-norm outlier leaves the loss where it was. 0 turns
    this off. Nor when the norm is ``burst_ratio`` times its median or more: healthy one-batch outliers reach
    a few times the median (3.9x on the detection benchmark's runs), while careful readers of real logs name a
    single step at 7-8x (llm.c's 2.02 among 0.25-0.31, OLMo's 2.63 against 0.33) and three orders of magnitude
    (a torchtitan VLM fine-tune's 0.04 -> 76914 at one logged step, back to 0.04 at the next).

    Also an update that hurts for more than one step: the grad norm over ``joint_ratio`` x its median and
    the loss ``joint_sigma`` robust sigmas over its median, both on two steps in a row (onset: the first).
    Noise rarely lifts both twice running; a mild LR surge does from its first step on. ``joint_ratio: 0``
    turns this off.

    Two tests need no history, so they judge a run's first records, warm-up included, and an excerpt that
    starts in the trouble (the median then is the trouble's own level). A grad norm at or over ``level``
    on ``level_steps`` records in a row: the L2 norm over N parameters is about sqrt(N) times a typical
    gradient component, so 1e6 is a component of ~3 even for a 100B-parameter model; the corpus' healthy
    runs stay under 4e3, BLOOM tr8-104B's struggling stretches print 1e4-9e5, a diverged openpi (JAX)
    fine-tune ~1e6 from its first line (Physical-Intelligence/openpi issue #814). And a sustained
    exponential growth: each of ``growth_steps`` records in a row over ``growth_ratio`` times the record
    before (the Hugging Face Trainer run of ironjr/grokfast issue #9: x1.5 per log from 3.8e12 to inf);
    healthy norms fall, wander or creep, they do not compound that long. Each fires once per run of such
    records; onset: its first record."""

    settings = GradNormSpikeSettings
    rule = "grad_norm_spike"
    reads = ('grad_norm', 'loss', 'overflow')
    plots = "grad_norm"
    value_is_plotted = True

    # settings (Detector.__init__ sets them from cfg.params)
    climb_window: int
    climb_ratio: float
    level: float
    level_steps: int
    growth_steps: int
    growth_ratio: float
    confirm_loss_sigma: float
    burst_ratio: float
    joint_ratio: float
    joint_sigma: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.label = "grad norm"
        self.losses = Window(self.window, lazy=True)  # read only when the grad norm is up
        self.levels.append(self.losses)
        self.climb_every = max(self.climb_window // 2, 1)
        self.joint_since = NONE
        self.level_since = self.growth_since = NONE  # the first record of the run at the level, of the growth
        self.level_n = self.growth_n = 0  # ... and its records (the growth's: its rises)
        self.last_norm = 0.0

    def sustained(self, r, x):
        """The level and growth tests (see the class docstring) of the finite, not overflowed ``x``."""
        out = None
        if self.level and x >= self.level:
            if not self.level_n:
                self.level_since = r.step
            self.level_n += 1
            if self.level_n == self.level_steps:
                out = (x, self.level_since, f"grad norm {x:.4g} at step {r.step}: at or over {self.level:.4g} on "
                                            f"{self.level_n} records in a row since step {self.level_since}")
        else:
            self.level_n = 0
        if self.last_norm > 0 and x > self.growth_ratio * self.last_norm:
            self.growth_n += 1
        else:
            self.growth_n, self.growth_since = 0, r.step
        self.last_norm = x
        if out is None and self.growth_steps and self.growth_n == self.growth_steps:
            out = (x, self.growth_since, f"grad norm {x:.4g} at step {r.step} grew over {self.growth_ratio:g}x at "
                                         f"each of {self.growth_n} records since step {self.growth_since}")
        return out

    def loss_sigmas(self, r):
        """How many robust sigmas the step's loss is over the median of the last ``window`` (-1 when unknown)."""
        losses = self.losses
        if not r.has_loss or not finite(r.loss) or losses.n < self.min_history:
            return -1.0
        m = losses.median()
        return (r.loss - m) / max(losses.sigma(m), 1e-6 * abs(m), 1e-300)

    def corroborated(self, r):
        return (self.burst_ratio > 0 and r.grad_norm >= self.burst_ratio * self.history.median()
                or self.confirm_loss_sigma > 0 and self.loss_sigmas(r) > self.confirm_loss_sigma)

    def joint(self, r, x):
        """The two-step joint excursion (see the class docstring), judged before ``x`` is learned."""
        hist = self.history
        since = self.joint_since
        self.joint_since = NONE
        if not self.joint_ratio or hist.n < self.min_history:
            return None
        m = hist.median()
        if x <= self.joint_ratio * m:
            return None
        z = self.loss_sigmas(r)
        if z <= self.joint_sigma:
            return None
        self.joint_since = r.step
        if since == NONE:
            return None
        return (x, since, f"grad norm {x:.4g} ({x / m:.2g}x its median) and loss {r.loss:.4g} ({z:.1f} robust "
                          f"sigma over its median) up together since step {since}")

    def forget(self, step):
        RobustSpike.forget(self, step)
        self.losses.rewind(step)
        self.joint_since = NONE
        self.level_n = self.growth_n = 0
        self.last_norm = 0.0

    def update(self, r):
        x = r.grad_norm
        hist = self.history
        k = min(self.climb_window, self.window)
        out = joint = None
        if r.has_grad_norm and finite(x) and r.overflow != 1:
            if r.step > self.warmup_steps:
                joint = self.joint(r, x)
            else:
                self.joint_since = NONE
            out = self.spike(r, x)
            if out is None:
                out = joint
            sustained = self.sustained(r, x)
            if out is None:
                out = sustained
        else:
            self.joint_since = NONE
        if r.has_loss and finite(r.loss) and r.step > self.warmup_steps:
            self.losses.add(r.step, r.loss)
        if out is None and hist.n == self.window and r.step % self.climb_every == 0:
            base, new = hist.median(), hist.median_of(hist.n - k, k)
            if new > self.climb_ratio * base:
                rise = base * (1.0 + self.climb_ratio) / 2  # half way up: where the climb began
                onset = r.step
                for i in range(hist.n - k, hist.n):
                    if hist.value(i) > rise:
                        onset = hist.step_of(i)
                        break
                out = (new, onset, f"grad norm climbing: median {new:.4g} over the last {k} steps vs {base:.4g} "
                                   f"over the last {hist.n} ({new / base:.1f}x)")
        return out


def halvings(prev, scale):
    """Halvings in a fall of the loss scale from ``prev`` to ``scale``: ``max(1, round(log2(prev / scale)))``,
    1 for a fall to 0 or below (from inf: as many as a double's range holds), 0 when it did not fall."""
    if not scale < prev:
        return 0
    return int(round(min(max(1.0, math.log2(prev / scale)), 2098.0))) if scale > 0 else 1


@dataclass(frozen=True)
class LossScaleSettings(RuleSettings):
    """The loss-scale rules' start-up calibration (see :class:`LossScaleWatch`)."""

    calibration_steps: int = setting(24, "start-up trainer steps whose overflows may be calibration "
                                         "(2^32 -> 2^8)", min=0)
    calibration_from: float = setting(1024.0, "calibration falls from an initial scale at least this: a run "
                                              "whose first scale is lower is past its start-up", min=0)
    calibration_to: float = setting(1.0, "... to this at the lowest: a scale below it ends calibration", min=0)


class LossScaleWatch(Detector):
    """Base of the loss-scale rules: the previous record's scale and the start-up calibration.

    Calibration is the start of a fresh run, while a dynamic loss scale halves down from its initial value (2^32 in
    Megatron-LM and many DeepSpeed configs, 2^16 by DeepSpeed's default): a record is calibration while no step
    known to be clean came before it, its step is at most ``calibration_steps`` (the trainer's step: a log or a
    process that starts at step 17060 is not at start-up) and it overflowed, or it does not say and its loss scale
    fell from the previous record's (a trainer that prints no overflow flag: a dynamic scaler lowers the scale only
    on an overflow), or it is the first record and does not say. The first clean step ends it (a record flagged
    clean, or one without a flag whose scale did not fall; the fall into it is still calibration's), and so does the
    first record past ``calibration_steps``: a start-up that keeps overflowing past them is trouble.

    Calibration is a fall from the scaler's initial scale (2^16 in apex, DeepSpeed and torch.amp's
    ``GradScaler``, 2^32 in Megatron-LM, 2^24 in MindSpore's ``DynamicLossScaleManager`` examples) to no lower
    than ``calibration_to`` (1: DeepSpeed's ``min_loss_scale``). So it ends at a record whose scale is below
    that (a scaler fallen so far gets no finite gradient at all: apex issue #834, 32768 -> 0.5 in 17 overflows;
    apex issue #318, down to 1e-205), and there is none when the first scale seen is below ``calibration_from``
    (an excerpt or a resumed run that starts after its start-up, whatever its step numbers, counted by a bar or
    guessed: hallo issue #152, overflows at 32 -> 4 at steps 11-13 of 2000).

    A record whose step is its position in a log that numbers no steps (``Rec.positional``: DeepSpeed's
    ``OVERFLOW!`` lines alone, no step line) is not known to be at start-up: it is no calibration, and it
    ends calibration; it may be a start-up one all the same (:attr:`startup`).

    A record that counts its overflows (``Rec.overflows``: k of the n steps since the previous record, or since
    the run's start for the first) says as much as a flag of each step: none overflowed is a clean record, all
    of them an overflowed one; 0 < k < n says a clean step came among them, which ends calibration at this
    record. Of its k overflows, those that may be at start-up steps (at most ``calibration_steps``, before that
    clean step) are calibration's, the others are judged (:attr:`counted`, over the record's :attr:`span` of
    steps): at least one when a clean step came before its own step's flagged overflow (DeepSpeed's ``step=20,
    skipped=19`` after an ``OVERFLOW!`` of step 20)."""

    # settings (Detector.__init__ sets them from cfg.params)
    calibration_steps: int
    calibration_from: float
    calibration_to: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.calibrated, self.has_prev, self.prev_scale = False, False, 0.0
        self.startup = False  # the record just judged is a start-up one (calibration or not)
        self.last_step = NONE  # the previous record's step
        self.span, self.counted = 1, 0  # of the record just judged: the steps it counts over, its overflows judged

    def calibrating(self, r):
        """Whether ``r`` is calibration (nothing to judge); then remember its scale and step. Once per record."""
        out = self.startup = False
        k, flag = r.overflows, r.overflow
        n = max(r.step - self.last_step if self.last_step != NONE else r.step, k, 1) if k >= 0 else 1
        if k >= 0:
            flag = 0 if k == 0 else 1 if k >= n else flag
        mixed = 0 < k < n  # a clean step among the record's
        self.span, self.counted, self.last_step = n, k if k >= 0 else 1, r.step
        if r.positional:
            self.calibrated = self.startup = True
        elif not self.calibrated:
            out = self.startup = r.step <= self.calibration_steps and not mixed and (
                flag == 1 or flag == -1 and (not self.has_prev or not r.has_loss_scale
                                             or r.loss_scale < self.prev_scale))
            falls = not r.has_loss_scale or not (r.loss_scale < self.calibration_to
                                                 or not self.has_prev and r.loss_scale < self.calibration_from)
            if out and not falls:
                out = False  # no fall from an initial scale
            if k > 0 and falls and r.step - n < self.calibration_steps:  # counted steps at start-up: calibration's
                early = min(r.step, self.calibration_steps) - (r.step - n)
                self.counted = max(k - early, 1 if mixed and r.overflow == 1 else 0)
            if not out:
                self.calibrated = True
                out = flag == 0 and self.has_prev or k > 0 and self.counted == 0
        if r.has_loss_scale:
            self.has_prev, self.prev_scale = True, r.loss_scale
        return out

    def forget(self, step):
        self.has_prev = False


@dataclass(frozen=True)
class OverflowStormSettings(LossScaleSettings):
    """At least `max_overflows` overflowed steps within the last `window` steps, after calibration: the
    overflows of a fresh run's first `calibration_steps` trainer steps before its first clean step, while
    the loss scale settles, never count (a log or process that starts later is not at start-up, nor is a
    log that numbers no steps: its records' steps are their positions). A
    healthy dynamic scale overflows about once per scale window when it grows; three in 50 steps is
    trouble. A step that does not say whether it overflowed counts one overflow per halving of the scale.
    A record that counts the overflows of several steps (k of n) counts the fewest that some `window` of them
    holds, ceil(k / ceil(n / window)). Also, at once: an overflow at a loss scale over `max_growth` x the
    previous step's (a dynamic scaler grows by 2x at most: the scale came from elsewhere, e.g. a stale scaler
    state restored), and an overflow whose update the trainer applied all the same (never calibration)."""

    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 50)
    window: int = setting(50, "steps the overflows are counted over", min=1)
    max_overflows: int = setting(3, "overflowed steps within the window that fire", min=1)
    max_growth: float = setting(2.0, "an overflow at a scale over this x the previous step's fires at once", min=1)


class OverflowStorm(LossScaleWatch):
    """At least ``max_overflows`` overflowed steps within the last ``window`` steps, after calibration (see
    :class:`LossScaleWatch`); or, at once, an overflow at a loss scale more than ``max_growth`` times the
    previous step's, which a dynamic loss scaler (growing by at most its factor, 2, per step) cannot have
    produced: a scale restored from another state, a stale scaler.

    A record that does not say whether it overflowed counts one overflow per halving of the loss scale since
    the previous record: a dynamic scaler lowers the scale only on an overflow. A record that counts the
    overflows of its steps (k of n, ``Rec.overflows``: Megatron-LM's skipped iterations of the interval,
    DeepSpeed's running ``skipped``, a printed share) counts those that are not calibration's
    (:class:`LossScaleWatch`) the way the fewest in some ``window`` of its n steps are: by pigeonhole,
    ceil(k / ceil(n / window)) (5 of 100 steps: at least 3 within some 50). The onset is the window's first
    overflow.

    An overflow whose update was applied all the same (``Rec.applied``: MindYOLO's and mindcv's ``overflow,
    still update``) fires at once, at start-up too: its non-finite gradients went into the weights, which no
    loss-scale calibration does.
    """

    settings = OverflowStormSettings
    rule = "overflow_storm"
    reads = ('overflow', 'loss_scale', 'overflows', 'overflow_applied')
    plots = "loss_scale"

    # settings (Detector.__init__ sets them from cfg.params)
    window: int
    max_overflows: int
    max_growth: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.overflow_steps = Steps(self.window)

    def update(self, r):
        had = self.has_prev
        prev, scale = self.prev_scale, r.loss_scale
        calibration = self.calibrating(r)
        if r.applied and r.overflow == 1:
            return (scale if r.has_loss_scale else 1.0, r.step,
                    f"overflow at step {r.step} whose update the trainer applied all the same: non-finite gradients "
                    f"went into the weights (loss scale {opt(r.has_loss_scale, scale)})")
        if calibration:
            return None
        times = 1
        if r.overflows >= 0:
            blocks = (self.span + self.window - 1) // self.window
            times = (self.counted + blocks - 1) // blocks
        elif r.overflow == 0:
            return None
        elif r.overflow == -1:
            times = halvings(prev, scale) if had and r.has_loss_scale else 0
        if r.overflow == 1 and had and prev != 0 and r.has_loss_scale and scale != 0 and scale > self.max_growth * prev:
            return (scale, r.step, f"overflow at loss scale {scale:.6g}, {scale / prev:.6g}x "
                                   f"the previous step's {prev:.6g}: not the dynamic scaler's doing")
        if not times:
            return None
        n = self.overflow_steps.add(r.step, times)
        if n >= self.max_overflows:
            counted = f"; {self.counted} of the {self.span} steps up to step {r.step}" if r.overflows >= 0 else ""
            return (float(n), self.overflow_steps.first(),
                    f"{n} overflowed steps within {self.window} steps (loss scale {opt(r.has_loss_scale, scale)}"
                    f"{counted})")
        return None

    def forget(self, step):
        self.overflow_steps.rewind_to(step)
        LossScaleWatch.forget(self, step)


@dataclass(frozen=True)
class LossScaleCollapseSettings(LossScaleSettings):
    """Loss scale fallen to `floor` or below, or at or below it and overflowing or falling (below it, at
    start-up: no calibration then, or kept for the next step on an overflow, or overflowing again after an
    overflow that left it there: the scaler at its minimum), or
    halved `max_halvings` times within `window` steps, after calibration
    (as for overflow_storm). Healthy fp16 runs halve now and then; a collapse means the gradients are broken.
    A scale held at `floor` from a run's start is no scaler's (bf16, a fixed scale of 1): not judged."""

    severity: str = override(RuleSettings, "severity", 'critical')
    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 100)
    floor: float = setting(1.0, "a scale at or below this fires", min=0)
    window: int = setting(100, "steps the halvings are counted over", min=1)
    max_halvings: int = setting(8, "halvings within the window that fire", min=1)


class LossScaleCollapse(LossScaleWatch):
    """Loss scale fallen to ``floor`` or below, or halved at least ``max_halvings`` times within ``window``
    steps, after calibration (see :class:`LossScaleWatch`). A scale at or below ``floor`` that is in trouble
    (an overflowed step, or a scale lower than the previous record's) fires though no higher one was seen
    when it is below ``floor`` (an excerpt that starts in the collapse) or at start-up, in calibration or not
    (:class:`LossScaleWatch`: a first scale of 1 is no fall from an initial one): calibration falls from a
    high initial scale (2^16 to 2^32), and a scaler at its minimum cannot answer an overflow any more
    (DeepSpeed's ``Attempted loss scale: 1, reducing to 1``, at its default ``min_loss_scale`` of 1); at any
    step, when the record says the scaler kept the scale for the next step (``Rec.next_scale``) on an overflow
    at or below ``floor``, or the record overflowed at or below ``floor`` after one that overflowed and left the
    scale there (MindYOLO's ``overflow, drop step, loss scale adjust to 1.0`` twice; a bf16 run's skipped step at
    its scale of 1 follows a clean record): it is at its minimum. So does a
    scale of 0 (a dynamic scale fallen below the trainer's print precision, e.g. fairseq's ``loss_scale
    0.000``: no scaler runs at 0). A scale that never moved (static scaling, or bf16 with a scale of 1, a
    skipped step among clean ones, past start-up) is not judged, nor, whatever its overflows, one held at ``floor``
    since a run's first record at start-up, no record naming the scale set next (no scaler: MindFormers'
    ``scale_sense: 1.0``, Megatron's bf16 ``loss scale: 1.0``; its NaN steps are ``nan_inf``'s), nor is one
    that stays at ``floor`` after its fall was reported (once per fall: the scale rises above ``floor`` before a
    next fall to it is one). A fall counts :func:`halvings` halvings. A record that says the scale the trainer
    set for the next step (``Rec.next_scale``: DeepSpeed's ``Attempted loss scale: 2, reducing to 1``) is judged
    at the floor by the lower of the two: the log may end there. Onset: the first halving of the fall."""

    settings = LossScaleCollapseSettings
    rule = "loss_scale_collapse"
    reads = ('loss_scale', 'overflow', 'overflows', 'loss_scale_next')
    plots = "loss_scale"

    # settings (Detector.__init__ sets them from cfg.params)
    floor: float
    window: int
    max_halvings: int

    def __init__(self, cfg):
        super().__init__(cfg)
        self.highest = 0.0
        self.floored = False  # the last record with a scale overflowed, its scale left at or below floor
        self.fixed = False  # the scale has not moved since the run's first record, at start-up at floor
        self.drops = Steps(self.window)

    def update(self, r):
        scale, prev = r.loss_scale, self.prev_scale
        had = self.has_prev
        if not r.has_loss_scale:
            return None
        if not had:
            self.fixed = r.step <= self.calibration_steps and scale == self.floor
        if had and scale != prev or r.has_next_scale:  # moved, or a scaler said what it sets next
            self.fixed = False
        if scale > self.highest:
            self.highest = scale
        low = r.next_scale if r.has_next_scale and r.next_scale < scale else scale
        floored, self.floored = self.floored, r.overflow == 1 and low <= self.floor
        if self.calibrating(r) and (r.overflow != 1 or low > self.floor) or self.fixed:
            return None
        n = self.drops.add(r.step, halvings(prev, scale) if had else 0)
        if (low <= self.floor < self.highest or low == 0.0
                or low <= self.floor and (r.overflow == 1 or had and low < prev)
                and (low < self.floor or self.startup or r.overflow == 1 and (r.has_next_scale and r.next_scale >= scale
                                                                              or had and floored))):
            self.highest = low  # reported: a scale that stays there is this fall's, a new one rises first
            return low, self.drops.first() if n else r.step, f"loss scale {low:g} at its floor {self.floor:g}"
        if n >= self.max_halvings:
            return scale, self.drops.first(), f"loss scale halved {n} times within {self.window} steps, now {scale:g}"
        return None

    def forget(self, step):
        self.drops.rewind_to(step)
        LossScaleWatch.forget(self, step)


@dataclass(frozen=True)
class LossDegenerateSettings(RuleSettings):
    """Loss exactly zero (|loss| < zero_below), the same value (within `same_ratio`, or one unit of the last decimal
    place of a value printed with `frozen_digits` significant digits) in `frozen_steps` records in a row, or for
    `frozen_records` records in a row when the value is printed with `frozen_digits` significant digits (and
    no earlier value of the run was printed twice in a row, or the records span `frozen_steps` steps) or has
    collapsed to under `collapse_ratio` x the run's highest loss or, one unit of the print's last decimal place
    (at most 9), at most `floor_below` (the print's resolution). A zero right after a value at that floor is its
    rounding: judged as the floor. A loss under `tiny_below` in magnitude for `frozen_records` records in a row
    has collapsed to zero, its values apart or not."""

    severity: str = override(RuleSettings, "severity", 'critical')
    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 100)
    zero_below: float = setting(1.0e-12, "a loss under this in magnitude is zero", min=0)
    frozen_steps: int = setting(20, "records in a row with the same loss that fire (a step each in a log of every "
                                    "step)", min=2)
    frozen_records: int = setting(3, "records in a row with the same loss that fire when it is precise or "
                                     "collapsed (below)", min=2)
    frozen_digits: int = setting(5, "...precise: printed with at least this many significant digits", min=1)
    same_ratio: float = setting(1.0e-6, "a loss within this x the first of its run is the same value (a float32 "
                                        "loss moving in its last digits)", min=0)
    collapse_ratio: float = setting(1.0e-3, "...collapsed: under this x the run's highest loss", min=0, max=1)
    floor_below: float = setting(0.01, "...or at most this, a digit at the print's last decimal place (0.0001 at 4 "
                                       "decimals: the print's floor)", min=0)
    tiny_below: float = setting(1.0e-6, "a loss under this in magnitude in frozen_records records in a row, the "
                                        "values apart or not, has collapsed to zero (0: off)", min=0)


HALF_BITS = 11  # the significand of an IEEE half (fp16; bfloat16 has 8): a loss computed in it repeats by rounding


def significant_digits(x):
    """The significant digits of ``x`` as printed, 0 when a half-precision float holds it exactly (its repeats
    are rounding): 6.90776 -> 6, 0.0001 -> 1, 1e-05 -> 1, 100.0 -> 1, 11.875 (95/8, 7 bits) -> 0; a float32
    loss from a live run: 7 or more."""
    n, _ = abs(x).as_integer_ratio()
    if n and (n // (n & -n)).bit_length() <= HALF_BITS:
        return 0
    return len(repr(abs(x)).split("e")[0].replace(".", "").strip("0"))


def decimals(x):
    """The decimal places ``x`` is printed with, as its shortest repr shows them: 0.0027 -> 4, 2.3e-05 -> 6,
    0.002 -> 3, 2.0 -> 0; 0 when not finite."""
    if not finite(x):
        return 0
    mantissa, _, exponent = repr(abs(x)).partition("e")
    return max(len(mantissa.partition(".")[2].rstrip("0")) - int(exponent or 0), 0)


class LossDegenerate(Detector):
    """Loss exactly zero (below ``zero_below``), or the same value in ``frozen_steps`` records in a row (a dead
    graph, a constant batch, a loss that no longer depends on the weights; the same within ``same_ratio`` of the
    run's first value, as a float32 loss printed in full moves in its last digits: DINO's ``11.090327262878418`` to
    ``11.090332984924316`` over 11 epochs, ln 65536, the uniform distribution over its prototypes; or, for a value
    printed with ``frozen_digits`` significant digits, within one unit of its last decimal place: a Keras
    classifier's ``4.6061``, ``4.6061``, ``4.6060`` at ln 100, chance over its 100 classes; records, not
    the steps they span: two
    prints of a 2-digit loss 200 steps apart say nothing of the steps between, DeepLabCut's ``loss: 0.0058``), or
    for ``frozen_records`` records in a row (a log printing every N steps) when that cannot be chance: the value
    is printed with at least ``frozen_digits`` significant digits (Caffe's ``loss = 6.90776``, ln 1000: a
    classifier at chance over 1000 classes), is no half-precision value (:func:`significant_digits`: tinygrad's
    bf16 ``11.8750`` repeats by rounding) and no earlier value of the run was printed twice in a row
    (:attr:`repeated`: then the log's resolution makes repeats chance, as a slowly converging loss printed every
    step to 4 decimals repeats now and then; unless the records span ``frozen_steps`` steps: Keras' epoch loss
    ``2.3029`` four epochs in a row after ``2.3030`` twice), or it is under ``collapse_ratio`` x the run's highest
    loss, collapsed to the print's resolution (``'loss': 0.0001`` four times after 1.141: zero as far as the log
    tells), or at most ``floor_below`` and a single digit at the print's last decimal place (the places of the value
    and of the one before it, :func:`decimals`): the print's floor, when no higher loss is in the log (mmseg's
    ``loss: 0.0001`` with ``acc_seg: 100.0000`` six times; DeepLabCut's ``0.0020`` after ``0.0021`` is 20 units
    of its last place, a slow loss's rounding). A zero right after a value at the print's floor is that print's
    rounding, not an exact zero (CompressAI's ``cur_mse: 0.01`` then ``0.00``), judged as the floor is: for
    ``frozen_records`` records in a row. A loss under ``tiny_below`` (1e-6) in magnitude for ``frozen_records``
    records in a row, its values apart or not, has collapsed to zero: a loss of unit-scale terms (a cross-entropy,
    a mean squared error of normalised targets) is that small only when every term is, the model fitting each
    sample to float32's resolution (1.2e-7 near 1), and not by chance in three records (Keras' ``loss: 1.1815e-07``
    epoch after epoch, its epsilon clipping every prediction; a few-shot fine-tune's ``3.3e-07``, ``4.9e-07``,
    ``4e-07``). Onset: the first record of the value (of the tiny ones)."""

    settings = LossDegenerateSettings
    rule = "loss_degenerate"
    reads = ('loss',)
    plots = "loss"
    value_is_plotted = True

    # settings (Detector.__init__ sets them from cfg.params)
    zero_below: float
    frozen_steps: int
    frozen_records: int
    frozen_digits: int
    same_ratio: float
    collapse_ratio: float
    floor_below: float
    tiny_below: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.has_last, self.last, self.same_since, self.same_n, self.high = False, 0.0, 0, 0, 0.0
        self.tiny_since, self.tiny_n = 0, 0  # the records in a row under tiny_below: the first one's step, how many
        self.unit_bound = 10.0 ** (1 - self.frozen_digits)  # the most a print's last unit is of a precise value
        self.before = math.nan  # the value before the last one (its print's decimal places)
        self.repeated = False  # an earlier value was printed twice in a row or more
        self.rounded = False  # the zeros since same_since follow a value at the print's floor: its rounding

    def update(self, r):
        x = r.loss
        if not r.has_loss or not finite(x) or r.step <= self.warmup_steps:
            return None
        if abs(x) < self.zero_below:
            if self.has_last and abs(self.last) >= self.zero_below:  # the first zero after a value
                self.rounded = self.floor(abs(self.last), self.before)
            if not self.has_last or not self.rounded:
                return x, r.step, f"loss is {x:g} at step {r.step}"
        if abs(x) < self.tiny_below:
            self.tiny_since = self.tiny_since if self.tiny_n else r.step
            self.tiny_n += 1
            if self.tiny_n >= self.frozen_records:
                return x, self.tiny_since, (f"loss under {self.tiny_below:g} for {self.tiny_n} records since step "
                                            f"{self.tiny_since}: collapsed to zero")
        else:
            self.tiny_n = 0
        if not self.has_last or not self.same(x):
            self.repeated = self.repeated or self.same_n >= 2
            self.before = self.last if self.has_last else math.nan
            self.same_since, self.last, self.has_last, self.same_n = r.step, x, True, 1
            self.high = max(self.high, x)
            return None
        self.same_n += 1
        if self.same_n >= self.frozen_steps:
            return x, self.same_since, f"loss frozen at {x:g} since step {self.same_since}"
        if self.same_n < self.frozen_records:
            return None
        digits = significant_digits(self.last)
        # a value printed twice in a row before: repeats are the print's resolution's doing, unless they go on
        chance = self.repeated and r.step - self.same_since + 1 < self.frozen_steps
        if abs(x) < self.collapse_ratio * self.high and not chance:
            why = f"under {self.collapse_ratio:g} x the run's highest loss {self.high:g}"
        elif self.floor(abs(x), self.before):
            why = f"a digit at the print's last decimal place, at most {self.floor_below:g}: the print's floor"
        elif digits >= self.frozen_digits and not chance:
            why = f"printed to {digits} significant digits"
        else:
            return None
        return x, self.same_since, (f"loss frozen at {x:g} for {self.same_n} records since step {self.same_since} "
                                    f"({why})")

    def same(self, x):
        """The loss ``x`` is the run's first value (``last``): within ``same_ratio`` of it or, when that is printed
        with ``frozen_digits`` significant digits, one unit of its last decimal place (at most ``unit_bound`` x
        its magnitude: the print is read only then)."""
        d, m = abs(x - self.last), abs(self.last)
        if d <= self.same_ratio * m:
            return True
        return (d <= self.unit_bound * m and significant_digits(self.last) >= self.frozen_digits
                and d <= 10.0 ** -decimals(self.last))

    def floor(self, x, before):
        """``x`` (a magnitude) is at most ``floor_below`` and a single digit at the last decimal place of its print
        and of ``before``'s (the value before it): the print's floor."""
        return x <= self.floor_below and x * 10.0 ** max(decimals(x), decimals(before)) < 10

    def forget(self, step):
        self.has_last, self.tiny_n = False, 0


@dataclass(frozen=True)
class LossPlateauSettings(RuleSettings):
    """Early plateau: before `until_step`, the median loss of the last window/5 steps is less than
    `min_improvement` below that of window/5 steps `window` steps earlier."""

    warmup_steps: int = override(RuleSettings, "warmup_steps", 100)
    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 1000)
    window: int = setting(1000, "steps between the two medians compared", min=5)
    min_improvement: float = setting(0.01, "fraction the loss must have fallen by over the window", min=0)
    until_step: int = setting(20000, "judged before this trainer step only", min=0)


class LossPlateau(Detector):
    """Early plateau: before ``until_step``, the median loss of the last ``window // 5`` steps is not
    ``min_improvement`` below the median of the ``window // 5`` steps ``window`` steps earlier. Judged
    every ``window // 50`` steps (a plateau is slow; this keeps the per-step cost to an append)."""

    settings = LossPlateauSettings
    rule = "loss_plateau"
    reads = ('loss',)
    plots = "loss"

    # settings (Detector.__init__ sets them from cfg.params)
    window: int
    until_step: int
    min_improvement: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.losses = Window(self.window, lazy=True)  # only read through median_of
        self.every = max(self.window // 50, 1)

    def update(self, r):
        x = r.loss
        q = self.losses
        if r.step > self.until_step or not r.has_loss or not finite(x) or r.step <= self.warmup_steps:
            return None
        q.add(r.step, x)
        if q.n < self.window or r.step % self.every:
            return None
        k = max(self.window // 5, 1)
        old, new = q.median_of(0, k), q.median_of(q.n - k, k)
        if new > old * (1.0 - self.min_improvement):
            return new, q.step_of(0), (f"loss plateau: median {new:.4g} over the last {k} steps vs {old:.4g} "
                                       f"{self.window} steps earlier (< {self.min_improvement:.0%} better)")
        return None

    def forget(self, step):
        self.losses.rewind(step)


class SustainedLow(Detector):
    """Base for "too low for ``min_steps`` steps in a row" rules: tracks the current low run."""

    # settings (Detector.__init__ sets them from cfg.params)
    min_steps: int

    def __init__(self, cfg):
        super().__init__(cfg)
        self.low_since = NONE

    def low(self, step):
        """``step`` is low: the run's first step once the run has lasted ``min_steps``, else NONE."""
        if self.low_since == NONE or self.low_since == 0:
            self.low_since = step
        return self.low_since if step - self.low_since + 1 >= self.min_steps else NONE

    def forget(self, step):
        self.low_since = NONE


@dataclass(frozen=True)
class ThroughputDropSettings(RuleSettings):
    """Throughput over the step's whole period (tokens, else samples, else steps / (step time + data wait)):
    its median over the last `min_steps` (at most 64) steps below `ratio` x its median over the last `window`
    steps, when the time lost is the run's own: at least `data_share` of it waiting for data (a slow pipeline,
    a sleeping callback) and `min_lost_seconds` in all, or the slow stretch lasting `min_seconds` (a slower
    compute for less is what a busy
    shared host does). With fewer than `min_history` steps (a short excerpt), one step over `excursion_ratio`
    times slower than the earlier steps' median that lost `excursion_seconds`, mostly waiting for data, or
    whose record lasts `min_seconds`, or records that slow in a row lasting `min_seconds`. At any history, an
    input-bound run: `bound_steps` records in a row each waiting for data `data_share` of its period,
    `bound_seconds` in all. Steps known to be slow (checkpoint saves, rollbacks, epoch ends:
    StepRecord.slow_reason) are not judged."""

    warmup_steps: int = override(RuleSettings, "warmup_steps", 5)
    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 100)
    window: int = setting(1000, "steps of the reference median; a lasting new level is the normal one after "
                                "window / 2 steps", min=1)
    min_history: int = setting(100, "steps that only set the reference (the first ones run on prefetched "
                                    "batches); fewer: excursions only", min=0)
    ratio: float = setting(0.7, "a stretch below this x the reference is low", min=0, max=1)
    min_steps: int = setting(10, "steps of the stretch's median (at most 64)", min=1)
    data_share: float = setting(0.5, "share of the lost time spent waiting for data that fires at once...", min=0)
    min_lost_seconds: float = setting(0.1, "...when the last min_steps steps lost at least this long (wall seconds)",
                                      min=0)
    min_seconds: float = setting(120.0, "or a low stretch lasting this long (wall seconds)", min=0)
    excursion_ratio: float = setting(3.0, "with fewer than min_history steps: a step this many times slower than "
                                          "the earlier ones' median (0: wait for min_history)...", min=0)
    excursion_history: int = setting(1, "...judged against at least this many earlier steps", min=1)
    excursion_seconds: float = setting(1.0, "...that lost at least this long (wall seconds)", min=0)
    bound_steps: int = setting(3, "records in a row (after the warm-up) each waiting for data at least data_share "
                                  "of its period: an input-bound run (0: off)...", min=0)
    bound_seconds: float = setting(30.0, "...that together waited at least this long (wall seconds)", min=0)


class ThroughputDrop(Detector):
    """Throughput low for a stretch: the median of the last ``min_steps`` steps below ``ratio`` x the median
    of the last ``window`` steps, when the time lost is the run's own: at least ``data_share`` of the time the
    last ``min_steps`` steps lost spent waiting for data (a slow pipeline, a sleeping callback or thread
    between the steps) and that time ``min_lost_seconds`` or more (a millisecond step's jitter is no event: a
    tutorial's 1.3 ms lost over 10 steps of 1.4 ms), or the stretch lasting ``min_seconds`` of wall time. A
    slower compute alone, for less than that, is what other processes do to a step on a shared host: on the
    CPU runs of the test suite and the detection benchmark the step's compute swings up to 10x with the
    machine's load for a minute at a time while the data wait stays under a millisecond. A step loses ``period
    * (1 - rate / median)``; the data wait of a low step counts beyond the median wait.

    The throughput is the one the record gives (:func:`throughput`): tokens/s when it has tokens, else
    samples/s, else steps/s, over the step's period (step time + data wait). A run is one series: a record
    counting finer than the series (tokens after samples or steps) starts it again; a coarser one is not
    judged.

    The reference is the median of the medians of each ``min_steps`` steps (at most 64) over the last
    ``window`` steps (cheaper per step than a median of ``window`` values, and as robust). It is over every
    judged step, the low ones too, so a lasting new level becomes the normal one
    within ``window / 2`` steps (a drop is reported when it comes, then it is the run's speed; a compute
    slowdown is reported when ``min_seconds`` pass within those steps), and the first ``min_history``
    steps after the warm-up only set it: a run's first steps after compiling are fed from the batches its
    data pipeline prefetched meanwhile, faster than the pipeline's own pace.

    Going back (a rollback, a restart: a step not after the one before) keeps the reference: the steps
    after the step gone back to measured the same machine and data pipeline (their blocks are renumbered to
    it); the stretch being judged ends there.

    With fewer than ``min_history`` steps (a short excerpt, a run's first steps) only an unambiguous drop
    fires, at once, after the warm-up: with ``m`` the median of at least
    ``excursion_history`` earlier steps' throughputs (the warm-up's too), a step's ``rate * excursion_ratio <
    m`` (several times slower) that lost ``excursion_seconds`` or more (the record's ``span * (1 - rate /
    m)``: a millisecond step's jitter is no event) and whose time is the run's own: at least ``data_share`` of
    the time it lost, ``period * (1 - rate / m)``, spent waiting for data beyond the earlier steps' median
    wait (judged only when the first step seen was after the warm-up: a log excerpt or a resumed run, not a
    run's own start on prefetched batches), or the record standing for at least ``min_seconds`` (an epoch's
    line: its ``span``), or two records or more in a row each that slow whose wall time adds up to
    ``min_seconds`` (a record's wall time: its span, or its period times the steps since the record before
    when more, a log printing every n-th step; onset: the first of them). One earlier step is enough: a log's
    second record is judged against its first (mmf's 1371 s for the 100 iterations after 195 s), and of a
    stretch the second record is judged against the median of the two before it, so one fast first record
    does not make the records after it a drop (a log's first line at 5.6 s a step, the next two at 92 s, is
    one; the next two at 19.6 s is not).
    A checkpoint save, an evaluation or a profiler dump inside one step is neither. ``excursion_ratio: 0``
    waits for ``min_history`` steps.

    Input-bound (a level, not a drop, so at any history): ``bound_steps`` records or more in a row after the
    warm-up each spending at least ``data_share`` of its period waiting for data, that together waited
    ``bound_seconds`` (a record's wait times its ``steps``, or the steps since the streak's previous record
    when more: a log printing every few steps): the device idles most of every step waiting for batches, the
    data pipeline sets the run's pace; once per streak (its going on is the same condition, not a new one). A
    run's first steps waiting for its loader's workers to start are in the warm-up.

    Onset: the first low step of the stretch (the step itself for an excursion, the streak's first record when
    input-bound). A throughput that is not a number (a NaN step time) and a step known to be slow
    (``StepRecord.slow_reason``) are not judged.
    """

    settings = ThroughputDropSettings
    rule = "throughput_drop"
    reads = ('tokens', 'samples', 'step_time_s', 'data_wait_s', 'callbacks_s', 'steps', 'slow_reason')
    plots = "tokens_per_second"

    # settings (Detector.__init__ sets them from cfg.params)
    window: int
    min_history: int
    min_steps: int
    ratio: float
    data_share: float
    min_seconds: float
    excursion_ratio: float
    excursion_history: int
    excursion_seconds: float
    min_lost_seconds: float
    bound_steps: int
    bound_seconds: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.min_steps = min(max(self.min_steps, 1), 64)
        blocks = max(self.window // self.min_steps, 1)
        self.values, self.waits = Window(blocks), Window(blocks, lazy=True)  # waits: read on low steps only
        self.early, self.early_waits = Window(self.min_history), Window(self.min_history, lazy=True)
        self.steps, self.ring = step_array(self.min_steps), double_array(5 * self.min_steps)
        self.scratch = double_array(self.min_steps)
        self.n = self.k = 0
        self.low_since, self.seconds = NONE, 0.0
        self.unit, self.first = len(RATE_UNITS), NONE
        self.streak, self.streak_since, self.streak_last = 0, NONE, NONE
        self.streak_told = False
        self.streak_wait = self.streak_callbacks = 0.0
        self.slow_since, self.slow_n, self.slow_seconds = NONE, 0, 0.0  # excursions in a row: since, how many, wall s

    def ring_median(self, slot):
        v = self.scratch
        for j in range(self.n):
            v[j] = self.ring[5 * j + slot]
        sort(v, self.n)
        return sorted_median(v, self.n)

    def low(self, bound):
        """How many of the steps held have a rate under ``bound``."""
        n = 0
        for j in range(self.n):
            n += self.ring[5 * j] < bound
        return n

    def update(self, r):
        found = self.drop(r)
        bound = self.bound(r)
        return bound if found is None else found

    def bound(self, r):
        """The input-bound test (see the class docstring) of ``r``, after :meth:`drop` judged it."""
        if not self.bound_steps or not r.has_rate or r.rate != r.rate or r.unit != self.unit:
            return None
        if r.step <= self.warmup_steps:
            return None
        if r.wait < self.data_share * r.period:
            self.streak, self.streak_told = 0, False
            return None
        steps = timed_steps(r, self.streak_last if self.streak else NONE)
        if self.streak == 0:
            self.streak_since, self.streak_wait, self.streak_callbacks = r.step, 0.0, 0.0
        self.streak += 1
        self.streak_last = r.step
        self.streak_wait += r.wait * steps
        self.streak_callbacks += r.callbacks * steps
        if self.streak < self.bound_steps or self.streak_wait < self.bound_seconds or self.streak_told:
            return None
        self.streak_told = True
        if 2.0 * self.streak_callbacks <= self.streak_wait:
            return (r.rate, self.streak_since, f"input-bound: each of the {self.streak} records since step "
                                               f"{self.streak_since} waited for data {self.data_share:.0%} of its "
                                               f"period or more, {self.streak_wait:.3g} s in all")
        return (r.rate, self.streak_since, f"callback-bound: each of the {self.streak} records since step "
                                           f"{self.streak_since} spent {self.data_share:.0%} of its period or more "
                                           f"outside the step, {self.streak_wait:.3g} s in all, "
                                           f"{self.streak_callbacks:.3g} s of it in the callbacks listed after the "
                                           "monitor (not waiting for data)")

    def drop(self, r):
        """The drop and excursion tests (see the class docstring) of ``r``."""
        x, m, lost, waited = r.rate, NAN, 0.0, 0.0
        c = self.min_steps
        if not r.has_rate or x != x or r.unit > self.unit:
            return None
        if r.unit < self.unit:  # a finer count than the series': the series starts again on it
            for w in (self.values, self.waits, self.early, self.early_waits):
                w.rewind(NONE)
            self.forget(NONE)
            self.unit = r.unit
        if self.first == NONE:
            self.first = r.step
        known = self.values.n * c >= self.min_history
        early = None
        if not known:  # an excursion's history: the warm-up's steps too
            if r.step > self.warmup_steps:
                early = self.excursion(r, x)
            self.early.add(r.step, x)
            self.early_waits.add(r.step, r.wait)
        if r.step <= self.warmup_steps:
            return None
        if known:
            m = self.values.median()
        i = self.k
        self.steps[i] = r.step
        self.ring[5 * i], self.ring[5 * i + 1], self.ring[5 * i + 2] = x, r.period, r.wait
        self.ring[5 * i + 3] = max(r.wait - self.waits.median(), 0.0) if known and x < self.ratio * m else 0.0
        self.ring[5 * i + 4] = r.period * max(1.0 - x / m, 0.0) if known and m > 0 else 0.0
        self.k, self.n = (i + 1) % c, min(self.n + 1, c)
        if self.n < c:
            return early
        if self.k == 0:  # a block is complete: its medians join the reference
            med = self.ring_median(0)
            self.values.add(r.step, med)
            self.waits.add(r.step, self.ring_median(2))
        elif known and self.low(self.ratio * m) >= c // 2:  # fewer low steps: the median is not low
            med = self.ring_median(0)
        else:
            med = self.ratio * m
        if not known or med >= self.ratio * m:
            self.low_since = NONE
            return early
        for j in range(c):
            waited += self.ring[5 * j + 3]
            lost += self.ring[5 * j + 4]
        if self.low_since == NONE:  # a new stretch: from the oldest low step held
            self.seconds = 0.0
            for j in range(c):
                i = (self.k + j) % c
                if self.low_since == NONE and self.ring[5 * i] < self.ratio * m:
                    self.low_since = self.steps[i]
                if self.low_since != NONE:
                    self.seconds += self.ring[5 * i + 1]
        else:
            self.seconds += r.period
        onset = self.low_since
        if waited >= self.data_share * lost and lost >= self.min_lost_seconds:
            why = f"{waited:.3g} s of the {lost:.3g} s lost over the last {c} steps waiting for data"
        elif self.seconds >= self.min_seconds:
            why = f"for {self.seconds:.0f} s"
        else:
            return None
        return (med, onset, f"{RATE_UNITS[self.unit]}_per_second {med:.4g} (median of the last {c} steps) below "
                            f"{self.ratio:.0%} of its median {m:.4g} since step {onset}, {why}")

    def excursion(self, r, x):
        """The few-steps test (see the class docstring) of ``x``, the rate of ``r``, against the steps held."""
        e = self.early
        if not self.excursion_ratio or e.n < self.excursion_history:
            return None
        m = e.median()
        if not x * self.excursion_ratio < m:
            self.slow_since = NONE
            return None
        wall = r.period * timed_steps(r, e.step_of(e.n - 1) if e.n else NONE)  # the record's wall time
        if self.slow_since == NONE:
            self.slow_since, self.slow_n, self.slow_seconds = r.step, 0, 0.0
        self.slow_n += 1
        self.slow_seconds += wall
        lost = r.period * (1.0 - x / m)
        if r.span * (1.0 - x / m) < self.excursion_seconds:
            return None
        waited = r.wait - self.early_waits.median()
        below = f"{m / x:.3g}x below" if x > 0 else "far below"  # (a printed rate of 0: under its last digit)
        if self.first > self.warmup_steps and waited >= self.data_share * lost:
            why = f"{waited:.3g} s of the {lost:.3g} s lost waiting for data"
        elif r.span >= self.min_seconds:
            why = f"for {r.span:.0f} s"
        elif self.slow_n >= 2 and self.slow_seconds >= self.min_seconds:
            return (x, self.slow_since, f"{RATE_UNITS[self.unit]}_per_second {x:.4g} at step {r.step} is "
                                        f"{below} the median {m:.4g} of the {e.n} earlier steps, each "
                                        f"record since step {self.slow_since} as slow, for {self.slow_seconds:.0f} s")
        else:
            return None
        return (x, r.step, f"{RATE_UNITS[self.unit]}_per_second {x:.4g} at step {r.step} is {below} "
                           f"the median {m:.4g} of the {e.n} earlier steps, {why}")

    def forget(self, step):
        # the steps after ``step`` measured the machine and the data pipeline, which going back (a rollback, a
        # restart) does not change: the reference keeps them; the stretch being judged ends
        self.values.renumber(step)
        self.waits.renumber(step)
        self.early.renumber(step)
        self.early_waits.renumber(step)
        self.n = self.k = self.streak = 0
        self.streak_told = False
        self.low_since = self.slow_since = NONE


@dataclass(frozen=True)
class LowMfuSettings(RuleSettings):
    """MFU (when the model and the device's peak are known) below `floor` for `min_steps` steps in a row."""

    warmup_steps: int = override(RuleSettings, "warmup_steps", 20)
    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 1000)
    floor: float = setting(0.2, "MFU under this is low", min=0, max=1)
    min_steps: int = setting(50, "low steps in a row that fire", min=1)


class LowMfu(SustainedLow):
    """MFU below ``floor`` for ``min_steps`` steps in a row (after warm-up). Onset: the first low step."""

    settings = LowMfuSettings
    rule = "low_mfu"
    reads = ('mfu', 'slow_reason')
    plots = "mfu"

    # settings (Detector.__init__ sets them from cfg.params)
    floor: float

    def update(self, r):
        if not r.has_mfu or r.step <= self.warmup_steps:
            return None
        if r.mfu >= self.floor:
            self.low_since = NONE
            return None
        onset = self.low(r.step)
        if onset == NONE:
            return None
        return r.mfu, onset, f"MFU {100 * r.mfu:.3g}% below the floor {100 * self.floor:g}%"


@dataclass(frozen=True)
class EvalLossSpikeSettings(RuleSettings):
    """An evaluation loss over `ratio` x the median of the earlier ones (at least `min_history` of the last
    `window`) and above it by more than `spread` x their range. Judged on the run's own series of evaluation
    losses (live: MindSpore's evaluation results; replayed: the log's evaluation lines), never mixed with the
    training loss: an average over a fixed set, it moves little between evaluations; overfitting raises it
    slowly, a broken model at once."""

    severity: str = override(RuleSettings, "severity", "critical")
    cooldown_steps: int = override(RuleSettings, "cooldown_steps", 0)
    window: int = setting(20, "earlier evaluation losses the median and range are taken over", min=1)
    min_history: int = setting(2, "earlier evaluation losses needed", min=1)
    ratio: float = setting(3.0, "an evaluation loss over this x their median fires...", min=1)
    spread: float = setting(3.0, "...when above it by more than this x their range", min=0)


class EvalLossSpike(Detector):
    """An evaluation loss ``x`` (the mean over the evaluation set after a training step, as the trainer gives
    it) over ``ratio`` x the median ``m`` of the earlier evaluation losses (at least ``min_history`` of the
    last ``window``) and above it by more than ``spread`` x their range: ``m > 0 and x > ratio * m and x - m >
    spread * (max - min)``. A first evaluation far above the next ones (the start of training) is history,
    not a spike; a slowly rising one (overfitting) stays within the range. A loss that is not finite is not
    judged (nor kept). Judged by :meth:`evaluate` (``Engine.evaluate``), not by step records. Onset: the
    evaluation's step."""

    settings = EvalLossSpikeSettings
    rule = "eval_loss_spike"
    reads = ()  # evaluation losses, not StepRecord fields
    plots = "loss"

    # settings (Detector.__init__ sets them from cfg.params)
    window: int
    min_history: int
    ratio: float
    spread: float

    def __init__(self, cfg):
        super().__init__(cfg)
        self.losses = Window(self.window)

    def evaluate(self, step, x):
        """The evaluation loss ``x`` after step ``step``: ``(value, onset_step, message)`` or None."""
        if not finite(x):
            return None
        hist, out = self.losses, None
        if hist.n >= self.min_history:
            m = hist.median()
            if m > 0 and x > self.ratio * m and x - m > self.spread * (hist.ordered[hist.n - 1] - hist.ordered[0]):
                out = (x, step, f"evaluation loss {x:.4g} at step {step} is {x / m:.3g}x the median {m:.4g} of the "
                                f"{hist.n} evaluations before")
        hist.add(step, x)
        return out

    def forget(self, step):
        self.losses.rewind(step)


@dataclass(frozen=True)
class EvalNanSettings(RuleSettings):
    """An evaluation loss that is not a number or infinite, once until an evaluation's loss is finite again."""


class EvalNan(Detector):
    """An evaluation loss that is NaN or Inf (the evaluation set's mean over outputs one of which was not
    finite: weights no longer finite, or an evaluation that overflows in fp16 or divides by an empty mask), while
    the training loss may still be finite; reported once, until an evaluation's loss is finite again. Judged by
    :meth:`evaluate` (``Engine.evaluate``). Onset: the evaluation's step."""

    settings = EvalNanSettings
    rule = "eval_nan"
    reads = ()  # evaluation losses, not StepRecord fields
    plots = "loss"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.reported = False

    def evaluate(self, step, x):
        """The evaluation loss ``x`` after step ``step``: ``(value, onset_step, message)`` or None."""
        if finite(x):
            self.reported = False
            return None
        if self.reported:
            return None
        self.reported = True
        return x, step, f"evaluation loss is {x} at step {step}"

    def forget(self, step):
        self.reported = False


# rule id -> detector class: the rules judged on step records...
DETECTORS = {d.rule: d for d in (NanInf, LrSurge, LossSpike, GradNormSpike, OverflowStorm, LossScaleCollapse,
                                 LossDegenerate, LossPlateau, ThroughputDrop, LowMfu)}
# ... and on evaluation losses
EVALUATORS = {d.rule: d for d in (EvalLossSpike, EvalNan)}


class Judge:
    """A rank's detectors, run over its records in order, and its evaluation detectors (``evaluators``:
    :data:`EVALUATORS`' instances), over its evaluation losses. A record whose step is not after the previous
    one means the run went back (rollback, resume from a checkpoint): the detectors (evaluators included)
    first forget what they saw after the step before it, and :attr:`went_back` is True until the next record.
    When the step is before the previous one, none of the records gone back over raised anything (:attr:`raised_at`:
    the step of the last one that did; the records alone decide, so a record log fed again on a resume decides as
    the live engine did) and the record is not the first after the monitor restored a checkpoint (``Rec.restored``:
    a rollback, whatever asked for it, or a process resumed by the monitor: the live engine went on from the
    checkpoint's step, without the steps gone back over), the run was restarted from its last checkpoint and the log
    does not say more (a crash, a preempted job appended to the same log): the detectors
    ``resume``, and the spike rules keep those steps' values as the level the resumed steps are judged against. (A
    record at the previous one's step is another rank's or another phase's line of the same step: what came after
    the step before it is forgotten.)

    ``observe(rec)`` / ``judge(r)`` / ``evaluate(step, loss)`` return None (nothing fired) or a list of
    ``(rule_id, (value, onset_step, message))``, one per detector that fired, in rule order.

    A step flagged as an overflow whose update the trainer skipped (a dynamic loss scaler's ``all_finite``
    check, MindSpore's loss-scale cells, apex, DeepSpeed) did not change the weights. A rule asking for a
    rollback that fires while its excursion (onset to step) lies on such steps only, fewer than its
    ``skipped_run`` in a row, gets ``(value, onset_step, message, SPARED)``: its event asks for no rollback
    (restoring a checkpoint would undo healthy steps and cut the LR for a batch the scaler already dropped:
    a batch the forward pass overflowed on). A longer run says the weights give such values on every batch:
    the rollback is asked, from the run's first step.

    A rule asking for a rollback that fires in its warm-up (a fresh run's first ``warmup_steps`` trainer steps,
    judged only for an unambiguous excursion against the few values before: their noise not yet known) gets
    ``AT_START``: its event is only alerted (and starts the rule's cooldown): no rollback, which a fresh run has no
    healthy checkpoint for (the first turns healthy ``healthy_after`` steps after its save), so a toy run's noisy
    third loss does not stop it; a NaN (``nan_inf``, no warm-up) still does.
    """

    def __init__(self, detectors, evaluators=()):
        self.detectors, self.evaluators = list(detectors), list(evaluators)
        self.has_last, self.went_back, self.last = False, False, 0
        self.raised_at = NONE
        self.positional = False  # the next record's step is a position (by_position)
        self.rec = Rec()  # observe's
        self.skipped_since, self.skipped_n = NONE, 0  # the run of steps whose update was skipped, up to this one
        self.spares = [d.skipped_run if "rollback" in d.cfg.actions else 0 for d in self.detectors]
        self.warm = [d.cfg.warmup_steps if "rollback" in d.cfg.actions else 0 for d in self.detectors]

    @property
    def last_step(self):
        return self.last if self.has_last else None

    def by_position(self):
        """The next record judged is numbered by its position in a log that numbers no steps, not by the trainer's
        step count: none of the detectors takes it to be at start-up (:class:`LossScaleWatch`)."""
        self.positional = True

    def judge(self, r):
        hits = None
        r.positional, self.positional = self.positional, False
        self.went_back = self.has_last and r.step <= self.last
        if self.went_back:
            self.forget(r.step - 1, r.step < self.last and self.raised_at < r.step and not r.restored)
        self.has_last, self.last = True, r.step
        if r.overflow == 1 and not r.applied:
            if not self.skipped_n:
                self.skipped_since = r.step
            self.skipped_n += 1
        else:
            self.skipped_n = 0
        for i in range(len(self.detectors)):
            det = self.detectors[i]
            hit = det.update(r)
            if hit is not None:
                if hits is None:
                    hits = []
                if self.skipped_n and self.skipped_n < self.spares[i] and hit[1] >= self.skipped_since:
                    hit = (hit[0], hit[1], f"{hit[2]}; {'each' if self.skipped_n > 1 else 'its'} update was "
                                           f"skipped (an overflow), the step left the weights as they were (a bad "
                                           f"batch would): no rollback before {self.spares[i]} such steps in a row "
                                           f"(bad weights would go on)", SPARED)
                elif 0 < self.warm[i] and r.step <= self.warm[i] and not r.positional:
                    hit = (hit[0], hit[1], f"{hit[2]}; at the run's start (its first {self.warm[i]} steps): no "
                                           f"rollback", AT_START)
                hits.append((det.cfg.id, hit))
        if hits is not None:
            self.raised_at = r.step
        return hits

    def observe(self, rec):
        """Judge one StepRecord (see the class docstring)."""
        rec_from(self.rec, rec)
        return self.judge(self.rec)

    def evaluate(self, step, loss):
        """Judge the evaluation loss ``loss`` after step ``step`` (see the class docstring)."""
        hits = None
        for det in self.evaluators:
            hit = det.evaluate(step, loss)
            if hit is not None:
                if hits is None:
                    hits = []
                hits.append((det.cfg.id, hit))
        return hits

    def forget(self, step, resume=False):
        """Forget what was seen after ``step``; ``resume``: the steps after it raised nothing (``Detector.resume``)."""
        self.skipped_n = 0
        for det in self.detectors:
            if resume:
                det.resume(step)
            else:
                det.forget(step)
        for det in self.evaluators:
            det.forget(step)

    def rewind(self, step):
        """The run continues from ``step``: forget what was seen after it."""
        self.forget(step)
        self.has_last, self.last = True, step


if isinstance(median, types.FunctionType):  # this file runs as it is: setup.py built no compiled module
    logging.getLogger(__name__).warning("the detectors run uncompiled (installed without a C compiler, or with "
                                        "TRAINING_MONITOR_PURE=1): the same results, slower")
