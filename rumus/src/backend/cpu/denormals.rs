//! Flushing subnormal floats to zero on the threads that run CPU kernels.
//!
//! x86 processors handle subnormal operands (|x| < 1.2e-38) in microcode, about a hundred times
//! slower than normal ones. Training produces them as gradients and optimizer moments shrink,
//! and epochs slow down as they do (BENCHMARKS.md). Like `torch.set_flush_denormal(True)`, rumus sets the flush-to-zero and
//! denormals-are-zero bits of MXCSR on its kernel threads (the rayon pool and each calling
//! thread). `RUMUS_KEEP_DENORMALS=1` leaves them alone.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    static SET_ON_THIS_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Sets FTZ and DAZ for the current thread.
fn flush_denormals_here() {
    #[cfg(target_arch = "x86_64")]
    {
        const FTZ_DAZ: u32 = (1 << 15) | (1 << 6);
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr/ldmxcsr read and write this thread's SSE control register through a
        // valid pointer to a local; setting FTZ/DAZ changes only how subnormals are rounded.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack));
            csr |= FTZ_DAZ;
            std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, readonly));
        }
    }
}

/// Makes sure the calling thread and every rayon worker flush subnormals. Cheap after the first
/// call on a thread.
pub fn ensure_flushed() {
    static POOL: Once = Once::new();
    if SET_ON_THIS_THREAD.with(|s| s.replace(true)) {
        return;
    }
    if std::env::var_os("RUMUS_KEEP_DENORMALS").is_some() {
        return;
    }
    flush_denormals_here();
    POOL.call_once(|| {
        rayon::broadcast(|_| flush_denormals_here());
    });
}
