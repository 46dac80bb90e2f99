//! The fetch module `vta_fetch`: reads the instruction stream from DRAM and dispatches
//! every instruction, in order, to the command queue of the module that executes it
//! ([`isa::Insn::module`]: LOAD of INP/WGT to load; STORE to store; everything else,
//! including LOAD UOP/ACC/ACC8, to compute).
//!
//! Reads go through a small instruction buffer ([`BUFFER_DEPTH`] entries): a read request
//! (up to [`CHUNK`] instructions, one AXI request, split into bursts by the master) is
//! issued only when the buffer has room for all of it, so arriving data is always accepted
//! and a full command queue can stall dispatch without ever blocking the read channel the
//! load and compute modules share with fetch. Dispatch stalls exactly when the head
//! instruction's queue is full, as in VTA.
//!
//! Ports: `start` (pulse), `insn_addr` (byte address, 16-byte aligned; the low 4 bits are
//! ignored), `insn_count`, the read client `rd_*`, per queue `<q>_valid`, `<q>_ready`,
//! `<q>_data` for `load_q`, `compute_q`, `store_q`, `idle` (every requested instruction
//! dispatched) and `dispatched` (a pulse per instruction).

use hdl::{count_bits, Module, ModuleBuilder};
use isa::layout::{Codec, Field, INSN_BITS};
use isa::{HwConfig, MemType, Opcode};

use crate::dma::{read_client_inputs, row_request, unpacker, Gear};
use crate::util::field;

/// Entries of the instruction buffer.
pub const BUFFER_DEPTH: u32 = 32;
/// Most instructions one read request asks for.
pub const CHUNK: u32 = 16;

/// Builds `vta_fetch` for `cfg`; `len_width` is the width of read request lengths.
pub fn fetch(cfg: &HwConfig, len_width: u32) -> Module {
    let codec = Codec::new(cfg);
    let g = Gear {
        elem_bits: INSN_BITS,
        bus_bits: cfg.axi_data_width,
    };
    let m = ModuleBuilder::new("vta_fetch");
    let start = m.input("start", 1);
    let insn_addr = m.input("insn_addr", 32);
    let insn_count = m.input("insn_count", 32);
    m.allow_unused(
        insn_addr,
        "instructions are 16-byte aligned; the low 4 address bits are ignored",
    );
    let rc = read_client_inputs(&m, g.bus_bits);

    // ---- read requests ------------------------------------------------------------------
    let cw = count_bits(CHUNK as u64);
    let rw = count_bits(BUFFER_DEPTH as u64);
    let remaining = m.reg("remaining", 32, 0); // instructions not yet requested
    let next_elem = m.reg_noreset("next_insn", 32); // instruction index in DRAM (addr / 16)
    let reserved = m.reg("reserved", rw, 0); // buffer slots requested and not dispatched
    let n = m.named(
        "chunk",
        m.mux(
            remaining.lt(CHUNK),
            remaining.trunc(cw),
            m.lit(CHUNK as u64, cw),
        ),
    );
    let unpack = m.instance("u_unpack", &unpacker(g, cw));
    let (addr, beats, skip) = row_request(&m, g, next_elem, n, len_width);
    let desc_ok = if g.wide() {
        m.bit(true)
    } else {
        unpack.output("desc_ready")
    };
    let req_valid = m.output_from(
        "rd_req_valid",
        remaining.ne(0) & reserved.le(BUFFER_DEPTH - CHUNK) & desc_ok,
    );
    m.output_from("rd_req_addr", addr);
    m.output_from("rd_req_beats", beats);
    let req_fire = m.named("req_fire", req_valid & rc.req_ready);
    if let Some(skip) = skip {
        unpack.connect("desc_valid", req_fire);
        unpack.connect("desc_skip", skip);
        unpack.connect("desc_count", n);
    }
    m.next(
        remaining,
        m.mux(
            start,
            insn_count,
            remaining - m.mux(req_fire, n.zext(32), 0),
        ),
    );
    m.next_when(
        next_elem,
        start | req_fire,
        m.mux(
            start,
            m.zero(4).cat(insn_addr.slice(31, 4)),
            next_elem + n.zext(32),
        ),
    );

    // ---- instruction buffer -------------------------------------------------------------
    unpack.connect("in_valid", rc.data_valid);
    unpack.connect("in_data", rc.data);
    m.output_from("rd_data_ready", unpack.output("in_ready"));
    let buffer = m.instance(
        "u_buffer",
        &hdl::widgets::sync_fifo(INSN_BITS, BUFFER_DEPTH),
    );
    buffer.connect("in_valid", unpack.output("out_valid"));
    buffer.connect("in_data", unpack.output("out_data"));
    // Room was reserved when the request was issued.
    unpack.connect("out_ready", m.bit(true));

    // ---- dispatch -------------------------------------------------------------------------
    let head = buffer.output("out_data");
    let valid = buffer.output("out_valid");
    let opcode = field(head, &codec.mem, Field::Opcode);
    let mem_type = field(head, &codec.mem, Field::MemoryType);
    let is_load = opcode.eq(Opcode::Load as u64);
    let to_load = m.named(
        "to_load",
        is_load & (mem_type.eq(MemType::Inp as u64) | mem_type.eq(MemType::Wgt as u64)),
    );
    let to_store = m.named("to_store", opcode.eq(Opcode::Store as u64));
    let to_compute = m.named("to_compute", !to_load & !to_store);
    let mut ready = m.bit(false);
    for (q, sel) in [
        ("load_q", to_load),
        ("compute_q", to_compute),
        ("store_q", to_store),
    ] {
        m.output_from(&format!("{q}_valid"), valid & sel);
        m.output_from(&format!("{q}_data"), head);
        let r = m.input(&format!("{q}_ready"), 1);
        ready = ready | (sel & r);
    }
    let pop = m.named("dispatch", valid & ready);
    buffer.connect("out_ready", pop);
    m.next(
        reserved,
        reserved + m.mux(req_fire, n.zext(rw), 0) - pop.zext(rw),
    );
    m.output_from("dispatched", pop);
    m.output_from("idle", remaining.eq(0) & reserved.eq(0));
    m.finish().expect("vta_fetch is well formed")
}
