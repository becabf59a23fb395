//! Host memory for the CPU backend.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::backend::{DType, Storage};
use crate::{Error, Result};

/// Elements of one CPU storage.
#[derive(Debug)]
pub enum CpuData {
    F32(Vec<f32>),
    U32(Vec<u32>),
}

impl CpuData {
    pub fn as_f32(&self, op: &'static str) -> Result<&[f32]> {
        match self {
            CpuData::F32(v) => Ok(v),
            CpuData::U32(_) => Err(Error::DType { op, expected: "f32", got: "u32" }),
        }
    }

    pub fn as_u32(&self, op: &'static str) -> Result<&[u32]> {
        match self {
            CpuData::U32(v) => Ok(v),
            CpuData::F32(_) => Err(Error::DType { op, expected: "u32", got: "f32" }),
        }
    }

    pub fn as_f32_mut(&mut self, op: &'static str) -> Result<&mut [f32]> {
        match self {
            CpuData::F32(v) => Ok(v),
            CpuData::U32(_) => Err(Error::DType { op, expected: "f32", got: "u32" }),
        }
    }
}

/// Host memory behind a lock so optimizers and sub-view writes can update it in place.
#[derive(Debug)]
pub struct CpuStorage {
    data: RwLock<CpuData>,
}

impl Drop for CpuStorage {
    fn drop(&mut self) {
        if let CpuData::F32(values) = self.data.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            super::pool::give_back(std::mem::take(values));
        }
    }
}

impl CpuStorage {
    pub fn new(data: CpuData) -> Self {
        CpuStorage { data: RwLock::new(data) }
    }

    /// Reads the elements. A lock poisoned by a panicking thread still holds valid numbers.
    pub fn read(&self) -> RwLockReadGuard<'_, CpuData> {
        self.data.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, CpuData> {
        self.data.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn dtype(&self) -> DType {
        match &*self.read() {
            CpuData::F32(_) => DType::F32,
            CpuData::U32(_) => DType::U32,
        }
    }

    pub fn len(&self) -> usize {
        match &*self.read() {
            CpuData::F32(v) => v.len(),
            CpuData::U32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The CPU storage behind `storage`, or an error naming `op` if it lives elsewhere.
pub fn host<'a>(storage: &'a Storage, op: &'static str) -> Result<&'a CpuStorage> {
    match storage {
        Storage::Cpu(s) => Ok(s),
        Storage::Wgpu(_) => Err(Error::DeviceMismatch { op, lhs: "wgpu".into(), rhs: "cpu".into() }),
    }
}

pub fn f32_storage(data: Vec<f32>) -> Storage {
    Storage::Cpu(std::sync::Arc::new(CpuStorage::new(CpuData::F32(data))))
}

pub fn u32_storage(data: Vec<u32>) -> Storage {
    Storage::Cpu(std::sync::Arc::new(CpuStorage::new(CpuData::U32(data))))
}
