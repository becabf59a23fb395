"""PyTorch twin of examples/autoencoder.rs: the same convolutional autoencoder on Fashion-MNIST
(Conv2d 1→16→32 with stride 2, ConvTranspose2d 32→16→1 with stride 2, output_padding 1, sigmoid),
pixels in [0, 1], MSE, Adam(1e-3), the same batch size and epochs, shuffled each epoch, the
whole dataset on the device (as rumus keeps it). f32 with TF32 off, eager.

    python3 tools/bench/torch_autoencoder.py --data /usr/share/datasets/fashion-mnist --epochs 5 --batch-size 128

Prints the time of each epoch (synchronised) and the test reconstruction MSE (mean over pixels).
"""
import argparse
import gzip
import os
import struct
import time

import torch
import torch.nn as nn


def idx_images(path):
    """The images of an IDX file (gzipped, or raw without the .gz) as float32 [n, 1, 28, 28] in [0, 1]."""
    opener = gzip.open if os.path.exists(path) else open
    path = path if os.path.exists(path) else path[: -len(".gz")]
    with opener(path, "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 2051, path
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    return data.view(n, 1, rows, cols).float().div(255.0)


def model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
        nn.ConvTranspose2d(16, 1, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid(),
    )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(a.seed)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train = idx_images(os.path.join(a.data, "train-images-idx3-ubyte.gz")).to(dev)
    test = idx_images(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")).to(dev)
    net = model().to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    print(f"PyTorch {torch.__version__} on {dev}: {sum(q.numel() for q in net.parameters())} parameters")
    seconds = []
    for epoch in range(a.epochs):
        sync()
        start = time.perf_counter()
        order = torch.randperm(train.shape[0], device=dev)
        total = 0.0
        for i in range(0, train.shape[0], a.batch_size):
            x = train[order[i : i + a.batch_size]]
            loss = loss_fn(net(x), x)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach() * x.shape[0]
        train_loss = (total / train.shape[0]).item()
        sync()
        seconds.append(time.perf_counter() - start)
        print(f"epoch {epoch + 1}: {seconds[-1]:.2f} s, train MSE {train_loss:.5f}")
    if len(seconds) > 1:
        print(f"mean epoch after the first: {sum(seconds[1:]) / (len(seconds) - 1):.2f} s")
    net.eval()
    with torch.no_grad():
        sq = sum(((net(test[i : i + 1000]) - test[i : i + 1000]) ** 2).sum() for i in range(0, test.shape[0], 1000))
    print(f"test reconstruction MSE {(sq / test.numel()).item():.5f}")


if __name__ == "__main__":
    main()
