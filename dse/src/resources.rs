//! What a config's accelerator takes of an FPGA part, and whether it fits.
//!
//! A [`Target`] is a part (`vta hw report`'s list) or a board (`vta hw bitstream`'s table:
//! its part, its resources, the clock its PS gives the fabric and the width of its DRAM
//! port). Its [`Estimator`] turns the generated Verilog into resource counts: for Xilinx
//! parts yosys `synth_xilinx` ([`YosysXilinx`], minutes per config, cached by the Verilog's
//! hash); for ECP5 and Gowin boards the open flow's place and route of the SoC
//! ([`OpenFlow`]: nextpnr, tens of minutes per config, cached), which also gives the routed
//! Fmax, so a config whose clock the design cannot reach does not fit. Before any synthesis,
//! the instant analytic count of the memories' block RAM (`bitstreams::fit`,
//! `bitstreams::openflow::fit`) rules out configs whose buffers alone overflow the part.

use std::fmt::Write as _;
use std::sync::OnceLock;

use bitstreams::openflow::{self, OpenBoard};
use bitstreams::AnyBoard;
use isa::HwConfig;
use serde_json::Value;

use crate::Error;

/// Resource counts (of a design, or a part's capacity).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Resources {
    pub luts: u64,
    pub ffs: u64,
    pub dsps: u64,
    /// Block RAM in 36 Kb tiles (a RAMB18 counts half).
    pub bram36: f64,
    pub urams: u64,
    /// The routed design's maximum clock, MHz (from a flow with timing analysis: the open
    /// flow's nextpnr; yosys alone gives none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fmax_mhz: Option<f64>,
}

impl Resources {
    /// The counts of a `vta hw report --json` document.
    pub fn from_report(v: &Value) -> Option<Resources> {
        Some(Resources {
            luts: v["luts"].as_u64()?,
            ffs: v["ffs"].as_u64()?,
            dsps: v["dsps"].as_u64()?,
            bram36: v["bram36"].as_f64()?,
            urams: v["urams"].as_u64().unwrap_or(0),
            fmax_mhz: v["fmax_mhz"].as_f64(),
        })
    }

    /// The resources over `capacity`, as `DSP 256 > 220`; empty when the design fits.
    pub fn overflows(&self, capacity: &Resources) -> Vec<String> {
        let mut over = Vec::new();
        let mut check = |name: &str, used: f64, cap: f64| {
            if used > cap {
                over.push(format!("{name} {used} > {cap}"));
            }
        };
        check("LUT", self.luts as f64, capacity.luts as f64);
        check("FF", self.ffs as f64, capacity.ffs as f64);
        check("DSP", self.dsps as f64, capacity.dsps as f64);
        check("BRAM36", self.bram36, capacity.bram36);
        check("URAM", self.urams as f64, capacity.urams as f64);
        over
    }
}

/// How designs are synthesized for a target.
#[derive(Debug, Clone, PartialEq)]
pub enum Flow {
    /// yosys `synth_xilinx -family FAMILY`.
    YosysXilinx { family: String },
    /// The open flow (yosys, nextpnr) of the SoC with `memory_kib` of device memory on an
    /// ECP5 or Gowin board.
    OpenFlow {
        board: Box<OpenBoard>,
        memory_kib: u32,
    },
}

/// The FPGA a sweep is for.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The part's name (`xc7z020`), or the board's with its part (`pynq-z2 (xc7z020clg400-1)`).
    pub name: String,
    pub capacity: Resources,
    pub flow: Flow,
    /// The highest fabric clock the board gives (a board target only).
    pub clock_max_mhz: Option<u32>,
    /// Bits per cycle of the board's DRAM port (a board target only): a wider accelerator bus
    /// is narrowed to it, so memory moves at most this many bits per cycle.
    pub port_bits: Option<u32>,
}

impl Target {
    /// A part `vta hw report` knows.
    pub fn part(name: &str) -> Result<Target, Error> {
        let p = vta_hw::report::part(name).ok_or_else(|| {
            let known: Vec<&str> = vta_hw::report::PARTS.iter().map(|p| p.name).collect();
            Error::Target(format!(
                "unknown part '{name}'; known parts: {} (or give --board)",
                known.join(", ")
            ))
        })?;
        Ok(Target {
            name: p.name.to_string(),
            capacity: Resources {
                luts: p.luts,
                ffs: p.ffs,
                dsps: p.dsps,
                bram36: p.bram36 as f64,
                urams: 0,
                fmax_mhz: None,
            },
            flow: Flow::YosysXilinx {
                family: p.family.to_string(),
            },
            clock_max_mhz: None,
            port_bits: None,
        })
    }

    /// A built-in board or a board file (see `vta hw bitstream`): a Zynq board (its part,
    /// through yosys) or an ECP5/Gowin board (the SoC through the open flow).
    pub fn board(spec: &str) -> Result<Target, Error> {
        let b = bitstreams::load_any(spec).map_err(|e| Error::Target(e.to_string()))?;
        Ok(match b {
            AnyBoard::Zynq(b) => {
                let r = &b.resources;
                Target {
                    name: format!("{} ({})", b.name, b.part),
                    capacity: Resources {
                        luts: r.luts,
                        ffs: r.ffs,
                        dsps: r.dsps,
                        bram36: r.bram36 as f64,
                        urams: r.urams,
                        fmax_mhz: None,
                    },
                    flow: Flow::YosysXilinx {
                        family: r.yosys_family.clone(),
                    },
                    clock_max_mhz: Some(b.fabric_clock_max_mhz),
                    port_bits: Some(b.data.max_width),
                }
            }
            AnyBoard::Open(b) => {
                let r = &b.resources;
                Target {
                    name: format!("{} ({})", b.name, b.part),
                    capacity: Resources {
                        luts: r.luts,
                        ffs: r.ffs,
                        dsps: r.dsps,
                        // 18 Kb blocks, two to a 36 Kb tile.
                        bram36: r.bram_blocks as f64 / 2.0,
                        urams: 0,
                        fmax_mhz: None,
                    },
                    flow: Flow::OpenFlow {
                        memory_kib: b.device_memory_kib,
                        board: b,
                    },
                    clock_max_mhz: None,
                    // The SoC's device memory is on chip, behind the accelerator's own bus.
                    port_bits: None,
                }
            }
        })
    }

    /// Block RAM, in 36 Kb tiles, that `cfg`'s memories need (the scratchpads, and on an
    /// open-flow board the SoC's device memory too), at once and before any synthesis.
    pub fn memory_bram36(&self, cfg: &HwConfig) -> f64 {
        match &self.flow {
            Flow::YosysXilinx { .. } => scratchpad_bram36(cfg),
            Flow::OpenFlow { memory_kib, .. } => {
                let mut mems = openflow::soc::scratchpads(cfg);
                mems.push(openflow::fit::Memory {
                    name: "device memory".into(),
                    key: None,
                    depth: u64::from(*memory_kib) * 1024 * 8 / u64::from(cfg.axi_data_width),
                    width: u64::from(cfg.axi_data_width),
                });
                let blocks: u64 = mems
                    .iter()
                    .map(|m| openflow::fit::blocks_for(m.depth, m.width))
                    .sum();
                blocks as f64 / 2.0
            }
        }
    }

    /// The estimator of this target's flow.
    pub fn estimator(&self) -> Box<dyn Estimator> {
        match &self.flow {
            Flow::YosysXilinx { family } => Box::new(YosysXilinx::new(family)),
            Flow::OpenFlow { board, memory_kib } => {
                Box::new(OpenFlow::new(board.as_ref().clone(), *memory_kib))
            }
        }
    }

    /// Why `cfg` cannot run on the target whatever its resources (a clock above the board's),
    /// if it cannot.
    pub fn clock_problem(&self, cfg: &HwConfig) -> Option<String> {
        let max = self.clock_max_mhz?;
        (cfg.clock_mhz > max).then(|| format!("clock {} MHz > {max} MHz", cfg.clock_mhz))
    }

    /// Why `cfg`'s routed design misses its clock, if an estimate with timing says it does.
    pub fn timing_problem(cfg: &HwConfig, r: &Resources) -> Option<String> {
        let fmax = r.fmax_mhz?;
        (fmax < f64::from(cfg.clock_mhz))
            .then(|| format!("Fmax {fmax:.1} MHz < clock {} MHz", cfg.clock_mhz))
    }

    /// The memory timing the board gives `cfg`: the RTL simulator's default, with beats
    /// spaced to the board's DRAM port width when the accelerator's bus is wider.
    pub fn mem_timing(&self, cfg: &HwConfig) -> vta_sim::rtl::MemTiming {
        let mut t = vta_sim::rtl::MemTiming::default();
        if let Some(port) = self.port_bits {
            t.beat_interval = (cfg.axi_data_width / port.max(1)).max(1);
        }
        t
    }
}

/// Turns a design into resource counts.
pub trait Estimator: Sync {
    /// The tool and its settings, for outputs (`yosys synth_xilinx -family xc7`); the
    /// documents it makes name the tool's version too.
    fn tool(&self) -> String;
    /// The cache entry of the design whose Verilog hashes to `rtl_hash`.
    fn cache_key(&self, rtl_hash: &str) -> String;
    /// Synthesizes `g`; returns a `vta hw report --json` document (the cache entry), whose
    /// `tool` names the tool and its version.
    fn synthesize(
        &self,
        g: &vta_hw::Generated,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Value, Error>;
}

/// yosys `synth_xilinx` (see `vta_hw::report`). yosys is looked for only when a design
/// needs synthesizing: a sweep whose estimates are all cached runs without it.
pub struct YosysXilinx {
    family: String,
    version: OnceLock<Result<String, String>>,
}

impl YosysXilinx {
    pub fn new(family: &str) -> YosysXilinx {
        YosysXilinx {
            family: family.to_string(),
            version: OnceLock::new(),
        }
    }
}

impl Estimator for YosysXilinx {
    fn tool(&self) -> String {
        format!("yosys synth_xilinx -family {}", self.family)
    }

    fn cache_key(&self, rtl_hash: &str) -> String {
        format!("fit/{rtl_hash}-{}.json", self.family)
    }

    fn synthesize(
        &self,
        g: &vta_hw::Generated,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Value, Error> {
        let version = self
            .version
            .get_or_init(|| vta_hw::report::yosys_version().map_err(|e| e.to_string()))
            .clone()
            .map_err(Error::Target)?;
        let u =
            vta_hw::report::synthesize_in_temp_dir(&g.verilog, "vta_top", &self.family, progress)?;
        if u.cells.is_empty() {
            return Err(Error::Target(format!(
                "yosys reported no cells for {}",
                g.config.config_string()
            )));
        }
        let meta = vta_hw::report::estimate_meta(g, "", &self.family, &version);
        Ok(u.to_json(meta))
    }
}

/// The open flow's place and route of the SoC (`bitstreams::openflow::soc`): the cells yosys
/// mapped (LUT4s, flip-flops, 18x18 multipliers, 18 Kb blocks as half tiles) and the routed
/// Fmax of the design clock, through the same cache as `vta hw bitstream --no-bitstream`.
/// The tools come from the PATH or the tool cache (installed on first use).
pub struct OpenFlow {
    board: OpenBoard,
    memory_kib: u32,
}

impl OpenFlow {
    pub fn new(board: OpenBoard, memory_kib: u32) -> OpenFlow {
        OpenFlow { board, memory_kib }
    }

    fn nextpnr(&self) -> &'static str {
        match self.board.chip {
            openflow::board::Chip::Ecp5 { .. } => "nextpnr-ecp5",
            openflow::board::Chip::Gowin { .. } => "nextpnr-himbaechel",
        }
    }
}

impl Estimator for OpenFlow {
    fn tool(&self) -> String {
        format!(
            "yosys + {} on {} (the SoC, {} KiB device memory)",
            self.nextpnr(),
            self.board.name,
            self.memory_kib
        )
    }

    fn cache_key(&self, rtl_hash: &str) -> String {
        format!(
            "fit/{rtl_hash}-{}-soc{}k.json",
            self.board.name, self.memory_kib
        )
    }

    fn synthesize(
        &self,
        g: &vta_hw::Generated,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Value, Error> {
        let cfg = &g.config;
        let root = bitstreams::cache_dir().ok_or_else(|| {
            Error::Target(
                "no cache directory for the open tools: set VTA_CACHE_DIR (or HOME or \
                 XDG_CACHE_HOME)"
                    .into(),
            )
        })?;
        let design = openflow::soc::soc_design(cfg, self.memory_kib)
            .map_err(|e| Error::Target(format!("the SoC: {e}")))?;
        let (outcome, _, _) = openflow::soc::resources_and_fmax(
            &root,
            &self.board,
            &design,
            f64::from(cfg.clock_mhz),
            1,
            progress,
        )
        .map_err(|e| Error::Target(e.to_string()))?;
        let fmax = outcome
            .report
            .clocks
            .iter()
            .map(|c| c.fmax_mhz)
            .fold(f64::INFINITY, f64::min);
        let m = &outcome.mapped;
        Ok(serde_json::json!({
            "config_string": cfg.config_string(),
            "isa_hash": format!("{:016x}", cfg.isa_hash()),
            "rtl_hash": rtl_hash(&g.verilog),
            "part": self.board.part,
            "family": self.board.chip.family(),
            "tool": format!("{} ({})", self.tool(), openflow::tools::PACKAGES.join(", ")),
            "luts": m.luts,
            "ffs": m.ffs,
            "dsps": m.dsps,
            "bram36": m.bram_blocks as f64 / 2.0,
            "urams": 0,
            "fmax_mhz": fmax.is_finite().then_some(fmax),
        }))
    }
}

pub use vta_hw::report::rtl_hash;

/// The scratchpads' block RAM (`bitstreams::fit`): instant, and what synthesis gives for
/// memories this size.
pub fn scratchpad_bram36(cfg: &HwConfig) -> f64 {
    bitstreams::fit::scratchpad_bram36(cfg)
}

/// `LUT 21975, FF 16488, DSP 176, BRAM36 108.5` (and URAM when used).
pub fn describe(r: &Resources) -> String {
    let mut s = format!(
        "LUT {}, FF {}, DSP {}, BRAM36 {}",
        r.luts, r.ffs, r.dsps, r.bram36
    );
    if r.urams > 0 {
        let _ = write!(s, ", URAM {}", r.urams);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflows_name_each_resource_over_the_part() {
        let z = Target::part("xc7z020").unwrap();
        let mut r = Resources {
            luts: 20_000,
            ffs: 10_000,
            dsps: 220,
            bram36: 140.0,
            urams: 0,
            fmax_mhz: None,
        };
        assert!(r.overflows(&z.capacity).is_empty());
        r.dsps = 256;
        r.bram36 = 150.5;
        assert_eq!(
            r.overflows(&z.capacity),
            ["DSP 256 > 220", "BRAM36 150.5 > 140"]
        );
    }

    #[test]
    fn targets_from_parts_and_boards() {
        let e = Target::part("xc9").unwrap_err().to_string();
        assert!(
            e.contains("unknown part 'xc9'") && e.contains("xc7z020"),
            "{e}"
        );
        let b = Target::board("pynq-z2").unwrap();
        assert!(b.name.starts_with("pynq-z2 (xc7z020"), "{}", b.name);
        assert_eq!(b.capacity.dsps, 220);
        let mut cfg = HwConfig {
            clock_mhz: 500,
            ..HwConfig::default()
        };
        assert!(b
            .clock_problem(&cfg)
            .unwrap()
            .starts_with("clock 500 MHz >"));
        assert_eq!(Target::part("xc7z020").unwrap().clock_problem(&cfg), None);
        // A 128-bit bus on the PYNQ's 64-bit HP port moves a beat every other cycle.
        cfg.axi_data_width = 128;
        assert_eq!(b.mem_timing(&cfg).beat_interval, 2);
        assert_eq!(
            Target::part("xc7z020")
                .unwrap()
                .mem_timing(&cfg)
                .beat_interval,
            1
        );
        let e = Target::board("nope").unwrap_err().to_string();
        assert!(
            e.contains("unknown board 'nope'") && e.contains("ulx3s-25f"),
            "{e}"
        );
    }

    #[test]
    fn open_flow_boards_are_targets_with_the_soc_and_timing() {
        let t = Target::board("ulx3s-25f").unwrap();
        assert!(t.name.starts_with("ulx3s-25f (LFE5U-25F"), "{}", t.name);
        assert_eq!((t.capacity.luts, t.capacity.dsps), (24_288, 28));
        assert_eq!(t.capacity.bram36, 28.0);
        assert_eq!(t.clock_max_mhz, None);
        let e = t.estimator();
        assert!(
            e.tool().contains("nextpnr-ecp5 on ulx3s-25f"),
            "{}",
            e.tool()
        );
        assert_eq!(e.cache_key("ab"), "fit/ab-ulx3s-25f-soc32k.json");
        // The board's default config: the scratchpads and 32 KiB of device memory, as
        // `vta hw bitstream`'s pre-check counts them (27 blocks of 18 Kb).
        let cfg = bitstreams::openflow::board::builtin()
            .into_iter()
            .find(|b| b.name == "ulx3s-25f")
            .unwrap()
            .default_config();
        assert_eq!(t.memory_bram36(&cfg), 13.5);
        // Timing is a fit criterion once an estimate has it.
        let mut r = Resources {
            fmax_mhz: Some(45.25),
            ..Resources::default()
        };
        assert_eq!(
            Target::timing_problem(&cfg, &r).as_deref(),
            Some("Fmax 45.2 MHz < clock 50 MHz")
        );
        r.fmax_mhz = Some(53.2);
        assert_eq!(Target::timing_problem(&cfg, &r), None);
        r.fmax_mhz = None;
        assert_eq!(Target::timing_problem(&cfg, &r), None);
        let g = Target::board("tang-nano-20k").unwrap();
        assert!(g.estimator().tool().contains("nextpnr-himbaechel"));
    }

    #[test]
    fn report_documents_give_resources() {
        let v = serde_json::json!({"luts": 3, "ffs": 4, "dsps": 5, "bram36": 1.5});
        let r = Resources::from_report(&v).unwrap();
        assert_eq!(
            (r.luts, r.ffs, r.dsps, r.bram36, r.urams, r.fmax_mhz),
            (3, 4, 5, 1.5, 0, None)
        );
        assert_eq!(describe(&r), "LUT 3, FF 4, DSP 5, BRAM36 1.5");
        assert!(Resources::from_report(&serde_json::json!({"luts": 3})).is_none());
    }
}
