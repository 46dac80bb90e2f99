//! Bit layouts of the 128-bit instruction formats and the 32-bit micro-op, derived from the
//! config, the field limits that follow from them, and the codec that packs typed
//! instructions into them.
//!
//! Each format is described once, as VTA's `hw_spec.h` declares it: an ordered list of fields
//! whose widths come from the config. Positions follow the C bit-field rules VTA was compiled
//! with (fields packed from bit 0 of 64-bit units, a field that would straddle a unit starts the
//! next one), which reproduces VTA's gaps (bits 63:58 of LOAD/STORE, bit 63 of GEMM/ALU).
//! Encoding, decoding, range checks and the VTA-named JSON view all walk these lists.

use std::fmt;

use serde_json::{Map, Value};

use crate::config::{HwConfig, ALU_IMM_BITS, DRAM_ADDR_BITS, LOOP_ITER_BITS, SRAM_ADDR_BITS};
use crate::insn::{
    AluInsn, AluOp, DepFlags, GemmInsn, Insn, MemInsn, MemType, Opcode, Uop, UopLoop,
};

/// Bits of one instruction.
pub const INSN_BITS: u32 = 128;
/// Bytes of one instruction in memory (little-endian).
pub const INSN_BYTES: usize = INSN_BITS as usize / 8;
/// Bits of one micro-op.
pub const UOP_BITS: u32 = 32;
/// Bytes of one micro-op in memory (little-endian).
pub const UOP_BYTES: usize = UOP_BITS as usize / 8;
/// Instruction fields are packed into units of this many bits (VTA's `uint64_t` bit-fields).
const INSN_UNIT_BITS: u32 = 64;

/// Bits of each DMA size field of LOAD/STORE (`y_size`, `x_size`, `x_stride`).
pub const DMA_SIZE_BITS: u32 = 16;
/// Bits of each LOAD padding field (`y_pad_0`, ..., `x_pad_1`).
pub const PAD_BITS: u32 = 4;

/// The largest value of an unsigned field of `bits` bits.
pub const fn unsigned_max(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// The largest LOAD padding, in elements (or rows), on each side.
pub const MAX_PAD: u8 = unsigned_max(PAD_BITS) as u8;
/// The largest `y_size`, `x_size` or `x_stride` of a LOAD/STORE.
pub const MAX_DMA_SIZE: u16 = unsigned_max(DMA_SIZE_BITS) as u16;
/// The largest `iter_out` / `iter_in` of a GEMM/ALU micro-op loop.
pub const MAX_ITER: u16 = unsigned_max(LOOP_ITER_BITS) as u16;
/// The smallest ALU immediate (the field is signed).
pub const IMM_MIN: i16 = -(1i32 << (ALU_IMM_BITS - 1)) as i16;
/// The largest ALU immediate.
pub const IMM_MAX: i16 = ((1i32 << (ALU_IMM_BITS - 1)) - 1) as i16;

/// Declares [`Field`], [`Field::ALL`] and [`Field::name`] from one list, so that a new field
/// cannot be missing from either.
macro_rules! fields {
    ($($variant:ident => $name:literal,)*) => {
        /// Every field of every format, named as in VTA's `hw_spec.h`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Field {
            $($variant,)*
        }

        const FIELD_COUNT: usize = [$(Field::$variant),*].len();

        impl Field {
            /// Every field, in declaration order.
            pub const ALL: [Field; FIELD_COUNT] = [$(Field::$variant),*];

            /// The field's name, as in VTA's `hw_spec.h`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Field::$variant => $name,)*
                }
            }
        }
    };
}

fields! {
    Opcode => "opcode",
    PopPrevDep => "pop_prev_dep",
    PopNextDep => "pop_next_dep",
    PushPrevDep => "push_prev_dep",
    PushNextDep => "push_next_dep",
    MemoryType => "memory_type",
    SramBase => "sram_base",
    DramBase => "dram_base",
    YSize => "y_size",
    XSize => "x_size",
    XStride => "x_stride",
    YPad0 => "y_pad_0",
    YPad1 => "y_pad_1",
    XPad0 => "x_pad_0",
    XPad1 => "x_pad_1",
    ResetReg => "reset_reg",
    UopBgn => "uop_bgn",
    UopEnd => "uop_end",
    IterOut => "iter_out",
    IterIn => "iter_in",
    DstFactorOut => "dst_factor_out",
    DstFactorIn => "dst_factor_in",
    SrcFactorOut => "src_factor_out",
    SrcFactorIn => "src_factor_in",
    WgtFactorOut => "wgt_factor_out",
    WgtFactorIn => "wgt_factor_in",
    AluOpcode => "alu_opcode",
    UseImm => "use_imm",
    Imm => "imm",
    DstIdx => "dst_idx",
    SrcIdx => "src_idx",
    WgtIdx => "wgt_idx",
}

impl Field {
    /// Whether the field holds a two's-complement value (only the ALU immediate).
    pub fn is_signed(self) -> bool {
        self == Field::Imm
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a field's width comes from.
#[derive(Debug, Clone, Copy)]
enum Width {
    Fixed(u32),
    UopIndex,
    /// `uop_end` is exclusive, so it needs one more bit than an index.
    UopEnd,
    AccIndex,
    InpIndex,
    WgtIndex,
    /// A micro-op's `src_idx` indexes INP (GEMM) or ACC (ALU): the wider of the two.
    UopSrc,
}

const HEADER: [(Field, Width); 5] = [
    (Field::Opcode, Width::Fixed(3)),
    (Field::PopPrevDep, Width::Fixed(1)),
    (Field::PopNextDep, Width::Fixed(1)),
    (Field::PushPrevDep, Width::Fixed(1)),
    (Field::PushNextDep, Width::Fixed(1)),
];

const MEM_FIELDS: [(Field, Width); 10] = [
    (Field::MemoryType, Width::Fixed(3)),
    (Field::SramBase, Width::Fixed(SRAM_ADDR_BITS)),
    (Field::DramBase, Width::Fixed(DRAM_ADDR_BITS)),
    (Field::YSize, Width::Fixed(DMA_SIZE_BITS)),
    (Field::XSize, Width::Fixed(DMA_SIZE_BITS)),
    (Field::XStride, Width::Fixed(DMA_SIZE_BITS)),
    (Field::YPad0, Width::Fixed(PAD_BITS)),
    (Field::YPad1, Width::Fixed(PAD_BITS)),
    (Field::XPad0, Width::Fixed(PAD_BITS)),
    (Field::XPad1, Width::Fixed(PAD_BITS)),
];

const LOOP_FIELDS: [(Field, Width); 7] = [
    (Field::ResetReg, Width::Fixed(1)),
    (Field::UopBgn, Width::UopIndex),
    (Field::UopEnd, Width::UopEnd),
    (Field::IterOut, Width::Fixed(LOOP_ITER_BITS)),
    (Field::IterIn, Width::Fixed(LOOP_ITER_BITS)),
    (Field::DstFactorOut, Width::AccIndex),
    (Field::DstFactorIn, Width::AccIndex),
];

const GEMM_FIELDS: [(Field, Width); 4] = [
    (Field::SrcFactorOut, Width::InpIndex),
    (Field::SrcFactorIn, Width::InpIndex),
    (Field::WgtFactorOut, Width::WgtIndex),
    (Field::WgtFactorIn, Width::WgtIndex),
];

const ALU_FIELDS: [(Field, Width); 5] = [
    (Field::SrcFactorOut, Width::AccIndex),
    (Field::SrcFactorIn, Width::AccIndex),
    (Field::AluOpcode, Width::Fixed(3)),
    (Field::UseImm, Width::Fixed(1)),
    (Field::Imm, Width::Fixed(ALU_IMM_BITS)),
];

const UOP_FIELDS: [(Field, Width); 3] = [
    (Field::DstIdx, Width::AccIndex),
    (Field::SrcIdx, Width::UopSrc),
    (Field::WgtIdx, Width::WgtIndex),
];

/// One field's place in a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub lsb: u32,
    pub width: u32,
}

impl Slot {
    /// The most significant bit (`lsb` for an empty slot).
    pub fn msb(self) -> u32 {
        self.lsb + self.width.max(1) - 1
    }
}

/// The placed fields of one format.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Format name, for messages: "LOAD/STORE", "GEMM", "ALU", "FINISH", "micro-op".
    pub name: &'static str,
    /// Fields in declaration order with their slots.
    pub fields: Vec<(Field, Slot)>,
    slots: [Option<Slot>; FIELD_COUNT],
}

impl Layout {
    fn place(
        name: &'static str,
        cfg: &HwConfig,
        unit: u32,
        total: u32,
        lists: &[&[(Field, Width)]],
    ) -> Self {
        let width_of = |w: Width| match w {
            Width::Fixed(b) => b,
            Width::UopIndex => cfg.log_depth(MemType::Uop),
            Width::UopEnd => cfg.log_depth(MemType::Uop) + 1,
            Width::AccIndex => cfg.log_depth(MemType::Acc),
            Width::InpIndex => cfg.log_depth(MemType::Inp),
            Width::WgtIndex => cfg.log_depth(MemType::Wgt),
            Width::UopSrc => cfg.uop_src_bits(),
        };
        let mut pos = 0;
        let mut fields = Vec::new();
        let mut slots = [None; FIELD_COUNT];
        for &(field, w) in lists.iter().flat_map(|l| l.iter()) {
            let width = width_of(w);
            if width > 0 && pos % unit + width > unit {
                pos = pos.next_multiple_of(unit);
            }
            let slot = Slot { lsb: pos, width };
            pos += width;
            fields.push((field, slot));
            slots[field as usize] = Some(slot);
        }
        // HwConfig::validate guarantees the fit; a failure here is a bug in that check.
        assert!(
            pos <= total,
            "{name} layout overflows {total} bits for {cfg}"
        );
        Layout {
            name,
            fields,
            slots,
        }
    }

    /// The slot of `f`; panics if the format has no such field (a bug, not an input error).
    pub fn slot(&self, f: Field) -> Slot {
        self.slots[f as usize].unwrap_or_else(|| panic!("{} has no field {}", self.name, f.name()))
    }

    /// Whether the format has field `f`.
    pub fn has(&self, f: Field) -> bool {
        self.slots[f as usize].is_some()
    }

    /// The values field `f` can hold under this config: `0..=2^width-1`, or the two's
    /// complement range for the signed immediate.
    pub fn range(&self, f: Field) -> (i64, i64) {
        let w = self.slot(f).width;
        if f.is_signed() {
            (-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1)
        } else {
            (0, unsigned_max(w) as i64)
        }
    }

    fn get(&self, word: u128, f: Field) -> u64 {
        let s = self.slot(f);
        ((word >> s.lsb) & mask(s.width)) as u64
    }

    fn get_signed(&self, word: u128, f: Field) -> i64 {
        let s = self.slot(f);
        let v = self.get(word, f);
        let shift = 64 - s.width;
        ((v << shift) as i64) >> shift
    }

    fn put(&self, word: &mut u128, f: Field, v: u64) -> Result<(), IsaError> {
        let s = self.slot(f);
        if u128::from(v) > mask(s.width) {
            return Err(IsaError::FieldOverflow {
                format: self.name,
                field: f,
                value: v as i64,
                width: s.width,
            });
        }
        *word |= u128::from(v) << s.lsb;
        Ok(())
    }

    fn put_signed(&self, word: &mut u128, f: Field, v: i64) -> Result<(), IsaError> {
        let s = self.slot(f);
        let (lo, hi) = self.range(f);
        if v < lo || v > hi {
            return Err(IsaError::FieldOverflow {
                format: self.name,
                field: f,
                value: v,
                width: s.width,
            });
        }
        *word |= (v as u128 & mask(s.width)) << s.lsb;
        Ok(())
    }
}

fn mask(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// Why an instruction or micro-op cannot be encoded or decoded under a config. Every variant
/// about an operand says which field it is about ([`IsaError::field`]), so that tools can
/// point at it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsaError {
    #[error("{format} field {field} = {value} does not fit its {width} bits under this config")]
    FieldOverflow {
        format: &'static str,
        field: Field,
        value: i64,
        width: u32,
    },
    #[error("unknown opcode {0} (valid: 0 LOAD, 1 STORE, 2 GEMM, 3 FINISH, 4 ALU)")]
    UnknownOpcode(u64),
    #[error("unknown memory_type {0} (valid: 0 UOP, 1 WGT, 2 INP, 3 ACC, 4 OUT, 5 ACC_8BIT)")]
    UnknownMemType(u64),
    #[error("unknown alu_opcode {0} (valid: 0 MIN, 1 MAX, 2 ADD, 3 SHR, 4 MUL, 5 LUT, 6 LUTW)")]
    UnknownAluOp(u64),
    #[error("STORE reads only the OUT buffer, not {}", .0.name().to_uppercase())]
    StoreNotFromOut(MemType),
    #[error("LOAD cannot write the OUT buffer (it is written by GEMM/ALU)")]
    LoadIntoOut,
    #[error(
        "sram_base {sram_base} is beyond the {} buffer's {depth} elements",
        .memory_type.name().to_uppercase()
    )]
    SramBeyondBuffer {
        memory_type: MemType,
        sram_base: u16,
        depth: u32,
    },
    #[error("STORE has no padding, but {field} = {value}")]
    StorePadding { field: Field, value: u8 },
    #[error("ALU MUL is not implemented by this config (ALU_MUL is false)")]
    AluMulUnsupported,
    #[error(
        "ALU {} needs the activation table, which this config lacks (ALU_LUT is false; \
         use a config with \"ALU_LUT\": true, such as the preset lut)",
        .0.name().to_uppercase()
    )]
    AluLutUnsupported(AluOp),
    #[error("uop_end {uop_end} is beyond the micro-op buffer's {depth} entries")]
    UopEndBeyondBuffer { uop_end: u16, depth: u32 },
}

impl IsaError {
    /// The field the error is about: the one out of range, or the one whose value makes the
    /// instruction invalid (`memory_type` of a STORE not from OUT, `alu_opcode` of a MUL the
    /// config lacks).
    pub fn field(&self) -> Option<Field> {
        match self {
            IsaError::FieldOverflow { field, .. } | IsaError::StorePadding { field, .. } => {
                Some(*field)
            }
            IsaError::UnknownOpcode(_) => Some(Field::Opcode),
            IsaError::UnknownMemType(_) | IsaError::StoreNotFromOut(_) | IsaError::LoadIntoOut => {
                Some(Field::MemoryType)
            }
            IsaError::UnknownAluOp(_)
            | IsaError::AluMulUnsupported
            | IsaError::AluLutUnsupported(_) => Some(Field::AluOpcode),
            IsaError::SramBeyondBuffer { .. } => Some(Field::SramBase),
            IsaError::UopEndBeyondBuffer { .. } => Some(Field::UopEnd),
        }
    }
}

/// One instruction of a raw stream as a disassembler lists it: its bytes, the instruction
/// its fields spell (none when a field holds a value no instruction has, such as an unknown
/// opcode) and why it is invalid under the config, if it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedInsn {
    pub word: [u8; INSN_BYTES],
    pub insn: Option<Insn>,
    pub problem: Option<IsaError>,
}

/// Encoder and decoder for one config: the four layouts plus the limits they check.
#[derive(Debug, Clone)]
pub struct Codec {
    cfg: HwConfig,
    pub mem: Layout,
    pub gemm: Layout,
    pub alu: Layout,
    pub finish: Layout,
    pub uop: Layout,
}

impl Codec {
    pub fn new(cfg: &HwConfig) -> Self {
        let place = |name, unit, total, lists: &[&[(Field, Width)]]| {
            Layout::place(name, cfg, unit, total, lists)
        };
        Codec {
            cfg: cfg.clone(),
            mem: place(
                "LOAD/STORE",
                INSN_UNIT_BITS,
                INSN_BITS,
                &[&HEADER, &MEM_FIELDS],
            ),
            gemm: place(
                "GEMM",
                INSN_UNIT_BITS,
                INSN_BITS,
                &[&HEADER, &LOOP_FIELDS, &GEMM_FIELDS],
            ),
            alu: place(
                "ALU",
                INSN_UNIT_BITS,
                INSN_BITS,
                &[&HEADER, &LOOP_FIELDS, &ALU_FIELDS],
            ),
            finish: place("FINISH", INSN_UNIT_BITS, INSN_BITS, &[&HEADER]),
            uop: place("micro-op", UOP_BITS, UOP_BITS, &[&UOP_FIELDS]),
        }
    }

    pub fn config(&self) -> &HwConfig {
        &self.cfg
    }

    /// Checks what the field widths alone do not: opcode/operand combinations and ranges that
    /// depend on buffer depths.
    pub fn check(&self, insn: &Insn) -> Result<(), IsaError> {
        let cfg = &self.cfg;
        match insn {
            Insn::Load(m) | Insn::Store(m) => {
                let store = matches!(insn, Insn::Store(_));
                if store && m.memory_type != MemType::Out {
                    return Err(IsaError::StoreNotFromOut(m.memory_type));
                }
                if !store && m.memory_type == MemType::Out {
                    return Err(IsaError::LoadIntoOut);
                }
                let depth = cfg.depth(m.memory_type);
                if u32::from(m.sram_base) >= depth {
                    return Err(IsaError::SramBeyondBuffer {
                        memory_type: m.memory_type,
                        sram_base: m.sram_base,
                        depth,
                    });
                }
                if store {
                    for (field, value) in m.pads() {
                        if value != 0 {
                            return Err(IsaError::StorePadding { field, value });
                        }
                    }
                }
                Ok(())
            }
            Insn::Gemm(g) => self.check_loop(&g.lp),
            Insn::Alu(a) => {
                if a.op == AluOp::Mul && !cfg.alu_mul {
                    return Err(IsaError::AluMulUnsupported);
                }
                if a.op.is_table() && !cfg.alu_lut {
                    return Err(IsaError::AluLutUnsupported(a.op));
                }
                self.check_loop(&a.lp)
            }
            Insn::Finish(_) => Ok(()),
        }
    }

    fn check_loop(&self, lp: &UopLoop) -> Result<(), IsaError> {
        let depth = self.cfg.depth(MemType::Uop);
        if u32::from(lp.uop_end) > depth {
            return Err(IsaError::UopEndBeyondBuffer {
                uop_end: lp.uop_end,
                depth,
            });
        }
        Ok(())
    }

    /// Encodes one instruction as VTA's 16 little-endian bytes.
    pub fn encode(&self, insn: &Insn) -> Result<[u8; INSN_BYTES], IsaError> {
        Ok(self.encode_word(insn)?.to_le_bytes())
    }

    fn encode_word(&self, insn: &Insn) -> Result<u128, IsaError> {
        self.check(insn)?;
        let mut w = 0u128;
        let layout = self.layout_of(insn.opcode());
        layout.put(&mut w, Field::Opcode, insn.opcode() as u64)?;
        let d = insn.deps();
        layout.put(&mut w, Field::PopPrevDep, d.pop_prev.into())?;
        layout.put(&mut w, Field::PopNextDep, d.pop_next.into())?;
        layout.put(&mut w, Field::PushPrevDep, d.push_prev.into())?;
        layout.put(&mut w, Field::PushNextDep, d.push_next.into())?;
        match insn {
            Insn::Load(m) | Insn::Store(m) => {
                let l = &self.mem;
                l.put(&mut w, Field::MemoryType, m.memory_type as u64)?;
                l.put(&mut w, Field::SramBase, m.sram_base.into())?;
                l.put(&mut w, Field::DramBase, m.dram_base.into())?;
                l.put(&mut w, Field::YSize, m.y_size.into())?;
                l.put(&mut w, Field::XSize, m.x_size.into())?;
                l.put(&mut w, Field::XStride, m.x_stride.into())?;
                l.put(&mut w, Field::YPad0, m.y_pad_0.into())?;
                l.put(&mut w, Field::YPad1, m.y_pad_1.into())?;
                l.put(&mut w, Field::XPad0, m.x_pad_0.into())?;
                l.put(&mut w, Field::XPad1, m.x_pad_1.into())?;
            }
            Insn::Gemm(g) => {
                let l = &self.gemm;
                put_loop(l, &mut w, &g.lp)?;
                l.put(&mut w, Field::WgtFactorOut, g.wgt_factor_out.into())?;
                l.put(&mut w, Field::WgtFactorIn, g.wgt_factor_in.into())?;
            }
            Insn::Alu(a) => {
                let l = &self.alu;
                put_loop(l, &mut w, &a.lp)?;
                l.put(&mut w, Field::AluOpcode, a.op as u64)?;
                l.put(&mut w, Field::UseImm, a.use_imm.into())?;
                l.put_signed(&mut w, Field::Imm, a.imm.into())?;
            }
            Insn::Finish(_) => {}
        }
        Ok(w)
    }

    /// The layout of the instructions with opcode `op`.
    pub fn layout_of(&self, op: Opcode) -> &Layout {
        match op {
            Opcode::Load | Opcode::Store => &self.mem,
            Opcode::Gemm => &self.gemm,
            Opcode::Alu => &self.alu,
            Opcode::Finish => &self.finish,
        }
    }

    /// Decodes VTA's 16 little-endian bytes into a valid instruction: [`Codec::decode_fields`]
    /// and then [`Codec::check`].
    pub fn decode(&self, bytes: &[u8; INSN_BYTES]) -> Result<Insn, IsaError> {
        let insn = self.decode_fields(bytes)?;
        self.check(&insn)?;
        Ok(insn)
    }

    /// Decodes VTA's 16 little-endian bytes field by field, without [`Codec::check`]: the
    /// only errors are values no [`Insn`] can hold (an unknown opcode, memory type or ALU
    /// operation). Bits outside every field of the format (VTA's gaps, and everything after
    /// the header of FINISH) are ignored, as the hardware does. For listings, which show
    /// encodable but invalid instructions too; everything that runs a stream uses `decode`.
    pub fn decode_fields(&self, bytes: &[u8; INSN_BYTES]) -> Result<Insn, IsaError> {
        let w = u128::from_le_bytes(*bytes);
        let opcode_bits = self.finish.get(w, Field::Opcode);
        let op = Opcode::from_bits(opcode_bits).ok_or(IsaError::UnknownOpcode(opcode_bits))?;
        let h = &self.finish;
        let deps = DepFlags {
            pop_prev: h.get(w, Field::PopPrevDep) != 0,
            pop_next: h.get(w, Field::PopNextDep) != 0,
            push_prev: h.get(w, Field::PushPrevDep) != 0,
            push_next: h.get(w, Field::PushNextDep) != 0,
        };
        let insn = match op {
            Opcode::Load | Opcode::Store => {
                let l = &self.mem;
                let mt = l.get(w, Field::MemoryType);
                let m = MemInsn {
                    deps,
                    memory_type: MemType::from_bits(mt).ok_or(IsaError::UnknownMemType(mt))?,
                    sram_base: l.get(w, Field::SramBase) as u16,
                    dram_base: l.get(w, Field::DramBase) as u32,
                    y_size: l.get(w, Field::YSize) as u16,
                    x_size: l.get(w, Field::XSize) as u16,
                    x_stride: l.get(w, Field::XStride) as u16,
                    y_pad_0: l.get(w, Field::YPad0) as u8,
                    y_pad_1: l.get(w, Field::YPad1) as u8,
                    x_pad_0: l.get(w, Field::XPad0) as u8,
                    x_pad_1: l.get(w, Field::XPad1) as u8,
                };
                if op == Opcode::Load {
                    Insn::Load(m)
                } else {
                    Insn::Store(m)
                }
            }
            Opcode::Gemm => {
                let l = &self.gemm;
                Insn::Gemm(GemmInsn {
                    deps,
                    lp: get_loop(l, w),
                    wgt_factor_out: l.get(w, Field::WgtFactorOut) as u16,
                    wgt_factor_in: l.get(w, Field::WgtFactorIn) as u16,
                })
            }
            Opcode::Alu => {
                let l = &self.alu;
                let op_bits = l.get(w, Field::AluOpcode);
                Insn::Alu(AluInsn {
                    deps,
                    lp: get_loop(l, w),
                    op: AluOp::from_bits(op_bits).ok_or(IsaError::UnknownAluOp(op_bits))?,
                    use_imm: l.get(w, Field::UseImm) != 0,
                    imm: l.get_signed(w, Field::Imm) as i16,
                })
            }
            Opcode::Finish => Insn::Finish(deps),
        };
        Ok(insn)
    }

    /// Every instruction of a raw stream as a listing shows it, valid or not (see
    /// [`ListedInsn`]); only a length that is not a whole number of instructions is an error.
    pub fn list_stream(&self, bytes: &[u8]) -> Result<Vec<ListedInsn>, StreamError> {
        if !bytes.len().is_multiple_of(INSN_BYTES) {
            return Err(StreamError::Length {
                len: bytes.len(),
                unit: INSN_BYTES,
                what: "instruction",
            });
        }
        Ok(bytes
            .chunks_exact(INSN_BYTES)
            .map(|c| {
                let word: [u8; INSN_BYTES] = c.try_into().expect("an instruction's bytes");
                match self.decode_fields(&word) {
                    Ok(insn) => ListedInsn {
                        word,
                        problem: self.check(&insn).err(),
                        insn: Some(insn),
                    },
                    Err(e) => ListedInsn {
                        word,
                        insn: None,
                        problem: Some(e),
                    },
                }
            })
            .collect())
    }

    /// Encodes a micro-op as 4 little-endian bytes.
    pub fn encode_uop(&self, u: &Uop) -> Result<[u8; UOP_BYTES], IsaError> {
        let mut w = 0u128;
        self.uop.put(&mut w, Field::DstIdx, u.dst_idx.into())?;
        self.uop.put(&mut w, Field::SrcIdx, u.src_idx.into())?;
        self.uop.put(&mut w, Field::WgtIdx, u.wgt_idx.into())?;
        Ok((w as u32).to_le_bytes())
    }

    /// Decodes a micro-op; bits above the three fields are ignored.
    pub fn decode_uop(&self, bytes: &[u8; UOP_BYTES]) -> Uop {
        let w = u128::from(u32::from_le_bytes(*bytes));
        Uop {
            dst_idx: self.uop.get(w, Field::DstIdx) as u32,
            src_idx: self.uop.get(w, Field::SrcIdx) as u32,
            wgt_idx: self.uop.get(w, Field::WgtIdx) as u32,
        }
    }

    /// Decodes a raw stream of 16-byte instructions; errors name the instruction index.
    pub fn decode_stream(&self, bytes: &[u8]) -> Result<Vec<Insn>, StreamError> {
        if !bytes.len().is_multiple_of(INSN_BYTES) {
            return Err(StreamError::Length {
                len: bytes.len(),
                unit: INSN_BYTES,
                what: "instruction",
            });
        }
        bytes
            .chunks_exact(INSN_BYTES)
            .enumerate()
            .map(|(index, c)| {
                self.decode(c.try_into().expect("an instruction's bytes"))
                    .map_err(|source| StreamError::At { index, source })
            })
            .collect()
    }

    /// Encodes instructions as one raw stream; errors name the instruction index.
    pub fn encode_stream(&self, insns: &[Insn]) -> Result<Vec<u8>, StreamError> {
        let mut out = Vec::with_capacity(insns.len() * INSN_BYTES);
        for (index, i) in insns.iter().enumerate() {
            out.extend(
                self.encode(i)
                    .map_err(|source| StreamError::At { index, source })?,
            );
        }
        Ok(out)
    }

    /// Decodes a raw stream of 4-byte micro-ops.
    pub fn decode_uop_stream(&self, bytes: &[u8]) -> Result<Vec<Uop>, StreamError> {
        if !bytes.len().is_multiple_of(UOP_BYTES) {
            return Err(StreamError::Length {
                len: bytes.len(),
                unit: UOP_BYTES,
                what: "micro-op",
            });
        }
        Ok(bytes
            .chunks_exact(UOP_BYTES)
            .map(|c| self.decode_uop(c.try_into().expect("a micro-op's bytes")))
            .collect())
    }

    /// The instruction as a JSON object with VTA's field names, in layout order. `opcode` is
    /// the name ("LOAD", ...); `imm` is signed; every other field is its unsigned value.
    pub fn to_vta_json(&self, insn: &Insn) -> Result<Value, IsaError> {
        Ok(self.word_to_vta_json(&self.encode(insn)?))
    }

    /// A raw instruction word as a JSON object with VTA's field names, in its format's
    /// layout order, whether or not the instruction is valid: the same object as
    /// [`Codec::to_vta_json`] for a valid one. A word whose opcode is unknown has only its
    /// numeric `opcode`.
    pub fn word_to_vta_json(&self, bytes: &[u8; INSN_BYTES]) -> Value {
        let w = u128::from_le_bytes(*bytes);
        let opcode_bits = self.finish.get(w, Field::Opcode);
        let Some(op) = Opcode::from_bits(opcode_bits) else {
            return serde_json::json!({ "opcode": opcode_bits });
        };
        let layout = self.layout_of(op);
        let mut obj = Map::new();
        for &(f, _) in &layout.fields {
            let v = match f {
                Field::Opcode => Value::from(op.name()),
                Field::Imm => Value::from(layout.get_signed(w, f)),
                _ => Value::from(layout.get(w, f)),
            };
            obj.insert(f.name().to_string(), v);
        }
        Value::Object(obj)
    }

    /// The micro-op as a JSON object with VTA's field names.
    pub fn uop_to_json(&self, u: &Uop) -> Value {
        serde_json::json!({"dst_idx": u.dst_idx, "src_idx": u.src_idx, "wgt_idx": u.wgt_idx})
    }
}

fn put_loop(l: &Layout, w: &mut u128, lp: &UopLoop) -> Result<(), IsaError> {
    l.put(w, Field::ResetReg, lp.reset_reg.into())?;
    l.put(w, Field::UopBgn, lp.uop_bgn.into())?;
    l.put(w, Field::UopEnd, lp.uop_end.into())?;
    l.put(w, Field::IterOut, lp.iter_out.into())?;
    l.put(w, Field::IterIn, lp.iter_in.into())?;
    l.put(w, Field::DstFactorOut, lp.dst_factor_out.into())?;
    l.put(w, Field::DstFactorIn, lp.dst_factor_in.into())?;
    l.put(w, Field::SrcFactorOut, lp.src_factor_out.into())?;
    l.put(w, Field::SrcFactorIn, lp.src_factor_in.into())
}

fn get_loop(l: &Layout, w: u128) -> UopLoop {
    UopLoop {
        reset_reg: l.get(w, Field::ResetReg) != 0,
        uop_bgn: l.get(w, Field::UopBgn) as u16,
        uop_end: l.get(w, Field::UopEnd) as u16,
        iter_out: l.get(w, Field::IterOut) as u16,
        iter_in: l.get(w, Field::IterIn) as u16,
        dst_factor_out: l.get(w, Field::DstFactorOut) as u16,
        dst_factor_in: l.get(w, Field::DstFactorIn) as u16,
        src_factor_out: l.get(w, Field::SrcFactorOut) as u16,
        src_factor_in: l.get(w, Field::SrcFactorIn) as u16,
    }
}

/// An error in a stream of instructions or micro-ops, with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("{len} bytes is not a whole number of {unit}-byte {what}s")]
    Length {
        len: usize,
        unit: usize,
        what: &'static str,
    },
    #[error("instruction {index} (byte offset {}): {source}", index * INSN_BYTES)]
    At { index: usize, source: IsaError },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(l: &Layout) -> Vec<(&'static str, u32, u32)> {
        l.fields
            .iter()
            .map(|(f, s)| (f.name(), s.lsb + s.width - 1, s.lsb))
            .collect()
    }

    #[test]
    fn default_positions_match_vta_reference() {
        let c = Codec::new(&HwConfig::default());
        let mem = slots(&c.mem);
        assert!(mem.contains(&("dram_base", 57, 26)));
        assert!(
            mem.contains(&("y_size", 79, 64)),
            "gap 63:58 moves y_size to word 1"
        );
        assert!(mem.contains(&("x_pad_1", 127, 124)));
        let gemm = slots(&c.gemm);
        assert!(gemm.contains(&("uop_bgn", 20, 8)));
        assert!(gemm.contains(&("iter_in", 62, 49)));
        assert!(gemm.contains(&("dst_factor_out", 74, 64)), "gap at bit 63");
        assert!(gemm.contains(&("wgt_factor_in", 127, 118)));
        let alu = slots(&c.alu);
        assert!(alu.contains(&("alu_opcode", 110, 108)));
        assert!(alu.contains(&("imm", 127, 112)));
        let uop = slots(&c.uop);
        assert_eq!(
            uop,
            [("dst_idx", 10, 0), ("src_idx", 21, 11), ("wgt_idx", 31, 22)]
        );
    }

    #[test]
    fn limits_are_the_field_widths_on_every_preset() {
        for &(name, _, _) in crate::config::PRESETS {
            let c = Codec::new(&HwConfig::preset(name).unwrap());
            let max = |l: &Layout, f| -> i64 { l.range(f).1 };
            for f in [Field::YPad0, Field::YPad1, Field::XPad0, Field::XPad1] {
                assert_eq!(max(&c.mem, f), i64::from(MAX_PAD), "{name} {f}");
            }
            for f in [Field::YSize, Field::XSize, Field::XStride] {
                assert_eq!(max(&c.mem, f), i64::from(MAX_DMA_SIZE), "{name} {f}");
            }
            for l in [&c.gemm, &c.alu] {
                assert_eq!(max(l, Field::IterOut), i64::from(MAX_ITER), "{name}");
                assert_eq!(max(l, Field::IterIn), i64::from(MAX_ITER), "{name}");
            }
            assert_eq!(
                c.alu.range(Field::Imm),
                (IMM_MIN.into(), IMM_MAX.into()),
                "{name}"
            );
            for l in [&c.mem, &c.gemm, &c.alu, &c.finish] {
                let end = l.fields.iter().map(|(_, s)| s.lsb + s.width).max().unwrap();
                assert!(end <= INSN_BITS, "{name} {}", l.name);
            }
            let uop_end = c.uop.fields.iter().map(|(_, s)| s.lsb + s.width).max();
            assert!(uop_end.unwrap() <= UOP_BITS, "{name}");
            // Config-dependent limits follow the buffer depths.
            let cfg = c.config();
            assert_eq!(
                max(&c.gemm, Field::UopEnd),
                i64::from(cfg.depth(MemType::Uop)) * 2 - 1,
                "{name}"
            );
            assert_eq!(
                max(&c.uop, Field::DstIdx),
                i64::from(cfg.depth(MemType::Acc)) - 1,
                "{name}"
            );
        }
        assert_eq!((MAX_PAD, MAX_DMA_SIZE, MAX_ITER), (15, 65535, 16383));
        assert_eq!(
            (IMM_MIN, IMM_MAX, INSN_BYTES, UOP_BYTES),
            (i16::MIN, i16::MAX, 16, 4)
        );
    }

    #[test]
    fn every_codec_error_about_an_operand_names_its_field() {
        let mut cfg = HwConfig::preset("small").unwrap();
        cfg.alu_mul = false;
        let c = Codec::new(&cfg);
        let load = |mt| MemInsn::transfer(mt, 0, 0, 1, 1, 1);
        let err = |i: Insn| c.encode(&i).unwrap_err();
        assert_eq!(
            err(Insn::Store(load(MemType::Acc))).field(),
            Some(Field::MemoryType)
        );
        assert_eq!(err(Insn::Load(load(MemType::Out))), IsaError::LoadIntoOut);
        let far = MemInsn {
            sram_base: u16::MAX,
            ..load(MemType::Inp)
        };
        assert_eq!(err(Insn::Load(far)).field(), Some(Field::SramBase));
        let padded = load(MemType::Out).padded([0, 0, 1, 0]);
        assert_eq!(
            err(Insn::Store(padded)),
            IsaError::StorePadding {
                field: Field::XPad0,
                value: 1
            }
        );
        let wide = load(MemType::Inp).padded([0, 16, 0, 0]);
        assert_eq!(err(Insn::Load(wide)).field(), Some(Field::YPad1));
        let lp = UopLoop {
            uop_end: 1,
            iter_out: MAX_ITER + 1,
            iter_in: 1,
            ..UopLoop::default()
        };
        let gemm = GemmInsn {
            lp,
            ..GemmInsn::default()
        };
        assert_eq!(err(Insn::Gemm(gemm)).field(), Some(Field::IterOut));
        let mul = AluInsn {
            deps: DepFlags::NONE,
            lp: UopLoop { iter_out: 1, ..lp },
            op: AluOp::Mul,
            use_imm: true,
            imm: 1,
        };
        assert_eq!(err(Insn::Alu(mul)), IsaError::AluMulUnsupported);
        let beyond = UopLoop {
            uop_end: u16::MAX,
            iter_out: 1,
            ..lp
        };
        assert_eq!(
            err(Insn::Alu(AluInsn {
                lp: beyond,
                op: AluOp::Add,
                ..mul
            }))
            .field(),
            Some(Field::UopEnd)
        );
    }

    #[test]
    fn table_ops_need_alu_lut_and_take_free_alu_opcodes() {
        let alu = |op| {
            Insn::Alu(AluInsn {
                deps: DepFlags::NONE,
                lp: UopLoop {
                    uop_end: 1,
                    iter_out: 1,
                    iter_in: 1,
                    ..UopLoop::default()
                },
                op,
                use_imm: false,
                imm: 0,
            })
        };
        let plain = Codec::new(&HwConfig::default());
        let lut = Codec::new(&HwConfig::preset("lut").unwrap());
        for (op, code) in [(AluOp::Lut, 5u8), (AluOp::LutWrite, 6)] {
            let e = plain.encode(&alu(op)).unwrap_err();
            assert_eq!(e, IsaError::AluLutUnsupported(op));
            assert_eq!(e.field(), Some(Field::AluOpcode));
            assert!(e.to_string().contains("ALU_LUT is false"), "{e}");
            let bytes = lut.encode(&alu(op)).unwrap();
            // alu_opcode is bits 110:108, the same as on VTA's default config.
            assert_eq!((u128::from_le_bytes(bytes) >> 108) & 7, u128::from(code));
            assert_eq!(lut.decode(&bytes), Ok(alu(op)));
            assert_eq!(plain.decode(&bytes), Err(IsaError::AluLutUnsupported(op)));
        }
        // Every other instruction encodes the same with and without the table.
        for op in AluOp::ALL {
            assert_eq!(plain.encode(&alu(op)), lut.encode(&alu(op)));
        }
        let mut seven = lut.encode(&alu(AluOp::Min)).unwrap();
        seven[13] |= 7 << 4; // alu_opcode = 7 (bits 110:108 are bits 6:4 of byte 13)
        assert_eq!(lut.decode(&seven), Err(IsaError::UnknownAluOp(7)));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let c = Codec::new(&HwConfig::default());
        let mut b = [0u8; 16];
        b[0] = 7;
        assert_eq!(c.decode(&b), Err(IsaError::UnknownOpcode(7)));
        b[0] = 0 | (6 << 7) as u8; // LOAD with memory_type 6 (bits 9:7 -> byte0 bit 7 + byte1)
        b[1] = 0x03;
        assert!(matches!(c.decode(&b), Err(IsaError::UnknownMemType(_))));
        assert!(matches!(
            c.decode_stream(&[0u8; 17]),
            Err(StreamError::Length { len: 17, .. })
        ));
    }
}
