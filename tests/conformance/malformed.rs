//! Programs that must fail, and how: deadlocks are diagnosed per module, out-of-range
//! accesses name the instruction, garbage is refused at decode, runaway programs hit the limit.

use crate::alu::{deps, mem};
use crate::common::run;
use isa::builder::{ProgramBuilder, UopLoops};
use isa::{DType, HwConfig, Insn, MemType, Uop};

fn err_of(p: &isa::Program) -> String {
    match run(p) {
        Ok(_) => panic!("the program should have failed"),
        Err(e) => e,
    }
}

#[test]
fn deadlock_names_each_blocked_module_and_queue() {
    let cfg = HwConfig::default();
    let mut b = ProgramBuilder::new(&cfg);
    // Compute waits for a load token that is never sent.
    b.emit(mem(
        MemType::Uop,
        0,
        0,
        0,
        0,
        0,
        deps(true, false, false, false),
    ));
    b.emit(Insn::Finish(deps(false, false, false, false)));
    let start = std::time::Instant::now();
    let e = err_of(&b.into_program().unwrap());
    assert!(
        start.elapsed().as_secs() < 1,
        "diagnosed in {:?}",
        start.elapsed()
    );
    let lower = e.to_lowercase();
    assert!(lower.contains("deadlock"), "{e}");
    assert!(
        lower.contains("compute") && lower.contains("instruction 0"),
        "{e}"
    );
    assert!(
        lower.contains("l2g"),
        "names the queue compute waits on: {e}"
    );
}

#[test]
fn store_token_never_popped_is_reported_at_finish() {
    let cfg = HwConfig::default();
    let mut b = ProgramBuilder::new(&cfg);
    let out = b.output("out", DType::I8, vec![16]);
    b.emit(mem(
        MemType::Uop,
        0,
        0,
        0,
        0,
        0,
        deps(false, false, false, true),
    ));
    b.emit(mem(
        MemType::Out,
        0,
        b.addr(MemType::Out, out, 0),
        1,
        1,
        1,
        deps(true, false, true, false),
    ));
    b.emit(Insn::Finish(deps(false, false, false, false)));
    let e = err_of(&b.into_program().unwrap());
    assert!(e.to_lowercase().contains("finish"), "{e}");
}

#[test]
fn out_of_range_scratchpad_index_names_the_instruction() {
    let cfg = HwConfig::default();
    let mut b = ProgramBuilder::new(&cfg);
    let k = b.kernel(&[Uop {
        dst_idx: 0,
        src_idx: 0,
        wgt_idx: 0,
    }]);
    // dst steps past the 2048-row ACC buffer.
    b.gemm(
        k,
        UopLoops {
            iter_out: 1,
            iter_in: 3000,
            dst: (0, 1),
            src: (0, 0),
            wgt: (0, 0),
        },
        true,
    );
    let e = err_of(&b.finish().unwrap());
    assert!(
        e.contains("instruction 1") && e.to_lowercase().contains("acc"),
        "{e}"
    );
}

#[test]
fn dram_access_outside_memory_names_the_instruction() {
    let cfg = HwConfig::default();
    let mut b = ProgramBuilder::new(&cfg);
    b.emit(mem(
        MemType::Inp,
        0,
        0x0fff_fff0,
        1,
        4,
        4,
        deps(false, false, false, false),
    ));
    let e = err_of(&b.finish().unwrap());
    assert!(e.contains("instruction 0"), "{e}");
}

#[test]
fn missing_finish_is_an_error_not_a_hang() {
    let cfg = HwConfig::default();
    let mut b = ProgramBuilder::new(&cfg);
    let k = b.kernel(&[Uop::default()]);
    b.gemm(k, UopLoops::once(), true);
    let e = err_of(&b.into_program().unwrap());
    assert!(e.to_lowercase().contains("finish"), "{e}");
}

#[test]
fn illegal_token_direction_is_refused() {
    let cfg = HwConfig::default();
    let mut b = ProgramBuilder::new(&cfg);
    // The load module has no previous module to pop from.
    b.emit(mem(
        MemType::Inp,
        0,
        0,
        0,
        0,
        0,
        deps(true, false, false, false),
    ));
    b.emit(Insn::Finish(deps(false, false, false, false)));
    let e = err_of(&b.into_program().unwrap());
    assert!(e.contains("instruction 0"), "{e}");
}

#[test]
fn garbage_instruction_bytes_are_refused_with_their_index() {
    use drivers::{Device, RunTimeout};
    use vta_sim::FsimDevice;
    let cfg = HwConfig::default();
    let mut dev = FsimDevice::new(&cfg);
    let codec = isa::Codec::new(&cfg);
    let mut stream = codec
        .encode(&Insn::Finish(deps(false, false, false, false)))
        .unwrap()
        .to_vec();
    stream.splice(0..0, [0xffu8; 16]); // opcode 7 first
    let buf = dev.alloc(stream.len() as u64, 4096).unwrap();
    dev.copy_to_device(&buf, 0, &stream).unwrap();
    let e = dev
        .run(buf.phys_addr, 2, RunTimeout::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("instruction 0") && e.contains("opcode 7"), "{e}");
}
