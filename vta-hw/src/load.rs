//! The load module `vta_load`: executes LOAD INP and LOAD WGT (spec section 6) from its
//! command queue, writing the INP and WGT scratchpads (which live in `vta_top`).
//!
//! Tokens (spec 5.2): `pop_next` pops `g2l` before the instruction, `push_next` pushes
//! `l2g` after it; `pop_prev` / `push_prev` are illegal on load and ignored. A LOAD with
//! `x_size == 0` is a sync: only its tokens act.
//!
//! One load engine per memory type ([`crate::dma::load_engine`]); the one the current
//! instruction uses owns the module's read client.
//!
//! Ports: the queue `q_valid`, `q_ready`, `q_data`; `g2l_can_pop`, `g2l_pop`,
//! `l2g_can_push`, `l2g_push`; the read client `rd_*`; the scratchpad write ports
//! `inp_wr_{en,addr,data}` and `wgt_wr_{en,addr,data}`; `busy` and `stall` (for the
//! counters); `dbg_state` (the sequencer's state and waiting-on-a-pop flag, see
//! [`crate::debug`]).

use hdl::{Module, ModuleBuilder};
use isa::layout::{Codec, Field};
use isa::{HwConfig, MemType};

use crate::dma::{load_engine, read_client_inputs, EngineParams, Gear};
use crate::seq::sequencer;
use crate::util::{addr_width, field};

/// Builds `vta_load` for `cfg`; `len_width` is the width of read request lengths.
pub fn load(cfg: &HwConfig, len_width: u32) -> Module {
    let codec = Codec::new(cfg);
    let b = cfg.axi_data_width;
    let m = ModuleBuilder::new("vta_load");
    let can_launch = m.wire("can_launch", 1);
    let done = m.wire("work_done", 1);
    let s = sequencer(&m, &codec, isa::Module::Load, can_launch, done, None);
    let rc = read_client_inputs(&m, b);
    let x_size = field(s.insn, &codec.mem, Field::XSize);
    let is_wgt = m.named(
        "is_wgt",
        field(s.insn, &codec.mem, Field::MemoryType).eq(MemType::Wgt as u64),
    );
    let go = m.named("engine_start", s.launch & x_size.ne(0));

    let mut busy = m.bit(false);
    let mut engines = vec![];
    for (name, mt, sel) in [
        ("inp", MemType::Inp, !is_wgt),
        ("wgt", MemType::Wgt, is_wgt),
    ] {
        let p = EngineParams {
            gear: Gear {
                elem_bits: cfg.elem_bits(mt),
                bus_bits: b,
            },
            sram_addr_bits: addr_width(cfg.log_depth(mt)),
            len_width,
        };
        let e = m.instance(&format!("u_{name}_engine"), &load_engine(&codec, &p));
        e.connect("start", go & sel);
        e.connect("insn", s.insn);
        e.connect("rd_req_ready", rc.req_ready & sel);
        e.connect("rd_data_valid", rc.data_valid & sel);
        e.connect("rd_data", rc.data);
        m.output_from(&format!("{name}_wr_en"), e.output("wr_en"));
        m.output_from(&format!("{name}_wr_addr"), e.output("wr_addr"));
        m.output_from(&format!("{name}_wr_data"), e.output("wr_data"));
        busy = busy | e.output("busy");
        engines.push(e);
    }
    let (inp, wgt) = (&engines[0], &engines[1]);
    let pick = |port: &str| m.mux(is_wgt, wgt.output(port), inp.output(port));
    m.output_from("rd_req_valid", pick("rd_req_valid"));
    m.output_from("rd_req_addr", pick("rd_req_addr"));
    m.output_from("rd_req_beats", pick("rd_req_beats"));
    m.output_from("rd_data_ready", pick("rd_data_ready"));

    m.assign(can_launch, m.bit(true));
    // A sync (x_size == 0) completes at once.
    m.assign(done, (s.launch & x_size.eq(0)) | (s.launched & !busy));
    m.output_from("busy", s.busy);
    m.output_from("stall", s.stall);
    m.output_from("dbg_state", m.cat(&[s.waiting_pop, s.state]));
    m.finish().expect("vta_load is well formed")
}
