//! `erf` and `exp` for f32 written as straight-line arithmetic (polynomials, bit operations and
//! selects, no calls or branches), so that loops over slices of them vectorise. GELU's forward
//! and backward spend their time here.

/// `erf(x) / x` as a polynomial in `x²` on `|x| ≤ 1` (Chebyshev fit, highest power first;
/// error 1.3e-9).
const SMALL: [f32; 7] = [
    7.875_875e-5,
    -8.016_864e-4,
    5.189_087_4e-3,
    -2.685_421_2e-2,
    0.112_835_95,
    -0.376_126_27,
    std::f32::consts::FRAC_2_SQRT_PI,
];

/// `ln erfc(a)` as a polynomial in `a - 2.5` on `1 ≤ a ≤ 4` (Chebyshev fit, highest power
/// first; error 8.1e-9). Beyond 4, `1 - erfc(a)` rounds to 1 in f32.
const LARGE: [f32; 10] = [
    -7.582_682e-8,
    1.615_581_1e-6,
    -1.292_569_6e-5,
    7.738_76e-5,
    -4.207_916_5e-4,
    2.165_17e-3,
    -1.085_811_3e-2,
    -0.943_893_6,
    -5.352_681,
    -7.806_815,
];

/// Taylor coefficients of `eʳ` up to `r⁷ / 7!`, highest first (error below 6e-9 on
/// `|r| ≤ ln 2 / 2`).
const EXP: [f32; 8] = [1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0];

/// `ln 2` split (Cody and Waite) so that `n · LN2_HI` is exact for the `n` that occur.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding this rounds an f32 of magnitude below 2²² to an integer held in the low mantissa bits.
const ROUNDER: f32 = 12_582_912.0;

#[inline(always)]
fn horner(coefficients: &[f32], x: f32) -> f32 {
    coefficients.iter().fold(0.0, |acc, &c| acc * x + c)
}

/// `eˣ` within 2 ulp: 0 below -87, +∞ above 88, NaN for NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let clamped = x.clamp(-87.0, 88.0);
    // n = round(x / ln 2), read back as an integer from the mantissa bits of `shifted`.
    let shifted = clamped * std::f32::consts::LOG2_E + ROUNDER;
    let n = shifted - ROUNDER;
    let r = (clamped - n * LN2_HI) - n * LN2_LO;
    let power = (shifted.to_bits() as i32).wrapping_sub(ROUNDER.to_bits() as i32);
    // 2ⁿ for n in -126..=127: a normal f32 with exponent field n + 127.
    let scale = f32::from_bits((power.wrapping_add(127) as u32) << 23);
    let y = horner(&EXP, r) * scale;
    let y = if x > 88.0 { f32::INFINITY } else { y };
    let y = if x < -87.0 { 0.0 } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// The error function within 2e-7 of the exact value (NaN for NaN).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let small = x * horner(&SMALL, x * x);
    let erfc = exp(horner(&LARGE, a.clamp(1.0, 4.0) - 2.5));
    let large = (1.0 - erfc).copysign(x);
    let y = if a < 1.0 { small } else { large };
    if x.is_nan() {
        x
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every 1/4096 from -6 to 6 and a few far values.
    fn grid() -> impl Iterator<Item = f32> {
        (-6 * 4096..=6 * 4096).map(|i| i as f32 / 4096.0).chain([-1e30, -50.0, 20.0, 1e30, f32::MAX])
    }

    #[test]
    fn erf_matches_libm_within_2e_7() {
        let worst = grid().map(|x| ((erf(x) as f64) - libm::erf(x as f64)).abs()).fold(0.0, f64::max);
        assert!(worst < 2e-7, "max |erf - libm::erf| = {worst:e}");
        assert_eq!(erf(0.0), 0.0);
        assert_eq!(erf(f32::INFINITY), 1.0);
        assert_eq!(erf(f32::NEG_INFINITY), -1.0);
        assert!(erf(f32::NAN).is_nan());
    }

    #[test]
    fn exp_matches_libm_within_2_ulp() {
        let mut worst = 0.0f64;
        for i in -87 * 256..=88 * 256 {
            let x = i as f32 / 256.0;
            let exact = libm::exp(x as f64);
            worst = worst.max(((exp(x) as f64) - exact).abs() / exact);
        }
        assert!(worst < 2.5e-7, "max relative error {worst:e}");
        assert_eq!(exp(-100.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(f32::NAN).is_nan());
    }
}
