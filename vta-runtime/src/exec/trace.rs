//! The timeline of an executor's runs: one event per task run (worker, request, when it was
//! queued, started and ended), per-worker utilization, time with two or more workers busy,
//! queue waits, and a Chrome-trace / Perfetto JSON file with one track per worker (its
//! launches or CPU steps) and one per worker's queue (the waits).

use std::fmt::Write as _;

/// One task run.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub worker: usize,
    pub request: u64,
    pub task: usize,
    /// What ran: `launch 3 (steps 4-9)`, `cpu step 11 Cpu:Softmax`.
    pub name: String,
    /// Seconds since the timeline's start.
    pub queued: f64,
    pub start: f64,
    pub end: f64,
    /// Whether it failed.
    pub failed: bool,
}

/// Per-worker figures over a timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerStats {
    pub name: String,
    pub tasks: usize,
    /// Seconds running tasks.
    pub busy: f64,
    /// `busy` over the timeline's span.
    pub utilization: f64,
    /// Seconds tasks waited in its queue (from ready to started), summed.
    pub queue_wait: f64,
}

/// What the executor recorded (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// Worker names (`dev0 fsim`, `cpu1`), by worker index.
    pub workers: Vec<String>,
    pub events: Vec<Event>,
}

/// Summary figures of a timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineStats {
    /// From the first task queued to the last one ended, seconds.
    pub span: f64,
    pub workers: Vec<WorkerStats>,
    /// Seconds during which at least two workers were busy.
    pub overlap: f64,
    /// Summed work of the busiest worker: no schedule on these workers beats it.
    pub lower_bound: f64,
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl Timeline {
    pub fn stats(&self) -> TimelineStats {
        let t0 = self
            .events
            .iter()
            .map(|e| e.queued.min(e.start))
            .fold(f64::INFINITY, f64::min);
        let t1 = self.events.iter().map(|e| e.end).fold(0.0, f64::max);
        let span = if self.events.is_empty() {
            0.0
        } else {
            (t1 - t0).max(0.0)
        };
        let workers: Vec<WorkerStats> = self
            .workers
            .iter()
            .enumerate()
            .map(|(w, name)| {
                let mine = self.events.iter().filter(|e| e.worker == w);
                let (mut tasks, mut busy, mut wait) = (0, 0.0, 0.0);
                for e in mine {
                    tasks += 1;
                    busy += e.end - e.start;
                    wait += (e.start - e.queued).max(0.0);
                }
                WorkerStats {
                    name: name.clone(),
                    tasks,
                    busy,
                    utilization: if span > 0.0 { busy / span } else { 0.0 },
                    queue_wait: wait,
                }
            })
            .collect();
        // Sweep: +1 at each start, -1 at each end.
        let mut edges: Vec<(f64, i32)> = self
            .events
            .iter()
            .flat_map(|e| [(e.start, 1), (e.end, -1)])
            .collect();
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut busy, mut overlap, mut last) = (0i32, 0.0, 0.0);
        for (t, d) in edges {
            if busy >= 2 {
                overlap += t - last;
            }
            busy += d;
            last = t;
        }
        let lower_bound = workers.iter().map(|w| w.busy).fold(0.0, f64::max);
        TimelineStats {
            span,
            workers,
            overlap,
            lower_bound,
        }
    }

    /// The Chrome-trace JSON (open in Perfetto, ui.perfetto.dev, or chrome://tracing): per
    /// worker a track of its task runs (`cat` launch or cpu, `args` request and task) and a
    /// track `<worker> queue` of each run's wait between ready and started.
    pub fn chrome_json(&self) -> String {
        chrome_json_of(&[("vta executor", self)])
    }

    /// This timeline's trace events, as process `pid` named `process`.
    fn chrome_events(&self, pid: usize, process: &str, ev: &mut Vec<String>) {
        let us = |s: f64| s * 1e6;
        let queue_tid = |w: usize| 1000 + w;
        for (w, name) in self.workers.iter().enumerate() {
            ev.push(format!(
                r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{w},"args":{{"name":{}}}}}"#,
                json_str(name)
            ));
            ev.push(format!(
                r#"{{"ph":"M","name":"thread_sort_index","pid":{pid},"tid":{w},"args":{{"sort_index":{w}}}}}"#
            ));
            ev.push(format!(
                r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{},"args":{{"name":{}}}}}"#,
                queue_tid(w),
                json_str(&format!("{name} queue"))
            ));
        }
        ev.push(format!(
            r#"{{"ph":"M","name":"process_name","pid":{pid},"args":{{"name":{}}}}}"#,
            json_str(process)
        ));
        for e in &self.events {
            let cat = if e.name.starts_with("launch") {
                "launch"
            } else {
                "cpu"
            };
            ev.push(format!(
                r#"{{"ph":"X","name":{},"cat":"{cat}","pid":{pid},"tid":{},"ts":{:.3},"dur":{:.3},"args":{{"request":{},"task":{},"failed":{}}}}}"#,
                json_str(&e.name),
                e.worker,
                us(e.start),
                us(e.end - e.start),
                e.request,
                e.task,
                e.failed
            ));
            if e.start > e.queued {
                ev.push(format!(
                    r#"{{"ph":"X","name":{},"cat":"wait","pid":{pid},"tid":{},"ts":{:.3},"dur":{:.3},"args":{{"request":{},"task":{}}}}}"#,
                    json_str(&format!("wait: {}", e.name)),
                    queue_tid(e.worker),
                    us(e.queued),
                    us(e.start - e.queued),
                    e.request,
                    e.task
                ));
            }
        }
    }
}

/// One Chrome-trace JSON file of several timelines, each a process of its own (named, e.g.
/// by the policy that made it), so they can be compared one above the other in Perfetto.
pub fn chrome_json_of(timelines: &[(&str, &Timeline)]) -> String {
    let mut ev: Vec<String> = Vec::new();
    for (i, (name, tl)) in timelines.iter().enumerate() {
        tl.chrome_events(i + 1, name, &mut ev);
    }
    format!(
        "{{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n{}\n]}}\n",
        ev.join(",\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(worker: usize, start: f64, end: f64) -> Event {
        Event {
            worker,
            request: 0,
            task: 0,
            name: format!("launch {worker}"),
            queued: start - 0.5,
            start,
            end,
            failed: false,
        }
    }

    #[test]
    fn utilization_overlap_and_waits() {
        let t = Timeline {
            workers: vec!["dev0 fsim".into(), "cpu0".into()],
            events: vec![ev(0, 1.0, 3.0), ev(1, 2.0, 5.0), ev(0, 4.0, 5.0)],
        };
        let s = t.stats();
        assert_eq!(s.span, 4.5);
        assert_eq!(s.workers[0].busy, 3.0);
        assert_eq!(s.workers[1].busy, 3.0);
        assert_eq!(s.workers[0].tasks, 2);
        assert_eq!(s.workers[0].queue_wait, 1.0);
        assert_eq!(s.overlap, 2.0);
        assert_eq!(s.lower_bound, 3.0);
    }

    #[test]
    fn the_chrome_trace_names_every_track_and_escapes_names() {
        let mut t = Timeline {
            workers: vec!["dev0 \"x\"".into()],
            events: vec![ev(0, 1.0, 2.0)],
        };
        t.events[0].name = "cpu step 1 a\\b".into();
        let j = t.chrome_json();
        assert!(j.contains(r#""name":"dev0 \"x\"""#), "{j}");
        assert!(j.contains(r#""name":"cpu step 1 a\\b","cat":"cpu""#), "{j}");
        assert!(j.contains(r#""ts":1000000.000,"dur":1000000.000"#), "{j}");
        assert!(j.contains(r#""cat":"wait""#), "{j}");
        assert!(j.starts_with("{\"displayTimeUnit\""));
    }
}
