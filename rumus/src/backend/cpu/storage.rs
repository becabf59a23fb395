//! Host memory for the CPU backend.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::backend::{DType, Storage};
use crate::{Error, Result};

/// Elements of one CPU storage.
#[derive(Debug)]
pub enum CpuData {
    /// 32-bit floats: values, activations, gradients.
    F32(Vec<f32>),
    /// 32-bit unsigned integers: class targets, token ids and gather indices.
    U32(Vec<u32>),
}

impl CpuData {
    /// The f32 elements, or [`Error::DType`] naming `op` when these are u32.
    pub fn as_f32(&self, op: &'static str) -> Result<&[f32]> {
        match self {
            CpuData::F32(v) => Ok(v),
            CpuData::U32(_) => Err(Error::DType { op, expected: "f32", got: "u32" }),
        }
    }

    /// The u32 elements, or [`Error::DType`] naming `op` when these are f32.
    pub fn as_u32(&self, op: &'static str) -> Result<&[u32]> {
        match self {
            CpuData::U32(v) => Ok(v),
            CpuData::F32(_) => Err(Error::DType { op, expected: "u32", got: "f32" }),
        }
    }

    /// The f32 elements for writing in place, or [`Error::DType`] naming `op` when these are u32.
    pub fn as_f32_mut(&mut self, op: &'static str) -> Result<&mut [f32]> {
        match self {
            CpuData::F32(v) => Ok(v),
            CpuData::U32(_) => Err(Error::DType { op, expected: "f32", got: "u32" }),
        }
    }

    /// The u32 elements for writing in place (a flag a kernel raises), or [`Error::DType`]
    /// naming `op` when these are f32.
    pub fn as_u32_mut(&mut self, op: &'static str) -> Result<&mut [u32]> {
        match self {
            CpuData::U32(v) => Ok(v),
            CpuData::F32(_) => Err(Error::DType { op, expected: "u32", got: "f32" }),
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
            super::buffer_pool::give_back(std::mem::take(values));
        }
    }
}

impl CpuStorage {
    /// Wraps `data`; its f32 buffer goes back to the CPU buffer pool when the storage is dropped.
    pub fn new(data: CpuData) -> Self {
        CpuStorage { data: RwLock::new(data) }
    }

    /// Reads the elements. A lock poisoned by a panicking thread still holds valid numbers.
    pub fn read(&self) -> RwLockReadGuard<'_, CpuData> {
        self.data.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Locks the elements for writing (optimizer updates, assignment into a view). A lock poisoned
    /// by a panicking thread still holds valid numbers.
    pub fn write(&self) -> RwLockWriteGuard<'_, CpuData> {
        self.data.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Element type of the data held.
    pub fn dtype(&self) -> DType {
        match &*self.read() {
            CpuData::F32(_) => DType::F32,
            CpuData::U32(_) => DType::U32,
        }
    }

    /// Number of elements held (not bytes).
    pub fn len(&self) -> usize {
        match &*self.read() {
            CpuData::F32(v) => v.len(),
            CpuData::U32(v) => v.len(),
        }
    }

    /// True when the storage holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The CPU storage behind `storage`, or an error naming `op` if it lives elsewhere.
// Without the `wgpu` feature every storage is on the host and `op` names nothing.
#[cfg_attr(not(feature = "wgpu"), allow(unused_variables))]
pub fn host<'a>(storage: &'a Storage, op: &'static str) -> Result<&'a CpuStorage> {
    match storage {
        Storage::Cpu(s) => Ok(s),
        #[cfg(feature = "wgpu")]
        Storage::Wgpu(_) => Err(Error::DeviceMismatch { op, lhs: "wgpu".into(), rhs: "cpu".into() }),
    }
}

/// How a kernel uses one of the storages it locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

enum Guard<'a> {
    Read(RwLockReadGuard<'a, CpuData>),
    Write(RwLockWriteGuard<'a, CpuData>),
}

/// The data of one locked storage, as [`Locked::split`] hands it out.
pub enum Slot<'b> {
    Read(&'b CpuData),
    Write(&'b mut CpuData),
}

/// Locks on several storages, taken by [`lock_all`]: the only way the CPU backend holds more
/// than one lock at a time.
pub struct Locked<'a> {
    guards: Vec<Guard<'a>>,
    /// `slots[i]`: the guard of request `i` (requests on one storage share a guard).
    slots: Vec<usize>,
}

/// Locks the storages of `requests` in one global order (by address), each distinct storage
/// once: for writing if any request on it writes, else for reading. With one order for every
/// thread two kernels can never wait on each other's locks (`a.assign(b)` against
/// `b.assign(a)`), and no thread re-locks a lock it holds (`t.mul(&t)` while a writer waits on
/// `t`), so no thread can deadlock.
pub fn lock_all<'a>(op: &'static str, requests: &[(&'a Storage, Access)]) -> Result<Locked<'a>> {
    let hosts = requests.iter().map(|&(s, access)| Ok((host(s, op)?, access))).collect::<Result<Vec<_>>>()?;
    let mut order: Vec<usize> = (0..hosts.len()).collect();
    order.sort_by_key(|&i| std::ptr::from_ref(hosts[i].0) as usize);
    let mut locked = Locked { guards: Vec::with_capacity(hosts.len()), slots: vec![0; hosts.len()] };
    let mut rest = &order[..];
    while let Some(&first) = rest.first() {
        let storage = hosts[first].0;
        let same = rest.iter().take_while(|&&j| std::ptr::eq(hosts[j].0, storage)).count();
        let write = rest[..same].iter().any(|&j| hosts[j].1 == Access::Write);
        locked.guards.push(if write { Guard::Write(storage.write()) } else { Guard::Read(storage.read()) });
        for &j in &rest[..same] {
            locked.slots[j] = locked.guards.len() - 1;
        }
        rest = &rest[same..];
    }
    Ok(locked)
}

impl Locked<'_> {
    /// The data of request `i`.
    pub fn get(&self, i: usize) -> &CpuData {
        match &self.guards[self.slots[i]] {
            Guard::Read(g) => g,
            Guard::Write(g) => g,
        }
    }

    pub fn f32(&self, i: usize, op: &'static str) -> Result<&[f32]> {
        self.get(i).as_f32(op)
    }

    pub fn u32(&self, i: usize, op: &'static str) -> Result<&[u32]> {
        self.get(i).as_u32(op)
    }

    /// Every request's data in request order: shared for reads, exclusive for writes. A write
    /// request whose storage another request also names cannot be split (it would alias): that
    /// is an error naming `op`; callers stage such a source first.
    pub fn split(&mut self, op: &'static str) -> Result<Vec<Slot<'_>>> {
        let mut by_guard: Vec<Option<Slot<'_>>> = self
            .guards
            .iter_mut()
            .map(|g| {
                Some(match g {
                    Guard::Read(g) => Slot::Read(g),
                    Guard::Write(g) => Slot::Write(g),
                })
            })
            .collect();
        let mut out = Vec::with_capacity(self.slots.len());
        for (i, &g) in self.slots.iter().enumerate() {
            let shared = self.slots.iter().enumerate().any(|(j, &h)| j != i && h == g);
            let slot = match by_guard[g].take() {
                Some(Slot::Read(data)) => {
                    by_guard[g] = Some(Slot::Read(data));
                    Slot::Read(data)
                }
                Some(Slot::Write(data)) if !shared => Slot::Write(data),
                _ => {
                    return Err(Error::invalid(
                        op,
                        "a storage written by this kernel is also one of its other operands",
                    ))
                }
            };
            out.push(slot);
        }
        Ok(out)
    }
}

impl<'b> Slot<'b> {
    /// The data of a read slot, or an error naming `op`.
    pub fn read(self, op: &'static str) -> Result<&'b CpuData> {
        match self {
            Slot::Read(data) => Ok(data),
            Slot::Write(_) => Err(Error::invalid(op, "expected a read operand")),
        }
    }

    /// The data of a write slot, or an error naming `op`.
    pub fn write(self, op: &'static str) -> Result<&'b mut CpuData> {
        match self {
            Slot::Write(data) => Ok(data),
            Slot::Read(_) => Err(Error::invalid(op, "expected a written operand")),
        }
    }
}

pub fn f32_storage(data: Vec<f32>) -> Storage {
    Storage::Cpu(std::sync::Arc::new(CpuStorage::new(CpuData::F32(data))))
}

pub fn u32_storage(data: Vec<u32>) -> Storage {
    Storage::Cpu(std::sync::Arc::new(CpuStorage::new(CpuData::U32(data))))
}
