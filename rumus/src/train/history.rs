//! What `fit` returns: per-epoch metrics and wall times (Keras' `History`).

use std::path::Path;

use super::{ClassCounts, ConfusionMatrix, Logs};
use crate::{Error, Result};

/// Per-epoch metrics (`loss`, `accuracy`, `val_loss`, `val_accuracy`, `lr` ...) and the wall
/// time of every epoch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    metrics: Vec<(String, Vec<f32>)>,
    epoch_seconds: Vec<f64>,
    stop_reason: Option<String>,
    /// Per-class counts of each epoch, by prefix (`""` for training, `"val_"`).
    class_counts: Vec<(String, Vec<Option<ClassCounts>>)>,
    /// The last epoch's confusion matrices, by prefix.
    confusion: Vec<(String, ConfusionMatrix)>,
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

    /// Records the per-class counts and the confusion matrix (when computed) of the last
    /// epoch pushed, for training (`prefix` `""`) or validation (`"val_"`).
    pub(crate) fn record_classes(
        &mut self,
        prefix: &str,
        counts: Option<ClassCounts>,
        confusion: Option<ConfusionMatrix>,
    ) {
        let epochs = self.epochs();
        if let Some(counts) = counts {
            let index = match self.class_counts.iter().position(|(p, _)| p == prefix) {
                Some(i) => i,
                None => {
                    self.class_counts.push((prefix.to_string(), Vec::new()));
                    self.class_counts.len() - 1
                }
            };
            let per_epoch = &mut self.class_counts[index].1;
            per_epoch.resize(epochs.saturating_sub(1), None);
            per_epoch.push(Some(counts));
        }
        if let Some(matrix) = confusion {
            self.confusion.retain(|(p, _)| p != prefix);
            self.confusion.push((prefix.to_string(), matrix));
        }
    }

    /// Per-class values of `precision`, `recall` or `f1` (or their `val_` forms): one list per
    /// epoch, one value per class (an empty list for an epoch without them). `None` unless the
    /// run computed per-class counts ([`Metric::Precision`](super::Metric), `Recall` or `F1`)
    /// for that data.
    pub fn per_class(&self, name: &str) -> Option<Vec<Vec<f32>>> {
        let (prefix, base) = name.strip_prefix("val_").map_or(("", name), |b| ("val_", b));
        if !matches!(base, "precision" | "recall" | "f1") {
            return None;
        }
        let per_epoch = &self.class_counts.iter().find(|(p, _)| p == prefix)?.1;
        let values = |c: &ClassCounts| match base {
            "precision" => Some(c.precision()),
            "recall" => Some(c.recall()),
            "f1" => Some(c.f1()),
            _ => None,
        };
        (0..self.epochs())
            .map(|e| match per_epoch.get(e).and_then(Option::as_ref) {
                Some(c) => values(c),
                None => Some(Vec::new()),
            })
            .collect()
    }

    /// The per-class counts of each epoch's training (`validation` false) or validation data,
    /// when computed (see [`per_class`](Self::per_class)).
    pub fn class_counts(&self, validation: bool) -> Option<&[Option<ClassCounts>]> {
        let prefix = if validation { "val_" } else { "" };
        self.class_counts.iter().find(|(p, _)| p == prefix).map(|(_, v)| v.as_slice())
    }

    /// The last epoch's confusion matrix of the training data, with
    /// [`Metric::ConfusionMatrix`](super::Metric::ConfusionMatrix).
    pub fn confusion_matrix(&self) -> Option<&ConfusionMatrix> {
        self.confusion.iter().find(|(p, _)| p.is_empty()).map(|(_, m)| m)
    }

    /// The last epoch's confusion matrix of the validation data.
    pub fn val_confusion_matrix(&self) -> Option<&ConfusionMatrix> {
        self.confusion.iter().find(|(p, _)| p == "val_").map(|(_, m)| m)
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
    /// training and validation curves in each, against whole epochs.
    /// Without the `plot` feature (on by default) this is `Error::InvalidArgument` naming the
    /// feature, and nothing is written.
    pub fn plot(&self, path: impl AsRef<Path>) -> Result<()> {
        let svg = super::plot::render_svg(self)?;
        crate::io::write_atomic(path.as_ref(), svg.as_bytes())
    }

    /// Draws one metric's curve as an SVG (`"f1"`, `"mae"`, `"lr"` ...), with its validation
    /// curve (`val_<name>`) when there is one. A name the history lacks is
    /// `Error::InvalidArgument` listing the names there are; without the `plot` feature, as
    /// [`plot`](Self::plot).
    pub fn plot_metric(&self, name: &str, path: impl AsRef<Path>) -> Result<()> {
        if self.get(name).is_none() {
            return Err(Error::invalid(
                "History::plot_metric",
                format!("no metric `{name}`; the history has {}", self.names().collect::<Vec<_>>().join(", ")),
            ));
        }
        let svg = super::plot::render_metric_svg(self, name)?;
        crate::io::write_atomic(path.as_ref(), svg.as_bytes())
    }
}
