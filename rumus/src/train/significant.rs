//! Metric values as text with four significant digits (`0.9723`, `2.303`, `1.234e-05`), so a
//! small regression loss does not print as `0.0000`.

/// Significant digits shown.
const DIGITS: i32 = 4;

/// `value` with four significant digits: fixed-point between 1e-3 and 1e5, scientific with a
/// signed two-digit exponent (Python's `1.234e-05`) outside; 0, NaN and infinities as Rust writes
/// them.
pub(crate) fn significant(value: f32) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs();
    if (1e-3..1e5).contains(&magnitude) {
        // The decimals after rounding: 9.9996 rounds to 10.00, whose exponent is one more.
        let rounded: f64 = format!("{:.*e}", (DIGITS - 1) as usize, magnitude).parse().unwrap_or(magnitude as f64);
        let exponent = rounded.log10().floor() as i32;
        let decimals = (DIGITS - 1 - exponent).max(0) as usize;
        return format!("{value:.decimals$}");
    }
    let text = format!("{:.*e}", (DIGITS - 1) as usize, value);
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = exponent.strip_prefix('-').map_or(("+", exponent), |d| ("-", d));
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::significant;

    #[test]
    fn four_significant_digits_and_scientific_outside_1e_3_to_1e5() {
        for (value, text) in [
            (0.0912, "0.09120"),
            (0.97234, "0.9723"),
            (2.302_7, "2.303"),
            (12.3456, "12.35"),
            (9.99996, "10.00"),
            (12345.6, "12346"),
            (1.2345e-5, "1.234e-05"),
            (-3.0e-7, "-3.000e-07"),
            (2.5e7, "2.500e+07"),
            (0.0, "0"),
            (f32::NAN, "NaN"),
            (0.001, "0.001000"),
        ] {
            assert_eq!(significant(value), text, "{value}");
        }
    }
}
