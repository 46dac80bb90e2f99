//! The SoC's device memory: one block-RAM array behind an AXI4 slave port (`s_axi_*`, the
//! signals of [`super::axi::SIGNALS`]).
//!
//! The array is `data_bits` wide (the accelerator's bus) with one write port with byte
//! enables and one registered read port, the simple dual-port shape yosys and Vivado map to
//! block RAM. Reads and writes proceed at once, independently, one burst each at a time:
//! `ARREADY` is high when no read burst is in progress, `AWREADY` when no write burst or
//! response is; W beats are taken only after their AW. A read burst streams one beat per
//! cycle while `RREADY` is high (the read is issued only when the output register is free or
//! being emptied, so backpressure costs nothing); a write takes one beat per cycle.
//!
//! A burst is served only if it is INCR with full-width beats (`AxSIZE` = log2 of the bus
//! bytes, what the SoC's masters issue) and lies entirely inside the memory's window
//! `[base, base + bytes)`; any other burst is answered with SLVERR on every beat (reads
//! return zeros, writes change nothing). The low address bits below the bus width are
//! ignored (beats are aligned).

use hdl::{Module, ModuleBuilder, Sig};

use crate::util::log2;

/// The device memory of `bytes` (a power of two, at least 4 KiB) at byte address `base` (a
/// multiple of `bytes`) on a `data_bits`-wide bus. Module name
/// `soc_ram_w<data_bits>_<KiB>k_at<base hex>`.
pub fn axi4_ram(data_bits: u32, bytes: u32, base: u32) -> Module {
    assert!(
        bytes.is_power_of_two() && bytes >= 4096 && base & (bytes - 1) == 0,
        "device memory of {bytes} bytes at {base:#x}: the size must be a power of two of at \
         least 4 KiB and the base a multiple of it"
    );
    let m = ModuleBuilder::new(&format!(
        "soc_ram_w{data_bits}_{}k_at{base:x}",
        bytes / 1024
    ));
    let beat_bits = log2(data_bits / 8); // byte offset inside a beat
    let size_bits = log2(bytes); // byte offset inside the window
    let depth = bytes >> beat_bits;
    let iw = size_bits - beat_bits; // word index
    let p = |s: &str| format!("s_axi_{s}");
    let input = |s: &str, w: u32| m.input(&p(s), w);

    let araddr = input("araddr", 32);
    let arlen = input("arlen", 8);
    let arsize = input("arsize", 3);
    let arburst = input("arburst", 2);
    let arvalid = input("arvalid", 1);
    let rready = input("rready", 1);
    let awaddr = input("awaddr", 32);
    let awlen = input("awlen", 8);
    let awsize = input("awsize", 3);
    let awburst = input("awburst", 2);
    let awvalid = input("awvalid", 1);
    let wdata = input("wdata", data_bits);
    let wstrb = input("wstrb", data_bits / 8);
    let wlast = input("wlast", 1);
    let wvalid = input("wvalid", 1);
    let bready = input("bready", 1);
    let why = "beats are aligned to the bus width: the byte offset inside a beat is ignored";
    m.allow_unused(araddr, why);
    m.allow_unused(awaddr, why);

    let window = Window {
        base,
        size_bits,
        beat_bits,
    };
    let mem = m.mem("ram", data_bits, depth);

    // ---- reads ---------------------------------------------------------------------------
    let rd_active = m.reg("rd_active", 1, 0);
    let rd_index = m.reg_noreset("rd_index", iw);
    let rd_left = m.reg("rd_left", 9, 0); // beats not yet read from the array
    let rd_error = m.reg_noreset("rd_error", 1);
    let rvalid = m.reg("rvalid_q", 1, 0);
    let rlast = m.reg_noreset("rlast_q", 1);
    let arready = m.output_from(&p("arready"), !rd_active);
    let ar_fire = m.named("ar_fire", arvalid & arready);
    let (ar_index, ar_ok) = window.decode(araddr, arlen, arsize, arburst);
    // Read the next beat when the output register is free or being emptied.
    let issue = m.named("rd_issue", rd_active & rd_left.ne(0) & (!rvalid | rready));
    let r_end = m.named("r_end", rvalid & rready & rlast);
    m.next(rd_active, ar_fire | (rd_active & !r_end));
    m.next_when(
        rd_index,
        ar_fire | issue,
        m.mux(ar_fire, ar_index, rd_index + 1),
    );
    m.next_when(
        rd_left,
        ar_fire | issue,
        m.mux(ar_fire, arlen.zext(9) + 1, rd_left - 1),
    );
    m.next_when(rd_error, ar_fire, !ar_ok);
    let data = mem.read_en(issue, rd_index);
    m.next(rvalid, issue | (rvalid & !rready));
    m.next_when(rlast, issue, rd_left.eq(1));
    m.output_from(&p("rvalid"), rvalid);
    m.output_from(&p("rlast"), rlast);
    m.output_from(&p("rdata"), m.mux(rd_error, 0, data));
    m.output_from(&p("rresp"), rd_error.cat(m.bit(false)));

    // ---- writes --------------------------------------------------------------------------
    let wr_active = m.reg("wr_active", 1, 0);
    let wr_index = m.reg_noreset("wr_index", iw);
    let wr_error = m.reg_noreset("wr_error", 1);
    let bvalid = m.reg("bvalid_q", 1, 0);
    let awready = m.output_from(&p("awready"), !wr_active & !bvalid);
    let aw_fire = m.named("aw_fire", awvalid & awready);
    let (aw_index, aw_ok) = window.decode(awaddr, awlen, awsize, awburst);
    let wready = m.output_from(&p("wready"), wr_active);
    let w_fire = m.named("w_fire", wvalid & wready);
    let w_end = m.named("w_end", w_fire & wlast);
    m.next(wr_active, aw_fire | (wr_active & !w_end));
    m.next_when(
        wr_index,
        aw_fire | w_fire,
        m.mux(aw_fire, aw_index, wr_index + 1),
    );
    m.next_when(wr_error, aw_fire, !aw_ok);
    let lanes = wstrb & (w_fire & !wr_error).repeat(data_bits / 8);
    mem.write_lanes(lanes, wr_index, wdata);
    m.next(bvalid, w_end | (bvalid & !bready));
    m.output_from(&p("bvalid"), bvalid);
    m.output_from(&p("bresp"), wr_error.cat(m.bit(false)));
    m.finish().expect("the device memory is well formed")
}

/// The address window of the memory.
struct Window {
    base: u32,
    /// log2 of the window's bytes.
    size_bits: u32,
    /// log2 of a beat's bytes.
    beat_bits: u32,
}

impl Window {
    /// A burst's first word, and whether the memory serves the whole burst (INCR, full-width
    /// beats, inside the window).
    fn decode<'a>(
        &self,
        addr: Sig<'a>,
        len: Sig<'a>,
        size: Sig<'a>,
        burst: Sig<'a>,
    ) -> (Sig<'a>, Sig<'a>) {
        let iw = self.size_bits - self.beat_bits;
        let in_window = addr
            .slice(31, self.size_bits)
            .eq(u64::from(self.base >> self.size_bits));
        let index = addr.slice(self.size_bits - 1, self.beat_bits);
        let w = iw.max(8) + 1;
        let fits = (index.zext(w) + len.zext(w)).lt(1u64 << iw);
        let ok = in_window & fits & size.eq(u64::from(self.beat_bits)) & burst.eq(1);
        (index, ok)
    }
}

/// The window of an external memory controller: an AXI4 slave port `s_axi_*` in front of the
/// controller's port `m_axi_*` (both of [`super::axi`]'s signals) that passes a burst on, with
/// its address made an offset into the memory (`addr - base`), only if [`axi4_ram`] would
/// serve it (INCR, full-width beats, inside `[base, base + bytes)`), and answers any other
/// itself with SLVERR on every beat (reads return zeros, writes change nothing), as the
/// block-RAM memory does. One burst per direction at a time. Module name
/// `soc_mem_window_w<data_bits>_<KiB>k_at<base hex>`.
pub fn axi4_window(data_bits: u32, bytes: u32, base: u32) -> Module {
    assert!(
        bytes.is_power_of_two() && bytes >= 4096 && base & (bytes - 1) == 0,
        "memory window of {bytes} bytes at {base:#x}: the size must be a power of two of at \
         least 4 KiB and the base a multiple of it"
    );
    let m = ModuleBuilder::new(&format!(
        "soc_mem_window_w{data_bits}_{}k_at{base:x}",
        bytes / 1024
    ));
    let window = Window {
        base,
        size_bits: log2(bytes),
        beat_bits: log2(data_bits / 8),
    };
    let s = |n: &str| format!("s_axi_{n}");
    let d = |n: &str| format!("m_axi_{n}");
    fn offset(addr: Sig<'_>, size_bits: u32) -> Sig<'_> {
        let low = addr.slice(size_bits - 1, 0);
        if size_bits < 32 {
            low.zext(32)
        } else {
            low
        }
    }
    let slverr = 2u64;

    // ---- reads ---------------------------------------------------------------------------
    let araddr = m.input(&s("araddr"), 32);
    let arlen = m.input(&s("arlen"), 8);
    let arsize = m.input(&s("arsize"), 3);
    let arburst = m.input(&s("arburst"), 2);
    let arvalid = m.input(&s("arvalid"), 1);
    let rready = m.input(&s("rready"), 1);
    let m_arready = m.input(&d("arready"), 1);
    let m_rdata = m.input(&d("rdata"), data_bits);
    let m_rresp = m.input(&d("rresp"), 2);
    let m_rlast = m.input(&d("rlast"), 1);
    let m_rvalid = m.input(&d("rvalid"), 1);
    let rd_pass = m.reg("rd_pass", 1, 0); // a burst of the controller's is in progress
    let rd_err = m.reg("rd_err", 1, 0); // an SLVERR burst is being answered
    let rd_err_left = m.reg_noreset("rd_err_left", 9);
    let (_, ar_ok) = window.decode(araddr, arlen, arsize, arburst);
    let rd_idle = m.named("rd_idle", !rd_pass & !rd_err);
    m.output_from(&d("arvalid"), arvalid & rd_idle & ar_ok);
    m.output_from(&d("araddr"), offset(araddr, window.size_bits));
    m.output_from(&d("arlen"), arlen);
    m.output_from(&d("arsize"), arsize);
    m.output_from(&d("arburst"), arburst);
    let arready = m.output_from(&s("arready"), rd_idle & (!ar_ok | m_arready));
    let ar_fire = m.named("ar_fire", arvalid & arready);
    let rvalid = m.output_from(&s("rvalid"), m.mux(rd_pass, m_rvalid, rd_err));
    let rlast = m.output_from(&s("rlast"), m.mux(rd_pass, m_rlast, rd_err_left.eq(1)));
    m.output_from(&s("rdata"), m.mux(rd_pass, m_rdata, 0));
    m.output_from(&s("rresp"), m.mux(rd_pass, m_rresp, slverr));
    m.output_from(&d("rready"), rd_pass & rready);
    let r_end = m.named("r_end", rvalid & rready & rlast);
    m.next(rd_pass, (ar_fire & ar_ok) | (rd_pass & !r_end));
    m.next(rd_err, (ar_fire & !ar_ok) | (rd_err & !r_end));
    m.next_when(
        rd_err_left,
        ar_fire | (rd_err & rready),
        m.mux(ar_fire, arlen.zext(9) + 1, rd_err_left - 1),
    );

    // ---- writes --------------------------------------------------------------------------
    let awaddr = m.input(&s("awaddr"), 32);
    let awlen = m.input(&s("awlen"), 8);
    let awsize = m.input(&s("awsize"), 3);
    let awburst = m.input(&s("awburst"), 2);
    let awvalid = m.input(&s("awvalid"), 1);
    let wdata = m.input(&s("wdata"), data_bits);
    let wstrb = m.input(&s("wstrb"), data_bits / 8);
    let wlast = m.input(&s("wlast"), 1);
    let wvalid = m.input(&s("wvalid"), 1);
    let bready = m.input(&s("bready"), 1);
    let m_awready = m.input(&d("awready"), 1);
    let m_wready = m.input(&d("wready"), 1);
    let m_bresp = m.input(&d("bresp"), 2);
    let m_bvalid = m.input(&d("bvalid"), 1);
    let wr_pass = m.reg("wr_pass", 1, 0);
    let wr_err = m.reg("wr_err", 1, 0); // swallowing the W beats of an SLVERR burst
    let wr_err_resp = m.reg("wr_err_resp", 1, 0); // its SLVERR response is waiting
    let (_, aw_ok) = window.decode(awaddr, awlen, awsize, awburst);
    let wr_idle = m.named("wr_idle", !wr_pass & !wr_err & !wr_err_resp);
    m.output_from(&d("awvalid"), awvalid & wr_idle & aw_ok);
    m.output_from(&d("awaddr"), offset(awaddr, window.size_bits));
    m.output_from(&d("awlen"), awlen);
    m.output_from(&d("awsize"), awsize);
    m.output_from(&d("awburst"), awburst);
    let awready = m.output_from(&s("awready"), wr_idle & (!aw_ok | m_awready));
    let aw_fire = m.named("aw_fire", awvalid & awready);
    m.output_from(&d("wvalid"), wr_pass & wvalid);
    m.output_from(&d("wdata"), wdata);
    m.output_from(&d("wstrb"), wstrb);
    m.output_from(&d("wlast"), wlast);
    m.output_from(&s("wready"), (wr_pass & m_wready) | wr_err);
    let bvalid = m.output_from(&s("bvalid"), (wr_pass & m_bvalid) | wr_err_resp);
    m.output_from(&s("bresp"), m.mux(wr_pass, m_bresp, slverr));
    m.output_from(&d("bready"), wr_pass & bready);
    let b_end = m.named("b_end", bvalid & bready);
    let err_w_end = m.named("err_w_end", wr_err & wvalid & wlast);
    m.next(wr_pass, (aw_fire & aw_ok) | (wr_pass & !b_end));
    m.next(wr_err, (aw_fire & !aw_ok) | (wr_err & !err_w_end));
    m.next(wr_err_resp, err_w_end | (wr_err_resp & !b_end));
    m.finish().expect("the memory window is well formed")
}
