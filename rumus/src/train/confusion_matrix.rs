//! The confusion matrix of an epoch or an evaluation: counts by target and predicted class,
//! printable as an aligned table and drawable as an SVG heat map.

use std::fmt;
use std::path::Path;

use super::ClassCounts;
use crate::{Error, Result};

/// Counts of `[classes, classes]`: row `t`, column `p` is how many targets of class `t` were
/// predicted as class `p` (the largest logit, the first on ties), as scikit-learn's
/// `confusion_matrix`. Classes are labelled `0, 1, ..` unless [`with_labels`](Self::with_labels)
/// names them.
///
/// ```
/// use rumus::train::ConfusionMatrix;
/// let m = ConfusionMatrix::new(2, vec![3, 1, 0, 4]).unwrap().with_labels(["cat", "dog"])?;
/// assert_eq!(m.get(0, 1), 1);
/// assert_eq!(m.class_counts().precision(), [1.0, 0.8]);
/// assert_eq!(m.to_string(), "true\\pred cat dog\n      cat   3   1\n      dog   0   4\n");
/// # Ok::<(), rumus::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfusionMatrix {
    classes: usize,
    counts: Vec<u64>,
    labels: Vec<String>,
}

impl ConfusionMatrix {
    /// A matrix of `classes` classes from its counts in row-major order (targets by rows);
    /// `None` unless there are `classes²` of them.
    pub fn new(classes: usize, counts: Vec<u64>) -> Option<Self> {
        (classes.checked_mul(classes) == Some(counts.len())).then(|| ConfusionMatrix {
            classes,
            counts,
            labels: (0..classes).map(|c| c.to_string()).collect(),
        })
    }

    /// Counts read from the device (f32 holding whole numbers).
    pub(crate) fn from_values(values: &[f32], classes: usize) -> Self {
        ConfusionMatrix {
            classes,
            counts: values.iter().map(|&v| v.round() as u64).collect(),
            labels: (0..classes).map(|c| c.to_string()).collect(),
        }
    }

    /// The same counts with class names (one per class) for printing and drawing.
    pub fn with_labels<S: Into<String>>(mut self, labels: impl IntoIterator<Item = S>) -> Result<Self> {
        let labels: Vec<String> = labels.into_iter().map(Into::into).collect();
        if labels.len() != self.classes {
            return Err(Error::invalid(
                "ConfusionMatrix::with_labels",
                format!("{} labels for {} classes", labels.len(), self.classes),
            ));
        }
        self.labels = labels;
        Ok(self)
    }

    /// The number of classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// The class names (`0, 1, ..` unless set).
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// How many targets of class `target` were predicted as `predicted` (0 out of range).
    pub fn get(&self, target: usize, predicted: usize) -> u64 {
        if target < self.classes && predicted < self.classes {
            self.counts[target * self.classes + predicted]
        } else {
            0
        }
    }

    /// All counts, row-major (targets by rows).
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Per-class true positives (the diagonal), predictions (column sums) and targets (row
    /// sums), with per-class and macro precision, recall and F1.
    pub fn class_counts(&self) -> ClassCounts {
        let c = self.classes;
        let tp = (0..c).map(|i| self.get(i, i)).collect();
        let predicted = (0..c).map(|p| (0..c).map(|t| self.get(t, p)).sum()).collect();
        let actual = (0..c).map(|t| self.counts[t * c..(t + 1) * c].iter().sum()).collect();
        ClassCounts::new(tp, predicted, actual).unwrap_or_default()
    }

    /// Precision per class (see [`ClassCounts::precision`]).
    pub fn precision(&self) -> Vec<f32> {
        self.class_counts().precision()
    }

    /// Recall per class (see [`ClassCounts::recall`]).
    pub fn recall(&self) -> Vec<f32> {
        self.class_counts().recall()
    }

    /// F1 per class (see [`ClassCounts::f1`]).
    pub fn f1(&self) -> Vec<f32> {
        self.class_counts().f1()
    }

    /// Draws the matrix as an SVG heat map (targets down, predictions across, each cell with
    /// its count), written atomically to `path`. Without the `plot` feature (on by default)
    /// this is `Error::InvalidArgument` naming the feature, and nothing is written.
    pub fn to_svg(&self, path: impl AsRef<Path>) -> Result<()> {
        let svg = super::plot::render_confusion_svg(self)?;
        crate::io::write_atomic(path.as_ref(), svg.as_bytes())
    }
}

impl fmt::Display for ConfusionMatrix {
    /// An aligned table: a header of predicted classes, then one row per target class.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let corner = "true\\pred";
        let label_width = self.labels.iter().map(|l| l.chars().count()).chain([corner.len()]).max().unwrap_or(0);
        let cell = self
            .labels
            .iter()
            .map(|l| l.chars().count())
            .chain(self.counts.iter().map(|n| n.to_string().len()))
            .max()
            .unwrap_or(1);
        write!(f, "{corner:>label_width$}")?;
        for label in &self.labels {
            write!(f, " {label:>cell$}")?;
        }
        writeln!(f)?;
        for (t, label) in self.labels.iter().enumerate() {
            write!(f, "{label:>label_width$}")?;
            for p in 0..self.classes {
                write!(f, " {:>cell$}", self.get(t, p))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
