"""Builds the compiled modules (Cython): the detectors, shared by the live callback and replay, and replay's
MindFormers fast path. Everything else is in pyproject.toml."""
from Cython.Build import cythonize
from setuptools import Extension, setup

# no fused multiply-add: the detectors' arithmetic gives the same doubles on every platform (aarch64 GCC
# contracts a * b + c by default)
ARGS = ["-O2", "-ffp-contract=off"]
MODULES = {"training_monitor.detectors": "monitor/detectors.pyx", "training_monitor.replay.scan": "monitor/replay/scan.pyx"}

setup(ext_modules=cythonize([Extension(name, [src], extra_compile_args=ARGS) for name, src in MODULES.items()],
                            compiler_directives={"language_level": 3}))
