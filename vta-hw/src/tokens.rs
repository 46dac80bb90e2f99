//! The dependency-token queues `vta_tokens` (spec section 5.2): `l2g`, `g2l`, `g2s`, `s2g`,
//! each a counter of `TOKEN_QUEUE_DEPTH` capacity (tokens carry no data, so a counter is
//! all a queue needs).
//!
//! Ports per queue `<q>`: `<q>_push`, `<q>_pop` (inputs; the modules only push when
//! `<q>_can_push` and pop when `<q>_can_pop`), `<q>_can_push` (count below capacity),
//! `<q>_can_pop` (count non-zero), `<q>_tokens` (the tokens held, for the debug outputs).
//! `clear` (the start of a run) empties every queue.

use hdl::{count_bits, Module, ModuleBuilder};
use isa::{HwConfig, Queue};

/// Builds `vta_tokens` for `cfg`.
pub fn tokens(cfg: &HwConfig) -> Module {
    let depth = cfg.token_queue_depth as u64;
    let w = count_bits(depth);
    let m = ModuleBuilder::new("vta_tokens");
    let clear = m.input("clear", 1);
    for q in Queue::ALL {
        let push = m.input(&format!("{q}_push"), 1);
        let pop = m.input(&format!("{q}_pop"), 1);
        let count = m.reg(&format!("{q}_count"), w, 0);
        m.next(count, m.mux(clear, 0, count + push.zext(w) - pop.zext(w)));
        m.output_from(&format!("{q}_can_push"), count.ne(depth));
        m.output_from(&format!("{q}_can_pop"), count.ne(0));
        m.output_from(&format!("{q}_tokens"), count);
    }
    m.finish().expect("vta_tokens is well formed")
}
