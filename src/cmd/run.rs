//! `vta run`: run a compiled model on a backend, with the model's own input and output
//! tensors, a per-layer breakdown and (`--check`) a layer-by-layer comparison with the
//! integer reference executor.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use compiler::graph::Tensor;
use drivers::Device;
use isa::npy;
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::io as runtime;
use vta_runtime::model::Model;
use vta_sim::FsimDevice;

pub use super::sim::{Backend, RtlArgs, BACKEND_HELP};

/// A device of `backend` for `cfg` (a remote one must implement its ISA); `checking` makes
/// the functional simulator check every run for token races.
pub fn device(
    backend: &Backend,
    cfg: &isa::HwConfig,
    rtl: &RtlArgs,
    checking: bool,
) -> Result<Box<dyn Device>> {
    Ok(match backend {
        Backend::Fsim if checking => Box::new(FsimDevice::checking_races(cfg)),
        Backend::Fsim => Box::new(FsimDevice::new(cfg)),
        Backend::Rtl => Box::new(rtl.device(cfg, false)?),
        Backend::Remote(addr) => Box::new(super::sim::connect_remote(addr, cfg)?),
        Backend::Serial { port, baud } => super::soc::open_serial(port, *baud, cfg)?,
        Backend::SocSim => Box::new(super::soc::open_sim(cfg)?),
    })
}

#[derive(Args)]
pub struct RunArgs {
    /// Compiled model (from `vta compile`)
    model: PathBuf,
    /// Input tensor (.npy, the model input's type and shape; several samples may be stacked
    /// along the first axis). Repeat for each model input, in order, or give NAME=FILE.npy
    #[arg(long = "input", short = 'i', value_name = "X.npy", required = true)]
    inputs: Vec<String>,
    /// Write the model's output to this .npy file (repeat for further outputs, in order)
    #[arg(long = "output", short = 'o', value_name = "Y.npy")]
    outputs: Vec<PathBuf>,
    #[arg(long, default_value = "fsim", value_name = "BACKEND", help = BACKEND_HELP)]
    backend: Backend,
    #[command(flatten)]
    rtl: RtlArgs,
    /// Run on this config (JSON file or preset) instead of the model's own; the ISA must match
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    /// Also run the integer reference executor and compare every layer's output with it;
    /// fails at the first mismatching layer and element. On fsim, also check that the
    /// dependency tokens order every conflicting pair of memory accesses (no races)
    #[arg(long)]
    check: bool,
    #[arg(long, value_name = "SIZE", value_parser = vta_runtime::budget::parse_size, help = super::MEMORY_BUDGET_HELP)]
    memory_budget: Option<u64>,
    /// Also write every tensor the model computes for the first sample (the integer
    /// reference's values, which --check proves the device's) as DIR/value-N.npy, with
    /// DIR/values.json naming each (ONNX name, type, shape, scale and zero point, producing
    /// step): what scripts/ort-compare.py compares with onnxruntime layer by layer
    #[arg(long, value_name = "DIR")]
    dump_values: Option<PathBuf>,
    /// With --dump-values: put the tensors listed in DIR/values.json (entries with `value`,
    /// the plan value's number as --dump-values writes it, optionally its `name`, and the
    /// `file` holding it) in place of those the model computes, before later steps read
    /// them; each step then works on the given inputs, so its dumped output shows only its
    /// own departure (scripts/ort-compare.py --per-layer gives it onnxruntime's tensors)
    #[arg(long, value_name = "DIR", requires = "dump_values")]
    replace_values: Option<PathBuf>,
    /// Print the report as JSON (model, per-step figures, outputs, check) instead of text
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pool: super::pool::PoolArgs,
}

/// Reads the inputs, by position or as NAME=FILE, in the model's input order.
pub fn read_inputs(m: &Model, specs: &[String]) -> Result<Vec<Tensor>> {
    let names: Vec<&str> = m
        .plan
        .inputs
        .iter()
        .map(|&v| m.plan.values[v].name.as_str())
        .collect();
    let mut slots: Vec<Option<Tensor>> = vec![None; names.len()];
    let mut next = 0;
    for spec in specs {
        let (slot, file) = match spec.split_once('=') {
            Some((name, file)) if names.contains(&name) => {
                (names.iter().position(|n| *n == name).expect("found"), file)
            }
            Some((name, _)) if !Path::new(spec).exists() => {
                bail!(
                    "--input {spec}: the model has no input named '{name}'; its inputs are {}",
                    m.input_list()
                );
            }
            _ => {
                while next < slots.len() && slots[next].is_some() {
                    next += 1;
                }
                if next == slots.len() {
                    bail!(
                        "--input {spec}: the model has {} input(s) ({}), all already given",
                        names.len(),
                        m.input_list()
                    );
                }
                (next, spec.as_str())
            }
        };
        if slots[slot].is_some() {
            bail!("--input {spec}: input '{}' is given twice", names[slot]);
        }
        let arr = npy::read_file(Path::new(file))?;
        let t = runtime::tensor_from_npy(&arr).map_err(|e| anyhow!("{file}: {e}"))?;
        slots[slot] = Some(t);
    }
    let missing: Vec<String> = slots
        .iter()
        .zip(&m.plan.inputs)
        .filter(|(s, _)| s.is_none())
        .map(|(_, &v)| format!("'{}' {}", m.plan.values[v].name, m.plan.values[v].fact))
        .collect();
    if !missing.is_empty() {
        bail!("missing --input for {}", missing.join(", "));
    }
    Ok(slots.into_iter().map(|s| s.expect("checked")).collect())
}

/// Writes every computed (non-constant) value of `model` on `inputs` into `dir`:
/// `value-N.npy` per plan value N and `values.json` describing them.
fn dump_values(
    model: &Model,
    inputs: &[Tensor],
    dir: &Path,
    replacements: &HashMap<usize, Tensor>,
) -> Result<()> {
    let trace = vta_runtime::reference::run_plan_replacing(&model.plan, inputs, replacements)
        .map_err(|e| anyhow!("the integer reference failed: {e}"))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let producer = |v: usize| {
        model
            .plan
            .steps
            .iter()
            .find(|s| s.outputs.contains(&v))
            .map(|s| s.name.clone())
    };
    let mut index = Vec::new();
    for (v, value) in model.plan.values.iter().enumerate() {
        let Some(t) = trace.get(v).filter(|_| value.constant.is_none()) else {
            continue;
        };
        let file = format!("value-{v}.npy");
        let (elem, shape, data) = runtime::tensor_to_npy(t);
        npy::write_file(&dir.join(&file), elem, &shape, &data)?;
        index.push(serde_json::json!({
            "value": v,
            "name": value.name,
            "type": value.fact.to_string(),
            "scale": value.quant.as_ref().map(|q| q.scale),
            "zero_point": value.quant.as_ref().map(|q| q.zero_point),
            "producer": producer(v),
            "file": file,
        }));
    }
    let path = dir.join("values.json");
    std::fs::write(&path, super::json::text(&serde_json::Value::from(index)))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Reads the tensors `--replace-values DIR` names (DIR/values.json, as [`dump_values`]
/// writes it), by plan value, checked against the plan's values.
fn read_replacements(model: &Model, dir: &Path) -> Result<HashMap<usize, Tensor>> {
    let index_path = dir.join("values.json");
    let text = std::fs::read_to_string(&index_path)
        .with_context(|| format!("--replace-values: cannot read {}", index_path.display()))?;
    let index: Vec<serde_json::Value> = serde_json::from_str(&text).with_context(|| {
        format!(
            "--replace-values: {} is not a JSON list of {{\"value\", \"file\"}} entries",
            index_path.display()
        )
    })?;
    let mut out = HashMap::new();
    for (k, e) in index.iter().enumerate() {
        let at = || format!("--replace-values: {} entry {k}", index_path.display());
        let (Some(v), Some(file)) = (e["value"].as_u64(), e["file"].as_str()) else {
            bail!("{}: needs a number `value` and a string `file`", at());
        };
        let v = v as usize;
        let Some(value) = model.plan.values.get(v) else {
            bail!(
                "{}: the model has values 0..{}, not {v} (was DIR written for another model?)",
                at(),
                model.plan.values.len()
            );
        };
        if let Some(name) = e["name"].as_str().filter(|n| *n != value.name) {
            bail!(
                "{}: value {v} is '{}' in this model, not '{name}' (was DIR written for \
                 another model?)",
                at(),
                value.name
            );
        }
        if value.constant.is_some() || model.plan.inputs.contains(&v) {
            bail!(
                "{}: value {v} '{}' is a constant or an input of the model, which no step \
                 computes (give inputs with --input)",
                at(),
                value.name
            );
        }
        let path = dir.join(file);
        let arr = npy::read_file(&path)?;
        let t = runtime::tensor_from_npy(&arr).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        if t.fact() != value.fact {
            bail!(
                "{}: {} is {}, value {v} '{}' is {}",
                at(),
                path.display(),
                t.fact(),
                value.name,
                value.fact
            );
        }
        out.insert(v, t);
    }
    Ok(out)
}

/// `top-5: 3 (0.98), ...` for an output that is one vector of scores.
fn top5(t: &Tensor) -> Option<String> {
    let Tensor::F32(a) = t else { return None };
    let s = a.shape();
    let is_vector = match s {
        [n] => *n >= 2,
        [1, n] => *n >= 2,
        _ => false,
    };
    if !is_vector {
        return None;
    }
    let mut v: Vec<(usize, f32)> = a.iter().copied().enumerate().collect();
    v.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    let shown: Vec<String> = v
        .iter()
        .take(5)
        .map(|(i, x)| format!("{i} ({x:.4})"))
        .collect();
    Some(format!("top-5: {}", shown.join(", ")))
}

pub use vta_runtime::samples::{run_document, Samples};

/// Runs `model` on each sample in turn; with `check`, compares every layer with the integer
/// reference and fails at the first mismatch.
pub fn run_samples(
    model: &Model,
    dev: &mut dyn Device,
    runs: &[Vec<Tensor>],
    check: bool,
    file: &str,
) -> Result<Samples> {
    let name = dev.name().to_string();
    let mut keep_going = || true;
    let mut observer = ProgressObserver::new(model, &name, runs.len(), check, &mut keep_going);
    Ok(vta_runtime::samples::run_samples(
        model,
        dev,
        runs,
        check,
        file,
        &mut observer,
    )?)
}

/// The progress bar of a run on samples (on a terminal), and when to stop: what `vta run`
/// and the Python package's runs observe the runtime's loop ([`vta_runtime::samples`]) with.
pub struct ProgressObserver<'a> {
    progress: super::progress::Progress,
    keep_going: &'a mut dyn FnMut() -> bool,
}

impl<'a> ProgressObserver<'a> {
    /// For `runs` samples of `model` on `device`, checked or not; `keep_going` is asked after
    /// every step, and `false` stops the run with the runtime's `Interrupted` error.
    pub fn new(
        model: &Model,
        device: &str,
        runs: usize,
        check: bool,
        keep_going: &'a mut dyn FnMut() -> bool,
    ) -> Self {
        let passes = if check { 2 } else { 1 };
        let progress = super::progress::Progress::bar(
            &format!("{} on {device}", model.source),
            runs as u64 * model.plan.steps.len() as u64 * passes,
        );
        ProgressObserver {
            progress,
            keep_going,
        }
    }
}

impl vta_runtime::samples::SampleObserver for ProgressObserver<'_> {
    fn message(&mut self, text: &str) {
        self.progress.message(text);
    }
    fn step(&mut self) -> bool {
        self.progress.inc();
        (self.keep_going)()
    }
}

pub fn run(a: RunArgs) -> Result<String> {
    // RTL options are for an RTL device, given as --backend or in --devices.
    let rtl_in_pool = a
        .pool
        .devices
        .as_deref()
        .and_then(|s| super::pool::parse_devices(s).ok())
        .is_some_and(|d| d.iter().any(|d| d.is_rtl()));
    a.rtl.refuse_unless_rtl(
        if rtl_in_pool {
            &Backend::Rtl
        } else {
            &a.backend
        },
        &[],
    )?;
    let file = a.model.display().to_string();
    let bytes = super::read_input(&a.model)?;
    let select = a
        .config
        .as_deref()
        .map(|s| super::load_config(Some(s)))
        .transpose()?;
    let budget = a.memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET);
    let model = Model::read(&bytes, &file, select.as_ref(), budget)?;
    let inputs = read_inputs(&model, &a.inputs)?;
    let runs = model
        .split_samples(inputs)
        .map_err(|e| anyhow!("{file}: {e}"))?;
    if a.outputs.len() > model.plan.outputs.len() {
        bail!(
            "{} --output files given, but the model has {} output(s)",
            a.outputs.len(),
            model.plan.outputs.len()
        );
    }
    if let Some(dir) = &a.dump_values {
        let replacements = match &a.replace_values {
            Some(from) => read_replacements(&model, from)?,
            None => HashMap::new(),
        };
        dump_values(&model, &runs[0], dir, &replacements)?;
    }
    if a.pool.given() {
        return run_on_pool(&a, &model, &runs, &file);
    }
    let mut dev = device(&a.backend, &model.config, &a.rtl, a.check)?;

    let Samples {
        outputs,
        total,
        checked,
    } = run_samples(&model, dev.as_mut(), &runs, a.check, &file)?;

    let mut text = String::new();
    let (na, nc) = model.counts();
    writeln!(
        text,
        "{file}: {} for {}, {} steps ({na} on the accelerator, {nc} on the CPU), run on {}{}",
        model.source,
        model.config.config_string(),
        model.plan.steps.len(),
        total.backend,
        if runs.len() > 1 {
            format!(", {} samples", runs.len())
        } else {
            String::new()
        }
    )?;
    let (written, json_outputs) = write_outputs(&a, &model, &outputs)?;
    text.push_str(&written);
    if a.json {
        return Ok(super::json::text(&run_document(
            &file,
            &model,
            json_outputs,
            &total,
            checked,
        )));
    }
    writeln!(text, "per layer:")?;
    text.push_str(&total.table());
    if let Some((layers, accel, elements)) = checked {
        let on = if runs.len() > 1 {
            format!(" on all {} samples", runs.len())
        } else {
            String::new()
        };
        writeln!(
            text,
            "check: bit-exact{on}: {layers} layers ({accel} on the accelerator), {elements} elements compared with the integer reference{}",
            race_free(&a.backend)
        )?;
    }
    Ok(text)
}

/// Writes the outputs (`--output`), one per model output, samples stacked; returns the
/// lines saying where each went, and their JSON.
fn write_outputs(
    a: &RunArgs,
    model: &Model,
    outputs: &[Vec<Tensor>],
) -> Result<(String, Vec<serde_json::Value>)> {
    let mut text = String::new();
    let mut json = Vec::new();
    for (k, &v) in model.plan.outputs.iter().enumerate() {
        let t = if outputs[k].len() == 1 {
            outputs[k][0].clone()
        } else {
            runtime::concat_samples(&outputs[k]).map_err(|e| anyhow!("output {k}: {e}"))?
        };
        let pv = &model.plan.values[v];
        let single = outputs[k].len() == 1;
        json.push(serde_json::json!({
            "name": pv.name,
            "type": t.fact().to_string(),
            "file": a.outputs.get(k).map(|p| p.display().to_string()),
            "top5": if single { top5(&t) } else { None },
        }));
        match a.outputs.get(k) {
            Some(path) => {
                let (elem, shape, data) = runtime::tensor_to_npy(&t);
                npy::write_file(path, elem, &shape, &data)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                writeln!(
                    text,
                    "output '{}' {} -> {}",
                    pv.name,
                    t.fact(),
                    path.display()
                )?;
            }
            None => writeln!(text, "output '{}' {}", pv.name, t.fact())?,
        }
        if single {
            if let Some(s) = top5(&t) {
                writeln!(text, "  {s}")?;
            }
        }
    }
    Ok((text, json))
}

/// `vta run` with pool options: every sample through the pool executor
/// (`vta_runtime::exec`), with its report; `--check` compares the outputs with the serial
/// run's.
fn run_on_pool(a: &RunArgs, model: &Model, runs: &[Vec<Tensor>], file: &str) -> Result<String> {
    let pr = super::pool::run_pool(model, runs, &a.pool, &a.backend, &a.rtl, file)?;
    // Per model output, one tensor per sample.
    let mut outputs: Vec<Vec<Tensor>> = vec![Vec::new(); model.plan.outputs.len()];
    for sample in &pr.outputs {
        for (o, t) in outputs.iter_mut().zip(sample) {
            o.push(t.clone());
        }
    }
    if a.check {
        super::pool::check_against_serial(model, runs, &pr.outputs)
            .with_context(|| file.to_string())?;
    }
    let (out_text, out_json) = write_outputs(a, model, &outputs)?;
    let (na, nc) = model.counts();
    if a.json {
        return Ok(super::json::text(&serde_json::json!({
            "model": file,
            "source": model.source,
            "config": model.config.config_string(),
            "steps": model.plan.steps.len(),
            "accel_steps": na,
            "cpu_steps": nc,
            "outputs": out_json,
            "pool": pr.json,
            "check": a.check.then(|| serde_json::json!({"bit_identical_to_serial": true})),
        })));
    }
    let mut text = String::new();
    writeln!(
        text,
        "{file}: {} for {}, {} steps ({na} on the accelerator, {nc} on the CPU){}",
        model.source,
        model.config.config_string(),
        model.plan.steps.len(),
        if runs.len() > 1 {
            format!(", {} samples", runs.len())
        } else {
            String::new()
        }
    )?;
    text.push_str(&out_text);
    text.push_str(&pr.text);
    if a.check {
        writeln!(
            text,
            "check: the outputs of all {} sample(s) are bit-identical to the serial run's",
            runs.len()
        )?;
    }
    Ok(text)
}

/// What a check on `backend` adds: on fsim, every launch was checked for token races.
pub fn race_free(backend: &Backend) -> &'static str {
    match backend {
        Backend::Fsim => "; no token races (every conflicting access ordered by tokens)",
        _ => "",
    }
}
