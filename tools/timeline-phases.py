#!/usr/bin/env python3
"""Where the time of each collective goes, from a timeline (HOROVOD_TIMELINE).

    tools/timeline-phases.py TIMELINE.json [--skip N] [--csv]

Reads rank 0's Chrome-trace timeline (docs/timeline.md) and prints, for every
activity name (ALLREDUCE, NEGOTIATE_ALLREDUCE, QUEUE, WAIT_FOR_DATA,
CUDA_IPC_ONESHOT_ALLREDUCE, ...), how many times it ran and its duration's
median, 90th percentile and mean in microseconds. Activities nest (a
collective holds its steps), so a step's time is part of its collective's.
--skip N leaves out each tensor's first N collectives (warm-up). Exit status 0;
2 for a file that is not a timeline.
"""

import argparse
import json
import sys


def durations(events, skip=0):
    """{activity: [microseconds, ...]} from a timeline's B/E events.

    Each tensor is a row (its pid); a row's activities nest, so every E closes
    the row's innermost open activity. A tensor's first `skip` collectives
    (its outermost activities) and what they hold are left out."""
    open_by_row = {}
    outer_seen = {}
    out = {}
    # In the file's order: a row's events are written in the order they
    # happened, and an activity that ends as the next begins shares its
    # timestamp with it.
    for e in events:
        if e.get("ph") not in ("B", "E"):
            continue
        row = e.get("pid")
        stack = open_by_row.setdefault(row, [])
        if e["ph"] == "B":
            if not stack:
                outer_seen[row] = outer_seen.get(row, 0) + 1
            stack.append((e["name"], e["ts"], outer_seen[row] > skip))
        elif stack:
            name, start, counted = stack.pop()
            if counted:
                out.setdefault(name, []).append(e["ts"] - start)
    return out


def percentile(values, q):
    """The value at or below which a fraction q of `values` lies (nearest rank)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 1))
    return ordered[int(rank) - 1]


def summary(by_activity):
    """Rows of (activity, count, p50, p90, mean), the most frequent first."""
    rows = []
    for name, values in by_activity.items():
        rows.append((name, len(values), percentile(values, 0.5), percentile(values, 0.9),
                     sum(values) / len(values)))
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline")
    parser.add_argument("--skip", type=int, default=0,
                        help="leave out each tensor's first N collectives (warm-up)")
    parser.add_argument("--csv", action="store_true", help="comma-separated rows")
    args = parser.parse_args(argv)
    try:
        with open(args.timeline) as f:
            events = json.load(f)
        if not isinstance(events, list):
            raise ValueError("not a list of events")
    except (OSError, ValueError) as e:
        print(f"timeline-phases: {args.timeline}: {e}", file=sys.stderr)
        return 2
    rows = summary(durations(events, args.skip))
    if args.csv:
        print("activity,count,p50_us,p90_us,mean_us")
        for name, n, p50, p90, mean in rows:
            print(f"{name},{n},{p50:.1f},{p90:.1f},{mean:.1f}")
        return 0
    print(f"{'activity':<30} {'count':>7} {'p50 us':>10} {'p90 us':>10} {'mean us':>10}")
    for name, n, p50, p90, mean in rows:
        print(f"{name:<30} {n:>7} {p50:>10.1f} {p90:>10.1f} {mean:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
