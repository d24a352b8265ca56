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
      NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 64.0        (fairseq, OFA)
      overflow, still update, loss scale adjust to 512.0                         (MindSpore model suites)
      overflow, drop step, loss scale adjust to 512.0
      WARNING: found inf during ShardedOptimV2 step                                              (Colossal-AI)
      colossalai - colossalai - INFO: Found overflow. Skip step                     (Colossal-AI, ZeRO / Gemini)
      Found inf or nan, current scale is: 32768.0, decrease to: 32768.0*0.5             (PaddlePaddle's AMP scaler)
      Found NaN, decreased lg_loss_scale to 16.929000000013357      (OpenAI's guided-diffusion and improved-diffusion)

  DeepSpeed's fp16 optimizers (``fused_optimizer.py``, ``unfused_optimizer.py``) name the iteration, on
  every rank (some versions begin the message with a newline: a line of its own after the logger's prefix)::

      Grad overflow on iteration 8
      [INFO] [unfused_optimizer.py:300:_update_scale] Grad overflow on iteration: 2

  The optimizer counts its iterations from 0 (``cur_iter``, advanced after the message) and step lines count
  the steps done: iteration i is step i + 1 where that falls after the last step seen and before the next one
  counted (a resumed run's optimizer may count from 0 again: then the next step counted). The same iteration
  named again with no record between is another rank's copy (``repeated trainer
  message``). A scaler line of its own after such a message gives the overflowed step's record the scale it
  ran with (or, when only that is printed, the one it fell to)::

      Gradient overflow. Skipping step
      Loss scaler reducing loss scale to 512.0                                          (apex amp on Ascend NPU)
      [INFO] [fused_optimizer.py:316:_update_scale] Reducing dynamic loss scale from 1 to 1          (DeepSpeed)

  MindYOLO's and mindcv's trainers (``mindyolo/utils/trainer_factory.py``, ``train_step``) drop the step, or with
  ``overflow_still_update`` apply its update all the same (``overflow, still update``: non-finite gradients went
  into the weights, which the rules report at once); their older train steps print ``overflow, still update.``
  and ``overflow, drop the step.``, mindone's loops ``Step 5/1000, overflow, skip.``.

  DeepSpeed's and apex's files (``deepspeed/runtime/fp16/loss_scaler.py``, ``fused_optimizer.py``,
  ``apex/amp/scaler.py``), fairseq's ``fairseq/optim/dynamic_loss_scaler.py`` / ``fp16_optimizer.py``,
  Colossal-AI's ``zero/sharded_optim/sharded_optim_v2.py``, ``zero/low_level/low_level_optim.py`` and
  ``zero/gemini/gemini_optimizer.py``; guided-diffusion's ``fp16_util.py`` (and improved-diffusion's ``train_util.py``,
  copied by many diffusion trainers), whose scale is logged as its base-2 logarithm, lowered by 1 on an overflow.

* A trainer's own count of steps that overflowed in a row, GPT-NeoX's ``OverflowMonitor``
  (``megatron/utils.py``; the run exits): that many overflowed steps after the last one seen, a record each
  (:meth:`~.base.Parser.overflowed_in_a_row`), which the rules judge as any overflowed steps::

      Exception: Skipped 50 iterations in a row due to Overflow - Exiting training.

* The scaler giving up, a ``loss_scale_collapse`` report::

      Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.   (DeepSpeed)
      FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. ...     (fairseq)
      WARNING [train.py:1047] (7/8) Grad scale is small: 3.0517578125e-05    (icefall: its scaler under 0.01)

* Non-finite tensors seen by MindSpore's ``SummaryCollector`` (``mindspore/train/summary/_summary_adapter.py``),
  a ``nan_inf`` report at the step being logged (weights or gradients no longer finite)::

      [WARNING] ME(3613:...):2024-03-07-06:39:44.569.244 [mindspore/train/summary/_summary_adapter.py:304] There are no valid values in the ndarray(size=40960, shape=(1, 640, 64))

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

* A node of a MindSpore cluster that stopped answering, as ``stall`` reports at the last step done (at the
  node's rank when its id is one; the scheduler, ``meta_server_node.cc``, marks a node timed out when its
  heartbeat is older than the node timeout; msrun, ``mindspore/parallel/cluster/process_entity/_api.py``, names
  them after a worker failed, an empty list being no timeout; a worker hears of them in the heartbeat's answer,
  ``compute_graph_node.cc``)::

      [ERROR] ME(162078:281473590168608,MainProcess):2025-03-10-09:40:38.722.000 [mindspore/parallel/cluster/process_entity/_api.py:431] Time out nodes are ['3']
      The node: 3 is timed out. It may exit with exception, please check this node's log.
      The total number of timed out node is 1. Timed out node list is: [3], worker 3 is the first one timed out, please check its log.
      The state of the cluster is error, total nodes num: 8, abnormal nodes num: 1

* Hangs seen by a watchdog or the device runtime, as ``stall`` reports at the last step done (value: seconds
  waited, when printed):

  - PyTorch's process group (``ProcessGroupNCCL.cpp``; torch_npu's ``ProcessGroupHCCL`` alike) taking the
    process down after a collective failed or timed out (a collective that stopped, whichever it was)::

      [rank6]:[E624 04:14:29.224103812 ProcessGroupNCCL.cpp:684] [Rank 6] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, ...

  - Horovod's stall inspector (``horovod/common/stall_inspector.cc``): some ranks submitted a collective's
    tensors and wait for the others (a deadlock when it lasts)::

      [1,0]<stderr>:[2019-10-09 05:33:38.249493: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate that ...

  - PyTorch's NCCL heartbeat monitor (``ProcessGroupNCCL.cpp``, ``heartbeatMonitor``): the watchdog itself
    made no progress, a hang inside an NCCL/CUDA call::

      [rank2]:[E704 13:48:58.260494728 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives. ...

  - The Ascend runtime (CANN, through torch_npu or MindSpore): a device or stream synchronize that timed out
    (``rt*Synchronize* execute failed, reason=[.. timeout]``: ``EE1002`` stream sync timeout, ``EH9999``
    task or fftsplus timeout), or a device task that timed out (``.. timeout occurred during task execution``,
    ``EI9999``/``EE9999``, with the timeout in seconds)::

      EE1002: 2024-09-26-16:06:40.565.510 Stream synchronize timeout. rtDeviceSynchronize execute failed, reason=[stream sync timeout]
              rtDeviceSynchronize execute failed, reason=[task timeout][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]
      EI9999: 2024-07-03-11:28:40.419.527  The error from device(chipId:0, dieId:0), serial number is 1, hccl fftsplus task timeout occurred during task execution, stream_id:4, sq_id:4, task_id:5, stuck notify num:7, timeout:1836.[FUNC:...]

* Ascend's silent-data-corruption check (CANN ``silent_check_v3.cc``, MindSpore and torch_npu with
  ``NPU_ASD_ENABLE``): a checked feature value (a gradient's norm) that is not finite, a ``nan_inf`` report
  at the step the line names (a finite value over the thresholds is not reported)::

      [ERROR] AICPU(26533,aicpu_scheduler):2025-02-25-18:40:56.176.403 [silent_check_v3.cc:250][ComputeL1Error][tid:26552]SilentCheckV3 ComputeL1Error:val = [nan], max = [nan], avg=[1.128970e-09], step=[5], c_thresh_l1 = [1.000000e+06], ...

* MindData's slowness warning (MindSpore ``data_queue_op.cc`` / ``device_queue_op.cc`` ``DetectPerBatchTime``,
  ``generator_op.cc``): a batch (or a generator's row) took more than 25 s, a ``throughput_drop`` report at
  the last step done (value: the seconds), which the runner publishes when the step times show it: after a
  timed step, when the next timed step took longer (a batch is timed from the batch before it, across the
  pause between two epochs: an evaluation or a checkpoint save makes the next epoch's first batch warn too);
  before any timed step, when the first took over ``excursion_ratio`` times the second (a start-up)::

      [WARNING] MD(2637547,7f5fbdffb700,python):2023-06-01-09:14:29.052.845 [mindspore/ccsrc/minddata/dataset/engine/datasetops/data_queue_op.cc:809] DetectPerBatchTime] Bad performance attention, it takes more than 25 seconds to fetch a batch of data from dataset pipeline, which might result `GetNext` timeout problem. ...

* PaddlePaddle's AMP step in PaddleNLP's ``Trainer`` (``paddlenlp/trainer/trainer.py``, ``optimizer_was_run``
  False after ``scaler.step``): the step found an Inf/NaN gradient, its update was skipped and the scale fell
  (an overflow marking its step, like DeepSpeed's, with the scale it ran with)::

      [2023-11-28 14:31:29,583] [ WARNING] - optimizer not run, scale_before: 0.25, scale_after: 0.125

* A trainer's own check of its loss finding it not finite, a ``nan_inf`` report at the last step done:
  TensorFlow's ``NanTensorHook`` (``basic_session_run_hooks.py``, raising ``NanLossDuringTrainingError``),
  PyTorch's anomaly detection (``torch.autograd.set_detect_anomaly``, Lightning's ``detect_anomaly``)::

      ERROR:tensorflow:Model diverged with loss = NaN.
      tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN loss during training.
      RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.

  Megatron-core's check before the data-parallel reduction (``megatron/core/distributed/param_and_grad_buffer.py``,
  ``start_grad_sync``), as its ``AssertionError`` says it or, when the excerpt ends before the message, as the
  traceback shows the failing statement (any trainer's ``assert`` of a ``isnan(``, ``isinf(`` or ``isfinite(`` check)::

      AssertionError: Rank 0: found NaN in local grad norm in backward pass before data-parallel communication collective. ..
          assert not norm.isnan(), (

  A loop's own check of its gradients, saying so in words (``NaN``/``Inf`` detected or found in the gradients,
  either order), whether it stops or skips the update (a loss scaler's skip says ``overflow``: above), and a loop's
  own check of its loss, ``NaN detected``, ``NaN loss detected`` or ``NaN detected in the loss`` (not ``No NaN
  detected``, nor ``NaN detected in the input data``: a data check; a line that names its value's finite number,
  ``detected nan/inf/spiky gradient (norm=2.18)``, or TensorBoard's ``NaN or Inf found in input tensor``, a logged
  value, is none)::

      WARNING - NaN detected in gradients of shared.weight. Skipping update.
      NaN detected

  (Keras' ``TerminateOnNaN``, ``Batch 38: Invalid loss, terminating training``, names its batch: the text reader
  reads it as that step's ``nan_inf``.) A check that names its iteration is a ``nan_inf`` at that iteration:
  detectron2's ``SimpleTrainer._detect_anomaly`` (``detectron2/engine/train_loop.py``; the losses it found follow
  on the next line, ``loss_dict = {..}``: the text reader reads them as the report's) and Megatron-core's rerun
  state machine (``megatron/core/rerun_state_machine.py``, ``validate_result``: a NaN or Inf loss or grad norm;
  ``iteration -1`` when it was not told the iteration: after the last step done)::

      FloatingPointError: Loss became infinite or NaN at iteration=2137!
      RuntimeError: Rank 55, node g21u01, device 7, iteration 1: Unexpected result nan (message='found NaN in local grad norm ..')
      ERROR:megatron.core.rerun_state_machine:Unexpected result nan on rank 3 at iteration #3 invocation #2 (message='..')

* The process crashing, a ``trainer_crash`` report after the last step done (published at the next record's
  step, or at the end; none when a timeout, a ``stall`` above, is reported at its step: the crash is the
  timeout's end, the CANN code line before or after its ``[task timeout]`` line its error block): an Ascend CANN error code (the
  documented shape ``E`` + a module character + 4 digits and a colon, CANN ``ReportPredefinedErrMsg``: level
  ``E`` error, ``W`` warning, ``I`` info; only errors are read, after the HCCL timeouts above), a fatal signal
  (the shell's ``Segmentation fault (core dumped)``, its job status ``Killed`` (SIGKILL: the OOM killer) or
  ``Aborted`` alone or after ``line N: PID``, Python's ``Fatal Python error: ..``, OpenMPI's handler
  ``*** Process received signal ***`` / ``Failing at address: ..``, ``SIGSEGV``/``SIGBUS``/``SIGABRT``), or msrun
  telling that a worker or the scheduler exited with an exception (``_api.py``)::

      EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process. Reason: Maybe the last training process is running.
      EZ9999: Inner Error!
      [notebook-2a7f..:3436928] Failing at address: 0xb8
      Fatal Python error: Segmentation fault
      [WARNING] ME(162078:..,MainProcess):2025-03-10-09:40:12.444.000 [mindspore/parallel/cluster/process_entity/_api.py:318] There's worker exits with exception, kill all other workers.
      [ERROR] ME(130371:..,MainProcess):2024-12-26-14:22:26.839.923 [mindspore/parallel/cluster/process_entity/_api.py:268] Worker process 130673 exit with exception.

* The log ending in a Python traceback (:func:`traceback`): the exception the process raised, after the last
  step done, when no record and no other report came after it (training that goes on after a printed traceback
  caught it; a timeout or a NaN check reported just before is the exception's cause). Not an interrupt or an
  exit (``KeyboardInterrupt``, ``SystemExit``: the user's or the program's own end). Published at the end as a
  ``trainer_crash``, the live callback's event for an exception that ended ``Model.train``::

      Traceback (most recent call last):
        File "train.py", line 52, in <module>
          model.train(epochs, dataset, callbacks=callbacks)
      RuntimeError: Call aclnnMatmul failed, detail:EZ1001: ..

* This monitor's own event line (:class:`~training_monitor.sinks.LoggedEvents`, on stderr), a report of its
  rule at the step and onset it names, asking for the actions the line lists (``-> alert``: no rollback, as the
  live monitor decided: an excursion in a run's first steps), so the console log of a monitored run shows the events the callback
  raised (a rolled-back step's ``LossMonitor`` line is not printed when its loss is not finite); not in a log
  found beside the monitor's
  event log, which holds the same events (:attr:`.sources.Source.own_events`)::

      2026-12-03 20:17:03.531 | ERROR    | training_monitor.sinks:on_event:77 - rank 0 nan_inf at step 151 (onset 151): loss is nan at step 151 -> alert, rollback

  at the trainer's step when the line names it (``(onset 194; trainer step 220)``: after a rollback the trainer
  counts on, and its step lines with it). Its lines of what it did, ``rank 0: rolled back from step 161 to
  healthy checkpoint at step 125 (..)`` and ``stopping the run: ..; anomaly at step 65``, are no step (``rollback
  or stop record``): the steps after a rollback go back on their own. Its line at the end of a training call,
  ``rank 0: training ended at step 393 (trainer step 280): 2 event(s) (loss_spike x2), ..``, is a summary.

The same message repeated for the same step and rank (each rank and each pending collective prints one,
SummaryCollector one per tensor) is reported once.
"""
from __future__ import annotations

import math
import re

from .base import ACTION, MERGED, REPEATED, SUMMARY, Report
from .eventlog import spared

CRASH = "trainer_crash"


def _float(text: str | None) -> float | None:
    try:
        return float(text.rstrip(".")) if text else None
    except ValueError:
        return None

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
# (attempted scale, new scale) groups: DeepSpeed's two shapes, apex, fairseq, MindSpore's model suites (the step
# dropped, or its update applied all the same: "still update"), Colossal-AI's two
_OVERFLOW = re.compile(
    r"(?:OVERFLOW! Rank \d+ Skipping step|overflow! Skipping step|Overflow detected\. Skipping step)"
    r"\.?(?: Attempted loss scale: " + _NUM + r"(?:, reducing to " + _NUM + r")?)?"
    r"|Gradient overflow\.\s+Skipping step(?:, loss scaler \d+ reducing loss scale to " + _NUM + r")?"
    r"|overflow detected,(?: ignoring gradient,)? setting loss scale to:? " + _NUM +
    r"|overflow, (?:still update|drop (?:the )?step|skip)\b(?:, loss scale adjust to " + _NUM + r")?" +
    r"|found inf during \w+ step|Found overflow\. Skip step", re.IGNORECASE)
_ITERATION = re.compile(r"Grad overflow on iteration:? (\d+)")
# PaddlePaddle's AMP scaler: (scale run with, the scale it falls to as base and factor)
_FOUND_INF = re.compile(r"Found inf or nan, current scale is: " + _NUM + r", decrease to: " + _NUM + r"\*" + _NUM)
_LG_SCALE = re.compile(r"Found NaN, decreased lg_loss_scale to " + _NUM)  # (log2 of the scale it falls to)
_IN_A_ROW = re.compile(r"Skipped (\d+) iterations in a row due to Overflow")
# the scaler's own line after an overflow (apex on NPU, DeepSpeed): (scale run with, scale fallen to)
_SCALED = re.compile(r"reducing (?:dynamic )?loss scale (?:from " + _NUM + r" )?to " + _NUM, re.IGNORECASE)
_MIN_SCALE = re.compile(r"Minimum loss scale reached \(" + _NUM + r"\)|already at minimum")
_SMALL_SCALE = re.compile(r"[Gg]rad[ _]scale is (?:too )?small(?:, exiting)?: " + _NUM)  # icefall's GradScaler check
_WATCHDOG = re.compile(r"(?:Rank (\d+)\] )?Watchdog caught collective operation timeout: (\w+)\((.*?)\) ran for "
                       r"(\d+) milliseconds")
_WATCHDOG_RANK = re.compile(r"Rank (\d+)\] Watchdog caught")
_OP = re.compile(r"OpType=(\w+)")
_HCCL = re.compile(r"\b(EI0002|EI0006)\b")
_HCCL_RANK = re.compile(r"rank(?:Id)?\[(\d+)\]")
_SOCKET_WAIT = re.compile(r"wait socket establish timeout.*?rank\[(\d+)\](?: timeout\[(\d+) ?s\])?")
_HCCL_WHAT = {"EI0002": "a collective's Notify wait timed out (EI0002, HCCL_EXEC_TIMEOUT)",
              "EI0006": "building the connection timed out (EI0006, HCCL_CONNECT_TIMEOUT)"}

# hangs: PyTorch's heartbeat monitor; the Ascend runtime's synchronize / task timeouts
_STUCK = re.compile(r"(ProcessGroup\w+)'s watchdog got stuck for (\d+) seconds")
_RT_SYNC = re.compile(r"(rt\w*Synchroni[sz]e\w*) execute failed, reason=\[([^\]]*timeout)\]")
_RT_TASK = re.compile(r"([\w ]*?timeout) occurred during task execution(?:.*?\btimeout[:=] ?(\d+))?")
_RANK = re.compile(r"Rank (\d+)\]")
# this monitor's own lines of what it did (callbacks.TrainingMonitor: a rollback, a stop)
_OWN_ACTION = re.compile(r"\brank \d+: rolled back from step -?\d+ to |\bstopping the run: ")
# ... and its line at the end of a training call (``TrainingMonitor._summary``): totals, no step
_OWN_END = re.compile(r"\brank \d+: training ended at step -?\d+\b")
# this monitor's own event line (sinks.LoggedEvents): rank, rule, step, onset, the trainer's step, message, actions
_OWN = re.compile(r"\brank (\d+) ([a-z][a-z_]*) at step (-?\d+) \(onset (-?\d+)(?:; trainer step (-?\d+))?\): (.*) "
                  r"-> ((?:[a-z_]+(?: off)?(?:, )?)*)\s*$")
_SILENT = re.compile(r"SilentCheckV\d+ ComputeL1Error: ?val = \[([-+]?(?:nan|inf))\].*?\bstep=\[(\d+)\]",
                     re.IGNORECASE)
_SLOW_DATA = re.compile(r"Bad performance attention, it takes more than (\d+) seconds to ([^,]+)")
# PaddleNLP's skipped AMP step: (scale run with, scale fallen to)
_NOT_RUN = re.compile(r"optimizer not run, scale_before: " + _NUM + r", scale_after: " + _NUM)
# a trainer's own non-finite loss check: TensorFlow's NanTensorHook, PyTorch's anomaly detection
_NONFINITE = re.compile(r"Model diverged with loss = (NaN|Inf)|NaN loss during training"
                        r"|Function '(\w+)' returned (nan|inf) values in its"
                        r"|found (?:NaN|Inf) in local grad norm|^\s*assert\b.*\bis(?:nan|inf|finite)\("
                        r"|(Non-finite norm encountered in torch\.nn\.utils\.clip_grad_norm_"
                        r"|for gradients from `parameters` is non-finite)"
                        r"|((?:(?:NaN|Inf)s? (?:detected|found)|(?:[Dd]etected|[Ff]ound) (?:NaN|Inf)s?)"
                        r" in (?:the )?grad(?:ient)?s?\b)"
                        r"|((?<![Nn]o )\b(?:NaN|nan|Inf|inf)(?: loss)? detected\b(?! in (?!(?:the )?loss\b)))")
# ... naming the iteration whose loss or gradients were not finite: detectron2's ``_detect_anomaly``, Megatron-core's
# rerun state machine (the RuntimeError it raises, and its log line; iteration -1 when it was not told the iteration)
_NONFINITE_AT = re.compile(r"Loss became infinite or NaN at iteration=(-?\d+)"
                           r"|iteration (-?\d+): Unexpected result -?(?:nan|inf)\b"
                           r"|Unexpected result -?(?:nan|inf) on rank \d+ at iteration #(-?\d+)")
# msrun: a worker or the scheduler exited with an exception
_EXITED = r"(?:Worker|Scheduler) process \d+ exit with exception|worker exits with exception"
# a MindSpore cluster's timed-out nodes: msrun's list, the scheduler's node and count, a worker's cluster state
_FAILED_OR_TIMED_OUT = re.compile(r"Some (NCCL|HCCL) operations have failed or timed out")
_HOROVOD = re.compile(r"waiting for remainder of ranks for more than (\d+) seconds")
_TIMED_OUT = re.compile(r"Time out nodes are \[([^\]]*\w[^\]]*)\]|The node: (\S+) is timed out"
                        r"|total number of timed out node is [1-9]\d*(?:\. Timed out node list is: "
                        r"(?:\[const vector\])?[\[{]([^\]}]*)[\]}])?"  # ([5]; MindSpore 2.9: [const vector]{1})
                        r"|state of the cluster is error, total nodes num: \d+, abnormal nodes num: [1-9]")
# a crash: a CANN error code (E, a module character, 4 digits: code, text), or a fatal signal
_CRASH = re.compile(r"(?<![\w-])(E[0-9A-Z]\d{4}): (?:\[PID: \d+\] )?(?:\d{4}-\d\d-\d\d-[\d:.]+ )?(.*)"
                    r"|Segmentation fault|Fatal Python error: [\w ]+|Process received signal|Failing at address"
                    r"|core dumped|\bSIG(?:SEGV|BUS|ABRT|ILL|FPE)\b|Bus error"
                    r"|\bline \d+: +\d+ +(?:Killed|Aborted)\b|^(?:Killed|Aborted)(?: \(core dumped\))?\s*$|" + _EXITED)


MARKS = ("kipping step", "verflow", "found inf", "Found inf or nan", "educing loss scale", "educing dynamic loss scale",
         "already at minimum", "Minimum loss scale", "scale is small", "scale is too small", "no valid values", "Watchdog caught", "EI000",
         "socket establish timeout", "watchdog got stuck", "timeout]", "during task execution", "ComputeL1Error",
         "Bad performance", "optimizer not run", "Model diverged", "NaN loss during", "values in its",
         "infinite or NaN at iteration", "Unexpected result", "in local grad norm", " in grad", " in the grad",
         "NaN detected", "nan detected", "Inf detected", "inf detected", "loss detected", "Found NaN, decreased",
         "isnan(", "isinf(", "isfinite(",
         "Non-finite norm encountered", "` is non-finite",
         "imed out node", "Time out nodes", "is timed out", "abnormal nodes num", "of ranks for more than",
         "operations have failed or timed out", " (onset ", "rolled back from step", "stopping the run: ",
         "training ended at step")
_MENTIONED = re.compile("|".join(map(re.escape, MARKS)))
_FAILED = re.compile(r"E[0-9A-Z]\d{4}: |Segmentation fault|Fatal Python|Process received signal|Failing at address"
                     r"|core dumped|SIG(?:SEGV|BUS|ABRT|ILL|FPE)|Bus error|exits? with exception|Killed|Aborted")  # a crash's marks


# the last line of a Python traceback: the exception's (qualified) name at the line's start (a space before it: a
# launcher's prefix taken off), or after such a prefix (`[rank0]: `, `[default1]:`, Ray's `(RayTrainWorker pid=1) `),
# then its message or nothing; never indented further (a frame's code line, `    raise ValueError`)
_RAISED = re.compile(r"(?:^ ?|[\]:>|)] ?)((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault))"
                     r"(?:: ?(.*)|\s*$)")
_ENDS = frozenset(("KeyboardInterrupt", "SystemExit", "GeneratorExit"))  # an end the user or the program chose


TRACEBACK = "Traceback (most recent call last)"  # a Python traceback's first line


def traceback(line: str, parser) -> None:
    """Follow a Python traceback in lines ``parser`` skipped: its first line (``Traceback (most recent call
    last):``), then its exception line, whose crash report :attr:`~.base.Parser.raised` keeps with the last record
    (the log ending there: a ``trainer_crash``); none when a report came since that record."""
    if TRACEBACK in line:
        parser.traceback = True
        return
    m = _RAISED.search(line)
    if m is None:
        return
    parser.traceback = False
    if parser.reported is parser.last or m.group(1).rsplit(".", 1)[-1] in _ENDS:
        return
    done, said = parser.done, (m.group(2) or "").strip()[:300]
    parser.raised = (parser.last, Report(CRASH, done, None, f"trainer: the log ends in a traceback: the process "
                                         f"raised {m.group(1)} after step {done}" + (f": {said}" if said else ""),
                                         parser.rank))


def mentioned(line: str) -> bool:
    """True when ``line`` may hold one of these messages (a cheap test; :func:`match` reads it)."""
    return _MENTIONED.search(line) is not None or _FAILED.search(line) is not None


def match(line: str, parser):
    """The record or report ``line`` carries for ``parser`` (its state gives the step), or None. A crash is held
    (:meth:`~.base.Parser.hold`: published at the next record's step, or at the end) and dropped when a timeout
    of the same error block follows (the CANN code line before its ``[task timeout]`` line: a stall)."""
    item = _match(line, parser)
    if item.__class__ is Report and item.rule == "stall" and parser.held:
        parser.held = [r for r in parser.held if r.rule != CRASH]
    return item


def _match(line: str, parser):
    m = _OVERFLOW.search(line) if "verflow" in line or "kipping step" in line or "found inf" in line else None
    if m is None and "in a row" in line and (m := _IN_A_ROW.search(line)) is not None:
        return parser.overflowed_in_a_row(int(m.group(1)))
    if m is None and "Found inf or nan" in line and (m := _FOUND_INF.search(line)) is not None:
        return parser.overflowed(_float(m[1]), float(m[2]) * float(m[3]))
    if m is None and "Found NaN, decreased" in line and (m := _LG_SCALE.search(line)) is not None:
        new = 2.0 ** min(float(m[1]), 1000.0)
        return parser.overflowed(2 * new, new)
    if m is not None:
        numbers = [_float(g) for g in m.groups()]
        attempted, reduced = numbers[0], numbers[1]
        new = reduced if reduced is not None else next((x for x in numbers[2:] if x is not None), None)
        return parser.overflowed(attempted, new, applied="still update" in m.group(0).lower())
    if "Grad overflow on iteration" in line:
        m = _ITERATION.search(line)
        if m is not None:
            return parser.overflowed(None, None, int(m.group(1)))
    if "educing" in line:
        m = _SCALED.search(line)
        last = parser.last
        if m is not None and last is not None and last.overflow and last.loss_scale is None:
            last.loss_scale = _float(m.group(1) or m.group(2))  # the overflowed step's record gets its scale...
            if m.group(1) is not None:
                last.loss_scale_next = _float(m.group(2))  # ... and the next step's, when both are printed
            return MERGED
    if "inimum" in line:
        m = _MIN_SCALE.search(line)
        if m is not None and (m.group(1) is not None or "loss scale" in line.lower()):
            scale = _float(m.group(1)) if m.group(1) else parser.last.loss_scale if parser.last is not None else None
            return parser.once(Report("loss_scale_collapse", parser.done, scale,
                                      "trainer: loss scale already at its minimum, cannot decrease it (the run exits)",
                                      parser.rank))
    if "scale is " in line and (m := _SMALL_SCALE.search(line)) is not None:
        return parser.hold(Report("loss_scale_collapse", parser.done, _float(m.group(1)),
                                  f"trainer: the gradient (loss) scale is small: {m.group(1)}", parser.rank))
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
        return _stall(parser, seconds, what, rank)
    if "EI000" in line:
        m = _HCCL.search(line)
        if m is not None:
            r = _HCCL_RANK.search(line)
            return _stall(parser, None, f"HCCL {_HCCL_WHAT[m.group(1)]}", r and r.group(1))
    if "socket establish timeout" in line:
        m = _SOCKET_WAIT.search(line)
        if m is not None:
            return _stall(parser, float(m.group(2)) if m.group(2) else None, f"HCCL {_HCCL_WHAT['EI0006']}", m.group(1))
    if (m := _OWN_ACTION.search(line)) is not None:
        parser.action = line[m.start():].strip()
        return ACTION
    if _OWN_END.search(line) is not None:
        return SUMMARY
    if " (onset " in line and parser.own_events and (m := _OWN.search(line)) is not None:
        shift = int(m[5]) - int(m[3]) if m[5] else 0  # at the trainer's step, as the log's step lines count
        asked = [a.removesuffix(" off") for a in m[7].split(", ")]  # ('rollback off': asked, not done)
        msg = f"monitor (its step {m[3]}): {m[6]}" if shift else f"monitor: {m[6]}"  # (its message: its steps)
        return parser.once(Report(m[2], int(m[3]) + shift, None, msg, int(m[1]), int(m[4]) + shift, "monitor",
                                  spared=spared(asked)))
    return _hang(line, parser)


def _stall(parser, seconds: float | None, what: str, rank: str | None = None) -> Report | str:
    """A ``stall`` report of ``what`` (``seconds`` waited, when printed) after the last step done, at ``rank`` (a
    rank the message names, as printed) or the parser's."""
    at = int(rank) if rank else parser.rank
    done = parser.done_by(at)
    return parser.once(Report("stall", done, seconds, f"trainer: {what} after step {done}", at))


def _hang(line: str, parser):
    """A hang, a non-finite silent-check value or a slow data pipeline in ``line`` (see the module), or None."""
    if "operations have failed or timed out" in line:
        m = _FAILED_OR_TIMED_OUT.search(line)
        if m is not None:
            r = _RANK.search(line)
            return _stall(parser, None, f"{m.group(1)} collectives failed or timed out (the process is taken down)",
                          r and r.group(1))
    if "of ranks for more than" in line:
        m = _HOROVOD.search(line)
        if m is not None:
            return _stall(parser, float(m.group(1)), f"tensors of a collective waited more than {m.group(1)} s for "
                                                     "the other ranks (Horovod's stall inspector)")
    if "watchdog got stuck" in line:
        m = _STUCK.search(line)
        if m is not None:
            r = _RANK.search(line)
            return _stall(parser, float(m.group(2)), f"{m.group(1)}'s watchdog made no progress for {m.group(2)} s "
                                                     "(a hang inside an NCCL/CUDA call)", r and r.group(1))
    if "timeout]" in line or "during task execution" in line:
        m = _RT_SYNC.search(line)
        what = f"{m.group(1)} failed: {m.group(2)}" if m else None
        if m is None:
            m = _RT_TASK.search(line)
            what = f"{m.group(1).strip()} during a device task" if m else None
        if m is not None:
            seconds = _float(m.group(2)) if m.re is _RT_TASK else None
            return _stall(parser, seconds, f"Ascend runtime: {what}")
    if "ComputeL1Error" in line:
        m = _SILENT.search(line)
        if m is not None:
            step = int(m.group(2))
            return parser.once(Report("nan_inf", step, math.nan,
                                      f"trainer: Ascend silent check: a checked feature value is {m.group(1)} at step "
                                      f"{step}", parser.rank))
    if "imed out" in line or "Time out nodes" in line or "abnormal nodes num" in line:
        m = _TIMED_OUT.search(line)
        if m is not None:
            nodes = re.findall(r"\w+", m.group(1) or m.group(2) or m.group(3) or "")
            what = f"node(s) {', '.join(nodes)} timed out" if nodes else "a node timed out"
            return _stall(parser, None, f"MindSpore cluster: {what} (no heartbeat)",
                          nodes[0] if nodes and nodes[0].isdigit() else None)
    if "Bad performance" in line:
        m = _SLOW_DATA.search(line)
        if m is not None:
            return parser.once(Report("throughput_drop", parser.done, float(m.group(1)),
                                      f"trainer: MindData: more than {m.group(1)} s to {m.group(2).strip()} (the data "
                                      f"pipeline is slower than the steps) after step {parser.done}", parser.rank))
    return _failure(line, parser)


def _failure(line: str, parser):
    """A skipped AMP step, a trainer's non-finite loss check or a crash in ``line`` (see the module), or None."""
    if "optimizer not run" in line:
        m = _NOT_RUN.search(line)
        if m is not None:
            return parser.overflowed(_float(m.group(1)), _float(m.group(2)))
    m = _NONFINITE_AT.search(line) if "infinite or NaN at" in line or "Unexpected result" in line else None
    if m is not None:
        named = int(next(g for g in m.groups() if g is not None))
        step = named if named >= 0 else parser.done  # (-1: the check was not told its iteration)
        return parser.once(Report("nan_inf", step, math.nan, f"trainer: the loss or its gradients are not finite at "
                                  f"iteration {step} (its NaN check stopped training)", parser.rank))
    m = _NONFINITE.search(line) if ("Model diverged" in line or "NaN loss" in line or "values in its" in line
                                    or "local grad norm" in line or "assert" in line or "on-finite" in line
                                    or " in grad" in line or " in the grad" in line or "detected" in line) else None
    if m is not None:
        what = (f"{m.group(2)} returned {m.group(3)} gradients (anomaly detection)" if m.group(2) else
                "the gradients' norm is not finite (PyTorch's clip_grad_norm_)" if m.group(4) else
                "the gradients are not finite (its own check)" if m.group(5) else
                "a value is not finite (its own check)" if m.group(6) else
                "the loss or its gradients are not finite (its NaN check stopped training)")
        return parser.hold(Report("nan_inf", parser.done, math.nan, f"trainer: {what} after step {parser.done}",
                                  parser.rank))
    m = _CRASH.search(line) if _FAILED.search(line) is not None else None
    if m is None:
        return None
    what = (f"Ascend CANN error {m.group(1)}: {m.group(2).strip()[:120]}" if m.group(1) else
            f"the process crashed: {line[m.start():].strip()[:120]}")
    if any(r.rule == CRASH and r.rank == parser.rank for r in parser.held) or parser.told("stall", parser.rank):
        return REPEATED  # a crash told already, or the end of a timeout (a stall) at this step
    parser.held.append(Report(CRASH, parser.done, None, f"trainer: {what} after step {parser.done}", parser.rank))
    return MERGED
