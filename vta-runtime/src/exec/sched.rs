//! Scheduling policies: which worker runs each task of the graph, decided before a run from
//! a cost model (`serial`, `pipeline`, `by-op`, `by-path`) or as each task becomes ready from
//! the live queues (`dynamic`); `auto` measures the others and keeps the fastest.
//!
//! Workers are numbered devices first (one per accelerator), then CPU workers. Launches run
//! only on devices, every other task only on CPU workers.

use std::fmt;
use std::str::FromStr;

use isa::Insn;

use crate::graph::{TaskGraph, TaskKind};
use crate::model::Model;

/// How the executor places and orders tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// One task at a time in plan order, one request at a time, launches on the first device
    /// and CPU steps on the first CPU worker: today's run, the fallback.
    Serial,
    /// Each request's tasks in plan order, but requests overlap: the launches cut into
    /// contiguous stages, one per device, the CPU steps likewise over the CPU workers, so
    /// stage k of frame i runs while stage k-1 of frame i+1 does.
    Pipeline,
    /// Static earliest-finish-time list scheduling (HEFT without insertion): tasks by
    /// decreasing upward rank, each on the worker where it would finish first. Requests in
    /// flight together take the same placement rotated over the workers of each kind.
    ByOp,
    /// As `by-op`, with each fork-to-join chain (a branch) placed on one worker as a unit,
    /// so only forks and joins cross workers.
    ByPath,
    /// The `by-op` rule at run time: each task, when ready, goes to the worker whose queue
    /// (with the measured time of its tasks) would finish it first.
    Dynamic,
    /// Measures the others on the first inputs and keeps the fastest (serial unless another
    /// is faster).
    Auto,
}

impl Policy {
    /// Every policy, `auto` last.
    pub const ALL: [Policy; 6] = [
        Policy::Serial,
        Policy::Pipeline,
        Policy::ByOp,
        Policy::ByPath,
        Policy::Dynamic,
        Policy::Auto,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Serial => "serial",
            Policy::Pipeline => "pipeline",
            Policy::ByOp => "by-op",
            Policy::ByPath => "by-path",
            Policy::Dynamic => "dynamic",
            Policy::Auto => "auto",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Policy, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown schedule '{s}': expected one of {}",
                    Policy::ALL.map(Policy::name).join(", ")
                )
            })
    }
}

/// A policy made concrete for one graph and pool.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub policy: Policy,
    /// Per task, its worker; empty for `dynamic` (chosen at run time).
    pub assign: Vec<usize>,
    /// Whether each request's tasks run one after another in task order.
    pub chain: bool,
    /// At most this many requests in flight (1 for serial).
    pub max_in_flight: Option<usize>,
    /// The makespan of one request the cost model predicts (seconds), for static policies.
    pub predicted: Option<f64>,
}

impl Schedule {
    /// The worker that runs task `task` of request `req`: the static placement, rotated by
    /// request over the workers of each kind for `by-op` and `by-path` (requests in flight
    /// together spread over the pool the same way); for `dynamic`, the eligible worker with
    /// the least `backlog` (seconds of work queued or running), the first on ties. The live
    /// executor and the device-time simulator both place tasks here.
    pub fn place(
        &self,
        graph: &TaskGraph,
        pool: Pool,
        task: usize,
        req: u64,
        backlog: &[f64],
    ) -> usize {
        let range = pool.eligible(graph.tasks[task].kind);
        if self.assign.is_empty() {
            return range
                .min_by(|&a, &b| backlog[a].total_cmp(&backlog[b]).then(a.cmp(&b)))
                .expect("the pool was checked to have every worker kind");
        }
        let a = self.assign[task];
        if matches!(self.policy, Policy::ByOp | Policy::ByPath) {
            let n = range.len() as u64;
            range.start + (((a - range.start) as u64 + req) % n) as usize
        } else {
            a
        }
    }

    /// The tasks that task `i` of a request unblocks when it finishes: its successors, and
    /// with `chain` the next task in order.
    pub fn next_of(&self, graph: &TaskGraph, i: usize) -> Vec<usize> {
        let mut n = graph.succs[i].clone();
        if self.chain && i + 1 < graph.len() && !n.contains(&(i + 1)) {
            n.push(i + 1);
        }
        n
    }

    /// Per task, how many tasks must finish before it may run (see [`Schedule::next_of`]).
    pub fn pending_counts(&self, graph: &TaskGraph) -> Vec<usize> {
        (0..graph.len())
            .map(|i| {
                let p = &graph.preds[i];
                p.len() + usize::from(self.chain && i > 0 && !p.contains(&(i - 1)))
            })
            .collect()
    }

    /// Requests running at once when the pool allows `in_flight`.
    pub fn cap(&self, in_flight: usize) -> usize {
        self.max_in_flight.unwrap_or(in_flight).min(in_flight)
    }
}

/// The policy `auto` keeps from each policy's time for the same requests: the fastest,
/// serial on ties and when none is faster (so `auto` is never slower than serial on what it
/// measured).
pub fn fastest(times: &[(Policy, f64)]) -> Policy {
    let serial = times
        .iter()
        .find(|(p, _)| *p == Policy::Serial)
        .map(|t| t.1);
    let mut best = (Policy::Serial, serial.unwrap_or(f64::INFINITY));
    for &(p, t) in times {
        if t < best.1 {
            best = (p, t);
        }
    }
    best.0
}

/// The workers of a pool: `devices` accelerators (workers `0..devices`), then `cpus` CPU
/// workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    pub devices: usize,
    pub cpus: usize,
}

impl Pool {
    /// The workers that may run a task.
    pub fn eligible(&self, kind: TaskKind) -> std::ops::Range<usize> {
        match kind {
            TaskKind::Launch(_) => 0..self.devices,
            TaskKind::Cpu(_) => self.devices..self.devices + self.cpus,
        }
    }
}

/// Rough seconds per task, before any is measured: launches from a cycle estimate of their
/// instructions (compute: micro-op iterations; memory: bytes over an 8-byte bus; whichever
/// is larger, the modules overlapping) at the config's clock; CPU steps at 5 ns per output
/// element.
pub fn estimate_costs(model: &Model, graph: &TaskGraph) -> Vec<f64> {
    let hz = f64::from(model.config.clock_mhz.max(1)) * 1e6;
    graph
        .tasks
        .iter()
        .map(|t| match t.kind {
            TaskKind::Launch(l) => launch_cycles(model, l) as f64 / hz,
            TaskKind::Cpu(k) => {
                let elems: usize = model.plan.steps[k]
                    .outputs
                    .iter()
                    .map(|&v| model.plan.values[v].fact.len())
                    .sum();
                5e-9 * elems.max(1) as f64
            }
        })
        .collect()
}

/// The cycle estimate of launch `l` (see [`estimate_costs`]).
pub fn launch_cycles(model: &Model, l: usize) -> u64 {
    let cfg = &model.config;
    let (mut compute, mut memory) = (0u64, 0u64);
    for insn in &model.launches[l].program.program.insns {
        match insn {
            Insn::Gemm(g) => {
                let lp = &g.lp;
                compute += u64::from(lp.uop_end.saturating_sub(lp.uop_bgn))
                    * u64::from(lp.iter_out.max(1))
                    * u64::from(lp.iter_in.max(1));
            }
            Insn::Alu(a) => {
                let lp = &a.lp;
                compute += u64::from(lp.uop_end.saturating_sub(lp.uop_bgn))
                    * u64::from(lp.iter_out.max(1))
                    * u64::from(lp.iter_in.max(1));
            }
            Insn::Load(m) | Insn::Store(m) => {
                let bytes = u64::from(m.y_size)
                    * u64::from(m.x_size)
                    * u64::from(cfg.elem_bytes(m.memory_type));
                memory += bytes.div_ceil(8);
            }
            Insn::Finish(_) => {}
        }
    }
    compute.max(memory) + 100
}

/// Earliest-finish-time placement of `units` (each a run of tasks of one kind, in order),
/// taken by decreasing upward rank of their first task. Returns per task its worker and the
/// predicted makespan.
fn eft(
    graph: &TaskGraph,
    cost: &[f64],
    pool: Pool,
    mut units: Vec<Vec<usize>>,
) -> (Vec<usize>, f64) {
    let rank = graph.upward_rank(cost);
    // Ties (zero costs) must still respect the order of the graph: a predecessor first.
    units.sort_by(|a, b| rank[b[0]].total_cmp(&rank[a[0]]).then(a[0].cmp(&b[0])));
    // Place a unit only after every predecessor of its tasks is placed.
    let n = graph.len();
    let mut assign = vec![usize::MAX; n];
    let mut finish = vec![0.0f64; n];
    let mut avail = vec![0.0f64; pool.devices + pool.cpus];
    let mut placed = vec![false; n];
    let mut left: Vec<Vec<usize>> = units;
    while !left.is_empty() {
        let pos = left
            .iter()
            .position(|u| {
                u.iter()
                    .all(|&t| graph.preds[t].iter().all(|&p| placed[p] || u.contains(&p)))
            })
            .expect("a DAG always has a unit whose predecessors are placed");
        let unit = left.remove(pos);
        let kind = graph.tasks[unit[0]].kind;
        let mut best: Option<(f64, usize)> = None;
        for w in pool.eligible(kind) {
            let mut t = avail[w];
            for &task in &unit {
                let ready = graph.preds[task]
                    .iter()
                    .filter(|p| !unit.contains(p))
                    .map(|&p| finish[p])
                    .fold(0.0, f64::max);
                t = t.max(ready) + cost[task];
            }
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, w));
            }
        }
        let (_, w) = best.expect("the pool has a worker of every kind the graph needs");
        let mut t = avail[w];
        for &task in &unit {
            let ready = graph.preds[task]
                .iter()
                .filter(|p| !unit.contains(p))
                .map(|&p| finish[p])
                .fold(0.0, f64::max);
            t = t.max(ready) + cost[task];
            finish[task] = t;
            assign[task] = w;
            placed[task] = true;
        }
        avail[w] = t;
    }
    let makespan = finish.iter().copied().fold(0.0, f64::max);
    (assign, makespan)
}

/// Cuts `items` (costs, in order) into `k` contiguous groups of about equal cost; returns
/// each item's group.
fn contiguous(costs: &[f64], k: usize) -> Vec<usize> {
    let total: f64 = costs.iter().sum();
    let k = k.max(1);
    let mut out = Vec::with_capacity(costs.len());
    let mut acc = 0.0;
    let mut g = 0;
    for (i, &c) in costs.iter().enumerate() {
        // Leave at least one item for each group still to fill.
        let remaining_groups = k - 1 - g;
        let remaining_items = costs.len() - i;
        if g + 1 < k
            && (acc + c / 2.0 > total * (g + 1) as f64 / k as f64
                || remaining_items <= remaining_groups)
            && acc > 0.0
        {
            g += 1;
        }
        out.push(g);
        acc += c;
    }
    out
}

/// The schedule of `policy` (not `auto`) for `graph` on `pool`, from `cost` (seconds per
/// task). Fails when the pool lacks a worker kind the graph needs.
pub fn schedule(
    policy: Policy,
    graph: &TaskGraph,
    cost: &[f64],
    pool: Pool,
) -> Result<Schedule, String> {
    let launches = graph.tasks.iter().any(|t| t.is_launch());
    if launches && pool.devices == 0 {
        return Err("the model has launches but the pool has no accelerator".into());
    }
    if pool.cpus == 0 && graph.tasks.iter().any(|t| !t.is_launch()) {
        return Err("the model has CPU steps but the pool has no CPU worker".into());
    }
    let cost: Vec<f64> = cost.iter().map(|&c| c.max(1e-9)).collect();
    let first = |k: TaskKind| pool.eligible(k).start;
    Ok(match policy {
        Policy::Serial | Policy::Auto => Schedule {
            policy: Policy::Serial,
            assign: graph.tasks.iter().map(|t| first(t.kind)).collect(),
            chain: true,
            max_in_flight: Some(1),
            predicted: Some(cost.iter().sum()),
        },
        Policy::Pipeline => {
            let mut assign = vec![0; graph.len()];
            for (is_launch, workers, base) in
                [(true, pool.devices, 0), (false, pool.cpus, pool.devices)]
            {
                let ids: Vec<usize> = (0..graph.len())
                    .filter(|&i| graph.tasks[i].is_launch() == is_launch)
                    .collect();
                let costs: Vec<f64> = ids.iter().map(|&i| cost[i]).collect();
                for (&i, g) in ids.iter().zip(contiguous(&costs, workers)) {
                    assign[i] = base + g;
                }
            }
            Schedule {
                policy,
                assign,
                chain: true,
                max_in_flight: None,
                predicted: Some(cost.iter().sum()),
            }
        }
        Policy::ByOp => {
            let units = (0..graph.len()).map(|i| vec![i]).collect();
            let (assign, makespan) = eft(graph, &cost, pool, units);
            Schedule {
                policy,
                assign,
                chain: false,
                max_in_flight: None,
                predicted: Some(makespan),
            }
        }
        Policy::ByPath => {
            // Chains, cut where the kind changes (a chain through a CPU step is a launch
            // run, the CPU run, the next launch run).
            let mut units = Vec::new();
            for chain in graph.chains() {
                let mut cur: Vec<usize> = Vec::new();
                for t in chain {
                    if cur
                        .last()
                        .is_some_and(|&p| graph.tasks[p].is_launch() != graph.tasks[t].is_launch())
                    {
                        units.push(std::mem::take(&mut cur));
                    }
                    cur.push(t);
                }
                if !cur.is_empty() {
                    units.push(cur);
                }
            }
            let (assign, makespan) = eft(graph, &cost, pool, units);
            Schedule {
                policy,
                assign,
                chain: false,
                max_in_flight: None,
                predicted: Some(makespan),
            }
        }
        Policy::Dynamic => Schedule {
            policy,
            assign: Vec::new(),
            chain: false,
            max_in_flight: None,
            predicted: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Task;

    fn t(i: usize, launch: bool, reads: &[usize], writes: &[usize]) -> Task {
        Task::of_step(i, launch, reads, writes)
    }

    /// CPU 0 -> launches 1, 2, 3 in parallel -> CPU join 4.
    fn fan() -> TaskGraph {
        TaskGraph::from_tasks(vec![
            t(0, false, &[0], &[1]),
            t(1, true, &[1], &[2]),
            t(2, true, &[1], &[3]),
            t(3, true, &[1], &[4]),
            t(4, false, &[2, 3, 4], &[5]),
        ])
        .unwrap()
    }

    #[test]
    fn policies_parse_and_bad_names_list_the_choices() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
        }
        let e = "fastest".parse::<Policy>().unwrap_err();
        assert!(
            e.contains("serial, pipeline, by-op, by-path, dynamic, auto"),
            "{e}"
        );
    }

    #[test]
    fn by_op_spreads_parallel_launches_over_devices() {
        let g = fan();
        let cost = [1.0, 10.0, 10.0, 10.0, 1.0];
        let pool = Pool {
            devices: 2,
            cpus: 2,
        };
        let s = schedule(Policy::ByOp, &g, &cost, pool).unwrap();
        let devs: Vec<usize> = s.assign[1..4].to_vec();
        assert!(devs.contains(&0) && devs.contains(&1), "{devs:?}");
        assert!(s.assign[0] >= 2 && s.assign[4] >= 2);
        // Two of the three launches share a device: 1 + 20 + 1.
        assert_eq!(s.predicted, Some(22.0));
        let serial = schedule(Policy::Serial, &g, &cost, pool).unwrap();
        assert_eq!(serial.assign, vec![2, 0, 0, 0, 2]);
        assert_eq!(serial.predicted, Some(32.0));
    }

    #[test]
    fn by_path_keeps_a_chain_on_one_worker() {
        // 0 -> (1 -> 2) and (3 -> 4) -> 5, all launches.
        let g = TaskGraph::from_tasks(vec![
            t(0, true, &[0], &[1]),
            t(1, true, &[1], &[2]),
            t(2, true, &[2], &[3]),
            t(3, true, &[1], &[4]),
            t(4, true, &[4], &[5]),
            t(5, true, &[3, 5], &[6]),
        ])
        .unwrap();
        let pool = Pool {
            devices: 2,
            cpus: 1,
        };
        let s = schedule(Policy::ByPath, &g, &[1.0; 6], pool).unwrap();
        assert_eq!(s.assign[1], s.assign[2]);
        assert_eq!(s.assign[3], s.assign[4]);
        assert_ne!(s.assign[1], s.assign[3]);
        assert_eq!(s.predicted, Some(4.0));
    }

    #[test]
    fn pipeline_cuts_launches_into_contiguous_stages() {
        let g =
            TaskGraph::from_tasks((0..6).map(|i| t(i, i > 0, &[i], &[i + 1])).collect()).unwrap();
        let pool = Pool {
            devices: 2,
            cpus: 1,
        };
        let s = schedule(Policy::Pipeline, &g, &[1.0; 6], pool).unwrap();
        assert_eq!(s.assign, vec![2, 0, 0, 0, 1, 1]);
        assert!(s.chain);
        assert_eq!(contiguous(&[1.0, 1.0, 1.0, 1.0], 2), vec![0, 0, 1, 1]);
        assert_eq!(contiguous(&[5.0, 0.0, 0.0], 3), vec![0, 1, 2]);
    }

    #[test]
    fn auto_keeps_serial_unless_another_is_strictly_faster() {
        let times = |t: [f64; 3]| {
            [Policy::Serial, Policy::Pipeline, Policy::ByOp]
                .into_iter()
                .zip(t)
                .collect::<Vec<_>>()
        };
        assert_eq!(fastest(&times([2.0, 2.0, 2.0])), Policy::Serial);
        assert_eq!(fastest(&times([2.0, 3.0, 4.0])), Policy::Serial);
        assert_eq!(fastest(&times([2.0, 1.5, 1.0])), Policy::ByOp);
        assert_eq!(fastest(&times([2.0, 1.0, 1.0])), Policy::Pipeline);
    }

    #[test]
    fn a_pool_without_the_workers_a_graph_needs_is_refused() {
        let e = schedule(
            Policy::ByOp,
            &fan(),
            &[1.0; 5],
            Pool {
                devices: 0,
                cpus: 1,
            },
        )
        .unwrap_err();
        assert!(e.contains("no accelerator"), "{e}");
        let e = schedule(
            Policy::ByOp,
            &fan(),
            &[1.0; 5],
            Pool {
                devices: 1,
                cpus: 0,
            },
        )
        .unwrap_err();
        assert!(e.contains("no CPU worker"), "{e}");
    }
}
