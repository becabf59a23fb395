//! The stride phases of a strided convolution's input gradient. With stride s, an input row h
//! receives gradient only through the taps kh whose offset kh·dilation ≡ h + pad (mod s): the
//! rows of one residue a = (h + pad) mod s (a phase) all take the same taps, and the gradient of
//! a phase is a dense implicit GEMM over its rows and its taps alone. `conv2d.wgsl`'s input
//! gradient runs one GEMM per phase pair (rows × columns; up to 2×2 pairs per dispatch, one per
//! workgroup z), so no product is spent on a tap that carries nothing to the pixel: gathering
//! every tap for every pixel, as one GEMM over all of them, multiplied zeros 3 times in 4 at
//! stride 2 (issue #32: ResNet's downsampling convolutions). At stride 1 there is one phase:
//! every row, every tap.

/// One phase along one axis: which input rows (or columns) and which taps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct AxisPhase {
    /// The first input row of the phase; its rows are `first`, `first + stride`, ...
    pub first: usize,
    /// How many input rows the phase has.
    pub rows: usize,
    /// The first tap of the phase; its taps are `tap`, `tap + tap_step`, ...
    pub tap: usize,
    /// How many taps (0: the phase's rows get no gradient).
    pub taps: usize,
    /// The step between the phase's taps: stride / gcd(stride, dilation).
    pub tap_step: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The phases of one axis of `size` input rows, a window of `kernel` taps, `stride` (≥ 1),
/// `pad` and `dilation` (≥ 1), one per residue modulo the stride, phases without rows left out.
pub(super) fn axis_phases(size: usize, kernel: usize, stride: usize, pad: usize, dilation: usize) -> Vec<AxisPhase> {
    let tap_step = stride / gcd(stride, dilation);
    (0..stride)
        .filter_map(|residue| {
            // Rows h with (h + pad) mod stride == residue, and taps kh with kh·dilation likewise.
            let first = (residue + stride - pad % stride) % stride;
            let rows = size.saturating_sub(first).div_ceil(stride);
            let tap = (0..kernel.min(tap_step)).find(|kh| kh * dilation % stride == residue);
            let (tap, taps) = match tap {
                Some(kh) => (kh, (kernel - kh).div_ceil(tap_step)),
                None => (0, 0),
            };
            (rows > 0).then_some(AxisPhase { first, rows, tap, taps, tap_step })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::axis_phases;

    /// Against the definition: every row is in exactly one phase, and a tap is in a row's phase
    /// exactly when it carries gradient to it ((h + pad − kh·dilation) divisible by the stride).
    #[test]
    fn phases_partition_the_rows_and_hold_exactly_the_taps_that_reach_them() {
        for size in 1..12 {
            for kernel in 1..6 {
                for stride in 1..5 {
                    for pad in 0..4 {
                        for dilation in 1..4 {
                            let phases = axis_phases(size, kernel, stride, pad, dilation);
                            let mut seen = vec![0; size];
                            for ph in &phases {
                                let taps: Vec<usize> = (0..ph.taps).map(|t| ph.tap + t * ph.tap_step).collect();
                                assert!(taps.iter().all(|&kh| kh < kernel), "{ph:?}");
                                for r in 0..ph.rows {
                                    let h = ph.first + r * stride;
                                    assert!(h < size, "{ph:?}");
                                    seen[h] += 1;
                                    for kh in 0..kernel {
                                        let reaches =
                                            (h + pad + stride * kernel * dilation - kh * dilation) % stride == 0;
                                        assert_eq!(
                                            taps.contains(&kh),
                                            reaches,
                                            "size {size} kernel {kernel} stride {stride} pad {pad} dilation {dilation}: \
                                             row {h} tap {kh}, {ph:?}"
                                        );
                                    }
                                }
                            }
                            assert!(
                                seen.iter().all(|&n| n == 1),
                                "{size} {kernel} {stride} {pad} {dilation}: {seen:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn stride_one_is_one_phase_of_every_row_and_tap() {
        assert_eq!(
            axis_phases(7, 3, 1, 1, 2),
            vec![super::AxisPhase { first: 0, rows: 7, tap: 0, taps: 3, tap_step: 1 }]
        );
    }
}
