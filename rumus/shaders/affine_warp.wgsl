// Per-sample affine resampling of x [batch, channels, height, width] into the same shape: the
// sample's coefficients m[6n..6n+6] = [a, b, c, d, e, f] map the output pixel (x, y) (column,
// row) to the source (a*x + b*y + c, d*x + e*y + f), read by the nearest pixel
// (floor(s + 0.5)) or bilinearly (bilinear == 1); sources outside the image read zero. One
// thread per output element, 2-D dispatch.

struct Params {
    batch: u32,
    channels: u32,
    height: u32,
    width: u32,
    bilinear: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> m: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// The pixel (ix, iy) of the plane starting at `base`, zero outside.
fn pixel(base: u32, ix: i32, iy: i32) -> f32 {
    if ix < 0 || iy < 0 || ix >= i32(p.width) || iy >= i32(p.height) {
        return 0.0;
    }
    return x[base + u32(iy) * p.width + u32(ix)];
}

@compute @workgroup_size(256)
fn affine_warp(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    let plane = p.height * p.width;
    if i >= p.batch * p.channels * plane {
        return;
    }
    let j = i % plane;
    let base = i - j;
    let k = (i / plane) / p.channels * 6u;
    let px = f32(j % p.width);
    let py = f32(j / p.width);
    let sx = m[k] * px + m[k + 1u] * py + m[k + 2u];
    let sy = m[k + 3u] * px + m[k + 4u] * py + m[k + 5u];
    if p.bilinear == 1u {
        let fx0 = floor(sx);
        let fy0 = floor(sy);
        let fx = sx - fx0;
        let fy = sy - fy0;
        let x0 = i32(fx0);
        let y0 = i32(fy0);
        let top = pixel(base, x0, y0) * (1.0 - fx) + pixel(base, x0 + 1, y0) * fx;
        let bottom = pixel(base, x0, y0 + 1) * (1.0 - fx) + pixel(base, x0 + 1, y0 + 1) * fx;
        y[i] = top * (1.0 - fy) + bottom * fy;
    } else {
        y[i] = pixel(base, i32(floor(sx + 0.5)), i32(floor(sy + 0.5)));
    }
}
