//! Building a model: the Verilog for simulation, Verilator's and the compiler's flags, the
//! parallel compilation of the generated C++, and the cached library (built once per key,
//! under a lock, moved into place atomically).

use super::*;

const SIM_HEADER: &str = "Verilog for simulation with Verilator";

/// Generated C++ per translation unit (bytes) above which a model is split into several.
const UNIT_BYTES: u64 = 256 * 1024;

/// The Verilog that is verilated: the design plus a wrapper module (returned name) around
/// its top whose ports are the top's ports prefixed with `io_`. Verilator makes top-level
/// ports members of its generated C++ class, so a port called `eval`, `name`, `trace`,
/// `rootp`, ... would collide with the class's own members; the prefix avoids that for any
/// Verilator version. The wrapper costs nothing: Verilator inlines it.
pub fn sim_verilog(design: &Design) -> (String, String) {
    let defs = design.definitions();
    let mut wrapper = "hdl_sim_top".to_string();
    while defs.iter().any(|d| d.name == wrapper) {
        wrapper.push_str("_w");
    }
    let top = design.top();
    let mut v = design.verilog(SIM_HEADER);
    let _ = writeln!(
        v,
        "\n`default_nettype none\n\n// Simulation wrapper: `{}` with ports prefixed `io_`.",
        top.name()
    );
    let _ = writeln!(v, "module {wrapper} (");
    let ports = top.ports();
    for (k, p) in ports.iter().enumerate() {
        let range = if p.width == 1 {
            String::new()
        } else {
            format!("[{}:0] ", p.width - 1)
        };
        let comma = if k + 1 < ports.len() { "," } else { "" };
        let _ = writeln!(v, "  {} wire {range}io_{}{comma}", p.dir.as_str(), p.name);
    }
    let _ = writeln!(v, ");\n  {} dut (", top.name());
    for (k, p) in ports.iter().enumerate() {
        let comma = if k + 1 < ports.len() { "," } else { "" };
        let _ = writeln!(v, "    .{0}(io_{0}){comma}", p.name);
    }
    let _ = writeln!(v, "  );\nendmodule\n\n`default_nettype wire");
    (v, wrapper)
}

/// C++ that precedes a model's generated code in every translation unit (not Verilator's
/// runtime): a sign extension compilers see through.
///
/// Verilator sign-extends with `VL_EXTENDS_II`, `-(x & sign_bit) | x`, which C++ compilers
/// compile as written (three dependent instructions per use); as a left shift and an
/// arithmetic right shift it is what they emit for a sign extension, one `movsx` for a
/// byte. The bits are the same for the operands Verilator passes it, which have nothing
/// set above `lbits` (Verilator's own form would be wrong otherwise). The GEMM array's
/// packed products sign-extend all three factors of each multiply (see the Verilog
/// printer's signed products): ResNet-18 simulates about 8% faster with the prelude than
/// without. (Converting an out-of-range unsigned value to `int32_t` wraps, and shifting a
/// negative one right is arithmetic, in GCC and Clang, the compilers models are built with.)
pub fn sim_prelude() -> &'static str {
    r#"// Prelude of `hdl`: included before Verilator's generated code.
#include "verilated.h"
#undef VL_EXTENDS_II
#define VL_EXTENDS_II(obits, lbits, lhs) \
    ((IData)((int32_t)((IData)(lhs) << (32 - (lbits))) >> (32 - (lbits))))
"#
}

pub(super) fn cxx_flags(t: &Tools, trace: bool) -> Vec<String> {
    let inc = t.verilator_root.join("include");
    let tr = if trace { "1" } else { "0" };
    let mut f: Vec<String> = [
        "-std=gnu++17",
        // With Verilator's functions split (see `verilator_args`), -O3 runs the models
        // about 15% faster than -O2 and compiles them in less CPU time.
        "-O3",
        // Verilator's signed multiply (`VL_MULS_III`: int32 * int32) overflows, which C++
        // leaves undefined; clang++ then folds the product's sign extension into a 64-bit
        // multiply (a fuzzed `$signed(a) * $signed(a)` came out wrong). Wrapping is what
        // Verilog means.
        "-fwrapv",
        "-fPIC",
        "-fvisibility=hidden",
        "-faligned-new",
        "-Wno-bool-operation",
        "-Wno-sign-compare",
        "-Wno-uninitialized",
        "-Wno-unused-but-set-variable",
        "-Wno-unused-parameter",
        "-Wno-unused-variable",
        "-Wno-shadow",
        "-DVM_COVERAGE=0",
        "-DVM_SC=0",
        "-DVM_TRACE_FST=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    f.push(format!("-DVM_TRACE={tr}"));
    f.push(format!("-DVM_TRACE_VCD={tr}"));
    f.push(format!("-I{}", inc.display()));
    f.push(format!("-I{}", inc.join("vltstd").display()));
    f
}

/// The Verilator command-line options [`Model::build_with`] verilates with (before `-Mdir`
/// and the source file), for the wrapper module `top` of [`sim_verilog`]. A build script that
/// compiles a model ahead of time (see [`Model::from_static`]) uses the same options.
pub fn verilator_args(top: &str, trace: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "--cc",
        "-O3",
        "--x-assign",
        "fast",
        "--x-initial",
        "fast",
        "--noassert",
        "--no-timing",
        // The design's evaluation is one function of tens of KiB of straight-line code per
        // clock edge; split into functions of this many statements, the C++ compiler
        // allocates registers better (about 7% faster at -O3, and quicker to compile).
        "--output-split-cfuncs",
        "5000",
        // Waveform time stamps are picoseconds (the shim steps half clock periods).
        "--timescale-override",
        "1ps/1ps",
        "-Wno-fatal",
        "-Wno-lint",
        "-Wno-style",
        "--prefix",
        "Vtop",
        "--top-module",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(top.to_string());
    if trace {
        a.push("--trace".into());
    }
    a
}

struct CompileJob {
    src: PathBuf,
    obj: PathBuf,
    include: Option<PathBuf>,
    flags: Vec<String>,
}

fn compile_all(t: &Tools, jobs: Vec<CompileJob>, limit: usize) -> Result<(), BuildError> {
    let queue = Mutex::new(jobs.into_iter().collect::<Vec<_>>());
    let first_error: Mutex<Option<BuildError>> = Mutex::new(None);
    let workers = limit.max(1);
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| loop {
                if first_error.lock().unwrap().is_some() {
                    return;
                }
                let Some(job) = queue.lock().unwrap().pop() else {
                    return;
                };
                let _slot = Slot::take();
                let mut cmd = Command::new(&t.cxx);
                cmd.args(&job.flags);
                if let Some(inc) = &job.include {
                    cmd.arg(format!("-I{}", inc.display()));
                }
                cmd.arg("-c").arg(&job.src).arg("-o").arg(&job.obj);
                if let Err(e) = run(cmd, "compiling the simulation model", &t.cxx) {
                    let mut fe = first_error.lock().unwrap();
                    if fe.is_none() {
                        *fe = Some(e);
                    }
                    return;
                }
            });
        }
    });
    match first_error.into_inner().unwrap() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Splits files into at most `n` groups of similar total size (largest first).
fn balance(mut files: Vec<(PathBuf, u64)>, n: usize) -> Vec<Vec<PathBuf>> {
    files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let n = n.max(1).min(files.len().max(1));
    let mut groups: Vec<(u64, Vec<PathBuf>)> = vec![(0, vec![]); n];
    for (f, size) in files {
        let g = groups
            .iter_mut()
            .min_by_key(|g| g.0)
            .expect("at least one group");
        g.0 += size.max(1);
        g.1.push(f);
    }
    groups
        .into_iter()
        .map(|g| g.1)
        .filter(|g| !g.is_empty())
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(super) fn build_library(
    t: &Tools,
    cache_dir: &Path,
    runtime_key: &str,
    model_dir: &Path,
    verilog: &str,
    shim: &str,
    flags: &[String],
    rt_flags: &[String],
    vargs: &[String],
    trace: bool,
    jobs: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<(), BuildError> {
    let tmp = cache_dir.join(format!(
        "{}.tmp-{}",
        model_dir.file_name().unwrap().to_string_lossy(),
        unique_suffix()
    ));
    fs::create_dir_all(&tmp).map_err(io_err("creating build directory", &tmp))?;
    let result = (|| {
        let v_path = tmp.join("top.v");
        fs::write(&v_path, verilog).map_err(io_err("writing", &v_path))?;
        let shim_path = tmp.join("shim.cpp");
        fs::write(&shim_path, shim).map_err(io_err("writing", &shim_path))?;

        progress("verilating");
        let obj = tmp.join("obj");
        let mut cmd = Command::new("verilator");
        cmd.args(vargs).arg("-Mdir").arg(&obj).arg(&v_path);
        run(cmd, "verilating the design", "verilator")?;

        // Group Verilator's sources (and the shim) into one translation unit per job.
        let mut files = vec![];
        for e in fs::read_dir(&obj).map_err(io_err("reading", &obj))? {
            let p = e.map_err(io_err("reading", &obj))?.path();
            if p.extension().is_some_and(|x| x == "cpp") {
                let size = fs::metadata(&p).map(|m| m.len()).unwrap_or(1);
                files.push((p, size));
            }
        }
        files.push((shim_path.clone(), 1));
        // Each translation unit re-parses Verilator's headers (about a second), so small
        // models compile as one unit; larger ones are split to use every job.
        let total: u64 = files.iter().map(|f| f.1).sum();
        let units = (total.div_ceil(UNIT_BYTES) as usize).clamp(1, jobs.max(1));
        let groups = balance(files, units);
        let mut compile = vec![];
        let mut objects = vec![];
        for (k, g) in groups.iter().enumerate() {
            let unit = tmp.join(format!("unit{k}.cpp"));
            let mut text = String::from("#define VL_INCLUDE_OPT include\n");
            text.push_str(sim_prelude());
            for f in g {
                let _ = writeln!(text, "#include \"{}\"", f.display());
            }
            fs::write(&unit, text).map_err(io_err("writing", &unit))?;
            let o = tmp.join(format!("unit{k}.o"));
            objects.push(o.clone());
            compile.push(CompileJob {
                src: unit,
                obj: o,
                include: Some(obj.clone()),
                flags: flags.to_vec(),
            });
        }

        // The Verilator runtime, compiled once per cache directory.
        let rt_dir = cache_dir.join(format!("runtime-{}", &runtime_key[..24]));
        let mut rt_sources = vec!["verilated.cpp", "verilated_threads.cpp"];
        if trace {
            rt_sources.push("verilated_vcd_c.cpp");
        }
        let rt_objects: Vec<PathBuf> = rt_sources
            .iter()
            .map(|s| rt_dir.join(s.replace(".cpp", ".o")))
            .collect();
        let missing: Vec<usize> = (0..rt_sources.len())
            .filter(|&i| !rt_objects[i].exists())
            .collect();
        let _rt_lock = if missing.is_empty() {
            None
        } else {
            fs::create_dir_all(&rt_dir).map_err(io_err("creating", &rt_dir))?;
            Some(FileLock::acquire(
                &cache_dir.join(format!("runtime-{}.lock", &runtime_key[..24])),
            )?)
        };
        let mut rt_tmp = vec![];
        for i in 0..rt_sources.len() {
            if rt_objects[i].exists() {
                continue;
            }
            let o = rt_dir.join(format!("{}.tmp-{}", rt_sources[i], unique_suffix()));
            compile.push(CompileJob {
                src: t.verilator_root.join("include").join(rt_sources[i]),
                obj: o.clone(),
                include: None,
                flags: rt_flags.to_vec(),
            });
            rt_tmp.push((o, rt_objects[i].clone()));
        }
        // Jobs are taken from the end: the runtime sources, the slowest, go first.
        progress(&format!(
            "compiling ({} file{})",
            compile.len(),
            if compile.len() == 1 { "" } else { "s" }
        ));
        compile_all(t, compile, jobs)?;
        for (from, to) in rt_tmp {
            fs::rename(&from, &to).map_err(io_err("moving into place", &to))?;
        }
        drop(_rt_lock);

        progress("linking");
        let lib_tmp = tmp.join("lib.so");
        let mut cmd = Command::new(&t.cxx);
        cmd.args(["-shared", "-fPIC", "-o"])
            .arg(&lib_tmp)
            .args(&objects)
            .args(&rt_objects)
            .args(["-pthread", "-latomic"]);
        run(cmd, "linking the simulation model", &t.cxx)?;
        let _ = fs::remove_dir_all(&obj);
        for o in &objects {
            let _ = fs::remove_file(o);
        }
        // Move the finished directory into place (replacing any leftovers).
        if model_dir.exists() {
            fs::remove_dir_all(model_dir).map_err(io_err("removing stale", model_dir))?;
        }
        fs::rename(&tmp, model_dir).map_err(io_err("moving into place", model_dir))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balancing() {
        let g = balance(
            vec![
                ("a".into(), 10),
                ("b".into(), 9),
                ("c".into(), 2),
                ("d".into(), 1),
            ],
            2,
        );
        assert_eq!(g.len(), 2);
        assert_eq!(g[0], vec![PathBuf::from("a"), PathBuf::from("d")]);
        assert_eq!(g[1], vec![PathBuf::from("b"), PathBuf::from("c")]);
    }
}
