//! Matmul kernel lab, the llm.c way: a CPU reference, several kernel versions, validation of
//! each against the reference, then timing with GPU timestamps, all in one process so one
//! device call compares them on the same GPU.
//!
//! ```text
//! python3 rumus/shaders/gen/matmul.py --lab /tmp/lab     # writes the variants
//! cargo run --release --example matmul_lab -- /tmp/lab [--quick] [--trusted] [--sizes 4096,4608]
//! ```
//!
//! Each `*.wgsl` in the directory, plus the shipped `rumus/shaders/matmul.wgsl`,
//! `rumus/shaders/matmul_vec4.wgsl` and `rumus/shaders/matmul_coop.wgsl`, is compiled twice: with wgpu's
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

use wgpu::util::DeviceExt;

type Error = Box<dyn std::error::Error>;

/// How an operand is stored: row-major, or transposed (its rows are the columns in memory).
#[derive(Clone, Copy, Debug)]
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
    pipeline: wgpu::ComputePipeline,
    tile: (usize, usize),
}

/// The tiled entry points every variant has, with the prefix of their tile constants and the
/// square tile assumed where a shader declares none (the tensor-core one).
const ENTRIES: [(&str, &str, usize); 2] = [("matmul_large", "L", 128), ("matmul", "S", 64)];

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

struct Problem {
    size: usize,
    layout: Layout,
    lhs: Vec<f32>,
    rhs: Vec<f32>,
    lhs_buf: wgpu::Buffer,
    rhs_buf: wgpu::Buffer,
    out_buf: wgpu::Buffer,
    params: wgpu::Buffer,
}

impl Problem {
    fn new(gpu: &Gpu, size: usize, layout: Layout) -> Problem {
        let (lhs, rhs) = (random(size * size, 1), random(size * size, 2));
        let (ls, rs) = strides(layout, size, size, size);
        let params: [u32; 12] = [1, size, size, size, 0, 0, ls[0], ls[1], 0, 0, rs[0], rs[1]].map(|v| v as u32);
        let storage = |data: &[f32]| {
            gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(data),
                usage: wgpu::BufferUsages::STORAGE,
            })
        };
        Problem {
            size,
            layout,
            lhs_buf: storage(&lhs),
            rhs_buf: storage(&rhs),
            out_buf: gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: (size * size * 4) as u64,
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

    /// The f64 reference for output (r, c).
    fn reference(&self, r: usize, c: usize) -> f64 {
        let (ls, rs) = strides(self.layout, self.size, self.size, self.size);
        (0..self.size).map(|k| self.lhs[r * ls[0] + k * ls[1]] as f64 * self.rhs[k * rs[0] + c * rs[1]] as f64).sum()
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
        pass.dispatch_workgroups(self.size.div_ceil(cols) as u32, self.size.div_ceil(rows) as u32, 1);
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

    /// The largest error of 512 sampled outputs, relative to the sum of |terms| of each.
    fn check(&self, gpu: &Gpu) -> Result<f64, Error> {
        let out: Vec<f32> = bytemuck::pod_collect_to_vec(&read(gpu, &self.out_buf)?);
        let mut worst = 0f64;
        for (i, s) in random(1024, 7).chunks(2).enumerate() {
            let r = ((s[0] + 1.0) / 2.0 * self.size as f32) as usize % self.size;
            // Always include the last row and column, where partial tiles end.
            let c = if i == 0 { self.size - 1 } else { ((s[1] + 1.0) / 2.0 * self.size as f32) as usize % self.size };
            let r = if i == 1 { self.size - 1 } else { r };
            let scale = (self.size as f64).sqrt();
            worst = worst.max((out[r * self.size + c] as f64 - self.reference(r, c)).abs() / scale);
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

fn variants(dir: &Path) -> Result<Vec<(String, String)>, Error> {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("rumus/shaders");
    let mut files: Vec<PathBuf> =
        ["matmul.wgsl", "matmul_vec4.wgsl", "matmul_coop.wgsl"].iter().map(|f| shipped.join(f)).collect();
    let mut lab: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    lab.sort();
    files.extend(lab);
    files
        .into_iter()
        .map(|f| {
            let name = f.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            let tag = if f.starts_with(&shipped) { format!("shipped/{name}") } else { name };
            Ok((tag, std::fs::read_to_string(&f)?))
        })
        .collect()
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // The shipped kernels are compiled trusted; `--trusted` skips timing the checked builds.
    let modes: &[bool] = if args.iter().any(|a| a == "--trusted") { &[true] } else { &[false, true] };
    let sizes_value = args.iter().position(|a| a == "--sizes").map(|i| i + 1);
    let dir = args
        .iter()
        .enumerate()
        .find(|&(i, a)| !a.starts_with("--") && Some(i) != sizes_value)
        .map(|(_, a)| a)
        .ok_or("usage: matmul_lab DIR [--quick] [--trusted] [--sizes N,N,...]")?;
    let gpu = open_gpu()?;
    println!("adapter: {}", gpu.name);
    // The check size is square but not a multiple of any tile, so partial tiles are exercised.
    let (check_size, mut sizes, repeats) = if quick { (200, vec![256], 3) } else { (1000, vec![1024, 2048, 4096], 15) };
    // Other square sizes to time, e.g. to see how full the last wave of tiles is.
    if let Some(list) = sizes_value.and_then(|i| args.get(i)) {
        sizes = list.split(',').map(|v| v.trim().parse()).collect::<Result<_, _>>()?;
    }
    let layouts = [Layout::NN, Layout::TN, Layout::NT];
    let mut problems = Vec::new();
    for layout in layouts {
        problems.push(Problem::new(&gpu, check_size, layout));
        for &size in &sizes {
            problems.push(Problem::new(&gpu, size, layout));
        }
    }
    println!(
        "{:<36} {:<8} {:<6} {:>6} {:>10} {:>10} {:>10}",
        "variant/tile", "checks", "layout", "size", "ms", "TFLOP/s", "error"
    );
    for (name, source) in variants(Path::new(dir))? {
        let tensor_cores = source.contains("enable wgpu_cooperative_matrix");
        if tensor_cores && !gpu.coop {
            println!("{name:<36} skipped: the adapter has no cooperative matrices with f16");
            continue;
        }
        // f16 inputs carry 11 significant bits, f32 ones 24.
        let tolerance = if tensor_cores { 1e-3 } else { 1e-5 };
        for &trusted in modes {
            let checks = if trusted { "trusted" } else { "checked" };
            let kernels = match compile(&gpu, &source, trusted) {
                Ok(k) => k,
                Err(e) => {
                    println!("{name:<36} {checks:<8} does not compile: {}", e.to_string().lines().next().unwrap_or(""));
                    continue;
                }
            };
            for (kernel, p) in kernels.iter().flat_map(|k| problems.iter().map(move |p| (k, p))) {
                let name = format!("{name}/{}x{}", kernel.tile.0, kernel.tile.1);
                let secs = p.time(&gpu, kernel, if p.size == check_size { 1 } else { repeats })?;
                let timed = p.size != check_size;
                let error = if !timed || p.size == *sizes.last().unwrap_or(&0) { p.check(&gpu)? } else { f64::NAN };
                let flops = 2.0 * (p.size as f64).powi(3);
                let rate = if timed { format!("{:.2}", flops / secs / 1e12) } else { "-".into() };
                let verdict = if error.is_nan() {
                    String::new()
                } else {
                    format!("{error:.1e}{}", if error > tolerance { " FAIL" } else { "" })
                };
                println!(
                    "{name:<36} {checks:<8} {:<6} {:>6} {:>10.3} {rate:>10} {verdict:>10}",
                    format!("{:?}", p.layout),
                    p.size,
                    secs * 1e3
                );
            }
        }
    }
    Ok(())
}
