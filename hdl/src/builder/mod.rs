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

mod declare;
mod expr;
mod fold;
mod handles;
mod sig;

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
