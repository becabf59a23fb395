// Elementwise `lhs op rhs` over two strided views of the output shape (broadcast axes have
// stride 0); `op` is BinaryOp::code() (the OP_* constants placed before this file by
// backend/wgpu/elementwise.rs). Shapes are padded to rank 8. The output is contiguous.
// `binary` makes one output each, outputs `start`.. (a `binary_vec4` launch's tail);
// `binary_vec4*` make four (outputs 4q..4q+3) with 16-byte loads and stores, where the host has
// checked that the innermost axis has a multiple of 4 elements (or, flat, that its first
// n / 4 * 4 are done here) and that each operand along it is either contiguous with a 16-byte
// aligned start (offset and every outer stride multiples of 4) or, for at most one of them, one
// element (stride 0: `_splat_lhs` / `_splat_rhs`, which read it through the scalar view).
// The vec4 views alias the same bindings; no entry point uses both views of one binding.

struct Params {
    n: u32,
    op: u32,
    rank: u32,
    contiguous: u32,
    lhs_offset: u32,
    rhs_offset: u32,
    // binary: the first output made; binary_vec4: outputs 0..n / 4 * 4 are made.
    start: u32,
    // binary_vec4*: bit 0 set where lhs is splat along the innermost axis, bit 1 for rhs.
    splat: u32,
    shape: array<vec4<u32>, 2>,
    lhs_strides: array<vec4<u32>, 2>,
    rhs_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> lhs: array<f32>;
@group(0) @binding(2) var<storage, read> rhs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> lhs4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> rhs4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out4: array<vec4<f32>>;

fn apply(op: u32, a: f32, b: f32) -> f32 {
    switch op {
        case OP_ADD: { return a + b; }
        case OP_SUB: { return a - b; }
        case OP_MUL: { return a * b; }
        case OP_DIV: { return a / b; }
        case OP_MAXIMUM: { return max(a, b); }
        case OP_MINIMUM: { return min(a, b); }
        case OP_EQ: { return select(0.0, 1.0, a == b); }
        case OP_GT: { return select(0.0, 1.0, a > b); }
        // A residual connection's sum and the ReLU after it (RawTensor::add_relu).
        case OP_ADD_RELU: { return max(a + b, 0.0); }
        default: { return 0.0; }
    }
}

@compute @workgroup_size(256)
fn binary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = p.start + (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.n {
        return;
    }
    // The host runs this kernel with no splat flags, so `sources` walks the plain views.
    let s = sources(i);
    out[i] = apply(p.op, lhs[s.x], rhs[s.y]);
}

fn apply4(op: u32, a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(apply(op, a.x, b.x), apply(op, a.y, b.y), apply(op, a.z, b.z), apply(op, a.w, b.w));
}

// The quad of outputs this invocation makes (p.n / 4 of them; none past that).
fn quad(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + lid;
}

// The elements of lhs and rhs behind output i: flat (a splat operand stays at its offset) or
// through the strides (a splat operand's innermost stride is 0).
fn sources(i: u32) -> vec2<u32> {
    var a = p.lhs_offset;
    var b = p.rhs_offset;
    if p.contiguous == 1u {
        a += select(i, 0u, (p.splat & 1u) != 0u);
        b += select(i, 0u, (p.splat & 2u) != 0u);
    } else {
        var rest = i;
        for (var k = 0u; k < p.rank; k++) {
            let axis = p.rank - 1u - k;
            let dim = p.shape[axis / 4u][axis % 4u];
            let c = rest % dim;
            rest = rest / dim;
            a += c * p.lhs_strides[axis / 4u][axis % 4u];
            b += c * p.rhs_strides[axis / 4u][axis % 4u];
        }
    }
    return vec2<u32>(a, b);
}

// Both operands contiguous along the innermost axis.
@compute @workgroup_size(256)
fn binary_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let q = quad(wid, nwg, lid);
    if q >= p.n / 4u {
        return;
    }
    let s = sources(q * 4u);
    out4[q] = apply4(p.op, lhs4[s.x / 4u], rhs4[s.y / 4u]);
}

// lhs one element along the innermost axis (a broadcast scalar, per-row or per-channel value).
@compute @workgroup_size(256)
fn binary_vec4_splat_lhs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    let q = quad(wid, nwg, lid);
    if q >= p.n / 4u {
        return;
    }
    let s = sources(q * 4u);
    out4[q] = apply4(p.op, vec4<f32>(lhs[s.x]), rhs4[s.y / 4u]);
}

// rhs one element along the innermost axis.
@compute @workgroup_size(256)
fn binary_vec4_splat_rhs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lid: u32) {
    let q = quad(wid, nwg, lid);
    if q >= p.n / 4u {
        return;
    }
    let s = sources(q * 4u);
    out4[q] = apply4(p.op, lhs4[s.x / 4u], vec4<f32>(rhs[s.y]));
}
