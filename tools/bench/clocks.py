"""Summarises GPU clock logs written beside benchmark processes (`nvidia-smi
--query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu[,...] --format=csv -lms 50`, as
`device_run.sh`'s cold part writes them): per file, the SM clock and utilisation in windows from
the first sample, and how long the SM clock took to reach 90 % of the highest it showed. Whether
the clocks ramp during a cold first epoch is what separates the GPU's ramp from host costs
(issue #32's cold start).

    python3 tools/bench/clocks.py [--window MS] [--span MS] FILE.csv...
"""

import argparse
import re
import sys
from datetime import datetime


def samples(path):
    """(seconds since the first sample, SM MHz, utilisation %) per row of an nvidia-smi CSV."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline().lower().split(",")
        cols = [h.strip() for h in header]

        def column(prefix):
            return next((i for i, c in enumerate(cols) if c.startswith(prefix)), None)

        at, sm, util = column("timestamp"), column("clocks.current.sm"), column("utilization.gpu")
        if sm is None:
            sm = column("clocks.sm")
        if at is None or sm is None:
            raise ValueError(f"{path}: no timestamp or SM clock column in {cols}")
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) <= max(at, sm):
                continue
            try:
                when = datetime.strptime(parts[at], "%Y/%m/%d %H:%M:%S.%f")
            except ValueError:
                continue
            number = lambda s: float(m.group()) if (m := re.search(r"[\d.]+", s)) else float("nan")
            rows.append((when, number(parts[sm]), number(parts[util]) if util is not None else float("nan")))
    if not rows:
        return []
    first = rows[0][0]
    return [((w - first).total_seconds(), s, u) for w, s, u in rows]


def summary(path, window_ms, span_ms):
    rows = samples(path)
    if not rows:
        return f"{path}: no samples"
    peak = max(s for _, s, _ in rows)
    ramp = next((t for t, s, _ in rows if s >= 0.9 * peak), float("nan"))
    lines = [f"{path}: {len(rows)} samples over {rows[-1][0]:.2f} s, SM clock {rows[0][1]:.0f} MHz at first, "
             f"peak {peak:.0f} MHz, 90 % of it after {ramp * 1e3:.0f} ms"]
    windows = []
    for start in range(0, span_ms, window_ms):
        inside = [(s, u) for t, s, u in rows if start <= t * 1e3 < start + window_ms]
        if inside:
            sm = sum(s for s, _ in inside) / len(inside)
            util = sum(u for _, u in inside) / len(inside)
            windows.append(f"{start}-{start + window_ms} ms: {sm:.0f} MHz {util:.0f} %")
    lines.extend("    " + w for w in windows)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=250, help="window length in ms")
    parser.add_argument("--span", type=int, default=3000, help="ms from the first sample to summarise")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    if args.window <= 0 or args.span <= 0:
        sys.exit("--window and --span must be positive")
    for path in args.files:
        try:
            print(summary(path, args.window, args.span))
        except (OSError, ValueError) as e:
            print(f"{path}: {e}")


if __name__ == "__main__":
    main()
