//! The AXI4 signals the SoC's memory bus carries, the 2:1 arbiter that lets the bridge and
//! the accelerator share the device memory, and the wiring of a master to a slave.
//!
//! The bus is the subset both masters use: 32-bit addresses, `AxLEN`, `AxSIZE`, `AxBURST`, no
//! IDs (responses in order), no `AxCACHE`/`AxPROT`/`AxLOCK`/`AxQOS` (the memory does not
//! need them).

use std::collections::HashMap;

use hdl::{Inst, Module, ModuleBuilder, Sig};

/// Width of a signal: fixed, the data bus, or its byte strobes.
#[derive(Clone, Copy)]
enum Width {
    Bits(u32),
    Data,
    Strobe,
}

/// One AXI4 signal: its name after the prefix (`araddr`), width, and whether the master
/// drives it.
pub(crate) struct Signal(pub(crate) &'static str, Width, pub(crate) bool);

pub(crate) const SIGNALS: [Signal; 25] = [
    Signal("araddr", Width::Bits(32), true),
    Signal("arlen", Width::Bits(8), true),
    Signal("arsize", Width::Bits(3), true),
    Signal("arburst", Width::Bits(2), true),
    Signal("arvalid", Width::Bits(1), true),
    Signal("arready", Width::Bits(1), false),
    Signal("rdata", Width::Data, false),
    Signal("rresp", Width::Bits(2), false),
    Signal("rlast", Width::Bits(1), false),
    Signal("rvalid", Width::Bits(1), false),
    Signal("rready", Width::Bits(1), true),
    Signal("awaddr", Width::Bits(32), true),
    Signal("awlen", Width::Bits(8), true),
    Signal("awsize", Width::Bits(3), true),
    Signal("awburst", Width::Bits(2), true),
    Signal("awvalid", Width::Bits(1), true),
    Signal("awready", Width::Bits(1), false),
    Signal("wdata", Width::Data, true),
    Signal("wstrb", Width::Strobe, true),
    Signal("wlast", Width::Bits(1), true),
    Signal("wvalid", Width::Bits(1), true),
    Signal("wready", Width::Bits(1), false),
    Signal("bresp", Width::Bits(2), false),
    Signal("bvalid", Width::Bits(1), false),
    Signal("bready", Width::Bits(1), true),
];

impl Signal {
    pub(crate) fn width(&self, data_bits: u32) -> u32 {
        match self.1 {
            Width::Bits(w) => w,
            Width::Data => data_bits,
            Width::Strobe => data_bits / 8,
        }
    }
}

/// Connects the AXI4 master port `<from>_*` of instance `master` to the slave port `<to>_*`
/// of instance `slave`: every signal of the bus, except the responses a master does not take
/// (the bridge has no `rresp` and `rlast`).
pub(crate) fn connect(master: &Inst, from: &str, slave: &Inst, to: &str) {
    let module = master.module();
    for s in &SIGNALS {
        let (a, b) = (format!("{from}_{}", s.0), format!("{to}_{}", s.0));
        if s.2 {
            slave.connect(&b, master.output(&a));
        } else if module.port(&a).is_some() {
            master.connect(&a, slave.output(&b));
        }
    }
}

/// A 2:1 AXI4 arbiter of `data_bits`: slave ports `s0_axi_*` (priority) and `s1_axi_*`, master
/// port `m_axi_*`. Module name `soc_axi_arbiter_w<data_bits>`.
///
/// Reads and writes are arbitrated separately, one burst at a time each: the port granted an
/// address owns its channel until the burst's last R beat (reads) or its B response
/// (writes), and W beats pass only from the owner of the write channel. A request waiting
/// for `AxREADY` keeps the grant, so the address seen downstream never changes under
/// `AxVALID`. Port 0 wins when both ask at once: the bridge's single-word accesses then slip
/// in between the accelerator's bursts.
pub fn axi4_arbiter(data_bits: u32) -> Module {
    let m = ModuleBuilder::new(&format!("soc_axi_arbiter_w{data_bits}"));
    let prefixes = ["s0_axi", "s1_axi"];
    // The master-driven signals of both slave ports, by full name.
    let mut inputs: HashMap<String, Sig> = HashMap::new();
    for prefix in prefixes {
        for s in SIGNALS.iter().filter(|s| s.2) {
            let name = format!("{prefix}_{}", s.0);
            inputs.insert(name.clone(), m.input(&name, s.width(data_bits)));
        }
    }
    let from = |port: usize, name: &str| inputs[&format!("{}_{name}", prefixes[port])];
    // Of the two ports' `name`, port 1's when `sel` is high.
    let pick_of = |sel, name: &str| m.mux(sel, from(1, name), from(0, name));
    let down = |name: &str| m.input(&format!("m_axi_{name}"), 1);
    let (rvalid, rlast, bvalid) = (down("rvalid"), down("rlast"), down("bvalid"));
    let wready = down("wready");
    let rdata = m.input("m_axi_rdata", data_bits);
    let rresp = m.input("m_axi_rresp", 2);
    let bresp = m.input("m_axi_bresp", 2);

    // Per direction: the address channel's grant (held while an address waits), the owner
    // of the burst in progress, and the response handshake that ends it.
    for (dir, ax, resp) in [("r", "ar", "r"), ("w", "aw", "b")] {
        let valid = if dir == "r" { rvalid } else { bvalid };
        let axready = down(&format!("{ax}ready"));
        let busy = m.reg(&format!("{dir}_busy"), 1, 0);
        let owner = m.reg(&format!("{dir}_owner"), 1, 0);
        let held = m.reg(&format!("{ax}_held"), 1, 0);
        let held_pick = m.reg(&format!("{ax}_held_pick"), 1, 0);
        let axvalid_name = format!("{ax}valid");
        let pick = m.named(
            &format!("{ax}_pick"),
            m.mux(held, held_pick, !from(0, &axvalid_name)),
        );
        let axvalid = m.output_from(
            &format!("m_axi_{ax}valid"),
            !busy & (from(0, &axvalid_name) | from(1, &axvalid_name)),
        );
        let fire = m.named(&format!("{ax}_fire"), axvalid & axready);
        for field in ["addr", "len", "size", "burst"] {
            let n = format!("{ax}{field}");
            m.output_from(&format!("m_axi_{n}"), pick_of(pick, &n));
        }
        m.next(held, axvalid & !axready);
        m.next(held_pick, pick);
        let ready = format!("{resp}ready");
        let resp_ready = m.output_from(&format!("m_axi_{ready}"), busy & pick_of(owner, &ready));
        let end = if dir == "r" { valid & rlast } else { valid };
        m.next(busy, fire | (busy & !(end & resp_ready)));
        m.next_when(owner, fire, pick);
        for (i, prefix) in prefixes.iter().enumerate() {
            let granted = if i == 0 { !pick } else { pick };
            let owns = if i == 0 { !owner } else { owner };
            m.output_from(&format!("{prefix}_{ax}ready"), !busy & granted & axready);
            m.output_from(&format!("{prefix}_{resp}valid"), busy & owns & valid);
            if dir == "r" {
                m.output_from(&format!("{prefix}_rdata"), rdata);
                m.output_from(&format!("{prefix}_rresp"), rresp);
                m.output_from(&format!("{prefix}_rlast"), rlast);
            } else {
                m.output_from(&format!("{prefix}_bresp"), bresp);
                // W beats pass from the write channel's owner only.
                m.output_from(&format!("{prefix}_wready"), busy & owns & wready);
            }
        }
        if dir == "w" {
            m.output_from("m_axi_wvalid", busy & pick_of(owner, "wvalid"));
            for n in ["wdata", "wstrb", "wlast"] {
                m.output_from(&format!("m_axi_{n}"), pick_of(owner, n));
            }
        }
    }
    m.finish().expect("the AXI4 arbiter is well formed")
}
