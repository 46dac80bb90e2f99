//! A data channel shared by several clients (the AXI read channel: fetch, load and compute
//! all read through it): one beat per `interval` cycles, booked first come first served,
//! each booking taking the earliest free cycles at or after its start, around earlier
//! bookings (a transfer that meets a busy stretch pauses and resumes after it, as beats of
//! interleaved bursts do).

/// Booked stretches of a channel.
#[derive(Debug, Clone)]
pub struct Channel {
    /// Busy `[start, end)` stretches, sorted and disjoint.
    busy: Vec<(u64, u64)>,
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

    /// Books `beats` beats starting no earlier than `earliest`; returns the cycle after the
    /// last one (`earliest` for no beats).
    pub fn book(&mut self, earliest: u64, beats: u64) -> u64 {
        let mut need = beats * self.interval;
        if need == 0 {
            return earliest;
        }
        let mut t = earliest;
        // Stretches ending at or before `t` cannot hold this booking.
        let mut i = self.busy.partition_point(|&(_, end)| end <= t);
        let mut booked: Vec<(u64, u64)> = Vec::new();
        while need > 0 {
            let gap_end = self.busy.get(i).map_or(u64::MAX, |&(start, _)| start);
            if t < gap_end {
                let take = need.min(gap_end - t);
                booked.push((t, t + take));
                need -= take;
                t += take;
            }
            if need > 0 {
                t = t.max(self.busy[i].1);
                i += 1;
            }
        }
        let end = t;
        for stretch in booked {
            self.insert(stretch);
        }
        end
    }

    /// Inserts a free stretch as busy, merging it with touching neighbours.
    fn insert(&mut self, (start, end): (u64, u64)) {
        let i = self.busy.partition_point(|&(_, e)| e < start);
        let mut s = start;
        let mut e = end;
        let mut j = i;
        while j < self.busy.len() && self.busy[j].0 <= e {
            s = s.min(self.busy[j].0);
            e = e.max(self.busy[j].1);
            j += 1;
        }
        self.busy.splice(i..j, [(s, e)]);
    }

    /// Forgets the stretches that end at or before `t`: no booking starts before it.
    pub fn forget_before(&mut self, t: u64) {
        let n = self.busy.partition_point(|&(_, end)| end <= t);
        if n > 64 {
            self.busy.drain(..n);
        }
    }

    /// Busy stretches held (for tests).
    #[cfg(test)]
    fn stretches(&self) -> &[(u64, u64)] {
        &self.busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookings_fill_the_earliest_free_cycles_around_earlier_ones() {
        let mut c = Channel::new(1);
        assert_eq!(c.book(10, 5), 15);
        assert_eq!(c.book(20, 5), 25);
        // 3 beats from cycle 12: cycles 15..18, after the first booking.
        assert_eq!(c.book(12, 3), 18);
        // 4 beats from 17: 18..20 fits two, the rest after the second booking, 25..27.
        assert_eq!(c.book(17, 4), 27);
        assert_eq!(c.stretches(), &[(10, 27)]);
        // Nothing to move: no time.
        assert_eq!(c.book(3, 0), 3);
        // A gap before every booking is used.
        assert_eq!(c.book(0, 4), 4);
        assert_eq!(c.stretches(), &[(0, 4), (10, 27)]);
    }

    #[test]
    fn a_slower_channel_takes_longer_per_beat() {
        let mut c = Channel::new(2);
        assert_eq!(c.book(0, 4), 8);
        assert_eq!(c.book(0, 1), 10);
    }
}
