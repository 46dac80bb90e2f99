//! The GEMM array: `BATCH x BLOCK_OUT` dot products of `BLOCK_IN` lanes, fully pipelined.
//!
//! Ports: `inp` (one INP element), `wgt` (one WGT element), `en` (the operands belong to a
//! GEMM micro-op), `dot` (`BATCH * BLOCK_OUT` lanes of [`ExecParams::dot_width`] bits, lane
//! `b*BLOCK_OUT + n`, signed). Latency: `dot` holds the result for the operands presented
//! with `en` `3 + tree_stages` cycles earlier.
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

    // Stage 1: operand registers (INP lane b*BI + k, WGT lane n*BI + k).
    let a: Vec<Vec<Sig>> = (0..bsz)
        .map(|b| {
            (0..bi)
                .map(|k| pipe_reg(&m, &format!("a_b{b}_k{k}"), inp.lane(b * bi + k, iw), en))
                .collect()
        })
        .collect();
    let w: Vec<Vec<Sig>> = (0..bo)
        .map(|n| {
            (0..bi)
                .map(|k| pipe_reg(&m, &format!("w_n{n}_k{k}"), wgt.lane(n * bi + k, ww), en))
                .collect()
        })
        .collect();

    // Stages 2 and 3: products (multiplier register, then post-adder register); terms are
    // signed, at most ACC_WIDTH bits (sums wrap modulo 2^ACC_WIDTH anyway).
    let pw = iw + ww;
    let term_w = pw.min(p.acc_width);
    let mut terms: Vec<Vec<Vec<Option<Sig>>>> =
        vec![vec![vec![None; bi as usize]; bo as usize]; bsz as usize];
    for b in 0..bsz {
        for k in 0..bi {
            let ak = a[b as usize][k as usize].as_signed();
            if p.packed {
                // P = a * (w2 * 2^S + w1) + 2^(S-1): one multiplier for output channels
                // 2j and 2j+1 (see the module docs of `exec`).
                let s = pw;
                let pk_w = iw + 2 * ww + 1;
                for j in 0..bo / 2 {
                    let (n1, n2) = (2 * j, 2 * j + 1);
                    let w1 = w[n1 as usize][k as usize].as_signed().sext(pk_w);
                    let w2 = w[n2 as usize][k as usize].as_signed().sext(pk_w);
                    let packed = (w2 << s) + w1;
                    let tag = format!("b{b}_k{k}_j{j}");
                    // Only the low 2S bits of the product are ever read (both fields);
                    // registering just those keeps every later stage within 32 bits for
                    // int8 operands, which a simulator computes in one machine word.
                    let prod = pipe_reg(
                        &m,
                        &format!("m_{tag}"),
                        (ak * packed).trunc(2 * s),
                        stage(1),
                    );
                    let post = pipe_reg(
                        &m,
                        &format!("p_{tag}"),
                        prod.as_signed() + (1i64 << (s - 1)),
                        stage(2),
                    );
                    let lo = m.cat(&[!post.bit(s - 1), post.slice(s - 2, 0)]).as_signed();
                    let hi = post.slice(2 * s - 1, s).as_signed();
                    terms[b as usize][n1 as usize][k as usize] = Some(lo.trunc(term_w));
                    terms[b as usize][n2 as usize][k as usize] = Some(hi.trunc(term_w));
                }
            } else {
                for n in 0..bo {
                    let wk = w[n as usize][k as usize].as_signed();
                    let tag = format!("b{b}_n{n}_k{k}");
                    let prod = pipe_reg(&m, &format!("m_{tag}"), ak * wk, stage(1));
                    let post = pipe_reg(&m, &format!("p_{tag}"), prod, stage(2));
                    terms[b as usize][n as usize][k as usize] =
                        Some(post.as_signed().trunc(term_w));
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
    m.output_from("dot", m.pack(&lanes));
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

/// Sum of signed `terms` (a power of two of them, the outputs of pipeline stage 2), each
/// level one bit wider up to `cap` bits (wrapping beyond), registered after every
/// `LEVELS_PER_STAGE` levels and after the last one (stage 3, 4, ...: `stage` gives each
/// stage's valid bit).
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
    let mut s = 3;
    for level in 0..levels {
        let w = (terms[0].width() + 1).min(cap);
        terms = terms
            .chunks(2)
            .map(|pair| pair[0].resize(w) + pair[1].resize(w))
            .collect();
        if (level + 1) % LEVELS_PER_STAGE == 0 || level + 1 == levels {
            let en = stage(s);
            s += 1;
            terms = terms
                .iter()
                .enumerate()
                .map(|(i, t)| pipe_reg(m, &format!("{name}_l{}_{i}", level + 1), *t, en))
                .collect();
        }
    }
    terms[0]
}
