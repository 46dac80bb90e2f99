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
