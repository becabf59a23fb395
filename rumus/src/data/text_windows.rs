//! Next-token windows over a token sequence: the training data of a language model.

use std::ops::Range;
use std::sync::Arc;

use super::{Dataset, SeqClass};
use crate::{Device, Error, RawTensor, Result, Shape1, Tensor};

/// The share of tokens [`TextWindows::split`] usually gives to training (nanoGPT's 90%).
pub const DEFAULT_TRAIN_FRACTION: f64 = 0.9;

/// Every window of `T` consecutive tokens of a sequence, each with its next-token targets:
/// sample `i` is `tokens[i .. i + T]` and its target `tokens[i + 1 .. i + T + 1]`, so there are
/// `tokens.len() - T` samples. Tokens are ids below `V`.
///
/// Inputs are `[batch, T]` `u32` tensors (what `Embedding` takes), targets `[batch, T]` `u32`
/// class indices ([`SeqClass<T, V>`]). Random windows come from the loader's shuffle. Clones
/// share the tokens.
#[derive(Clone)]
pub struct TextWindows<const T: usize, const V: usize> {
    tokens: Arc<[u32]>,
    range: Range<usize>,
    /// Sample `i` starts at token `i · stride` (1: every window).
    stride: usize,
}

impl<const T: usize, const V: usize> std::fmt::Debug for TextWindows<T, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TextWindows<{T}, {V}>({} tokens, {} windows)", self.range.len(), self.len())
    }
}

impl<const T: usize, const V: usize> TextWindows<T, V> {
    /// Windows over `tokens`. Every token must be below `V` (the first that is not is an
    /// [`Error::IndexOutOfRange`] naming it, `V` and its position), and there must be more than
    /// `T` tokens (at least one window); `T` must be at least 1.
    pub fn new(tokens: Vec<u32>) -> Result<Self> {
        let tokens: Arc<[u32]> = validate::<T, V>("TextWindows::new", tokens)?.into();
        Self::part("TextWindows::new", tokens.clone(), 0..tokens.len())
    }

    /// A deterministic train/validation split by position, as nanoGPT does: the first
    /// `floor(tokens.len() * train_fraction)` tokens train, the rest validate; no window spans
    /// both. `train_fraction` must lie strictly between 0 and 1 (usually
    /// [`DEFAULT_TRAIN_FRACTION`]), and each part must hold more than `T` tokens. Tokens are
    /// validated as in [`new`](Self::new).
    pub fn split(tokens: Vec<u32>, train_fraction: f64) -> Result<(Self, Self)> {
        const OP: &str = "TextWindows::split";
        if !(train_fraction > 0.0 && train_fraction < 1.0) {
            return Err(Error::invalid(OP, format!("train_fraction {train_fraction} is not strictly between 0 and 1")));
        }
        let tokens: Arc<[u32]> = validate::<T, V>(OP, tokens)?.into();
        let cut = (tokens.len() as f64 * train_fraction).floor() as usize;
        let train = Self::part(OP, tokens.clone(), 0..cut)?;
        let validation = Self::part(OP, tokens.clone(), cut..tokens.len())?;
        Ok((train, validation))
    }

    /// Windows over `tokens[range]`, which must hold more than `T` tokens.
    fn part(op: &'static str, tokens: Arc<[u32]>, range: Range<usize>) -> Result<Self> {
        if range.len() <= T {
            return Err(Error::invalid(
                op,
                format!(
                    "{} tokens (positions {}..{}) make no window of {T} tokens plus a next-token target; \
                     more than {T} are needed",
                    range.len(),
                    range.start,
                    range.end
                ),
            ));
        }
        Ok(TextWindows { tokens, range, stride: 1 })
    }

    /// The windows starting every `stride` tokens: sample `i` is the window at `i · stride`.
    /// `strided(T)` gives non-overlapping windows, so that each token is predicted once (the
    /// validation loss of examples/shakespeare.rs). `stride` must be at least 1.
    pub fn strided(mut self, stride: usize) -> Result<Self> {
        if stride == 0 {
            return Err(Error::invalid("TextWindows::strided", "stride 0 would repeat one window"));
        }
        self.stride = stride;
        Ok(self)
    }

    /// Token position of sample `i`'s first token.
    fn start(&self, i: usize) -> usize {
        i * self.stride
    }

    /// The tokens these windows are cut from.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens[self.range.clone()]
    }

    /// Window `i` and its targets, as slices of [`tokens`](Self::tokens).
    pub fn window(&self, i: usize) -> Result<(&[u32], &[u32])> {
        if i >= self.len() {
            return Err(Error::IndexOutOfRange {
                op: "TextWindows::window",
                index: i64::try_from(i).unwrap_or(i64::MAX),
                limit: self.len(),
                position: 0,
            });
        }
        let (tokens, i) = (self.tokens(), self.start(i));
        Ok((&tokens[i..i + T], &tokens[i + 1..i + T + 1]))
    }
}

/// `tokens` when every one is below `V`, there are more than `T` and `T >= 1`.
fn validate<const T: usize, const V: usize>(op: &'static str, tokens: Vec<u32>) -> Result<Vec<u32>> {
    if T == 0 {
        return Err(Error::invalid(op, "a window of 0 tokens (T = 0) holds nothing to predict from"));
    }
    if let Some((position, &token)) = tokens.iter().enumerate().find(|(_, &t)| t as usize >= V) {
        return Err(Error::IndexOutOfRange { op, index: i64::from(token), limit: V, position });
    }
    if tokens.len() <= T {
        return Err(Error::invalid(
            op,
            format!(
                "{} tokens make no window of {T} tokens plus a next-token target; more than {T} are needed",
                tokens.len()
            ),
        ));
    }
    Ok(tokens)
}

impl<const T: usize, const V: usize> Dataset for TextWindows<T, V> {
    type Sample = Shape1<T>;
    type Target = SeqClass<T, V>;

    fn len(&self) -> usize {
        (self.range.len() - T - 1) / self.stride + 1
    }

    /// Inputs and targets `[indices.len(), T]` `u32`, each assembled on the host and uploaded
    /// in one transfer.
    fn get_batch(&self, indices: &[usize], device: &Device) -> Result<(Tensor<Shape1<T>>, RawTensor)> {
        const OP: &str = "TextWindows::get_batch";
        let len = self.len();
        if let Some((position, &i)) = indices.iter().enumerate().find(|(_, &i)| i >= len) {
            return Err(Error::IndexOutOfRange {
                op: OP,
                index: i64::try_from(i).unwrap_or(i64::MAX),
                limit: len,
                position,
            });
        }
        let count = indices
            .len()
            .checked_mul(T)
            .ok_or_else(|| Error::shape(OP, format!("{} windows of {T} tokens overflow usize", indices.len())))?;
        let tokens = self.tokens();
        let mut inputs = Vec::with_capacity(count);
        let mut targets = Vec::with_capacity(count);
        for &i in indices {
            let i = self.start(i);
            inputs.extend_from_slice(&tokens[i..i + T]);
            targets.extend_from_slice(&tokens[i + 1..i + T + 1]);
        }
        let shape = [indices.len(), T];
        let inputs = Tensor::from_raw(RawTensor::from_indices(&inputs, &shape, device)?)?;
        let targets = RawTensor::from_indices(&targets, &shape, device)?;
        Ok((inputs, targets))
    }
}
