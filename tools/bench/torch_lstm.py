"""PyTorch twin of examples/lstm_mnist.rs: sequential MNIST (each 28x28 image as 28 steps of 28
pixels), nn.LSTM(28, 128) whose last hidden state feeds nn.Linear(128, 10), Adam(1e-3), batch
128, shuffled each epoch, the same normalisation ((p/255 - 0.1307)/0.3081). Each epoch's time
covers training and the test-set evaluation, as rumus's `fit` with validation does.

    python3 tools/bench/torch_lstm.py --mnist DIR [--epochs 3] [--batch-size 128] [--device cuda]

DIR holds the four IDX files (raw or .gz). Prints one line per epoch and the final test accuracy.
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn


def idx(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                data = f.read()
            dims = data[3]
            shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims)]
            return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)
    raise FileNotFoundError(path)


class SeqMnist(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 128, batch_first=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        _, (h_n, _) = self.lstm(x.view(-1, 28, 28))
        return self.head(h_n[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mnist", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    dev = torch.device(a.device)
    torch.manual_seed(42)

    def load(images, labels):
        x = torch.tensor(idx(os.path.join(a.mnist, images)), dtype=torch.float32)
        x = (x / 255.0 - 0.1307) / 0.3081
        return x.to(dev), torch.tensor(idx(os.path.join(a.mnist, labels)), dtype=torch.long).to(dev)

    xtr, ytr = load("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
    xte, yte = load("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    model = SeqMnist().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(xte), 256):
                correct += (model(xte[i : i + 256]).argmax(1) == yte[i : i + 256]).sum().item()
        model.train()
        return correct / len(xte)

    times = []
    for epoch in range(a.epochs):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        perm = torch.randperm(len(xtr), device=dev)
        total = 0.0
        for i in range(0, len(xtr), a.batch_size):
            idx_b = perm[i : i + a.batch_size]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xtr[idx_b]), ytr[idx_b])
            loss.backward()
            opt.step()
            total += loss.detach()
        acc = evaluate()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        steps = (len(xtr) + a.batch_size - 1) // a.batch_size
        print(f"epoch {epoch + 1}/{a.epochs}: loss {float(total) / steps:.4f}, test accuracy {100 * acc:.2f}%, {times[-1]:.2f} s")
    steady = sum(times[1:]) / max(len(times) - 1, 1) if len(times) > 1 else times[0]
    print(
        f"test accuracy {100 * evaluate():.2f}% ({sum(times) / len(times):.2f} s/epoch, "
        f"{steady:.2f} s/epoch after the first) torch {torch.__version__} cudnn {torch.backends.cudnn.version()}"
    )


if __name__ == "__main__":
    main()
