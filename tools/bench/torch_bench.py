"""PyTorch twin of `cargo run --release -p rumus-tools --bin bench`: the same workloads, sizes, warm-up and
median-of-repeats, so the two can run in one session and be compared as ratios.

    python3 tools/bench/torch_bench.py --device cuda [--json out.json]
    python3 tools/bench/torch_bench.py --device cpu --threads 2
    python3 tools/bench/torch_bench.py --device cuda --only matmul,softmax,convpass --gpu-time
    python3 tools/bench/torch_bench.py --device cuda --only attention      # fused attention, f32   # bench_wgpu's twin
    python3 tools/bench/torch_bench.py --device cuda --only resnet [--resnet-batch 128]
    python3 tools/bench/torch_bench.py --device cuda --only bnpass --gpu-time   # bench_wgpu --only bn's twin
    python3 tools/bench/torch_bench.py --device cuda --only elementwise --gpu-time   # bench_wgpu --only elementwise's twin

`resnet` (ResNet-18 training steps; on CUDA f32, TF32, bf16 autocast, torch.compile default and
reduce-overhead) runs only when `--only` names it, as in bench.

TF32 is off (PyTorch's default for matmul is plain fp32 unless allowed). Each repeat is timed
on the wall clock up to a synchronize, as `bench` times rumus up to a read-back; with
`--gpu-time`, CUDA events around each repeat time the GPU alone, as `bench_wgpu`'s timestamp
queries do.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


GPU_TIME = False


def timer(device, warmup, repeats, f):
    for _ in range(warmup):
        f()
    if device == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        if device == "cuda" and GPU_TIME:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            f()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            f()
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


class LeNet(nn.Module):
    """The same LeNet-5 as examples/mnist.rs (61,706 parameters)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
        )

    def forward(self, x):
        return self.head(self.features(x))


class Residual(nn.Module):
    """rumus's `Residual(layers.., shortcut = (..))`: shortcut(x) + layers(x), the shortcut the
    identity unless given. Its layers are named 0, 1, ... as in a Sequential, the shortcut's
    layers shortcut.0, shortcut.1, ... after them."""

    def __init__(self, *layers, shortcut=None):
        super().__init__()
        for i, layer in enumerate(layers):
            self.add_module(str(i), layer)
        self.depth = len(layers)
        self.shortcut = nn.Sequential(*shortcut) if shortcut else None

    def forward(self, x):
        h = x
        for i in range(self.depth):
            h = getattr(self, str(i))(h)
        return (x if self.shortcut is None else self.shortcut(x)) + h


def basic_block(cin, cout, stride=1):
    """A BasicBlock as rumus's ResNet18 writes it in a stage's list: `Residual(conv, bn, relu,
    conv, bn), Relu`, with `shortcut = (conv1x1, bn)` where it changes the channels or the size."""
    shortcut = None
    if stride != 1 or cin != cout:
        shortcut = (nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
    return [
        Residual(nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                 nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), shortcut=shortcut),
        nn.ReLU(),
    ]


class GlobalAvgPool(nn.Module):
    def forward(self, x):
        return x.mean((2, 3))


class ResNet18(nn.Module):
    """ResNet-18, CIFAR form (3x3 stem of 64 without max-pool, stages [64, 128, 256, 512] x 2
    BasicBlocks, projection shortcuts on downsampling, global average pool, linear 10):
    11,173,962 parameters. The twin of `rumus_test_models::ResNet18` (tests/models/src/lib.rs)
    with the same state_dict names (rumus keeps no `num_batches_tracked`)."""

    def __init__(self, in_channels=3, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        self.layer1 = nn.Sequential(*basic_block(64, 64), *basic_block(64, 64))
        self.layer2 = nn.Sequential(*basic_block(64, 128, 2), *basic_block(128, 128))
        self.layer3 = nn.Sequential(*basic_block(128, 256, 2), *basic_block(256, 256))
        self.layer4 = nn.Sequential(*basic_block(256, 512, 2), *basic_block(512, 512))
        self.head = nn.Sequential(GlobalAvgPool(), nn.Linear(512, classes))

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.head(self.layer4(self.layer3(x)))


def convpass_bench(dev, shape, add):
    """One convolution's three passes apart, as autograd runs them (cuDNN's forward,
    backward-data, and backward-filter with bias). `shape`: (n, c, h, o, k, pad[, stride])."""
    n, c, h, o, k, pad = shape[:6]
    stride = shape[6] if len(shape) > 6 else 1
    x = torch.randn(n, c, h, h, device=dev)
    w = torch.randn(o, c, k, k, device=dev)
    bias = torch.randn(o, device=dev)
    side = (h + 2 * pad - k) // stride + 1
    gy = torch.randn(n, o, side, side, device=dev)
    flops = 2 * n * o * side * side * c * k * k
    conv_bwd = torch.ops.aten.convolution_backward
    st = [stride, stride]
    passes = {
        "forward": lambda: F.conv2d(x, w, bias, stride=stride, padding=pad),
        "input grad": lambda: conv_bwd(gy, x, w, None, st, [pad, pad], [1, 1], False, [0, 0], 1,
                                       [True, False, False]),
        "weight grad": lambda: conv_bwd(gy, x, w, [o], st, [pad, pad], [1, 1], False, [0, 0], 1,
                                        [False, True, True]),
    }
    suffix = "" if stride == 1 else f"s{stride}"
    for name, f in passes.items():
        s = timer(dev, 3, 10, f)
        add(f"conv2d {name} {n}x{c}x{h}x{h}->{o}k{k}{suffix}", s, flops / s / 1e9, "GFLOP/s")


def resnet_step_bench(device, batch, steps, mode, profile=False):
    """One ResNet-18 training step (forward, cross-entropy, backward, SGD with momentum 0.9) on a
    synthetic [batch, 3, 32, 32] batch. `mode`: "f32" (TF32 off), "tf32", "bf16" (autocast),
    "compile" (torch.compile, f32) or "compile-ro" (mode="reduce-overhead"). `profile`: also print
    the GPU time per kernel of one step (torch.profiler), the twin of `bench --profile`."""
    torch.manual_seed(0)
    model = ResNet18().to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    forward = model
    if mode == "compile":
        forward = torch.compile(model)
    elif mode == "compile-ro":
        forward = torch.compile(model, mode="reduce-overhead")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        loss.item()

    try:
        secs = timer(device, 10 if mode.startswith("compile") else 3, steps, step)
        if profile:
            print_kernel_profile(f"resnet18 train step b{batch} {mode}", step)
        return secs
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def print_kernel_profile(what, step):
    """Prints the GPU (or, without CUDA, CPU) time per kernel of one call of `step`."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        step()
    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    events = prof.key_averages()
    total = sum(getattr(e, "self_device_time_total" if cuda else "self_cpu_time_total", 0) for e in events)
    print(f"{'GPU' if cuda else 'CPU'} time per kernel, {what}: {total / 1e3:.3f} ms")
    print(events.table(sort_by=key, row_limit=45, max_name_column_width=70))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 300), nn.ReLU(), nn.Linear(300, 100), nn.ReLU(), nn.Linear(100, 10))


def cnn(batch_norm):
    """The small CNN of issue #32, as cnn() in tools/src/bin/bench.rs: two blocks of conv 3x3
    (padding 1; no conv bias with BatchNorm2d), BatchNorm2d, ReLU, 2x2 max pool, then a linear."""
    layers = []
    for cin, cout in [(1, 16), (16, 32)]:
        layers.append(nn.Conv2d(cin, cout, 3, padding=1, bias=not batch_norm))
        if batch_norm:
            layers.append(nn.BatchNorm2d(cout))
        layers += [nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def train_step_bench(device, model, batch, steps):
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return timer(device, 5, steps, step)


def epoch_bench(device, batch, n=60000, mode="eager"):
    """A full MNIST-sized epoch from device-resident data, shuffled, reading the loss once at the end.
    `mode`: "eager", "compile" (torch.compile) or "compile-ro" (mode="reduce-overhead"); the
    compiled modes compile in the first epoch, which the first figure includes."""
    torch.manual_seed(0)
    model = LeNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    forward = model
    if mode == "compile":
        forward = torch.compile(model)
    elif mode == "compile-ro":
        forward = torch.compile(model, mode="reduce-overhead")
    xs = torch.randn(n, 1, 28, 28, device=device)
    ys = torch.randint(0, 10, (n,), device=device)

    def epoch():
        perm = torch.randperm(n, device=device)
        total = torch.zeros((), device=device)
        for i in range(0, n, batch):
            idx = perm[i:i + batch]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(forward(xs[idx]), ys[idx])
            loss.backward()
            opt.step()
            total += loss.detach()
        return total.item()

    def timed():
        t0 = time.perf_counter()
        epoch()
        return time.perf_counter() - t0

    # Like the rumus side: the first epoch, and the median of the three after it.
    first = timed()
    return first, statistics.median(timed() for _ in range(3))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--only", default="")
    p.add_argument("--json", default="")
    p.add_argument("--resnet18", action="store_true", help="convpass: also ResNet-18's 3x3 convolutions")
    p.add_argument("--resnet-modes", default="", help="resnet: a comma list of f32,tf32,bf16,compile,compile-ro (default: all)")
    p.add_argument("--epoch-modes", default="eager", help="epoch: a comma list of eager,compile,compile-ro (CUDA; default: eager)")
    p.add_argument("--resnet-batch", type=int, default=128, help="batch of the resnet workload")
    p.add_argument("--profile", action="store_true", help="resnet: print one step's time per kernel in each mode")
    p.add_argument("--gpu-time", action="store_true", help="time kernels with CUDA events (GPU time alone)")
    a = p.parse_args()
    global GPU_TIME
    GPU_TIME = a.gpu_time
    dev = a.device
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    wanted = lambda name: not a.only or name in a.only.split(",")
    rows = []

    def add(name, secs, rate=None, unit=""):
        rows.append({"name": name, "median_s": secs, "rate": rate, "unit": unit})

    if wanted("matmul"):
        sizes = (1024, 4096) if dev == "cuda" else (256, 512, 1024)
        for n in sizes:
            a_ = torch.randn(n, n, device=dev)
            b_ = torch.randn(n, n, device=dev)
            s = timer(dev, 3, 10 if n >= 2048 else 20, lambda: a_ @ b_)
            add(f"matmul {n}x{n}x{n}", s, 2 * n**3 / s / 1e9, "GFLOP/s")
        if dev == "cuda":
            # The peers of rumus's opt-in tensor-core matmul (f16 inputs, f32 accumulation):
            # cuBLAS with TF32 allowed, and cuBLAS on f16 operands.
            n = 4096
            a_, b_ = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
            torch.backends.cuda.matmul.allow_tf32 = True
            s = timer(dev, 3, 10, lambda: a_ @ b_)
            torch.backends.cuda.matmul.allow_tf32 = False
            add(f"matmul {n}x{n}x{n} tf32", s, 2 * n**3 / s / 1e9, "GFLOP/s")
            a_, b_ = a_.half(), b_.half()
            s = timer(dev, 3, 10, lambda: a_ @ b_)
            add(f"matmul {n}x{n}x{n} f16", s, 2 * n**3 / s / 1e9, "GFLOP/s")
    if wanted("linear"):
        # The twin of bench's `linear` rows: the Shakespeare GPT's linear layers, three products each.
        m = 16384
        for k, n in [(384, 1152), (384, 384), (384, 1536), (1536, 384), (384, 84)]:
            x = torch.randn(m, k, device=dev)
            w = torch.randn(n, k, device=dev)
            g = torch.randn(m, n, device=dev)
            for what, f in [("fwd x@wT", lambda: x @ w.t()), ("dx g@w", lambda: g @ w), ("dw gT@x", lambda: g.t() @ x)]:
                s = timer(dev, 3, 20, f)
                add(f"linear {m}x{k}->{n} {what}", s, 2 * m * k * n / s / 1e9, "GFLOP/s")
    if wanted("softmax"):
        rows_, cols = (65536, 1024)
        x = torch.randn(rows_, cols, device=dev, requires_grad=True)
        g = torch.randn(rows_, cols, device=dev)

        def sm():
            y = torch.softmax(x, -1)
            (gx,) = torch.autograd.grad((y * g).sum(), x)
            return gx

        s = timer(dev, 2, 10, sm)
        add(f"softmax fwd+bwd [{rows_}, {cols}]", s, rows_ * cols * 4 * 8 / s / 1e9, "GB/s")
    if wanted("attention"):
        # The twin of bench's attention rows: causal SDPA on f32 [batch, heads, t, d] (batch 8 on
        # the CPU), forward alone and forward plus backward; FLOPs count the visible half of the
        # scores, forward 2*2*B*H*T*T*D/2 and backward 2.5 times that.
        b, h, t, d = (64 if dev == "cuda" else 8), 6, 256, 64
        q, k, v = (torch.randn(b, h, t, d, device=dev, requires_grad=True) for _ in range(3))
        g = torch.randn(b, h, t, d, device=dev)
        fwd_flops = 2 * 2 * b * h * t * t * d / 2

        def attn_fwd():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def attn_both():
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return torch.autograd.grad((y * g).sum(), (q, k, v))

        name = f"attention causal [{b},{h},{t},{d}]"
        per, unit = (1e12, "TFLOP/s") if dev == "cuda" else (1e9, "GFLOP/s")
        s = timer(dev, 2, 10, attn_fwd)
        add(f"{name} fwd", s, fwd_flops / s / per, unit)
        s = timer(dev, 2, 10, attn_both)
        add(f"{name} fwd+bwd", s, 3.5 * fwd_flops / s / per, unit)
    if wanted("conv"):
        for name, (n, c, h, o, k, pad) in {
            "conv2d lenet1 [64,1,28,28]->6 k5": (64, 1, 28, 6, 5, 2),
            "conv2d resblock [32,64,56,56]->64 k3": (32, 64, 56, 64, 3, 1),
        }.items():
            conv = nn.Conv2d(c, o, k, padding=pad).to(dev)
            xin = torch.randn(n, c, h, h, device=dev, requires_grad=True)

            def cv():
                conv(xin).sum().backward()

            s = timer(dev, 3, 10, cv)
            add(f"{name} fwd+bwd", s)
    if wanted("convpass") and dev == "cuda":
        # The twin of bench_wgpu's conv rows: the ResNet-block convolution's three passes apart,
        # as autograd runs them (cuDNN's forward, backward-data, and backward-filter with bias).
        shapes = [(32, 64, 56, 64, 3, 1)]
        if a.resnet18:  # bench_wgpu --resnet18: the 3x3 convolutions of ResNet-18's four stages
            shapes += [(128, c, h, c, 3, 1) for c, h in ((64, 32), (128, 16), (256, 8), (512, 4))]
            # and its downsampling convolutions: each later stage's first 3x3 and 1x1 shortcut, stride 2
            shapes += [(128, c, h, 2 * c, k, k // 2, 2) for k in (3, 1) for c, h in ((64, 32), (128, 16), (256, 8))]
        for shape in shapes:
            convpass_bench(dev, shape, add)
    if wanted("bnpass") and dev == "cuda":
        # The twin of bench_wgpu's batch norm rows: training-mode batch norm (cuDNN) forward and
        # backward at ResNet-18's four shapes (batch 128), weight, bias and running statistics,
        # the backward seeded through one multiply as in bench_wgpu's op rows; the rate counts the
        # same 8 passes over the tensor.
        for c, h in [(64, 32), (128, 16), (256, 8), (512, 4)]:
            x = torch.randn(128, c, h, h, device=dev, requires_grad=True)
            g = torch.randn_like(x)
            w = torch.ones(c, device=dev, requires_grad=True)
            b_ = torch.zeros(c, device=dev, requires_grad=True)
            rm, rv = torch.zeros(c, device=dev), torch.ones(c, device=dev)

            def bn():
                y = F.batch_norm(x, rm, rv, w, b_, training=True, momentum=0.1, eps=1e-5)
                return torch.autograd.grad((y * g).sum(), (x, w, b_))

            s = timer(dev, 3, 20, bn)
            add(f"batch_norm fwd+bwd 128x{c}x{h}x{h}", s, 8 * x.numel() * 4 / s / 1e9, "GB/s")
    if wanted("elementwise") and dev == "cuda":
        # The twin of bench_wgpu --only elementwise: the same kernels, names and shapes, each alone
        # (no autograd); rates count the minimal traffic as bench_wgpu does.
        rows_, cols = (65536, 1024)
        n, c, h = 128, 64, 32
        x = torch.randn(rows_, cols, device=dev)
        g = torch.randn(rows_, cols, device=dev)
        scalar = torch.randn(1, device=dev).expand(rows_, cols)  # stride 0, as autograd's sum_all gradient
        act = torch.randn(n, c, h, h, device=dev)
        bias = torch.randn(c, 1, 1, device=dev)
        relu_y = torch.relu(x)
        tall_384, tall_1536 = torch.randn(16384, 384, device=dev), torch.randn(16384, 1536, device=dev)
        flat = str(x.numel())
        cases = [
            ("mul contiguous", f"{rows_}x{cols}", 3 * x.numel(), lambda: x * g),
            ("mul broadcast scalar", f"{rows_}x{cols}", 2 * x.numel(), lambda: scalar * g),
            ("add per-channel", f"{n}x{c}x{h}x{h}+{c}x1x1", 2 * act.numel(), lambda: act + bias),
            ("relu", flat, 2 * x.numel(), lambda: torch.relu(x)),
            ("relu backward", flat, 3 * x.numel(), lambda: torch.ops.aten.threshold_backward(g, relu_y, 0.0)),
            # PyTorch eager's residual end, torchvision's `out += identity; relu(out)`: two kernels.
            ("add_relu", flat, 3 * x.numel(), lambda: torch.relu_(x + g)),
            ("sum_all", flat, x.numel(), lambda: x.sum()),
            ("sum last axis", f"{rows_}x{cols}", x.numel() + rows_, lambda: x.sum(-1)),
            # A GPT's bias gradients (16,384 tokens): columns summed down a tall matrix.
            ("sum first axis", "16384x384", 16384 * 384 + 384, lambda: tall_384.sum(0)),
            ("sum first axis", "16384x1536", 16384 * 1536 + 1536, lambda: tall_1536.sum(0)),
        ]
        for name, shape, elements, f in cases:
            s = timer(dev, 2, 10, f)
            add(f"{name} {shape}", s, elements * 4 / s / 1e9, "GB/s")
    if wanted("step"):
        for b in (64, 256):
            add(f"lenet train step b{b}", train_step_bench(dev, LeNet(), b, 50))
        add("mlp train step b64", train_step_bench(dev, mlp(), 64, 50))
    if wanted("bn"):
        # Issue #32: the cost of BatchNorm2d in a small CNN's training step (bench's `bn` rows).
        add("cnn train step b64", train_step_bench(dev, cnn(False), 64, 30))
        add("cnn+bn train step b64", train_step_bench(dev, cnn(True), 64, 30))
    if "resnet" in a.only.split(","):  # only when named, as in bench
        # The twin of bench's resnet row: ResNet-18 (CIFAR form) training steps on synthetic
        # 3x32x32 images; on CUDA also TF32, bf16 autocast and torch.compile (default and
        # reduce-overhead) where they are available.
        b = a.resnet_batch
        modes = ["f32"] if dev != "cuda" else ["f32", "tf32", "bf16", "compile", "compile-ro"]
        if a.resnet_modes:
            modes = [m for m in modes if m in a.resnet_modes.split(",")]
        for mode in modes:
            if mode.startswith("compile") and not hasattr(torch, "compile"):
                continue
            try:
                s = resnet_step_bench(dev, b, 20, mode, profile=a.profile)
            except Exception as e:  # torch.compile needs a compiler toolchain; report, go on
                print(f"resnet18 {mode}: skipped ({type(e).__name__}: {e})")
                continue
            suffix = "" if mode == "f32" else f" {mode}"
            add(f"resnet18 train step b{b}{suffix}", s, b / s, "samples/s")
    if wanted("epoch"):
        for mode in a.epoch_modes.split(","):
            if mode != "eager" and (dev != "cuda" or not hasattr(torch, "compile")):
                continue
            suffix = "" if mode == "eager" else f" {mode}"
            for b in (64, 256):
                try:
                    first, steady = epoch_bench(dev, b, mode=mode)
                except Exception as e:  # torch.compile needs a compiler toolchain; report, go on
                    print(f"lenet epoch {mode}: skipped ({type(e).__name__}: {e})")
                    break
                add(f"lenet mnist epoch b{b}{suffix} (first)", first)
                add(f"lenet mnist epoch b{b}{suffix}", steady)
    if wanted("memory") and dev == "cuda":
        # Peak of one LeNet training step alone: start from an empty allocator.
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        train_step_bench(dev, LeNet(), 64, 5)
        add("lenet step b64 peak memory", 0.0, (torch.cuda.max_memory_allocated() - base) / 2**20, "MiB")

    name = torch.cuda.get_device_name() if dev == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"pytorch {torch.__version__} on {name}")
    print(f"{'workload':<40} {'median ms':>12} {'rate':>14}")
    for r in rows:
        rate = f"{r['rate']:>10.1f} {r['unit']}" if r["rate"] is not None else ""
        print(f"{r['name']:<40} {r['median_s'] * 1e3:>12.3f} {rate}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"framework": "pytorch", "device": name, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
