# C declarations of monitor/detectors.pyx, for the modules that judge records without Python objects
# (monitor/replay/scan.pyx).

cdef struct Rec:
    # what the detectors read of a StepRecord; has_*: the field is not None
    long long step
    double loss, grad_norm, loss_scale, tps, mfu, lr
    double period, wait  # with has_tps: the step's seconds (step time + data wait) and its data wait
    bint has_loss, has_grad_norm, has_loss_scale, has_tps, has_mfu, has_lr
    int overflow  # -1: unknown (None), 0: False, 1: True


cdef int rec_from(Rec* r, object rec) except -1


cdef class Window:
    cdef Py_ssize_t size, n, head
    cdef bint lazy, stale
    cdef long long* steps
    cdef double* values
    cdef double* ordered
    cdef void _insert(self, double x) noexcept
    cdef void _remove(self, double x, Py_ssize_t count) noexcept
    cdef void _replace(self, double old, double x) noexcept
    cdef void _sort(self) noexcept
    cpdef void add(self, long long step, double x) noexcept
    cpdef double median(self) noexcept
    cpdef double sigma(self, double m) noexcept
    cpdef void rewind(self, long long step) noexcept
    cdef double value(self, Py_ssize_t i) noexcept
    cdef long long step_of(self, Py_ssize_t i) noexcept
    cdef long long run_start(self, double above, long long step) noexcept
    cdef double median_of(self, Py_ssize_t start, Py_ssize_t count) noexcept


cdef class Detector:
    cdef readonly object cfg
    cdef long long warmup_steps
    cdef object update(self, Rec* r)
    cdef void forget(self, long long step) noexcept


cdef class Judge:
    cdef list detectors
    cdef bint has_last
    cdef long long last
    cdef readonly bint went_back
    cdef object judge(self, Rec* r)
    cdef void forget(self, long long step) noexcept
