//! Which parameters weight decay applies to: PyTorch's parameter groups as nanoGPT builds them
//! (`p.dim() >= 2` decayed, biases and norm weights not), as a per-parameter test.

/// Which parameters an optimizer's weight decay applies to; the others are stepped with a
/// weight decay of 0.
#[derive(Clone, Copy, Debug, Default)]
pub enum DecayFilter {
    /// Every parameter (PyTorch's single parameter group).
    #[default]
    All,
    /// Parameters of rank 2 or more (weight matrices, embeddings, convolution kernels);
    /// biases, LayerNorm/BatchNorm weights and other vectors are not decayed (nanoGPT's
    /// `configure_optimizers`).
    MatricesOnly,
    /// Parameters for which the function of the parameter's name and shape returns `true`.
    Custom(fn(&str, &[usize]) -> bool),
}

impl DecayFilter {
    /// Whether the parameter `name` of shape `shape` is decayed.
    pub fn decays(&self, name: &str, shape: &[usize]) -> bool {
        match self {
            DecayFilter::All => true,
            DecayFilter::MatricesOnly => shape.len() >= 2,
            DecayFilter::Custom(f) => f(name, shape),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DecayFilter;

    #[test]
    fn matrices_only_decays_rank_two_and_more() {
        let f = DecayFilter::MatricesOnly;
        assert!(!f.decays("bias", &[4]));
        assert!(!f.decays("scalar", &[]));
        assert!(f.decays("weight", &[4, 3]));
        assert!(f.decays("kernel", &[2, 3, 3, 3]));
        assert!(DecayFilter::All.decays("bias", &[4]));
        let custom = DecayFilter::Custom(|name, _| !name.ends_with("bias"));
        assert!(!custom.decays("fc.bias", &[4, 4]));
        assert!(custom.decays("fc.weight", &[4]));
    }
}
