//! Counter-based random numbers: value `i` depends only on `(seed, i)`, so the CPU and the GPU
//! kernels (see `rumus/shaders/random.wgsl`) produce the same stream and work splits freely.

/// PCG-style integer hash (Jarzynski & Olano, "Hash Functions for GPU Rendering", 2020).
pub fn pcg_hash(x: u32) -> u32 {
    let state = x.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

/// The stream key for a 64-bit seed.
pub fn seed_key(seed: u64) -> u32 {
    pcg_hash((seed as u32) ^ pcg_hash((seed >> 32) as u32))
}

/// The `index`-th random word of the stream `key`.
pub fn random_u32(key: u32, index: u32) -> u32 {
    pcg_hash(index ^ pcg_hash(key.wrapping_add(index.rotate_left(16))))
}

/// Uniform in `[0, 1)` with 24 random bits.
pub fn uniform(key: u32, index: u32) -> f32 {
    (random_u32(key, index) >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Standard normal by Box–Muller on the words `2i` and `2i+1`.
pub fn normal(key: u32, index: u32) -> f32 {
    let u1 = ((random_u32(key, index.wrapping_mul(2)) >> 8) as f32 + 1.0) * (1.0 / 16_777_217.0);
    let u2 = uniform(key, index.wrapping_mul(2).wrapping_add(1));
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// A small seeded generator for host-side work (initialisation, shuffling).
#[derive(Clone, Debug)]
pub struct Rng {
    key: u32,
    counter: u32,
}

impl Rng {
    /// A generator whose stream depends only on `seed` (same numbers on every machine).
    pub fn new(seed: u64) -> Self {
        Rng { key: seed_key(seed), counter: 0 }
    }

    /// The next 32 random bits of the stream.
    pub fn next_u32(&mut self) -> u32 {
        let value = random_u32(self.key, self.counter);
        self.counter = self.counter.wrapping_add(1);
        value
    }

    /// A fresh 64-bit seed for a sub-stream (e.g. one per layer).
    pub fn next_seed(&mut self) -> u64 {
        ((self.next_u32() as u64) << 32) | self.next_u32() as u64
    }

    /// Uniform in `[0, 1)` with 24 random bits (every value exactly representable as f32).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / 16_777_216.0)
    }

    /// Uniform integer in `0..n` (n > 0), without modulo bias worth noticing for n ≪ 2³².
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u32() as u64 * n as u64) >> 32) as usize
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_and_normal_have_the_right_moments() {
        let key = seed_key(7);
        let n = 100_000u32;
        let (mut su, mut sn, mut sn2) = (0.0f64, 0.0f64, 0.0f64);
        for i in 0..n {
            let u = uniform(key, i);
            assert!((0.0..1.0).contains(&u));
            su += u as f64;
            let z = normal(key, i) as f64;
            sn += z;
            sn2 += z * z;
        }
        let n = n as f64;
        assert!((su / n - 0.5).abs() < 0.01);
        assert!((sn / n).abs() < 0.02);
        assert!((sn2 / n - 1.0).abs() < 0.02);
    }
}
