//! Constants and expressions over several signals: literals, concatenation and packing,
//! multiplexers (`mux`, `index`, `case`), and the slicing and type checks they share with
//! [`Sig`]'s operators.

use super::*;

impl ModuleBuilder {
    /// An unsigned constant; panics if `value` does not fit in `width` bits.
    #[track_caller]
    pub fn lit(&self, value: u64, width: u32) -> Sig<'_> {
        self.check_width("constant", &value.to_string(), width);
        match Bits::from_u64(value, width) {
            Some(b) => self.node(Op::Const(b), width, false),
            None => panic!(
                "module `{}`: the constant {value} does not fit in {width} bits",
                self.name
            ),
        }
    }

    /// A signed constant; panics if `value` does not fit a signed `width`-bit value.
    #[track_caller]
    pub fn lit_signed(&self, value: i64, width: u32) -> Sig<'_> {
        self.check_width("constant", &value.to_string(), width);
        match Bits::from_i128(value as i128, width, true) {
            Some(b) => self.node(Op::Const(b), width, true),
            None => panic!(
                "module `{}`: the constant {value} does not fit a {}",
                self.name,
                ty(width, true)
            ),
        }
    }

    /// An unsigned constant of any width.
    pub fn constant(&self, value: Bits) -> Sig<'_> {
        let w = value.width();
        self.node(Op::Const(value), w, false)
    }

    /// The all-zero constant of `width` bits.
    #[track_caller]
    pub fn zero(&self, width: u32) -> Sig<'_> {
        self.check_width("constant", "0", width);
        self.node(Op::Const(Bits::zero(width)), width, false)
    }

    /// The all-ones constant of `width` bits.
    #[track_caller]
    pub fn ones(&self, width: u32) -> Sig<'_> {
        self.check_width("constant", "ones", width);
        self.node(Op::Const(Bits::ones(width)), width, false)
    }

    /// A 1-bit constant.
    pub fn bit(&self, value: bool) -> Sig<'_> {
        self.node(
            Op::Const(Bits::from_u64(value as u64, 1).unwrap()),
            1,
            false,
        )
    }

    /// Concatenation, most significant part first (as Verilog `{a, b, c}`). Unsigned.
    #[track_caller]
    pub fn cat<'a>(&'a self, parts: &[Sig<'a>]) -> Sig<'a> {
        if parts.is_empty() {
            panic!("module `{}`: cat of no parts", self.name);
        }
        for p in parts {
            self.own(*p, "cat");
        }
        let nodes: Vec<NodeId> = parts.iter().map(|p| p.node).collect();
        self.concat_nodes(nodes)
    }

    /// Packs lanes into one vector, lane 0 in the least significant bits (the usual layout
    /// of vectors of elements). Unsigned.
    #[track_caller]
    pub fn pack<'a>(&'a self, lanes: &[Sig<'a>]) -> Sig<'a> {
        let mut rev = lanes.to_vec();
        rev.reverse();
        self.cat(&rev)
    }

    fn concat_nodes(&self, parts: Vec<NodeId>) -> Sig<'_> {
        // Flatten nested concatenations and merge adjacent pieces of the same signal or
        // adjacent constants, so the printed Verilog stays readable.
        let mut flat: Vec<NodeId> = vec![];
        {
            let d = self.d.borrow();
            let mut stack: Vec<NodeId> = parts.into_iter().rev().collect();
            while let Some(n) = stack.pop() {
                match &d.nodes[n].op {
                    Op::Concat(inner) => stack.extend(inner.iter().rev().copied()),
                    _ => flat.push(n),
                }
            }
        }
        let mut merged: Vec<NodeId> = vec![];
        for n in flat {
            if let Some(&last) = merged.last() {
                if let Some(m) = self.merge_adjacent(last, n) {
                    merged.pop();
                    merged.push(m);
                    continue;
                }
            }
            merged.push(n);
        }
        if merged.len() == 1 {
            let n = merged[0];
            let w = self.d.borrow().nodes[n].width;
            // A concatenation is unsigned.
            return self.reinterpret(self.sig(n), w, false);
        }
        let width = {
            let d = self.d.borrow();
            merged.iter().map(|&n| d.nodes[n].width).sum()
        };
        self.node(Op::Concat(merged), width, false)
    }

    /// `hi` followed by `lo` as one node, if they are adjacent slices of one signal or both
    /// constants.
    fn merge_adjacent(&self, hi: NodeId, lo: NodeId) -> Option<NodeId> {
        let (hop, hw, lop, lw) = {
            let d = self.d.borrow();
            (
                d.nodes[hi].op.clone(),
                d.nodes[hi].width,
                d.nodes[lo].op.clone(),
                d.nodes[lo].width,
            )
        };
        let as_slice = |op: &Op| -> Option<(NodeId, u32)> {
            match op {
                Op::Slice(base, off) => Some((*base, *off)),
                _ => None,
            }
        };
        match (&hop, &lop) {
            (Op::Const(a), Op::Const(b)) => {
                let c = Bits::concat(&[a, b]);
                Some(self.push_node(Op::Const(c), hw + lw, false))
            }
            _ => {
                let (hb, ho) = as_slice(&hop).or_else(|| self.ref_as_slice(hi))?;
                let (lb, lo_off) = as_slice(&lop).or_else(|| self.ref_as_slice(lo))?;
                if hb == lb && lo_off + lw == ho {
                    Some(self.slice_node(hb, lo_off, hw + lw).node)
                } else {
                    None
                }
            }
        }
    }

    fn ref_as_slice(&self, n: NodeId) -> Option<(NodeId, u32)> {
        matches!(self.d.borrow().nodes[n].op, Op::Ref(_)).then_some((n, 0))
    }

    pub(super) fn reinterpret<'a>(&'a self, s: Sig<'a>, width: u32, signed: bool) -> Sig<'a> {
        if s.signed == signed {
            return s;
        }
        // The same node printed identically; only the IR type changes.
        let op = self.d.borrow().nodes[s.node].op.clone();
        match op {
            Op::Ref(_) | Op::Const(_) => {
                // Keep one Ref node per signal: wrap it in a full-width slice marker.
                self.node(Op::Slice(s.node, 0), width, signed)
            }
            other => self.node(other, width, signed),
        }
    }

    /// Two-way multiplexer: `t` when `c` (1 bit) is high, else `f`. `t` and `f` must have the
    /// same type; one of them may be an integer.
    #[track_caller]
    pub fn mux<'a>(
        &'a self,
        c: Sig<'a>,
        t: impl Into<Operand<'a>>,
        f: impl Into<Operand<'a>>,
    ) -> Sig<'a> {
        self.own(c, "mux");
        self.expect_bit(c, "the mux condition");
        let (t, f) = (t.into(), f.into());
        let (t, f) = match (t, f) {
            (Operand::Sig(t), f) => {
                self.own(t, "mux");
                let f = self.resolve(f, t.width, t.signed, "mux");
                (t, f)
            }
            (t, Operand::Sig(f)) => {
                self.own(f, "mux");
                (self.resolve(t, f.width, f.signed, "mux"), f)
            }
            _ => panic!(
                "module `{}`: mux of two integers: cannot infer the width; use m.lit",
                self.name
            ),
        };
        self.check_same("mux", t, f);
        if let Some(b) = self.const_of(c.node) {
            return if b.bit(0) { t } else { f };
        }
        if t.node == f.node {
            return t;
        }
        self.node(
            Op::Mux {
                c: c.node,
                t: t.node,
                f: f.node,
            },
            t.width,
            t.signed,
        )
    }

    /// Selects `options[sel]` (a balanced tree of 2-way muxes on the bits of `sel`). All
    /// options have the same type; indices at or beyond `options.len()` give zero.
    #[track_caller]
    pub fn index<'a>(&'a self, sel: Sig<'a>, options: &[Sig<'a>]) -> Sig<'a> {
        self.own(sel, "index");
        if options.is_empty() {
            panic!("module `{}`: index into no options", self.name);
        }
        let first = options[0];
        for o in options {
            self.own(*o, "index");
            self.check_same("index", first, *o);
        }
        if sel.width < 64 && options.len() as u64 > 1u64 << sel.width {
            panic!(
                "module `{}`: index: {} options but the selector `{}` has only {} bits",
                self.name,
                options.len(),
                self.describe(sel.node),
                sel.width
            );
        }
        let zero = self.reinterpret(self.zero(first.width), first.width, first.signed);
        let mut level: Vec<Sig<'a>> = options.to_vec();
        let mut bit = 0;
        while level.len() > 1 {
            let s = sel.bit(bit);
            level = level
                .chunks(2)
                .map(|pair| {
                    let hi = if pair.len() == 2 { pair[1] } else { zero };
                    self.mux(s, hi, pair[0])
                })
                .collect();
            bit += 1;
        }
        let only = level[0];
        // A selector wider than needed: anything with a higher bit set selects zero.
        if bit < sel.width {
            let high = sel.slice(sel.width - 1, bit).any();
            self.mux(high, zero, only)
        } else {
            only
        }
    }

    /// A `case`: the value of the first arm whose constant equals `sel`, else `default`.
    #[track_caller]
    pub fn case<'a>(
        &'a self,
        sel: Sig<'a>,
        arms: &[(u64, Sig<'a>)],
        default: impl Into<Operand<'a>>,
    ) -> Sig<'a> {
        self.own(sel, "case");
        let default = match (default.into(), arms.first()) {
            (Operand::Sig(s), _) => s,
            (d, Some((_, first))) => self.resolve(d, first.width, first.signed, "case default"),
            (Operand::Int(_), None) => panic!(
                "module `{}`: case with no arms and an integer default: cannot infer the width",
                self.name
            ),
        };
        let mut acc = default;
        for (value, arm) in arms.iter().rev() {
            self.own(*arm, "case");
            self.check_same("case", default, *arm);
            let hit = sel.eq(self.lit_like_sel(*value, sel));
            acc = self.mux(hit, *arm, acc);
        }
        acc
    }

    #[track_caller]
    fn lit_like_sel<'a>(&'a self, v: u64, sel: Sig<'a>) -> Sig<'a> {
        match Bits::from_u64(v, sel.width) {
            Some(b) => self.node(Op::Const(b), sel.width, sel.signed),
            None => panic!(
                "module `{}`: case arm {v} does not fit the {}-bit selector `{}`",
                self.name,
                sel.width,
                self.describe(sel.node)
            ),
        }
    }

    #[track_caller]
    pub(super) fn check_same(&self, op: &str, a: Sig, b: Sig) {
        if a.width != b.width || a.signed != b.signed {
            let which = if a.width != b.width {
                "width"
            } else {
                "signedness"
            };
            panic!(
                "module `{}`: {which} mismatch in `{op}`: `{}` is {} but `{}` is {}{}",
                self.name,
                self.describe(a.node),
                ty(a.width, a.signed),
                self.describe(b.node),
                ty(b.width, b.signed),
                if a.width != b.width {
                    "; use .zext(w) / .sext(w) / .trunc(w) to make them equal"
                } else {
                    "; use .as_signed() / .as_unsigned() to reinterpret one of them"
                }
            );
        }
    }

    pub(super) fn slice_node(&self, base: NodeId, lo: u32, width: u32) -> Sig<'_> {
        let (op, bw) = {
            let d = self.d.borrow();
            (d.nodes[base].op.clone(), d.nodes[base].width)
        };
        if lo == 0 && width == bw {
            return self.sig(base);
        }
        match op {
            Op::Const(b) => self.node(Op::Const(b.slice(lo, width)), width, false),
            Op::Slice(inner, off) => self.slice_node(inner, off + lo, width),
            Op::Concat(parts) => {
                // Keep only the parts that overlap the range.
                let widths: Vec<u32> = {
                    let d = self.d.borrow();
                    parts.iter().map(|&p| d.nodes[p].width).collect()
                };
                let mut pos = bw;
                let mut pieces = vec![];
                for (p, w) in parts.iter().zip(widths) {
                    pos -= w;
                    let (plo, phi) = (pos, pos + w);
                    let (a, b) = (lo.max(plo), (lo + width).min(phi));
                    if a < b {
                        pieces.push(self.slice_node(*p, a - plo, b - a).node);
                    }
                }
                self.concat_nodes(pieces)
            }
            Op::Repeat(inner, _) => {
                let iw = self.d.borrow().nodes[inner].width;
                if iw == 1 && width == 1 {
                    self.reinterpret(self.sig(inner), 1, false)
                } else if iw == 1 {
                    self.node(Op::Repeat(inner, width), width, false)
                } else {
                    self.node(Op::Slice(base, lo), width, false)
                }
            }
            Op::Bin(op @ (BinOp::And | BinOp::Or | BinOp::Xor), a, b)
                if self.is_leafy(a) && self.is_leafy(b) =>
            {
                let sa = self.slice_node(a, lo, width);
                let sb = self.slice_node(b, lo, width);
                self.node(Op::Bin(op, sa.node, sb.node), width, false)
            }
            // The low bits of a sum or difference only depend on the low bits of the
            // operands.
            Op::Bin(op @ (BinOp::Add | BinOp::Sub), a, b)
                if lo == 0 && self.is_leafy(a) && self.is_leafy(b) =>
            {
                let sa = self.slice_node(a, 0, width);
                let sb = self.slice_node(b, 0, width);
                self.node(Op::Bin(op, sa.node, sb.node), width, false)
            }
            Op::Not(a) if self.is_leafy(a) => {
                let sa = self.slice_node(a, lo, width);
                self.node(Op::Not(sa.node), width, false)
            }
            _ => self.node(Op::Slice(base, lo), width, false),
        }
    }
}
