//! An AXI4 master with INCR bursts for DMA engines: clients ask for (address, beats) and
//! receive or send a stream of data beats; the master splits requests into legal bursts.
//!
//! Burst rules it guarantees: `AxBURST` = INCR, `AxSIZE` = the full bus width, at most
//! `max_burst_beats` (≤ 256) beats per burst, and no burst crosses a 4 KiB boundary.
//! Addresses must be aligned to the bus width (the low address bits are ignored). No IDs
//! are used, so responses return in order. Several read bursts may be in flight
//! (`max_outstanding_reads`), and several write bursts (`max_outstanding_writes`).
//!
//! Client interface (all valid/ready):
//! * read requests `rd_req_{valid,ready,addr,beats}` and the data stream
//!   `rd_data_{valid,ready}`, `rd_data`, `rd_data_last` (last beat of a request). `rready`
//!   is `rd_data_ready`, so the client's backpressure reaches the bus directly;
//! * write requests `wr_req_{valid,ready,addr,beats}`, the data stream
//!   `wr_data_{valid,ready}`, `wr_data`, `wr_strb` (one bit per byte), and `wr_done`, high
//!   for one cycle when the last write response of a request arrives. Write data may be
//!   sent before or after its request is accepted; the stream must carry exactly the
//!   requested beats, in request order;
//! * `rd_error` / `wr_error`: sticky flags set by any response other than OKAY.
//!
//! A request for 0 beats is accepted and ignored (no data, no `wr_done`).
//!
//! The write data channel never waits for the write address handshake (AXI forbids that
//! dependency): each burst's length goes to a small FIFO the W side reads, independently of
//! the AW register.

use crate::{count_bits, Module, ModuleBuilder};

use super::{require_pow2, small_fifo};

/// Parameters of [`axi4_master`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxiMasterConfig {
    /// Data bus width in bits: 64, 128, 256 or 512 (32 also works).
    pub data_width: u32,
    /// Address width in bits (12..=64; usually 32).
    pub addr_width: u32,
    /// Bits of the request length in beats (`rd_req_beats`, `wr_req_beats`).
    pub len_width: u32,
    /// Longest burst in beats, 1..=256.
    pub max_burst_beats: u32,
    /// Read bursts in flight at once (1..=16).
    pub max_outstanding_reads: u32,
    /// Write bursts accepted but not yet answered (1..=16).
    pub max_outstanding_writes: u32,
    /// Prefix of the AXI port names, e.g. `m_axi` gives `m_axi_araddr`.
    pub prefix: String,
}

impl Default for AxiMasterConfig {
    fn default() -> Self {
        AxiMasterConfig {
            data_width: 64,
            addr_width: 32,
            len_width: 16,
            max_burst_beats: 256,
            max_outstanding_reads: 4,
            max_outstanding_writes: 4,
            prefix: "m_axi".to_string(),
        }
    }
}

impl AxiMasterConfig {
    #[track_caller]
    fn validate(&self) {
        require_pow2("AXI data width", self.data_width);
        assert!(
            (32..=1024).contains(&self.data_width),
            "AXI data width must be 32..=1024 bits, got {}",
            self.data_width
        );
        assert!(
            (12..=64).contains(&self.addr_width),
            "AXI address width must be 12..=64 bits, got {}",
            self.addr_width
        );
        assert!(
            (1..=32).contains(&self.len_width),
            "request length width must be 1..=32 bits, got {}",
            self.len_width
        );
        assert!(
            (1..=256).contains(&self.max_burst_beats),
            "max burst must be 1..=256 beats, got {}",
            self.max_burst_beats
        );
        for (what, v) in [
            ("max outstanding reads", self.max_outstanding_reads),
            ("max outstanding writes", self.max_outstanding_writes),
        ] {
            assert!((1..=16).contains(&v), "{what} must be 1..=16, got {v}");
        }
    }

    fn beat_bytes_log2(&self) -> u32 {
        (self.data_width / 8).trailing_zeros()
    }
}

/// Splits (address, beats) requests into bursts that respect `max_burst` and 4 KiB pages.
/// Module name `axi_burst_splitter_a<addr>_b<beat bytes>_m<max>_l<len>`.
///
/// Ports: `req_{valid,ready,addr,beats}`; `burst_{valid,ready}`, `burst_addr`, `burst_len`
/// (beats - 1, 8 bits, as `AxLEN`) and `burst_last` (last burst of its request). One burst
/// per cycle; a new request is accepted once the previous one is fully split.
pub fn axi_burst_splitter(
    addr_width: u32,
    beat_bytes_log2: u32,
    max_burst: u32,
    len_width: u32,
) -> Module {
    assert!(
        beat_bytes_log2 <= 7,
        "beats of more than 128 bytes are not supported"
    );
    assert!(
        (1..=256).contains(&max_burst),
        "max burst must be 1..=256 beats"
    );
    assert!(addr_width >= 12, "addresses must have at least 12 bits");
    let bb = beat_bytes_log2;
    let m = ModuleBuilder::new(&format!(
        "axi_burst_splitter_a{addr_width}_b{}_m{max_burst}_l{len_width}",
        1u32 << bb
    ));
    let req_valid = m.input("req_valid", 1);
    let req_addr = m.input("req_addr", addr_width);
    let req_beats = m.input("req_beats", len_width);
    let burst_ready = m.input("burst_ready", 1);
    if bb > 0 {
        m.allow_unused(
            req_addr,
            "addresses are aligned to the bus width; the byte offset bits are ignored",
        );
    }

    let hw = addr_width - bb; // address in beats
    let busy = m.reg("busy", 1, 0);
    let addr = m.reg_noreset("addr", hw);
    let remaining = m.reg_noreset("remaining", len_width);

    let page_beats = 4096u64 >> bb;
    let pw = count_bits(page_beats);
    let w = len_width.max(pw).max(count_bits(max_burst as u64));
    let offset = addr.slice(12 - bb - 1, 0);
    let to_page = m.named("to_page", m.lit(page_beats, pw) - offset.zext(pw));
    let rem = remaining.zext(w);
    let beats = m.named(
        "beats",
        rem.min(to_page.zext(w)).min(m.lit(max_burst as u64, w)),
    );
    let last = m.named("last", rem.eq(beats));

    let req_ready = m.output_from("req_ready", !busy);
    let take = m.named("take", req_valid & req_ready);
    let advance = m.named("advance", busy & burst_ready);
    let addr_in = if bb > 0 {
        req_addr.slice(addr_width - 1, bb)
    } else {
        req_addr
    };
    m.next(busy, m.mux(take, req_beats.ne(0), busy & !(advance & last)));
    m.next_when(
        addr,
        take | advance,
        m.mux(take, addr_in, addr + beats.resize(hw)),
    );
    m.next_when(
        remaining,
        take | advance,
        m.mux(take, req_beats, remaining - beats.resize(len_width)),
    );

    m.output_from("burst_valid", busy);
    let full_addr = if bb > 0 { addr.cat(m.zero(bb)) } else { addr };
    m.output_from("burst_addr", full_addr);
    m.output_from("burst_len", (beats - 1).resize(8));
    m.output_from("burst_last", last);
    m.finish().expect("axi_burst_splitter is well formed")
}

/// Builds an AXI4 master called `module_name` (see the module documentation for the
/// interface).
pub fn axi4_master(module_name: &str, cfg: &AxiMasterConfig) -> Module {
    cfg.validate();
    let m = ModuleBuilder::new(module_name);
    let dw = cfg.data_width;
    let aw = cfg.addr_width;
    let lw = cfg.len_width;
    let bb = cfg.beat_bytes_log2();
    let ax = |s: &str| format!("{}_{s}", cfg.prefix);
    let splitter = axi_burst_splitter(aw, bb, cfg.max_burst_beats, lw);

    // ---- read side -------------------------------------------------------------------
    let rd_req_valid = m.input("rd_req_valid", 1);
    let rd_req_addr = m.input("rd_req_addr", aw);
    let rd_req_beats = m.input("rd_req_beats", lw);
    let rd_data_ready = m.input("rd_data_ready", 1);
    let arready = m.input(&ax("arready"), 1);
    let rdata = m.input(&ax("rdata"), dw);
    let rresp = m.input(&ax("rresp"), 2);
    let rlast = m.input(&ax("rlast"), 1);
    let rvalid = m.input(&ax("rvalid"), 1);

    let rsplit = m.instance("u_rd_split", &splitter);
    rsplit.connect("req_valid", rd_req_valid);
    rsplit.connect("req_addr", rd_req_addr);
    rsplit.connect("req_beats", rd_req_beats);
    m.output_from("rd_req_ready", rsplit.output("req_ready"));

    let max_r = cfg.max_outstanding_reads;
    let rcw = count_bits(max_r as u64);
    let rd_inflight = m.reg("rd_inflight", rcw, 0);
    let can_issue = m.named("rd_can_issue", rd_inflight.ne(max_r));
    let arvalid = m.output_from(&ax("arvalid"), rsplit.output("burst_valid") & can_issue);
    rsplit.connect("burst_ready", arready & can_issue);
    let ar_fire = m.named("ar_fire", arvalid & arready);
    m.output_from(&ax("araddr"), rsplit.output("burst_addr"));
    m.output_from(&ax("arlen"), rsplit.output("burst_len"));
    axi_constants(&m, cfg, "ar", bb);

    let rready = m.output_from(&ax("rready"), rd_data_ready);
    let r_fire = m.named("r_fire", rvalid & rready);
    let r_end = m.named("r_end", r_fire & rlast);
    m.next(
        rd_inflight,
        rd_inflight + ar_fire.zext(rcw) - r_end.zext(rcw),
    );

    // Which in-flight bursts end a request.
    let rflags = small_fifo(1, max_r.max(2).next_power_of_two());
    let rq = m.instance("u_rd_last", &rflags);
    rq.connect("in_valid", ar_fire);
    rq.connect("in_data", rsplit.output("burst_last"));
    rq.connect("out_ready", r_end);
    m.output_from("rd_data_valid", rvalid);
    m.output_from("rd_data", rdata);
    m.output_from("rd_data_last", rlast & rq.output("out_data"));
    let rd_error = m.reg("rd_error_q", 1, 0);
    m.next(rd_error, rd_error | (r_fire & rresp.ne(0)));
    m.output_from("rd_error", rd_error);

    // ---- write side ------------------------------------------------------------------
    let wr_req_valid = m.input("wr_req_valid", 1);
    let wr_req_addr = m.input("wr_req_addr", aw);
    let wr_req_beats = m.input("wr_req_beats", lw);
    let wr_data_valid = m.input("wr_data_valid", 1);
    let wr_data = m.input("wr_data", dw);
    let wr_strb = m.input("wr_strb", dw / 8);
    let awready = m.input(&ax("awready"), 1);
    let wready = m.input(&ax("wready"), 1);
    let bresp = m.input(&ax("bresp"), 2);
    let bvalid = m.input(&ax("bvalid"), 1);

    let wsplit = m.instance("u_wr_split", &splitter);
    wsplit.connect("req_valid", wr_req_valid);
    wsplit.connect("req_addr", wr_req_addr);
    wsplit.connect("req_beats", wr_req_beats);
    m.output_from("wr_req_ready", wsplit.output("req_ready"));

    let max_w = cfg.max_outstanding_writes;
    let wcw = count_bits(max_w as u64);
    let fifo_depth = max_w.max(2).next_power_of_two();
    let wlens = small_fifo(8, fifo_depth);
    let wl = m.instance("u_wr_len", &wlens);
    let wflags = small_fifo(1, fifo_depth);
    let bq = m.instance("u_wr_last", &wflags);

    let wr_inflight = m.reg("wr_inflight", wcw, 0);
    let aw_pending = m.reg("aw_pending", 1, 0);
    let aw_addr = m.reg_noreset("aw_addr", aw);
    let aw_len = m.reg_noreset("aw_len", 8);
    let aw_last = m.reg_noreset("aw_last", 1);
    let accept_ok = m.named(
        "wr_accept_ok",
        !aw_pending & wr_inflight.ne(max_w) & wl.output("in_ready"),
    );
    wsplit.connect("burst_ready", accept_ok);
    let accept = m.named("wr_accept", wsplit.output("burst_valid") & accept_ok);
    let awvalid = m.output_from(&ax("awvalid"), aw_pending);
    let aw_fire = m.named("aw_fire", awvalid & awready);
    m.next(aw_pending, accept | (aw_pending & !aw_fire));
    m.next_when(aw_addr, accept, wsplit.output("burst_addr"));
    m.next_when(aw_len, accept, wsplit.output("burst_len"));
    m.next_when(aw_last, accept, wsplit.output("burst_last"));
    m.output_from(&ax("awaddr"), aw_addr);
    m.output_from(&ax("awlen"), aw_len);
    axi_constants(&m, cfg, "aw", bb);

    // W channel: beats counted against the head of the burst-length FIFO.
    wl.connect("in_valid", accept);
    wl.connect("in_data", wsplit.output("burst_len"));
    let len_valid = wl.output("out_valid");
    let wbeat = m.reg("wbeat", 8, 0);
    let wvalid = m.output_from(&ax("wvalid"), wr_data_valid & len_valid);
    m.output_from("wr_data_ready", wready & len_valid);
    let wlast = m.output_from(&ax("wlast"), wbeat.eq(wl.output("out_data")));
    let w_fire = m.named("w_fire", wvalid & wready);
    m.next_when(wbeat, w_fire, m.mux(wlast, 0, wbeat + 1));
    wl.connect("out_ready", w_fire & wlast);
    m.output_from(&ax("wdata"), wr_data);
    m.output_from(&ax("wstrb"), wr_strb);

    // B channel.
    let bready = m.output_from(&ax("bready"), m.bit(true));
    let b_fire = m.named("b_fire", bvalid & bready);
    bq.connect("in_valid", aw_fire);
    bq.connect("in_data", aw_last);
    bq.connect("out_ready", b_fire);
    m.next(
        wr_inflight,
        wr_inflight + accept.zext(wcw) - b_fire.zext(wcw),
    );
    let done = m.reg("wr_done_q", 1, 0);
    m.next(done, b_fire & bq.output("out_data"));
    m.output_from("wr_done", done);
    let wr_error = m.reg("wr_error_q", 1, 0);
    m.next(wr_error, wr_error | (b_fire & bresp.ne(0)));
    m.output_from("wr_error", wr_error);

    m.finish().expect("axi4_master is well formed")
}

/// The constant AxSIZE / AxBURST / AxCACHE / AxPROT outputs of channel `ch` ("ar"/"aw").
fn axi_constants(m: &ModuleBuilder, cfg: &AxiMasterConfig, ch: &str, bb: u32) {
    let ax = |s: &str| format!("{}_{ch}{s}", cfg.prefix);
    m.output_from(&ax("size"), m.lit(bb as u64, 3));
    m.output_from(&ax("burst"), m.lit(1, 2)); // INCR
    m.output_from(&ax("cache"), m.lit(0b0011, 4)); // normal, non-cacheable, bufferable
    m.output_from(&ax("prot"), m.lit(0, 3));
}
