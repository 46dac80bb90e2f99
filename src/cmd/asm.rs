//! `vta asm`: assemble a text program into a `.vtab` container.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use isa::asm::{parse_program, AsmContext};
use isa::container;

#[derive(Args)]
pub struct AsmArgs {
    /// Assembly source file (relative paths in it are resolved from its directory)
    input: PathBuf,
    /// Output container [default: INPUT with the extension .vtab]
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Config (JSON file or preset) to assemble for; the source's .config must match its ISA
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
}

pub fn run(a: AsmArgs) -> Result<String> {
    let config = a
        .config
        .as_deref()
        .map(|spec| super::load_config(Some(spec)))
        .transpose()?;
    let bytes = super::read_input(&a.input)?;
    let src = String::from_utf8(bytes)
        .map_err(|e| anyhow!("{}: not UTF-8 text ({e})", a.input.display()))?;
    let base_dir = match a.input.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let ctx = AsmContext {
        file_name: a.input.display().to_string(),
        base_dir,
        config,
    };
    let program = parse_program(&src, &ctx)?;
    let out = container::write(&program)
        .with_context(|| format!("{}: cannot build a program container", a.input.display()))?;
    let path = a.output.unwrap_or_else(|| a.input.with_extension("vtab"));
    std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(String::new())
}
