//! Per-parameter optimizer state and its host snapshot for checkpoints.

use std::collections::BTreeMap;

use crate::nn::Param;
use crate::ops::{OptimizerStep, ParamUpdate};
use crate::{Error, Gradients, RawTensor, Result};

/// One state buffer on the host: shape and row-major values.
pub type HostBuffer = (Vec<usize>, Vec<f32>);

/// A host copy of an optimizer's state, as written to and read from checkpoints
/// (see [`crate::io::save_optimizer`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptimizerState {
    /// The optimizer's name (`"Adam"`, `"SGD"` ...); loading into another kind is an error.
    pub optimizer: String,
    /// Learning rate at the time of saving (a schedule may have changed it).
    pub learning_rate: f32,
    /// Steps taken per parameter name.
    pub steps: BTreeMap<String, u64>,
    /// Buffers per parameter name, then per buffer name (`momentum_buffer`, `exp_avg` ...):
    /// shape and row-major values.
    pub buffers: BTreeMap<String, BTreeMap<String, HostBuffer>>,
}

/// The largest step count a parameter may have: the fused kernels compute Adam's bias
/// correction `1 - β^step` with an i32 exponent, and one more step must still fit.
pub const MAX_STEPS: u64 = i32::MAX as u64 - 1;

impl OptimizerState {
    /// Checks every field as untrusted input (a state file may be corrupt or hostile): a
    /// finite, non-negative learning rate; step counts in `1..=MAX_STEPS`; buffers only for
    /// parameters with a step count, with as many finite values as their shape holds, second
    /// moments (`*_sq`, `square_avg`) non-negative. The error names the field and its value.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let lr = self.learning_rate;
        if !(lr.is_finite() && lr >= 0.0) {
            return Err(format!("learning_rate = {lr} must be finite and non-negative"));
        }
        for (name, &steps) in &self.steps {
            if !(1..=MAX_STEPS).contains(&steps) {
                return Err(format!("steps of `{name}` = {steps} must be in 1..={MAX_STEPS}"));
            }
        }
        for (param, buffers) in &self.buffers {
            if !self.steps.contains_key(param) {
                return Err(format!("buffers for `{param}`, which has no step count"));
            }
            for (buffer, (shape, values)) in buffers {
                check_buffer(&format!("{param}.{buffer}"), buffer, shape, values)?;
            }
        }
        Ok(())
    }
}

/// One saved buffer: its size matches its shape, its values are finite, second moments >= 0.
fn check_buffer(key: &str, buffer: &str, shape: &[usize], values: &[f32]) -> std::result::Result<(), String> {
    let numel = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if numel != Some(values.len()) {
        return Err(format!("`{key}` has shape {shape:?} but {} values", values.len()));
    }
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(format!("`{key}`[{i}] = {v} is not finite"));
    }
    let second_moment = buffer.ends_with("_sq") || buffer == "square_avg";
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| second_moment && **v < 0.0) {
        return Err(format!("`{key}`[{i}] = {v}: a second moment cannot be negative"));
    }
    Ok(())
}

/// The `learning_rate`, `set_learning_rate`, `state` and `load_state` methods of an optimizer
/// whose learning rate is `self<path>.lr` and whose per-parameter state is the [`StateTable`]
/// `self<path>.state` (`<path>` is empty, or `.0` for a newtype): the same for every optimizer.
macro_rules! lr_and_state_methods {
    ($($path:tt)*) => {
        fn learning_rate(&self) -> f32 {
            self$($path)*.lr
        }

        fn set_learning_rate(&mut self, lr: f32) {
            self$($path)*.lr = lr;
        }

        fn state(&self) -> Result<OptimizerState> {
            self$($path)*.state.export(self.name(), self$($path)*.lr)
        }

        fn load_state(&mut self, state: &OptimizerState, params: &[(String, Param)]) -> Result<()> {
            state.validate().map_err(|detail| crate::Error::invalid("optimizer load_state", detail))?;
            self$($path)*.state.import(self.name(), state, params)?;
            self$($path)*.lr = state.learning_rate;
            Ok(())
        }
    };
}
pub(crate) use lr_and_state_methods;

/// One parameter's step count and state buffers on its device.
struct Slot {
    steps: u64,
    buffers: Vec<RawTensor>,
}

impl std::fmt::Debug for StateTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateTable({} parameters)", self.slots.len())
    }
}

/// State of every parameter an optimizer has updated, plus the loop that feeds the fused kernel.
pub(crate) struct StateTable {
    buffer_names: &'static [&'static str],
    slots: BTreeMap<String, Slot>,
}

impl StateTable {
    pub(crate) fn new(buffer_names: &'static [&'static str]) -> Self {
        StateTable { buffer_names, slots: BTreeMap::new() }
    }

    /// Runs the fused update for each trainable parameter with a gradient. `make_step` gets the
    /// 1-based step count of that parameter, its name and the parameter, and returns the kernel
    /// arguments.
    pub(crate) fn step(
        &mut self,
        params: &[(String, Param)],
        grads: &Gradients,
        mut make_step: impl FnMut(u64, &str, &Param) -> OptimizerStep,
    ) -> Result<()> {
        let _no_grad = crate::autograd::NoGradGuard::new();
        // Each parameter with its gradient and its step count after this step, all checked before
        // anything changes.
        let mut stepped: Vec<(&String, &Param, &RawTensor, u64)> = Vec::new();
        // Buffers are never updated, and a tied weight is stepped once, under its first name.
        for (name, param) in crate::nn::unique_trainable(params) {
            let Some(grad) = grads.get(param.tensor()) else {
                continue;
            };
            let value = param.tensor();
            if grad.shape() != value.shape() {
                return Err(Error::shape(
                    "optimizer step",
                    format!("gradient of `{name}` has shape {:?}, parameter {:?}", grad.shape(), value.shape()),
                ));
            }
            value.check_same_device("optimizer step", grad)?;
            let taken = self.slots.get(name).map_or(0, |slot| slot.steps);
            let steps = taken.checked_add(1).filter(|s| *s <= MAX_STEPS + 1).ok_or_else(|| {
                Error::invalid("optimizer step", format!("`{name}` has taken {taken} steps, the most there can be"))
            })?;
            stepped.push((name, param, grad, steps));
        }
        let mut created = Vec::new();
        for &(name, param, ..) in &stepped {
            if !self.slots.contains_key(name) {
                let buffers = self.buffer_names.iter().map(|_| param.tensor().zeros_like()).collect::<Result<Vec<_>>>();
                self.slots.insert(name.clone(), Slot { steps: 0, buffers: buffers? });
                created.push(name);
            }
        }
        let steps: Vec<OptimizerStep> =
            stepped.iter().map(|&(name, param, _, steps)| make_step(steps, name, param)).collect();
        let updates = stepped
            .iter()
            .zip(&steps)
            .map(|(&(name, param, grad, _), &step)| {
                let slot =
                    self.slots.get(name).ok_or_else(|| Error::invalid("optimizer step", "a slot went missing"))?;
                Ok(ParamUpdate { step, param: param.tensor(), grad, state: &slot.buffers })
            })
            .collect::<Result<Vec<_>>>()
            .and_then(|updates| crate::ops::optimizer_steps(&updates));
        if let Err(e) = updates {
            // A failed step leaves no state behind that it did not have.
            for name in created {
                self.slots.remove(name);
            }
            return Err(e);
        }
        for &(name, _, _, steps) in &stepped {
            if let Some(slot) = self.slots.get_mut(name) {
                slot.steps = steps;
            }
        }
        Ok(())
    }

    pub(crate) fn export(&self, optimizer: &str, learning_rate: f32) -> Result<OptimizerState> {
        let mut state = OptimizerState { optimizer: optimizer.to_string(), learning_rate, ..Default::default() };
        for (name, slot) in &self.slots {
            state.steps.insert(name.clone(), slot.steps);
            let mut buffers = BTreeMap::new();
            for (buffer_name, buffer) in self.buffer_names.iter().zip(&slot.buffers) {
                buffers.insert(buffer_name.to_string(), (buffer.shape().to_vec(), buffer.to_vec()?));
            }
            state.buffers.insert(name.clone(), buffers);
        }
        Ok(state)
    }

    pub(crate) fn import(&mut self, optimizer: &str, state: &OptimizerState, params: &[(String, Param)]) -> Result<()> {
        let op = "optimizer load_state";
        if state.optimizer != optimizer {
            return Err(Error::invalid(op, format!("state was saved by {}, not {optimizer}", state.optimizer)));
        }
        let unknown: Vec<&String> = state.steps.keys().filter(|name| !params.iter().any(|(n, _)| n == *name)).collect();
        if !unknown.is_empty() {
            return Err(Error::invalid(op, format!("state for parameters the model does not have: {unknown:?}")));
        }
        for (name, buffers) in &state.buffers {
            if let Some(extra) = buffers.keys().find(|b| !self.buffer_names.contains(&b.as_str())) {
                return Err(Error::invalid(op, format!("`{name}.{extra}` is not a buffer of {optimizer}")));
            }
        }
        let mut slots = BTreeMap::new();
        for (name, param) in params {
            let Some(&steps) = state.steps.get(name) else {
                continue;
            };
            let saved = state.buffers.get(name);
            let mut buffers = Vec::new();
            for buffer_name in self.buffer_names {
                let Some((shape, values)) = saved.and_then(|b| b.get(*buffer_name)) else {
                    return Err(Error::invalid(op, format!("`{name}` has no `{buffer_name}` buffer")));
                };
                if shape.as_slice() != param.shape() {
                    return Err(Error::shape(
                        "optimizer load_state",
                        format!("`{name}.{buffer_name}` has shape {shape:?}, the parameter {:?}", param.shape()),
                    ));
                }
                buffers.push(RawTensor::from_slice(values, shape, param.tensor().device())?);
            }
            slots.insert(name.clone(), Slot { steps, buffers });
        }
        self.slots = slots;
        Ok(())
    }
}

/// Checks a hyper-parameter; optimizers validate at construction so a bad value fails early.
pub(crate) fn check(op: &'static str, name: &str, value: f32, ok: bool) -> Result<()> {
    if ok && value.is_finite() {
        Ok(())
    } else {
        Err(Error::invalid(op, format!("{name} = {value} is out of range")))
    }
}
