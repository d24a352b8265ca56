#!/usr/bin/env bash
# The project's entry points, each doing all set-up first on a fresh Debian machine with Python 3.11:
#   ./dev.sh demo [monitor demo options]   train a small LM on CPU with real MindSpore, monitored
#   ./dev.sh test [pytest options]         run the whole test suite (-m "not slow": the fast lane)
#   ./dev.sh lint                          ruff and mypy, configured in pyproject.toml
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3.11}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

apt_install() {  # Debian packages, installed once
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} = 0 ] && return 0
  echo "dev.sh: installing Debian packages: ${missing[*]}" >&2
  as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null \
    || { echo "dev.sh: could not install ${missing[*]} (need root or sudo)" >&2; return 1; }
}

build_tools() {  # the compiled modules (setup.py) need a C compiler and Python's headers
  command -v cc >/dev/null || apt_install gcc libc6-dev
  "$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_path("include"), "Python.h")))' \
    || apt_install "$(basename "$PY")-dev"
}

compiled_changed() {  # a build input changed since the last install: .pyx, .pxd, a .py beside a .pxd (Cython's
  # pure-Python mode), setup.py, pyproject.toml
  local f
  for f in $(find pyproject.toml setup.py monitor -newer .venv/.installed \( -name pyproject.toml -o -name setup.py \
             -o -name '*.pyx' -o -name '*.pxd' -o -name '*.py' \) 2>/dev/null); do
    case "$f" in *.py) [ -f "${f%.py}.pxd" ] || [ "$f" = setup.py ] || continue ;; esac
    return 0
  done
  return 1
}

setup_venv() {
  # (re)install when the dependencies or the compiled modules' sources changed
  if [ ! -f .venv/.installed ] || compiled_changed; then
    build_tools
    if ! "$PY" -m venv .venv 2>/dev/null; then
      rm -rf .venv
      apt_install python3-venv "$(basename "$PY")-venv" 2>/dev/null || apt_install python3-venv
      "$PY" -m venv .venv
    fi
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[mindformers,grafana,test]'
    touch .venv/.installed
  fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  demo)
    setup_venv
    exec .venv/bin/monitor demo "$@" ;;
  test)
    setup_venv
    # real servers and tools the tests run: Prometheus and promtool, Alertmanager and amtool (the tests
    # start the servers themselves, on free ports, with the configs in deploy/), Chromium for the HTML report
    command -v promtool >/dev/null || apt_install prometheus
    { command -v amtool && command -v prometheus-alertmanager; } >/dev/null || apt_install prometheus-alertmanager
    command -v chromium >/dev/null || apt_install chromium
    exec .venv/bin/pytest "$@" ;;  # not python -m: the repository root is not on sys.path (imports as installed)
  lint)
    setup_venv
    status=0
    .venv/bin/ruff check . || status=1
    .venv/bin/mypy || status=1
    exit $status ;;
  *)
    echo "usage: ./dev.sh demo [options] | ./dev.sh test [pytest options] | ./dev.sh lint" >&2
    exit 2 ;;
esac
