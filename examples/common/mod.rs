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
