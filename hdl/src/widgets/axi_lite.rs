//! An AXI4-Lite slave register file: N 32-bit registers at byte offsets 0, 4, 8, ...
//!
//! Each register has an access kind ([`RegKind`]): read/write (its value is an output),
//! read-only (its value is an input, sampled when read), or write-1-pulse (each 1 written
//! produces a one-cycle pulse on that bit of an output; reads return 0). Writes honour
//! `WSTRB`. Accesses to addresses beyond the map are accepted and ignored (reads return 0).
//! Every response is OKAY.
//!
//! The write address and write data channels are independent: each is accepted into its
//! own holding register as soon as it is free, in any order; the write happens once both
//! are held and no write response is pending, and the response is held until `BREADY`.
//! Reads take one request at a time (`ARREADY` is low while a read response is pending).

use crate::{addr_bits, Module, ModuleBuilder, Sig};

/// Access kind of one register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegKind {
    /// Written by software, read back; the value drives an output. Reset value given.
    ReadWrite {
        /// The value after reset.
        reset: u32,
    },
    /// Driven by hardware through an input; writes are ignored.
    ReadOnly,
    /// Writing a 1 to a bit pulses that bit of the output for one cycle; reads return 0.
    WritePulse,
}

/// One register: its port name in the module and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegSpec {
    /// Name of the register's port (and of its register, with `_q`).
    pub name: String,
    /// Access kind.
    pub kind: RegKind,
}

impl RegSpec {
    /// A register called `name` of kind `kind`.
    pub fn new(name: &str, kind: RegKind) -> RegSpec {
        RegSpec {
            name: name.to_string(),
            kind,
        }
    }
}

/// The register index of address `a` and whether it is inside the map of `n` registers.
fn decode<'a>(
    m: &'a ModuleBuilder,
    a: Sig<'a>,
    n: u32,
    ib: u32,
    addr_width: u32,
) -> (Sig<'a>, Sig<'a>) {
    let idx = a.slice(ib + 1, 2);
    let mut hit = if n.is_power_of_two() {
        m.bit(true)
    } else {
        idx.lt(n)
    };
    if addr_width > ib + 2 {
        hit = hit & a.slice(addr_width - 1, ib + 2).eq(0);
    }
    (idx, hit)
}

/// Builds the register file `module_name` with AXI4-Lite ports named `<prefix>_awaddr`,
/// `<prefix>_awvalid`, ... (`prefix` such as `s_axi_control`) and `addr_width`-bit
/// addresses. Each register adds a 32-bit port named after it: an output for
/// [`RegKind::ReadWrite`] and [`RegKind::WritePulse`], an input for [`RegKind::ReadOnly`].
pub fn axi_lite_regfile(
    module_name: &str,
    prefix: &str,
    addr_width: u32,
    regs: &[RegSpec],
) -> Module {
    let n = regs.len() as u32;
    assert!(n >= 1, "axi_lite_regfile needs at least one register");
    let ib = addr_bits(n as u64);
    assert!(
        addr_width >= 2 + ib && addr_width <= 64,
        "axi_lite_regfile: {addr_width}-bit addresses cannot hold {n} registers"
    );
    let m = ModuleBuilder::new(module_name);
    let p = |s: &str| format!("{prefix}_{s}");

    let awaddr = m.input(&p("awaddr"), addr_width);
    let awvalid = m.input(&p("awvalid"), 1);
    let wdata = m.input(&p("wdata"), 32);
    let wstrb = m.input(&p("wstrb"), 4);
    let wvalid = m.input(&p("wvalid"), 1);
    let bready = m.input(&p("bready"), 1);
    let araddr = m.input(&p("araddr"), addr_width);
    let arvalid = m.input(&p("arvalid"), 1);
    let rready = m.input(&p("rready"), 1);
    let reason = "registers are 32-bit aligned; the byte offset within a register is ignored";
    m.allow_unused(awaddr, reason);
    m.allow_unused(araddr, reason);

    // Register index and whether the address is inside the map.
    let decode = |a| decode(&m, a, n, ib, addr_width);

    // Write address and data holding registers.
    let aw_full = m.reg("aw_full", 1, 0);
    let aw_idx = m.reg("aw_idx", ib, 0);
    let aw_hit = m.reg("aw_hit", 1, 0);
    let w_full = m.reg("w_full", 1, 0);
    let w_data = m.reg_noreset("w_data", 32);
    let w_strb = m.reg_noreset("w_strb", 4);
    let bvalid = m.reg("bvalid_q", 1, 0);

    let awready = m.output_from(&p("awready"), !aw_full);
    let wready = m.output_from(&p("wready"), !w_full);
    let aw_fire = m.named("aw_fire", awvalid & awready);
    let w_fire = m.named("w_fire", wvalid & wready);
    let do_write = m.named("do_write", aw_full & w_full & !bvalid);
    let (widx, whit) = decode(awaddr);
    m.next_when(aw_idx, aw_fire, widx);
    m.next_when(aw_hit, aw_fire, whit);
    m.next(aw_full, aw_fire | (aw_full & !do_write));
    m.next_when(w_data, w_fire, wdata);
    m.next_when(w_strb, w_fire, wstrb);
    m.next(w_full, w_fire | (w_full & !do_write));
    m.next(bvalid, do_write | (bvalid & !bready));
    m.output_from(&p("bvalid"), bvalid);
    m.output_from(&p("bresp"), m.zero(2));

    // Byte mask from the strobes.
    let strb_mask = m.named(
        "strb_mask",
        m.pack(&(0..4).map(|b| w_strb.bit(b).repeat(8)).collect::<Vec<_>>()),
    );

    // The registers.
    let mut read_values = vec![];
    for (i, r) in regs.iter().enumerate() {
        let sel = do_write & aw_hit & aw_idx.eq(i as u64);
        match r.kind {
            RegKind::ReadWrite { reset } => {
                let q = m.reg(&format!("{}_q", r.name), 32, reset as u64);
                let merged = (w_data & strb_mask) | (q & !strb_mask);
                m.next_when(q, sel, merged);
                read_values.push(m.output_from(&r.name, q));
            }
            RegKind::ReadOnly => {
                read_values.push(m.input(&r.name, 32));
            }
            RegKind::WritePulse => {
                let q = m.reg(&format!("{}_q", r.name), 32, 0);
                m.next(q, m.mux(sel, w_data & strb_mask, 0));
                m.output_from(&r.name, q);
                read_values.push(m.zero(32));
            }
        }
    }

    // Read channel.
    let rvalid = m.reg("rvalid_q", 1, 0);
    let rdata = m.reg_noreset("rdata_q", 32);
    let arready = m.output_from(&p("arready"), !rvalid);
    let ar_fire = m.named("ar_fire", arvalid & arready);
    let (ridx, rhit) = decode(araddr);
    let value = m.index(ridx, &read_values);
    m.next_when(rdata, ar_fire, m.mux(rhit, value, 0));
    m.next(rvalid, ar_fire | (rvalid & !rready));
    m.output_from(&p("rvalid"), rvalid);
    m.output_from(&p("rdata"), rdata);
    m.output_from(&p("rresp"), m.zero(2));
    m.finish().expect("axi_lite_regfile is well formed")
}
