//! The progress display of `fit`: Keras' `Epoch 3/10` header and
//! `469/469 ━━━━━━━━━━━━━━━━━━━━ 3s 6ms/step - loss: 0.0912 - accuracy: 0.9723` line (a live
//! indicatif bar with the `progress` feature, else one plain line per update).

use std::time::{Duration, Instant};

use self::bar::Bar;
use super::{Logs, Verbosity};

/// The live bar of the `progress` feature: indicatif redraws one line in place.
#[cfg(feature = "progress")]
mod bar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

    pub(super) struct Bar(ProgressBar);

    impl Bar {
        /// Whether stderr can show a live display.
        pub(super) fn visible() -> bool {
            !ProgressDrawTarget::stderr().is_hidden()
        }

        pub(super) fn new(steps: usize) -> Self {
            let bar = ProgressBar::new(steps as u64);
            let style = ProgressStyle::with_template("{pos:>5}/{len} {bar:20.green/238} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("━━━");
            bar.set_style(style);
            Bar(bar)
        }

        pub(super) fn update(&self, step: usize, message: String) {
            self.0.set_position(step as u64);
            self.0.set_message(message);
        }

        pub(super) fn finish(self, steps: usize, message: String) {
            self.0.set_position(steps as u64);
            self.0.finish_with_message(message);
        }

        /// Leaves the line as it is.
        pub(super) fn abandon(self) {
            self.0.abandon();
        }
    }
}

/// Without the `progress` feature: the same line, printed anew at each update.
#[cfg(not(feature = "progress"))]
mod bar {
    use std::io::IsTerminal;

    pub(super) struct Bar {
        steps: usize,
    }

    /// One printed update: `  120/469 3s 6ms/step - loss: 0.0912`.
    pub(super) fn line(step: usize, steps: usize, message: &str) -> String {
        format!("{step:>5}/{steps} {message}")
    }

    impl Bar {
        /// Whether stderr is a terminal (elsewhere `fit` prints one line per epoch).
        pub(super) fn visible() -> bool {
            std::io::stderr().is_terminal()
        }

        pub(super) fn new(steps: usize) -> Self {
            Bar { steps }
        }

        pub(super) fn update(&self, step: usize, message: String) {
            eprintln!("{}", line(step, self.steps, &message));
        }

        pub(super) fn finish(self, steps: usize, message: String) {
            eprintln!("{}", line(steps, self.steps, &message));
        }

        /// Every printed line stays as it is.
        pub(super) fn abandon(self) {}
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn a_plain_update_is_position_of_total_then_the_message() {
            assert_eq!(super::line(7, 469, "3s 6ms/step - loss: 0.5"), "    7/469 3s 6ms/step - loss: 0.5");
            assert_eq!(super::line(12345, 12345, ""), "12345/12345 ");
        }
    }
}

pub(crate) struct Progress {
    verbosity: Verbosity,
    bar: Option<Bar>,
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
            Verbosity::ProgressBar if !Bar::visible() => Verbosity::OneLinePerEpoch,
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
        self.bar = Some(Bar::new(steps));
    }

    fn per_step(&self, step: usize) -> Duration {
        self.started.elapsed() / step.max(1) as u32
    }

    pub(crate) fn update(&mut self, step: usize, logs: &Logs) {
        let per_step = self.per_step(step);
        let eta = per_step * self.steps.saturating_sub(step) as u32;
        if let Some(bar) = &self.bar {
            bar.update(step, format!("{} {}ms/step{logs}", seconds(eta), per_step.as_millis()));
        }
    }

    pub(crate) fn epoch_end(&mut self, epoch: usize, steps: usize, logs: &Logs) {
        let line = format!("{} {}ms/step{logs}", seconds(self.started.elapsed()), self.per_step(steps).as_millis());
        match self.verbosity {
            Verbosity::ProgressBar => {
                if let Some(bar) = self.bar.take() {
                    bar.finish(steps, line);
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

/// A run that ends with an error mid-epoch leaves its progress line as it is.
impl Drop for Progress {
    fn drop(&mut self) {
        self.abandon();
    }
}
