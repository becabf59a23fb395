//! The IDX format of MNIST and Fashion-MNIST (LeCun's `*-idx3-ubyte`), raw or gzipped.
//!
//! Layout: two zero bytes, a type byte (0x08 = unsigned byte, the only one these data sets
//! use), the number of dimensions, each dimension as a big-endian u32, then the data.
//!
//! Files are decoded as a stream: the header is read first and the data size it declares is a
//! hard limit, so a small gzip file that inflates to gigabytes (a decompression bomb) fails
//! after reading one byte past that size, and memory never grows past it.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::Path;

use crate::{Error, Result};

/// The first two bytes of every gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Bytes read per call while streaming the data.
const CHUNK: usize = 64 * 1024;

/// An IDX array of unsigned bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    /// The header's dimensions, outermost first (e.g. `[60000, 28, 28]` for MNIST images).
    pub dims: Vec<usize>,
    /// The elements, row-major; `dims.iter().product()` bytes.
    pub data: Vec<u8>,
}

/// Reads an IDX file; gzip is detected by its magic bytes, whatever the file name says.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::new(file);
    let gzipped = reader.fill_buf().map_err(|e| Error::io(path, e))?.starts_with(&GZIP_MAGIC);
    decode(reader, path, gzipped)
}

/// Parses IDX bytes (raw or gzipped); `path` only names the source in errors.
pub fn parse_idx(bytes: &[u8], path: &Path) -> Result<IdxArray> {
    decode(bytes, path, bytes.starts_with(&GZIP_MAGIC))
}

/// Decodes a raw stream, or a gzip stream when `gzipped`.
fn decode(reader: impl Read, path: &Path, gzipped: bool) -> Result<IdxArray> {
    if gzipped {
        let mut stream = Stream { reader: flate2::read::GzDecoder::new(reader), path, gzipped };
        stream.idx()
    } else {
        Stream { reader, path, gzipped }.idx()
    }
}

/// A byte source and what its read errors mean.
struct Stream<'p, R> {
    reader: R,
    path: &'p Path,
    gzipped: bool,
}

impl<R: Read> Stream<'_, R> {
    fn error(&self, e: std::io::Error) -> Error {
        if self.gzipped {
            Error::format(self.path, format!("corrupt gzip stream: {e}"))
        } else {
            Error::io(self.path, e)
        }
    }

    /// Fills `buf` as far as the stream goes; returns how many bytes were read.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.reader.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(e)),
            }
        }
        Ok(filled)
    }

    /// Reads at most `limit` bytes; the buffer never holds more than `limit` bytes of capacity.
    fn read_at_most(&mut self, limit: usize) -> Result<Vec<u8>> {
        let mut data = Vec::new();
        let mut chunk = vec![0u8; CHUNK.min(limit)];
        while data.len() < limit {
            let want = chunk.len().min(limit - data.len());
            let n = self.read_up_to(&mut chunk[..want])?;
            if n == 0 {
                break;
            }
            if data.capacity() - data.len() < n {
                let target = (data.len() * 2).max(data.len() + n).min(limit);
                data.reserve_exact(target - data.len());
            }
            data.extend_from_slice(&chunk[..n]);
        }
        Ok(data)
    }

    fn idx(&mut self) -> Result<IdxArray> {
        let path = self.path;
        let bad = |detail: String| Error::format(path, format!("not an IDX file: {detail}"));
        let mut magic = [0u8; 4];
        match self.read_up_to(&mut magic)? {
            0 => return Err(bad("the file is empty".into())),
            n if n < 4 => return Err(bad(format!("{n} bytes are too few for the 4-byte magic number"))),
            _ => {}
        }
        if magic[0] != 0 || magic[1] != 0 {
            return Err(bad(format!("magic number starts {:#04x} {:#04x}, expected 0x00 0x00", magic[0], magic[1])));
        }
        if magic[2] != 0x08 {
            return Err(bad(format!("element type {:#04x} is not 0x08 (unsigned byte)", magic[2])));
        }
        let rank = magic[3] as usize;
        if rank == 0 {
            return Err(bad("zero dimensions".into()));
        }
        let mut raw_dims = vec![0u8; 4 * rank];
        let got = self.read_up_to(&mut raw_dims)?;
        if got < raw_dims.len() {
            let header = 4 + 4 * rank;
            return Err(Error::format(path, format!("truncated: header needs {header} bytes, file has {}", 4 + got)));
        }
        let dims: Vec<usize> =
            raw_dims.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize).collect();
        let expected = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| bad(format!("dimensions {dims:?} overflow")))?;
        let data = self.read_at_most(expected)?;
        if data.len() < expected {
            return Err(Error::format(
                path,
                format!("truncated: dimensions {dims:?} need {expected} data bytes, file has {}", data.len()),
            ));
        }
        if self.read_up_to(&mut [0u8; 1])? > 0 {
            return Err(Error::format(
                path,
                format!(
                    "trailing bytes after the {expected} data bytes of dimensions {dims:?} (read no further: \
                     the file is larger than its header says)"
                ),
            ));
        }
        Ok(IdxArray { dims, data })
    }
}
