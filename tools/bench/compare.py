"""Ratio tables from one `tools/bench/device_run.sh` output folder: each rumus figure next to its peer.

    python3 tools/bench/compare.py OUT_DIR

Rates are compared as rumus / peer (higher is better for rumus), times as rumus / peer (lower is
better). Rows without a peer measurement are left out.
"""

import glob
import json
import os
import statistics
import sys


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def by_name(doc):
    return {r["name"]: r for r in doc["results"]} if doc else {}


def kernel_rows(rumus, torch):
    """bench_wgpu names kernels by precision and shape; the PyTorch twin folds both into a name."""
    peers = by_name(torch)
    for r in rumus["results"] if rumus else []:
        shape = r["shape"]
        label = f"{r['kernel']} {shape}"
        if r["kernel"] == "matmul f32":
            peer = peers.get(f"matmul {shape}")
        elif r["kernel"].startswith("matmul"):
            # The reduced-precision path is compared against cuBLAS with TF32 on.
            peer, label = peers.get(f"matmul {shape} tf32"), label + " (vs TF32)"
        elif r["kernel"].startswith("conv2d"):
            # `--resnet18` names each pass's algorithm (`conv2d forward gemm`, `... winograd`,
            # `... winograd4`, `... winograd tc`, `... winograd4 tc`); each compares with the one
            # cuDNN row of the pass.
            kernel = r["kernel"].removesuffix(" tc").removesuffix(" gemm").removesuffix(" winograd4")
            kernel = kernel.removesuffix(" winograd")
            peer = peers.get(f"{kernel} {shape}")
        elif r["kernel"].startswith("batch_norm"):
            # bench_wgpu's three batch norm rows (fused kernels, op fused, op composed) against
            # the one cuDNN row of torch_bench --only bnpass.
            peer = peers.get(f"batch_norm fwd+bwd {shape}")
        else:
            rows, cols = shape.split("x")
            peer = peers.get(f"{r['kernel']} [{rows}, {cols}]")
        if peer:
            yield label, r["median_ms"] / 1e3, r["rate"], r["unit"], peer


def workload_rows(rumus, peer_doc):
    peers = by_name(peer_doc)
    for r in rumus["results"] if rumus else []:
        peer = peers.get(r["name"])
        if peer:
            yield r["name"], r["median_s"], r["rate"], r["unit"], peer


def mode_rows(rumus, peer_doc, prefix=""):
    """rumus's rows (those whose names start with `prefix`) against each of the twin's modes of the
    same row: "resnet18 train step b128" against its f32, tf32, bf16, compile, ... rows, "lenet
    mnist epoch b64" against eager, compile and compile-ro (first epochs only with first epochs).
    A row of `bench --loss-scaling` or `--tensor-cores` ("... b128 loss-scaled tc", the order in
    which bench appends them) is set against the modes of the row it qualifies."""
    for r in rumus["results"] if rumus else []:
        if not r["name"].startswith(prefix):
            continue
        base = r["name"]
        for qualifier in (" tc", " loss-scaled"):
            base = base.removesuffix(qualifier)
        for peer in peer_doc["results"] if peer_doc else []:
            first = peer["name"].endswith("(first)")
            if first != r["name"].endswith("(first)"):
                continue
            if peer["name"] == base or peer["name"].startswith(base + " "):
                yield f"{r['name']} vs {peer['name'][len(base):].strip() or 'f32'}", r["median_s"], None, r["unit"], peer


SCALE = {"GFLOP/s": 1.0, "TFLOP/s": 1e3, "GB/s": 1.0}


def table(title, rows):
    rows = list(rows)
    if not rows:
        return
    print(f"\n## {title}\n")
    print(f"| {'workload':<44} | {'rumus':>18} | {'peer':>18} | ratio |")
    print(f"| {'-' * 44} | {'-' * 18} | {'-' * 18} | ----- |")
    for name, secs, rate, unit, peer in rows:
        if unit in SCALE and rate and peer.get("rate"):
            # bench_wgpu reports TFLOP/s, the PyTorch twin GFLOP/s: compare in one unit.
            theirs_rate = peer["rate"] * SCALE[peer["unit"]] / SCALE[unit]
            ours, theirs, ratio = f"{rate:.1f} {unit}", f"{theirs_rate:.1f} {unit}", rate / theirs_rate
            kind = "rate"
        elif unit == "MiB":
            ours, theirs, ratio = f"{rate:.1f} MiB", f"{peer['rate']:.1f} MiB", rate / peer["rate"]
            kind = "size"
        else:
            ours, theirs, ratio = f"{secs * 1e3:.2f} ms", f"{peer['median_s'] * 1e3:.2f} ms", secs / peer["median_s"]
            kind = "time"
        print(f"| {name:<44} | {ours:>18} | {theirs:>18} | {ratio:.2f} ({kind}) |")


def cold_runs(out):
    """The cold-start processes' JSON files, by number: cold_rumus_1.json, cold_rumus_2.json, ..."""
    paths = glob.glob(os.path.join(out, "cold_rumus_*.json"))
    return sorted((int(os.path.basename(p)[len("cold_rumus_"):-len(".json")]), os.path.basename(p)) for p in paths)


def cold_ratios(out):
    """First epoch / steady epoch of each fresh process and their median (the goal is at most 1.2)."""
    lines, ratios = [], {64: [], 256: []}
    runs = [(f"rumus cold start {i}", name) for i, name in cold_runs(out)] + [("PyTorch", "cold_torch.json")]
    for label, name in runs:
        epochs = by_name(load(out, name))
        for batch in (64, 256):
            first, steady = epochs.get(f"lenet mnist epoch b{batch} (first)"), epochs.get(f"lenet mnist epoch b{batch}")
            if first and steady:
                ratio = first["median_s"] / steady["median_s"]
                if label.startswith("rumus"):
                    ratios[batch].append(ratio)
                lines.append(f"| {label:<20} | b{batch:<5} | {first['median_s'] * 1e3:>8.0f} ms | {steady['median_s'] * 1e3:>8.0f} ms | "
                             f"{ratio:.2f} |")
    for batch, values in ratios.items():
        if values:
            lines.append(f"| {'rumus, median':<20} | b{batch:<5} | {'':>11} | {'':>11} | {statistics.median(values):.2f} |")
    if lines:
        print("\n### First epoch / steady epoch (fresh processes)\n")
        print("| run                  | batch  |       first |      steady | ratio |")
        print("| -------------------- | ------ | ----------- | ----------- | ----- |")
        print("\n".join(lines))


def gpu_name(out):
    """The GPU the PyTorch twin ran on (the lent machines are H200s or H100s), for the titles."""
    for name in ["kernels_torch.json", "cuda_torch.json", "cold_torch.json", "resnet_torch.json", "mixed_torch.json"]:
        doc = load(out, name)
        if doc and doc.get("device"):
            return doc["device"].replace("NVIDIA ", "")
    return "GPU"


def main():
    out = sys.argv[1]
    gpu = gpu_name(out)
    table(f"{gpu} kernels (GPU timestamps / CUDA events)", kernel_rows(load(out, "kernels_rumus.json"), load(out, "kernels_torch.json")))
    table(f"{gpu} batch norm at ResNet-18's shapes (GPU timestamps / CUDA events)",
          kernel_rows(load(out, "bn_kernels_rumus.json"), load(out, "bn_kernels_torch.json")))
    table(f"{gpu} small CNN with and without batch norm, rumus wgpu vs PyTorch CUDA",
          workload_rows(load(out, "bn_steps_rumus.json"), load(out, "bn_steps_torch.json")))
    cuda = load(out, "cuda_torch.json")
    table(f"{gpu} workloads, rumus wgpu vs PyTorch CUDA", workload_rows(load(out, "wgpu_rumus.json"), cuda))
    table(f"{gpu} workloads, second rumus run", workload_rows(load(out, "wgpu_rumus2.json"), cuda))
    table(f"{gpu} ResNet-18 training step, rumus wgpu (f32) vs PyTorch CUDA modes",
          mode_rows(load(out, "resnet_rumus.json"), load(out, "resnet_torch.json")))
    mixed = load(out, "mixed_torch.json")
    for name, what in [("mixed_rumus_f32.json", "f32"), ("mixed_rumus_tc.json", "tensor cores"),
                       ("mixed_rumus_tc_scaled.json", "tensor cores + loss scaling")]:
        table(f"{gpu} ResNet-18 training step, rumus wgpu ({what}) vs PyTorch CUDA f32, TF32, bf16",
              mode_rows(load(out, name), mixed))
    table(f"{gpu} ResNet-18's convolutions, rumus (implicit GEMM, Winograd, Winograd on tensor cores) vs cuDNN",
          kernel_rows(load(out, "mixed_conv_rumus.json"), load(out, "mixed_conv_torch.json")))
    table(f"{gpu} LeNet epoch, rumus wgpu vs PyTorch CUDA eager and compiled (`--epoch-modes`)",
          mode_rows(load(out, "wgpu_rumus.json"), load(out, "epoch_modes_torch.json"), "lenet mnist epoch"))
    for i, name in cold_runs(out):
        table(f"{gpu} cold start {i}", workload_rows(load(out, name), load(out, "cold_torch.json")))
    cold_ratios(out)
    cpu_torch = load(out, "cpu_torch.json")
    table("CPU, 2 threads, rumus vs PyTorch", workload_rows(load(out, "cpu_rumus.json"), cpu_torch))
    numpy = load(out, "cpu_numpy.json")
    table("CPU, 2 threads, rumus vs numpy", workload_rows(load(out, "cpu_rumus.json"), numpy))
    table("CPU, 2 threads, rumus (second run) vs numpy", workload_rows(load(out, "cpu_rumus2.json"), numpy))


if __name__ == "__main__":
    main()
