//! The whole SoC (`vta_hw::soc`'s `vta_soc`: accelerator, device memory, UART bridge) in
//! Verilator, reached the way a board is: through its UART pins. [`SimLine`] drives
//! `uart_rx` and decodes `uart_tx` bit by bit (8N1, the SoC's divisor) and is a byte stream
//! (`Read + Write`), so the serial driver (`drivers::serial::SerialDevice`) runs on it
//! unchanged; [`device`] opens that driver on a fresh simulated SoC (`--backend soc-sim`).
//!
//! Time passes only when the host waits: [`SimLine::flush`] runs the clock until the bytes
//! written so far are on the line, a read runs it until a byte arrives, or until the line
//! has been quiet (both directions) for [`SimOptions::quiet_cycles`], the simulated port's
//! read timeout. The simulation uses [`sim_params`]: 4 clock cycles per bit and the
//! shortest frame timeout, with a device memory large enough for the conformance suite.
//!
//! The device memory is block RAM, or ([`SimMemory::Sdram`]) an SDRAM controller with a
//! behavioural model of the chip on its pins (`crate::sdram_model`), in a test bench top
//! `vta_soc_sdram_tb` whose pins are the SoC's plus the model's `sdram_fault` and
//! `sdram_fault_code`.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use drivers::serial::{SerialDevice, SerialError, SerialOptions};
use hdl::verilator::{BuildError, BuildOptions, Model, PortId};
use hdl::{Design, ModuleBuilder};
use isa::HwConfig;
use vta_hw::soc::{DeviceMemory, SocError, SocParams};

use crate::sdram_model::{self, SdramChip};

/// Clock cycles per UART bit in simulation: the fewest the receiver takes.
pub const SIM_DIVISOR: u32 = hdl::widgets::MIN_UART_DIVISOR;

/// The SoC parameters of the simulation for `cfg`: its clock, a baud rate of a quarter of
/// it (4 cycles per bit), the shortest frame timeout (64 character times), and 16 MiB of
/// device memory at `0x1000_0000`.
pub fn sim_params(cfg: &HwConfig) -> SocParams {
    let p = SocParams::for_config(cfg);
    SocParams {
        baud: p.clock_hz / SIM_DIVISOR,
        mem_bytes: 16 << 20,
        frame_timeout_us: 0,
        ..p
    }
}

/// Why the simulated SoC cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot generate the SoC: {0}")]
    Soc(#[from] SocError),
    #[error("cannot build the SoC's Verilator model: {0}")]
    Build(#[from] BuildError),
    #[error("{0}")]
    Link(#[from] SerialError),
}

/// How to build and reach the simulated SoC.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// The SoC's parameters (`None`: [`sim_params`] of the config).
    pub params: Option<SocParams>,
    /// Where models are cached (`None`: `hdl::verilator::default_cache_dir()`).
    pub cache_dir: Option<PathBuf>,
    /// The simulated port's read timeout: cycles of silence on both wires after which a read
    /// gives up (`None`: four frame timeouts).
    pub quiet_cycles: Option<u64>,
    /// The serial driver's options (by default: backend name `soc-sim`, a run bounded by
    /// ten minutes of wall time).
    pub serial: SerialOptions,
    /// Cycles per bit of the host's end of the line (`None`: the SoC's; another value
    /// simulates a port set to the wrong baud rate).
    pub host_divisor: Option<u32>,
    /// The device memory.
    pub memory: SimMemory,
}

/// The simulated SoC's device memory.
#[derive(Clone, Debug, Default)]
pub enum SimMemory {
    /// Block RAM of [`SimOptions::params`]' size.
    #[default]
    BlockRam,
    /// An SDR SDRAM controller (a [`DeviceMemory::Controller`] with pins `sdram_cke`,
    /// `sdram_cs_n`, `sdram_ras_n`, `sdram_cas_n`, `sdram_we_n`, `sdram_ba`, `sdram_a`,
    /// `sdram_dm`, `sdram_dq_o`, `sdram_dq_oe` out and `sdram_dq_i` in) on a model of `chip`.
    /// [`SimOptions::params`] must give the chip's size as the memory's.
    Sdram {
        controller: DeviceMemory,
        chip: SdramChip,
    },
}

/// Cycles an SDRAM controller takes to initialize the chip after reset: the 200 us of
/// stable clock before the first command, and a margin for the init sequence.
fn sdram_init_cycles(clock_hz: u32) -> u64 {
    u64::from(clock_hz) / 5000 + 2000
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            params: None,
            cache_dir: None,
            quiet_cycles: None,
            serial: SerialOptions {
                backend: "soc-sim".into(),
                // Simulated cycles are slow: a run of tens of millions of cycles takes
                // many seconds.
                default_wall: Duration::from_secs(600),
                ..SerialOptions::default()
            },
            host_divisor: None,
            memory: SimMemory::BlockRam,
        }
    }
}

/// A character being shifted onto `uart_rx`: the ten bits (start, data LSB first, stop) in
/// the low bits, which bit is on the wire, and its cycles left.
struct Sending {
    bits: u16,
    bit: u32,
    left: u64,
}

/// The decoder of `uart_tx`: cycles to the next sample, and the bits sampled so far.
struct Receiving {
    next_sample: u64,
    bit: u32,
    shift: u8,
}

/// A fault the line injects, to test how the bridge and the driver cope. Bytes are counted
/// from the moment it is injected, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFault {
    /// The host's `n`th byte never reaches the SoC.
    LoseHostByte(usize),
    /// The host's `n`th byte reaches the SoC with its bit 4 flipped.
    DamageHostByte(usize),
    /// The SoC's `n`th byte never reaches the host.
    LoseDeviceByte(usize),
}

/// The simulated SoC's serial line (see the module docs).
pub struct SimLine {
    model: Model,
    rx: PortId,
    tx: PortId,
    divisor: u64,
    quiet_cycles: u64,
    pending: VecDeque<u8>,
    sending: Option<Sending>,
    receiving: Option<Receiving>,
    received: VecDeque<u8>,
    framing_errors: u64,
    cycles: u64,
    /// Injected faults, with the count of bytes still to pass before each.
    faults: Vec<LineFault>,
}

impl SimLine {
    /// The line of a fresh instance of `model` (a `vta_soc` with `divisor` cycles per bit),
    /// reset, then run for `settle` cycles (an SDRAM controller initializing the chip).
    fn new(mut model: Model, divisor: u32, quiet_cycles: u64, settle: u64) -> SimLine {
        let rx = model.port("uart_rx");
        let tx = model.port("uart_tx");
        model.set(rx, 1);
        model.reset(4);
        model.ticks(settle);
        SimLine {
            model,
            rx,
            tx,
            divisor: divisor.into(),
            quiet_cycles,
            pending: VecDeque::new(),
            sending: None,
            receiving: None,
            received: VecDeque::new(),
            framing_errors: 0,
            cycles: 0,
            faults: Vec::new(),
        }
    }

    /// The level of the SoC's output pin `name` (`led_busy`, `led_done`, `led_error`, ...).
    pub fn pin(&self, name: &str) -> bool {
        self.model.get_bool(self.model.port(name))
    }

    /// The SDRAM model's first fault, as its code and meaning (see
    /// [`sdram_model::FAULTS`]); `None` without a fault or without SDRAM.
    pub fn sdram_fault(&self) -> Option<(u8, &'static str)> {
        let fault = self.model.try_port("sdram_fault")?;
        if !self.model.get_bool(fault) {
            return None;
        }
        let code = self.model.get(self.model.port("sdram_fault_code")) as u8;
        Some((code, sdram_model::fault_text(code)))
    }

    /// Injects `fault` (see [`LineFault`]).
    pub fn inject(&mut self, fault: LineFault) {
        self.faults.push(fault);
    }

    /// Counts a byte of the host (`host`) or the SoC past the injected faults: whether it is
    /// lost, and the bits to flip in it.
    fn pass(&mut self, host: bool) -> (bool, u8) {
        let (mut lost, mut flip) = (false, 0);
        self.faults.retain_mut(|f| {
            let (mine, n) = match f {
                LineFault::LoseHostByte(n) | LineFault::DamageHostByte(n) => (host, n),
                LineFault::LoseDeviceByte(n) => (!host, n),
            };
            if !mine {
                return true;
            }
            if *n > 0 {
                *n -= 1;
                return true;
            }
            match f {
                LineFault::DamageHostByte(_) => flip = 0x10,
                _ => lost = true,
            }
            false
        });
        (lost, flip)
    }

    /// Clock cycles simulated since reset.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// Characters from the SoC whose stop bit was not 1 (a bug in the bridge if not 0).
    pub fn framing_errors(&self) -> u64 {
        self.framing_errors
    }

    /// Whether the host still has bits to put on the line.
    fn host_busy(&self) -> bool {
        self.sending.is_some() || !self.pending.is_empty()
    }

    /// Advances the clock by one event: to the host's next bit edge or the decoder's next
    /// sample, or by one cycle while the decoder waits for a start bit.
    fn step(&mut self) {
        if self.sending.is_none() {
            if let Some(b) = self.pending.pop_front() {
                self.sending = Some(Sending {
                    bits: 0x200 | u16::from(b) << 1,
                    bit: 0,
                    left: self.divisor,
                });
            }
        }
        let mut n = self.receiving.as_ref().map_or(1, |r| r.next_sample);
        let level = match &self.sending {
            Some(s) => {
                n = n.min(s.left);
                s.bits >> s.bit & 1
            }
            None => 1,
        };
        self.model.set(self.rx, level.into());
        self.model.ticks(n);
        self.cycles += n;
        if let Some(s) = &mut self.sending {
            s.left -= n;
            if s.left == 0 {
                s.bit += 1;
                s.left = self.divisor;
                if s.bit == 10 {
                    self.sending = None;
                }
            }
        }
        let line = self.model.get_bool(self.tx);
        match &mut self.receiving {
            None if !line => {
                self.receiving = Some(Receiving {
                    next_sample: self.divisor / 2,
                    bit: 0,
                    shift: 0,
                })
            }
            None => {}
            Some(r) => {
                r.next_sample -= n;
                if r.next_sample == 0 {
                    r.next_sample = self.divisor;
                    match r.bit {
                        // A start bit that is gone by its middle was a glitch.
                        0 if line => self.receiving = None,
                        1..=8 => r.shift = r.shift >> 1 | u8::from(line) << 7,
                        9 => {
                            let byte = r.shift;
                            self.receiving = None;
                            if !line {
                                self.framing_errors += 1;
                            } else if !self.pass(false).0 {
                                self.received.push_back(byte);
                            }
                        }
                        _ => {}
                    }
                    if let Some(r) = &mut self.receiving {
                        r.bit += 1;
                    }
                }
            }
        }
    }
}

impl Write for SimLine {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for &b in buf {
            let (lost, flip) = self.pass(true);
            if !lost {
                self.pending.push_back(b ^ flip);
            }
        }
        Ok(buf.len())
    }

    /// Runs the clock until every byte written is on the line.
    fn flush(&mut self) -> io::Result<()> {
        while self.host_busy() {
            self.step();
        }
        Ok(())
    }
}

impl Read for SimLine {
    /// Runs the clock until a character from the SoC is complete, or fails with `TimedOut`
    /// once both wires have been quiet for the port's timeout.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut quiet = 0;
        while self.received.is_empty() {
            if quiet >= self.quiet_cycles {
                return Err(io::ErrorKind::TimedOut.into());
            }
            let before = self.cycles;
            let busy = self.host_busy() || self.receiving.is_some();
            self.step();
            quiet = if busy {
                0
            } else {
                quiet + self.cycles - before
            };
        }
        let n = buf.len().min(self.received.len());
        for (b, r) in buf.iter_mut().zip(self.received.drain(..n)) {
            *b = r;
        }
        Ok(n)
    }
}

type Protos = HashMap<String, Arc<Mutex<Model>>>;

/// A fresh instance of the model of `vta_soc` for `cfg` and `params`, built into
/// `cache_dir` on first use (once per process; `progress` hears the build stages).
fn instance(
    cfg: &HwConfig,
    params: &SocParams,
    memory: &SimMemory,
    cache_dir: &std::path::Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Model, SimError> {
    static PROTOS: OnceLock<Mutex<Protos>> = OnceLock::new();
    // An SDRAM bench is keyed by its Verilog, which holds the controller's.
    let sdram_bench = match memory {
        SimMemory::BlockRam => None,
        SimMemory::Sdram { controller, chip } => Some(sdram_bench(cfg, params, controller, chip)?),
    };
    let key = match &sdram_bench {
        None => format!("{}{params:?}", cfg.to_json()),
        Some(d) => format!(
            "sdram {:016x}",
            isa::container::fnv1a(d.verilog("").as_bytes())
        ),
    };
    let mut protos = PROTOS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(p) = protos.get(&key) {
        return Ok(p.lock().unwrap_or_else(|e| e.into_inner()).new_instance());
    }
    let design = match sdram_bench {
        Some(d) => d,
        None => vta_hw::soc::generate(cfg, params)?.design,
    };
    let model = Model::build_with(&design, cache_dir, &BuildOptions::default(), progress)?;
    let inst = model.new_instance();
    protos.insert(key, Arc::new(Mutex::new(model)));
    Ok(inst)
}

/// `vta_soc_sdram_tb`: the SoC with `controller` as its device memory, and a model of
/// `chip` on the controller's pins.
fn sdram_bench(
    cfg: &HwConfig,
    params: &SocParams,
    controller: &DeviceMemory,
    chip: &SdramChip,
) -> Result<Design, SimError> {
    let soc = vta_hw::soc::build_with(cfg, params, controller)?;
    let m = ModuleBuilder::new("vta_soc_sdram_tb");
    m.set_clock("clk");
    m.set_reset(params.reset_pin(), params.reset_active_low);
    let s = m.instance("u_soc", &soc);
    let model = sdram_model::model(chip, params.clock_hz);
    let c = m.instance("u_sdram", &model);
    s.connect("uart_rx", m.input("uart_rx", 1));
    for pin in ["uart_tx", "led_busy", "led_done", "led_error"] {
        m.output_from(pin, s.output(pin));
    }
    for p in model.ports() {
        if p.role != hdl::PortRole::Data {
            continue;
        }
        match (p.dir, p.name.as_str()) {
            (hdl::Dir::Input, name) => c.connect(name, s.output(name)),
            (hdl::Dir::Output, "sdram_dq_i") => s.connect("sdram_dq_i", c.output("sdram_dq_i")),
            (hdl::Dir::Output, name) => {
                m.output_from(&format!("sdram_{name}"), c.output(name));
            }
        }
    }
    Ok(Design::new(
        m.finish().expect("the SDRAM test bench is well formed"),
    ))
}

/// The serial driver on a fresh simulated SoC for `cfg` (its model built or loaded as
/// needed; `progress` hears the build stages).
pub fn device(
    cfg: &HwConfig,
    opts: &SimOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<SerialDevice<SimLine>, SimError> {
    let params = opts.params.clone().unwrap_or_else(|| sim_params(cfg));
    let cache = opts
        .cache_dir
        .clone()
        .unwrap_or_else(hdl::verilator::default_cache_dir);
    let model = instance(cfg, &params, &opts.memory, &cache, progress)?;
    let quiet = opts
        .quiet_cycles
        .unwrap_or(4 * u64::from(params.frame_timeout()?));
    let settle = match opts.memory {
        SimMemory::BlockRam => 0,
        SimMemory::Sdram { .. } => sdram_init_cycles(params.clock_hz),
    };
    let line = SimLine::new(
        model,
        opts.host_divisor.unwrap_or(params.divisor()?),
        quiet,
        settle,
    );
    let port = format!("the simulated SoC's UART ({} baud)", params.baud);
    Ok(SerialDevice::open(line, &port, cfg, opts.serial.clone())?)
}
