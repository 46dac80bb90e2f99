//! Constant folding and simplification while building: identities that reuse an existing
//! value, constant operations, and comparisons whose result cannot change (from the
//! operands' ranges and known leading zero bits), so the printed Verilog stays small and
//! Verilator's range analysis has nothing to warn about.

use super::*;

impl ModuleBuilder {
    /// `op` replaced by an equivalent existing value, if an identity applies.
    pub(super) fn simplify(&self, op: &Op, width: u32, signed: bool) -> Option<Sig<'_>> {
        let ty = |n: NodeId| self.reinterpret(self.sig(n), width, signed);
        let konst = |n: NodeId| self.const_of(n);
        let zero = |n: NodeId| konst(n).is_some_and(|b| b.is_zero());
        let ones = |n: NodeId| konst(n).is_some_and(|b| b.is_ones());
        let same = |a: NodeId, b: NodeId| {
            self.base(a) == self.base(b) || konst(a).is_some_and(|x| konst(b) == Some(x))
        };
        let cnst = |b: Bits| self.reinterpret(self.constant(b), width, signed);
        // A concatenation's constant parts, which may decide a reduction over it alone.
        let const_parts = |n: NodeId| match &self.d.borrow().nodes[n].op {
            Op::Concat(parts) => parts.iter().filter_map(|&p| konst(p)).collect(),
            _ => vec![],
        };
        Some(match *op {
            Op::Reduce(RedOp::Or, a) if const_parts(a).iter().any(|b| !b.is_zero()) => {
                cnst(Bits::ones(width))
            }
            Op::Reduce(RedOp::And, a) if const_parts(a).iter().any(|b| !b.is_ones()) => {
                cnst(Bits::zero(width))
            }
            Op::Bin(BinOp::Or, a, b) if ones(a) || ones(b) => cnst(Bits::ones(width)),
            Op::Bin(BinOp::And, a, b) if zero(a) || zero(b) => cnst(Bits::zero(width)),
            Op::Bin(BinOp::Or | BinOp::Xor | BinOp::Add, a, b) if zero(a) => ty(b),
            Op::Bin(BinOp::Or | BinOp::Xor | BinOp::Add | BinOp::Sub, a, b) if zero(b) => ty(a),
            Op::Bin(BinOp::And, a, b) if ones(a) => ty(b),
            Op::Bin(BinOp::And, a, b) if ones(b) => ty(a),
            Op::Bin(BinOp::And | BinOp::Or, a, b) if same(a, b) => ty(a),
            Op::Bin(BinOp::Xor | BinOp::Sub, a, b) if same(a, b) => cnst(Bits::zero(width)),
            Op::Mul { a, b, .. } if zero(a) || zero(b) => cnst(Bits::zero(width)),
            Op::Shift(_, a, _) if zero(a) => cnst(Bits::zero(width)),
            Op::Shift(ShiftOp::Sra, a, _) if ones(a) => cnst(Bits::ones(width)),
            Op::Mux { c, t, f } => match konst(c) {
                Some(k) => ty(if k.bit(0) { t } else { f }),
                None if same(t, f) => ty(t),
                None => return None,
            },
            _ => return None,
        })
    }

    /// The value of `op` if all its operands are constants.
    pub(super) fn fold(&self, op: &Op, width: u32) -> Option<Bits> {
        let operands = op.operands();
        if operands.is_empty() {
            return None;
        }
        let c: Vec<Bits> = operands
            .iter()
            .map(|&n| self.const_of(n))
            .collect::<Option<_>>()?;
        Some(match op {
            Op::Ref(_) | Op::Const(_) => return None,
            Op::Not(_) => c[0].not(),
            Op::Neg(_) => c[0].neg(),
            Op::Bin(BinOp::And, ..) => c[0].bitwise(&c[1], '&'),
            Op::Bin(BinOp::Or, ..) => c[0].bitwise(&c[1], '|'),
            Op::Bin(BinOp::Xor, ..) => c[0].bitwise(&c[1], '^'),
            Op::Bin(BinOp::Add, ..) => c[0].add(&c[1]),
            Op::Bin(BinOp::Sub, ..) => c[0].sub(&c[1]),
            Op::Mul { signed, .. } => c[0].mul(&c[1], *signed),
            Op::Cmp(cmp, _, _, signed) => {
                use std::cmp::Ordering::*;
                let o = c[0].cmp_to(&c[1], *signed);
                let v = match cmp {
                    CmpOp::Eq => o == Equal,
                    CmpOp::Ne => o != Equal,
                    CmpOp::Lt => o == Less,
                    CmpOp::Le => o != Greater,
                    CmpOp::Gt => o == Greater,
                    CmpOp::Ge => o != Less,
                };
                Bits::from_u64(v as u64, 1).unwrap()
            }
            Op::Shift(sh, _, amt) => {
                let k = match amt {
                    Amount::Const(k) => *k as u64,
                    Amount::Dyn(_) => c[1].to_amount(),
                };
                match sh {
                    ShiftOp::Shl => c[0].shl(k),
                    ShiftOp::Shr => c[0].shr(k, false),
                    ShiftOp::Sra => c[0].shr(k, true),
                }
            }
            Op::Slice(_, lo) => c[0].slice(*lo, width),
            Op::Concat(_) => Bits::concat(&c.iter().collect::<Vec<_>>()),
            Op::Repeat(_, n) => {
                Bits::concat(&std::iter::repeat_n(&c[0], *n as usize).collect::<Vec<_>>())
            }
            Op::Mux { .. } => {
                if c[0].bit(0) {
                    c[1].clone()
                } else {
                    c[2].clone()
                }
            }
            Op::Reduce(r, _) => {
                let v = match r {
                    RedOp::Or => !c[0].is_zero(),
                    RedOp::And => c[0].is_ones(),
                    RedOp::Xor => c[0].count_ones() % 2 == 1,
                };
                Bits::from_u64(v as u64, 1).unwrap()
            }
        })
    }

    /// The value of node `n` if it is a constant.
    pub(super) fn const_of(&self, n: NodeId) -> Option<Bits> {
        match &self.d.borrow().nodes[n].op {
            Op::Const(b) => Some(b.clone()),
            _ => None,
        }
    }

    /// The value of a comparison that cannot change: both operands constant, or their
    /// possible ranges (type bounds, narrowed by known leading zero bits, as after a zero
    /// extension) do not overlap in the way the comparison asks. Verilator's range analysis
    /// warns about such comparisons, so they are folded away.
    pub(super) fn fold_compare(&self, op: CmpOp, a: Sig, b: Sig) -> Option<bool> {
        if self.base(a.node) == self.base(b.node) {
            return Some(matches!(op, CmpOp::Eq | CmpOp::Le | CmpOp::Ge));
        }
        let (x, y) = (self.interval(a)?, self.interval(b)?);
        let (always, never) = match op {
            CmpOp::Lt => (x.1 < y.0, x.0 >= y.1),
            CmpOp::Le => (x.1 <= y.0, x.0 > y.1),
            CmpOp::Gt => (x.0 > y.1, x.1 <= y.0),
            CmpOp::Ge => (x.0 >= y.1, x.1 < y.0),
            CmpOp::Eq => (
                x.0 == x.1 && y.0 == y.1 && x.0 == y.0,
                x.1 < y.0 || y.1 < x.0,
            ),
            CmpOp::Ne => (
                x.1 < y.0 || y.1 < x.0,
                x.0 == x.1 && y.0 == y.1 && x.0 == y.0,
            ),
        };
        if always {
            Some(true)
        } else if never {
            Some(false)
        } else {
            None
        }
    }

    /// The range of values `s` can take, as signed or unsigned numbers according to its type
    /// (`None` for values wider than 100 bits).
    fn interval(&self, s: Sig) -> Option<(i128, i128)> {
        let w = s.width;
        if w > 100 {
            return None;
        }
        if let Some(b) = self.const_of(s.node) {
            let mut v: i128 = 0;
            for i in (0..w).rev() {
                v = (v << 1) | b.bit(i) as i128;
            }
            if s.signed && b.bit(w - 1) {
                v -= 1i128 << w;
            }
            return Some((v, v));
        }
        let lz = self.known_leading_zeros(s.node);
        Some(if lz > 0 {
            (0, (1i128 << (w - lz)) - 1)
        } else if s.signed {
            (-(1i128 << (w - 1)), (1i128 << (w - 1)) - 1)
        } else {
            (0, (1i128 << w) - 1)
        })
    }

    /// How many of the most significant bits of node `n` are known to be zero.
    fn known_leading_zeros(&self, n: NodeId) -> u32 {
        let (op, w) = {
            let d = self.d.borrow();
            (d.nodes[n].op.clone(), d.nodes[n].width)
        };
        match op {
            Op::Const(b) => (0..w).rev().take_while(|&i| !b.bit(i)).count() as u32,
            Op::Concat(parts) => {
                let mut lz = 0;
                for p in parts {
                    let pw = self.d.borrow().nodes[p].width;
                    let z = self.known_leading_zeros(p);
                    lz += z;
                    if z < pw {
                        break;
                    }
                }
                lz
            }
            Op::Bin(BinOp::And, a, b) => {
                self.known_leading_zeros(a).max(self.known_leading_zeros(b))
            }
            Op::Bin(BinOp::Or | BinOp::Xor, a, b) | Op::Mux { t: a, f: b, .. } => {
                self.known_leading_zeros(a).min(self.known_leading_zeros(b))
            }
            Op::Shift(ShiftOp::Shr, a, _) => self.known_leading_zeros(a),
            Op::Slice(a, lo) => {
                let aw = self.d.borrow().nodes[a].width;
                let above = aw - (lo + w); // bits of `a` above the slice
                self.known_leading_zeros(a).saturating_sub(above).min(w)
            }
            _ => 0,
        }
    }

    pub(super) fn is_leafy(&self, n: NodeId) -> bool {
        matches!(
            self.d.borrow().nodes[n].op,
            Op::Ref(_) | Op::Const(_) | Op::Slice(..)
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::ModuleBuilder;

    /// A constant part of a concatenation that decides a reduction over it makes the
    /// reduction a constant (`|{6'd14, x}` compared with anything made Verilator's lint warn
    /// that the comparison is constant).
    #[test]
    fn reductions_decided_by_a_constant_part_fold() {
        let m = ModuleBuilder::new("t");
        let x = m.input("x", 11);
        let value = |s: crate::Sig| m.const_of(s.node).map(|b| b.is_ones());
        assert_eq!(value(m.cat(&[m.lit(14, 6), x]).any()), Some(true));
        assert_eq!(value(m.cat(&[x, m.lit(2, 2)]).all()), Some(false));
        // Constant parts that do not decide it leave the reduction.
        assert_eq!(value(m.cat(&[m.lit(0, 6), x]).any()), None);
        assert_eq!(value(m.cat(&[m.lit(3, 2), x]).all()), None);
        m.allow_unused(x, "only its reductions are looked at");
    }
}
