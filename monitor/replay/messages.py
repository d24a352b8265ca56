"""Trainer messages that any text log may hold, whatever its format; every text parser looks for them in the
lines that are not its own.

* DeepSpeed's fp16 loss scaler (``deepspeed/runtime/fp16/loss_scaler.py``, ``fused_optimizer.py``,
  ``unfused_optimizer.py``, the old ZeRO ``stage2.py``): an overflowed, skipped step becomes a record with
  ``overflow=True`` and the scale it overflowed at, placed at the step after the last one seen (DeepSpeed
  does not print the step)::

      [2020-09-09 01:52:29,086] [INFO] [stage2.py:1132:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648.0
      [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1
      [deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 1024, reducing to 512
      [Rank 0] Overflow detected. Skipping step. Attempted loss scale: 1024, reducing to 512

  and the scaler giving up is a ``loss_scale_collapse`` report::

      Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.

* Collective timeouts, as ``stall`` reports (value: seconds waited, when printed):

  - PyTorch's NCCL watchdog (``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``, ``WorkNCCL::checkTimeout``;
    torch_npu's ``WorkHCCL`` prints the same)::

      [rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.

  - Ascend HCCL error codes (CANN error-code reference): ``EI0002`` (a collective's Notify wait timed out,
    ``HCCL_EXEC_TIMEOUT``), ``EI0006`` (building the connection timed out, ``HCCL_CONNECT_TIMEOUT``), and
    the HCCL plog line ``wait socket establish timeout``::

      EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times out. Reason: ... rankSize[8], rankId[6].]
      EI0006: [PID: 176930] 2025-07-01-00:40:04.135.732 Getting socket times out. Reason: Remote Rank did not send the data in time.
      [hccl_socket_manager.cc:816] [3977663][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[0] timeout[120 s]

  A timeout repeated for the same step and rank (each rank and each pending collective prints one) is
  reported once.
"""
from __future__ import annotations

import re

from .base import Report

_OVERFLOW = re.compile(r"(?:OVERFLOW! Rank \d+ Skipping step|overflow! Skipping step|Overflow detected\. Skipping step)"
                       r"\.?(?: Attempted loss scale: ([\d.eE+]+))?")
_WATCHDOG = re.compile(r"(?:Rank (\d+)\] )?Watchdog caught collective operation timeout: (\w+)\((.*?)\) ran for "
                       r"(\d+) milliseconds")
_OP = re.compile(r"OpType=(\w+)")
_HCCL = re.compile(r"\b(EI0002|EI0006)\b")
_HCCL_RANK = re.compile(r"rank(?:Id)?\[(\d+)\]")
_SOCKET_WAIT = re.compile(r"wait socket establish timeout.*?rank\[(\d+)\](?: timeout\[(\d+) ?s\])?")
_HCCL_WHAT = {"EI0002": "a collective's Notify wait timed out (EI0002, HCCL_EXEC_TIMEOUT)",
              "EI0006": "building the connection timed out (EI0006, HCCL_CONNECT_TIMEOUT)"}


MARKS = ("kipping step", "already at minimum", "Watchdog caught", "EI000", "socket establish timeout")


def mentioned(line: str) -> bool:
    """True when ``line`` may hold one of these messages (a cheap test; :func:`match` reads it)."""
    return any(mark in line for mark in MARKS)


def match(line: str, parser):
    """The record or report ``line`` carries for ``parser`` (its state gives the step), or None."""
    if "kipping step" in line:
        m = _OVERFLOW.search(line)
        if m is not None:
            parser.overflow_lines += 1
            scale = m.group(1)
            try:
                scale = float(scale.rstrip(".")) if scale else None
            except ValueError:
                scale = None
            return parser.record(parser.next_step(), overflow=True, loss_scale=scale)
    if "already at minimum" in line and "loss scale" in line.lower():
        scale = parser.last.loss_scale if parser.last is not None else None
        return parser.once(Report("loss_scale_collapse", parser.step, scale,
                                  "trainer: loss scale already at its minimum, cannot decrease it (the run exits)",
                                  parser.rank))
    if "Watchdog caught" in line:
        m = _WATCHDOG.search(line)
        if m is not None:
            rank, work, inner, ms = m.groups()
            op = _OP.search(inner)
            seconds = int(ms) / 1000.0
            return parser.once(Report(
                "stall", parser.step, seconds,
                f"trainer: {work}({op.group(1) if op else '?'}) collective timed out after {seconds:.0f} s "
                f"(watchdog) after step {parser.step}", int(rank) if rank else parser.rank))
    if "EI000" in line:
        m = _HCCL.search(line)
        if m is not None:
            r = _HCCL_RANK.search(line)
            return parser.once(Report("stall", parser.step, None,
                                      f"trainer: HCCL {_HCCL_WHAT[m.group(1)]} after step {parser.step}",
                                      int(r.group(1)) if r else parser.rank))
    if "socket establish timeout" in line:
        m = _SOCKET_WAIT.search(line)
        if m is not None:
            return parser.once(Report("stall", parser.step, float(m.group(2)) if m.group(2) else None,
                                      f"trainer: HCCL {_HCCL_WHAT['EI0006']} after step {parser.step}",
                                      int(m.group(1))))
    return None
