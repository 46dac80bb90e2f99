//! The control block `vta_control`: the AXI4-Lite slave `s_axi_control` with the register
//! map of [`crate::regs`], the run state (start, running, done) and the performance
//! counters.
//!
//! The slave is written here rather than taken from `hdl::widgets::axi_lite_regfile`
//! because CONTROL both acts on writes (start) and returns status on reads, which the
//! widget's register kinds cannot express. Protocol: the write address and data channels
//! are accepted independently into holding registers; the write happens once both are
//! held and no write response is pending; reads take one request at a time (`ARREADY` low
//! while a read response is pending). Writes honour `WSTRB`; addresses past the map read 0
//! and ignore writes; every response is OKAY.
//!
//! Ports: the `s_axi_control_*` channels; `start` (one-cycle pulse), `active` (a run is in
//! progress), `insn_addr`, `insn_count` (the registers); `finish` (a pulse: FINISH retired), `error` (an error
//! happened since the last start); and the counter events `load_busy`, `load_stall`, `compute_busy`,
//! `compute_stall`, `store_busy`, `store_stall`, `dma_busy`, `ev_gemm_uop`, `ev_alu_uop`,
//! `ev_reset_uop`, `insn_fetched` (counted while running).

use hdl::{Module, ModuleBuilder, Sig};
use isa::HwConfig;

use crate::regs::{self, ADDR_BITS, MAP};
use crate::util::event_counter;

/// The counter events, in register order (each name is a port, and a register whose name
/// is the port name upper-cased, except the three micro-op counters and INSNS).
const EVENTS: [(&str, &str); 11] = [
    ("load_busy", "LOAD_BUSY"),
    ("compute_busy", "COMPUTE_BUSY"),
    ("store_busy", "STORE_BUSY"),
    ("load_stall", "LOAD_STALL"),
    ("compute_stall", "COMPUTE_STALL"),
    ("store_stall", "STORE_STALL"),
    ("dma_busy", "DMA_BUSY"),
    ("ev_gemm_uop", "GEMM_UOPS"),
    ("ev_alu_uop", "ALU_UOPS"),
    ("ev_reset_uop", "RESET_UOPS"),
    ("insn_fetched", "INSNS"),
];

/// Builds `vta_control` for `cfg` (the ISA hash is a constant of the design).
pub fn control(cfg: &HwConfig) -> Module {
    let m = ModuleBuilder::new("vta_control");
    let p = |s: &str| format!("s_axi_control_{s}");
    let aw = ADDR_BITS;
    let ib = aw - 2; // register index bits
    let awaddr = m.input(&p("awaddr"), aw);
    let awvalid = m.input(&p("awvalid"), 1);
    let wdata = m.input(&p("wdata"), 32);
    let wstrb = m.input(&p("wstrb"), 4);
    let wvalid = m.input(&p("wvalid"), 1);
    let bready = m.input(&p("bready"), 1);
    let araddr = m.input(&p("araddr"), aw);
    let arvalid = m.input(&p("arvalid"), 1);
    let rready = m.input(&p("rready"), 1);
    let why = "registers are 32-bit words; the byte offset within a register is ignored";
    m.allow_unused(awaddr, why);
    m.allow_unused(araddr, why);
    let finish = m.input("finish", 1);
    let error = m.input("error", 1);

    // ---- write channel ------------------------------------------------------------------
    let aw_full = m.reg("aw_full", 1, 0);
    let aw_idx = m.reg_noreset("aw_index", ib);
    let w_full = m.reg("w_full", 1, 0);
    let w_data = m.reg_noreset("w_data", 32);
    let w_strb = m.reg_noreset("w_strb", 4);
    let bvalid = m.reg("bvalid_q", 1, 0);
    let awready = m.output_from(&p("awready"), !aw_full);
    let wready = m.output_from(&p("wready"), !w_full);
    let aw_fire = m.named("aw_fire", awvalid & awready);
    let w_fire = m.named("w_fire", wvalid & wready);
    let do_write = m.named("do_write", aw_full & w_full & !bvalid);
    m.next_when(aw_idx, aw_fire, awaddr.slice(aw - 1, 2));
    m.next(aw_full, aw_fire | (aw_full & !do_write));
    m.next_when(w_data, w_fire, wdata);
    m.next_when(w_strb, w_fire, wstrb);
    m.next(w_full, w_fire | (w_full & !do_write));
    m.next(bvalid, do_write | (bvalid & !bready));
    m.output_from(&p("bvalid"), bvalid);
    m.output_from(&p("bresp"), m.zero(2));
    let writes = |offset: u32| do_write & aw_idx.eq((offset / 4) as u64);
    let strb_mask = m.named(
        "strb_mask",
        m.pack(&(0..4).map(|i| w_strb.bit(i).repeat(8)).collect::<Vec<_>>()),
    );

    // ---- run state ----------------------------------------------------------------------
    let running = m.reg("running", 1, 0);
    let done = m.reg("done", 1, 0);
    let start = m.named(
        "start_q",
        writes(regs::CONTROL) & w_strb.bit(0) & w_data.bit(0) & !running,
    );
    m.next(running, start | (running & !finish));
    m.next(done, m.mux(start, 0, done | (running & finish)));
    m.output_from("start", start);
    m.output_from("active", running);

    let rw_reg = |name: &str, offset: u32| {
        let q = m.reg(&format!("{name}_q"), 32, 0);
        m.next_when(q, writes(offset), (w_data & strb_mask) | (q & !strb_mask));
        m.output_from(name, q)
    };
    let insn_addr = rw_reg("insn_addr", regs::INSN_ADDR);
    let insn_count = rw_reg("insn_count", regs::INSN_COUNT);

    // ---- counters -------------------------------------------------------------------------
    let cycles = event_counter(&m, "cycles", start, running);
    let mut values: Vec<(&str, Sig)> = vec![
        ("CONTROL", m.zero(29).cat(m.cat(&[error, done, running]))),
        ("VERSION", m.lit(regs::VERSION_VALUE as u64, 32)),
        ("INSN_ADDR", insn_addr),
        ("INSN_COUNT", insn_count),
        ("ISA_HASH_LO", m.lit(cfg.isa_hash() & 0xffff_ffff, 32)),
        ("ISA_HASH_HI", m.lit(cfg.isa_hash() >> 32, 32)),
        ("CYCLES", cycles),
    ];
    for (port, reg) in EVENTS {
        // Reset micro-ops can complete in both execution pipelines in one cycle.
        let width = if port == "ev_reset_uop" { 2 } else { 1 };
        let ev = m.input(port, width);
        let counted = m.mux(running, ev, m.zero(width));
        let c = event_counter(&m, &format!("{port}_count"), start, counted);
        values.push((reg, c));
    }
    // Registers in map order.
    let ordered: Vec<Sig> = MAP
        .iter()
        .map(|r| {
            values
                .iter()
                .find(|(n, _)| *n == r.name)
                .unwrap_or_else(|| panic!("no value for register {}", r.name))
                .1
        })
        .collect();
    assert_eq!(ordered.len(), values.len(), "every value is a register");

    // ---- read channel ---------------------------------------------------------------------
    let rvalid = m.reg("rvalid_q", 1, 0);
    let rdata = m.reg_noreset("rdata_q", 32);
    let arready = m.output_from(&p("arready"), !rvalid);
    let ar_fire = m.named("ar_fire", arvalid & arready);
    // Unnamed: computed only in the cycles a read is taken (see `hdl`'s printer).
    let value = m.index(araddr.slice(aw - 1, 2), &ordered);
    m.next_when(rdata, ar_fire, value);
    m.next(rvalid, ar_fire | (rvalid & !rready));
    m.output_from(&p("rvalid"), rvalid);
    m.output_from(&p("rdata"), rdata);
    m.output_from(&p("rresp"), m.zero(2));
    m.finish().expect("vta_control is well formed")
}
