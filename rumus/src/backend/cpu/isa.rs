//! Which vector instruction set the CPU kernels with explicit SIMD paths run on, found at run
//! time: the widest one of this CPU that they are compiled for.

/// An instruction set a kernel has a path for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Isa {
    /// AVX-512F (16 f32 lanes, mask registers).
    Avx512,
    /// AVX2 with FMA (8 f32 lanes).
    Avx2,
    /// Portable Rust, for any CPU.
    Baseline,
}

/// The widest instruction set of this CPU that the kernels are compiled for.
pub fn isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// Every instruction set of this CPU the kernels have a path for, the portable one included
/// (tests run each against the definition).
#[cfg(test)]
pub fn isas() -> Vec<Isa> {
    let mut all = vec![Isa::Baseline];
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            all.push(Isa::Avx2);
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            all.push(Isa::Avx512);
        }
    }
    all
}
