//! The compute module's shell `vta_compute`: everything of the compute module except the
//! execution core. It executes LOAD UOP, LOAD ACC and LOAD ACC8 itself (writing the
//! micro-op and accumulator memories through the core's write ports), hands GEMM and ALU
//! to the execution core `vta_exec`, and retires FINISH.
//!
//! Tokens (spec 5.2): `pop_prev` pops `l2g`, `pop_next` pops `s2g` (before the
//! instruction); `push_prev` pushes `g2l`, `push_next` pushes `g2s` (after it completes).
//!
//! Hand-off to the core: a GEMM/ALU is offered on `exec_insn_valid` / `exec_insn_ready`.
//! The shell counts instructions handed over and not yet reported by `exec_done`
//! (`pending`). An instruction with a push waits until `pending` is zero (so the token
//! means "done"); one without pushes retires at the hand-off, so the core may overlap it
//! with the next GEMM/ALU if it accepts one. LOADs and FINISH wait until the core is idle
//! (`pending` zero and `exec_busy` low): the core's memories are never written while it
//! works. So does a sync (a LOAD of nothing) that pushes a token: the token must cover
//! every GEMM/ALU before it.
//!
//! LOAD ACC8 reads `BATCH x BLOCK_OUT` signed bytes per element and sign-extends each into
//! an ACC lane. LOADs of other memory types cannot reach compute (fetch routes them to
//! load, or the decoder refuses them) and act as syncs, as do unknown opcodes.
//!
//! Ports: the queue `q_*`; `l2g_can_pop`, `l2g_pop`, `s2g_can_pop`, `s2g_pop`,
//! `g2l_can_push`, `g2l_push`, `g2s_can_push`, `g2s_push`; the read client `rd_*`; towards
//! the core `exec_insn_valid`, `exec_insn_ready`, `exec_insn`, `exec_done`, `exec_busy`,
//! `uop_wr_{en,addr,data}`, `acc_wr_{en,addr,data}`; `finish` (a pulse when FINISH
//! retires), `busy`, `stall`, `dbg_state` (see [`crate::debug`]).

use hdl::{count_bits, Module, ModuleBuilder, Sig};
use isa::layout::{Codec, Field};
use isa::{HwConfig, MemType, Opcode};

use crate::dma::{load_engine, read_client_inputs, EngineParams, Gear};
use crate::seq::sequencer;
use crate::util::{addr_width, field};

/// Most GEMM/ALU instructions handed to the core and not yet completed that the shell
/// tracks (the core's `insn_ready` decides how many it takes).
const MAX_PENDING: u64 = 15;

/// Builds `vta_compute` for `cfg`; `len_width` is the width of read request lengths.
pub fn compute(cfg: &HwConfig, len_width: u32) -> Module {
    let codec = Codec::new(cfg);
    let b = cfg.axi_data_width;
    let m = ModuleBuilder::new("vta_compute");
    let can_launch = m.wire("can_launch", 1);
    let done = m.wire("work_done", 1);
    let s = sequencer(&m, &codec, isa::Module::Compute, can_launch, done);
    let rc = read_client_inputs(&m, b);
    let exec_insn_ready = m.input("exec_insn_ready", 1);
    let exec_done = m.input("exec_done", 1);
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
    let has_push = m.named(
        "has_push",
        crate::util::flag(s.insn, l, Field::PushPrevDep)
            | crate::util::flag(s.insn, l, Field::PushNextDep),
    );

    // GEMM/ALU hand-off and the count of instructions the core has not finished.
    let pw = count_bits(MAX_PENDING);
    let pending = m.reg("pending", pw, 0);
    let insn_valid = m.output_from(
        "exec_insn_valid",
        s.in_exec & !s.launched & is_exec & pending.ne(MAX_PENDING),
    );
    m.output_from("exec_insn", s.insn);
    let handed = m.named("handed_over", insn_valid & exec_insn_ready);
    m.next(pending, pending + handed.zext(pw) - exec_done.zext(pw));
    let core_idle = m.named("core_idle", pending.eq(0) & !exec_busy);

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
            m.mux(
                is_exec,
                (started & !has_push) | (s.launched & core_idle),
                // FINISH launches only once the core is idle; syncs have nothing to do.
                started,
            ),
        ),
    );
    m.output_from("finish", s.retire & is_finish);
    m.output_from("busy", s.busy);
    m.output_from("stall", s.stall);
    m.output_from("dbg_state", m.cat(&[s.waiting_pop, s.state]));
    m.finish().expect("vta_compute is well formed")
}
