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

/// ALU operations (`alu_opcode`, 3 bits). 0..=4 are VTA's; the rest of the field is free.
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
}

impl AluOp {
    pub const ALL: [AluOp; 5] = [AluOp::Min, AluOp::Max, AluOp::Add, AluOp::Shr, AluOp::Mul];
    pub fn from_bits(v: u64) -> Option<Self> {
        AluOp::ALL.get(v as usize).copied()
    }
    pub fn name(self) -> &'static str {
        match self {
            AluOp::Min => "min",
            AluOp::Max => "max",
            AluOp::Add => "add",
            AluOp::Shr => "shr",
            AluOp::Mul => "mul",
        }
    }
    pub fn from_name(s: &str) -> Option<Self> {
        AluOp::ALL.into_iter().find(|o| o.name() == s)
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

/// ALU: `acc[dst] = op(acc[dst], use_imm ? imm : acc[src])` per micro-op, lane by lane.
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
