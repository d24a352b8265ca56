"""What ``monitor replay`` prints: one JSON object, or a text summary per log."""
from __future__ import annotations

from collections import Counter

# field -> (label, unit, scale) of the step-time / TPS / MFU lines
_STATS = {"step_time_s": ("step time", "s", 1.0), "tokens_per_second": ("TPS", "tokens/s", 1.0),
          "mfu": ("MFU", "%", 100.0)}


def as_dict(results) -> dict:
    """All logs together (``format`` is a list when there are several) and each in ``files``.

    The counts: ``records`` (the log's records read: ``steps`` + ``evaluations`` + ``merged_lines``), ``steps``
    (step records, what the rules judged), ``evaluations`` (evaluation records), ``merged_lines`` (lines merged into
    the step record before them), ``reports`` (trainer reports), ``skipped_lines`` (by reason in ``skipped``) and
    ``lines`` (all of them). Besides the counts and ``anomalies``: ``would_be_rollbacks`` (what the live rollback
    policy would have done: ``at_step``, ``onset_step``, ``to_step`` (None when the checkpoint interval is not
    known), ``before_step``, ``lr_multiplier``, ``rules``, ``rank``), ``would_stop`` (the would-be stops,
    ``at_step``, ``reason``, ``rank``; empty when the run would have gone on), ``rollbacks_without_checkpoint`` and
    ``live_actions`` (what the live monitor did, rollbacks and stops, as its lines in the log say: ``action``), each
    with ``file``; per file also ``stats`` (step time in s, TPS in tokens/s, MFU 0..1: ``median``, ``p5``,
    ``p95``, ``count``).
    """
    skipped: Counter = Counter()
    for r in results:
        skipped.update(r.skipped)
    files = [r.to_dict() for r in results]

    def each(key):
        return [{**x, "file": r.path} for r, d in zip(results, files) for x in d.get(key, ())]

    return {"format": results[0].format if len(results) == 1 else [r.format for r in results],
            "records": sum(r.records for r in results),
            "steps": sum(r.steps for r in results),
            "evaluations": sum(r.evaluations for r in results),
            "skipped_lines": sum(r.skipped_lines for r in results),
            "anomalies": each("anomalies"),
            "files": files,
            "reports": sum(r.reports for r in results),
            "merged_lines": sum(r.merged_lines for r in results),
            "lines": sum(r.lines for r in results),
            "skipped": dict(skipped.most_common()),
            "would_be_rollbacks": each("would_be_rollbacks"),
            "would_stop": each("would_stop"),
            "rollbacks_without_checkpoint": each("rollbacks_without_checkpoint"),
            "live_actions": [{"action": a, "file": r.path} for r in results for a in r.actions]}


def stats_lines(stats: dict) -> list[str]:
    """``step time  median 1.756 s  p5 1.752  p95 1.758  (5 records)`` for each field of ``Stats.to_dict()``."""
    out = []
    for name, (label, unit, scale) in _STATS.items():
        s = stats.get(name)
        if s:
            sampled = f", quantiles of {s['sampled']} evenly spaced" if s["sampled"] < s["count"] else ""
            out.append(f"{label:<10} median {s['median'] * scale:.4g} {unit}  p5 {s['p5'] * scale:.4g}  "
                       f"p95 {s['p95'] * scale:.4g}  ({s['count']} records{sampled})")
    return out


def rollback_lines(result) -> list[str]:
    """The would-be rollbacks and stops of one log, in words; then what the live monitor did, as its lines say."""
    many = len(result.ranks) > 1
    out = []
    factor = next((f"LR x{p.lr_factor:g} " for p in result.policies.values()), "")
    for rb in result.would_be_rollbacks():
        who = f" (rank {rb['rank']})" if many else ""
        to = (f"the checkpoint at step {rb['to_step']}" if rb["to_step"] is not None else
              f"the newest healthy checkpoint before step {rb['before_step']} (checkpoint interval not given)")
        lr = ("LR kept (a bad batch: its step ran on that checkpoint's own weights) " if rb.get("batch") else
              factor)
        out.append(f"would roll back at step {rb['at_step']} to {to}, {lr}(now x{rb['lr_multiplier']:g} of the "
                   f"schedule): {', '.join(rb['rules'])} from step {rb['onset_step']}{who}")
    for m in result.rollbacks_without_checkpoint():
        who = f" (rank {m['rank']})" if many else ""
        out.append(f"would not roll back at step {m['at_step']}: no healthy checkpoint before step "
                   f"{m['before_step']}{who}")
    for stop in result.would_stop():
        who = f" (rank {stop['rank']})" if many else ""
        out.append(f"would have stopped the run at step {stop['at_step']}: {stop['reason']}{who}")
    out.extend(f"the live monitor: {a}" for a in result.actions)
    return out


def as_text(results) -> str:
    """Per log: format, ranks, counts, skipped lines by reason; each anomaly with its onset and step; what the
    rollback policy would have done. Then, for the logs that give them, step time / TPS / MFU quantiles."""
    out = []
    for r in results:
        if r.error:
            out.append(f"{r.error} (not replayed)")
            continue
        ranks = sorted(r.ranks)
        who = f" (rank {ranks[0]})" if len(ranks) == 1 else f" (ranks {', '.join(map(str, ranks))})" if ranks else ""
        why = ", ".join(f"{reason} {n}" for reason, n in r.skipped.most_common())
        parts = [count(r.steps, "step")]
        if r.evaluations:
            parts.append(count(r.evaluations, "evaluation"))
        if r.merged_lines:
            parts.append(count(r.merged_lines, "line") + " merged into their step")
        if r.positional:
            parts.append(f"{r.positional} numbered by their place in the log, which names no step")
        more = f" (and {r.events_dropped} more not kept)" if r.events_dropped else ""
        out.append(f"{r.path}: {r.format}{who}, {count(r.records, 'record')} ({', '.join(parts)}), "
                   f"{count(r.reports, 'trainer report')}, {count(r.skipped_lines, 'line')} skipped"
                   f"{f' ({why})' if why else ''}, {count(len(r.events), 'anomaly', 'anomalies')}{more}")
        for e, again in excursions(r.events):
            rank = f"rank {e.rank:<3} " if len(ranks) > 1 else ""
            trainer = f" (trainer step {e.trainer_step})" if e.trainer_step is not None else ""
            out.append(f"  step {e.step:>7} onset {e.onset_step:>7}  {rank}{e.severity:<8} {e.rule:<19} {e.message}"
                       f"{trainer}")
            if again:
                out.append(f"    ... and at {count(len(again), 'more step')} of the same excursion, the last at step "
                           f"{again[-1].step} (each in --json)")
        out.extend(f"  {line}" for line in rollback_lines(r))
    perf = [(r.path, stats_lines(r.stats.to_dict())) for r in results if not r.error]
    if any(lines for _, lines in perf):
        out.append("step time, TPS, MFU (median, 5th and 95th percentile over each log's records):")
        for path, lines in perf:
            if lines:
                out.append(f"  {path}")
                out.extend(f"    {line}" for line in lines)
    return "\n".join(out)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 step``, ``2 steps`` (``plural``: when not the noun and ``s``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def excursions(events: list) -> list[tuple]:
    """``events`` as ``(first, repeats)``: an event, and the events right after it of the same rule, rank and
    onset, at later steps (a rule firing at every step of one excursion, ``nan_inf`` over a run of NaN steps),
    which the text summary and the HTML report name in one line."""
    out: list[tuple] = []
    for e in events:
        if out:
            first, again = out[-1]
            last = again[-1] if again else first
            if (e.rule, e.rank, e.onset_step) == (first.rule, first.rank, first.onset_step) and e.step > last.step:
                again.append(e)
                continue
        out.append((e, []))
    return out
