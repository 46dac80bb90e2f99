//! Device-time simulation: replays a schedule as a discrete-event simulation in which each
//! task takes a given time (a launch its cycles at the config's clock, a CPU step its time
//! from a profile) instead of running, so policies are compared deterministically — same
//! costs, same figures — on the accelerators and CPU cores of a board that is not here.
//!
//! Tasks are placed, released and admitted by the live executor's own rules
//! ([`Schedule::place`], [`Schedule::next_of`], [`Schedule::pending_counts`],
//! [`Schedule::cap`]): one FIFO queue per worker, each worker one task at a time, a request
//! submitted as soon as fewer than the cap are in flight, `dynamic` placing by the seconds
//! of work each queue holds. Not modelled: copies between host and device memory beyond
//! what a launch's cost includes, two accelerators contending for one memory, and the
//! executor's own overhead (add it to the costs, e.g. per launch).

use std::collections::VecDeque;

use super::sched::{self, Policy, Pool, Schedule};
use super::trace::{Event, Timeline, WorkerStats};
use super::ExecError;
use crate::graph::TaskGraph;

/// What a simulation runs: a graph, each task's seconds on its worker, and the pool.
#[derive(Debug, Clone, Copy)]
pub struct SimSetup<'a> {
    pub graph: &'a TaskGraph,
    /// Seconds per task.
    pub cost: &'a [f64],
    /// Per task, its name in the timeline.
    pub names: &'a [String],
    pub pool: Pool,
    /// Per worker (devices, then CPU workers), its name in the timeline.
    pub workers: &'a [String],
}

/// One simulated run of several requests.
#[derive(Debug, Clone, PartialEq)]
pub struct SimRun {
    pub timeline: Timeline,
    /// Per request, in submission order: from submitted to its last task ended, seconds.
    pub latencies: Vec<f64>,
    /// When the last request ended, seconds from the first submission.
    pub makespan: f64,
}

impl SimRun {
    /// Requests per second over the run.
    pub fn throughput(&self) -> f64 {
        self.latencies.len() as f64 / self.makespan.max(1e-12)
    }
}

struct Running {
    req: usize,
    task: usize,
    queued: f64,
    start: f64,
    end: f64,
}

struct Req {
    pending: Vec<usize>,
    left: usize,
    submitted: f64,
}

struct Sim<'a> {
    s: &'a SimSetup<'a>,
    schedule: &'a Schedule,
    queues: Vec<VecDeque<(usize, usize, f64)>>,
    running: Vec<Option<Running>>,
    backlog: Vec<f64>,
    reqs: Vec<Req>,
    latencies: Vec<f64>,
    events: Vec<Event>,
    active: usize,
    now: f64,
}

impl Sim<'_> {
    fn dispatch(&mut self, req: usize, task: usize) {
        let w = self
            .schedule
            .place(self.s.graph, self.s.pool, task, req as u64, &self.backlog);
        self.backlog[w] += self.s.cost[task];
        self.queues[w].push_back((req, task, self.now));
    }

    fn submit(&mut self) {
        let req = self.reqs.len();
        let pending = self.schedule.pending_counts(self.s.graph);
        let ready: Vec<usize> = (0..pending.len()).filter(|&i| pending[i] == 0).collect();
        self.reqs.push(Req {
            pending,
            left: self.s.graph.len(),
            submitted: self.now,
        });
        self.latencies.push(0.0);
        self.active += 1;
        if self.s.graph.is_empty() {
            self.active -= 1;
        }
        for t in ready {
            self.dispatch(req, t);
        }
    }

    fn complete(&mut self, w: usize) {
        let Some(r) = self.running[w].take() else {
            return;
        };
        self.backlog[w] = (self.backlog[w] - self.s.cost[r.task]).max(0.0);
        self.events.push(Event {
            worker: w,
            request: r.req as u64,
            task: r.task,
            name: self.s.names[r.task].clone(),
            queued: r.queued,
            start: r.start,
            end: r.end,
            failed: false,
        });
        let next = self.schedule.next_of(self.s.graph, r.task);
        let q = &mut self.reqs[r.req];
        q.left -= 1;
        let mut ready = Vec::new();
        for n in next {
            q.pending[n] -= 1;
            if q.pending[n] == 0 {
                ready.push(n);
            }
        }
        if q.left == 0 {
            self.latencies[r.req] = self.now - q.submitted;
            self.active -= 1;
        }
        for n in ready {
            self.dispatch(r.req, n);
        }
    }
}

/// Simulates `requests` requests of `setup` under `schedule`, at most `in_flight` at once
/// (and the schedule's own cap). Ties in time go to the lower worker index, so the same
/// inputs always give the same run.
pub fn simulate(
    setup: &SimSetup,
    schedule: &Schedule,
    in_flight: usize,
    requests: usize,
) -> Result<SimRun, ExecError> {
    let g = setup.graph;
    let workers = setup.pool.devices + setup.pool.cpus;
    if setup.cost.len() != g.len() || setup.names.len() != g.len() {
        return Err(ExecError::Options(format!(
            "{} costs and {} names for a graph of {} tasks",
            setup.cost.len(),
            setup.names.len(),
            g.len()
        )));
    }
    if setup.workers.len() != workers {
        return Err(ExecError::Options(format!(
            "{} worker names for a pool of {workers}",
            setup.workers.len()
        )));
    }
    if let Some(t) = setup
        .cost
        .iter()
        .position(|c| !(c.is_finite() && *c >= 0.0))
    {
        return Err(ExecError::Options(format!(
            "{}: its time {} is not a finite number of seconds >= 0",
            setup.names[t], setup.cost[t]
        )));
    }
    if in_flight == 0 || requests == 0 {
        return Err(ExecError::Options(
            "a simulation needs at least one request and one in flight".into(),
        ));
    }
    let cap = schedule.cap(in_flight);
    let mut sim = Sim {
        s: setup,
        schedule,
        queues: vec![VecDeque::new(); workers],
        running: (0..workers).map(|_| None).collect(),
        backlog: vec![0.0; workers],
        reqs: Vec::with_capacity(requests),
        latencies: Vec::with_capacity(requests),
        events: Vec::new(),
        active: 0,
        now: 0.0,
    };
    loop {
        while sim.active < cap && sim.reqs.len() < requests {
            sim.submit();
        }
        for w in 0..workers {
            if sim.running[w].is_none() {
                if let Some((req, task, queued)) = sim.queues[w].pop_front() {
                    sim.running[w] = Some(Running {
                        req,
                        task,
                        queued,
                        start: sim.now,
                        end: sim.now + setup.cost[task],
                    });
                }
            }
        }
        let Some(t) = sim
            .running
            .iter()
            .flatten()
            .map(|r| r.end)
            .min_by(f64::total_cmp)
        else {
            break;
        };
        sim.now = t;
        for w in 0..workers {
            if sim.running[w].as_ref().is_some_and(|r| r.end <= t) {
                sim.complete(w);
            }
        }
    }
    if sim.reqs.iter().any(|r| r.left > 0 && !g.is_empty()) {
        return Err(ExecError::Options(
            "the schedule left tasks that never became ready (a cycle in the graph)".into(),
        ));
    }
    Ok(SimRun {
        timeline: Timeline {
            workers: setup.workers.to_vec(),
            events: sim.events,
        },
        latencies: sim.latencies,
        makespan: sim.now,
    })
}

/// One policy's simulated figures (see [`compare`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyFigures {
    pub policy: Policy,
    /// What ran: the policy itself, or for `auto` the one it chose.
    pub chosen: Policy,
    /// Latency at one request in flight, seconds.
    pub latency_p50: f64,
    pub latency_p99: f64,
    /// Requests per second at each number in flight asked for.
    pub throughput: Vec<(usize, f64)>,
    /// Per worker, over the run at the chosen number in flight.
    pub workers: Vec<WorkerStats>,
    /// The busiest worker's summed work per request there, seconds: this placement's bound.
    pub busiest: f64,
    /// The run at the chosen number in flight.
    pub timeline: Timeline,
}

impl PolicyFigures {
    /// The best throughput over the numbers in flight.
    pub fn best_throughput(&self) -> f64 {
        self.throughput.iter().map(|t| t.1).fold(0.0, f64::max)
    }
}

/// Every policy compared on one setup (see [`compare`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub policies: Vec<PolicyFigures>,
    /// One request's work, seconds: the serial run's latency.
    pub serial: f64,
    /// Seconds per request no placement beats: the launches' work over the devices or the
    /// CPU steps' over the CPU workers, whichever is more.
    pub bound: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Simulates each of `policies` (schedules from `setup.cost`, the executor's placement
/// rules): latency at one in flight, throughput at each of `in_flights`, and per-worker
/// figures and the timeline at `at` in flight, each over `requests` requests. `auto` takes
/// the policy [`sched::fastest`] picks from the others' runs at `at` in flight, as the live
/// `auto` does from measured ones.
pub fn compare(
    setup: &SimSetup,
    policies: &[Policy],
    in_flights: &[usize],
    at: usize,
    requests: usize,
) -> Result<Comparison, ExecError> {
    let g = setup.graph;
    let figures = |p: Policy, chosen: Policy| -> Result<PolicyFigures, ExecError> {
        let s = sched::schedule(chosen, g, setup.cost, setup.pool).map_err(ExecError::Options)?;
        let one = simulate(setup, &s, 1, requests)?;
        let mut lat = one.latencies.clone();
        lat.sort_by(f64::total_cmp);
        let mut throughput = Vec::new();
        for &k in in_flights {
            throughput.push((k, simulate(setup, &s, k, requests)?.throughput()));
        }
        let run = simulate(setup, &s, at, requests)?;
        let stats = run.timeline.stats();
        Ok(PolicyFigures {
            policy: p,
            chosen,
            latency_p50: percentile(&lat, 0.5),
            latency_p99: percentile(&lat, 0.99),
            throughput,
            busiest: stats.lower_bound / requests as f64,
            workers: stats.workers,
            timeline: run.timeline,
        })
    };
    let mut out: Vec<PolicyFigures> = Vec::new();
    for &p in policies.iter().filter(|&&p| p != Policy::Auto) {
        out.push(figures(p, p)?);
    }
    if policies.contains(&Policy::Auto) {
        let mut times = Vec::new();
        for p in Policy::ALL.into_iter().filter(|&p| p != Policy::Auto) {
            let s = sched::schedule(p, g, setup.cost, setup.pool).map_err(ExecError::Options)?;
            times.push((p, simulate(setup, &s, at, requests)?.makespan));
        }
        out.push(figures(Policy::Auto, sched::fastest(&times))?);
    }
    let work = |launch: bool| -> f64 {
        (0..g.len())
            .filter(|&i| g.tasks[i].is_launch() == launch)
            .map(|i| setup.cost[i])
            .sum()
    };
    let per = |w: f64, n: usize| if n == 0 { 0.0 } else { w / n as f64 };
    Ok(Comparison {
        policies: out,
        serial: setup.cost.iter().sum(),
        bound: per(work(true), setup.pool.devices).max(per(work(false), setup.pool.cpus)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Task;

    fn t(i: usize, launch: bool, reads: &[usize], writes: &[usize]) -> Task {
        Task::of_step(i, launch, reads, writes)
    }

    /// CPU 0 -> launches 1 and 2 in parallel -> CPU join 3.
    fn diamond() -> TaskGraph {
        TaskGraph::from_tasks(vec![
            t(0, false, &[0], &[1]),
            t(1, true, &[1], &[2]),
            t(2, true, &[1], &[3]),
            t(3, false, &[2, 3], &[4]),
        ])
        .unwrap()
    }

    struct Fixture {
        g: TaskGraph,
        cost: Vec<f64>,
        names: Vec<String>,
        workers: Vec<String>,
        pool: Pool,
    }

    impl Fixture {
        fn new(g: TaskGraph, cost: &[f64], pool: Pool) -> Fixture {
            let names = g.tasks.iter().map(|t| t.to_string()).collect();
            let mut workers: Vec<String> = (0..pool.devices).map(|i| format!("dev{i}")).collect();
            workers.extend((0..pool.cpus).map(|i| format!("cpu{i}")));
            Fixture {
                g,
                cost: cost.to_vec(),
                names,
                workers,
                pool,
            }
        }
        fn setup(&self) -> SimSetup<'_> {
            SimSetup {
                graph: &self.g,
                cost: &self.cost,
                names: &self.names,
                pool: self.pool,
                workers: &self.workers,
            }
        }
        fn run(&self, p: Policy, in_flight: usize, requests: usize) -> SimRun {
            let s = sched::schedule(p, &self.g, &self.cost, self.pool).unwrap();
            simulate(&self.setup(), &s, in_flight, requests).unwrap()
        }
    }

    const TWO_TWO: Pool = Pool {
        devices: 2,
        cpus: 2,
    };

    #[test]
    fn serial_runs_one_task_at_a_time_one_request_at_a_time() {
        let f = Fixture::new(diamond(), &[1.0, 4.0, 3.0, 2.0], TWO_TWO);
        let r = f.run(Policy::Serial, 4, 3);
        assert_eq!(r.makespan, 30.0);
        assert_eq!(r.latencies, vec![10.0; 3]);
        // Everything on dev0 and cpu0.
        assert!(r
            .timeline
            .events
            .iter()
            .all(|e| e.worker == 0 || e.worker == 2));
    }

    #[test]
    fn by_op_and_by_path_run_the_branches_on_both_devices() {
        let f = Fixture::new(diamond(), &[1.0, 4.0, 3.0, 2.0], TWO_TWO);
        for p in [Policy::ByOp, Policy::ByPath, Policy::Dynamic] {
            let r = f.run(p, 1, 2);
            // 1 + max(4, 3) + 2, twice.
            assert_eq!(r.latencies, vec![7.0, 7.0], "{p}");
            assert_eq!(r.makespan, 14.0, "{p}");
        }
    }

    #[test]
    fn pipeline_overlaps_requests_stage_by_stage() {
        // A chain of four: cpu 1, launch 3, launch 3, cpu 1; two devices, two CPU workers:
        // stages cpu0 | dev0 | dev1 | cpu1; the slowest stage (3) paces the requests.
        let g = TaskGraph::from_tasks(vec![
            t(0, false, &[0], &[1]),
            t(1, true, &[1], &[2]),
            t(2, true, &[2], &[3]),
            t(3, false, &[3], &[4]),
        ])
        .unwrap();
        let f = Fixture::new(g, &[1.0, 3.0, 3.0, 1.0], TWO_TWO);
        let r = f.run(Policy::Pipeline, 8, 4);
        // First out at 8, then one every 3.
        assert_eq!(r.makespan, 8.0 + 3.0 * 3.0);
        assert_eq!(r.latencies[0], 8.0);
        let serial = f.run(Policy::Serial, 8, 4);
        assert_eq!(serial.makespan, 32.0);
        // At one in flight the pipeline is the serial run.
        assert_eq!(f.run(Policy::Pipeline, 1, 4).makespan, 32.0);
    }

    #[test]
    fn the_same_inputs_give_the_same_run_and_figures() {
        let f = Fixture::new(diamond(), &[0.3, 1.7, 1.1, 0.2], TWO_TWO);
        let a = compare(&f.setup(), &Policy::ALL, &[1, 2, 4, 8], 4, 16).unwrap();
        let b = compare(&f.setup(), &Policy::ALL, &[1, 2, 4, 8], 4, 16).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.policies.len(), 6);
        assert!((a.serial - 3.3).abs() < 1e-12);
        // Launches 2.8 over two devices; CPU 0.5 over two workers.
        assert!((a.bound - 1.4).abs() < 1e-12);
        let serial = a.policies[0].best_throughput();
        let auto = a.policies.last().unwrap();
        assert_eq!(auto.policy, Policy::Auto);
        assert_ne!(
            auto.chosen,
            Policy::Serial,
            "branches overlap: something beats serial"
        );
        assert!(auto.best_throughput() >= serial);
        for p in &a.policies {
            let busy: f64 = p.workers.iter().map(|w| w.busy).sum();
            assert!(
                (busy - 16.0 * 3.3).abs() < 1e-9,
                "{}: all the work ran",
                p.policy
            );
        }
    }

    #[test]
    fn auto_keeps_serial_when_nothing_is_faster() {
        // A chain of launches on one device and one CPU worker: nothing can overlap.
        let g =
            TaskGraph::from_tasks((0..3).map(|i| t(i, true, &[i], &[i + 1])).collect()).unwrap();
        let pool = Pool {
            devices: 1,
            cpus: 1,
        };
        let f = Fixture::new(g, &[1.0, 2.0, 3.0], pool);
        let c = compare(&f.setup(), &[Policy::Auto], &[1], 1, 4).unwrap();
        assert_eq!(c.policies[0].chosen, Policy::Serial);
    }

    #[test]
    fn bad_costs_are_refused() {
        let mut f = Fixture::new(diamond(), &[1.0, f64::NAN, 1.0, 1.0], TWO_TWO);
        let s = sched::schedule(Policy::Serial, &f.g, &[1.0; 4], f.pool).unwrap();
        let e = simulate(&f.setup(), &s, 1, 1).unwrap_err();
        assert!(e.to_string().contains("launch 1"), "{e}");
        f.cost.pop();
        assert!(simulate(&f.setup(), &s, 1, 1).is_err());
    }
}
