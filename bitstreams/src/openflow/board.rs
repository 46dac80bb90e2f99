//! Boards of the open flow (ECP5, Gowin): one JSON file each in `bitstreams/boards/`, with
//! the chip as nextpnr names it, the pins the constraints need (clock, UART, reset button,
//! LEDs), the part's resources for the fit pre-check, and the board's default config.

use serde::Deserialize;

use crate::board::BoardError;

/// The open-flow boards shipped with the toolkit, as (file name, JSON).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "ulx3s-85f.json",
        include_str!("../../boards/ulx3s-85f.json"),
    ),
    (
        "ulx3s-25f.json",
        include_str!("../../boards/ulx3s-25f.json"),
    ),
    (
        "orangecrab-85f.json",
        include_str!("../../boards/orangecrab-85f.json"),
    ),
    (
        "tang-nano-20k.json",
        include_str!("../../boards/tang-nano-20k.json"),
    ),
    (
        "tang-mega-138k-pro.json",
        include_str!("../../boards/tang-mega-138k-pro.json"),
    ),
];

/// One board of the open flow.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenBoard {
    /// What `--board` matches, e.g. `ulx3s-85f`.
    pub name: String,
    pub description: String,
    /// The full part number printed on the chip.
    pub part: String,
    pub chip: Chip,
    pub clock: Clock,
    pub uart: Uart,
    /// The button that resets the design (`null`: power-on reset only).
    pub reset: Option<Button>,
    pub leds: Leds,
    pub resources: Resources,
    /// The config `vta hw bitstream` builds when no `--config` is given (config JSON).
    pub default_config: serde_json::Value,
    /// The SoC's on-chip device memory, KiB (a power of two, at least 4).
    pub device_memory_kib: u32,
    /// The board's SDR SDRAM, which the SoC can use as device memory (`vta hw bitstream
    /// --memory sdram`); absent when the board has none.
    #[serde(default)]
    pub sdram: Option<Sdram>,
    /// How to load the bitstream (`{bitstream}` is replaced by its path).
    pub program: String,
    /// Where the pins come from and what is not certain.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The FPGA as the tools name it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "family", rename_all = "lowercase", deny_unknown_fields)]
pub enum Chip {
    /// Lattice ECP5: yosys `synth_ecp5`, `nextpnr-ecp5 --<device> --package P --speed S`,
    /// `ecppack`.
    Ecp5 {
        /// nextpnr's device flag without dashes: `25k`, `45k`, `85k`, `um-85k`, `um5g-85k`.
        device: String,
        package: String,
        speed: u32,
    },
    /// Gowin: yosys `synth_gowin -family F`, `nextpnr-himbaechel --device D --vopt
    /// family=C`, `gowin_pack -d C`.
    Gowin {
        /// The device as nextpnr takes it, e.g. `GW2AR-LV18QN88C8/I7`.
        device: String,
        /// The chip database / packer name, e.g. `GW2A-18C`.
        chip: String,
        /// yosys `synth_gowin -family`: `gw1n`, `gw2a` or `gw5a`.
        synth_family: String,
        /// The device as Apycula's `gowin_pll` takes it (`null`: no PLL calculator).
        pll_device: Option<String>,
        /// Groups of dual-purpose configuration pins the board's pins use as user I/O
        /// (`cpu`, `mspi`, `sspi`, `ready`, `done`, `jtag`, `reconfign`, `i2c`): each becomes
        /// `gowin_pack --<group>_as_gpio` (and `--vopt <group>_as_gpio` for nextpnr where it
        /// checks the group). Without it such a pin keeps its configuration function.
        #[serde(default)]
        config_pins_as_gpio: Vec<String>,
    },
}

/// The dual-purpose pin groups `gowin_pack` can free as user I/O (`--<group>_as_gpio`).
pub const GOWIN_CONFIG_PIN_GROUPS: &[&str] = &[
    "cpu",
    "mspi",
    "sspi",
    "ready",
    "done",
    "jtag",
    "reconfign",
    "i2c",
];

/// The groups nextpnr-himbaechel also refuses pins of unless told (`--vopt <group>_as_gpio`).
pub const NEXTPNR_CONFIG_PIN_GROUPS: &[&str] = &["sspi", "i2c"];

impl Chip {
    /// `ecp5` or `gowin`.
    pub fn family(&self) -> &'static str {
        match self {
            Chip::Ecp5 { .. } => "ecp5",
            Chip::Gowin { .. } => "gowin",
        }
    }
}

/// The board's oscillator.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clock {
    pub pin: String,
    pub mhz: f64,
    pub io_type: String,
}

/// The serial port the host reaches the SoC through (directions seen from the FPGA).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uart {
    pub rx: String,
    pub tx: String,
    pub io_type: String,
    /// Where the host finds it.
    pub host: String,
}

/// A push button.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Button {
    pub pin: String,
    /// Pressed reads 0.
    pub active_low: bool,
    /// The pad's pull: `up`, `down` or `none`.
    pub pull: String,
    pub io_type: String,
    pub label: String,
}

/// The user LEDs, in order.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leds {
    pub pins: Vec<String>,
    /// Lit when driven 0.
    pub active_low: bool,
    pub io_type: String,
}

/// An SDR SDRAM chip on the board and its pins (directions seen from the FPGA).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sdram {
    /// The chip as fitted, for reports (e.g. `IS42S16160 / MT48LC16M16, 32 MB x16`).
    pub chip: String,
    /// The LiteDRAM module (a class of `litedram.modules`) with its geometry and timings,
    /// e.g. `MT48LC16M16`.
    pub litedram_module: String,
    /// Bytes of the chip, MiB (a power of two).
    pub mib: u32,
    pub io_type: String,
    pub pins: SdramPins,
}

/// The SDRAM's pins; buses LSB first.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdramPins {
    /// The chip's clock (driven by the board top from the SoC clock).
    pub clk: String,
    pub cke: String,
    pub cs_n: String,
    pub ras_n: String,
    pub cas_n: String,
    pub we_n: String,
    pub ba: Vec<String>,
    pub a: Vec<String>,
    pub dm: Vec<String>,
    pub dq: Vec<String>,
}

impl SdramPins {
    /// Every pin as (port of the board top, bit or `None` for a 1-bit port, pin).
    pub fn all(&self) -> Vec<(&'static str, Option<usize>, &str)> {
        let mut v: Vec<(&'static str, Option<usize>, &str)> = vec![
            ("sdram_clk", None, &self.clk),
            ("sdram_cke", None, &self.cke),
            ("sdram_cs_n", None, &self.cs_n),
            ("sdram_ras_n", None, &self.ras_n),
            ("sdram_cas_n", None, &self.cas_n),
            ("sdram_we_n", None, &self.we_n),
        ];
        for (port, bus) in [
            ("sdram_ba", &self.ba),
            ("sdram_a", &self.a),
            ("sdram_dm", &self.dm),
            ("sdram_dq", &self.dq),
        ] {
            v.extend(
                bus.iter()
                    .enumerate()
                    .map(|(i, p)| (port, Some(i), p.as_str())),
            );
        }
        v
    }
}

/// The part's resources, for the fit pre-check.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// Where the figures come from.
    pub source: String,
    /// 4-input LUTs.
    pub luts: u64,
    pub ffs: u64,
    /// Hard multipliers yosys maps to (ECP5 MULT18X18D, Gowin MULT18X18; 0 where it maps
    /// none).
    pub dsps: u64,
    /// 18 Kb block RAMs (ECP5 DP16KD, Gowin BSRAM).
    pub bram_blocks: u64,
}

/// Every built-in open-flow board, parsed.
pub fn builtin() -> Vec<OpenBoard> {
    BUILTIN
        .iter()
        .map(|(file, json)| {
            parse(json, file).unwrap_or_else(|e| panic!("built-in board {file} is broken: {e}"))
        })
        .collect()
}

/// Parses and checks one open-flow board file; `path` names it in errors.
pub fn parse(text: &str, path: &str) -> Result<OpenBoard, BoardError> {
    let b: OpenBoard = crate::board::parse_named(text, path, |b: &OpenBoard| &b.name)?;
    let bad = |field: &'static str, problem: String| BoardError::Invalid {
        path: path.into(),
        field,
        problem,
    };
    match &b.chip {
        Chip::Ecp5 { device, .. } => {
            const DEVICES: &[&str] = &[
                "12k", "25k", "45k", "85k", "um-25k", "um-45k", "um-85k", "um5g-25k", "um5g-45k",
                "um5g-85k",
            ];
            if !DEVICES.contains(&device.as_str()) {
                return Err(bad(
                    "chip.device",
                    format!("'{device}' is not one of {}", DEVICES.join(", ")),
                ));
            }
        }
        Chip::Gowin {
            synth_family,
            config_pins_as_gpio,
            ..
        } => {
            if !["gw1n", "gw2a", "gw5a"].contains(&synth_family.as_str()) {
                return Err(bad(
                    "chip.synth_family",
                    format!("'{synth_family}' is not gw1n, gw2a or gw5a"),
                ));
            }
            if let Some(g) = config_pins_as_gpio
                .iter()
                .find(|g| !GOWIN_CONFIG_PIN_GROUPS.contains(&g.as_str()))
            {
                return Err(bad(
                    "chip.config_pins_as_gpio",
                    format!("'{g}' is not one of {}", GOWIN_CONFIG_PIN_GROUPS.join(", ")),
                ));
            }
        }
    }
    if !(1.0..=500.0).contains(&b.clock.mhz) {
        return Err(bad(
            "clock.mhz",
            format!("{} is not an oscillator frequency in MHz", b.clock.mhz),
        ));
    }
    if b.leds.pins.is_empty() {
        return Err(bad("leds.pins", "needs at least one LED".into()));
    }
    if let Some(r) = &b.reset {
        if !["up", "down", "none"].contains(&r.pull.as_str()) {
            return Err(bad(
                "reset.pull",
                format!("'{}' is not up, down or none", r.pull),
            ));
        }
    }
    let mut pins: Vec<&str> = vec![&b.clock.pin, &b.uart.rx, &b.uart.tx];
    pins.extend(b.reset.iter().map(|r| r.pin.as_str()));
    pins.extend(b.leds.pins.iter().map(String::as_str));
    if let Some(sd) = &b.sdram {
        if !matches!(b.chip, Chip::Ecp5 { .. }) {
            return Err(bad(
                "sdram",
                "SDRAM is supported on ECP5 boards only (the board top drives its clock with \
                 an ECP5 ODDRX1F)"
                    .into(),
            ));
        }
        let p = &sd.pins;
        if p.dq.is_empty() || p.dq.len() % 8 != 0 || p.dm.len() * 8 != p.dq.len() {
            return Err(bad(
                "sdram.pins",
                format!(
                    "{} dq and {} dm pins: dq must be a multiple of 8 with one dm per 8",
                    p.dq.len(),
                    p.dm.len()
                ),
            ));
        }
        if p.a.is_empty() || p.ba.is_empty() {
            return Err(bad("sdram.pins", "needs a and ba pins".into()));
        }
        if !sd.mib.is_power_of_two() {
            return Err(bad(
                "sdram.mib",
                format!("{} is not a power of two", sd.mib),
            ));
        }
        pins.extend(p.all().into_iter().map(|(_, _, pin)| pin));
    }
    for (i, p) in pins.iter().enumerate() {
        if p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(bad("pins", format!("'{p}' is not a pin name")));
        }
        if pins[..i].contains(p) {
            return Err(bad("pins", format!("pin {p} is used twice")));
        }
    }
    let r = &b.resources;
    if r.luts == 0 || r.ffs == 0 || r.bram_blocks == 0 {
        return Err(bad(
            "resources",
            "luts, ffs and bram_blocks must be the part's totals (not 0)".into(),
        ));
    }
    let kib = b.device_memory_kib;
    if !kib.is_power_of_two() || kib < 4 {
        return Err(bad(
            "device_memory_kib",
            format!("{kib} must be a power of two of at least 4"),
        ));
    }
    isa::HwConfig::from_json_str(&b.default_config.to_string(), "default_config")
        .map_err(|e| bad("default_config", e.to_string()))?;
    Ok(b)
}

impl OpenBoard {
    /// The board's default config.
    pub fn default_config(&self) -> isa::HwConfig {
        isa::HwConfig::from_json_str(
            &self.default_config.to_string(),
            &format!("the default config of board {}", self.name),
        )
        .expect("checked when the board was parsed")
    }

    /// The pins' summary for reports: `clock G2 25 MHz, UART rx M1 tx L4, ...`.
    pub fn pin_summary(&self) -> String {
        let reset = match &self.reset {
            Some(r) => format!(
                "reset {} ({}, active {})",
                r.pin,
                r.label,
                if r.active_low { "low" } else { "high" }
            ),
            None => "no reset button (power-on reset)".into(),
        };
        format!(
            "clock {} ({} MHz), UART rx {} tx {}, {reset}, LEDs {}",
            self.clock.pin,
            self.clock.mhz,
            self.uart.rx,
            self.uart.tx,
            self.leds.pins.join(" ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_boards_parse_with_their_default_configs() {
        let all = builtin();
        assert_eq!(all.len(), 5);
        for b in &all {
            let cfg = b.default_config();
            assert!(cfg.validate().is_ok(), "{}", b.name);
        }
        let tn = all.iter().find(|b| b.name == "tang-nano-20k").unwrap();
        assert_eq!(tn.chip.family(), "gowin");
        assert_eq!(tn.uart.tx, "69");
    }

    #[test]
    fn bad_board_files_name_the_field() {
        let good = BUILTIN[0].1;
        let e = parse(&good.replace("\"85k\"", "\"95k\""), "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.json") && e.contains("chip.device"), "{e}");
        let e = parse(&good.replace("\"B2\"", "\"G2\""), "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("G2 is used twice"), "{e}");
        let e = parse(
            &good.replace("\"LOG_BLOCK\": 3", "\"LOG_BLOK\": 3"),
            "x.json",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("default_config"), "{e}");
        let e = parse(
            &good.replace("\"family\": \"ecp5\"", "\"family\": \"ice40\""),
            "x.json",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("ice40"), "{e}");
        let mega = BUILTIN
            .iter()
            .find(|(f, _)| f.starts_with("tang-mega"))
            .unwrap()
            .1;
        let e = parse(&mega.replace("\"mspi\"", "\"spi\""), "x.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("chip.config_pins_as_gpio") && e.contains("'spi'"),
            "{e}"
        );
        // The SDRAM's pins: checked for count and against the other pins.
        let e = parse(
            &good.replace("\"dm\": [\"U19\", \"E20\"]", "\"dm\": [\"U19\"]"),
            "x.json",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("sdram.pins") && e.contains("16 dq and 1 dm"),
            "{e}"
        );
        let e = parse(&good.replace("\"E20\"", "\"B2\""), "x.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("B2 is used twice"), "{e}");
    }

    #[test]
    fn the_ulx3s_boards_have_their_sdram() {
        for name in ["ulx3s-85f", "ulx3s-25f"] {
            let b = builtin().into_iter().find(|b| b.name == name).unwrap();
            let sd = b.sdram.expect("SDRAM");
            assert_eq!((sd.mib, sd.pins.dq.len(), sd.pins.a.len()), (32, 16, 13));
            assert_eq!(sd.litedram_module, "MT48LC16M16");
        }
        assert!(builtin()
            .iter()
            .filter(|b| b.sdram.is_some())
            .all(|b| b.name.starts_with("ulx3s")));
    }
}
