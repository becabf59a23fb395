// Shared by lstm_forward.wgsl, lstm_backward.wgsl, gru_forward.wgsl and gru_backward.wgsl
// (placed before them by backend/wgpu/pipelines.rs, after lib/logistic.wgsl, which gives the
// gates' sigmoid and stable_tanh): their parameters, the workgroup width and the time order.
// Each workgroup owns one sequence of the batch (sequences walked with a grid stride) and all
// its steps; its invocations split the hidden units, and a storage barrier per step makes each
// step's states visible to the whole workgroup before the next step reads them. Mirrors
// rumus/src/backend/cpu/recurrent.rs.

struct Params {
    batch: u32,
    steps: u32,
    hidden: u32,
    reverse: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

const RNN_WG: u32 = 128u;

// The time index of processing step s.
fn time_of(s: u32) -> u32 {
    return select(s, p.steps - 1u - s, p.reverse == 1u);
}
