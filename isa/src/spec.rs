//! # Normative semantics of the accelerator
//!
//! This module is the one specification every backend follows: the functional simulator
//! (`vta-sim`), the RTL, and any board. It contains no code. The encoding of instructions is
//! specified by [`crate::layout`]; the parameters named here (`BATCH`, `BLOCK_IN`, `INP_WIDTH`,
//! ...) are those of [`crate::HwConfig`]. Where Apache VTA's implementations disagree with each
//! other, the rule chosen is stated and the divergences are listed in section 13.
//!
//! "Must" is normative. "Error" means the program is erroneous: the reference simulator stops
//! the run and reports it (naming the instruction by its index in the stream, counted from 0);
//! hardware is not required to detect errors and its behaviour on an erroneous program is
//! unspecified. After an error, the contents of scratchpads and DRAM are unspecified.
//! Bit-exact conformance is required on error-free, race-free programs (section 5.5).
//!
//! ## 1. Numbers
//!
//! - `INP` lanes are signed two's-complement integers of `INP_WIDTH` bits, `WGT` lanes of
//!   `WGT_WIDTH` bits (2, 4, 8 or 16 each, independently), `ACC` lanes of `ACC_WIDTH` bits
//!   (16 or 32). `OUT` lanes have `OUT_WIDTH = INP_WIDTH` bits.
//! - `wrap(v)` is `v` reduced modulo `2^ACC_WIDTH` into the signed range
//!   `[-2^(ACC_WIDTH-1), 2^(ACC_WIDTH-1))`. **All ACC arithmetic wraps**: no operation
//!   saturates, and no operation traps on overflow.
//! - `low_k(v)` is the low `k` bits of `v`, read as a signed `k`-bit number.
//!
//! ## 2. Elements and their DRAM layout
//!
//! Every scratchpad is an array of *elements* (rows, or tiles for WGT). DRAM addresses in
//! LOAD/STORE count elements of the instruction's memory type.
//!
//! | memory type | lanes of one element, in order                        | lane bits    |
//! |-------------|-------------------------------------------------------|--------------|
//! | INP         | `BATCH x BLOCK_IN`, lane `b*BLOCK_IN + k`             | `INP_WIDTH`  |
//! | WGT         | `BLOCK_OUT x BLOCK_IN`, lane `n*BLOCK_IN + k` (row n = output channel, column k = input channel) | `WGT_WIDTH` |
//! | ACC         | `BATCH x BLOCK_OUT`, lane `b*BLOCK_OUT + n`           | `ACC_WIDTH`  |
//! | ACC8        | as ACC                                                | 8            |
//! | OUT         | as ACC                                                | `OUT_WIDTH`  |
//! | UOP         | one 32-bit micro-op ([`crate::layout`], bits above its fields ignored) | 32 |
//!
//! Packing: lane `l` of width `w` occupies bits `[l*w, (l+1)*w)` of the element, where bit `j`
//! of the element is bit `j mod 8` of byte `j div 8`. Hence lanes are little-endian in order,
//! two int4 lanes share a byte with lane 0 in the low nibble, four int2 lanes share a byte with
//! lane 0 in the two lowest bits, and multi-byte lanes are little-endian. An element occupies
//! `elem_bytes(m)` bytes
//! ([`crate::HwConfig::elem_bytes`]; always whole bytes), so element address `e` of memory
//! type `m` is byte address `e * elem_bytes(m)` (computed exactly; no wrap). A byte address
//! outside the memory is an error.
//!
//! ## 3. Scratchpads
//!
//! | buffer | depth (elements)       | written by                         | read by        |
//! |--------|------------------------|------------------------------------|----------------|
//! | INP    | `depth(INP)`           | LOAD INP (load module)             | GEMM           |
//! | WGT    | `depth(WGT)`           | LOAD WGT (load module)             | GEMM           |
//! | ACC    | `depth(ACC)`           | LOAD ACC/ACC8, GEMM, ALU (compute) | GEMM, ALU      |
//! | OUT    | `depth(ACC)`           | (mirror of ACC, section 9)         | STORE          |
//! | UOP    | `depth(UOP)`           | LOAD UOP (compute)                 | GEMM, ALU      |
//! | TABLE  | 256 entries of 8 bits (only with `ALU_LUT`) | ALU LUTW (compute)   | ALU LUT        |
//!
//! Scratchpads keep their contents across runs. Their contents after device reset are
//! unspecified (the simulator starts with zeros); programs must write before they read.
//!
//! ## 4. Instruction fetch and decode
//!
//! A run is started with a byte address and a count of 128-bit instructions. The stream is
//! decoded with [`crate::Codec::decode`]: an unknown opcode, memory type or ALU opcode, or an
//! instruction refused by [`crate::Codec::check`] (e.g. ALU MUL when `ALU_MUL` is false, ALU
//! LUT or LUTW when `ALU_LUT` is false, a STORE of a buffer other than OUT, a pad on STORE, `uop_end > depth(UOP)`) is an error
//! naming the instruction index. A STORE must not overwrite the instruction stream of the
//! running program (the result is unspecified). Further static errors, reported before any
//! instruction executes:
//!
//! - a flag that is illegal on the instruction's module (section 5.2);
//! - a FINISH with `push_prev` or `push_next` (the token could never be popped);
//! - a stream with no FINISH.
//!
//! ## 5. Modules and dependency tokens
//!
//! ### 5.1 Routing and order
//!
//! Three modules execute instructions, routed by [`crate::Insn::module`]: **load** runs LOAD
//! INP and LOAD WGT; **compute** runs LOAD UOP, LOAD ACC, LOAD ACC8, GEMM, ALU and FINISH;
//! **store** runs STORE. Each module executes its own instructions one at a time in stream
//! order. Modules run concurrently; the only ordering between them is given by tokens.
//!
//! ### 5.2 Queues and flags
//!
//! There are four token queues, each holding between 0 and `TOKEN_QUEUE_DEPTH` tokens
//! (tokens carry no data), all empty at the start of every run:
//!
//! | queue | from -> to        | meaning                    |
//! |-------|-------------------|----------------------------|
//! | `l2g` | load -> compute   | INP/WGT data loaded (RAW)  |
//! | `g2l` | compute -> load   | INP/WGT buffer free (WAR)  |
//! | `g2s` | compute -> store  | results ready in OUT (RAW) |
//! | `s2g` | store -> compute  | OUT buffer drained (WAR)   |
//!
//! What each flag means, by the module that executes the instruction (the same table, as
//! data, is [`crate::tokens::ROUTES`]):
//!
//! | module  | `pop_prev`  | `pop_next`  | `push_prev`  | `push_next`  |
//! |---------|-------------|-------------|--------------|--------------|
//! | load    | **illegal** | pop `g2l`   | **illegal**  | push `l2g`   |
//! | compute | pop `l2g`   | pop `s2g`   | push `g2l`   | push `g2s`   |
//! | store   | pop `g2s`   | **illegal** | push `s2g`   | **illegal**  |
//!
//! An illegal flag is an error naming the instruction (section 4).
//!
//! ### 5.3 Pops and pushes
//!
//! ```text
//! for each module, for each of its instructions I in stream order:
//!     wait until every queue I pops holds >= 1 token     # blocking
//!     remove one token from each queue I pops            # together, before I starts
//!     execute I                                           # sections 6-10
//!     for each queue I pushes:
//!         wait until it holds < TOKEN_QUEUE_DEPTH tokens  # blocking
//!         add one token                                   # after I completes
//!     (only now may the module start its next instruction)
//! ```
//!
//! ### 5.4 Completion
//!
//! The run is complete when FINISH *retires*: FINISH executes on compute like any
//! instruction (its pops first) and does nothing else. At that moment it is an error if
//!
//! - the load or store module has an instruction not yet executed, or one still waiting to
//!   push (FINISH must be ordered after them by tokens);
//! - compute has instructions after the FINISH;
//! - any token queue is non-empty (typically `s2g`: FINISH should set `pop_next` to consume
//!   the last STORE's `push_prev` token).
//!
//! If no module can make progress and FINISH has not retired, the program is deadlocked
//! (hardware hangs until the host's timeout; the simulator reports an error listing, for each
//! module, the blocked instruction and the queue it waits on, and every queue's token count).
//!
//! ### 5.5 Races
//!
//! Two accesses *conflict* when they touch the same scratchpad element or DRAM byte, at
//! least one writes, and they are executed by different modules. A program is *race-free*
//! when every pair of conflicting accesses is ordered by the token protocol. Results of
//! race-free programs do not depend on timing, and every backend must produce identical
//! results and counters for them. For racy programs, a backend may produce the result of any
//! interleaving allowed by the tokens. (The simulator uses one fixed interleaving: it lets
//! the load module run as far as it can, then compute, then store, and repeats; so load runs
//! ahead of compute by up to `TOKEN_QUEUE_DEPTH` tokens, as hardware may.)
//!
//! ## 6. LOAD
//!
//! Fields: `memory_type` m, `sram_base`, `dram_base`, `y_size`, `x_size`, `x_stride`,
//! `y_pad_0`, `y_pad_1`, `x_pad_0`, `x_pad_1`. For ACC8 the SRAM buffer is ACC.
//!
//! ```text
//! if x_size == 0: nothing (a sync: only its tokens act; pads are ignored)
//! if m == UOP and any pad != 0: error
//! W    = x_pad_0 + x_size + x_pad_1            # SRAM elements per row
//! ROWS = y_pad_0 + y_size + y_pad_1
//! if sram_base + W*ROWS > depth(m): error (names buffer and rows)
//! for r in 0..ROWS, c in 0..W:                 # SRAM written densely
//!     s = sram_base + r*W + c
//!     if y_pad_0 <= r < y_pad_0 + y_size and x_pad_0 <= c < x_pad_0 + x_size:
//!         e = dram_base + (r - y_pad_0)*x_stride + (c - x_pad_0)   # element address
//!         BUF[s] = element e of type m from DRAM (bytes e*elem_bytes(m) ...)
//!     else:
//!         BUF[s] = 0                           # every lane zero
//! ```
//!
//! - Padding is allowed on INP, WGT (zero tiles), ACC and ACC8.
//! - ACC8 reads `BATCH*BLOCK_OUT` signed bytes per element (`elem_bytes(ACC8)` bytes) and
//!   sign-extends each into an ACC lane.
//! - UOP copies micro-ops; GEMM/ALU see them decoded by the micro-op layout.
//! - Every write of an ACC row also updates OUT (section 9).
//! - Reading past the end of DRAM is an error naming the instruction and the DMA row.
//!
//! ## 7. STORE
//!
//! ```text
//! if x_size == 0: nothing (a sync)
//! if sram_base + y_size*x_size > depth(ACC): error
//! for r in 0..y_size, c in 0..x_size (in this order; a later write wins):
//!     DRAM element (dram_base + r*x_stride + c) of type OUT = OUT[sram_base + r*x_size + c]
//! ```
//!
//! STORE reads OUT only, densely, and has no padding (a non-zero pad is a decode error).
//!
//! ## 8. GEMM and ALU: the micro-op loop
//!
//! ```text
//! for o in 0..iter_out:
//!   for i in 0..iter_in:
//!     for u in uop_bgn..uop_end:               # empty when uop_bgn >= uop_end
//!       (d0, s0, w0) = UOP[u]
//!       dst = d0 + o*dst_factor_out + i*dst_factor_in
//!       src = s0 + o*src_factor_out + i*src_factor_in
//!       wgt = w0 + o*wgt_factor_out + i*wgt_factor_in      # GEMM only
//!       execute the micro-op (8.1 / 8.2)
//! ```
//!
//! - Indices are computed exactly (no truncation to a field width, no wrap). `dst` indexes
//!   ACC (TABLE for ALU LUTW without `reset_reg`, section 8.3); `src` indexes INP for GEMM
//!   and ACC for ALU; `wgt` indexes WGT. An index `>=` the
//!   depth of its buffer is an error naming the micro-op, `(o, i)`, the index and the buffer.
//! - Only indices that are used are checked: a reset micro-op uses only `dst`; an ALU
//!   micro-op with `use_imm` uses `dst` only; ALU never uses `wgt`.
//! - Micro-ops execute strictly sequentially in loop order: a row written by one micro-op is
//!   seen by the next (there is no hazard window, unlike VTA's HLS pipeline).
//!
//! ### 8.1 GEMM
//!
//! ```text
//! for b in 0..BATCH, n in 0..BLOCK_OUT:
//!     ACC[dst][b][n] = reset_reg ? 0
//!                    : wrap(ACC[dst][b][n] + sum over k in 0..BLOCK_IN of INP[src][b][k] * WGT[wgt][n][k])
//! ```
//!
//! Products and the sum are exact integers before `wrap` (equivalently, every step may
//! wrap). The result updates OUT (section 9).
//!
//! ### 8.2 ALU
//!
//! For every lane `l` in `0..BATCH*BLOCK_OUT`:
//!
//! ```text
//! x = ACC[dst][l]
//! y = use_imm ? sign_extend(imm) : ACC[src][l]     # imm is a signed 16-bit field
//! ACC[dst][l] = reset_reg ? 0 : op(x, y)
//! ```
//!
//! | op  | result                                                                            |
//! |-----|-----------------------------------------------------------------------------------|
//! | MIN | `min(x, y)`, signed                                                               |
//! | MAX | `max(x, y)`, signed                                                               |
//! | ADD | `wrap(x + y)`                                                                     |
//! | MUL | `wrap(x * y)` (the low ACC_WIDTH bits of the product); only when `ALU_MUL` is true, otherwise a decode error |
//! | SHR | `s = low_(LOG_ACC_WIDTH+1)(y)`; `s >= 0`: `x >> s` (arithmetic); `s < 0`: `wrap(x * 2^(-s))`, which is 0 when `-s >= ACC_WIDTH` |
//!
//! For 32-bit ACC the shift amount is the low 6 bits of `y` read as signed (-32..31); for
//! 16-bit ACC the low 5 bits (-16..15). When `src == dst`, `y` is the lane's old value. The
//! result updates OUT (section 9). LUT and LUTW follow in section 8.3.
//!
//! ### 8.3 The activation table (`ALU_LUT`)
//!
//! A config with `ALU_LUT` (config string suffix `_lut`) has one more compute-module memory,
//! TABLE: `LUT_ENTRIES = 256` signed 8-bit entries, one per int8 value, and two more ALU
//! operations. Without `ALU_LUT` both are decode errors (section 4), and nothing else
//! changes: the encoding, and every other instruction's semantics, are VTA's.
//!
//! | `alu_opcode` | op   | assembly | effect per micro-op (without `reset_reg`)                    |
//! |--------------|------|----------|--------------------------------------------------------------|
//! | 5            | LUT  | `lut`    | every lane `l`: `ACC[dst][l] = sign_extend(TABLE[index(y_l)])` |
//! | 6            | LUTW | `lutw`   | `TABLE[dst] = low_8(y_(dst mod LANES))`; no ACC row is written |
//!
//! where `LANES = BATCH*BLOCK_OUT`, `y` is the ALU operand of section 8.2 (`sign_extend(imm)`
//! in every lane with `use_imm`, else the row `ACC[src]`), and
//!
//! ```text
//! index(v) = low_8(min(max(v, -128), 127))    # saturate to int8, then its two's-complement byte
//! ```
//!
//! so entry `e` holds the function's value at the int8 `e` reads as (entries 0..=127 for
//! inputs 0..=127, 128..=255 for -128..=-1), and an accumulator beyond the int8 range reads
//! the entry of -128 or 127.
//!
//! - LUT does not read `ACC[dst]` (`x` of section 8.2); in place is `src == dst`. Its result
//!   updates OUT (section 9).
//! - LUTW's `dst` is not an ACC row but a TABLE entry: `dst >= 256` is an error like any
//!   index past its buffer (section 8), and `dst < depth(ACC)` is not required. It reads
//!   lane `dst mod LANES` of its operand, so the 256 entries of a table held in
//!   `ceil(256 / LANES)` ACC rows, entry `e` in lane `e mod LANES` of row `base + e div LANES`
//!   (the layout a LOAD ACC8 of the table's 256 bytes gives), are written by one LUTW
//!   whose micro-op `(dst 0, src base)` runs in the loop `iter_out = ceil(256 / LANES)`,
//!   `iter_in = min(LANES, 256)`, `dst_factor = (LANES, 1)`, `src_factor = (1, 0)`.
//! - With `reset_reg`, LUT and LUTW are resets like every ALU micro-op: `ACC[dst] = 0`
//!   (`dst` an ACC row), TABLE unchanged.
//! - Micro-ops stay sequential (section 8): a LUT sees every earlier LUTW, also within one
//!   instruction.
//! - TABLE keeps its contents across runs; after device reset they are unspecified (the
//!   simulator starts with zeros), so a program writes the entries it reads. Only compute
//!   touches TABLE, so no token orders its accesses and it adds no races (section 5.5).
//! - Counters: LUT and LUTW micro-ops count as `alu_uops` (`reset_uops` with `reset_reg`).
//!
//! ## 9. The OUT buffer
//!
//! `OUT[i]` always equals, lane by lane, `low_OUT_WIDTH(ACC[i])`. Every write of an ACC row
//! (LOAD ACC/ACC8, GEMM including reset, ALU including reset) updates the OUT row of the same
//! index; nothing else writes OUT. STORE reads OUT. (An implementation may keep OUT as a
//! separate memory written alongside ACC, as VTA's HLS does, or derive it from ACC at STORE
//! time, as the simulator does; the two are indistinguishable.)
//!
//! ## 10. FINISH
//!
//! FINISH is a compute instruction with no operands; its retirement completes the run
//! (section 5.4) and signals done to the host.
//!
//! ## 11. Counters
//!
//! Each run reports these counts, all starting at zero when the run starts (names as in
//! `vta_sim::Counters`):
//!
//! | counter           | definition                                                               |
//! |-------------------|--------------------------------------------------------------------------|
//! | `inp_load_bytes`  | sum over executed LOAD INP of `x_size * y_size * elem_bytes(INP)` (pads read nothing) |
//! | `wgt_load_bytes`  | the same for LOAD WGT                                                    |
//! | `acc_load_bytes`  | the same for LOAD ACC (`elem_bytes(ACC)`) plus LOAD ACC8 (`elem_bytes(ACC8)`) |
//! | `uop_load_bytes`  | the same for LOAD UOP (4 bytes per micro-op)                             |
//! | `out_store_bytes` | sum over executed STORE of `x_size * y_size * elem_bytes(OUT)`          |
//! | `gemm_uops`       | micro-op iterations of GEMM without `reset_reg`: `iter_out * iter_in * max(0, uop_end - uop_bgn)` |
//! | `reset_uops`      | micro-op iterations of GEMM and ALU with `reset_reg`                     |
//! | `alu_uops`        | micro-op iterations of ALU without `reset_reg`                           |
//! | `load_insns`      | instructions executed by the load module (syncs included)               |
//! | `compute_insns`   | instructions executed by the compute module (FINISH included)           |
//! | `store_insns`     | instructions executed by the store module                                |
//! | `macs`            | `gemm_uops * BATCH * BLOCK_IN * BLOCK_OUT`                               |
//!
//! Syncs (`x_size == 0`) move no bytes. Instruction fetch is not counted in the byte counts.
//! The simulator's step limit counts *steps*: instructions executed plus micro-op iterations
//! (reset ones included).
//!
//! ## 12. Error summary
//!
//! Static (before execution): decode errors (section 4), illegal flags (5.2), FINISH with a
//! push, no FINISH. Dynamic (naming the instruction index and instruction): LOAD/STORE rows
//! past the buffer depth, DRAM access outside memory, padding on LOAD UOP, a micro-op index
//! past its buffer depth (TABLE's 256 entries for LUTW), deadlock (5.4), unfinished work or tokens at FINISH (5.4), and in
//! the simulator a step or time limit exceeded.
//!
//! ## 13. Decisions where VTA's implementations disagree
//!
//! | behaviour                      | this spec                          | VTA fsim                          | VTA HLS                       | VTA Chisel            |
//! |--------------------------------|------------------------------------|-----------------------------------|-------------------------------|-----------------------|
//! | OUT contents                   | always low bits of ACC (section 9) | ACC truncated at STORE            | mirror written by GEMM/ALU only (stale after LOAD ACC) | as HLS |
//! | SHR amount                     | low LOG_ACC_WIDTH+1 bits, signed   | whole 32-bit operand (C shift)    | low 5 bits, signed            | low 5 bits; left shift only for a negative immediate |
//! | SHR by `>= ACC_WIDTH` left     | 0                                  | undefined (C)                     | (cannot occur)                | -                     |
//! | ALU MUL                        | with `ALU_MUL` (decode error otherwise) | yes                          | no                            | no                    |
//! | ALU LUT, LUTW (codes 5, 6)     | with `ALU_LUT` (decode error otherwise) | no (ours)                    | no                            | no                    |
//! | LOAD ACC8                      | yes (sign-extend)                  | yes (int8 inputs, int32 ACC only) | no-op                         | no                    |
//! | padding on WGT                 | zero tiles                         | zero tiles                        | ignored                       | -                     |
//! | micro-op index past depth      | error                              | CHECK failure                     | wraps at LOG_DEPTH+1 bits     | -                     |
//! | same dst in consecutive uops   | sequential, exact                  | sequential                        | hazard (runtime forbids it)   | -                     |
//! | `reset_reg` on ALU             | writes zeros (like GEMM)           | ignored                           | ignored                       | -                     |
//! | `reset_uops` / `alu_uops`      | resets counted apart               | GEMM resets not counted; ALU resets counted as ALU | -        | -                     |
//! | `acc_load_bytes` for ACC8      | bytes actually read                | counted at ACC element size       | -                             | -                     |
//! | tokens left at FINISH          | error                              | not checked                       | asserted empty in C-sim       | -                     |
//! | token queue capacity           | `TOKEN_QUEUE_DEPTH` (push blocks when full) | unbounded                | FIFO depth                    | 8-bit counters        |
