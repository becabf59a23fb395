//! Command-line settings shared by the examples.

/// `--flag value` from the command line, else the environment variable `env`.
pub fn setting(flag: &str, env: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned().or_else(|| std::env::var(env).ok())
}

/// A count from [`setting`], or `default` when absent or not a number.
pub fn count(flag: &str, env: &str, default: usize) -> usize {
    setting(flag, env).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `--precision f32|tensor-cores` (or `RUMUS_PRECISION`): with `tensor-cores`, sets `device`'s
/// matmuls to f16 tensor cores and returns true (the caller adds a `LossScaler`: the
/// mixed-precision mode). Any other value is an error naming `example`.
#[allow(dead_code)] // only the examples that can train on tensor cores call it
pub fn mixed_precision(example: &'static str, device: &rumus::Device) -> rumus::Result<bool> {
    match setting("--precision", "RUMUS_PRECISION").as_deref() {
        None | Some("f32") => Ok(false),
        Some("tensor-cores") => {
            device.set_matmul_precision(rumus::MatmulPrecision::F16TensorCores)?;
            Ok(true)
        }
        Some(other) => {
            let detail = format!("--precision {other}: want f32 or tensor-cores");
            Err(rumus::Error::InvalidArgument { op: example, detail })
        }
    }
}
