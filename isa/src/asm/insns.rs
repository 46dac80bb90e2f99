//! Instructions and micro-op lines: operands read by the syntax table ([`super::syntax`]),
//! each value checked against its field's range in the config's layout, the result checked
//! by the codec, and every error placed on the operand whose field it names.

use super::lex::{ident, Diag, R};
use super::operands::{Given, Ops, Val};
use super::parse::{Assembler, State, MAX_SEGMENT_BYTES};
use super::syntax::{self, Operand, Presence, Selector, Syntax, UOP_MNEMONIC, UOP_OPERANDS};
use crate::insn::{Insn, MemType, Uop};
use crate::layout::{Field, IsaError, Layout, UOP_BYTES};

/// Checks that `v` fits `field` of `layout`; the message gives the range and its origin.
fn fit_field(st: &State, layout: &Layout, field: Field, v: i128, pos: usize, what: &str) -> R<i64> {
    let (lo, hi) = layout.range(field);
    if v < i128::from(lo) || v > i128::from(hi) {
        return Err(Diag {
            pos,
            msg: format!(
                "{v} is out of range for {field}{what}: it must be between {lo} and {hi} \
                 ({field} has {} bits under {})",
                layout.slot(field).width,
                st.prog.config.config_string()
            ),
        });
    }
    Ok(v as i64)
}

/// The operand of `ops` that gave `field`, if any.
fn giver(ops: &Ops, field: Field) -> Option<&Given> {
    ops.items.iter().find(|g| g.syntax.fields.contains(&field))
}

impl Assembler<'_> {
    /// The word after `load`, `store` or `alu`, as its field value and position.
    fn selector(&mut self, sel: Selector, mnemonic: &str) -> R<Option<(i64, usize)>> {
        if sel == Selector::None {
            return Ok(None);
        }
        self.cur.end_token()?;
        self.cur.blank();
        let pos = self.cur.pos();
        let words = sel.words();
        let names = || {
            let mut n: Vec<&str> = words.iter().map(|w| w.0).collect();
            let last = n.pop().unwrap_or_default();
            format!("{} or {last}", n.join(", "))
        };
        let what = sel.what();
        match self.cur.eat(ident) {
            Some(w) => match words.iter().find(|(name, _)| *name == w) {
                Some(&(_, v)) => Ok(Some((v, pos))),
                None => Err(Diag {
                    pos,
                    msg: format!("unknown {what} '{w}' (expected {})", names()),
                }),
            },
            None => self.cur.expected(&format!(
                "a{} {what} ({}) after '{mnemonic}'",
                if what.starts_with(['A', 'E', 'I', 'O', 'U']) {
                    "n"
                } else {
                    ""
                },
                names()
            )),
        }
    }

    pub(super) fn insn(&mut self, st: &State, word: &str, pos: usize) -> R<Insn> {
        let Some(syn) = syntax::by_mnemonic(word) else {
            let words: Vec<&str> = syntax::INSNS.iter().map(|s| s.mnemonic).collect();
            return Err(Diag {
                pos,
                msg: format!(
                    "unknown mnemonic '{word}' (expected {}, {UOP_MNEMONIC} or a directive)",
                    words.join(", ")
                ),
            });
        };
        let mut insn = syn.blank();
        let selected = self.selector(syn.selector, word)?;
        if let (Some((v, _)), Some(f)) = (selected, syn.selector.field()) {
            insn.set_field(f, v)
                .expect("selector words are valid field values");
        }
        let flags: Vec<&'static str> = syn.all_flags().iter().map(|f| f.word).collect();
        let ops = self.operands(word, pos, syn.operands, &flags)?;
        let layout = st.codec.layout_of(syn.opcode);
        self.fill(st, syn, &ops, layout, &mut insn)?;
        for f in syn.all_flags() {
            if ops.has_flag(f.word) {
                insn.set_field(f.field, 1)
                    .expect("flags are one-bit fields");
            }
        }
        if let Err(e) = st.codec.encode(&insn) {
            let at_selector = syn.selector.field().is_some() && e.field() == syn.selector.field();
            let blame = match selected {
                Some((_, spos)) if at_selector => spos,
                _ => e
                    .field()
                    .and_then(|f| giver(&ops, f))
                    .map_or(pos, |g| g.pos),
            };
            return Err(Diag {
                pos: blame,
                msg: format!("{e} ({})", st.prog.config.config_string()),
            });
        }
        Ok(insn)
    }

    /// Sets the fields of the operands of `ops` (or reports the missing ones).
    fn fill(&self, st: &State, syn: &Syntax, ops: &Ops, layout: &Layout, insn: &mut Insn) -> R<()> {
        let mut imm_given: Option<&Given> = None;
        for o in syn.operands {
            let Some(g) = ops.get(o.key) else {
                if o.presence == Presence::Required {
                    return ops.missing(o);
                }
                continue;
            };
            if matches!(o.presence, Presence::Imm | Presence::RawImm) {
                if imm_given.is_some() {
                    let second = ops
                        .items
                        .iter()
                        .filter(|i| matches!(i.syntax.presence, Presence::Imm | Presence::RawImm))
                        .map(|i| i.pos)
                        .max()
                        .unwrap_or(g.pos);
                    return Err(Diag {
                        pos: second,
                        msg: "imm= and rawimm= cannot both be given".into(),
                    });
                }
                imm_given = Some(g);
                if o.presence == Presence::Imm {
                    insn.set_field(Field::UseImm, 1).expect("ALU has use_imm");
                }
            }
            for (f, v) in self.field_values(st, o, g, layout, insn)? {
                insn.set_field(f, v).ok_or_else(|| Diag {
                    pos: g.value_pos,
                    msg: format!("{v} does not fit {f}"),
                })?;
            }
        }
        Ok(())
    }

    /// The field values of the given operand `g`, each checked against the layout.
    fn field_values(
        &self,
        st: &State,
        o: &Operand,
        g: &Given,
        layout: &Layout,
        insn: &Insn,
    ) -> R<Vec<(Field, i64)>> {
        match &g.val {
            Val::Nums(nums) => o
                .fields
                .iter()
                .zip(nums)
                .map(|(&f, &(v, pos))| Ok((f, fit_field(st, layout, f, v, pos, "")?)))
                .collect(),
            Val::Addr { name, off } => {
                let mt = insn
                    .field(Field::MemoryType)
                    .and_then(|v| MemType::from_bits(v as u64))
                    .expect("addresses are operands of LOAD/STORE");
                let value = self.dram(st, name, *off, mt)?;
                let what = format!(" (the {} element index)", mt.name());
                let f = o.fields[0];
                Ok(vec![(
                    f,
                    fit_field(st, layout, f, value, g.value_pos, &what)?,
                )])
            }
        }
    }

    /// A `dram=` address as an element index of `mt`.
    fn dram(&self, st: &State, name: &Option<(String, usize)>, off: i128, mt: MemType) -> R<i128> {
        let Some((name, npos)) = name else {
            return Ok(off);
        };
        let Some(seg) = st.prog.segment(name) else {
            return Err(Diag {
                pos: *npos,
                msg: format!("no segment named '{name}' is declared before this instruction"),
            });
        };
        let eb = u64::from(st.prog.config.elem_bytes(mt));
        if seg.offset % eb != 0 {
            return Err(Diag {
                pos: *npos,
                msg: format!(
                    "segment '{name}' starts at byte {}, which is not a whole {}-byte {} element",
                    seg.offset,
                    eb,
                    mt.name()
                ),
            });
        }
        Ok(i128::from(seg.offset / eb) + off)
    }

    /// A `uop dst=D src=S wgt=W` line: one more micro-op of the open `.uops` segment.
    pub(super) fn uop_line(&mut self, st: &mut State, pos: usize) -> R<()> {
        let ops = self.operands(UOP_MNEMONIC, pos, UOP_OPERANDS, &[])?;
        if st.uops.is_none() {
            return Err(Diag {
                pos,
                msg: "a uop line must follow a .uops directive (or another uop line)".into(),
            });
        }
        let mut uop = Uop::default();
        for o in UOP_OPERANDS {
            if let Some(Given {
                val: Val::Nums(nums),
                ..
            }) = ops.get(o.key)
            {
                let (f, (v, vpos)) = (o.fields[0], nums[0]);
                let v = fit_field(st, &st.codec.uop, f, v, vpos, "")?;
                uop.set_field(f, v).ok_or_else(|| Diag {
                    pos: vpos,
                    msg: format!("{v} does not fit {f}"),
                })?;
            }
        }
        let bytes = st.codec.encode_uop(&uop).map_err(|e: IsaError| Diag {
            pos: e
                .field()
                .and_then(|f| giver(&ops, f))
                .map_or(pos, |g| g.pos),
            msg: format!("{e} ({})", st.prog.config.config_string()),
        })?;
        let block = st.uops.as_mut().expect("checked above");
        if (block.count + 1) as u64 * UOP_BYTES as u64 > MAX_SEGMENT_BYTES {
            return Err(Diag {
                pos,
                msg: "too many micro-ops in one .uops segment".into(),
            });
        }
        block.count += 1;
        if let Some(seg) = st.prog.segments.get_mut(block.seg) {
            seg.shape = vec![block.count];
            seg.init.get_or_insert_with(Vec::new).extend(bytes);
        }
        Ok(())
    }
}
