// Elementwise `lhs op rhs` over two strided views of the output shape (broadcast axes have
// stride 0); `op` is BinaryOp::code() (the OP_* constants placed before this file by
// backend/wgpu/elementwise.rs). Shapes are padded to rank 8. The output is contiguous.

struct Params {
    n: u32,
    op: u32,
    rank: u32,
    contiguous: u32,
    lhs_offset: u32,
    rhs_offset: u32,
    pad0: u32,
    pad1: u32,
    shape: array<vec4<u32>, 2>,
    lhs_strides: array<vec4<u32>, 2>,
    rhs_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> lhs: array<f32>;
@group(0) @binding(2) var<storage, read> rhs: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

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
        default: { return 0.0; }
    }
}

@compute @workgroup_size(256)
fn binary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.n {
        return;
    }
    var a = p.lhs_offset;
    var b = p.rhs_offset;
    if p.contiguous == 1u {
        a += i;
        b += i;
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
    out[i] = apply(p.op, lhs[a], rhs[b]);
}
