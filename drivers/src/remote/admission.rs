//! Admission of connections to the server: at most `max_active` sessions at once, and behind
//! them a bounded first-come, first-served queue whose members wait, each up to a deadline,
//! for a session to end. A connection beyond both is refused at once.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What [`Admission::enter`] decided for a new connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    /// A session may start now; [`Admission::leave`] when it ends.
    Now,
    /// Every session slot is taken: wait with this ticket ([`Admission::wait`]).
    Queued(u64),
    /// Every slot and every place in the queue is taken.
    Full { active: usize, waiting: usize },
}

#[derive(Default)]
struct State {
    active: usize,
    /// Tickets of the waiting connections, oldest first.
    queue: VecDeque<u64>,
    next_ticket: u64,
}

/// The server's count of sessions and its queue (shared by the accept thread and every
/// connection thread).
pub struct Admission {
    max_active: usize,
    max_waiting: usize,
    state: Mutex<State>,
    changed: Condvar,
}

impl Admission {
    pub fn new(max_active: usize, max_waiting: usize) -> Self {
        Admission {
            max_active: max_active.max(1),
            max_waiting,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a few counters updated in single statements: a panic elsewhere while
        // the lock was held cannot have left it half-changed.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a session slot, or a place in the queue, or neither.
    pub fn enter(&self) -> Entry {
        let mut s = self.lock();
        if s.active < self.max_active && s.queue.is_empty() {
            s.active += 1;
            return Entry::Now;
        }
        if s.queue.len() >= self.max_waiting {
            return Entry::Full {
                active: s.active,
                waiting: s.queue.len(),
            };
        }
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.queue.push_back(ticket);
        Entry::Queued(ticket)
    }

    /// Waits until `ticket` is the oldest in the queue and a slot is free (then takes the
    /// slot: true), or until `timeout` has passed (then leaves the queue: false).
    pub fn wait(&self, ticket: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            if s.queue.front() == Some(&ticket) && s.active < self.max_active {
                s.queue.pop_front();
                s.active += 1;
                // The next in line may fit too.
                self.changed.notify_all();
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                s.queue.retain(|&t| t != ticket);
                self.changed.notify_all();
                return false;
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Ends a session: its slot goes to the oldest waiting connection.
    pub fn leave(&self) {
        let mut s = self.lock();
        s.active = s.active.saturating_sub(1);
        self.changed.notify_all();
    }

    /// Sessions running and connections waiting.
    pub fn counts(&self) -> (usize, usize) {
        let s = self.lock();
        (s.active, s.queue.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn beyond_the_slots_connections_queue_then_are_refused() {
        let a = Admission::new(2, 1);
        assert_eq!(a.enter(), Entry::Now);
        assert_eq!(a.enter(), Entry::Now);
        assert_eq!(a.enter(), Entry::Queued(0));
        assert_eq!(
            a.enter(),
            Entry::Full {
                active: 2,
                waiting: 1
            }
        );
        // Nobody leaves: the waiter's deadline passes and it leaves the queue.
        assert!(!a.wait(0, Duration::from_millis(10)));
        assert_eq!(a.counts(), (2, 0));
    }

    #[test]
    fn waiting_connections_are_admitted_in_arrival_order() {
        let a = Arc::new(Admission::new(1, 8));
        assert_eq!(a.enter(), Entry::Now);
        let tickets: Vec<u64> = (0..4)
            .map(|_| match a.enter() {
                Entry::Queued(t) => t,
                other => panic!("{other:?}"),
            })
            .collect();
        let order = Arc::new(Mutex::new(Vec::new()));
        // Start the waiters newest first, so arrival at the lock does not give the order.
        let waiters: Vec<_> = tickets
            .iter()
            .rev()
            .map(|&t| {
                let (a, order) = (Arc::clone(&a), Arc::clone(&order));
                thread::spawn(move || {
                    assert!(a.wait(t, Duration::from_secs(30)));
                    order.lock().unwrap().push(t);
                    a.leave();
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(20));
        a.leave();
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), tickets);
        assert_eq!(a.counts(), (0, 0));
    }

    #[test]
    fn a_new_connection_does_not_jump_the_queue() {
        let a = Admission::new(1, 4);
        assert_eq!(a.enter(), Entry::Now);
        assert_eq!(a.enter(), Entry::Queued(0));
        a.leave();
        // A slot is free, but ticket 0 is still waiting for it.
        assert_eq!(a.enter(), Entry::Queued(1));
        assert!(a.wait(0, Duration::from_secs(1)));
    }
}
