//! The accelerator configuration: VTA's `vta_config.json` plus our extensions, every derived
//! parameter, the built-in presets, and the validation that keeps all of it encodable.
//!
//! A config file is a JSON object of upper-case keys. VTA's own files load unchanged; our native
//! format is a superset that may replace `LOG_BLOCK` by `LOG_BLOCK_IN` and `LOG_BLOCK_OUT` and
//! adds micro-architectural keys (see [`HwConfig`]). Every quantity the rest of the toolkit needs
//! (element sizes, buffer depths, instruction field widths, the config string) is derived here.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::insn::MemType;

mod random;
mod widths;
pub use random::SampleBounds;

/// Targets a config may name: VTA's, plus the boards we add.
pub const TARGETS: &[&str] = &[
    "sim",
    "tsim",
    "pynq",
    "ultra96",
    "zcu104",
    "de10nano",
    "intelfocl",
    "kv260",
];

/// Bits of the fixed-width memory-instruction fields (VTA's `hw_spec_const.h`).
pub const SRAM_ADDR_BITS: u32 = 16;
pub const DRAM_ADDR_BITS: u32 = 32;
pub const LOOP_ITER_BITS: u32 = 14;
pub const ALU_IMM_BITS: u32 = 16;
/// Entries of the ALU's activation table (configs with `ALU_LUT`, spec 8.3): one per int8
/// value.
pub const LUT_ENTRIES: u32 = 256;

/// The ranges [`HwConfig::validate`] accepts (further constraints tie the fields together).
pub const LOG_DATA_WIDTH_RANGE: RangeInclusive<u32> = 1..=4;
pub const LOG_ACC_WIDTH_RANGE: RangeInclusive<u32> = 4..=5;
pub const LOG_BATCH_RANGE: RangeInclusive<u32> = 0..=4;
pub const LOG_BLOCK_RANGE: RangeInclusive<u32> = 0..=6;
pub const AXI_DATA_WIDTH_RANGE: RangeInclusive<u32> = 64..=512;
pub const CMD_QUEUE_DEPTH_RANGE: RangeInclusive<u32> = 2..=4096;
pub const TOKEN_QUEUE_DEPTH_RANGE: RangeInclusive<u32> = 1..=65535;
pub const CLOCK_MHZ_RANGE: RangeInclusive<u32> = 1..=1000;
pub const MAX_LOG_BUFF_SIZE: u32 = 30;

/// A complete, validated accelerator configuration.
///
/// Fields mirror the JSON keys (`log_inp_width` is `LOG_INP_WIDTH`). The ISA-visible part
/// (widths, GEMM shape, buffer sizes, ISA options) determines encoding and semantics; the rest
/// (bus width, queue depths, clock, target) only shapes the hardware built from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwConfig {
    pub target: String,
    pub hw_ver: String,
    pub log_inp_width: u32,
    pub log_wgt_width: u32,
    pub log_acc_width: u32,
    pub log_batch: u32,
    pub log_block_in: u32,
    pub log_block_out: u32,
    pub log_uop_buff_size: u32,
    pub log_inp_buff_size: u32,
    pub log_wgt_buff_size: u32,
    pub log_acc_buff_size: u32,
    /// `AXI_DATA_WIDTH`: bits of the accelerator's AXI4 master data bus (64..=512).
    pub axi_data_width: u32,
    /// `CMD_QUEUE_DEPTH`: entries of each of the three command queues.
    pub cmd_queue_depth: u32,
    /// `TOKEN_QUEUE_DEPTH`: capacity of each of the four dependency-token queues.
    pub token_queue_depth: u32,
    /// `CLOCK_MHZ`: target clock frequency.
    pub clock_mhz: u32,
    /// `ALU_MUL`: the ALU implements MUL (VTA's HLS hardware does not).
    pub alu_mul: bool,
    /// `ALU_LUT`: the ALU has a 256-entry int8 activation table and the operations LUT and
    /// LUTW (spec 8.3). Off by default: VTA's encoding and the default config are unchanged.
    pub alu_lut: bool,
}

/// The JSON file as written: every key optional so that missing ones get precise errors.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "SCREAMING_SNAKE_CASE")]
struct ConfigFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hw_ver: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_inp_width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_wgt_width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_acc_width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_batch: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_block: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_block_in: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_block_out: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_uop_buff_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_inp_buff_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_wgt_buff_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_acc_buff_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    axi_data_width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cmd_queue_depth: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token_queue_depth: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clock_mhz: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alu_mul: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    alu_lut: Option<bool>,
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("config {origin} is not valid JSON for an accelerator config: {source}")]
    Json {
        origin: String,
        source: serde_json::Error,
    },
    #[error("config {origin}: missing key {key}; {hint}")]
    Missing {
        origin: String,
        key: &'static str,
        hint: &'static str,
    },
    #[error("config {origin}: {problem}")]
    Invalid { origin: String, problem: String },
    #[error(
        "'{name}' is neither a config file nor a preset (nor a preset's width variant such as \
         i4w4 or small:i8w2a16); presets: {}",
        PRESETS.iter().map(|p| p.0).collect::<Vec<_>>().join(", ")
    )]
    UnknownPreset { name: String },
}

/// Built-in presets: name, one-line description, JSON text.
pub const PRESETS: &[(&str, &str, &str)] = &[
    (
        "default",
        "VTA's default 1x16x16 int8 config (vta_config.json), 64-bit AXI as on PYNQ",
        r#"{"TARGET":"pynq","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,
            "LOG_BATCH":0,"LOG_BLOCK":4,"LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":15,
            "LOG_WGT_BUFF_SIZE":18,"LOG_ACC_BUFF_SIZE":17}"#,
    ),
    (
        "small",
        "1x4x4 with small scratchpads, for fast RTL tests",
        r#"{"TARGET":"sim","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,
            "LOG_BATCH":0,"LOG_BLOCK":2,"LOG_UOP_BUFF_SIZE":12,"LOG_INP_BUFF_SIZE":11,
            "LOG_WGT_BUFF_SIZE":12,"LOG_ACC_BUFF_SIZE":13,"CMD_QUEUE_DEPTH":16,
            "TOKEN_QUEUE_DEPTH":16}"#,
    ),
    (
        "batched",
        "VTA's batched 4x8x8 config (4x8_i8w8a32_15_16_16_18)",
        r#"{"TARGET":"pynq","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,
            "LOG_BATCH":2,"LOG_BLOCK":3,"LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":16,
            "LOG_WGT_BUFF_SIZE":16,"LOG_ACC_BUFF_SIZE":18}"#,
    ),
    (
        "rect",
        "2x16x8: BATCH 2 and BLOCK_IN 16 != BLOCK_OUT 8",
        r#"{"TARGET":"sim","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,
            "LOG_BATCH":1,"LOG_BLOCK_IN":4,"LOG_BLOCK_OUT":3,"LOG_UOP_BUFF_SIZE":15,
            "LOG_INP_BUFF_SIZE":15,"LOG_WGT_BUFF_SIZE":17,"LOG_ACC_BUFF_SIZE":17}"#,
    ),
    (
        "lut",
        "VTA's default config with the ALU's activation lookup table (ALU_LUT)",
        r#"{"TARGET":"pynq","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,
            "LOG_BATCH":0,"LOG_BLOCK":4,"LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":15,
            "LOG_WGT_BUFF_SIZE":18,"LOG_ACC_BUFF_SIZE":17,"ALU_LUT":true}"#,
    ),
    (
        "wide-bus",
        "VTA's default GEMM shape with a 256-bit AXI data bus",
        r#"{"TARGET":"zcu104","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,
            "LOG_ACC_WIDTH":5,"LOG_BATCH":0,"LOG_BLOCK":4,"LOG_UOP_BUFF_SIZE":15,
            "LOG_INP_BUFF_SIZE":15,"LOG_WGT_BUFF_SIZE":18,"LOG_ACC_BUFF_SIZE":17,
            "AXI_DATA_WIDTH":256}"#,
    ),
];

impl Default for HwConfig {
    fn default() -> Self {
        Self::preset("default").expect("the default preset is valid")
    }
}

impl HwConfig {
    /// A built-in preset by name.
    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        let (_, _, json) = PRESETS
            .iter()
            .find(|p| p.0 == name)
            .ok_or_else(|| ConfigError::UnknownPreset { name: name.into() })?;
        Self::from_json_str(json, &format!("preset '{name}'"))
    }

    /// Loads a config file, or a preset when `spec` names no file but a preset, or a preset's
    /// width variant (`i4w4`, `small:i8w2a16`: see [`HwConfig::with_widths`]).
    pub fn load(spec: &str) -> Result<Self, ConfigError> {
        let path = Path::new(spec);
        if path.exists() {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
                path: spec.into(),
                source,
            })?;
            Self::from_json_str(&text, spec)
        } else if PRESETS.iter().any(|p| p.0 == spec) {
            Self::preset(spec)
        } else if let Some(variant) = Self::width_variant(spec) {
            variant
        } else if spec.ends_with(".json") || spec.contains('/') {
            Err(ConfigError::Io {
                path: spec.into(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            })
        } else {
            Err(ConfigError::UnknownPreset { name: spec.into() })
        }
    }

    /// Parses config JSON; `origin` names the source in error messages.
    pub fn from_json_str(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let file: ConfigFile = serde_json::from_str(text).map_err(|source| ConfigError::Json {
            origin: origin.into(),
            source,
        })?;
        let missing = |key: &'static str, hint: &'static str| ConfigError::Missing {
            origin: origin.into(),
            key,
            hint,
        };
        const VTA_KEY: &str = "it is one of vta_config.json's keys and has no default";
        let (log_block_in, log_block_out) =
            match (file.log_block, file.log_block_in, file.log_block_out) {
                (Some(b), None, None) => (b, b),
                (None, Some(i), Some(o)) => (i, o),
                (None, None, None) => {
                    return Err(missing(
                        "LOG_BLOCK",
                        "give LOG_BLOCK, or both LOG_BLOCK_IN and LOG_BLOCK_OUT",
                    ))
                }
                (None, Some(_), None) => {
                    return Err(missing("LOG_BLOCK_OUT", "LOG_BLOCK_IN needs LOG_BLOCK_OUT"))
                }
                (None, None, Some(_)) => {
                    return Err(missing("LOG_BLOCK_IN", "LOG_BLOCK_OUT needs LOG_BLOCK_IN"))
                }
                (Some(_), _, _) => {
                    return Err(ConfigError::Invalid {
                        origin: origin.into(),
                        problem: "LOG_BLOCK cannot be combined with LOG_BLOCK_IN/LOG_BLOCK_OUT; \
                                  keep LOG_BLOCK for a square block or the pair for a rectangular one"
                            .into(),
                    })
                }
            };
        let cfg = HwConfig {
            target: file.target.unwrap_or_else(|| "sim".into()),
            hw_ver: file.hw_ver.unwrap_or_else(|| "0.0.2".into()),
            log_inp_width: file
                .log_inp_width
                .ok_or_else(|| missing("LOG_INP_WIDTH", VTA_KEY))?,
            log_wgt_width: file
                .log_wgt_width
                .ok_or_else(|| missing("LOG_WGT_WIDTH", VTA_KEY))?,
            log_acc_width: file
                .log_acc_width
                .ok_or_else(|| missing("LOG_ACC_WIDTH", VTA_KEY))?,
            log_batch: file
                .log_batch
                .ok_or_else(|| missing("LOG_BATCH", VTA_KEY))?,
            log_block_in,
            log_block_out,
            log_uop_buff_size: file
                .log_uop_buff_size
                .ok_or_else(|| missing("LOG_UOP_BUFF_SIZE", VTA_KEY))?,
            log_inp_buff_size: file
                .log_inp_buff_size
                .ok_or_else(|| missing("LOG_INP_BUFF_SIZE", VTA_KEY))?,
            log_wgt_buff_size: file
                .log_wgt_buff_size
                .ok_or_else(|| missing("LOG_WGT_BUFF_SIZE", VTA_KEY))?,
            log_acc_buff_size: file
                .log_acc_buff_size
                .ok_or_else(|| missing("LOG_ACC_BUFF_SIZE", VTA_KEY))?,
            axi_data_width: file.axi_data_width.unwrap_or(64),
            cmd_queue_depth: file.cmd_queue_depth.unwrap_or(512),
            token_queue_depth: file.token_queue_depth.unwrap_or(1024),
            clock_mhz: file.clock_mhz.unwrap_or(100),
            alu_mul: file.alu_mul.unwrap_or(true),
            alu_lut: file.alu_lut.unwrap_or(false),
        };
        cfg.validate().map_err(|problem| ConfigError::Invalid {
            origin: origin.into(),
            problem,
        })?;
        Ok(cfg)
    }

    /// The config in our native JSON format; `from_json_str` reads it back unchanged.
    pub fn to_json(&self) -> String {
        let square = self.log_block_in == self.log_block_out;
        let file = ConfigFile {
            target: Some(self.target.clone()),
            hw_ver: Some(self.hw_ver.clone()),
            log_inp_width: Some(self.log_inp_width),
            log_wgt_width: Some(self.log_wgt_width),
            log_acc_width: Some(self.log_acc_width),
            log_batch: Some(self.log_batch),
            log_block: square.then_some(self.log_block_in),
            log_block_in: (!square).then_some(self.log_block_in),
            log_block_out: (!square).then_some(self.log_block_out),
            log_uop_buff_size: Some(self.log_uop_buff_size),
            log_inp_buff_size: Some(self.log_inp_buff_size),
            log_wgt_buff_size: Some(self.log_wgt_buff_size),
            log_acc_buff_size: Some(self.log_acc_buff_size),
            axi_data_width: Some(self.axi_data_width),
            cmd_queue_depth: Some(self.cmd_queue_depth),
            token_queue_depth: Some(self.token_queue_depth),
            clock_mhz: Some(self.clock_mhz),
            alu_mul: Some(self.alu_mul),
            // Written only when on, so that configs without it print as before.
            alu_lut: self.alu_lut.then_some(true),
        };
        serde_json::to_string_pretty(&file).expect("config serializes")
    }

    /// Checks every constraint; the message names the key, the value, the limit and the fix.
    pub fn validate(&self) -> Result<(), String> {
        fn range(key: &str, v: u32, r: RangeInclusive<u32>, what: &str) -> Result<(), String> {
            let (lo, hi) = (*r.start(), *r.end());
            if !r.contains(&v) {
                Err(format!(
                    "{key} = {v} is out of range: it must be between {lo} and {hi} ({what})"
                ))
            } else {
                Ok(())
            }
        }
        if !TARGETS.contains(&self.target.as_str()) {
            return Err(format!(
                "TARGET = \"{}\" is unknown; use one of {}",
                self.target,
                TARGETS.join(", ")
            ));
        }
        let ver_ok = {
            let parts: Vec<&str> = self.hw_ver.split('.').collect();
            parts.len() == 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.parse::<u32>().is_ok())
        };
        if !ver_ok {
            return Err(format!(
                "HW_VER = \"{}\" is not a version of the form MAJOR.MINOR.PATCH such as \"0.0.2\"",
                self.hw_ver
            ));
        }
        range(
            "LOG_INP_WIDTH",
            self.log_inp_width,
            LOG_DATA_WIDTH_RANGE,
            "int2, int4, int8 or int16 inputs",
        )?;
        range(
            "LOG_WGT_WIDTH",
            self.log_wgt_width,
            LOG_DATA_WIDTH_RANGE,
            "int2, int4, int8 or int16 weights (bipolar +-1 weights use int2)",
        )?;
        range(
            "LOG_ACC_WIDTH",
            self.log_acc_width,
            LOG_ACC_WIDTH_RANGE,
            "int16 or int32 accumulators",
        )?;
        if self.log_acc_width < self.log_inp_width {
            return Err(format!(
                "LOG_ACC_WIDTH = {} is narrower than LOG_INP_WIDTH = {}: outputs are truncated \
                 accumulators, so raise LOG_ACC_WIDTH to at least {}",
                self.log_acc_width, self.log_inp_width, self.log_inp_width
            ));
        }
        range(
            "LOG_BATCH",
            self.log_batch,
            LOG_BATCH_RANGE,
            "BATCH from 1 to 16",
        )?;
        let block_key = |k: &'static str| {
            if self.log_block_in == self.log_block_out {
                "LOG_BLOCK"
            } else {
                k
            }
        };
        range(
            block_key("LOG_BLOCK_IN"),
            self.log_block_in,
            LOG_BLOCK_RANGE,
            "BLOCK_IN from 1 to 64",
        )?;
        range(
            block_key("LOG_BLOCK_OUT"),
            self.log_block_out,
            LOG_BLOCK_RANGE,
            "BLOCK_OUT from 1 to 64",
        )?;
        range(
            "AXI_DATA_WIDTH",
            self.axi_data_width,
            AXI_DATA_WIDTH_RANGE,
            "bits",
        )?;
        if !self.axi_data_width.is_power_of_two() {
            return Err(format!(
                "AXI_DATA_WIDTH = {} is not a power of two; use 64, 128, 256 or 512",
                self.axi_data_width
            ));
        }
        range(
            "CMD_QUEUE_DEPTH",
            self.cmd_queue_depth,
            CMD_QUEUE_DEPTH_RANGE,
            "entries",
        )?;
        range(
            "TOKEN_QUEUE_DEPTH",
            self.token_queue_depth,
            TOKEN_QUEUE_DEPTH_RANGE,
            "tokens",
        )?;
        range("CLOCK_MHZ", self.clock_mhz, CLOCK_MHZ_RANGE, "MHz")?;

        // Elements must be whole bytes: DRAM addresses count elements of each buffer.
        for m in [MemType::Inp, MemType::Wgt, MemType::Acc, MemType::Out] {
            if !self.elem_bits(m).is_multiple_of(8) {
                return Err(format!(
                    "a {} element is {} bits, not a whole number of bytes; widen the block \
                     (LOG_BATCH/LOG_BLOCK) or the data width",
                    m.name(),
                    self.elem_bits(m)
                ));
            }
        }
        // Every buffer holds at least one element.
        let buffers = [
            ("LOG_UOP_BUFF_SIZE", self.log_uop_buff_size, MemType::Uop),
            ("LOG_INP_BUFF_SIZE", self.log_inp_buff_size, MemType::Inp),
            ("LOG_WGT_BUFF_SIZE", self.log_wgt_buff_size, MemType::Wgt),
            ("LOG_ACC_BUFF_SIZE", self.log_acc_buff_size, MemType::Acc),
        ];
        for (key, size, m) in buffers {
            let elem_log = self.elem_bits(m).trailing_zeros() - 3;
            if size < elem_log || size > MAX_LOG_BUFF_SIZE {
                return Err(format!(
                    "{key} = {size} is out of range: the {} buffer must hold at least one \
                     {}-byte element, so {key} must be between {elem_log} and {MAX_LOG_BUFF_SIZE}",
                    m.name(),
                    self.elem_bytes(m)
                ));
            }
        }
        self.check_encoding()
    }

    /// The 128-bit instruction and 32-bit micro-op must hold every index field.
    fn check_encoding(&self) -> Result<(), String> {
        let (u, i, w, a) = (
            self.log_depth(MemType::Uop),
            self.log_depth(MemType::Inp),
            self.log_depth(MemType::Wgt),
            self.log_depth(MemType::Acc),
        );
        // sram_base is 16 bits wide.
        for (key, d, m) in [
            ("LOG_UOP_BUFF_SIZE", u, MemType::Uop),
            ("LOG_INP_BUFF_SIZE", i, MemType::Inp),
            ("LOG_WGT_BUFF_SIZE", w, MemType::Wgt),
            ("LOG_ACC_BUFF_SIZE", a, MemType::Acc),
        ] {
            if d > SRAM_ADDR_BITS {
                return Err(format!(
                    "{key} gives a {} buffer of 2^{d} elements, more than the 16-bit sram_base \
                     field of LOAD/STORE can address; lower {key} by {}",
                    m.name(),
                    d - SRAM_ADDR_BITS
                ));
            }
        }
        // GEMM/ALU first word: opcode, 4 flags, reset, uop_bgn (u), uop_end (u+1), two loops.
        let word0 = 3 + 4 + 1 + u + (u + 1) + 2 * LOOP_ITER_BITS;
        if word0 > 64 {
            return Err(format!(
                "LOG_UOP_BUFF_SIZE = {} gives {u}-bit micro-op addresses; GEMM/ALU instructions \
                 then need {word0} bits in their first 64-bit word; lower LOG_UOP_BUFF_SIZE to at \
                 most {}",
                self.log_uop_buff_size,
                self.log_uop_buff_size - (word0 - 63).div_ceil(2)
            ));
        }
        let alu1 = 4 * a + 3 + 1 + ALU_IMM_BITS;
        if alu1 > 64 {
            return Err(format!(
                "LOG_ACC_BUFF_SIZE = {} gives {a}-bit ACC indices; the ALU instruction needs \
                 4 x {a} + 20 = {alu1} bits in its second word, more than 64; lower \
                 LOG_ACC_BUFF_SIZE to at most {}",
                self.log_acc_buff_size,
                self.log_acc_buff_size - (alu1 - 64).div_ceil(4)
            ));
        }
        let gemm1 = 2 * (a + i + w);
        if gemm1 > 64 {
            return Err(format!(
                "the GEMM instruction's index factors need 2 x (ACC {a} + INP {i} + WGT {w}) = \
                 {gemm1} bits, more than the 64 its second word holds; lower LOG_ACC_BUFF_SIZE, \
                 LOG_INP_BUFF_SIZE or LOG_WGT_BUFF_SIZE by {} in total",
                (gemm1 - 64).div_ceil(2)
            ));
        }
        let uop = a + a.max(i) + w;
        if uop > 32 {
            return Err(format!(
                "a micro-op needs ACC {a} + SRC {} + WGT {w} = {uop} index bits, more than 32; \
                 lower LOG_ACC_BUFF_SIZE, LOG_INP_BUFF_SIZE or LOG_WGT_BUFF_SIZE by {} in total",
                a.max(i),
                uop - 32
            ));
        }
        Ok(())
    }

    pub fn batch(&self) -> u32 {
        1 << self.log_batch
    }
    pub fn block_in(&self) -> u32 {
        1 << self.log_block_in
    }
    pub fn block_out(&self) -> u32 {
        1 << self.log_block_out
    }
    pub fn inp_width(&self) -> u32 {
        1 << self.log_inp_width
    }
    pub fn wgt_width(&self) -> u32 {
        1 << self.log_wgt_width
    }
    pub fn acc_width(&self) -> u32 {
        1 << self.log_acc_width
    }
    /// Outputs have the input width, as in VTA (`LOG_OUT_WIDTH = LOG_INP_WIDTH`).
    pub fn out_width(&self) -> u32 {
        self.inp_width()
    }
    /// MACs the GEMM core performs per micro-op.
    pub fn macs_per_uop(&self) -> u64 {
        u64::from(self.batch() * self.block_in() * self.block_out())
    }

    /// Bits of one scratchpad element (one SRAM row, or one weight tile).
    pub fn elem_bits(&self, m: MemType) -> u32 {
        match m {
            MemType::Uop => 32,
            MemType::Inp => self.batch() * self.block_in() * self.inp_width(),
            MemType::Wgt => self.block_out() * self.block_in() * self.wgt_width(),
            MemType::Acc => self.batch() * self.block_out() * self.acc_width(),
            MemType::Out => self.batch() * self.block_out() * self.out_width(),
            // An ACC element read from DRAM as 8-bit values.
            MemType::Acc8 => self.batch() * self.block_out() * 8,
        }
    }

    /// Bytes of one element in DRAM: the unit of `dram_base`, `x_size` and `x_stride`.
    pub fn elem_bytes(&self, m: MemType) -> u32 {
        self.elem_bits(m) / 8
    }

    /// log2 of the buffer depth in elements, derived as VTA does.
    pub fn log_depth(&self, m: MemType) -> u32 {
        let log_elem = |m| self.elem_bits(m).trailing_zeros();
        match m {
            MemType::Uop => self.log_uop_buff_size + 3 - 5,
            MemType::Inp => self.log_inp_buff_size + 3 - log_elem(MemType::Inp),
            MemType::Wgt => self.log_wgt_buff_size + 3 - log_elem(MemType::Wgt),
            // The OUT buffer shadows ACC indices; ACC_8BIT loads land in ACC.
            MemType::Acc | MemType::Out | MemType::Acc8 => {
                self.log_acc_buff_size + 3 - log_elem(MemType::Acc)
            }
        }
    }

    /// Buffer depth in elements.
    pub fn depth(&self, m: MemType) -> u32 {
        1 << self.log_depth(m)
    }

    /// `LOG_OUT_BUFF_SIZE`, as VTA derives it.
    pub fn log_out_buff_size(&self) -> u32 {
        self.log_acc_buff_size + self.log_inp_width - self.log_acc_width
    }

    /// Bits of a micro-op's `src_idx`: it indexes INP for GEMM and ACC for ALU.
    pub fn uop_src_bits(&self) -> u32 {
        self.log_depth(MemType::Acc)
            .max(self.log_depth(MemType::Inp))
    }

    /// VTA's config string, e.g. `1x16_i8w8a32_15_15_18_17`; a rectangular block prints as
    /// `BATCHxBLOCK_INxBLOCK_OUT`, a config without ALU MUL ends in `_nomul`, and one with
    /// the activation table (`ALU_LUT`) in `_lut`.
    pub fn config_string(&self) -> String {
        let shape = if self.log_block_in == self.log_block_out {
            format!("{}x{}", self.batch(), self.block_in())
        } else {
            format!("{}x{}x{}", self.batch(), self.block_in(), self.block_out())
        };
        let mut s = format!(
            "{shape}_i{}w{}a{}_{}_{}_{}_{}",
            self.inp_width(),
            self.wgt_width(),
            self.acc_width(),
            self.log_uop_buff_size,
            self.log_inp_buff_size,
            self.log_wgt_buff_size,
            self.log_acc_buff_size
        );
        if !self.alu_mul {
            s.push_str("_nomul");
        }
        if self.alu_lut {
            s.push_str("_lut");
        }
        s
    }

    /// A stable 64-bit hash (FNV-1a) of the ISA-visible parameters: two configs with the same
    /// hash run the same programs with the same results.
    pub fn isa_hash(&self) -> u64 {
        crate::container::fnv1a(format!("vta-isa-v1:{}", self.config_string()).as_bytes())
    }

    /// Checks the config string and ISA hash a file stores against this config, the one
    /// embedded beside them; a mismatch names the fields that differ.
    pub fn check_identity(
        &self,
        stored_string: &str,
        stored_hash: u64,
    ) -> Result<(), IdentityMismatch> {
        let string = self.config_string();
        let hash = self.isa_hash();
        if stored_string != string {
            return Err(IdentityMismatch(format!(
                "the stored config string {stored_string} is not the embedded config's {string} \
                 ({}); the file is inconsistent",
                config_string_differences(stored_string, &string)
            )));
        }
        if stored_hash != hash {
            return Err(IdentityMismatch(format!(
                "the stored ISA hash {stored_hash:016x} is not the hash of the embedded config \
                 {string} ({hash:016x}), whose config string the file also stores: the hash is \
                 corrupted and the file inconsistent"
            )));
        }
        Ok(())
    }

    /// Every configured and derived parameter, in display order, as (name, value).
    pub fn parameters(&self) -> Vec<(&'static str, serde_json::Value)> {
        use serde_json::json;
        let mut rows = vec![
            ("config_string", json!(self.config_string())),
            ("isa_hash", json!(format!("{:016x}", self.isa_hash()))),
            ("target", json!(self.target)),
            ("hw_ver", json!(self.hw_ver)),
            ("batch", json!(self.batch())),
            ("block_in", json!(self.block_in())),
            ("block_out", json!(self.block_out())),
            ("inp_width", json!(self.inp_width())),
            ("wgt_width", json!(self.wgt_width())),
            ("acc_width", json!(self.acc_width())),
            ("out_width", json!(self.out_width())),
            ("macs_per_cycle", json!(self.macs_per_uop())),
            ("axi_data_width", json!(self.axi_data_width)),
            ("cmd_queue_depth", json!(self.cmd_queue_depth)),
            ("token_queue_depth", json!(self.token_queue_depth)),
            ("clock_mhz", json!(self.clock_mhz)),
            ("alu_mul", json!(self.alu_mul)),
        ];
        // Listed only when on, so that the parameters of configs without it are as before.
        if self.alu_lut {
            rows.push(("alu_lut", json!(true)));
            rows.push(("lut_entries", json!(LUT_ENTRIES)));
        }
        rows.push(("log_out_buff_size", json!(self.log_out_buff_size())));
        let per_buffer: [(MemType, [&'static str; 4]); 5] = [
            (
                MemType::Uop,
                [
                    "uop_elem_bytes",
                    "uop_depth",
                    "log_uop_depth",
                    "uop_buff_bytes",
                ],
            ),
            (
                MemType::Inp,
                [
                    "inp_elem_bytes",
                    "inp_depth",
                    "log_inp_depth",
                    "inp_buff_bytes",
                ],
            ),
            (
                MemType::Wgt,
                [
                    "wgt_elem_bytes",
                    "wgt_depth",
                    "log_wgt_depth",
                    "wgt_buff_bytes",
                ],
            ),
            (
                MemType::Acc,
                [
                    "acc_elem_bytes",
                    "acc_depth",
                    "log_acc_depth",
                    "acc_buff_bytes",
                ],
            ),
            (
                MemType::Out,
                [
                    "out_elem_bytes",
                    "out_depth",
                    "log_out_depth",
                    "out_buff_bytes",
                ],
            ),
        ];
        for (m, [eb, d, ld, bb]) in per_buffer {
            rows.push((eb, json!(self.elem_bytes(m))));
            rows.push((d, json!(self.depth(m))));
            rows.push((ld, json!(self.log_depth(m))));
            rows.push((
                bb,
                json!(u64::from(self.elem_bytes(m)) * u64::from(self.depth(m))),
            ));
        }
        rows.push(("uop_src_idx_bits", json!(self.uop_src_bits())));
        rows
    }
}

impl fmt::Display for HwConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.config_string())
    }
}

/// A file whose stored config identity disagrees with its embedded config (see
/// [`HwConfig::check_identity`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdentityMismatch(String);

/// What the `_`-separated parts of a config string ([`HwConfig::config_string`]) hold: six
/// fixed parts, then the option suffixes.
const CONFIG_STRING_PARTS: [&str; 6] = [
    "the GEMM shape BATCHxBLOCK (LOG_BATCH, LOG_BLOCK)",
    "the data widths (LOG_INP_WIDTH, LOG_WGT_WIDTH, LOG_ACC_WIDTH)",
    "LOG_UOP_BUFF_SIZE",
    "LOG_INP_BUFF_SIZE",
    "LOG_WGT_BUFF_SIZE",
    "LOG_ACC_BUFF_SIZE",
];

/// The option suffixes of a config string: the suffix, what it is about, and whether the
/// option is on when the suffix is present.
const CONFIG_STRING_OPTIONS: [(&str, &str, bool); 2] = [
    (
        "nomul",
        "the ALU multiplier (ALU_MUL, `_nomul` when off)",
        false,
    ),
    (
        "lut",
        "the ALU activation table (ALU_LUT, `_lut` when on)",
        true,
    ),
];

/// Which parameters two config strings disagree on: `LOG_ACC_BUFF_SIZE: 16 vs 17`.
fn config_string_differences(a: &str, b: &str) -> String {
    // The six fixed parts, then per option whether it is on; None if not a config string.
    let parse = |s: &str| -> Option<(Vec<String>, Vec<bool>)> {
        let parts: Vec<&str> = s.split('_').collect();
        if parts.len() < CONFIG_STRING_PARTS.len() {
            return None;
        }
        let (fixed, suffixes) = parts.split_at(CONFIG_STRING_PARTS.len());
        if suffixes
            .iter()
            .any(|x| !CONFIG_STRING_OPTIONS.iter().any(|o| o.0 == *x))
        {
            return None;
        }
        let options = CONFIG_STRING_OPTIONS
            .iter()
            .map(|&(suffix, _, on_when_present)| suffixes.contains(&suffix) == on_when_present)
            .collect();
        Some((fixed.iter().map(|p| p.to_string()).collect(), options))
    };
    let (Some((fa, oa)), Some((fb, ob))) = (parse(a), parse(b)) else {
        return "the stored one is not a config string".into();
    };
    let on_off = |on: bool| if on { "on" } else { "off" };
    let fixed = (0..CONFIG_STRING_PARTS.len())
        .filter(|&i| fa[i] != fb[i])
        .map(|i| format!("{}: {} vs {}", CONFIG_STRING_PARTS[i], fa[i], fb[i]));
    let options = (0..CONFIG_STRING_OPTIONS.len())
        .filter(|&i| oa[i] != ob[i])
        .map(|i| {
            format!(
                "{}: {} vs {}",
                CONFIG_STRING_OPTIONS[i].1,
                on_off(oa[i]),
                on_off(ob[i])
            )
        });
    fixed.chain(options).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid_and_round_trips_through_json() {
        for (name, _, _) in PRESETS {
            let cfg = HwConfig::preset(name).unwrap();
            let again = HwConfig::from_json_str(&cfg.to_json(), "round trip").unwrap();
            assert_eq!(cfg, again, "{name}");
        }
    }

    #[test]
    fn default_derives_vta_parameters() {
        let c = HwConfig::default();
        assert_eq!(c.config_string(), "1x16_i8w8a32_15_15_18_17");
        assert_eq!(
            [
                MemType::Uop,
                MemType::Inp,
                MemType::Wgt,
                MemType::Acc,
                MemType::Out
            ]
            .map(|m| (c.elem_bytes(m), c.depth(m))),
            [(4, 8192), (16, 2048), (256, 1024), (64, 2048), (16, 2048)]
        );
        assert_eq!(c.log_out_buff_size(), 15);
    }

    #[test]
    fn vta_batched_config_string() {
        let c = HwConfig::preset("batched").unwrap();
        assert_eq!(c.config_string(), "4x8_i8w8a32_15_16_16_18");
        assert_eq!(c.log_depth(MemType::Acc), 11);
    }

    #[test]
    fn rect_config_string_names_both_blocks() {
        let c = HwConfig::preset("rect").unwrap();
        assert_eq!(c.config_string(), "2x16x8_i8w8a32_15_15_17_17");
    }

    fn vta_json(log_block: u32, acc: u32) -> String {
        format!(
            r#"{{"TARGET":"sim","HW_VER":"0.0.2","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,
            "LOG_ACC_WIDTH":5,"LOG_BATCH":0,"LOG_BLOCK":{log_block},"LOG_UOP_BUFF_SIZE":15,
            "LOG_INP_BUFF_SIZE":15,"LOG_WGT_BUFF_SIZE":18,"LOG_ACC_BUFF_SIZE":{acc}}}"#
        )
    }

    #[test]
    fn log_block_11_is_refused_naming_log_block() {
        let e = HwConfig::from_json_str(&vta_json(11, 17), "x.json").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("LOG_BLOCK = 11") && msg.contains("x.json"),
            "{msg}"
        );
    }

    #[test]
    fn oversized_acc_names_the_alu_word_and_the_fix() {
        let msg = HwConfig::from_json_str(&vta_json(4, 18), "x")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("LOG_ACC_BUFF_SIZE") && msg.contains("at most 17"),
            "{msg}"
        );
    }

    #[test]
    fn unknown_and_missing_keys_are_named() {
        let msg = HwConfig::from_json_str(r#"{"LOG_BLOK":4}"#, "x")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("LOG_BLOK"), "{msg}");
        let msg = HwConfig::from_json_str(r#"{"LOG_BLOCK":4}"#, "x")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("missing key LOG_INP_WIDTH"), "{msg}");
    }

    #[test]
    fn isa_hash_ignores_bus_width_but_not_shape() {
        let a = HwConfig::default();
        let b = HwConfig::preset("wide-bus").unwrap();
        let c = HwConfig::preset("batched").unwrap();
        assert_eq!(a.isa_hash(), b.isa_hash());
        assert_ne!(a.isa_hash(), c.isa_hash());
    }

    #[test]
    fn the_lut_option_is_off_by_default_and_changes_only_the_isa_identity() {
        let d = HwConfig::default();
        assert!(!d.alu_lut);
        assert!(!d.to_json().contains("ALU_LUT"), "{}", d.to_json());
        assert!(!d
            .parameters()
            .iter()
            .any(|(k, _)| k.starts_with("lut") || *k == "alu_lut"));
        let l = HwConfig::preset("lut").unwrap();
        assert!(l.alu_lut);
        assert_eq!(l.config_string(), "1x16_i8w8a32_15_15_18_17_lut");
        assert_ne!(l.isa_hash(), d.isa_hash());
        assert_eq!(
            HwConfig {
                alu_lut: false,
                ..l.clone()
            },
            d
        );
        assert!(l.to_json().contains("\"ALU_LUT\": true"), "{}", l.to_json());
        let p = l.parameters();
        assert!(
            p.contains(&("lut_entries", serde_json::json!(256))),
            "{p:?}"
        );
        let e = d
            .check_identity(&l.config_string(), l.isa_hash())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the ALU activation table (ALU_LUT, `_lut` when on): on vs off"),
            "{e}"
        );
        let nomul_lut = HwConfig {
            alu_mul: false,
            ..l.clone()
        };
        assert_eq!(
            nomul_lut.config_string(),
            "1x16_i8w8a32_15_15_18_17_nomul_lut"
        );
        let e = l
            .check_identity(&nomul_lut.config_string(), 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ALU_MUL") && !e.contains("ALU_LUT"), "{e}");
        let e = l
            .check_identity("1x16_i8w8a32_15_15_18_17_lux", 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a config string"), "{e}");
    }

    #[test]
    fn an_identity_mismatch_names_the_differing_fields() {
        let cfg = HwConfig::preset("default").unwrap();
        let (string, hash) = (cfg.config_string(), cfg.isa_hash());
        assert_eq!(cfg.check_identity(&string, hash), Ok(()));
        let e = cfg
            .check_identity("1x16_i8w8a32_15_15_18_16_nomul", hash)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "the stored config string 1x16_i8w8a32_15_15_18_16_nomul is not the embedded \
             config's 1x16_i8w8a32_15_15_18_17 (LOG_ACC_BUFF_SIZE: 16 vs 17; the ALU multiplier \
             (ALU_MUL, `_nomul` when off): off vs on); the file is inconsistent"
        );
        let e = cfg
            .check_identity(&string, hash ^ 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the hash is corrupted"), "{e}");
        assert!(e.contains(&format!("{hash:016x}")), "{e}");
        let e = cfg.check_identity("garbage", hash).unwrap_err().to_string();
        assert!(e.contains("(the stored one is not a config string)"), "{e}");
    }
}
