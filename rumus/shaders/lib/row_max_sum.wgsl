// Shared by softmax.wgsl and cross_entropy.wgsl, after a reduction prelude (wg_sum, wg_max):
// the row's max and sum(exp(x - max)) in one read of the row. Each invocation keeps a running
// (max, sum) pair, rescaling its sum when the max grows; the pairs then combine across the
// workgroup. Identical in every invocation. Reads the including file's `x` and `p.neg_inf`.
fn row_max_sum(base: u32, len: u32, lid: u32) -> vec2<f32> {
    var m = p.neg_inf;
    var s = 0.0;
    for (var j = lid; j < len; j += RED_WG) {
        let v = x[base + j];
        if v > m {
            s = s * exp(m - v) + 1.0;
            m = v;
        } else if v != p.neg_inf {
            s += exp(v - m);
        }
    }
    let row_max = wg_max(m, lid);
    // An invocation that saw only -inf holds s = 0 and must not turn exp(-inf - -inf) into NaN.
    let scaled = select(s * exp(m - row_max), 0.0, m == p.neg_inf);
    return vec2<f32>(row_max, wg_sum(scaled, lid));
}
