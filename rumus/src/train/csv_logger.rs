//! Stream each epoch's logs to a CSV file as training goes (Keras' `CSVLogger`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Callback, Logs, TrainContext};
use crate::{Error, Result};

/// Writes one row per epoch to `path`: `epoch` (0-based) and every value of the logs (`loss`,
/// `lr`, validation and metric values), in the order of the first epoch's logs, which also make
/// the header. Each row is flushed and synced as it is written, so the file holds every finished
/// epoch even if the process dies later. Missing parent folders are created when `fit` starts.
/// A value missing from a later epoch's logs is left empty.
///
/// ```no_run
/// use rumus::train::CsvLogger;
/// let logger = CsvLogger::new("runs/lenet.csv").append(true);
/// ```
pub struct CsvLogger {
    path: PathBuf,
    append: bool,
    file: Option<File>,
    columns: Vec<String>,
}

impl CsvLogger {
    /// Logs to `path`, replacing an existing file when `fit` starts.
    pub fn new(path: impl AsRef<Path>) -> Self {
        CsvLogger { path: path.as_ref().to_path_buf(), append: false, file: None, columns: Vec::new() }
    }

    /// Appends to an existing file instead (a resumed run); the header is written only into an
    /// empty file.
    pub fn append(mut self, append: bool) -> Self {
        self.append = append;
        self
    }

    /// Where the rows go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_line(&mut self, line: &str) -> Result<()> {
        let io = |e| Error::io(&self.path, e);
        let file = self.file.as_mut().ok_or_else(|| Error::invalid("CsvLogger", "the file is not open"))?;
        file.write_all(line.as_bytes()).map_err(io)?;
        file.write_all(b"\n").map_err(io)?;
        file.flush().map_err(io)?;
        file.sync_data().map_err(io)
    }
}

/// `value` as a CSV field: quoted when it holds a comma, a quote or a line break.
fn field(value: &str) -> String {
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_string()
    }
}

impl Callback for CsvLogger {
    fn on_train_begin(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        if !crate::io::writes_files() {
            return Ok(()); // a rank other than 0 of a distributed job
        }
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let mut options = OpenOptions::new();
        if self.append {
            options.append(true).create(true);
        } else {
            options.write(true).create(true).truncate(true);
        }
        self.file = Some(options.open(&self.path).map_err(|e| Error::io(&self.path, e))?);
        self.columns.clear();
        Ok(())
    }

    fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, _ctx: &mut TrainContext<'_>) -> Result<()> {
        if !crate::io::writes_files() {
            return Ok(());
        }
        if self.columns.is_empty() {
            self.columns = logs.names().map(str::to_string).collect();
            let empty = std::fs::metadata(&self.path).map_err(|e| Error::io(&self.path, e))?.len() == 0;
            if empty {
                let header: Vec<String> =
                    std::iter::once("epoch").chain(self.columns.iter().map(String::as_str)).map(field).collect();
                self.write_line(&header.join(","))?;
            }
        }
        let mut row = vec![epoch.to_string()];
        row.extend(self.columns.iter().map(|name| logs.get(name).map_or_else(String::new, |v| v.to_string())));
        self.write_line(&row.join(","))
    }

    fn on_train_end(&mut self, _ctx: &mut TrainContext<'_>) -> Result<()> {
        self.file = None;
        Ok(())
    }
}
