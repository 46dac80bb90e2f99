//! The N:1 AXI4 interconnect in front of the shared memory: every core's master port on one
//! slave port of the memory, with bursts from several cores in flight at once.
//!
//! The memory answers in request order (the bus has no IDs), so the interconnect only has
//! to remember who asked: each granted read address pushes its port onto a queue that routes
//! the R beats (popped at `rlast`), each granted write address pushes its port onto a queue
//! that lets that port's W beats through (popped at `wlast`) and onto one that routes the B
//! response. Address channels are granted round-robin ([`hdl::widgets::rr_arbiter`]); a
//! grant whose address waits for `AxREADY` is held, so the address seen downstream never
//! changes under `AxVALID`. No output depends combinationally on the downstream inputs.

use hdl::widgets::{rr_arbiter, small_fifo};
use hdl::{addr_bits, Inst, Module, ModuleBuilder, Sig};

use crate::soc::axi::{Signal, SIGNALS};
use crate::top::{MAX_OUTSTANDING_READS, MAX_OUTSTANDING_WRITES};

/// Entries of the queue that routes `per_core` outstanding bursts of each of `ports` ports.
fn queue_depth(ports: u32, per_core: u32) -> u32 {
    (ports * per_core).next_power_of_two().max(2)
}

/// An N:1 AXI4 interconnect of `data_bits` for `ports` (2 or more) masters: slave ports
/// `s<k>_axi_*`, master port `m_axi_*` (see the module docs). It keeps up to
/// `ports * 8` reads and `ports * 4` writes in flight, what the cores issue between them.
/// Module name `vta_axi_interconnect_n<ports>_w<data_bits>`.
pub fn axi4_interconnect(ports: u32, data_bits: u32) -> Module {
    assert!(ports >= 2, "an interconnect joins two or more ports");
    let m = ModuleBuilder::new(&format!("vta_axi_interconnect_n{ports}_w{data_bits}"));
    let iw = addr_bits(u64::from(ports));
    // The master-driven signals of every slave port, port-major.
    let inputs: Vec<Vec<(&Signal, Sig)>> = (0..ports)
        .map(|k| {
            SIGNALS
                .iter()
                .filter(|s| s.2)
                .map(|s| (s, m.input(&format!("s{k}_axi_{}", s.0), s.width(data_bits))))
                .collect()
        })
        .collect();
    let from = |k: usize, name: &str| {
        inputs[k]
            .iter()
            .find(|(s, _)| s.0 == name)
            .unwrap_or_else(|| panic!("no AXI4 signal {name}"))
            .1
    };
    let every = |name: &str| -> Vec<Sig> { (0..ports as usize).map(|k| from(k, name)).collect() };
    let down = |name: &str, w: u32| m.input(&format!("m_axi_{name}"), w);

    // ---- address channels: AR feeds the R queue; AW feeds the W and B queues ----------------
    let r_queue = queue(
        &m,
        "u_r_owner",
        iw,
        queue_depth(ports, MAX_OUTSTANDING_READS),
    );
    let w_queue = queue(
        &m,
        "u_w_owner",
        iw,
        queue_depth(ports, MAX_OUTSTANDING_WRITES),
    );
    let b_queue = queue(
        &m,
        "u_b_owner",
        iw,
        queue_depth(ports, MAX_OUTSTANDING_WRITES),
    );
    for (ax, room) in [
        ("ar", r_queue.output("in_ready")),
        (
            "aw",
            w_queue.output("in_ready") & b_queue.output("in_ready"),
        ),
    ] {
        let arb = m.instance(&format!("u_{ax}_arb"), &rr_arbiter(ports));
        let held = m.reg(&format!("{ax}_held"), 1, 0);
        let held_grant = m.reg(&format!("{ax}_held_grant"), ports, 0);
        let valids = m.cat(
            &every(&format!("{ax}valid"))
                .into_iter()
                .rev()
                .collect::<Vec<_>>(),
        );
        arb.connect("req", m.mux(held, held_grant, valids));
        let grant = arb.output("grant");
        let pick = arb.output("grant_index");
        let axready = down(&format!("{ax}ready"), 1);
        let axvalid = m.output_from(
            &format!("m_axi_{ax}valid"),
            arb.output("grant_valid") & room,
        );
        let fire = m.named(&format!("{ax}_fire"), axvalid & axready);
        arb.connect("ack", fire);
        m.next(held, axvalid & !axready);
        m.next(held_grant, grant);
        for field in ["addr", "len", "size", "burst"] {
            let n = format!("{ax}{field}");
            m.output_from(&format!("m_axi_{n}"), m.index(pick, &every(&n)));
        }
        for k in 0..ports {
            m.output_from(
                &format!("s{k}_axi_{ax}ready"),
                grant.bit(k) & axready & room,
            );
        }
        let pushed: &[&Inst] = if ax == "ar" {
            &[&r_queue]
        } else {
            &[&w_queue, &b_queue]
        };
        for q in pushed {
            q.connect("in_valid", fire);
            q.connect("in_data", pick);
        }
    }

    // ---- response and write-data channels, routed by the queues' heads ---------------------
    let (rvalid, rlast) = (down("rvalid", 1), down("rlast", 1));
    let (rdata, rresp) = (down("rdata", data_bits), down("rresp", 2));
    let (wready, bvalid, bresp) = (down("wready", 1), down("bvalid", 1), down("bresp", 2));

    let (r_some, r_owner) = (r_queue.output("out_valid"), r_queue.output("out_data"));
    let rready = m.output_from("m_axi_rready", r_some & m.index(r_owner, &every("rready")));
    r_queue.connect("out_ready", rvalid & rready & rlast);

    let (w_some, w_owner) = (w_queue.output("out_valid"), w_queue.output("out_data"));
    let wvalid = m.output_from("m_axi_wvalid", w_some & m.index(w_owner, &every("wvalid")));
    for n in ["wdata", "wstrb", "wlast"] {
        m.output_from(&format!("m_axi_{n}"), m.index(w_owner, &every(n)));
    }
    let wlast = m.index(w_owner, &every("wlast"));
    w_queue.connect("out_ready", wvalid & wready & wlast);

    let (b_some, b_owner) = (b_queue.output("out_valid"), b_queue.output("out_data"));
    let bready = m.output_from("m_axi_bready", b_some & m.index(b_owner, &every("bready")));
    b_queue.connect("out_ready", bvalid & bready);

    for k in 0..ports {
        let s = |n: &str| format!("s{k}_axi_{n}");
        let r_mine = r_some & r_owner.eq(u64::from(k));
        let w_mine = w_some & w_owner.eq(u64::from(k));
        let b_mine = b_some & b_owner.eq(u64::from(k));
        m.output_from(&s("rvalid"), r_mine & rvalid);
        m.output_from(&s("rdata"), rdata);
        m.output_from(&s("rresp"), rresp);
        m.output_from(&s("rlast"), rlast);
        m.output_from(&s("wready"), w_mine & wready);
        m.output_from(&s("bvalid"), b_mine & bvalid);
        m.output_from(&s("bresp"), bresp);
    }
    m.finish().expect("the AXI4 interconnect is well formed")
}

/// A queue of port indices (`iw` bits, `depth` entries) instanced as `name`.
fn queue<'a>(m: &'a ModuleBuilder, name: &str, iw: u32, depth: u32) -> Inst<'a> {
    m.instance(name, &small_fifo(iw, depth))
}
