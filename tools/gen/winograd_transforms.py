"""Checks the Winograd transforms of rumus/shaders/winograd.wgsl (F(2x2, 3x3)) and of
tools/gen/winograd4.py, which writes those of rumus/shaders/winograd4.wgsl (F(4x4, 3x3)), against a
direct convolution in float64: the forward (Y = A^T [(G g G^T) * (B^T d B)] A summed over
channels), the input gradient as the forward of the output gradient with the filters rotated 180
degrees and transposed at padding 2 - pad, and the weight gradient (dW = G^T [sum_p (A dY A^T) *
V] G), over paddings 0-2, odd and even outputs (partial tiles, zeros beyond the output) and 1x1
images.

    python3 tools/gen/winograd_transforms.py     (needs numpy; prints the largest errors)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import winograd4  # noqa: E402  (the F(4x4, 3x3) matrices the generator writes out)

rng = np.random.default_rng(0)
F2 = (
    np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float),
    np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], float),
    np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float),
)
F4 = tuple(np.array([[float(v) for v in row] for row in m]) for m in (winograd4.BT, winograd4.G, winograd4.AT))


def conv(x, w, pad):
    n, c, h, ww = x.shape
    o = w.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - 2, ww + 2 * pad - 2
    y = np.zeros((n, o, oh, ow))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i : i + oh, j : j + ow], w[:, :, i, j])
    return y


def tiles(scheme, x, pad, oh, ow):
    """V [a*a, c, P]: the transformed input tiles (a = m + 2 for m x m output tiles)."""
    BT, _, AT = scheme
    m, a = AT.shape
    n, c, h, w = x.shape
    th, tw = -(-oh // m), -(-ow // m)
    V = np.zeros((a * a, c, n * th * tw))
    for b in range(n):
        for ty in range(th):
            for tx in range(tw):
                d = np.zeros((c, a, a))
                for i in range(a):
                    for j in range(a):
                        r, q = m * ty - pad + i, m * tx - pad + j
                        if 0 <= r < h and 0 <= q < w:
                            d[:, i, j] = x[b, :, r, q]
                v = np.einsum("ai,cij,bj->cab", BT, d, BT)
                V[:, :, (b * th + ty) * tw + tx] = v.reshape(c, a * a).T
    return V, th, tw


def wino_fwd(scheme, x, w, pad, flip=False):
    _, G, AT = scheme
    m, a = AT.shape
    if flip:
        w = w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    n, c, h, ww = x.shape
    o = w.shape[0]
    oh, ow = h + 2 * pad - 2, ww + 2 * pad - 2
    U = np.einsum("ai,ocij,bj->aboc", G, w, G).reshape(a * a, o, c)
    V, th, tw = tiles(scheme, x, pad, oh, ow)
    M = np.einsum("xoc,xcp->xop", U, V)
    y = np.zeros((n, o, oh, ow))
    for b in range(n):
        for ty in range(th):
            for tx in range(tw):
                mm = M[:, :, (b * th + ty) * tw + tx].T.reshape(o, a, a)
                t = np.einsum("ai,oij,bj->oab", AT, mm, AT)
                for i in range(m):
                    for j in range(m):
                        if m * ty + i < oh and m * tx + j < ow:
                            y[b, :, m * ty + i, m * tx + j] = t[:, i, j]
    return y


def wino_wgrad(scheme, x, dy, pad):
    _, G, AT = scheme
    m, a = AT.shape
    o = dy.shape[1]
    oh, ow = dy.shape[2:]
    n, c = x.shape[:2]
    V, th, tw = tiles(scheme, x, pad, oh, ow)
    Z = np.zeros((a * a, o, V.shape[2]))
    for b in range(n):
        for ty in range(th):
            for tx in range(tw):
                g = np.zeros((o, m, m))
                for i in range(m):
                    for j in range(m):
                        if m * ty + i < oh and m * tx + j < ow:
                            g[:, i, j] = dy[b, :, m * ty + i, m * tx + j]
                z = np.einsum("ia,oij,jb->oab", AT, g, AT)  # A g A^T
                Z[:, :, (b * th + ty) * tw + tx] = z.reshape(o, a * a).T
    dU = np.einsum("xop,xcp->xoc", Z, V).reshape(a, a, o, c)
    return np.einsum("ai,aboc,bj->ocij", G, dU, G)  # G^T dU G


for name, scheme in [("F(2x2, 3x3)", F2), ("F(4x4, 3x3)", F4)]:
    for n, c, o, h, w, pad in [(2, 3, 5, 7, 6, 1), (1, 2, 3, 5, 5, 0), (3, 4, 2, 1, 1, 2), (1, 3, 3, 5, 8, 2), (2, 2, 2, 4, 3, 1), (1, 2, 2, 9, 11, 1)]:
        x = rng.standard_normal((n, c, h, w))
        wt = rng.standard_normal((o, c, 3, 3))
        y = conv(x, wt, pad)
        yw = wino_fwd(scheme, x, wt, pad)
        dy = rng.standard_normal(y.shape)
        # input grad: forward of dy with flipped/transposed weights, padding 2-pad
        xp_grad = np.zeros((n, c, h + 2 * pad, w + 2 * pad))
        oh, ow = y.shape[2:]
        for i in range(3):
            for j in range(3):
                xp_grad[:, :, i : i + oh, j : j + ow] += np.einsum("nohw,oc->nchw", dy, wt[:, :, i, j])
        dx_ref = xp_grad[:, :, pad : pad + h, pad : pad + w]
        dxw = wino_fwd(scheme, dy, wt, 2 - pad, flip=True)
        dw_ref = np.zeros_like(wt)
        xpad = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        for i in range(3):
            for j in range(3):
                dw_ref[:, :, i, j] = np.einsum("nohw,nchw->oc", dy, xpad[:, :, i : i + oh, j : j + ow])
        dww = wino_wgrad(scheme, x, dy, pad)
        errors = (abs(y - yw).max(), abs(dx_ref - dxw).max(), abs(dw_ref - dww).max())
        print(name, (n, c, o, h, w, pad), *errors, dxw.shape == x.shape)
        assert max(errors) < 1e-12
print("all transforms match the direct convolution")
