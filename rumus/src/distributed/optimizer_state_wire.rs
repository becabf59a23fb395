//! An [`OptimizerState`] as f32 values, so a [`Collective`](super::Collective) (which moves f32
//! buffers) can broadcast rank 0's optimizer state when `fit` starts: a JSON header (the
//! optimizer's name, learning rate, step counts, and each buffer's parameter, name and shape),
//! one byte per value, then every buffer's values in the header's order.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::optim::OptimizerState;
use crate::{Error, Result};

/// `state` as `(header length, values)`: the header's bytes then the buffers' values.
pub(crate) fn encode(state: &OptimizerState) -> (usize, Vec<f32>) {
    let mut layout = Vec::new();
    let mut values = Vec::new();
    for (param, buffers) in &state.buffers {
        for (buffer, (shape, data)) in buffers {
            layout.push(json!([param, buffer, shape]));
            values.extend_from_slice(data);
        }
    }
    let header = json!({
        "optimizer": state.optimizer,
        "learning_rate": state.learning_rate.to_string(),
        "steps": state.steps,
        "buffers": layout,
    })
    .to_string();
    let mut out: Vec<f32> = header.bytes().map(f32::from).collect();
    let header_len = out.len();
    out.extend(values);
    (header_len, out)
}

/// Reads back what [`encode`] wrote (`header_len` bytes of header first); an error for a
/// message that does not hold a state.
pub(crate) fn decode(header_len: usize, message: &[f32]) -> Result<OptimizerState> {
    let bad = |detail: &str| Error::Training(format!("fit: the optimizer state broadcast from rank 0 {detail}"));
    if header_len > message.len() {
        return Err(bad("is shorter than its header"));
    }
    let bytes: Vec<u8> = message[..header_len].iter().map(|&v| v as u8).collect();
    let header: Value = serde_json::from_slice(&bytes).map_err(|_| bad("has no valid header"))?;
    let learning_rate = header["learning_rate"].as_str().and_then(|s| s.parse().ok());
    let steps: Option<BTreeMap<String, u64>> = serde_json::from_value(header["steps"].clone()).ok();
    let (Some(optimizer), Some(learning_rate), Some(steps), Some(layout)) =
        (header["optimizer"].as_str(), learning_rate, steps, header["buffers"].as_array())
    else {
        return Err(bad("has an incomplete header"));
    };
    let mut state = OptimizerState { optimizer: optimizer.to_string(), learning_rate, steps, buffers: BTreeMap::new() };
    let mut rest = &message[header_len..];
    for entry in layout {
        let parsed: Option<(String, String, Vec<usize>)> = serde_json::from_value(entry.clone()).ok();
        let Some((param, buffer, shape)) = parsed else { return Err(bad("has a malformed buffer entry")) };
        let n = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).filter(|&n| n <= rest.len());
        let Some(n) = n else { return Err(bad("is shorter than its buffers")) };
        let (data, tail) = rest.split_at(n);
        rest = tail;
        state.buffers.entry(param).or_default().insert(buffer, (shape, data.to_vec()));
    }
    if !rest.is_empty() {
        return Err(bad("has values beyond its buffers"));
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_survives_encoding() -> Result<()> {
        let mut state = OptimizerState {
            optimizer: "Adam".into(),
            learning_rate: 3e-4,
            steps: BTreeMap::from([("body.0.weight".to_string(), 17), ("body.0.bias".to_string(), 5)]),
            buffers: BTreeMap::new(),
        };
        for (param, shape) in [("body.0.weight", vec![2, 3]), ("body.0.bias", vec![3])] {
            let n: usize = shape.iter().product();
            for buffer in ["exp_avg", "exp_avg_sq"] {
                let values = (0..n).map(|i| i as f32 * 0.37 - 1.1 + buffer.len() as f32 * 1e-7).collect();
                state.buffers.entry(param.into()).or_default().insert(buffer.into(), (shape.clone(), values));
            }
        }
        let (header, message) = encode(&state);
        assert_eq!(decode(header, &message)?, state);
        // Truncated or padded messages are errors, not panics.
        assert!(decode(header, &message[..message.len() - 1]).is_err());
        assert!(decode(header + 1, &message).is_err());
        let mut longer = message.clone();
        longer.push(0.0);
        assert!(decode(header, &longer).is_err());
        let empty = OptimizerState { optimizer: "SGD".into(), learning_rate: 0.1, ..Default::default() };
        let (header, message) = encode(&empty);
        assert_eq!(decode(header, &message)?, empty);
        Ok(())
    }
}
