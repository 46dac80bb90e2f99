//! Synchronous FIFOs with valid/ready on both sides and an occupancy count.
//!
//! * [`sync_fifo`] stores entries in a memory that synthesizes to block RAM. Its output is
//!   the memory's read register: a word written at cycle t is visible at t + 2.
//! * [`small_fifo`] stores entries in registers (small depths): a word written at cycle t is
//!   visible at t + 1.
//!
//! Ports of both: `in_valid`, `in_ready`, `in_data`, `out_valid`, `out_ready`, `out_data`
//! and `count` (entries held, `log2(depth) + 1` bits). They hold exactly `depth` entries;
//! `in_ready` is `count != depth` and does not depend on `out_ready` in the same cycle, and
//! nothing combinational runs from the input side to the output side.

use crate::{count_bits, Module, ModuleBuilder};

use super::require_pow2;

/// A FIFO of `depth` (power of two, 2 or more) entries of `width` bits, in block RAM.
/// Module name `sync_fifo_w<width>_d<depth>`.
pub fn sync_fifo(width: u32, depth: u32) -> Module {
    require_pow2("sync_fifo depth", depth);
    assert!(
        depth >= 2,
        "sync_fifo depth must be at least 2, got {depth}"
    );
    let m = ModuleBuilder::new(&format!("sync_fifo_w{width}_d{depth}"));
    let aw = depth.trailing_zeros();
    let cw = count_bits(depth as u64);

    let in_valid = m.input("in_valid", 1);
    let in_data = m.input("in_data", width);
    let out_ready = m.input("out_ready", 1);

    let wptr = m.reg("wptr", aw, 0);
    let rptr = m.reg("rptr", aw, 0);
    let stored = m.reg("stored", cw, 0); // entries in the memory
    let out_valid = m.reg("out_valid_q", 1, 0);
    let count = m.reg("count_q", cw, 0); // stored + out_valid

    let in_ready = m.output_from("in_ready", count.ne(depth));
    let push = m.named("push", in_valid & in_ready);
    let pop = m.named("pop", out_valid & out_ready);
    // Fetch the next word into the output register when it is empty or being emptied.
    let fetch = m.named("fetch", stored.ne(0) & (!out_valid | out_ready));

    let mem = m.mem("entries", width, depth);
    mem.write(push, wptr, in_data);
    let out_data = mem.read_en(fetch, rptr);

    m.next_when(wptr, push, wptr + 1);
    m.next_when(rptr, fetch, rptr + 1);
    m.next(stored, stored + push.zext(cw) - fetch.zext(cw));
    m.next(out_valid, fetch | (out_valid & !out_ready));
    m.next(count, count + push.zext(cw) - pop.zext(cw));

    m.output_from("out_valid", out_valid);
    m.output_from("out_data", out_data);
    m.output_from("count", count);
    m.finish().expect("sync_fifo is well formed")
}

/// A FIFO of `depth` (power of two, 2 or more) entries of `width` bits, in registers.
/// Module name `small_fifo_w<width>_d<depth>`.
pub fn small_fifo(width: u32, depth: u32) -> Module {
    require_pow2("small_fifo depth", depth);
    assert!(
        depth >= 2,
        "small_fifo depth must be at least 2, got {depth}"
    );
    let m = ModuleBuilder::new(&format!("small_fifo_w{width}_d{depth}"));
    let aw = depth.trailing_zeros();
    let cw = count_bits(depth as u64);

    let in_valid = m.input("in_valid", 1);
    let in_data = m.input("in_data", width);
    let out_ready = m.input("out_ready", 1);

    let wptr = m.reg("wptr", aw, 0);
    let rptr = m.reg("rptr", aw, 0);
    let count = m.reg("count_q", cw, 0);

    let in_ready = m.output_from("in_ready", count.ne(depth));
    let out_valid = m.output_from("out_valid", count.ne(0));
    let push = m.named("push", in_valid & in_ready);
    let pop = m.named("pop", out_valid & out_ready);

    let entries: Vec<_> = (0..depth)
        .map(|i| {
            let e = m.reg_noreset(&format!("entry{i}"), width);
            m.next_when(e, push & wptr.eq(i), in_data);
            e
        })
        .collect();
    m.next_when(wptr, push, wptr + 1);
    m.next_when(rptr, pop, rptr + 1);
    m.next(count, count + push.zext(cw) - pop.zext(cw));

    m.output_from("out_data", m.index(rptr, &entries));
    m.output_from("count", count);
    m.finish().expect("small_fifo is well formed")
}
