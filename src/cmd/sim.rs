//! `vta sim`: run a program on a backend, save its outputs as `.npy`, print the counters.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use drivers::{run_program, Device, FsimDevice, RunTimeout};
use isa::asm::{parse_program, AsmContext};
use isa::{container, npy, DType, Program};

#[derive(Clone, Copy, ValueEnum)]
pub enum Backend {
    /// The functional simulator: bit-exact and token-checked, no timing
    Fsim,
}

#[derive(Args)]
pub struct SimArgs {
    /// Program: a .vtab container (from `vta asm`) or assembly source
    program: PathBuf,
    /// Backend to run on
    #[arg(long, value_enum, default_value = "fsim")]
    backend: Backend,
    /// Run on this config (JSON file or preset) instead of the program's own; the ISA must match
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    /// Replace an input buffer's contents: NAME=FILE.npy (dtype and shape must match)
    #[arg(long = "input", short = 'i', value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Write every output buffer to DIR/NAME.npy
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Stop a run after this many simulator steps (instructions + micro-ops)
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
}

/// Loads a container or assembles source text, per the file's first bytes.
fn load_program(path: &Path, config: Option<isa::HwConfig>) -> Result<Program> {
    let bytes = super::read_input(path)?;
    if container::is_container(&bytes) {
        let p = match &config {
            Some(cfg) => container::read_for(&bytes, cfg),
            None => container::read(&bytes),
        };
        return p.with_context(|| format!("{}: cannot load the program", path.display()));
    }
    let src = String::from_utf8(bytes).map_err(|_| {
        anyhow!(
            "{}: neither a .vtab container nor assembly text",
            path.display()
        )
    })?;
    let base_dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let ctx = AsmContext {
        file_name: path.display().to_string(),
        base_dir,
        config,
    };
    Ok(parse_program(&src, &ctx)?)
}

/// Reads `NAME=FILE.npy` and checks it against the program's input segment.
fn load_input(p: &Program, spec: &str) -> Result<(String, Vec<u8>)> {
    let (name, file) = spec
        .split_once('=')
        .ok_or_else(|| anyhow!("--input {spec}: expected NAME=FILE.npy"))?;
    let seg = p.segment(name).ok_or_else(|| {
        let names: Vec<&str> = p
            .segments
            .iter()
            .filter(|s| s.role.input)
            .map(|s| s.name.as_str())
            .collect();
        anyhow!(
            "--input {name}: the program has no buffer '{name}' (inputs: {})",
            names.join(", ")
        )
    })?;
    if !seg.role.input {
        bail!("--input {name}: buffer '{name}' is not declared as an input");
    }
    let arr = npy::read_file(Path::new(file))?;
    if arr.elem.to_dtype() != Some(seg.dtype) || arr.shape != seg.shape {
        bail!(
            "--input {name}: {file} holds {} {:?}, but buffer '{name}' is {} {:?}",
            arr.elem.descr(),
            arr.shape,
            seg.dtype.name(),
            seg.shape
        );
    }
    Ok((name.to_string(), arr.data))
}

/// Up to 16 values of an output, for a quick look without `--out`.
fn preview(dtype: DType, data: &[u8]) -> String {
    let n = data.len() / dtype.size();
    let shown: Vec<String> = (0..n.min(16))
        .map(|i| {
            let b = &data[i * dtype.size()..(i + 1) * dtype.size()];
            match dtype {
                DType::I8 => (b[0] as i8).to_string(),
                DType::U8 => b[0].to_string(),
                DType::I16 => i16::from_le_bytes([b[0], b[1]]).to_string(),
                DType::I32 => i32::from_le_bytes(b.try_into().expect("4 bytes")).to_string(),
                DType::U32 | DType::Uop => {
                    u32::from_le_bytes(b.try_into().expect("4 bytes")).to_string()
                }
            }
        })
        .collect();
    format!(
        "[{}{}]",
        shown.join(", "),
        if n > 16 { ", ..." } else { "" }
    )
}

pub fn run(a: SimArgs) -> Result<String> {
    let config = a
        .config
        .as_deref()
        .map(|s| super::load_config(Some(s)))
        .transpose()?;
    let program = load_program(&a.program, config.clone())?;
    let inputs = a
        .inputs
        .iter()
        .map(|s| load_input(&program, s))
        .collect::<Result<Vec<_>>>()?;
    let cfg = config.unwrap_or_else(|| program.config.clone());
    let mut dev: Box<dyn Device> = match a.backend {
        Backend::Fsim => Box::new(FsimDevice::new(&cfg)),
    };
    let timeout = RunTimeout {
        wall: None,
        work: a.max_steps,
    };
    let run = run_program(dev.as_mut(), &program, &inputs, timeout)
        .with_context(|| format!("{}: run failed on {}", a.program.display(), dev.name()))?;

    let mut text = String::new();
    writeln!(
        text,
        "{}: {} instructions on {} ({}), {:.3} s",
        a.program.display(),
        program.insns.len(),
        run.report.backend,
        cfg.config_string(),
        run.report.wall_time.as_secs_f64()
    )?;
    for (name, data) in &run.outputs {
        let seg = program.segment(name).expect("outputs are segments");
        match &a.out {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                let path = dir.join(format!("{name}.npy"));
                npy::write_file(&path, npy::elem_of(seg.dtype), &seg.shape, data)?;
                writeln!(
                    text,
                    "output {name} {} {:?} -> {}",
                    seg.dtype.name(),
                    seg.shape,
                    path.display()
                )?;
            }
            None => writeln!(
                text,
                "output {name} {} {:?} = {}",
                seg.dtype.name(),
                seg.shape,
                preview(seg.dtype, data)
            )?,
        }
    }
    writeln!(text, "counters:")?;
    let width = run
        .report
        .counters
        .iter()
        .chain(&run.report.extras)
        .map(|c| c.0.len())
        .max()
        .unwrap_or(0);
    for (name, v) in run.report.counters.iter().chain(&run.report.extras) {
        writeln!(text, "  {name:<width$}  {v}")?;
    }
    Ok(text)
}
