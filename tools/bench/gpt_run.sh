#!/usr/bin/env bash
# The GPT figures of docs/BENCHMARKS.md (issue #29) in one device call: rumus's examples/shakespeare.rs
# and tools/src/bin/bench.rs (release binaries in BIN_DIR: `cargo build --release -p rumus-tools` and
# `cargo build --release --example shakespeare`) against tools/bench/torch_gpt.py and
# tools/bench/torch_bench.py on the same machine, one after the other.
#
#   tools/bench/gpt_run.sh BIN_DIR OUT_DIR data/shakespeare/shakespeare.txt
#
# The 2,000-step convergence comparison is separate (minutes): `shakespeare --steps 2000 --json
# r.json` and `python3 tools/bench/torch_gpt.py --text TEXT --steps 2000 --json t.json`.
set -u
BIN=$1
OUT=$2
TEXT=$3
export RUMUS_SHAKESPEARE_DIR
RUMUS_SHAKESPEARE_DIR=$(dirname "$TEXT")
mkdir -p "$OUT"
echo "== training step, GPU (rumus f32; PyTorch eager f32 with TF32 off, TF32, bf16 autocast, torch.compile)"
"$BIN/shakespeare" --device wgpu --time 30 --json "$OUT/gpt_rumus_time.json" | tail -1
for mode in eager tf32 bf16 compile; do
    python3 tools/bench/torch_gpt.py --text "$TEXT" --steps 80 --eval-every 0 --timed-steps 50 --mode $mode \
        --json "$OUT/gpt_torch_$mode.json" | tail -1
done
echo "== attention and linear-layer products"
"$BIN/bench" --device wgpu --only attention,linear --json "$OUT/bench_rumus.json" | tail -18
python3 tools/bench/torch_bench.py --device cuda --only attention,linear --json "$OUT/bench_torch.json" | tail -18
echo "== generation (untrained model, fresh processes: the first token is cold)"
"$BIN/shakespeare" --device wgpu --generate --json "$OUT/gen_rumus.json" | tail -1
python3 tools/bench/torch_gpt.py --text "$TEXT" --generate --json "$OUT/gen_torch.json" | tail -1
echo "== CPU, 2 threads on the same two cores: the --small configuration"
RAYON_NUM_THREADS=2 taskset -c 1,10 "$BIN/shakespeare" --small --device cpu --time 20 \
    --json "$OUT/small_rumus.json" | tail -1
taskset -c 1,10 python3 tools/bench/torch_gpt.py --text "$TEXT" --device cpu --threads 2 --block 64 --embed 128 \
    --heads 4 --layers 4 --dropout 0 --batch 12 --steps 60 --eval-every 0 --timed-steps 40 \
    --json "$OUT/small_torch.json" | tail -1
