//! A UART: 8 data bits, no parity, 1 stop bit (8N1), least significant bit first, the line
//! idle high. One bit lasts `divisor` clock cycles (`divisor = clock / baud`, rounded).
//!
//! * [`uart_rx`] brings the (asynchronous) `rx` pin into the clock domain through a 2-flop
//!   synchronizer, takes a falling edge as a start bit, checks the start bit again half a
//!   bit later (a shorter low pulse is a glitch and ignored), then samples each data bit and
//!   the stop bit in the middle of its bit time. A byte whose stop bit reads 0 is dropped
//!   and reported on `framing_error`. After the middle of the stop bit it waits for the next
//!   start edge, so it keeps in step with a sender up to about ±4 % off the nominal rate.
//! * [`uart_tx`] sends a byte accepted on a valid/ready handshake: start bit, 8 data bits,
//!   stop bit, then is ready again (back-to-back bytes have no gap). Its `tx` pin comes
//!   straight from a register (no glitches).
//!
//! A UART cannot be paused, so the receiver has no `ready`: a byte is offered for one cycle
//! and the consumer takes it or loses it (put a FIFO behind it if it may be busy for longer
//! than a character time).

use crate::{count_bits, Module, ModuleBuilder};

/// Smallest supported divisor: the receiver needs a middle of the bit to sample.
pub const MIN_UART_DIVISOR: u32 = 4;
/// Largest supported divisor (a 16-bit bit-time counter).
pub const MAX_UART_DIVISOR: u32 = 1 << 16;

#[track_caller]
fn check_divisor(divisor: u32) {
    assert!(
        (MIN_UART_DIVISOR..=MAX_UART_DIVISOR).contains(&divisor),
        "UART divisor (clock cycles per bit) must be {MIN_UART_DIVISOR}..={MAX_UART_DIVISOR}, \
         got {divisor}"
    );
}

/// The receiver, `divisor` clock cycles per bit. Module name `uart_rx_d<divisor>`.
///
/// Ports: `rx` (the pin, asynchronous), `valid` (high for one cycle when a byte arrived),
/// `data` (the byte; held until the next one), `framing_error` (high for one cycle when a
/// byte's stop bit was 0: the byte is dropped). `valid` rises one cycle after the middle of
/// the stop bit (plus the synchronizer's two cycles after the pin).
pub fn uart_rx(divisor: u32) -> Module {
    check_divisor(divisor);
    let m = ModuleBuilder::new(&format!("uart_rx_d{divisor}"));
    let cw = count_bits(u64::from(divisor - 1));
    let rx = m.input("rx", 1);

    // Two flip-flops against metastability; both reset to the idle level so that reset
    // does not look like a start bit.
    let sync1 = m.reg("rx_sync1", 1, 1);
    let line = m.reg("rx_sync2", 1, 1);
    m.next(sync1, rx);
    m.next(line, sync1);

    let busy = m.reg("busy", 1, 0);
    // Bit being sampled next: 0 start, 1..=8 data, 9 stop.
    let bit = m.reg("bit_index", 4, 0);
    // Cycles until the next sample.
    let countdown = m.reg("countdown", cw, 0);
    let shift = m.reg_noreset("shift", 8);

    let start = m.named("start_edge", !busy & !line);
    let sample = m.named("sample", busy & countdown.eq(0));
    let false_start = m.named("false_start", sample & bit.eq(0) & line);
    let stop = m.named("stop_sample", sample & bit.eq(9));
    let data_bit = m.named("data_sample", sample & bit.ne(0) & bit.ne(9));

    m.next(busy, m.mux(start, 1, busy & !false_start & !stop));
    m.next_when(bit, start | sample, m.mux(start, 0, bit + 1));
    // Half a bit from the edge to the middle of the start bit, then a whole bit per sample.
    let reload = m.mux(
        start,
        m.lit(u64::from(divisor / 2 - 1), cw),
        m.lit(u64::from(divisor - 1), cw),
    );
    m.next_when(
        countdown,
        start | busy,
        m.mux(start | sample, reload, countdown - 1),
    );
    m.next_when(shift, data_bit, line.cat(shift.slice(7, 1)));

    let valid = m.reg("valid_q", 1, 0);
    let framing_error = m.reg("framing_error_q", 1, 0);
    m.next(valid, stop & line);
    m.next(framing_error, stop & !line);
    m.output_from("valid", valid);
    m.output_from("data", shift);
    m.output_from("framing_error", framing_error);
    m.finish().expect("uart_rx is well formed")
}

/// The transmitter, `divisor` clock cycles per bit. Module name `uart_tx_d<divisor>`.
///
/// Ports: `valid`, `ready`, `data` (a byte to send, valid/ready), `tx` (the pin, idle high),
/// `busy` (a character is on the line). `ready` is high when no character is being sent
/// and in the last cycle of a stop bit.
pub fn uart_tx(divisor: u32) -> Module {
    check_divisor(divisor);
    let m = ModuleBuilder::new(&format!("uart_tx_d{divisor}"));
    let cw = count_bits(u64::from(divisor - 1));
    let valid = m.input("valid", 1);
    let data = m.input("data", 8);

    let busy = m.reg("busy_q", 1, 0);
    // The character, start bit in bit 0; shifted right with ones behind it, so the line
    // returns to idle by itself.
    let frame = m.reg("frame", 10, 0x3ff);
    let bit = m.reg("bit_index", 4, 0);
    let countdown = m.reg("countdown", cw, 0);

    let bit_end = m.named("bit_end", busy & countdown.eq(0));
    let last = m.named("last_bit", bit_end & bit.eq(9));
    // Ready also in the stop bit's last cycle, so that characters follow without a gap.
    let ready = m.output_from("ready", !busy | last);
    let load = m.named("load", valid & ready);

    m.next(busy, load | (busy & !last));
    m.next_when(
        frame,
        load | bit_end,
        m.mux(
            load,
            m.cat(&[m.bit(true), data, m.bit(false)]),
            m.bit(true).cat(frame.slice(9, 1)),
        ),
    );
    m.next_when(bit, load | bit_end, m.mux(load, 0, bit + 1));
    m.next_when(
        countdown,
        load | busy,
        m.mux(
            load | bit_end,
            m.lit(u64::from(divisor - 1), cw),
            countdown - 1,
        ),
    );

    m.output_from("tx", frame.bit(0));
    m.output_from("busy", busy);
    m.finish().expect("uart_tx is well formed")
}
