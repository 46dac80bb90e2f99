//! The pool executor: runs a compiled model's task graph ([`crate::graph`]) over several
//! accelerators at once (one worker thread per [`Device`], of any backend) and N CPU worker
//! threads, each worker with its own queue, several requests in flight. A policy
//! ([`Policy`]) decides which worker runs each task.
//!
//! ```text
//! let ex = Executor::new(model, devices, ExecOptions { policy: Policy::ByOp, .. })?;
//! let t = ex.submit(inputs)?;          // returns at once (waits only for a free slot)
//! let out = ex.wait(t, Some(timeout))?; // or ex.try_wait(t)?
//! ```
//!
//! Every request keeps its tensors on the host, in a value table of its own; a launch's
//! inputs are written to its device before it runs and its outputs read back after
//! ([`device::Loaded`]), so requests and devices never share activation memory. CPU tasks run
//! with the integer reference's exact semantics and launches run the same programs as a
//! serial run, so the outputs are bit-identical to [`crate::resident::Resident::run`] under
//! every policy.
//!
//! Failures: a task that fails (a device error, a bad tensor, even a panic in an operator)
//! fails its request with that error; the other requests and the devices go on. Waits take a
//! timeout and return [`ExecError::Timeout`] when it passes.

pub mod device;
pub mod profile;
pub mod sched;
pub mod sim;
pub mod trace;

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use drivers::Device;

use crate::graph::{TaskGraph, TaskKind};
use crate::model::Model;
use crate::reference;
use crate::tensor::Tensor;

pub use sched::{Policy, Pool, Schedule};
pub use sim::{Comparison, PolicyFigures, SimRun, SimSetup};
pub use trace::{chrome_json_of, Event, Timeline, TimelineStats, WorkerStats};

/// Opens a device, on the worker thread that will own it (devices need not be `Send`).
pub type OpenDevice = Box<dyn FnOnce() -> Result<Box<dyn Device>, String> + Send>;

/// One accelerator of the pool.
pub struct DeviceSpec {
    /// For messages and the timeline (`fsim`, `rtl`, `remote://host:9091`).
    pub name: String,
    pub open: OpenDevice,
}

impl DeviceSpec {
    pub fn new(
        name: impl Into<String>,
        open: impl FnOnce() -> Result<Box<dyn Device>, String> + Send + 'static,
    ) -> DeviceSpec {
        DeviceSpec {
            name: name.into(),
            open: Box::new(open),
        }
    }
}

/// How an executor runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExecOptions {
    pub policy: Policy,
    /// CPU worker threads (at least one when the model has CPU steps).
    pub cpu_threads: usize,
    /// Requests running at once; [`Executor::submit`] waits for a free slot beyond it.
    pub in_flight: usize,
    /// Record a [`Timeline`] of every task run.
    pub trace: bool,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            policy: Policy::Serial,
            cpu_threads: 1,
            in_flight: 1,
            trace: false,
        }
    }
}

/// Why the executor could not do what was asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecError {
    #[error("invalid executor options: {0}")]
    Options(String),
    #[error("device {index} ({name}) cannot serve the model: {message}")]
    Device {
        index: usize,
        name: String,
        message: String,
    },
    #[error("{0}")]
    Input(String),
    #[error("request {request}: {task} failed on {worker}: {message}")]
    Task {
        request: u64,
        task: String,
        worker: String,
        message: String,
    },
    #[error("request {0} is not done after {1:?}")]
    Timeout(u64, Duration),
    #[error("no request {0} (never submitted, or its result was already taken)")]
    UnknownTicket(u64),
    #[error("the executor is busy ({0} requests unfinished); policies change between runs")]
    Busy(usize),
    #[error("the executor shut down before request {0} finished")]
    Shutdown(u64),
}

/// A submitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket(pub u64);

/// A finished request.
#[derive(Debug, Clone)]
pub struct Done {
    pub outputs: Vec<Tensor>,
    /// From submitted to its last task ended.
    pub latency: Duration,
}

/// A queued task run.
#[derive(Debug, Clone, Copy)]
struct Job {
    req: u64,
    task: usize,
    queued: Instant,
    /// The cost charged to its worker's backlog.
    est: f64,
}

struct Req {
    /// Per plan value, computed so far (model inputs included; constants are in the plan).
    values: Vec<Option<Arc<Tensor>>>,
    /// Per task, unfinished tasks it waits for.
    pending: Vec<usize>,
    left: usize,
    result: Option<Result<Done, ExecError>>,
    submitted: Instant,
}

struct State {
    queues: Vec<VecDeque<Job>>,
    /// Per worker, estimated seconds of work queued or running.
    backlog: Vec<f64>,
    reqs: HashMap<u64, Req>,
    /// Requests submitted and not finished.
    active: usize,
    next: u64,
    shutdown: bool,
    schedule: Schedule,
    /// Per task, the cost model (seconds): measured when it has run, else the estimate.
    cost: Vec<f64>,
    measured: Vec<bool>,
    events: Vec<Event>,
}

struct Shared {
    model: Arc<Model>,
    graph: TaskGraph,
    pool: Pool,
    names: Vec<String>,
    in_flight: usize,
    trace: bool,
    epoch: Instant,
    st: Mutex<State>,
    /// Workers wait here for jobs.
    work: Condvar,
    /// Submitters and waiters wait here for finished requests.
    done: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker never panics while holding the lock (task code runs unlocked, under
        // catch_unwind), so poisoning would be a bug here; recover the state anyway.
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues task `task` of request `req` on the worker its schedule (or, for `dynamic`,
    /// the live backlogs) gives.
    fn dispatch(&self, st: &mut State, req: u64, task: usize) {
        let est = st.cost[task];
        let w = st
            .schedule
            .place(&self.graph, self.pool, task, req, &st.backlog);
        st.backlog[w] += est;
        st.queues[w].push_back(Job {
            req,
            task,
            queued: Instant::now(),
            est,
        });
        self.work.notify_all();
    }

    fn secs(&self, t: Instant) -> f64 {
        t.duration_since(self.epoch).as_secs_f64()
    }
}

/// What a worker thread owns.
enum Role {
    Device(device::Loaded),
    Cpu,
}

/// The pool executor (see the module documentation). Dropping it stops its threads; requests
/// still running fail with [`ExecError::Shutdown`].
pub struct Executor {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Drop for Executor {
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.shutdown = true;
        }
        self.shared.work.notify_all();
        self.shared.done.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Executor {
    /// Opens every device on a worker thread of its own, loads the model onto it, and starts
    /// `opts.cpu_threads` CPU workers. `auto` starts as `serial` until [`Executor::choose`].
    pub fn new(
        model: Arc<Model>,
        devices: Vec<DeviceSpec>,
        opts: ExecOptions,
    ) -> Result<Executor, ExecError> {
        if opts.in_flight == 0 {
            return Err(ExecError::Options("--in-flight must be at least 1".into()));
        }
        let graph = TaskGraph::of_model(&model);
        let pool = Pool {
            devices: devices.len(),
            cpus: opts.cpu_threads,
        };
        let cost = sched::estimate_costs(&model, &graph);
        let schedule = sched::schedule(opts.policy, &graph, &cost, pool).map_err(|e| {
            ExecError::Options(format!(
                "{e} ({} device(s), {} CPU thread(s))",
                pool.devices, pool.cpus
            ))
        })?;
        let mut names: Vec<String> = devices
            .iter()
            .enumerate()
            .map(|(i, d)| format!("dev{i} {}", d.name))
            .collect();
        names.extend((0..opts.cpu_threads).map(|i| format!("cpu{i}")));
        let workers = names.len();
        let n = graph.len();
        let shared = Arc::new(Shared {
            model,
            graph,
            pool,
            names,
            in_flight: opts.in_flight,
            trace: opts.trace,
            epoch: Instant::now(),
            st: Mutex::new(State {
                queues: vec![VecDeque::new(); workers],
                backlog: vec![0.0; workers],
                reqs: HashMap::new(),
                active: 0,
                next: 0,
                shutdown: false,
                schedule,
                cost,
                measured: vec![false; n],
                events: Vec::new(),
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let mut ex = Executor {
            shared: shared.clone(),
            threads: Vec::new(),
        };
        let (tx, rx) = mpsc::channel::<(usize, Result<(), String>)>();
        for (i, spec) in devices.into_iter().enumerate() {
            let shared = shared.clone();
            let tx = tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("vta-dev{i}"))
                .spawn(move || {
                    let opened = catch_unwind(AssertUnwindSafe(|| {
                        let dev = (spec.open)()?;
                        device::Loaded::load(&shared.model, dev)
                    }))
                    .unwrap_or_else(|_| Err("the device panicked while loading".into()));
                    match opened {
                        Ok(loaded) => {
                            let _ = tx.send((i, Ok(())));
                            worker(&shared, i, Role::Device(loaded));
                        }
                        Err(e) => {
                            let _ = tx.send((i, Err(e)));
                        }
                    }
                });
            match spawned {
                Ok(h) => ex.threads.push(h),
                Err(e) => return Err(ExecError::Options(format!("cannot start a thread: {e}"))),
            }
        }
        drop(tx);
        for _ in 0..pool.devices {
            match rx.recv() {
                Ok((_, Ok(()))) => {}
                Ok((i, Err(message))) => {
                    return Err(ExecError::Device {
                        index: i,
                        name: shared.names[i].clone(),
                        message,
                    });
                }
                Err(_) => {
                    return Err(ExecError::Options(
                        "a device thread ended while loading".into(),
                    ))
                }
            }
        }
        for c in 0..pool.cpus {
            let shared = shared.clone();
            let w = pool.devices + c;
            let h = std::thread::Builder::new()
                .name(format!("vta-cpu{c}"))
                .spawn(move || worker(&shared, w, Role::Cpu))
                .map_err(|e| ExecError::Options(format!("cannot start a thread: {e}")))?;
            ex.threads.push(h);
        }
        Ok(ex)
    }

    /// The task graph it runs.
    pub fn graph(&self) -> &TaskGraph {
        &self.shared.graph
    }

    /// Worker names by index: devices (`dev0 fsim`), then CPU workers (`cpu0`).
    pub fn workers(&self) -> &[String] {
        &self.shared.names
    }

    /// The schedule in force.
    pub fn schedule(&self) -> Schedule {
        self.shared.lock().schedule.clone()
    }

    /// The cost model per task (seconds), and which entries are measured.
    pub fn costs(&self) -> (Vec<f64>, Vec<bool>) {
        let st = self.shared.lock();
        (st.cost.clone(), st.measured.clone())
    }

    /// Switches to `policy` (not `auto`; see [`Executor::choose`]), scheduled from the costs
    /// measured so far. Only between runs.
    pub fn set_policy(&self, policy: Policy) -> Result<(), ExecError> {
        let mut st = self.shared.lock();
        if st.active > 0 {
            return Err(ExecError::Busy(st.active));
        }
        let s = sched::schedule(policy, &self.shared.graph, &st.cost, self.shared.pool)
            .map_err(ExecError::Options)?;
        st.schedule = s;
        Ok(())
    }

    /// Measures every policy (serial first, which also measures every task's time for the
    /// cost model) on `runs` requests of `inputs`, as many in flight as allowed, and keeps
    /// the fastest; serial unless another is faster. Returns each policy's wall time.
    pub fn choose(
        &self,
        inputs: &[Tensor],
        runs: usize,
    ) -> Result<Vec<(Policy, Duration)>, ExecError> {
        let runs = runs.max(1);
        let mut times = Vec::new();
        for p in [
            Policy::Serial,
            Policy::Pipeline,
            Policy::ByOp,
            Policy::ByPath,
            Policy::Dynamic,
        ] {
            self.set_policy(p)?;
            if p == Policy::Serial {
                // One unmeasured run fills the cost model.
                self.run(inputs)?;
            }
            let t = Instant::now();
            self.run_many(&vec![inputs.to_vec(); runs])?;
            times.push((p, t.elapsed()));
        }
        let secs: Vec<(Policy, f64)> = times.iter().map(|(p, d)| (*p, d.as_secs_f64())).collect();
        let best = sched::fastest(&secs);
        self.set_policy(best)?;
        Ok(times)
    }

    /// Starts a request; waits only while `in_flight` requests are running.
    pub fn submit(&self, inputs: Vec<Tensor>) -> Result<Ticket, ExecError> {
        let sh = &*self.shared;
        sh.model
            .check_inputs(&inputs)
            .map_err(|e| ExecError::Input(e.to_string()))?;
        let mut st = sh.lock();
        loop {
            if st.shutdown {
                return Err(ExecError::Shutdown(st.next));
            }
            let cap = st.schedule.cap(sh.in_flight);
            if st.active < cap {
                break;
            }
            st = sh.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        let id = st.next;
        st.next += 1;
        let plan = &sh.model.plan;
        let mut values = vec![None; plan.values.len()];
        for (&v, t) in plan.inputs.iter().zip(inputs) {
            values[v] = Some(Arc::new(t));
        }
        let pending = st.schedule.pending_counts(&sh.graph);
        let ready: Vec<usize> = (0..sh.graph.len()).filter(|&i| pending[i] == 0).collect();
        let left = sh.graph.len();
        st.reqs.insert(
            id,
            Req {
                values,
                pending,
                left,
                result: None,
                submitted: Instant::now(),
            },
        );
        st.active += 1;
        if left == 0 {
            finish(sh, &mut st, id);
        }
        for t in ready {
            sh.dispatch(&mut st, id, t);
        }
        Ok(Ticket(id))
    }

    /// The request's result if it is done (taking it), `None` if it is still running.
    pub fn try_wait(&self, t: Ticket) -> Result<Option<Done>, ExecError> {
        let mut st = self.shared.lock();
        take(&mut st, t).transpose()
    }

    /// Waits for the request (at most `timeout`, if given) and takes its result.
    pub fn wait(&self, t: Ticket, timeout: Option<Duration>) -> Result<Done, ExecError> {
        let deadline = timeout.map(|d| Instant::now() + d);
        let mut st = self.shared.lock();
        loop {
            if let Some(r) = take(&mut st, t) {
                return r;
            }
            if st.shutdown {
                return Err(ExecError::Shutdown(t.0));
            }
            st = match deadline {
                None => self.shared.done.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(ExecError::Timeout(t.0, timeout.unwrap_or_default()));
                    }
                    self.shared
                        .done
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Runs one request and waits for it.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Done, ExecError> {
        let t = self.submit(inputs.to_vec())?;
        self.wait(t, None)
    }

    /// Runs every request, keeping up to `in_flight` of them in flight; results in order.
    /// The first failure is returned after every request has finished.
    pub fn run_many(&self, requests: &[Vec<Tensor>]) -> Result<Vec<Done>, ExecError> {
        let mut tickets = VecDeque::new();
        let mut out = Vec::with_capacity(requests.len());
        let mut first_err = None;
        for r in requests {
            // Collect finished ones first so submit's wait for a slot cannot starve us.
            while let Some(&t) = tickets.front() {
                match self.try_wait(t) {
                    Ok(Some(d)) => {
                        tickets.pop_front();
                        out.push(d);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tickets.pop_front();
                        first_err.get_or_insert(e);
                    }
                }
            }
            tickets.push_back(self.submit(r.clone())?);
        }
        for t in tickets {
            match self.wait(t, None) {
                Ok(d) => out.push(d),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The timeline recorded so far (with [`ExecOptions::trace`]), emptying it.
    pub fn take_timeline(&self) -> Timeline {
        let mut st = self.shared.lock();
        Timeline {
            workers: self.shared.names.clone(),
            events: std::mem::take(&mut st.events),
        }
    }
}

/// Takes request `t`'s result if there is one.
fn take(st: &mut State, t: Ticket) -> Option<Result<Done, ExecError>> {
    let Some(r) = st.reqs.get(&t.0) else {
        return Some(Err(ExecError::UnknownTicket(t.0)));
    };
    r.result.as_ref()?;
    st.reqs.remove(&t.0).and_then(|r| r.result)
}

/// Request `id` has run its last task: its outputs.
fn finish(sh: &Shared, st: &mut State, id: u64) {
    let Some(r) = st.reqs.get_mut(&id) else {
        return;
    };
    let plan = &sh.model.plan;
    let outputs: Result<Vec<Tensor>, ExecError> = plan
        .outputs
        .iter()
        .map(|&o| {
            r.values[o]
                .as_deref()
                .or(plan.values[o].constant.as_deref())
                .cloned()
                .ok_or_else(|| ExecError::Task {
                    request: id,
                    task: "outputs".into(),
                    worker: "-".into(),
                    message: format!("output %{o} was not computed"),
                })
        })
        .collect();
    r.result = Some(outputs.map(|outputs| Done {
        outputs,
        latency: r.submitted.elapsed(),
    }));
    r.values = Vec::new();
    st.active -= 1;
    sh.done.notify_all();
}

/// The inputs a task reads, taken from its request (cheap: shared tensors).
enum Inputs {
    Launch(Vec<Arc<Tensor>>),
    Cpu(Vec<(usize, Arc<Tensor>)>),
}

/// A task's name in messages and timelines: `launch 3 (steps 4-9)`,
/// `cpu step 11 Softmax softmax0`.
pub fn task_name(model: &Model, graph: &TaskGraph, task: usize) -> String {
    let t = &graph.tasks[task];
    match t.kind {
        TaskKind::Launch(l) => {
            let s = &model.launches[l].steps;
            match (s.first(), s.last()) {
                (Some(a), Some(b)) if a != b => format!("launch {l} (steps {a}-{b})"),
                (Some(a), _) => format!("launch {l} (step {a})"),
                _ => format!("launch {l}"),
            }
        }
        TaskKind::Cpu(k) => format!(
            "cpu step {k} {} {}",
            model.plan.steps[k].kind_name(),
            model.plan.steps[k].name
        ),
    }
}

/// Runs one task, unlocked. Outputs: `(value, tensor)`.
fn run_task(
    sh: &Shared,
    role: &mut Role,
    task: usize,
    inputs: Inputs,
) -> Result<Vec<(usize, Tensor)>, String> {
    let model = &*sh.model;
    match (sh.graph.tasks[task].kind, role, inputs) {
        (TaskKind::Launch(l), Role::Device(dev), Inputs::Launch(xs)) => {
            let refs: Vec<&Tensor> = xs.iter().map(|x| &**x).collect();
            dev.run_launch(model, l, &refs).map(|(outs, _)| outs)
        }
        (TaskKind::Cpu(k), Role::Cpu, Inputs::Cpu(xs)) => {
            let step = &model.plan.steps[k];
            let plan = &model.plan;
            let get = |v: usize| {
                xs.iter()
                    .find(|(u, _)| *u == v)
                    .map(|(_, t)| &**t)
                    .or_else(|| plan.values.get(v).and_then(|p| p.constant.as_deref()))
            };
            let outs = reference::eval_step_with(step, &get)?;
            if outs.len() < step.outputs.len() {
                return Err("too few outputs".into());
            }
            let mut r = Vec::with_capacity(step.outputs.len());
            for (&o, y) in step.outputs.iter().zip(outs) {
                if y.fact() != plan.values[o].fact {
                    return Err(format!(
                        "produced {}, the plan expects {}",
                        y.fact(),
                        plan.values[o].fact
                    ));
                }
                r.push((o, y));
            }
            Ok(r)
        }
        _ => Err("scheduled on a worker of the wrong kind".into()),
    }
}

/// A worker's loop: take the next job of its queue whose request is still running, run it,
/// store its outputs and queue the tasks it unblocks.
fn worker(sh: &Shared, w: usize, mut role: Role) {
    loop {
        let mut st = sh.lock();
        let job = loop {
            if let Some(j) = st.queues[w].pop_front() {
                break Some(j);
            }
            if st.shutdown {
                break None;
            }
            st = sh.work.wait(st).unwrap_or_else(|e| e.into_inner());
        };
        let Some(job) = job else { return };
        let live = st.reqs.get(&job.req).is_some_and(|r| r.result.is_none());
        if !live {
            st.backlog[w] = (st.backlog[w] - job.est).max(0.0);
            continue;
        }
        let inputs = {
            let r = &st.reqs[&job.req];
            let plan = &sh.model.plan;
            let get = |v: usize| r.values[v].clone();
            match sh.graph.tasks[job.task].kind {
                TaskKind::Launch(l) => Inputs::Launch(
                    sh.model.launches[l]
                        .inputs
                        .iter()
                        .map(|&v| get(v))
                        .collect::<Option<Vec<_>>>()
                        .unwrap_or_default(),
                ),
                TaskKind::Cpu(k) => Inputs::Cpu(
                    plan.steps[k]
                        .inputs
                        .iter()
                        .filter_map(|&v| get(v).map(|t| (v, t)))
                        .collect(),
                ),
            }
        };
        drop(st);
        let start = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| {
            run_task(sh, &mut role, job.task, inputs)
        }))
        .unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(format!("panicked: {what}"))
        });
        let end = Instant::now();
        let mut st = sh.lock();
        st.backlog[w] = (st.backlog[w] - job.est).max(0.0);
        let took = end.duration_since(start).as_secs_f64();
        if result.is_ok() {
            let t = job.task;
            st.cost[t] = if st.measured[t] {
                0.7 * st.cost[t] + 0.3 * took
            } else {
                took
            };
            st.measured[t] = true;
        }
        if sh.trace {
            let name = task_name(&sh.model, &sh.graph, job.task);
            let ev = Event {
                worker: w,
                request: job.req,
                task: job.task,
                name,
                queued: sh.secs(job.queued),
                start: sh.secs(start),
                end: sh.secs(end),
                failed: result.is_err(),
            };
            st.events.push(ev);
        }
        let next = st.schedule.next_of(&sh.graph, job.task);
        let Some(r) = st.reqs.get_mut(&job.req) else {
            continue;
        };
        if r.result.is_some() {
            continue;
        }
        match result {
            Err(message) => {
                r.result = Some(Err(ExecError::Task {
                    request: job.req,
                    task: task_name(&sh.model, &sh.graph, job.task),
                    worker: sh.names[w].clone(),
                    message,
                }));
                r.values = Vec::new();
                st.active -= 1;
                sh.done.notify_all();
            }
            Ok(outs) => {
                for (v, y) in outs {
                    r.values[v] = Some(Arc::new(y));
                }
                r.left -= 1;
                let mut ready = Vec::new();
                for n in next {
                    r.pending[n] -= 1;
                    if r.pending[n] == 0 {
                        ready.push(n);
                    }
                }
                if r.left == 0 {
                    finish(sh, &mut st, job.req);
                } else {
                    for n in ready {
                        sh.dispatch(&mut st, job.req, n);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Plan, QuantParams, Step, StepKind};
    use crate::tensor::{DType, Fact};
    use ndarray::{ArrayD, IxDyn};

    /// A model without launches: x -> (quantize a -> dequantize a), (quantize b ->
    /// dequantize b): two independent CPU branches, two outputs.
    fn two_branches() -> Arc<Model> {
        let mut plan = Plan::default();
        let f32s = Fact::new(DType::F32, vec![1, 64]);
        let i8s = Fact::new(DType::I8, vec![1, 64]);
        let x = plan.add_value("x", f32s.clone(), None);
        plan.inputs.push(x);
        for (i, scale) in [0.05f32, 0.11].into_iter().enumerate() {
            let q = QuantParams {
                scale,
                zero_point: i as i32,
            };
            let qv = plan.add_value(format!("q{i}"), i8s.clone(), None);
            let y = plan.add_value(format!("y{i}"), f32s.clone(), None);
            plan.steps.push(Step {
                name: format!("quantize{i}"),
                inputs: vec![x],
                outputs: vec![qv],
                kind: StepKind::Quantize {
                    q,
                    lo: i8::MIN,
                    hi: i8::MAX,
                },
            });
            plan.steps.push(Step {
                name: format!("dequantize{i}"),
                inputs: vec![qv],
                outputs: vec![y],
                kind: StepKind::Dequantize(q),
            });
            plan.outputs.push(y);
        }
        plan.validate().unwrap();
        Arc::new(Model {
            config: isa::HwConfig::default(),
            source: "two_branches".into(),
            plan,
            accel: Vec::new(),
            launches: Vec::new(),
        })
    }

    fn input(seed: usize) -> Vec<Tensor> {
        let v = (0..64).map(|i| ((i * 7 + seed * 13) % 50) as f32 / 10.0 - 2.5);
        vec![Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(&[1, 64]), v.collect()).unwrap(),
        )]
    }

    #[test]
    fn every_policy_gives_the_reference_outputs_with_several_requests_in_flight() {
        let m = two_branches();
        let g = TaskGraph::of_model(&m);
        assert_eq!(g.branches().len(), 1);
        let requests: Vec<Vec<Tensor>> = (0..6).map(input).collect();
        let want: Vec<Vec<Tensor>> = requests
            .iter()
            .map(|x| reference::run_plan(&m.plan, x).unwrap().outputs(&m.plan))
            .collect();
        for policy in Policy::ALL {
            let ex = Executor::new(
                m.clone(),
                Vec::new(),
                ExecOptions {
                    policy,
                    cpu_threads: 2,
                    in_flight: 3,
                    trace: true,
                },
            )
            .unwrap();
            if policy == Policy::Auto {
                let times = ex.choose(&requests[0], 2).unwrap();
                assert_eq!(times.len(), 5);
                assert!(ex.costs().1.iter().all(|&m| m), "every task measured");
            }
            let done = ex.run_many(&requests).unwrap();
            for (d, w) in done.iter().zip(&want) {
                assert_eq!(&d.outputs, w, "{policy}");
            }
            let tl = ex.take_timeline();
            assert!(tl.events.len() >= 4 * requests.len(), "{policy}");
            let s = tl.stats();
            assert_eq!(s.workers.len(), 2);
            assert!(s.workers.iter().map(|w| w.tasks).sum::<usize>() >= 24);
            assert!(tl.chrome_json().contains("cpu step 0 Quantize quantize0"));
        }
    }

    #[test]
    fn by_op_puts_the_two_branches_on_both_cpu_workers() {
        let ex = Executor::new(
            two_branches(),
            Vec::new(),
            ExecOptions {
                policy: Policy::ByOp,
                cpu_threads: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let s = ex.schedule();
        assert_ne!(s.assign[0], s.assign[2], "{s:?}");
        assert_eq!(ex.workers(), ["cpu0", "cpu1"]);
    }

    #[test]
    fn bad_inputs_tickets_and_options_are_errors() {
        let m = two_branches();
        let ex = Executor::new(m.clone(), Vec::new(), ExecOptions::default()).unwrap();
        let e = ex.submit(Vec::new()).unwrap_err();
        assert!(e.to_string().contains("the model has 1 input(s)"), "{e}");
        let e = ex.try_wait(Ticket(99)).unwrap_err();
        assert_eq!(e, ExecError::UnknownTicket(99));
        let t = ex.submit(input(0)).unwrap();
        ex.wait(t, Some(Duration::from_secs(600))).unwrap();
        assert_eq!(ex.try_wait(t).unwrap_err(), ExecError::UnknownTicket(t.0));
        let no_cpu = ExecOptions {
            cpu_threads: 0,
            ..Default::default()
        };
        let e = Executor::new(m.clone(), Vec::new(), no_cpu).err().unwrap();
        assert!(e.to_string().contains("no CPU worker"), "{e}");
        let none_in_flight = ExecOptions {
            in_flight: 0,
            ..Default::default()
        };
        assert!(Executor::new(m, Vec::new(), none_in_flight).is_err());
    }

    #[test]
    fn a_device_that_cannot_open_is_named() {
        let m = two_branches();
        let bad = DeviceSpec::new("nowhere", || Err("no such board".to_string()));
        let e = Executor::new(m, vec![bad], ExecOptions::default())
            .err()
            .unwrap();
        let s = e.to_string();
        assert!(
            s.contains("device 0 (dev0 nowhere)") && s.contains("no such board"),
            "{s}"
        );
    }
}
