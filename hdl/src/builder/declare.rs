//! Declarations and drivers: ports, wires, registers, memories and instances of a module,
//! and the statements that drive them (`assign`, `next`, `next_when`).

use super::*;

impl ModuleBuilder {
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
    pub(super) fn expect_bit(&self, s: Sig, what: &str) {
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
            distributed: false,
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
}
