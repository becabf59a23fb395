// Reading the output gradient `dout` (bound by the kernels of the keys' side, which include
// this file), as lib/attention_tiles.wgsl reads q, k and v.

// Elements 4*c4 .. 4*c4+4 of the row of dout that starts at element `at`, zero at and beyond d
// (see load_q).
fn load_dout(at: u32, c4: u32) -> vec4<f32> {
    let c = c4 * 4u;
    let i = at + c;
    if c + 4u <= p.d {
        return vec4<f32>(dout[i], dout[i + 1u], dout[i + 2u], dout[i + 3u]);
    }
    var x = vec4<f32>(0.0);
    for (var e = 0u; e < 4u && c + e < p.d; e++) {
        x[e] = dout[i + e];
    }
    return x;
}
