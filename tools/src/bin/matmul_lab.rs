//! Matmul kernel lab, the llm.c way: a CPU reference, several kernel versions, validation of
//! each against the reference, then timing with GPU timestamps, all in one process so one
//! device call compares them on the same GPU.
//!
//! ```text
//! python3 tools/gen/matmul.py --lab /tmp/lab     # writes the variants
//! cargo run --release -p rumus-tools --bin matmul_lab -- /tmp/lab [--quick] [--trusted] [--sizes 4096,4608]
//! cargo run --release -p rumus-tools --bin matmul_lab -- /tmp/lab --trusted --shapes 16384x384x1152:NT,1152x16384x384:TN/8
//! ```
//!
//! ```text
//! cargo run --release -p rumus-tools --bin matmul_lab -- --backend --shapes 1152x16384x384:TN,16384x384x1152:NT
//! ```
//!
//! `--backend` times each product through rumus's wgpu backend instead of loose shader files:
//! every [`MatmulPlan`] (kernel and split-K slice count) that applies, the split ones with the
//! sum of their partials, each checked on sampled outputs against the f64 reference and timed
//! with GPU timestamps; `auto` marks the plan the dispatcher picks.
//!
//! `--shapes` times products of any shape instead of the square sizes: `MxKxN:LAYOUT` (NN, TN
//! or NT), `/S` splitting k into S slices run as a batch of S partial products (split-K, as the
//! backend runs weight gradients; the partials' sum is not timed), each product checked on
//! sampled outputs; a ranking per shape ends the output. `--entries a,b` times only those entry
//! points of the lab directory's variants (the shipped files' entries are always timed), `--skip
//! a,b` leaves out those variants (`shipped/matmul_coop_kn`, say).
//!
//! Each `*.wgsl` in the directory, plus the shipped `rumus/shaders/matmul.wgsl`,
//! `rumus/shaders/matmul_vec4.wgsl` and the modules of `rumus/shaders/matmul_coop.wgsl` (one per
//! pair of operand sides, each run only on the layout it serves; composed as the backend composes
//! them), is compiled twice: with wgpu's
//! runtime checks and as a trusted module (no injected loop bounding or index clamping, which is
//! how the backend compiles the matmul shaders). Variants that use cooperative matrices (tensor
//! cores, f16 inputs) run only where the adapter has them, and are checked to f16 accuracy. The
//! tiled entries of every variant (`matmul_large` and `matmul` where present, with the tiles their
//! `LTILE_M`/`LTILE_N` and `STILE_M`/`STILE_N` constants declare: 128×128 and 64×64 by default)
//! run on row-major, transposed-lhs and transposed-rhs operands; each result is checked on
//! sampled outputs against an f64 reference (a square size that is not a multiple of the tile,
//! and the largest timed size), then timed: median of repeats, each bracketed by timestamp
//! queries. The lab needs TIMESTAMP_QUERY (a real GPU; lavapipe has it too).

use std::path::{Path, PathBuf};

use rumus::backend::wgpu::{MatmulKernel, MatmulPlan};
use rumus::backend::{Backend, MatmulArgs, MatrixLayout};
use wgpu::util::DeviceExt;

type Error = Box<dyn std::error::Error>;

/// How an operand is stored: row-major, or transposed (its rows are the columns in memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    NN,
    TN,
    NT,
}

struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    name: String,
    /// Whether cooperative-matrix (tensor-core) shaders can run.
    coop: bool,
}

fn open_gpu() -> Result<Gpu, Error> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = wgpu::Backends::VULKAN;
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        apply_limit_buckets: false,
    }))?;
    if !adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        return Err("the adapter has no TIMESTAMP_QUERY".into());
    }
    // Tensor-core variants need cooperative matrices and f16; they are skipped without them.
    let tensor_cores = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16;
    let coop = adapter.features().contains(tensor_cores);
    for c in adapter.cooperative_matrix_properties() {
        println!("cooperative matrix: {c:?}");
    }
    let info = adapter.get_info();
    println!("subgroup sizes: {}..{}", info.subgroup_min_size, info.subgroup_max_size);
    let features = wgpu::Features::TIMESTAMP_QUERY | if coop { tensor_cores } else { wgpu::Features::empty() };
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("matmul lab"),
        required_features: features,
        required_limits: adapter.limits(),
        // SAFETY: only the lab's cooperative-matrix shaders use the experimental feature.
        experimental_features: if coop {
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        },
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }))?;
    Ok(Gpu { device, queue, name: info.name, coop })
}

/// A deterministic pseudo-random matrix in [-1, 1).
fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// The element strides (row, col) of an m×k lhs and a k×n rhs stored in `layout`.
fn strides(layout: Layout, m: usize, k: usize, n: usize) -> ([usize; 2], [usize; 2]) {
    match layout {
        Layout::NN => ([k, 1], [n, 1]),
        Layout::TN => ([1, m], [n, 1]),
        Layout::NT => ([k, 1], [1, k]),
    }
}

/// One entry point of a variant and the tile (rows, columns) it computes per workgroup.
struct Kernel {
    entry: &'static str,
    pipeline: wgpu::ComputePipeline,
    tile: (usize, usize),
}

/// The tiled entry points a variant may have, with the prefix of their tile constants and the
/// square tile assumed where a shader declares none (the tensor-core one).
const ENTRIES: [(&str, &str, usize); 3] = [("matmul_large", "L", 128), ("matmul_tall", "T", 128), ("matmul", "S", 64)];

/// The value of `const NAME: u32 = <value>u;` in a shader, if it declares it.
fn shader_const(source: &str, name: &str) -> Option<usize> {
    let prefix = format!("const {name}: u32 = ");
    let line = source.lines().find_map(|l| l.strip_prefix(prefix.as_str()))?;
    line.trim_end_matches(';').trim_end_matches('u').parse().ok()
}

fn compile(gpu: &Gpu, source: &str, trusted: bool) -> Result<Vec<Kernel>, Error> {
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let desc = wgpu::ShaderModuleDescriptor { label: Some("lab"), source: wgpu::ShaderSource::Wgsl(source.into()) };
    let module = if trusted {
        // SAFETY: the lab's kernels index only inside their arrays and every loop is bounded by
        // the uniform sizes, which is what dropping the runtime checks requires.
        unsafe { gpu.device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
    } else {
        gpu.device.create_shader_module(desc)
    };
    // Tensor-core variants may have only the large tile.
    let kernels = ENTRIES
        .into_iter()
        .filter(|(entry, _, _)| source.contains(&format!("fn {entry}(")))
        .map(|(entry, prefix, square)| Kernel {
            entry,
            pipeline: gpu.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            }),
            tile: (
                shader_const(source, &format!("{prefix}TILE_M")).unwrap_or(square),
                shader_const(source, &format!("{prefix}TILE_N")).unwrap_or(square),
            ),
        })
        .collect();
    if let Some(e) = pollster::block_on(scope.pop()) {
        return Err(e.to_string().into());
    }
    Ok(kernels)
}

/// `batch` products of `[m, k]` by `[k, n]` over consecutive slices of one `[m, batch·k]` by
/// `[batch·k, n]` product (split-K; one product when `batch` is 1).
#[derive(Clone, Copy, Debug)]
struct Shape {
    m: usize,
    k: usize,
    n: usize,
    batch: usize,
    layout: Layout,
}

impl Shape {
    fn square(size: usize, layout: Layout) -> Shape {
        Shape { m: size, k: size, n: size, batch: 1, layout }
    }

    /// `MxKxN:LAYOUT[/S]`, K the whole product's (split into S slices).
    fn parse(text: &str) -> Result<Shape, Error> {
        let (dims, rest) = text.split_once(':').ok_or_else(|| format!("{text}: want MxKxN:LAYOUT[/S]"))?;
        let (layout, batch) = rest.split_once('/').unwrap_or((rest, "1"));
        let dims: Vec<usize> = dims.split('x').map(|v| v.parse()).collect::<Result<_, _>>()?;
        let batch: usize = batch.parse()?;
        let layout = match layout {
            "NN" => Layout::NN,
            "TN" => Layout::TN,
            "NT" => Layout::NT,
            other => return Err(format!("{other}: want NN, TN or NT").into()),
        };
        match dims[..] {
            [m, k, n] if batch > 0 && k % batch == 0 && m * k * n > 0 => {
                Ok(Shape { m, k: k / batch, n, batch, layout })
            }
            _ => Err(format!("{text}: want three sizes, k divisible by S").into()),
        }
    }

    fn name(&self) -> String {
        let split = if self.batch > 1 { format!("/{}", self.batch) } else { String::new() };
        format!("{}x{}x{}{split}", self.m, self.k * self.batch, self.n)
    }

    fn flops(&self) -> f64 {
        2.0 * (self.m * self.k * self.n * self.batch) as f64
    }
}

struct Problem {
    shape: Shape,
    lhs: Vec<f32>,
    rhs: Vec<f32>,
    lhs_buf: wgpu::Buffer,
    rhs_buf: wgpu::Buffer,
    out_buf: wgpu::Buffer,
    params: wgpu::Buffer,
}

impl Problem {
    fn new(gpu: &Gpu, shape: Shape) -> Problem {
        let Shape { m, k, n, batch, layout } = shape;
        let kk = k * batch;
        let (lhs, rhs) = (random(m * kk, 1), random(kk * n, 2));
        let (ls, rs) = strides(layout, m, kk, n);
        // Slice b starts b·k columns into lhs and as many rows into rhs.
        let params: [u32; 12] =
            [batch, m, k, n, 0, k * ls[1], ls[0], ls[1], 0, k * rs[0], rs[0], rs[1]].map(|v| v as u32);
        let storage = |data: &[f32]| {
            gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(data),
                usage: wgpu::BufferUsages::STORAGE,
            })
        };
        Problem {
            shape,
            lhs_buf: storage(&lhs),
            rhs_buf: storage(&rhs),
            out_buf: gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: (batch * m * n * 4) as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            params: gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(&params),
                usage: wgpu::BufferUsages::UNIFORM,
            }),
            lhs,
            rhs,
        }
    }

    /// The f64 reference for output (b, r, c): the sum over slice b of k.
    fn reference(&self, b: usize, r: usize, c: usize) -> f64 {
        let Shape { m, k, n, batch, layout } = self.shape;
        let (ls, rs) = strides(layout, m, k * batch, n);
        (b * k..(b + 1) * k)
            .map(|k| self.lhs[r * ls[0] + k * ls[1]] as f64 * self.rhs[k * rs[0] + c * rs[1]] as f64)
            .sum()
    }

    fn dispatch(&self, gpu: &Gpu, kernel: &Kernel, pass: &mut wgpu::ComputePass) {
        let group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &kernel.pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: self.params.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: self.lhs_buf.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: self.rhs_buf.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 3, resource: self.out_buf.as_entire_binding() },
            ],
        });
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, &group, &[]);
        let (rows, cols) = kernel.tile;
        let s = &self.shape;
        pass.dispatch_workgroups(s.n.div_ceil(cols) as u32, s.m.div_ceil(rows) as u32, s.batch as u32);
    }

    /// Runs the kernel `repeats` times, each in a pass bracketed by timestamps; returns the
    /// median seconds and leaves the product in `out_buf`.
    fn time(&self, gpu: &Gpu, kernel: &Kernel, repeats: u32) -> Result<f64, Error> {
        let queries = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: None,
            ty: wgpu::QueryType::Timestamp,
            count: 2 * repeats,
        });
        let resolved = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16 * repeats as u64,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        for i in 0..repeats {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(2 * i),
                    end_of_pass_write_index: Some(2 * i + 1),
                }),
            });
            self.dispatch(gpu, kernel, &mut pass);
        }
        enc.resolve_query_set(&queries, 0..2 * repeats, &resolved, 0);
        gpu.queue.submit([enc.finish()]);
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&read(gpu, &resolved)?);
        let period = gpu.queue.get_timestamp_period() as f64 * 1e-9;
        let mut secs: Vec<f64> = ticks.chunks(2).map(|t| t[1].saturating_sub(t[0]) as f64 * period).collect();
        secs.sort_by(f64::total_cmp);
        Ok(secs[secs.len() / 2])
    }

    /// The largest error of 512 sampled outputs, relative to the square root of the sum's length.
    fn check(&self, gpu: &Gpu) -> Result<f64, Error> {
        let out: Vec<f32> = bytemuck::pod_collect_to_vec(&read(gpu, &self.out_buf)?);
        let Shape { m, k, n, batch, .. } = self.shape;
        let mut worst = 0f64;
        for (i, s) in random(1536, 7).chunks(3).enumerate() {
            let pick = |v: f32, len: usize| ((v + 1.0) / 2.0 * len as f32) as usize % len;
            // Always include the last row and column of the last slice, where partial tiles end.
            let b = if i < 2 { batch - 1 } else { pick(s[2], batch) };
            let r = if i == 1 { m - 1 } else { pick(s[0], m) };
            let c = if i == 0 { n - 1 } else { pick(s[1], n) };
            let got = out[(b * m + r) * n + c] as f64;
            worst = worst.max((got - self.reference(b, r, c)).abs() / (k as f64).sqrt());
        }
        Ok(worst)
    }
}

fn read(gpu: &Gpu, buffer: &wgpu::Buffer) -> Result<Vec<u8>, Error> {
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: buffer.size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, 0, &staging, 0, buffer.size());
    gpu.queue.submit([enc.finish()]);
    staging.map_async(wgpu::MapMode::Read, .., |_| {});
    gpu.device.poll(wgpu::PollType::wait_indefinitely())?;
    let bytes = staging.get_mapped_range(..)?.to_vec();
    Ok(bytes)
}

/// The shipped matmul kernels as the backend compiles them (`matmul`, `matmul_vec4` and the
/// tensor-core modules `matmul_coop_*`, one per pair of operand sides), then the lab directory's.
fn variants(dir: &Path) -> Result<Vec<(String, String)>, Error> {
    let mut variants: Vec<(String, String)> = rumus::backend::wgpu::compiled_sources(true)
        .into_iter()
        .filter(|(name, _)| name.starts_with("matmul"))
        .map(|(name, source)| (format!("shipped/{name}"), source))
        .collect();
    let mut lab: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    lab.sort();
    for f in lab {
        let name = f.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        variants.push((name, std::fs::read_to_string(&f)?));
    }
    Ok(variants)
}

/// Whether a kernel's source serves `layout`: a module compiled for one pair of operand sides
/// (`const LHS_K_FAST: bool = ...;` and `RHS_N_FAST`, as the tensor-core modules are) serves only
/// that pair; any other serves every layout.
fn serves(source: &str, layout: Layout) -> bool {
    let side = |name: &str| {
        let prefix = format!("const {name}: bool = ");
        source.lines().find_map(|l| l.strip_prefix(prefix.as_str())).map(|v| v.trim_end_matches(';') == "true")
    };
    let lhs_k_fast = layout != Layout::TN;
    let rhs_n_fast = layout != Layout::NT;
    side("LHS_K_FAST").is_none_or(|v| v == lhs_k_fast) && side("RHS_N_FAST").is_none_or(|v| v == rhs_n_fast)
}

/// The value after `--flag`, if given.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

/// The problems to time, each with whether it is timed (the check size only validates) and
/// whether its result is checked.
fn problems(gpu: &Gpu, args: &[String]) -> Result<Vec<(Problem, bool, bool)>, Error> {
    if let Some(list) = flag_value(args, "--shapes") {
        return list.split(',').map(|s| Ok((Problem::new(gpu, Shape::parse(s.trim())?), true, true))).collect();
    }
    let quick = args.iter().any(|a| a == "--quick");
    // The check size is square but not a multiple of any tile, so partial tiles are exercised.
    let (check_size, mut sizes) = if quick { (200, vec![256]) } else { (1000, vec![1024, 2048, 4096]) };
    // Other square sizes to time, e.g. to see how full the last wave of tiles is.
    if let Some(list) = flag_value(args, "--sizes") {
        sizes = list.split(',').map(|v| v.trim().parse()).collect::<Result<_, _>>()?;
    }
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let mut problems = Vec::new();
    for layout in [Layout::NN, Layout::TN, Layout::NT] {
        problems.push((Problem::new(gpu, Shape::square(check_size, layout)), false, true));
        for &size in &sizes {
            problems.push((Problem::new(gpu, Shape::square(size, layout)), true, size == largest));
        }
    }
    Ok(problems)
}

/// The plans worth timing for `shape`: each tiled kernel with every power-of-two slice count
/// up to 64 that divides k into slices of at least 128.
fn plans(shape: &Shape) -> Vec<MatmulPlan> {
    let k = shape.k * shape.batch;
    let counts: Vec<usize> =
        (0..7).map(|p| 1 << p).filter(|&s| k.is_multiple_of(s) && (s == 1 || k / s >= 128)).collect();
    [MatmulKernel::Tile64, MatmulKernel::Wide, MatmulKernel::Tall, MatmulKernel::Square]
        .into_iter()
        .flat_map(|kernel| counts.iter().map(move |&slices| MatmulPlan { kernel, slices }))
        .collect()
}

/// `--backend`: each shape's plans through the backend, checked and timed.
fn backend_lab(shapes: &[Shape], repeats: usize) -> Result<(), Error> {
    let device = rumus::Device::wgpu()?;
    device.wait_for_kernels()?;
    let rumus::Device::Wgpu(b) = device else { return Err("not a wgpu device".into()) };
    println!("adapter: {}", b.context().adapter_name());
    println!("{:<6} {:>18} {:<22} {:>10} {:>10} {:>10}", "layout", "shape", "plan", "ms", "TFLOP/s", "error");
    for &whole in shapes {
        let shape = Shape { k: whole.k * whole.batch, batch: 1, ..whole };
        let Shape { m, k, n, layout, .. } = shape;
        let (lhs, rhs) = (random(m * k, 1), random(k * n, 2));
        let (ls, rs) = strides(layout, m, k, n);
        let layout_of =
            |[row_stride, col_stride]: [usize; 2]| MatrixLayout { offset: 0, batch_stride: 0, row_stride, col_stride };
        let args = MatmulArgs { batch: 1, m, k, n, lhs: layout_of(ls), rhs: layout_of(rs) };
        let (lhs_s, rhs_s) = (b.from_f32(&lhs)?, b.from_f32(&rhs)?);
        let auto = b.matmul_plan(&args);
        let reference = |r: usize, c: usize| {
            (0..k).map(|j| lhs[r * ls[0] + j * ls[1]] as f64 * rhs[j * rs[0] + c * rs[1]] as f64).sum::<f64>()
        };
        let picks: Vec<(usize, usize)> = random(1024, 7)
            .chunks(2)
            .enumerate()
            .map(|(i, s)| {
                let pick = |v: f32, len: usize| ((v + 1.0) / 2.0 * len as f32) as usize % len;
                (if i == 1 { m - 1 } else { pick(s[0], m) }, if i == 0 { n - 1 } else { pick(s[1], n) })
            })
            .collect();
        let want: Vec<f64> = picks.iter().map(|&(r, c)| reference(r, c)).collect();
        for plan in plans(&shape) {
            let Ok(out) = b.matmul_with_plan(&lhs_s, &rhs_s, &args, plan) else { continue };
            let got = b.to_f32(&out, &rumus::Layout::contiguous(&[m * n]))?;
            let error =
                picks.iter().zip(&want).map(|(&(r, c), w)| (got[r * n + c] as f64 - w).abs()).fold(0.0, f64::max)
                    / (k as f64).sqrt();
            for _ in 0..2 {
                b.matmul_with_plan(&lhs_s, &rhs_s, &args, plan)?;
            }
            // Runs of `repeats` back to back, as a training step issues them: the median run's mean.
            let run = || (0..repeats).try_for_each(|_| b.matmul_with_plan(&lhs_s, &rhs_s, &args, plan).map(drop));
            let mut secs: Vec<f64> = (0..3).map(|_| b.time_gpu(run)).collect::<rumus::Result<_>>()?;
            secs.sort_by(f64::total_cmp);
            let secs = secs[1] / repeats as f64;
            let name = format!("{:?}/{}{}", plan.kernel, plan.slices, if plan == auto { " auto" } else { "" });
            let verdict = format!("{error:.1e}{}", if error > 1e-5 { " FAIL" } else { "" });
            println!(
                "{:<6} {:>18} {name:<22} {:>10.3} {:>10.2} {verdict:>10}",
                format!("{layout:?}"),
                shape.name(),
                secs * 1e3,
                shape.flops() / secs / 1e12
            );
        }
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--backend") {
        let list = flag_value(&args, "--shapes").ok_or("--backend needs --shapes")?;
        let shapes: Vec<Shape> = list.split(',').map(|s| Shape::parse(s.trim())).collect::<Result<_, _>>()?;
        return backend_lab(&shapes, if args.iter().any(|a| a == "--quick") { 3 } else { 10 });
    }
    let repeats = if args.iter().any(|a| a == "--quick") { 3 } else { 15 };
    // The shipped kernels are compiled trusted; `--trusted` skips timing the checked builds.
    let modes: &[bool] = if args.iter().any(|a| a == "--trusted") { &[true] } else { &[false, true] };
    let valued = ["--sizes", "--shapes", "--entries", "--skip"];
    let dir = args
        .iter()
        .enumerate()
        .find(|&(i, a)| !a.starts_with("--") && (i == 0 || !valued.contains(&args[i - 1].as_str())))
        .map(|(_, a)| a)
        .ok_or("usage: matmul_lab DIR [--quick] [--trusted] [--sizes N,...] [--shapes MxKxN:NT/S,...] [--entries E,...] [--skip V,...]")?;
    let entries: Option<Vec<&str>> = flag_value(&args, "--entries").map(|e| e.split(',').collect());
    let skip: Vec<&str> = flag_value(&args, "--skip").map(|e| e.split(',').collect()).unwrap_or_default();
    let gpu = open_gpu()?;
    println!("adapter: {}", gpu.name);
    let problems = problems(&gpu, &args)?;
    println!(
        "{:<40} {:<8} {:<6} {:>18} {:>10} {:>10} {:>10}",
        "variant/tile", "checks", "layout", "shape", "ms", "TFLOP/s", "error"
    );
    // (shape, layout) -> (ms, variant/tile) of every timed trusted kernel, for the ranking.
    let mut ranking: Vec<(String, f64, String)> = Vec::new();
    for (name, source) in variants(Path::new(dir))?.into_iter().filter(|(name, _)| !skip.contains(&name.as_str())) {
        let tensor_cores = source.contains("enable wgpu_cooperative_matrix");
        if tensor_cores && !gpu.coop {
            println!("{name:<40} skipped: the adapter has no cooperative matrices with f16");
            continue;
        }
        // f16 inputs carry 11 significant bits, f32 ones 24.
        let tolerance = if tensor_cores { 1e-3 } else { 1e-5 };
        for &trusted in modes {
            let checks = if trusted { "trusted" } else { "checked" };
            let kernels = match compile(&gpu, &source, trusted) {
                Ok(k) => k,
                Err(e) => {
                    println!("{name:<40} {checks:<8} does not compile: {}", e.to_string().lines().next().unwrap_or(""));
                    continue;
                }
            };
            let wanted =
                |k: &&Kernel| name.starts_with("shipped/") || entries.as_ref().is_none_or(|e| e.contains(&k.entry));
            for (kernel, (p, timed, checked)) in kernels
                .iter()
                .filter(wanted)
                .flat_map(|k| problems.iter().map(move |p| (k, p)))
                .filter(|(_, (p, _, _))| serves(&source, p.shape.layout))
            {
                let tagged = format!("{name}/{}x{}", kernel.tile.0, kernel.tile.1);
                let secs = p.time(&gpu, kernel, if *timed { repeats } else { 1 })?;
                let error = if *checked { p.check(&gpu)? } else { f64::NAN };
                let rate = if *timed { format!("{:.2}", p.shape.flops() / secs / 1e12) } else { "-".into() };
                let failed = error > tolerance;
                let verdict = if error.is_nan() {
                    String::new()
                } else {
                    format!("{error:.1e}{}", if failed { " FAIL" } else { "" })
                };
                let (layout, shape) = (format!("{:?}", p.shape.layout), p.shape.name());
                println!(
                    "{tagged:<40} {checks:<8} {layout:<6} {shape:>18} {:>10.3} {rate:>10} {verdict:>10}",
                    secs * 1e3
                );
                if *timed && trusted && !failed {
                    ranking.push((
                        format!("{layout} {}x{}x{}", p.shape.m, p.shape.k * p.shape.batch, p.shape.n),
                        secs * 1e3,
                        format!(
                            "{tagged}{}",
                            if p.shape.batch > 1 { format!(" /{}", p.shape.batch) } else { String::new() }
                        ),
                    ));
                }
            }
        }
    }
    // The five fastest validated kernels for each product (split-K counts without its sum).
    ranking.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    println!("\nranking (ms, fastest five per product)");
    for chunk in ranking.chunk_by(|a, b| a.0 == b.0) {
        let best: Vec<String> = chunk.iter().take(5).map(|(_, ms, v)| format!("{ms:.3} {v}")).collect();
        println!("{}: {}", chunk[0].0, best.join(" | "));
    }
    Ok(())
}
