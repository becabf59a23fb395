//! The float32 tensors of a PyTorch fixture in `tests/fixtures/`, written by the
//! `make_*_fixture.py` script beside it.

use std::collections::HashMap;
use std::path::Path;

use rumus::{Device, RawTensor, Result};

/// A fixture file's tensors by name: shape and values.
pub struct TorchFixture {
    file: &'static str,
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
}

impl TorchFixture {
    /// Reads `tests/fixtures/{file}`; every tensor in it must be float32.
    pub fn load(file: &'static str) -> TorchFixture {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(file);
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("tests/fixtures/{file} (see its make_*_fixture.py): {e}"));
        let parsed = safetensors::SafeTensors::deserialize(&bytes).expect("a safetensors file");
        let tensors = parsed
            .tensors()
            .into_iter()
            .map(|(name, t)| {
                assert_eq!(t.dtype(), safetensors::Dtype::F32, "{file}: {name}");
                let v = t.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                (name, (t.shape().to_vec(), v))
            })
            .collect();
        TorchFixture { file, tensors }
    }

    /// The shape and values of `name`, when the fixture has it.
    pub fn find(&self, name: &str) -> Option<&(Vec<usize>, Vec<f32>)> {
        self.tensors.get(name)
    }

    /// The values of `name`; a missing name fails the test.
    pub fn get(&self, name: &str) -> &[f32] {
        &self.entry(name).1
    }

    /// `name` as a tensor on `device`; a missing name fails the test.
    pub fn tensor(&self, name: &str, device: &Device) -> Result<RawTensor> {
        let (shape, values) = self.entry(name);
        RawTensor::from_slice(values, shape, device)
    }

    /// `name` as a tensor on `device`, when the fixture has it.
    pub fn optional(&self, name: &str, device: &Device) -> Result<Option<RawTensor>> {
        self.find(name).map(|(shape, v)| RawTensor::from_slice(v, shape, device)).transpose()
    }

    /// The shape and values of `name`; a missing name fails the test.
    pub fn entry(&self, name: &str) -> &(Vec<usize>, Vec<f32>) {
        self.find(name).unwrap_or_else(|| panic!("{name} missing from {}", self.file))
    }
}
