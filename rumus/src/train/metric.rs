//! The metrics `fit` and `evaluate` can compute besides the loss ([`Metric`]), and the set one
//! run computes, checked against its targets when the run starts.

use crate::data::TargetKind;
use crate::{Error, Result};

/// A metric computed on the device during [`fit`](super::fit) and
/// [`evaluate`](super::evaluate_with), chosen with [`Fit::metrics`](super::Fit::metrics) or
/// [`EvalSettings::metrics`](super::EvalSettings). Its name in [`Logs`](super::Logs),
/// [`History`](super::History) and the progress line is given per variant (with a `val_` prefix
/// for validation). Class metrics count every position of per-position targets such as
/// [`SeqClass`](crate::data::SeqClass).
///
/// Precision, recall and F1 follow scikit-learn's `average="macro"` with `zero_division=0`: a
/// class never predicted has precision 0, a class never in the targets recall 0, and F1 is
/// `2·tp / (predicted + actual)` (0 when both are 0); the macro value is the mean over the
/// classes that occur in the targets or the predictions of the epoch (scikit-learn's default
/// labels). Per-class values are kept in [`History::per_class`](super::History::per_class) and
/// [`Evaluation::class_counts`](super::Evaluation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Metric {
    /// `accuracy`: the fraction whose largest logit (the first, on ties) is the target class.
    /// Class targets; always reported for them, so naming it changes nothing.
    Accuracy,
    /// `top{k}_accuracy` (e.g. `top5_accuracy`): the target is among the `k` largest logits.
    /// Class targets, `1 <= k <= classes`.
    TopK(usize),
    /// `precision`: macro precision. Class targets.
    Precision,
    /// `recall`: macro recall. Class targets.
    Recall,
    /// `f1`: macro F1. Class targets.
    F1,
    /// The `[classes, classes]` confusion matrix of the epoch (rows: targets, columns:
    /// predictions), from [`History::confusion_matrix`](super::History::confusion_matrix) and
    /// [`Evaluation::confusion_matrix`](super::Evaluation). No value in the logs. Class targets
    /// with at most [`MAX_CONFUSION_CLASSES`] classes.
    ConfusionMatrix,
    /// `mae`: mean absolute error over all output elements. Regression targets.
    Mae,
}

/// The most classes [`Metric::ConfusionMatrix`] accepts (its matrix lives on the device and is
/// read at every progress update).
pub const MAX_CONFUSION_CLASSES: usize = 1024;

impl Metric {
    /// The metric's name in the logs (without a `val_` prefix); `None` for the confusion matrix.
    pub fn name(&self) -> Option<String> {
        Some(match self {
            Metric::Accuracy => "accuracy".into(),
            Metric::TopK(k) => format!("top{k}_accuracy"),
            Metric::Precision => "precision".into(),
            Metric::Recall => "recall".into(),
            Metric::F1 => "f1".into(),
            Metric::Mae => "mae".into(),
            Metric::ConfusionMatrix => return None,
        })
    }
}

/// The metrics of one run, resolved against its target kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct MetricSet {
    /// Distinct `k`s of top-k accuracy, in the order asked.
    pub(crate) top_k: Vec<usize>,
    pub(crate) precision: bool,
    pub(crate) recall: bool,
    pub(crate) f1: bool,
    pub(crate) confusion: bool,
    pub(crate) mae: bool,
}

impl MetricSet {
    /// `metrics` plus the shorthand `top_k`, checked against `kind`: class metrics need class
    /// targets (and `k` at most the number of classes), MAE regression targets.
    pub(crate) fn resolve(
        op: &'static str,
        metrics: &[Metric],
        top_k: Option<usize>,
        kind: TargetKind,
    ) -> Result<Self> {
        let mut set = MetricSet::default();
        for metric in metrics.iter().copied().chain(top_k.map(Metric::TopK)) {
            let wrong = |needs: &str| {
                Error::invalid(op, format!("metric {metric:?} needs {needs} targets, but the targets are {kind:?}"))
            };
            match (metric, kind) {
                (Metric::Mae, TargetKind::Regression { .. }) => set.mae = true,
                (Metric::Mae, _) => return Err(wrong("regression")),
                (_, TargetKind::Regression { .. }) => return Err(wrong("class")),
                (Metric::Accuracy, _) => {}
                (Metric::TopK(k), TargetKind::Class { classes }) => {
                    if k == 0 || k > classes {
                        return Err(Error::invalid(
                            op,
                            format!("top_k {k} must be between 1 and the number of classes, {classes}"),
                        ));
                    }
                    if !set.top_k.contains(&k) {
                        set.top_k.push(k);
                    }
                }
                (Metric::Precision, _) => set.precision = true,
                (Metric::Recall, _) => set.recall = true,
                (Metric::F1, _) => set.f1 = true,
                (Metric::ConfusionMatrix, TargetKind::Class { classes }) => {
                    if classes > MAX_CONFUSION_CLASSES {
                        return Err(Error::invalid(
                            op,
                            format!(
                                "a confusion matrix of {classes} classes is too large (at most \
                                 {MAX_CONFUSION_CLASSES}); precision, recall and f1 work without it"
                            ),
                        ));
                    }
                    set.confusion = true;
                }
            }
        }
        Ok(set)
    }

    /// Whether per-class counts are accumulated (precision, recall, F1).
    pub(crate) fn per_class(&self) -> bool {
        self.precision || self.recall || self.f1
    }

    /// The names the logs of a run on `kind` hold, in their order (`lr` and `val_` names aside).
    pub(crate) fn names(&self, kind: TargetKind) -> Vec<String> {
        let mut names = vec!["loss".to_string()];
        if let TargetKind::Class { .. } = kind {
            names.push("accuracy".into());
            names.extend(self.top_k.iter().map(|k| format!("top{k}_accuracy")));
            for (on, name) in [(self.precision, "precision"), (self.recall, "recall"), (self.f1, "f1")] {
                if on {
                    names.push(name.into());
                }
            }
        }
        if self.mae {
            names.push("mae".into());
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLASSES: TargetKind = TargetKind::Class { classes: 5 };
    const VALUES: TargetKind = TargetKind::Regression { dims: &[1] };

    #[test]
    fn names_follow_the_chosen_metrics() {
        let set = MetricSet::resolve(
            "fit",
            &[Metric::F1, Metric::TopK(3), Metric::Precision, Metric::TopK(3), Metric::ConfusionMatrix],
            Some(2),
            CLASSES,
        )
        .unwrap();
        assert_eq!(set.names(CLASSES), ["loss", "accuracy", "top3_accuracy", "top2_accuracy", "precision", "f1"]);
        let set = MetricSet::resolve("fit", &[Metric::Mae], None, VALUES).unwrap();
        assert_eq!(set.names(VALUES), ["loss", "mae"]);
    }

    #[test]
    fn bad_combinations_are_errors() {
        for (metric, kind, needle) in [
            (Metric::Mae, CLASSES, "needs regression targets"),
            (Metric::F1, VALUES, "needs class targets"),
            (Metric::Accuracy, VALUES, "needs class targets"),
            (Metric::TopK(6), CLASSES, "between 1 and the number of classes, 5"),
            (Metric::TopK(0), CLASSES, "between 1"),
        ] {
            let err = MetricSet::resolve("fit", &[metric], None, kind).unwrap_err().to_string();
            assert!(err.contains(needle), "{metric:?}: {err}");
        }
        let big = TargetKind::Class { classes: MAX_CONFUSION_CLASSES + 1 };
        assert!(MetricSet::resolve("fit", &[Metric::ConfusionMatrix], None, big).is_err());
    }
}
