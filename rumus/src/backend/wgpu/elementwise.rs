//! Elementwise kernels: `unary.wgsl` and `unary_backward.wgsl` (parameters in
//! `lib/activation.wgsl`) and `binary.wgsl`. Their op codes are written here once, from
//! `UnaryOp::code` and `BinaryOp::code`, and placed before the shaders as `OP_*` constants.

use super::copy::{coalesce, padded, MAX_RANK};
use super::encoder::Binding;
use super::launch::{bind, check_extent, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access, Shader};
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{BinaryOp, DType, Storage, UnaryOp};
use crate::{Error, Layout, Result};

use Access::{Read as R, Write as W};

/// Every unary op, for the shaders' `OP_*` constants (scalars are irrelevant there).
const UNARY_OPS: [UnaryOp; 16] = [
    UnaryOp::Neg,
    UnaryOp::Exp,
    UnaryOp::Log,
    UnaryOp::Sqrt,
    UnaryOp::Abs,
    UnaryOp::Relu,
    UnaryOp::LeakyRelu(0.0),
    UnaryOp::Sigmoid,
    UnaryOp::Tanh,
    UnaryOp::Gelu,
    UnaryOp::GeluTanh,
    UnaryOp::Silu,
    UnaryOp::AddScalar(0.0),
    UnaryOp::MulScalar(0.0),
    UnaryOp::Powf(0.0),
    UnaryOp::Clamp(0.0, 0.0),
];

/// Every binary op, for `binary.wgsl`'s `OP_*` constants.
const BINARY_OPS: [BinaryOp; 9] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Maximum,
    BinaryOp::Minimum,
    BinaryOp::Eq,
    BinaryOp::Gt,
    BinaryOp::AddRelu,
];

/// `const OP_<NAME>: u32 = <code>u;` for each `(name, code)`.
pub(super) fn op_constants(ops: impl IntoIterator<Item = (&'static str, u32)>) -> String {
    ops.into_iter().map(|(name, code)| format!("const OP_{}: u32 = {code}u;\n", name.to_uppercase())).collect()
}

/// The constants placed before `unary.wgsl` and `unary_backward.wgsl`.
pub(super) fn unary_constants() -> String {
    op_constants(UNARY_OPS.iter().map(|op| (op.name(), op.code())))
}

/// The constants placed before `binary.wgsl`.
pub(super) fn binary_constants() -> String {
    op_constants(BINARY_OPS.iter().map(|op| (op.name(), op.code())))
}

kernel_params! {
    /// `lib/activation.wgsl`: `n` elements through op `op` with its scalars `s0`, `s1`; the
    /// scalar entry points start at element `start`, the `_vec4` ones make `0..n / 4 * 4`.
    struct UnaryParams {
        n: u32,
        op: u32,
        s0: f32,
        s1: f32,
        inf: f32,
        nan: f32,
        start: u32,
    } pad 1
}

kernel_params! {
    /// `binary.wgsl`: `n` outputs of `lhs op rhs` over two views of `rank` axes, or flat when
    /// both are `contiguous`; `binary` starts at output `start`, `binary_vec4` reads the
    /// operands flagged in `splat` (bit 0 lhs, bit 1 rhs) as one element repeated along the
    /// innermost axis.
    struct BinaryParams {
        n: u32,
        op: u32,
        rank: u32,
        contiguous: u32,
        lhs_offset: u32,
        rhs_offset: u32,
        start: u32,
        splat: u32,
        shape: [u32; MAX_RANK],
        lhs_strides: [u32; MAX_RANK],
        rhs_strides: [u32; MAX_RANK],
    }
}

fn unary_params(op: UnaryOp, len: usize) -> UnaryParams {
    let [s0, s1] = op.scalars();
    UnaryParams { n: len as u32, op: op.code(), s0, s1, inf: f32::INFINITY, nan: f32::NAN, start: 0, _pad: [0; 1] }
}

/// Whether `binary_vec4` may make the outputs of a (coalesced, `MAX_RANK` at most) view pair:
/// at least four outputs; each operand's innermost stride 1 (read as 16-byte loads, so its
/// offset and outer strides must be multiples of 4) or, for one of them at most, 0 (one element
/// repeated, flagged in the returned bits: 1 lhs, 2 rhs); and with more than one axis an
/// innermost axis of a multiple of 4 (a flat view's last `n % 4` outputs go to the scalar
/// kernel).
fn vec4_splat(shape: &[usize], strides: &[Vec<usize>], offsets: [usize; 2]) -> Option<u32> {
    let (&inner, outer) = shape.split_last()?;
    let n: usize = shape.iter().product();
    if n < 4 || (!outer.is_empty() && !inner.is_multiple_of(4)) {
        return None;
    }
    let mut splat = 0;
    for (k, (s, offset)) in strides.iter().zip(offsets).enumerate() {
        let (&last, outer_strides) = s.split_last()?;
        match last {
            0 => splat |= 1 << k,
            1 if offset.is_multiple_of(4) && outer_strides.iter().all(|st| st.is_multiple_of(4)) => {}
            _ => return None,
        }
    }
    (splat != 3).then_some(splat)
}

impl WgpuBackend {
    pub(super) fn unary_kernel(&self, op: UnaryOp, x: &Storage, len: usize) -> Result<Storage> {
        let x = self.gpu(x, DType::F32, op.name())?;
        check_len(op.name(), x, len)?;
        let out = self.alloc(len, DType::F32, op.name())?;
        self.flat_elementwise(&pipelines::UNARY, ["unary_vec4", "unary"], &[R, W], op, len, &[bind(x), bind(&out)])?;
        Ok(self.output(out))
    }

    pub(super) fn unary_backward_kernel(
        &self,
        op: UnaryOp,
        x: &Storage,
        y: &Storage,
        grad: &Storage,
        len: usize,
    ) -> Result<Storage> {
        let name = op.name();
        let (x, y, g) =
            (self.gpu(x, DType::F32, name)?, self.gpu(y, DType::F32, name)?, self.gpu(grad, DType::F32, name)?);
        for s in [x, y, g] {
            check_len(name, s, len)?;
        }
        let out = self.alloc(len, DType::F32, name)?;
        self.flat_elementwise(
            &pipelines::UNARY_BACKWARD,
            ["unary_backward_vec4", "unary_backward"],
            &[R, R, R, W],
            op,
            len,
            &[bind(x), bind(y), bind(g), bind(&out)],
        )?;
        Ok(self.output(out))
    }

    /// One op over `len` flat elements: `entries[0]` (four an invocation, 16-byte loads and
    /// stores) makes the first `len / 4 * 4`, `entries[1]` (one an invocation) the rest.
    fn flat_elementwise(
        &self,
        shader: &Shader,
        entries: [&'static str; 2],
        signature: &[Access],
        op: UnaryOp,
        len: usize,
        buffers: &[Binding<'_>],
    ) -> Result<()> {
        let mut params = unary_params(op, len);
        let quads = len / 4;
        if quads > 0 {
            self.run(shader, entries[0], signature, &params, buffers, self.groups_for(quads, op.name())?)?;
        }
        params.start = (quads * 4) as u32;
        if quads * 4 < len {
            self.run(shader, entries[1], signature, &params, buffers, self.groups_for(len - quads * 4, op.name())?)?;
        }
        Ok(())
    }

    pub(super) fn binary_kernel(
        &self,
        op: BinaryOp,
        lhs: &Storage,
        lhs_layout: &Layout,
        rhs: &Storage,
        rhs_layout: &Layout,
    ) -> Result<Storage> {
        let name = op.name();
        let (l, r) = (self.gpu(lhs, DType::F32, name)?, self.gpu(rhs, DType::F32, name)?);
        if lhs_layout.shape() != rhs_layout.shape() {
            return Err(Error::shape(
                name,
                format!("lhs {:?} rhs {:?} were not broadcast", lhs_layout.shape(), rhs_layout.shape()),
            ));
        }
        check_extent(name, lhs_layout, l.len())?;
        check_extent(name, rhs_layout, r.len())?;
        let n = lhs_layout.numel();
        let out = self.alloc(n, DType::F32, name)?;
        if n == 0 {
            return Ok(self.output(out));
        }
        let contiguous = lhs_layout.is_contiguous() && rhs_layout.is_contiguous();
        let (shape, strides) = if contiguous {
            (vec![n], vec![vec![1], vec![1]])
        } else {
            coalesce(lhs_layout.shape(), &[lhs_layout.strides(), rhs_layout.strides()])
        };
        if shape.len() > MAX_RANK {
            // More axes than the kernel's parameters hold: copy both operands (any rank) first.
            let flat = Layout::contiguous(lhs_layout.shape());
            let packed = |s: &WgpuStorage, layout: &Layout| -> Result<Storage> {
                let tmp = self.alloc(n, DType::F32, name)?;
                self.copy_kernel(s, layout, &tmp, &flat, name)?;
                Ok(self.output(tmp))
            };
            let (l, r) = (packed(l, lhs_layout)?, packed(r, rhs_layout)?);
            return self.binary_kernel(op, &l, &flat, &r, &flat);
        }
        let mut params = BinaryParams {
            n: n as u32,
            op: op.code(),
            rank: shape.len() as u32,
            contiguous: contiguous as u32,
            lhs_offset: lhs_layout.offset() as u32,
            rhs_offset: rhs_layout.offset() as u32,
            start: 0,
            splat: 0,
            shape: padded(&shape, 1),
            lhs_strides: padded(&strides[0], 0),
            rhs_strides: padded(&strides[1], 0),
        };
        let offsets = [lhs_layout.offset(), rhs_layout.offset()];
        let bindings = [bind(l), bind(r), bind(&out)];
        if let Some(splat) = vec4_splat(&shape, &strides, offsets) {
            // Four outputs an invocation with 16-byte loads; a flat view's last n % 4 below.
            let entry = match splat {
                0 => "binary_vec4",
                1 => "binary_vec4_splat_lhs",
                _ => "binary_vec4_splat_rhs",
            };
            params.splat = splat;
            params.contiguous = (shape.len() == 1) as u32;
            let groups = self.groups_for(n / 4, name)?;
            self.run(&pipelines::BINARY, entry, &[R, R, W], &params, &bindings, groups)?;
            params.start = (n / 4 * 4) as u32;
            params.splat = 0;
            params.contiguous = contiguous as u32;
        }
        if (params.start as usize) < n {
            let groups = self.groups_for(n - params.start as usize, name)?;
            self.run(&pipelines::BINARY, "binary", &[R, R, W], &params, &bindings, groups)?;
        }
        Ok(self.output(out))
    }
}

#[cfg(test)]
mod tests {
    use super::{binary_constants, unary_constants, BINARY_OPS, UNARY_OPS};
    use crate::backend::{BinaryOp, UnaryOp};

    /// The tables list each op once, at its code; the match fails to compile when an op is added
    /// (add it to the table and the shaders' switch).
    #[test]
    fn op_tables_hold_every_op_at_its_code() {
        for (k, op) in UNARY_OPS.iter().enumerate() {
            assert_eq!(op.code() as usize, k, "{}", op.name());
            match op {
                UnaryOp::Neg | UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Abs | UnaryOp::Relu => {}
                UnaryOp::LeakyRelu(_) | UnaryOp::Sigmoid | UnaryOp::Tanh | UnaryOp::Gelu | UnaryOp::GeluTanh => {}
                UnaryOp::Silu | UnaryOp::AddScalar(_) | UnaryOp::MulScalar(_) | UnaryOp::Powf(_) => {}
                UnaryOp::Clamp(_, _) => {}
            }
        }
        for (k, op) in BINARY_OPS.iter().enumerate() {
            assert_eq!(op.code() as usize, k, "{}", op.name());
            match op {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {}
                BinaryOp::Maximum | BinaryOp::Minimum | BinaryOp::Eq | BinaryOp::Gt => {}
                BinaryOp::AddRelu => {}
            }
        }
        assert!(unary_constants().contains("const OP_LEAKY_RELU: u32 = 6u;\n"));
        assert!(unary_constants().contains("const OP_CLAMP: u32 = 15u;\n"));
        assert!(binary_constants().contains("const OP_GT: u32 = 7u;\n"));
        assert!(binary_constants().contains("const OP_ADD_RELU: u32 = 8u;\n"));
    }
}
