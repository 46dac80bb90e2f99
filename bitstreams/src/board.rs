//! The board table: one JSON file per board (`bitstreams/boards/*.json`, embedded at build
//! time), or a file the user names. A board says which part and PS it has, where the
//! accelerator's control registers sit, which PS port it reaches DRAM through, and the
//! part's resources for the fit pre-check.

use serde::Deserialize;

/// The boards shipped with the toolkit, as (file name, JSON).
pub const BUILTIN: &[(&str, &str)] = &[
    ("pynq-z1.json", include_str!("../boards/pynq-z1.json")),
    ("pynq-z2.json", include_str!("../boards/pynq-z2.json")),
    ("ultra96-v2.json", include_str!("../boards/ultra96-v2.json")),
    ("zcu104.json", include_str!("../boards/zcu104.json")),
    ("kv260.json", include_str!("../boards/kv260.json")),
];

/// Which processing system the part has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PsKind {
    /// Zynq-7000: `processing_system7`.
    Ps7,
    /// Zynq UltraScale+ MPSoC: `zynq_ultra_ps_e`.
    Ps8,
}

impl PsKind {
    /// The IP name (the VLNV's third field), looked up with `get_ipdefs` at build time.
    pub fn ip_name(self) -> &'static str {
        match self {
            PsKind::Ps7 => "processing_system7",
            PsKind::Ps8 => "zynq_ultra_ps_e",
        }
    }
}

/// One board.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Board {
    /// What `--board` matches, e.g. `pynq-z2`.
    pub name: String,
    pub description: String,
    /// Full part name for `create_project -part`.
    pub part: String,
    /// Vivado board part, used when the board files are installed (the build falls back to
    /// the bare part otherwise).
    pub board_part: Option<String>,
    pub ps: PsKind,
    pub control: ControlPort,
    pub data: DataPort,
    /// The highest PL clock the board's PS provides for this design, MHz.
    pub fabric_clock_max_mhz: u32,
    /// The board CPU's Rust target triple (for the board runtime).
    pub target_triple: String,
    pub resources: Resources,
}

/// The PS master that reaches the accelerator's AXI4-Lite registers.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlPort {
    /// PS interface name, e.g. `M_AXI_GP0` or `M_AXI_HPM0_FPD`.
    pub port: String,
    /// Base address of the register block, as a `0x` hex string.
    pub base: String,
    /// Size of the address window, as a `0x` hex string (at least 4 KiB).
    pub range: String,
}

/// The PS slave the accelerator's AXI4 master reaches DRAM through.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataPort {
    /// PS interface name, e.g. `S_AXI_HP0`, `S_AXI_ACP`, `S_AXI_HP0_FPD`, `S_AXI_HPC0_FPD`.
    pub port: String,
    /// The DRAM address segment of that port, e.g. `HP0_DDR_LOWOCM`.
    pub segment: String,
    /// Widest data width the port takes, bits.
    pub max_width: u32,
    /// Whether the port snoops the CPU caches (then the driver needs no cache maintenance).
    pub coherent: bool,
}

/// The part's resources, for the fit pre-check.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Where the figures come from (data sheet).
    pub source: String,
    /// yosys `synth_xilinx -family` for the estimate (`xc7`, `xcup`).
    pub yosys_family: String,
    pub luts: u64,
    pub ffs: u64,
    pub dsps: u64,
    /// Block RAM in 36 Kb tiles.
    pub bram36: u64,
    /// UltraRAM blocks (0 on parts without).
    pub urams: u64,
}

/// Why a board could not be had.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    #[error(
        "unknown board '{name}'; known boards: {known}; or give a board file (a .json path, \
         see `bitstreams/boards/` and \"Adding a board\" in the user guide, \
         docs/src/hardware/bitstreams.md)"
    )]
    Unknown { name: String, known: String },
    #[error("cannot read board file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "board file {path} is not valid: {source} (see \"Adding a board\" in the user guide, \
         docs/src/hardware/bitstreams.md, for the fields)"
    )]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("board file {path}: {field} {problem}")]
    Invalid {
        path: String,
        field: &'static str,
        problem: String,
    },
}

/// Every built-in board, parsed.
pub fn builtin() -> Vec<Board> {
    BUILTIN
        .iter()
        .map(|(file, json)| {
            parse(json, file).unwrap_or_else(|e| panic!("built-in board {file} is broken: {e}"))
        })
        .collect()
}

/// A built-in board by name, or a board file when `spec` is a path to one.
pub fn load(spec: &str) -> Result<Board, BoardError> {
    let path = std::path::Path::new(spec);
    if path.exists() || spec.ends_with(".json") {
        let text = std::fs::read_to_string(path).map_err(|source| BoardError::Io {
            path: spec.into(),
            source,
        })?;
        return parse(&text, spec);
    }
    let boards = builtin();
    boards
        .iter()
        .find(|b| b.name.eq_ignore_ascii_case(spec))
        .cloned()
        .ok_or_else(|| BoardError::Unknown {
            name: spec.into(),
            known: boards
                .iter()
                .map(|b| b.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// A board of either flow: a Zynq board (Vivado project) or an ECP5/Gowin board (open tools).
#[derive(Clone, Debug, PartialEq)]
pub enum AnyBoard {
    Zynq(Box<Board>),
    Open(Box<crate::openflow::OpenBoard>),
}

impl AnyBoard {
    pub fn name(&self) -> &str {
        match self {
            AnyBoard::Zynq(b) => &b.name,
            AnyBoard::Open(b) => &b.name,
        }
    }
}

/// Every built-in board's name, Zynq boards first.
pub fn builtin_names() -> Vec<String> {
    builtin()
        .into_iter()
        .map(|b| b.name)
        .chain(
            crate::openflow::board::builtin()
                .into_iter()
                .map(|b| b.name),
        )
        .collect()
}

/// A built-in board of either flow by name, or a board file when `spec` is a path to one (an
/// open-flow board file has a `chip`, a Zynq one a `ps`).
pub fn load_any(spec: &str) -> Result<AnyBoard, BoardError> {
    let path = std::path::Path::new(spec);
    if path.exists() || spec.ends_with(".json") {
        let text = std::fs::read_to_string(path).map_err(|source| BoardError::Io {
            path: spec.into(),
            source,
        })?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| BoardError::Parse {
                path: spec.into(),
                source,
            })?;
        return if v.get("chip").is_some() {
            crate::openflow::board::parse(&text, spec).map(|b| AnyBoard::Open(Box::new(b)))
        } else {
            parse(&text, spec).map(|b| AnyBoard::Zynq(Box::new(b)))
        };
    }
    if let Some(b) = builtin()
        .into_iter()
        .find(|b| b.name.eq_ignore_ascii_case(spec))
    {
        return Ok(AnyBoard::Zynq(Box::new(b)));
    }
    crate::openflow::board::builtin()
        .into_iter()
        .find(|b| b.name.eq_ignore_ascii_case(spec))
        .map(|b| AnyBoard::Open(Box::new(b)))
        .ok_or_else(|| BoardError::Unknown {
            name: spec.into(),
            known: builtin_names().join(", "),
        })
}

/// Reads a board file of either kind (Zynq or open flow) from JSON and checks the name it
/// gives itself (`name_of`), which becomes a `--board` argument; `path` names it in errors.
pub(crate) fn parse_named<B: serde::de::DeserializeOwned>(
    text: &str,
    path: &str,
    name_of: impl Fn(&B) -> &str,
) -> Result<B, BoardError> {
    let b: B = serde_json::from_str(text).map_err(|source| BoardError::Parse {
        path: path.into(),
        source,
    })?;
    let name = name_of(&b);
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !name_ok {
        return Err(BoardError::Invalid {
            path: path.into(),
            field: "name",
            problem: format!("'{name}' must be letters, digits, '-' or '_'"),
        });
    }
    Ok(b)
}

/// Parses and checks one board file; `path` names it in errors.
pub fn parse(text: &str, path: &str) -> Result<Board, BoardError> {
    let b: Board = parse_named(text, path, |b: &Board| &b.name)?;
    let bad = |field: &'static str, problem: String| BoardError::Invalid {
        path: path.into(),
        field,
        problem,
    };
    let base = b.control_base().map_err(|e| bad("control.base", e))?;
    let range = b.control_range().map_err(|e| bad("control.range", e))?;
    if range < 0x1000 || !range.is_power_of_two() {
        return Err(bad(
            "control.range",
            format!("{range:#x} must be a power of two of at least 0x1000 (4 KiB)"),
        ));
    }
    if base % range != 0 {
        return Err(bad(
            "control.base",
            format!("{base:#x} must be aligned to control.range {range:#x}"),
        ));
    }
    let ports: &[&str] = match b.ps {
        PsKind::Ps7 => &[
            "S_AXI_HP0",
            "S_AXI_HP1",
            "S_AXI_HP2",
            "S_AXI_HP3",
            "S_AXI_ACP",
        ],
        PsKind::Ps8 => &[
            "S_AXI_HP0_FPD",
            "S_AXI_HP1_FPD",
            "S_AXI_HP2_FPD",
            "S_AXI_HP3_FPD",
            "S_AXI_HPC0_FPD",
            "S_AXI_HPC1_FPD",
        ],
    };
    if !ports.contains(&b.data.port.as_str()) {
        return Err(bad(
            "data.port",
            format!("'{}' is not one of {}", b.data.port, ports.join(", ")),
        ));
    }
    let masters: &[&str] = match b.ps {
        PsKind::Ps7 => &["M_AXI_GP0", "M_AXI_GP1"],
        PsKind::Ps8 => &["M_AXI_HPM0_FPD", "M_AXI_HPM1_FPD", "M_AXI_HPM0_LPD"],
    };
    if !masters.contains(&b.control.port.as_str()) {
        return Err(bad(
            "control.port",
            format!("'{}' is not one of {}", b.control.port, masters.join(", ")),
        ));
    }
    let widths: &[u32] = match (b.ps, b.data.port.as_str()) {
        (PsKind::Ps7, "S_AXI_ACP") => &[64],
        (PsKind::Ps7, _) => &[32, 64],
        (PsKind::Ps8, _) => &[32, 64, 128],
    };
    if !widths.contains(&b.data.max_width) {
        return Err(bad(
            "data.max_width",
            format!(
                "{} is not a width {} takes ({widths:?})",
                b.data.max_width, b.data.port
            ),
        ));
    }
    if !(10..=800).contains(&b.fabric_clock_max_mhz) {
        return Err(bad(
            "fabric_clock_max_mhz",
            format!("{} is not between 10 and 800", b.fabric_clock_max_mhz),
        ));
    }
    if !["xc7", "xcup", "xcu"].contains(&b.resources.yosys_family.as_str()) {
        return Err(bad(
            "resources.yosys_family",
            format!("'{}' is not xc7, xcu or xcup", b.resources.yosys_family),
        ));
    }
    let r = &b.resources;
    if r.luts == 0 || r.ffs == 0 {
        return Err(bad(
            "resources",
            "luts and ffs must be the part's totals (not 0)".into(),
        ));
    }
    Ok(b)
}

fn hex(s: &str) -> Result<u64, String> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .ok_or_else(|| format!("'{s}' must be a hex number starting with 0x"))?;
    u64::from_str_radix(&digits.replace('_', ""), 16)
        .map_err(|e| format!("'{s}' is not a hex number ({e})"))
}

impl Board {
    /// Base address of the control registers.
    pub fn control_base(&self) -> Result<u64, String> {
        hex(&self.control.base)
    }

    /// Size of the control address window.
    pub fn control_range(&self) -> Result<u64, String> {
        hex(&self.control.range)
    }

    /// The PS slave's data width for an accelerator bus of `axi_bits`: the bus width when the
    /// port takes it, else the port's widest (the interconnect converts).
    pub fn data_width_for(&self, axi_bits: u32) -> u32 {
        axi_bits.min(self.data.max_width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_boards_parse_and_are_found_by_name() {
        let all = builtin();
        assert_eq!(all.len(), 5);
        for b in &all {
            assert_eq!(load(&b.name).unwrap(), *b);
            assert!(b.control_base().unwrap() > 0);
        }
        assert_eq!(load("PYNQ-Z2").unwrap().part, "xc7z020clg400-1");
    }

    #[test]
    fn unknown_board_lists_the_known_ones() {
        let e = load("de10-nano").unwrap_err().to_string();
        assert!(e.contains("de10-nano") && e.contains("kv260"), "{e}");
    }

    #[test]
    fn bad_board_files_name_the_field() {
        let good = BUILTIN[0].1;
        let e = parse(&good.replace("\"ps7\"", "\"ps9\""), "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.json") && e.contains("ps9"), "{e}");
        let e = parse(&good.replace("0x43C00000", "0x43C00100"), "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("control.base") && e.contains("aligned"), "{e}");
        let e = parse(
            &good.replace("\"S_AXI_HP0\"", "\"S_AXI_HP0_FPD\""),
            "x.json",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("data.port"), "{e}");
        let e = parse(&good.replace("\"luts\"", "\"lutz\""), "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lutz"), "{e}");
        let e = parse(
            &good.replace("\"name\": \"pynq-z1\"", "\"name\": \"a b\""),
            "x.json",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("name"), "{e}");
    }

    #[test]
    fn either_flow_is_found_by_name_or_file() {
        assert!(matches!(load_any("pynq-z2").unwrap(), AnyBoard::Zynq(_)));
        assert!(matches!(
            load_any("Tang-Nano-20K").unwrap(),
            AnyBoard::Open(_)
        ));
        let e = load_any("de10-nano").unwrap_err().to_string();
        assert!(e.contains("kv260") && e.contains("ulx3s-85f"), "{e}");
        let dir = std::env::temp_dir().join(format!("vta-anyboard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("mine.json");
        std::fs::write(&f, crate::openflow::board::BUILTIN[0].1).unwrap();
        assert!(matches!(
            load_any(f.to_str().unwrap()).unwrap(),
            AnyBoard::Open(_)
        ));
        std::fs::write(&f, BUILTIN[0].1).unwrap();
        assert!(matches!(
            load_any(f.to_str().unwrap()).unwrap(),
            AnyBoard::Zynq(_)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn data_width_is_capped_by_the_port() {
        let z2 = load("pynq-z2").unwrap();
        assert_eq!(z2.data_width_for(64), 64);
        assert_eq!(z2.data_width_for(256), 64);
        assert_eq!(load("zcu104").unwrap().data_width_for(256), 128);
    }
}
