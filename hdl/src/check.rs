//! Finishing a module: driver counts, unconnected instance inputs, combinational loops,
//! liveness (logic nothing reads is dropped), per-bit usage (unread input bits are reported,
//! other partially read signals get a commented lint waiver when printed), the implicit
//! clock and reset ports, and each output's combinational dependence on inputs (used when
//! the module is instantiated).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::builder::Data;
use crate::error::{DesignError, Problem};
use crate::ir::*;

fn bit_ranges(used: &[bool], want: bool) -> Vec<(u32, u32)> {
    let mut out = vec![];
    let mut i = 0;
    while i < used.len() {
        if used[i] == want {
            let lo = i;
            while i < used.len() && used[i] == want {
                i += 1;
            }
            out.push((lo as u32, i as u32 - 1));
        } else {
            i += 1;
        }
    }
    out
}

/// Describes the bits of a `width`-bit signal whose `used` flag equals `want`, as in
/// "bits [7:4], [1]" or "all 8 bits".
pub(crate) fn describe_bits(used: &[bool], want: bool) -> String {
    let ranges = bit_ranges(used, want);
    if ranges.len() == 1 && ranges[0] == (0, used.len() as u32 - 1) {
        return if used.len() == 1 {
            "it is".to_string()
        } else {
            format!("all {} bits are", used.len())
        };
    }
    if ranges.len() == 1 && ranges[0].0 == ranges[0].1 {
        return format!("bit {} is", ranges[0].0);
    }
    let list: Vec<String> = ranges
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                format!("[{lo}]")
            } else {
                format!("[{hi}:{lo}]")
            }
        })
        .collect();
    format!("bits {} are", list.join(", "))
}

struct Ctx<'d> {
    d: &'d Data,
    /// Driver expression of each wire/output (when exactly one).
    driver: Vec<Option<NodeId>>,
}

impl Ctx<'_> {
    /// Signals an expression reads combinationally, in first-seen order.
    fn refs(&self, root: NodeId, out: &mut Vec<SigId>, seen: &mut [bool]) {
        let mut stack = vec![root];
        let mut visited = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if !visited.insert(n) {
                continue;
            }
            match &self.d.nodes[n].op {
                Op::Ref(s) => {
                    if !seen[*s] {
                        seen[*s] = true;
                        out.push(*s);
                    }
                }
                op => stack.extend(op.operands()),
            }
        }
    }

    /// The signals `s` depends on combinationally.
    fn comb_deps(&self, s: SigId) -> Vec<SigId> {
        let mut out = vec![];
        let mut seen = vec![false; self.d.signals.len()];
        match &self.d.signals[s].kind {
            SigKind::Wire | SigKind::Output => {
                if let Some(v) = self.driver[s] {
                    self.refs(v, &mut out, &mut seen);
                }
            }
            SigKind::InstOut { inst, port } => {
                let i = &self.d.insts[*inst];
                for &inp in &i.module.0.comb_paths[*port] {
                    for c in i.conns.iter().filter(|c| c.port == inp) {
                        self.refs(c.value, &mut out, &mut seen);
                    }
                }
            }
            _ => {}
        }
        out
    }
}

pub(crate) fn finish(name: String, mut d: Data) -> Result<Module, DesignError> {
    let nsig = d.signals.len();
    let mut problems = vec![];

    // ---- drivers ---------------------------------------------------------------------
    let mut assigns_of: Vec<Vec<&Assign>> = vec![vec![]; nsig];
    for a in &d.assigns {
        assigns_of[a.target].push(a);
    }
    let mut nexts_of: Vec<Vec<&Next>> = vec![vec![]; nsig];
    for n in &d.nexts {
        nexts_of[n.reg].push(n);
    }
    let mut driver = vec![None; nsig];
    for (s, sig) in d.signals.iter().enumerate() {
        let (what, locs): (&'static str, Vec<String>) = match sig.kind {
            SigKind::Wire => (
                "wire",
                assigns_of[s].iter().map(|a| a.loc.to_string()).collect(),
            ),
            SigKind::Output => (
                "output",
                assigns_of[s].iter().map(|a| a.loc.to_string()).collect(),
            ),
            SigKind::Reg { .. } => (
                "register",
                nexts_of[s].iter().map(|a| a.loc.to_string()).collect(),
            ),
            _ => continue,
        };
        match locs.len() {
            0 => problems.push(Problem::Undriven {
                what,
                name: sig.name.clone(),
                hint: if what == "register" {
                    " (give it a value with m.next)"
                } else {
                    " (drive it with m.assign)"
                },
            }),
            1 => {
                if let Some(a) = assigns_of[s].first() {
                    driver[s] = Some(a.value);
                }
            }
            _ => problems.push(Problem::MultipleDrivers {
                what,
                name: sig.name.clone(),
                locations: locs,
            }),
        }
    }
    for inst in &d.insts {
        for (pi, p) in inst.module.ports().iter().enumerate() {
            if p.dir != Dir::Input || p.role != PortRole::Data {
                continue;
            }
            let conns: Vec<&Connection> = inst.conns.iter().filter(|c| c.port == pi).collect();
            match conns.len() {
                0 => problems.push(Problem::Unconnected {
                    instance: inst.name.clone(),
                    module: inst.module.name().to_string(),
                    port: p.name.clone(),
                    location: inst.loc.to_string(),
                }),
                1 => {}
                _ => problems.push(Problem::MultipleDrivers {
                    what: "instance input",
                    name: format!("{}.{}", inst.name, p.name),
                    locations: conns.iter().map(|c| c.loc.to_string()).collect(),
                }),
            }
        }
    }
    for m in &d.mems {
        if m.writes.len() > 1 {
            problems.push(Problem::MultipleDrivers {
                what: "memory write port of",
                name: m.name.clone(),
                locations: m.writes.iter().map(|w| w.loc.to_string()).collect(),
            });
        }
    }
    if !problems.is_empty() {
        return Err(DesignError {
            module: name,
            problems,
        });
    }

    let ctx = Ctx { d: &d, driver };

    // ---- combinational loops ---------------------------------------------------------
    let deps: Vec<Vec<SigId>> = (0..nsig).map(|s| ctx.comb_deps(s)).collect();
    {
        // 0 = unvisited, 1 = on stack, 2 = done
        let mut color = vec![0u8; nsig];
        for start in 0..nsig {
            if color[start] != 0 {
                continue;
            }
            // Iterative DFS keeping the path for the report.
            let mut stack: Vec<(SigId, usize)> = vec![(start, 0)];
            color[start] = 1;
            while let Some(&mut (s, ref mut i)) = stack.last_mut() {
                if *i < deps[s].len() {
                    let t = deps[s][*i];
                    *i += 1;
                    match color[t] {
                        0 => {
                            color[t] = 1;
                            stack.push((t, 0));
                        }
                        1 => {
                            let pos = stack.iter().position(|&(x, _)| x == t).unwrap();
                            let mut path: Vec<String> = stack[pos..]
                                .iter()
                                .rev()
                                .map(|&(x, _)| d.signals[x].name.clone())
                                .collect();
                            // Data flows from each name to the next.
                            path.insert(0, d.signals[t].name.clone());
                            problems.push(Problem::CombLoop { path });
                            color[t] = 2;
                        }
                        _ => {}
                    }
                } else {
                    color[s] = 2;
                    stack.pop();
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(DesignError {
            module: name,
            problems,
        });
    }

    // ---- liveness and bit usage ------------------------------------------------------
    let mut live = vec![false; nsig];
    let mut used_bits: Vec<Vec<bool>> = vec![vec![]; nsig];
    let mut mem_live = vec![false; d.mems.len()];
    let mut visited = vec![false; d.nodes.len()];
    let mut work: Vec<NodeId> = vec![];
    let mut newly_live: Vec<SigId> = vec![];

    let mark = |s: SigId,
                lo: u32,
                w: u32,
                used_bits: &mut Vec<Vec<bool>>,
                live: &mut Vec<bool>,
                newly: &mut Vec<SigId>| {
        if used_bits[s].is_empty() {
            used_bits[s] = vec![false; d.signals[s].width as usize];
        }
        for b in lo..lo + w {
            used_bits[s][b as usize] = true;
        }
        if !live[s] {
            live[s] = true;
            newly.push(s);
        }
    };

    for (s, sig) in d.signals.iter().enumerate() {
        if sig.kind == SigKind::Output {
            live[s] = true;
            newly_live.push(s);
        }
    }
    for inst in &d.insts {
        for c in &inst.conns {
            work.push(c.value);
        }
    }
    loop {
        while let Some(n) = work.pop() {
            if visited[n] {
                continue;
            }
            visited[n] = true;
            let node = &d.nodes[n];
            match &node.op {
                Op::Ref(s) => mark(
                    *s,
                    0,
                    node.width,
                    &mut used_bits,
                    &mut live,
                    &mut newly_live,
                ),
                Op::Slice(base, lo) => {
                    if let Op::Ref(s) = d.nodes[*base].op {
                        mark(
                            s,
                            *lo,
                            node.width,
                            &mut used_bits,
                            &mut live,
                            &mut newly_live,
                        );
                    } else {
                        work.push(*base);
                    }
                }
                op => work.extend(op.operands()),
            }
        }
        let Some(s) = newly_live.pop() else { break };
        match &d.signals[s].kind {
            SigKind::Wire | SigKind::Output => {
                if let Some(v) = ctx.driver[s] {
                    work.push(v);
                }
            }
            SigKind::Reg { .. } => {
                for n in &nexts_of[s] {
                    work.push(n.value);
                    work.extend(n.enable);
                }
            }
            SigKind::MemData { mem, port } => {
                let m = &d.mems[*mem];
                let r = &m.reads[*port];
                work.push(r.addr);
                work.extend(r.enable);
                if !mem_live[*mem] {
                    mem_live[*mem] = true;
                    for w in &m.writes {
                        work.extend([w.enable, w.addr, w.data]);
                    }
                }
            }
            _ => {}
        }
    }
    drop(nexts_of);
    drop(assigns_of);

    for (i, m) in d.mems.iter().enumerate() {
        if mem_live[i] && m.writes.is_empty() {
            problems.push(Problem::MemoryNotWritten {
                name: m.name.clone(),
                location: m.loc.to_string(),
            });
        }
    }
    for (s, sig) in d.signals.iter().enumerate() {
        if sig.kind != SigKind::Input || sig.unused_reason.is_some() {
            continue;
        }
        let used = if used_bits[s].is_empty() {
            vec![false; sig.width as usize]
        } else {
            used_bits[s].clone()
        };
        if used.iter().any(|&u| !u) {
            problems.push(Problem::UnusedInput {
                name: sig.name.clone(),
                bits: describe_bits(&used, false),
            });
        }
    }
    if !problems.is_empty() {
        return Err(DesignError {
            module: name,
            problems,
        });
    }

    // ---- comb paths from inputs to outputs -------------------------------------------
    // For each signal, the input signals it reaches combinationally (memoized DFS; the graph
    // is acyclic now).
    let mut reach: Vec<Option<BTreeSet<SigId>>> = vec![None; nsig];
    fn reach_of(
        s: SigId,
        d: &Data,
        deps: &[Vec<SigId>],
        reach: &mut Vec<Option<BTreeSet<SigId>>>,
    ) -> BTreeSet<SigId> {
        if let Some(r) = &reach[s] {
            return r.clone();
        }
        let mut r = BTreeSet::new();
        if d.signals[s].kind == SigKind::Input {
            r.insert(s);
        }
        for &t in &deps[s] {
            r.extend(reach_of(t, d, deps, reach));
        }
        reach[s] = Some(r.clone());
        r
    }

    // ---- clock, reset, ports ---------------------------------------------------------
    let uses_clock = d.signals.iter().enumerate().any(|(s, sig)| {
        live[s] && matches!(sig.kind, SigKind::Reg { .. } | SigKind::MemData { .. })
    }) || d
        .insts
        .iter()
        .any(|i| i.module.ports().iter().any(|p| p.role == PortRole::Clock));
    let uses_reset = d
        .signals
        .iter()
        .enumerate()
        .any(|(s, sig)| live[s] && matches!(&sig.kind, SigKind::Reg { reset: Some(_) }))
        || d.insts.iter().any(|i| {
            i.module
                .ports()
                .iter()
                .any(|p| matches!(p.role, PortRole::Reset { .. }))
        });

    let mut ports = vec![];
    let mut port_sigs = vec![];
    let mut add_special = |d: &mut Data, kind: SigKind, pname: String, role: PortRole| {
        let sid = d.signals.len();
        d.nodes.push(Node {
            op: Op::Ref(sid),
            width: 1,
            signed: false,
        });
        d.signals.push(Signal {
            name: pname.clone(),
            width: 1,
            signed: false,
            kind,
            node: d.nodes.len() - 1,
            unused_reason: None,
        });
        ports.push(PortInfo {
            name: pname,
            dir: Dir::Input,
            width: 1,
            signed: false,
            role,
        });
        port_sigs.push(sid);
    };
    let mut comb_paths = vec![];
    let declared: Vec<SigId> = d.ports.clone();
    let port_deps: Vec<Vec<SigId>> = declared
        .iter()
        .map(|&s| {
            if d.signals[s].kind == SigKind::Output {
                reach_of(s, &d, &deps, &mut reach).into_iter().collect()
            } else {
                vec![]
            }
        })
        .collect();
    if uses_clock {
        let n = d.cr.clock.clone();
        add_special(&mut d, SigKind::Clock, n, PortRole::Clock);
        comb_paths.push(vec![]);
    }
    if uses_reset {
        let n = d.cr.reset.clone();
        let al = d.cr.reset_active_low;
        add_special(
            &mut d,
            SigKind::Reset,
            n,
            PortRole::Reset { active_low: al },
        );
        comb_paths.push(vec![]);
    }
    let first_declared = ports.len();
    for &s in &declared {
        let sig = &d.signals[s];
        ports.push(PortInfo {
            name: sig.name.clone(),
            dir: if sig.kind == SigKind::Input {
                Dir::Input
            } else {
                Dir::Output
            },
            width: sig.width,
            signed: sig.signed,
            role: PortRole::Data,
        });
        port_sigs.push(s);
    }
    for deps_of_port in &port_deps {
        comb_paths.push(
            deps_of_port
                .iter()
                .map(|inp| first_declared + declared.iter().position(|x| x == inp).unwrap())
                .collect(),
        );
    }
    live.resize(d.signals.len(), true);

    // ---- keep only live drivers --------------------------------------------------------
    let assigns: Vec<Assign> = d
        .assigns
        .iter()
        .filter(|a| live[a.target])
        .cloned()
        .collect();
    let nexts: Vec<Next> = d.nexts.iter().filter(|n| live[n.reg]).cloned().collect();
    let mut mems = d.mems.clone();
    for (i, m) in mems.iter_mut().enumerate() {
        if !mem_live[i] {
            m.reads.clear();
            m.writes.clear();
        }
    }

    Ok(Module(Arc::new(ModuleDef {
        name,
        cr: d.cr.clone(),
        signals: d.signals,
        nodes: d.nodes,
        assigns,
        nexts,
        mems,
        insts: d.insts,
        ports,
        port_sigs,
        comb_paths,
        live,
        verbatim: None,
    })))
}
