# C declarations of monitor/replay/sample.py (Cython pure-Python mode), for monitor/replay/scan.pyx.

cdef class Sample:
    cdef readonly list values
    cdef readonly Py_ssize_t size, stride, skip, count
    cpdef add(self, double value)
