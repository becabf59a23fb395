//! Compiled compute pipelines, cached by (shader, entry point), and their bind group layouts,
//! cached by binding signature. Every kernel binds its parameters as a uniform at binding 0 and
//! its buffers at bindings 1.. in the order of its signature.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::attention::{constants_128, constants_32, constants_64, AttentionParams};
use super::batch_norm::BatchNormParams;
use super::conv2d_coop;
use super::coop_tiles;
use super::copy::CopyParams;
use super::cross_entropy::{cross_entropy_constants, CrossEntropyParams};
use super::elementwise::{binary_constants, unary_constants, BinaryParams, UnaryParams};
use super::fill::FillParams;
use super::grad_unscale::GradUnscaleParams;
use super::index::IndexParams;
use super::layer_norm::{LayerNormParams, ParamGradsParams};
use super::matmul::MatmulParams;
use super::optimizer::{self, OptimizerParams};
use super::params::{KernelParams, ParamLayout};
use super::random::RandomParams;
use super::recurrent::RecurrentParams;
use super::reduce::{reduce_constants, ArgmaxParams, ReduceParams};
use super::softmax::{SoftmaxBackwardParams, SoftmaxParams};
use super::warp::WarpParams;
use super::window::WindowParams;
use super::winograd::WinogradParams;
use crate::{Error, Result};

/// One WGSL file and what is placed before it: `constants` (op codes written in Rust, see
/// `elementwise.rs` and `reduce.rs`), `includes` (files of `rumus/shaders/lib/` it shares
/// with other kernels) and, for `row_reduce` files, which call `wg_sum`/`wg_max`, a prelude
/// chosen per adapter: subgroup operations where available, workgroup shared memory otherwise.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shader {
    pub name: &'static str,
    pub source: &'static str,
    /// The layout of its `struct Params`: a launch with another parameter struct is an error.
    pub params: ParamLayout,
    pub constants: Option<fn() -> String>,
    pub includes: &'static [&'static str],
    pub row_reduce: bool,
    /// Compiled without wgpu's injected runtime checks (see [`Pipelines::get`]).
    pub trusted: bool,
}

impl Shader {
    const fn new(name: &'static str, source: &'static str, params: ParamLayout) -> Shader {
        Shader { name, source, params, constants: None, includes: &[], row_reduce: false, trusted: false }
    }

    const fn with_constants(self, constants: fn() -> String) -> Shader {
        Shader { constants: Some(constants), ..self }
    }

    const fn including(self, includes: &'static [&'static str]) -> Shader {
        Shader { includes, ..self }
    }

    const fn row_reduce(self) -> Shader {
        Shader { row_reduce: true, ..self }
    }

    const fn trusted(self) -> Shader {
        Shader { trusted: true, ..self }
    }
}

macro_rules! shader {
    ($name:literal, $params:ty) => {
        Shader::new($name, include_str!(concat!("../../../shaders/", $name, ".wgsl")), <$params>::LAYOUT)
    };
}

/// `matmul_coop.wgsl` with its operands fetched along the sides the two booleans name.
macro_rules! matmul_coop {
    ($name:literal, $lhs_k_fast:literal, $rhs_n_fast:literal) => {
        Shader::new($name, include_str!("../../../shaders/matmul_coop.wgsl"), MatmulParams::LAYOUT)
            .with_constants(coop_tiles::oriented::<$lhs_k_fast, $rhs_n_fast>)
            .including(&[COOP_TILES])
            .trusted()
    };
}

macro_rules! lib {
    ($name:literal) => {
        include_str!(concat!("../../../shaders/lib/", $name, ".wgsl"))
    };
}

pub(crate) const PRELUDE_SUBGROUP: &str = include_str!("../../../shaders/prelude_reduce_subgroup.wgsl");
pub(crate) const PRELUDE_SHARED: &str = include_str!("../../../shaders/prelude_reduce_shared.wgsl");
const LOGISTIC: &str = lib!("logistic");
const ACTIVATION: &str = lib!("activation");
const WINDOW: &str = lib!("window");
const LINEAR: &str = lib!("linear");
const ROW_MAX_SUM: &str = lib!("row_max_sum");
const ATTENTION_TILES: &str = lib!("attention_tiles");
const ATTENTION_ROW_TILES: &str = lib!("attention_row_tiles");
const ATTENTION_BLOCKS: &str = lib!("attention_blocks");
const ATTENTION_DOUT: &str = lib!("attention_dout");
const RECURRENT_CELL: &str = lib!("recurrent_cell");
const BATCH_NORM_PARAMS: &str = lib!("batch_norm_params");
const BATCH_NORM_AFFINE: &str = lib!("batch_norm_affine");
const WINOGRAD_TILES: &str = lib!("winograd_tiles");
const WINOGRAD4_TRANSFORMS: &str = lib!("winograd4_transforms");
const COOP_TILES: &str = lib!("coop_tiles");

pub(crate) const FILL: Shader = shader!("fill", FillParams);
pub(crate) const COPY_STRIDED: Shader = shader!("copy_strided", CopyParams);
pub(crate) const RANDOM: Shader = shader!("random", RandomParams);
pub(crate) const UNARY: Shader =
    shader!("unary", UnaryParams).with_constants(unary_constants).including(&[LOGISTIC, ACTIVATION]);
pub(crate) const UNARY_BACKWARD: Shader =
    shader!("unary_backward", UnaryParams).with_constants(unary_constants).including(&[LOGISTIC, ACTIVATION]);
pub(crate) const BINARY: Shader = shader!("binary", BinaryParams).with_constants(binary_constants);
pub(crate) const REDUCE: Shader = shader!("reduce", ReduceParams).with_constants(reduce_constants).row_reduce();
pub(crate) const ARGMAX: Shader = shader!("argmax", ArgmaxParams);
pub(crate) const MATMUL: Shader = shader!("matmul", MatmulParams).trusted();
pub(crate) const MATMUL_VEC4: Shader = shader!("matmul_vec4", MatmulParams).trusted();
/// `matmul_coop.wgsl` for operands read along k or not (lhs) and along the columns or not (rhs),
/// in that order (`coop_tiles::matmul_shader`). Compiled only on devices opened with
/// cooperative matrices (`WgpuContext::has_tensor_cores`), as are the `CONV2D_COOP_` kernels.
pub(crate) const MATMUL_COOP: [Shader; 4] = [
    matmul_coop!("matmul_coop_kn", true, true),
    matmul_coop!("matmul_coop_kk", true, false),
    matmul_coop!("matmul_coop_mn", false, true),
    matmul_coop!("matmul_coop_mk", false, false),
];
pub(crate) const SOFTMAX: Shader = shader!("softmax", SoftmaxParams).row_reduce().including(&[ROW_MAX_SUM]);
pub(crate) const SOFTMAX_BACKWARD: Shader = shader!("softmax_backward", SoftmaxBackwardParams).row_reduce();
pub(crate) const LAYER_NORM: Shader = shader!("layer_norm", LayerNormParams).row_reduce();
pub(crate) const LAYER_NORM_BACKWARD: Shader = shader!("layer_norm_backward", LayerNormParams).row_reduce();
pub(crate) const LAYER_NORM_PARAM_GRADS: Shader = shader!("layer_norm_param_grads", ParamGradsParams);
pub(crate) const RMS_NORM: Shader = shader!("rms_norm", LayerNormParams).row_reduce();
pub(crate) const RMS_NORM_BACKWARD: Shader = shader!("rms_norm_backward", LayerNormParams).row_reduce();
pub(crate) const BATCH_NORM: Shader =
    shader!("batch_norm", BatchNormParams).row_reduce().including(&[BATCH_NORM_PARAMS, BATCH_NORM_AFFINE, LINEAR]);
pub(crate) const BATCH_NORM_BACKWARD: Shader = shader!("batch_norm_backward", BatchNormParams)
    .row_reduce()
    .including(&[BATCH_NORM_PARAMS, BATCH_NORM_AFFINE, LINEAR]);
pub(crate) const BATCH_NORM_RUNNING: Shader =
    shader!("batch_norm_running", BatchNormParams).including(&[BATCH_NORM_PARAMS, LINEAR]);
pub(crate) const AFFINE_WARP: Shader = shader!("affine_warp", WarpParams);
pub(crate) const CROSS_ENTROPY: Shader = shader!("cross_entropy", CrossEntropyParams)
    .with_constants(cross_entropy_constants)
    .row_reduce()
    .including(&[ROW_MAX_SUM]);
pub(crate) const IM2COL: Shader = shader!("im2col", WindowParams).including(&[WINDOW]);
pub(crate) const COL2IM: Shader = shader!("col2im", WindowParams).including(&[WINDOW]);
pub(crate) const CONV2D: Shader = shader!("conv2d", WindowParams).including(&[WINDOW]).trusted();
/// `conv2d_coop.wgsl` for one of a convolution's products (see `conv2d_coop.rs`).
macro_rules! conv2d_coop {
    ($name:literal, $constants:expr) => {
        Shader::new($name, include_str!("../../../shaders/conv2d_coop.wgsl"), WindowParams::LAYOUT)
            .with_constants($constants)
            .including(&[COOP_TILES, WINDOW])
            .trusted()
    };
}

pub(crate) const CONV2D_COOP_FORWARD: Shader = conv2d_coop!("conv2d_coop_forward", conv2d_coop::constants::<0>);
pub(crate) const CONV2D_COOP_WEIGHT_GRAD: Shader = conv2d_coop!("conv2d_coop_weight_grad", conv2d_coop::constants::<1>);
pub(crate) const CONV2D_DIRECT: Shader = shader!("conv2d_direct", WindowParams).including(&[WINDOW, LINEAR]);
pub(crate) const WINOGRAD: Shader = shader!("winograd", WinogradParams).including(&[WINOGRAD_TILES]).trusted();
pub(crate) const WINOGRAD4: Shader =
    shader!("winograd4", WinogradParams).including(&[WINOGRAD_TILES, WINOGRAD4_TRANSFORMS]).trusted();
pub(crate) const POOLING: Shader = shader!("pooling", WindowParams).including(&[WINDOW, LINEAR]);
pub(crate) const INDEX: Shader = shader!("index", IndexParams).including(&[LINEAR]);
pub(crate) const LSTM_FORWARD: Shader = shader!("lstm_forward", RecurrentParams).including(&[LOGISTIC, RECURRENT_CELL]);
pub(crate) const LSTM_BACKWARD: Shader =
    shader!("lstm_backward", RecurrentParams).including(&[LOGISTIC, RECURRENT_CELL]);
pub(crate) const GRU_FORWARD: Shader = shader!("gru_forward", RecurrentParams).including(&[LOGISTIC, RECURRENT_CELL]);
pub(crate) const GRU_BACKWARD: Shader = shader!("gru_backward", RecurrentParams).including(&[LOGISTIC, RECURRENT_CELL]);
/// `optimizer.wgsl` for one update of `optimizer.rs`'s `KINDS` (SGD, SGD with momentum, Adam,
/// RMSprop) over `$slots` parameters per dispatch.
macro_rules! optimizer {
    ($name:literal, $kind:literal, $slots:literal) => {
        Shader::new($name, include_str!("../../../shaders/optimizer.wgsl"), OptimizerParams::LAYOUT)
            .with_constants(optimizer::constants::<$kind, $slots>)
    };
}

/// Per `optimizer.rs`'s `SLOT_COUNTS` (1, 4, 8, 16 parameters per dispatch), one module for each of
/// `[sgd, sgd_momentum, adam, rmsprop]`.
pub(crate) const OPTIMIZER: [[Shader; 4]; 4] = [
    [
        optimizer!("optimizer_sgd", 0, 1),
        optimizer!("optimizer_sgd_momentum", 1, 1),
        optimizer!("optimizer_adam", 2, 1),
        optimizer!("optimizer_rmsprop", 3, 1),
    ],
    [
        optimizer!("optimizer_sgd_4", 0, 4),
        optimizer!("optimizer_sgd_momentum_4", 1, 4),
        optimizer!("optimizer_adam_4", 2, 4),
        optimizer!("optimizer_rmsprop_4", 3, 4),
    ],
    [
        optimizer!("optimizer_sgd_8", 0, 8),
        optimizer!("optimizer_sgd_momentum_8", 1, 8),
        optimizer!("optimizer_adam_8", 2, 8),
        optimizer!("optimizer_rmsprop_8", 3, 8),
    ],
    [
        optimizer!("optimizer_sgd_16", 0, 16),
        optimizer!("optimizer_sgd_momentum_16", 1, 16),
        optimizer!("optimizer_adam_16", 2, 16),
        optimizer!("optimizer_rmsprop_16", 3, 16),
    ],
];
pub(crate) const GRAD_UNSCALE: Shader = shader!("grad_unscale", GradUnscaleParams);

/// One fused-attention file in the head-size variant whose constants `$constants` writes
/// (see `attention.rs`), under its own name so that each variant is its own module.
/// The row kernels take `lib/attention_row_tiles.wgsl`, the blocked ones (`blocked`)
/// `lib/attention_blocks.wgsl`; further libraries follow the constants (the keys' side takes
/// `lib/attention_dout.wgsl`).
macro_rules! attention {
    ($name:literal, $file:literal, $constants:ident $(, $lib:expr)*) => {
        Shader::new($name, include_str!(concat!("../../../shaders/", $file, ".wgsl")), AttentionParams::LAYOUT)
            .with_constants($constants)
            .including(&[ATTENTION_TILES, ATTENTION_ROW_TILES $(, $lib)*])
            .trusted()
    };
    (blocked $name:literal, $file:literal, $constants:ident $(, $lib:expr)*) => {
        Shader::new($name, include_str!(concat!("../../../shaders/", $file, ".wgsl")), AttentionParams::LAYOUT)
            .with_constants($constants)
            .including(&[ATTENTION_TILES, ATTENTION_BLOCKS $(, $lib)*])
            .trusted()
    };
}

pub(crate) const ATTENTION_FORWARD_32: Shader = attention!("attention_forward_d32", "attention_forward", constants_32);
pub(crate) const ATTENTION_FORWARD_64: Shader = attention!("attention_forward_d64", "attention_forward", constants_64);
pub(crate) const ATTENTION_FORWARD_128: Shader =
    attention!("attention_forward_d128", "attention_forward", constants_128);
pub(crate) const ATTENTION_DQ_32: Shader =
    attention!("attention_backward_dq_d32", "attention_backward_dq", constants_32);
pub(crate) const ATTENTION_DQ_64: Shader =
    attention!("attention_backward_dq_d64", "attention_backward_dq", constants_64);
pub(crate) const ATTENTION_DQ_128: Shader =
    attention!("attention_backward_dq_d128", "attention_backward_dq", constants_128);
pub(crate) const ATTENTION_DKDV_32: Shader =
    attention!("attention_backward_dkdv_d32", "attention_backward_dkdv", constants_32, ATTENTION_DOUT);
pub(crate) const ATTENTION_DKDV_64: Shader =
    attention!("attention_backward_dkdv_d64", "attention_backward_dkdv", constants_64, ATTENTION_DOUT);
pub(crate) const ATTENTION_DKDV_128: Shader =
    attention!("attention_backward_dkdv_d128", "attention_backward_dkdv", constants_128, ATTENTION_DOUT);
pub(crate) const ATTENTION_DKDV_BLOCKED_32: Shader = attention!(blocked "attention_backward_dkdv_blocked_d32", "attention_backward_dkdv_blocked", constants_32, ATTENTION_DOUT);
pub(crate) const ATTENTION_DKDV_BLOCKED_64: Shader = attention!(blocked "attention_backward_dkdv_blocked_d64", "attention_backward_dkdv_blocked", constants_64, ATTENTION_DOUT);

/// Every shader the backend compiles (for validation in tests).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn all() -> impl Iterator<Item = &'static Shader> {
    SINGLE.iter().chain(&MATMUL_COOP).chain(OPTIMIZER.iter().flatten())
}

/// [`all`]'s shaders but the families of modules.
#[cfg(any(test, feature = "testing"))]
const SINGLE: &[Shader] = &[
    FILL,
    COPY_STRIDED,
    RANDOM,
    UNARY,
    UNARY_BACKWARD,
    BINARY,
    REDUCE,
    ARGMAX,
    MATMUL,
    MATMUL_VEC4,
    SOFTMAX,
    SOFTMAX_BACKWARD,
    CROSS_ENTROPY,
    LAYER_NORM,
    LAYER_NORM_BACKWARD,
    LAYER_NORM_PARAM_GRADS,
    RMS_NORM,
    RMS_NORM_BACKWARD,
    BATCH_NORM,
    BATCH_NORM_BACKWARD,
    BATCH_NORM_RUNNING,
    AFFINE_WARP,
    IM2COL,
    COL2IM,
    CONV2D,
    CONV2D_COOP_FORWARD,
    CONV2D_COOP_WEIGHT_GRAD,
    CONV2D_DIRECT,
    WINOGRAD,
    WINOGRAD4,
    POOLING,
    INDEX,
    GRAD_UNSCALE,
    LSTM_FORWARD,
    LSTM_BACKWARD,
    GRU_FORWARD,
    GRU_BACKWARD,
    ATTENTION_FORWARD_32,
    ATTENTION_FORWARD_64,
    ATTENTION_FORWARD_128,
    ATTENTION_DQ_32,
    ATTENTION_DQ_64,
    ATTENTION_DQ_128,
    ATTENTION_DKDV_32,
    ATTENTION_DKDV_64,
    ATTENTION_DKDV_128,
    ATTENTION_DKDV_BLOCKED_32,
    ATTENTION_DKDV_BLOCKED_64,
];

/// `RUMUS_WGPU_LOG_COMPILES=1` prints each kernel's compile time and thread to stderr, and each
/// wait of one thread for a kernel another is compiling (to see what a cold start spends its
/// time on).
fn log_compiles() -> bool {
    static LOG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LOG.get_or_init(|| std::env::var("RUMUS_WGPU_LOG_COMPILES").is_ok_and(|v| v.trim() == "1"))
}

/// Milliseconds since the first compile began, the time axis of the compile log.
fn log_clock(now: std::time::Instant) -> f64 {
    static FIRST: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    now.duration_since(*FIRST.get_or_init(|| now)).as_secs_f64() * 1e3
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("unnamed").to_string()
}

/// How a kernel uses one buffer binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    Read,
    Write,
}

/// Where one kernel stands (see [`Pipelines::state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelState {
    Compiled,
    /// Another thread is compiling it: asking for it now means waiting.
    Compiling,
    /// Not asked for yet (or its compile failed): asking for it compiles it on the spot.
    Absent,
}

pub(crate) struct Kernel {
    /// The shader's name and the entry point.
    pub name: (&'static str, &'static str),
    pub pipeline: ::wgpu::ComputePipeline,
    pub layout: Arc<::wgpu::BindGroupLayout>,
}

#[derive(Default)]
struct Cache {
    modules: HashMap<&'static str, Arc<ModuleSlot>>,
    layouts: HashMap<Vec<Access>, (Arc<::wgpu::BindGroupLayout>, ::wgpu::PipelineLayout)>,
    kernels: HashMap<(&'static str, &'static str), Arc<KernelSlot>>,
    /// Kernels for which a caller already ran a stand-in (logged once each).
    stood_in: std::collections::HashSet<(&'static str, &'static str)>,
}

/// One kernel's place in the cache, filled by the first thread that compiles it; a thread that
/// wants it meanwhile waits on the lock instead of compiling it a second time.
type KernelSlot = Mutex<Option<Arc<Kernel>>>;

/// One shader module's place in the cache, as a kernel's: the first of its kernels to compile
/// creates it (parsing and validating its WGSL, up to tens of milliseconds for the large ones)
/// under this lock, not the cache's, so other threads meanwhile find their kernels.
type ModuleSlot = Mutex<Option<::wgpu::ShaderModule>>;

pub(crate) struct Pipelines {
    cache: Mutex<Cache>,
    subgroups: bool,
    warming: AtomicUsize,
    /// The program (not the warm-up) has recorded an optimizer update: see `warmup.rs`.
    training: AtomicBool,
}

thread_local! {
    static WARMUP_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Pipelines {
    pub fn new(subgroups: bool) -> Self {
        Pipelines {
            cache: Mutex::new(Cache::default()),
            subgroups,
            warming: AtomicUsize::new(0),
            training: AtomicBool::new(false),
        }
    }

    pub fn subgroups(&self) -> bool {
        self.subgroups
    }

    /// The full WGSL text of `shader` as compiled on an adapter with or without subgroups.
    pub fn source(shader: &Shader, subgroups: bool) -> String {
        let constants = shader.constants.map(|f| f()).unwrap_or_default();
        let mut parts: Vec<&str> = Vec::new();
        if !constants.is_empty() {
            parts.push(&constants);
        }
        if shader.row_reduce {
            parts.push(if subgroups { PRELUDE_SUBGROUP } else { PRELUDE_SHARED });
        }
        parts.extend(shader.includes);
        parts.push(shader.source);
        parts.join("\n")
    }

    /// Whether `entry` of `shader` is compiled, being compiled by another thread (the warm-up's,
    /// at start-up) or neither, without waiting.
    pub fn state(&self, shader: &Shader, entry: &'static str) -> KernelState {
        let slot = {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let Some(slot) = cache.kernels.get(&(shader.name, entry)) else { return KernelState::Absent };
            slot.clone()
        };
        let state = match slot.try_lock() {
            Ok(kernel) if kernel.is_some() => KernelState::Compiled,
            Ok(_) => KernelState::Absent,
            Err(std::sync::TryLockError::WouldBlock) => KernelState::Compiling,
            Err(std::sync::TryLockError::Poisoned(p)) if p.get_ref().is_some() => KernelState::Compiled,
            Err(std::sync::TryLockError::Poisoned(_)) => KernelState::Absent,
        };
        state
    }

    /// Whether a caller should run a stand-in (a kernel computing the same values that compiles
    /// sooner) instead of `entry` of `shader`: another thread is compiling it, or nobody yet
    /// but the warm-up is running and will. Warm-up threads never do; they are there to
    /// compile. With `RUMUS_WGPU_LOG_COMPILES=1` the first stand-in for each kernel is logged.
    pub fn stand_in(&self, shader: &Shader, entry: &'static str) -> bool {
        if WARMUP_THREAD.get() {
            return false;
        }
        let stand_in = match self.state(shader, entry) {
            KernelState::Compiled => false,
            KernelState::Compiling => true,
            KernelState::Absent => self.warming.load(Ordering::Acquire) > 0,
        };
        if stand_in && log_compiles() {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if cache.stood_in.insert((shader.name, entry)) {
                eprintln!(
                    "rumus: thread {} runs a stand-in until {}.wgsl {entry} is compiled, from {:.1} ms",
                    thread_name(),
                    shader.name,
                    log_clock(std::time::Instant::now())
                );
            }
        }
        stand_in
    }

    /// Warm-up threads still compiling this cache's kernels (counted up before they start and
    /// down as each finishes; see `warmup.rs`).
    pub fn warming(&self) -> &AtomicUsize {
        &self.warming
    }

    /// Records that the calling thread stepped an optimizer, which ends the warm-up unless it is
    /// a warm-up thread.
    pub fn note_training_step(&self) {
        if !WARMUP_THREAD.get() {
            self.training.store(true, Ordering::Release);
        }
    }

    /// How many kernels are compiled (for tests of what a call compiles); one being compiled
    /// is not counted (its slot is only tried, never waited for under the cache's lock).
    #[cfg(test)]
    pub fn compiled(&self) -> usize {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.kernels.values().filter(|slot| slot.try_lock().is_ok_and(|k| k.is_some())).count()
    }

    /// Whether the program has stepped an optimizer.
    pub fn training_started(&self) -> bool {
        self.training.load(Ordering::Acquire)
    }

    /// Marks the calling thread as a warm-up thread, which never runs stand-ins.
    pub fn mark_warmup_thread() {
        WARMUP_THREAD.set(true);
    }

    /// The cache slot of `entry` of `shader`: while a test holds its lock, the kernel is
    /// `Compiling` to everyone.
    #[cfg(test)]
    pub fn hold_as_compiling(&self, shader: &Shader, entry: &'static str) -> Arc<KernelSlot> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.kernels.entry((shader.name, entry)).or_default().clone()
    }

    /// The module slot of `shader`: while a test holds its lock, the module is being created.
    #[cfg(test)]
    pub fn hold_module(&self, shader: &Shader) -> Arc<ModuleSlot> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.modules.entry(shader.name).or_default().clone()
    }

    /// The pipeline for `entry` of `shader` with buffer bindings `signature`, compiled on first use.
    /// Several threads (the start-up warm-up, see `warmup.rs`) compile different kernels at once;
    /// one that wants a kernel another thread is compiling waits for it.
    pub fn get(
        &self,
        device: &::wgpu::Device,
        shader: &Shader,
        entry: &'static str,
        signature: &[Access],
    ) -> Result<Arc<Kernel>> {
        let slot = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.kernels.entry((shader.name, entry)).or_default().clone()
        };
        let asked = std::time::Instant::now();
        let mut kernel = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(kernel) = kernel.as_ref() {
            let waited = asked.elapsed().as_secs_f64() * 1e3;
            if log_compiles() && waited > 0.1 {
                eprintln!(
                    "rumus: thread {} waited {waited:.1} ms for {}.wgsl {entry}, until {:.1} ms",
                    thread_name(),
                    shader.name,
                    log_clock(std::time::Instant::now())
                );
            }
            return Ok(kernel.clone());
        }
        let started = std::time::Instant::now();
        if log_compiles() {
            log_clock(started); // the log's clock starts with the first compile
        }
        let compiled = Arc::new(self.compile(device, shader, entry, signature)?);
        if log_compiles() {
            eprintln!(
                "rumus: compiled {}.wgsl {entry} in {:.1} ms on thread {}, done {:.1} ms after the first began",
                shader.name,
                started.elapsed().as_secs_f64() * 1e3,
                thread_name(),
                log_clock(std::time::Instant::now())
            );
        }
        *kernel = Some(compiled.clone());
        Ok(compiled)
    }

    /// Compiles one entry point: the module (once per shader, under its own slot's lock), then the
    /// pipeline (outside every lock, so threads compile different kernels at once). The cache's
    /// lock is held only to look up slots and layouts.
    fn compile(
        &self,
        device: &::wgpu::Device,
        shader: &Shader,
        entry: &'static str,
        signature: &[Access],
    ) -> Result<Kernel> {
        let (module_slot, bgl, layout) = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            let module_slot = cache.modules.entry(shader.name).or_default().clone();
            if !cache.layouts.contains_key(signature) {
                let scope = device.push_error_scope(::wgpu::ErrorFilter::Validation);
                let (bgl, layout) = Self::layouts(device, signature);
                if let Some(e) = pollster::block_on(scope.pop()) {
                    return Err(Error::Gpu(format!("{}.wgsl {entry}'s bindings: {e}", shader.name)));
                }
                cache.layouts.insert(signature.to_vec(), (Arc::new(bgl), layout));
            }
            let Some((bgl, layout)) = cache.layouts.get(signature) else {
                return Err(Error::Gpu(format!("{}: pipeline cache lost an entry", shader.name)));
            };
            (module_slot, bgl.clone(), layout.clone())
        };
        let module = {
            let mut slot = module_slot.lock().unwrap_or_else(|p| p.into_inner());
            match slot.as_ref() {
                Some(module) => module.clone(),
                None => {
                    let module = self.create_module(device, shader)?;
                    *slot = Some(module.clone());
                    module
                }
            }
        };
        let scope = device.push_error_scope(::wgpu::ErrorFilter::Validation);
        let pipeline = device.create_compute_pipeline(&::wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(&layout),
            module: &module,
            entry_point: Some(entry),
            compilation_options: ::wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("compiling {}.wgsl entry {entry}: {e}", shader.name)));
        }
        Ok(Kernel { name: (shader.name, entry), pipeline, layout: bgl })
    }

    /// `shader`'s module, parsed and validated; an error names the shader.
    fn create_module(&self, device: &::wgpu::Device, shader: &Shader) -> Result<::wgpu::ShaderModule> {
        let scope = device.push_error_scope(::wgpu::ErrorFilter::Validation);
        let source = Self::source(shader, self.subgroups);
        let desc = ::wgpu::ShaderModuleDescriptor {
            label: Some(shader.name),
            source: ::wgpu::ShaderSource::Wgsl(source.into()),
        };
        let module = if shader.trusted {
            // SAFETY: wgpu's checks guard untrusted shaders against out-of-range indices
            // and endless loops; a trusted shader must have neither. The matmul kernels
            // index their workgroup arrays only with tile coordinates below the array
            // sizes, touch lhs/rhs only where the dispatcher has checked the layout's
            // extent against the buffer (`matrix_extent`), write only outputs inside
            // [batch, m, n], divide only by nonzero sizes, and every loop runs to a
            // uniform bound with a positive step. The tensor-core kernel's fragment
            // loads read 16 rows of a shared tile at its padded row stride, inside the
            // tile, and its direct fragment stores cover only tiles wholly inside
            // [m, n] (edge tiles go through shared memory and are bounds-checked). The
            // tensor-core convolutions (`conv2d_coop.wgsl`) share those tiles; they read
            // x only for taps inside the image of a sample below the batch, the weight
            // for rows below its output channels and columns below c·kh·kw, grad for
            // channels below its own and pixels below n·oh·ow, after `conv2d.rs`'s
            // `check_len` and `check_index_range`, and write their splits' partial
            // outputs only inside the splits × [m, n] that `conv2d_coop.rs` allocated.
            // Dropping the checks (loop counters,
            // index clamps on every shared-memory read) makes them markedly faster
            // (BENCHMARKS.md); `tools/src/bin/matmul_lab.rs` measures both.
            // The attention kernels (`attention*.wgsl`) index their workgroup tiles
            // below BT·D4 and their per-invocation rows below D4 (constants), read and
            // write rows of q, k, v, out, dout and their gradients only for heads below
            // the batch, row indices below tq or tk and columns below d, at the row
            // starts of `AttentionArgs::input_rows`/`output_rows`/`grad_offsets`,
            // where the dispatcher has checked that the last row of every head ends
            // inside each buffer (`check_rows`) and every index is below 2^31
            // (`attention.rs`), and loop to uniform bounds below 2^31.
            // The convolution kernels (`conv2d.wgsl`) index their workgroup tiles with
            // slice rows below BK and tile rows and columns below 64 or 128 (constants:
            // at most entry 526 of 528), their K tables below 32, and read x, weight
            // and grad only under guards that the slice row, tile row and column lie
            // inside their GEMM and the tap inside the image or the output, after
            // `conv2d.rs` has checked each buffer's length against the convolution's
            // extents (`check_len`) and every extent against 2^30
            // (`check_index_range`); they write only inside their GEMM's [m, n], into
            // outputs the dispatcher allocated at that size (the input gradient's
            // stride phase from a uniform table of 4 entries, indexed by workgroup z
            // below the dispatch's 1 to 4 phases). The Winograd transforms
            // (`winograd.wgsl`, `winograd4.wgsl`) run one invocation per element below
            // `n` (the staged tile-major ones 256 per block of 32 rows × 8 tiles, whose
            // workgroup array they index at constant offsets below its size, and which
            // write only rows and tiles inside the matrix), read their source only
            // inside the image (guards on the tile's rows and columns) or inside the
            // tile matrices the dispatcher sized, and write only the buffers it
            // allocated for them, every extent checked against 2^30 (`winograd_fits`).
            // Both loop only to uniform bounds below 2^30, with positive steps.
            // `tests/ops` checks both over random geometries.
            unsafe { device.create_shader_module_trusted(desc, ::wgpu::ShaderRuntimeChecks::unchecked()) }
        } else {
            device.create_shader_module(desc)
        };
        match pollster::block_on(scope.pop()) {
            Some(e) => Err(Error::Gpu(format!("compiling {}.wgsl: {e}", shader.name))),
            None => Ok(module),
        }
    }

    /// The bind group layout (uniform parameters at 0, then `signature`'s buffers) and the
    /// pipeline layout over it.
    fn layouts(device: &::wgpu::Device, signature: &[Access]) -> (::wgpu::BindGroupLayout, ::wgpu::PipelineLayout) {
        let mut entries = vec![::wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: ::wgpu::ShaderStages::COMPUTE,
            ty: ::wgpu::BindingType::Buffer {
                ty: ::wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        }];
        for (i, access) in signature.iter().enumerate() {
            entries.push(::wgpu::BindGroupLayoutEntry {
                binding: i as u32 + 1,
                visibility: ::wgpu::ShaderStages::COMPUTE,
                ty: ::wgpu::BindingType::Buffer {
                    ty: ::wgpu::BufferBindingType::Storage { read_only: *access == Access::Read },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let bgl = device.create_bind_group_layout(&::wgpu::BindGroupLayoutDescriptor {
            label: Some("rumus kernel"),
            entries: &entries,
        });
        let layout = device.create_pipeline_layout(&::wgpu::PipelineLayoutDescriptor {
            label: Some("rumus kernel"),
            bind_group_layouts: &[Some(&bgl)],
            immediate_size: 0,
        });
        (bgl, layout)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::super::test_data::normal;
    use super::super::WgpuBackend;
    use super::CONV2D;
    use crate::backend::{Backend, UnaryOp};

    /// A thread creating a module holds only that module's slot: meanwhile another thread finds
    /// the kernels compiled before and compiles kernels of other modules. (A warm-up thread
    /// parsing a large module used to hold the whole cache, and a cold training step with it.)
    #[test]
    fn creating_a_module_blocks_no_other_kernel() {
        if crate::testing::wgpu_or_skip().is_none() {
            return;
        }
        let b = WgpuBackend::independent().unwrap();
        let x = normal(&b, 64, 1);
        let slot = b.pipelines.hold_module(&CONV2D);
        let held = slot.lock().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            let (b, x) = (&b, &x);
            s.spawn(move || {
                let again = normal(b, 64, 2);
                tx.send(b.unary(UnaryOp::Neg, &again, 64).and_then(|_| b.unary(UnaryOp::Exp, x, 64)).is_ok()).ok();
            });
            let done = rx.recv_timeout(Duration::from_secs(60));
            drop(held);
            assert_eq!(done, Ok(true), "kernels of other modules waited for conv2d.wgsl's module");
        });
    }
}
