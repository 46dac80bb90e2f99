//! The SoC's backends and Verilog: `--backend serial://PORT[?baud=N]` (a board's SoC through
//! its UART bridge), `--backend soc-sim` (the same SoC simulated in Verilator, through its
//! UART pins, by the same driver), and `vta hw verilog --soc`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::Args;
use drivers::serial::{SerialDevice, SerialOptions};
use drivers::{Device, RunReport};
use isa::HwConfig;
use vta_hw::soc::{SocParams, DEFAULT_BAUD};

/// How long a read of the serial port waits for a byte: well above the bridge's default
/// 50 ms frame timeout (the link drains the line for this long to get back in step).
const PORT_TIMEOUT: Duration = Duration::from_millis(500);

/// `serial://PATH[?baud=N]`'s path and baud rate.
pub fn parse_serial(s: &str, rest: &str) -> Result<(String, u32), String> {
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if path.is_empty() {
        return Err(format!(
            "{s}: no port; expected serial://PATH[?baud=N], e.g. serial:///dev/ttyUSB0"
        ));
    }
    let baud = match query {
        None => DEFAULT_BAUD,
        Some(q) => {
            let v = q
                .strip_prefix("baud=")
                .ok_or_else(|| format!("{s}: unknown option '{q}'; the only one is baud=N"))?;
            v.parse::<u32>()
                .ok()
                .filter(|&b| b > 0)
                .ok_or_else(|| format!("{s}: baud '{v}' is not a positive number"))?
        }
    };
    Ok((path.to_string(), baud))
}

/// The SoC on the board at serial port `port`, for programs built for `cfg`; says what it
/// found on stderr.
#[cfg(target_os = "linux")]
pub fn open_serial(port: &str, baud: u32, cfg: &HwConfig) -> Result<Box<dyn Device>> {
    let stream = drivers::serial::SerialPort::open(port, baud, PORT_TIMEOUT)?;
    let dev = SerialDevice::open(stream, port, cfg, SerialOptions::default())?;
    let i = dev.info();
    eprintln!(
        "serial: VTA SoC at {port} ({baud} baud): {} KiB of device memory at {:#x}, built for \
         {} MHz and {} baud",
        i.mem_bytes / 1024,
        i.mem_base,
        i.clock_hz as f64 / 1e6,
        i.baud
    );
    Ok(Box::new(dev))
}

#[cfg(not(target_os = "linux"))]
pub fn open_serial(port: &str, _baud: u32, _cfg: &HwConfig) -> Result<Box<dyn Device>> {
    anyhow::bail!("{port}: serial ports are supported on Linux only")
}

/// A fresh simulated SoC for `cfg` (its model built on first use, progress on stderr).
pub fn open_sim(cfg: &HwConfig) -> Result<SerialDevice<vta_sim::soc::SimLine>> {
    let name = cfg.config_string();
    let start = Instant::now();
    let mut building = false;
    let opts = vta_sim::soc::SimOptions::default();
    let cache = hdl_cache_dir();
    let dev = vta_sim::soc::device(cfg, &opts, &mut |stage| {
        if stage.starts_with("verilating") {
            building = true;
            eprintln!(
                "soc-sim: building the Verilator model of the SoC for {name} (first use; \
                 cached in {})",
                cache.display()
            );
        }
        if building {
            eprintln!(
                "soc-sim:   {stage} (+{:.1} s)",
                start.elapsed().as_secs_f64()
            );
        }
    })
    .with_context(|| format!("cannot simulate the SoC for {name}"))?;
    if building {
        eprintln!(
            "soc-sim: model ready in {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
    Ok(dev)
}

fn hdl_cache_dir() -> PathBuf {
    vta_sim::rtl::RtlOptions::default().cache_dir()
}

/// The run's hardware cycles and what the link did, for `vta sim`'s report.
pub fn summary(cfg: &HwConfig, r: &RunReport) -> String {
    let get = |n: &str| r.get(n).unwrap_or(0);
    let cycles = get("cycles");
    let mut text = String::new();
    let _ = writeln!(
        text,
        "cycles: {cycles} (the hardware's counter; {:.3} us at {} MHz); link: {} frames for \
         the run, {} repeated; {} polls of CONTROL",
        cycles as f64 / cfg.clock_mhz as f64,
        cfg.clock_mhz,
        get("link_frames"),
        get("link_repeats"),
        get("polls")
    );
    text
}

/// `vta hw verilog --soc`'s options.
#[derive(Args, Clone, Debug)]
pub struct SocArgs {
    /// Write the SoC for a board without a CPU instead of the bare accelerator: DIR/vta_soc.v
    /// (the accelerator, device memory in block RAM and a UART host bridge; pins clk, rst,
    /// uart_rx, uart_tx, led_busy, led_done, led_error), regs.json and ports.json
    #[arg(long)]
    pub soc: bool,
    /// SoC: frequency of its clock pin in Hz [default: the config's CLOCK_MHZ]
    #[arg(long, value_name = "HZ", requires = "soc")]
    pub clock_hz: Option<u32>,
    /// SoC: UART baud rate
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BAUD, requires = "soc")]
    pub baud: u32,
    /// SoC: device memory in KiB (a power of two, at least 4)
    #[arg(long, value_name = "KIB", default_value_t = vta_hw::soc::DEFAULT_MEM_BYTES / 1024, requires = "soc")]
    pub mem_kib: u32,
    /// SoC: the reset pin is rst_n, active low (default: rst, active high)
    #[arg(long, requires = "soc")]
    pub reset_active_low: bool,
    /// SoC: the LED pins are low when lit
    #[arg(long, requires = "soc")]
    pub leds_active_low: bool,
}

impl SocArgs {
    fn params(&self, cfg: &HwConfig) -> Result<SocParams> {
        let mem_bytes = self
            .mem_kib
            .checked_mul(1024)
            .ok_or_else(|| anyhow!("--mem-kib {}: more than 4 GiB", self.mem_kib))?;
        let d = SocParams::for_config(cfg);
        Ok(SocParams {
            clock_hz: self.clock_hz.unwrap_or(d.clock_hz),
            baud: self.baud,
            mem_bytes,
            reset_active_low: self.reset_active_low,
            leds_active_low: self.leds_active_low,
            ..d
        })
    }
}

/// Writes `vta_soc.v`, `regs.json` and `ports.json` for `cfg` into `out`.
pub fn write_verilog(cfg: &HwConfig, a: &SocArgs, out: &Path) -> Result<String> {
    let params = a.params(cfg)?;
    let g = vta_hw::soc::generate(cfg, &params)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let write = |name: &str, text: &str| -> Result<PathBuf> {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    };
    let v = write("vta_soc.v", &g.verilog)?;
    let r = write("regs.json", &g.regs_json)?;
    let p = write("ports.json", &g.ports_json)?;
    Ok(format!(
        "{} (isa hash {:016x}), AXI {} bits\n\
         SoC: {} Hz clock, {} baud ({} cycles per bit), {} KiB of device memory at {:#x}\n\
         wrote {} ({} lines, {} modules, top vta_soc)\n\
         wrote {} ({} control registers)\n\
         wrote {}\n",
        cfg.config_string(),
        cfg.isa_hash(),
        cfg.axi_data_width,
        params.clock_hz,
        params.baud,
        params.divisor()?,
        params.mem_bytes / 1024,
        params.mem_base,
        v.display(),
        g.verilog.lines().count(),
        g.design.definitions().len(),
        r.display(),
        vta_hw::regs::MAP.len(),
        p.display()
    ))
}
