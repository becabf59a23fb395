//! `lstm_forward.wgsl`, `lstm_backward.wgsl`, `gru_forward.wgsl` and `gru_backward.wgsl`: one
//! direction of a recurrent layer over whole sequences (layouts in [`RecurrentArgs`]). Each is a
//! single dispatch for the whole sequence: one workgroup per sequence of the batch walks every
//! step, with a storage barrier between steps, so the sequence costs one dispatch in the
//! encoder's one submission.

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::WgpuBackend;
use crate::backend::{DType, RecurrentArgs, RecurrentCell, Storage};
use crate::{Error, Result};

use Access::{Read as R, Write as W};

const OP: &str = "recurrent";

kernel_params! {
    /// The four recurrent kernels: `batch` sequences of `steps` steps, `hidden` units, walked
    /// backwards in time when `reverse` is 1.
    struct RecurrentParams {
        batch: u32,
        steps: u32,
        hidden: u32,
        reverse: u32,
    }
}

fn params(a: &RecurrentArgs, c0: bool) -> Result<RecurrentParams> {
    a.check(OP)?;
    if (a.cell == RecurrentCell::Lstm) != c0 {
        return Err(Error::invalid(OP, "an LSTM takes c0, a GRU does not"));
    }
    let largest = a.saved_len().max(a.packed_len()).max(a.projection_len()).max(a.width() * a.hidden);
    if u32::try_from(largest).is_err() {
        return Err(Error::invalid(OP, format!("{largest} elements exceed the kernels' 32-bit indices")));
    }
    Ok(RecurrentParams {
        batch: a.batch as u32,
        steps: a.steps as u32,
        hidden: a.hidden as u32,
        reverse: a.reverse as u32,
    })
}

impl WgpuBackend {
    pub(super) fn recurrent_forward_kernel(
        &self,
        xproj: &Storage,
        w_hh_t: &Storage,
        b_hh: &Storage,
        h0: &Storage,
        c0: Option<&Storage>,
        a: &RecurrentArgs,
    ) -> Result<(Storage, Storage)> {
        let p = params(a, c0.is_some())?;
        let (xproj, w_t) = (self.gpu(xproj, DType::F32, OP)?, self.gpu(w_hh_t, DType::F32, OP)?);
        let (b_hh, h0) = (self.gpu(b_hh, DType::F32, OP)?, self.gpu(h0, DType::F32, OP)?);
        let state = a.batch * a.hidden;
        for (s, len) in [(xproj, a.projection_len()), (w_t, a.width() * a.hidden), (b_hh, a.width()), (h0, state)] {
            check_len(OP, s, len)?;
        }
        let packed = self.alloc(a.packed_len(), DType::F32, OP)?;
        let saved = self.alloc(a.saved_len(), DType::F32, OP)?;
        let groups = self.groups_rows(a.batch);
        match c0 {
            Some(c0) => {
                let c0 = self.gpu(c0, DType::F32, OP)?;
                check_len(OP, c0, state)?;
                let buffers = [bind(xproj), bind(w_t), bind(b_hh), bind(h0), bind(c0), bind(&packed), bind(&saved)];
                let signature = [R, R, R, R, R, W, W];
                self.run(&pipelines::LSTM_FORWARD, "lstm_forward", &signature, &p, &buffers, groups)?;
            }
            None => {
                let buffers = [bind(xproj), bind(w_t), bind(b_hh), bind(h0), bind(&packed), bind(&saved)];
                let signature = [R, R, R, R, W, W];
                self.run(&pipelines::GRU_FORWARD, "gru_forward", &signature, &p, &buffers, groups)?;
            }
        }
        Ok((self.output(packed), self.output(saved)))
    }

    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub(super) fn recurrent_backward_kernel(
        &self,
        dpacked: &Storage,
        saved: &Storage,
        packed: &Storage,
        w_hh: &Storage,
        h0: &Storage,
        c0: Option<&Storage>,
        a: &RecurrentArgs,
    ) -> Result<(Storage, Option<Storage>, Storage, Option<Storage>)> {
        let p = params(a, c0.is_some())?;
        let (dpacked, saved) = (self.gpu(dpacked, DType::F32, OP)?, self.gpu(saved, DType::F32, OP)?);
        let (packed, w_hh) = (self.gpu(packed, DType::F32, OP)?, self.gpu(w_hh, DType::F32, OP)?);
        let h0 = self.gpu(h0, DType::F32, OP)?;
        let state = a.batch * a.hidden;
        let lens = [
            (dpacked, a.packed_len()),
            (saved, a.saved_len()),
            (packed, a.packed_len()),
            (w_hh, a.width() * a.hidden),
            (h0, state),
        ];
        for (s, len) in lens {
            check_len(OP, s, len)?;
        }
        let dgx = self.alloc(a.projection_len(), DType::F32, OP)?;
        let dh = self.alloc(state, DType::F32, OP)?;
        let groups = self.groups_rows(a.batch);
        match c0 {
            Some(c0) => {
                let c0 = self.gpu(c0, DType::F32, OP)?;
                check_len(OP, c0, state)?;
                let dc = self.alloc(state, DType::F32, OP)?;
                let buffers = [bind(dpacked), bind(saved), bind(w_hh), bind(c0), bind(&dgx), bind(&dh), bind(&dc)];
                let signature = [R, R, R, R, W, W, W];
                self.run(&pipelines::LSTM_BACKWARD, "lstm_backward", &signature, &p, &buffers, groups)?;
                Ok((self.output(dgx), None, self.output(dh), Some(self.output(dc))))
            }
            None => {
                let dgh = self.alloc(a.projection_len(), DType::F32, OP)?;
                let buffers =
                    [bind(dpacked), bind(saved), bind(packed), bind(w_hh), bind(h0), bind(&dgx), bind(&dgh), bind(&dh)];
                let signature = [R, R, R, R, R, W, W, W];
                self.run(&pipelines::GRU_BACKWARD, "gru_backward", &signature, &p, &buffers, groups)?;
                Ok((self.output(dgx), Some(self.output(dgh)), self.output(dh), None))
            }
        }
    }
}
