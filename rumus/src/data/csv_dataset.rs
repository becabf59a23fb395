//! `CsvDataset`: a CSV file's feature columns and target column as a typed dataset.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{ClassDataset, TensorDataset};
use crate::{Error, Result, Shape1};

/// A CSV file with a header row, read as samples `[F]` (the feature columns, f32) and a target
/// column: class labels ([`classes`](CsvDataset::classes)) or real values
/// ([`regression`](CsvDataset::regression)). The features are every column but the target, in
/// file order, or the columns named with [`features`](CsvDataset::features), in that order.
///
/// Errors: a missing or unreadable file ([`Error::Io`]); a malformed file, an unknown column, a
/// row of the wrong length or a cell that is not a finite number ([`Error::Format`] naming the
/// file, the line and the column); `F` other than the number of feature columns, or no rows
/// ([`Error::Data`]).
///
/// ```
/// use rumus::data::{CsvDataset, Dataset};
///
/// let path = std::env::temp_dir().join(format!("rumus-csv-doc-{}.csv", std::process::id()));
/// std::fs::write(&path, "height,species,weight\n1.5,cat,4\n2.5,dog,30\n1.0,cat,3\n").unwrap();
/// let (data, classes) = CsvDataset::new(&path, "species").classes::<2, 2>()?;
/// assert_eq!(classes, ["cat", "dog"]);
/// assert_eq!(data.labels(), [0, 1, 0]);
/// let weights = CsvDataset::new(&path, "weight").features(&["height"]).regression::<1>()?;
/// assert_eq!(weights.len(), 3);
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), rumus::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CsvDataset {
    path: PathBuf,
    target: String,
    features: Option<Vec<String>>,
    delimiter: u8,
}

/// The parsed file: feature values row-major, the target cells, and where each row was.
struct Table {
    features: Vec<f32>,
    targets: Vec<String>,
    lines: Vec<u64>,
}

impl CsvDataset {
    /// The file at `path`, with `target` the name of the target column.
    pub fn new(path: impl AsRef<Path>, target: &str) -> Self {
        CsvDataset { path: path.as_ref().to_path_buf(), target: target.to_string(), features: None, delimiter: b',' }
    }

    /// Reads only these feature columns, in this order (default: every column but the target).
    pub fn features(mut self, columns: &[&str]) -> Self {
        self.features = Some(columns.iter().map(|c| c.to_string()).collect());
        self
    }

    /// The field delimiter (default `b','`; `b'\t'` for TSV).
    pub fn delimiter(mut self, delimiter: u8) -> Self {
        self.delimiter = delimiter;
        self
    }

    fn format(&self, detail: impl Into<String>) -> Error {
        Error::format(&self.path, detail)
    }

    fn read<const F: usize>(&self) -> Result<Table> {
        let file = std::fs::File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
        let mut reader = csv::ReaderBuilder::new().delimiter(self.delimiter).has_headers(true).from_reader(file);
        let csv_error = |e: csv::Error| {
            if e.is_io_error() {
                match e.into_kind() {
                    csv::ErrorKind::Io(e) => Error::io(&self.path, e),
                    kind => self.format(format!("{kind:?}")),
                }
            } else {
                self.format(format!("malformed CSV: {e}"))
            }
        };
        let header = reader.headers().map_err(csv_error)?.clone();
        let column = |name: &str| {
            header.iter().position(|h| h.trim() == name).ok_or_else(|| {
                self.format(format!("no column `{name}` in the header {:?}", header.iter().collect::<Vec<_>>()))
            })
        };
        let target = column(&self.target)?;
        let features = match &self.features {
            Some(names) => names.iter().map(|n| column(n)).collect::<Result<Vec<_>>>()?,
            None => (0..header.len()).filter(|&c| c != target).collect(),
        };
        if features.len() != F {
            return Err(Error::Data(format!(
                "CsvDataset: {} has {} feature columns, the samples' type says {F} (Shape1<{F}>)",
                self.path.display(),
                features.len()
            )));
        }
        let mut table = Table { features: Vec::new(), targets: Vec::new(), lines: Vec::new() };
        for record in reader.records() {
            let record = record.map_err(csv_error)?;
            let line = record.position().map_or(0, |p| p.line());
            for &c in &features {
                let cell = record.get(c).unwrap_or("");
                let value = cell.trim().parse::<f32>().ok().filter(|v| v.is_finite()).ok_or_else(|| {
                    self.format(format!("line {line}, column `{}`: `{cell}` is not a finite number", &header[c]))
                })?;
                table.features.push(value);
            }
            table.targets.push(record.get(target).unwrap_or("").trim().to_string());
            table.lines.push(line);
        }
        if table.lines.is_empty() {
            return Err(Error::Data(format!("CsvDataset: {} has no rows", self.path.display())));
        }
        Ok(table)
    }

    /// Samples `[F]` with class targets `0..N` and the class names. A target column of whole
    /// numbers holds the class indices themselves (each below `N`, names `"0"`, `"1"`, …);
    /// otherwise its distinct strings, sorted, are the classes (exactly `N` of them).
    pub fn classes<const F: usize, const N: usize>(&self) -> Result<(ClassDataset<Shape1<F>, N>, Vec<String>)> {
        let table = self.read::<F>()?;
        let name = &self.target;
        let numeric: Option<Vec<u32>> = table.targets.iter().map(|t| t.parse::<u32>().ok()).collect();
        let (labels, classes) = match numeric {
            Some(labels) => {
                if let Some((row, label)) = labels.iter().enumerate().find(|(_, &l)| l as usize >= N) {
                    return Err(self.format(format!(
                        "line {}, column `{name}`: class {label} is not below the {N} classes (Class<{N}>)",
                        table.lines[row]
                    )));
                }
                (labels, (0..N).map(|c| c.to_string()).collect())
            }
            None => {
                let names: Vec<String> = table.targets.iter().cloned().collect::<BTreeSet<_>>().into_iter().collect();
                if names.len() != N {
                    return Err(Error::Data(format!(
                        "CsvDataset: column `{name}` of {} has {} distinct labels {names:?}, the type says {N} classes",
                        self.path.display(),
                        names.len()
                    )));
                }
                let labels = table.targets.iter().map(|t| names.binary_search(t).unwrap_or(0) as u32).collect();
                (labels, names)
            }
        };
        Ok((ClassDataset::new(table.features, labels)?, classes))
    }

    /// Samples `[F]` with one real-valued target each.
    pub fn regression<const F: usize>(&self) -> Result<TensorDataset<Shape1<F>, Shape1<1>>> {
        let table = self.read::<F>()?;
        let targets = table
            .targets
            .iter()
            .zip(&table.lines)
            .map(|(cell, line)| {
                cell.parse::<f32>().ok().filter(|v| v.is_finite()).ok_or_else(|| {
                    self.format(format!("line {line}, column `{}`: `{cell}` is not a finite number", self.target))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        TensorDataset::new(table.features, targets)
    }
}
