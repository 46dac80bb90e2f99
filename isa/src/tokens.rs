//! Dependency-token routing (spec section 5.2) as one table: which queue each of the four
//! flags of an instruction pops or pushes on each module. The functional simulator, the RTL
//! monitors, the hardware's sequencers and the program builder all read it from here.

use std::fmt;

use crate::insn::{DepFlags, Module};
use crate::layout::Field;

/// The four dependency-token queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Queue {
    /// load -> compute ("data loaded").
    L2g = 0,
    /// compute -> load ("INP/WGT buffer free").
    G2l = 1,
    /// compute -> store ("results ready").
    G2s = 2,
    /// store -> compute ("OUT buffer drained").
    S2g = 3,
}

impl Queue {
    /// In the spec's order (also the order of their indices).
    pub const ALL: [Queue; 4] = [Queue::L2g, Queue::G2l, Queue::G2s, Queue::S2g];

    pub fn name(self) -> &'static str {
        match self {
            Queue::L2g => "l2g",
            Queue::G2l => "g2l",
            Queue::G2s => "g2s",
            Queue::S2g => "s2g",
        }
    }

    /// The module that pushes this queue (from [`ROUTES`]).
    pub fn from(self) -> Module {
        self.end(true)
    }

    /// The module that pops this queue (from [`ROUTES`]).
    pub fn to(self) -> Module {
        self.end(false)
    }

    fn end(self, push: bool) -> Module {
        Module::ALL
            .into_iter()
            .find(|&m| {
                DepFlag::ALL
                    .into_iter()
                    .any(|f| f.is_push() == push && route(m, f) == Some(self))
            })
            .expect("every queue has both ends in ROUTES")
    }

    /// The queue that carries tokens from `from` to `to`, if the two are adjacent.
    pub fn between(from: Module, to: Module) -> Option<Queue> {
        Queue::ALL
            .into_iter()
            .find(|q| q.from() == from && q.to() == to)
    }
}

impl fmt::Display for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One of the four dependency flags every instruction carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DepFlag {
    PopPrev = 0,
    PopNext = 1,
    PushPrev = 2,
    PushNext = 3,
}

impl DepFlag {
    /// In the order of their fields in every instruction.
    pub const ALL: [DepFlag; 4] = [
        DepFlag::PopPrev,
        DepFlag::PopNext,
        DepFlag::PushPrev,
        DepFlag::PushNext,
    ];

    /// The name used in assembly and messages (`pop_prev`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DepFlag::PopPrev => "pop_prev",
            DepFlag::PopNext => "pop_next",
            DepFlag::PushPrev => "push_prev",
            DepFlag::PushNext => "push_next",
        }
    }

    pub fn is_push(self) -> bool {
        matches!(self, DepFlag::PushPrev | DepFlag::PushNext)
    }

    /// The instruction field holding the flag.
    pub fn field(self) -> Field {
        match self {
            DepFlag::PopPrev => Field::PopPrevDep,
            DepFlag::PopNext => Field::PopNextDep,
            DepFlag::PushPrev => Field::PushPrevDep,
            DepFlag::PushNext => Field::PushNextDep,
        }
    }
}

impl fmt::Display for DepFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl DepFlags {
    pub fn get(&self, flag: DepFlag) -> bool {
        match flag {
            DepFlag::PopPrev => self.pop_prev,
            DepFlag::PopNext => self.pop_next,
            DepFlag::PushPrev => self.push_prev,
            DepFlag::PushNext => self.push_next,
        }
    }

    pub fn set(&mut self, flag: DepFlag, on: bool) {
        match flag {
            DepFlag::PopPrev => self.pop_prev = on,
            DepFlag::PopNext => self.pop_next = on,
            DepFlag::PushPrev => self.push_prev = on,
            DepFlag::PushNext => self.push_next = on,
        }
    }
}

/// The routing table: for each module (in [`Module::ALL`] order), for each flag (in
/// [`DepFlag::ALL`] order), the queue it pops or pushes; `None` marks a flag that is illegal
/// on that module.
pub const ROUTES: [[Option<Queue>; 4]; 3] = {
    use Queue::*;
    [
        // load:    pop_prev, pop_next,  push_prev, push_next
        [None, Some(G2l), None, Some(L2g)],
        // compute
        [Some(L2g), Some(S2g), Some(G2l), Some(G2s)],
        // store
        [Some(G2s), None, Some(S2g), None],
    ]
};

/// The queue `flag` pops or pushes on `module`, or `None` if the flag is illegal there.
pub fn route(module: Module, flag: DepFlag) -> Option<Queue> {
    ROUTES[module as usize][flag as usize]
}

/// The flags `module` may carry with their queues: pops first, then pushes.
pub fn legal_flags(module: Module) -> impl Iterator<Item = (DepFlag, Queue)> {
    DepFlag::ALL
        .into_iter()
        .filter_map(move |f| route(module, f).map(|q| (f, q)))
}

/// The queues `deps` pops before the instruction starts and pushes after it completes on
/// `module`; the error is the first flag that is illegal there.
pub fn queues(module: Module, deps: &DepFlags) -> Result<(Vec<Queue>, Vec<Queue>), DepFlag> {
    let (mut pops, mut pushes) = (Vec::new(), Vec::new());
    for flag in DepFlag::ALL.into_iter().filter(|&f| deps.get(f)) {
        let q = route(module, flag).ok_or(flag)?;
        if flag.is_push() {
            pushes.push(q);
        } else {
            pops.push(q);
        }
    }
    Ok((pops, pushes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_discriminants_index_the_table() {
        for (i, m) in Module::ALL.into_iter().enumerate() {
            assert_eq!(m as usize, i);
        }
        for (i, f) in DepFlag::ALL.into_iter().enumerate() {
            assert_eq!(f as usize, i);
        }
        for (i, q) in Queue::ALL.into_iter().enumerate() {
            assert_eq!(q as usize, i);
        }
    }

    #[test]
    fn every_queue_is_pushed_once_and_popped_once_between_adjacent_modules() {
        for q in Queue::ALL {
            let ends: Vec<(Module, DepFlag)> = Module::ALL
                .into_iter()
                .flat_map(|m| DepFlag::ALL.into_iter().map(move |f| (m, f)))
                .filter(|&(m, f)| route(m, f) == Some(q))
                .collect();
            assert_eq!(ends.len(), 2, "{q}: {ends:?}");
            let push = ends.iter().find(|e| e.1.is_push()).expect("a pusher");
            let pop = ends.iter().find(|e| !e.1.is_push()).expect("a popper");
            assert_eq!((push.0, pop.0), (q.from(), q.to()));
            assert_eq!(
                (q.from() as i32 - q.to() as i32).abs(),
                1,
                "{q} skips a module"
            );
            // "next" flags point down the pipeline load -> compute -> store.
            let down = q.to() > q.from();
            assert_eq!(push.1 == DepFlag::PushNext, down, "{q}");
            assert_eq!(pop.1 == DepFlag::PopPrev, down, "{q}");
            assert_eq!(Queue::between(q.from(), q.to()), Some(q));
        }
        assert_eq!(Queue::between(Module::Load, Module::Store), None);
    }

    #[test]
    fn routes_match_the_spec_table() {
        // spec.rs, section 5.2, read row by row.
        let spec = [
            ("load", ["illegal", "g2l", "illegal", "l2g"]),
            ("compute", ["l2g", "s2g", "g2l", "g2s"]),
            ("store", ["g2s", "illegal", "s2g", "illegal"]),
        ];
        for (m, (name, row)) in Module::ALL.into_iter().zip(spec) {
            assert_eq!(m.name(), name);
            for (f, want) in DepFlag::ALL.into_iter().zip(row) {
                assert_eq!(
                    route(m, f).map_or("illegal", Queue::name),
                    want,
                    "{name} {f}"
                );
            }
        }
    }

    #[test]
    fn queues_of_an_instruction_and_its_illegal_flag() {
        let mut d = DepFlags::NONE;
        d.set(DepFlag::PopPrev, true);
        d.set(DepFlag::PushNext, true);
        assert_eq!(
            queues(Module::Compute, &d),
            Ok((vec![Queue::L2g], vec![Queue::G2s]))
        );
        assert_eq!(queues(Module::Load, &d), Err(DepFlag::PopPrev));
        assert_eq!(queues(Module::Store, &d), Err(DepFlag::PushNext));
        for f in DepFlag::ALL {
            let mut one = DepFlags::NONE;
            one.set(f, true);
            assert!(one.get(f) && DepFlag::ALL.iter().filter(|&&g| one.get(g)).count() == 1);
        }
    }
}
