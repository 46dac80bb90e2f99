//! The debug outputs of `vta_top`: the state of the three modules, the execution core and
//! the token queues, visible every cycle to a simulation (the cycle-accurate simulator's
//! instruction trace and its hang diagnosis read them). On a board they are left
//! unconnected and synthesis removes them.
//!
//! | port | width | meaning |
//! |---|---|---|
//! | `dbg_state` | [`STATE_BITS`] | packed per-cycle state, bits below |
//! | `dbg_tokens_l2g`, `_g2l`, `_g2s`, `_s2g` | `count_bits(TOKEN_QUEUE_DEPTH)` | tokens in each queue |
//!
//! `dbg_state`, for module `k` = 0 (load), 1 (compute), 2 (store), bits `4k..4k+3`:
//!
//! | bits | meaning |
//! |---|---|
//! | `4k+1 : 4k` | the module's sequencer: 0 idle, 1 executing an instruction, 2 done and waiting for room to push its tokens |
//! | `4k+2` | idle, and the instruction at the head of its command queue waits for a token to pop |
//! | `4k+3` | its command queue holds an instruction |
//!
//! and [`EXEC_HANDED`] (compute hands a GEMM/ALU to the execution core this cycle),
//! [`EXEC_DONE`] (the core completes one or two: either pipeline's `done`), [`EXEC_BUSY`]
//! (the core has work in flight), [`DISPATCHED`] (fetch dispatches an instruction to a
//! command queue this cycle), [`UOP_EVENT`] (the core writes back a micro-op this cycle)
//! and [`RUNNING`] (a run is in progress). Every bit reflects the cycle's state before the
//! clock edge.
//!
//! The sequencer's steps are visible as state changes: an instruction is *taken* (its pops
//! done) when the state goes from idle to executing, its work is complete when the state
//! leaves executing, and its tokens are pushed when the state returns to idle. Each state
//! lasts at least one cycle, so sampling every cycle sees every step.

/// The ports, as named in `vta_top`.
pub const STATE_PORT: &str = "dbg_state";
/// Width of `dbg_state`.
pub const STATE_BITS: u32 = 18;
/// The token-count port of queue `q` (`l2g`, `g2l`, `g2s`, `s2g`).
pub fn tokens_port(q: &str) -> String {
    format!("dbg_tokens_{q}")
}

/// Bit: compute hands a GEMM/ALU instruction to the execution core.
pub const EXEC_HANDED: u32 = 12;
/// Bit: the execution core completes an instruction (`done_gemm` or `done_alu`).
pub const EXEC_DONE: u32 = 13;
/// Bit: the execution core has an instruction in flight.
pub const EXEC_BUSY: u32 = 14;
/// Bit: fetch dispatches an instruction to a command queue.
pub const DISPATCHED: u32 = 15;
/// Bit: the execution core writes back a micro-op (GEMM, ALU or reset).
pub const UOP_EVENT: u32 = 16;
/// Bit: a run is in progress (CONTROL's running bit).
pub const RUNNING: u32 = 17;

/// The three modules, in the order of their fields in `dbg_state`.
pub const MODULES: [&str; 3] = ["load", "compute", "store"];

/// A module's sequencer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeqState {
    /// No instruction in progress.
    Idle,
    /// Executing an instruction (its tokens popped).
    Exec,
    /// The instruction's work is complete; waiting for room in a queue it pushes to.
    Push,
}

/// One module's fields of `dbg_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModuleState {
    pub state: SeqState,
    /// The head of its command queue waits for a token (only while idle).
    pub waiting_pop: bool,
    /// Its command queue holds an instruction.
    pub queued: bool,
}

/// `dbg_state` decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DebugState {
    /// Load, compute, store.
    pub modules: [ModuleState; 3],
    pub exec_handed: bool,
    pub exec_done: bool,
    pub exec_busy: bool,
    pub dispatched: bool,
    pub uop_event: bool,
    pub running: bool,
}

impl DebugState {
    /// Decodes the value of `dbg_state`.
    pub fn decode(bits: u64) -> DebugState {
        let bit = |i: u32| bits >> i & 1 == 1;
        let module = |k: u32| ModuleState {
            state: match bits >> (4 * k) & 3 {
                0 => SeqState::Idle,
                1 => SeqState::Exec,
                _ => SeqState::Push,
            },
            waiting_pop: bit(4 * k + 2),
            queued: bit(4 * k + 3),
        };
        DebugState {
            modules: [module(0), module(1), module(2)],
            exec_handed: bit(EXEC_HANDED),
            exec_done: bit(EXEC_DONE),
            exec_busy: bit(EXEC_BUSY),
            dispatched: bit(DISPATCHED),
            uop_event: bit(UOP_EVENT),
            running: bit(RUNNING),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding() {
        let d = DebugState::decode(0b10_0000_1100_0101_0010 | 1 << EXEC_DONE);
        assert_eq!(d.modules[0].state, SeqState::Push);
        assert!(!d.modules[0].waiting_pop && !d.modules[0].queued);
        assert_eq!(d.modules[1].state, SeqState::Exec);
        assert!(d.modules[1].waiting_pop && !d.modules[1].queued);
        assert_eq!(d.modules[2].state, SeqState::Idle);
        assert!(d.modules[2].waiting_pop && d.modules[2].queued);
        assert!(d.exec_done && d.running && !d.exec_busy && !d.uop_event);
    }
}
