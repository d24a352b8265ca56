"""Builds the compiled modules (Cython): the detectors, shared by the live callback and replay, and replay's
compiled reader (and the quantile sample it feeds). The detectors and the sample are Cython pure-Python mode
(a .py typed by its .pxd): without a C compiler, or with TRAINING_MONITOR_PURE=1 in the environment, they
are installed as plain Python, and replay reads every line through its format's parser. Everything else is
in pyproject.toml."""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

# no fused multiply-add: the detectors' arithmetic gives the same doubles on every platform (aarch64 GCC
# contracts a * b + c by default)
ARGS = ["-O2", "-ffp-contract=off"]
MODULES = {"training_monitor.detectors": "monitor/detectors.py",
           "training_monitor.replay.sample": "monitor/replay/sample.py",
           "training_monitor.replay.scan": "monitor/replay/scan.pyx"}

# Cython finds a module's .pxd by its import name, and pyproject.toml maps that name (training_monitor) onto
# the monitor/ folder: a build-time folder link gives Cython the same view.
INCLUDE = os.path.join("build", "cython-include")
os.makedirs(INCLUDE, exist_ok=True)
if not os.path.islink(link := os.path.join(INCLUDE, "training_monitor")):
    os.symlink(os.path.abspath("monitor"), link)

EXTENSIONS = [] if os.environ.get("TRAINING_MONITOR_PURE") == "1" else cythonize(
    [Extension(name, [src], extra_compile_args=ARGS) for name, src in MODULES.items()],
    include_path=[INCLUDE], compiler_directives={"language_level": 3})
for ext in EXTENSIONS:  # a module that does not compile (no C compiler, no Python headers) is left out, warned
    ext.optional = True  # (set on cythonize's extensions: it does not copy the attribute)

setup(ext_modules=EXTENSIONS)
