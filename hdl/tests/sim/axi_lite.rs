//! The AXI4-Lite register file against a Rust model of its register map, with randomized
//! handshake timing (independent AW and W delays, random BREADY/RREADY).

use hdl::verilator::{Model, PortId};
use hdl::widgets::{axi_lite_regfile, RegKind, RegSpec};

use crate::util::{build, Rng};

struct Ports {
    awaddr: PortId,
    awvalid: PortId,
    awready: PortId,
    wdata: PortId,
    wstrb: PortId,
    wvalid: PortId,
    wready: PortId,
    bresp: PortId,
    bvalid: PortId,
    bready: PortId,
    araddr: PortId,
    arvalid: PortId,
    arready: PortId,
    rdata: PortId,
    rresp: PortId,
    rvalid: PortId,
    rready: PortId,
}

struct Bench {
    sim: Model,
    p: Ports,
    specs: Vec<RegSpec>,
    regs: Vec<PortId>,
    /// Model: value of each read/write register.
    values: Vec<u32>,
    /// Pulse expected on each write-pulse register this cycle.
    pulses: Vec<u32>,
    /// Value currently driven on each read-only input.
    inputs: Vec<u32>,
    rng: Rng,
    cycle: u64,
}

const ADDR_WIDTH: u32 = 12;

impl Bench {
    fn new() -> Bench {
        let specs = vec![
            RegSpec::new("ctrl", RegKind::ReadWrite { reset: 0x1234_5678 }),
            RegSpec::new("status", RegKind::ReadOnly),
            RegSpec::new("start", RegKind::WritePulse),
            RegSpec::new("base", RegKind::ReadWrite { reset: 0 }),
            RegSpec::new("count", RegKind::ReadOnly),
        ];
        let mut sim = build(axi_lite_regfile("regfile5", "s_axil", ADDR_WIDTH, &specs));
        let pp = |s: &str| sim.port(&format!("s_axil_{s}"));
        let p = Ports {
            awaddr: pp("awaddr"),
            awvalid: pp("awvalid"),
            awready: pp("awready"),
            wdata: pp("wdata"),
            wstrb: pp("wstrb"),
            wvalid: pp("wvalid"),
            wready: pp("wready"),
            bresp: pp("bresp"),
            bvalid: pp("bvalid"),
            bready: pp("bready"),
            araddr: pp("araddr"),
            arvalid: pp("arvalid"),
            arready: pp("arready"),
            rdata: pp("rdata"),
            rresp: pp("rresp"),
            rvalid: pp("rvalid"),
            rready: pp("rready"),
        };
        let regs = specs.iter().map(|r| sim.port(&r.name)).collect();
        let values = specs
            .iter()
            .map(|r| match r.kind {
                RegKind::ReadWrite { reset } => reset,
                _ => 0,
            })
            .collect();
        sim.reset(2);
        Bench {
            sim,
            p,
            regs,
            values,
            pulses: vec![0; specs.len()],
            inputs: vec![0; specs.len()],
            specs,
            rng: Rng::new(77),
            cycle: 0,
        }
    }

    /// Start of a cycle: drive fresh values on the read-only inputs.
    fn drive_inputs(&mut self) {
        for i in 0..self.specs.len() {
            if self.specs[i].kind == RegKind::ReadOnly {
                self.inputs[i] = self.rng.next_u64() as u32;
                self.sim.set(self.regs[i], self.inputs[i] as u64);
            }
        }
    }

    /// After eval: the register outputs match the model.
    fn check_outputs(&self) {
        for (i, r) in self.specs.iter().enumerate() {
            let got = self.sim.get(self.regs[i]) as u32;
            match r.kind {
                RegKind::ReadWrite { .. } => assert_eq!(
                    got, self.values[i],
                    "register `{}` at cycle {}",
                    r.name, self.cycle
                ),
                RegKind::WritePulse => assert_eq!(
                    got, self.pulses[i],
                    "pulse `{}` at cycle {}",
                    r.name, self.cycle
                ),
                RegKind::ReadOnly => {}
            }
        }
    }

    fn tick(&mut self) {
        self.sim.tick();
        self.cycle += 1;
        self.pulses.iter_mut().for_each(|p| *p = 0);
        assert!(self.cycle < 1_000_000, "bench did not finish");
    }

    fn index(addr: u32) -> Option<usize> {
        let i = (addr >> 2) as usize;
        (i < 5 && addr >> ADDR_WIDTH == 0).then_some(i)
    }

    fn write(&mut self, addr: u32, data: u32, strb: u32) {
        let aw_delay = self.rng.below(5);
        let w_delay = self.rng.below(5);
        let (mut aw_done, mut w_done, mut applied) = (false, false, false);
        for k in 0.. {
            let awv = !aw_done && k >= aw_delay;
            let wv = !w_done && k >= w_delay;
            let br = self.rng.chance(50);
            self.sim.set(self.p.awvalid, awv as u64);
            self.sim.set(self.p.awaddr, addr as u64);
            self.sim.set(self.p.wvalid, wv as u64);
            self.sim.set(self.p.wdata, data as u64);
            self.sim.set(self.p.wstrb, strb as u64);
            self.sim.set(self.p.bready, br as u64);
            self.sim.set(self.p.arvalid, 0);
            self.sim.set(self.p.rready, self.rng.chance(50) as u64);
            self.drive_inputs();
            self.sim.eval();
            assert!(
                !self.sim.get_bool(self.p.rvalid),
                "read response without a read"
            );
            let bvalid = self.sim.get_bool(self.p.bvalid);
            if bvalid && !applied {
                // The write took effect at the edge that raised BVALID.
                assert!(
                    aw_done && w_done,
                    "BVALID before both AW and W were accepted"
                );
                applied = true;
                if let Some(i) = Bench::index(addr) {
                    let mask = (0..4).fold(0u32, |m, b| {
                        if strb >> b & 1 == 1 {
                            m | 0xff << (8 * b)
                        } else {
                            m
                        }
                    });
                    match self.specs[i].kind {
                        RegKind::ReadWrite { .. } => {
                            self.values[i] = (data & mask) | (self.values[i] & !mask)
                        }
                        RegKind::WritePulse => self.pulses[i] = data & mask,
                        RegKind::ReadOnly => {}
                    }
                }
            }
            self.check_outputs();
            if awv && self.sim.get_bool(self.p.awready) {
                aw_done = true;
            }
            if wv && self.sim.get_bool(self.p.wready) {
                w_done = true;
            }
            let finished = bvalid && br;
            if finished {
                assert_eq!(self.sim.get(self.p.bresp), 0, "BRESP must be OKAY");
            }
            self.tick();
            if finished {
                return;
            }
        }
    }

    fn read(&mut self, addr: u32) {
        let ar_delay = self.rng.below(4);
        let mut expect: Option<u32> = None;
        for k in 0.. {
            let arv = expect.is_none() && k >= ar_delay;
            let rr = self.rng.chance(50);
            self.sim.set(self.p.arvalid, arv as u64);
            self.sim.set(self.p.araddr, addr as u64);
            self.sim.set(self.p.rready, rr as u64);
            self.sim.set(self.p.awvalid, 0);
            self.sim.set(self.p.wvalid, 0);
            self.sim.set(self.p.bready, 1);
            self.drive_inputs();
            self.sim.eval();
            self.check_outputs();
            assert!(
                !self.sim.get_bool(self.p.bvalid),
                "write response without a write"
            );
            let rvalid = self.sim.get_bool(self.p.rvalid);
            if rvalid {
                let e = expect.expect("RVALID before the read was accepted");
                assert_eq!(
                    self.sim.get(self.p.rdata) as u32,
                    e,
                    "read of {addr:#x} at cycle {}",
                    self.cycle
                );
                assert_eq!(self.sim.get(self.p.rresp), 0, "RRESP must be OKAY");
            }
            if arv && self.sim.get_bool(self.p.arready) {
                // The value is sampled at the AR handshake.
                expect = Some(match Bench::index(addr) {
                    Some(i) => match self.specs[i].kind {
                        RegKind::ReadWrite { .. } => self.values[i],
                        RegKind::ReadOnly => self.inputs[i],
                        RegKind::WritePulse => 0,
                    },
                    None => 0,
                });
            }
            self.tick();
            if rvalid && rr {
                return;
            }
        }
    }
}

#[test]
fn axi_lite_regfile_matches_register_map() {
    let mut b = Bench::new();
    // After reset.
    b.read(0);
    b.read(12);
    for _ in 0..3000 {
        // Mostly mapped addresses, some beyond the map, some with byte offsets.
        let addr = match b.rng.below(10) {
            0 => (b.rng.below(1 << ADDR_WIDTH) as u32) & !3,
            1 => b.rng.below(1 << ADDR_WIDTH) as u32,
            _ => (b.rng.below(6) as u32) * 4,
        };
        if b.rng.chance(50) {
            let data = b.rng.next_u64() as u32;
            let strb = if b.rng.chance(60) {
                0xf
            } else {
                b.rng.bits(4) as u32
            };
            b.write(addr, data, strb);
        } else {
            b.read(addr);
        }
    }
}
