# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Replay's compiled fast path for the commonest log line: the MindFormers 1.3+ ``MFLossMonitor`` step line.

:func:`fast_record` reads one such line (the parser, :mod:`.mindformers`, tries it first on every line).
:class:`Scanner` reads a block of a log's bytes in C, line after line, and does for each such line (and each
progress-bar line) what the runner does with it, judging the records with the rank's
:class:`~training_monitor.detectors.Judge`, the very detectors of the live monitor, without making Python objects.
:class:`Sample` (replay's step-time quantiles) is here so that the scanner feeds it from C.
It hands back to the runner (Python) at every other line, and for a record that raised an event, went back
in steps, or that the would-be rollback policy has to see (:attr:`~.policy.WouldBeRollbacks.due`); so the
results are those of the runner's line-by-line loop (``tests/test_replay_fast.py`` checks that they are).

The line, any prefix before ``Epoch:[``::

    { Epoch:[  1/  2], step:[     2/500000], loss: 10.633, per_step_time: 1752ms, lr: 1e-05, overflow cond: False, loss_scale: 65536.0, global_norm: [4.508834], train_throughput_per_npu: 170.738T

Numbers must be plain decimals (``-1.5e-05``; no ``nan``, no spaces): anything else is left to the
parser's general reader, as is a line whose first ``Epoch:[`` does not start this shape.
"""
from cpython.conversion cimport PyOS_string_to_double
from cpython.unicode cimport PyUnicode_1BYTE_KIND, PyUnicode_DATA, PyUnicode_KIND
from libc.string cimport memchr, memcmp

from ..detectors cimport Judge, Rec

from ..record import StepRecord
from .base import DUPLICATE, PROGRESS


cdef extern from "string.h":
    void* memmem(const void* haystack, size_t hlen, const void* needle, size_t nlen) nogil


cdef struct Line:
    long long step, per_epoch, ms, steps
    double loss, grad_norm, loss_scale, lr
    bint has_grad_norm, overflow


cdef inline bint lit(const char** q, const char* e, const char* s, Py_ssize_t n) noexcept:
    """Consume the literal ``s`` (``n`` bytes) at ``q``."""
    if e - q[0] < n or memcmp(q[0], s, n) != 0:
        return False
    q[0] += n
    return True


cdef inline void spaces(const char** q, const char* e) noexcept:
    while q[0] < e and q[0][0] == c' ':
        q[0] += 1


cdef inline bint integer(const char** q, const char* e, long long* out) noexcept:
    """1 to 15 ASCII digits."""
    cdef const char* p = q[0]
    cdef long long v = 0
    while p < e and c'0' <= p[0] <= c'9' and p - q[0] < 15:
        v = v * 10 + (p[0] - c'0')
        p += 1
    if p == q[0] or (p < e and c'0' <= p[0] <= c'9'):
        return False
    q[0], out[0] = p, v
    return True


cdef double POW10[23]
for _i in range(23):
    POW10[_i] = 10.0 ** _i  # exact doubles


cdef inline int digit_run(const char** q, const char* end, unsigned long long* mantissa, int* significant) noexcept:
    """Read the digits at ``q`` into ``mantissa`` (its first 19 significant ones; leading zeros are not
    significant); return how many digits there were."""
    cdef const char* start = q[0]
    while q[0] < end and c'0' <= q[0][0] <= c'9':
        if mantissa[0] or q[0][0] != c'0':
            significant[0] += 1
            if significant[0] <= 19:
                mantissa[0] = mantissa[0] * 10 + (q[0][0] - c'0')
        q[0] += 1
    return q[0] - start


cdef bint decimal(const char* p, const char* end, double* out) except -1:
    """``p[:end]`` is exactly ``[+-]?(D+.?D*|.D+)([eE][+-]?D+)?``: its double, as Python's ``float`` gives it.

    Up to 15 significant digits times a power of ten within 1e-22..1e22 (every number a training log prints)
    is one IEEE multiplication or division of two exact doubles, so correctly rounded (Clinger's fast path,
    "How to read floating point numbers accurately", PLDI 1990, section 5); anything else goes to Python's
    own conversion (``PyOS_string_to_double``, correctly rounded whatever the C locale).
    """
    cdef const char* q = p
    cdef char* stop
    cdef int digits = 0, significant = 0, scale = 0, e = 0, e_digits = 0
    cdef bint negative = False, e_negative = False
    cdef unsigned long long mantissa = 0
    cdef double v
    if q < end and (q[0] == c'-' or q[0] == c'+'):
        negative = q[0] == c'-'
        q += 1
    digits = digit_run(&q, end, &mantissa, &significant)
    if q < end and q[0] == c'.':
        q += 1
        scale = -digit_run(&q, end, &mantissa, &significant)
        digits -= scale
    if not digits:
        return False
    if q < end and (q[0] == c'e' or q[0] == c'E'):
        q += 1
        if q < end and (q[0] == c'-' or q[0] == c'+'):
            e_negative = q[0] == c'-'
            q += 1
        if q == end or not (c'0' <= q[0] <= c'9'):
            return False
        while q < end and c'0' <= q[0] <= c'9':
            if e_digits < 6:
                e = e * 10 + (q[0] - c'0')
            e_digits += 1
            q += 1
    if q != end:
        return False
    e = scale + (-e if e_negative else e)
    if significant <= 15 and e_digits < 6 and -22 <= e <= 22:
        v = <double>mantissa
        v = v * POW10[e] if e >= 0 else v / POW10[-e]
        out[0] = -v if negative else v
        return True
    out[0] = PyOS_string_to_double(p, &stop, NULL)  # stops at end: the byte there is not part of a number
    return stop == end


cdef inline const char* upto(const char* q, const char* e, char c) noexcept:
    cdef const char* f = <const char*>memchr(q, c, e - q)
    return f if f != NULL else e


cdef inline bint number(const char** q, const char* e, double* out) except -1:
    """A decimal from ``q`` up to the next comma (see :func:`decimal`); ``q`` moves to the comma."""
    cdef const char* t = upto(q[0], e, c',')
    if not decimal(q[0], t, out):
        return False
    q[0] = t
    return True


cdef bint parse_line(const char* p, Py_ssize_t n, Line* out) except -1:
    """Read the fast shape from ``p[:n]`` into ``out`` (all but ``steps``); False when it is not that shape."""
    cdef const char* e = p + n
    cdef const char* q = <const char*>memmem(p, n, b"Epoch:[", 7)
    cdef const char* t
    cdef long long epoch, epochs, in_epoch
    if q == NULL:
        return False
    q += 7
    spaces(&q, e)
    if not integer(&q, e, &epoch) or not lit(&q, e, b"/", 1):
        return False
    spaces(&q, e)
    if not integer(&q, e, &epochs) or not lit(&q, e, b"],", 2):
        return False
    spaces(&q, e)
    if not lit(&q, e, b"step:[", 6):
        return False
    spaces(&q, e)
    if not integer(&q, e, &in_epoch) or not lit(&q, e, b"/", 1):
        return False
    spaces(&q, e)
    if (not integer(&q, e, &out.per_epoch) or not lit(&q, e, b"], loss: ", 9) or not number(&q, e, &out.loss)
            or not lit(&q, e, b", per_step_time: ", 17) or not integer(&q, e, &out.ms)
            or not lit(&q, e, b"ms, lr: ", 8) or not number(&q, e, &out.lr)
            or not lit(&q, e, b", overflow cond: ", 17)):
        return False
    if lit(&q, e, b"True", 4):
        out.overflow = True
    elif lit(&q, e, b"False", 5):
        out.overflow = False
    else:
        return False
    if not lit(&q, e, b", loss_scale: ", 14) or not number(&q, e, &out.loss_scale):
        return False
    if not lit(&q, e, b", global_norm: [", 16):
        return False
    t = upto(q, e, c']')
    if t == e or memchr(q, c' ', t - q) != NULL:
        return False
    out.has_grad_norm = t > q
    if out.has_grad_norm and not decimal(q, t, &out.grad_norm):
        return False
    out.step = (epoch - 1) * out.per_epoch + in_epoch
    return True


cdef inline void set_steps(Line* line, bint has_last, long long last_step) noexcept:
    """Steps the line covers: the gap since the last step line (sink mode), 1 when that is not in 1..per_epoch."""
    cdef long long gap = line.step - last_step if has_last else line.step
    line.steps = gap if 0 < gap <= line.per_epoch else 1


cdef object record(Line* line, int rank):
    return StepRecord(line.step, line.loss, line.grad_norm if line.has_grad_norm else None, line.loss_scale,
                      bool(line.overflow), line.lr, line.ms / 1000.0, None, None, rank, None, line.steps)


def fast_record(str line, last, int rank):
    """The record of a fast-shape step line (see the module docstring) after the record ``last`` (None: the
    first), or None when ``line`` is not of that shape."""
    cdef Line out
    data = line.encode("utf-8", "replace") if PyUnicode_KIND(line) != PyUnicode_1BYTE_KIND else None
    cdef const char* p = <const char*>data if data is not None else <const char*>PyUnicode_DATA(line)
    if not parse_line(p, len(data) if data is not None else len(line), &out):
        return None
    set_steps(&out, last is not None, last.step if last is not None else 0)
    return record(&out, rank)


cdef inline bint same(Line* a, Line* b) noexcept:
    return (a.step == b.step and a.loss == b.loss and a.has_grad_norm == b.has_grad_norm
            and (not a.has_grad_norm or a.grad_norm == b.grad_norm) and a.loss_scale == b.loss_scale
            and a.overflow == b.overflow and a.lr == b.lr and a.ms == b.ms and a.steps == b.steps)


cdef class Sample:
    """An evenly spaced sample of a stream, for quantiles: every value until ``size`` are held; then, each time
    the sample is full, every other held value is dropped and only every 2nd, 4th, ... value is taken. The
    quantiles are exact up to ``size`` values and, beyond, exact quantiles of a systematic sample spread over
    the whole stream (deterministic: the same log gives the same numbers)."""

    cdef readonly list values
    cdef readonly Py_ssize_t size, stride, skip, count

    def __init__(self, Py_ssize_t size=4096):
        self.values = []
        self.size, self.stride, self.skip, self.count = size, 1, 1, 0

    cpdef add(self, double value):
        self.count += 1
        self.skip -= 1
        if self.skip:
            return
        self.skip = self.stride
        self.values.append(value)
        if len(self.values) >= self.size:
            del self.values[1::2]
            self.stride *= 2

    def quantiles(self, *qs) -> list:
        """The ``qs`` (0..1) quantiles, linearly interpolated between the sampled values (numpy's default)."""
        v = sorted(self.values)
        out = []
        for q in qs:
            pos = q * (len(v) - 1)
            i = int(pos)
            out.append(v[i] if i + 1 >= len(v) else v[i] + (v[i + 1] - v[i]) * (pos - i))
        return out


cdef class Scanner:
    """The fast path of one log's replay (:class:`~.runner._Run` ``run``) for the lines of rank ``run.rank``.

    :meth:`scan` takes lines until one it leaves to the runner; the runner then feeds that line, and calls
    :meth:`scan` again. Its counts and its pending record are handed over to the run before each return, so
    the run's state is always as if every line had gone through it.
    """

    cdef object run, slot, parser, state, policy
    cdef Sample sample
    cdef int rank
    cdef bint has_pending, has_last, has_observed, routed, parsed
    cdef Line pending, observed
    cdef object pending_obj  # the run's pending record, when the run made it
    cdef long long last_step, due
    cdef Py_ssize_t records, duplicates, progress
    cdef readonly Py_ssize_t taken  # lines taken by the last scan (so far, when it raised)
    cdef Judge judge

    def __init__(self, run):
        self.run, self.rank = run, run.rank
        self.slot = run.slot(run.rank)
        self.parser = self.slot[0]
        self.state = None

    cdef int _rank(self) except -1:
        """The run's state for this rank (made on the first record judged, as the run does)."""
        self.state = self.run.ranks.get(self.rank) or self.run._rank(self.rank)
        self.judge = self.state.engine.judge
        self.policy = self.state.policy
        self.sample = self.run.result.stats.samples["step_time_s"]
        self.routed = self.state.track is not None or self.state.feed is not None  # per-record series: the run's
        return 0

    def scan(self, bytes block, Py_ssize_t pos, Py_ssize_t end):
        """Take the lines of ``block[pos:end]`` (bytes of the log: ``end`` just after a newline, or the end of
        the input) up to the first one left to the runner; return ``(its start, lines taken)`` (``end`` when
        all were)."""
        cdef const char* s = block
        cdef const char* nl
        cdef Py_ssize_t stop
        self.taken = 0
        self._load()
        try:
            while pos < end:
                nl = <const char*>memchr(s + pos, c'\n', end - pos)
                stop = nl - s if nl != NULL else end
                if not self._line(s + pos, stop - pos):
                    break
                self.taken += 1
                pos = stop + 1 if nl != NULL else end
        finally:
            self._hand_over()
        return pos, self.taken

    cdef int _load(self) except -1:
        last = self.parser.last
        self.has_last = last is not None
        self.last_step = last.step if last is not None else 0
        self.pending_obj = self.slot[1]
        self.has_pending = self.has_observed = self.parsed = False
        self.records = self.duplicates = self.progress = 0
        if self.state is not None:
            self.due = self.policy.due
        return 0

    cdef bint _line(self, const char* p, Py_ssize_t n) except -1:
        """Do what the runner does with the line ``p[:n]``; False to leave it to the runner."""
        cdef Line cur
        cdef const char* cr = <const char*>memchr(p, c'\r', n)
        if cr != NULL and cr != p + n - 1:  # a lone carriage return ends a text line: the runner's
            return False
        if n >= 8 and memcmp(p, b"[default", 8) == 0:  # a torchrun rank prefix: the runner's
            return False
        if not parse_line(p, n, &cur):
            if (memmem(p, n, b"samples/s/p", 11) != NULL and memmem(p, n, b"step:[", 6) == NULL
                    and memmem(p, n, b"Epoch:[", 7) == NULL):
                self.progress += 1
                return True
            return False
        set_steps(&cur, self.has_last, self.last_step)
        self.has_last, self.last_step, self.parsed = True, cur.step, True
        if self.pending_obj is not None:
            obj = record(&cur, self.rank)
            if self.pending_obj.step == cur.step and self.pending_obj == obj:
                self.duplicates += 1
                return True
            self.run._observe(self.pending_obj)
            self.pending_obj = None
            if self.state is not None:
                self.due = self.policy.due
        elif self.has_pending:
            if self.pending.step == cur.step and same(&self.pending, &cur):
                self.duplicates += 1
                return True
            self._observe(&self.pending)
        self.pending, self.has_pending = cur, True
        self.records += 1
        return True

    cdef int _observe(self, Line* line) except -1:
        cdef Rec r
        if self.state is None:
            self._rank()
            self.due = self.policy.due
        r.step, r.loss, r.has_loss = line.step, line.loss, True
        r.grad_norm, r.has_grad_norm = line.grad_norm, line.has_grad_norm
        r.loss_scale, r.has_loss_scale, r.overflow = line.loss_scale, True, line.overflow
        r.lr, r.has_lr = line.lr, True
        r.has_tps = r.has_mfu = False
        hits = self.judge.judge(&r)
        if hits is not None or self.judge.went_back or line.step >= self.due or self.routed:
            self.has_observed = False
            self.run._judged(self.state, record(line, self.rank), hits)
            self.due = self.policy.due
            return 0
        if line.ms > 0:  # the run's Stats.add: a step time > 0 (no tokens, no MFU in these lines)
            self.sample.add(line.ms / 1000.0)
        self.observed, self.has_observed = line[0], True
        return 0

    cdef int _hand_over(self) except -1:
        """Give the run what this scan did: counts, the parser's last record, the pending and last judged one."""
        result = self.run.result
        if self.records or self.duplicates or self.progress:
            result.records += self.records
            result.skipped_lines += self.duplicates + self.progress
            if self.duplicates:
                result.skipped[DUPLICATE] += self.duplicates
            if self.progress:
                result.skipped[PROGRESS] += self.progress
        # as in the run, the parser's last record is the pending one itself (a line after it may complete it)
        if self.has_pending:
            self.slot[1] = self.parser.last = record(&self.pending, self.rank)
        elif self.pending_obj is None:
            self.slot[1] = None
        elif self.parsed:  # only duplicates of the run's pending record
            self.parser.last = self.pending_obj
        if self.has_observed:
            result.last = record(&self.observed, self.rank)
        self.has_pending = self.has_observed = self.parsed = False
        self.records = self.duplicates = self.progress = 0
        return 0
