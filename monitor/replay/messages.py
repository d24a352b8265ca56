"""Trainer messages that any text log may hold, whatever its format, found anywhere in a line (after a tqdm
bar, behind quoting or a log viewer's line numbers): the readers look for them in every line that is not a
step line of their own.

* Overflow messages of fp16 loss scalers: the step overflowed, its update was skipped (or, in MindSpore's
  model suites, done anyway), and the scale falls. Each goes to the reader's :meth:`~.base.Parser.overflowed`,
  which marks the step it belongs to (see there)::

      [2020-09-09 01:52:29,086] [INFO] [stage2.py:1132:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648.0
      [INFO] [loss_scaler.py:190:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1
      [deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 1024, reducing to 512
      [Rank 0] Overflow detected. Skipping step. Attempted loss scale: 1024, reducing to 512
      Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0                      (apex amp)
      | WARNING: overflow detected, setting loss scale to: 0.25                                           (fairseq)
      overflow, still update, loss scale adjust to 512.0                         (MindSpore model suites)
      WARNING: found inf during ShardedOptimV2 step                                              (Colossal-AI)

  A scaler line of its own after such a message gives the overflowed step's record the scale it fell to::

      Gradient overflow. Skipping step
      Loss scaler reducing loss scale to 512.0                                          (apex amp on Ascend NPU)

  DeepSpeed's and apex's files (``deepspeed/runtime/fp16/loss_scaler.py``, ``fused_optimizer.py``,
  ``apex/amp/scaler.py``), fairseq's ``fairseq/optim/dynamic_loss_scaler.py`` / ``fp16_optimizer.py``,
  Colossal-AI's ``zero/sharded_optim/sharded_optim_v2.py``.

* The scaler giving up, a ``loss_scale_collapse`` report::

      Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.   (DeepSpeed)
      FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. ...     (fairseq)

* Non-finite tensors seen by MindSpore's ``SummaryCollector`` (``mindspore/train/summary/_summary_adapter.py``),
  a ``nan_inf`` report at the step being logged (weights or gradients no longer finite)::

      [WARNING] ME(3613:...):2024-03-07-06:39:44.569.244 [mindspore/train/summary/_summary_adapter.py:304] There are no valid values in the ndarray(size=40960, shape=(1, 640, 64))

* Collective timeouts, as ``stall`` reports (value: seconds waited, when printed):

  - PyTorch's NCCL watchdog (``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``, ``WorkNCCL::checkTimeout``;
    torch_npu's ``WorkHCCL`` prints the same)::

      [rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.

  - its heartbeat monitor, when the watchdog itself hangs (``ProcessGroupNCCL.cpp``, ``HeartbeatMonitor``; the
    process is then terminated)::

      [rank7]:[E626 05:14:36.393067540 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 7] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives. ...

  - Ascend HCCL error codes (CANN error-code reference): ``EI0002`` (a collective's Notify wait timed out,
    ``HCCL_EXEC_TIMEOUT``), ``EI0006`` (building the connection timed out, ``HCCL_CONNECT_TIMEOUT``), and
    the HCCL plog line ``wait socket establish timeout``::

      EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times out. Reason: ... rankSize[8], rankId[6].]
      EI0006: [PID: 176930] 2025-07-01-00:40:04.135.732 Getting socket times out. Reason: Remote Rank did not send the data in time.
      [hccl_socket_manager.cc:816] [3977663][Wait][LinkEstablish]wait socket establish timeout, role[0] rank[0] timeout[120 s]

The same message repeated for the same step and rank (each rank and each pending collective prints one,
SummaryCollector one per tensor) is reported once.
"""
from __future__ import annotations

import math
import re

from .base import MERGED, Report


def _float(text: str | None) -> float | None:
    try:
        return float(text.rstrip(".")) if text else None
    except ValueError:
        return None

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
# (attempted scale, new scale) groups: DeepSpeed's two shapes, apex, fairseq, MindSpore's model suites, Colossal-AI
_OVERFLOW = re.compile(
    r"(?:OVERFLOW! Rank \d+ Skipping step|overflow! Skipping step|Overflow detected\. Skipping step)"
    r"\.?(?: Attempted loss scale: " + _NUM + r"(?:, reducing to " + _NUM + r")?)?"
    r"|Gradient overflow\.\s+Skipping step(?:, loss scaler \d+ reducing loss scale to " + _NUM + r")?"
    r"|overflow detected, setting loss scale to:? " + _NUM +
    r"|overflow, still update, loss scale adjust to " + _NUM +
    r"|found inf during \w+ step", re.IGNORECASE)
_SCALED = re.compile(r"reducing loss scale to " + _NUM)  # the scaler's own line after an overflow (apex on NPU)
_MIN_SCALE = re.compile(r"Minimum loss scale reached \(" + _NUM + r"\)|already at minimum")
_WATCHDOG = re.compile(r"(?:Rank (\d+)\] )?Watchdog caught collective operation timeout: (\w+)\((.*?)\) ran for "
                       r"(\d+) milliseconds")
_WATCHDOG_RANK = re.compile(r"Rank (\d+)\] Watchdog caught")
_STUCK = re.compile(r"(?:Rank (\d+)\] ProcessGroupNCCL's )?watchdog got stuck for (\d+) seconds")
_OP = re.compile(r"OpType=(\w+)")
_HCCL = re.compile(r"\b(EI0002|EI0006)\b")
_HCCL_RANK = re.compile(r"rank(?:Id)?\[(\d+)\]")
_SOCKET_WAIT = re.compile(r"wait socket establish timeout.*?rank\[(\d+)\](?: timeout\[(\d+) ?s\])?")
_HCCL_WHAT = {"EI0002": "a collective's Notify wait timed out (EI0002, HCCL_EXEC_TIMEOUT)",
              "EI0006": "building the connection timed out (EI0006, HCCL_CONNECT_TIMEOUT)"}


MARKS = ("kipping step", "verflow", "found inf", "reducing loss scale", "already at minimum", "Minimum loss scale",
         "no valid values", "Watchdog caught", "watchdog got stuck", "EI000", "socket establish timeout")
_MENTIONED = re.compile("|".join(MARKS))


def mentioned(line: str) -> bool:
    """True when ``line`` may hold one of these messages (a cheap test; :func:`match` reads it)."""
    return _MENTIONED.search(line) is not None


def match(line: str, parser):
    """The record or report ``line`` carries for ``parser`` (its state gives the step), or None."""
    m = _OVERFLOW.search(line) if "verflow" in line or "kipping step" in line or "found inf" in line else None
    if m is not None:
        numbers = [_float(g) for g in m.groups()]
        attempted, reduced = numbers[0], numbers[1]
        new = reduced if reduced is not None else next((x for x in numbers[2:] if x is not None), None)
        return parser.overflowed(attempted, new)
    if "reducing loss scale" in line:
        m = _SCALED.search(line)
        last = parser.last
        if m is not None and last is not None and last.overflow and last.loss_scale is None:
            last.loss_scale = _float(m.group(1))  # the overflowed step's record gets the scale its scaler fell to
            return MERGED
    if "inimum" in line:
        m = _MIN_SCALE.search(line)
        if m is not None and (m.group(1) is not None or "loss scale" in line.lower()):
            scale = _float(m.group(1)) if m.group(1) else parser.last.loss_scale if parser.last is not None else None
            return parser.once(Report("loss_scale_collapse", parser.done, scale,
                                      "trainer: loss scale already at its minimum, cannot decrease it (the run exits)",
                                      parser.rank))
    if "no valid values in the ndarray" in line:
        return parser.hold(Report("nan_inf", parser.done, math.nan,
                                  "trainer: a tensor holds no finite value (MindSpore SummaryCollector: \"There are "
                                  "no valid values in the ndarray\")", parser.rank))
    if "Watchdog caught" in line:
        m = _WATCHDOG.search(line)
        if m is not None:
            rank, work, inner, ms = m.groups()
            op = _OP.search(inner)
            seconds = int(ms) / 1000.0
            what = f"{work}({op.group(1) if op else '?'}) collective timed out after {seconds:.0f} s (watchdog)"
        else:  # the message cut short (an excerpt): a watchdog timeout all the same
            m = _WATCHDOG_RANK.search(line)
            rank, seconds, what = m.group(1) if m else None, None, "a collective timed out (watchdog)"
        return parser.once(Report("stall", parser.done, seconds, f"trainer: {what} after step {parser.done}",
                                  int(rank) if rank else parser.rank))
    if "watchdog got stuck" in line:
        m = _STUCK.search(line)
        if m is not None:
            rank, seconds = m.group(1), float(m.group(2))
            return parser.once(Report("stall", parser.done, seconds,
                                      f"trainer: the NCCL watchdog got stuck for {seconds:.0f} s without progress on "
                                      f"its collectives (heartbeat monitor) after step {parser.done}",
                                      int(rank) if rank else parser.rank))
    if "EI000" in line:
        m = _HCCL.search(line)
        if m is not None:
            r = _HCCL_RANK.search(line)
            return parser.once(Report("stall", parser.done, None,
                                      f"trainer: HCCL {_HCCL_WHAT[m.group(1)]} after step {parser.done}",
                                      int(r.group(1)) if r else parser.rank))
    if "socket establish timeout" in line:
        m = _SOCKET_WAIT.search(line)
        if m is not None:
            return parser.once(Report("stall", parser.done, float(m.group(2)) if m.group(2) else None,
                                      f"trainer: HCCL {_HCCL_WHAT['EI0006']} after step {parser.done}",
                                      int(m.group(1))))
    return None
