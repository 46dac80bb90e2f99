//! The sweep: axes of config parameters, each a list of values given on the command line or
//! in a JSON or TOML file, expanded over a base config into every combination. Combinations
//! that `isa`'s config validation refuses are skipped, each with its reason.
//!
//! Buffers are sized either as VTA does, in bytes (`log_inp_buff` is `LOG_INP_BUFF_SIZE`), or
//! in elements (`inp_depth`: rows of INP, tiles of WGT, rows of ACC), which keeps a buffer's
//! capacity in elements as the block changes (its bytes then follow the element size). The
//! encoding limits of the ISA bind the element counts, so a block sweep usually wants depths.
//!
//! Data widths (`inp_width`, `wgt_width`: 2, 4, 8 or 16 bits; `acc_width`: 16 or 32) keep
//! each scratchpad's depth in elements (its bytes follow the lanes), as the config's width
//! variants do (`i4w4`); a network compiled for such a config is post-training quantized to
//! its widths.
//!
//! Values: `16`, a list `8,16,32`, or a range `A..B` (inclusive) that steps the axis' own way:
//! doubling for the power-of-two axes (the widths, `batch`, `block`, `block_in`,
//! `block_out`, the depths, `bus`), by one for the log2 buffer sizes, and by `S` for the
//! clock (`100..200:25`; `A..B` alone steps by 10 MHz there).

use std::collections::BTreeMap;
use std::fmt;

use isa::{HwConfig, MemType};
use serde::Deserialize;

/// A swept parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Param {
    /// `INP_WIDTH`, `WGT_WIDTH` and `ACC_WIDTH` in bits.
    InpWidth,
    WgtWidth,
    AccWidth,
    /// `BATCH` (a power of two).
    Batch,
    /// `BLOCK_IN` and `BLOCK_OUT` together (square blocks).
    Block,
    BlockIn,
    BlockOut,
    /// `LOG_UOP_BUFF_SIZE` and the other buffers' log2 byte sizes.
    LogUopBuff,
    LogInpBuff,
    LogWgtBuff,
    LogAccBuff,
    /// Buffer depths in elements (INP rows, WGT tiles, ACC rows): set after the GEMM shape,
    /// they give the log2 byte sizes.
    InpDepth,
    WgtDepth,
    AccDepth,
    /// `AXI_DATA_WIDTH`, bits.
    Bus,
    /// `CLOCK_MHZ`.
    Clock,
}

/// How a range `A..B` of a parameter steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Double,
    One,
    /// A default step that `A..B:S` may replace.
    Linear(u32),
}

impl Param {
    /// In the order they are applied: the widths and the shape before the depths that depend
    /// on them.
    pub const ALL: [Param; 16] = [
        Param::InpWidth,
        Param::WgtWidth,
        Param::AccWidth,
        Param::Batch,
        Param::Block,
        Param::BlockIn,
        Param::BlockOut,
        Param::LogUopBuff,
        Param::LogInpBuff,
        Param::LogWgtBuff,
        Param::LogAccBuff,
        Param::InpDepth,
        Param::WgtDepth,
        Param::AccDepth,
        Param::Bus,
        Param::Clock,
    ];

    /// The key in sweep files and the name in tables (`block_in`); the command-line flag is
    /// the same with dashes.
    pub fn key(self) -> &'static str {
        match self {
            Param::InpWidth => "inp_width",
            Param::WgtWidth => "wgt_width",
            Param::AccWidth => "acc_width",
            Param::Batch => "batch",
            Param::Block => "block",
            Param::BlockIn => "block_in",
            Param::BlockOut => "block_out",
            Param::LogUopBuff => "log_uop_buff",
            Param::LogInpBuff => "log_inp_buff",
            Param::LogWgtBuff => "log_wgt_buff",
            Param::LogAccBuff => "log_acc_buff",
            Param::InpDepth => "inp_depth",
            Param::WgtDepth => "wgt_depth",
            Param::AccDepth => "acc_depth",
            Param::Bus => "bus",
            Param::Clock => "clock",
        }
    }

    pub fn from_key(key: &str) -> Option<Param> {
        Param::ALL
            .into_iter()
            .find(|p| p.key() == key || p.key().replace('_', "-") == key)
    }

    fn step(self) -> Step {
        match self {
            Param::InpWidth
            | Param::WgtWidth
            | Param::AccWidth
            | Param::Batch
            | Param::Block
            | Param::BlockIn
            | Param::BlockOut
            | Param::InpDepth
            | Param::WgtDepth
            | Param::AccDepth
            | Param::Bus => Step::Double,
            Param::Clock => Step::Linear(10),
            _ => Step::One,
        }
    }

    /// The parameter's value in `cfg`.
    pub fn get(self, cfg: &HwConfig) -> u32 {
        match self {
            Param::InpWidth => cfg.inp_width(),
            Param::WgtWidth => cfg.wgt_width(),
            Param::AccWidth => cfg.acc_width(),
            Param::Batch => cfg.batch(),
            Param::Block | Param::BlockIn => cfg.block_in(),
            Param::BlockOut => cfg.block_out(),
            Param::LogUopBuff => cfg.log_uop_buff_size,
            Param::LogInpBuff => cfg.log_inp_buff_size,
            Param::LogWgtBuff => cfg.log_wgt_buff_size,
            Param::LogAccBuff => cfg.log_acc_buff_size,
            Param::InpDepth => cfg.depth(MemType::Inp),
            Param::WgtDepth => cfg.depth(MemType::Wgt),
            Param::AccDepth => cfg.depth(MemType::Acc),
            Param::Bus => cfg.axi_data_width,
            Param::Clock => cfg.clock_mhz,
        }
    }

    /// The parameters that set the same thing as this one (and so cannot be swept with it).
    fn clashing(self) -> &'static [Param] {
        match self {
            Param::Block => &[Param::BlockIn, Param::BlockOut],
            Param::BlockIn | Param::BlockOut => &[Param::Block],
            Param::LogInpBuff => &[Param::InpDepth],
            Param::InpDepth => &[Param::LogInpBuff],
            Param::LogWgtBuff => &[Param::WgtDepth],
            Param::WgtDepth => &[Param::LogWgtBuff],
            Param::LogAccBuff => &[Param::AccDepth],
            Param::AccDepth => &[Param::LogAccBuff],
            _ => &[],
        }
    }

    /// Sets the parameter in `cfg` (unvalidated); a power-of-two parameter that is not one is
    /// refused.
    fn set(self, cfg: &mut HwConfig, v: u32) -> Result<(), String> {
        let log2 = |what: &str| {
            if v.is_power_of_two() {
                Ok(v.trailing_zeros())
            } else {
                Err(format!("{what} = {v} is not a power of two"))
            }
        };
        match self {
            Param::InpWidth => *cfg = cfg.with_widths(v, cfg.wgt_width(), cfg.acc_width())?,
            Param::WgtWidth => *cfg = cfg.with_widths(cfg.inp_width(), v, cfg.acc_width())?,
            Param::AccWidth => *cfg = cfg.with_widths(cfg.inp_width(), cfg.wgt_width(), v)?,
            Param::Batch => cfg.log_batch = log2("BATCH")?,
            Param::Block => {
                cfg.log_block_in = log2("BLOCK")?;
                cfg.log_block_out = cfg.log_block_in;
            }
            Param::BlockIn => cfg.log_block_in = log2("BLOCK_IN")?,
            Param::BlockOut => cfg.log_block_out = log2("BLOCK_OUT")?,
            Param::LogUopBuff => cfg.log_uop_buff_size = v,
            Param::LogInpBuff => cfg.log_inp_buff_size = v,
            Param::LogWgtBuff => cfg.log_wgt_buff_size = v,
            Param::LogAccBuff => cfg.log_acc_buff_size = v,
            Param::InpDepth => {
                cfg.log_inp_buff_size = log2("INP depth")? + log_elem_bytes(cfg, MemType::Inp)
            }
            Param::WgtDepth => {
                cfg.log_wgt_buff_size = log2("WGT depth")? + log_elem_bytes(cfg, MemType::Wgt)
            }
            Param::AccDepth => {
                cfg.log_acc_buff_size = log2("ACC depth")? + log_elem_bytes(cfg, MemType::Acc)
            }
            Param::Bus => cfg.axi_data_width = v,
            Param::Clock => cfg.clock_mhz = v,
        }
        Ok(())
    }
}

/// log2 of an element's bytes of `m` in `cfg` (elements are whole powers of two of bytes in
/// a valid config; a fraction of a byte counts as 0 and the validation refuses it).
fn log_elem_bytes(cfg: &HwConfig, m: MemType) -> u32 {
    (cfg.elem_bits(m) / 8).max(1).trailing_zeros()
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// Parses the values of `param`: `16`, `8,16,32`, `8..32`, `100..200:25`.
pub fn parse_values(param: Param, text: &str) -> Result<Vec<u32>, String> {
    let bad = |why: String| format!("{param} '{text}': {why}");
    let number = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| bad(format!("'{}' is not a whole number", s.trim())))
    };
    let mut values = Vec::new();
    for part in text.split(',') {
        let Some((from, rest)) = part.split_once("..") else {
            values.push(number(part)?);
            continue;
        };
        let (to, step) = match rest.split_once(':') {
            Some((to, s)) => (number(to)?, Some(number(s)?)),
            None => (number(rest)?, None),
        };
        let from = number(from)?;
        if from > to {
            return Err(bad(format!(
                "the range starts above its end ({from} > {to})"
            )));
        }
        let step = match (param.step(), step) {
            (Step::Linear(_), Some(0)) => return Err(bad("a step of 0".into())),
            (Step::Linear(_), Some(s)) => Step::Linear(s),
            (s, None) => s,
            (_, Some(_)) => {
                return Err(bad(format!(
                    "{param} steps {}; a ':STEP' applies to the clock only",
                    match param.step() {
                        Step::Double => "by doubling",
                        _ => "by one",
                    }
                )))
            }
        };
        let mut v = from;
        while v <= to {
            values.push(v);
            v = match step {
                Step::Double if v == 0 => {
                    return Err(bad("a doubling range cannot start at 0".into()))
                }
                Step::Double => v.saturating_mul(2),
                Step::One => v + 1,
                Step::Linear(s) => v.saturating_add(s),
            };
            if v == u32::MAX {
                break;
            }
        }
    }
    if values.is_empty() {
        return Err(bad("no values".into()));
    }
    values.sort_unstable();
    values.dedup();
    Ok(values)
}

/// The axes of a sweep, in [`Param::ALL`] order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Axes(BTreeMap<Param, Vec<u32>>);

impl Axes {
    /// The sweep `vta dse` runs when no axis is given: square blocks of 8, 16 and 32 with
    /// 2048 INP and ACC rows and 512 or 1024 WGT tiles (the default config's depths, and half
    /// its weights), on a 64- or 128-bit bus: 12 configs.
    pub fn default_sweep() -> Axes {
        let mut a = Axes::default();
        a.0.insert(Param::Block, vec![8, 16, 32]);
        a.0.insert(Param::InpDepth, vec![2048]);
        a.0.insert(Param::WgtDepth, vec![512, 1024]);
        a.0.insert(Param::AccDepth, vec![2048]);
        a.0.insert(Param::Bus, vec![64, 128]);
        a
    }

    /// Sets an axis; two axes that set the same thing (`block` and `block_in`,
    /// `log_inp_buff` and `inp_depth`, ...) cannot both be given.
    pub fn set(&mut self, param: Param, values: Vec<u32>) -> Result<(), String> {
        if let Some(other) = param.clashing().iter().find(|p| self.0.contains_key(p)) {
            return Err(format!(
                "{param} and {other} cannot both be swept: they set the same parameter"
            ));
        }
        self.0.insert(param, values);
        Ok(())
    }

    /// These axes with `options`' replacing theirs: an axis of `options` replaces the same
    /// axis and those that set the same thing (`block` replaces `block_in` and `block_out`,
    /// `inp_depth` replaces `log_inp_buff`, ...).
    pub fn overridden_by(mut self, options: &Axes) -> Axes {
        for (&param, values) in &options.0 {
            for p in param.clashing() {
                self.0.remove(p);
            }
            self.0.insert(param, values.clone());
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The axes and their values.
    pub fn iter(&self) -> impl Iterator<Item = (Param, &[u32])> {
        self.0.iter().map(|(p, v)| (*p, v.as_slice()))
    }

    /// Reads axes from a sweep file's text (JSON, or TOML when `toml`): an object of axis
    /// keys (see [`Param::key`]) to a number, a list of numbers or a value string such as
    /// `"8..32"`, plus optionally `"base"`: a config file or preset. Returns the axes and
    /// the base.
    pub fn from_file_text(
        text: &str,
        toml: bool,
        origin: &str,
    ) -> Result<(Axes, Option<String>), String> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Values {
            One(u32),
            List(Vec<u32>),
            Text(String),
        }
        let map: BTreeMap<String, serde_json::Value> = if toml {
            ::toml::from_str(text).map_err(|e| format!("{origin} is not valid TOML: {e}"))?
        } else {
            serde_json::from_str(text).map_err(|e| format!("{origin} is not valid JSON: {e}"))?
        };
        let mut axes = Axes::default();
        let mut base = None;
        for (key, value) in map {
            if key == "base" {
                base = Some(
                    value
                        .as_str()
                        .ok_or_else(|| {
                            format!("{origin}: base must be a string (a config file or preset)")
                        })?
                        .to_string(),
                );
                continue;
            }
            let param = Param::from_key(&key).ok_or_else(|| {
                format!(
                    "{origin}: unknown axis '{key}'; axes: base, {}",
                    Param::ALL.map(Param::key).join(", ")
                )
            })?;
            let values = match serde_json::from_value::<Values>(value) {
                Ok(Values::One(v)) => vec![v],
                Ok(Values::List(v)) if !v.is_empty() => v,
                Ok(Values::List(_)) => return Err(format!("{origin}: {key} has no values")),
                Ok(Values::Text(t)) => parse_values(param, &t).map_err(|e| format!("{origin}: {e}"))?,
                Err(_) => {
                    return Err(format!(
                        "{origin}: {key} must be a number, a list of numbers or a string such as \"8..32\""
                    ))
                }
            };
            axes.set(param, values)
                .map_err(|e| format!("{origin}: {e}"))?;
        }
        Ok((axes, base))
    }
}

/// A combination `isa` refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// The swept parameters' values, by key.
    pub values: BTreeMap<&'static str, u32>,
    /// The validation's message.
    pub reason: String,
}

/// The sweep expanded.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Combinations of the axes' values, valid or not.
    pub combinations: usize,
    /// Valid configs, in expansion order (the last axis fastest).
    pub configs: Vec<HwConfig>,
    pub skipped: Vec<Skipped>,
}

/// One shard of a sweep split `count` ways, `index` of them (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// `I/N` as written on the command line.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("shard '{text}': write it INDEX/COUNT, e.g. 0/4 (indices from 0)");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse::<usize>().map_err(|_| bad())?,
            n.trim().parse::<usize>().map_err(|_| bad())?,
        );
        if count == 0 || index >= count {
            return Err(format!(
                "shard '{text}': the index must be below the count (0/{count} to {}/{count})",
                count.max(1) - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// The shard a Slurm array task is (`SLURM_ARRAY_TASK_ID` of `SLURM_ARRAY_TASK_COUNT`,
    /// an array submitted as `--array=0-(N-1)`), when both are set.
    pub fn from_env() -> Option<Result<Shard, String>> {
        let id = std::env::var("SLURM_ARRAY_TASK_ID").ok()?;
        let count = std::env::var("SLURM_ARRAY_TASK_COUNT").ok()?;
        Some(
            Shard::parse(&format!("{id}/{count}"))
                .map_err(|e| format!("{e} (from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT)")),
        )
    }

    /// Whether the sweep's `k`-th config (in expansion order) is this shard's: every
    /// `count`-th, so neighbouring configs, of similar cost, spread over the shards.
    pub fn owns(self, k: usize) -> bool {
        k % self.count == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Plan {
    /// The configs of `shard` (the skipped combinations stay with shard 0, so that they are
    /// reported once).
    pub fn shard(&self, shard: Shard) -> Plan {
        Plan {
            combinations: self.combinations,
            configs: self
                .configs
                .iter()
                .enumerate()
                .filter(|&(k, _)| shard.owns(k))
                .map(|(_, c)| c.clone())
                .collect(),
            skipped: if shard.index == 0 {
                self.skipped.clone()
            } else {
                Vec::new()
            },
        }
    }
}

/// Every combination of `axes` over `base`, validated.
pub fn expand(base: &HwConfig, axes: &Axes) -> Plan {
    let axes: Vec<(Param, &[u32])> = axes.iter().collect();
    let total: usize = axes.iter().map(|(_, v)| v.len()).product();
    let mut plan = Plan {
        combinations: total,
        configs: Vec::new(),
        skipped: Vec::new(),
    };
    for n in 0..total {
        // Mixed radix, the last axis fastest.
        let mut digits = vec![0; axes.len()];
        let mut rest = n;
        for (d, (_, vs)) in digits.iter_mut().zip(&axes).rev() {
            *d = rest % vs.len();
            rest /= vs.len();
        }
        let mut cfg = base.clone();
        let mut values = BTreeMap::new();
        let mut problem = None;
        // In Param order: the shape before the depths that depend on it.
        for ((param, vs), d) in axes.iter().zip(digits) {
            let v = vs[d];
            values.insert(param.key(), v);
            if let Err(e) = param.set(&mut cfg, v) {
                problem.get_or_insert(e);
            }
        }
        match problem.map_or_else(|| cfg.validate(), Err) {
            Ok(()) => plan.configs.push(cfg),
            Err(reason) => plan.skipped.push(Skipped { values, reason }),
        }
    }
    plan
}

/// The skipped combinations grouped by reason with the config keys' numbers left out, most
/// frequent first: `(count, an example reason)`.
pub fn skip_summary(skipped: &[Skipped]) -> Vec<(usize, String)> {
    let mut groups: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for s in skipped {
        let shape: String = s
            .reason
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        groups.entry(shape).or_insert((0, s.reason.clone())).0 += 1;
    }
    let mut v: Vec<(usize, String)> = groups.into_values().collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    v
}

#[cfg(test)]
mod tests;
