//! A data channel shared by several clients (the AXI read channel: fetch, load and compute
//! all read through it): one beat per `interval` cycles. A transfer books the earliest free
//! cycles at or after its start, around earlier bookings (a transfer that meets a busy
//! stretch pauses and resumes after it, as beats of interleaved bursts do), but it waits
//! behind another transfer's stretch no longer than that transfer's *grain*: the RTL's read
//! arbiter grants requests round-robin, so a newcomer's request waits only for the requests
//! the other client already has in flight (a few DRAM rows), not for the rest of its
//! transfer. The newcomer's beats then go first and the rest of the stretch (and whatever
//! it runs into) moves later; the displaced transfer's completion, already reported, is not
//! revised (it is optimistic by the newcomer's beats: a few, for the compute module's
//! micro-op and table loads).

/// A booked stretch `[start, end)` and the longest a later transfer waits behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stretch {
    start: u64,
    end: u64,
    grain: u64,
}

/// Booked stretches of a channel.
#[derive(Debug, Clone)]
pub struct Channel {
    /// Sorted and disjoint (touching allowed).
    busy: Vec<Stretch>,
    /// Cycles per beat.
    interval: u64,
}

impl Channel {
    /// An idle channel moving a beat every `interval` cycles (at least 1).
    pub fn new(interval: u64) -> Channel {
        Channel {
            busy: Vec::new(),
            interval: interval.max(1),
        }
    }

    /// Books `beats` beats starting no earlier than `earliest`, of a transfer behind which
    /// a later one waits at most `grain` cycles; returns the cycle after the last beat
    /// (`earliest` for no beats).
    pub fn book(&mut self, earliest: u64, beats: u64, grain: u64) -> u64 {
        let mut need = beats * self.interval;
        if need == 0 {
            return earliest;
        }
        let mut t = earliest;
        // Stretches ending at or before `t` cannot hold this booking.
        let mut i = self.busy.partition_point(|s| s.end <= t);
        let mut booked: Vec<(u64, u64)> = Vec::new();
        while need > 0 {
            match self.busy.get(i).copied() {
                Some(s) if s.start <= t => {
                    if s.end <= t.saturating_add(s.grain) {
                        t = s.end;
                        i += 1;
                    } else {
                        // Past the other transfer's requests in flight: go ahead of the
                        // rest of it.
                        let at = t + s.grain;
                        self.make_room(i, at, need);
                        booked.push((at, at + need));
                        t = at + need;
                        need = 0;
                    }
                }
                Some(s) => {
                    let take = need.min(s.start - t);
                    booked.push((t, t + take));
                    need -= take;
                    t += take;
                }
                None => {
                    booked.push((t, t + need));
                    t += need;
                    need = 0;
                }
            }
        }
        for (start, end) in booked {
            let k = self.busy.partition_point(|s| s.end <= start);
            self.busy.insert(k, Stretch { start, end, grain });
        }
        t
    }

    /// Frees `[at, at + len)` inside stretch `i` (`start <= at < end`): the stretch's rest
    /// and every later stretch it runs into move later.
    fn make_room(&mut self, i: usize, at: u64, len: u64) {
        let s = self.busy[i];
        let mut k = i;
        if s.start < at {
            self.busy[i].end = at;
            self.busy.insert(i + 1, Stretch { start: at, ..s });
            k = i + 1;
        }
        let mut cursor = at + len;
        while k < self.busy.len() && self.busy[k].start < cursor {
            let shift = cursor - self.busy[k].start;
            self.busy[k].start += shift;
            self.busy[k].end += shift;
            cursor = self.busy[k].end;
            k += 1;
        }
    }

    /// Forgets the stretches that end at or before `t`: no booking starts before it.
    pub fn forget_before(&mut self, t: u64) {
        let n = self.busy.partition_point(|s| s.end <= t);
        if n > 64 {
            self.busy.drain(..n);
        }
    }

    /// Busy stretches held, merged where they touch (for tests).
    #[cfg(test)]
    fn stretches(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = Vec::new();
        for s in &self.busy {
            match v.last_mut() {
                Some(last) if last.1 == s.start => last.1 = s.end,
                _ => v.push((s.start, s.end)),
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grain no wait reaches: bookings never go ahead of each other.
    const NEVER: u64 = u64::MAX;

    #[test]
    fn bookings_fill_the_earliest_free_cycles_around_earlier_ones() {
        let mut c = Channel::new(1);
        assert_eq!(c.book(10, 5, NEVER), 15);
        assert_eq!(c.book(20, 5, NEVER), 25);
        // 3 beats from cycle 12: cycles 15..18, after the first booking.
        assert_eq!(c.book(12, 3, NEVER), 18);
        // 4 beats from 17: 18..20 fits two, the rest after the second booking, 25..27.
        assert_eq!(c.book(17, 4, NEVER), 27);
        assert_eq!(c.stretches(), vec![(10, 27)]);
        // Nothing to move: no time.
        assert_eq!(c.book(3, 0, NEVER), 3);
        // A gap before every booking is used.
        assert_eq!(c.book(0, 4, NEVER), 4);
        assert_eq!(c.stretches(), vec![(0, 4), (10, 27)]);
    }

    #[test]
    fn a_slower_channel_takes_longer_per_beat() {
        let mut c = Channel::new(2);
        assert_eq!(c.book(0, 4, NEVER), 8);
        assert_eq!(c.book(0, 1, NEVER), 10);
    }

    #[test]
    fn a_newcomer_waits_only_for_the_grain_of_a_long_transfer() {
        let mut c = Channel::new(1);
        // A long transfer whose requests in flight cover 10 cycles, and a later one.
        assert_eq!(c.book(0, 100, 10), 100);
        assert_eq!(c.book(120, 10, 10), 130);
        // Arriving at 20, a 3-beat transfer goes after 10 more cycles, not after 100.
        assert_eq!(c.book(20, 3, 3), 33);
        // The long transfer's rest moved 3 cycles later, into the gap before the next one.
        assert_eq!(c.stretches(), vec![(0, 103), (120, 130)]);
        // Near its end, a newcomer waits for the end.
        assert_eq!(c.book(97, 2, 2), 105);
        // Pushing into the next stretch moves that one too.
        assert_eq!(c.book(50, 20, 20), 80);
        assert_eq!(c.stretches(), vec![(0, 135)]);
    }
}
