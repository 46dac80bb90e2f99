//! The netlist IR: signals, expression nodes, drivers, memories and instances of one module,
//! and the finished, immutable [`Module`] that the printer and simulator consume.
//!
//! Everything here is plain data. [`crate::ModuleBuilder`] creates it (checking widths as it
//! goes), [`crate::check`] validates connectivity and computes liveness when the builder is
//! finished, and [`crate::verilog`] prints it.

use std::panic::Location;
use std::sync::Arc;

use crate::bits::Bits;

pub(crate) type NodeId = usize;
pub(crate) type SigId = usize;

/// Binary operators whose operands and result all have the same width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    And,
    Or,
    Xor,
    Add,
    Sub,
}

impl BinOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::Add => "+",
            BinOp::Sub => "-",
        }
    }
}

/// Comparisons: equal-width operands, 1-bit result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// Shifts keep the width of the shifted operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShiftOp {
    Shl,
    /// Logical right shift (zeros in).
    Shr,
    /// Arithmetic right shift (sign bits in).
    Sra,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Amount {
    Const(u32),
    Dyn(NodeId),
}

/// Reductions to one bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedOp {
    And,
    Or,
    Xor,
}

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Ref(SigId),
    Const(Bits),
    Not(NodeId),
    Neg(NodeId),
    Bin(BinOp, NodeId, NodeId),
    /// Full product: the result is as wide as both operands together.
    Mul {
        a: NodeId,
        b: NodeId,
        signed: bool,
    },
    Cmp(CmpOp, NodeId, NodeId, bool),
    Shift(ShiftOp, NodeId, Amount),
    /// Bits `lo .. lo + node width` of the operand.
    Slice(NodeId, u32),
    /// Most significant part first.
    Concat(Vec<NodeId>),
    Repeat(NodeId, u32),
    Mux {
        c: NodeId,
        t: NodeId,
        f: NodeId,
    },
    Reduce(RedOp, NodeId),
}

impl Op {
    /// Operand nodes, in order.
    pub(crate) fn operands(&self) -> Vec<NodeId> {
        match self {
            Op::Ref(_) | Op::Const(_) => vec![],
            Op::Not(a) | Op::Neg(a) | Op::Slice(a, _) | Op::Repeat(a, _) | Op::Reduce(_, a) => {
                vec![*a]
            }
            Op::Bin(_, a, b) | Op::Mul { a, b, .. } | Op::Cmp(_, a, b, _) => vec![*a, *b],
            Op::Shift(_, a, Amount::Const(_)) => vec![*a],
            Op::Shift(_, a, Amount::Dyn(s)) => vec![*a, *s],
            Op::Concat(parts) => parts.clone(),
            Op::Mux { c, t, f } => vec![*c, *t, *f],
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub op: Op,
    pub width: u32,
    pub signed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SigKind {
    Input,
    Output,
    Wire,
    Reg {
        reset: Option<Bits>,
    },
    /// The registered data of read port `port` of memory `mem`.
    MemData {
        mem: usize,
        port: usize,
    },
    /// Output port `port` (index into the child's ports) of instance `inst`.
    InstOut {
        inst: usize,
        port: usize,
    },
    /// The implicit clock input.
    Clock,
    /// The implicit reset input.
    Reset,
}

#[derive(Clone, Debug)]
pub(crate) struct Signal {
    pub name: String,
    pub width: u32,
    pub signed: bool,
    pub kind: SigKind,
    /// The `Ref` node that reads this signal.
    pub node: NodeId,
    /// Set by `allow_unused`: why some bits may legitimately go unread.
    pub unused_reason: Option<String>,
}

pub(crate) type Loc = &'static Location<'static>;

#[derive(Clone, Debug)]
pub(crate) struct Assign {
    pub target: SigId,
    pub value: NodeId,
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub(crate) struct Next {
    pub reg: SigId,
    pub value: NodeId,
    pub enable: Option<NodeId>,
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub(crate) struct WritePort {
    /// One bit per lane (1 bit for a whole-word write).
    pub enable: NodeId,
    pub addr: NodeId,
    pub data: NodeId,
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub(crate) struct ReadPort {
    pub addr: NodeId,
    pub enable: Option<NodeId>,
    pub data: SigId,
}

#[derive(Clone, Debug)]
pub(crate) struct Memory {
    pub name: String,
    pub width: u32,
    pub depth: u32,
    pub addr_width: u32,
    pub writes: Vec<WritePort>,
    pub reads: Vec<ReadPort>,
    /// Printed with `(* ram_style = "distributed" *)` ([`crate::Mem::distributed`]).
    pub distributed: bool,
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub(crate) struct Connection {
    /// Index into the child's ports.
    pub port: usize,
    pub value: NodeId,
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub(crate) struct Instance {
    pub name: String,
    pub module: Module,
    pub conns: Vec<Connection>,
    /// Output wires created so far: (child port index, signal in this module).
    pub outs: Vec<(usize, SigId)>,
    pub loc: Loc,
}

/// Direction of a module port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Driven from outside the module.
    Input,
    /// Driven by the module.
    Output,
}

impl Dir {
    /// `"input"` or `"output"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::Input => "input",
            Dir::Output => "output",
        }
    }
}

/// What a port is for: ordinary data, or the implicit clock or reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortRole {
    /// An ordinary port.
    Data,
    /// The implicit clock.
    Clock,
    /// The synchronous reset; `active_low` tells its polarity.
    Reset {
        /// True if the reset is asserted low.
        active_low: bool,
    },
}

/// One port of a finished module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PortInfo {
    /// Port name.
    pub name: String,
    /// Direction.
    pub dir: Dir,
    /// Width in bits.
    pub width: u32,
    /// Whether the value is signed (two's complement).
    pub signed: bool,
    /// Data, clock or reset.
    pub role: PortRole,
}

/// The clock and reset naming of a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClockReset {
    pub clock: String,
    pub reset: String,
    pub reset_active_low: bool,
}

/// Everything about a finished module. Only live logic is kept (see `check`).
#[derive(Debug)]
pub(crate) struct ModuleDef {
    pub name: String,
    pub cr: ClockReset,
    pub signals: Vec<Signal>,
    pub nodes: Vec<Node>,
    pub assigns: Vec<Assign>,
    pub nexts: Vec<Next>,
    pub mems: Vec<Memory>,
    pub insts: Vec<Instance>,
    /// Ports in order: clock, reset (when used), then declared ports.
    pub ports: Vec<PortInfo>,
    /// Signal of each port.
    pub port_sigs: Vec<SigId>,
    /// For each port index: the input ports it depends on combinationally (outputs only).
    pub comb_paths: Vec<Vec<usize>>,
    /// Per signal: is it read by live logic (or is it a port)?
    pub live: Vec<bool>,
    /// The Verilog of a module defined outside the crate ([`crate::external_module`]),
    /// printed instead of a body; the rest of the definition is its interface only.
    pub verbatim: Option<String>,
}

/// A finished, immutable module: cheap to clone, shareable between threads, and
/// instantiable in other modules any number of times.
#[derive(Clone, Debug)]
pub struct Module(pub(crate) Arc<ModuleDef>);

impl Module {
    /// The name given to [`crate::ModuleBuilder::new`] (the printer may add a suffix if
    /// two different modules share it).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// All ports in order: the clock and reset first when the module uses them.
    pub fn ports(&self) -> &[PortInfo] {
        &self.0.ports
    }

    /// Whether no output depends on an input combinationally: every output is a function
    /// of registers alone, so between two clock edges it keeps the value the last edge gave
    /// it whatever the inputs do (a simulator may read it without evaluating them).
    pub fn outputs_registered(&self) -> bool {
        self.0.comb_paths.iter().all(|inputs| inputs.is_empty())
    }

    /// The port called `name`.
    pub fn port(&self, name: &str) -> Option<&PortInfo> {
        self.0.ports.iter().find(|p| p.name == name)
    }

    /// True if both handles refer to the same finished module.
    pub fn same_as(&self, other: &Module) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub(crate) fn port_index(&self, name: &str) -> Option<usize> {
        self.0.ports.iter().position(|p| p.name == name)
    }
}
