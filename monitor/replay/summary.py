"""What ``monitor replay`` prints: one JSON object, or a text summary per log."""
from __future__ import annotations

from collections import Counter


def as_dict(results) -> dict:
    """All logs together (``format`` is a list when there are several) and each in ``files``."""
    skipped = Counter()
    for r in results:
        skipped.update(r.skipped)
    return {"format": results[0].format if len(results) == 1 else [r.format for r in results],
            "records": sum(r.records for r in results),
            "skipped_lines": sum(r.skipped_lines for r in results),
            "anomalies": [{**e, "file": r.path} for r in results for e in r.to_dict()["anomalies"]],
            "files": [r.to_dict() for r in results],
            "reports": sum(r.reports for r in results),
            "merged_lines": sum(r.merged_lines for r in results),
            "lines": sum(r.lines for r in results),
            "skipped": dict(skipped.most_common())}


def as_text(results) -> str:
    """Per log: format, ranks, counts, skipped lines by reason; then each anomaly with its onset and step."""
    out = []
    for r in results:
        if r.error:
            out.append(f"{r.error} (not replayed)")
            continue
        ranks = sorted(r.ranks)
        who = f" (rank {ranks[0]})" if len(ranks) == 1 else f" (ranks {', '.join(map(str, ranks))})" if ranks else ""
        why = ", ".join(f"{reason} {n}" for reason, n in r.skipped.most_common())
        merged = f", {r.merged_lines} lines merged into their step" if r.merged_lines else ""
        more = f" (and {r.events_dropped} more not kept)" if r.events_dropped else ""
        out.append(f"{r.path}: {r.format}{who}, {r.records} records, {r.reports} trainer reports{merged}, "
                   f"{r.skipped_lines} lines skipped{f' ({why})' if why else ''}, {len(r.events)} anomalies{more}")
        for e in r.events:
            rank = f"rank {e.rank:<3} " if len(ranks) > 1 else ""
            out.append(f"  step {e.step:>7} onset {e.onset_step:>7}  {rank}{e.severity:<8} {e.rule:<19} {e.message}")
    return "\n".join(out)
