//! Faults the AXI4 memory model can inject, to test how a master (and the software above
//! it) copes: random backpressure and delays on every channel ([`Stalls`]), error responses
//! (SLVERR, DECERR) for chosen bursts ([`ErrorRule`]), and a memory that stops answering
//! ([`MemFaults::hang_after_bursts`]). All are off by default, and none breaks an AXI rule:
//! a stalled VALID is only ever a VALID not yet raised, never one withdrawn.

use std::fmt;

/// The faults an [`AxiMemory`](super::AxiMemory) injects (none by default). Burst numbers
/// count from 1 since [`AxiMemory::restart_faults`](super::AxiMemory::restart_faults) (a
/// simulator calls it at the start of each run), reads and writes separately.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemFaults {
    /// Random backpressure and delays on every channel.
    pub stalls: Option<Stalls>,
    /// Bursts answered with an error response (the first matching rule wins).
    pub errors: Vec<ErrorRule>,
    /// The memory stops answering once it has accepted this many bursts (reads and writes
    /// together): no more address handshakes, data beats or write responses, as a hung
    /// interconnect would (0: it never answers at all).
    pub hang_after_bursts: Option<u64>,
}

impl MemFaults {
    /// No fault at all.
    pub fn none() -> MemFaults {
        MemFaults::default()
    }

    /// Only random stalls of `percent` on every channel (see [`Stalls::uniform`]).
    pub fn stalls(percent: u8, seed: u64) -> MemFaults {
        MemFaults {
            stalls: Some(Stalls::uniform(percent, seed)),
            ..MemFaults::default()
        }
    }

    /// True when nothing is injected.
    pub fn is_none(&self) -> bool {
        *self == MemFaults::default()
    }
}

/// Per-cycle random stalls: in each cycle, each channel is independently held back with its
/// probability in percent (0..=100; 100 stops that channel for good): ARREADY, AWREADY or
/// WREADY low, or a due RVALID or BVALID not raised yet. The pattern is a function of the
/// seed and the cycles since the faults were (re)started, so a run repeats exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stalls {
    /// ARREADY low.
    pub ar: u8,
    /// A due RVALID not raised.
    pub r: u8,
    /// AWREADY low.
    pub aw: u8,
    /// WREADY low.
    pub w: u8,
    /// A due BVALID not raised.
    pub b: u8,
    /// Seed of the pattern.
    pub seed: u64,
}

impl Stalls {
    /// The same probability on all five channels.
    pub fn uniform(percent: u8, seed: u64) -> Stalls {
        Stalls {
            ar: percent,
            r: percent,
            aw: percent,
            w: percent,
            b: percent,
            seed,
        }
    }
}

/// A non-OKAY AXI response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorResp {
    /// Slave error (`0b10`): the slave was reached and failed the access.
    SlvErr,
    /// Decode error (`0b11`): no slave at the address.
    DecErr,
}

impl ErrorResp {
    /// The 2-bit RRESP/BRESP value.
    pub fn code(self) -> u64 {
        match self {
            ErrorResp::SlvErr => 2,
            ErrorResp::DecErr => 3,
        }
    }
}

impl fmt::Display for ErrorResp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorResp::SlvErr => "SLVERR",
            ErrorResp::DecErr => "DECERR",
        })
    }
}

/// Which bursts an [`ErrorRule`] answers with an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BurstMatch {
    /// Every burst touching a byte in `start..end`.
    Range {
        /// First byte address.
        start: u64,
        /// Byte address past the range.
        end: u64,
    },
    /// The n-th burst of its direction (1 = the first).
    Nth(u64),
}

/// Answer matching bursts with `resp`: every beat of a read (RRESP), the response of a
/// write (BRESP; the memory then does not write the burst's data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorRule {
    /// Applies to read bursts.
    pub reads: bool,
    /// Applies to write bursts.
    pub writes: bool,
    /// Which bursts.
    pub at: BurstMatch,
    /// The response they get.
    pub resp: ErrorResp,
}

impl ErrorRule {
    /// The response for the `bytes`-byte burst number `nth` at `addr`, if this rule matches.
    pub(super) fn answer(&self, write: bool, nth: u64, addr: u64, bytes: u64) -> Option<ErrorResp> {
        let dir = if write { self.writes } else { self.reads };
        let hit = match self.at {
            BurstMatch::Range { start, end } => addr < end && start < addr + bytes,
            BurstMatch::Nth(n) => n == nth,
        };
        (dir && hit).then_some(self.resp)
    }
}

/// An error response the memory gave (see [`AxiMemory::take_error_responses`](
/// super::AxiMemory::take_error_responses)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorResponse {
    /// A write (B) rather than a read (R).
    pub write: bool,
    /// The burst's number in its direction (from 1).
    pub nth: u64,
    /// Byte address of its first beat.
    pub addr: u64,
    /// Its length in beats.
    pub beats: u32,
    /// The response given.
    pub resp: ErrorResp,
    /// Cycle of the handshake that delivered it (a read's first beat, a write's response).
    pub cycle: u64,
}

impl fmt::Display for ErrorResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} burst {} at {:#x} ({} beat{}) answered {}",
            if self.write { "write" } else { "read" },
            self.nth,
            self.addr,
            self.beats,
            if self.beats == 1 { "" } else { "s" },
            self.resp
        )
    }
}

/// The stall generator: SplitMix64 (hdl depends on nothing of the toolkit, and a model
/// feature needs no more than this), one draw per stalled channel per cycle.
#[derive(Clone, Debug)]
pub(super) struct StallGen {
    cfg: Stalls,
    state: u64,
}

/// Which channels are held back this cycle.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Held {
    pub ar: bool,
    pub r: bool,
    pub aw: bool,
    pub w: bool,
    pub b: bool,
}

impl StallGen {
    pub fn new(cfg: Stalls) -> StallGen {
        StallGen {
            cfg,
            state: cfg.seed,
        }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn chance(&mut self, percent: u8) -> bool {
        percent > 0 && self.next() % 100 < percent as u64
    }

    /// The next cycle's stalls.
    pub fn cycle(&mut self) -> Held {
        let c = self.cfg;
        Held {
            ar: self.chance(c.ar),
            r: self.chance(c.r),
            aw: self.chance(c.aw),
            w: self.chance(c.w),
            b: self.chance(c.b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_ranges_and_burst_numbers() {
        let range = ErrorRule {
            reads: true,
            writes: false,
            at: BurstMatch::Range {
                start: 0x1000,
                end: 0x1010,
            },
            resp: ErrorResp::DecErr,
        };
        assert_eq!(range.answer(false, 1, 0xff8, 8), None, "ends at the start");
        assert_eq!(range.answer(false, 1, 0xff8, 9), Some(ErrorResp::DecErr));
        assert_eq!(range.answer(false, 1, 0x100f, 64), Some(ErrorResp::DecErr));
        assert_eq!(range.answer(false, 1, 0x1010, 64), None);
        assert_eq!(range.answer(true, 1, 0x1000, 8), None, "reads only");
        let nth = ErrorRule {
            reads: true,
            writes: true,
            at: BurstMatch::Nth(3),
            resp: ErrorResp::SlvErr,
        };
        assert_eq!(nth.answer(true, 3, 0, 8), Some(ErrorResp::SlvErr));
        assert_eq!(nth.answer(false, 2, 0, 8), None);
        assert_eq!(ErrorResp::SlvErr.code(), 2);
        assert_eq!(ErrorResp::DecErr.code(), 3);
    }

    #[test]
    fn stalls_follow_their_probability_and_seed() {
        let mut g = StallGen::new(Stalls {
            ar: 0,
            r: 100,
            aw: 30,
            w: 30,
            b: 30,
            seed: 7,
        });
        let mut aw = 0;
        for _ in 0..10_000 {
            let h = g.cycle();
            assert!(!h.ar && h.r);
            aw += h.aw as u32;
        }
        assert!((2700..3300).contains(&aw), "{aw} of 10000 at 30%");
        let draw = |seed| {
            let mut g = StallGen::new(Stalls::uniform(50, seed));
            (0..64).map(|_| g.cycle().w).collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
    }
}
