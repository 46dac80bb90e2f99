//! The top level `vta_top`: the whole accelerator behind one AXI4 master (`m_axi_*`, to
//! DRAM) and one AXI4-Lite slave (`s_axi_control_*`, from the host), clocked by `ap_clk`
//! with the active-low synchronous reset `ap_rst_n`.
//!
//! ```text
//!  s_axi_control --> vta_control --start--> vta_fetch --+--> load_q ----> vta_load ----> INP, WGT
//!                                                        +--> compute_q -> vta_compute -> vta_exec
//!                                                        +--> store_q ---> vta_store <--- OUT (in vta_exec)
//!  m_axi <-- AXI4 master <-- read arbiter <-- fetch, load, compute;  write side <-- store
//!  vta_tokens: l2g, g2l, g2s, s2g between load, compute and store
//! ```
//!
//! The INP and WGT scratchpads are memories of this module (written by the load module,
//! read by the execution core); ACC, OUT and UOP are inside the execution core. The three
//! command queues are [`crate::util::lutram_fifo`]s of `CMD_QUEUE_DEPTH` instructions. The
//! debug outputs `dbg_*` are described in [`crate::debug`].

use hdl::widgets::{axi4_master, AxiMasterConfig};
use hdl::{addr_bits, count_bits, Module, ModuleBuilder};
use isa::layout::INSN_BITS;
use isa::{HwConfig, MemType};

use crate::dma::{read_arbiter, Gear};
use crate::util::{forward_ports, lutram_fifo, port_width};

/// Longest AXI4 burst the master issues: AXI4's limit for INCR bursts (the master also
/// never crosses a 4 KiB boundary).
pub const MAX_BURST_BEATS: u32 = 256;
/// Read bursts the master keeps in flight (latency hiding on the DRAM side).
pub const MAX_OUTSTANDING_READS: u32 = 8;
/// Write bursts the master keeps in flight.
pub const MAX_OUTSTANDING_WRITES: u32 = 4;

/// Width of DMA request lengths (in beats) for `cfg`: enough for a row of the largest
/// `x_size` of the widest element type, and for a fetch request.
pub fn len_width(cfg: &HwConfig) -> u32 {
    let max = MemType::ALL
        .iter()
        .map(|&mt| {
            Gear {
                elem_bits: cfg.elem_bits(mt),
                bus_bits: cfg.axi_data_width,
            }
            .max_beats(isa::layout::MAX_DMA_SIZE.into())
        })
        .max()
        .unwrap_or(0)
        .max(
            Gear {
                elem_bits: INSN_BITS,
                bus_bits: cfg.axi_data_width,
            }
            .max_beats(crate::fetch::CHUNK as u64),
        );
    count_bits(max)
}

/// The AXI4 master's parameters for `cfg`.
pub fn axi_master_config(cfg: &HwConfig) -> AxiMasterConfig {
    AxiMasterConfig {
        data_width: cfg.axi_data_width,
        addr_width: 32,
        len_width: len_width(cfg),
        max_burst_beats: MAX_BURST_BEATS,
        max_outstanding_reads: MAX_OUTSTANDING_READS,
        max_outstanding_writes: MAX_OUTSTANDING_WRITES,
        prefix: "m_axi".to_string(),
    }
}

/// Depth of a scratchpad memory as built (a one-element buffer still gets two words: a
/// memory has at least two).
fn mem_depth(cfg: &HwConfig, mt: MemType) -> u32 {
    cfg.depth(mt).max(2)
}

/// Builds `vta_top` for `cfg` around the execution core `exec` (module `vta_exec` with the
/// interface of [`crate::exec`]).
pub fn vta_top(cfg: &HwConfig, exec: &Module) -> Module {
    let lw = len_width(cfg);
    let m = ModuleBuilder::new("vta_top");
    m.set_clock("ap_clk");
    m.set_reset("ap_rst_n", true);

    // ---- host control and DRAM ports ------------------------------------------------------
    let ctl = m.instance("u_control", &crate::control::control(cfg));
    forward_ports(&m, &ctl, |n| n.starts_with("s_axi_control_"));
    let axi = m.instance(
        "u_axi",
        &axi4_master("vta_axi_master", &axi_master_config(cfg)),
    );
    forward_ports(&m, &axi, |n| n.starts_with("m_axi_"));
    let start = ctl.output("start");

    // ---- instruction fetch and command queues ---------------------------------------------
    let fetch = m.instance("u_fetch", &crate::fetch::fetch(cfg, lw));
    fetch.connect("start", start);
    fetch.connect("insn_addr", ctl.output("insn_addr"));
    fetch.connect("insn_count", ctl.output("insn_count"));
    // A CMD_QUEUE_DEPTH that is not a power of two is rounded up.
    let queue = lutram_fifo(INSN_BITS, cfg.cmd_queue_depth.next_power_of_two());
    let load = m.instance("u_load", &crate::load::load(cfg, lw));
    let compute = m.instance("u_compute", &crate::compute::compute(cfg, lw));
    let store = m.instance("u_store", &crate::store::store(cfg, lw));
    let mut queued = vec![];
    for (q, module) in [
        ("load_q", &load),
        ("compute_q", &compute),
        ("store_q", &store),
    ] {
        let f = m.instance(&format!("u_{q}ueue"), &queue);
        queued.push(f.output("out_valid"));
        f.connect("in_valid", fetch.output(&format!("{q}_valid")));
        f.connect("in_data", fetch.output(&format!("{q}_data")));
        fetch.connect(&format!("{q}_ready"), f.output("in_ready"));
        module.connect("q_valid", f.output("out_valid"));
        module.connect("q_data", f.output("out_data"));
        f.connect("out_ready", module.output("q_ready"));
    }

    // ---- dependency tokens ---------------------------------------------------------------
    let tokens = m.instance("u_tokens", &crate::tokens::tokens(cfg));
    tokens.connect("clear", start);
    let instance = |unit: isa::Module| match unit {
        isa::Module::Load => &load,
        isa::Module::Compute => &compute,
        isa::Module::Store => &store,
    };
    for queue in isa::Queue::ALL {
        let (q, from, to) = (queue.name(), instance(queue.from()), instance(queue.to()));
        tokens.connect(&format!("{q}_push"), from.output(&format!("{q}_push")));
        tokens.connect(&format!("{q}_pop"), to.output(&format!("{q}_pop")));
        from.connect(
            &format!("{q}_can_push"),
            tokens.output(&format!("{q}_can_push")),
        );
        to.connect(
            &format!("{q}_can_pop"),
            tokens.output(&format!("{q}_can_pop")),
        );
    }

    // ---- DMA: reads arbitrated between fetch, load and compute; store writes -----------------
    let clients = ["fetch", "load", "compute"];
    let arb = m.instance(
        "u_read_arbiter",
        &read_arbiter(&clients, cfg.axi_data_width, lw),
    );
    for (name, inst) in clients.iter().zip([&fetch, &load, &compute]) {
        for port in [
            "rd_req_valid",
            "rd_req_addr",
            "rd_req_beats",
            "rd_data_ready",
        ] {
            arb.connect(&format!("{name}_{port}"), inst.output(port));
        }
        for port in ["rd_req_ready", "rd_data_valid", "rd_data"] {
            inst.connect(port, arb.output(&format!("{name}_{port}")));
        }
    }
    for port in [
        "rd_req_valid",
        "rd_req_addr",
        "rd_req_beats",
        "rd_data_ready",
    ] {
        axi.connect(port, arb.output(port));
    }
    for port in ["rd_req_ready", "rd_data_valid", "rd_data", "rd_data_last"] {
        arb.connect(port, axi.output(port));
    }
    for port in [
        "wr_req_valid",
        "wr_req_addr",
        "wr_req_beats",
        "wr_data_valid",
        "wr_data",
        "wr_strb",
    ] {
        axi.connect(port, store.output(port));
    }
    for port in ["wr_req_ready", "wr_data_ready", "wr_done"] {
        store.connect(port, axi.output(port));
    }

    // ---- the execution core and the INP/WGT scratchpads -------------------------------------
    let core = m.instance("u_exec", exec);
    core.connect("insn_valid", compute.output("exec_insn_valid"));
    core.connect("insn", compute.output("exec_insn"));
    compute.connect("exec_insn_ready", core.output("insn_ready"));
    compute.connect("exec_done_gemm", core.output("done_gemm"));
    compute.connect("exec_done_alu", core.output("done_alu"));
    compute.connect("exec_busy", core.output("busy"));
    for port in [
        "uop_wr_en",
        "uop_wr_addr",
        "uop_wr_data",
        "acc_wr_en",
        "acc_wr_addr",
        "acc_wr_data",
    ] {
        core.connect(port, compute.output(port));
    }
    core.connect("out_rd_en", store.output("out_rd_en"));
    core.connect("out_rd_addr", store.output("out_rd_addr"));
    store.connect("out_rd_data", core.output("out_rd_data"));
    for (name, mt) in [("inp", MemType::Inp), ("wgt", MemType::Wgt)] {
        let depth = mem_depth(cfg, mt);
        let aw = addr_bits(depth as u64);
        assert_eq!(
            port_width(exec, &format!("{name}_rd_addr")),
            aw,
            "vta_exec's {name}_rd_addr width does not match the {depth}-entry {} buffer",
            name.to_uppercase()
        );
        let mem = m.mem(&format!("{name}_sram"), cfg.elem_bits(mt), depth);
        mem.write(
            load.output(&format!("{name}_wr_en")),
            load.output(&format!("{name}_wr_addr")),
            load.output(&format!("{name}_wr_data")),
        );
        let data = mem.read_en(
            core.output(&format!("{name}_rd_en")),
            core.output(&format!("{name}_rd_addr")),
        );
        core.connect(&format!("{name}_rd_data"), data);
    }

    // ---- status and counters ------------------------------------------------------------------
    // Errors since the last start: an AXI error response (the master's flags are sticky, so
    // their rising edge counts) or a fault pulse of the core.
    let axi_error = m.named("axi_error", axi.output("rd_error") | axi.output("wr_error"));
    let axi_error_seen = m.reg("axi_error_seen", 1, 0);
    m.next(axi_error_seen, axi_error);
    let error = m.reg("error_q", 1, 0);
    m.next(
        error,
        m.mux(
            start,
            0,
            error | (axi_error & !axi_error_seen) | core.output("fault"),
        ),
    );
    ctl.connect("error", error);
    ctl.connect("finish", compute.output("finish"));
    for module in ["load", "compute", "store"] {
        let inst = match module {
            "load" => &load,
            "compute" => &compute,
            _ => &store,
        };
        ctl.connect(&format!("{module}_busy"), inst.output("busy"));
        ctl.connect(&format!("{module}_stall"), inst.output("stall"));
    }
    ctl.connect("dma_busy", arb.output("busy") | store.output("dma_active"));
    for ev in ["ev_gemm_uop", "ev_alu_uop", "ev_reset_uop"] {
        ctl.connect(ev, core.output(ev));
    }
    ctl.connect("insn_fetched", fetch.output("dispatched"));

    // ---- debug outputs (crate::debug) ------------------------------------------------------
    let uop_event =
        core.output("ev_gemm_uop") | core.output("ev_alu_uop") | core.output("ev_reset_uop").any();
    let handed = compute.output("exec_insn_valid") & core.output("insn_ready");
    let mut fields = vec![
        ctl.output("active"),
        uop_event,
        fetch.output("dispatched"),
        core.output("busy"),
        core.output("done_gemm") | core.output("done_alu"),
        handed,
    ];
    for (k, inst) in [&store, &compute, &load].into_iter().enumerate() {
        fields.push(queued[2 - k]);
        fields.push(inst.output("dbg_state"));
    }
    let state = m.cat(&fields);
    assert_eq!(state.width(), crate::debug::STATE_BITS);
    m.output_from(crate::debug::STATE_PORT, state);
    for q in isa::Queue::ALL {
        m.output_from(
            &crate::debug::tokens_port(q.name()),
            tokens.output(&format!("{q}_tokens")),
        );
    }
    m.finish().expect("vta_top is well formed")
}
