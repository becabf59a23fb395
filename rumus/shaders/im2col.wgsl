// [n, c, h, w] -> columns [n, c*kh*kw, oh*ow]; one invocation per column element, zero where the
// window reaches into padding. Mirrors im2col in rumus/src/backend/cpu/conv.rs. The window's
// parameters are in lib/window.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> cols: array<f32>;

@compute @workgroup_size(256)
fn im2col(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.n {
        return;
    }
    let spatial = p.out_h * p.out_w;
    let taps = p.kernel_h * p.kernel_w;
    let s = i % spatial;
    let tap = (i / spatial) % taps;
    let nc = i / (spatial * taps);
    let oi = s / p.out_w;
    let oj = s % p.out_w;
    let ki = tap / p.kernel_w;
    let kj = tap % p.kernel_w;
    let ii = i32(oi * p.stride_h + ki * p.dilation_h) - i32(p.pad_h);
    let ij = i32(oj * p.stride_w + kj * p.dilation_w) - i32(p.pad_w);
    var v = 0.0;
    if ii >= 0 && ii < i32(p.in_h) && ij >= 0 && ij < i32(p.in_w) {
        v = x[nc * p.in_h * p.in_w + u32(ii) * p.in_w + u32(ij)];
    }
    cols[i] = v;
}
