//! The progress display of `fit`: Keras' `Epoch 3/10` header and
//! `469/469 ━━━━━━━━━━━━━━━━━━━━ 3s 6ms/step - loss: 0.0912 - accuracy: 0.9723` line.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Logs, Verbosity};

pub(crate) struct Progress {
    verbosity: Verbosity,
    bar: Option<ProgressBar>,
    epochs: usize,
    steps: usize,
    started: Instant,
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.0}s")
    } else {
        format!("{}m{:02}s", (s / 60.0) as u64, s as u64 % 60)
    }
}

impl Progress {
    pub(crate) fn new(verbosity: Verbosity, epochs: usize) -> Self {
        // Without a terminal a live bar would print nothing: fall back to one line per epoch.
        let verbosity = match verbosity {
            Verbosity::ProgressBar if ProgressDrawTarget::stderr().is_hidden() => Verbosity::OneLinePerEpoch,
            v => v,
        };
        Progress { verbosity, bar: None, epochs, steps: 0, started: Instant::now() }
    }

    /// Whether intra-epoch updates are shown (and so worth a device read).
    pub(crate) fn live(&self) -> bool {
        self.verbosity == Verbosity::ProgressBar
    }

    pub(crate) fn epoch_begin(&mut self, epoch: usize, steps: usize) {
        self.steps = steps;
        self.started = Instant::now();
        if self.verbosity != Verbosity::ProgressBar {
            return;
        }
        eprintln!("Epoch {}/{}", epoch + 1, self.epochs);
        let bar = ProgressBar::new(steps as u64);
        let style = ProgressStyle::with_template("{pos:>5}/{len} {bar:20.green/238} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("━━━");
        bar.set_style(style);
        self.bar = Some(bar);
    }

    fn per_step(&self, step: usize) -> Duration {
        self.started.elapsed() / step.max(1) as u32
    }

    pub(crate) fn update(&mut self, step: usize, logs: &Logs) {
        let per_step = self.per_step(step);
        let eta = per_step * self.steps.saturating_sub(step) as u32;
        if let Some(bar) = &self.bar {
            bar.set_position(step as u64);
            bar.set_message(format!("{} {}ms/step{logs}", seconds(eta), per_step.as_millis()));
        }
    }

    pub(crate) fn epoch_end(&mut self, epoch: usize, steps: usize, logs: &Logs) {
        let line = format!("{} {}ms/step{logs}", seconds(self.started.elapsed()), self.per_step(steps).as_millis());
        match self.verbosity {
            Verbosity::ProgressBar => {
                if let Some(bar) = self.bar.take() {
                    bar.set_position(steps as u64);
                    bar.finish_with_message(line);
                }
            }
            Verbosity::OneLinePerEpoch => eprintln!("Epoch {}/{} - {steps} steps - {line}", epoch + 1, self.epochs),
            Verbosity::Quiet => {}
        }
    }

    /// Leaves the current line as it is (training failed).
    pub(crate) fn abandon(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }
}
