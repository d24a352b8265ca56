# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Replay's compiled fast path for the commonest log line: the MindFormers 1.3+ ``MFLossMonitor`` step line.

:func:`fast_record` reads one such line (the parser, :mod:`.mindformers`, tries it first on every line).
:class:`Batch` reads a block of a log's bytes in C, line after line, into the records of such lines (and
skips progress-bar lines and repeats), and stops at the first other line; the runner (:mod:`.runner`) then
feeds that line to the parser, and judges the batch's records through the engine's one entry point
(:meth:`~training_monitor.engine.Engine.observe`), which runs the rank's :class:`~training_monitor.detectors.Judge`
(the very detectors of the live monitor) over them without making Python objects, up to the first record the
runner has to see; the batch adds the step times of the others to replay's :class:`~.sample.Sample` from C.
The results are those of the runner's line-by-line loop (``tests/test_replay_fast.py`` checks that they are).

The line, any prefix before ``Epoch:[``::

    { Epoch:[  1/  2], step:[     2/500000], loss: 10.633, per_step_time: 1752ms, lr: 1e-05, overflow cond: False, loss_scale: 65536.0, global_norm: [4.508834], train_throughput_per_npu: 170.738T

Numbers must be plain decimals (``-1.5e-05``; no ``nan``, no spaces): anything else is left to the
parser's general reader, as is a line whose first ``Epoch:[`` does not start this shape.

:class:`TextBatch` does the same for any other text log (the generic reader's, :mod:`.text`), with no grammar
of its own: it takes the plain step lines the reader reads through a line shape's recipe, applying the
recipes the reader learned, and leaves every other line to the reader.
"""
from cpython.conversion cimport PyOS_string_to_double
from cpython.unicode cimport PyUnicode_1BYTE_KIND, PyUnicode_DATA, PyUnicode_KIND
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.math cimport INFINITY as INF, floor
from libc.string cimport memchr, memcmp, memset

from ..detectors cimport Judge, Rec, opt, throughput
from .sample cimport Sample

from ..record import StepRecord


cdef extern from "string.h":
    void* memmem(const void* haystack, size_t hlen, const void* needle, size_t nlen) nogil


cdef struct Line:
    long long step, per_epoch, ms, steps
    double loss, grad_norm, loss_scale, lr, time, wait  # time, wait: step_time_s, data_wait_s
    bint has_loss, has_grad_norm, has_loss_scale, has_lr, has_time, has_wait
    int overflow  # 1, 0, -1: not known
    Py_ssize_t start, stop  # (TextBatch) the line's bytes in the block, without its line end...
    bint newline  # ... which is a newline
    int shape  # (TextBatch) the line's shape


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
        out.overflow = 1
    elif lit(&q, e, b"False", 5):
        out.overflow = 0
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
    out.time = out.ms / 1000.0
    out.has_loss = out.has_loss_scale = out.has_lr = out.has_time = True
    out.has_wait = False
    return True


cdef inline void set_steps(Line* line, bint has_last, long long last_step) noexcept:
    """Steps the line covers: the gap since the last step line (sink mode), 1 when that is not in 1..per_epoch."""
    cdef long long gap = line.step - last_step if has_last else line.step
    line.steps = gap if 0 < gap <= line.per_epoch else 1


cdef object record(Line* line, int rank):
    return StepRecord(line.step, opt(line.has_loss, line.loss), opt(line.has_grad_norm, line.grad_norm),
                      opt(line.has_loss_scale, line.loss_scale), None if line.overflow < 0 else line.overflow == 1,
                      opt(line.has_lr, line.lr), opt(line.has_time, line.time), opt(line.has_wait, line.wait), None,
                      rank, None, line.steps)


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


cdef inline bint own(const char* p, Py_ssize_t n) noexcept:
    """The line ``p[:n]`` may be a compiled reader's: no lone carriage return in it (it ends a text line: the
    parser's), no torchrun rank prefix (the runner's: ``[default3]:``, ``[rank3]:``)."""
    cdef const char* cr = <const char*>memchr(p, c'\r', n)
    if cr != NULL and cr != p + n - 1:
        return False
    return not (n >= 8 and memcmp(p, b"[default", 8) == 0 or n >= 5 and memcmp(p, b"[rank", 5) == 0)


cdef inline bint same(Line* a, Line* b) noexcept:
    return (a.step == b.step and a.loss == b.loss and a.has_grad_norm == b.has_grad_norm
            and (not a.has_grad_norm or a.grad_norm == b.grad_norm) and a.loss_scale == b.loss_scale
            and a.overflow == b.overflow and a.lr == b.lr and a.ms == b.ms and a.steps == b.steps)


cdef class Batch:
    """Step records of one rank read by :meth:`read` from a block of a log's bytes, held in C.

    :meth:`read` takes the block's lines while they are fast-shape step lines or progress-bar lines, and
    stops at the first other one (the runner feeds it to the parser). What it took: ``len(batch)`` records
    (:meth:`record` makes one a StepRecord), :attr:`duplicates` step lines equal to the record before (a log
    captured twice), :attr:`progress` progress-bar lines. The engine judges a batch through
    :meth:`~training_monitor.engine.Engine.observe`, which calls :meth:`judge`; :meth:`select` picks the
    records it judges, :attr:`next` is where it is.
    """

    cdef Line* lines
    cdef Py_ssize_t* offsets  # each record's line, counted from the first line of the read
    cdef Py_ssize_t cap, end
    cdef readonly Py_ssize_t next, duplicates, progress, taken
    cdef readonly int rank
    cdef readonly long long step  # step of the last record judged
    cdef readonly bint stopped  # the last judge() stopped at a record (see judge)
    cdef Py_ssize_t n

    def __cinit__(self, int rank, *args):
        self.rank, self.cap = rank, 1024
        self.lines = <Line*>PyMem_Malloc(self.cap * sizeof(Line))
        self.offsets = <Py_ssize_t*>PyMem_Malloc(self.cap * sizeof(Py_ssize_t))
        if self.lines == NULL or self.offsets == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.lines)
        PyMem_Free(self.offsets)

    def __len__(self):
        return self.n

    def read(self, bytes block, Py_ssize_t pos, Py_ssize_t end, last):
        """Read the lines of ``block[pos:end]`` (``end`` just after a newline, or the end of the input) up to the
        first one it leaves; ``last``: the parser's last record (None: none yet), which the first record
        follows. Returns the start of the line left (``end`` when all were taken); :attr:`taken` lines were."""
        cdef const char* s = block
        cdef const char* nl
        cdef Py_ssize_t stop
        cdef bint has_last = last is not None
        cdef long long last_step = last.step if has_last else 0
        self.n = self.next = self.end = self.duplicates = self.progress = self.taken = 0
        while pos < end:
            nl = <const char*>memchr(s + pos, c'\n', end - pos)
            stop = nl - s if nl != NULL else end
            if not self._line(s + pos, stop - pos, &has_last, &last_step):
                break
            self.taken += 1
            pos = stop + 1 if nl != NULL else end
        return pos

    cdef bint _line(self, const char* p, Py_ssize_t n, bint* has_last, long long* last_step) except -1:
        """Take the line ``p[:n]`` (after a step line of step ``last_step``, when ``has_last``): False to leave it."""
        cdef Line cur
        if not own(p, n):
            return False
        if not parse_line(p, n, &cur):
            if (memmem(p, n, b"samples/s/p", 11) != NULL and memmem(p, n, b"step:[", 6) == NULL
                    and memmem(p, n, b"Epoch:[", 7) == NULL):
                self.progress += 1
                return True
            return False
        set_steps(&cur, has_last[0], last_step[0])
        if self.n and same(&self.lines[self.n - 1], &cur):
            self.duplicates += 1
            return True
        if has_last[0] and cur.step == last_step[0]:
            return False  # the step's values again, another way (the runner's: merged when they agree)
        has_last[0], last_step[0] = True, cur.step
        self._add(&cur)
        return True

    cdef int _add(self, Line* line) except -1:
        """Append ``line``, a record of the line :attr:`taken`."""
        if self.n == self.cap:
            self._grow()
        self.lines[self.n], self.offsets[self.n] = line[0], self.taken
        self.n += 1
        return 0

    cdef int _grow(self) except -1:
        cdef Line* lines = <Line*>PyMem_Realloc(self.lines, 2 * self.cap * sizeof(Line))
        if lines == NULL:
            raise MemoryError()
        self.lines = lines
        cdef Py_ssize_t* offsets = <Py_ssize_t*>PyMem_Realloc(self.offsets, 2 * self.cap * sizeof(Py_ssize_t))
        if offsets == NULL:
            raise MemoryError()
        self.offsets, self.cap = offsets, 2 * self.cap
        return 0

    def record(self, Py_ssize_t i):
        """Record ``i`` as a StepRecord."""
        if not 0 <= i < self.n:
            raise IndexError(i)
        return record(&self.lines[i], self.rank)

    def offset(self, Py_ssize_t i):
        """The line of record ``i`` (of the end of the read for ``i == len(batch)``), counted from 0 at the first
        line read."""
        return self.offsets[i] if 0 <= i < self.n else self.taken

    def select(self, Py_ssize_t start, Py_ssize_t end):
        """Judge records ``start`` to ``end - 1`` next."""
        self.next, self.end = max(0, start), min(end, self.n)

    def judge(self, Judge judge, long long due):
        """Judge the selected records from :attr:`next` on with ``judge``; stop after the first that raised
        something, went back in steps or is at step ``due`` or later (:attr:`stopped`: True), or at the end of
        the selection. Returns what the last record judged raised (``Judge.judge``'s hits, or None)."""
        cdef Rec r = Rec()
        cdef Line* line
        hits = None
        self.stopped = False
        r.has_mfu = False
        while self.next < self.end:
            line = &self.lines[self.next]
            self.next += 1
            r.step, r.loss, r.grad_norm, r.has_grad_norm = line.step, line.loss, line.grad_norm, line.has_grad_norm
            r.loss_scale, r.overflow, r.lr = line.loss_scale, line.overflow, line.lr
            r.has_loss, r.has_loss_scale, r.has_lr = line.has_loss, line.has_loss_scale, line.has_lr
            r.has_rate = False
            if line.has_time and line.time != 0.0:  # steps/s: these lines give no tokens or samples (rec_from)
                throughput(r, 1.0, 2, line.time, line.wait if line.has_wait and line.wait > 0 else 0.0, line.steps)
            hits = judge.judge(r)
            self.step = line.step
            if hits is not None or judge.went_back or line.step >= due:
                self.stopped = True
                break
        return hits

    def add_step_times(self, Sample sample, Py_ssize_t start, Py_ssize_t end):
        """Add the finite step times (s) > 0 of records ``start`` to ``end - 1`` to ``sample`` (what
        :meth:`~.tracks.Stats.add` takes of them: these lines give no tokens and no MFU)."""
        cdef Py_ssize_t i
        for i in range(max(0, start), min(end, self.n)):
            if self.lines[i].has_time and 0 < self.lines[i].time < INF:
                sample.add(self.lines[i].time)


cdef enum:
    SHAPES = 64  # raw line shapes a TextBatch keeps (a log prints a few dozen)
    SLOTS = 8  # values of a plain step line (at most one of each of FIELDS)

# the record fields a plain step line holds (text._PLAIN), in the order the Slot.field numbers them
FIELDS = ("step", "loss", "grad_norm", "loss_scale", "lr", "step_time_s", "data_wait_s")


cdef struct Slot:
    int field  # index in FIELDS
    Py_ssize_t start, stop  # the value's bytes in the line; start == stop: the word value
    double word, factor
    bint scaled  # the value is times factor (a time in its printed unit)


cdef struct Shape:
    const char* key  # the raw line's shape: its ASCII digits as 0s (the bytes are in TextBatch.keys)
    Py_ssize_t n
    int slots
    Slot slot[SLOTS]


cdef inline bint matches(Shape* shape, const char* p, Py_ssize_t n) noexcept:
    """The line ``p[:n]`` is of ``shape``."""
    cdef Py_ssize_t i
    cdef char c
    if n != shape.n:
        return False
    for i in range(n):
        c = p[i]
        if c'1' <= c <= c'9':
            c = c'0'
        if c != shape.key[i]:
            return False
    return True


cdef class TextBatch(Batch):
    """Step records of one rank read by :meth:`read` from a block of a text log's bytes through the recipes the
    generic text reader (:mod:`.text`) learned, held in C as :class:`Batch` holds them (the engine judges them
    the same way).

    A line is taken when it is a plain step line the parser would read through its shape's recipe
    (:meth:`.text.Parser._plain`): the line's raw shape (its ASCII digits as 0s) is mapped once, by the
    parser (:meth:`~.text.Parser.recipe_of`), to the recipe and the decorations' length before the text it
    reads; each line of that shape then has its values read at the recipe's places, and is taken when
    ``_plain``'s conditions hold (every value a plain decimal, the step a count above the last record's: a
    count falling back, a restarted epoch's perhaps, is the parser's; the loss scale not lower than the last
    one printed) and no trainer message can be cut across a wrap from the line before
    (:meth:`~.text.Parser.wraps`). Any other line ends the read.
    """

    cdef object parser
    cdef list keys  # of each shape: the raw shape (bytes), ...
    cdef list texts  # ... the shape of the text the parser reads of it, ...
    cdef list recipes  # ... and the recipe
    cdef Shape shapes[SHAPES]
    cdef int count, last_shape
    cdef signed char joins[SHAPES][SHAPES]  # 1: no message across a wrap from shape a into b; -1: maybe; 0: not known
    cdef bytes block

    def __init__(self, int rank, parser):
        """``parser``: the :class:`.text.Parser` of the lines of rank ``rank``."""
        self.parser, self.keys, self.texts, self.recipes = parser, [], [], []
        self.count, self.last_shape = 0, -1
        memset(self.joins, 0, sizeof(self.joins))

    def read(self, bytes block, Py_ssize_t pos, Py_ssize_t end, last):
        """Read the lines of ``block[pos:end]`` (``end`` just after a newline, or the end of the input) up to the
        first one the parser's recipes do not take (see the class docstring), and leave the last one taken
        too: the parser, set by :meth:`~.text.Parser.took` in the state the lines before leave it, reads it
        (and is then in the state it would be in had it read them all). ``last``: the parser's last record
        (None: none, or the runner gives the lines to another rank's parser: nothing is read). Returns the
        start of the first line left; :attr:`taken` lines were taken."""
        cdef const char* s = block
        cdef const char* nl
        cdef Py_ssize_t stop, i
        cdef int k
        cdef long long step
        cdef double scale = 0.0, before = 0.0, tried = 0.0
        cdef bint has_scale, had_scale = False, had_tried
        cdef int overflow, prev = -1
        cdef Py_ssize_t used[SHAPES]
        parser = self.parser
        self.n = self.next = self.end = self.duplicates = self.progress = self.taken = 0
        if last is None or not parser.batchable():
            return pos
        self.block, step, overflow = block, last.step, 0 if parser.overflow_seen else -1
        has_scale = parser.scale is not None
        if has_scale:
            scale = parser.scale
        while pos < end:
            nl = <const char*>memchr(s + pos, c'\n', end - pos)
            stop = nl - s if nl != NULL else end
            had_tried, tried = has_scale, scale
            if not self._take(s, pos, stop, nl != NULL, &prev, &step, &has_scale, &scale, overflow):
                break
            had_scale, before = had_tried, tried  # the loss scale before the last line taken
            self.taken += 1
            pos = stop + 1 if nl != NULL else end
        if not self.n:
            return pos
        self.n -= 1  # the last line taken is the parser's
        self.taken -= 1
        pos = self.lines[self.n].start
        if self.n:
            memset(used, 0, sizeof(used))
            for i in range(self.n):
                used[self.lines[i].shape] = i + 1
            order = []
            for k in range(self.count):
                if used[k]:
                    order.append((used[k], self.recipes[k]))
            order.sort()  # by last use (no two the same)
            parser.took(self.n, self.lines[self.n - 1].step, before if had_scale else None,
                        [recipe for _, recipe in order], self.line)
        return pos

    cdef bint _take(self, const char* s, Py_ssize_t start, Py_ssize_t stop, bint newline, int* prev, long long* step,
                    bint* has_scale, double* scale, int overflow) except -1:
        """Take the line ``s[start:stop]`` (after a line of shape ``prev``, -1: the parser's line before, a record
        at ``step``, the loss scale ``scale`` when ``has_scale``; these move on): False to leave it."""
        cdef const char* p = s + start
        cdef Py_ssize_t n = stop - start
        cdef Line cur
        cdef Shape* shape
        cdef Slot* slot
        cdef double v, at = -1.0
        cdef int k, i
        if not own(p, n):
            return False
        if n and p[n - 1] == c'\r':
            n -= 1
        k = self._shape(p, n)
        if k < 0 or not self._joins(prev[0], k):
            return False
        shape = &self.shapes[k]
        memset(&cur, 0, sizeof(Line))
        for i in range(shape.slots):
            slot = &shape.slot[i]
            if slot.stop == slot.start:
                v = slot.word
            elif not decimal(p + slot.start, p + slot.stop, &v):
                return False
            if slot.scaled:
                v = v * slot.factor
            if slot.field == 0:
                at = v
            elif slot.field == 1:
                cur.loss, cur.has_loss = v, True
            elif slot.field == 2:
                cur.grad_norm, cur.has_grad_norm = v, True
            elif slot.field == 3:
                cur.loss_scale, cur.has_loss_scale = v, True
            elif slot.field == 4:
                cur.lr, cur.has_lr = v, True
            elif slot.field == 5:
                cur.time, cur.has_time = v, True
            else:
                cur.wait, cur.has_wait = v, True
        if not (at == floor(at) and 0 <= at < 1e15) or <long long>at <= step[0]:
            return False
        if cur.has_loss_scale:
            if has_scale[0] and cur.loss_scale < scale[0]:
                return False
            has_scale[0], scale[0] = True, cur.loss_scale
        cur.step, cur.steps, cur.overflow, cur.shape = <long long>at, 1, overflow, k
        cur.start, cur.stop, cur.newline = start, start + n, newline
        step[0], prev[0] = cur.step, k
        self._add(&cur)
        return True

    cdef int _shape(self, const char* p, Py_ssize_t n) except -2:
        """The shape of the line ``p[:n]`` (-1: none the parser's recipes read)."""
        cdef int k
        if self.last_shape >= 0 and matches(&self.shapes[self.last_shape], p, n):
            return self.last_shape
        for k in range(self.count):
            if matches(&self.shapes[k], p, n):
                self.last_shape = k
                return k
        return self._learn(p, n)

    cdef int _learn(self, const char* p, Py_ssize_t n) except -2:
        """Ask the parser for the recipe of the shape of the line ``p[:n]``: its number, or -1."""
        cdef bytearray raw = bytearray(p[:n])
        cdef Py_ssize_t i
        cdef Shape* shape
        cdef Slot* slot
        for i in range(n):
            if raw[i] >= 0x80:
                return -1  # not ASCII: the parser's
            if 0x31 <= raw[i] <= 0x39:
                raw[i] = 0x30
        if self.count == SHAPES:
            return -1
        got = self.parser.recipe_of(raw.decode("ascii"))
        if got is None or len(got[2][0]) > SLOTS or any(slot[0] not in FIELDS for slot in got[2][0]):
            return -1  # (a field this reader does not hold: the parser's)
        lead, text, recipe = got
        key = bytes(raw)
        self.keys.append(key)
        self.texts.append(text)
        self.recipes.append(recipe)
        shape = &self.shapes[self.count]
        shape.key, shape.n, shape.slots = key, n, len(recipe[0])
        for i, (field, place, word, _, _, factor) in enumerate(recipe[0]):
            slot = &shape.slot[i]
            slot.field = FIELDS.index(field)
            slot.start = slot.stop = 0
            if place is None:
                slot.word = word
            else:
                slot.start, slot.stop = lead + place.start, lead + place.stop
            slot.scaled = factor is not None
            slot.factor = factor if slot.scaled else 1.0
        self.last_shape = self.count
        self.count += 1
        return self.last_shape

    cdef bint _joins(self, int a, int b) except -1:
        """No trainer message can be cut by a hard wrap from the line before (of shape ``a``; -1: the parser's
        line before the read) into a line of shape ``b``."""
        if a < 0:
            return not self.parser.wraps(self.texts[b])
        if self.joins[a][b] == 0:
            self.joins[a][b] = -1 if self.parser.wrapped(self.texts[a], self.texts[b]) else 1
        return self.joins[a][b] == 1

    def line(self, Py_ssize_t i):
        """The text line of record ``i`` of the last read, as the runner would feed it to the parser."""
        cdef Line* line
        if not 0 <= i < self.n:
            raise IndexError(i)
        line = &self.lines[i]
        text = self.block[line.start:line.stop].decode("utf-8", "replace")
        return text + "\n" if line.newline else text
