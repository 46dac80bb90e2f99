//! The compute module's shell `vta_compute`: everything of the compute module except the
//! execution core. It executes LOAD UOP, LOAD ACC and LOAD ACC8 itself (writing the
//! micro-op and accumulator memories through the core's write ports), hands GEMM and ALU
//! to the execution core `vta_exec`, and retires FINISH.
//!
//! Tokens (spec 5.2): `pop_prev` pops `l2g`, `pop_next` pops `s2g` (before the
//! instruction); `push_prev` pushes `g2l`, `push_next` pushes `g2s` (after it completes).
//!
//! Hand-off to the core: a GEMM/ALU is offered on `exec_insn_valid` / `exec_insn_ready`.
//! The core has a GEMM and an ALU pipeline, each completing its own instructions in order
//! (`exec_done_gemm`, `exec_done_alu`); the shell counts, per pipeline, the instructions
//! handed over and not yet complete (`pending_gemm`, `pending_alu`). Every GEMM/ALU retires
//! at the hand-off, so the core may overlap it with the next GEMM/ALU if it accepts one. The
//! tokens of one with pushes wait in a queue of [`DEFERRED_PUSHES`] entries, each counting
//! the completions of each pipeline still due before it (the instruction and every one
//! handed over before it), and are pushed when both counts reach zero (so a token still
//! means "this and everything before it is done"); with the queue full, the next such
//! instruction waits. LOADs and FINISH wait until the core is idle (both counts zero,
//! `exec_busy` low) and the queue empty: the core's memories are never written while it
//! works. So does a sync (a LOAD of nothing) that pushes a token: the token
//! must cover every GEMM/ALU before it (and it never pushes in the same cycle as the queue).
//!
//! LOAD ACC8 reads `BATCH x BLOCK_OUT` signed bytes per element and sign-extends each into
//! an ACC lane. LOADs of other memory types cannot reach compute (fetch routes them to
//! load, or the decoder refuses them) and act as syncs, as do unknown opcodes.
//!
//! Ports: the queue `q_*`; `l2g_can_pop`, `l2g_pop`, `s2g_can_pop`, `s2g_pop`,
//! `g2l_can_push`, `g2l_push`, `g2s_can_push`, `g2s_push`; the read client `rd_*`; towards
//! the core `exec_insn_valid`, `exec_insn_ready`, `exec_insn`, `exec_done_gemm`,
//! `exec_done_alu`, `exec_busy`,
//! `uop_wr_{en,addr,data}`, `acc_wr_{en,addr,data}`; `finish` (a pulse when FINISH
//! retires), `busy`, `stall`, `dbg_state` (see [`crate::debug`]).

use hdl::{count_bits, Module, ModuleBuilder, Sig};
use isa::layout::{Codec, Field};
use isa::{HwConfig, MemType, Opcode};

use crate::dma::{load_engine, read_client_inputs, EngineParams, Gear};
use crate::seq::{sequencer, Deferral};
use crate::util::{addr_width, field};

/// Most instructions handed to one of the core's pipelines and not yet completed that the
/// shell tracks (the core's `insn_ready` decides how many it takes).
const MAX_PENDING: u64 = 63;

/// Entries of the queue of pushes waiting for their instruction to complete.
pub const DEFERRED_PUSHES: usize = 4;

/// Builds `vta_compute` for `cfg`; `len_width` is the width of read request lengths.
pub fn compute(cfg: &HwConfig, len_width: u32) -> Module {
    let codec = Codec::new(cfg);
    let b = cfg.axi_data_width;
    let m = ModuleBuilder::new("vta_compute");
    let can_launch = m.wire("can_launch", 1);
    let done = m.wire("work_done", 1);
    let defer = m.wire("push_defer", 1);
    let deferred_prev = m.wire("deferred_push_prev", 1);
    let deferred_next = m.wire("deferred_push_next", 1);
    let s = sequencer(
        &m,
        &codec,
        isa::Module::Compute,
        can_launch,
        done,
        Some(Deferral {
            defer,
            pushes: vec![
                (Field::PushPrevDep, deferred_prev),
                (Field::PushNextDep, deferred_next),
            ],
        }),
    );
    let rc = read_client_inputs(&m, b);
    let exec_insn_ready = m.input("exec_insn_ready", 1);
    let done_gemm = m.input("exec_done_gemm", 1);
    let done_alu = m.input("exec_done_alu", 1);
    let exec_busy = m.input("exec_busy", 1);

    let l = &codec.mem;
    let opcode = field(s.insn, l, Field::Opcode);
    let mem_type = field(s.insn, l, Field::MemoryType);
    let x_size = field(s.insn, l, Field::XSize);
    let is_load = opcode.eq(Opcode::Load as u64);
    let is_exec = m.named(
        "is_gemm_alu",
        opcode.eq(Opcode::Gemm as u64) | opcode.eq(Opcode::Alu as u64),
    );
    let is_finish = m.named("is_finish", opcode.eq(Opcode::Finish as u64));
    let is_uop = m.named("is_uop", mem_type.eq(MemType::Uop as u64));
    let is_acc = m.named("is_acc", mem_type.eq(MemType::Acc as u64));
    let is_acc8 = m.named("is_acc8", mem_type.eq(MemType::Acc8 as u64));
    let uses_engine = m.named(
        "uses_engine",
        is_load & x_size.ne(0) & (is_uop | is_acc | is_acc8),
    );
    let push_prev = crate::util::flag(s.insn, l, Field::PushPrevDep);
    let push_next = crate::util::flag(s.insn, l, Field::PushNextDep);
    let has_push = m.named("has_push", push_prev | push_next);
    m.assign(defer, is_exec);

    // GEMM/ALU hand-off and the counts of instructions each pipeline has not finished.
    let is_alu = opcode.eq(Opcode::Alu as u64);
    let pw = count_bits(MAX_PENDING);
    let pending_gemm = m.reg("pending_gemm", pw, 0);
    let pending_alu = m.reg("pending_alu", pw, 0);
    let room = m.mux(is_alu, pending_alu, pending_gemm).ne(MAX_PENDING);
    let queue_full = m.wire("deferred_full", 1);
    let insn_valid = m.output_from(
        "exec_insn_valid",
        s.in_exec & !s.launched & is_exec & room & !(has_push & queue_full),
    );
    m.output_from("exec_insn", s.insn);
    let handed = m.named("handed_over", insn_valid & exec_insn_ready);
    let dues = Dues {
        gemm: count(&m, pending_gemm, handed & !is_alu, done_gemm),
        alu: count(&m, pending_alu, handed & is_alu, done_alu),
        done_gemm,
        done_alu,
    };
    let queue = deferred_pushes(&m, &s, handed & has_push, push_prev, push_next, &dues);
    m.assign(queue_full, queue.full);
    m.assign(deferred_prev, queue.push_prev);
    m.assign(deferred_next, queue.push_next);
    let core_idle = m.named(
        "core_idle",
        pending_gemm.eq(0) & pending_alu.eq(0) & !exec_busy & queue.empty,
    );

    // The LOAD engines.
    let engine = |name: &str, mt: MemType, sram: MemType| {
        let p = EngineParams {
            gear: Gear {
                elem_bits: cfg.elem_bits(mt),
                bus_bits: b,
            },
            sram_addr_bits: addr_width(cfg.log_depth(sram)),
            len_width,
        };
        m.instance(&format!("u_{name}_engine"), &load_engine(&codec, &p))
    };
    let uop = engine("uop", MemType::Uop, MemType::Uop);
    let acc = engine("acc", MemType::Acc, MemType::Acc);
    let acc8 = engine("acc8", MemType::Acc8, MemType::Acc);
    let engines = [(&uop, is_uop), (&acc, is_acc), (&acc8, is_acc8)];
    let go = m.named("engine_start", s.launch & uses_engine);
    let mut engines_busy = m.bit(false);
    for (e, sel) in engines {
        e.connect("start", go & sel);
        e.connect("insn", s.insn);
        e.connect("rd_req_ready", rc.req_ready & sel);
        e.connect("rd_data_valid", rc.data_valid & sel);
        e.connect("rd_data", rc.data);
        engines_busy = engines_busy | e.output("busy");
    }
    let pick = |port: &str| -> Sig {
        m.mux(
            is_uop,
            uop.output(port),
            m.mux(is_acc8, acc8.output(port), acc.output(port)),
        )
    };
    m.output_from("rd_req_valid", pick("rd_req_valid"));
    m.output_from("rd_req_addr", pick("rd_req_addr"));
    m.output_from("rd_req_beats", pick("rd_req_beats"));
    m.output_from("rd_data_ready", pick("rd_data_ready"));

    m.output_from("uop_wr_en", uop.output("wr_en"));
    m.output_from("uop_wr_addr", uop.output("wr_addr"));
    m.output_from("uop_wr_data", uop.output("wr_data"));
    // ACC8: each signed byte becomes an ACC lane.
    let acc_w = cfg.acc_width();
    let widened: Vec<Sig> = acc8
        .output("wr_data")
        .lanes(8)
        .into_iter()
        .map(|v| v.as_signed().sext(acc_w).as_unsigned())
        .collect();
    let widened = m.named("acc8_widened", m.pack(&widened));
    m.output_from("acc_wr_en", acc.output("wr_en") | acc8.output("wr_en"));
    m.output_from(
        "acc_wr_addr",
        m.mux(is_acc8, acc8.output("wr_addr"), acc.output("wr_addr")),
    );
    m.output_from(
        "acc_wr_data",
        m.mux(is_acc8, widened, acc.output("wr_data")),
    );

    // Start and completion of each kind of instruction.
    // A sync (or any other instruction of no work here) that pushes a token waits for the
    // core too: the token must mean that every earlier GEMM/ALU is complete (spec 5.3).
    m.assign(
        can_launch,
        m.mux(
            uses_engine | is_finish,
            core_idle,
            m.mux(is_exec, handed, !has_push | core_idle),
        ),
    );
    let started = s.launch | s.launched;
    m.assign(
        done,
        m.mux(
            uses_engine,
            s.launched & !engines_busy,
            // GEMM/ALU retire at the hand-off; FINISH launches only once the core is idle;
            // syncs have nothing to do.
            started,
        ),
    );
    m.output_from("finish", s.retire & is_finish);
    m.output_from("busy", s.busy | !queue.empty);
    m.output_from("stall", s.stall | queue.waiting);
    m.output_from("dbg_state", m.cat(&[s.waiting_pop, s.state]));
    m.finish().expect("vta_compute is well formed")
}

/// The queue of deferred pushes, for [`compute`].
struct DeferredPushes<'a> {
    /// Pulses pushing `g2l` / `g2s` for the queue's head.
    push_prev: Sig<'a>,
    push_next: Sig<'a>,
    full: Sig<'a>,
    empty: Sig<'a>,
    /// The head's instruction is complete but a pushed queue is full.
    waiting: Sig<'a>,
}

/// Counts `pending` up by `handed` and down by `done`; returns its next value
/// (`<pending>_next`).
fn count<'a>(m: &'a ModuleBuilder, pending: Sig<'a>, handed: Sig<'a>, done: Sig<'a>) -> Sig<'a> {
    let pw = pending.width();
    let name = format!("{}_next", pending.name().expect("a named register"));
    let next = m.named(&name, pending + handed.zext(pw) - done.zext(pw));
    m.next(pending, next);
    next
}

/// The pipelines' counts of instructions handed over and not complete (after this cycle),
/// and their completions this cycle, for [`deferred_pushes`].
struct Dues<'a> {
    gemm: Sig<'a>,
    alu: Sig<'a>,
    done_gemm: Sig<'a>,
    done_alu: Sig<'a>,
}

/// [`DEFERRED_PUSHES`] entries, oldest first, each a push's flags and, per pipeline, the
/// completions still due before it: the pipeline's pending count when it enters (the
/// handed-over instruction and those before it), one less per completion. The head pushes
/// once both counts are zero and its queues have room; the rest move up.
fn deferred_pushes<'a>(
    m: &'a ModuleBuilder,
    s: &crate::seq::Sequencer<'a>,
    enqueue: Sig<'a>,
    push_prev: Sig<'a>,
    push_next: Sig<'a>,
    dues: &Dues<'a>,
) -> DeferredPushes<'a> {
    let can = |f: Field| {
        s.can_push
            .iter()
            .find(|(g, _)| *g == f)
            .map(|&(_, c)| c)
            .expect("compute pushes g2l and g2s")
    };
    let (prev_can, next_can) = (can(Field::PushPrevDep), can(Field::PushNextDep));
    let pw = dues.gemm.width();
    let slots: Vec<[Sig; 5]> = (0..DEFERRED_PUSHES)
        .map(|k| {
            [
                m.reg(&format!("deferred{k}_valid"), 1, 0),
                m.reg_noreset(&format!("deferred{k}_prev"), 1),
                m.reg_noreset(&format!("deferred{k}_next"), 1),
                m.reg_noreset(&format!("deferred{k}_due_gemm"), pw),
                m.reg_noreset(&format!("deferred{k}_due_alu"), pw),
            ]
        })
        .collect();
    let [hv, hp, hn, hg, ha] = slots[0];
    let complete = m.named("deferred_head_complete", hv & hg.eq(0) & ha.eq(0));
    let room = (!hp | prev_can) & (!hn | next_can);
    let fire = m.named("deferred_fire", complete & room);
    // After the head leaves (if it does), slot k holds what slot k (or k+1) held, closer by
    // this cycle's completions; the new entry takes the first free slot.
    let moved: Vec<[Sig; 5]> = (0..DEFERRED_PUSHES)
        .map(|k| {
            let from = |i: usize| -> [Sig; 5] {
                match slots.get(i) {
                    Some(&e) => e,
                    None => [
                        m.bit(false),
                        m.bit(false),
                        m.bit(false),
                        m.zero(pw),
                        m.zero(pw),
                    ],
                }
            };
            let (a, b) = (from(k), from(k + 1));
            let pick = |i: usize| m.mux(fire, b[i], a[i]);
            let step = |due: Sig<'a>, done: Sig<'a>| m.mux(done & due.ne(0), due - 1, due);
            [
                pick(0),
                pick(1),
                pick(2),
                step(pick(3), dues.done_gemm),
                step(pick(4), dues.done_alu),
            ]
        })
        .collect();
    for k in 0..DEFERRED_PUSHES {
        let first_free = if k == 0 {
            !moved[0][0]
        } else {
            !moved[k][0] & moved[k - 1][0]
        };
        let take = enqueue & first_free;
        let [v, p, n, g, a] = slots[k];
        m.next(v, moved[k][0] | take);
        m.next(p, m.mux(take, push_prev, moved[k][1]));
        m.next(n, m.mux(take, push_next, moved[k][2]));
        m.next(g, m.mux(take, dues.gemm, moved[k][3]));
        m.next(a, m.mux(take, dues.alu, moved[k][4]));
    }
    DeferredPushes {
        push_prev: fire & hp,
        push_next: fire & hn,
        full: slots[DEFERRED_PUSHES - 1][0],
        empty: !hv,
        waiting: complete & !room,
    }
}
