//! The accelerator's ports in simulation: the Verilated `vta_top` with its DRAM (the AXI4
//! memory model of `hdl`, [`AxiMemory`]) on the master port and the host's side of the
//! AXI4-Lite control port ([`Accelerator`]: register reads and writes, the identity check,
//! and the run sequence of [`vta_hw::regs`], the same code a board driver runs over
//! memory-mapped registers).
//!
//! Each call of [`Accelerator::cycle`] is one clock cycle: the memory drives its outputs
//! from its state (like registered logic), the model evaluates, the memory and the host
//! sample the accelerator's outputs and complete the handshakes of this cycle, a
//! [`Monitor`] looks (the simulator follows the debug outputs with one, for instruction
//! traces, hang detection and waveform windows), and the clock ticks.

use hdl::verilator::{Model, PortId};
use hdl::widgets::axi4_memory::{AxiMemory, AxiPorts, ErrorResponse};
use isa::HwConfig;
use vta_hw::regs;

/// The AXI4-Lite control port's handles: awvalid, awready, awaddr, wvalid, wready, wdata,
/// wstrb, bvalid, bready, bresp, arvalid, arready, araddr, rvalid, rready, rdata, rresp.
struct LitePorts([PortId; 17]);

impl LitePorts {
    fn new(m: &Model, prefix: &str) -> LitePorts {
        let l = |s: &str| m.port(&format!("{prefix}{s}"));
        LitePorts([
            l("awvalid"),
            l("awready"),
            l("awaddr"),
            l("wvalid"),
            l("wready"),
            l("wdata"),
            l("wstrb"),
            l("bvalid"),
            l("bready"),
            l("bresp"),
            l("arvalid"),
            l("arready"),
            l("araddr"),
            l("rvalid"),
            l("rready"),
            l("rdata"),
            l("rresp"),
        ])
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lite {
    Idle,
    /// A write: address and data not yet accepted (flags), then waiting for the response.
    Write {
        addr: u32,
        data: u32,
        aw: bool,
        w: bool,
    },
    /// A read: address not yet accepted, then waiting for the data.
    Read {
        addr: u32,
        ar: bool,
    },
}

/// The host's end of one AXI4-Lite control port: one transaction at a time, driven and
/// sampled once per clock cycle by whoever owns the model (an [`Accelerator`], or the
/// multi-core harness with one per core).
pub(crate) struct LiteMaster {
    ports: LitePorts,
    state: Lite,
    result: Option<u32>,
    /// AWVALID, WVALID, ARVALID as last driven (`None` after a reset), so that idle cycles
    /// write none of the port's inputs.
    valids: Option<(bool, bool, bool)>,
}

impl LiteMaster {
    /// The port whose signals are named `<prefix><signal>` (e.g. `s_axi_control_awaddr`).
    pub(crate) fn new(m: &Model, prefix: &str) -> LiteMaster {
        LiteMaster {
            ports: LitePorts::new(m, prefix),
            state: Lite::Idle,
            result: None,
            valids: None,
        }
    }

    /// Forgets any transaction and sets the inputs that never change (the host always ready,
    /// full strobes); call after the model's reset.
    pub(crate) fn reset(&mut self, m: &mut Model) {
        self.state = Lite::Idle;
        self.result = None;
        self.valids = None;
        let l = &self.ports.0;
        m.set(l[8], 1); // bready
        m.set(l[14], 1); // rready
        m.set(l[6], 0xf); // wstrb
    }

    /// No transaction in progress.
    pub(crate) fn idle(&self) -> bool {
        self.state == Lite::Idle
    }

    /// Starts a write of `value` to register `offset`.
    pub(crate) fn begin_write(&mut self, offset: u32, value: u32) {
        self.begin(Lite::Write {
            addr: offset,
            data: value,
            aw: false,
            w: false,
        });
    }

    /// Starts a read of register `offset`.
    pub(crate) fn begin_read(&mut self, offset: u32) {
        self.begin(Lite::Read {
            addr: offset,
            ar: false,
        });
    }

    fn begin(&mut self, t: Lite) {
        assert_eq!(self.state, Lite::Idle, "one AXI-Lite transaction at a time");
        self.state = t;
        self.result = None;
    }

    /// The completed transaction's value (a read's data, 0 for a write), once.
    pub(crate) fn take_result(&mut self) -> Option<u32> {
        self.result.take()
    }

    /// Abandons the transaction in progress; returns what it was, for messages.
    fn abandon(&mut self) -> String {
        let what = match self.state {
            Lite::Write { addr, data, .. } => {
                format!("a write of {data:#x} to register {addr:#x}")
            }
            Lite::Read { addr, .. } => format!("a read of register {addr:#x}"),
            Lite::Idle => "an idle port".into(),
        };
        self.state = Lite::Idle;
        what
    }

    /// Drives the cycle's outputs; returns the valids offered, for [`LiteMaster::sample`].
    pub(crate) fn drive(&mut self, m: &mut Model) -> (bool, bool, bool) {
        let l = &self.ports.0;
        let (mut awv, mut wv, mut arv) = (false, false, false);
        match self.state {
            Lite::Write { addr, data, aw, w } => {
                awv = !aw;
                wv = !w;
                m.set(l[2], addr as u64);
                m.set(l[5], data as u64);
            }
            Lite::Read { addr, ar } => {
                arv = !ar;
                m.set(l[12], addr as u64);
            }
            Lite::Idle => {}
        }
        if self.valids != Some((awv, wv, arv)) {
            m.set(l[0], awv as u64);
            m.set(l[3], wv as u64);
            m.set(l[10], arv as u64);
            self.valids = Some((awv, wv, arv));
        }
        (awv, wv, arv)
    }

    /// Completes the handshakes of the cycle whose valids were `offered`.
    pub(crate) fn sample(&mut self, m: &Model, offered: (bool, bool, bool)) {
        let l = &self.ports.0;
        let (awv, wv, arv) = offered;
        match &mut self.state {
            Lite::Write { aw, w, .. } => {
                if awv && m.get_bool(l[1]) {
                    *aw = true;
                }
                if wv && m.get_bool(l[4]) {
                    *w = true;
                }
                if m.get_bool(l[7]) {
                    self.state = Lite::Idle;
                    self.result = Some(0);
                }
            }
            Lite::Read { ar, .. } => {
                if arv && m.get_bool(l[11]) {
                    *ar = true;
                }
                if m.get_bool(l[13]) {
                    self.result = Some(m.get(l[15]) as u32);
                    self.state = Lite::Idle;
                }
            }
            Lite::Idle => {}
        }
    }
}

/// What the harness found wrong with the accelerator in a run: its AXI traffic, its error
/// flag, its identity.
#[derive(Debug, thiserror::Error)]
pub enum AcceleratorError {
    /// The accelerator broke an AXI rule, or accessed memory outside the model.
    #[error("AXI protocol violations: {}", .0.join("; "))]
    Protocol(Vec<String>),
    /// The memory answered bursts with an error response (injected, see
    /// [`AxiMemory::set_faults`]): the first few, their number, CONTROL at DONE, and the
    /// run's first cycle (cycles in the message count from it).
    #[error("{}", error_responses_message(.responses, *.total, *.control, *.t0))]
    ErrorResponses {
        responses: Vec<ErrorResponse>,
        total: u64,
        control: u32,
        t0: u64,
    },
    /// The accelerator reported an error (CONTROL bit 2).
    #[error("the accelerator reported an error (CONTROL = {control:#x}); {status}")]
    Fault { control: u32, status: String },
    /// The bitstream is not the expected one.
    #[error("identity check failed: {0}")]
    Identity(String),
    /// The control port left an AXI-Lite transaction unanswered (broken RTL: the port answers
    /// every transaction within a few cycles).
    #[error(
        "the control port did not answer {0} within {LITE_TIMEOUT_CYCLES} cycles: the \
         accelerator's AXI-Lite slave is broken"
    )]
    ControlPort(String),
}

/// Cycles an AXI-Lite transaction may take before the control port counts as broken.
const LITE_TIMEOUT_CYCLES: u32 = 1000;

/// What the hardware does with an error response, and whether it flagged this one.
fn error_responses_message(rs: &[ErrorResponse], total: u64, control: u32, t0: u64) -> String {
    const SHOWN: usize = 4;
    let list: Vec<String> = rs
        .iter()
        .take(SHOWN)
        .map(|e| format!("{e} at cycle {}", e.cycle.saturating_sub(t0)))
        .collect();
    let more = match total.saturating_sub(list.len() as u64) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let hardware = if control & regs::CONTROL_ERROR != 0 {
        let mut consequences = vec![];
        if rs.iter().any(|e| !e.write) {
            consequences.push("the data of a failed read was used as if valid");
        }
        if rs.iter().any(|e| e.write) {
            consequences
                .push("a failed write (whose data the memory did not store) counted as done");
        }
        format!(
            "The accelerator flagged it (CONTROL = {control:#x}, error bit set) but does not stop \
             on an error response: its AXI master only raises a sticky error flag, so {}; the \
             run went on to FINISH and its outputs cannot be trusted",
            consequences.join(" and ")
        )
    } else {
        format!(
            "The accelerator did not flag it (CONTROL = {control:#x}, error bit clear): its \
             error reporting is broken"
        )
    };
    format!(
        "the memory answered {total} burst(s) with an error response: {}{more}. {hardware}",
        list.join("; ")
    )
}

/// What a run reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    /// Clock cycles the host observed, from the start write to seeing DONE.
    pub cycles: u64,
    /// Every register of the map after the run, by name, in map order.
    pub registers: Vec<(&'static str, u32)>,
}

impl RunResult {
    /// A register's value by name.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.registers.iter().find(|(n, _)| *n == name).map(|r| r.1)
    }
}

/// Watches every clock cycle of an [`Accelerator`] (instruction traces, hang detection,
/// waveform windows). [`Monitor::cycle`] is called once per cycle, after the cycle's inputs
/// were driven and the handshakes were sampled, just before the clock edge.
pub trait Monitor {
    /// `cycle` counts cycles since the accelerator was created; `model` may be read (its
    /// outputs show the cycle's state) or have a waveform opened or closed.
    fn cycle(&mut self, cycle: u64, model: &mut Model, mem: &AxiMemory);
}

/// The Verilated `vta_top` with its DRAM and host, watched by a [`Monitor`] `M`.
pub struct Accelerator<M: Monitor> {
    model: Model,
    mem: AxiMemory,
    axi: AxiPorts,
    lite: LiteMaster,
    cycle: u64,
    monitor: M,
}

impl<M: Monitor> Accelerator<M> {
    /// Wraps a built model of `vta_top` for `cfg`, with `monitor` watching every cycle;
    /// resets it and idles the ports.
    pub fn with_monitor(model: Model, cfg: &HwConfig, mem: AxiMemory, monitor: M) -> Self {
        assert_eq!(
            mem.bus_bits(),
            cfg.axi_data_width,
            "the memory's bus width must be the config's AXI_DATA_WIDTH"
        );
        let axi = AxiPorts::new(&model, "m_axi_");
        let lite = LiteMaster::new(&model, "s_axi_control_");
        let mut a = Accelerator {
            model,
            mem,
            axi,
            lite,
            cycle: 0,
            monitor,
        };
        a.reset();
        a
    }

    /// The monitor.
    pub fn monitor(&self) -> &M {
        &self.monitor
    }

    /// The monitor, to change or read it between runs.
    pub fn monitor_mut(&mut self) -> &mut M {
        &mut self.monitor
    }

    /// Holds reset for 4 cycles with every input idle; in-flight bursts are dropped.
    pub fn reset(&mut self) {
        idle_inputs(&mut self.model);
        self.model.reset(4);
        self.mem.reset(&mut self.model, &self.axi);
        self.lite.reset(&mut self.model);
    }

    /// The memory.
    pub fn memory(&self) -> &AxiMemory {
        &self.mem
    }

    /// The memory, to change its contents between runs.
    pub fn memory_mut(&mut self) -> &mut AxiMemory {
        &mut self.mem
    }

    /// The model, to read ports.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The model and the monitor together (e.g. for the monitor to close a waveform).
    pub fn model_and_monitor(&mut self) -> (&mut Model, &mut M) {
        (&mut self.model, &mut self.monitor)
    }

    /// Cycles simulated since the accelerator was created.
    pub fn cycles(&self) -> u64 {
        self.cycle
    }

    /// One clock cycle: memory and host drive their outputs, the handshakes of this cycle
    /// complete, the monitor looks, the clock ticks.
    ///
    /// The handshakes are sampled without evaluating the cycle's inputs first: `vta_top`'s
    /// outputs are registered (no output depends on an input combinationally; `vta-hw`'s
    /// tests hold it to that, and `model::instance` refuses a design that is not), so they
    /// still show what the last clock edge made them, and the inputs are evaluated with the
    /// next edge ([`Model::tick`]: one evaluation per cycle without a waveform).
    pub fn cycle(&mut self) {
        let now = self.cycle;
        let (m, mem) = (&mut self.model, &mut self.mem);
        let offered = mem.drive(m, &self.axi, now);
        let lite_offered = self.lite.drive(m);
        mem.sample(m, &self.axi, offered);
        self.lite.sample(m, lite_offered);
        self.monitor.cycle(now, m, mem);
        m.tick();
        self.cycle += 1;
    }

    /// Runs the clock until the transaction begun on the control port completes.
    fn lite_transaction(&mut self) -> Result<u32, AcceleratorError> {
        for _ in 0..LITE_TIMEOUT_CYCLES {
            self.cycle();
            if let Some(v) = self.lite.take_result() {
                return Ok(v);
            }
        }
        // Abandon the transaction so the port can be used (and fail again) cleanly.
        Err(AcceleratorError::ControlPort(self.lite.abandon()))
    }

    /// Writes a control register (one AXI-Lite write, all byte strobes).
    pub fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), AcceleratorError> {
        self.lite.begin_write(offset, value);
        self.lite_transaction().map(|_| ())
    }

    /// Reads a control register.
    pub fn read_reg(&mut self, offset: u32) -> Result<u32, AcceleratorError> {
        self.lite.begin_read(offset);
        self.lite_transaction()
    }

    /// Reads every register of the map.
    pub fn read_all(&mut self) -> Result<Vec<(&'static str, u32)>, AcceleratorError> {
        regs::read_all(self)
    }

    /// Checks VERSION and the ISA hash against `cfg` (what a driver does before running a
    /// program built for `cfg`: [`regs::check_identity`]).
    pub fn check_identity(&mut self, cfg: &HwConfig) -> Result<(), AcceleratorError> {
        regs::check_identity(self, cfg)?.map_err(AcceleratorError::Identity)
    }

    /// Every register as `NAME=value`, for messages.
    pub fn status(&mut self) -> String {
        match self.read_all() {
            Ok(regs) => {
                let regs: Vec<String> = regs.iter().map(|(n, v)| format!("{n}={v}")).collect();
                format!("registers: {}", regs.join(" "))
            }
            Err(e) => format!("registers unreadable: {e}"),
        }
    }

    /// Completes a run that reached DONE (started at cycle `t0`, the first write of
    /// [`regs::run`]): lets the memory drain, then checks for AXI violations and CONTROL's
    /// error bit, and for error responses the memory gave. For drivers of their own
    /// [`regs::Host`] over this accelerator.
    pub fn finish(
        &mut self,
        done: regs::Completion,
        t0: u64,
    ) -> Result<RunResult, AcceleratorError> {
        // Writes are answered before DONE; let anything else drain.
        for _ in 0..1000 {
            if self.mem.idle() {
                break;
            }
            self.cycle();
        }
        let violations = self.mem.take_violations();
        if !violations.is_empty() {
            return Err(AcceleratorError::Protocol(violations));
        }
        let (responses, total) = self.mem.take_error_responses();
        if total > 0 {
            return Err(AcceleratorError::ErrorResponses {
                responses,
                total,
                control: done.control,
                t0,
            });
        }
        if done.control & regs::CONTROL_ERROR != 0 {
            let status = self.status();
            return Err(AcceleratorError::Fault {
                control: done.control,
                status,
            });
        }
        Ok(RunResult {
            cycles: self.cycle - t0,
            registers: done.registers,
        })
    }
}

/// Sets every data input of `m` to zero, as before a reset.
pub(crate) fn idle_inputs(m: &mut Model) {
    let inputs: Vec<PortId> = (0..m.ports().len())
        .map(PortId)
        .filter(|&i| {
            let p = m.info(i);
            p.dir == hdl::Dir::Input && p.role == hdl::PortRole::Data
        })
        .collect();
    for id in inputs {
        if m.info(id).width <= 64 {
            m.set(id, 0);
        } else {
            m.set_wide(id, &[]);
        }
    }
}

/// The simulated control port: AXI4-Lite transactions on the model; waiting between polls
/// is the clock running on (a read of CONTROL itself takes a few cycles).
impl<M: Monitor> regs::Host for Accelerator<M> {
    type Error = AcceleratorError;
    fn read_reg(&mut self, offset: u32) -> Result<u32, Self::Error> {
        Accelerator::read_reg(self, offset)
    }
    fn write_reg(&mut self, offset: u32, value: u32) -> Result<(), Self::Error> {
        Accelerator::write_reg(self, offset, value)
    }
    fn poll_wait(&mut self, _polls: u64) -> Result<(), Self::Error> {
        Ok(())
    }
}
