//! What a run of a model reports: per step where it ran, per launch the device's counters and
//! the bytes copied between host and device, the device memory the loaded model holds, and
//! the text table `vta run` prints.

use std::fmt::Write as _;
use std::time::Duration;

use drivers::RunReport;

use crate::model::Place;
use crate::tensor::Tensor;

/// Device memory a loaded model holds ([`crate::resident::Resident::memory`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Weights, constants, micro-ops and instruction streams, uploaded once at load.
    pub constants: u64,
    /// The activation arena, placed by liveness.
    pub arena: u64,
    /// Bytes copied to the device at load.
    pub loaded: u64,
}

impl DeviceMemory {
    pub fn total(&self) -> u64 {
        self.constants + self.arena
    }
}

/// One step of a run.
#[derive(Debug, Clone)]
pub struct LayerRun {
    pub step: usize,
    pub name: String,
    /// [`crate::plan::Step::kind_name`].
    pub kind: String,
    pub place: Place,
    /// The launch that ran it (accelerator steps): its figures are in [`RunResult::launches`].
    pub launch: Option<usize>,
    /// Why an accelerator layer ran on the CPU (the back end refused it).
    pub note: Option<String>,
    /// Host time of a CPU step (zero for accelerator steps: their launch has the time).
    pub wall: Duration,
    /// Runs summed into this entry.
    pub samples: usize,
}

/// One launch of a run: a device program running consecutive accelerator steps.
#[derive(Debug, Clone)]
pub struct LaunchRun {
    /// Index in [`crate::Model::launches`].
    pub launch: usize,
    /// The plan steps it ran.
    pub steps: Vec<usize>,
    /// Host time: writing its inputs, the device run, reading back its outputs.
    pub wall: Duration,
    /// The device's report, with the bytes copied each way ([`drivers::HOST_TO_DEVICE`],
    /// [`drivers::DEVICE_TO_HOST`]) among its extras.
    pub report: RunReport,
    /// Runs summed into this entry.
    pub samples: usize,
}

impl LaunchRun {
    /// A device counter or extra.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.report.get(name)
    }

    /// Bytes the device moved between DRAM and its scratchpads (all loads and stores).
    pub fn dram_bytes(&self) -> u64 {
        [
            "inp_load_bytes",
            "wgt_load_bytes",
            "acc_load_bytes",
            "uop_load_bytes",
            "out_store_bytes",
        ]
        .iter()
        .filter_map(|n| self.report.get(n))
        .sum()
    }

    /// `first-last` steps it ran.
    pub fn step_range(&self) -> String {
        match (self.steps.first(), self.steps.last()) {
            (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
            (Some(a), _) => a.to_string(),
            _ => "-".into(),
        }
    }

    /// Adds another run of the same launch (counters and times summed).
    fn accumulate(&mut self, other: &LaunchRun) {
        self.wall += other.wall;
        self.samples += other.samples;
        let (a, b) = (&mut self.report, &other.report);
        a.wall_time += b.wall_time;
        for (n, v) in a.counters.iter_mut().chain(a.extras.iter_mut()) {
            *v += b.get(n).unwrap_or(0);
        }
    }
}

/// The result of an inference ([`crate::resident::Resident::run`], [`crate::Model::run`]).
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The model's outputs, in ONNX order, with their ONNX types.
    pub outputs: Vec<Tensor>,
    /// Every plan value the host holds after the run, by [`crate::plan::ValueId`]: inputs,
    /// constants, CPU steps' outputs and what launches read back (every step's output when
    /// the model was loaded keeping intermediates, as [`crate::Model::check`] needs).
    pub values: Vec<Option<Tensor>>,
    /// One per plan step, in order.
    pub layers: Vec<LayerRun>,
    /// One per launch, in order.
    pub launches: Vec<LaunchRun>,
    pub wall: Duration,
    /// The device's name.
    pub backend: String,
    /// Runs summed into this result ([`RunResult::accumulate`]).
    pub samples: usize,
    /// Device memory the loaded model held.
    pub memory: DeviceMemory,
}

impl RunResult {
    /// Adds the figures of another run of the same model (outputs and values keep this
    /// run's).
    pub fn accumulate(&mut self, other: &RunResult) {
        self.wall += other.wall;
        self.samples += other.samples;
        for (a, b) in self.layers.iter_mut().zip(&other.layers) {
            a.wall += b.wall;
            a.samples += b.samples;
        }
        for (a, b) in self.launches.iter_mut().zip(&other.launches) {
            a.accumulate(b);
        }
        self.memory.arena = self.memory.arena.max(other.memory.arena);
        self.memory.constants = self.memory.constants.max(other.memory.constants);
    }

    /// A launch figure summed over launches and samples.
    pub fn total(&self, name: &str) -> u64 {
        self.launches.iter().filter_map(|l| l.get(name)).sum()
    }

    /// Bytes copied from host to device memory per inference (model inputs and CPU-computed
    /// tensors a launch reads; weights and programs are copied once, at load).
    pub fn host_to_device_bytes(&self) -> u64 {
        self.total(drivers::HOST_TO_DEVICE) / self.samples.max(1) as u64
    }

    /// Bytes copied from device to host memory per inference.
    pub fn device_to_host_bytes(&self) -> u64 {
        self.total(drivers::DEVICE_TO_HOST) / self.samples.max(1) as u64
    }

    /// The per-step table, the per-launch table and the totals.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let launch_name = |l: Option<usize>| l.map_or(String::new(), |l| format!(" L{l}"));
        let rows: Vec<Vec<String>> = self
            .layers
            .iter()
            .map(|l| {
                vec![
                    l.step.to_string(),
                    l.name.clone(),
                    l.kind.clone(),
                    if l.note.is_some() {
                        "cpu*".to_string()
                    } else {
                        format!("{}{}", l.place, launch_name(l.launch))
                    },
                    match l.place {
                        Place::Cpu => format!("{:.3}", l.wall.as_secs_f64() * 1e3),
                        Place::Accelerator => "-".into(),
                    },
                ]
            })
            .collect();
        let head = ["step", "name", "kind", "where", "time ms"];
        let _ = write!(
            s,
            "{}",
            columns(&head, &rows, &[true, false, false, false, true])
        );

        let has_cycles = self.launches.iter().any(|l| l.get("cycles").is_some());
        let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let kib = |v: u64| format!("{:.1}", v as f64 / 1024.0);
        let mut head = vec![
            "launch",
            "steps",
            "time ms",
            "GEMM uops",
            "ALU uops",
            "DRAM KiB",
            "in KiB",
            "out KiB",
        ];
        if has_cycles {
            head.push("cycles");
        }
        let rows: Vec<Vec<String>> = self
            .launches
            .iter()
            .map(|l| {
                let mut r = vec![
                    format!("L{}", l.launch),
                    l.step_range(),
                    format!("{:.3}", l.wall.as_secs_f64() * 1e3),
                    opt(l.get("gemm_uops")),
                    opt(l.get("alu_uops")),
                    kib(l.dram_bytes()),
                    kib(l.get(drivers::HOST_TO_DEVICE).unwrap_or(0)),
                    kib(l.get(drivers::DEVICE_TO_HOST).unwrap_or(0)),
                ];
                if has_cycles {
                    r.push(opt(l.get("cycles")));
                }
                r
            })
            .collect();
        if !rows.is_empty() {
            let _ = writeln!(
                s,
                "launches (in/out: bytes the host copied to the device before and from it after):"
            );
            let _ = write!(
                s,
                "{}",
                columns(
                    &head,
                    &rows,
                    &[false, false, true, true, true, true, true, true, true]
                )
            );
        }

        let (na, nc) = self.layers.iter().fold((0, 0), |(a, c), l| match l.place {
            Place::Accelerator => (a + 1, c),
            Place::Cpu => (a, c + 1),
        });
        let tc: Duration = self
            .layers
            .iter()
            .filter(|l| l.place == Place::Cpu)
            .map(|l| l.wall)
            .sum();
        let ta: Duration = self.launches.iter().map(|l| l.wall).sum();
        let dev_time: Duration = self.launches.iter().map(|l| l.report.wall_time).sum();
        let dram: u64 = self.launches.iter().map(|l| l.dram_bytes()).sum();
        let per = if self.samples > 1 {
            format!(" ({} runs summed)", self.samples)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "total{per}: {:.3} ms; {na} steps on the accelerator ({}) in {} launches {:.3} ms, of which the device run {:.3} ms; {nc} on the CPU {:.3} ms",
            self.wall.as_secs_f64() * 1e3,
            self.backend,
            self.launches.len(),
            ta.as_secs_f64() * 1e3,
            dev_time.as_secs_f64() * 1e3,
            tc.as_secs_f64() * 1e3,
        );
        let _ = writeln!(
            s,
            "device counters: {} GEMM uops ({} MACs), {} ALU uops, {:.1} KiB DRAM traffic (loads + stores), {} instructions{}",
            self.total("gemm_uops"),
            self.total("macs"),
            self.total("alu_uops"),
            dram as f64 / 1024.0,
            self.total("load_insns") + self.total("compute_insns") + self.total("store_insns"),
            if has_cycles {
                format!(", {} cycles", self.total("cycles"))
            } else {
                format!("; no cycle counts ({} is not cycle-accurate)", self.backend)
            }
        );
        let m = &self.memory;
        let _ = writeln!(
            s,
            "host-device traffic per inference: {} device launches, {:.1} KiB host -> device, \
             {:.1} KiB device -> host; device memory {:.1} KiB (weights, constants and \
             programs {:.1} KiB, copied once at load; activations {:.1} KiB, placed by liveness)",
            self.launches.len(),
            self.host_to_device_bytes() as f64 / 1024.0,
            self.device_to_host_bytes() as f64 / 1024.0,
            m.total() as f64 / 1024.0,
            m.constants as f64 / 1024.0,
            m.arena as f64 / 1024.0,
        );
        if self.layers.iter().any(|l| l.note.is_some()) {
            let _ = writeln!(s, "cpu*: an accelerator layer the back end refused (see `vta compile`), run on the CPU exactly");
        }
        s
    }
}

/// Aligned text columns (a header line, then one line per row, each indented by two spaces):
/// `right[i]` right-aligns column `i`. The tables of `vta run` and `vta compile` use it.
pub fn columns(head: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
    let w: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .max()
                .unwrap_or(0)
                .max(head[i].len())
        })
        .collect();
    let line = |r: &[&str]| {
        let mut line = String::from(" ");
        for i in 0..head.len() {
            if right[i] {
                let _ = write!(line, " {:>w$}", r[i], w = w[i]);
            } else {
                let _ = write!(line, " {:w$}", r[i], w = w[i]);
            }
        }
        line.trim_end().to_string() + "\n"
    };
    let mut s = line(head);
    for r in rows {
        let refs: Vec<&str> = r.iter().map(|x| x.as_str()).collect();
        s += &line(&refs);
    }
    s
}

/// Milliseconds of a duration, as the JSON reports give times.
pub fn json_ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Named counters as a JSON object, in their order.
pub fn json_counters<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> serde_json::Value {
    serde_json::Value::Object(
        pairs
            .into_iter()
            .map(|(n, v)| (n.to_string(), serde_json::Value::from(v)))
            .collect(),
    )
}

impl LayerRun {
    /// The step's row of [`RunResult::to_json`].
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "step": self.step,
            "name": self.name,
            "kind": self.kind,
            "place": self.place.to_string(),
            "launch": self.launch,
            "note": self.note,
            "host_ms": json_ms(self.wall),
        })
    }
}

impl LaunchRun {
    /// The launch's row of [`RunResult::to_json`]: times, the device's counters and extras,
    /// and the bytes it moved.
    pub fn to_json(&self) -> serde_json::Value {
        let r = &self.report;
        serde_json::json!({
            "launch": self.launch,
            "steps": self.steps,
            "host_ms": json_ms(self.wall),
            "device_ms": json_ms(r.wall_time),
            "counters": json_counters(r.counters.iter().map(|(n, v)| (n.as_str(), *v))),
            "extras": json_counters(r.extras.iter().map(|(n, v)| (n.as_str(), *v))),
            "dram_bytes": self.dram_bytes(),
        })
    }
}

impl RunResult {
    /// The per-step and per-launch breakdown of a run (summed over its samples) and its
    /// totals (host-device traffic per inference), as `vta run --json` prints it under `run`
    /// and the Python package returns it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "backend": self.backend,
            "samples": self.samples,
            "host_ms": json_ms(self.wall),
            "device_launches": self.launches.len(),
            "host_to_device_bytes": self.host_to_device_bytes(),
            "device_to_host_bytes": self.device_to_host_bytes(),
            "device_memory_bytes": {
                "total": self.memory.total(),
                "constants": self.memory.constants,
                "activations": self.memory.arena,
                "loaded": self.memory.loaded,
            },
            "steps": self.layers.iter().map(LayerRun::to_json).collect::<Vec<_>>(),
            "launches": self.launches.iter().map(LaunchRun::to_json).collect::<Vec<_>>(),
        })
    }
}
