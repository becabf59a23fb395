//! The IDX format of MNIST and Fashion-MNIST (LeCun's `*-idx3-ubyte`), raw or gzipped.
//!
//! Layout: two zero bytes, a type byte (0x08 = unsigned byte, the only one these data sets
//! use), the number of dimensions, each dimension as a big-endian u32, then the data.

use std::io::Read;
use std::path::Path;

use crate::{Error, Result};

/// An IDX array of unsigned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Reads an IDX file; gzip is detected by its magic bytes, whatever the file name says.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    parse_idx(&bytes, path)
}

/// Parses IDX bytes (raw or gzipped); `path` only names the source in errors.
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut raw)
            .map_err(|e| Error::format(path, format!("corrupt gzip stream: {e}")))?;
        return parse_raw(&raw, path);
    }
    parse_raw(bytes, path)
}

fn parse_raw(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    let bad = |detail: String| Error::format(path, format!("not an IDX file: {detail}"));
    if bytes.is_empty() {
        return Err(bad("the file is empty".into()));
    }
    if bytes.len() < 4 {
        return Err(bad(format!("{} bytes are too few for the 4-byte magic number", bytes.len())));
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        return Err(bad(format!("magic number starts {:#04x} {:#04x}, expected 0x00 0x00", bytes[0], bytes[1])));
    }
    if bytes[2] != 0x08 {
        return Err(bad(format!("element type {:#04x} is not 0x08 (unsigned byte)", bytes[2])));
    }
    let rank = bytes[3] as usize;
    if rank == 0 {
        return Err(bad("zero dimensions".into()));
    }
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err(Error::format(path, format!("truncated: header needs {header} bytes, file has {}", bytes.len())));
    }
    let dims: Vec<usize> =
        bytes[4..header].chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize).collect();
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad(format!("dimensions {dims:?} overflow")))?;
    let body = bytes.len() - header;
    if body < expected {
        return Err(Error::format(
            path,
            format!("truncated: dimensions {dims:?} need {expected} data bytes, file has {body}"),
        ));
    }
    if body > expected {
        return Err(Error::format(
            path,
            format!("{} trailing bytes after the {expected} data bytes of dimensions {dims:?}", body - expected),
        ));
    }
    Ok(IdxArray { dims, data: bytes[header..].to_vec() })
}
