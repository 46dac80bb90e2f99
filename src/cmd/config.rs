//! `vta config`: show a config with its derived parameters, and list the presets.

use anyhow::Result;
use clap::{Args, Subcommand};
use isa::PRESETS;
use serde_json::{Map, Value};

#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Show a config and every parameter derived from it
    Show(ShowArgs),
    /// List the built-in presets
    Presets,
}

#[derive(Args)]
pub struct ShowArgs {
    #[arg(long, value_name = "FILE|PRESET", help = super::CONFIG_HELP)]
    config: Option<String>,
    /// Print the parameters as one JSON object
    #[arg(long)]
    json: bool,
    /// Print the config as a native JSON config file (to start a custom one from)
    #[arg(long, conflicts_with = "json")]
    native: bool,
}

pub fn run(cmd: ConfigCmd) -> Result<String> {
    match cmd {
        ConfigCmd::Show(a) => show(a),
        ConfigCmd::Presets => Ok(presets()),
    }
}

fn show(a: ShowArgs) -> Result<String> {
    let cfg = super::load_config(a.config.as_deref())?;
    if a.native {
        return Ok(cfg.to_json() + "\n");
    }
    let params = cfg.parameters();
    if a.json {
        let obj: Map<String, Value> = params
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        return Ok(serde_json::to_string_pretty(&Value::Object(obj))? + "\n");
    }
    let rows: Vec<(&str, String)> = params
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (*k, v)
        })
        .collect();
    let source = match a.config.as_deref() {
        None => "preset default".to_string(),
        Some(s) if std::path::Path::new(s).exists() => format!("file {s}"),
        Some(s) => format!("preset {s}"),
    };
    let mut out = format!("{} ({source})\n", cfg.config_string());
    out += &table(&rows);
    Ok(out)
}

fn presets() -> String {
    let rows: Vec<(&str, String)> = PRESETS
        .iter()
        .map(|(name, desc, _)| (*name, desc.to_string()))
        .collect();
    table(&rows)
}

/// Two left-aligned columns, the first padded to its widest entry.
fn table(rows: &[(&str, String)]) -> String {
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<w$}  {v}\n"))
        .collect()
}
