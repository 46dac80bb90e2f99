//! The GEMM array: `BATCH x BLOCK_OUT` dot products of `BLOCK_IN` lanes, fully pipelined.
//!
//! Ports: `inp` (one INP element), `wgt` (one WGT element), `en` (the operands belong to a
//! GEMM micro-op), `dot_<l>` (`BATCH * BLOCK_OUT` lanes of [`ExecParams::dot_width`] bits,
//! lane `l = b*BLOCK_OUT + n`, signed; a port each, which a simulator reads as they are
//! instead of assembling a vector of them every cycle). Latency: the lanes hold the result
//! for the operands presented with `en` `3 + tree_stages` cycles earlier.
//!
//! Every pipeline register loads only when the micro-op in front of it is valid (`en`
//! travels along the pipeline): the DSP and flip-flop clock enables, which cost nothing,
//! keep an idle array from toggling, and a simulator skips its arithmetic in idle cycles.

use hdl::{Module, ModuleBuilder, Sig};

use super::{ExecParams, Packing};

/// Adder-tree levels per register stage.
const LEVELS_PER_STAGE: u32 = 2;

pub(super) fn dot_module(p: &ExecParams) -> Module {
    let name = format!(
        "vta_exec_dot_b{}_i{}_o{}_x{}w{}_d{}{}",
        p.batch,
        p.block_in,
        p.block_out,
        p.inp_width,
        p.wgt_width,
        p.dot_width,
        match (p.packing.fields, p.lut_products) {
            (1, false) => String::new(),
            (1, true) => "_lut".to_string(),
            (n, _) => format!("_pk{n}"),
        }
    );
    let m = ModuleBuilder::new(&name);
    let (bsz, bi, bo) = (p.batch, p.block_in, p.block_out);
    let (iw, ww) = (p.inp_width, p.wgt_width);
    let inp = m.input("inp", bsz * bi * iw);
    let wgt = m.input("wgt", bo * bi * ww);
    let en = m.input("en", 1);
    // valid[s]: the micro-op entering pipeline stage s (0 = operand registers) is valid.
    let mut valid = vec![en];
    let mut stage = |s: usize| -> Sig {
        while valid.len() <= s {
            let r = m.reg(&format!("valid_{}", valid.len()), 1, 0);
            m.next(r, *valid.last().expect("non-empty"));
            valid.push(r);
        }
        valid[s]
    };

    // Stage 1: operand registers, one per operand (INP lane b*BI + k, WGT lane n*BI + k):
    // the same flip-flops as a register per lane, and a simulator copies the operands a
    // word at a time instead of storing each lane on its own.
    let inp_q = pipe_reg(&m, "inp_q", inp, en);
    let wgt_q = pipe_reg(&m, "wgt_q", wgt, en);
    let a: Vec<Vec<Sig>> = (0..bsz)
        .map(|b| (0..bi).map(|k| inp_q.lane(b * bi + k, iw)).collect())
        .collect();
    let w: Vec<Vec<Sig>> = (0..bo)
        .map(|n| (0..bi).map(|k| wgt_q.lane(n * bi + k, ww)).collect())
        .collect();

    // Stages 2 and 3: products (multiplier register, then post-adder register), handed to
    // the adder trees as unsigned terms with an offset (`adder_tree`). Products are signed,
    // at most ACC_WIDTH bits (sums wrap modulo 2^ACC_WIDTH anyway).
    let pw = iw + ww;
    let term_w = pw.min(p.acc_width);
    let mut terms: Vec<Vec<Vec<Option<Term>>>> =
        vec![vec![vec![None; bi as usize]; bo as usize]; bsz as usize];
    let pk = p.packing;
    // Output channels in groups of `pk.fields` sharing a multiplier; a last group of one
    // channel is a plain product.
    let groups: Vec<(u32, u32)> = (0..bo)
        .step_by(pk.fields as usize)
        .map(|n0| (n0, pk.fields.min(bo - n0)))
        .collect();
    // P = a * sum_j w_j 2^(jS) + B sum_j 2^(jS) (see the module docs of `exec`). Every
    // multiplier register is declared before every post-adder register, each set in
    // (b, group, k) order: a simulator then keeps each set in consecutive words, the
    // post-adders' additions read and write them in order (which a C++ compiler
    // vectorizes), and a lane's terms are consecutive too.
    let mut prods = vec![];
    for b in 0..bsz {
        for &(n0, g) in groups.iter().filter(|&&(_, g)| g >= 2) {
            let s = pk.spacing;
            for k in 0..bi {
                let ak = a[b as usize][k as usize].as_signed();
                let ws: Vec<Sig> = (n0..n0 + g).map(|n| w[n as usize][k as usize]).collect();
                let packed = packed_operand(&m, &ws, Packing { fields: g, ..pk });
                // Only the fields are ever read: registering just them keeps every later
                // stage within 32 bits for int8 operands, which a simulator computes in one
                // machine word.
                let prod = pipe_reg(
                    &m,
                    &format!("m_b{b}_k{k}_n{n0}"),
                    (ak * packed).trunc(g * s).as_unsigned(),
                    stage(1),
                );
                prods.push((b, n0, g, k, prod));
            }
        }
    }
    for (b, n0, g, k, prod) in prods {
        let s = pk.spacing;
        let c = pk.constant(g) as u64;
        let post = pipe_reg(
            &m,
            &format!("p_b{b}_k{k}_n{n0}"),
            prod + m.lit(c, g * s),
            stage(2),
        );
        // Field j is a*w_j + B, unsigned: the bias is the term's offset.
        for j in 0..g {
            let field = post.slice((j + 1) * s - 1, j * s);
            terms[b as usize][(n0 + j) as usize][k as usize] = Some(Term {
                value: if s > term_w {
                    field.trunc(term_w)
                } else {
                    field
                },
                offset: pk.bias as u64,
            });
        }
    }
    for b in 0..bsz {
        for k in 0..bi {
            let ak = a[b as usize][k as usize].as_signed();
            for &(n, _) in groups.iter().filter(|&&(_, g)| g == 1) {
                let wk = w[n as usize][k as usize].as_signed();
                let tag = format!("b{b}_n{n}_k{k}");
                let product = if p.lut_products {
                    lut_product(&m, ak, wk)
                } else {
                    ak * wk
                };
                let prod = pipe_reg(&m, &format!("m_{tag}"), product, stage(1));
                let post = pipe_reg(&m, &format!("p_{tag}"), prod, stage(2));
                terms[b as usize][n as usize][k as usize] = Some(Term {
                    value: offset(&m, post.trunc(term_w)),
                    offset: 1 << (term_w - 1),
                });
            }
        }
    }

    // Stages 4..: one adder tree per output lane, registered every LEVELS_PER_STAGE levels.
    let mut lanes = vec![];
    for b in 0..bsz {
        for n in 0..bo {
            let t: Vec<Term> = terms[b as usize][n as usize]
                .iter()
                .map(|t| t.expect("every term is built"))
                .collect();
            let sum = adder_tree(
                &m,
                &format!("t_b{b}_n{n}"),
                t,
                term_w,
                p.dot_width,
                &mut stage,
            );
            lanes.push(sum.resize(p.dot_width).as_unsigned());
        }
    }
    for (l, &lane) in lanes.iter().enumerate() {
        m.output_from(&format!("dot_{l}"), lane);
    }
    m.finish().expect("the dot-product array is well formed")
}

/// A register without reset loading `value` when `en` (keeps the signedness).
fn pipe_reg<'a>(m: &'a ModuleBuilder, name: &str, value: Sig<'a>, en: Sig<'a>) -> Sig<'a> {
    let r = if value.is_signed() {
        m.reg_noreset_signed(name, value.width())
    } else {
        m.reg_noreset(name, value.width())
    };
    m.next_when(r, en, value);
    r
}

/// A product on its way into an adder tree: `value`, unsigned, is the signed product plus
/// `offset` (modulo `2^width`).
#[derive(Clone, Copy)]
struct Term<'a> {
    value: Sig<'a>,
    offset: u64,
}

/// The packed weight operand `sum_j w_j * 2^(j*S)` of `ws` (`WGT_WIDTH`-bit lanes, one per
/// field of `pk`), signed, [`Packing::operand_width`] bits: `(upper << S) + w_0`, an
/// addition the DSP48E1's pre-adder performs (taking in the weight registers as well), where
/// `upper`, the value of the fields of `w_1, w_2, ...`, is built by [`digits`].
fn packed_operand<'a>(m: &'a ModuleBuilder, ws: &[Sig<'a>], pk: Packing) -> Sig<'a> {
    let (s, ww) = (pk.spacing, ws[0].width());
    assert!(ww < s, "a field holds its weight and the borrow");
    let width = pk.operand_width(ww);
    // `upper * 2^S` fits `width` bits, so `upper` fits `width - S`.
    let upper = digits(m, &ws[1..], s, width - s);
    m.cat(&[upper, m.zero(s)]).as_signed() + ws[0].as_signed().sext(width)
}

/// `sum_j ws[j] * 2^(j*S)`, signed, `width` bits (which must hold it), built from its
/// base-`2^S` digits instead of with adders ([`Packing::digits`]): field `j` is `w_j` minus
/// the borrow of field `j-1` (its sign: a negative field is `2^S` less than its `S` bits
/// say), a one-bit decrement of `WGT_WIDTH + 1` bits; the top field takes the rest of the
/// bits.
fn digits<'a>(m: &'a ModuleBuilder, ws: &[Sig<'a>], s: u32, width: u32) -> Sig<'a> {
    let ww = ws[0].width();
    let top = (ws.len() as u32 - 1) * s;
    let mut parts = vec![];
    let mut borrow: Option<Sig> = None;
    for (j, w) in ws.iter().enumerate() {
        let w = w.as_signed().sext(ww + 1);
        let t = match borrow {
            Some(b) => w - b.zext(ww + 1).as_signed(),
            None => w,
        };
        borrow = Some(t.msb());
        // Lower fields are S bits; the top one holds the value's remaining bits exactly
        // (the value fits `width` bits, so truncating its top field loses nothing).
        parts.push(if j + 1 == ws.len() {
            t.resize(width - top)
        } else {
            t.sext(s)
        });
    }
    parts.reverse();
    m.cat(&parts).as_signed()
}

/// `a * w` (signed) where one operand has 2 bits, `x = -2*x[1] + x[0]`: `x[0]*y - x[1]*2y`,
/// one subtraction of two selected partial products, which synthesis can only build in
/// LUTs (a `*` of 9 or more product bits would take a DSP48E1).
fn lut_product<'a>(m: &'a ModuleBuilder, a: Sig<'a>, w: Sig<'a>) -> Sig<'a> {
    let pw = a.width() + w.width();
    let (x, y) = if w.width() <= 2 { (w, a) } else { (a, w) };
    assert_eq!(x.width(), 2, "a 2-bit operand");
    let y = y.sext(pw);
    m.mux(x.bit(0), y, 0) - m.mux(x.bit(1), y << 1, 0)
}

/// `value` (unsigned, a signed number plus `off`) as that signed number of `w` bits
/// (modulo `2^w`): the top bit flipped when `off` is `2^(w-1)` modulo `2^w`, else a
/// constant subtracted.
fn unbias<'a>(m: &'a ModuleBuilder, value: Sig<'a>, off: u64, w: u32) -> Sig<'a> {
    let v = if value.width() >= w {
        value.trunc(w)
    } else {
        value.zext(w)
    };
    let off = u128::from(off) % (1u128 << w);
    if off == 1 << (w - 1) {
        offset(m, v).as_signed()
    } else if off == 0 {
        v.as_signed()
    } else {
        (v - m.lit(off as u64, w)).as_signed()
    }
}

/// `x` (signed, `n` bits) in offset binary: `x + 2^(n-1)`, unsigned, which is `x` with its
/// top bit flipped.
fn offset<'a>(m: &'a ModuleBuilder, x: Sig<'a>) -> Sig<'a> {
    let n = x.width();
    x.as_unsigned() ^ m.lit(1 << (n - 1), n)
}

/// Sum of signed `terms` (a power of two of them, the outputs of pipeline stage 2, each an
/// unsigned value holding a signed number of `sw` bits plus the terms' common offset),
/// each level one bit wider up to `cap` bits (wrapping beyond), registered after every
/// `LEVELS_PER_STAGE` levels and after the last one (stage 3, 4, ...: `stage` gives each
/// stage's valid bit). Returns the signed sum.
///
/// Between two registers the terms are added as they are, zero-extended, and one constant
/// takes the offsets out again: `sum(x_i) = sum(x_i + off) - k * off` (modulo `2^w`). After
/// the first registers the offset is `2^(w-1)` (offset binary: see [`offset`]). The
/// registers hold the same two's-complement sums as a tree of sign-extending adders, on
/// the same adders (the constant only changes a few bits' adders), but a simulator computes
/// zero extensions for free where each sign extension costs it a shift and a mask or more
/// (Verilator: 12% of ResNet-18's simulation time). The first constant also takes out the
/// bias of packed products (module docs of `exec`), at no cost.
fn adder_tree<'a>(
    m: &'a ModuleBuilder,
    name: &str,
    terms: Vec<Term<'a>>,
    sw: u32,
    cap: u32,
    stage: &mut dyn FnMut(usize) -> Sig<'a>,
) -> Sig<'a> {
    assert!(
        terms.len().is_power_of_two(),
        "adder tree of {} terms",
        terms.len()
    );
    let mut off = terms[0].offset;
    assert!(
        terms.iter().all(|t| t.offset == off),
        "the terms of a tree share their offset"
    );
    let levels = terms.len().trailing_zeros();
    if levels == 0 {
        return unbias(m, terms[0].value, off, sw);
    }
    let mut terms: Vec<Sig> = terms.iter().map(|t| t.value).collect();
    let mut n = sw;
    let mut s = 3;
    let mut level = 0;
    while level < levels {
        let step = LEVELS_PER_STAGE.min(levels - level);
        let w = (n + step).min(cap);
        // -(2^step * off) modulo 2^w: the offsets of a group's 2^step terms.
        let k = (u128::from(off) << step) % (1u128 << w);
        let fix = ((1u128 << w) - k) % (1u128 << w);
        let en = stage(s);
        s += 1;
        level += step;
        terms = terms
            .chunks(1 << step)
            .enumerate()
            .map(|(i, group)| {
                let mut sums: Vec<Sig> = group
                    .iter()
                    .map(|t| {
                        if w >= t.width() {
                            t.zext(w)
                        } else {
                            t.trunc(w)
                        }
                    })
                    .collect();
                while sums.len() > 1 {
                    sums = sums.chunks(2).map(|p| p[0] + p[1]).collect();
                }
                let sum = if fix == 0 {
                    sums[0]
                } else {
                    sums[0] + m.lit(fix as u64, w)
                };
                let r = pipe_reg(m, &format!("{name}_l{level}_{i}"), sum, en);
                if level < levels {
                    // The next stage's term.
                    offset(m, r)
                } else {
                    r
                }
            })
            .collect();
        n = w;
        off = 1 << (w - 1);
    }
    terms[0].as_signed()
}
