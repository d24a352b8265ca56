# C types of monitor/detectors.py (Cython pure-Python mode), for the compiled build (setup.py) and for the
# modules that judge records without Python objects (monitor/replay/scan.pyx).
cimport cython

cdef long long NONE
cdef double NAN, INF
cdef Py_ssize_t ROBUST_RANGE_FROM
cdef double MAD_TO_SIGMA


cdef class Rec:
    cdef long long step
    cdef double loss, grad_norm, loss_scale, rate, mfu, lr, period, wait, callbacks, span, next_scale
    cdef bint has_loss, has_grad_norm, has_loss_scale, has_rate, has_mfu, has_lr, positional, applied, has_next_scale
    cdef bint restored
    cdef int overflow, unit
    cdef long long overflows


cdef void throughput(Rec r, double work, int unit, double step_time, double wait, double steps) noexcept
@cython.locals(wait=double, w=object, c=object)
cdef int rec_from(Rec r, object rec) except -1
cdef object opt(bint has, double x)
cdef bint finite(double x) noexcept
@cython.locals(steps=double)
cdef double timed_steps(Rec r, long long last) noexcept
@cython.locals(i=Py_ssize_t, j=Py_ssize_t, x=double, start=Py_ssize_t, end=Py_ssize_t)
cdef void sort(double[::1] v, Py_ssize_t n) noexcept
@cython.locals(lo=Py_ssize_t, n=Py_ssize_t, half=Py_ssize_t)
cdef Py_ssize_t bisect_sorted(double[::1] v, Py_ssize_t count, double x, bint right) noexcept
@cython.locals(i=Py_ssize_t, j=Py_ssize_t, d=double, prev=double, lo=double, hi=double)
cdef double sorted_mad(double[::1] v, Py_ssize_t n, double m, bint logs) noexcept
@cython.locals(mid=Py_ssize_t)
cdef double sorted_log_median(double[::1] v, Py_ssize_t n) noexcept
@cython.locals(mid=Py_ssize_t)
cdef double sorted_median(double[::1] v, Py_ssize_t n) noexcept
cdef long long halvings(double prev, double scale) except -1


cdef class Window:
    cdef Py_ssize_t size, n, head
    cdef bint lazy, stale
    cdef long long[::1] steps
    cdef double[::1] values, ordered, scratch  # ordered: the values sorted; scratch: median_of's
    cdef double value(self, Py_ssize_t i) noexcept
    cdef long long step_of(self, Py_ssize_t i) noexcept
    @cython.locals(i=Py_ssize_t, j=Py_ssize_t)
    cdef void _insert(self, double x) noexcept
    @cython.locals(i=Py_ssize_t)
    cdef void _remove(self, double x, Py_ssize_t count) noexcept
    @cython.locals(k=Py_ssize_t, last=Py_ssize_t)
    cdef void _replace(self, double old, double x) noexcept
    @cython.locals(i=Py_ssize_t)
    cdef void _sort(self) noexcept
    @cython.locals(tail=Py_ssize_t)
    cpdef void add(self, long long step, double x) noexcept
    cpdef double median(self) noexcept
    cpdef double log_median(self) noexcept
    cpdef double sigma(self, double m, bint logs=*) noexcept
    @cython.locals(tail=Py_ssize_t)
    cpdef void rewind(self, long long step) noexcept
    @cython.locals(i=Py_ssize_t, j=Py_ssize_t)
    cdef void renumber(self, long long step) noexcept
    @cython.locals(i=Py_ssize_t)
    cdef long long run_start(self, double above, long long step) noexcept
    @cython.locals(v="double[::1]", i=Py_ssize_t)
    cdef double median_of(self, Py_ssize_t start, Py_ssize_t count) noexcept


cdef class Steps:
    cdef long long window
    cdef long long[::1] buf
    cdef Py_ssize_t cap, head, n
    @cython.locals(buf="long long[::1]", i=Py_ssize_t)
    cdef int _grow(self) except -1
    @cython.locals(_k=cython.longlong)
    cdef Py_ssize_t add(self, long long step, long long times) except -1
    cdef long long first(self) noexcept
    cdef void rewind_to(self, long long step) noexcept


cdef class Detector:
    cdef readonly object cfg
    cdef long long warmup_steps
    cdef public long long skipped_run
    cdef object update(self, Rec r)
    cdef void forget(self, long long step) noexcept
    cdef void resume(self, long long step) noexcept


cdef class NanInf(Detector):
    cdef long long since
    cdef object update(self, Rec r)
    cdef void forget(self, long long step) noexcept


cdef class LrSurge(Detector):
    cdef public double ratio
    cdef double top, prev
    cdef long long prev_step
    @cython.locals(x=double, reach=double)
    cdef object update(self, Rec r)
    cdef void forget(self, long long step) noexcept


cdef class RobustSpike(Detector):
    cdef public Py_ssize_t window, min_history
    cdef public long long confirm_steps
    cdef public double threshold, min_sigma_ratio, min_ratio, log_threshold, excursion_ratio, excursion_spread
    cdef public double excursion_min
    cdef Window history
    cdef list levels
    cdef double ratio, least
    cdef object pending  # the event of a value over the bound awaiting confirmation
    cdef double pending_bound  # ... and the soft bound the next value must exceed
    cdef str label
    @cython.locals(m=double, s=double, hist=Window)
    cdef object spike(self, Rec r, double x)
    @cython.locals(m=double, hist=Window, i=Py_ssize_t, n=Py_ssize_t)
    cdef object excursion(self, long long step, double x)
    @cython.locals(v="double[::1]", bound=double, ml=double)
    cdef bint robust_excursion(self, double x, double m, Py_ssize_t n)
    @cython.locals(hist=Window, ml=double)
    cdef bint multiplicative(self, double x, double sigmas)
    @cython.locals(hist=Window, onset=cython.longlong)
    cdef object event(self, long long step, double x, double m, double s)
    cdef bint corroborated(self, Rec r)
    cdef void forget(self, long long step) noexcept
    @cython.locals(w=Window)
    cdef void resume(self, long long step) noexcept


cdef class LossSpike(RobustSpike):
    cdef public Py_ssize_t shift_steps, rise_steps
    cdef public double shift_sigma, rise_ratio, rise_spread
    cdef Window recent
    @cython.locals(hist=Window, k=Py_ssize_t, n=Py_ssize_t, i=Py_ssize_t, base=double, prev=double, x=double,
                   lo=double, hi=double)
    cdef object rise(self, long long step)
    @cython.locals(x=double, level=double, m=double, floor=double, s=double, k=Py_ssize_t, onset=cython.longlong,
                   recent=Window, hist=Window, few=bint)
    cdef object update(self, Rec r)
    cdef void forget(self, long long step) noexcept


cdef class GradNormSpike(RobustSpike):
    cdef public Py_ssize_t climb_window, level_steps, growth_steps
    cdef public double climb_ratio, confirm_loss_sigma, burst_ratio, joint_ratio, joint_sigma, level, growth_ratio
    cdef Window losses
    cdef long long climb_every, joint_since, level_since, growth_since, level_n, growth_n
    cdef double last_norm
    cdef object sustained(self, Rec r, double x)
    @cython.locals(losses=Window, m=double)
    cdef double loss_sigmas(self, Rec r)
    cdef bint corroborated(self, Rec r)
    @cython.locals(hist=Window, m=double, z=double, since=cython.longlong)
    cdef object joint(self, Rec r, double x)
    cdef void forget(self, long long step) noexcept
    @cython.locals(x=double, base=double, new=double, rise=double, hist=Window, k=Py_ssize_t, i=Py_ssize_t,
                   onset=cython.longlong)
    cdef object update(self, Rec r)


cdef class LossScaleWatch(Detector):
    cdef public long long calibration_steps
    cdef public double calibration_from, calibration_to
    cdef bint calibrated, has_prev, startup
    cdef double prev_scale
    cdef long long last_step, span, counted
    @cython.locals(out=bint, k=cython.longlong, flag=int, n=cython.longlong, mixed=bint, falls=bint,
                   early=cython.longlong)
    cdef bint calibrating(self, Rec r) noexcept
    cdef void forget(self, long long step) noexcept


cdef class OverflowStorm(LossScaleWatch):
    cdef public long long window, max_overflows
    cdef public double max_growth
    cdef Steps overflow_steps
    @cython.locals(had=bint, prev=double, scale=double, times=cython.longlong, n=Py_ssize_t, calibration=bint,
                   blocks=cython.longlong)
    cdef object update(self, Rec r)
    cdef void forget(self, long long step) noexcept


cdef class LossScaleCollapse(LossScaleWatch):
    cdef public double floor
    cdef public long long window, max_halvings
    cdef double highest
    cdef bint floored, fixed
    cdef Steps drops
    @cython.locals(scale=double, prev=double, had=bint, n=Py_ssize_t, low=double, floored=bint)
    cdef object update(self, Rec r)
    cdef void forget(self, long long step) noexcept


cdef class LossDegenerate(Detector):
    cdef public double zero_below
    cdef public long long frozen_steps
    cdef public long long frozen_records
    cdef public long long frozen_digits
    cdef public double same_ratio
    cdef public double collapse_ratio
    cdef public double floor_below
    cdef public double tiny_below
    cdef double last
    cdef double high
    cdef double before
    cdef double unit_bound
    cdef long long same_since
    cdef long long same_n
    cdef long long tiny_since, tiny_n
    cdef bint rounded
    cdef bint has_last, repeated
    @cython.locals(x=double)
    cdef object update(self, Rec r)
    cdef bint floor(self, double x, double before)
    @cython.locals(d=double, m=double)
    cdef bint same(self, double x)
    cdef void forget(self, long long step) noexcept


cdef class LossPlateau(Detector):
    cdef public Py_ssize_t window
    cdef public long long until_step
    cdef public double min_improvement
    cdef Window losses
    cdef long long every
    @cython.locals(x=double, old=double, new=double, q=Window, k=Py_ssize_t)
    cdef object update(self, Rec r)
    cdef void forget(self, long long step) noexcept


cdef class SustainedLow(Detector):
    cdef public long long min_steps
    cdef long long low_since  # the run's first step, 0 or NONE when there is no run
    cdef long long low(self, long long step) noexcept
    cdef void forget(self, long long step) noexcept


cdef class ThroughputDrop(Detector):
    cdef public Py_ssize_t window, min_history, min_steps, excursion_history
    cdef public Py_ssize_t bound_steps
    cdef public double ratio, data_share, min_lost_seconds, min_seconds, excursion_ratio, excursion_seconds
    cdef public double bound_seconds
    cdef Window values, waits  # the medians of the rate and data wait of each min_steps steps (a block)
    cdef Window early, early_waits  # the rates and data waits of the steps before min_history (excursions)
    cdef long long[::1] steps  # the last min_steps judged steps (a ring; n of them, the newest at k - 1)...
    cdef double[::1] ring  # ... and their rate, period, data wait, its part beyond the median, time lost
    cdef double[::1] scratch  # ring_median's
    cdef Py_ssize_t n, k
    cdef long long low_since, first  # first: the first step judged
    cdef int unit  # the series' RATE_UNITS index (len(RATE_UNITS): none yet)
    cdef double seconds
    cdef Py_ssize_t streak  # input-bound records in a row (bound), since step streak_since, waiting streak_wait s
    cdef long long streak_since, streak_last  # streak_last: the streak's newest record
    cdef double streak_wait, streak_callbacks  # (of which streak_callbacks in the callbacks after the monitor)
    cdef bint streak_told  # the streak was reported: once per streak
    cdef long long slow_since  # excursions in a row (excursion): since step slow_since, slow_n records, slow_seconds
    cdef Py_ssize_t slow_n     # of wall time
    cdef double slow_seconds
    @cython.locals(n=Py_ssize_t, j=Py_ssize_t)
    cdef Py_ssize_t low(self, double bound) noexcept
    @cython.locals(v="double[::1]", j=Py_ssize_t)
    cdef double ring_median(self, Py_ssize_t slot) noexcept
    @cython.locals(x=double, m=double, med=double, lost=double, waited=double, known=bint, c=Py_ssize_t,
                   i=Py_ssize_t, j=Py_ssize_t, onset=cython.longlong)
    cdef object drop(self, Rec r)
    cdef object update(self, Rec r)
    @cython.locals(steps=double)
    cdef object bound(self, Rec r)
    @cython.locals(e=Window, m=double, lost=double, waited=double, wall=double)
    cdef object excursion(self, Rec r, double x)
    cdef void forget(self, long long step) noexcept


cdef class LowMfu(SustainedLow):
    cdef public double floor
    @cython.locals(onset=cython.longlong)
    cdef object update(self, Rec r)


cdef class EvalLossSpike(Detector):
    cdef public Py_ssize_t window, min_history
    cdef public double ratio, spread
    cdef Window losses
    @cython.locals(hist=Window, m=double)
    cpdef object evaluate(self, long long step, double x)
    cdef void forget(self, long long step) noexcept


cdef class EvalNan(Detector):
    cdef bint reported
    cpdef object evaluate(self, long long step, double x)
    cdef void forget(self, long long step) noexcept


cdef class Judge:
    cdef list detectors, evaluators
    cdef bint has_last
    cdef long long last
    cdef readonly bint went_back
    cdef readonly long long raised_at
    cdef bint positional
    cdef Rec rec  # observe's
    cdef long long skipped_since, skipped_n
    cdef list spares, warm
    @cython.locals(det=Detector, i=Py_ssize_t)
    cdef object judge(self, Rec r)
    @cython.locals(det=Detector)
    cdef void forget(self, long long step, bint resume=*) noexcept
