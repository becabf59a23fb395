//! Per-class counts of one epoch or evaluation (true positives, predictions, targets) and the
//! precision, recall and F1 derived from them on the host.

/// For each class: how often it was predicted correctly, predicted at all, and the target.
/// Precision, recall and F1 follow scikit-learn with `zero_division=0` (see
/// [`Metric`](super::Metric)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts {
    true_positives: Vec<u64>,
    predicted: Vec<u64>,
    actual: Vec<u64>,
}

/// `a / b`, or 0 when `b` is 0 (scikit-learn's `zero_division=0`).
fn ratio(a: u64, b: u64) -> f32 {
    if b == 0 {
        0.0
    } else {
        (a as f64 / b as f64) as f32
    }
}

impl ClassCounts {
    /// Counts of `classes` classes from three equally long lists; `None` when their lengths differ.
    pub fn new(true_positives: Vec<u64>, predicted: Vec<u64>, actual: Vec<u64>) -> Option<Self> {
        let n = true_positives.len();
        let consistent = predicted.len() == n
            && actual.len() == n
            && true_positives.iter().zip(&predicted).zip(&actual).all(|((&t, &p), &a)| t <= p && t <= a);
        consistent.then_some(ClassCounts { true_positives, predicted, actual })
    }

    /// Counts read from the device: `[tp.., predicted.., actual..]`, each `classes` long.
    pub(crate) fn from_rows(values: &[f32], classes: usize) -> Self {
        let row = |r: usize| values[r * classes..(r + 1) * classes].iter().map(|&v| v.round() as u64).collect();
        ClassCounts { true_positives: row(0), predicted: row(1), actual: row(2) }
    }

    /// The number of classes.
    pub fn classes(&self) -> usize {
        self.true_positives.len()
    }

    /// Correct predictions per class.
    pub fn true_positives(&self) -> &[u64] {
        &self.true_positives
    }

    /// Predictions per class.
    pub fn predicted(&self) -> &[u64] {
        &self.predicted
    }

    /// Targets per class (the class's support).
    pub fn actual(&self) -> &[u64] {
        &self.actual
    }

    /// Precision per class: `tp / predicted`, 0 for a class never predicted.
    pub fn precision(&self) -> Vec<f32> {
        self.true_positives.iter().zip(&self.predicted).map(|(&t, &p)| ratio(t, p)).collect()
    }

    /// Recall per class: `tp / actual`, 0 for a class never in the targets.
    pub fn recall(&self) -> Vec<f32> {
        self.true_positives.iter().zip(&self.actual).map(|(&t, &a)| ratio(t, a)).collect()
    }

    /// F1 per class: `2·tp / (predicted + actual)`, 0 when both are 0.
    pub fn f1(&self) -> Vec<f32> {
        self.true_positives
            .iter()
            .zip(self.predicted.iter().zip(&self.actual))
            .map(|(&t, (&p, &a))| ratio(2 * t, p + a))
            .collect()
    }

    /// The mean of `per_class` over the classes that were predicted or are a target (0 when
    /// there is none).
    fn macro_mean(&self, per_class: Vec<f32>) -> f32 {
        let present: Vec<f32> = per_class
            .into_iter()
            .zip(self.predicted.iter().zip(&self.actual))
            .filter(|(_, (&p, &a))| p + a > 0)
            .map(|(v, _)| v)
            .collect();
        if present.is_empty() {
            0.0
        } else {
            (present.iter().map(|&v| v as f64).sum::<f64>() / present.len() as f64) as f32
        }
    }

    /// Macro precision (scikit-learn's `precision_score(average="macro", zero_division=0)`).
    pub fn macro_precision(&self) -> f32 {
        self.macro_mean(self.precision())
    }

    /// Macro recall.
    pub fn macro_recall(&self) -> f32 {
        self.macro_mean(self.recall())
    }

    /// Macro F1.
    pub fn macro_f1(&self) -> f32 {
        self.macro_mean(self.f1())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_scikit_learn_with_zero_division_0() {
        // y_true = [0, 0, 1, 1, 2], y_pred = [0, 1, 1, 1, 1]; class 2 is never predicted and
        // class 3 occurs nowhere. sklearn (labels inferred): precision [1, 0.5, 0] -> 0.5,
        // recall [0.5, 1, 0] -> 0.5, f1 [2/3, 2/3, 0] -> 4/9.
        let counts = ClassCounts::new(vec![1, 2, 0, 0], vec![1, 4, 0, 0], vec![2, 2, 1, 0]).unwrap();
        assert_eq!(counts.precision(), [1.0, 0.5, 0.0, 0.0]);
        assert_eq!(counts.recall(), [0.5, 1.0, 0.0, 0.0]);
        assert!((counts.macro_precision() - 0.5).abs() < 1e-7);
        assert!((counts.macro_recall() - 0.5).abs() < 1e-7);
        assert!((counts.macro_f1() - 4.0 / 9.0).abs() < 1e-7);
        assert_eq!(ClassCounts::default().macro_f1(), 0.0);
        assert!(ClassCounts::new(vec![2], vec![1], vec![2]).is_none());
    }
}
