//! `vta_exec`: instruction decode, the micro-op loop generator, the pipeline's control and
//! index path, the scratchpads, forwarding, and the write port.

use hdl::{Module, ModuleBuilder, Sig};
use isa::layout::{Field, Layout, Slot, INSN_BITS, UOP_BITS};
use isa::{AluOp, Codec, HwConfig};

use super::{alu, dot, ExecParams};

/// Bits of the loop iteration counters (`iter_out`, `iter_in`).
const ITER_BITS: u32 = isa::config::LOOP_ITER_BITS;
/// Extra bits that make `base + o*factor_out + i*factor_in` exact (no wrap): each product
/// is below `2^(index bits + 14)`, their sum below `2^(index bits + 15)`.
const INDEX_EXTRA: u32 = ITER_BITS + 2;

/// A signal registered through consecutive stages: `at(k)` is its value in stage `k`.
struct Staged<'a> {
    first: u32,
    sigs: Vec<Sig<'a>>,
}

/// Builds [`Staged`] signals. With a `hold` (the GEMM pipeline's bank stall), stages 1 and 2
/// keep their micro-ops while `hold` is high and stage 3 takes a bubble: stage-1 and stage-2
/// registers load only when `hold` is low, and control bits entering stage 3 are cleared
/// while it is high.
#[derive(Clone, Copy)]
struct Stager<'a> {
    m: &'a ModuleBuilder,
    hold: Option<Sig<'a>>,
}

impl<'a> Stager<'a> {
    /// `value` is the signal in stage `first`; registers carry it up to stage `last`.
    /// Control bits (`reset`) clear on reset; data registers have none.
    fn stage(&self, name: &str, value: Sig<'a>, first: u32, last: u32, reset: bool) -> Staged<'a> {
        let m = self.m;
        let mut sigs = vec![value];
        for k in first + 1..=last {
            let n = format!("{name}_s{k}");
            let r = if reset {
                m.reg(&n, value.width(), 0)
            } else {
                m.reg_noreset(&n, value.width())
            };
            let prev = *sigs.last().unwrap();
            match self.hold {
                Some(hold) if k <= 2 => m.next_when(r, !hold, prev),
                Some(hold) if k == 3 && reset => m.next(r, prev & !hold),
                _ => m.next(r, prev),
            }
            sigs.push(r);
        }
        Staged { first, sigs }
    }
}

impl<'a> Staged<'a> {
    #[track_caller]
    fn at(&self, k: u32) -> Sig<'a> {
        assert!(
            k >= self.first && k < self.first + self.sigs.len() as u32,
            "stage {k} outside {}..{}",
            self.first,
            self.first + self.sigs.len() as u32
        );
        self.sigs[(k - self.first) as usize]
    }
}

/// The bits of `word` in `slot`; a zero-width field (a buffer of depth 1) reads as a 1-bit 0.
pub(super) fn slot_bits<'a>(word: Sig<'a>, slot: Slot) -> Sig<'a> {
    if slot.width == 0 {
        word.module().zero(1)
    } else {
        word.slice(slot.lsb + slot.width - 1, slot.lsb)
    }
}

/// Which instructions a pipeline executes: [`Role::Gemm`] GEMM (with its dot-product array
/// and the bank stall), [`Role::Alu`] ALU (lanes, MUL, the activation table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Gemm,
    Alu,
}

/// Builds one pipeline (`vta_exec_gemm` or `vta_exec_alu`); see the module docs of
/// [`super`] for its stages and [`super::issue`] for the ports it shares.
pub(super) fn build(cfg: &HwConfig, p: &ExecParams, role: Role) -> Module {
    let codec = Codec::new(cfg);
    let t = p.timing();
    let w = t.compute_stage;
    let alu_role = role == Role::Alu;
    let e = if alu_role { t.mul_extra } else { 0 };
    let lanes = p.lanes();
    let acc_bits = lanes * p.acc_width;
    let banks = super::acc_banks(p.depth_acc);
    let m = ModuleBuilder::new(match role {
        Role::Gemm => "vta_exec_gemm",
        Role::Alu => "vta_exec_alu",
    });

    // ----- ports ------------------------------------------------------------------------
    let insn_valid = m.input("insn_valid", 1);
    let insn_ready = m.output("insn_ready", 1);
    let insn = m.input("insn", INSN_BITS);
    let done = m.output("done", 1);
    let uop_rd_en = m.output("uop_rd_en", 1);
    let uop_rd_addr = m.output("uop_rd_addr", p.a_uop);
    let uop_rd_data = m.input("uop_rd_data", UOP_BITS);
    let acc_rd_en = m.output("acc_rd_en", 1);
    let acc_rd_addr = m.output("acc_rd_addr", p.a_acc);
    let acc_rdata = m.input("acc_rd_data", acc_bits);
    let ev_uop = m.output("ev_uop", 1);
    let ev_reset_uop = m.output("ev_reset_uop", 1);
    let busy = m.output("busy", 1);
    let fault = m.output("fault", 1);
    m.allow_unused(
        insn,
        "dependency flags, layout gaps and the opcode: the shell routes instructions and \
         handles tokens",
    );
    // The GEMM pipeline's bank stall, assigned in stage 2.
    let hold = (!alu_role).then(|| m.wire("bank_hold", 1));
    let st = Stager { m: &m, hold };

    // ----- decode (field positions from isa::layout only) -------------------------------
    let layout = if alu_role { &codec.alu } else { &codec.gemm };
    let field = |l: &Layout, f: Field| slot_bits(insn, l.slot(f));
    let loop_field = |f: Field, width: u32| field(layout, f).zext(width);
    let uw = p.a_uop + 1; // uop_end is exclusive
    let dec_reset = loop_field(Field::ResetReg, 1);
    let dec_bgn = loop_field(Field::UopBgn, p.a_uop);
    let dec_end = loop_field(Field::UopEnd, uw);
    let dec_iter_out = loop_field(Field::IterOut, ITER_BITS);
    let dec_iter_in = loop_field(Field::IterIn, ITER_BITS);
    let dec_dfo = loop_field(Field::DstFactorOut, p.a_acc);
    let dec_dfi = loop_field(Field::DstFactorIn, p.a_acc);
    let dec_sfo = loop_field(Field::SrcFactorOut, p.src_bits);
    let dec_sfi = loop_field(Field::SrcFactorIn, p.src_bits);
    let dec_empty = dec_bgn.zext(uw).ge(dec_end) | dec_iter_out.eq(0) | dec_iter_in.eq(0);

    // ----- instruction registers, loaded when an instruction is accepted ---------------
    let accept = m.wire("accept", 1);
    let load = |name: &str, value: Sig<'_>| {
        let r = m.reg_noreset(name, value.width());
        m.next_when(r, accept, value);
        r
    };
    let i_clear = load("i_clear", dec_reset);
    let i_bgn = load("i_bgn", dec_bgn);
    let i_end = load("i_end", dec_end);
    let i_iter_out = load("i_iter_out", dec_iter_out);
    let i_iter_in = load("i_iter_in", dec_iter_in);
    let i_empty = load("i_empty", dec_empty);
    let i_dst_fi = load("i_dst_fi", dec_dfi);
    let mut factors = vec![
        ("dst", load("i_dst_fo", dec_dfo), i_dst_fi, p.a_acc),
        (
            "src",
            load("i_src_fo", dec_sfo),
            load("i_src_fi", dec_sfi),
            p.src_bits,
        ),
    ];
    if !alu_role {
        let (lg, wfo, wfi) = (&codec.gemm, Field::WgtFactorOut, Field::WgtFactorIn);
        factors.push((
            "wgt",
            load("i_wgt_fo", field(lg, wfo).zext(p.a_wgt)),
            load("i_wgt_fi", field(lg, wfi).zext(p.a_wgt)),
            p.a_wgt,
        ));
    }

    // ----- loop generator (stage 0) -----------------------------------------------------
    let active = m.reg("active", 1, 0);
    let u = m.reg_noreset("loop_u", p.a_uop);
    let ic = m.reg_noreset("loop_i", ITER_BITS);
    let oc = m.reg_noreset("loop_o", ITER_BITS);
    let issue = m.wire("issue", 1);
    let alu = alu_role.then(|| {
        let d = AluDecode {
            insn,
            accept,
            active,
            issue,
            ic,
            dec_reset,
            dec_bgn,
            dec_end,
            dec_empty,
            dec_sfi,
            dec_dfi,
            e,
            last_stage: t.write_stage + 1 + e,
            w,
        };
        alu_issue(&m, st, &codec, p, &d)
    });
    let may_issue = match (&alu, hold) {
        (Some(a), _) => a.may_issue,
        (None, hold) => active & !hold.expect("the GEMM pipeline has a bank stall"),
    };
    m.assign(issue, may_issue);
    let u_last = m.named("u_last", (u.zext(uw) + 1).eq(i_end));
    let i_last = m.named("i_last", (ic + 1).eq(i_iter_in));
    let o_last = m.named("o_last", (oc + 1).eq(i_iter_out));
    let is_final = m.named("is_final", i_empty | (u_last & i_last & o_last));
    let step = m.named("step", issue & !i_empty);
    let finishing = m.named("finishing", issue & is_final);
    m.assign(insn_ready, !active | finishing);
    m.assign(accept, insn_valid & insn_ready);
    m.next(active, accept | (active & !finishing));
    let inner_wrap = step & u_last;
    let outer_wrap = inner_wrap & i_last;
    m.next_when(
        u,
        accept | step,
        m.mux(accept, dec_bgn, m.mux(u_last, i_bgn, u + 1)),
    );
    m.next_when(
        ic,
        accept | inner_wrap,
        m.mux(accept, 0, m.mux(i_last, 0, ic + 1)),
    );
    m.next_when(oc, accept | outer_wrap, m.mux(accept, 0, oc + 1));
    // Offsets o*factor_out + i*factor_in, exact: `base` is o*factor_out, `cur` adds i*factor_in.
    let mut offsets = vec![];
    for (name, fo, fi, bits) in factors {
        let ow = bits + INDEX_EXTRA;
        let base = m.reg_noreset(&format!("{name}_off_base"), ow);
        let cur = m.reg_noreset(&format!("{name}_off"), ow);
        let next_base = base + fo.zext(ow);
        m.next_when(base, accept | outer_wrap, m.mux(accept, 0, next_base));
        m.next_when(
            cur,
            accept | inner_wrap,
            m.mux(accept, 0, m.mux(i_last, next_base, cur + fi.zext(ow))),
        );
        offsets.push(cur);
    }
    m.assign(uop_rd_en, step);
    m.assign(uop_rd_addr, u);
    let uop = uop_rd_data;
    m.allow_unused(
        uop,
        "the bits past the micro-op's index fields (all of them when every buffer holds one \
         element), and in the ALU pipeline its WGT index",
    );

    // ----- per-micro-op control, stage 1 onwards -----------------------------------------
    let wb = t.write_stage;
    // `occ`: a slot holds a micro-op or an instruction's end marker; `v`: a micro-op.
    let occ = st.stage("occ", issue, 0, wb, true);
    let v = st.stage("v", step, 0, wb, true);
    let last = st.stage("last", finishing, 0, wb + 1 + e, true);
    let clear = st.stage("clear", i_clear, 0, wb, false);
    let offs: Vec<Staged> = ["dst_off", "src_off", "wgt_off"]
        .iter()
        .zip(&offsets)
        .map(|(n, o)| st.stage(n, *o, 0, 1, false))
        .collect();

    // Stage 1: exact indices and their range checks (spec 8: only used indices count).
    let uf = |f: Field| slot_bits(uop, codec.uop.slot(f));
    let exact = |name: &str, f: Field, k: usize| {
        let o = offs[k].at(1);
        m.named(name, uf(f).zext(o.width()) + o)
    };
    let dst_x = exact("dst_exact", Field::DstIdx, 0);
    let src_x = exact("src_exact", Field::SrcIdx, 1);
    let c1 = clear.at(1);
    // A LUTW's dst is a table entry (spec 8.3), checked against the table instead of ACC.
    let dst_bad = match alu.as_ref().and_then(|a| a.lut.as_ref()) {
        Some((_, lutw)) => m.mux(
            lutw.at(1),
            dst_x.ge(isa::config::LUT_ENTRIES),
            dst_x.ge(p.depth_acc),
        ),
        None => dst_x.ge(p.depth_acc),
    };
    let (bad, wgt_x) = match &alu {
        Some(a) => {
            let uses_src = !c1 & !a.use_imm.at(1);
            (dst_bad | (uses_src & src_x.ge(p.depth_acc)), None)
        }
        None => {
            let wgt_x = exact("wgt_exact", Field::WgtIdx, 2);
            let operands_bad = src_x.ge(p.depth_inp) | wgt_x.ge(p.depth_wgt);
            (dst_bad | (!c1 & operands_bad), Some(wgt_x))
        }
    };
    let bad = m.named("bad_index", bad);
    let faulty = st.stage("fault", bad, 1, w + e, false);
    if let Some(a) = &alu {
        let t = PassTrack {
            issue,
            ic,
            i_dst_fi,
            v2: v.at(2),
            dst_x,
            src_x,
        };
        a.track_operand_row(&m, st, &t);
    }
    // The table entry a LUTW writes: its (range-checked) dst.
    let entry = alu
        .as_ref()
        .and_then(|a| a.lut.as_ref())
        .map(|_| st.stage("lut_entry", dst_x.trunc(LUT_ADDR_BITS), 1, w - 1, false));
    let dst = st.stage("dst", dst_x.trunc(p.a_acc), 1, w + e, false);
    if let Some(hold) = hold {
        // A GEMM micro-op waits in stage 2 while an ALU instruction ahead of it in program
        // order touches its `dst` row's bank (see `super::issue`); a faulty one writes
        // nothing. Stage 2, not 1: its row is in a register there, so the stall starts
        // from flip-flops, not from the micro-op memory's output and an adder.
        let bank_busy = m.input("bank_busy", banks);
        let busy_here = if banks == 1 {
            bank_busy
        } else {
            m.index(dst.at(2).bit(p.a_acc - 1), &bank_busy.lanes(1))
        };
        m.assign(hold, v.at(2) & !faulty.at(2) & busy_here);
    }
    // The GEMM pipeline reads INP at `src` in stage 2; the ALU pipeline reads ACC there in
    // stages W-3 .. W-1.
    let src_last = if alu_role { w - 1 } else { 2 };
    let src = st.stage("src", src_x.trunc(p.src_bits), 1, src_last, false);
    m.assign(fault, v.at(2) & faulty.at(2));

    // ----- ACC: one read port, one write port --------------------------------------------
    // Stage W-2 reads dst; a tensor ALU micro-op reads src one stage earlier, in the slot
    // left free in front of it. Both rows are registered (forwarded) before stage W uses
    // them, so that the block RAM's output feeds no lane logic.
    let rd_dst = m.named("acc_rd_dst", v.at(w - 2) & !clear.at(w - 2));
    let (rd_src, acc_raddr) = match &alu {
        Some(a) => {
            let rd_src = m.named(
                "acc_rd_src",
                v.at(w - 3) & a.tensor.at(w - 3) & !a.reuse.at(w - 3),
            );
            let addr = m.mux(rd_src, src.at(w - 3).resize(p.a_acc), dst.at(w - 2));
            (rd_src, addr)
        }
        None => (m.bit(false), dst.at(w - 2)),
    };
    m.assign(acc_rd_en, rd_src | rd_dst);
    m.assign(acc_rd_addr, acc_raddr);
    // Results enter `res1` in order, one per cycle at most: a micro-op's from stage W, a
    // MUL's from stage W+mul_extra (the slot that would collide with it stays empty).
    // `we` marks a result that is written, `wdst` its row; `res1`, `res2` follow them.
    let mut we_w = v.at(w) & !faulty.at(w);
    let mut wdst_w = dst.at(w);
    if let Some(a) = &alu {
        if let Some((_, lutw)) = &a.lut {
            we_w = we_w & !lutw.at(w);
        }
        if let Some(mul) = &a.mul {
            let mul_done = mul.at(w + e);
            we_w = (we_w & !mul.at(w)) | (mul_done & !faulty.at(w + e));
            wdst_w = m.mux(mul_done, dst.at(w + e), wdst_w);
        }
    }
    let we = st.stage("we", m.named("we_w", we_w), w, w + 1, true);
    let wdst = st.stage("wdst", wdst_w, w, w + 1, false);
    // Forwarding: a result in `res1`, `res2` or entering `res1` is not yet visible to a read
    // issued one cycle earlier; a micro-op takes the newest one that matches its row. Which
    // one is decided a cycle ahead, into registers. A row read in cycle `c` misses the
    // results that enter `res1` at the ends of cycles `c-1`, `c` and `c+1`: the first two
    // are in `res2`, `res1` when the data arrives (cycle `c+1`) and are forwarded into the
    // operand register; the third is in `res1` one cycle later and is forwarded after it.
    let res1 = m.reg_noreset("res1", acc_bits);
    let res2 = m.reg_noreset("res2", acc_bits);
    m.next(res2, res1);
    let fwd = Forward {
        m: &m,
        res1,
        res2,
        acc_rdata,
        we1: we.at(w),
        row1: wdst.at(w),
        we2: we.at(w + 1),
        row2: wdst.at(w + 1),
    };
    // dst, read in stage W-2, is registered in `x_row` in stage W-1 and used in stage W.
    let x_row = fwd.operand("dst", "x_row", dst.at(w - 2));
    let dst_in_prev = fwd.hit("dst_in_prev", fwd.we1, fwd.row1, dst.at(w - 1));
    let x_op = m.named("x_op", m.mux(dst_in_prev, res1, x_row));

    // Stage W: the lanes.
    let result = match &alu {
        Some(a) => {
            let li = LaneInputs {
                x_op,
                src: &src,
                dst: &dst,
                faulty: &faulty,
                clear: &clear,
                v_w1: v.at(w - 1),
                entry: entry.as_ref(),
            };
            a.lanes(&m, p, w, e, &fwd, &li)
        }
        None => {
            // The dot-product array (stages 3 .. W-1): operands read in stage 2 arrive in
            // stage 3.
            let gemm_rd = v.at(2) & !clear.at(2);
            let inp_rd_data = m.input("inp_rd_data", p.batch * p.block_in * p.inp_width);
            let wgt_rd_data = m.input("wgt_rd_data", p.block_out * p.block_in * p.wgt_width);
            m.output_from("inp_rd_en", gemm_rd);
            m.output_from("inp_rd_addr", src.at(2).resize(p.a_inp));
            m.output_from("wgt_rd_en", gemm_rd);
            let wgt = st.stage("wgt", wgt_x.expect("GEMM").trunc(p.a_wgt), 1, 2, false);
            m.output_from("wgt_rd_addr", wgt.at(2));
            let dot_inst = m.instance("gemm_array", &dot::dot_module(p));
            dot_inst.connect("inp", inp_rd_data);
            dot_inst.connect("wgt", wgt_rd_data);
            dot_inst.connect("en", m.named("dot_en", v.at(3) & !clear.at(3)));
            // Accumulate, or reset.
            let sums: Vec<Sig> = (0..lanes)
                .map(|l| {
                    let d = dot_inst
                        .output(&format!("dot_{l}"))
                        .as_signed()
                        .sext(p.acc_width);
                    x_op.lane(l, p.acc_width) + d.as_unsigned()
                })
                .collect();
            m.mux(clear.at(w), m.zero(acc_bits), m.pack(&sums))
        }
    };
    // Loaded only by a result that is written: every reader of res1, res2 is selected by the
    // `we` of the stage that produced it.
    m.next_when(res1, we.at(w), result);

    // Stage W+1: the ACC write (and its OUT mirror, outside).
    m.output_from("acc_we", we.at(wb));
    m.output_from("acc_waddr", wdst.at(wb));
    m.output_from("acc_wdata", res1);
    let (vw, cw) = (v.at(wb), clear.at(wb));
    m.assign(ev_uop, vw & !cw);
    m.assign(ev_reset_uop, vw & cw);

    // Stage W+2 (W+2+mul_extra after a MUL): done. Busy while anything is issued or in
    // flight.
    let mut done_q = last.at(wb + 1);
    let mut any = active;
    for k in 1..=wb {
        any = any | occ.at(k);
    }
    let mul = alu.as_ref().and_then(|a| a.mul.as_ref());
    let mul_done = mul.map(|mul| last.at(wb + 1 + e) & mul.at(wb + 1 + e));
    if let (Some(mul), Some(mul_done)) = (mul, mul_done) {
        done_q = (done_q & !mul.at(wb + 1)) | mul_done;
        for k in wb + 1..=wb + e {
            any = any | mul.at(k);
        }
    }
    m.assign(done, done_q);
    any = any | done_q;
    m.assign(busy, any);
    // Nothing to issue and stages 1 and 2 (where a micro-op may wait) empty: every micro-op
    // is at least three stages in and on its way, so a row read from now on (two cycles on
    // by the ALU pipeline, behind its footprint stage and queue) comes after this
    // pipeline's last ACC access.
    if !alu_role {
        m.output_from("front_idle", !active & !occ.at(1) & !occ.at(2));
    } else {
        // The tag (banks) the instruction came with, out with its `done`.
        let tag = m.input("tag", banks);
        let tag = st.stage("tag", load("i_tag", tag), 0, wb + 1 + e, false);
        let out = match mul_done {
            Some(mul_done) => m.mux(mul_done, tag.at(wb + 1 + e), tag.at(wb + 1)),
            None => tag.at(wb + 1),
        };
        m.output_from("done_tag", out);
    }

    m.finish().expect("the execution pipeline is well formed")
}

/// What the ALU pipeline's issue logic needs from the decoder and the loop generator.
struct AluDecode<'a> {
    insn: Sig<'a>,
    accept: Sig<'a>,
    active: Sig<'a>,
    issue: Sig<'a>,
    ic: Sig<'a>,
    dec_reset: Sig<'a>,
    dec_bgn: Sig<'a>,
    dec_end: Sig<'a>,
    dec_empty: Sig<'a>,
    dec_sfi: Sig<'a>,
    dec_dfi: Sig<'a>,
    /// `mul_extra` of this pipeline, and the last stage a MUL's flag is needed in.
    e: u32,
    last_stage: u32,
    /// Stage W.
    w: u32,
}

/// The ALU pipeline's own signals: its issue rule and the per-micro-op flags it stages.
struct AluPipe<'a> {
    may_issue: Sig<'a>,
    tensor: Staged<'a>,
    reuse: Staged<'a>,
    op: Staged<'a>,
    use_imm: Staged<'a>,
    imm: Staged<'a>,
    /// `(LUT, LUTW)` with `ALU_LUT`.
    lut: Option<(Staged<'a>, Staged<'a>)>,
    /// The slot holds a MUL micro-op (with `ALU_MUL`).
    mul: Option<Staged<'a>>,
    /// Whether the micro-op issued last in the pass wrote the pass's operand row.
    prev_wrote_operand: Option<Sig<'a>>,
}

/// The ALU pipeline's decode and issue rule. A tensor micro-op issues only after an idle
/// cycle (see the ACC read port), and nothing issues in the `mul_extra` cycles after a MUL
/// micro-op (see forwarding), with exceptions inside one pass of the inner loop (not its
/// first micro-op) of a one-micro-op kernel: a tensor micro-op whose inner loop keeps `src`
/// reads no row, it takes the previous micro-op's operand (`reuse`); MUL micro-ops whose
/// inner loop moves `dst` follow each other every cycle (their rows differ, so none waits
/// for another's product): with an immediate from the pass's second micro-op, with a kept
/// tensor operand from its third, unless the micro-op before wrote the operand's row
/// (`prev_wrote_operand`, see [`AluPipe::track_operand_row`]).
fn alu_issue<'a>(
    m: &'a ModuleBuilder,
    st: Stager<'a>,
    codec: &Codec,
    p: &ExecParams,
    d: &AluDecode<'a>,
) -> AluPipe<'a> {
    let la = &codec.alu;
    let field = |f: Field| slot_bits(d.insn, la.slot(f));
    let load = |name: &str, value: Sig<'a>| {
        let r = m.reg_noreset(name, value.width());
        m.next_when(r, d.accept, value);
        r
    };
    let (dec_op, dec_use_imm) = (field(Field::AluOpcode), field(Field::UseImm));
    let i_op = load("i_op", dec_op);
    let i_use_imm = load("i_use_imm", dec_use_imm);
    let i_imm = load("i_imm", field(Field::Imm));
    // A tensor ALU micro-op reads ACC twice (dst and src).
    let i_tensor = load("i_tensor", !dec_use_imm & !d.dec_reset);
    // Table operations (ALU_LUT): a LUT reads the table, a LUTW writes it and no ACC row.
    let table_ops = p.alu_lut.then(|| {
        let lut = load("i_lut", dec_op.eq(AluOp::Lut as u64) & !d.dec_reset);
        let lutw = load("i_lutw", dec_op.eq(AluOp::LutWrite as u64) & !d.dec_reset);
        (lut, lutw)
    });
    // Micro-ops of an ALU MUL take the multiplier pipeline (`mul_extra` more cycles).
    let i_mul = (d.e > 0).then(|| {
        let is_mul = dec_op.eq(AluOp::Mul as u64);
        load("i_mul", is_mul & !d.dec_reset & !d.dec_empty)
    });
    // Loop shapes that let micro-ops issue back to back: a kernel of one micro-op, an inner
    // loop that keeps `src` (a tensor ALU operand row read once per pass) or moves `dst`
    // (consecutive MUL micro-ops never share a row).
    let uw = p.a_uop + 1;
    let one_uop = (d.dec_bgn.zext(uw) + 1).eq(d.dec_end);
    let i_src_kept = load("i_src_kept", one_uop & d.dec_sfi.eq(0));
    let i_dst_moves = load("i_dst_moves", one_uop & d.dec_dfi.ne(0));

    let issued_prev = m.reg("issued_prev", 1, 0);
    m.next(issued_prev, d.issue);
    let in_pass = m.named("in_pass", d.ic.ne(0));
    let mut kept_tensor = i_tensor & i_src_kept & in_pass;
    if let Some((i_lut, i_lutw)) = table_ops {
        kept_tensor = kept_tensor & !i_lut & !i_lutw;
    }
    let mul = i_mul.map(|i_mul| st.stage("mul", d.issue & i_mul, 0, d.last_stage, true));
    let prev_wrote_operand = i_mul.map(|_| m.reg("prev_wrote_operand", 1, 1));
    let (reuse_now, mul_stream) = match (i_mul, prev_wrote_operand) {
        (Some(i_mul), Some(prev_wrote_operand)) => {
            let tensor_stream = i_src_kept & !prev_wrote_operand & d.ic.gt(1);
            let stream = i_mul & i_dst_moves & in_pass & (i_use_imm | tensor_stream);
            let reuse = kept_tensor & (!i_mul | (i_dst_moves & tensor_stream));
            (reuse, Some(m.named("mul_stream", stream)))
        }
        _ => (kept_tensor, None),
    };
    let reuse_now = m.named("reuse_now", reuse_now);
    let mut may_issue = d.active & (!i_tensor | reuse_now | !issued_prev);
    if let (Some(mul), Some(mul_stream)) = (&mul, mul_stream) {
        for k in 1..=d.e {
            may_issue = may_issue & (!mul.at(k) | mul_stream);
        }
    }
    let w = d.w;
    AluPipe {
        may_issue,
        tensor: st.stage("tensor", i_tensor, 0, w - 3, false),
        reuse: st.stage("reuse", reuse_now, 0, w - 1, false),
        op: st.stage("op", i_op, 0, w, false),
        use_imm: st.stage("use_imm", i_use_imm, 0, w - 1, false),
        imm: st.stage("imm", i_imm, 0, w - 1, false),
        lut: table_ops.map(|(i_lut, i_lutw)| {
            (
                st.stage("lut", i_lut, 0, w - 1, false),
                st.stage("lutw", i_lutw, 0, w, false),
            )
        }),
        mul,
        prev_wrote_operand,
    }
}

/// Stage-1 signals the ALU pipeline's pass tracking reads.
struct PassTrack<'a> {
    issue: Sig<'a>,
    ic: Sig<'a>,
    i_dst_fi: Sig<'a>,
    v2: Sig<'a>,
    dst_x: Sig<'a>,
    src_x: Sig<'a>,
}

/// The ALU lane inputs that come from the pipeline's stages.
struct LaneInputs<'a, 'b> {
    x_op: Sig<'a>,
    src: &'b Staged<'a>,
    dst: &'b Staged<'a>,
    faulty: &'b Staged<'a>,
    clear: &'b Staged<'a>,
    v_w1: Sig<'a>,
    entry: Option<&'b Staged<'a>>,
}

impl<'a> AluPipe<'a> {
    /// Whether the micro-op issued last in the pass wrote the pass's operand row (a tensor
    /// MUL's): the next one then waits for its product and reads the row again instead of
    /// streaming. The pass's rows rise by `dst_factor_in` from the first micro-op's, so
    /// `pass_row` steps to each next micro-op's row by one addition: set from the first
    /// micro-op's indices in its stage 2 (then the second micro-op's row is compared, in
    /// time for the third's issue), stepped and compared at each later issue.
    fn track_operand_row(&self, m: &'a ModuleBuilder, st: Stager<'a>, t: &PassTrack<'a>) {
        let Some(prev_wrote_operand) = self.prev_wrote_operand else {
            return;
        };
        let in_pass = t.ic.ne(0);
        let pass_first = st.stage("pass_first", !in_pass, 0, 2, false);
        let d = st.stage("pass_dst", t.dst_x, 1, 2, false).at(2);
        let s = st.stage("pass_src", t.src_x, 1, 2, false).at(2);
        let width = d.width().max(s.width());
        let s = m.named("pass_operand", s.zext(width));
        let operand = m.reg_noreset("pass_operand_row", width);
        let row = m.reg_noreset("pass_row", width);
        let fi = t.i_dst_fi.zext(width);
        let second = m.named("pass_second_row", d.zext(width) + fi);
        let init = m.named("pass_init", t.v2 & pass_first.at(2));
        let later = m.named("pass_later_issue", t.issue & t.ic.gt(1));
        m.next_when(operand, init, s);
        m.next_when(row, init | later, m.mux(init, second + fi, row + fi));
        m.next_when(
            prev_wrote_operand,
            init | later,
            m.mux(init, second.eq(s), row.eq(operand)),
        );
    }

    /// Stages W-3 .. W of the ALU: the tensor operand's read and forwarding, the operand
    /// register `y_row`, the activation table and the lanes. Returns the result entering
    /// `res1`.
    fn lanes(
        &self,
        m: &'a ModuleBuilder,
        p: &ExecParams,
        w: u32,
        e: u32,
        fwd: &Forward<'a>,
        li: &LaneInputs<'a, '_>,
    ) -> Sig<'a> {
        let lanes = p.lanes();
        let acc_bits = lanes * p.acc_width;
        let (src, dst) = (li.src, li.dst);
        // A tensor src, read in stage W-3, is registered in `src_row` in stage W-2, and the
        // ALU operand register `y_row` takes it (or the immediate) in stage W-1, so that
        // stage W starts from flip-flops. The slot in front of a tensor micro-op is empty,
        // so after the results forwarded into `src_row` only two more can concern it, both
        // forwarded into `y_row`: the one that entered `res1` at the end of stage W-2 (the
        // slot two ahead) and a MUL product about to enter it in stage W-1 (a MUL three
        // ahead). Nothing enters `res1` at the end of its stage W-1 but that product, so
        // `y_row` is final there and the activation table can look it up.
        let src_row = fwd.operand("src", "src_row", src.at(w - 3).resize(p.a_acc));
        let s_next = src.at(w - 2).resize(p.a_acc);
        let src_in_prev = fwd.hit("src_in_prev", fwd.we1, fwd.row1, s_next);
        let src_in_mul = self.mul.as_ref().map(|mul| {
            let k = w + e - 1;
            fwd.hit(
                "src_in_mul",
                mul.at(k) & !li.faulty.at(k),
                dst.at(k),
                s_next,
            )
        });
        let y_row = m.reg_noreset("y_row", acc_bits);
        // A micro-op that reuses its predecessor's operand row takes that operand (final for
        // every earlier micro-op) into `y_row` in stage W-1, and in stage W the
        // predecessor's own result instead when it wrote the row.
        let y_in_prev = fwd.hit(
            "y_in_prev",
            self.reuse.at(w - 1) & fwd.we1,
            fwd.row1,
            src.at(w - 1).resize(p.a_acc),
        );
        let y_op = m.named("y_op", m.mux(y_in_prev, fwd.res1, y_row));
        // The activation-table entries the lanes read in stage W (assigned below, from the
        // operand entering `y_row`).
        let entries: Option<Vec<Sig>> = self.lut.as_ref().map(|_| {
            (0..lanes)
                .map(|l| m.wire(&format!("lut_entry{l}"), 8))
                .collect()
        });
        let lane_mod = alu::lane_module(p);
        let mut results = vec![];
        let mut products = vec![];
        for l in 0..lanes {
            let lane = m.instance(&format!("lane{l}"), &lane_mod);
            lane.connect("x", li.x_op.lane(l, p.acc_width));
            lane.connect("y", y_op.lane(l, p.acc_width));
            lane.connect("clear", li.clear.at(w));
            lane.connect("op", self.op.at(w));
            if let Some(entries) = &entries {
                lane.connect("t", entries[l as usize]);
            }
            results.push(lane.output("r"));
            if let Some(mul) = &self.mul {
                lane.connect("mul_load", mul.at(w));
                lane.connect("mul_step", mul.at(w + 1));
                products.push(lane.output("p"));
            }
        }
        let result = match &self.mul {
            Some(mul) => m.mux(mul.at(w + e), m.pack(&products), m.pack(&results)),
            None => m.pack(&results),
        };

        let mut src_op = m.mux(src_in_prev, fwd.res1, src_row);
        if let Some(hit) = src_in_mul {
            src_op = m.mux(hit, m.pack(&products), src_op);
        }
        let imm_row = m.pack(&vec![
            self.imm
                .at(w - 1)
                .as_signed()
                .sext(p.acc_width)
                .as_unsigned();
            lanes as usize
        ]);
        let alu_w1 = li.v_w1 & !li.clear.at(w - 1);
        let y_next = m.mux(
            self.use_imm.at(w - 1),
            imm_row,
            m.mux(self.reuse.at(w - 1), y_op, src_op),
        );
        m.next_when(y_row, alu_w1, y_next);
        if let (Some((lut, lutw)), Some(entry), Some(wires)) = (&self.lut, li.entry, &entries) {
            let ctl = TableCtl {
                y_next: m.named("y_next", y_next),
                lookup: li.v_w1 & lut.at(w - 1),
                write: li.v_w1 & lutw.at(w - 1) & !li.faulty.at(w - 1),
                entry: entry.at(w - 1),
            };
            for (wire, e) in wires.iter().zip(table(m, p, &ctl)) {
                m.assign(*wire, e);
            }
        }
        result
    }
}

/// The results a row read can miss, and the ACC read data: see the forwarding comment in
/// [`build`].
struct Forward<'a> {
    m: &'a ModuleBuilder,
    res1: Sig<'a>,
    res2: Sig<'a>,
    acc_rdata: Sig<'a>,
    /// Stage W's `we` and row (the result entering `res1`), stage W+1's (in `res1`).
    we1: Sig<'a>,
    row1: Sig<'a>,
    we2: Sig<'a>,
    row2: Sig<'a>,
}

impl<'a> Forward<'a> {
    /// A register: next cycle, whether a result written (`we`) to `row` is for `idx`.
    fn hit(&self, name: &str, we: Sig<'a>, row: Sig<'a>, idx: Sig<'a>) -> Sig<'a> {
        let r = self.m.reg(name, 1, 0);
        self.m.next(r, we & row.eq(idx));
        r
    }

    /// The register `reg` that takes row `idx` read this cycle, the newest of `res1`,
    /// `res2` forwarded over the read data (`<what>_in_res1`, `<what>_in_res2`).
    fn operand(&self, what: &str, reg: &str, idx: Sig<'a>) -> Sig<'a> {
        let m = self.m;
        let in1 = self.hit(&format!("{what}_in_res1"), self.we1, self.row1, idx);
        let in2 = self.hit(&format!("{what}_in_res2"), self.we2, self.row2, idx);
        let r = m.reg_noreset(reg, self.acc_rdata.width());
        m.next(
            r,
            m.mux(in1, self.res1, m.mux(in2, self.res2, self.acc_rdata)),
        );
        r
    }
}

/// Bits of an activation-table address.
const LUT_ADDR_BITS: u32 = isa::config::LUT_ENTRIES.trailing_zeros();

/// The stage W-1 signals the activation table works from.
struct TableCtl<'a> {
    /// The ALU operand row about to enter `y_row`.
    y_next: Sig<'a>,
    /// A LUT micro-op: every lane reads its entry.
    lookup: Sig<'a>,
    /// A LUTW micro-op that is not faulty: entry `entry` is written.
    write: Sig<'a>,
    entry: Sig<'a>,
}

/// The activation table (spec 8.3) as one 256 x 8 memory per lane, all written alike (the
/// low byte of operand lane `entry mod LANES` at `entry`, one entry per LUTW micro-op) and
/// each read by its lane at the operand saturated to int8. Both happen in stage W-1, so a
/// LUT sees every earlier LUTW; the entries read arrive in stage W. Returns them, one 8-bit
/// signal per lane.
fn table<'a>(m: &'a ModuleBuilder, p: &ExecParams, c: &TableCtl<'a>) -> Vec<Sig<'a>> {
    let lanes = p.lanes();
    let entries = isa::config::LUT_ENTRIES;
    let operand: Vec<Sig> = c.y_next.lanes(p.acc_width);
    // Entries 0..256 reach lanes 0..min(LANES, 256).
    let sel_bits = lanes.min(entries).trailing_zeros();
    let data = if sel_bits == 0 {
        operand[0].slice(7, 0)
    } else {
        let low: Vec<Sig> = operand[..lanes.min(entries) as usize]
            .iter()
            .map(|y| y.slice(7, 0))
            .collect();
        m.index(c.entry.slice(sel_bits - 1, 0), &low)
    };
    let data = m.named("lut_wdata", data);
    operand
        .iter()
        .enumerate()
        .map(|(l, y)| {
            let mem = m.mem(&format!("lut_mem{l}"), 8, entries);
            mem.write(c.write, c.entry, data);
            // index(y) = y saturated to int8, as its two's-complement byte.
            let high = y.slice(p.acc_width - 1, 7);
            let in_range = high.all() | !high.any();
            let limit = m.mux(y.msb(), m.lit(0x80, 8), m.lit(0x7f, 8));
            let index = m.named(
                &format!("lut_index{l}"),
                m.mux(in_range, y.slice(7, 0), limit),
            );
            mem.read_en(c.lookup, index)
        })
        .collect()
}
