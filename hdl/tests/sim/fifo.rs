//! Both FIFOs against a `VecDeque` with random valid/ready on both sides.

use std::collections::VecDeque;

use hdl::widgets::{small_fifo, sync_fifo};
use hdl::Module;

use crate::util::{build, Rng};

/// Drives `module` (a FIFO of `width` x `depth`) for `cycles` and checks it against a queue.
/// `latency` is the write-to-visible delay, bounding how long a non-empty FIFO may show
/// nothing.
fn check_fifo(module: Module, width: u32, depth: usize, latency: u32, seed: u64) {
    let mut sim = build(module);
    let in_valid = sim.port("in_valid");
    let in_data = sim.port("in_data");
    let in_ready = sim.port("in_ready");
    let out_valid = sim.port("out_valid");
    let out_ready = sim.port("out_ready");
    let out_data = sim.port("out_data");
    let count = sim.port("count");
    let words = width.div_ceil(32) as usize;
    let mut rng = Rng::new(seed);
    let mut model: VecDeque<Vec<u32>> = VecDeque::new();
    let mut next_in: Option<Vec<u32>> = None;
    let mut stall = 0;
    let (mut pushed, mut popped) = (0u64, 0u64);
    sim.reset(3);
    for cycle in 0..20_000u32 {
        // Phases: mostly filling, mostly draining, or balanced.
        let (p_in, p_out) = match (cycle / 500) % 3 {
            0 => (80, 30),
            1 => (30, 80),
            _ => (60, 60),
        };
        // A valid input holds its data until taken.
        if next_in.is_none() && rng.chance(p_in) {
            let mut v: Vec<u32> = (0..words).map(|_| rng.next_u64() as u32).collect();
            if !width.is_multiple_of(32) {
                v[words - 1] &= (1u32 << (width % 32)) - 1;
            }
            next_in = Some(v);
        }
        sim.set(in_valid, next_in.is_some() as u64);
        if let Some(v) = &next_in {
            sim.set_wide(in_data, v);
        }
        let ready = rng.chance(p_out);
        sim.set(out_ready, ready as u64);
        sim.eval();

        assert_eq!(
            sim.get(count) as usize,
            model.len(),
            "count at cycle {cycle}"
        );
        assert_eq!(
            sim.get_bool(in_ready),
            model.len() < depth,
            "in_ready at cycle {cycle} with {} entries",
            model.len()
        );
        if sim.get_bool(out_valid) {
            let front = model
                .front()
                .unwrap_or_else(|| panic!("out_valid while empty at cycle {cycle}"));
            assert_eq!(&sim.get_wide(out_data), front, "out_data at cycle {cycle}");
            stall = 0;
        } else if !model.is_empty() {
            stall += 1;
            assert!(
                stall <= latency,
                "non-empty FIFO shows no data for {stall} cycles at {cycle}"
            );
        }
        if sim.get_bool(out_valid) && ready {
            model.pop_front();
            popped += 1;
        }
        if next_in.is_some() && sim.get_bool(in_ready) {
            model.push_back(next_in.take().unwrap());
            pushed += 1;
        }
        sim.tick();
    }
    assert!(
        pushed > 5000 && popped > 5000,
        "too little traffic: {pushed} in, {popped} out"
    );
}

#[test]
fn sync_fifo_matches_queue() {
    check_fifo(sync_fifo(37, 8), 37, 8, 2, 11);
}

#[test]
fn sync_fifo_wide_matches_queue() {
    check_fifo(sync_fifo(100, 16), 100, 16, 2, 12);
}

#[test]
fn small_fifo_matches_queue() {
    check_fifo(small_fifo(5, 4), 5, 4, 1, 13);
}
