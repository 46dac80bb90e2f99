//! The UART host bridge `vta_uart_bridge`: frames of the protocol of `drivers::serial` in,
//! register and memory accesses out, responses back.
//!
//! * **Line**: `uart_rx` → [`hdl::widgets::uart_rx`] → a 16-byte receive FIFO (room for the
//!   bytes that arrive while a memory write waits for the accelerator's longest burst) → the
//!   frame engine → an 8-byte transmit FIFO → [`hdl::widgets::uart_tx`] → `uart_tx`. A
//!   character that arrives with a bad stop bit or finds the FIFO full is lost and counted
//!   (INFO `RX_ERRORS`); the frame's check bytes or its timeout then catch the loss.
//! * **Frame engine**: hunts for the request sync byte, collects the header, checks its CRC,
//!   decodes the op and the address region, then reads words (each read as one access, its
//!   four bytes sent while the next is fetched) or collects write words (each memory word
//!   written as soon as it is complete; a register word held until the data's check byte
//!   matched). Any error, and any silence of `frame_timeout` cycles inside a frame, ends
//!   the frame: after an error in the header the engine drops bytes until the line has
//!   been quiet for `frame_timeout` cycles (the length of what follows is unknown), then
//!   answers with the status.
//! * **Buses**: `m_ctl_*` is an AXI4-Lite master to the accelerator's control port (one
//!   transaction at a time); `m_axi_*` an AXI4 master to the device memory, single-beat
//!   INCR accesses of one 32-bit lane with its byte strobes (a UART delivers a word every
//!   40 bit times, far below one beat per cycle). A read is checked against its region
//!   before it starts, and the slaves answer such reads OKAY, so the bridge has no `rresp`
//!   inputs (nor `rlast`: every read is one beat); write responses are checked.
//! * **Status**: whenever the engine is idle, every `status_poll` cycles it reads CONTROL
//!   (as do the host's own reads of it) and shows its running, done and error bits on
//!   `acc_running`, `acc_done`, `acc_error`, for the board's LEDs.

use hdl::widgets::{small_fifo, uart_rx, uart_tx};
use hdl::{count_bits, Module, ModuleBuilder, Sig};

use drivers::serial::protocol::{
    self as wire, CONTROL_BYTES, ID_VALUE, INFO_BASE, INFO_BYTES, REQUEST_SYNC, RESPONSE_SYNC,
};

use crate::util::log2;

/// Parameters of [`uart_bridge`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeConfig {
    /// Clock cycles per UART bit.
    pub divisor: u32,
    /// Cycles of silence inside a frame after which the frame is abandoned.
    pub frame_timeout: u32,
    /// Cycles between two reads of CONTROL for the status outputs.
    pub status_poll: u32,
    /// Device memory window, as the accelerator sees it.
    pub mem_base: u32,
    pub mem_bytes: u32,
    /// What INFO reports of the build (the divisor is derived from them).
    pub clock_hz: u32,
    pub baud: u32,
    /// Width of the memory bus.
    pub data_bits: u32,
}

/// The frame engine's states.
#[derive(Clone, Copy)]
enum St {
    Hunt = 0,
    Header,
    Decode,
    Data,
    MemWrite,
    CtlWrite,
    Discard,
    RespSync,
    RespStatus,
    ReadWord,
    SendWord,
    RespCheck,
}

/// Address regions, as decoded from a header.
const REGION_CONTROL: u64 = 0;
const REGION_INFO: u64 = 1;
const REGION_MEMORY: u64 = 2;

/// The CRC-8 of the protocol over `crc` followed by `byte` (eight unrolled steps).
fn crc8_step<'a>(m: &'a ModuleBuilder, crc: Sig<'a>, byte: Sig<'a>) -> Sig<'a> {
    let mut c = crc ^ byte;
    for _ in 0..8 {
        c = m.mux(c.bit(7), (c << 1) ^ 0x07, c << 1);
    }
    c
}

/// A counter of events that wraps at 2^32.
fn counter<'a>(m: &'a ModuleBuilder, name: &str, inc: Sig<'a>) -> Sig<'a> {
    let c = m.reg(name, 32, 0);
    m.next_when(c, inc, c + 1);
    c
}

/// Builds `vta_uart_bridge`.
pub fn uart_bridge(c: &BridgeConfig) -> Module {
    let m = ModuleBuilder::new("vta_uart_bridge");
    let dw = c.data_bits;
    let lane_bits = log2(dw / 32); // 32-bit lanes of the memory bus

    // ---- the line ------------------------------------------------------------------------
    let rx = m.instance("u_rx", &uart_rx(c.divisor));
    rx.connect("rx", m.input("uart_rx", 1));
    let rxq = m.instance("u_rx_fifo", &small_fifo(8, 16));
    rxq.connect("in_valid", rx.output("valid"));
    rxq.connect("in_data", rx.output("data"));
    let lost = m.named(
        "rx_lost",
        rx.output("framing_error") | (rx.output("valid") & !rxq.output("in_ready")),
    );
    let rx_errors = counter(&m, "rx_errors", lost);
    let have = rxq.output("out_valid");
    let byte = rxq.output("out_data");
    let tx = m.instance("u_tx", &uart_tx(c.divisor));
    let txq = m.instance("u_tx_fifo", &small_fifo(8, 8));
    tx.connect("valid", txq.output("out_valid"));
    tx.connect("data", txq.output("out_data"));
    txq.connect("out_ready", tx.output("ready"));
    m.output_from("uart_tx", tx.output("tx"));

    // Cycles since a character last arrived, saturating at the frame timeout.
    let tw = count_bits(u64::from(c.frame_timeout));
    let silent = m.reg("silent", tw, 0);
    let quiet = silent.eq(u64::from(c.frame_timeout));
    let timed_out = m.named("timed_out", quiet & !have);
    m.next(
        silent,
        m.mux(rx.output("valid"), 0, m.mux(quiet, silent, silent + 1)),
    );

    // ---- the engine's registers --------------------------------------------------------------
    let state = m.reg("state", 4, St::Hunt as u64);
    let is = |s: St| state.eq(s as u64);
    let index = m.reg("byte_index", 3, 0); // header byte, or byte of a word
    let op = m.reg_noreset("op", 8);
    let count = m.reg_noreset("count", 8); // words - 1
    let addr = m.reg_noreset("addr", 32);
    let left = m.reg_noreset("left", 9); // words still to move
    let word = m.reg_noreset("word", 32);
    let crc = m.reg_noreset("crc", 8);
    let status = m.reg_noreset("status", 3);
    let region = m.reg_noreset("region", 2);
    let header_ok = m.reg_noreset("header_ok", 1);
    let bus_error = m.reg_noreset("bus_error", 1);
    let sent = m.reg("request_sent", 1, 0); // the current word's access was issued

    let take = m.named(
        "take",
        have & (is(St::Hunt) | is(St::Header) | is(St::Data) | is(St::Discard)),
    );
    rxq.connect("out_ready", take);
    let crc_in = crc8_step(&m, crc, byte);

    // ---- decoding a header ---------------------------------------------------------------
    let words = m.named("words", count.zext(9) + 1);
    let end = m.named("frame_end", addr.zext(33) + (words.zext(33) << 2));
    let is_write = op.eq(wire::Op::Write as u64);
    let op_ok = op.le(wire::Op::Write as u64);
    let high = |from: u32, value: u64| addr.slice(31, from).eq(value >> from);
    let in_control = high(8, 0) & end.le(u64::from(CONTROL_BYTES));
    let in_info = high(5, u64::from(INFO_BASE)) & end.le(u64::from(INFO_BASE + INFO_BYTES));
    let mem_bits = log2(c.mem_bytes);
    let in_memory = high(mem_bits, u64::from(c.mem_base))
        & end.le(u64::from(c.mem_base) + u64::from(c.mem_bytes));
    let addr_ok = m.named(
        "addr_ok",
        addr.slice(1, 0).eq(0)
            & (in_control | in_info | in_memory)
            & !(is_write & in_info)
            & !(is_write & in_control & count.ne(0)),
    );
    let decoded_status = m.named(
        "decoded_status",
        m.mux(
            !header_ok,
            wire::Status::HeaderCheck as u64,
            m.mux(
                !op_ok,
                m.lit(wire::Status::BadOp as u64, 3),
                m.mux(
                    op.ne(wire::Op::Nop as u64) & !addr_ok,
                    m.lit(wire::Status::BadAddress as u64, 3),
                    m.lit(wire::Status::Ok as u64, 3),
                ),
            ),
        ),
    );
    let decoded_region = m.mux(
        in_control,
        m.lit(REGION_CONTROL, 2),
        m.mux(in_info, m.lit(REGION_INFO, 2), m.lit(REGION_MEMORY, 2)),
    );

    // ---- the buses -----------------------------------------------------------------------
    // AXI4-Lite to the control port: the engine's accesses and the status poll.
    let ctl_in = |s: &str, w: u32| m.input(&format!("m_ctl_{s}"), w);
    let ctl_arready = ctl_in("arready", 1);
    let ctl_rvalid = ctl_in("rvalid", 1);
    let ctl_rdata = ctl_in("rdata", 32);
    let ctl_awready = ctl_in("awready", 1);
    let ctl_wready = ctl_in("wready", 1);
    let ctl_bvalid = ctl_in("bvalid", 1);
    let ctl_bresp = ctl_in("bresp", 2);
    let ar_pending = m.reg("ctl_ar_pending", 1, 0);
    let r_waiting = m.reg("ctl_r_waiting", 1, 0);
    let r_for_host = m.reg("ctl_r_for_host", 1, 0);
    let araddr = m.reg("ctl_araddr_q", 8, 0);
    let lite_idle = m.named("ctl_idle", !ar_pending & !r_waiting);
    let poll_timer = m.reg("poll_timer", count_bits(u64::from(c.status_poll)), 0);
    let poll_due = poll_timer.eq(u64::from(c.status_poll));
    let poll = m.named("poll", poll_due & is(St::Hunt) & !have & lite_idle);
    m.next(
        poll_timer,
        m.mux(poll, 0, m.mux(poll_due, poll_timer, poll_timer + 1)),
    );

    let mem_in = |s: &str, w: u32| m.input(&format!("m_axi_{s}"), w);
    let mem_arready = mem_in("arready", 1);
    let mem_rvalid = mem_in("rvalid", 1);
    let mem_rdata = mem_in("rdata", dw);
    let mem_awready = mem_in("awready", 1);
    let mem_wready = mem_in("wready", 1);
    let mem_bvalid = mem_in("bvalid", 1);
    let mem_bresp = mem_in("bresp", 2);

    let to_memory = region.eq(REGION_MEMORY);
    let to_control = region.eq(REGION_CONTROL);
    // Starting the current word's read: memory at once, the control port when free.
    let start_read = m.named(
        "start_read",
        is(St::ReadWord) & !sent & (to_memory | (to_control & lite_idle)),
    );
    let ctl_read = start_read & to_control;
    let mem_read = start_read & to_memory;
    let ar_fire = ar_pending & ctl_arready;
    let r_fire = r_waiting & ctl_rvalid;
    m.next(ar_pending, ctl_read | poll | (ar_pending & !ctl_arready));
    m.next(r_waiting, ar_fire | (r_waiting & !ctl_rvalid));
    m.next_when(r_for_host, ctl_read | poll, ctl_read);
    m.next_when(
        araddr,
        ctl_read | poll,
        m.mux(ctl_read, addr.slice(7, 0), 0),
    );
    m.output_from("m_ctl_arvalid", ar_pending);
    m.output_from("m_ctl_araddr", araddr);
    m.output_from("m_ctl_rready", r_waiting);
    // CONTROL's status bits, refreshed by every read of it.
    let shown = m.reg("acc_status", 3, 0);
    m.next_when(shown, r_fire & araddr.eq(0), ctl_rdata.slice(2, 0));
    m.output_from("acc_running", shown.bit(0));
    m.output_from("acc_done", shown.bit(1));
    m.output_from("acc_error", shown.bit(2));

    let mem_ar = m.reg("mem_ar_pending", 1, 0);
    let mem_r_fire = sent & is(St::ReadWord) & to_memory & mem_rvalid;
    m.next(mem_ar, mem_read | (mem_ar & !mem_arready));
    let beat_addr = addr.slice(31, 2 + lane_bits).cat(m.zero(2 + lane_bits));
    m.output_from("m_axi_arvalid", mem_ar);
    m.output_from("m_axi_araddr", beat_addr);
    m.output_from("m_axi_arlen", m.zero(8));
    m.output_from("m_axi_arsize", m.lit(u64::from(log2(dw / 8)), 3));
    m.output_from("m_axi_arburst", m.lit(1, 2)); // INCR
    m.output_from("m_axi_rready", sent & is(St::ReadWord) & to_memory);
    let lane = if lane_bits > 0 {
        Some(addr.slice(1 + lane_bits, 2))
    } else {
        None
    };
    let mem_word = match lane {
        Some(l) => m.index(l, &mem_rdata.lanes(32)),
        None => mem_rdata,
    };

    // The info registers, in address order.
    let info = [
        m.lit(u64::from(ID_VALUE), 32),
        m.lit(u64::from(c.mem_base), 32),
        m.lit(u64::from(c.mem_bytes), 32),
        m.lit(u64::from(c.clock_hz), 32),
        m.lit(u64::from(c.baud), 32),
        m.lit(u64::from(c.frame_timeout), 32),
        rx_errors,
    ];
    let info_read = is(St::ReadWord) & region.eq(REGION_INFO);

    // Writes: memory words as they complete, a register word after the check byte.
    let data_byte = is(St::Data) & take & left.ne(0);
    let check_byte = is(St::Data) & take & left.eq(0);
    let word_done = data_byte & index.eq(3);
    let to_mem_write = word_done & to_memory;
    let data_ok = byte.eq(crc);
    let to_ctl_write = check_byte & data_ok & to_control;
    let (mem_aw, mem_w) = (m.reg("mem_aw_pending", 1, 0), m.reg("mem_w_pending", 1, 0));
    m.next(mem_aw, to_mem_write | (mem_aw & !mem_awready));
    m.next(mem_w, to_mem_write | (mem_w & !mem_wready));
    let mem_b_fire = is(St::MemWrite) & mem_bvalid;
    m.output_from("m_axi_awvalid", mem_aw);
    m.output_from("m_axi_awaddr", beat_addr);
    m.output_from("m_axi_awlen", m.zero(8));
    m.output_from("m_axi_awsize", m.lit(u64::from(log2(dw / 8)), 3));
    m.output_from("m_axi_awburst", m.lit(1, 2));
    m.output_from("m_axi_wvalid", mem_w);
    m.output_from("m_axi_wdata", word.repeat(dw / 32));
    let strobes = match lane {
        Some(l) => m.pack(
            &(0..dw / 32)
                .map(|i| l.eq(u64::from(i)).repeat(4))
                .collect::<Vec<_>>(),
        ),
        None => m.ones(4),
    };
    m.output_from("m_axi_wstrb", strobes);
    m.output_from("m_axi_wlast", m.bit(true));
    m.output_from("m_axi_bready", is(St::MemWrite));
    let (ctl_aw, ctl_w) = (m.reg("ctl_aw_pending", 1, 0), m.reg("ctl_w_pending", 1, 0));
    m.next(ctl_aw, to_ctl_write | (ctl_aw & !ctl_awready));
    m.next(ctl_w, to_ctl_write | (ctl_w & !ctl_wready));
    let ctl_b_fire = is(St::CtlWrite) & ctl_bvalid;
    m.output_from("m_ctl_awvalid", ctl_aw);
    m.output_from("m_ctl_awaddr", addr.slice(7, 0));
    m.output_from("m_ctl_wvalid", ctl_w);
    m.output_from("m_ctl_wdata", word);
    m.output_from("m_ctl_wstrb", m.ones(4));
    m.output_from("m_ctl_bready", is(St::CtlWrite));

    // ---- the response ------------------------------------------------------------------------
    let tx_byte = m.case(
        state,
        &[
            (St::RespSync as u64, m.lit(u64::from(RESPONSE_SYNC), 8)),
            (St::RespStatus as u64, status.zext(8)),
            (St::SendWord as u64, word.slice(7, 0)),
        ],
        crc,
    );
    let sending = is(St::RespSync) | is(St::RespStatus) | is(St::SendWord) | is(St::RespCheck);
    let push = m.named("push", sending & txq.output("in_ready"));
    txq.connect("in_valid", sending);
    txq.connect("in_data", tx_byte);
    let crc_out = crc8_step(&m, crc, tx_byte);
    let frame_error = push & is(St::RespCheck) & status.ne(wire::Status::Ok as u64);
    let frame_errors = counter(&m, "frame_errors", frame_error);
    let info_word = m.index(addr.slice(4, 2), &[&info[..], &[frame_errors]].concat());

    // ---- the state machine ---------------------------------------------------------------------
    let go = |s: St| m.lit(s as u64, 4);
    let status_lit = |s: wire::Status| m.lit(s as u64, 3);
    let read_op = op.eq(wire::Op::Read as u64);
    let last_byte = index.eq(3);
    let word_sent = is(St::SendWord) & push & last_byte;
    let next_state = m.case(
        state,
        &[
            (
                St::Hunt as u64,
                m.mux(
                    take & byte.eq(u64::from(REQUEST_SYNC)),
                    go(St::Header),
                    go(St::Hunt),
                ),
            ),
            (
                St::Header as u64,
                m.mux(
                    take & index.eq(7),
                    go(St::Decode),
                    m.mux(timed_out, go(St::RespSync), go(St::Header)),
                ),
            ),
            (
                St::Decode as u64,
                m.mux(
                    decoded_status.ne(wire::Status::Ok as u64),
                    go(St::Discard),
                    m.mux(is_write, go(St::Data), go(St::RespSync)),
                ),
            ),
            (
                St::Data as u64,
                m.mux(
                    to_mem_write,
                    go(St::MemWrite),
                    m.mux(
                        to_ctl_write,
                        go(St::CtlWrite),
                        m.mux(check_byte | timed_out, go(St::RespSync), go(St::Data)),
                    ),
                ),
            ),
            (
                St::MemWrite as u64,
                m.mux(mem_b_fire, go(St::Data), go(St::MemWrite)),
            ),
            (
                St::CtlWrite as u64,
                m.mux(ctl_b_fire, go(St::RespSync), go(St::CtlWrite)),
            ),
            (
                St::Discard as u64,
                m.mux(timed_out, go(St::RespSync), go(St::Discard)),
            ),
            (
                St::RespSync as u64,
                m.mux(push, go(St::RespStatus), go(St::RespSync)),
            ),
            (
                St::RespStatus as u64,
                m.mux(
                    push,
                    m.mux(
                        read_op & status.eq(wire::Status::Ok as u64),
                        go(St::ReadWord),
                        go(St::RespCheck),
                    ),
                    go(St::RespStatus),
                ),
            ),
            (
                St::ReadWord as u64,
                m.mux(
                    info_read | (r_fire & r_for_host) | mem_r_fire,
                    go(St::SendWord),
                    go(St::ReadWord),
                ),
            ),
            (
                St::SendWord as u64,
                m.mux(
                    word_sent,
                    m.mux(left.eq(1), go(St::RespCheck), go(St::ReadWord)),
                    go(St::SendWord),
                ),
            ),
            (
                St::RespCheck as u64,
                m.mux(push, go(St::Hunt), go(St::RespCheck)),
            ),
        ],
        go(St::Hunt),
    );
    m.next(state, next_state);

    let header_byte = is(St::Header) & take;
    let send_push = is(St::SendWord) & push;
    m.next_when(
        index,
        (is(St::Hunt) & take) | header_byte | is(St::Decode) | data_byte | send_push,
        m.mux(
            is(St::Hunt),
            m.lit(1, 3),
            m.mux(
                is(St::Decode) | ((data_byte | send_push) & last_byte),
                m.lit(0, 3),
                index + 1,
            ),
        ),
    );
    m.next_when(op, header_byte & index.eq(1), byte);
    m.next_when(count, header_byte & index.eq(2), byte);
    m.next_when(
        addr,
        (header_byte & index.ge(3) & index.le(6)) | mem_b_fire | word_sent,
        m.mux(header_byte, byte.cat(addr.slice(31, 8)), addr + 4),
    );
    m.next_when(header_ok, header_byte & index.eq(7), byte.eq(crc));
    m.next_when(
        left,
        is(St::Decode) | word_done | word_sent,
        m.mux(is(St::Decode), words, left - 1),
    );
    m.next_when(
        word,
        data_byte | (is(St::SendWord) & push) | (r_fire & r_for_host) | mem_r_fire | info_read,
        m.mux(
            data_byte,
            byte.cat(word.slice(31, 8)),
            m.mux(
                is(St::SendWord),
                m.zero(8).cat(word.slice(31, 8)),
                m.mux(info_read, info_word, m.mux(mem_r_fire, mem_word, ctl_rdata)),
            ),
        ),
    );
    m.next_when(sent, start_read | is(St::SendWord), start_read);
    let crc_start = crc8_step(&m, m.zero(8), m.lit(u64::from(REQUEST_SYNC), 8));
    m.next_when(
        crc,
        (is(St::Hunt) & take) | header_byte | data_byte | is(St::Decode) | push,
        m.mux(
            is(St::Hunt),
            crc_start,
            m.mux(
                is(St::Decode),
                m.zero(8),
                m.mux(
                    is(St::RespSync),
                    crc8_step(&m, m.zero(8), m.lit(u64::from(RESPONSE_SYNC), 8)),
                    m.mux(push, crc_out, crc_in),
                ),
            ),
        ),
    );
    m.next_when(region, is(St::Decode), decoded_region);
    m.next_when(
        bus_error,
        is(St::Decode) | mem_b_fire | ctl_b_fire,
        m.mux(
            is(St::Decode),
            0,
            bus_error | mem_bresp.ne(0) | ctl_bresp.ne(0),
        ),
    );
    // The status: the header's, a lost byte's, the data's check byte, a slave's error.
    m.next_when(
        status,
        is(St::Decode) | check_byte | (timed_out & (is(St::Header) | is(St::Data))) | ctl_b_fire,
        m.mux(
            is(St::Decode),
            decoded_status,
            m.mux(
                timed_out & (is(St::Header) | is(St::Data)),
                status_lit(wire::Status::Timeout),
                m.mux(
                    check_byte & !data_ok,
                    status_lit(wire::Status::DataCheck),
                    m.mux(
                        bus_error | (ctl_b_fire & ctl_bresp.ne(0)),
                        status_lit(wire::Status::BusError),
                        status_lit(wire::Status::Ok),
                    ),
                ),
            ),
        ),
    );
    m.finish().expect("vta_uart_bridge is well formed")
}
