//! Operands of a signed product printed in the product's signed context: a sign extension
//! of a name as `$signed(x)`, a shifted one as `$signed(x) << s`, and sums and differences
//! of such terms inline, where the IR value provably fits its own width.
//!
//! Verilog evaluates `$signed(a) * (($signed(w1) << 16) + $signed(w0))` at the width of
//! the assignment it is the right-hand side of, every operand sign-extended to that width
//! first. When no intermediate value of the IR's expression can overflow the width the IR
//! gives it (the value ranges below show it), that wider evaluation gives the same
//! integers, so the product's low bits are the IR's. Synthesis sees the same adders and
//! multiplier (its width reduction trims the extension again); a simulator computes each
//! extension as one machine sign extension (with `hdl`'s prelude to Verilator's C++, see
//! `verilator::sim_prelude`), where the concatenation `{{17{w0[7]}}, w0}` in a generated
//! wire costs it shifts, masks and a store: ResNet-18 simulates 4-8% faster from this
//! alone, about 15% with the prelude.
//!
//! The text is narrower than the product in places, by design, which `verilator -Wall`
//! reports as WIDTH: such statements are printed inside a `lint_off WIDTH` of their own.

use super::*;

/// The signed value range of a term, `lo..=hi`.
type Range = (i128, i128);

/// Values at most this wide are analysed (their ranges fit in `i128` with room to add).
const MAX_TERM_WIDTH: u32 = 64;

fn signed_range(width: u32) -> Range {
    let half = 1i128 << (width - 1);
    (-half, half - 1)
}

fn fits(r: Range, width: u32) -> bool {
    let (lo, hi) = signed_range(width);
    r.0 >= lo && r.1 <= hi
}

/// The shape of a term that prints in a signed context.
enum Term {
    /// A name or a part-select of one: `$signed(x)`.
    Leaf,
    /// `x` sign-extended and shifted left by `shift` (`{{k{x[msb]}}, x, s'd0}`).
    Extended {
        x: NodeId,
        shift: u32,
    },
    /// The same value under another signedness.
    Reinterpret(NodeId),
    Add(NodeId, NodeId),
    Sub(NodeId, NodeId),
    Shl(NodeId, u32),
}

impl Printer<'_> {
    /// A plain name, a part-select of one, or a node already printed into a name.
    fn is_leaf(&self, n: NodeId) -> bool {
        if self.ident.contains_key(&n) {
            return true;
        }
        match self.def.nodes[n].op {
            Op::Ref(_) => true,
            Op::Slice(b, _) => matches!(self.def.nodes[b].op, Op::Ref(_)),
            _ => false,
        }
    }

    /// The signal and bit offset a leaf reads (None for named nodes).
    fn leaf_bits(&self, n: NodeId) -> Option<(SigId, u32)> {
        if self.ident.contains_key(&n) {
            return None;
        }
        match self.def.nodes[n].op {
            Op::Ref(s) => Some((s, 0)),
            Op::Slice(b, lo) => match self.def.nodes[b].op {
                Op::Ref(s) => Some((s, lo)),
                _ => None,
            },
            _ => None,
        }
    }

    /// `x`, a sign-extended copy of `x` padded with zeros (`{{k{x[msb]}}, x, s'd0}`), as
    /// `(x, s)`.
    fn extension_of(&self, n: NodeId) -> Option<(NodeId, u32)> {
        let Op::Concat(parts) = &self.def.nodes[n].op else {
            return None;
        };
        let (mut body, mut shift) = (&parts[..], 0);
        if let Some((&last, rest)) = body.split_last() {
            if let Op::Const(c) = &self.def.nodes[last].op {
                if c.is_zero() {
                    shift = c.width();
                    body = rest;
                }
            }
        }
        let (&x, fill) = body.split_last()?;
        let (sig, lo) = self.leaf_bits(x)?;
        let msb = lo + self.def.nodes[x].width - 1;
        let sign_bit =
            |p: NodeId| self.def.nodes[p].width == 1 && self.leaf_bits(p) == Some((sig, msb));
        let all_sign = fill.iter().all(|&p| match self.def.nodes[p].op {
            Op::Repeat(b, _) => sign_bit(b),
            _ => sign_bit(p),
        });
        (all_sign && (shift > 0 || !fill.is_empty())).then_some((x, shift))
    }

    fn term(&self, n: NodeId) -> Option<Term> {
        if self.is_leaf(n) {
            return Some(Term::Leaf);
        }
        if let Some((x, shift)) = self.extension_of(n) {
            return Some(Term::Extended { x, shift });
        }
        let width = self.def.nodes[n].width;
        match self.def.nodes[n].op {
            Op::Slice(b, 0) if self.def.nodes[b].width == width => Some(Term::Reinterpret(b)),
            Op::Bin(BinOp::Add, a, b) => Some(Term::Add(a, b)),
            Op::Bin(BinOp::Sub, a, b) => Some(Term::Sub(a, b)),
            Op::Shift(ShiftOp::Shl, a, Amount::Const(k)) if k < width => Some(Term::Shl(a, k)),
            _ => None,
        }
    }

    /// The value range of `n` read as signed, if `n` prints as a signed term whose every
    /// intermediate value fits the width the IR gives it (and `n` is at most `width` bits).
    fn signed_term_range(&self, n: NodeId, width: u32) -> Option<Range> {
        let w = self.def.nodes[n].width;
        if w > width || w > MAX_TERM_WIDTH {
            return None;
        }
        let r = match self.term(n)? {
            Term::Leaf => signed_range(w),
            Term::Extended { x, shift } => {
                let (lo, hi) = signed_range(self.def.nodes[x].width);
                (lo << shift, hi << shift)
            }
            Term::Reinterpret(b) => self.signed_term_range(b, width)?,
            Term::Add(a, b) => {
                let (ra, rb) = (self.signed_term_range(a, w)?, self.signed_term_range(b, w)?);
                (ra.0 + rb.0, ra.1 + rb.1)
            }
            Term::Sub(a, b) => {
                let (ra, rb) = (self.signed_term_range(a, w)?, self.signed_term_range(b, w)?);
                (ra.0 - rb.1, ra.1 - rb.0)
            }
            Term::Shl(a, k) => {
                let ra = self.signed_term_range(a, w)?;
                (ra.0 << k, ra.1 << k)
            }
        };
        fits(r, w).then_some(r)
    }

    /// Prints a term [`signed_term_range`](Self::signed_term_range) accepted.
    fn signed_term(&mut self, n: NodeId, hint: &str) -> String {
        match self.term(n).expect("checked by signed_term_range") {
            Term::Leaf => format!("$signed({})", self.expr(n, hint).0),
            Term::Extended { x, shift: 0 } => format!("$signed({})", self.expr(x, hint).0),
            Term::Extended { x, shift } => {
                format!("($signed({}) << {shift})", self.expr(x, hint).0)
            }
            Term::Reinterpret(b) => self.signed_term(b, hint),
            Term::Add(a, b) => {
                let (x, y) = (self.signed_term(a, hint), self.signed_term(b, hint));
                format!("({x} + {y})")
            }
            Term::Sub(a, b) => {
                let (x, y) = (self.signed_term(a, hint), self.signed_term(b, hint));
                format!("({x} - {y})")
            }
            Term::Shl(a, k) => format!("({} << {k})", self.signed_term(a, hint)),
        }
    }

    /// An operand of a signed product evaluated at `width` bits: a signed term when it is
    /// one, else `$signed(name)` of the operand's own name. Also says whether the text is
    /// narrower than the product somewhere inside (which needs the WIDTH waiver).
    pub(super) fn signed_factor(&mut self, n: NodeId, width: u32, hint: &str) -> (String, bool) {
        if self.signed_term_range(n, width).is_some() {
            let leaf = self.is_leaf(n);
            (self.signed_term(n, hint), !leaf)
        } else {
            (format!("$signed({})", self.mul_operand(n, hint)), false)
        }
    }
}

/// `line` inside a `lint_off WIDTH` of its own (see the module docs), one line each, the
/// lines after the first indented by `indent` (the caller indents the first).
pub(super) fn width_waived(line: &str, indent: &str) -> String {
    format!("/* verilator lint_off WIDTH */\n{indent}{line}\n{indent}/* verilator lint_on WIDTH */")
}
