//! The UART receiver and transmitter: the transmitter's line against the 8N1 waveform bit
//! by bit, a transmitter looped back into receivers a few percent off its rate, and the
//! receiver on a line with glitches and framing errors.

use hdl::widgets::{uart_rx, uart_tx};
use hdl::{Module, ModuleBuilder};

use crate::util::{build, Rng};

/// A transmitter with `tx_div` cycles per bit wired to a receiver with `rx_div`.
fn loopback(tx_div: u32, rx_div: u32) -> Module {
    let m = ModuleBuilder::new(&format!("uart_loop_{tx_div}_{rx_div}"));
    let tx = m.instance("u_tx", &uart_tx(tx_div));
    tx.connect("valid", m.input("valid", 1));
    tx.connect("data", m.input("data", 8));
    m.output_from("ready", tx.output("ready"));
    let rx = m.instance("u_rx", &uart_rx(rx_div));
    rx.connect("rx", tx.output("tx"));
    m.output_from("rx_valid", rx.output("valid"));
    m.output_from("rx_data", rx.output("data"));
    m.output_from("framing_error", rx.output("framing_error"));
    m.finish().unwrap()
}

#[test]
fn transmitter_draws_the_8n1_waveform_back_to_back() {
    let div = 5u64;
    let mut sim = build(uart_tx(div as u32));
    let (valid, data, ready, tx, busy) = (
        sim.port("valid"),
        sim.port("data"),
        sim.port("ready"),
        sim.port("tx"),
        sim.port("busy"),
    );
    sim.reset(2);
    assert!(sim.get_bool(tx), "the line idles high");
    let bytes = [0x55u8, 0x00, 0xff, 0xa3];
    let mut line = vec![];
    let mut next = 0;
    for _ in 0..(bytes.len() as u64 * 10 * div + 20) {
        sim.set(valid, (next < bytes.len()) as u64);
        if next < bytes.len() {
            sim.set(data, bytes[next] as u64);
        }
        sim.eval();
        if next < bytes.len() && sim.get_bool(ready) {
            next += 1;
        }
        assert!(
            sim.get_bool(ready) || sim.get_bool(busy),
            "idle but not ready"
        );
        sim.tick();
        line.push(sim.get_bool(tx));
    }
    let mut want = vec![];
    for b in bytes {
        let bits = std::iter::once(false)
            .chain((0..8).map(|i| b >> i & 1 == 1))
            .chain(std::iter::once(true));
        for bit in bits {
            want.extend(std::iter::repeat_n(bit, div as usize));
        }
    }
    assert_eq!(&line[..want.len()], &want[..], "the line, cycle by cycle");
    assert!(
        line[want.len()..].iter().all(|&b| b),
        "idle after the last stop bit"
    );
}

/// Sends random bytes through a transmitter into a receiver and checks they all arrive, in
/// order, without framing errors.
fn check_loopback(tx_div: u32, rx_div: u32, seed: u64) {
    let mut sim = build(loopback(tx_div, rx_div));
    let (valid, data, ready) = (sim.port("valid"), sim.port("data"), sim.port("ready"));
    let (rx_valid, rx_data, ferr) = (
        sim.port("rx_valid"),
        sim.port("rx_data"),
        sim.port("framing_error"),
    );
    let mut rng = Rng::new(seed);
    let sent: Vec<u8> = rng.bytes(200);
    let mut got = vec![];
    let mut next = 0;
    sim.reset(3);
    let cycles = (sent.len() as u64 + 2) * 10 * u64::from(tx_div.max(rx_div)) * 2;
    for cycle in 0..cycles {
        // Sometimes a pause between characters.
        let offer = next < sent.len() && rng.chance(80);
        sim.set(valid, offer as u64);
        if offer {
            sim.set(data, sent[next] as u64);
        }
        sim.eval();
        if offer && sim.get_bool(ready) {
            next += 1;
        }
        assert!(
            !sim.get_bool(ferr),
            "framing error at cycle {cycle} (tx {tx_div}, rx {rx_div} cycles per bit)"
        );
        if sim.get_bool(rx_valid) {
            got.push(sim.get(rx_data) as u8);
        }
        sim.tick();
    }
    assert_eq!(
        got, sent,
        "bytes received (tx {tx_div}, rx {rx_div} cycles per bit)"
    );
}

#[test]
fn loopback_at_the_same_rate_and_a_few_percent_off() {
    check_loopback(4, 4, 1);
    check_loopback(16, 16, 2);
    check_loopback(100, 97, 3);
    check_loopback(100, 103, 4);
}

/// Drives the receiver's pin from a list of (level, cycles) and returns the bytes received
/// and the number of framing errors.
fn receive(sim: &mut hdl::verilator::Model, line: &[(bool, u64)]) -> (Vec<u8>, u32) {
    let (rx, valid, data, ferr) = (
        sim.port("rx"),
        sim.port("valid"),
        sim.port("data"),
        sim.port("framing_error"),
    );
    let (mut bytes, mut errors) = (vec![], 0);
    for &(level, cycles) in line {
        sim.set(rx, level as u64);
        for _ in 0..cycles {
            sim.eval();
            if sim.get_bool(valid) {
                bytes.push(sim.get(data) as u8);
            }
            errors += sim.get_bool(ferr) as u32;
            sim.tick();
        }
    }
    (bytes, errors)
}

/// The line for `byte` at `div` cycles per bit, with stop bit `stop`.
fn character(byte: u8, div: u64, stop: bool) -> Vec<(bool, u64)> {
    let mut v = vec![(false, div)];
    v.extend((0..8).map(|i| (byte >> i & 1 == 1, div)));
    v.push((stop, div));
    v
}

#[test]
fn receiver_ignores_glitches_and_drops_bad_stop_bits() {
    let div = 8;
    let mut sim = build(uart_rx(div as u32));
    sim.set(sim.port("rx"), 1);
    sim.reset(3);
    let mut line = vec![(true, 20), (false, 2), (true, 30)]; // a glitch shorter than half a bit
    line.extend(character(0x3c, div, true));
    line.extend(character(0x81, div, false)); // framing error
    line.push((true, 3 * div));
    line.extend(character(0xa5, div, true));
    line.push((true, 3 * div));
    let (bytes, errors) = receive(&mut sim, &line);
    assert_eq!(bytes, [0x3c, 0xa5]);
    assert_eq!(errors, 1);
}

#[test]
#[should_panic(expected = "UART divisor (clock cycles per bit) must be 4..=65536, got 3")]
fn a_divisor_too_small_to_sample_is_refused() {
    uart_rx(3);
}
