//! Reproducer files: everything needed to run one mismatching unit of a campaign again, alone,
//! in one JSON document: the config (as a config file writes it), the campaign and program
//! seeds, the program itself (its `.vtab` container in hex, which replay runs, and its
//! assembly, for reading), the memory timing and stalls, the planted fault if any, and the
//! mismatch as found (for differing outputs, the first differing STORE's report).
//!
//! The stored program, not the seed, is what a replay runs, so a reproducer stays valid when
//! the generator changes.

use serde_json::{json, Map, Value};

use isa::HwConfig;

use super::compare::{Case, Mismatch, MismatchKind};
use super::DiffError;
use crate::rtl::{MemTiming, Stalls};

/// The `format` field of every reproducer.
pub const FORMAT: &str = "vta check diff reproducer";
/// The version this build writes and reads.
pub const VERSION: u64 = 1;

/// One mismatching unit, as a reproducer file holds it.
#[derive(Clone, Debug)]
pub struct Reproducer {
    /// The unit's number in its campaign.
    pub unit: u64,
    pub campaign_seed: u64,
    /// Where the config came from ("preset default", "random config 42").
    pub source: String,
    /// The random config's seed, if it is one.
    pub config_seed: Option<u64>,
    pub program_seed: u64,
    pub case: Case,
    pub mismatch: Mismatch,
}

impl Reproducer {
    /// The file's text; `replay` is the command that replays it, written into the file for
    /// whoever opens it.
    pub fn to_json(&self, replay: &str) -> Result<String, DiffError> {
        let c = &self.case;
        let vtab = isa::container::write(&c.program)
            .map_err(|e| DiffError::Generate(format!("cannot store the program: {e}")))?;
        let config: Value =
            serde_json::from_str(&c.cfg.to_json()).expect("a config writes valid JSON");
        let doc = json!({
            "format": FORMAT,
            "version": VERSION,
            "replay": replay,
            "unit": self.unit,
            "campaign_seed": self.campaign_seed,
            "config_source": self.source,
            "config_seed": self.config_seed,
            "program_seed": self.program_seed,
            "config": config,
            "memory": {
                "read_latency": c.timing.read_latency,
                "write_latency": c.timing.write_latency,
                "beat_interval": c.timing.beat_interval,
                "max_outstanding": c.timing.max_outstanding,
            },
            "stalls": c.stalls.map(|s| json!({
                "ar": s.ar, "r": s.r, "aw": s.aw, "w": s.w, "b": s.b, "seed": s.seed,
            })),
            "planted_store": c.plant,
            "mismatch": {
                "kind": self.mismatch.kind.name(),
                "detail": self.mismatch.detail,
            },
            "program": {
                "vtab_hex": hex(&vtab),
                "assembly": isa::asm::print_program(&c.program),
            },
        });
        Ok(format!("{doc:#}\n"))
    }

    /// Reads a reproducer's text; `origin` (its path) names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Reproducer, DiffError> {
        let bad = |what: String| DiffError::Reproducer {
            origin: origin.to_string(),
            what,
        };
        let doc: Value =
            serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON ({e})")))?;
        let top = doc
            .as_object()
            .ok_or_else(|| bad("not a JSON object".into()))?;
        if top.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(bad(format!("its \"format\" is not \"{FORMAT}\"")));
        }
        let version = u64_field(top, "version", "").map_err(&bad)?;
        if version != VERSION {
            return Err(bad(format!(
                "version {version}; this vta reads version {VERSION}: replay it with the vta \
                 that wrote it"
            )));
        }
        let config = top
            .get("config")
            .filter(|v| v.is_object())
            .ok_or_else(|| bad("no \"config\" object".into()))?;
        let cfg = HwConfig::from_json_str(&config.to_string(), &format!("{origin}: config"))
            .map_err(|e| bad(e.to_string()))?;
        let memory = object(top, "memory").map_err(&bad)?;
        let timing = MemTiming {
            read_latency: u32_field(memory, "read_latency", "memory.").map_err(&bad)?,
            write_latency: u32_field(memory, "write_latency", "memory.").map_err(&bad)?,
            beat_interval: u32_field(memory, "beat_interval", "memory.").map_err(&bad)?,
            max_outstanding: u32_field(memory, "max_outstanding", "memory.").map_err(&bad)?
                as usize,
        };
        if timing.read_latency == 0 || timing.write_latency == 0 || timing.beat_interval == 0 {
            return Err(bad(
                "memory: latencies and the beat interval must be at least 1".into(),
            ));
        }
        let stalls = match top.get("stalls") {
            None | Some(Value::Null) => None,
            Some(Value::Object(s)) => {
                let pct = |k: &str| -> Result<u8, String> {
                    let v = u64_field(s, k, "stalls.")?;
                    u8::try_from(v)
                        .ok()
                        .filter(|&p| p < 100)
                        .ok_or_else(|| format!("\"stalls.{k}\" is {v}; a percentage below 100"))
                };
                Some(Stalls {
                    ar: pct("ar").map_err(&bad)?,
                    r: pct("r").map_err(&bad)?,
                    aw: pct("aw").map_err(&bad)?,
                    w: pct("w").map_err(&bad)?,
                    b: pct("b").map_err(&bad)?,
                    seed: u64_field(s, "seed", "stalls.").map_err(&bad)?,
                })
            }
            Some(_) => return Err(bad("\"stalls\" is neither an object nor null".into())),
        };
        let plant = match top.get("planted_store") {
            None | Some(Value::Null) => None,
            Some(_) => Some(u64_field(top, "planted_store", "").map_err(&bad)? as usize),
        };
        let mismatch = object(top, "mismatch").map_err(&bad)?;
        let kind = mismatch
            .get("kind")
            .and_then(Value::as_str)
            .and_then(MismatchKind::from_name)
            .ok_or_else(|| {
                let kinds: Vec<&str> = MismatchKind::ALL.iter().map(|k| k.name()).collect();
                bad(format!(
                    "\"mismatch.kind\" is missing or not one of {}",
                    kinds.join(", ")
                ))
            })?;
        let detail = str_field(mismatch, "detail", "mismatch.").map_err(&bad)?;
        let program = object(top, "program").map_err(&bad)?;
        let vtab = unhex(&str_field(program, "vtab_hex", "program.").map_err(&bad)?)
            .map_err(|e| bad(format!("\"program.vtab_hex\": {e}")))?;
        let program = isa::container::read_for(&vtab, &cfg)
            .map_err(|e| bad(format!("\"program.vtab_hex\": {e}")))?;
        let config_seed = match top.get("config_seed") {
            None | Some(Value::Null) => None,
            Some(_) => Some(u64_field(top, "config_seed", "").map_err(&bad)?),
        };
        Ok(Reproducer {
            unit: u64_field(top, "unit", "").map_err(&bad)?,
            campaign_seed: u64_field(top, "campaign_seed", "").map_err(&bad)?,
            source: str_field(top, "config_source", "").map_err(&bad)?,
            config_seed,
            program_seed: u64_field(top, "program_seed", "").map_err(&bad)?,
            case: Case {
                cfg,
                program,
                timing,
                stalls,
                plant,
            },
            mismatch: Mismatch { kind, detail },
        })
    }
}

fn object<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a Map<String, Value>, String> {
    m.get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| format!("no \"{key}\" object"))
}

fn u64_field(m: &Map<String, Value>, key: &str, path: &str) -> Result<u64, String> {
    m.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("\"{path}{key}\" is missing or not a whole number"))
}

fn u32_field(m: &Map<String, Value>, key: &str, path: &str) -> Result<u32, String> {
    let v = u64_field(m, key, path)?;
    u32::try_from(v).map_err(|_| format!("\"{path}{key}\" is {v}, too large"))
}

fn str_field(m: &Map<String, Value>, key: &str, path: &str) -> Result<String, String> {
    m.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("\"{path}{key}\" is missing or not a string"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("odd length {} of hexadecimal digits", text.len()));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("not hexadecimal at character {i}"))
        })
        .collect()
}
