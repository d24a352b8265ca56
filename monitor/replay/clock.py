"""The time a log line was written, read from its prefix (the one place replay reads wall-clock times).

Prefixes read, within the first 64 characters of the line::

    2025-04-07 15:34:27,308 - [mindformers/core/callback/callback.py:529] - INFO - { Epoch:...   (MindFormers console)
    [INFO] 2025-04-07 15:34:27,308 [mindformers/core/callback/callback.py:529] print_output_info: ...  (its file)
    [2024-05-30 10:21:44] iteration      100/ ...                                        (Megatron-LM since 2024)
    [2023-04-12 10:53:24,519] [INFO] [logging.py:96:log_dist] [Rank 0] step=...            (DeepSpeed)
    [WARNING] ME(2134:281473,MainProcess):2025-04-07-15:34:27.308.123 [...]                 (MindSpore)

Logs print local time without a zone: it is read in this process's local time zone (set ``TZ`` to the zone
the training machine used, e.g. ``TZ=UTC``).
"""
from __future__ import annotations

import re
import time

_TIME = re.compile(r"(\d{4}-\d\d-\d\d)[ T-](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")
_last = (None, 0.0)  # the last (date, hour) converted and its Unix time: lines come in order


def line_time(line: str) -> float | None:
    """Unix time (seconds) of the date-time at the start of ``line``, or None when it has none."""
    m = _TIME.search(line, 0, 64)
    if m is None:
        return None
    date, hour, minute, second, frac = m.groups()
    global _last
    key, start = _last
    if key != (date, hour):
        y, mo, d = date.split("-")
        try:
            start = time.mktime((int(y), int(mo), int(d), int(hour), 0, 0, 0, 0, -1))
        except (OverflowError, ValueError):
            return None
        _last = ((date, hour), start)
    return start + int(minute) * 60 + int(second) + (float("0." + frac) if frac else 0.0)
