//! DMA between DRAM and the scratchpads: the gearboxes that convert between bus beats and
//! elements, the load engine (2D strided read with zero padding into a scratchpad), the
//! store engine (scratchpad to 2D strided write), and the arbiter that shares the AXI4
//! master's read side between the fetch, load and compute modules.
//!
//! # Elements and beats
//!
//! Every element (an INP row, a WGT tile, an ACC row, a micro-op, an instruction, ...) and
//! the bus are a power of two bits wide, and an element at element address `e` starts at
//! byte `e * elem_bytes` (spec section 2). So there are two cases:
//!
//! * **element at least as wide as the bus** (`E >= B`, e.g. a 2048-bit WGT tile on a 64-bit
//!   bus): an element is `E / B` whole beats and always starts on a beat boundary. The
//!   unpacker shifts beats into an `E`-bit register, lowest beat first, and emits the element
//!   after the last one; the packer sends an element's beats lowest first. Full rate: one
//!   beat per cycle.
//! * **element narrower than the bus** (`E < B`, e.g. 128-bit INP rows on a 512-bit bus):
//!   a beat holds `k = B / E` element slots and a row of `n` elements starting at element
//!   `e` begins in slot `e mod k` of its first beat and spans `ceil((e mod k + n) / k)`
//!   beats. Each row request records `(skip = e mod k, n)` in a small descriptor FIFO; the
//!   unpacker then emits slots `skip, skip + 1, ...` of the arriving beats (one element per
//!   cycle) and drops the unused slots of the first and last beat; the packer fills slots
//!   of an output beat and writes it with byte strobes covering only the filled slots, so
//!   the bytes around a row in DRAM are untouched.
//!
//! Requests are one per DRAM row (`x_size` elements), in beats, at the beat-aligned
//! address; the AXI4 master splits them into bursts (INCR, up to 256 beats, never crossing
//! 4 KiB).

use hdl::{addr_bits, count_bits, Module, ModuleBuilder, Sig};
use isa::layout::{Codec, Field, DMA_SIZE_BITS, INSN_BITS, MAX_DMA_SIZE, MAX_PAD};

use crate::util::{field, log2};

/// Geometry of one element type on the bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gear {
    /// Element width in bits (a power of two, at least 8).
    pub elem_bits: u32,
    /// Bus width in bits (a power of two, at least 32).
    pub bus_bits: u32,
}

impl Gear {
    /// True when an element spans one or more whole beats.
    pub fn wide(&self) -> bool {
        self.elem_bits >= self.bus_bits
    }
    /// Beats per element (`E >= B`).
    pub fn beats_per_elem(&self) -> u32 {
        self.elem_bits / self.bus_bits
    }
    /// Element slots per beat (`E < B`).
    pub fn elems_per_beat(&self) -> u32 {
        self.bus_bits / self.elem_bits
    }
    /// log2 of the element size in bytes.
    fn elem_bytes_log2(&self) -> u32 {
        log2(self.elem_bits / 8)
    }
    /// log2 of the beat size in bytes.
    fn beat_bytes_log2(&self) -> u32 {
        log2(self.bus_bits / 8)
    }
    /// Beats a request of `n` elements can need at most.
    pub fn max_beats(&self, max_elems: u64) -> u64 {
        if self.wide() {
            max_elems * self.beats_per_elem() as u64
        } else {
            (max_elems + 2 * (self.elems_per_beat() as u64 - 1)) / self.elems_per_beat() as u64
        }
    }
}

/// Entries of the row-descriptor FIFO of the `E < B` gearboxes: how many rows a request
/// generator may run ahead of the data.
pub const DESC_DEPTH: u32 = 4;

/// The beat-level request for a row of `n` elements starting at element address
/// `elem_addr` (32 bits): (beat-aligned byte address, beats, slot of the first element
/// when `E < B`).
pub(crate) fn row_request<'a>(
    m: &'a ModuleBuilder,
    g: Gear,
    elem_addr: Sig<'a>,
    n: Sig<'a>,
    len_width: u32,
) -> (Sig<'a>, Sig<'a>, Option<Sig<'a>>) {
    let byte_addr = m.named("rq_byte_addr", elem_addr << g.elem_bytes_log2());
    if g.wide() {
        let beats = n.zext(len_width) << log2(g.beats_per_elem());
        (byte_addr, beats, None)
    } else {
        let kl = log2(g.elems_per_beat());
        let bb = g.beat_bytes_log2();
        let skip = m.named("rq_skip", elem_addr.slice(kl - 1, 0));
        let span = skip.zext(len_width) + n.zext(len_width) + (g.elems_per_beat() - 1);
        let beats = span >> kl;
        let aligned = byte_addr.slice(31, bb).cat(m.zero(bb));
        (aligned, beats, Some(skip))
    }
}

/// The read gearbox: turns bus beats into elements. Module name
/// `dma_unpack_e<E>_b<B>_c<count bits>`.
///
/// Ports: `in_valid`, `in_ready`, `in_data` (beats, `B` bits); `out_valid`, `out_ready`,
/// `out_data` (elements, `E` bits). When `E < B` also the row descriptors `desc_valid`,
/// `desc_ready`, `desc_skip` (first slot), `desc_count` (elements of the row, at least 1):
/// one per requested row, in request order.
pub fn unpacker(g: Gear, count_width: u32) -> Module {
    let (e, b) = (g.elem_bits, g.bus_bits);
    let name = if g.wide() {
        format!("dma_unpack_e{e}_b{b}")
    } else {
        format!("dma_unpack_e{e}_b{b}_c{count_width}")
    };
    let m = ModuleBuilder::new(&name);
    let in_valid = m.input("in_valid", 1);
    let in_data = m.input("in_data", b);
    let out_ready = m.input("out_ready", 1);
    if g.wide() {
        let r = g.beats_per_elem();
        if r == 1 {
            m.output_from("in_ready", out_ready);
            m.output_from("out_valid", in_valid);
            m.output_from("out_data", in_data);
        } else {
            // Beats shift in from the top; after r beats the first one is at the bottom. One
            // register per beat: the same flip-flops, but a simulator updates each from the
            // next without first copying the whole element aside (as it must for one wide
            // register assigned from itself).
            let slots: Vec<Sig> = (0..r)
                .map(|i| m.reg_noreset(&format!("acc_{i}"), b))
                .collect();
            let beat = m.reg("beat", log2(r), 0);
            let full = m.reg("full", 1, 0);
            let in_ready = m.output_from("in_ready", !full | out_ready);
            let beat_fire = m.named("beat_fire", in_valid & in_ready);
            let out_fire = m.named("out_fire", full & out_ready);
            for (i, &slot) in slots.iter().enumerate() {
                m.next_when(
                    slot,
                    beat_fire,
                    slots.get(i + 1).copied().unwrap_or(in_data),
                );
            }
            m.next_when(beat, beat_fire, beat + 1);
            let complete = m.named("complete", beat_fire & beat.eq(r - 1));
            m.next(full, complete | (full & !out_fire));
            m.output_from("out_valid", full);
            m.output_from("out_data", m.pack(&slots));
        }
    } else {
        let k = g.elems_per_beat();
        let kl = log2(k);
        let desc_valid = m.input("desc_valid", 1);
        let desc_skip = m.input("desc_skip", kl);
        let desc_count = m.input("desc_count", count_width);
        let dq = m.instance(
            "u_desc",
            &hdl::widgets::small_fifo(kl + count_width, DESC_DEPTH),
        );
        dq.connect("in_valid", desc_valid);
        dq.connect("in_data", desc_skip.cat(desc_count));
        m.output_from("desc_ready", dq.output("in_ready"));
        let head = dq.output("out_data");

        let cur = m.reg("cur_valid", 1, 0);
        let slot = m.reg_noreset("slot", kl);
        let remaining = m.reg_noreset("remaining", count_width);
        let load = m.named("load_desc", !cur & dq.output("out_valid"));
        dq.connect("out_ready", load);

        let out_valid = m.output_from("out_valid", cur & in_valid);
        let lanes = in_data.lanes(e);
        m.output_from("out_data", m.index(slot, &lanes));
        let out_fire = m.named("out_fire", out_valid & out_ready);
        let last = m.named("last_elem", remaining.eq(1));
        let beat_end = m.named("beat_end", slot.eq(k - 1) | last);
        m.output_from("in_ready", cur & out_ready & beat_end);
        m.next(cur, load | (cur & !(out_fire & last)));
        m.next_when(
            slot,
            load | out_fire,
            m.mux(
                load,
                head.slice(kl + count_width - 1, count_width),
                slot + 1,
            ),
        );
        m.next_when(
            remaining,
            load | out_fire,
            m.mux(load, head.slice(count_width - 1, 0), remaining - 1),
        );
    }
    m.finish().expect("unpacker is well formed")
}

/// The DMA read client ports of a module (towards the arbiter), as signals of the module.
pub(crate) struct ReadClient<'a> {
    pub req_ready: Sig<'a>,
    pub data_valid: Sig<'a>,
    pub data: Sig<'a>,
}

/// Declares the read client inputs `rd_req_ready`, `rd_data_valid`, `rd_data`.
pub(crate) fn read_client_inputs(m: &ModuleBuilder, bus_bits: u32) -> ReadClient<'_> {
    ReadClient {
        req_ready: m.input("rd_req_ready", 1),
        data_valid: m.input("rd_data_valid", 1),
        data: m.input("rd_data", bus_bits),
    }
}

/// Parameters of a load or store engine.
#[derive(Clone, Debug)]
pub struct EngineParams {
    /// Element and bus widths.
    pub gear: Gear,
    /// Scratchpad address width.
    pub sram_addr_bits: u32,
    /// Width of AXI request lengths in beats.
    pub len_width: u32,
}

/// The load engine of one memory type: executes the data movement of one LOAD (spec
/// section 6) into a scratchpad write port. Module name `load_engine_e<E>_b<B>_a<A>`.
///
/// Ports: `start` (a one-cycle pulse while `busy` is low) and `insn` (the LOAD, held while
/// busy; `x_size` must be non-zero for anything to happen), `busy`; the read client
/// `rd_req_{valid,ready,addr,beats}`, `rd_data_{valid,ready}`, `rd_data`; and the
/// scratchpad write port `wr_en`, `wr_addr`, `wr_data`.
///
/// Two independent halves: the *request generator* issues one read request per DRAM row
/// (`y_size` rows, `x_stride` elements apart) as fast as the arbiter accepts them, and the
/// *writer* walks the padded rectangle (`y_pad_0 + y_size + y_pad_1` rows of
/// `x_pad_0 + x_size + x_pad_1` elements) writing one element per cycle in address order
/// from `sram_base`: a zero element on padding, otherwise the next element of the stream.
/// Since the writer never waits on anything but data, the read data is always consumed and
/// can never block the shared read channel. The write port is registered (writes appear one
/// cycle after the step that makes them; `busy` covers the last one).
pub fn load_engine(codec: &Codec, p: &EngineParams) -> Module {
    let g = p.gear;
    let (e, b, a, lw) = (g.elem_bits, g.bus_bits, p.sram_addr_bits, p.len_width);
    let m = ModuleBuilder::new(&format!("load_engine_e{e}_b{b}_a{a}"));
    let l = &codec.mem;
    let start = m.input("start", 1);
    let insn = m.input("insn", INSN_BITS);
    m.allow_unused(insn, "only the LOAD fields that move data are used here");
    let rc = read_client_inputs(&m, b);

    let sram_base = field(insn, l, Field::SramBase);
    let dram_base = field(insn, l, Field::DramBase);
    let y_size = field(insn, l, Field::YSize);
    let x_size = field(insn, l, Field::XSize);
    let x_stride = field(insn, l, Field::XStride);
    // Padded extents: a size plus two pads.
    let w = count_bits(u64::from(MAX_DMA_SIZE) + 2 * u64::from(MAX_PAD));
    let y0 = field(insn, l, Field::YPad0).zext(w);
    let y1 = m.named("data_rows_end", y0 + y_size.zext(w));
    let rows = m.named("rows", y1 + field(insn, l, Field::YPad1).zext(w));
    let x0 = field(insn, l, Field::XPad0).zext(w);
    let x1 = m.named("data_cols_end", x0 + x_size.zext(w));
    let cols = m.named("cols", x1 + field(insn, l, Field::XPad1).zext(w));
    let moves = m.named("moves_data", x_size.ne(0));

    // ---- request generator ------------------------------------------------------------
    let rq_active = m.reg("rq_active", 1, 0);
    let rq_left = m.reg_noreset("rq_rows_left", DMA_SIZE_BITS);
    let rq_addr = m.reg_noreset("rq_elem_addr", 32);
    let unpack = m.instance("u_unpack", &unpacker(g, DMA_SIZE_BITS));
    let (addr, beats, skip) = row_request(&m, g, rq_addr, x_size, lw);
    let desc_ok = if g.wide() {
        m.bit(true)
    } else {
        unpack.output("desc_ready")
    };
    let req_valid = m.output_from("rd_req_valid", rq_active & desc_ok);
    m.output_from("rd_req_addr", addr);
    m.output_from("rd_req_beats", beats);
    let req_fire = m.named("req_fire", req_valid & rc.req_ready);
    if let Some(skip) = skip {
        unpack.connect("desc_valid", req_fire);
        unpack.connect("desc_skip", skip);
        unpack.connect("desc_count", x_size);
    }
    m.next(
        rq_active,
        m.mux(
            start,
            moves & y_size.ne(0),
            rq_active & !(req_fire & rq_left.eq(1)),
        ),
    );
    m.next_when(rq_left, start | req_fire, m.mux(start, y_size, rq_left - 1));
    m.next_when(
        rq_addr,
        start | req_fire,
        m.mux(start, dram_base, rq_addr + x_stride.zext(32)),
    );

    // ---- writer -----------------------------------------------------------------------
    let wr_active = m.reg("wr_active", 1, 0);
    let wr_r = m.reg_noreset("wr_row", w);
    let wr_c = m.reg_noreset("wr_col", w);
    let wr_a = m.reg_noreset("wr_sram_addr", a);
    let is_data = m.named(
        "is_data",
        wr_r.ge(y0) & wr_r.lt(y1) & wr_c.ge(x0) & wr_c.lt(x1),
    );
    unpack.connect("in_valid", rc.data_valid);
    unpack.connect("in_data", rc.data);
    m.output_from("rd_data_ready", unpack.output("in_ready"));
    let elem_valid = unpack.output("out_valid");
    unpack.connect("out_ready", wr_active & is_data);
    let step = m.named("step", wr_active & (!is_data | elem_valid));
    let last_col = m.named("last_col", wr_c.eq(cols - 1));
    let last = m.named("last_write", last_col & wr_r.eq(rows - 1));
    m.next(
        wr_active,
        m.mux(start, moves & rows.ne(0), wr_active & !(step & last)),
    );
    m.next_when(wr_c, start | step, m.mux(start | last_col, 0, wr_c + 1));
    m.next_when(wr_r, start | (step & last_col), m.mux(start, 0, wr_r + 1));
    m.next_when(
        wr_a,
        start | step,
        m.mux(start, sram_base.resize(a), wr_a + 1),
    );
    // A registered write stage: zeroing a padding element is then the flip-flops'
    // synchronous reset rather than a multiplexer per bit (2048 of them for a WGT tile).
    // Address and data load only with a write (the flip-flops' clock enable), so an idle
    // engine does not toggle them.
    let wr_en = m.reg("wr_en_q", 1, 0);
    let wr_addr = m.reg_noreset("wr_addr_q", a);
    let wr_data = m.reg_noreset("wr_data_q", e);
    m.next(wr_en, step);
    m.next_when(wr_addr, step, wr_a);
    m.next_when(wr_data, step, m.mux(is_data, unpack.output("out_data"), 0));
    m.output_from("wr_en", wr_en);
    m.output_from("wr_addr", wr_addr);
    m.output_from("wr_data", wr_data);
    m.output_from("busy", wr_active | rq_active | wr_en);
    m.finish().expect("load_engine is well formed")
}

/// Depth of the store engine's buffer between the scratchpad read and the packer (covers
/// the read latency at full rate).
const STORE_BUFFER_DEPTH: u32 = 2;

/// The store engine: executes the data movement of one STORE (spec section 7) from the OUT
/// read port to the AXI write side. Module name `store_engine_e<E>_b<B>_a<A>`.
///
/// Ports: `start`, `insn` (held while busy), `busy`, `dma_active` (write requests pending
/// or unanswered); the OUT read port `rd_en`, `rd_addr`, `rd_data` (data the cycle after
/// `rd_en`); the write client `wr_req_{valid,ready,addr,beats}`, `wr_data_{valid,ready}`,
/// `wr_data`, `wr_strb`, and `wr_done` (one pulse per completed request).
///
/// The request generator issues one write request per DRAM row; the reader reads OUT
/// densely from `sram_base` into a small buffer; the packer turns elements into beats
/// (with strobes when `E < B`). The engine stays busy until every write is answered, so
/// a STORE's tokens are pushed only once its data is in DRAM.
pub fn store_engine(codec: &Codec, p: &EngineParams) -> Module {
    let g = p.gear;
    let (e, b, a, lw) = (g.elem_bits, g.bus_bits, p.sram_addr_bits, p.len_width);
    let m = ModuleBuilder::new(&format!("store_engine_e{e}_b{b}_a{a}"));
    let l = &codec.mem;
    let start = m.input("start", 1);
    let insn = m.input("insn", INSN_BITS);
    m.allow_unused(insn, "only the STORE fields that move data are used here");
    let rd_data = m.input("rd_data", e);
    let wr_req_ready = m.input("wr_req_ready", 1);
    let wr_data_ready = m.input("wr_data_ready", 1);
    let wr_done = m.input("wr_done", 1);

    let sram_base = field(insn, l, Field::SramBase);
    let dram_base = field(insn, l, Field::DramBase);
    let y_size = field(insn, l, Field::YSize);
    let x_size = field(insn, l, Field::XSize);
    let x_stride = field(insn, l, Field::XStride);
    let go = m.named("go", start & x_size.ne(0) & y_size.ne(0));

    // ---- request generator ------------------------------------------------------------
    let rq_active = m.reg("rq_active", 1, 0);
    let rq_left = m.reg_noreset("rq_rows_left", DMA_SIZE_BITS);
    let rq_addr = m.reg_noreset("rq_elem_addr", 32);
    let (addr, beats, skip) = row_request(&m, g, rq_addr, x_size, lw);
    // E < B: the packer's row descriptors.
    let dq = skip.map(|_| {
        m.instance(
            "u_desc",
            &hdl::widgets::small_fifo(log2(g.elems_per_beat()) + DMA_SIZE_BITS, DESC_DEPTH),
        )
    });
    let desc_ok = match &dq {
        Some(dq) => dq.output("in_ready"),
        None => m.bit(true),
    };
    let req_valid = m.output_from("wr_req_valid", rq_active & desc_ok);
    m.output_from("wr_req_addr", addr);
    m.output_from("wr_req_beats", beats);
    let req_fire = m.named("req_fire", req_valid & wr_req_ready);
    if let (Some(dq), Some(skip)) = (&dq, skip) {
        dq.connect("in_valid", req_fire);
        dq.connect("in_data", skip.cat(x_size));
    }
    m.next(
        rq_active,
        m.mux(start, go, rq_active & !(req_fire & rq_left.eq(1))),
    );
    m.next_when(rq_left, start | req_fire, m.mux(start, y_size, rq_left - 1));
    m.next_when(
        rq_addr,
        start | req_fire,
        m.mux(start, dram_base, rq_addr + x_stride.zext(32)),
    );
    // Requests accepted and not yet answered.
    let ow = 8;
    let outstanding = m.reg("outstanding", ow, 0);
    m.next(
        outstanding,
        outstanding + req_fire.zext(ow) - wr_done.zext(ow),
    );

    // ---- reader: OUT rows densely from sram_base ----------------------------------------
    let rd_active = m.reg("rd_active", 1, 0);
    let rd_r = m.reg_noreset("rd_row", DMA_SIZE_BITS);
    let rd_c = m.reg_noreset("rd_col", DMA_SIZE_BITS);
    let rd_a = m.reg_noreset("rd_sram_addr", a);
    let rd_pending = m.reg("rd_pending", 1, 0); // read issued last cycle
    let buf = m.instance("u_buffer", &hdl::widgets::small_fifo(e, STORE_BUFFER_DEPTH));
    let cw = count_bits(STORE_BUFFER_DEPTH as u64) + 1;
    // Entries after this cycle: held + arriving - leaving (the packer's pop this cycle).
    let buf_pop = m.wire("buffer_pop", 1);
    let room = m.named(
        "buffer_room",
        (buf.output("count").zext(cw) + rd_pending.zext(cw) - buf_pop.zext(cw))
            .lt(STORE_BUFFER_DEPTH),
    );
    let rd_en = m.output_from("rd_en", rd_active & room);
    m.output_from("rd_addr", rd_a);
    let rd_last_col = m.named("rd_last_col", rd_c.eq(x_size - 1));
    let rd_last = m.named("rd_last", rd_last_col & rd_r.eq(y_size - 1));
    m.next(rd_active, m.mux(start, go, rd_active & !(rd_en & rd_last)));
    m.next_when(rd_c, start | rd_en, m.mux(start | rd_last_col, 0, rd_c + 1));
    m.next_when(
        rd_r,
        start | (rd_en & rd_last_col),
        m.mux(start, 0, rd_r + 1),
    );
    m.next_when(
        rd_a,
        start | rd_en,
        m.mux(start, sram_base.resize(a), rd_a + 1),
    );
    m.next(rd_pending, rd_en);
    buf.connect("in_valid", rd_pending);
    buf.connect("in_data", rd_data);
    let elem_valid = buf.output("out_valid");
    let elem = buf.output("out_data");
    let elem_taken = m.wire("buffer_out_ready", 1);
    buf.connect("out_ready", elem_taken);
    m.assign(buf_pop, elem_valid & elem_taken);

    // ---- packer -------------------------------------------------------------------------
    let strb_bits = b / 8;
    let packing_busy = if g.wide() {
        let r = g.beats_per_elem();
        let wv = m.output_from("wr_data_valid", elem_valid);
        let fire = m.named("beat_fire", wv & wr_data_ready);
        if r == 1 {
            m.output_from("wr_data", elem);
            m.assign(elem_taken, fire);
        } else {
            let beat = m.reg("beat", log2(r), 0);
            m.next_when(beat, fire, beat + 1);
            m.output_from("wr_data", m.index(beat, &elem.lanes(b)));
            m.assign(elem_taken, fire & beat.eq(r - 1));
        }
        m.output_from("wr_strb", m.ones(strb_bits));
        m.bit(false)
    } else {
        let k = g.elems_per_beat();
        let kl = log2(k);
        let dq = dq.as_ref().expect("descriptor FIFO");
        let head = dq.output("out_data");
        let cur = m.reg("cur_valid", 1, 0);
        let slot = m.reg_noreset("slot", kl);
        let remaining = m.reg_noreset("remaining", DMA_SIZE_BITS);
        let load = m.named("load_desc", !cur & dq.output("out_valid"));
        dq.connect("out_ready", load);

        let obeat = m.reg_noreset("out_beat", b);
        let ostrb = m.reg("out_strb", strb_bits, 0);
        let ofull = m.reg("out_full", 1, 0);
        let drain = m.named("drain", ofull & wr_data_ready);
        let elem_ready = m.named("elem_ready", cur & (!ofull | wr_data_ready));
        m.assign(elem_taken, elem_ready);
        let fire = m.named("elem_fire", elem_valid & elem_ready);
        let last = m.named("last_elem", remaining.eq(1));
        let complete = m.named("beat_complete", fire & (slot.eq(k - 1) | last));
        let eb = e / 8;
        let lanes: Vec<Sig> = (0..k)
            .map(|j| m.mux(fire & slot.eq(j), elem, obeat.lane(j, e)))
            .collect();
        m.next(obeat, m.pack(&lanes));
        let slot_mask = m.pack(
            &(0..k)
                .map(|j| (fire & slot.eq(j)).repeat(eb))
                .collect::<Vec<_>>(),
        );
        m.next(ostrb, m.mux(drain, 0, ostrb) | slot_mask);
        m.next(ofull, complete | (ofull & !drain));
        m.next(cur, load | (cur & !(fire & last)));
        m.next_when(
            slot,
            load | fire,
            m.mux(
                load,
                head.slice(kl + DMA_SIZE_BITS - 1, DMA_SIZE_BITS),
                slot + 1,
            ),
        );
        m.next_when(
            remaining,
            load | fire,
            m.mux(load, head.slice(DMA_SIZE_BITS - 1, 0), remaining - 1),
        );
        m.output_from("wr_data_valid", ofull);
        m.output_from("wr_data", obeat);
        m.output_from("wr_strb", ostrb);
        cur | ofull
    };

    let active = m.named("requests_active", rq_active | outstanding.ne(0));
    m.output_from("dma_active", active);
    m.output_from(
        "busy",
        active | rd_active | rd_pending | elem_valid | packing_busy,
    );
    m.finish().expect("store_engine is well formed")
}

/// In-flight read requests the arbiter can route (request accepted, last beat not yet
/// returned).
pub const ROUTE_DEPTH: u32 = 16;

/// The read arbiter: `clients` (names, used as port prefixes) share the AXI4 master's read
/// request and data channels. Module name `dma_read_arbiter_<n>_b<B>_l<len bits>`.
///
/// Requests are granted round-robin, one per cycle at most; the granted client's index is
/// queued, and since the master returns data in request order, the queue's head says which
/// client the next beats belong to until the beat marked last. Each client must accept
/// the data of its requests without waiting for anything else (all of ours do), so the
/// shared data channel never deadlocks.
///
/// Ports: per client `<name>_rd_req_{valid,ready,addr,beats}`, `<name>_rd_data_valid`,
/// `<name>_rd_data_ready`, `<name>_rd_data`; towards the master `rd_req_{valid,ready,addr,
/// beats}`, `rd_data_{valid,ready,last}`, `rd_data`; and `busy` (requests pending or data
/// outstanding).
pub fn read_arbiter(clients: &[&str], bus_bits: u32, len_width: u32) -> Module {
    let n = clients.len() as u32;
    assert!(n >= 2, "the read arbiter needs two or more clients");
    let m = ModuleBuilder::new(&format!("dma_read_arbiter_{n}_b{bus_bits}_l{len_width}"));
    let iw = addr_bits(n as u64);
    let valids: Vec<Sig> = clients
        .iter()
        .map(|c| m.input(&format!("{c}_rd_req_valid"), 1))
        .collect();
    let addrs: Vec<Sig> = clients
        .iter()
        .map(|c| m.input(&format!("{c}_rd_req_addr"), 32))
        .collect();
    let beats: Vec<Sig> = clients
        .iter()
        .map(|c| m.input(&format!("{c}_rd_req_beats"), len_width))
        .collect();
    let readies: Vec<Sig> = clients
        .iter()
        .map(|c| m.input(&format!("{c}_rd_data_ready"), 1))
        .collect();
    let req_ready = m.input("rd_req_ready", 1);
    let data_valid = m.input("rd_data_valid", 1);
    let data = m.input("rd_data", bus_bits);
    let data_last = m.input("rd_data_last", 1);

    let arb = m.instance("u_rr", &hdl::widgets::rr_arbiter(n));
    let route = m.instance("u_route", &hdl::widgets::small_fifo(iw, ROUTE_DEPTH));
    arb.connect("req", m.pack(&valids));
    let grant = arb.output("grant");
    let index = arb.output("grant_index");
    let valid = m.output_from(
        "rd_req_valid",
        arb.output("grant_valid") & route.output("in_ready"),
    );
    m.output_from("rd_req_addr", m.index(index, &addrs));
    m.output_from("rd_req_beats", m.index(index, &beats));
    let fire = m.named("req_fire", valid & req_ready);
    arb.connect("ack", fire);
    route.connect("in_valid", fire);
    route.connect("in_data", index);

    let head = route.output("out_data");
    let routed = route.output("out_valid");
    for (i, c) in clients.iter().enumerate() {
        m.output_from(&format!("{c}_rd_req_ready"), fire & grant.bit(i as u32));
        m.output_from(
            &format!("{c}_rd_data_valid"),
            data_valid & routed & head.eq(i as u64),
        );
        m.output_from(&format!("{c}_rd_data"), data);
    }
    let ready = m.output_from("rd_data_ready", routed & m.index(head, &readies));
    route.connect("out_ready", data_valid & ready & data_last);
    m.output_from(
        "busy",
        routed | valids.iter().fold(m.bit(false), |a, v| a | *v),
    );
    m.finish().expect("read_arbiter is well formed")
}
