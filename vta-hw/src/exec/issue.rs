//! `vta_exec`: the GEMM and ALU pipelines side by side over an accumulator in two banks, and
//! the issue rules that keep their overlap invisible (every VTA program computes what it
//! computes one instruction after another, spec 8).
//!
//! - **Routing.** GEMM instructions go to the GEMM pipeline (`u_gemm`), ALU instructions
//!   through a queue of [`ALU_QUEUE`] to the ALU pipeline (`u_alu`), in program order. An
//!   ALU instruction is taken only when the GEMM pipeline has nothing left to issue and its
//!   stages 1 and 2 are empty, and the queue has room: its first micro-op then issues three
//!   cycles later at the earliest and reads ACC after every GEMM before it has written its
//!   rows.
//! - **Footprints.** An ALU instruction's ACC banks are computed as it is taken, from its
//!   first micro-op (read through the GEMM pipeline's UOP port, idle then) and its loop: with one micro-op, `dst` covers
//!   the rows `dst .. dst + (iter_out-1)*dst_factor_out + (iter_in-1)*dst_factor_in`, and a
//!   tensor operand `src` likewise; with more micro-ops, or a range past ACC, both banks.
//!   `alu_banks<b>` counts the ALU instructions taken and not complete that touch bank `b`.
//! - **The bank stall.** A GEMM micro-op waits in the GEMM pipeline's stage 2 (stages 0 and 1
//!   wait behind it) while its `dst` row's bank has ALU instructions pending (they come
//!   before it in program order). So
//!   GEMMs of the next tile run while the epilogue of the last one does, each in its half.
//! - **ACC and OUT** are split by the row's top address bit into `acc_mem0`/`acc_mem1`
//!   (and `out_mem0`/`out_mem1`, written with them), each with one read and one write port:
//!   at any time the two pipelines use different banks, so each bank serves one of them.
//!   LOAD ACC writes through the same ports (the shell does so only when both are idle).
//!   An ACC of fewer than 4 rows is one bank (the GEMM pipeline then waits for every
//!   pending ALU instruction).

use hdl::widgets::small_fifo;
use hdl::{Module, ModuleBuilder, Sig};
use isa::layout::{Field, INSN_BITS, UOP_BITS};
use isa::{Codec, HwConfig, Opcode};

use super::top::{self, slot_bits, Role};
use super::{acc_banks, ExecParams};

/// ALU instructions the queue in front of the ALU pipeline holds: a whole epilogue, so that
/// the compute module hands the next GEMMs over at once (a convolution's requantization is up
/// to 7 instructions; with a residual add in it, 15). With 8, ResNet-18's fused epilogues
/// held the GEMMs back by about 240 k cycles.
pub const ALU_QUEUE: u32 = 16;

/// Bits of the per-bank counts of pending ALU instructions: the queue, the footprint stage
/// and the ALU pipeline's stages together hold fewer than 64.
const PENDING_BITS: u32 = 6;

pub(super) fn build(cfg: &HwConfig, p: &ExecParams) -> Module {
    let m = ModuleBuilder::new("vta_exec");
    body(&m, cfg, p);
    m.finish().expect("vta_exec is well formed")
}

/// Declares the ports and builds everything of `vta_exec` in `m`.
fn body<'a>(m: &'a ModuleBuilder, cfg: &HwConfig, p: &ExecParams) {
    let codec = Codec::new(cfg);
    let banks = acc_banks(p.depth_acc);
    let lanes = p.lanes();
    let acc_bits = lanes * p.acc_width;
    let out_bits = lanes * p.out_width;

    // Ports, in the order of the table in the module docs of `super`.
    let insn_valid = m.input("insn_valid", 1);
    let insn_ready = m.output("insn_ready", 1);
    let insn = m.input("insn", INSN_BITS);
    let done_gemm = m.output("done_gemm", 1);
    let done_alu = m.output("done_alu", 1);
    let uop_wr_en = m.input("uop_wr_en", 1);
    let uop_wr_addr = m.input("uop_wr_addr", p.a_uop);
    let uop_wr_data = m.input("uop_wr_data", UOP_BITS);
    let inp_bits = p.batch * p.block_in * p.inp_width;
    let wgt_bits = p.block_out * p.block_in * p.wgt_width;
    let operand_ports =
        [("inp", p.a_inp, inp_bits), ("wgt", p.a_wgt, wgt_bits)].map(|(name, aw, width)| {
            let en = m.output(&format!("{name}_rd_en"), 1);
            let addr = m.output(&format!("{name}_rd_addr"), aw);
            let data = m.input(&format!("{name}_rd_data"), width);
            (name, en, addr, data)
        });
    let shell_we = m.input("acc_wr_en", 1);
    let shell_addr = m.input("acc_wr_addr", p.a_acc);
    let shell_data = m.input("acc_wr_data", acc_bits);
    let out_rd_en = m.input("out_rd_en", 1);
    let out_rd_addr = m.input("out_rd_addr", p.a_acc);
    let out_rd_data = m.output("out_rd_data", out_bits);
    let ev_gemm_uop = m.output("ev_gemm_uop", 1);
    let ev_alu_uop = m.output("ev_alu_uop", 1);
    let ev_reset_uop = m.output("ev_reset_uop", 2);
    let busy = m.output("busy", 1);
    let fault = m.output("fault", 1);

    let gemm = m.instance("u_gemm", &top::build(cfg, p, Role::Gemm));
    let alu = m.instance("u_alu", &top::build(cfg, p, Role::Alu));
    let outputs = |name: &str| (gemm.output(name), alu.output(name));

    // ----- UOP: written by LOAD UOP, read by both pipelines and the footprint stage -------
    // Two ports, so that it maps to one set of true-dual-port block RAMs: the write port
    // (LOAD UOP, only while the core is idle) shares its address with the ALU pipeline's
    // reads; the GEMM pipeline's reads share theirs with the footprint stage's, which
    // happen only while the GEMM pipeline is empty.
    let uop_mem = m.mem("uop_mem", UOP_BITS, 1 << p.a_uop);
    let alu_uop_addr = m.named(
        "uop_addr_a",
        m.mux(uop_wr_en, uop_wr_addr, alu.output("uop_rd_addr")),
    );
    uop_mem.write(uop_wr_en, alu_uop_addr, uop_wr_data);
    alu.connect(
        "uop_rd_data",
        uop_mem.read_en(alu.output("uop_rd_en"), alu_uop_addr),
    );
    let take_alu = m.wire("take_alu", 1);

    // ----- routing ------------------------------------------------------------------------
    let opcode = crate::util::field(insn, &codec.gemm, Field::Opcode);
    let is_alu = m.named("route_alu", opcode.eq(Opcode::Alu as u64));
    let queue = m.instance("u_alu_queue", &small_fifo(INSN_BITS + banks, ALU_QUEUE));
    let fp_valid = m.reg("fp_valid", 1, 0);
    // Room for the instruction in the footprint stage and this one.
    let room = queue.output("count").lt(ALU_QUEUE as u64 - 1);
    let alu_ok = m.named("alu_ok", gemm.output("front_idle") & room);
    m.assign(take_alu, insn_valid & is_alu & alu_ok);
    gemm.connect("insn_valid", insn_valid & !is_alu);
    gemm.connect("insn", insn);
    m.assign(insn_ready, m.mux(is_alu, alu_ok, gemm.output("insn_ready")));

    // ----- footprint stage: the ALU instruction taken last cycle gets its banks ----------
    let gemm_uop_addr = m.named(
        "uop_addr_b",
        m.mux(
            take_alu,
            slot_bits(insn, codec.alu.slot(Field::UopBgn)).resize(p.a_uop),
            gemm.output("uop_rd_addr"),
        ),
    );
    let uop_b = uop_mem.read_en(gemm.output("uop_rd_en") | take_alu, gemm_uop_addr);
    gemm.connect("uop_rd_data", uop_b);
    let fp = footprint(m, &codec, p, insn, take_alu, uop_b);
    m.next(fp_valid, take_alu);
    queue.connect("in_valid", fp_valid);
    queue.connect("in_data", fp.mask.cat(fp.insn));
    alu.connect("insn_valid", queue.output("out_valid"));
    let head = queue.output("out_data");
    alu.connect("insn", head.slice(INSN_BITS - 1, 0));
    alu.connect("tag", head.slice(INSN_BITS + banks - 1, INSN_BITS));
    queue.connect("out_ready", alu.output("insn_ready"));
    let alu_done = alu.output("done");
    let done_tag = alu.output("done_tag");
    let pw = PENDING_BITS;
    let busy_banks: Vec<Sig> = (0..banks)
        .map(|b| {
            let n = m.reg(&format!("alu_banks{b}"), pw, 0);
            let add = (fp_valid & fp.mask.bit(b)).zext(pw);
            let sub = (alu_done & done_tag.bit(b)).zext(pw);
            m.next(n, n + add - sub);
            // The instruction in the footprint stage counts as touching every bank.
            n.ne(0) | fp_valid
        })
        .collect();
    gemm.connect("bank_busy", m.pack(&busy_banks));

    // ----- INP and WGT reads: the GEMM pipeline's ------------------------------------------
    for (name, en, addr, data) in operand_ports {
        m.assign(en, gemm.output(&format!("{name}_rd_en")));
        m.assign(addr, gemm.output(&format!("{name}_rd_addr")));
        gemm.connect(&format!("{name}_rd_data"), data);
    }

    // ----- ACC and OUT banks --------------------------------------------------------------
    let bank_of = |addr: Sig<'a>, b: u32| -> Sig<'a> {
        if banks == 1 {
            m.bit(true)
        } else {
            addr.bit(p.a_acc - 1).eq(u64::from(b))
        }
    };
    let row_in_bank = |addr: Sig<'a>| -> Sig<'a> {
        if banks == 1 {
            addr
        } else {
            addr.slice(p.a_acc - 2, 0)
        }
    };
    let (g_rd, a_rd) = outputs("acc_rd_en");
    let (g_raddr, a_raddr) = outputs("acc_rd_addr");
    let (g_we, a_we) = outputs("acc_we");
    let (g_waddr, a_waddr) = outputs("acc_waddr");
    let (g_wdata, a_wdata) = outputs("acc_wdata");
    let mut acc_rdata = vec![];
    let mut out_rdata = vec![];
    for b in 0..banks {
        let depth = (1u32 << p.a_acc) / banks;
        let acc = m.mem(&format!("acc_mem{b}"), acc_bits, depth);
        let a_reads = a_rd & bank_of(a_raddr, b);
        let reads = (g_rd & bank_of(g_raddr, b)) | a_reads;
        let raddr = m.mux(a_reads, row_in_bank(a_raddr), row_in_bank(g_raddr));
        acc_rdata.push(acc.read_en(reads, raddr));
        let (wg, wa) = (g_we & bank_of(g_waddr, b), a_we & bank_of(a_waddr, b));
        let ws = shell_we & bank_of(shell_addr, b);
        let waddr = m.mux(
            wa,
            row_in_bank(a_waddr),
            m.mux(wg, row_in_bank(g_waddr), row_in_bank(shell_addr)),
        );
        let wdata = m.named(
            &format!("acc_wdata{b}"),
            m.mux(wa, a_wdata, m.mux(wg, g_wdata, shell_data)),
        );
        let we = wg | wa | ws;
        acc.write(we, waddr, wdata);
        let out = m.mem(&format!("out_mem{b}"), out_bits, depth);
        let narrowed: Vec<Sig> = (0..lanes)
            .map(|l| wdata.lane(l, p.acc_width).trunc(p.out_width))
            .collect();
        out.write(we, waddr, m.pack(&narrowed));
        let out_reads = out_rd_en & bank_of(out_rd_addr, b);
        out_rdata.push(out.read_en(out_reads, row_in_bank(out_rd_addr)));
    }
    // Each reader takes the bank it read last.
    let pick = |name: &str, en: Sig<'a>, addr: Sig<'a>, data: &[Sig<'a>]| -> Sig<'a> {
        if banks == 1 {
            return data[0];
        }
        let sel = m.reg_noreset(name, 1);
        m.next_when(sel, en, addr.bit(p.a_acc - 1));
        m.index(sel, data)
    };
    gemm.connect(
        "acc_rd_data",
        pick("gemm_rd_bank", g_rd, g_raddr, &acc_rdata),
    );
    alu.connect(
        "acc_rd_data",
        pick("alu_rd_bank", a_rd, a_raddr, &acc_rdata),
    );
    m.assign(
        out_rd_data,
        pick("out_rd_bank", out_rd_en, out_rd_addr, &out_rdata),
    );

    // ----- completions, events, status ------------------------------------------------------
    m.assign(done_gemm, gemm.output("done"));
    m.assign(done_alu, alu_done);
    m.assign(ev_gemm_uop, gemm.output("ev_uop"));
    m.assign(ev_alu_uop, alu.output("ev_uop"));
    let (g_reset, a_reset) = outputs("ev_reset_uop");
    m.assign(ev_reset_uop, g_reset.zext(2) + a_reset.zext(2));
    let (g_busy, a_busy) = outputs("busy");
    m.assign(busy, g_busy | a_busy | fp_valid | queue.output("out_valid"));
    let (g_fault, a_fault) = outputs("fault");
    m.assign(fault, g_fault | a_fault);
}

/// The footprint stage's registers: the instruction and its banks.
struct Footprint<'a> {
    insn: Sig<'a>,
    mask: Sig<'a>,
}

/// `a * b` (unsigned, `a.width() + b.width()` bits) as a sum of shifted copies of `a`, so
/// that synthesis builds it from adders: a hardware multiplier for a product the core needs
/// once per ALU instruction would cost multipliers the GEMM array needs (an ECP5-25F has 28).
fn shift_add_product<'a>(m: &'a ModuleBuilder, a: Sig<'a>, b: Sig<'a>) -> Sig<'a> {
    let w = a.width() + b.width();
    let a = a.zext(w);
    (0..b.width())
        .map(|i| m.mux(b.bit(i), a << i, m.zero(w)))
        .reduce(|x, y| x + y)
        .expect("a factor of at least one bit")
}

/// Registers the ALU instruction taken (`take`) with what its banks need (the loop's
/// spans); with its first micro-op (`uop`, read from UOP in the same cycle) the banks come
/// out one cycle later.
fn footprint<'a>(
    m: &'a ModuleBuilder,
    codec: &Codec,
    p: &ExecParams,
    insn: Sig<'a>,
    take: Sig<'a>,
    uop: Sig<'a>,
) -> Footprint<'a> {
    let field = |f: Field| slot_bits(insn, codec.alu.slot(f));
    let reg = |name: &str, value: Sig<'a>| {
        let r = m.reg_noreset(name, value.width());
        m.next_when(r, take, value);
        r
    };
    // Iterations after the first (none for an empty loop, which is then `empty`).
    let iters = |name: &str, f: Field| {
        let n = field(f);
        m.named(name, m.mux(n.eq(0), m.zero(n.width()), n - 1))
    };
    let (io, ii) = (
        iters("fp_outer", Field::IterOut),
        iters("fp_inner", Field::IterIn),
    );
    // Row spans of the loop, exact.
    let span = |fo: Field, fi: Field| {
        let a = shift_add_product(m, io, field(fo));
        let b = shift_add_product(m, ii, field(fi));
        let w = a.width().max(b.width()) + 1;
        a.zext(w) + b.zext(w)
    };
    let dst_span = reg("fp_dst_span", span(Field::DstFactorOut, Field::DstFactorIn));
    let src_span = reg("fp_src_span", span(Field::SrcFactorOut, Field::SrcFactorIn));
    let uw = p.a_uop + 1;
    let (bgn, end) = (field(Field::UopBgn), field(Field::UopEnd));
    let empty =
        bgn.zext(uw).ge(end.zext(uw)) | field(Field::IterOut).eq(0) | field(Field::IterIn).eq(0);
    let empty = reg("fp_empty", empty);
    let one_uop = reg("fp_one_uop", (bgn.zext(uw) + 1).eq(end.zext(uw)));
    let reset = field(Field::ResetReg);
    let tensor = reg("fp_tensor", !field(Field::UseImm) & !reset);
    let fp_insn = reg("fp_insn", insn);

    let banks = acc_banks(p.depth_acc);
    let all = m.lit((1u64 << banks) - 1, banks);
    let uop_field = |f: Field| slot_bits(uop, codec.uop.slot(f));
    // The banks rows `lo ..= lo + span` touch: one bank when both ends are in it, else all.
    let banks_of = |lo: Sig<'a>, span: Sig<'a>| {
        if banks == 1 {
            return all;
        }
        let w = lo.width().max(span.width()) + 1;
        let hi = lo.zext(w) + span.zext(w);
        let inside = hi.lt(u64::from(p.depth_acc));
        let top = p.a_acc - 1;
        let low_bank = !lo.zext(w).bit(top);
        let high_bank = hi.bit(top);
        m.mux(inside, m.cat(&[high_bank, low_bank]), all)
    };
    let dst_banks = banks_of(uop_field(Field::DstIdx), dst_span);
    let src_banks = banks_of(uop_field(Field::SrcIdx), src_span);
    let touched = m.mux(tensor, dst_banks | src_banks, dst_banks);
    let mask = m.mux(empty, m.zero(banks), m.mux(one_uop, touched, all));
    Footprint {
        insn: fp_insn,
        mask: m.named("fp_banks", mask),
    }
}

/// The ACC banks (bit `b` for bank `b`) of the rows `lo ..= lo + span`: the banks of both
/// ends, or every bank when a row is past ACC.
pub fn row_banks(cfg: &HwConfig, lo: u64, span: u64) -> u32 {
    let banks = acc_banks(cfg.depth(isa::MemType::Acc));
    let depth = u64::from(cfg.depth(isa::MemType::Acc));
    let hi = lo + span;
    if banks == 1 || hi >= depth {
        return (1 << banks) - 1;
    }
    (1 << (lo / (depth / 2))) | (1 << (hi / (depth / 2)))
}

/// The ACC banks (bit `b` for bank `b`) an ALU instruction may touch, as `vta_exec`
/// computes them when it takes the instruction, given the micro-op at its `uop_bgn`
/// (`first`; `None` when unknown, which counts as every bank): none for an empty loop, all
/// for a kernel of several micro-ops, else the banks of the ends of the `dst` range (and of
/// a tensor operand's `src` range), all when a range leaves ACC.
pub fn alu_footprint(cfg: &HwConfig, a: &isa::AluInsn, first: Option<&isa::Uop>) -> u32 {
    let banks = acc_banks(cfg.depth(isa::MemType::Acc));
    let all = (1u32 << banks) - 1;
    let lp = &a.lp;
    if lp.uop_bgn >= lp.uop_end || lp.iter_out == 0 || lp.iter_in == 0 {
        return 0;
    }
    let Some(u) = first.filter(|_| lp.uop_end == lp.uop_bgn + 1) else {
        return all;
    };
    let (io, ii) = (u64::from(lp.iter_out) - 1, u64::from(lp.iter_in) - 1);
    let range =
        |lo: u64, fo: u16, fi: u16| row_banks(cfg, lo, io * u64::from(fo) + ii * u64::from(fi));
    let mut m = range(u64::from(u.dst_idx), lp.dst_factor_out, lp.dst_factor_in);
    if !a.use_imm && !lp.reset_reg {
        m |= range(u64::from(u.src_idx), lp.src_factor_out, lp.src_factor_in);
    }
    m
}
