//! `vta disasm`: print a `.vtab` container, a raw instruction stream or a raw micro-op stream
//! as assembly text or as VTA-named JSON.

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use isa::asm::{print_listing, print_program, print_uops};
use isa::{container, Codec, HwConfig, Insn, StreamError};

#[derive(Args)]
pub struct DisasmArgs {
    /// A .vtab container, or a raw instruction stream (a raw micro-op stream with --uops)
    input: PathBuf,
    /// Config of a raw stream [default: default]; a container must match it
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    /// Print one JSON object per instruction (micro-op) per line, VTA's field names
    #[arg(long)]
    json: bool,
    /// INPUT is a raw micro-op stream (4 bytes each)
    #[arg(long)]
    uops: bool,
}

pub fn run(a: DisasmArgs) -> Result<String> {
    let bytes = super::read_input(&a.input)?;
    let name = a.input.display().to_string();
    let is_container = container::is_container(&bytes);
    let hint = container::other_file_hint(&bytes);
    if !is_container && !hint.is_empty() {
        bail!("{name}: not a program or a raw stream{hint}");
    }
    if a.uops {
        if is_container {
            bail!("{name}: is a program container, not a raw micro-op stream; drop --uops");
        }
        let cfg = super::load_config(a.config.as_deref())?;
        let uops = Codec::new(&cfg)
            .decode_uop_stream(&bytes)
            .with_context(|| name.clone())?;
        return Ok(if a.json {
            let codec = Codec::new(&cfg);
            uops.iter()
                .map(|u| codec.uop_to_json(u).to_string() + "\n")
                .collect()
        } else {
            print_uops(&cfg, &uops)
        });
    }
    if is_container {
        let program = match &a.config {
            Some(spec) => {
                let cfg = super::load_config(Some(spec))?;
                container::read_for(&bytes, &cfg)
            }
            None => container::read(&bytes),
        }
        .with_context(|| name.clone())?;
        return if a.json {
            json_lines(&program.config, &program.insns)
        } else {
            Ok(print_program(&program))
        };
    }
    let cfg = super::load_config(a.config.as_deref())?;
    let codec = Codec::new(&cfg);
    let listed = codec
        .list_stream(&bytes)
        .map_err(|e| match e {
            StreamError::Length { len, .. } if len % 4 == 0 => {
                anyhow::anyhow!("{e} (if it is a micro-op stream, use --uops)")
            }
            e => e.into(),
        })
        .with_context(|| format!("{name} (raw instruction stream, config {cfg})"))?;
    // A listing shows what the bytes say, valid or not; the count goes to stderr so that
    // the listing itself stays clean (`vta sim` refuses such a stream).
    let invalid = listed.iter().filter(|l| l.problem.is_some()).count();
    if invalid > 0 {
        eprintln!(
            "warning: {name}: {invalid} of {} instructions are invalid under config {cfg} \
             (marked `invalid:`); `vta sim` refuses to run the stream",
            listed.len()
        );
    }
    if !a.json {
        return Ok(print_listing(&listed));
    }
    let mut out = String::new();
    for l in &listed {
        let mut v = codec.word_to_vta_json(&l.word);
        if let (Some(e), Some(obj)) = (&l.problem, v.as_object_mut()) {
            obj.insert("invalid".into(), e.to_string().into());
        }
        writeln!(out, "{v}")?;
    }
    Ok(out)
}

fn json_lines(cfg: &HwConfig, insns: &[Insn]) -> Result<String> {
    let codec = Codec::new(cfg);
    let mut out = String::new();
    for (i, insn) in insns.iter().enumerate() {
        let v = codec
            .to_vta_json(insn)
            .with_context(|| format!("instruction {i}"))?;
        writeln!(out, "{v}")?;
    }
    Ok(out)
}
