//! A compiled model as a task graph: every launch (a device program running consecutive
//! accelerator steps) and every step run on the CPU (quantize, dequantize, fallback ops,
//! layers the back end refused) is a task, with an edge from the task producing each tensor
//! to every task reading it. Tasks with no path between them may run at the same time (on
//! different devices, or on CPU workers); the pool executor ([`crate::exec`]) runs the graph,
//! and [`TaskGraph::summary`] says how much of it can overlap.
//!
//! The graph is derived from the plan and the launches when a model is read, so the model
//! file holds nothing more: its steps list every value read and written, which is the
//! whole graph.

use std::collections::HashMap;
use std::fmt;

use crate::model::Model;
use crate::plan::ValueId;

/// What a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// Launch `.0` of [`Model::launches`], on an accelerator.
    Launch(usize),
    /// Plan step `.0` on the CPU.
    Cpu(usize),
}

/// One node of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub kind: TaskKind,
    /// The plan steps it runs, in order.
    pub steps: Vec<usize>,
    /// Values it reads that another task (or the caller, for model inputs) computes: no
    /// constants, no values its own steps produce.
    pub reads: Vec<ValueId>,
    /// Values it produces that something outside it reads (another task, or the caller as a
    /// model output).
    pub writes: Vec<ValueId>,
}

impl Task {
    pub fn is_launch(&self) -> bool {
        matches!(self.kind, TaskKind::Launch(_))
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TaskKind::Launch(l) => write!(f, "launch {l}"),
            TaskKind::Cpu(k) => write!(f, "cpu step {k}"),
        }
    }
}

/// Independent branches between a fork and (where they meet again) a join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fork {
    /// The task whose output the branches read; `None` when they start at model inputs.
    pub fork: Option<usize>,
    /// Each branch: a chain of tasks, in order. At least two, none empty.
    pub branches: Vec<Vec<usize>>,
    /// The task where every branch ends, if they all meet in one.
    pub join: Option<usize>,
}

/// How much of a graph can overlap (see [`TaskGraph::summary`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub tasks: usize,
    pub launches: usize,
    pub cpu: usize,
    pub edges: usize,
    /// Tasks on the longest dependency chain: the fewest sequential rounds any schedule needs.
    pub critical_path: usize,
    /// Most tasks on one level (tasks whose longest chain from a source is equally long).
    pub width: usize,
    /// Tasks with at least one other task they may overlap with (no path either way).
    pub overlappable: usize,
    /// Forks with at least two independent branches.
    pub forks: usize,
    /// Branches over all those forks.
    pub branches: usize,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task graph: {} tasks ({} launches, {} CPU steps), {} edges; critical path {} of {} \
             tasks, up to {} at once; {} tasks can overlap another; {} independent branches at {} \
             forks",
            self.tasks,
            self.launches,
            self.cpu,
            self.edges,
            self.critical_path,
            self.tasks,
            self.width,
            self.overlappable,
            self.branches,
            self.forks
        )
    }
}

/// The task graph (see the module documentation). Tasks are in a topological order (the
/// order of their first plan step).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskGraph {
    pub tasks: Vec<Task>,
    /// Per task, the tasks it reads from, ascending.
    pub preds: Vec<Vec<usize>>,
    /// Per task, the tasks reading it, ascending.
    pub succs: Vec<Vec<usize>>,
    /// Per task, the values each of its predecessors hands it: `(pred, value)`.
    pub edges: Vec<Vec<(usize, ValueId)>>,
}

impl TaskGraph {
    /// The graph of a compiled model.
    pub fn of_model(model: &Model) -> TaskGraph {
        let plan = &model.plan;
        let mut launch_of = vec![None; plan.steps.len()];
        for a in &model.accel {
            if let Some(l) = a.launch() {
                launch_of[a.step] = Some(l);
            }
        }
        let mut tasks: Vec<Task> = Vec::new();
        for (k, _) in plan.steps.iter().enumerate() {
            let (kind, steps) = match launch_of[k] {
                Some(l) if model.launches[l].steps.first() == Some(&k) => {
                    (TaskKind::Launch(l), model.launches[l].steps.clone())
                }
                Some(_) => continue,
                None => (TaskKind::Cpu(k), vec![k]),
            };
            let produced: Vec<ValueId> = steps
                .iter()
                .flat_map(|&s| plan.steps[s].outputs.iter().copied())
                .collect();
            let mut reads: Vec<ValueId> = Vec::new();
            for &s in &steps {
                for &v in &plan.steps[s].inputs {
                    if plan.values[v].constant.is_none()
                        && !produced.contains(&v)
                        && !reads.contains(&v)
                    {
                        reads.push(v);
                    }
                }
            }
            tasks.push(Task {
                kind,
                steps,
                reads,
                writes: produced,
            });
        }
        // Writes: what someone outside the task reads.
        let mut read_outside: HashMap<ValueId, bool> = HashMap::new();
        for t in &tasks {
            for &v in &t.reads {
                read_outside.insert(v, true);
            }
        }
        for &v in &plan.outputs {
            read_outside.insert(v, true);
        }
        for t in &mut tasks {
            t.writes.retain(|v| read_outside.contains_key(v));
        }
        Self::from_tasks(tasks).expect("a validated plan's steps are in a topological order")
    }

    /// The graph of `tasks` (in a topological order), with an edge from the task writing each
    /// value to every task reading it. Values nobody writes are inputs of the graph. Fails
    /// when a value is written twice or read before it is written.
    pub fn from_tasks(tasks: Vec<Task>) -> Result<TaskGraph, String> {
        let mut producer: HashMap<ValueId, usize> = HashMap::new();
        for (i, t) in tasks.iter().enumerate() {
            for &v in &t.writes {
                if let Some(p) = producer.insert(v, i) {
                    return Err(format!("value %{v} is written by {} and {t}", tasks[p]));
                }
            }
        }
        let n = tasks.len();
        let mut preds = vec![Vec::new(); n];
        let mut succs = vec![Vec::new(); n];
        let mut edges = vec![Vec::new(); n];
        for (i, t) in tasks.iter().enumerate() {
            for &v in &t.reads {
                let Some(&p) = producer.get(&v) else { continue };
                if p >= i {
                    return Err(format!(
                        "{t} reads value %{v} before {} writes it",
                        tasks[p]
                    ));
                }
                edges[i].push((p, v));
                if !preds[i].contains(&p) {
                    preds[i].push(p);
                    succs[p].push(i);
                }
            }
            preds[i].sort_unstable();
        }
        for s in &mut succs {
            s.sort_unstable();
        }
        Ok(TaskGraph {
            tasks,
            preds,
            succs,
            edges,
        })
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The task of launch `l`.
    pub fn task_of_launch(&self, l: usize) -> Option<usize> {
        self.tasks
            .iter()
            .position(|t| t.kind == TaskKind::Launch(l))
    }

    /// Per task, its level: the number of tasks on the longest chain ending at it, minus one.
    pub fn levels(&self) -> Vec<usize> {
        let mut level = vec![0usize; self.len()];
        for i in 0..self.len() {
            level[i] = self.preds[i]
                .iter()
                .map(|&p| level[p] + 1)
                .max()
                .unwrap_or(0);
        }
        level
    }

    /// The longest chain by `cost` (one per task): its total and its tasks, in order.
    pub fn critical_path(&self, cost: &[f64]) -> (f64, Vec<usize>) {
        let n = self.len();
        let mut best = vec![0.0f64; n];
        let mut from: Vec<Option<usize>> = vec![None; n];
        for i in 0..n {
            let (b, f) = self.preds[i]
                .iter()
                .map(|&p| (best[p], Some(p)))
                .fold((0.0, None), |a, b| if b.0 > a.0 { b } else { a });
            best[i] = b + cost[i];
            from[i] = f;
        }
        let Some(end) = (0..n).max_by(|&a, &b| best[a].total_cmp(&best[b]).then(b.cmp(&a))) else {
            return (0.0, Vec::new());
        };
        let mut path = vec![end];
        while let Some(p) = from[*path.last().expect("non-empty")] {
            path.push(p);
        }
        path.reverse();
        (best[end], path)
    }

    /// Per task, the longest chain by `cost` from it to a sink, itself included (the
    /// "upward rank" of list scheduling).
    pub fn upward_rank(&self, cost: &[f64]) -> Vec<f64> {
        let mut rank = vec![0.0f64; self.len()];
        for i in (0..self.len()).rev() {
            let after = self.succs[i].iter().map(|&s| rank[s]).fold(0.0, f64::max);
            rank[i] = cost[i] + after;
        }
        rank
    }

    /// Per task, every task it depends on (directly or not), as a bit set.
    fn ancestors(&self) -> Vec<Vec<u64>> {
        let words = self.len().div_ceil(64);
        let mut anc = vec![vec![0u64; words]; self.len()];
        for i in 0..self.len() {
            for &p in &self.preds[i].clone() {
                let (lo, hi) = anc.split_at_mut(i);
                for (a, b) in hi[0].iter_mut().zip(&lo[p]) {
                    *a |= b;
                }
                hi[0][p / 64] |= 1 << (p % 64);
            }
        }
        anc
    }

    /// Whether tasks `a` and `b` have no path between them (they may run at the same time).
    pub fn independent(&self, a: usize, b: usize) -> bool {
        if a == b {
            return false;
        }
        let anc = self.ancestors();
        let has = |x: usize, y: usize| anc[x][y / 64] >> (y % 64) & 1 == 1;
        !has(a, b) && !has(b, a)
    }

    /// The graph cut into chains: a task continues its predecessor's chain when it is that
    /// task's only successor and that task its only predecessor; forks and joins start new
    /// chains. Every task is in exactly one chain; chains are in order of their first task.
    pub fn chains(&self) -> Vec<Vec<usize>> {
        let mut chain_of = vec![usize::MAX; self.len()];
        let mut chains: Vec<Vec<usize>> = Vec::new();
        for i in 0..self.len() {
            match self.preds[i][..] {
                [p] if self.succs[p].len() == 1 => {
                    let c = chain_of[p];
                    chains[c].push(i);
                    chain_of[i] = c;
                }
                _ => {
                    chain_of[i] = chains.len();
                    chains.push(vec![i]);
                }
            }
        }
        chains
    }

    /// The independent branches: per fork (a task read by several tasks, or the model inputs
    /// read by several tasks with no predecessor), the chains starting at its successors,
    /// where at least two are not empty. A successor that is itself a join (a skip
    /// connection) is no branch.
    pub fn branches(&self) -> Vec<Fork> {
        let follow = |start: usize| {
            let mut chain = vec![start];
            let mut at = start;
            while let [s] = self.succs[at][..] {
                if self.preds[s].len() != 1 {
                    break;
                }
                chain.push(s);
                at = s;
            }
            chain
        };
        let ends = |chain: &Vec<usize>| -> Option<usize> {
            match self.succs[*chain.last().expect("non-empty")][..] {
                [s] => Some(s),
                _ => None,
            }
        };
        let mut forks = Vec::new();
        let sources: Vec<usize> = (0..self.len())
            .filter(|&i| self.preds[i].is_empty())
            .collect();
        let starts = std::iter::once((None, sources)).chain(
            (0..self.len())
                .filter(|&i| self.succs[i].len() > 1)
                .map(|i| (Some(i), self.succs[i].clone())),
        );
        for (fork, succs) in starts {
            let branches: Vec<Vec<usize>> = succs
                .into_iter()
                .filter(|&s| self.preds[s].len() == 1 || fork.is_none())
                .filter(|&s| fork.is_some() || self.preds[s].is_empty())
                .map(follow)
                .collect();
            if branches.len() < 2 {
                continue;
            }
            let first_end = ends(&branches[0]);
            let join = first_end.filter(|_| branches.iter().all(|b| ends(b) == first_end));
            forks.push(Fork {
                fork,
                branches,
                join,
            });
        }
        forks
    }

    /// How much of the graph can overlap.
    pub fn summary(&self) -> Summary {
        let n = self.len();
        let levels = self.levels();
        let mut per_level: HashMap<usize, usize> = HashMap::new();
        for &l in &levels {
            *per_level.entry(l).or_default() += 1;
        }
        let anc = self.ancestors();
        let has = |x: usize, y: usize| anc[x][y / 64] >> (y % 64) & 1 == 1;
        let overlappable = (0..n)
            .filter(|&a| (0..n).any(|b| a != b && !has(a, b) && !has(b, a)))
            .count();
        let forks = self.branches();
        let launches = self.tasks.iter().filter(|t| t.is_launch()).count();
        Summary {
            tasks: n,
            launches,
            cpu: n - launches,
            edges: self.succs.iter().map(Vec::len).sum(),
            critical_path: levels.iter().max().map_or(0, |l| l + 1),
            width: per_level.values().copied().max().unwrap_or(0),
            overlappable,
            forks: forks.len(),
            branches: forks.iter().map(|f| f.branches.len()).sum(),
        }
    }
}

/// Hand-built graphs for the tests of this module and of the executor.
#[cfg(test)]
impl Task {
    /// The task of step `i` alone (launch `i` or CPU step `i`), reading and writing `reads`
    /// and `writes`.
    pub(crate) fn of_step(i: usize, launch: bool, reads: &[ValueId], writes: &[ValueId]) -> Task {
        Task {
            kind: if launch {
                TaskKind::Launch(i)
            } else {
                TaskKind::Cpu(i)
            },
            steps: vec![i],
            reads: reads.to_vec(),
            writes: writes.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task reading and writing the given values (kind by position: even launches).
    fn t(i: usize, reads: &[ValueId], writes: &[ValueId]) -> Task {
        Task::of_step(i, i.is_multiple_of(2), reads, writes)
    }

    /// Input 0 -> task 0 -> (1: a branch of two tasks 1, 2), (3), (4) -> join 5.
    fn inception() -> TaskGraph {
        TaskGraph::from_tasks(vec![
            t(0, &[0], &[1]),
            t(1, &[1], &[2]),
            t(2, &[2], &[3]),
            t(3, &[1], &[4]),
            t(4, &[1], &[5]),
            t(5, &[3, 4, 5], &[6]),
        ])
        .unwrap()
    }

    #[test]
    fn edges_go_from_producer_to_readers() {
        let g = inception();
        assert_eq!(g.preds[5], vec![2, 3, 4]);
        assert_eq!(g.succs[0], vec![1, 3, 4]);
        assert_eq!(g.edges[5], vec![(2, 3), (3, 4), (4, 5)]);
        assert!(g.preds[0].is_empty());
    }

    #[test]
    fn an_inception_block_has_three_branches_between_fork_and_join() {
        let g = inception();
        assert_eq!(
            g.branches(),
            vec![Fork {
                fork: Some(0),
                branches: vec![vec![1, 2], vec![3], vec![4]],
                join: Some(5),
            }]
        );
        assert_eq!(
            g.chains(),
            vec![vec![0], vec![1, 2], vec![3], vec![4], vec![5]]
        );
        assert!(g.independent(2, 3));
        assert!(g.independent(1, 4));
        assert!(!g.independent(0, 2));
        assert!(!g.independent(2, 5));
        let s = g.summary();
        assert_eq!(
            (s.tasks, s.edges, s.critical_path, s.width, s.overlappable),
            (6, 7, 4, 3, 4)
        );
        assert_eq!((s.forks, s.branches), (1, 3));
        assert!(s.to_string().contains("critical path 4 of 6 tasks"), "{s}");
    }

    #[test]
    fn a_chain_cannot_overlap() {
        let g = TaskGraph::from_tasks(vec![t(0, &[0], &[1]), t(1, &[1], &[2]), t(2, &[2], &[3])])
            .unwrap();
        let s = g.summary();
        assert_eq!((s.critical_path, s.width, s.overlappable), (3, 1, 0));
        assert!(g.branches().is_empty());
        assert_eq!(g.chains(), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn a_residual_skip_is_no_branch() {
        // 0 -> 1 -> 2(add of 1 and 0)
        let g = TaskGraph::from_tasks(vec![
            t(0, &[0], &[1]),
            t(1, &[1], &[2]),
            t(2, &[1, 2], &[3]),
        ])
        .unwrap();
        assert!(g.branches().is_empty());
        assert_eq!(g.summary().overlappable, 0);
    }

    #[test]
    fn branches_from_the_model_inputs_have_no_fork_task() {
        let g = TaskGraph::from_tasks(vec![
            t(0, &[0], &[1]),
            t(1, &[0], &[2]),
            t(2, &[1, 2], &[3]),
        ])
        .unwrap();
        assert_eq!(
            g.branches(),
            vec![Fork {
                fork: None,
                branches: vec![vec![0], vec![1]],
                join: Some(2),
            }]
        );
    }

    #[test]
    fn critical_path_and_ranks_follow_the_costs() {
        let g = inception();
        let cost = [1.0, 1.0, 1.0, 5.0, 1.0, 1.0];
        let (len, path) = g.critical_path(&cost);
        assert_eq!(len, 7.0);
        assert_eq!(path, vec![0, 3, 5]);
        let rank = g.upward_rank(&cost);
        assert_eq!(rank[0], 7.0);
        assert_eq!(rank[1], 3.0);
        assert_eq!(rank[5], 1.0);
    }

    #[test]
    fn bad_orders_are_refused() {
        let e = TaskGraph::from_tasks(vec![t(0, &[1], &[2]), t(1, &[0], &[1])]).unwrap_err();
        assert!(e.contains("before"), "{e}");
        let e = TaskGraph::from_tasks(vec![t(0, &[0], &[1]), t(1, &[0], &[1])]).unwrap_err();
        assert!(e.contains("written by"), "{e}");
    }
}
