//! Save the weights after epochs, optionally only on improvement (Keras' `ModelCheckpoint`).

use std::path::PathBuf;

use super::file_template::FileTemplate;
use super::{Callback, Logs, Mode, TrainContext};
use crate::{Error, Result};

/// Saves the model's weights (safetensors) at the end of epochs to a path made from a template:
/// `{epoch}` is the 1-based epoch and any other `{name}` a metric of the epoch's logs, with an
/// optional format: `{epoch:02}` pads to two digits, `{val_loss:.4}` keeps four decimals
/// (Python's `02d` / `.4f` spellings work too). E.g. `"ckpt-{epoch:02}-{val_loss:.4}.safetensors"`.
/// `{{` and `}}` are literal braces. When `fit` starts, the metrics the template names (and
/// `monitor`, with `save_best_only`) must be among those the run logs, else `fit` ends with an
/// error before anything is written; the template's folder (as far as it holds no field) is
/// created then, and any further folder when a file is saved.
pub struct ModelCheckpoint {
    template: FileTemplate,
    monitor: String,
    mode: Mode,
    save_best_only: bool,
    best: Option<f32>,
    saved: Vec<PathBuf>,
}

impl ModelCheckpoint {
    /// Saves after every epoch to `template`; monitors `val_loss` once `save_best_only` is on.
    /// The template is parsed here: an unclosed brace, an unknown field or a bad or huge
    /// width is an [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn new(template: impl AsRef<str>) -> Result<Self> {
        Ok(ModelCheckpoint {
            template: FileTemplate::parse(template.as_ref())?,
            monitor: "val_loss".into(),
            mode: Mode::Auto,
            save_best_only: false,
            best: None,
            saved: Vec::new(),
        })
    }

    /// The metric `save_best_only` compares (default `val_loss`).
    pub fn monitor(mut self, monitor: impl Into<String>) -> Self {
        self.monitor = monitor.into();
        self
    }

    /// Whether `monitor` improves downwards or upwards (default [`Mode::Auto`]: by its name).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Only save when `monitor` improves on the best value so far.
    pub fn save_best_only(mut self, save_best_only: bool) -> Self {
        self.save_best_only = save_best_only;
        self
    }

    /// The files written so far, in order.
    pub fn saved(&self) -> &[PathBuf] {
        &self.saved
    }

    /// The template filled in for `epoch` (0-based) and `logs`.
    pub fn file_name(&self, epoch: usize, logs: &Logs) -> Result<String> {
        self.template.fill(epoch, logs)
    }
}

impl Callback for ModelCheckpoint {
    fn check(&self, ctx: &TrainContext<'_>) -> Result<()> {
        if self.save_best_only {
            ctx.require_metric("ModelCheckpoint", &self.monitor)?;
        }
        for name in self.template.metric_names() {
            if !ctx.metric_names().iter().any(|n| n == name) {
                return Err(Error::invalid(
                    "ModelCheckpoint",
                    format!(
                        "file name template {:?} uses `{name}`, which this fit does not log; it logs epoch, {}",
                        self.template.source(),
                        ctx.metric_names().join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn on_train_begin(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        self.best = None;
        if let Some(folder) = self.template.fixed_folder() {
            std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
        }
        Ok(())
    }

    fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, ctx: &mut TrainContext<'_>) -> Result<()> {
        if self.save_best_only {
            let current = logs.require("ModelCheckpoint", &self.monitor)?;
            let better = match self.best {
                None => !current.is_nan(),
                Some(best) if self.mode.maximise(&self.monitor) => current > best,
                Some(best) => current < best,
            };
            if !better {
                return Ok(());
            }
            self.best = Some(current);
        }
        let path = PathBuf::from(self.file_name(epoch, logs)?);
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(|e| Error::io(folder, e))?;
        }
        crate::io::save_module(ctx.model(), &path)?;
        self.saved.push(path);
        Ok(())
    }
}
