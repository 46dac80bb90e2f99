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

use super::ExecParams;

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
        if p.packed { "_pk" } else { "" }
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

    // Stages 2 and 3: products (multiplier register, then post-adder register); terms are
    // signed, at most ACC_WIDTH bits (sums wrap modulo 2^ACC_WIDTH anyway), handed to the
    // adder trees in offset binary.
    let pw = iw + ww;
    let term_w = pw.min(p.acc_width);
    let mut terms: Vec<Vec<Vec<Option<Sig>>>> =
        vec![vec![vec![None; bi as usize]; bo as usize]; bsz as usize];
    if p.packed {
        // P = a * (w2 * 2^S + w1) + 2^(S-1): one multiplier for output channels 2j and 2j+1
        // (see the module docs of `exec`). Every multiplier register is declared before
        // every post-adder register, each set in (b, j, k) order: a simulator then keeps
        // each set in consecutive words, the post-adders' additions read and write them in
        // order (which a C++ compiler vectorizes), and a lane's terms are consecutive too.
        let s = pw;
        let pk_w = iw + 2 * ww + 1;
        let mut prods = vec![];
        for b in 0..bsz {
            for j in 0..bo / 2 {
                for k in 0..bi {
                    let ak = a[b as usize][k as usize].as_signed();
                    let w1 = w[2 * j as usize][k as usize].as_signed().sext(pk_w);
                    let w2 = w[2 * j as usize + 1][k as usize].as_signed().sext(pk_w);
                    let packed = (w2 << s) + w1;
                    // Only the low 2S bits of the product are ever read (both fields);
                    // registering just those keeps every later stage within 32 bits for
                    // int8 operands, which a simulator computes in one machine word.
                    let prod = pipe_reg(
                        &m,
                        &format!("m_b{b}_k{k}_j{j}"),
                        (ak * packed).trunc(2 * s),
                        stage(1),
                    );
                    prods.push((b, j, k, prod));
                }
            }
        }
        for (b, j, k, prod) in prods {
            let post = pipe_reg(
                &m,
                &format!("p_b{b}_k{k}_j{j}"),
                prod.as_signed() + (1i64 << (s - 1)),
                stage(2),
            );
            // The two fields, signed, in offset binary (`adder_tree`). The low field is
            // `{~post[S-1], post[S-2:0]}`, whose offset form is `post[S-1:0]` itself.
            let lo = if term_w == s {
                post.slice(s - 1, 0)
            } else {
                let lo = m.cat(&[!post.bit(s - 1), post.slice(s - 2, 0)]);
                offset(&m, lo.trunc(term_w))
            };
            let hi = offset(&m, post.slice(2 * s - 1, s).trunc(term_w));
            terms[b as usize][2 * j as usize][k as usize] = Some(lo);
            terms[b as usize][2 * j as usize + 1][k as usize] = Some(hi);
        }
    } else {
        for b in 0..bsz {
            for k in 0..bi {
                let ak = a[b as usize][k as usize].as_signed();
                for n in 0..bo {
                    let wk = w[n as usize][k as usize].as_signed();
                    let tag = format!("b{b}_n{n}_k{k}");
                    let prod = pipe_reg(&m, &format!("m_{tag}"), ak * wk, stage(1));
                    let post = pipe_reg(&m, &format!("p_{tag}"), prod, stage(2));
                    terms[b as usize][n as usize][k as usize] =
                        Some(offset(&m, post.trunc(term_w)));
                }
            }
        }
    }

    // Stages 4..: one adder tree per output lane, registered every LEVELS_PER_STAGE levels.
    let mut lanes = vec![];
    for b in 0..bsz {
        for n in 0..bo {
            let t: Vec<Sig> = terms[b as usize][n as usize]
                .iter()
                .map(|t| t.expect("every term is built"))
                .collect();
            let sum = adder_tree(&m, &format!("t_b{b}_n{n}"), t, p.dot_width, &mut stage);
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

/// `x` (signed, `n` bits) in offset binary: `x + 2^(n-1)`, unsigned, which is `x` with its
/// top bit flipped.
fn offset<'a>(m: &'a ModuleBuilder, x: Sig<'a>) -> Sig<'a> {
    let n = x.width();
    x.as_unsigned() ^ m.lit(1 << (n - 1), n)
}

/// Sum of signed `terms` (a power of two of them, the outputs of pipeline stage 2, given in
/// offset binary: see [`offset`]), each level one bit wider up to `cap` bits (wrapping
/// beyond), registered after every `LEVELS_PER_STAGE` levels and after the last one (stage
/// 3, 4, ...: `stage` gives each stage's valid bit). Returns the signed sum.
///
/// Between two registers the terms are added in offset binary, zero-extended, and one
/// constant takes the offsets out again: `sum(x_i) = sum(x_i + 2^(n-1)) - k * 2^(n-1)`
/// (modulo `2^w`). The registers hold the same two's-complement sums as a tree of
/// sign-extending adders, on the same adders (the constant only flips high bits), but a
/// simulator computes zero extensions for free where each sign extension costs it a shift
/// and a mask or more (Verilator: 12% of ResNet-18's simulation time).
fn adder_tree<'a>(
    m: &'a ModuleBuilder,
    name: &str,
    mut terms: Vec<Sig<'a>>,
    cap: u32,
    stage: &mut dyn FnMut(usize) -> Sig<'a>,
) -> Sig<'a> {
    assert!(
        terms.len().is_power_of_two(),
        "adder tree of {} terms",
        terms.len()
    );
    let levels = terms.len().trailing_zeros();
    if levels == 0 {
        // A single term: back from offset binary (the same flip).
        return offset(m, terms[0]).as_signed();
    }
    let mut s = 3;
    let mut level = 0;
    while level < levels {
        let step = LEVELS_PER_STAGE.min(levels - level);
        let n = terms[0].width();
        let w = (n + step).min(cap);
        // -(2^step * 2^(n-1)) modulo 2^w: the offsets of a group's 2^step terms.
        let k = (1u128 << (step + n - 1)) % (1u128 << w);
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
                    .map(|t| if w >= n { t.zext(w) } else { t.trunc(w) })
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
    }
    terms[0].as_signed()
}
