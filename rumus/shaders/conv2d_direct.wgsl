// Direct 2-D convolution over NCHW input, one invocation per value it writes: plain loops that
// the driver compiles in 10-50 ms, where conv2d.wgsl's tiled kernels take 140-220 ms (H200,
// under the start-up warm-up's load). A training step runs these until the tiled ones are
// compiled (see conv2d_direct.rs). Same bindings and parameters as conv2d.wgsl (lib/window.wgsl,
// `n` the invocation count; invocations numbered by lib/linear.wgsl); with k = (c, kh, kw) and
// s = (oh, ow):
//
//   conv2d_direct_forward      out[n, o, s] = bias[o] + Σ_k W[o, k] · x under the window of s
//   conv2d_direct_input_grad   dX[n, c, h, w] = Σ_(o, kh, kw) W[o, c, kh, kw] · grad[n, o, oh, ow]
//                              over the (oh, ow) whose window reads (h, w) through (kh, kw)
//   conv2d_direct_weight_grad  out[n, o, k] = Σ_s grad[n, o, s] · x under tap k of window s:
//                              one sample's share of dW; the dispatcher sums over the batch

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> grad: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// Input row (or column) read at output row `o` through kernel row `k`; negative in the padding.
fn input_at(o: u32, k: u32, stride: u32, dilation: u32, pad: u32) -> i32 {
    return i32(o * stride + k * dilation) - i32(pad);
}

// Output row (or column) whose window reads input row `i` through kernel row `k`, or -1 if none.
fn output_at(i: u32, k: u32, stride: u32, dilation: u32, pad: u32, extent: u32) -> i32 {
    let shifted = i32(i + pad) - i32(k * dilation);
    if shifted < 0 || u32(shifted) % stride != 0u || u32(shifted) / stride >= extent {
        return -1;
    }
    return shifted / i32(stride);
}

@compute @workgroup_size(256)
fn conv2d_direct_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let spatial = p.out_h * p.out_w;
    let s = i % spatial;
    let o = i / spatial % p.out_channels;
    let nb = i / (spatial * p.out_channels);
    let cg = p.channels / p.groups;
    let c0 = o / (p.out_channels / p.groups) * cg;
    let oy = s / p.out_w;
    let ox = s % p.out_w;
    var acc = 0.0;
    for (var c = 0u; c < cg; c++) {
        let x_plane = (nb * p.channels + c0 + c) * p.in_h * p.in_w;
        let w_plane = (o * cg + c) * p.kernel_h * p.kernel_w;
        for (var ky = 0u; ky < p.kernel_h; ky++) {
            let iy = input_at(oy, ky, p.stride_h, p.dilation_h, p.pad_h);
            if iy < 0 || u32(iy) >= p.in_h {
                continue;
            }
            for (var kx = 0u; kx < p.kernel_w; kx++) {
                let ix = input_at(ox, kx, p.stride_w, p.dilation_w, p.pad_w);
                if ix >= 0 && u32(ix) < p.in_w {
                    acc = fma(weight[w_plane + ky * p.kernel_w + kx], x[x_plane + u32(iy) * p.in_w + u32(ix)], acc);
                }
            }
        }
    }
    if p.has_bias != 0u {
        acc += bias[o];
    }
    out[i] = acc;
}

@compute @workgroup_size(256)
fn conv2d_direct_input_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                            @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let plane = p.in_h * p.in_w;
    let iy = i % plane / p.in_w;
    let ix = i % p.in_w;
    let c = i / plane % p.channels;
    let nb = i / (plane * p.channels);
    let cg = p.channels / p.groups;
    let og = p.out_channels / p.groups;
    let o0 = c / cg * og;
    let spatial = p.out_h * p.out_w;
    let taps = p.kernel_h * p.kernel_w;
    var acc = 0.0;
    for (var ky = 0u; ky < p.kernel_h; ky++) {
        let oy = output_at(iy, ky, p.stride_h, p.dilation_h, p.pad_h, p.out_h);
        if oy < 0 {
            continue;
        }
        for (var kx = 0u; kx < p.kernel_w; kx++) {
            let ox = output_at(ix, kx, p.stride_w, p.dilation_w, p.pad_w, p.out_w);
            if ox < 0 {
                continue;
            }
            let g0 = (nb * p.out_channels + o0) * spatial + u32(oy) * p.out_w + u32(ox);
            let w0 = (o0 * cg + c % cg) * taps + ky * p.kernel_w + kx;
            for (var o = 0u; o < og; o++) {
                acc = fma(weight[w0 + o * cg * taps], grad[g0 + o * spatial], acc);
            }
        }
    }
    out[i] = acc;
}

@compute @workgroup_size(256)
fn conv2d_direct_weight_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                             @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let cg = p.channels / p.groups;
    let taps = p.kernel_h * p.kernel_w;
    let k = i % (cg * taps);
    let o = i / (cg * taps) % p.out_channels;
    let nb = i / (cg * taps * p.out_channels);
    let c = o / (p.out_channels / p.groups) * cg + k / taps;
    let ky = k % taps / p.kernel_w;
    let kx = k % p.kernel_w;
    let x_plane = (nb * p.channels + c) * p.in_h * p.in_w;
    let g_plane = (nb * p.out_channels + o) * p.out_h * p.out_w;
    var acc = 0.0;
    for (var oy = 0u; oy < p.out_h; oy++) {
        let iy = input_at(oy, ky, p.stride_h, p.dilation_h, p.pad_h);
        if iy < 0 || u32(iy) >= p.in_h {
            continue;
        }
        for (var ox = 0u; ox < p.out_w; ox++) {
            let ix = input_at(ox, kx, p.stride_w, p.dilation_w, p.pad_w);
            if ix >= 0 && u32(ix) < p.in_w {
                acc = fma(grad[g_plane + oy * p.out_w + ox], x[x_plane + u32(iy) * p.in_w + u32(ix)], acc);
            }
        }
    }
    out[i] = acc;
}
