//! Instructions and micro-ops as typed values: what each field means, independent of bits.
//!
//! Field names follow VTA's `hw_spec.h`. Encoding lives in [`crate::layout`]; semantics are
//! specified in [`crate::spec`].

use std::fmt;

use crate::layout::Field;

/// The five instruction opcodes (bits 2:0 of every instruction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    Load = 0,
    Store = 1,
    Gemm = 2,
    Finish = 3,
    Alu = 4,
}

impl Opcode {
    pub fn from_bits(v: u64) -> Option<Self> {
        Some(match v {
            0 => Opcode::Load,
            1 => Opcode::Store,
            2 => Opcode::Gemm,
            3 => Opcode::Finish,
            4 => Opcode::Alu,
            _ => return None,
        })
    }
    /// VTA's upper-case name, as printed by `disasm --json`.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Load => "LOAD",
            Opcode::Store => "STORE",
            Opcode::Gemm => "GEMM",
            Opcode::Finish => "FINISH",
            Opcode::Alu => "ALU",
        }
    }
}

/// Scratchpad a LOAD or STORE addresses (`memory_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemType {
    Uop = 0,
    Wgt = 1,
    Inp = 2,
    Acc = 3,
    Out = 4,
    /// LOAD of 8-bit values sign-extended into the accumulator (VTA HW_VER 0.0.2).
    Acc8 = 5,
}

impl MemType {
    pub const ALL: [MemType; 6] = [
        MemType::Uop,
        MemType::Wgt,
        MemType::Inp,
        MemType::Acc,
        MemType::Out,
        MemType::Acc8,
    ];
    pub fn from_bits(v: u64) -> Option<Self> {
        MemType::ALL.get(v as usize).copied()
    }
    /// Lower-case name used in assembly and messages.
    pub fn name(self) -> &'static str {
        match self {
            MemType::Uop => "uop",
            MemType::Wgt => "wgt",
            MemType::Inp => "inp",
            MemType::Acc => "acc",
            MemType::Out => "out",
            MemType::Acc8 => "acc8",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        MemType::ALL.into_iter().find(|m| m.name() == s)
    }
}

impl fmt::Display for MemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// ALU operations (`alu_opcode`, 3 bits). 0..=4 are VTA's; 5 and 6 are the activation-table
/// operations of configs with `ALU_LUT` (spec 8.3); 7 is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AluOp {
    /// Signed minimum.
    Min = 0,
    /// Signed maximum.
    Max = 1,
    /// Wrapping addition.
    Add = 2,
    /// Arithmetic shift right by the signed operand; a negative operand shifts left.
    Shr = 3,
    /// Wrapping multiplication (low ACC_WIDTH bits of the product); needs `ALU_MUL`.
    Mul = 4,
    /// Table lookup: the operand, saturated to int8, indexes the 256-entry activation table;
    /// the entry, sign-extended, is the result. Needs `ALU_LUT`.
    Lut = 5,
    /// Table write: entry `dst` of the activation table gets the low 8 bits of lane
    /// `dst mod lanes` of the operand; no ACC row is written. Needs `ALU_LUT`.
    LutWrite = 6,
}

impl AluOp {
    /// VTA's five lane-wise arithmetic operations (those of every config but MUL's).
    pub const ALL: [AluOp; 5] = [AluOp::Min, AluOp::Max, AluOp::Add, AluOp::Shr, AluOp::Mul];
    /// The activation-table operations (configs with `ALU_LUT`).
    pub const TABLE: [AluOp; 2] = [AluOp::Lut, AluOp::LutWrite];
    /// Every operation the encoding defines, by code.
    pub const EVERY: [AluOp; 7] = [
        AluOp::Min,
        AluOp::Max,
        AluOp::Add,
        AluOp::Shr,
        AluOp::Mul,
        AluOp::Lut,
        AluOp::LutWrite,
    ];
    pub fn from_bits(v: u64) -> Option<Self> {
        AluOp::EVERY.get(v as usize).copied()
    }
    pub fn name(self) -> &'static str {
        match self {
            AluOp::Min => "min",
            AluOp::Max => "max",
            AluOp::Add => "add",
            AluOp::Shr => "shr",
            AluOp::Mul => "mul",
            AluOp::Lut => "lut",
            AluOp::LutWrite => "lutw",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        AluOp::EVERY.into_iter().find(|o| o.name() == s)
    }
    /// Whether the operation uses the activation table (needs `ALU_LUT`).
    pub fn is_table(self) -> bool {
        matches!(self, AluOp::Lut | AluOp::LutWrite)
    }
}

/// The four dependency-token flags every instruction carries. "prev" and "next" are relative
/// to the pipeline order load -> compute -> store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct DepFlags {
    pub pop_prev: bool,
    pub pop_next: bool,
    pub push_prev: bool,
    pub push_next: bool,
}

impl DepFlags {
    pub const NONE: DepFlags = DepFlags {
        pop_prev: false,
        pop_next: false,
        push_prev: false,
        push_next: false,
    };
    pub fn is_empty(&self) -> bool {
        *self == DepFlags::NONE
    }
}

/// LOAD or STORE: a 2D strided DMA with zero padding on load. Sizes are in elements of
/// `memory_type`; `x_size == 0` moves nothing and only synchronizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemInsn {
    pub deps: DepFlags,
    pub memory_type: MemType,
    pub sram_base: u16,
    pub dram_base: u32,
    pub y_size: u16,
    pub x_size: u16,
    pub x_stride: u16,
    pub y_pad_0: u8,
    pub y_pad_1: u8,
    pub x_pad_0: u8,
    pub x_pad_1: u8,
}

impl MemInsn {
    /// A 2D transfer of `y_size` rows of `x_size` elements (DRAM rows `x_stride` elements
    /// apart), without padding or token flags.
    pub fn transfer(
        memory_type: MemType,
        sram_base: u16,
        dram_base: u32,
        y_size: u16,
        x_size: u16,
        x_stride: u16,
    ) -> Self {
        MemInsn {
            deps: DepFlags::NONE,
            memory_type,
            sram_base,
            dram_base,
            y_size,
            x_size,
            x_stride,
            y_pad_0: 0,
            y_pad_1: 0,
            x_pad_0: 0,
            x_pad_1: 0,
        }
    }

    /// A sync instruction (`x_size == 0`): moves nothing, only carries tokens.
    pub fn sync(memory_type: MemType) -> Self {
        MemInsn::transfer(memory_type, 0, 0, 0, 0, 0)
    }

    /// The same transfer with zero padding `[y_pad_0, y_pad_1, x_pad_0, x_pad_1]`.
    pub fn padded(self, [y_pad_0, y_pad_1, x_pad_0, x_pad_1]: [u8; 4]) -> Self {
        MemInsn {
            y_pad_0,
            y_pad_1,
            x_pad_0,
            x_pad_1,
            ..self
        }
    }

    /// The four padding counts with their fields, in field order.
    pub fn pads(&self) -> [(Field, u8); 4] {
        [
            (Field::YPad0, self.y_pad_0),
            (Field::YPad1, self.y_pad_1),
            (Field::XPad0, self.x_pad_0),
            (Field::XPad1, self.x_pad_1),
        ]
    }

    /// The same transfer with token flags `deps`.
    pub fn with_deps(self, deps: DepFlags) -> Self {
        MemInsn { deps, ..self }
    }
}

/// The micro-op loop shared by GEMM and ALU: for `iter_out` x `iter_in` iterations, run
/// micro-ops `uop_bgn..uop_end` with their indices offset by the loop factors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct UopLoop {
    pub reset_reg: bool,
    pub uop_bgn: u16,
    pub uop_end: u16,
    pub iter_out: u16,
    pub iter_in: u16,
    pub dst_factor_out: u16,
    pub dst_factor_in: u16,
    pub src_factor_out: u16,
    pub src_factor_in: u16,
}

/// GEMM: `acc[dst] += inp[src] x wgt[wgt]^T` per micro-op (or zero it with `reset_reg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct GemmInsn {
    pub deps: DepFlags,
    pub lp: UopLoop,
    pub wgt_factor_out: u16,
    pub wgt_factor_in: u16,
}

/// ALU: `acc[dst] = op(acc[dst], use_imm ? imm : acc[src])` per micro-op, lane by lane (the
/// table operations of spec 8.3 aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AluInsn {
    pub deps: DepFlags,
    pub lp: UopLoop,
    pub op: AluOp,
    pub use_imm: bool,
    pub imm: i16,
}

/// One 128-bit instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Insn {
    Load(MemInsn),
    Store(MemInsn),
    Gemm(GemmInsn),
    Alu(AluInsn),
    Finish(DepFlags),
}

/// The three modules that execute instructions, in pipeline order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Module {
    Load,
    Compute,
    Store,
}

impl Module {
    pub const ALL: [Module; 3] = [Module::Load, Module::Compute, Module::Store];
    pub fn name(self) -> &'static str {
        match self {
            Module::Load => "load",
            Module::Compute => "compute",
            Module::Store => "store",
        }
    }
}

impl Insn {
    pub fn opcode(&self) -> Opcode {
        match self {
            Insn::Load(_) => Opcode::Load,
            Insn::Store(_) => Opcode::Store,
            Insn::Gemm(_) => Opcode::Gemm,
            Insn::Alu(_) => Opcode::Alu,
            Insn::Finish(_) => Opcode::Finish,
        }
    }
    pub fn deps(&self) -> DepFlags {
        match self {
            Insn::Load(m) | Insn::Store(m) => m.deps,
            Insn::Gemm(g) => g.deps,
            Insn::Alu(a) => a.deps,
            Insn::Finish(d) => *d,
        }
    }
    pub fn deps_mut(&mut self) -> &mut DepFlags {
        match self {
            Insn::Load(m) | Insn::Store(m) => &mut m.deps,
            Insn::Gemm(g) => &mut g.deps,
            Insn::Alu(a) => &mut a.deps,
            Insn::Finish(d) => d,
        }
    }
    /// The module that executes this instruction (VTA's routing: LOAD of INP/WGT goes to the
    /// load module; LOAD of UOP/ACC/ACC8, GEMM, ALU and FINISH to compute; STORE to store).
    pub fn module(&self) -> Module {
        match self {
            Insn::Load(m) => match m.memory_type {
                MemType::Inp | MemType::Wgt => Module::Load,
                _ => Module::Compute,
            },
            Insn::Store(_) => Module::Store,
            Insn::Gemm(_) | Insn::Alu(_) | Insn::Finish(_) => Module::Compute,
        }
    }
}

/// A 32-bit micro-op: scratchpad indices for one GEMM or ALU step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Uop {
    /// ACC row written.
    pub dst_idx: u32,
    /// INP row (GEMM) or ACC row (ALU) read.
    pub src_idx: u32,
    /// WGT tile (GEMM only).
    pub wgt_idx: u32,
}

/// Reads or writes one integer field of a typed value, by [`Field`].
fn access<T: TryFrom<i64> + Into<i64> + Copy>(slot: &mut T, set: Option<i64>) -> Option<i64> {
    match set {
        None => Some((*slot).into()),
        Some(v) => {
            *slot = T::try_from(v).ok()?;
            Some(v)
        }
    }
}

fn access_bool(slot: &mut bool, set: Option<i64>) -> Option<i64> {
    match set {
        None => Some((*slot).into()),
        Some(v @ (0 | 1)) => {
            *slot = v == 1;
            Some(v)
        }
        Some(_) => None,
    }
}

impl Insn {
    /// The value of field `f` (flags as 0/1, enumerations as their codes), or `None` if the
    /// instruction's format has no such field.
    pub fn field(&self, f: Field) -> Option<i64> {
        let mut copy = *self;
        copy.access(f, None)
    }

    /// Sets field `f` to `v`; `None` if the format has no such field, the value does not fit
    /// the field's type, or it names no memory type / ALU operation. The opcode is fixed.
    pub fn set_field(&mut self, f: Field, v: i64) -> Option<()> {
        self.access(f, Some(v)).map(|_| ())
    }

    fn access(&mut self, f: Field, set: Option<i64>) -> Option<i64> {
        let opcode = self.opcode();
        let deps = self.deps_mut();
        match f {
            Field::Opcode => return set.is_none().then_some(opcode as i64),
            Field::PopPrevDep => return access_bool(&mut deps.pop_prev, set),
            Field::PopNextDep => return access_bool(&mut deps.pop_next, set),
            Field::PushPrevDep => return access_bool(&mut deps.push_prev, set),
            Field::PushNextDep => return access_bool(&mut deps.push_next, set),
            _ => {}
        }
        match self {
            Insn::Load(m) | Insn::Store(m) => match f {
                Field::MemoryType => match set {
                    None => Some(m.memory_type as i64),
                    Some(v) => {
                        m.memory_type = MemType::from_bits(u64::try_from(v).ok()?)?;
                        Some(v)
                    }
                },
                Field::SramBase => access(&mut m.sram_base, set),
                Field::DramBase => access(&mut m.dram_base, set),
                Field::YSize => access(&mut m.y_size, set),
                Field::XSize => access(&mut m.x_size, set),
                Field::XStride => access(&mut m.x_stride, set),
                Field::YPad0 => access(&mut m.y_pad_0, set),
                Field::YPad1 => access(&mut m.y_pad_1, set),
                Field::XPad0 => access(&mut m.x_pad_0, set),
                Field::XPad1 => access(&mut m.x_pad_1, set),
                _ => None,
            },
            Insn::Gemm(g) => match f {
                Field::WgtFactorOut => access(&mut g.wgt_factor_out, set),
                Field::WgtFactorIn => access(&mut g.wgt_factor_in, set),
                _ => g.lp.access(f, set),
            },
            Insn::Alu(a) => match f {
                Field::AluOpcode => match set {
                    None => Some(a.op as i64),
                    Some(v) => {
                        a.op = AluOp::from_bits(u64::try_from(v).ok()?)?;
                        Some(v)
                    }
                },
                Field::UseImm => access_bool(&mut a.use_imm, set),
                Field::Imm => access(&mut a.imm, set),
                _ => a.lp.access(f, set),
            },
            Insn::Finish(_) => None,
        }
    }
}

impl UopLoop {
    fn access(&mut self, f: Field, set: Option<i64>) -> Option<i64> {
        match f {
            Field::ResetReg => access_bool(&mut self.reset_reg, set),
            Field::UopBgn => access(&mut self.uop_bgn, set),
            Field::UopEnd => access(&mut self.uop_end, set),
            Field::IterOut => access(&mut self.iter_out, set),
            Field::IterIn => access(&mut self.iter_in, set),
            Field::DstFactorOut => access(&mut self.dst_factor_out, set),
            Field::DstFactorIn => access(&mut self.dst_factor_in, set),
            Field::SrcFactorOut => access(&mut self.src_factor_out, set),
            Field::SrcFactorIn => access(&mut self.src_factor_in, set),
            _ => None,
        }
    }
}

impl Uop {
    /// The value of field `f` (`dst_idx`, `src_idx` or `wgt_idx`).
    pub fn field(&self, f: Field) -> Option<i64> {
        let mut copy = *self;
        copy.access(f, None)
    }

    /// Sets field `f`; `None` if a micro-op has no such field or `v` does not fit it.
    pub fn set_field(&mut self, f: Field, v: i64) -> Option<()> {
        self.access(f, Some(v)).map(|_| ())
    }

    fn access(&mut self, f: Field, set: Option<i64>) -> Option<i64> {
        match f {
            Field::DstIdx => access(&mut self.dst_idx, set),
            Field::SrcIdx => access(&mut self.src_idx, set),
            Field::WgtIdx => access(&mut self.wgt_idx, set),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{config::HwConfig, layout::Codec};

    /// Every field of every format reads back what was written, through the typed value.
    #[test]
    fn field_access_covers_every_field_of_every_format() {
        let codec = Codec::new(&HwConfig::default());
        let insns = [
            Insn::Load(MemInsn::sync(MemType::Inp)),
            Insn::Store(MemInsn::sync(MemType::Out)),
            Insn::Gemm(GemmInsn::default()),
            Insn::Alu(AluInsn {
                deps: DepFlags::NONE,
                lp: UopLoop::default(),
                op: AluOp::Add,
                use_imm: false,
                imm: 0,
            }),
            Insn::Finish(DepFlags::NONE),
        ];
        for insn in insns {
            let layout = codec.layout_of(insn.opcode());
            for f in Field::ALL {
                assert_eq!(
                    insn.field(f).is_some(),
                    layout.has(f),
                    "{} {f}",
                    layout.name
                );
                if layout.has(f) && f != Field::Opcode {
                    let mut i = insn;
                    let v = if f.is_signed() { -1 } else { 1 };
                    assert_eq!(i.set_field(f, v), Some(()), "{} {f}", layout.name);
                    assert_eq!(i.field(f), Some(v), "{} {f}", layout.name);
                }
            }
        }
        let mut u = Uop::default();
        for f in Field::ALL {
            assert_eq!(u.field(f).is_some(), codec.uop.has(f), "{f}");
        }
        assert_eq!(u.set_field(Field::WgtIdx, 7), Some(()));
        assert_eq!(u.wgt_idx, 7);
        assert_eq!(u.set_field(Field::WgtIdx, -1), None);
        let mut l = Insn::Load(MemInsn::sync(MemType::Inp));
        assert_eq!(l.set_field(Field::YPad0, 256), None, "a u8 field");
        assert_eq!(
            l.set_field(Field::MemoryType, 6),
            None,
            "no such memory type"
        );
        assert_eq!(l.set_field(Field::Opcode, 1), None, "the opcode is fixed");
    }
}
