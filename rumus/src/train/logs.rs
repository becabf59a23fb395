//! Named metric values of one epoch (or of the epoch so far), in insertion order.

use std::fmt;

/// Metric values by name, e.g. `loss`, `accuracy`, `val_loss`, `val_accuracy`, `lr`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Logs {
    entries: Vec<(String, f32)>,
}

impl Logs {
    /// No metric.
    pub fn new() -> Self {
        Logs::default()
    }

    /// Sets `name` (replacing an earlier value).
    pub fn insert(&mut self, name: impl Into<String>, value: f32) {
        let name = name.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((name, value)),
        }
    }

    /// The value of `name`, if it was set.
    pub fn get(&self, name: &str) -> Option<f32> {
        self.entries.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// Metric names in insertion order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// `(name, value)` pairs in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f32)> {
        self.entries.iter().map(|(n, v)| (n.as_str(), *v))
    }

    /// The value of `name` or an error listing what there is (for callbacks' `monitor`).
    pub(crate) fn require(&self, who: &'static str, name: &str) -> crate::Result<f32> {
        self.get(name).ok_or_else(|| {
            crate::Error::invalid(
                who,
                format!(
                    "monitors `{name}`, but the logs have only {}{}",
                    self.names().collect::<Vec<_>>().join(", "),
                    if name.starts_with("val_") { " (pass validation data to monitor val_ metrics)" } else { "" }
                ),
            )
        })
    }
}

impl fmt::Display for Logs {
    /// Keras style with four significant digits: ` - loss: 0.09120 - accuracy: 0.9723`,
    /// ` - loss: 1.234e-05`. The learning rate is left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, value) in self.entries.iter().filter(|(n, _)| n != "lr") {
            write!(f, " - {name}: {}", super::significant::significant(*value))?;
        }
        Ok(())
    }
}
