// 2-D max and average pooling over NCHW planes, forward and backward. Forwards run one
// invocation per output; backwards one per input pixel, gathering the outputs whose window
// covers it (no atomics). Mirrors rumus/src/backend/cpu/conv.rs. The window's parameters are in
// lib/window.wgsl.

@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
// max_pool2d: argmax output; max_pool2d_backward: argmax input.
@group(0) @binding(3) var<storage, read_write> arg: array<u32>;

// NaN test on the bits: drivers may compile `v != v` under fast-math rules and fold it to false.
fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

@compute @workgroup_size(256)
fn max_pool2d(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let spatial = p.out_h * p.out_w;
    let nc = i / spatial;
    let oi = (i % spatial) / p.out_w;
    let oj = i % p.out_w;
    let base = nc * p.in_h * p.in_w;
    var best = 0.0;
    var best_at = 0xffffffffu;
    for (var ki = 0u; ki < p.kernel_h; ki++) {
        let ii = i32(oi * p.stride_h + ki * p.dilation_h) - i32(p.pad_h);
        if ii < 0 || ii >= i32(p.in_h) {
            continue;
        }
        for (var kj = 0u; kj < p.kernel_w; kj++) {
            let ij = i32(oj * p.stride_w + kj * p.dilation_w) - i32(p.pad_w);
            if ij < 0 || ij >= i32(p.in_w) {
                continue;
            }
            let at = u32(ii) * p.in_w + u32(ij);
            let v = src[base + at];
            if v > best || best_at == 0xffffffffu || is_nan(v) {
                best = v;
                best_at = at;
            }
        }
    }
    // A window entirely in padding yields -inf, as on the CPU.
    dst[i] = select(best, p.neg_inf, best_at == 0xffffffffu);
    arg[i] = best_at;
}

@compute @workgroup_size(256)
fn max_pool2d_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let plane = p.in_h * p.in_w;
    let nc = i / plane;
    let at = i % plane;
    let ii = at / p.in_w;
    let ij = at % p.in_w;
    let spatial = p.out_h * p.out_w;
    var acc = 0.0;
    for (var ki = 0u; ki < p.kernel_h; ki++) {
        let hi = i32(ii + p.pad_h) - i32(ki * p.dilation_h);
        if hi < 0 || u32(hi) % p.stride_h != 0u || u32(hi) / p.stride_h >= p.out_h {
            continue;
        }
        let oi = u32(hi) / p.stride_h;
        for (var kj = 0u; kj < p.kernel_w; kj++) {
            let wj = i32(ij + p.pad_w) - i32(kj * p.dilation_w);
            if wj < 0 || u32(wj) % p.stride_w != 0u || u32(wj) / p.stride_w >= p.out_w {
                continue;
            }
            let o = nc * spatial + oi * p.out_w + u32(wj) / p.stride_w;
            if arg[o] == at {
                acc += src[o];
            }
        }
    }
    dst[i] = acc;
}

// Adaptive window [floor(i*size/out), ceil((i+1)*size/out)).
fn adaptive_start(i: u32, size: u32, out: u32) -> u32 {
    return i * size / out;
}

fn adaptive_end(i: u32, size: u32, out: u32) -> u32 {
    return ((i + 1u) * size + out - 1u) / out;
}

// Input rows [start, end) of output row oi and its divisor share (kernel_h, or window height).
fn window_h(oi: u32) -> vec2<u32> {
    if p.adaptive == 1u {
        return vec2<u32>(adaptive_start(oi, p.in_h, p.out_h), adaptive_end(oi, p.in_h, p.out_h));
    }
    let h0 = oi * p.stride_h;
    let hs = select(0u, h0 - p.pad_h, h0 >= p.pad_h);
    let he_raw = h0 + p.kernel_h;
    let he = min(select(0u, he_raw - p.pad_h, he_raw >= p.pad_h), p.in_h);
    return vec2<u32>(hs, max(he, hs));
}

fn window_w(oj: u32) -> vec2<u32> {
    if p.adaptive == 1u {
        return vec2<u32>(adaptive_start(oj, p.in_w, p.out_w), adaptive_end(oj, p.in_w, p.out_w));
    }
    let w0 = oj * p.stride_w;
    let ws = select(0u, w0 - p.pad_w, w0 >= p.pad_w);
    let we_raw = w0 + p.kernel_w;
    let we = min(select(0u, we_raw - p.pad_w, we_raw >= p.pad_w), p.in_w);
    return vec2<u32>(ws, max(we, ws));
}

// Padding counts in the divisor of plain average pooling (PyTorch's default).
fn divisor(h: vec2<u32>, w: vec2<u32>) -> f32 {
    if p.adaptive == 1u {
        return f32((h.y - h.x) * (w.y - w.x));
    }
    return f32(p.kernel_h * p.kernel_w);
}

@compute @workgroup_size(256)
fn avg_pool2d(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let spatial = p.out_h * p.out_w;
    let nc = i / spatial;
    let oi = (i % spatial) / p.out_w;
    let oj = i % p.out_w;
    let base = nc * p.in_h * p.in_w;
    let h = window_h(oi);
    let w = window_w(oj);
    var sum = 0.0;
    for (var r = h.x; r < h.y; r++) {
        var row = 0.0;
        for (var c = w.x; c < w.y; c++) {
            row += src[base + r * p.in_w + c];
        }
        sum += row;
    }
    dst[i] = sum / divisor(h, w);
}

@compute @workgroup_size(256)
fn avg_pool2d_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let plane = p.in_h * p.in_w;
    let nc = i / plane;
    let ii = (i % plane) / p.in_w;
    let ij = i % p.in_w;
    let spatial = p.out_h * p.out_w;
    // Candidate output rows/cols: all for adaptive pooling, the covering range otherwise.
    var oi0 = 0u;
    var oi1 = p.out_h;
    var oj0 = 0u;
    var oj1 = p.out_w;
    if p.adaptive == 0u {
        let top = i32(ii + p.pad_h) - i32(p.kernel_h) + 1;
        oi0 = select(0u, (u32(top) + p.stride_h - 1u) / p.stride_h, top > 0);
        oi1 = min((ii + p.pad_h) / p.stride_h + 1u, p.out_h);
        let left = i32(ij + p.pad_w) - i32(p.kernel_w) + 1;
        oj0 = select(0u, (u32(left) + p.stride_w - 1u) / p.stride_w, left > 0);
        oj1 = min((ij + p.pad_w) / p.stride_w + 1u, p.out_w);
    }
    var acc = 0.0;
    for (var oi = oi0; oi < oi1; oi++) {
        let h = window_h(oi);
        if ii < h.x || ii >= h.y {
            continue;
        }
        for (var oj = oj0; oj < oj1; oj++) {
            let w = window_w(oj);
            if ij < w.x || ij >= w.y {
                continue;
            }
            acc += src[nc * spatial + oi * p.out_w + oj] / divisor(h, w);
        }
    }
    dst[i] = acc;
}
