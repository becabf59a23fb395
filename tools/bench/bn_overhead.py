"""Issue #32: BatchNorm2d's cost in a small CNN's training step, rumus against PyTorch (CPU).

Runs rumus's `bench --only bn` and torch_bench.py's `--only bn` alternately ROUNDS times (rumus,
torch, rumus, torch, ...: a shared machine's load falls on both alike) and prints, per workload,
the median over the rounds of each run's median step time as ms per 100 steps, the spread (min
to max), and BatchNorm's overhead (with / without) for each framework.

    cargo build --release -p rumus-tools --bin bench
    /tmp/tv/bin/python tools/bench/bn_overhead.py [--rounds 5] [--threads 2]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROW = re.compile(r"^(cnn\S*(?: composed)?) train step b64\s+([0-9.]+)")


def rows(cmd, env=None):
    out = subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = ROW.match(line.strip())
        if m:
            found[m.group(1)] = float(m.group(2)) * 100.0  # ms per step -> ms per 100 steps
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads))
    bench = os.path.join(ROOT, "target", "release", "bench")
    torch_cmd = [sys.executable, "tools/bench/torch_bench.py", "--device", "cpu", "--threads", str(a.threads), "--only", "bn"]
    runs = {"rumus": [], "pytorch": []}
    for r in range(a.rounds):
        runs["rumus"].append(rows([bench, "--device", "cpu", "--only", "bn"], env))
        runs["pytorch"].append(rows(torch_cmd))
        print(f"round {r + 1}: rumus {runs['rumus'][-1]}  pytorch {runs['pytorch'][-1]}", flush=True)
    print(f"\nms per 100 training steps, batch 64, {a.threads} threads, {a.rounds} interleaved rounds")
    print(f"{'framework':<8} {'workload':<16} {'median':>9} {'min':>9} {'max':>9}")
    med = {}
    for fw, rs in runs.items():
        for name in rs[0]:
            vals = [r[name] for r in rs]
            med[(fw, name)] = statistics.median(vals)
            print(f"{fw:<8} {name:<16} {med[(fw, name)]:9.0f} {min(vals):9.0f} {max(vals):9.0f}")
    print()
    for fw, rs in runs.items():
        for name in rs[0]:
            if name != "cnn":
                ratios = [r[name] / r["cnn"] for r in rs]
                print(f"{fw:<8} {name} / cnn: median {statistics.median(ratios):.2f}x "
                      f"(rounds {min(ratios):.2f}x to {max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
