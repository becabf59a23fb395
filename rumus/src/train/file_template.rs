//! File-name templates of [`ModelCheckpoint`](super::ModelCheckpoint): `{epoch:02}`,
//! `{val_loss:.4}` ... parsed once, up front, so a bad template fails when it is given rather
//! than after the first epoch (or by panicking inside `format!`).

use super::Logs;
use crate::{Error, Result};

/// The widest zero-padded epoch (`{epoch:64}`); a file name is at most 255 bytes anyway.
pub const MAX_WIDTH: usize = 64;
/// The most decimals of a metric (`{loss:.32}`).
pub const MAX_PRECISION: usize = 32;

/// One part of a parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    /// The 1-based epoch, zero-padded to `width` digits.
    Epoch {
        width: usize,
    },
    /// A metric of the epoch's logs, with `precision` decimals (shortest exact form if none).
    Metric {
        name: String,
        precision: Option<usize>,
    },
}

/// A parsed template: `{epoch}` is the 1-based epoch, `{name}` a metric (`loss`, `accuracy`,
/// `lr`, `top<k>_accuracy`, `precision`, `recall`, `f1`, `mae`, each also with a `val_` prefix); `{{` and `}}` are literal braces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileTemplate {
    source: String,
    pieces: Vec<Piece>,
}

impl FileTemplate {
    /// Parses `template`; an unclosed or unmatched brace, an unknown field, or a format other
    /// than `{epoch:N}` / `{epoch:0Nd}` (N <= 64, `MAX_WIDTH`) and `{metric:.P}` / `{metric:.Pf}`
    /// (P <= 32, `MAX_PRECISION`) is an [`Error::InvalidArgument`].
    pub fn parse(template: &str) -> Result<Self> {
        let bad =
            |detail: String| Error::invalid("ModelCheckpoint", format!("file name template {template:?}: {detail}"));
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = template.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().is_some_and(|&(_, n)| n == '{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek().is_some_and(|&(_, n)| n == '}') => {
                    chars.next();
                    text.push('}');
                }
                '}' => return Err(bad(format!("unmatched `}}` at byte {i} (write `}}}}` for a literal brace)"))),
                '{' => {
                    let close = template[i..].find('}').ok_or_else(|| bad(format!("unclosed `{{` at byte {i}")))?;
                    let field = &template[i + 1..i + close];
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(parse_field(field).map_err(bad)?);
                    while chars.peek().is_some_and(|&(j, _)| j <= i + close) {
                        chars.next();
                    }
                }
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(FileTemplate { source: template.to_string(), pieces })
    }

    /// The template as given.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The metric names the template uses, in order.
    pub fn metric_names(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Metric { name, .. } => Some(name.as_str()),
            _ => None,
        })
    }

    /// The folder every filled-in name lies in, as far as it holds no field: `runs` for
    /// `runs/ckpt-{epoch}.safetensors` and for `runs/{epoch}/model.safetensors`; `None` for a
    /// name without a folder.
    pub fn fixed_folder(&self) -> Option<std::path::PathBuf> {
        let Some(Piece::Text(leading)) = self.pieces.first() else {
            return None;
        };
        let end = leading.rfind(std::path::is_separator)?;
        // `/model.safetensors` lies in the root, which exists.
        (end > 0).then(|| std::path::PathBuf::from(&leading[..end]))
    }

    /// The template filled in for `epoch` (0-based) and `logs`; a metric the logs lack (say
    /// `val_loss` without validation data) is an error listing what there is.
    pub fn fill(&self, epoch: usize, logs: &Logs) -> Result<String> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Epoch { width } => out.push_str(&format!("{:0width$}", epoch as u128 + 1)),
                Piece::Metric { name, precision } => {
                    let value = logs.get(name).ok_or_else(|| {
                        Error::invalid(
                            "ModelCheckpoint",
                            format!(
                                "file name template {:?}: no metric `{name}`; there are epoch, {}",
                                self.source,
                                logs.names().collect::<Vec<_>>().join(", ")
                            ),
                        )
                    })?;
                    match precision {
                        Some(p) => out.push_str(&format!("{value:.p$}")),
                        None => out.push_str(&value.to_string()),
                    }
                }
            }
        }
        Ok(out)
    }
}

/// `name` or `name:spec` between braces.
fn parse_field(field: &str) -> std::result::Result<Piece, String> {
    let (name, spec) = field.split_once(':').unwrap_or((field, ""));
    if name == "epoch" {
        let digits = spec.strip_suffix('d').unwrap_or(spec);
        let width = if digits.is_empty() { 0 } else { parse_number(digits, MAX_WIDTH, "width", field)? };
        return Ok(Piece::Epoch { width });
    }
    if !is_metric(name) {
        return Err(format!(
            "unknown field `{{{field}}}`: fields are epoch, loss, accuracy, lr, top<k>_accuracy, precision, \
             recall, f1, mae, and val_ of each"
        ));
    }
    let precision = match spec.strip_prefix('.') {
        None if spec.is_empty() => None,
        None => return Err(format!("format `{spec}` of `{{{field}}}`: metrics take `.P` or `.Pf`")),
        Some(p) => Some(parse_number(p.strip_suffix('f').unwrap_or(p), MAX_PRECISION, "precision", field)?),
    };
    Ok(Piece::Metric { name: name.to_string(), precision })
}

/// Decimal digits only, at most `max`.
fn parse_number(digits: &str, max: usize, what: &str, field: &str) -> std::result::Result<usize, String> {
    let huge = || format!("{what} `{digits}` of `{{{field}}}` is larger than {max}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} `{digits}` of `{{{field}}}` is not a number"));
    }
    let n: usize = digits.parse().map_err(|_| huge())?;
    if n > max {
        return Err(huge());
    }
    Ok(n)
}

/// The metrics `fit` can log: loss, accuracy, lr, top<k>_accuracy, precision, recall, f1, mae,
/// optionally prefixed `val_` (whether this run logs them is checked when `fit` starts).
fn is_metric(name: &str) -> bool {
    let base = name.strip_prefix("val_").unwrap_or(name);
    let top_k = base
        .strip_prefix("top")
        .and_then(|r| r.strip_suffix("_accuracy"))
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
    matches!(base, "loss" | "accuracy" | "lr" | "precision" | "recall" | "f1" | "mae") || top_k
}

#[cfg(test)]
mod tests {
    use super::FileTemplate;
    use std::path::PathBuf;

    #[test]
    fn the_fixed_folder_ends_before_the_first_field() {
        for (template, folder) in [
            ("runs/ckpt-{epoch}.st", Some("runs")),
            ("runs/a/{epoch}/m.st", Some("runs/a")),
            ("runs/e{epoch}/m.st", Some("runs")),
            ("{epoch}/m.st", None),
            ("m-{loss}.st", None),
            ("/m.st", None),
            ("plain.st", None),
        ] {
            let parsed = FileTemplate::parse(template).unwrap();
            assert_eq!(parsed.fixed_folder(), folder.map(PathBuf::from), "{template}");
        }
        let parsed = FileTemplate::parse("{val_f1:.3}-{epoch}-{mae}").unwrap();
        assert_eq!(parsed.metric_names().collect::<Vec<_>>(), ["val_f1", "mae"]);
    }
}
