//! The Verilog-2005 printer: a [`Design`] (a top module and everything it instantiates)
//! printed as one deterministic, readable file, with structurally identical modules merged
//! into one definition, plus a JSON port manifest.
//!
//! Printing rules that keep the output correct and `verilator -Wall` clean:
//! * every declared net is unsigned; signed operations print as `$signed(..)` inside
//!   constructs whose result does not depend on the surrounding expression (comparisons,
//!   `$unsigned($signed(a) >>> n)`, and products that are the whole right-hand side of an
//!   assignment of exactly the product's width, or of the width of a part-select of its low
//!   bits that is at least as wide as both factors);
//! * all operands of an operator have the width the IR gave them, so no implicit extension
//!   or truncation happens anywhere, except inside the factors of a signed product: sign
//!   extensions, and sums of them that provably cannot overflow, print in the product's
//!   signed context (`$signed(a) * (($signed(w1) << 16) + $signed(w0))`, see
//!   `signed_product`), under a `lint_off WIDTH` of their own;
//! * a subexpression used more than once, a product inside a larger expression, and the
//!   operand of a part-select that is not a plain name are printed once into a generated
//!   wire named after the signal being computed (`<name>_t<k>`);
//! * such a generated signal that only an enabled register's next value reads is a `reg`
//!   computed inside that register's `if (enable)` by a blocking assignment (under a local
//!   `lint_off BLKSEQ`), after an unconditional zero default that lets Verilator make it a
//!   C++ local: a simulator then evaluates it only in the cycles the register loads
//!   (Verilator evaluates every continuous assignment on every clock edge, and does not
//!   move one read twice into the clocked block), and synthesis sees the same logic (the
//!   default is never read);
//! * registers in a row whose enables are `outer & inner` with the same named `outer` (a
//!   register file's write-enable and address decode) print under one `if (outer)`, each
//!   with its own `if (inner)`, which Verilator tests once while `outer` is low;
//! * logic nothing reads was dropped when the module was finished; a signal some of whose
//!   bits are unread is wrapped in a commented `lint_off UNUSEDSIGNAL`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use crate::bits::Bits;
use crate::check::describe_bits;
use crate::ir::*;

mod signed_product;

/// A design: the top module and, through its instances, every module below it.
#[derive(Clone, Debug)]
pub struct Design {
    top: Module,
}

/// One printed module definition after merging identical modules.
#[derive(Clone, Debug)]
pub struct ModuleDefinition {
    /// The name in the printed Verilog.
    pub name: String,
    /// A module handle with this body (the first one met).
    pub module: Module,
    /// The printed text, `module ... endmodule`.
    pub text: String,
}

impl Design {
    /// A design rooted at `top`.
    pub fn new(top: Module) -> Design {
        Design { top }
    }

    /// The top module.
    pub fn top(&self) -> &Module {
        &self.top
    }

    /// All module definitions after merging identical ones: children before parents, the
    /// top last. The top keeps its name; another module whose name is taken by a different
    /// body gets a numeric suffix (`fifo_2`).
    pub fn definitions(&self) -> Vec<ModuleDefinition> {
        let mut order: Vec<Module> = vec![];
        let mut seen: HashSet<*const ModuleDef> = HashSet::new();
        fn visit(m: &Module, order: &mut Vec<Module>, seen: &mut HashSet<*const ModuleDef>) {
            if !seen.insert(Arc::as_ptr(&m.0)) {
                return;
            }
            for i in &m.0.insts {
                visit(&i.module, order, seen);
            }
            order.push(m.clone());
        }
        visit(&self.top, &mut order, &mut seen);

        let mut defs: Vec<ModuleDefinition> = vec![];
        let mut by_body: HashMap<String, usize> = HashMap::new();
        let mut def_of: HashMap<*const ModuleDef, usize> = HashMap::new();
        let mut names: HashSet<String> = HashSet::new();
        names.insert(self.top.name().to_string());
        for m in &order {
            let child_names: Vec<String> =
                m.0.insts
                    .iter()
                    .map(|i| defs[def_of[&Arc::as_ptr(&i.module.0)]].name.clone())
                    .collect();
            let body = match &m.0.verbatim {
                Some(v) => v.clone(),
                None => print_body(&m.0, &child_names),
            };
            if let Some(&k) = by_body.get(&body) {
                def_of.insert(Arc::as_ptr(&m.0), k);
                continue;
            }
            if let Some(v) = &m.0.verbatim {
                // Its name is fixed by its Verilog.
                names.insert(m.name().to_string());
                by_body.insert(body, defs.len());
                def_of.insert(Arc::as_ptr(&m.0), defs.len());
                defs.push(ModuleDefinition {
                    name: m.name().to_string(),
                    module: m.clone(),
                    text: v.clone(),
                });
                continue;
            }
            let is_top = m.same_as(&self.top);
            let name = if is_top {
                m.name().to_string()
            } else {
                let mut n = m.name().to_string();
                let mut k = 2;
                // Unused, and not the name of anything inside the module (Verilator rejects
                // a signal named like its module).
                while names.contains(&n) || uses_name(&m.0, &n) {
                    n = format!("{}_{k}", m.name());
                    k += 1;
                }
                names.insert(n.clone());
                n
            };
            let text = format!("module {name} {body}");
            by_body.insert(body, defs.len());
            def_of.insert(Arc::as_ptr(&m.0), defs.len());
            defs.push(ModuleDefinition {
                name,
                module: m.clone(),
                text,
            });
        }
        defs
    }

    /// The whole design as one Verilog-2005 file. `header` (any text, e.g. the config the
    /// design was generated from) becomes a `//` comment block at the top.
    pub fn verilog(&self, header: &str) -> String {
        let mut out = String::new();
        for line in header.lines() {
            if line.is_empty() {
                out.push_str("//\n");
            } else {
                let _ = writeln!(out, "// {line}");
            }
        }
        if !header.is_empty() {
            out.push_str("//\n");
        }
        let _ = writeln!(out, "// Generated by the `hdl` crate; do not edit.");
        out.push('\n');
        out.push_str(
            "// All modules of the design are in this one file, so their names cannot all \
             match the file name.\n/* verilator lint_off DECLFILENAME */\n",
        );
        out.push_str("`default_nettype none\n");
        for d in self.definitions() {
            out.push('\n');
            out.push_str(&d.text);
        }
        out.push_str("\n`default_nettype wire\n");
        out
    }

    /// The port manifest: JSON with the top's name and, for every module definition (top
    /// first), its ports with direction, width, signedness and role.
    pub fn manifest_json(&self) -> String {
        let mut defs = self.definitions();
        defs.reverse();
        let modules: Vec<serde_json::Value> = defs
            .iter()
            .map(|d| {
                let ports: Vec<serde_json::Value> = d
                    .module
                    .ports()
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "name": p.name,
                            "direction": p.dir.as_str(),
                            "width": p.width,
                            "signed": p.signed,
                            "role": match p.role {
                                PortRole::Data => "data",
                                PortRole::Clock => "clock",
                                PortRole::Reset { active_low: false } => "reset",
                                PortRole::Reset { active_low: true } => "reset_n",
                            },
                        })
                    })
                    .collect();
                serde_json::json!({ "name": d.name, "ports": ports })
            })
            .collect();
        let v = serde_json::json!({ "top": self.top.name(), "modules": modules });
        let mut s = serde_json::to_string_pretty(&v).expect("manifest serializes");
        s.push('\n');
        s
    }
}

/// True if a signal, memory or instance of `def` is called `name`.
fn uses_name(def: &ModuleDef, name: &str) -> bool {
    def.signals.iter().any(|s| s.name == name)
        || def.mems.iter().any(|m| m.name == name)
        || def.insts.iter().any(|i| i.name == name)
}

/// How an expression's text may be embedded in a larger one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prec {
    /// A name, literal, part-select, concatenation or system function call.
    Atom,
    /// `c ? a : b`.
    Mux,
    Bin(BinOp),
    Other,
}

struct Temp {
    name: String,
    width: u32,
    /// Its index in `Printer::temp_readers`.
    id: usize,
}

/// What is being printed: who reads the names used meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reader {
    /// Anything computed outside a register's next value (assignments, enables, memory
    /// ports, instance connections).
    Other,
    /// The next value of register statement `k`.
    Reg(usize),
    /// The generated signal with id `k` (see [`Temp::id`]).
    Temp(usize),
}

struct Printer<'a> {
    def: &'a ModuleDef,
    taken: HashSet<String>,
    fanout: Vec<u32>,
    /// Nodes available under a name (hoisted temporaries and aliases).
    ident: HashMap<NodeId, String>,
    temps: Vec<Temp>,
    /// Bits read so far, per declared name.
    used: HashMap<String, Vec<bool>>,
    /// `assign` statements in print order, each with the generated signal it drives and
    /// whether it needs [`signed_product::width_waived`].
    assigns: Vec<(Option<usize>, String, bool)>,
    /// Who is reading the names used now.
    reader: Reader,
    /// The id of each generated signal's name.
    temp_index: HashMap<String, usize>,
    /// The readers of each generated signal, by id (ids are given in the order their
    /// printing starts).
    temp_readers: Vec<Vec<Reader>>,
}

fn range(width: u32) -> String {
    if width == 1 {
        String::new()
    } else {
        format!("[{}:0]", width - 1)
    }
}

/// Expressions longer than this many characters are broken over several lines.
const LINE: usize = 90;

/// `range(width)` followed by a space, or nothing for one bit.
fn range_sp(width: u32) -> String {
    if width == 1 {
        String::new()
    } else {
        format!("{} ", range(width))
    }
}

impl<'a> Printer<'a> {
    fn new(def: &'a ModuleDef) -> Printer<'a> {
        let mut taken: HashSet<String> = def.signals.iter().map(|s| s.name.clone()).collect();
        taken.extend(def.mems.iter().map(|m| m.name.clone()));
        taken.extend(def.insts.iter().map(|i| i.name.clone()));
        taken.insert(def.cr.clock.clone());
        taken.insert(def.cr.reset.clone());
        taken.insert(def.name.clone());
        let mut used = HashMap::new();
        for (s, sig) in def.signals.iter().enumerate() {
            // The clock and reset exist only when something uses them.
            if def.live[s] && !matches!(sig.kind, SigKind::Clock | SigKind::Reset) {
                used.insert(sig.name.clone(), vec![false; sig.width as usize]);
            }
        }
        Printer {
            def,
            taken,
            fanout: vec![0; def.nodes.len()],
            ident: HashMap::new(),
            temps: vec![],
            used,
            assigns: vec![],
            reader: Reader::Other,
            temp_index: HashMap::new(),
            temp_readers: vec![],
        }
    }

    /// Records that the current reader reads `name` (if it is a generated signal).
    fn note_read(&mut self, name: &str) {
        if let Some(&k) = self.temp_index.get(name) {
            let r = self.reader;
            if !self.temp_readers[k].contains(&r) {
                self.temp_readers[k].push(r);
            }
        }
    }

    fn count_fanout(&mut self, roots: &[NodeId]) {
        let mut visited = vec![false; self.def.nodes.len()];
        let mut stack: Vec<NodeId> = vec![];
        for &r in roots {
            self.fanout[r] += 1;
            stack.push(r);
        }
        while let Some(n) = stack.pop() {
            if visited[n] {
                continue;
            }
            visited[n] = true;
            for o in self.def.nodes[n].op.operands() {
                self.fanout[o] += 1;
                stack.push(o);
            }
        }
    }

    fn fresh(&mut self, base: &str) -> String {
        let mut k = 0;
        loop {
            let n = format!("{base}_t{k}");
            if !self.taken.contains(&n) {
                self.taken.insert(n.clone());
                return n;
            }
            k += 1;
        }
    }

    fn exact_or_fresh(&mut self, want: &str) -> String {
        if !self.taken.contains(want) {
            self.taken.insert(want.to_string());
            want.to_string()
        } else {
            self.fresh(want)
        }
    }

    fn use_bits(&mut self, name: &str, lo: u32, width: u32) {
        self.note_read(name);
        if let Some(u) = self.used.get_mut(name) {
            for b in lo..lo + width {
                u[b as usize] = true;
            }
        }
    }

    fn use_all(&mut self, name: &str) {
        self.note_read(name);
        if let Some(u) = self.used.get_mut(name) {
            u.iter_mut().for_each(|b| *b = true);
        }
    }

    /// Cheap expressions that are simply repeated rather than given a name when shared.
    fn trivial(&self, n: NodeId) -> bool {
        match &self.def.nodes[n].op {
            Op::Ref(_) | Op::Const(_) => true,
            Op::Slice(b, _) => matches!(self.def.nodes[*b].op, Op::Ref(_)),
            Op::Repeat(b, _) => self.trivial(*b) && self.def.nodes[*b].width == 1,
            _ => false,
        }
    }

    /// Prints `n` into a new wire named after `hint` and returns the wire's name.
    fn hoist(&mut self, n: NodeId, hint: &str) -> String {
        let name = self.fresh(hint);
        self.hoist_as(n, name, hint)
    }

    fn hoist_as(&mut self, n: NodeId, name: String, hint: &str) -> String {
        let id = self.temp_readers.len();
        self.temp_readers.push(vec![]);
        let outer = std::mem::replace(&mut self.reader, Reader::Temp(id));
        let (rhs, waive) = self.rhs(n, hint);
        self.reader = outer;
        let width = self.def.nodes[n].width;
        self.used.insert(name.clone(), vec![false; width as usize]);
        self.temps.push(Temp {
            name: name.clone(),
            width,
            id,
        });
        self.temp_index.insert(name.clone(), id);
        // In dependency order: the signals its value reads come first.
        self.assigns
            .push((Some(id), format!("{name} = {rhs};"), waive));
        self.ident.insert(n, name.clone());
        name
    }

    /// For each generated signal (by id), the register statement that is its only reader,
    /// directly or through other generated signals, if that register is in `enabled`.
    fn owners(&self, enabled: &[bool]) -> Vec<Option<usize>> {
        fn owner(
            p: &Printer,
            k: usize,
            enabled: &[bool],
            memo: &mut [Option<Option<usize>>],
        ) -> Option<usize> {
            if let Some(o) = memo[k] {
                return o;
            }
            let mut found: Option<usize> = None;
            let mut ok = !p.temp_readers[k].is_empty();
            for r in &p.temp_readers[k] {
                let o = match *r {
                    Reader::Other => None,
                    Reader::Reg(j) => enabled[j].then_some(j),
                    Reader::Temp(t) => owner(p, t, enabled, memo),
                };
                match (o, found) {
                    (None, _) => ok = false,
                    (Some(j), None) => found = Some(j),
                    (Some(j), Some(f)) if j != f => ok = false,
                    _ => {}
                }
                if !ok {
                    break;
                }
            }
            let o = if ok { found } else { None };
            memo[k] = Some(o);
            o
        }
        let mut memo = vec![None; self.temp_readers.len()];
        (0..self.temp_readers.len())
            .map(|k| owner(self, k, enabled, &mut memo))
            .collect()
    }

    /// Text for the whole right-hand side of an assignment whose target has exactly the
    /// width of `n` (the one place a product may appear), and whether the statement needs
    /// [`signed_product::width_waived`].
    fn rhs(&mut self, n: NodeId, hint: &str) -> (String, bool) {
        if let Some(name) = self.ident.get(&n).cloned() {
            self.use_all(&name);
            return (name, false);
        }
        let product = self.truncated_product(n).unwrap_or(n);
        if let Op::Mul { a, b, signed } = self.def.nodes[product].op {
            if signed {
                let width = self.def.nodes[n].width;
                let (x, wide_x) = self.signed_factor(a, width, hint);
                let (y, wide_y) = self.signed_factor(b, width, hint);
                return (format!("{x} * {y}"), wide_x || wide_y);
            }
            // The operands of `*` take the width of the product (context-determined), so an
            // operand that is itself an operation (`-x`, `a ^ b`, ...) would be computed at
            // the wrong width: only names, part-selects of names and constants go inline.
            let x = self.mul_operand(a, hint);
            let y = self.mul_operand(b, hint);
            return (format!("{x} * {y}"), false);
        }
        (self.inline(n, hint).0, false)
    }

    /// The product `n` is the low bits of, if `n` is such a part-select, the only reader of
    /// that product, and at least as wide as both factors: Verilog computes a product at
    /// the width of its context, so printed as the whole right-hand side of an assignment of
    /// `n`'s width it gives exactly those bits (and a simulator computes a 32-bit slice of a
    /// 33-bit product in one machine word).
    fn truncated_product(&self, n: NodeId) -> Option<NodeId> {
        let node = &self.def.nodes[n];
        let Op::Slice(m, 0) = node.op else {
            return None;
        };
        let Op::Mul { a, b, .. } = self.def.nodes[m].op else {
            return None;
        };
        let w = node.width;
        let fits = w < self.def.nodes[m].width
            && w >= self.def.nodes[a].width
            && w >= self.def.nodes[b].width;
        (fits && self.fanout[m] == 1 && !self.ident.contains_key(&m)).then_some(m)
    }

    /// Root of a register's next value, a wire's or an output's driver: like `rhs`, and for
    /// a shared node whose value the target will hold, later uses read the target.
    fn root(&mut self, n: NodeId, hint: &str, alias: Option<&str>) -> (String, bool) {
        let shared = self.fanout[n] > 1 && !self.trivial(n);
        if alias.is_none() && shared {
            // Used elsewhere too: print it once, into a wire.
            return (self.expr(n, hint).0, false);
        }
        let text = self.rhs(n, hint);
        if let Some(a) = alias {
            if !self.ident.contains_key(&n) && shared {
                self.ident.insert(n, a.to_string());
            }
        }
        text
    }

    /// `n` as an operand: its text, parenthesized unless atomic.
    fn operand(&mut self, n: NodeId, hint: &str) -> String {
        let (s, p) = self.expr(n, hint);
        if p == Prec::Atom {
            s
        } else {
            format!("({s})")
        }
    }

    fn expr(&mut self, n: NodeId, hint: &str) -> (String, Prec) {
        if let Some(name) = self.ident.get(&n).cloned() {
            self.use_all(&name);
            return (name, Prec::Atom);
        }
        let shared = self.fanout[n] > 1 && !self.trivial(n);
        if shared
            || matches!(self.def.nodes[n].op, Op::Mul { .. })
            || self.truncated_product(n).is_some()
        {
            let name = self.hoist(n, hint);
            self.use_all(&name);
            return (name, Prec::Atom);
        }
        self.inline(n, hint)
    }

    /// An operand of a product: a name, a part-select of a name or a constant.
    fn mul_operand(&mut self, n: NodeId, hint: &str) -> String {
        let simple = match &self.def.nodes[n].op {
            Op::Ref(_) | Op::Const(_) => true,
            Op::Slice(b, _) => matches!(self.def.nodes[*b].op, Op::Ref(_)),
            _ => false,
        };
        if simple || self.ident.contains_key(&n) {
            self.expr(n, hint).0
        } else {
            let name = self.ident_of(n, hint);
            self.use_all(&name);
            name
        }
    }

    /// A plain identifier holding the value of `n` (for part-selects).
    fn ident_of(&mut self, n: NodeId, hint: &str) -> String {
        if let Some(name) = self.ident.get(&n) {
            return name.clone();
        }
        let node = &self.def.nodes[n];
        match node.op {
            Op::Ref(s) => self.def.signals[s].name.clone(),
            Op::Slice(b, 0) if self.def.nodes[b].width == node.width => self.ident_of(b, hint),
            _ => self.hoist(n, hint),
        }
    }

    fn inline(&mut self, n: NodeId, hint: &str) -> (String, Prec) {
        let node = self.def.nodes[n].clone();
        match &node.op {
            Op::Ref(s) => {
                let name = self.def.signals[*s].name.clone();
                self.use_all(&name);
                (name, Prec::Atom)
            }
            Op::Const(b) => (b.verilog(), Prec::Atom),
            Op::Not(a) => (format!("~{}", self.operand(*a, hint)), Prec::Other),
            Op::Neg(a) => (format!("-{}", self.operand(*a, hint)), Prec::Other),
            Op::Bin(op, a, b) => {
                let (x, px) = self.expr(*a, hint);
                // Left-associative chains need no parentheses on the left.
                let assoc = matches!(
                    (op, px),
                    (BinOp::Add | BinOp::Sub, Prec::Bin(BinOp::Add | BinOp::Sub))
                        | (BinOp::And, Prec::Bin(BinOp::And))
                        | (BinOp::Or, Prec::Bin(BinOp::Or))
                        | (BinOp::Xor, Prec::Bin(BinOp::Xor))
                        | (_, Prec::Atom)
                );
                let x = if assoc { x } else { format!("({x})") };
                let y = self.operand(*b, hint);
                // Long chains continue on the next line.
                let last_line = x.rsplit('\n').next().unwrap_or("").len();
                let sep = if last_line + y.len() > LINE {
                    "\n     "
                } else {
                    ""
                };
                (format!("{x}{sep} {} {y}", op.symbol()), Prec::Bin(*op))
            }
            Op::Mul { .. } => {
                let name = self.hoist(n, hint);
                self.use_all(&name);
                (name, Prec::Atom)
            }
            Op::Cmp(op, a, b, signed) => {
                let ordered = !matches!(op, CmpOp::Eq | CmpOp::Ne);
                if *signed && ordered {
                    let (x, _) = self.expr(*a, hint);
                    let (y, _) = self.expr(*b, hint);
                    (
                        format!("$signed({x}) {} $signed({y})", op.symbol()),
                        Prec::Other,
                    )
                } else {
                    let x = self.operand(*a, hint);
                    let y = self.operand(*b, hint);
                    (format!("{x} {} {y}", op.symbol()), Prec::Other)
                }
            }
            Op::Shift(op, a, amt) => {
                let k = match amt {
                    Amount::Const(k) => k.to_string(),
                    Amount::Dyn(s) => self.operand(*s, hint),
                };
                match op {
                    ShiftOp::Shl => (format!("{} << {k}", self.operand(*a, hint)), Prec::Other),
                    ShiftOp::Shr => (format!("{} >> {k}", self.operand(*a, hint)), Prec::Other),
                    ShiftOp::Sra => {
                        let (x, _) = self.expr(*a, hint);
                        (format!("$unsigned($signed({x}) >>> {k})"), Prec::Atom)
                    }
                }
            }
            Op::Slice(b, lo) => {
                if *lo == 0 && self.def.nodes[*b].width == node.width {
                    // A reinterpretation (signedness change): same text.
                    return self.expr(*b, hint);
                }
                let id = self.ident_of(*b, hint);
                self.use_bits(&id, *lo, node.width);
                if node.width == 1 {
                    (format!("{id}[{lo}]"), Prec::Atom)
                } else {
                    (format!("{id}[{}:{lo}]", lo + node.width - 1), Prec::Atom)
                }
            }
            Op::Concat(parts) => {
                let texts: Vec<String> = parts.iter().map(|p| self.expr(*p, hint).0).collect();
                // Fill lines up to about LINE characters.
                let mut out = String::from("{");
                let mut col = 1;
                for (i, t) in texts.iter().enumerate() {
                    if i > 0 {
                        let first = t.split('\n').next().unwrap_or("").len();
                        if col + first + 2 > LINE {
                            out.push_str(",\n      ");
                            col = 6;
                        } else {
                            out.push_str(", ");
                            col += 2;
                        }
                    }
                    out.push_str(t);
                    col = match t.rfind('\n') {
                        Some(k) => t.len() - k,
                        None => col + t.len(),
                    };
                }
                out.push('}');
                (out, Prec::Atom)
            }
            Op::Repeat(a, k) => {
                let (x, _) = self.expr(*a, hint);
                (format!("{{{k}{{{x}}}}}"), Prec::Atom)
            }
            Op::Mux { c, t, f } => {
                let cs = self.operand(*c, hint);
                let ts = self.operand(*t, hint);
                let (fs, pf) = self.expr(*f, hint);
                let fs = if matches!(pf, Prec::Atom | Prec::Mux) {
                    fs
                } else {
                    format!("({fs})")
                };
                (format!("{cs} ? {ts} : {fs}"), Prec::Mux)
            }
            Op::Reduce(op, a) => {
                let sym = match op {
                    RedOp::And => "&",
                    RedOp::Or => "|",
                    RedOp::Xor => "^",
                };
                (format!("{sym}{}", self.operand(*a, hint)), Prec::Other)
            }
        }
    }

    fn reset_cond(&self) -> String {
        if self.def.cr.reset_active_low {
            format!("!{}", self.def.cr.reset)
        } else {
            self.def.cr.reset.clone()
        }
    }

    /// The comment for a `lint_off UNUSEDSIGNAL` around `name`'s declaration, if some of
    /// its bits are not read: which bits, and why (`reason` from `allow_unused`, else
    /// `what`).
    fn unused_comment(&self, name: &str, reason: Option<&str>, what: &str) -> Option<String> {
        let used = self.used.get(name)?;
        if used.iter().all(|&u| u) {
            return None;
        }
        let bits = describe_bits(used, false);
        let why = match reason {
            Some(r) => r.to_string(),
            None => what.to_string(),
        };
        Some(format!("{bits} not read: {why}"))
    }
}

fn lint_wrap(out: &mut String, indent: &str, comment: Option<String>, line: &str) {
    match comment {
        None => {
            let _ = writeln!(out, "{indent}{line}");
        }
        Some(c) => {
            let _ = writeln!(out, "{indent}// {c}");
            let _ = writeln!(out, "{indent}/* verilator lint_off UNUSEDSIGNAL */");
            let _ = writeln!(out, "{indent}{line}");
            let _ = writeln!(out, "{indent}/* verilator lint_on UNUSEDSIGNAL */");
        }
    }
}

/// Everything after `module <name> `: the port list, declarations, statements and
/// `endmodule`. Identical bodies mean identical modules.
fn print_body(def: &ModuleDef, child_names: &[String]) -> String {
    let mut p = Printer::new(def);

    // Roots, in print order.
    let mut roots = vec![];
    for a in &def.assigns {
        roots.push(a.value);
    }
    for n in &def.nexts {
        roots.push(n.value);
        roots.extend(n.enable);
    }
    for m in &def.mems {
        if m.reads.iter().all(|r| !def.live[r.data]) {
            continue;
        }
        for w in &m.writes {
            roots.extend([w.enable, w.addr, w.data]);
        }
        for r in m.reads.iter().filter(|r| def.live[r.data]) {
            roots.push(r.addr);
            roots.extend(r.enable);
        }
    }
    for i in &def.insts {
        for c in &i.conns {
            roots.push(c.value);
        }
    }
    p.count_fanout(&roots);

    // Continuous assignments of wires and outputs.
    for a in &def.assigns {
        let name = def.signals[a.target].name.clone();
        let (rhs, waive) = p.root(a.value, &name, Some(&name));
        p.assigns.push((None, format!("{name} = {rhs};"), waive));
    }

    // Register next values (printed later inside always blocks).
    struct RegStmt {
        name: String,
        reset: Option<Bits>,
        value: String,
        /// The value needs [`signed_product::width_waived`].
        waive: bool,
        enable: Option<String>,
        /// An enable `outer & inner` whose `outer` is a named signal, printed apart: see
        /// `guarded_runs`.
        split: Option<(String, String)>,
        /// Generated signals computed only for this register (name, width, assignment), in
        /// dependency order.
        locals: Vec<(String, u32, String)>,
    }
    let mut reg_stmts = vec![];
    for (k, n) in def.nexts.iter().enumerate() {
        let sig = &def.signals[n.reg];
        let hint = format!("{}_next", sig.name);
        p.reader = Reader::Reg(k);
        let (value, waive) = p.root(n.value, &hint, None);
        p.reader = Reader::Other;
        // `outer & inner` with `outer` a named signal, unless the AND is itself shared
        // (then it prints as a wire of its own).
        let split = n.enable.and_then(|e| match p.def.nodes[e].op {
            Op::Bin(BinOp::And, a, b)
                if p.fanout[e] == 1
                    && !p.ident.contains_key(&e)
                    && matches!(p.def.nodes[a].op, Op::Ref(_)) =>
            {
                Some((a, b))
            }
            _ => None,
        });
        let enable = n.enable.map(|e| p.expr(e, &hint).0);
        let split = split.map(|(a, b)| (p.expr(a, &hint).0, p.expr(b, &hint).0));
        let reset = match &sig.kind {
            SigKind::Reg { reset } => reset.clone(),
            _ => unreachable!(),
        };
        reg_stmts.push(RegStmt {
            name: sig.name.clone(),
            reset,
            value,
            waive,
            enable,
            split,
            locals: vec![],
        });
    }

    // Memory ports.
    let mut mem_blocks = vec![];
    for m in &def.mems {
        let reads: Vec<&ReadPort> = m.reads.iter().filter(|r| def.live[r.data]).collect();
        if reads.is_empty() {
            continue;
        }
        let mut block = String::new();
        let w = &m.writes[0];
        let lanes = def.nodes[w.enable].width;
        let addr = p.expr(w.addr, &format!("{}_waddr", m.name)).0;
        let _ = writeln!(block, "  always @(posedge {}) begin", def.cr.clock);
        if lanes == 1 {
            let en = p.expr(w.enable, &format!("{}_we", m.name)).0;
            let data = p.expr(w.data, &format!("{}_wdata", m.name)).0;
            let _ = writeln!(block, "    if ({en}) begin");
            let _ = writeln!(block, "      {}[{addr}] <= {data};", m.name);
            let _ = writeln!(block, "    end");
        } else {
            let en = p.ident_of(w.enable, &format!("{}_we", m.name));
            p.use_all(&en);
            let data = p.ident_of(w.data, &format!("{}_wdata", m.name));
            p.use_all(&data);
            let lw = m.width / lanes;
            for l in 0..lanes {
                let (hi, lo) = (l * lw + lw - 1, l * lw);
                let sel = if lw == 1 {
                    format!("[{lo}]")
                } else {
                    format!("[{hi}:{lo}]")
                };
                let _ = writeln!(
                    block,
                    "    if ({en}[{l}]) {}[{addr}]{sel} <= {data}{sel};",
                    m.name
                );
            }
        }
        let _ = writeln!(block, "  end");
        for r in reads {
            let dname = &def.signals[r.data].name;
            let raddr = p.expr(r.addr, &format!("{dname}_addr")).0;
            let _ = writeln!(block, "  always @(posedge {}) begin", def.cr.clock);
            match r.enable {
                Some(e) => {
                    let en = p.expr(e, &format!("{dname}_en")).0;
                    let _ = writeln!(block, "    if ({en}) begin");
                    let _ = writeln!(block, "      {dname} <= {}[{raddr}];", m.name);
                    let _ = writeln!(block, "    end");
                }
                None => {
                    let _ = writeln!(block, "    {dname} <= {}[{raddr}];", m.name);
                }
            }
            let _ = writeln!(block, "  end");
        }
        mem_blocks.push(block);
    }

    // Instances.
    let mut inst_texts = vec![];
    let mut extra_wires: Vec<(String, u32, String)> = vec![];
    for (ii, inst) in def.insts.iter().enumerate() {
        let child = &inst.module;
        let mut conns: Vec<(String, String)> = vec![];
        for (pi, port) in child.ports().iter().enumerate() {
            let text = match port.role {
                PortRole::Clock => def.cr.clock.clone(),
                PortRole::Reset { active_low } => {
                    if active_low == def.cr.reset_active_low {
                        def.cr.reset.clone()
                    } else {
                        format!("~{}", def.cr.reset)
                    }
                }
                PortRole::Data if port.dir == Dir::Input => {
                    let c = inst.conns.iter().find(|c| c.port == pi).expect("checked");
                    let want = format!("{}_{}", inst.name, port.name);
                    if p.ident.contains_key(&c.value) || p.trivial(c.value) {
                        p.expr(c.value, &want).0
                    } else {
                        let name = p.exact_or_fresh(&want);
                        let name = p.hoist_as(c.value, name, &want);
                        p.use_all(&name);
                        name
                    }
                }
                PortRole::Data => {
                    let existing = inst
                        .outs
                        .iter()
                        .find(|(po, s)| *po == pi && def.live[*s])
                        .map(|(_, s)| def.signals[*s].name.clone());
                    match existing {
                        Some(n) => n,
                        None => {
                            let want = format!("{}_{}", inst.name, port.name);
                            let name = p.exact_or_fresh(&want);
                            p.used
                                .insert(name.clone(), vec![false; port.width as usize]);
                            extra_wires.push((
                                name.clone(),
                                port.width,
                                format!("output of `{}` not used here", inst.name),
                            ));
                            name
                        }
                    }
                }
            };
            conns.push((port.name.clone(), text));
        }
        let mut t = String::new();
        let _ = writeln!(t, "  {} {} (", child_names[ii], inst.name);
        let width = conns.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (k, (n, v)) in conns.iter().enumerate() {
            let comma = if k + 1 < conns.len() { "," } else { "" };
            let _ = writeln!(t, "    .{n:<width$} ({v}){comma}");
        }
        let _ = writeln!(t, "  );");
        inst_texts.push(t);
    }

    // Generated signals only an enabled register reads move into its `if (enable)`.
    let enabled: Vec<bool> = reg_stmts.iter().map(|r| r.enable.is_some()).collect();
    let owners = p.owners(&enabled);
    let mut assigns = vec![];
    let width_of: HashMap<usize, (String, u32)> = p
        .temps
        .iter()
        .map(|t| (t.id, (t.name.clone(), t.width)))
        .collect();
    for (id, text, waive) in std::mem::take(&mut p.assigns) {
        // Locals and assignments are printed two spaces in.
        let waived = |line: String| {
            if waive {
                signed_product::width_waived(&line, "  ")
            } else {
                line
            }
        };
        match id.and_then(|id| owners[id].map(|k| (id, k))) {
            Some((id, k)) => {
                let (name, width) = width_of[&id].clone();
                reg_stmts[k].locals.push((name, width, waived(text)));
            }
            None => assigns.push(waived(format!("assign {text}"))),
        }
    }

    // ---- assemble ------------------------------------------------------------------------
    let mut out = String::new();
    out.push_str("(\n");
    let rw = def
        .ports
        .iter()
        .map(|p| range(p.width).len())
        .max()
        .unwrap_or(0);
    for (k, (port, &s)) in def.ports.iter().zip(&def.port_sigs).enumerate() {
        let comma = if k + 1 < def.ports.len() { "," } else { "" };
        let dir = match port.dir {
            Dir::Input => "input ",
            Dir::Output => "output",
        };
        let r = if rw == 0 {
            String::new()
        } else {
            format!("{:<rw$} ", range(port.width))
        };
        let sign = if port.signed { "  // signed" } else { "" };
        let line = format!("{dir} wire {r}{}{comma}{sign}", port.name);
        let comment = if port.dir == Dir::Input {
            let sig = &def.signals[s];
            p.unused_comment(&sig.name, sig.unused_reason.as_deref(), "unused input")
        } else {
            None
        };
        lint_wrap(&mut out, "  ", comment, line.trim_end());
    }
    out.push_str(");\n");

    // Declarations: live registers, wires, memories and their read data, instance outputs,
    // then generated wires.
    let mut decls = String::new();
    for (s, sig) in def.signals.iter().enumerate() {
        if !def.live[s] {
            continue;
        }
        let (kw, what) = match sig.kind {
            SigKind::Wire => ("wire", "only part of this value is needed"),
            SigKind::Reg { .. } => ("reg", "only part of this register is needed"),
            SigKind::MemData { .. } => ("reg", "only part of the memory word is needed"),
            SigKind::InstOut { .. } => ("wire", "only part of this instance output is needed"),
            _ => continue,
        };
        if let SigKind::MemData { mem, port } = sig.kind {
            if port == 0 {
                let m = &def.mems[mem];
                let style = if m.distributed {
                    "(* ram_style = \"distributed\" *) "
                } else {
                    ""
                };
                let _ = writeln!(
                    decls,
                    "  {style}reg {}{} [0:{}];",
                    range_sp(m.width),
                    m.name,
                    m.depth - 1
                );
            }
        }
        let sign = if sig.signed { "  // signed" } else { "" };
        let line = format!("{kw} {}{};{sign}", range_sp(sig.width), sig.name);
        let comment = p.unused_comment(&sig.name, sig.unused_reason.as_deref(), what);
        lint_wrap(&mut decls, "  ", comment, &line);
    }
    for (name, width, why) in &extra_wires {
        let line = format!("wire {}{name};", range_sp(*width));
        let comment = p.unused_comment(name, Some(why), why);
        lint_wrap(&mut decls, "  ", comment, &line);
    }
    for t in &p.temps {
        let kw = if owners[t.id].is_some() {
            "reg"
        } else {
            "wire"
        };
        let line = format!("{kw} {}{};", range_sp(t.width), t.name);
        let comment = p.unused_comment(&t.name, None, "generated wire; the rest is not needed");
        lint_wrap(&mut decls, "  ", comment, &line);
    }
    let mut sections: Vec<String> = vec![];
    if !decls.is_empty() {
        sections.push(decls);
    }
    if !assigns.is_empty() {
        let mut s = String::new();
        for a in &assigns {
            let _ = writeln!(s, "  {a}");
        }
        sections.push(s);
    }
    for t in inst_texts {
        sections.push(t);
    }
    let with_reset: Vec<&RegStmt> = reg_stmts.iter().filter(|r| r.reset.is_some()).collect();
    let without: Vec<&RegStmt> = reg_stmts.iter().filter(|r| r.reset.is_none()).collect();
    // A register's own generated signals are first set to zero, unconditionally, so that
    // Verilator sees them written before any read and makes them C++ locals (which the
    // compiler keeps in registers); they are computed when the register loads.
    let defaults = |regs: &[&RegStmt], indent: &str| -> String {
        let mut s = String::new();
        for r in regs {
            for (name, width, _) in &r.locals {
                let _ = writeln!(s, "{indent}{name} = {};", Bits::zero(*width).verilog());
            }
        }
        if s.is_empty() {
            s
        } else {
            format!("{indent}/* verilator lint_off BLKSEQ */\n{s}{indent}/* verilator lint_on BLKSEQ */\n")
        }
    };
    // The assignment line (with the enable when it needs no block), under its own WIDTH
    // waiver if it has one.
    let line = |r: &RegStmt, prefix: &str, indent: &str| -> String {
        let line = format!("{prefix}{} <= {};", r.name, r.value);
        if r.waive {
            format!("{indent}{}\n", signed_product::width_waived(&line, indent))
        } else {
            format!("{indent}{line}\n")
        }
    };
    let stmt = |r: &RegStmt, indent: &str| -> String {
        let line = |prefix: &str, indent: &str| line(r, prefix, indent);
        match &r.enable {
            Some(e) if !r.locals.is_empty() => {
                let mut s = format!("{indent}if ({e}) begin\n");
                let _ = writeln!(s, "{indent}  /* verilator lint_off BLKSEQ */");
                for (_, _, l) in &r.locals {
                    let l = l.replace('\n', &format!("\n{indent}"));
                    let _ = writeln!(s, "{indent}  {l}");
                }
                let _ = writeln!(s, "{indent}  /* verilator lint_on BLKSEQ */");
                s.push_str(&line("", &format!("{indent}  ")));
                let _ = writeln!(s, "{indent}end");
                s
            }
            Some(e) => line(&format!("if ({e}) "), indent),
            None => line("", indent),
        }
    };
    // Registers in a row whose enables are `outer & inner_k` with the same named `outer`
    // print under one `if (outer)`: the same logic, and Verilator then tests `outer` once
    // per cycle instead of every `outer & inner_k` (a register-file FIFO's entries: one
    // test instead of one per entry while nothing is pushed). With `own_defaults`, each
    // other register's locals get their defaults right before it.
    let guarded_runs = |regs: &[&RegStmt], indent: &str, own_defaults: bool| -> String {
        let outer = |r: &RegStmt| {
            r.split
                .as_ref()
                .filter(|_| r.locals.is_empty())
                .map(|s| s.0.clone())
        };
        let mut s = String::new();
        let mut i = 0;
        while i < regs.len() {
            let run = outer(regs[i]).map_or(1, |o| {
                regs[i..]
                    .iter()
                    .take_while(|r| outer(r).as_ref() == Some(&o))
                    .count()
            });
            if run >= 2 {
                let (o, _) = regs[i]
                    .split
                    .as_ref()
                    .expect("a run shares an outer enable");
                let _ = writeln!(s, "{indent}if ({o}) begin");
                for r in &regs[i..i + run] {
                    let (_, inner) = r.split.as_ref().expect("a run shares an outer enable");
                    s.push_str(&line(r, &format!("if ({inner}) "), &format!("{indent}  ")));
                }
                let _ = writeln!(s, "{indent}end");
            } else {
                if own_defaults {
                    s.push_str(&defaults(&[regs[i]], indent));
                }
                s.push_str(&stmt(regs[i], indent));
            }
            i += run;
        }
        s
    };
    if !with_reset.is_empty() {
        let mut s = String::new();
        let _ = writeln!(s, "  always @(posedge {}) begin", def.cr.clock);
        s.push_str(&defaults(&with_reset, "    "));
        let _ = writeln!(s, "    if ({}) begin", p.reset_cond());
        for r in &with_reset {
            let _ = writeln!(
                s,
                "      {} <= {};",
                r.name,
                r.reset.as_ref().unwrap().verilog()
            );
        }
        let _ = writeln!(s, "    end else begin");
        s.push_str(&guarded_runs(&with_reset, "      ", false));
        let _ = writeln!(s, "    end");
        let _ = writeln!(s, "  end");
        sections.push(s);
    }
    if !without.is_empty() {
        let mut s = String::new();
        let _ = writeln!(s, "  always @(posedge {}) begin", def.cr.clock);
        s.push_str(&guarded_runs(&without, "    ", true));
        let _ = writeln!(s, "  end");
        sections.push(s);
    }
    sections.extend(mem_blocks);
    for (k, s) in sections.iter().enumerate() {
        if k > 0 {
            out.push('\n');
        }
        out.push_str(s);
    }
    out.push_str("endmodule\n");
    out
}
