//! The store module `vta_store`: executes STORE (spec section 7) from its command queue,
//! reading the OUT buffer through the execution core's read port and writing DRAM through
//! the AXI master's write side (it is the only writer).
//!
//! Tokens (spec 5.2): `pop_prev` pops `g2s` before the instruction, `push_prev` pushes
//! `s2g` after it; `pop_next` / `push_next` are illegal on store and ignored. A STORE
//! completes when every write of it has been answered, so `s2g` means "in DRAM".
//!
//! Ports: the queue `q_*`; `g2s_can_pop`, `g2s_pop`, `s2g_can_push`, `s2g_push`; the OUT
//! read port `out_rd_{en,addr,data}`; the write client `wr_req_{valid,ready,addr,beats}`,
//! `wr_data_{valid,ready}`, `wr_data`, `wr_strb`, `wr_done`; `busy`, `stall`,
//! `dma_active` (writes requested or in flight) and `dbg_state` (see [`crate::debug`]).

use hdl::{Module, ModuleBuilder};
use isa::layout::{Codec, Field};
use isa::{HwConfig, MemType};

use crate::dma::{store_engine, EngineParams, Gear};
use crate::seq::sequencer;
use crate::util::{addr_width, field, forward_ports};

/// Builds `vta_store` for `cfg`; `len_width` is the width of write request lengths.
pub fn store(cfg: &HwConfig, len_width: u32) -> Module {
    let codec = Codec::new(cfg);
    let m = ModuleBuilder::new("vta_store");
    let can_launch = m.wire("can_launch", 1);
    let done = m.wire("work_done", 1);
    let s = sequencer(&m, &codec, isa::Module::Store, can_launch, done, None);
    let p = EngineParams {
        gear: Gear {
            elem_bits: cfg.elem_bits(MemType::Out),
            bus_bits: cfg.axi_data_width,
        },
        sram_addr_bits: addr_width(cfg.log_depth(MemType::Out)),
        len_width,
    };
    let e = m.instance("u_engine", &store_engine(&codec, &p));
    e.connect("start", s.launch);
    e.connect("insn", s.insn);
    e.connect("rd_data", m.input("out_rd_data", p.gear.elem_bits));
    m.output_from("out_rd_en", e.output("rd_en"));
    m.output_from("out_rd_addr", e.output("rd_addr"));
    forward_ports(&m, &e, |n| n.starts_with("wr_"));
    m.output_from("dma_active", e.output("dma_active"));
    m.assign(can_launch, m.bit(true));
    // A sync (x_size == 0 or y_size == 0) completes at once.
    let l = &codec.mem;
    let moves = field(s.insn, l, Field::XSize).ne(0) & field(s.insn, l, Field::YSize).ne(0);
    m.assign(done, (s.launch & !moves) | (s.launched & !e.output("busy")));
    m.output_from("busy", s.busy);
    m.output_from("stall", s.stall);
    m.output_from("dbg_state", m.cat(&[s.waiting_pop, s.state]));
    m.finish().expect("vta_store is well formed")
}
