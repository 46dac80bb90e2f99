//! The SoC's SDRAM controller: LiteDRAM (SDR PHY, controller, AXI port, with a hardware
//! init sequencer; `litedram_gen.py` beside this file) generated for a board's chip, the SoC
//! clock and the accelerator's bus width, in a Python environment of the tool cache
//! (installed from PyPI on first use), cached by its inputs; and the SoC with it as device
//! memory.

use std::path::{Path, PathBuf};
use std::process::Command;

use hdl::{Dir, ExternalPort};
use isa::HwConfig;
use vta_hw::soc::{DeviceMemory, SocParams};

use super::board::Sdram;
use super::tools;

/// The PyPI packages of LiteDRAM's environment, pinned so that every machine generates the
/// same controller.
pub const LITEDRAM_PACKAGES: &[&str] = &["litedram==2024.12", "litex==2024.12", "migen==0.10.0"];

/// The generator script.
const GENERATOR: &str = include_str!("litedram_gen.py");

/// The controller's module name.
pub const CONTROLLER_MODULE: &str = "vta_sdram_ctrl";

/// Why the controller cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SdramError {
    #[error(
        "cannot install LiteDRAM into the tool cache: {0}. Install it yourself into a Python \
         3 environment (`pip install {packages}`) and point VTA_LITEDRAM_PYTHON at its \
         python, or fix the problem above",
        packages = LITEDRAM_PACKAGES.join(" ")
    )]
    Install(String),
    #[error("LiteDRAM's generator failed for {module}: {why}")]
    Generate { module: String, why: String },
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the generated controller's {port} is {got} bits wide but the board has {want} pins \
         for it: the board file's sdram.litedram_module does not match its pins"
    )]
    Pins { port: String, got: u32, want: usize },
    #[error("{0}")]
    Soc(#[from] vta_hw::soc::SocError),
}

/// A generated controller.
#[derive(Clone, Debug)]
pub struct Controller {
    /// Its Verilog (module [`CONTROLLER_MODULE`]).
    pub verilog: String,
    /// The file it was cached in.
    pub path: PathBuf,
    /// Its ports.
    pub ports: Vec<ExternalPort>,
}

impl Controller {
    /// As the SoC's device memory.
    pub fn device_memory(&self, sdram: &Sdram) -> DeviceMemory {
        DeviceMemory::Controller {
            module: hdl::external_module(
                CONTROLLER_MODULE,
                "clk",
                ("rst", false),
                &self.ports,
                &self.verilog,
            ),
            what: format!(
                "{} MiB of SDR SDRAM ({}) behind a LiteDRAM controller",
                sdram.mib, sdram.litedram_module
            ),
        }
    }
}

/// The Python that runs LiteDRAM: `VTA_LITEDRAM_PYTHON` if set, else the tool cache's
/// environment under `cache_root` (installed on first use).
fn python(cache_root: &Path, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, SdramError> {
    if let Some(p) = std::env::var_os("VTA_LITEDRAM_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let pins = isa::container::fnv1a(LITEDRAM_PACKAGES.join(" ").as_bytes());
    let dir = cache_root.join(format!("tools/litedram-{:08x}", pins as u32));
    tools::python_env(
        &dir,
        LITEDRAM_PACKAGES,
        "LiteDRAM (about 30 MB, seconds)",
        progress,
    )
    .map_err(SdramError::Install)
}

/// The controller for `sdram` at `clock_hz` with a `data_bits`-wide AXI port, generated into
/// `<cache_root>/litedram/` on first use and read from there after.
pub fn controller(
    cache_root: &Path,
    sdram: &Sdram,
    clock_hz: u32,
    data_bits: u32,
    progress: &mut dyn FnMut(&str),
) -> Result<Controller, SdramError> {
    let config = serde_json::json!({
        "name": CONTROLLER_MODULE,
        "module": sdram.litedram_module,
        "clk_freq": clock_hz,
        "data_width": data_bits,
        "address_width": (u64::from(sdram.mib) << 20).trailing_zeros(),
        "dq_bits": sdram.pins.dq.len(),
        "cl": null,
    });
    let config = serde_json::to_string_pretty(&config).expect("JSON");
    let key =
        isa::container::fnv1a(format!("{GENERATOR}\n{config}\n{:?}", LITEDRAM_PACKAGES).as_bytes());
    let dir = cache_root.join("litedram");
    let out = dir.join(format!("{CONTROLLER_MODULE}-{key:016x}.v"));
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| SdramError::Io { path, source }
    };
    if !out.is_file() {
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let python = python(cache_root, progress)?;
        progress(&format!(
            "generating the SDRAM controller with LiteDRAM ({} at {:.1} MHz, {data_bits}-bit AXI)",
            sdram.litedram_module,
            f64::from(clock_hz) / 1e6
        ));
        let stem = dir.join(format!("{CONTROLLER_MODULE}-{key:016x}"));
        let (script, cfg, tmp) = (
            stem.with_extension("py"),
            stem.with_extension("json"),
            stem.with_extension(format!("{}.tmp", std::process::id())),
        );
        std::fs::write(&script, GENERATOR).map_err(io(&script))?;
        std::fs::write(&cfg, &config).map_err(io(&cfg))?;
        let run = Command::new(&python)
            .arg(&script)
            .arg(&cfg)
            .arg(&tmp)
            .output()
            .map_err(|e| SdramError::Generate {
                module: sdram.litedram_module.clone(),
                why: format!("cannot run {}: {e}", python.display()),
            })?;
        if !run.status.success() {
            let _ = std::fs::remove_file(&tmp);
            return Err(SdramError::Generate {
                module: sdram.litedram_module.clone(),
                why: String::from_utf8_lossy(&run.stderr).trim().to_string(),
            });
        }
        std::fs::rename(&tmp, &out).map_err(io(&out))?;
    }
    let verilog = std::fs::read_to_string(&out).map_err(io(&out))?;
    let ports = parse_ports(&verilog, CONTROLLER_MODULE).ok_or_else(|| SdramError::Generate {
        module: sdram.litedram_module.clone(),
        why: format!("{} has no readable port list", out.display()),
    })?;
    for (port, want) in [
        ("sdram_a", sdram.pins.a.len()),
        ("sdram_ba", sdram.pins.ba.len()),
        ("sdram_dq_o", sdram.pins.dq.len()),
        ("sdram_dm", sdram.pins.dm.len()),
    ] {
        let got = ports.iter().find(|p| p.name == port).map_or(0, |p| p.width);
        if got as usize != want {
            return Err(SdramError::Pins {
                port: port.into(),
                got,
                want,
            });
        }
    }
    Ok(Controller {
        verilog,
        path: out,
        ports: ports
            .into_iter()
            .filter(|p| p.name != "clk" && p.name != "rst")
            .collect(),
    })
}

/// The ports of `module` in Migen's Verilog (`module m(\n\tinput [3:0] a,\n\toutput reg b\n);`).
fn parse_ports(verilog: &str, module: &str) -> Option<Vec<ExternalPort>> {
    let start = verilog.find(&format!("module {module}("))?;
    let header = &verilog[start..start + verilog[start..].find(");")?];
    let mut ports = vec![];
    for line in header.lines().skip(1) {
        let words: Vec<&str> = line
            .trim()
            .trim_end_matches(',')
            .split_whitespace()
            .collect();
        let dir = match *words.first()? {
            "input" => Dir::Input,
            "output" => Dir::Output,
            _ => return None,
        };
        let width = match words.iter().find(|w| w.starts_with('[')) {
            Some(range) => {
                let (hi, lo) = range.trim_matches(['[', ']']).split_once(':')?;
                hi.parse::<u32>().ok()? - lo.parse::<u32>().ok()? + 1
            }
            None => 1,
        };
        ports.push(ExternalPort {
            name: words.last()?.to_string(),
            dir,
            width,
        });
    }
    Some(ports)
}

/// The SoC parameters for `cfg` with `sdram` as its device memory: the defaults with the
/// memory's size.
pub fn soc_params(cfg: &HwConfig, sdram: &Sdram) -> SocParams {
    SocParams {
        mem_bytes: sdram.mib << 20,
        ..SocParams::for_config(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migen_port_lists_are_read() {
        let v = "/* x */\nmodule vta_sdram_ctrl(\n\tinput clk,\n\toutput reg [12:0] sdram_a,\n\
                 \tinput [15:0] sdram_dq_i,\n\toutput s_axi_rvalid\n);\n\nendmodule\n";
        let p = parse_ports(v, "vta_sdram_ctrl").unwrap();
        let got: Vec<(&str, Dir, u32)> = p
            .iter()
            .map(|p| (p.name.as_str(), p.dir, p.width))
            .collect();
        assert_eq!(
            got,
            [
                ("clk", Dir::Input, 1),
                ("sdram_a", Dir::Output, 13),
                ("sdram_dq_i", Dir::Input, 16),
                ("s_axi_rvalid", Dir::Output, 1)
            ]
        );
        assert!(parse_ports(v, "other").is_none());
    }
}
