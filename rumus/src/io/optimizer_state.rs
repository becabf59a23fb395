//! Saving and restoring optimizer state for resuming training, as safetensors: buffers under
//! `state.<parameter>.<buffer>`, step counts and the learning rate in the header's metadata.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use crate::nn::Param;
use crate::optim::{Optimizer, OptimizerState};
use crate::{Error, Result};

/// Writes `optimizer`'s state to `path` atomically.
pub fn save_optimizer(optimizer: &dyn Optimizer, path: impl AsRef<Path>) -> Result<()> {
    let state = optimizer.state()?;
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (param, buffers) in &state.buffers {
        for (buffer, (shape, values)) in buffers {
            tensors.push((format!("state.{param}.{buffer}"), shape.clone(), bytemuck::cast_slice(values).to_vec()));
        }
    }
    let views = tensors
        .iter()
        .map(|(name, shape, bytes)| {
            safetensors::tensor::TensorView::new(Dtype::F32, shape.clone(), bytes)
                .map(|v| (name.clone(), v))
                .map_err(|e| Error::invalid("save_optimizer", format!("{name}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let steps = serde_json::to_string(&state.steps).map_err(|e| Error::invalid("save_optimizer", e.to_string()))?;
    let metadata = HashMap::from([
        ("optimizer".to_string(), state.optimizer.clone()),
        ("learning_rate".to_string(), state.learning_rate.to_string()),
        ("steps".to_string(), steps),
    ]);
    let bytes =
        safetensors::serialize(views, Some(metadata)).map_err(|e| Error::invalid("save_optimizer", e.to_string()))?;
    super::write_atomic(path.as_ref(), &bytes)
}

/// Restores state saved by [`save_optimizer`] into `optimizer` (which must be of the same
/// kind), placing buffers on the devices of `params` (from `nn::named_parameters(&model)`).
/// The file is untrusted: every field is validated ([`OptimizerState::validate`]) and any
/// problem is an [`Error::Checkpoint`] naming the field and value, with `optimizer` unchanged.
pub fn load_optimizer(optimizer: &mut dyn Optimizer, params: &[(String, Param)], path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let bad = |detail: String| Error::Checkpoint { path: path.to_path_buf(), detail };
    let (_, header) =
        SafeTensors::read_metadata(&bytes).map_err(|e| bad(format!("not a valid safetensors file: {e}")))?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| bad(format!("not a valid safetensors file: {e}")))?;
    let meta = header.metadata().clone().unwrap_or_default();
    let get = |key: &str| meta.get(key).ok_or_else(|| bad(format!("no `{key}` in the metadata: not optimizer state")));
    let mut state = OptimizerState {
        optimizer: get("optimizer")?.clone(),
        learning_rate: get("learning_rate")?.parse().map_err(|e| bad(format!("learning_rate: {e}")))?,
        steps: serde_json::from_str(get("steps")?).map_err(|e| bad(format!("steps: {e}")))?,
        buffers: BTreeMap::new(),
    };
    for (name, view) in file.tensors() {
        let key = name.strip_prefix("state.").and_then(|k| k.rsplit_once('.'));
        let Some((param, buffer)) = key else {
            return Err(bad(format!("unexpected tensor {name}")));
        };
        if view.dtype() != Dtype::F32 {
            return Err(bad(format!("{name}: dtype {:?}, expected F32", view.dtype())));
        }
        let values = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        state.buffers.entry(param.to_string()).or_default().insert(buffer.to_string(), (view.shape().to_vec(), values));
    }
    state.validate().map_err(bad)?;
    // The optimizer is unchanged when loading fails.
    optimizer.load_state(&state, params).map_err(|e| bad(e.to_string()))
}
