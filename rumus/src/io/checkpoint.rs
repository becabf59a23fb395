//! Saving and strictly loading a module's parameters and buffers.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use crate::nn::{named_params, Module, Param};
use crate::{Error, RawTensor, Result};

/// PyTorch's batch-norm step counter: an I64 buffer rumus does not keep; skipped on load.
const NUM_BATCHES_TRACKED: &str = "num_batches_tracked";

/// Serialises `module`'s parameters and buffers (names from `visit_params`) to safetensors bytes.
pub fn module_to_bytes(module: &dyn Module) -> Result<Vec<u8>> {
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, param) in named_params(module) {
        let values = param.to_vec()?;
        tensors.push((name, param.shape().to_vec(), bytemuck::cast_slice(&values).to_vec()));
    }
    let views = tensors
        .iter()
        .map(|(name, shape, bytes)| {
            safetensors::tensor::TensorView::new(Dtype::F32, shape.clone(), bytes)
                .map(|v| (name.clone(), v))
                .map_err(|e| Error::invalid("save", format!("tensor {name}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(views, Some(metadata)).map_err(|e| Error::invalid("save", e.to_string()))
}

/// Writes `module`'s parameters and buffers to `path` atomically (temporary file, fsync,
/// rename): if anything fails, the previous file at `path` is untouched.
pub fn save_module(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let bytes = module_to_bytes(module)?;
    super::write_atomic(path.as_ref(), &bytes)
}

/// Loads `path` into `module`, strictly: see [`module_from_bytes`].
pub fn load_module(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    module_from_bytes(module, &bytes, path)
}

/// A checkpoint is untrusted input: every value must be finite (a NaN or infinite weight
/// would only show up as NaN losses later), and a running variance cannot be negative (its
/// square root normalises in eval mode). Returns the first problem, naming key, index and value.
fn check_values(name: &str, values: &[f32]) -> Option<String> {
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Some(format!("{name}[{i}] = {v} is not finite"));
    }
    let variance = name == "running_var" || name.ends_with(".running_var");
    let (i, v) = values.iter().enumerate().find(|(_, v)| variance && **v < 0.0)?;
    Some(format!("{name}[{i}] = {v}: a variance cannot be negative"))
}

fn f32_values(data: &[u8]) -> Vec<f32> {
    // safetensors data need not be 4-byte aligned in the buffer: decode bytewise.
    data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Loads safetensors `bytes` into `module`. Strict: every parameter and buffer must be present
/// with its shape as f32 and finite values (running variances non-negative), and nothing else
/// may be there (except PyTorch's I64 `num_batches_tracked`, which is skipped). All problems are listed, by key, in one
/// [`Error::Checkpoint`]; the module is only changed when there are none. `path` names the
/// source in errors.
pub fn module_from_bytes(module: &dyn Module, bytes: &[u8], path: &Path) -> Result<()> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| Error::Checkpoint {
        path: path.to_path_buf(),
        detail: format!("not a valid safetensors file: {e}"),
    })?;
    let params = named_params(module);
    let mut in_file: BTreeMap<String, safetensors::tensor::TensorView<'_>> = BTreeMap::new();
    for (name, view) in file.tensors() {
        let skip =
            (name == NUM_BATCHES_TRACKED || name.ends_with(".num_batches_tracked")) && view.dtype() == Dtype::I64;
        if !skip {
            in_file.insert(name, view);
        }
    }
    let mut missing = Vec::new();
    let mut problems = Vec::new();
    let mut decoded: Vec<(&Param, Vec<f32>, &[usize])> = Vec::new();
    for (name, param) in &params {
        match in_file.get(name) {
            None => missing.push(name.clone()),
            Some(view) if view.dtype() != Dtype::F32 => {
                problems.push(format!("{name}: dtype {:?}, expected F32", view.dtype()))
            }
            Some(view) if view.shape() != param.shape() => {
                problems.push(format!("{name}: shape {:?} in file, {:?} in model", view.shape(), param.shape()))
            }
            Some(view) => {
                let values = f32_values(view.data());
                match check_values(name, &values) {
                    Some(problem) => problems.push(problem),
                    None => decoded.push((param, values, view.shape())),
                }
            }
        }
    }
    let unexpected: Vec<&String> = in_file.keys().filter(|k| !params.iter().any(|(n, _)| n == *k)).collect();
    if !missing.is_empty() || !unexpected.is_empty() || !problems.is_empty() {
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!("missing keys: {}", missing.join(", ")));
        }
        if !unexpected.is_empty() {
            parts.push(format!(
                "unexpected keys: {}",
                unexpected.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        if !problems.is_empty() {
            parts.push(format!("mismatched: {}", problems.join("; ")));
        }
        return Err(Error::Checkpoint {
            path: path.to_path_buf(),
            detail: format!("does not match the model: {}", parts.join(" | ")),
        });
    }
    for (param, values, shape) in decoded {
        param.assign(&RawTensor::from_vec(values, shape, &crate::Device::cpu())?)?;
    }
    Ok(())
}
