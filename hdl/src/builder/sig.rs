//! [`Sig`]'s methods and operators: widths and slices, extensions, comparisons,
//! reductions, arithmetic and shifts, each checking its operands' types.

use super::*;

impl<'a> Sig<'a> {
    /// Width in bits.
    pub fn width(self) -> u32 {
        self.width
    }

    /// True for signed values (two's complement).
    pub fn is_signed(self) -> bool {
        self.signed
    }

    /// The module builder this signal belongs to.
    pub fn module(self) -> &'a ModuleBuilder {
        self.m
    }

    /// The name of the port, wire or register this handle reads, if it is one.
    pub fn name(self) -> Option<String> {
        let d = self.m.d.borrow();
        match d.nodes[self.node].op {
            Op::Ref(s) => Some(d.signals[s].name.clone()),
            _ => None,
        }
    }

    /// The same bits as a signed value.
    pub fn as_signed(self) -> Sig<'a> {
        self.m.reinterpret(self, self.width, true)
    }

    /// The same bits as an unsigned value.
    pub fn as_unsigned(self) -> Sig<'a> {
        self.m.reinterpret(self, self.width, false)
    }

    /// Bits `hi..=lo` (Verilog `[hi:lo]`), unsigned.
    #[track_caller]
    pub fn slice(self, hi: u32, lo: u32) -> Sig<'a> {
        if hi < lo || hi >= self.width {
            panic!(
                "module `{}`: slice [{hi}:{lo}] of `{}` is out of range: it is {} bits wide \
                 (valid bits {}..=0, hi >= lo)",
                self.m.name,
                self.m.describe(self.node),
                self.width,
                self.width - 1
            );
        }
        let s = self.m.slice_node(self.node, lo, hi - lo + 1);
        if s.signed {
            s.as_unsigned()
        } else {
            s
        }
    }

    /// Bit `i`.
    #[track_caller]
    pub fn bit(self, i: u32) -> Sig<'a> {
        self.slice(i, i)
    }

    /// The most significant bit (the sign bit of a signed value).
    pub fn msb(self) -> Sig<'a> {
        self.slice(self.width - 1, self.width - 1)
    }

    /// Lane `i` of a vector of `lane_width`-bit lanes, lane 0 in the least significant bits.
    #[track_caller]
    pub fn lane(self, i: u32, lane_width: u32) -> Sig<'a> {
        if lane_width == 0 || (i + 1) * lane_width > self.width {
            panic!(
                "module `{}`: lane {i} of width {lane_width} is outside `{}` ({} bits)",
                self.m.name,
                self.m.describe(self.node),
                self.width
            );
        }
        self.slice((i + 1) * lane_width - 1, i * lane_width)
    }

    /// All lanes of `lane_width` bits (the width must be a multiple), lane 0 first.
    #[track_caller]
    pub fn lanes(self, lane_width: u32) -> Vec<Sig<'a>> {
        if lane_width == 0 || !self.width.is_multiple_of(lane_width) {
            panic!(
                "module `{}`: `{}` ({} bits) does not split into {lane_width}-bit lanes",
                self.m.name,
                self.m.describe(self.node),
                self.width
            );
        }
        (0..self.width / lane_width)
            .map(|i| self.lane(i, lane_width))
            .collect()
    }

    /// The low `width` bits (keeps signedness).
    #[track_caller]
    pub fn trunc(self, width: u32) -> Sig<'a> {
        if width == 0 || width > self.width {
            panic!(
                "module `{}`: cannot truncate `{}` ({} bits) to {width} bits",
                self.m.name,
                self.m.describe(self.node),
                self.width
            );
        }
        let s = self.slice(width - 1, 0);
        if self.signed {
            s.as_signed()
        } else {
            s
        }
    }

    /// Zero-extends to `width` bits (result unsigned).
    #[track_caller]
    pub fn zext(self, width: u32) -> Sig<'a> {
        self.check_ext("zext", width);
        if width == self.width {
            return self.as_unsigned();
        }
        let z = self.m.zero(width - self.width);
        self.m.cat(&[z, self])
    }

    /// Sign-extends to `width` bits (result signed).
    #[track_caller]
    pub fn sext(self, width: u32) -> Sig<'a> {
        self.check_ext("sext", width);
        if width == self.width {
            return self.as_signed();
        }
        let fill = self.msb().repeat(width - self.width);
        self.m.cat(&[fill, self]).as_signed()
    }

    /// Extends to `width` bits according to signedness (sign- or zero-extension).
    #[track_caller]
    pub fn ext(self, width: u32) -> Sig<'a> {
        if self.signed {
            self.sext(width)
        } else {
            self.zext(width)
        }
    }

    /// Extends or truncates to `width` bits according to signedness.
    #[track_caller]
    pub fn resize(self, width: u32) -> Sig<'a> {
        if width <= self.width {
            self.trunc(width)
        } else {
            self.ext(width)
        }
    }

    #[track_caller]
    fn check_ext(self, op: &str, width: u32) {
        if width < self.width || width > MAX_WIDTH {
            panic!(
                "module `{}`: {op} of `{}` to {width} bits: it is already {} bits; use .trunc() \
                 to narrow",
                self.m.name,
                self.m.describe(self.node),
                self.width
            );
        }
    }

    /// `self` followed by `lo` (self in the high bits), unsigned.
    #[track_caller]
    pub fn cat(self, lo: Sig<'a>) -> Sig<'a> {
        self.m.cat(&[self, lo])
    }

    /// `n` copies of `self` side by side, unsigned.
    #[track_caller]
    pub fn repeat(self, n: u32) -> Sig<'a> {
        if n == 0 {
            panic!("module `{}`: repeat count must be at least 1", self.m.name);
        }
        if n == 1 {
            return self.as_unsigned();
        }
        let width = self.width * n;
        if let Some(b) = self.m.const_of(self.node) {
            let parts: Vec<&Bits> = std::iter::repeat_n(&b, n as usize).collect();
            let c = Bits::concat(&parts);
            return self.m.node(Op::Const(c), width, false);
        }
        self.m.node(Op::Repeat(self.node, n), width, false)
    }

    fn reduce(self, op: RedOp) -> Sig<'a> {
        if self.width == 1 {
            return self.as_unsigned();
        }
        if let Some(b) = self.m.const_of(self.node) {
            return self.m.bit(match op {
                RedOp::Or => !b.is_zero(),
                RedOp::And => b.is_ones(),
                RedOp::Xor => b.words().iter().map(|w| w.count_ones()).sum::<u32>() % 2 == 1,
            });
        }
        self.m.node(Op::Reduce(op, self.node), 1, false)
    }

    /// 1 if any bit is set (OR-reduction).
    pub fn any(self) -> Sig<'a> {
        self.reduce(RedOp::Or)
    }

    /// 1 if every bit is set (AND-reduction).
    pub fn all(self) -> Sig<'a> {
        self.reduce(RedOp::And)
    }

    /// XOR of all bits.
    pub fn parity(self) -> Sig<'a> {
        self.reduce(RedOp::Xor)
    }

    #[track_caller]
    fn binary(self, op: BinOp, rhs: Operand<'a>) -> Sig<'a> {
        let sym = op.symbol();
        let r = self
            .m
            .resolve(rhs, self.width, self.signed, &format!("`{sym}`"));
        self.m.own(self, &format!("`{sym}`"));
        self.m.check_same(sym, self, r);
        let (ca, cb) = {
            let d = self.m.d.borrow();
            let c = |n: NodeId| match &d.nodes[n].op {
                Op::Const(b) => Some(b.clone()),
                _ => None,
            };
            (c(self.node), c(r.node))
        };
        if let (Some(a), Some(b)) = (ca, cb) {
            if matches!(op, BinOp::And | BinOp::Or | BinOp::Xor) {
                let words: Vec<u64> = a
                    .words()
                    .iter()
                    .zip(b.words())
                    .map(|(x, y)| match op {
                        BinOp::And => x & y,
                        BinOp::Or => x | y,
                        _ => x ^ y,
                    })
                    .collect();
                let c = Bits::from_words(&words, self.width).unwrap();
                return self.m.node(Op::Const(c), self.width, self.signed);
            }
        }
        self.m
            .node(Op::Bin(op, self.node, r.node), self.width, self.signed)
    }

    #[track_caller]
    fn compare(self, op: CmpOp, rhs: Operand<'a>) -> Sig<'a> {
        let sym = op.symbol();
        let r = self
            .m
            .resolve(rhs, self.width, self.signed, &format!("`{sym}`"));
        self.m.own(self, &format!("`{sym}`"));
        self.m.check_same(sym, self, r);
        if let Some(v) = self.m.fold_compare(op, self, r) {
            return self.m.bit(v);
        }
        self.m
            .node(Op::Cmp(op, self.node, r.node, self.signed), 1, false)
    }

    /// `self == rhs` (1 bit).
    #[track_caller]
    pub fn eq(self, rhs: impl Into<Operand<'a>>) -> Sig<'a> {
        self.compare(CmpOp::Eq, rhs.into())
    }
    /// `self != rhs` (1 bit).
    #[track_caller]
    pub fn ne(self, rhs: impl Into<Operand<'a>>) -> Sig<'a> {
        self.compare(CmpOp::Ne, rhs.into())
    }
    /// `self < rhs` (1 bit; signed comparison for signed operands).
    #[track_caller]
    pub fn lt(self, rhs: impl Into<Operand<'a>>) -> Sig<'a> {
        self.compare(CmpOp::Lt, rhs.into())
    }
    /// `self <= rhs` (1 bit).
    #[track_caller]
    pub fn le(self, rhs: impl Into<Operand<'a>>) -> Sig<'a> {
        self.compare(CmpOp::Le, rhs.into())
    }
    /// `self > rhs` (1 bit).
    #[track_caller]
    pub fn gt(self, rhs: impl Into<Operand<'a>>) -> Sig<'a> {
        self.compare(CmpOp::Gt, rhs.into())
    }
    /// `self >= rhs` (1 bit).
    #[track_caller]
    pub fn ge(self, rhs: impl Into<Operand<'a>>) -> Sig<'a> {
        self.compare(CmpOp::Ge, rhs.into())
    }

    /// The larger of `self` and `rhs` (same type).
    #[track_caller]
    pub fn max(self, rhs: impl Into<Operand<'a>>) -> Sig<'a> {
        let r = self.m.resolve(rhs.into(), self.width, self.signed, "max");
        self.m.mux(self.lt(r), r, self)
    }

    /// The smaller of `self` and `rhs` (same type).
    #[track_caller]
    pub fn min(self, rhs: impl Into<Operand<'a>>) -> Sig<'a> {
        let r = self.m.resolve(rhs.into(), self.width, self.signed, "min");
        self.m.mux(self.lt(r), self, r)
    }

    /// Shift left by a variable amount (unsigned `amount`); keeps the width.
    #[track_caller]
    pub fn shl_by(self, amount: Sig<'a>) -> Sig<'a> {
        self.shift(ShiftOp::Shl, Amount::Dyn(amount.node), Some(amount))
    }

    /// Shift right by a variable amount: arithmetic for signed values, logical otherwise.
    #[track_caller]
    pub fn shr_by(self, amount: Sig<'a>) -> Sig<'a> {
        let op = if self.signed {
            ShiftOp::Sra
        } else {
            ShiftOp::Shr
        };
        self.shift(op, Amount::Dyn(amount.node), Some(amount))
    }

    #[track_caller]
    fn shift(self, op: ShiftOp, amt: Amount, amount: Option<Sig<'a>>) -> Sig<'a> {
        self.m.own(self, "shift");
        if let Some(a) = amount {
            self.m.own(a, "shift amount");
            if a.signed {
                panic!(
                    "module `{}`: shift amount `{}` must be unsigned",
                    self.m.name,
                    self.m.describe(a.node)
                );
            }
        }
        // A variable shift by a constant amount is a constant shift.
        let amt = match amt {
            Amount::Dyn(n) => match self.m.const_of(n) {
                Some(b) => Amount::Const(b.to_amount().min(u32::MAX as u64) as u32),
                None => amt,
            },
            c => c,
        };
        if let Amount::Const(k) = amt {
            if k == 0 {
                return self;
            }
            if k >= self.width {
                return match op {
                    ShiftOp::Sra => self.msb().repeat(self.width).as_signed(),
                    _ => self
                        .m
                        .reinterpret(self.m.zero(self.width), self.width, self.signed),
                };
            }
            // Constant shifts are wiring: print them as slices and concatenations.
            let w = self.width;
            let r = match op {
                ShiftOp::Shl => self.slice(w - 1 - k, 0).cat(self.m.zero(k)),
                ShiftOp::Shr => self.m.zero(k).cat(self.slice(w - 1, k)),
                ShiftOp::Sra => self.msb().repeat(k).cat(self.slice(w - 1, k)),
            };
            return self.m.reinterpret(r, w, self.signed);
        }
        self.m
            .node(Op::Shift(op, self.node, amt), self.width, self.signed)
    }
}

impl<'a, T: Into<Operand<'a>>> ops::Add<T> for Sig<'a> {
    type Output = Sig<'a>;
    /// Wrapping addition of equal-width operands.
    #[track_caller]
    fn add(self, rhs: T) -> Sig<'a> {
        self.binary(BinOp::Add, rhs.into())
    }
}

impl<'a, T: Into<Operand<'a>>> ops::Sub<T> for Sig<'a> {
    type Output = Sig<'a>;
    /// Wrapping subtraction of equal-width operands.
    #[track_caller]
    fn sub(self, rhs: T) -> Sig<'a> {
        self.binary(BinOp::Sub, rhs.into())
    }
}

impl<'a, T: Into<Operand<'a>>> ops::BitAnd<T> for Sig<'a> {
    type Output = Sig<'a>;
    #[track_caller]
    fn bitand(self, rhs: T) -> Sig<'a> {
        self.binary(BinOp::And, rhs.into())
    }
}

impl<'a, T: Into<Operand<'a>>> ops::BitOr<T> for Sig<'a> {
    type Output = Sig<'a>;
    #[track_caller]
    fn bitor(self, rhs: T) -> Sig<'a> {
        self.binary(BinOp::Or, rhs.into())
    }
}

impl<'a, T: Into<Operand<'a>>> ops::BitXor<T> for Sig<'a> {
    type Output = Sig<'a>;
    #[track_caller]
    fn bitxor(self, rhs: T) -> Sig<'a> {
        self.binary(BinOp::Xor, rhs.into())
    }
}

impl<'a, T: Into<Operand<'a>>> ops::Mul<T> for Sig<'a> {
    type Output = Sig<'a>;
    /// The full product: `a.width() + b.width()` bits, signed if both operands are signed
    /// (mixing signedness panics). Truncate explicitly if fewer bits are wanted.
    #[track_caller]
    fn mul(self, rhs: T) -> Sig<'a> {
        let r = self.m.resolve_sig(rhs.into(), "`*`");
        self.m.own(self, "`*`");
        if self.signed != r.signed {
            panic!(
                "module `{}`: signedness mismatch in `*`: `{}` is {} but `{}` is {}; use \
                 .as_signed() / .as_unsigned()",
                self.m.name,
                self.m.describe(self.node),
                ty(self.width, self.signed),
                self.m.describe(r.node),
                ty(r.width, r.signed)
            );
        }
        let width = self.width + r.width;
        if width > MAX_WIDTH {
            panic!("module `{}`: product too wide ({width} bits)", self.m.name);
        }
        self.m.node(
            Op::Mul {
                a: self.node,
                b: r.node,
                signed: self.signed,
            },
            width,
            self.signed,
        )
    }
}

impl<'a> ops::Not for Sig<'a> {
    type Output = Sig<'a>;
    /// Bitwise complement.
    fn not(self) -> Sig<'a> {
        if let Some(b) = self.m.const_of(self.node) {
            let words: Vec<u64> = b.words().iter().map(|w| !w).collect();
            let mut full = Bits::ones(self.width).words().to_vec();
            for (f, w) in full.iter_mut().zip(words) {
                *f &= w;
            }
            let c = Bits::from_words(&full, self.width).unwrap();
            return self.m.node(Op::Const(c), self.width, self.signed);
        }
        self.m.node(Op::Not(self.node), self.width, self.signed)
    }
}

impl<'a> ops::Neg for Sig<'a> {
    type Output = Sig<'a>;
    /// Two's complement negation (wrapping), same width.
    fn neg(self) -> Sig<'a> {
        self.m.node(Op::Neg(self.node), self.width, self.signed)
    }
}

impl<'a> ops::Shl<u32> for Sig<'a> {
    type Output = Sig<'a>;
    /// Shift left by a constant; keeps the width.
    #[track_caller]
    fn shl(self, k: u32) -> Sig<'a> {
        self.shift(ShiftOp::Shl, Amount::Const(k), None)
    }
}

impl<'a> ops::Shr<u32> for Sig<'a> {
    type Output = Sig<'a>;
    /// Shift right by a constant: arithmetic for signed values, logical otherwise.
    #[track_caller]
    fn shr(self, k: u32) -> Sig<'a> {
        let op = if self.signed {
            ShiftOp::Sra
        } else {
            ShiftOp::Shr
        };
        self.shift(op, Amount::Const(k), None)
    }
}

impl<'a> ops::Shl<Sig<'a>> for Sig<'a> {
    type Output = Sig<'a>;
    #[track_caller]
    fn shl(self, k: Sig<'a>) -> Sig<'a> {
        self.shl_by(k)
    }
}

impl<'a> ops::Shr<Sig<'a>> for Sig<'a> {
    type Output = Sig<'a>;
    #[track_caller]
    fn shr(self, k: Sig<'a>) -> Sig<'a> {
        self.shr_by(k)
    }
}
