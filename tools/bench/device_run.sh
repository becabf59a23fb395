#!/usr/bin/env bash
# The whole benchmark suite in one call on a GPU machine, each rumus figure next to its peer:
#
#   tools/bench/device_run.sh BIN_DIR OUT_DIR [PARTS]
#
# BIN_DIR holds the release binaries built elsewhere: `cargo build --release -p rumus-tools`
# (target/release/{bench,bench_wgpu,matmul_lab,kernel_stats}) and
# `cargo build --release --example mnist` (target/release/examples/mnist). OUT_DIR receives
# the logs and JSON, PARTS is a comma list of lab,kernels,workloads,resnet,bn,cold,cpu,mixed,mnist
# (default: all). `bn`: batch norm at ResNet-18's shapes (batch 128), rumus's fused kernels and op against
# the composed op, then cuDNN's, and the small CNN with and without BatchNorm2d (issue #32). `resnet`: ResNet-18 (CIFAR form) training steps at batch 128 on synthetic 3x32x32
# images, rumus on wgpu, then PyTorch (f32, TF32, bf16 autocast, torch.compile default and
# reduce-overhead), then one step of each profiled per kernel (resnet_profile_*.txt). `mixed`: the
# mixed-precision mode (`--tensor-cores`, `--loss-scaling`) against PyTorch's TF32 and bf16, the
# convolutions with Winograd on tensor cores, and, given BIN_DIR/resnet_fashion (`cargo build
# --release --example resnet_fashion`) and Fashion-MNIST (RUMUS_FASHION_DIR or Debian's folder),
# two epochs of it in f32 and in the mixed mode, whose histories go to OUT_DIR/fashion_*.csv.
# `tools/bench/compare.py OUT_DIR` prints the
# ratio tables from the JSON. The device machine needs a Vulkan loader (see docs/BENCHMARKS.md).
set -uo pipefail
BIN=$1
OUT=$2
PARTS=${3:-lab,kernels,workloads,resnet,bn,cold,cpu,mixed,mnist}
want() { [[ ",$PARTS," == *",$1,"* ]]; }
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/rumus-xdg}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 0700 "$XDG_RUNTIME_DIR"
stamp() { echo "=== $1 $(date -u +%H:%M:%S)" | tee -a "$OUT/log.txt"; }
run() { "$@" 2>&1 | tee -a "$OUT/log.txt"; }

stamp "machine"
run nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv
run python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)'

if want lab; then
    stamp "matmul lab"
    python3 tools/gen/matmul.py --lab /tmp/lab
    run "$BIN/matmul_lab" /tmp/lab --trusted
    # Registers per kernel, and the driver's pipeline caches for `tools/bench/sass.py OUT_DIR/sass`.
    run "$BIN/kernel_stats" --dump "$OUT/sass" /tmp/lab/*.wgsl rumus/shaders/matmul_vec4.wgsl
fi

if want kernels; then
    stamp "kernels: rumus, then PyTorch"
    run "$BIN/bench_wgpu" "$OUT/kernels_rumus.json"
    run python3 tools/bench/torch_bench.py --device cuda --only matmul,softmax,convpass --gpu-time --json "$OUT/kernels_torch.json"
fi

if want workloads; then
    stamp "workloads: rumus wgpu, PyTorch CUDA, rumus wgpu again"
    run "$BIN/bench" --device wgpu --json "$OUT/wgpu_rumus.json"
    run python3 tools/bench/torch_bench.py --device cuda --json "$OUT/cuda_torch.json"
    run "$BIN/bench" --device wgpu --only matmul,step,epoch --json "$OUT/wgpu_rumus2.json"
    # #32's goal: the LeNet b64 epoch against torch.compile, default and reduce-overhead.
    run python3 tools/bench/torch_bench.py --device cuda --only epoch --epoch-modes compile,compile-ro --json "$OUT/epoch_modes_torch.json"
fi

if want resnet; then
    stamp "resnet18 train step b128: rumus wgpu, PyTorch CUDA"
    run "$BIN/bench" --device wgpu --only resnet --resnet-batch 128 --json "$OUT/resnet_rumus.json"
    run python3 tools/bench/torch_bench.py --device cuda --only resnet --resnet-batch 128 --json "$OUT/resnet_torch.json"
    stamp "resnet18 train step b128: GPU time per kernel, rumus then PyTorch"
    run "$BIN/bench" --device wgpu --only resnet --resnet-batch 128 --profile > "$OUT/resnet_profile_rumus.txt"
    run python3 tools/bench/torch_bench.py --device cuda --only resnet --resnet-batch 128 --resnet-modes f32 --profile > "$OUT/resnet_profile_torch.txt"
fi

if want bn; then
    stamp "batch norm: rumus wgpu kernels and op (fused, composed), PyTorch CUDA; small CNN steps"
    run "$BIN/bench_wgpu" "$OUT/bn_kernels_rumus.json" --only bn
    run python3 tools/bench/torch_bench.py --device cuda --only bnpass --gpu-time --json "$OUT/bn_kernels_torch.json"
    run "$BIN/bench" --device wgpu --only bn --json "$OUT/bn_steps_rumus.json"
    run python3 tools/bench/torch_bench.py --device cuda --only bn --json "$OUT/bn_steps_torch.json"
fi

if want cold; then
    # A fresh process each time with the driver's shader disk cache emptied and disabled, so
    # every kernel is compiled on the spot, as on a machine that never ran rumus.
    # Five, since one cold epoch varies by more than the margin to the goal.
    # The GPU's clocks every 50 ms beside each process (cold_clocks_N.csv): with the driver's
    # cache on, a first epoch still took 1.5-1.7x a steady one (run AD), so not only compiles
    # make the cold start; whether the clocks' ramp does is what these show.
    clocks() { nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu --format=csv -lms 50 > "$1" 2>&1 & }
    for i in 1 2 3 4 5; do
        stamp "cold start $i"
        rm -rf ~/.cache/nvidia ~/.nv
        clocks "$OUT/cold_clocks_$i.csv"; watcher=$!
        # The first also logs each kernel compile (thread, time) to show what the cold start waits on.
        log=$([ $i = 1 ] && echo 1 || echo 0)
        RUMUS_WGPU_LOG_COMPILES=$log __GL_SHADER_DISK_CACHE=0 run "$BIN/bench" --device wgpu --only epoch --json "$OUT/cold_rumus_$i.json"
        kill $watcher 2>/dev/null
    done
    # Then three processes with the driver's shader cache on (emptied before the first only).
    rm -rf ~/.cache/nvidia ~/.nv
    for i in 1 2 3; do
        stamp "cached start $i"
        clocks "$OUT/cached_clocks_$i.csv"; watcher=$!
        run "$BIN/bench" --device wgpu --only epoch --json "$OUT/cached_rumus_$i.json"
        kill $watcher 2>/dev/null
    done
    run python3 tools/bench/torch_bench.py --device cuda --only epoch --json "$OUT/cold_torch.json"
fi

# Two logical CPUs on different physical cores (not two hyperthreads of one), CPU 0 avoided;
# "0,1" where no such pair is found.
two_cores() {
    local seen="" picked="" dir n key
    for dir in /sys/devices/system/cpu/cpu[0-9]*; do
        n=${dir##*cpu}
        [ "$n" = 0 ] && continue
        taskset -c "$n" true 2>/dev/null || continue
        key="$(cat "$dir/topology/physical_package_id" 2>/dev/null):$(cat "$dir/topology/core_id" 2>/dev/null)"
        case " $seen " in *" $key "*) continue ;; esac
        seen="$seen $key"
        picked="$picked${picked:+,}$n"
        [[ $picked == *,* ]] && break
    done
    [[ $picked == *,* ]] && echo "$picked" || echo 0,1
}

if want cpu; then
    cores=$(two_cores)
    stamp "cpu: 2 threads each on CPUs $cores, rumus, PyTorch, numpy, rumus again"
    lscpu | grep -E "^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|CPU\(s\)):" | tee -a "$OUT/log.txt"
    RAYON_NUM_THREADS=2 run taskset -c "$cores" "$BIN/bench" --device cpu --only matmul,conv,step,epoch --json "$OUT/cpu_rumus.json"
    run taskset -c "$cores" python3 tools/bench/torch_bench.py --device cpu --threads 2 --only matmul,conv,step,epoch --json "$OUT/cpu_torch.json"
    OPENBLAS_NUM_THREADS=2 run taskset -c "$cores" python3 tools/bench/numpy_matmul.py "$OUT/cpu_numpy.json"
    RAYON_NUM_THREADS=2 run taskset -c "$cores" "$BIN/bench" --device cpu --only matmul --json "$OUT/cpu_rumus2.json"
fi

if want mixed; then
    stamp "mixed precision: ResNet-18 step f32, tensor cores, tensor cores + loss scaling; PyTorch f32, TF32, bf16"
    run "$BIN/bench" --device wgpu --only resnet --resnet-batch 128 --json "$OUT/mixed_rumus_f32.json"
    run "$BIN/bench" --device wgpu --only resnet --resnet-batch 128 --tensor-cores --json "$OUT/mixed_rumus_tc.json"
    run "$BIN/bench" --device wgpu --only resnet --resnet-batch 128 --tensor-cores --loss-scaling \
        --json "$OUT/mixed_rumus_tc_scaled.json"
    run python3 tools/bench/torch_bench.py --device cuda --only resnet --resnet-batch 128 --resnet-modes f32,tf32,bf16 \
        --json "$OUT/mixed_torch.json"
    "$BIN/bench" --device wgpu --only resnet --resnet-batch 128 --tensor-cores --loss-scaling --profile \
        > "$OUT/mixed_profile_rumus.txt" 2>&1
    stamp "mixed precision: ResNet-18's convolutions, implicit GEMM, Winograd, Winograd on tensor cores"
    run "$BIN/bench_wgpu" "$OUT/mixed_conv_rumus.json" --resnet18 --only conv
    run python3 tools/bench/torch_bench.py --device cuda --only convpass --resnet18 --gpu-time --json "$OUT/mixed_conv_torch.json"
    # Convergence against f32: resnet_fashion's epochs in both precisions, same seed and order.
    fashion=${RUMUS_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
    if [ -x "$BIN/resnet_fashion" ] && [ -d "$fashion" ]; then
        for precision in f32 tensor-cores; do
            stamp "mixed precision: resnet_fashion --precision $precision"
            # Its 45 MB of weights stay out of OUT_DIR; the history comes back.
            work=$(mktemp -d)
            (cd "$work" && "$BIN/resnet_fashion" --epochs 2 --data "$fashion" --precision $precision 2>&1 \
                | tail -4 | tee -a "$OUT/log.txt")
            cp "$work/resnet-fashion-history.csv" "$OUT/fashion_$precision.csv"
            rm -rf "$work"
        done
    fi
fi

if want mnist && [ -d data/mnist ]; then
    stamp "the main job on wgpu"
    RUMUS_DEVICE=wgpu run "$BIN/mnist"
fi
stamp "done"
# One archive of everything as well: a remote runner may bring back only a few files of a folder.
tar -czf "$OUT.tar.gz" -C "$OUT" . && mv "$OUT.tar.gz" "$OUT/all.tar.gz"
