//! The builder API: [`ModuleBuilder`] declares ports, wires, registers, memories and
//! instances; [`Sig`] is a typed expression handle with operator overloading; [`Mem`] and
//! [`Inst`] are handles for memories and child instances.
//!
//! Every call checks widths and signedness immediately and panics at the caller's line
//! (`#[track_caller]`) with a message naming the module, the operation, the operands and
//! their widths: a width mismatch is a bug in the design code, not an input error (configs
//! are validated before any hardware is built). Connectivity problems that can only be seen
//! once the module is complete (multiple or missing drivers, combinational loops, unused
//! inputs) are reported by [`ModuleBuilder::finish`] as a [`crate::DesignError`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::ops;
use std::panic::Location;

use crate::bits::Bits;
use crate::error::DesignError;
use crate::ir::*;
use crate::names;

/// Widest signal the builder accepts (a sanity bound, far above any real bus).
pub const MAX_WIDTH: u32 = 1 << 20;

pub(crate) struct Data {
    pub cr: ClockReset,
    pub signals: Vec<Signal>,
    pub nodes: Vec<Node>,
    pub assigns: Vec<Assign>,
    pub nexts: Vec<Next>,
    pub mems: Vec<Memory>,
    pub insts: Vec<Instance>,
    /// Declared ports (signal ids) in order.
    pub ports: Vec<SigId>,
    /// Every name used in the module: signals, memories, instances.
    pub names: HashMap<String, &'static str>,
}

/// Builds one module. Create it with [`ModuleBuilder::new`], declare ports and logic, then
/// call [`finish`](ModuleBuilder::finish).
///
/// Registers and memories use an implicit clock (`clk`) and synchronous, active-high reset
/// (`rst`); they appear as ports only when something in the module (or in a child instance)
/// uses them. [`set_clock`](ModuleBuilder::set_clock) and
/// [`set_reset`](ModuleBuilder::set_reset) rename them (and make the reset active-low).
pub struct ModuleBuilder {
    name: String,
    pub(crate) d: RefCell<Data>,
}

impl fmt::Debug for ModuleBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModuleBuilder({})", self.name)
    }
}

/// A typed expression in one module: a port, wire, register, memory output, instance output,
/// constant, or an operation on those. It is `Copy`; operators build new expressions.
///
/// Width rules (checked at once, see the crate docs): `+ - & | ^` and comparisons need equal
/// widths and equal signedness; `*` gives the full product (width `a + b`); shifts keep the
/// left operand's width; `>>` is arithmetic on signed values. Integers mix with signals and
/// take the signal's width (they must fit).
#[derive(Clone, Copy)]
pub struct Sig<'a> {
    m: &'a ModuleBuilder,
    node: NodeId,
    width: u32,
    signed: bool,
}

impl fmt::Debug for Sig<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Sig({}, {}-bit {})",
            self.m.describe(self.node),
            self.width,
            if self.signed { "signed" } else { "unsigned" }
        )
    }
}

/// Something usable where a signal is expected: a [`Sig`], or an integer that takes the
/// width and signedness of the other operand.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A signal or expression.
    Sig(Sig<'a>),
    /// An integer constant, typed like the other operand.
    Int(i128),
}

impl<'a> From<Sig<'a>> for Operand<'a> {
    fn from(s: Sig<'a>) -> Self {
        Operand::Sig(s)
    }
}
impl<'a> From<&Sig<'a>> for Operand<'a> {
    fn from(s: &Sig<'a>) -> Self {
        Operand::Sig(*s)
    }
}
macro_rules! int_operand {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(v: $t) -> Self {
                Operand::Int(v as i128)
            }
        }
    )*};
}
int_operand!(u8, u16, u32, u64, usize, i8, i16, i32, i64);
impl From<bool> for Operand<'_> {
    fn from(v: bool) -> Self {
        Operand::Int(v as i128)
    }
}

/// A memory: `depth` words of `width` bits with one synchronous write port (optionally with
/// per-lane write enables) and one or more read ports with a registered output.
#[derive(Clone, Copy)]
pub struct Mem<'a> {
    m: &'a ModuleBuilder,
    idx: usize,
}

/// An instance of a finished [`Module`] inside the module being built.
#[derive(Clone, Copy)]
pub struct Inst<'a> {
    m: &'a ModuleBuilder,
    idx: usize,
}

fn clog2(n: u64) -> u32 {
    if n <= 1 {
        0
    } else {
        64 - (n - 1).leading_zeros()
    }
}

/// Bits needed to hold the values `0..n` (at least 1).
pub fn addr_bits(n: u64) -> u32 {
    clog2(n).max(1)
}

/// Bits needed to hold the value `n` itself (at least 1).
pub fn count_bits(n: u64) -> u32 {
    (64 - n.leading_zeros()).max(1)
}

fn ty(width: u32, signed: bool) -> String {
    format!(
        "{}-bit {}",
        width,
        if signed { "signed" } else { "unsigned" }
    )
}

impl ModuleBuilder {
    /// Starts a module called `name` (a plain identifier).
    #[track_caller]
    pub fn new(name: &str) -> ModuleBuilder {
        names::check("module", name);
        let mut names = HashMap::new();
        names.insert("clk".to_string(), "clock");
        names.insert("rst".to_string(), "reset");
        // Verilator rejects a signal named like its own module.
        names.insert(name.to_string(), "module name");
        ModuleBuilder {
            name: name.to_string(),
            d: RefCell::new(Data {
                cr: ClockReset {
                    clock: "clk".into(),
                    reset: "rst".into(),
                    reset_active_low: false,
                },
                signals: vec![],
                nodes: vec![],
                assigns: vec![],
                nexts: vec![],
                mems: vec![],
                insts: vec![],
                ports: vec![],
                names,
            }),
        }
    }

    /// The module's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renames the implicit clock input (default `clk`).
    #[track_caller]
    pub fn set_clock(&self, name: &str) {
        names::check("clock", name);
        let mut d = self.d.borrow_mut();
        let old = d.cr.clock.clone();
        d.names.remove(&old);
        if let Some(kind) = d.names.get(name) {
            panic!(
                "module `{}`: cannot name the clock `{name}`: that name is already a {kind}",
                self.name
            );
        }
        d.names.insert(name.to_string(), "clock");
        d.cr.clock = name.to_string();
    }

    /// Renames the implicit synchronous reset input (default `rst`, active high) and sets its
    /// polarity. Registers always see an active-high reset; an active-low reset is inverted
    /// where it is used.
    #[track_caller]
    pub fn set_reset(&self, name: &str, active_low: bool) {
        names::check("reset", name);
        let mut d = self.d.borrow_mut();
        let old = d.cr.reset.clone();
        d.names.remove(&old);
        if let Some(kind) = d.names.get(name) {
            panic!(
                "module `{}`: cannot name the reset `{name}`: that name is already a {kind}",
                self.name
            );
        }
        d.names.insert(name.to_string(), "reset");
        d.cr.reset = name.to_string();
        d.cr.reset_active_low = active_low;
    }

    // ----- internal helpers -------------------------------------------------------------

    /// The node a reinterpretation (full-width slice) wraps, recursively: two nodes with the
    /// same base hold the same bits.
    fn base(&self, mut n: NodeId) -> NodeId {
        loop {
            let d = self.d.borrow();
            match d.nodes[n].op {
                Op::Slice(b, 0) if d.nodes[b].width == d.nodes[n].width => n = b,
                _ => return n,
            }
        }
    }

    /// `op` replaced by an equivalent existing value, if an identity applies.
    fn simplify(&self, op: &Op, width: u32, signed: bool) -> Option<Sig<'_>> {
        let ty = |n: NodeId| self.reinterpret(self.sig(n), width, signed);
        let konst = |n: NodeId| self.const_of(n);
        let zero = |n: NodeId| konst(n).is_some_and(|b| b.is_zero());
        let ones = |n: NodeId| konst(n).is_some_and(|b| b.is_ones());
        let same = |a: NodeId, b: NodeId| {
            self.base(a) == self.base(b) || konst(a).is_some_and(|x| konst(b) == Some(x))
        };
        let cnst = |b: Bits| self.reinterpret(self.constant(b), width, signed);
        Some(match *op {
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
    fn fold(&self, op: &Op, width: u32) -> Option<Bits> {
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
    fn const_of(&self, n: NodeId) -> Option<Bits> {
        match &self.d.borrow().nodes[n].op {
            Op::Const(b) => Some(b.clone()),
            _ => None,
        }
    }

    pub(crate) fn push_node(&self, op: Op, width: u32, signed: bool) -> NodeId {
        let mut d = self.d.borrow_mut();
        d.nodes.push(Node { op, width, signed });
        d.nodes.len() - 1
    }

    fn sig(&self, node: NodeId) -> Sig<'_> {
        let d = self.d.borrow();
        let n = &d.nodes[node];
        Sig {
            m: self,
            node,
            width: n.width,
            signed: n.signed,
        }
    }

    fn node(&self, op: Op, width: u32, signed: bool) -> Sig<'_> {
        // Operations on constants become constants, and identities (`x | 0`, `x & x`, ...)
        // their result: cleaner Verilog, and no lint warnings from Verilator's own constant
        // propagation (e.g. about a comparison that is always true).
        if let Some(s) = self.simplify(&op, width, signed) {
            return s;
        }
        let op = match self.fold(&op, width) {
            Some(b) => Op::Const(b),
            None => op,
        };
        let id = self.push_node(op, width, signed);
        Sig {
            m: self,
            node: id,
            width,
            signed,
        }
    }

    #[track_caller]
    fn claim_name(&self, name: &str, kind: &'static str) {
        names::check(kind, name);
        let mut d = self.d.borrow_mut();
        if let Some(prev) = d.names.get(name) {
            let article = if prev.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            panic!(
                "module `{}`: cannot declare {kind} `{name}`: the name is already used by \
                 {article} {prev}",
                self.name
            );
        }
        d.names.insert(name.to_string(), kind);
    }

    #[track_caller]
    fn check_width(&self, what: &str, name: &str, width: u32) {
        if width == 0 || width > MAX_WIDTH {
            panic!(
                "module `{}`: {what} `{name}` has width {width}; widths must be 1..={MAX_WIDTH}",
                self.name
            );
        }
    }

    #[track_caller]
    fn declare(
        &self,
        name: &str,
        width: u32,
        signed: bool,
        kind: SigKind,
        what: &'static str,
    ) -> Sig<'_> {
        self.check_width(what, name, width);
        self.claim_name(name, what);
        let mut d = self.d.borrow_mut();
        let sid = d.signals.len();
        d.nodes.push(Node {
            op: Op::Ref(sid),
            width,
            signed,
        });
        let node = d.nodes.len() - 1;
        d.signals.push(Signal {
            name: name.to_string(),
            width,
            signed,
            kind: kind.clone(),
            node,
            unused_reason: None,
        });
        if matches!(kind, SigKind::Input | SigKind::Output) {
            d.ports.push(sid);
        }
        drop(d);
        Sig {
            m: self,
            node,
            width,
            signed,
        }
    }

    /// The signal a `Ref` node reads, if `s` is one.
    fn signal_of(&self, s: Sig) -> Option<SigId> {
        match self.d.borrow().nodes[s.node].op {
            Op::Ref(id) => Some(id),
            _ => None,
        }
    }

    #[track_caller]
    fn own(&self, s: Sig, what: &str) {
        if !std::ptr::eq(s.m, self) {
            panic!(
                "module `{}`: {what}: `{}` belongs to module `{}`; signals cannot cross module \
                 boundaries (connect them through an instance port)",
                self.name,
                s.m.describe(s.node),
                s.m.name
            );
        }
    }

    /// Turns an operand into a signal of the same type as `like`.
    #[track_caller]
    fn resolve<'a>(&'a self, op: Operand<'a>, width: u32, signed: bool, what: &str) -> Sig<'a> {
        match op {
            Operand::Sig(s) => {
                self.own(s, what);
                s
            }
            Operand::Int(v) => match Bits::from_i128(v, width, signed) {
                Some(b) => self.node(Op::Const(b), width, signed),
                None => panic!(
                    "module `{}`: {what}: the constant {v} does not fit the other operand's type \
                     ({})",
                    self.name,
                    ty(width, signed)
                ),
            },
        }
    }

    #[track_caller]
    fn resolve_sig<'a>(&'a self, op: Operand<'a>, what: &str) -> Sig<'a> {
        match op {
            Operand::Sig(s) => {
                self.own(s, what);
                s
            }
            Operand::Int(v) => panic!(
                "module `{}`: {what}: cannot infer the width of the constant {v}; use \
                 m.lit(value, width)",
                self.name
            ),
        }
    }

    /// A short, Verilog-like rendering of an expression for error messages.
    pub(crate) fn describe(&self, node: NodeId) -> String {
        let d = self.d.borrow();
        let mut s = String::new();
        describe_into(&d, node, 3, &mut s);
        if s.len() > 60 {
            let mut cut = 57;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
            s.push_str("...");
        }
        s
    }

    // ----- declarations -----------------------------------------------------------------

    /// Declares an unsigned input port.
    #[track_caller]
    pub fn input(&self, name: &str, width: u32) -> Sig<'_> {
        self.declare(name, width, false, SigKind::Input, "input")
    }

    /// Declares a signed input port.
    #[track_caller]
    pub fn input_signed(&self, name: &str, width: u32) -> Sig<'_> {
        self.declare(name, width, true, SigKind::Input, "input")
    }

    /// Declares an unsigned output port; drive it with [`assign`](Self::assign). Outputs can
    /// be read inside the module.
    #[track_caller]
    pub fn output(&self, name: &str, width: u32) -> Sig<'_> {
        self.declare(name, width, false, SigKind::Output, "output")
    }

    /// Declares a signed output port.
    #[track_caller]
    pub fn output_signed(&self, name: &str, width: u32) -> Sig<'_> {
        self.declare(name, width, true, SigKind::Output, "output")
    }

    /// Declares an output port with the type of `value` and drives it with `value`.
    #[track_caller]
    pub fn output_from<'a>(&'a self, name: &str, value: Sig<'a>) -> Sig<'a> {
        self.own(value, &format!("output `{name}`"));
        let o = self.declare(name, value.width, value.signed, SigKind::Output, "output");
        self.assign(o, value);
        o
    }

    /// Declares an unsigned wire; drive it once with [`assign`](Self::assign) (possibly
    /// after using it, for logic that refers forward).
    #[track_caller]
    pub fn wire(&self, name: &str, width: u32) -> Sig<'_> {
        self.declare(name, width, false, SigKind::Wire, "wire")
    }

    /// Declares a signed wire.
    #[track_caller]
    pub fn wire_signed(&self, name: &str, width: u32) -> Sig<'_> {
        self.declare(name, width, true, SigKind::Wire, "wire")
    }

    /// Gives `value` a name: a wire of the same type driven by it. Use it for readable
    /// Verilog and waveforms, and to share a subexpression explicitly.
    #[track_caller]
    pub fn named<'a>(&'a self, name: &str, value: Sig<'a>) -> Sig<'a> {
        self.own(value, &format!("wire `{name}`"));
        let w = self.declare(name, value.width, value.signed, SigKind::Wire, "wire");
        self.assign(w, value);
        w
    }

    /// Declares an unsigned register with synchronous reset value `reset`. Give it a next
    /// value with [`next`](Self::next) or [`next_when`](Self::next_when).
    #[track_caller]
    pub fn reg(&self, name: &str, width: u32, reset: u64) -> Sig<'_> {
        self.check_width("register", name, width);
        let Some(b) = Bits::from_u64(reset, width) else {
            panic!(
                "module `{}`: reset value {reset} of register `{name}` does not fit in {width} bits",
                self.name
            );
        };
        self.declare(
            name,
            width,
            false,
            SigKind::Reg { reset: Some(b) },
            "register",
        )
    }

    /// Declares a signed register with a (possibly negative) reset value.
    #[track_caller]
    pub fn reg_signed(&self, name: &str, width: u32, reset: i64) -> Sig<'_> {
        self.check_width("register", name, width);
        let Some(b) = Bits::from_i128(reset as i128, width, true) else {
            panic!(
                "module `{}`: reset value {reset} of register `{name}` does not fit in a {}",
                self.name,
                ty(width, true)
            );
        };
        self.declare(
            name,
            width,
            true,
            SigKind::Reg { reset: Some(b) },
            "register",
        )
    }

    /// Declares an unsigned register whose reset value is `reset` (any width).
    #[track_caller]
    pub fn reg_bits(&self, name: &str, reset: Bits) -> Sig<'_> {
        let width = reset.width();
        self.declare(
            name,
            width,
            false,
            SigKind::Reg { reset: Some(reset) },
            "register",
        )
    }

    /// Declares an unsigned register without reset (datapath pipelines: cheaper and lets
    /// synthesis pack it into DSPs and SRLs). Its value is undefined until first written.
    #[track_caller]
    pub fn reg_noreset(&self, name: &str, width: u32) -> Sig<'_> {
        self.declare(name, width, false, SigKind::Reg { reset: None }, "register")
    }

    /// Declares a signed register without reset.
    #[track_caller]
    pub fn reg_noreset_signed(&self, name: &str, width: u32) -> Sig<'_> {
        self.declare(name, width, true, SigKind::Reg { reset: None }, "register")
    }

    /// Marks bits of `sig` that are never read as intentional; `reason` becomes the comment
    /// next to the Verilator `lint_off`. Needed for inputs with unread bits, which
    /// [`finish`](Self::finish) otherwise reports.
    #[track_caller]
    pub fn allow_unused(&self, sig: Sig, reason: &str) {
        self.own(sig, "allow_unused");
        let Some(id) = self.signal_of(sig) else {
            panic!(
                "module `{}`: allow_unused needs a named signal, not the expression `{}`",
                self.name,
                self.describe(sig.node)
            );
        };
        self.d.borrow_mut().signals[id].unused_reason = Some(reason.to_string());
    }

    // ----- drivers ----------------------------------------------------------------------

    /// Drives the wire or output `target` with `value` (same width). Each wire and output
    /// must be driven exactly once; [`finish`](Self::finish) reports violations.
    #[track_caller]
    pub fn assign<'a>(&'a self, target: Sig<'a>, value: impl Into<Operand<'a>>) {
        self.own(target, "assign");
        let Some(id) = self.signal_of(target) else {
            panic!(
                "module `{}`: cannot assign to the expression `{}`: only wires and outputs can be \
                 assigned",
                self.name,
                self.describe(target.node)
            );
        };
        let (tname, kind) = {
            let d = self.d.borrow();
            (d.signals[id].name.clone(), d.signals[id].kind.clone())
        };
        match kind {
            SigKind::Wire | SigKind::Output => {}
            SigKind::Reg { .. } => panic!(
                "module `{}`: cannot assign to register `{tname}`: use m.next(reg, value) for \
                 registers",
                self.name
            ),
            _ => panic!(
                "module `{}`: cannot assign to `{tname}`: only wires and outputs can be assigned",
                self.name
            ),
        }
        let what = format!("assignment to `{tname}`");
        let v = self.resolve(value.into(), target.width, target.signed, &what);
        if v.width != target.width {
            panic!(
                "module `{}`: width mismatch in {what}: `{tname}` is {} bits but the value `{}` \
                 is {} bits",
                self.name,
                target.width,
                self.describe(v.node),
                v.width
            );
        }
        self.d.borrow_mut().assigns.push(Assign {
            target: id,
            value: v.node,
            loc: Location::caller(),
        });
    }

    #[track_caller]
    fn reg_id(&self, reg: Sig, what: &str) -> (SigId, String) {
        self.own(reg, what);
        let id = self
            .signal_of(reg)
            .filter(|&id| matches!(self.d.borrow().signals[id].kind, SigKind::Reg { .. }));
        match id {
            Some(id) => (id, self.d.borrow().signals[id].name.clone()),
            None => panic!(
                "module `{}`: {what}: `{}` is not a register (declare it with m.reg)",
                self.name,
                self.describe(reg.node)
            ),
        }
    }

    /// Sets the value register `reg` takes at every clock edge (unless in reset).
    #[track_caller]
    pub fn next<'a>(&'a self, reg: Sig<'a>, value: impl Into<Operand<'a>>) {
        self.next_impl(reg, None, value.into());
    }

    /// Sets the value register `reg` takes at clock edges where `enable` (1 bit) is high; it
    /// holds its value otherwise. Reset has priority over the enable.
    #[track_caller]
    pub fn next_when<'a>(&'a self, reg: Sig<'a>, enable: Sig<'a>, value: impl Into<Operand<'a>>) {
        self.next_impl(reg, Some(enable), value.into());
    }

    #[track_caller]
    fn next_impl<'a>(&'a self, reg: Sig<'a>, enable: Option<Sig<'a>>, value: Operand<'a>) {
        let (id, rname) = self.reg_id(reg, "next");
        let what = format!("next value of register `{rname}`");
        let v = self.resolve(value, reg.width, reg.signed, &what);
        if v.width != reg.width {
            panic!(
                "module `{}`: width mismatch in {what}: `{rname}` is {} bits but the value `{}` is \
                 {} bits",
                self.name,
                reg.width,
                self.describe(v.node),
                v.width
            );
        }
        let enable = enable.map(|e| {
            self.own(e, &what);
            self.expect_bit(e, &format!("enable of register `{rname}`"));
            e.node
        });
        self.d.borrow_mut().nexts.push(Next {
            reg: id,
            value: v.node,
            enable,
            loc: Location::caller(),
        });
    }

    #[track_caller]
    fn expect_bit(&self, s: Sig, what: &str) {
        if s.width != 1 {
            panic!(
                "module `{}`: {what} must be 1 bit, but `{}` is {} bits",
                self.name,
                self.describe(s.node),
                s.width
            );
        }
    }

    // ----- memories and instances -------------------------------------------------------

    /// Declares a memory of `depth` (2 or more) words of `width` bits. It prints as
    /// `reg [width-1:0] name [0:depth-1]` with the always-block patterns that yosys and
    /// Vivado infer as block RAM. Addresses are `addr_bits(depth)` wide.
    #[track_caller]
    pub fn mem(&self, name: &str, width: u32, depth: u32) -> Mem<'_> {
        self.check_width("memory", name, width);
        if depth < 2 {
            panic!(
                "module `{}`: memory `{name}` has depth {depth}; it must be at least 2",
                self.name
            );
        }
        self.claim_name(name, "memory");
        let mut d = self.d.borrow_mut();
        d.mems.push(Memory {
            name: name.to_string(),
            width,
            depth,
            addr_width: addr_bits(depth as u64),
            writes: vec![],
            reads: vec![],
            loc: Location::caller(),
        });
        Mem {
            m: self,
            idx: d.mems.len() - 1,
        }
    }

    /// Instantiates `module` as `name`. Connect every input with [`Inst::connect`] and read
    /// outputs with [`Inst::output`]; the clock and reset connect themselves.
    #[track_caller]
    pub fn instance(&self, name: &str, module: &Module) -> Inst<'_> {
        self.claim_name(name, "instance");
        let mut d = self.d.borrow_mut();
        d.insts.push(Instance {
            name: name.to_string(),
            module: module.clone(),
            conns: vec![],
            outs: vec![],
            loc: Location::caller(),
        });
        Inst {
            m: self,
            idx: d.insts.len() - 1,
        }
    }

    // ----- constants and n-ary operations -----------------------------------------------

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

    fn reinterpret<'a>(&'a self, s: Sig<'a>, width: u32, signed: bool) -> Sig<'a> {
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
    fn check_same(&self, op: &str, a: Sig, b: Sig) {
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

    fn slice_node(&self, base: NodeId, lo: u32, width: u32) -> Sig<'_> {
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

    /// The value of a comparison that cannot change: both operands constant, or their
    /// possible ranges (type bounds, narrowed by known leading zero bits, as after a zero
    /// extension) do not overlap in the way the comparison asks. Verilator's range analysis
    /// warns about such comparisons, so they are folded away.
    fn fold_compare(&self, op: CmpOp, a: Sig, b: Sig) -> Option<bool> {
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

    fn is_leafy(&self, n: NodeId) -> bool {
        matches!(
            self.d.borrow().nodes[n].op,
            Op::Ref(_) | Op::Const(_) | Op::Slice(..)
        )
    }

    /// Finishes the module: checks drivers, loops and unused inputs, drops logic that
    /// nothing reads, and returns the immutable [`Module`].
    pub fn finish(self) -> Result<Module, DesignError> {
        crate::check::finish(self.name, self.d.into_inner())
    }
}

fn describe_into(d: &Data, node: NodeId, depth: u32, out: &mut String) {
    let n = &d.nodes[node];
    if depth == 0 {
        out.push_str("...");
        return;
    }
    let sub = |x: NodeId, out: &mut String| describe_into(d, x, depth - 1, out);
    match &n.op {
        Op::Ref(s) => out.push_str(&d.signals[*s].name),
        Op::Const(b) => out.push_str(&b.verilog()),
        Op::Not(a) => {
            out.push('~');
            sub(*a, out)
        }
        Op::Neg(a) => {
            out.push('-');
            sub(*a, out)
        }
        Op::Bin(op, a, b) => {
            out.push('(');
            sub(*a, out);
            out.push_str(&format!(" {} ", op.symbol()));
            sub(*b, out);
            out.push(')');
        }
        Op::Mul { a, b, .. } => {
            out.push('(');
            sub(*a, out);
            out.push_str(" * ");
            sub(*b, out);
            out.push(')');
        }
        Op::Cmp(op, a, b, _) => {
            out.push('(');
            sub(*a, out);
            out.push_str(&format!(" {} ", op.symbol()));
            sub(*b, out);
            out.push(')');
        }
        Op::Shift(op, a, amt) => {
            out.push('(');
            sub(*a, out);
            out.push_str(match op {
                ShiftOp::Shl => " << ",
                ShiftOp::Shr => " >> ",
                ShiftOp::Sra => " >>> ",
            });
            match amt {
                Amount::Const(k) => out.push_str(&k.to_string()),
                Amount::Dyn(s) => sub(*s, out),
            }
            out.push(')');
        }
        Op::Slice(a, lo) => {
            sub(*a, out);
            if n.width == 1 {
                out.push_str(&format!("[{lo}]"));
            } else {
                out.push_str(&format!("[{}:{}]", lo + n.width - 1, lo));
            }
        }
        Op::Concat(parts) => {
            out.push('{');
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                sub(*p, out);
            }
            out.push('}');
        }
        Op::Repeat(a, k) => {
            out.push_str(&format!("{{{k}{{"));
            sub(*a, out);
            out.push_str("}}");
        }
        Op::Mux { c, t, f } => {
            out.push('(');
            sub(*c, out);
            out.push_str(" ? ");
            sub(*t, out);
            out.push_str(" : ");
            sub(*f, out);
            out.push(')');
        }
        Op::Reduce(op, a) => {
            out.push_str(match op {
                RedOp::And => "&",
                RedOp::Or => "|",
                RedOp::Xor => "^",
            });
            sub(*a, out);
        }
    }
}

// ----- Sig --------------------------------------------------------------------------------

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
        if lane_width == 0 || self.width % lane_width != 0 {
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

// ----- Mem --------------------------------------------------------------------------------

impl<'a> Mem<'a> {
    fn with<R>(&self, f: impl FnOnce(&Memory) -> R) -> R {
        f(&self.m.d.borrow().mems[self.idx])
    }

    /// Word width in bits.
    pub fn width(&self) -> u32 {
        self.with(|m| m.width)
    }

    /// Number of words.
    pub fn depth(&self) -> u32 {
        self.with(|m| m.depth)
    }

    /// Width of addresses: `addr_bits(depth)`.
    pub fn addr_width(&self) -> u32 {
        self.with(|m| m.addr_width)
    }

    #[track_caller]
    fn check_addr(&self, addr: Sig<'a>, what: &str) {
        self.m.own(addr, what);
        let (name, aw, depth) = self.with(|m| (m.name.clone(), m.addr_width, m.depth));
        if addr.width != aw {
            panic!(
                "module `{}`: width mismatch in {what} of memory `{name}`: the address `{}` is {} \
                 bits but a {depth}-word memory takes {aw}-bit addresses",
                self.m.name,
                self.m.describe(addr.node),
                addr.width
            );
        }
    }

    /// The write port: at a clock edge where `enable` (1 bit) is high, `data` is written at
    /// `addr`. A memory has exactly one write port.
    #[track_caller]
    pub fn write(&self, enable: Sig<'a>, addr: Sig<'a>, data: Sig<'a>) {
        self.write_lanes(enable, addr, data)
    }

    /// The write port with lane enables: `enable` has one bit per lane (the word splits into
    /// `enable.width()` equal lanes, lane 0 in the low bits); only enabled lanes are written.
    /// With 8-bit lanes this is the usual byte-write-enable BRAM.
    #[track_caller]
    pub fn write_lanes(&self, enable: Sig<'a>, addr: Sig<'a>, data: Sig<'a>) {
        self.check_addr(addr, "the write port");
        self.m.own(enable, "memory write enable");
        self.m.own(data, "memory write data");
        let (name, width) = self.with(|m| (m.name.clone(), m.width));
        if data.width != width {
            panic!(
                "module `{}`: width mismatch in the write port of memory `{name}`: the data `{}` is \
                 {} bits but the memory is {width} bits wide",
                self.m.name,
                self.m.describe(data.node),
                data.width
            );
        }
        if width % enable.width != 0 {
            panic!(
                "module `{}`: memory `{name}` is {width} bits wide and cannot be split into {} \
                 lanes (the width of the enable `{}`)",
                self.m.name,
                enable.width,
                self.m.describe(enable.node)
            );
        }
        self.m.d.borrow_mut().mems[self.idx].writes.push(WritePort {
            enable: enable.node,
            addr: addr.node,
            data: data.node,
            loc: Location::caller(),
        });
    }

    /// A read port that reads every cycle: the word at `addr` appears on the returned signal
    /// one clock later (registered read, as in block RAM).
    #[track_caller]
    pub fn read(&self, addr: Sig<'a>) -> Sig<'a> {
        self.read_impl(None, addr)
    }

    /// A read port with an enable: at a clock edge where `enable` is high, the word at `addr`
    /// is latched into the returned signal; otherwise it holds. Reading the address being
    /// written in the same cycle gives the old word in simulation; avoid relying on it
    /// (block RAM in simple-dual-port mode does not guarantee it).
    #[track_caller]
    pub fn read_en(&self, enable: Sig<'a>, addr: Sig<'a>) -> Sig<'a> {
        self.m.own(enable, "memory read enable");
        self.m.expect_bit(enable, "a memory read enable");
        self.read_impl(Some(enable), addr)
    }

    #[track_caller]
    fn read_impl(&self, enable: Option<Sig<'a>>, addr: Sig<'a>) -> Sig<'a> {
        self.check_addr(addr, "a read port");
        let (name, width, nreads) = self.with(|m| (m.name.clone(), m.width, m.reads.len()));
        let data_name = if nreads == 0 {
            format!("{name}_rdata")
        } else {
            format!("{name}_rdata{nreads}")
        };
        let s = self.m.declare(
            &data_name,
            width,
            false,
            SigKind::MemData {
                mem: self.idx,
                port: nreads,
            },
            "memory read data",
        );
        let data = self.m.signal_of(s).unwrap();
        self.m.d.borrow_mut().mems[self.idx].reads.push(ReadPort {
            addr: addr.node,
            enable: enable.map(|e| e.node),
            data,
        });
        s
    }
}

// ----- Inst -------------------------------------------------------------------------------

impl<'a> Inst<'a> {
    /// The instantiated module.
    pub fn module(&self) -> Module {
        self.m.d.borrow().insts[self.idx].module.clone()
    }

    /// The instance name.
    pub fn name(&self) -> String {
        self.m.d.borrow().insts[self.idx].name.clone()
    }

    #[track_caller]
    fn port(&self, port: &str, dir: Dir) -> (usize, PortInfo) {
        let (module, iname) = {
            let d = self.m.d.borrow();
            (
                d.insts[self.idx].module.clone(),
                d.insts[self.idx].name.clone(),
            )
        };
        let Some(i) = module.port_index(port) else {
            let list: Vec<String> = module
                .ports()
                .iter()
                .filter(|p| p.dir == dir && p.role == PortRole::Data)
                .map(|p| p.name.clone())
                .collect();
            panic!(
                "module `{}`: instance `{iname}` of `{}` has no port `{port}` ({} ports: {})",
                self.m.name,
                module.name(),
                dir.as_str(),
                list.join(", ")
            );
        };
        let p = module.ports()[i].clone();
        if p.dir != dir {
            panic!(
                "module `{}`: port `{port}` of instance `{iname}` is an {}, not an {}",
                self.m.name,
                p.dir.as_str(),
                dir.as_str()
            );
        }
        if p.role != PortRole::Data {
            panic!(
                "module `{}`: port `{port}` of instance `{iname}` is its clock or reset, which is \
                 connected automatically",
                self.m.name
            );
        }
        (i, p)
    }

    /// Connects input `port` of the instance to `value` (same width; an integer becomes a
    /// constant). Every input must be connected exactly once.
    #[track_caller]
    pub fn connect(&self, port: &str, value: impl Into<Operand<'a>>) {
        let (i, p) = self.port(port, Dir::Input);
        let iname = self.name();
        let what = format!("connection of `{iname}.{port}`");
        let v = self.m.resolve(value.into(), p.width, p.signed, &what);
        if v.width != p.width {
            panic!(
                "module `{}`: width mismatch in {what}: the port is {} bits but the value `{}` is \
                 {} bits",
                self.m.name,
                p.width,
                self.m.describe(v.node),
                v.width
            );
        }
        self.m.d.borrow_mut().insts[self.idx]
            .conns
            .push(Connection {
                port: i,
                value: v.node,
                loc: Location::caller(),
            });
    }

    /// Output `port` of the instance, as a wire named `<instance>_<port>` in this module.
    #[track_caller]
    pub fn output(&self, port: &str) -> Sig<'a> {
        let (i, p) = self.port(port, Dir::Output);
        let existing = self.m.d.borrow().insts[self.idx]
            .outs
            .iter()
            .find(|(pi, _)| *pi == i)
            .map(|(_, s)| *s);
        if let Some(s) = existing {
            let node = self.m.d.borrow().signals[s].node;
            return self.m.sig(node);
        }
        let name = format!("{}_{}", self.name(), port);
        let s = self.m.declare(
            &name,
            p.width,
            p.signed,
            SigKind::InstOut {
                inst: self.idx,
                port: i,
            },
            "instance output",
        );
        let id = self.m.signal_of(s).unwrap();
        self.m.d.borrow_mut().insts[self.idx].outs.push((i, id));
        s
    }
}
