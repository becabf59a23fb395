//! A character-level tokenizer: one token per Unicode scalar value (`char`) of a fixed
//! vocabulary, ids `0..vocab_size()` in vocabulary order.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The vocabulary file's format version.
const FORMAT_VERSION: u32 = 1;

/// The vocabulary file: `{"version": 1, "chars": ["\n", " ", "!", ...]}`, one single-character
/// string per id, in id order.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct VocabFile {
    version: u32,
    chars: Vec<String>,
}

/// Maps text to token ids and back, one id per character.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CharTokenizer {
    chars: Vec<char>,
    ids: HashMap<char, u32>,
}

impl CharTokenizer {
    /// The vocabulary of `text`: its distinct characters in sorted (code point) order, so the
    /// same text always gives the same ids. Empty text is an error.
    pub fn from_text(text: &str) -> Result<Self> {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        Self::from_chars(chars)
    }

    /// A tokenizer whose id `i` is `chars[i]`. An empty list, or a character listed twice, is
    /// an [`Error::InvalidArgument`] naming it.
    pub fn from_chars(chars: Vec<char>) -> Result<Self> {
        const OP: &str = "CharTokenizer::from_chars";
        if chars.is_empty() {
            return Err(Error::invalid(OP, "the vocabulary is empty"));
        }
        if u32::try_from(chars.len()).is_err() {
            return Err(Error::invalid(OP, format!("{} characters do not fit u32 ids", chars.len())));
        }
        let mut ids = HashMap::with_capacity(chars.len());
        for (id, &c) in chars.iter().enumerate() {
            if let Some(first) = ids.insert(c, id as u32) {
                return Err(Error::invalid(
                    OP,
                    format!("character {c:?} (U+{:04X}) is listed twice, at ids {first} and {id}", c as u32),
                ));
            }
        }
        Ok(CharTokenizer { chars, ids })
    }

    /// Number of distinct tokens.
    pub fn vocab_size(&self) -> usize {
        self.chars.len()
    }

    /// The vocabulary in id order.
    pub fn chars(&self) -> &[char] {
        &self.chars
    }

    /// The id of `c`, if it is in the vocabulary.
    pub fn id(&self, c: char) -> Option<u32> {
        self.ids.get(&c).copied()
    }

    /// The ids of `text`'s characters. A character outside the vocabulary is an
    /// [`Error::InvalidArgument`] naming it and its position (in characters, from 0).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        text.chars()
            .enumerate()
            .map(|(position, c)| {
                self.id(c).ok_or_else(|| {
                    Error::invalid(
                        "CharTokenizer::encode",
                        format!(
                            "character {c:?} (U+{:04X}) at position {position} is not in the vocabulary of {} characters",
                            c as u32,
                            self.chars.len()
                        ),
                    )
                })
            })
            .collect()
    }

    /// The text of `ids`. An id `>= vocab_size()` is an [`Error::IndexOutOfRange`] naming it
    /// and its position.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        ids.iter()
            .enumerate()
            .map(|(position, &id)| {
                self.chars.get(id as usize).copied().ok_or(Error::IndexOutOfRange {
                    op: "CharTokenizer::decode",
                    index: i64::from(id),
                    limit: self.chars.len(),
                    position,
                })
            })
            .collect()
    }

    /// Writes the vocabulary to `path` as JSON (`{"version": 1, "chars": [...]}`), atomically.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let file = VocabFile { version: FORMAT_VERSION, chars: self.chars.iter().map(|c| c.to_string()).collect() };
        let json = serde_json::to_vec(&file)
            .map_err(|e| Error::invalid("CharTokenizer::save", format!("cannot encode the vocabulary: {e}")))?;
        crate::io::write_atomic(path.as_ref(), &json)
    }

    /// Reads a vocabulary [`save`](Self::save) wrote. Anything else (not JSON of that form,
    /// another version, an entry that is not exactly one character, an empty list, a character
    /// listed twice) is an [`Error::Format`] naming the file and the problem.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let file: VocabFile = serde_json::from_slice(&bytes)
            .map_err(|e| Error::format(path, format!("not a character vocabulary: {e}")))?;
        if file.version != FORMAT_VERSION {
            return Err(Error::format(
                path,
                format!("vocabulary format version {} (this build reads {FORMAT_VERSION})", file.version),
            ));
        }
        let chars = file
            .chars
            .iter()
            .enumerate()
            .map(|(id, s)| {
                let mut it = s.chars();
                match (it.next(), it.next()) {
                    (Some(c), None) => Ok(c),
                    _ => Err(Error::format(path, format!("entry {id} ({s:?}) is not exactly one character"))),
                }
            })
            .collect::<Result<Vec<char>>>()?;
        Self::from_chars(chars).map_err(|e| match e {
            Error::InvalidArgument { detail, .. } => Error::format(path, detail),
            other => other,
        })
    }
}
