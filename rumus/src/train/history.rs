//! What `fit` returns: per-epoch metrics and wall times (Keras' `History`).

use std::path::Path;

use super::Logs;
use crate::{Error, Result};

/// Per-epoch metrics (`loss`, `accuracy`, `val_loss`, `val_accuracy`, `lr` ...) and the wall
/// time of every epoch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    metrics: Vec<(String, Vec<f32>)>,
    epoch_seconds: Vec<f64>,
    stop_reason: Option<String>,
}

impl History {
    /// An empty history (no epoch).
    pub fn new() -> Self {
        History::default()
    }

    /// Appends one epoch. A metric missing from an epoch is recorded as NaN.
    pub fn push(&mut self, logs: &Logs, seconds: f64) {
        let epoch = self.epoch_seconds.len();
        for (name, value) in logs.iter() {
            match self.metrics.iter_mut().find(|(n, _)| n == name) {
                Some((_, values)) => values.push(value),
                None => {
                    let mut values = vec![f32::NAN; epoch];
                    values.push(value);
                    self.metrics.push((name.to_string(), values));
                }
            }
        }
        for (_, values) in &mut self.metrics {
            values.resize(epoch + 1, f32::NAN);
        }
        self.epoch_seconds.push(seconds);
    }

    /// Number of epochs recorded.
    pub fn epochs(&self) -> usize {
        self.epoch_seconds.len()
    }

    /// True when no epoch was recorded.
    pub fn is_empty(&self) -> bool {
        self.epoch_seconds.is_empty()
    }

    /// The values of one metric, one per epoch.
    pub fn get(&self, name: &str) -> Option<&[f32]> {
        self.metrics.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }

    /// The last epoch's value of `name`.
    pub fn last(&self, name: &str) -> Option<f32> {
        self.get(name).and_then(|v| v.last().copied())
    }

    /// Metric names in the order they first appeared.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.metrics.iter().map(|(n, _)| n.as_str())
    }

    /// Wall-clock seconds of each epoch (training plus validation).
    pub fn epoch_seconds(&self) -> &[f64] {
        &self.epoch_seconds
    }

    /// Why training ended before the last epoch (e.g. early stopping), if it did.
    pub fn stop_reason(&self) -> Option<&str> {
        self.stop_reason.as_deref()
    }

    pub(crate) fn set_stop_reason(&mut self, reason: Option<String>) {
        self.stop_reason = reason;
    }

    /// CSV with a header: `epoch,<metrics...>,seconds`, epochs 1-based.
    pub fn to_csv_string(&self) -> String {
        let mut out = String::from("epoch");
        for (name, _) in &self.metrics {
            out.push(',');
            out.push_str(name);
        }
        out.push_str(",seconds\n");
        for (e, seconds) in self.epoch_seconds.iter().enumerate() {
            out.push_str(&(e + 1).to_string());
            for (_, values) in &self.metrics {
                out.push_str(&format!(",{}", values[e]));
            }
            out.push_str(&format!(",{seconds:.3}\n"));
        }
        out
    }

    /// Writes [`History::to_csv_string`] to `path`.
    pub fn to_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::io::write_atomic(path.as_ref(), self.to_csv_string().as_bytes())
    }

    /// JSON: `{"epochs": n, "history": {"loss": [...], ...}, "epoch_seconds": [...]}`; NaN
    /// becomes `null`.
    pub fn to_json_string(&self) -> Result<String> {
        let history: serde_json::Map<String, serde_json::Value> =
            self.metrics.iter().map(|(n, v)| (n.clone(), serde_json::json!(v))).collect();
        let doc = serde_json::json!({
            "epochs": self.epochs(),
            "history": history,
            "epoch_seconds": self.epoch_seconds,
            "stop_reason": self.stop_reason,
        });
        serde_json::to_string_pretty(&doc).map_err(|e| Error::invalid("History::to_json", e.to_string()))
    }

    /// Writes [`History::to_json_string`] atomically to `path`; a failed write is [`Error::Io`] and
    /// leaves any earlier file intact.
    pub fn to_json(&self, path: impl AsRef<Path>) -> Result<()> {
        crate::io::write_atomic(path.as_ref(), self.to_json_string()?.as_bytes())
    }

    /// Draws the learning curves as an SVG: loss on the left, accuracy (if any) on the right,
    /// training and validation curves in each.
    /// Without the `plot` feature (on by default) this is `Error::InvalidArgument` naming the
    /// feature, and nothing is written.
    pub fn plot(&self, path: impl AsRef<Path>) -> Result<()> {
        let svg = super::plot::render_svg(self)?;
        crate::io::write_atomic(path.as_ref(), svg.as_bytes())
    }
}
