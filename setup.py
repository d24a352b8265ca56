"""Builds the compiled modules (Cython): the detectors, shared by the live callback and replay, and replay's
compiled reader (and the quantile sample it feeds, Cython pure-Python mode). Everything else is in pyproject.toml."""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

# no fused multiply-add: the detectors' arithmetic gives the same doubles on every platform (aarch64 GCC
# contracts a * b + c by default)
ARGS = ["-O2", "-ffp-contract=off"]
MODULES = {"training_monitor.detectors": "monitor/detectors.pyx",
           "training_monitor.replay.sample": "monitor/replay/sample.py",
           "training_monitor.replay.scan": "monitor/replay/scan.pyx"}

# Cython finds a module's .pxd by its import name, and pyproject.toml maps that name (training_monitor) onto
# the monitor/ folder: a build-time folder link gives Cython the same view.
INCLUDE = os.path.join("build", "cython-include")
os.makedirs(INCLUDE, exist_ok=True)
if not os.path.islink(link := os.path.join(INCLUDE, "training_monitor")):
    os.symlink(os.path.abspath("monitor"), link)

setup(ext_modules=cythonize([Extension(name, [src], extra_compile_args=ARGS) for name, src in MODULES.items()],
                            include_path=[INCLUDE], compiler_directives={"language_level": 3}))
