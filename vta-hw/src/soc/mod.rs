//! A usable SoC around the accelerator, for FPGA boards without a CPU: `vta_soc` =
//! `vta_top` + device memory (block RAM, or an external memory's controller) + a UART host
//! bridge, with the pins a small ECP5 or Gowin board has.
//!
//! ```text
//!  uart_rx ──> vta_uart_bridge ──m_ctl (AXI4-Lite)──> vta_top.s_axi_control
//!  uart_tx <──        │                                 vta_top.m_axi (AXI4)
//!                      └──m_axi (AXI4)──> s0  soc_axi_arbiter  s1 <──┘
//!                                               └──> soc_ram (block RAM, AXI4 slave)
//!                                                    or soc_mem_window ──> an external
//!                                                       memory's controller (SDRAM)
//!  led_busy, led_done, led_error <── CONTROL's running, done and error bits
//! ```
//!
//! # API (stable: the bitstream flow builds on it)
//!
//! * [`SocParams`]: clock frequency, baud rate, device memory size and address, frame
//!   timeout, pin polarities. [`SocParams::for_config`] takes the clock from the config's
//!   `CLOCK_MHZ`; every field may be changed (a board sets its oscillator's frequency).
//! * [`build`]`(cfg, params) -> hdl::Module`: the top `vta_soc`.
//! * [`generate`]`(cfg, params) -> GeneratedSoc`: its Verilog with a header comment (config,
//!   parameters, memory map, pins), the port manifest and the control register map.
//! * [`build_with`] / [`generate_with`]: the same with the device memory chosen
//!   ([`DeviceMemory`]): block RAM, or an external memory's controller (the bitstream flow
//!   gives it a LiteDRAM SDRAM controller) behind an [`axi4_window`], whose pins become
//!   pins of `vta_soc`.
//!
//! # Pins of `vta_soc`
//!
//! | pin | dir | meaning |
//! |---|---|---|
//! | `clk` | in | the clock, [`SocParams::clock_hz`] |
//! | `rst` / `rst_n` | in | synchronous reset, active high (`rst`) or low (`rst_n`, [`SocParams::reset_active_low`]); hold it for 2 cycles. It is sampled by every register directly: drive it from a synchronizer or a power-on reset when it comes from a button |
//! | `uart_rx` | in | UART from the host (8N1, [`SocParams::baud`]; a 2-flop synchronizer inside) |
//! | `uart_tx` | out | UART to the host |
//! | `led_busy` | out | a run is in progress |
//! | `led_done` | out | the last run finished (until the next start) |
//! | `led_error` | out | the last run reported an error (CONTROL bit 2) |
//!
//! The LEDs show CONTROL as the bridge last read it: it reads CONTROL every millisecond
//! while idle, and with every host read of it. [`SocParams::leds_active_low`] inverts them
//! (boards whose LEDs light on a low pin).
//!
//! # Memory map (the host's, through the bridge)
//!
//! | address | bytes | what |
//! |---|---|---|
//! | `0x0000_0000` | `0x100` | the accelerator's control registers (`vta_hw::regs`) |
//! | `0x0000_0100` | `0x20` | the bridge's read-only info registers (`drivers::serial::protocol::INFO_*`): ID, memory base and size, clock, baud, frame timeout, error counters |
//! | [`SocParams::mem_base`] | [`SocParams::mem_bytes`] | device memory (block RAM), where the accelerator's DMA sees it too |
//!
//! The accelerator sees only the device memory; a DMA access outside it gets SLVERR, which
//! sets CONTROL's error bit. The protocol (frames, check bytes, status, timeouts) is
//! documented in `drivers::serial`, which also holds its constants.
//!
//! # Sizing
//!
//! The default device memory is 32 KiB: with a small config (the `small` preset's 20 KiB of
//! scratchpads, or 1x8x8 with about 36 KiB) it fits the block RAM of an ECP5-25F (126 KiB)
//! or a Tang Nano 20K (92 KiB), and it holds the digits demo (about 8 KiB). Simulation uses
//! more.

pub(crate) mod axi;
mod bridge;
mod memory;

pub use axi::axi4_arbiter;
pub use bridge::{uart_bridge, BridgeConfig};
pub use memory::{axi4_ram, axi4_window};

use hdl::{Design, Module, ModuleBuilder};
use isa::HwConfig;

use crate::GenerateError;

/// The SoC's build parameters (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocParams {
    /// Frequency of `clk` in Hz.
    pub clock_hz: u32,
    /// UART baud rate; the bit time is `clock_hz / baud` cycles (rounded), which must be
    /// within 2 % of the exact rate and at least 4 cycles.
    pub baud: u32,
    /// Bytes of device memory: a power of two from 4 KiB to 1 GiB.
    pub mem_bytes: u32,
    /// Byte address of the device memory: a non-zero multiple of its size (the host's
    /// registers sit at address 0).
    pub mem_base: u32,
    /// Silence inside a frame after which the bridge abandons it, in microseconds (at
    /// least 64 character times are used). 50 ms by default: longer than the pauses of a USB
    /// serial adapter, short enough to recover from a lost byte at once.
    pub frame_timeout_us: u32,
    /// The reset pin is `rst_n`, active low (else `rst`, active high).
    pub reset_active_low: bool,
    /// The LED pins are low when lit.
    pub leds_active_low: bool,
}

/// Default UART rate: what every USB serial adapter and terminal does.
pub const DEFAULT_BAUD: u32 = 115_200;
/// Default device memory: 32 KiB (see the module docs).
pub const DEFAULT_MEM_BYTES: u32 = 32 << 10;
/// Default device memory address.
pub const DEFAULT_MEM_BASE: u32 = 0x1000_0000;
/// Default frame timeout: 50 ms.
pub const DEFAULT_FRAME_TIMEOUT_US: u32 = 50_000;

impl SocParams {
    /// The defaults, clocked at `cfg`'s `CLOCK_MHZ`: 115200 baud, 32 KiB of device memory at
    /// `0x1000_0000`, an active-high reset and LEDs.
    pub fn for_config(cfg: &HwConfig) -> SocParams {
        SocParams {
            clock_hz: cfg.clock_mhz * 1_000_000,
            baud: DEFAULT_BAUD,
            mem_bytes: DEFAULT_MEM_BYTES,
            mem_base: DEFAULT_MEM_BASE,
            frame_timeout_us: DEFAULT_FRAME_TIMEOUT_US,
            reset_active_low: false,
            leds_active_low: false,
        }
    }

    /// Clock cycles per UART bit, or why the baud rate cannot be made from the clock.
    pub fn divisor(&self) -> Result<u32, SocError> {
        if self.baud == 0 || self.clock_hz == 0 {
            return Err(SocError::Baud(format!(
                "a {} Hz clock and {} baud: both must be positive",
                self.clock_hz, self.baud
            )));
        }
        let d = (u64::from(self.clock_hz) + u64::from(self.baud) / 2) / u64::from(self.baud);
        let min = hdl::widgets::MIN_UART_DIVISOR;
        if d < u64::from(min) {
            return Err(SocError::Baud(format!(
                "{} baud from a {} Hz clock is {d} cycles per bit; the UART needs at least \
                 {min}: use at most {} baud",
                self.baud,
                self.clock_hz,
                self.clock_hz / min
            )));
        }
        let d = u32::try_from(d)
            .ok()
            .filter(|&d| d <= hdl::widgets::MAX_UART_DIVISOR)
            .ok_or_else(|| {
                SocError::Baud(format!(
                    "{} baud from a {} Hz clock is too slow for the UART's bit counter",
                    self.baud, self.clock_hz
                ))
            })?;
        let actual = f64::from(self.clock_hz) / f64::from(d);
        let error = (actual / f64::from(self.baud) - 1.0).abs();
        if error > 0.02 {
            return Err(SocError::Baud(format!(
                "{} baud from a {} Hz clock: the nearest is {d} cycles per bit, {actual:.0} \
                 baud, {:.1} % off (at most 2 % works with a standard UART); choose a baud \
                 rate closer to a divisor of the clock",
                self.baud,
                self.clock_hz,
                error * 100.0
            )));
        }
        Ok(d)
    }

    /// Cycles of silence after which the bridge abandons a frame:
    /// [`SocParams::frame_timeout_us`], and at least 64 character times.
    pub fn frame_timeout(&self) -> Result<u32, SocError> {
        let cycles = u64::from(self.clock_hz) * u64::from(self.frame_timeout_us) / 1_000_000;
        let min = 640 * u64::from(self.divisor()?);
        u32::try_from(cycles.max(min)).map_err(|_| {
            SocError::Baud(format!(
                "a frame timeout of {} us is {cycles} cycles at {} Hz, more than the bridge counts (2^32)",
                self.frame_timeout_us, self.clock_hz
            ))
        })
    }

    /// Checks every parameter.
    pub fn validate(&self) -> Result<(), SocError> {
        self.divisor()?;
        let b = self.mem_bytes;
        if !b.is_power_of_two() || !(4096..=1 << 30).contains(&b) {
            return Err(SocError::Memory(format!(
                "{b} bytes of device memory: must be a power of two from 4 KiB to 1 GiB"
            )));
        }
        if self.mem_base == 0 || self.mem_base & (b - 1) != 0 {
            return Err(SocError::Memory(format!(
                "device memory at {:#x}: must be a non-zero multiple of its size ({b:#x}); \
                 address 0 holds the host's registers",
                self.mem_base
            )));
        }
        Ok(())
    }

    /// The bridge's parameters.
    fn bridge(&self, cfg: &HwConfig) -> Result<BridgeConfig, SocError> {
        Ok(BridgeConfig {
            divisor: self.divisor()?,
            frame_timeout: self.frame_timeout()?,
            status_poll: (self.clock_hz / 1000).max(16),
            mem_base: self.mem_base,
            mem_bytes: self.mem_bytes,
            clock_hz: self.clock_hz,
            baud: self.baud,
            data_bits: cfg.axi_data_width,
        })
    }

    /// The reset pin's name.
    pub fn reset_pin(&self) -> &'static str {
        if self.reset_active_low {
            "rst_n"
        } else {
            "rst"
        }
    }
}

/// Why a SoC cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SocError {
    /// The accelerator cannot be generated.
    #[error(transparent)]
    Generate(#[from] GenerateError),
    /// The baud rate does not fit the clock.
    #[error("UART: {0}")]
    Baud(String),
    /// The device memory's size or address is not allowed.
    #[error("{0}")]
    Memory(String),
}

/// The AXI4-Lite signals of the control port, and whether the master drives each.
const CONTROL_SIGNALS: [(&str, bool); 17] = [
    ("awaddr", true),
    ("awvalid", true),
    ("awready", false),
    ("wdata", true),
    ("wstrb", true),
    ("wvalid", true),
    ("wready", false),
    ("bresp", false),
    ("bvalid", false),
    ("bready", true),
    ("araddr", true),
    ("arvalid", true),
    ("arready", false),
    ("rdata", false),
    ("rresp", false),
    ("rvalid", false),
    ("rready", true),
];

/// Where the SoC's device memory lives.
#[derive(Clone, Debug)]
pub enum DeviceMemory {
    /// Block RAM inside the SoC ([`axi4_ram`]).
    BlockRam,
    /// An external memory behind its controller: `module` (typically an
    /// [`hdl::external_module`]) has an AXI4 slave port `s_axi_*` of the SoC's bus signals,
    /// addressed by byte offset into the memory, and uses the SoC's clock and reset; its other
    /// ports become pins of `vta_soc` under their own names. The SoC puts an
    /// [`axi4_window`] in front of it, so that accesses outside [`SocParams::mem_bytes`] at
    /// [`SocParams::mem_base`] get SLVERR as with block RAM.
    Controller {
        module: Module,
        /// What it is, for the Verilog header (e.g. `32 MiB SDR SDRAM (LiteDRAM)`).
        what: String,
    },
}

impl DeviceMemory {
    fn describe(&self, params: &SocParams) -> String {
        match self {
            DeviceMemory::BlockRam => format!("{} KiB of block RAM", params.mem_bytes / 1024),
            DeviceMemory::Controller { what, .. } => what.clone(),
        }
    }
}

/// Builds the top `vta_soc` for `cfg` with `params` and block-RAM device memory (see the
/// module docs).
pub fn build(cfg: &HwConfig, params: &SocParams) -> Result<Module, SocError> {
    build_with(cfg, params, &DeviceMemory::BlockRam)
}

/// Builds the top `vta_soc` for `cfg` with `params` and the device memory `memory`.
pub fn build_with(
    cfg: &HwConfig,
    params: &SocParams,
    memory: &DeviceMemory,
) -> Result<Module, SocError> {
    cfg.validate().map_err(GenerateError::Config)?;
    params.validate()?;
    let dw = cfg.axi_data_width;
    let m = ModuleBuilder::new("vta_soc");
    m.set_clock("clk");
    m.set_reset(params.reset_pin(), params.reset_active_low);

    let acc = m.instance(
        "u_vta",
        &crate::top::vta_top(cfg, &crate::exec::exec_core(cfg)),
    );
    let bridge = m.instance("u_bridge", &uart_bridge(&params.bridge(cfg)?));
    let arbiter = m.instance("u_arbiter", &axi4_arbiter(dw));

    bridge.connect("uart_rx", m.input("uart_rx", 1));
    m.output_from("uart_tx", bridge.output("uart_tx"));
    let bridge_module = bridge.module();
    for (s, master_drives) in CONTROL_SIGNALS {
        let (ctl, port) = (format!("m_ctl_{s}"), format!("s_axi_control_{s}"));
        if master_drives {
            acc.connect(&port, bridge.output(&ctl));
        } else if bridge_module.port(&ctl).is_some() {
            bridge.connect(&ctl, acc.output(&port));
        }
    }
    axi::connect(&bridge, "m_axi", &arbiter, "s0_axi");
    axi::connect(&acc, "m_axi", &arbiter, "s1_axi");
    match memory {
        DeviceMemory::BlockRam => {
            let ram = m.instance("u_ram", &axi4_ram(dw, params.mem_bytes, params.mem_base));
            axi::connect(&arbiter, "m_axi", &ram, "s_axi");
        }
        DeviceMemory::Controller { module, .. } => {
            let window = m.instance(
                "u_window",
                &axi4_window(dw, params.mem_bytes, params.mem_base),
            );
            let ctrl = m.instance("u_memctl", module);
            axi::connect(&arbiter, "m_axi", &window, "s_axi");
            axi::connect(&window, "m_axi", &ctrl, "s_axi");
            for p in module.ports() {
                if p.name.starts_with("s_axi_") || p.role != hdl::PortRole::Data {
                    continue;
                }
                match p.dir {
                    hdl::Dir::Input => ctrl.connect(&p.name, m.input(&p.name, p.width)),
                    hdl::Dir::Output => {
                        m.output_from(&p.name, ctrl.output(&p.name));
                    }
                }
            }
        }
    }

    for (led, status) in [
        ("led_busy", "acc_running"),
        ("led_done", "acc_done"),
        ("led_error", "acc_error"),
    ] {
        let on = bridge.output(status);
        m.output_from(led, if params.leds_active_low { !on } else { on });
    }
    Ok(m.finish().expect("vta_soc is well formed"))
}

/// A generated SoC.
#[derive(Debug, Clone)]
pub struct GeneratedSoc {
    /// The design (top `vta_soc`), e.g. to simulate it with `hdl::verilator`.
    pub design: Design,
    /// The whole design as one Verilog-2005 file, with [`header`] as its header comment.
    pub verilog: String,
    /// The port manifest of every module (JSON).
    pub ports_json: String,
    /// The accelerator's control register map (JSON, [`crate::regs::json`]).
    pub regs_json: String,
}

/// Builds `vta_soc` with block RAM and prints it (see [`build`]).
pub fn generate(cfg: &HwConfig, params: &SocParams) -> Result<GeneratedSoc, SocError> {
    generate_with(cfg, params, &DeviceMemory::BlockRam)
}

/// Builds `vta_soc` with the device memory `memory` and prints it (see [`build_with`]).
pub fn generate_with(
    cfg: &HwConfig,
    params: &SocParams,
    memory: &DeviceMemory,
) -> Result<GeneratedSoc, SocError> {
    let design = Design::new(build_with(cfg, params, memory)?);
    Ok(GeneratedSoc {
        verilog: design.verilog(&header_with(cfg, params, memory)?),
        ports_json: design.manifest_json(),
        regs_json: crate::regs::json(cfg),
        design,
    })
}

/// The header comment of the block-RAM SoC's Verilog: config, parameters, memory map and
/// pins.
pub fn header(cfg: &HwConfig, params: &SocParams) -> Result<String, SocError> {
    header_with(cfg, params, &DeviceMemory::BlockRam)
}

/// The header comment of the SoC's Verilog with the device memory `memory`.
pub fn header_with(
    cfg: &HwConfig,
    params: &SocParams,
    memory: &DeviceMemory,
) -> Result<String, SocError> {
    let d = params.divisor()?;
    let on = if params.leds_active_low {
        "low"
    } else {
        "high"
    };
    Ok(format!(
        "vta_soc: a VTA-class accelerator with {} device memory and a UART host bridge\n\
         config: {} (isa_hash {:016x}), AXI data width {} bits\n\
         clock: {} Hz; UART: {} baud 8N1 ({d} cycles per bit), frame timeout {} cycles\n\
         device memory: {} at {:#010x}{}\n\
         \n\
         pins: clk; {} (synchronous, active {}); uart_rx, uart_tx; led_busy, led_done,\n\
         led_error (lit when {on})\n\
         host memory map: 0x000 control registers (see regs.json), 0x100 bridge info,\n\
         {:#010x} device memory; protocol: see drivers::serial (frames, CRC-8, status)\n\
         \n\
         config JSON:\n{}",
        match memory {
            DeviceMemory::BlockRam => "on-chip",
            DeviceMemory::Controller { .. } => "external",
        },
        cfg.config_string(),
        cfg.isa_hash(),
        cfg.axi_data_width,
        params.clock_hz,
        params.baud,
        params.frame_timeout()?,
        memory.describe(params),
        params.mem_base,
        match memory {
            DeviceMemory::BlockRam => "",
            DeviceMemory::Controller { .. } => "; its controller's pins are pins of vta_soc too",
        },
        params.reset_pin(),
        if params.reset_active_low {
            "low"
        } else {
            "high"
        },
        params.mem_base,
        cfg.to_json()
    ))
}
