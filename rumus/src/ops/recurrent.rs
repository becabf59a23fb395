//! LSTM and GRU layers over whole sequences, one direction per call, with PyTorch's semantics:
//! the LSTM's gates in the order `i, f, g, o`, the GRU's `r, z, n` with
//! `n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))` and `h' = (1 − z) ⊙ n + z ⊙ h`.
//!
//! The input projection of every time step is one matmul (`[B·T, F] × [F, G·H]`, G the gates);
//! the recurrence then runs the device's fused kernel
//! ([`Backend::recurrent_forward`](crate::backend::Backend::recurrent_forward): per step the
//! recurrent mat-vec, the gates and the state update). Its backward runs the fused
//! backpropagation through time and computes the recurrent weight's gradient as one matmul
//! over all time steps after the loop; the input weight's gradient comes from the projection's
//! matmul, also one over all time steps.

use crate::autograd::BackwardOp;
use crate::backend::{RecurrentArgs, RecurrentCell};
use crate::tensor::RawTensor;
use crate::{no_grad, Error, Result};

/// The weights of one direction of one recurrent layer, in PyTorch's layouts: `w_ih [G·H, F]`,
/// `w_hh [G·H, H]`, `b_ih` and `b_hh` `[G·H]` (G = 4 for the LSTM, 3 for the GRU; gates stacked
/// in PyTorch's order).
#[derive(Clone, Copy, Debug)]
pub struct RecurrentWeights<'a> {
    /// `[G·H, F]`: PyTorch's `weight_ih_l{k}`.
    pub w_ih: &'a RawTensor,
    /// `[G·H, H]`: PyTorch's `weight_hh_l{k}`.
    pub w_hh: &'a RawTensor,
    /// `[G·H]`: PyTorch's `bias_ih_l{k}`; `None` for a layer without biases.
    pub b_ih: Option<&'a RawTensor>,
    /// `[G·H]`: PyTorch's `bias_hh_l{k}`; `None` for a layer without biases.
    pub b_hh: Option<&'a RawTensor>,
}

/// The result of [`RawTensor::lstm`] or [`RawTensor::gru`].
#[derive(Clone, Debug)]
pub struct RecurrentOutput {
    /// `[B, T, H]`: the hidden state at every time step, in time order (also when reversed).
    pub y: RawTensor,
    /// `[B, H]`: the hidden state after the last processed step (time 0 when reversed).
    pub h_n: RawTensor,
    /// `[B, H]`: the LSTM's cell state after the last processed step; `None` for the GRU.
    pub c_n: Option<RawTensor>,
}

/// The fused recurrence's backward. Inputs: the projection `[B, T, G·H]`, `w_hh`, `b_hh`,
/// `h0` and (LSTM) `c0`; the output is the packed `[B, T + states, H]`.
struct RecurrentBackward {
    packed: RawTensor,
    saved: RawTensor,
    args: RecurrentArgs,
}

impl RecurrentBackward {
    /// `[B·T, H]`: the hidden state each step started from (h0 for the first processed step).
    fn previous_states(&self, h0: &RawTensor) -> Result<RawTensor> {
        let a = &self.args;
        let (b, t, h) = (a.batch, a.steps, a.hidden);
        let y = self.packed.narrow(1, 0, t)?;
        let h0 = h0.reshape(&[b, 1, h])?;
        let prev = match (t, a.reverse) {
            (1, _) => h0,
            (_, false) => RawTensor::concat(&[&h0, &y.narrow(1, 0, t - 1)?], 1)?,
            (_, true) => RawTensor::concat(&[&y.narrow(1, 1, t)?, &h0], 1)?,
        };
        prev.contiguous()?.reshape(&[b * t, h])
    }
}

impl BackwardOp for RecurrentBackward {
    fn name(&self) -> &'static str {
        match self.args.cell {
            RecurrentCell::Lstm => "lstm",
            RecurrentCell::Gru => "gru",
        }
    }
    fn backward(&self, inputs: &[RawTensor], grad: &RawTensor) -> Result<Vec<Option<RawTensor>>> {
        let op = self.name();
        let (xproj, w_hh, b_hh, h0) = match inputs {
            [x, w, b, h0, ..] => (x, w, b, h0),
            _ => return Err(Error::invalid(op, format!("backward expects 4 or 5 inputs, got {}", inputs.len()))),
        };
        let c0 = inputs.get(4);
        let a = self.args;
        let dpacked = grad.contiguous()?;
        let w = w_hh.contiguous()?;
        let device = xproj.device();
        let (dgx, dgh, dh0, dc0) = device.backend().recurrent_backward(
            dpacked.storage(),
            self.saved.storage(),
            self.packed.storage(),
            w.storage(),
            h0.storage(),
            c0.map(|c| c.storage()),
            &a,
        )?;
        let width = a.width();
        let dgx = RawTensor::from_kernel(dgx, &[a.batch, a.steps, width], device);
        let dgh = match dgh {
            Some(s) => RawTensor::from_kernel(s, &[a.batch, a.steps, width], device),
            None => dgx.clone(),
        };
        let rows = a.batch * a.steps;
        let dw = w_hh
            .requires_grad()
            .then(|| dgh.reshape(&[rows, width])?.transpose(0, 1)?.matmul(&self.previous_states(h0)?))
            .transpose()?;
        let db = b_hh.requires_grad().then(|| dgh.sum(&[0, 1], false)).transpose()?;
        let dh0 = h0.requires_grad().then(|| RawTensor::from_kernel(dh0, &[a.batch, a.hidden], device));
        let mut grads = vec![xproj.requires_grad().then_some(dgx), dw, db, dh0];
        if let Some(c0) = c0 {
            grads.push(
                c0.requires_grad()
                    .then(|| dc0.map(|s| RawTensor::from_kernel(s, &[a.batch, a.hidden], device)))
                    .flatten(),
            );
        }
        Ok(grads)
    }
}

/// Checks that `t` is f32 on `x`'s device with `shape`.
fn check_operand(op: &'static str, what: &str, x: &RawTensor, t: &RawTensor, shape: &[usize]) -> Result<()> {
    t.check_f32(op)?;
    x.check_same_device(op, t)?;
    if t.shape() != shape {
        return Err(Error::shape(op, format!("{what} {:?} must be {shape:?} (input {:?})", t.shape(), x.shape())));
    }
    Ok(())
}

/// Validates the input and the weights and returns `(batch, steps, features, hidden)`.
fn check_recurrent(
    op: &'static str,
    cell: RecurrentCell,
    x: &RawTensor,
    w: &RecurrentWeights<'_>,
    h0: Option<&RawTensor>,
    c0: Option<&RawTensor>,
) -> Result<(usize, usize, usize, usize)> {
    x.check_f32(op)?;
    let &[batch, steps, features] = x.shape() else {
        return Err(Error::shape(op, format!("input {:?}: expected [batch, steps, features]", x.shape())));
    };
    let gates = cell.gates();
    let (rows, hidden) = match w.w_hh.shape() {
        &[rows, hidden] => (rows, hidden),
        s => return Err(Error::shape(op, format!("w_hh {s:?}: expected [{gates}·hidden, hidden]"))),
    };
    if hidden == 0 || rows != gates * hidden {
        return Err(Error::shape(op, format!("w_hh {:?}: expected [{gates}·hidden, hidden]", w.w_hh.shape())));
    }
    check_operand(op, "w_hh", x, w.w_hh, &[rows, hidden])?;
    check_operand(op, "w_ih", x, w.w_ih, &[rows, features])?;
    for (what, b) in [("b_ih", w.b_ih), ("b_hh", w.b_hh)] {
        if let Some(b) = b {
            check_operand(op, what, x, b, &[rows])?;
        }
    }
    if let Some(h0) = h0 {
        check_operand(op, "h0", x, h0, &[batch, hidden])?;
    }
    match (cell, c0) {
        (RecurrentCell::Lstm, Some(c0)) => check_operand(op, "c0", x, c0, &[batch, hidden])?,
        (RecurrentCell::Gru, Some(_)) => return Err(Error::invalid(op, "a GRU has no cell state c0")),
        _ => {}
    }
    if batch == 0 || steps == 0 || features == 0 {
        return Err(Error::shape(op, format!("input {:?}: every axis must be non-empty", x.shape())));
    }
    Ok((batch, steps, features, hidden))
}

/// One direction of an LSTM or a GRU over `x [B, T, F]`.
fn recurrent(
    op: &'static str,
    cell: RecurrentCell,
    x: &RawTensor,
    w: &RecurrentWeights<'_>,
    h0: Option<&RawTensor>,
    c0: Option<&RawTensor>,
    reverse: bool,
) -> Result<RecurrentOutput> {
    let (batch, steps, features, hidden) = check_recurrent(op, cell, x, w, h0, c0)?;
    let args = RecurrentArgs { cell, batch, steps, hidden, reverse };
    args.check(op)?;
    let width = args.width();
    let device = x.device();
    // One matmul projects every time step: [B·T, F] × [F, G·H].
    let rows = crate::layout::checked_mul(op, "batch x steps", batch, steps)?;
    let xproj = x.contiguous()?.reshape(&[rows, features])?.matmul(&w.w_ih.transpose(0, 1)?)?;
    let xproj = match w.b_ih {
        Some(b) => xproj.add(b)?,
        None => xproj,
    };
    let xproj = xproj.contiguous()?.reshape(&[batch, steps, width])?;
    let b_hh = match w.b_hh {
        Some(b) => b.contiguous()?,
        None => RawTensor::zeros(&[width], device)?,
    };
    let state = |given: Option<&RawTensor>| match given {
        Some(s) => s.contiguous(),
        None => RawTensor::zeros(&[batch, hidden], device),
    };
    let h0 = state(h0)?;
    let c0 = (cell == RecurrentCell::Lstm).then(|| state(c0)).transpose()?;
    let w_hh_t = no_grad(|| w.w_hh.transpose(0, 1)?.contiguous())?;
    let (packed, saved) = device.backend().recurrent_forward(
        xproj.storage(),
        w_hh_t.storage(),
        b_hh.storage(),
        h0.storage(),
        c0.as_ref().map(|c| c.storage()),
        &args,
    )?;
    let shape = [batch, steps + cell.states(), hidden];
    let saved_packed = RawTensor::from_kernel(packed.clone(), &shape, device);
    let saved = RawTensor::from_kernel(saved, &[batch, steps, cell.saved() * hidden], device);
    let inputs: Vec<&RawTensor> =
        [Some(&xproj), Some(w.w_hh), Some(&b_hh), Some(&h0), c0.as_ref()].into_iter().flatten().collect();
    let packed = RawTensor::from_op_contiguous(packed, &shape, device, &inputs, || {
        Box::new(RecurrentBackward { packed: saved_packed, saved, args })
    });
    let y = packed.narrow(1, 0, steps)?;
    let h_n = packed.narrow(1, steps, steps + 1)?.squeeze(1)?;
    let c_n = (cell == RecurrentCell::Lstm).then(|| packed.narrow(1, steps + 1, steps + 2)?.squeeze(1)).transpose()?;
    Ok(RecurrentOutput { y, h_n, c_n })
}

impl RawTensor {
    /// One direction of an LSTM layer over `self [B, T, F]` (PyTorch's `nn.LSTM` with
    /// `batch_first=True`, gates `i, f, g, o`), from `h0` and `c0` `[B, H]` (zeros when `None`),
    /// walking the steps from last to first when `reverse` (the backward direction of a
    /// bidirectional layer). Differentiable in the input, every weight and the initial states.
    pub fn lstm(
        &self,
        weights: &RecurrentWeights<'_>,
        h0: Option<&RawTensor>,
        c0: Option<&RawTensor>,
        reverse: bool,
    ) -> Result<RecurrentOutput> {
        recurrent("lstm", RecurrentCell::Lstm, self, weights, h0, c0, reverse)
    }

    /// One direction of a GRU layer over `self [B, T, F]` (PyTorch's `nn.GRU` with
    /// `batch_first=True`, gates `r, z, n`), from `h0 [B, H]` (zeros when `None`), walking the
    /// steps from last to first when `reverse`. `c_n` of the result is `None`.
    pub fn gru(
        &self,
        weights: &RecurrentWeights<'_>,
        h0: Option<&RawTensor>,
        reverse: bool,
    ) -> Result<RecurrentOutput> {
        recurrent("gru", RecurrentCell::Gru, self, weights, h0, None, reverse)
    }
}
