//! The instruction sequencer shared by the load, compute and store modules: take the next
//! instruction from the module's command queue, pop its tokens, run it, push its tokens
//! (spec section 5.3).
//!
//! ```text
//!   IDLE --queue head's popped queues all non-empty: take it, pop--> EXEC
//!   EXEC --done, pushed queues all below capacity: push--> IDLE
//!   EXEC --done, a pushed queue full--> PUSH --all below capacity: push--> IDLE
//! ```
//!
//! The pops of an instruction happen together, in the cycle it leaves the queue, before it
//! starts; its pushes together, after it completes; only then is the next instruction
//! taken. In EXEC the module starts its work with `launch` (a pulse, when `can_launch`
//! allows) and says when the work is complete with `done` (which may be high in the launch
//! cycle itself for work that completes at once). An instruction without tokens takes two
//! cycles of sequencing. A module may take over an instruction's pushes ([`Deferral`]): the
//! sequencer then retires it without pushing, and the module pushes its tokens later.

use hdl::{ModuleBuilder, Sig};
use isa::layout::{Codec, Field, INSN_BITS};

/// Pushes a module makes itself (the compute shell's deferred pushes): while `defer` is high
/// the instruction in EXEC retires without the sequencer pushing its tokens, and each
/// `(flag, pulse)` pushes the flag's queue besides the sequencer's own pushes (the module
/// never pulses it in a cycle in which the sequencer pushes that queue).
pub(crate) struct Deferral<'a> {
    pub defer: Sig<'a>,
    pub pushes: Vec<(Field, Sig<'a>)>,
}

use crate::util::flag;

/// The sequencer's signals, for the module that owns it.
pub(crate) struct Sequencer<'a> {
    /// The instruction being executed (held from IDLE until the next one is taken).
    pub insn: Sig<'a>,
    /// High in EXEC.
    pub in_exec: Sig<'a>,
    /// One-cycle pulse in EXEC when the work starts.
    pub launch: Sig<'a>,
    /// The work has started (high in EXEC after `launch`).
    pub launched: Sig<'a>,
    /// One-cycle pulse when the work is complete (leaving EXEC).
    pub retire: Sig<'a>,
    /// An instruction is in progress (not IDLE).
    pub busy: Sig<'a>,
    /// Waiting on a token: a popped queue empty or a pushed queue full.
    pub stall: Sig<'a>,
    /// The state register ([`IDLE`], [`EXEC`] or [`PUSH`]), for the debug outputs.
    pub state: Sig<'a>,
    /// In IDLE with an instruction at the head of the queue whose popped queues are not all
    /// non-empty.
    pub waiting_pop: Sig<'a>,
    /// Per push flag legal on the unit, the `<queue>_can_push` input.
    pub can_push: Vec<(Field, Sig<'a>)>,
}

/// Sequencer state: no instruction in progress.
pub(crate) const IDLE: u64 = 0;
/// Sequencer state: the instruction's work is in progress.
pub(crate) const EXEC: u64 = 1;
/// Sequencer state: the work is complete; waiting for room in a pushed queue.
pub(crate) const PUSH: u64 = 2;

/// Builds the sequencer of `unit` in `m`: declares the queue ports `q_valid`, `q_ready`,
/// `q_data`, and for each flag legal on `unit` (`isa::tokens`) the ports `<queue>_can_pop` /
/// `<queue>_pop` of a pop, `<queue>_can_push` / `<queue>_push` of a push. Illegal flags are
/// ignored (spec 5.2). `can_launch` and `done` are wires the caller drives (they may depend
/// on the returned signals), as are the signals of `deferral`.
pub(crate) fn sequencer<'a>(
    m: &'a ModuleBuilder,
    codec: &Codec,
    unit: isa::Module,
    can_launch: Sig<'a>,
    done: Sig<'a>,
    deferral: Option<Deferral<'a>>,
) -> Sequencer<'a> {
    let ports = |push: bool| -> Vec<(Field, &str)> {
        isa::tokens::legal_flags(unit)
            .filter(|(f, _)| f.is_push() == push)
            .map(|(f, q)| (f.field(), q.name()))
            .collect()
    };
    let (pops, pushes) = (ports(false), ports(true));
    let l = &codec.mem;
    let q_valid = m.input("q_valid", 1);
    let q_data = m.input("q_data", INSN_BITS);
    let state = m.reg("state", 2, IDLE);
    let insn = m.reg_noreset("insn", INSN_BITS);
    let idle = m.named("idle", state.eq(IDLE));

    // Pops, checked on the queue's head.
    let mut pops_ok = m.bit(true);
    let mut pop_flags = vec![];
    for &(f, q) in &pops {
        let set = flag(q_data, l, f);
        let can = m.input(&format!("{q}_can_pop"), 1);
        pops_ok = pops_ok & (!set | can);
        pop_flags.push((q, set));
    }
    let pops_ok = m.named("pops_ok", pops_ok);
    let q_ready = m.output_from("q_ready", idle & pops_ok);
    let take = m.named("take", q_valid & q_ready);
    m.next_when(insn, take, q_data);
    for (q, set) in pop_flags {
        m.output_from(&format!("{q}_pop"), take & set);
    }

    let in_exec = m.named("in_exec", state.eq(EXEC));
    let launched = m.reg("launched", 1, 0);
    let launch = m.named("launch", in_exec & !launched & can_launch);
    m.next(launched, in_exec & !done & (launched | launch));
    let retire = m.named("retire", in_exec & done);

    // Pushes, in the retiring cycle or later in PUSH (none for a deferred instruction).
    let deferred = match &deferral {
        Some(d) => m.named("push_deferred", d.defer),
        None => m.bit(false),
    };
    let mut push_ok = m.bit(true);
    let mut push_flags = vec![];
    let mut can_push = vec![];
    for &(f, q) in &pushes {
        let set = flag(insn, l, f);
        let can = m.input(&format!("{q}_can_push"), 1);
        push_ok = push_ok & (!set | can);
        push_flags.push((f, q, set));
        can_push.push((f, can));
    }
    let push_ok = m.named("pushes_ok", push_ok | deferred);
    let in_push = m.named("in_push", state.eq(PUSH));
    let push_go = m.named("push_go", ((retire & !deferred) | in_push) & push_ok);
    for (f, q, set) in push_flags {
        let mut push = push_go & set;
        if let Some(d) = &deferral {
            for &(df, pulse) in &d.pushes {
                if df == f {
                    push = push | pulse;
                }
            }
        }
        m.output_from(&format!("{q}_push"), push);
    }

    let next = m.case(
        state,
        &[
            (IDLE, m.mux(take, m.lit(EXEC, 2), m.lit(IDLE, 2))),
            (
                EXEC,
                m.mux(
                    retire,
                    m.mux(push_ok, m.lit(IDLE, 2), m.lit(PUSH, 2)),
                    m.lit(EXEC, 2),
                ),
            ),
        ],
        m.mux(push_ok, m.lit(IDLE, 2), m.lit(PUSH, 2)),
    );
    m.next(state, next);
    let waiting_pop = m.named("waiting_pop", idle & q_valid & !pops_ok);
    let stall = m.named("stall_q", waiting_pop | (in_push & !push_ok));
    let busy = m.named("busy_q", !idle | waiting_pop);
    Sequencer {
        insn,
        in_exec,
        launch,
        launched,
        retire,
        busy,
        stall,
        state,
        waiting_pop,
        can_push,
    }
}
