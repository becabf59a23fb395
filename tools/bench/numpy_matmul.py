"""numpy (OpenBLAS) twin of `cargo run --release -p rumus-tools --bin bench -- --only matmul`.

Times float32 matmul at 256/512/1024 with the same warm-up and median-of-repeats as the Rust
side, and prints which BLAS and how many threads ran it.
"""
import json
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info


def median_time(f, warmup, repeats):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def main():
    rng = np.random.default_rng(0)
    results = []
    for n in (256, 512, 1024):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        secs = median_time(lambda: a @ b, 2, 20)
        results.append({"name": f"matmul {n}x{n}x{n}", "median_s": secs, "rate": 2 * n**3 / secs / 1e9, "unit": "GFLOP/s"})
    for info in threadpool_info():
        print(f"# {info.get('internal_api')} {info.get('version')} {info.get('architecture')} threads={info.get('num_threads')}")
    print(f"{'workload':<36} {'median ms':>12} {'rate':>14}")
    for r in results:
        print(f"{r['name']:<36} {r['median_s'] * 1e3:>12.3f} {r['rate']:>10.1f} {r['unit']}")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"framework": "numpy", "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
