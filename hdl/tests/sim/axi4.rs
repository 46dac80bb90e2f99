//! The AXI4 master against the AXI4 memory model (`AxiMemory`) with random backpressure and
//! delays on every channel (its injected stalls) and random latency, driven by a Rust client
//! issuing random read and write requests at the same time. Checked: data integrity both
//! ways, `rd_data_last` / `wr_done` per request, the client streams passing straight to the
//! bus, the outstanding limits, the exact expected burst sequence, and the AXI rules the
//! memory checks (INCR, full-width size, alignment, no 4 KiB crossing, WLAST, VALID held with
//! a stable payload until its handshake); with injected error responses, the sticky
//! `rd_error` / `wr_error` flags.

use std::collections::VecDeque;

use hdl::verilator::{Model, PortId};
use hdl::widgets::axi4_memory::{
    AxiMemory, AxiPorts, BurstMatch, ErrorResp, ErrorRule, MemFaults, MemTiming, Stalls,
};
use hdl::widgets::{axi4_master, AxiMasterConfig};

use crate::util::{build, Rng};

/// Memory regions: reads come from A (never written), writes go to B.
const READ_BASE: u64 = 0x8000_0000;
const WRITE_BASE: u64 = 0x8010_0000;
const REGION: u64 = 0x4_0000; // 256 KiB each

/// The bursts a request should become (address, beats).
fn split(mut addr: u64, mut beats: u64, bytes: u64, max: u64) -> Vec<(u64, u64)> {
    let mut out = vec![];
    while beats > 0 {
        let to_page = (4096 - addr % 4096) / bytes;
        let n = beats.min(to_page).min(max);
        out.push((addr, n));
        addr += n * bytes;
        beats -= n;
    }
    out
}

fn get_bytes(sim: &Model, p: PortId, n: usize) -> Vec<u8> {
    sim.get_wide(p)
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .take(n)
        .collect()
}

fn to_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect()
}

fn p(sim: &Model, name: &str) -> PortId {
    sim.port(name)
}

/// Runs `requests` random read and write requests; with `errors` = (n, m), the memory
/// answers the n-th read burst with SLVERR and the m-th write burst with DECERR (and does
/// not write that burst).
fn run(cfg: AxiMasterConfig, seed: u64, requests: usize, errors: Option<(u64, u64)>) {
    let dw = cfg.data_width;
    let bytes = (dw / 8) as u64;
    let max_burst = cfg.max_burst_beats as u64;
    let mut sim = build(axi4_master(
        &format!("axi4_master_test_{dw}_{}", cfg.max_burst_beats),
        &cfg,
    ));
    let mut rng = Rng::new(seed);

    // Client ports.
    let (rd_req_valid, rd_req_ready, rd_req_addr, rd_req_beats) = (
        p(&sim, "rd_req_valid"),
        p(&sim, "rd_req_ready"),
        p(&sim, "rd_req_addr"),
        p(&sim, "rd_req_beats"),
    );
    let (rd_data_valid, rd_data_ready, rd_data, rd_data_last) = (
        p(&sim, "rd_data_valid"),
        p(&sim, "rd_data_ready"),
        p(&sim, "rd_data"),
        p(&sim, "rd_data_last"),
    );
    let (wr_req_valid, wr_req_ready, wr_req_addr, wr_req_beats) = (
        p(&sim, "wr_req_valid"),
        p(&sim, "wr_req_ready"),
        p(&sim, "wr_req_addr"),
        p(&sim, "wr_req_beats"),
    );
    let (wr_data_valid, wr_data_ready, wr_data, wr_strb, wr_done) = (
        p(&sim, "wr_data_valid"),
        p(&sim, "wr_data_ready"),
        p(&sim, "wr_data"),
        p(&sim, "wr_strb"),
        p(&sim, "wr_done"),
    );
    let (rd_error, wr_error) = (p(&sim, "rd_error"), p(&sim, "wr_error"));
    // The bus ports the client's streams pass to.
    let a = |s: &str| sim.port(&format!("m_axi_{s}"));
    let (rready, wvalid, wdata, wstrb, bready) = (
        a("rready"),
        a("wvalid"),
        a("wdata"),
        a("wstrb"),
        a("bready"),
    );
    let axi = AxiPorts::new(&sim, "m_axi_");

    // The memory: region A random, region B zeros (and the client's expectation of it).
    let mem_a: Vec<u8> = (0..REGION).map(|_| rng.next_u64() as u8).collect();
    let mut mem = AxiMemory::new(
        READ_BASE,
        (WRITE_BASE + REGION - READ_BASE) as usize,
        dw,
        MemTiming {
            // Never the limit: the master's own outstanding limits are checked.
            max_outstanding: 16,
            ..MemTiming::default()
        },
    );
    mem.write(READ_BASE, &mem_a);
    mem.set_burst_log(true);
    if let Some((rn, wn)) = errors {
        let rule = |write: bool, n, resp| ErrorRule {
            reads: !write,
            writes: write,
            at: BurstMatch::Nth(n),
            resp,
        };
        mem.set_faults(MemFaults {
            errors: vec![
                rule(false, rn, ErrorResp::SlvErr),
                rule(true, wn, ErrorResp::DecErr),
            ],
            ..MemFaults::none()
        });
    }

    // Requests (beats 0..=600, occasionally 0; addresses near the end of a region are
    // clamped so that the request fits).
    let make_req = |rng: &mut Rng, base: u64| -> (u64, u64) {
        let beats = if rng.chance(3) {
            0
        } else if rng.chance(70) {
            1 + rng.below(40)
        } else {
            1 + rng.below(600)
        };
        let span = beats * bytes;
        let addr = base + (rng.below((REGION - span) / bytes)) * bytes;
        (addr, beats)
    };
    let rd_reqs: Vec<(u64, u64)> = (0..requests)
        .map(|_| make_req(&mut rng, READ_BASE))
        .collect();
    let wr_reqs: Vec<(u64, u64)> = (0..requests)
        .map(|_| make_req(&mut rng, WRITE_BASE))
        .collect();
    // Write data per request: (data bytes, strobe bits) per beat.
    let wr_beats: Vec<Vec<(Vec<u8>, u64)>> = wr_reqs
        .iter()
        .map(|&(_, n)| {
            (0..n)
                .map(|_| {
                    let d: Vec<u8> = (0..bytes).map(|_| rng.next_u64() as u8).collect();
                    let s = if rng.chance(70) {
                        if bytes == 64 {
                            u64::MAX
                        } else {
                            (1u64 << bytes) - 1
                        }
                    } else {
                        rng.bits(bytes as u32)
                    };
                    (d, s)
                })
                .collect()
        })
        .collect();
    // Expected burst sequences.
    let exp_ar: Vec<(u64, u64)> = rd_reqs
        .iter()
        .flat_map(|&(a, n)| split(a, n, bytes, max_burst))
        .collect();
    let exp_aw: Vec<(u64, u64)> = wr_reqs
        .iter()
        .flat_map(|&(a, n)| split(a, n, bytes, max_burst))
        .collect();
    // Region B as the client expects it: every write burst's beats (in order, the flat beat
    // stream), except a burst answered with an error.
    let mut expect_b: Vec<u8> = vec![0; REGION as usize];
    let mut beats_in_order = wr_beats.iter().flatten();
    for (j, &(addr, n)) in exp_aw.iter().enumerate() {
        let dropped = errors.is_some_and(|(_, wn)| wn == j as u64 + 1);
        for i in 0..n {
            let (d, s) = beats_in_order.next().unwrap();
            let off = (addr - WRITE_BASE + i * bytes) as usize;
            for b in 0..bytes as usize {
                if !dropped && s >> b & 1 == 1 {
                    expect_b[off + b] = d[b];
                }
            }
        }
    }
    // Which burst ends which write request, for wr_done.
    let mut aw_ends: Vec<bool> = vec![];
    for &(a, n) in &wr_reqs {
        let bursts = split(a, n, bytes, max_burst);
        for j in 0..bursts.len() {
            aw_ends.push(j + 1 == bursts.len());
        }
    }
    // Expected read data stream: (address, last of request).
    let mut exp_rd: VecDeque<(u64, bool)> = VecDeque::new();
    for &(a, n) in &rd_reqs {
        for i in 0..n {
            exp_rd.push_back((a + i * bytes, i + 1 == n));
        }
    }
    let total_rd_beats = exp_rd.len();
    let wr_nonzero = wr_reqs.iter().filter(|r| r.1 > 0).count();

    // Client state.
    let (mut rd_next, mut wr_next) = (0usize, 0usize); // next request to issue
    let mut wr_stream: VecDeque<(Vec<u8>, u64)> = VecDeque::new(); // accepted requests' beats
    let mut rd_seen = 0usize;
    let mut dones = 0usize;
    let mut rd_req_hold = false;
    let mut wr_req_hold = false;
    let mut wr_data_hold = false;
    // Bus observations.
    let mut b_count = 0usize; // write responses given
    let mut b_done_requests = 0usize; // write requests whose last response was given
    let (mut max_rd_outstanding, mut max_wr_outstanding) = (0usize, 0usize);
    let (mut rd_errors, mut wr_errors) = (0usize, 0usize); // error responses given

    let (mut p_req, mut p_rdy, mut p_data) = (50, 50, 50);
    sim.reset(4);
    mem.reset(&mut sim, &axi);
    let mut cycle = 0u64;
    loop {
        // Random timing, changing every few hundred cycles: the chance in percent that the
        // client offers a request or data or takes read data, the chance that each bus
        // channel is held back in a cycle (not ready, or a due response not shown yet), and
        // the memory's latencies.
        if cycle.is_multiple_of(300) {
            for k in [&mut p_req, &mut p_rdy, &mut p_data] {
                *k = [10, 40, 70, 95, 100][rng.below(5) as usize];
            }
            let mut stall = || [90u8, 60, 30, 5, 0][rng.below(5) as usize];
            let (ar, r, aw, w) = (stall(), stall(), stall(), stall());
            mem.set_stalls(Some(Stalls {
                ar,
                r,
                aw,
                w,
                b: r,
                seed: rng.next_u64(),
            }));
            let lat = [10, 40, 70, 95, 100][rng.below(5) as usize];
            mem.set_timing(MemTiming {
                read_latency: 1 + rng.below(lat / 3 + 1) as u32,
                write_latency: 1 + rng.below(lat / 4 + 1) as u32,
                ..mem.timing()
            });
        }

        // ---- client drives ----------------------------------------------------------------
        if !rd_req_hold && rd_next < rd_reqs.len() && rng.chance(p_req) {
            rd_req_hold = true;
        }
        sim.set(rd_req_valid, rd_req_hold as u64);
        if rd_req_hold {
            sim.set(rd_req_addr, rd_reqs[rd_next].0);
            sim.set(rd_req_beats, rd_reqs[rd_next].1);
        }
        let client_rready = rng.chance(p_rdy);
        sim.set(rd_data_ready, client_rready as u64);
        if !wr_req_hold && wr_next < wr_reqs.len() && rng.chance(p_req) {
            wr_req_hold = true;
        }
        sim.set(wr_req_valid, wr_req_hold as u64);
        if wr_req_hold {
            sim.set(wr_req_addr, wr_reqs[wr_next].0);
            sim.set(wr_req_beats, wr_reqs[wr_next].1);
        }
        if !wr_data_hold && !wr_stream.is_empty() && rng.chance(p_data) {
            wr_data_hold = true;
        }
        sim.set(wr_data_valid, wr_data_hold as u64);
        if wr_data_hold {
            let (d, s) = wr_stream.front().unwrap();
            sim.set_wide(wr_data, &to_words(d));
            sim.set_wide(
                wr_strb,
                &[*s as u32, (*s >> 32) as u32][..(bytes as usize).div_ceil(32)],
            );
        }

        // ---- memory drives, the model evaluates --------------------------------------------
        let offered = mem.drive(&mut sim, &axi, cycle);
        sim.eval();

        // ---- observe the client's side of this cycle's handshakes --------------------------
        let at = format!("cycle {cycle}");
        // The error flags are registered: they show the responses of earlier cycles.
        assert_eq!(
            sim.get_bool(rd_error),
            rd_errors > 0,
            "rd_error after {rd_errors} read error response(s) ({at})"
        );
        assert_eq!(
            sim.get_bool(wr_error),
            wr_errors > 0,
            "wr_error after {wr_errors} write error response(s) ({at})"
        );
        if rd_req_hold && sim.get_bool(rd_req_ready) {
            rd_req_hold = false;
            rd_next += 1;
        }
        if wr_req_hold && sim.get_bool(wr_req_ready) {
            wr_req_hold = false;
            wr_stream.extend(wr_beats[wr_next].iter().cloned());
            wr_next += 1;
        }
        // Read data: the R channel is the client's stream.
        assert_eq!(
            sim.get_bool(rd_data_valid),
            offered.r_valid(),
            "rd_data_valid mirrors RVALID ({at})"
        );
        assert_eq!(
            sim.get_bool(rready),
            client_rready,
            "RREADY mirrors rd_data_ready ({at})"
        );
        if offered.r_valid() && client_rready {
            let (addr, last) = exp_rd
                .pop_front()
                .unwrap_or_else(|| panic!("unexpected read data ({at})"));
            let off = (addr - READ_BASE) as usize;
            assert_eq!(
                get_bytes(&sim, rd_data, bytes as usize),
                &mem_a[off..off + bytes as usize],
                "read data for {addr:#x} ({at})"
            );
            assert_eq!(
                sim.get_bool(rd_data_last),
                last,
                "rd_data_last for {addr:#x} ({at})"
            );
            rd_seen += 1;
        }
        // W: the client side and the bus side of the same handshake.
        let (_, _, w_ready) = offered.readies();
        let w_fire = sim.get_bool(wvalid) && w_ready;
        assert_eq!(
            sim.get_bool(wr_data_ready) && wr_data_hold,
            w_fire,
            "wr_data handshake is the W handshake ({at})"
        );
        if w_fire {
            assert!(wr_data_hold, "WVALID without client data ({at})");
            let (d, s) = wr_stream.pop_front().unwrap();
            wr_data_hold = false;
            let got_d = get_bytes(&sim, wdata, bytes as usize);
            let got_s = sim.get_wide(wstrb);
            let got_s = got_s[0] as u64 | got_s.get(1).map_or(0, |&h| (h as u64) << 32);
            assert_eq!(got_d, d, "WDATA passes the client data ({at})");
            assert_eq!(got_s, s, "WSTRB passes the client strobes ({at})");
        }
        // B (the master always accepts); wr_done comes a cycle after a request's last one.
        assert!(sim.get_bool(bready), "BREADY is always high");
        if sim.get_bool(wr_done) {
            dones += 1;
            assert!(
                dones <= b_done_requests,
                "wr_done before the last write response ({at})"
            );
        }
        if offered.b_valid() {
            if aw_ends[b_count] {
                b_done_requests += 1;
            }
            b_count += 1;
        }

        // ---- the memory completes the handshakes and checks the bus -------------------------
        mem.sample(&sim, &axi, offered);
        assert!(
            mem.violations().is_empty(),
            "AXI rules broken: {:?}",
            mem.violations()
        );
        let (errs, _) = mem.take_error_responses();
        for e in &errs {
            let k = e.nth as usize - 1;
            let want = if e.write { exp_aw[k] } else { exp_ar[k] };
            assert_eq!((e.addr, e.beats as u64), want, "{e} ({at})");
        }
        rd_errors += errs.iter().filter(|e| !e.write).count();
        wr_errors += errs.iter().filter(|e| e.write).count();
        // Reads: address taken, last beat not yet; writes: address taken, response not yet
        // (the master counts from acceptance, earlier, so these bounds hold too).
        let (r, w) = mem.outstanding();
        max_rd_outstanding = max_rd_outstanding.max(r);
        max_wr_outstanding = max_wr_outstanding.max(w);
        assert!(
            r <= cfg.max_outstanding_reads as usize,
            "{r} reads outstanding ({at})"
        );
        assert!(
            w <= cfg.max_outstanding_writes as usize,
            "{w} writes outstanding ({at})"
        );

        sim.tick();
        cycle += 1;
        let finished = rd_next == rd_reqs.len()
            && wr_next == wr_reqs.len()
            && rd_seen == total_rd_beats
            && wr_stream.is_empty()
            && mem.idle()
            && dones == wr_nonzero;
        if finished {
            break;
        }
        assert!(
            cycle < 2_000_000,
            "no progress: {rd_next}/{} read requests, {rd_seen}/{total_rd_beats} beats, {wr_next}/{} \
             write requests, {} write beats queued, {dones}/{wr_nonzero} done",
            rd_reqs.len(),
            wr_reqs.len(),
            wr_stream.len()
        );
    }
    // The last wr_done is a cycle after its B; let it settle and make sure no extra comes.
    for _ in 0..4 {
        sim.eval();
        assert!(!sim.get_bool(wr_done), "extra wr_done");
        sim.tick();
    }
    // The burst sequence, in the order the bursts were served (in order per direction).
    let log = mem.take_burst_log();
    let served = |write: bool| -> Vec<(u64, u64)> {
        log.iter()
            .filter(|b| b.write == write)
            .map(|b| (b.addr, b.beats as u64))
            .collect()
    };
    for (what, got, want) in [
        ("AR", served(false), &exp_ar),
        ("AW", served(true), &exp_aw),
    ] {
        assert_eq!(got.len(), want.len(), "{what} bursts");
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!(
                "{what} burst #{i} was {:?}, expected {:?} (at most {max_burst} beats, \
                 split at 4 KiB)",
                got[i], want[i]
            );
        }
    }
    let mut mem_b = vec![0; REGION as usize];
    mem.read(WRITE_BASE, &mut mem_b);
    assert!(
        mem_b == expect_b,
        "region B differs from the client's writes"
    );
    if let Some((_, _)) = errors {
        assert_eq!(
            (rd_errors, wr_errors),
            (1, 1),
            "one error response each way"
        );
    }
    if cfg.max_outstanding_reads > 1 {
        assert_eq!(
            max_rd_outstanding, cfg.max_outstanding_reads as usize,
            "reads were never fully pipelined"
        );
    }
    eprintln!(
        "[axi4 {dw}] {cycle} cycles, {} AR / {} AW bursts, max outstanding {max_rd_outstanding} reads / \
         {max_wr_outstanding} writes",
        exp_ar.len(),
        exp_aw.len()
    );
}

#[test]
fn axi4_master_64bit_256_beats() {
    run(
        AxiMasterConfig {
            data_width: 64,
            max_burst_beats: 256,
            max_outstanding_reads: 4,
            max_outstanding_writes: 4,
            ..Default::default()
        },
        21,
        150,
        None,
    );
}

#[test]
fn axi4_master_512bit_page_limited() {
    run(
        AxiMasterConfig {
            data_width: 512,
            max_burst_beats: 256,
            max_outstanding_reads: 2,
            max_outstanding_writes: 3,
            ..Default::default()
        },
        22,
        100,
        None,
    );
}

#[test]
fn axi4_master_128bit_short_bursts() {
    run(
        AxiMasterConfig {
            data_width: 128,
            max_burst_beats: 16,
            max_outstanding_reads: 1,
            max_outstanding_writes: 1,
            ..Default::default()
        },
        23,
        100,
        None,
    );
}

/// SLVERR on a read burst and DECERR on a write burst raise `rd_error` and `wr_error` the
/// cycle after their handshake, and only then; the master carries on.
#[test]
fn axi4_master_error_responses_raise_sticky_flags() {
    run(
        AxiMasterConfig {
            data_width: 64,
            max_burst_beats: 16,
            max_outstanding_reads: 2,
            max_outstanding_writes: 2,
            ..Default::default()
        },
        24,
        40,
        Some((7, 5)),
    );
}
