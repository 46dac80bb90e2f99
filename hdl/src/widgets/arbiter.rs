//! A round-robin arbiter: several requesters, one grant at a time, fair rotation.

use crate::{addr_bits, Bits, Module, ModuleBuilder};

/// Round-robin arbiter for `n` (1 or more) requesters. Module name `rr_arbiter_<n>`.
///
/// Ports: `req` (`n` bits, one per requester), `ack` (the granted request is taken this
/// cycle), `grant` (one-hot, combinational from `req`), `grant_valid` (some request is
/// granted) and `grant_index`. After an `ack`, the requester just served has the lowest
/// priority; without `ack` the grant stays put while its request holds. Requester 0 has
/// the highest priority after reset.
pub fn rr_arbiter(n: u32) -> Module {
    assert!(n >= 1, "rr_arbiter needs at least one requester");
    let m = ModuleBuilder::new(&format!("rr_arbiter_{n}"));
    let req = m.input("req", n);
    let ack = m.input("ack", 1);
    // Requesters at or above the one after the last grant (a thermometer code).
    let mask = m.reg_bits("mask", Bits::ones(n));
    let masked = m.named("masked", req & mask);
    let pool = m.named("pool", m.mux(masked.any(), masked, req));
    // The lowest set bit of `pool`: x & -x.
    let grant = m.output_from("grant", pool & (-pool));
    let valid = m.output_from("grant_valid", req.any());
    m.next_when(mask, ack & valid, !((grant << 1) - 1));
    let iw = addr_bits(n as u64);
    let mut index = m.zero(iw);
    for i in 1..n {
        index = index | m.mux(grant.bit(i), m.lit(i as u64, iw), 0);
    }
    m.output_from("grant_index", index);
    m.finish().expect("rr_arbiter is well formed")
}
