//! The round-robin arbiter against a pointer-based Rust model.

use hdl::widgets::rr_arbiter;

use crate::util::{build, Rng};

#[test]
fn rr_arbiter_is_round_robin() {
    let n = 5u32;
    let mut sim = build(rr_arbiter(n));
    let (req, ack) = (sim.port("req"), sim.port("ack"));
    let (grant, valid, index) = (
        sim.port("grant"),
        sim.port("grant_valid"),
        sim.port("grant_index"),
    );
    let mut rng = Rng::new(5);
    let mut first = 0u32; // the requester with the highest priority
    let mut served = vec![0u32; n as usize];
    sim.reset(2);
    for cycle in 0..20_000 {
        let r = rng.bits(n) | if rng.chance(50) { (1 << n) - 1 } else { 0 };
        let a = rng.chance(60);
        sim.set(req, r);
        sim.set(ack, a as u64);
        sim.eval();
        let expect = (0..n).map(|k| (first + k) % n).find(|&i| r >> i & 1 == 1);
        assert_eq!(
            sim.get_bool(valid),
            expect.is_some(),
            "grant_valid at cycle {cycle}"
        );
        match expect {
            Some(i) => {
                assert_eq!(
                    sim.get(grant),
                    1 << i,
                    "grant at cycle {cycle} (req {r:05b}, first {first})"
                );
                assert_eq!(sim.get(index), i as u64, "grant_index at cycle {cycle}");
                if a {
                    first = (i + 1) % n;
                    served[i as usize] += 1;
                }
            }
            None => assert_eq!(sim.get(grant), 0),
        }
        sim.tick();
    }
    // With everyone requesting half the time, service is fair.
    let (lo, hi) = (served.iter().min().unwrap(), served.iter().max().unwrap());
    assert!(hi - lo < hi / 5, "unfair service: {served:?}");
}
