//! The instruction syntax as one table: for each mnemonic, the word that follows it, its
//! `KEY=VALUE` operands with the fields they hold, and its flags. The parser reads operands by
//! this table and the printer writes them by it, so the two cannot drift apart.

use crate::insn::{AluOp, Insn, MemType, Opcode};
use crate::layout::Field;
use crate::tokens::DepFlag;

/// The form of an operand's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `N`
    Num,
    /// `OUT,IN`
    Pair,
    /// `BEGIN..END`
    Range,
    /// `Y0,Y1,X0,X1`
    Quad,
    /// `N`, `NAME`, `NAME+N` or `NAME-N`
    Addr,
}

impl Kind {
    /// The value's form, for messages.
    pub(super) fn form(self) -> &'static str {
        match self {
            Kind::Num => "N",
            Kind::Pair => "OUT,IN",
            Kind::Range => "BEGIN..END",
            Kind::Quad => "Y0,Y1,X0,X1",
            Kind::Addr => "ADDRESS",
        }
    }

    /// How many fields the value holds.
    pub(super) fn arity(self) -> usize {
        match self {
            Kind::Num | Kind::Addr => 1,
            Kind::Pair | Kind::Range => 2,
            Kind::Quad => 4,
        }
    }
}

/// When an operand is written, and what giving it means beyond its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Presence {
    /// Must be given; always printed.
    Required,
    /// Defaults to zero; always printed.
    Shown,
    /// Defaults to zero; printed when not all zero.
    UnlessZero,
    /// The ALU immediate as the second operand: giving it sets `use_imm`; printed when
    /// `use_imm` is set.
    Imm,
    /// The `imm` field while `use_imm` is clear (so that every decoded instruction prints
    /// exactly); printed when `use_imm` is clear and the field is not zero.
    RawImm,
}

/// One `KEY=VALUE` operand.
#[derive(Debug, Clone, Copy)]
pub(super) struct Operand {
    pub key: &'static str,
    pub kind: Kind,
    /// The fields the value parts go to, in order (`kind.arity()` of them).
    pub fields: &'static [Field],
    pub presence: Presence,
}

/// The word after a mnemonic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Selector {
    None,
    /// `MEM`: the `memory_type`.
    MemType,
    /// `OP`: the `alu_opcode`.
    AluOp,
}

impl Selector {
    /// The field the selector word sets.
    pub(super) fn field(self) -> Option<Field> {
        match self {
            Selector::None => None,
            Selector::MemType => Some(Field::MemoryType),
            Selector::AluOp => Some(Field::AluOpcode),
        }
    }

    /// The words it accepts, with their field values.
    pub(super) fn words(self) -> Vec<(&'static str, i64)> {
        match self {
            Selector::None => vec![],
            Selector::MemType => MemType::ALL.map(|m| (m.name(), m as i64)).to_vec(),
            Selector::AluOp => AluOp::EVERY.map(|o| (o.name(), o as i64)).to_vec(),
        }
    }

    /// What the word is, for messages.
    pub(super) fn what(self) -> &'static str {
        match self {
            Selector::None => "",
            Selector::MemType => "memory type",
            Selector::AluOp => "ALU operation",
        }
    }
}

/// A flag operand: a word without a value that sets a one-bit field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Flag {
    pub word: &'static str,
    pub field: Field,
}

/// The syntax of one mnemonic.
#[derive(Debug)]
pub(super) struct Syntax {
    pub mnemonic: &'static str,
    pub opcode: Opcode,
    pub selector: Selector,
    pub operands: &'static [Operand],
    /// Flags besides the four dependency flags, which every instruction takes.
    pub flags: &'static [Flag],
}

impl Syntax {
    /// Every flag word the mnemonic takes, in printing order.
    pub(super) fn all_flags(&self) -> Vec<Flag> {
        let deps = DepFlag::ALL.map(|f| Flag {
            word: f.name(),
            field: f.field(),
        });
        self.flags.iter().copied().chain(deps).collect()
    }

    /// The instruction with every field zero (the selector's first value).
    pub(super) fn blank(&self) -> Insn {
        use crate::insn::{AluInsn, DepFlags, GemmInsn, MemInsn, UopLoop};
        match self.opcode {
            Opcode::Load => Insn::Load(MemInsn::sync(MemType::Uop)),
            Opcode::Store => Insn::Store(MemInsn::sync(MemType::Uop)),
            Opcode::Gemm => Insn::Gemm(GemmInsn::default()),
            Opcode::Alu => Insn::Alu(AluInsn {
                deps: DepFlags::NONE,
                lp: UopLoop::default(),
                op: AluOp::Min,
                use_imm: false,
                imm: 0,
            }),
            Opcode::Finish => Insn::Finish(DepFlags::NONE),
        }
    }
}

const fn op(
    key: &'static str,
    kind: Kind,
    fields: &'static [Field],
    presence: Presence,
) -> Operand {
    Operand {
        key,
        kind,
        fields,
        presence,
    }
}

use Field as F;
use Presence as P;

const MEM_OPERANDS: &[Operand] = &[
    op("sram", Kind::Num, &[F::SramBase], P::Required),
    op("dram", Kind::Addr, &[F::DramBase], P::Required),
    op("y", Kind::Num, &[F::YSize], P::Required),
    op("x", Kind::Num, &[F::XSize], P::Required),
    op("stride", Kind::Num, &[F::XStride], P::Required),
    op(
        "pad",
        Kind::Quad,
        &[F::YPad0, F::YPad1, F::XPad0, F::XPad1],
        P::UnlessZero,
    ),
];

const LOOP_OPERANDS: [Operand; 4] = [
    op("uops", Kind::Range, &[F::UopBgn, F::UopEnd], P::Required),
    op("iter", Kind::Pair, &[F::IterOut, F::IterIn], P::Required),
    op(
        "dst",
        Kind::Pair,
        &[F::DstFactorOut, F::DstFactorIn],
        P::Shown,
    ),
    op(
        "src",
        Kind::Pair,
        &[F::SrcFactorOut, F::SrcFactorIn],
        P::Shown,
    ),
];

const GEMM_OPERANDS: &[Operand] = &[
    LOOP_OPERANDS[0],
    LOOP_OPERANDS[1],
    LOOP_OPERANDS[2],
    LOOP_OPERANDS[3],
    op(
        "wgt",
        Kind::Pair,
        &[F::WgtFactorOut, F::WgtFactorIn],
        P::Shown,
    ),
];

const ALU_OPERANDS: &[Operand] = &[
    LOOP_OPERANDS[0],
    LOOP_OPERANDS[1],
    LOOP_OPERANDS[2],
    LOOP_OPERANDS[3],
    op("imm", Kind::Num, &[F::Imm], P::Imm),
    op("rawimm", Kind::Num, &[F::Imm], P::RawImm),
];

const RESET: &[Flag] = &[Flag {
    word: "reset",
    field: F::ResetReg,
}];

/// Every instruction mnemonic.
pub(super) const INSNS: [Syntax; 5] = [
    Syntax {
        mnemonic: "load",
        opcode: Opcode::Load,
        selector: Selector::MemType,
        operands: MEM_OPERANDS,
        flags: &[],
    },
    Syntax {
        mnemonic: "store",
        opcode: Opcode::Store,
        selector: Selector::MemType,
        operands: MEM_OPERANDS,
        flags: &[],
    },
    Syntax {
        mnemonic: "gemm",
        opcode: Opcode::Gemm,
        selector: Selector::None,
        operands: GEMM_OPERANDS,
        flags: RESET,
    },
    Syntax {
        mnemonic: "alu",
        opcode: Opcode::Alu,
        selector: Selector::AluOp,
        operands: ALU_OPERANDS,
        flags: RESET,
    },
    Syntax {
        mnemonic: "finish",
        opcode: Opcode::Finish,
        selector: Selector::None,
        operands: &[],
        flags: &[],
    },
];

/// The micro-op line `uop dst=D src=S wgt=W`.
pub(super) const UOP_MNEMONIC: &str = "uop";
pub(super) const UOP_OPERANDS: &[Operand] = &[
    op("dst", Kind::Num, &[F::DstIdx], P::Shown),
    op("src", Kind::Num, &[F::SrcIdx], P::Shown),
    op("wgt", Kind::Num, &[F::WgtIdx], P::Shown),
];

/// The syntax of mnemonic `word`.
pub(super) fn by_mnemonic(word: &str) -> Option<&'static Syntax> {
    INSNS.iter().find(|s| s.mnemonic == word)
}

/// The syntax of the instruction's opcode.
pub(super) fn of(insn: &Insn) -> &'static Syntax {
    let opcode = insn.opcode();
    INSNS
        .iter()
        .find(|s| s.opcode == opcode)
        .expect("every opcode has a syntax")
}

/// Whether the printer writes `o` for `insn`, whose values for `o.fields` are `values`.
pub(super) fn printed(o: &Operand, insn: &Insn, values: &[i64]) -> bool {
    let use_imm = insn.field(Field::UseImm) == Some(1);
    match o.presence {
        Presence::Required | Presence::Shown => true,
        Presence::UnlessZero => values.iter().any(|&v| v != 0),
        Presence::Imm => use_imm,
        Presence::RawImm => !use_imm && values.iter().any(|&v| v != 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HwConfig;
    use crate::layout::Codec;

    /// Every field of every format is written by exactly one part of its syntax (the
    /// opcode by the mnemonic, `use_imm` by the choice of `imm=`/`rawimm=`), so printing
    /// loses nothing; and every operand's fields belong to the format.
    #[test]
    fn the_syntax_covers_every_field_of_every_format_once() {
        let codec = Codec::new(&HwConfig::default());
        for s in &INSNS {
            let layout = codec.layout_of(s.opcode);
            let mut written: Vec<Field> = vec![Field::Opcode];
            written.extend(s.selector.field());
            written.extend(s.all_flags().iter().map(|f| f.field));
            for o in s.operands {
                assert_eq!(o.fields.len(), o.kind.arity(), "{} {}", s.mnemonic, o.key);
                if o.presence != Presence::RawImm {
                    written.extend(o.fields);
                }
                if o.presence == Presence::Imm {
                    written.push(Field::UseImm);
                }
            }
            let mut want: Vec<Field> = layout.fields.iter().map(|(f, _)| *f).collect();
            written.sort_by_key(|f| *f as usize);
            want.sort_by_key(|f| *f as usize);
            assert_eq!(written, want, "{}", s.mnemonic);
        }
        let mut uop: Vec<Field> = UOP_OPERANDS
            .iter()
            .flat_map(|o| o.fields)
            .copied()
            .collect();
        uop.sort_by_key(|f| *f as usize);
        let want: Vec<Field> = codec.uop.fields.iter().map(|(f, _)| *f).collect();
        assert_eq!(uop, want);
    }

    /// Each mnemonic with every selector word and every field at its largest (the immediate
    /// also at its smallest) prints and parses back, on several configs.
    #[test]
    fn every_opcode_round_trips_at_its_field_limits() {
        use crate::asm::{parse_program, print_insns, AsmContext};
        for preset in ["default", "small", "rect", "lut"] {
            let cfg = HwConfig::preset(preset).unwrap();
            let codec = Codec::new(&cfg);
            let mut insns = Vec::new();
            for s in &INSNS {
                let layout = codec.layout_of(s.opcode);
                let words = s.selector.words();
                let selections: Vec<Option<i64>> = if words.is_empty() {
                    vec![None]
                } else {
                    words.iter().map(|w| Some(w.1)).collect()
                };
                // The table operations exist only on configs with the activation table.
                let table_op = |v: i64| {
                    s.selector == Selector::AluOp
                        && AluOp::from_bits(v as u64).is_some_and(AluOp::is_table)
                };
                for sel in selections {
                    if sel.is_some_and(table_op) && !cfg.alu_lut {
                        continue;
                    }
                    for use_imm in [0, 1] {
                        let mut insn = s.blank();
                        if let (Some(v), Some(f)) = (sel, s.selector.field()) {
                            insn.set_field(f, v).unwrap();
                        }
                        for f in s.all_flags() {
                            insn.set_field(f.field, 1).unwrap();
                        }
                        for o in s.operands {
                            for &f in o.fields {
                                let (lo, hi) = layout.range(f);
                                let v = if use_imm == 1 { hi } else { lo.min(hi) };
                                // Values the codec checks beyond the width stay legal.
                                let v = match f {
                                    Field::SramBase => 0,
                                    Field::UopEnd => i64::from(cfg.depth(crate::MemType::Uop)),
                                    _ => v,
                                };
                                insn.set_field(f, v).unwrap();
                            }
                        }
                        if layout.has(Field::UseImm) {
                            insn.set_field(Field::UseImm, use_imm).unwrap();
                        }
                        if let Insn::Store(m) = &mut insn {
                            m.memory_type = MemType::Out;
                            m.y_pad_0 = 0;
                            m.y_pad_1 = 0;
                            m.x_pad_0 = 0;
                            m.x_pad_1 = 0;
                        }
                        if let Insn::Load(m) = &insn {
                            if m.memory_type == MemType::Out {
                                continue;
                            }
                        }
                        codec
                            .encode(&insn)
                            .unwrap_or_else(|e| panic!("{insn:?}: {e}"));
                        insns.push(insn);
                    }
                }
            }
            let text = print_insns(&cfg, &insns);
            let ctx = AsmContext {
                config: Some(cfg.clone()),
                ..AsmContext::default()
            };
            let back = parse_program(&text, &ctx).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(back.insns, insns, "{preset}:\n{text}");
        }
    }

    #[test]
    fn every_opcode_has_one_mnemonic() {
        for bits in 0..8 {
            if let Some(op) = Opcode::from_bits(bits) {
                assert_eq!(INSNS.iter().filter(|s| s.opcode == op).count(), 1, "{op:?}");
            }
        }
        for s in &INSNS {
            assert_eq!(by_mnemonic(s.mnemonic).map(|t| t.opcode), Some(s.opcode));
            assert_eq!(of(&s.blank()).mnemonic, s.mnemonic);
        }
    }
}
