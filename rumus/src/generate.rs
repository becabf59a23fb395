//! Sampling text from a language model: token ids in, next-token logits out.
//!
//! [`Generation::generate`] decodes incrementally with a key/value cache
//! ([`Module::forward_cached`]): the prompt is run once (prefill), then one position per new
//! token. [`Generation::generate_uncached`] re-runs the whole window for every token, as
//! nanoGPT's `generate` does; it is the reference the cached path is tested against.
//!
//! A model whose forward is written by hand must implement [`Module::forward_cached`] itself
//! (passing the cache to its attention and position layers, as [`Sequential`] does); the
//! default runs `forward_raw`, which ignores the cache, and `generate` reports such a model as
//! an error instead of sampling from the wrong logits. `#[model]` generates `forward_cached`.
//!
//! [`Sequential`]: crate::nn::Sequential

use crate::autograd::NoGradGuard;
use crate::nn::{EvalGuard, KvCache, Module};
use crate::rng::Rng;
use crate::{Device, Error, Model, RawTensor, Result, Shape1, Shape2};

const OP: &str = "generate";

/// Settings of [`Generation::generate`]: how many tokens, and how to pick each one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Generate {
    max_new_tokens: usize,
    temperature: f32,
    top_k: Option<usize>,
    seed: u64,
}

impl Generate {
    /// `max_new_tokens` tokens sampled at temperature 1 from the full distribution, seed 0.
    pub fn new(max_new_tokens: usize) -> Self {
        Generate { max_new_tokens, temperature: 1.0, top_k: None, seed: 0 }
    }

    /// Divides the logits by `temperature` before sampling; `0` picks the most likely token
    /// (greedy). Negative, infinite or NaN values are an error when generating.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = temperature;
        self
    }

    /// Samples among the `k` most likely tokens only (all tokens tied with the `k`-th are kept,
    /// as in nanoGPT); `1` is greedy, `0` an error. A `k` above the vocabulary keeps all.
    pub fn top_k(mut self, k: usize) -> Self {
        self.top_k = Some(k);
        self
    }

    /// The seed of the sampling stream (the crate's counter-based [`Rng`]): a seed repeats a
    /// run exactly.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How many tokens are appended to the prompt.
    pub fn max_new_tokens(&self) -> usize {
        self.max_new_tokens
    }

    /// Whether each token is the most likely one (temperature 0 or top-k 1).
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0 || self.top_k == Some(1)
    }

    fn check(&self) -> Result<()> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(Error::invalid(
                OP,
                format!("temperature {} must be finite and non-negative", self.temperature),
            ));
        }
        if self.top_k == Some(0) {
            return Err(Error::invalid(OP, "top_k 0 keeps no token; it must be at least 1"));
        }
        Ok(())
    }
}

/// Text generation for every model that maps `T` token ids to `T` rows of `V` logits
/// (`Model<Input = Shape1<T>, Output = Shape2<T, V>>`). Both methods run in eval mode without a
/// graph and return the prompt followed by the new tokens, as nanoGPT's `generate` does.
///
/// ```
/// use rumus::prelude::*;
///
/// #[model(input = [8])] // 8 token ids per sample
/// pub struct TinyLm {
///     embed: layers![Embedding(16, 8), PositionalEmbedding(8)],
///     blocks: layers![TransformerBlock(2)],
///     head: layers![LayerNorm, Linear(16)], // [8, 16]: logits over 16 tokens at each position
/// }
///
/// let model = TinyLm::new(&Device::cpu(), 7)?;
/// let out = model.generate(&[1, 2, 3], &Generate::new(5).temperature(0.8).seed(1))?;
/// assert_eq!(out.len(), 3 + 5);
/// assert_eq!(out[..3], [1, 2, 3]);
/// assert!(out.iter().all(|&token| token < 16));
/// // The cache gives what re-running the whole window gives.
/// let greedy = Generate::new(5);
/// assert_eq!(model.generate(&[1, 2, 3], &greedy)?, model.generate_uncached(&[1, 2, 3], &greedy)?);
/// assert!(model.generate(&[16], &greedy).is_err()); // not a token of the vocabulary
/// # Ok::<(), rumus::Error>(())
/// ```
pub trait Generation {
    /// Samples `settings.max_new_tokens()` tokens after `prompt`, with a key/value cache.
    ///
    /// The last `T` tokens of the prompt are run once; each new token then costs one position.
    /// When the cache holds `T` positions (the block length), it is cleared and refilled from the
    /// last `T / 2` tokens (at least one), so later tokens see between `T / 2` and `T - 1`
    /// tokens of context; below that point the result equals [`Generation::generate_uncached`].
    ///
    /// Errors: an empty prompt, a token `>= V`, bad [`Generate`] settings, non-finite logits, or
    /// a model whose `forward_cached` ignores the cache (see the module docs).
    fn generate(&self, prompt: &[u32], settings: &Generate) -> Result<Vec<u32>>;

    /// As [`Generation::generate`] without a cache: every token re-runs `forward_raw` on the
    /// last `T` tokens (a sliding window, nanoGPT's way): `T` times the work per token.
    fn generate_uncached(&self, prompt: &[u32], settings: &Generate) -> Result<Vec<u32>>;
}

impl<M, const T: usize, const V: usize> Generation for M
where
    M: Model<Input = Shape1<T>, Output = Shape2<T, V>>,
{
    fn generate(&self, prompt: &[u32], settings: &Generate) -> Result<Vec<u32>> {
        let mut decoder = CachedDecoder { model: self, cache: KvCache::new(), block: T };
        run(self, Window { block: T, vocab: V }, prompt, settings, |device, seq| decoder.next_logits(device, seq, V))
    }

    fn generate_uncached(&self, prompt: &[u32], settings: &Generate) -> Result<Vec<u32>> {
        run(self, Window { block: T, vocab: V }, prompt, settings, |device, seq| {
            let window = &seq[seq.len().saturating_sub(T)..];
            last_logits(&self.forward_raw(&tokens(window, device)?)?, window.len(), V)
        })
    }
}

/// The model's block length and vocabulary.
#[derive(Clone, Copy)]
struct Window {
    block: usize,
    vocab: usize,
}

/// Checks the inputs, then appends one sampled token per call of `next_logits` (the logits of
/// the token after the sequence so far), in eval mode without a graph.
fn run(
    model: &dyn Module,
    window: Window,
    prompt: &[u32],
    settings: &Generate,
    mut next_logits: impl FnMut(&Device, &[u32]) -> Result<Vec<f32>>,
) -> Result<Vec<u32>> {
    settings.check()?;
    check_prompt(prompt, window)?;
    let device = model_device(model);
    let _eval = EvalGuard::new();
    let _no_grad = NoGradGuard::new();
    let mut rng = Rng::new(settings.seed);
    let mut seq = prompt.to_vec();
    seq.try_reserve(settings.max_new_tokens).map_err(|_| {
        Error::invalid(OP, format!("max_new_tokens {} does not fit in memory", settings.max_new_tokens))
    })?;
    for _ in 0..settings.max_new_tokens {
        let logits = next_logits(&device, &seq)?;
        seq.push(pick(&logits, settings, &mut rng)?);
    }
    Ok(seq)
}

fn check_prompt(prompt: &[u32], window: Window) -> Result<()> {
    if prompt.is_empty() {
        return Err(Error::invalid(OP, "the prompt is empty: it needs at least one token"));
    }
    if let Some((position, &token)) = prompt.iter().enumerate().find(|(_, &t)| t as usize >= window.vocab) {
        return Err(Error::IndexOutOfRange { op: OP, index: token as i64, limit: window.vocab, position });
    }
    if window.block == 0 {
        return Err(Error::invalid(OP, "the model's block length is 0"));
    }
    Ok(())
}

/// The device of the model's first parameter (the CPU for a model without parameters).
fn model_device(model: &dyn Module) -> Device {
    let mut device = None;
    model.visit_params("", &mut |_, p| {
        if device.is_none() {
            device = Some(p.tensor().device().clone());
        }
    });
    device.unwrap_or_else(Device::cpu)
}

/// `[1, len]` token ids on `device`.
fn tokens(ids: &[u32], device: &Device) -> Result<RawTensor> {
    RawTensor::from_indices(ids, &[1, ids.len()], device)
}

/// The last row of logits `[1, len, vocab]`: the only values read back to the host.
fn last_logits(out: &RawTensor, len: usize, vocab: usize) -> Result<Vec<f32>> {
    if out.shape() != [1, len, vocab] {
        return Err(Error::shape(
            OP,
            format!("the model returned {:?} for {len} tokens: expected [1, {len}, {vocab}]", out.shape()),
        ));
    }
    out.narrow(1, len - 1, len)?.to_vec()
}

/// Incremental decoding state: the cache and the rule for refilling it.
struct CachedDecoder<'a> {
    model: &'a dyn Module,
    cache: KvCache,
    block: usize,
}

impl CachedDecoder<'_> {
    /// Logits of the token after `seq`: a prefill of the last `block` tokens the first time, a
    /// refill from the last `block / 2` when the cache is full, else one step with the newest.
    fn next_logits(&mut self, device: &Device, seq: &[u32], vocab: usize) -> Result<Vec<f32>> {
        let keep = if self.cache.position() == 0 {
            self.block
        } else if self.cache.position() >= self.block {
            self.cache.clear();
            (self.block / 2).max(1)
        } else {
            1
        };
        let window = &seq[seq.len().saturating_sub(keep)..];
        let out = self.model.forward_cached(&tokens(window, device)?, &mut self.cache)?;
        let (taken, layers) = (self.cache.taken_this_pass(), self.cache.layers());
        if taken == 0 || taken != layers {
            return Err(Error::invalid(
                OP,
                format!(
                    "the model's forward_cached used {taken} of {layers} cache slots: a model with a \
                     hand-written forward must implement forward_cached and pass the cache to its \
                     attention layers (or use generate_uncached)"
                ),
            ));
        }
        self.cache.end_pass(window.len());
        last_logits(&out, window.len(), vocab)
    }
}

/// The next token from `logits`: the most likely one (greedy), or a sample from
/// `softmax(logits / temperature)` restricted to the top `k`.
fn pick(logits: &[f32], settings: &Generate, rng: &mut Rng) -> Result<u32> {
    if let Some(i) = logits.iter().position(|v| !v.is_finite()) {
        return Err(Error::NonFinite(format!("generate: the model's logit for token {i} is {}", logits[i])));
    }
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if settings.is_greedy() {
        let best = logits.iter().position(|&v| v == max).unwrap_or(0);
        return Ok(best as u32);
    }
    let threshold = match settings.top_k {
        Some(k) if k < logits.len() => kth_largest(logits, k),
        _ => f32::NEG_INFINITY,
    };
    let weights: Vec<f64> = logits
        .iter()
        .map(|&v| if v < threshold { 0.0 } else { ((v as f64 - max as f64) / settings.temperature as f64).exp() })
        .collect();
    let total: f64 = weights.iter().sum();
    let target = rng.uniform() as f64 * total;
    let mut cumulative = 0.0;
    for (i, w) in weights.iter().enumerate() {
        cumulative += w;
        if *w > 0.0 && cumulative > target {
            return Ok(i as u32);
        }
    }
    // Rounding left the target at the very top: the last token with any weight.
    Ok(weights.iter().rposition(|&w| w > 0.0).unwrap_or(0) as u32)
}

/// The `k`-th largest value (`1 <= k <= values.len()`).
fn kth_largest(values: &[f32], k: usize) -> f32 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(|a, b| b.total_cmp(a));
    sorted[k - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_the_first_maximum_and_top_k_restricts_the_sample() {
        let mut rng = Rng::new(3);
        let logits = [0.5, 2.0, -1.0, 2.0];
        assert_eq!(pick(&logits, &Generate::new(1).temperature(0.0), &mut rng).unwrap(), 1);
        assert_eq!(pick(&logits, &Generate::new(1).top_k(1), &mut rng).unwrap(), 1);
        // Top 2 are the two tied 2.0s: samples only ever pick 1 or 3, and both appear.
        let settings = Generate::new(1).top_k(2);
        let picks: Vec<u32> = (0..200).map(|_| pick(&logits, &settings, &mut rng).unwrap()).collect();
        assert!(picks.iter().all(|&p| p == 1 || p == 3));
        assert!(picks.contains(&1) && picks.contains(&3));
    }

    #[test]
    fn sampling_follows_the_softmax() {
        // softmax([ln 1, ln 3]) = [0.25, 0.75]; at temperature 1 token 1 comes about 3 in 4 times.
        let mut rng = Rng::new(5);
        let logits = [0.0, 3f32.ln()];
        let n = 20_000;
        let ones = (0..n).filter(|_| pick(&logits, &Generate::new(1), &mut rng).unwrap() == 1).count();
        assert!((ones as f64 / n as f64 - 0.75).abs() < 0.015, "{ones} of {n}");
        // A high temperature flattens it towards one half.
        let hot = Generate::new(1).temperature(100.0);
        let ones = (0..n).filter(|_| pick(&logits, &hot, &mut rng).unwrap() == 1).count();
        assert!((ones as f64 / n as f64 - 0.5).abs() < 0.02, "{ones} of {n}");
    }

    #[test]
    fn non_finite_logits_are_an_error() {
        let err = pick(&[0.0, f32::NAN], &Generate::new(1), &mut Rng::new(0)).unwrap_err();
        assert!(matches!(err, Error::NonFinite(_)), "{err}");
    }
}
