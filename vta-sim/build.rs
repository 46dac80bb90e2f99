//! Compiles the default config's accelerator into this crate: generates `vta_top` for VTA's
//! default config with `vta_hw`, verilates it (the same Verilator options and C++ shim as a
//! model built at run time by `hdl::verilator::Model::build`) and compiles the result with
//! the `cc` crate into a static library, whose shim functions are renamed
//! `vta_rtl_default_hdl_*`. `vta_sim::rtl` then creates the default model from those
//! functions (`hdl::verilator::Model::from_static`) without building anything at run time.
//!
//! Without `verilator` or a C++ compiler (or with `VTA_RTL_NO_STATIC` set) the build still
//! succeeds: it says so in a warning, and the default model is built on first use, like
//! every other config's. The next build after the tools are installed runs this script
//! again and links the model in.
//!
//! Without the `rtl` feature there is no RTL backend and nothing to build.

fn main() {
    #[cfg(feature = "rtl")]
    rtl::main();
}

#[cfg(feature = "rtl")]
mod rtl {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// The shim's C functions (see `hdl::verilator::shim_cpp`), renamed with [`PREFIX`].
    const SHIM_FUNCTIONS: [&str; 11] = [
        "abi_version",
        "port_count",
        "new",
        "trace_close",
        "trace_open",
        "free",
        "eval",
        "tick",
        "port_ptr",
        "set",
        "get",
    ];
    const PREFIX: &str = "vta_rtl_default_";

    pub fn main() {
        println!("cargo:rerun-if-changed=build.rs");
        println!("cargo:rerun-if-env-changed=VTA_RTL_NO_STATIC");
        println!("cargo:rerun-if-env-changed=CXX");
        println!("cargo:rustc-check-cfg=cfg(vta_rtl_linked)");
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        match build(&out) {
            Ok(()) => println!("cargo:rustc-cfg=vta_rtl_linked"),
            Err(why) => {
                println!(
                    "cargo:warning=the default config's RTL model is not compiled in ({why}); it \
                     will be built on first use of the RTL backend (which needs verilator and a \
                     C++ compiler: apt-get install verilator clang)"
                );
                watch_path_for_tools();
            }
        }
    }

    /// After a build without the tools, runs this script again once they may have appeared:
    /// when `PATH` changes or an entry is added to one of its directories (installing
    /// Verilator or a compiler adds one; cargo compares a directory's contents' times with
    /// the last run). A missing file cannot be watched instead: cargo reruns the script on
    /// every build while a watched file is missing.
    fn watch_path_for_tools() {
        println!("cargo:rerun-if-env-changed=PATH");
        println!("cargo:rerun-if-env-changed=VERILATOR_ROOT");
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            if dir.is_absolute() && dir.is_dir() {
                println!("cargo:rerun-if-changed={}", dir.display());
            }
        }
    }

    fn tool_output(cmd: &mut Command, what: &str) -> Result<String, String> {
        let out = cmd
            .output()
            .map_err(|e| format!("`{what}` could not be run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`{what}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn build(out: &Path) -> Result<(), String> {
        if std::env::var_os("VTA_RTL_NO_STATIC").is_some() {
            return Err("VTA_RTL_NO_STATIC is set".into());
        }
        tool_output(
            Command::new("verilator").arg("--version"),
            "verilator --version",
        )?;
        let root = PathBuf::from(tool_output(
            Command::new("verilator").args(["--getenv", "VERILATOR_ROOT"]),
            "verilator --getenv VERILATOR_ROOT",
        )?);
        let include = root.join("include");
        if !include.join("verilated.cpp").exists() {
            return Err(format!(
                "Verilator's runtime sources are not in {}",
                include.display()
            ));
        }
        // The compiler `hdl` builds run-time models with (clang++ where installed: faster
        // models), unless CXX names one.
        let cxx = hdl::verilator::preferred_cxx();
        let compiler = cc::Build::new()
            .cpp(true)
            .compiler(&cxx)
            .try_get_compiler()
            .map_err(|e| format!("no C++ compiler: {e}"))?;
        tool_output(
            Command::new(compiler.path()).arg("--version"),
            &format!("{} --version", compiler.path().display()),
        )?;

        let cfg = isa::HwConfig::preset("default").map_err(|e| e.to_string())?;
        let g = vta_hw::generate(&cfg).map_err(|e| e.to_string())?;
        let (verilog, wrapper) = hdl::verilator::sim_verilog(&g.design);
        let shim = hdl::verilator::shim_cpp(&g.design);
        let dir = out.join("rtl-default");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let v_path = dir.join("top.v");
        let shim_path = dir.join("shim.cpp");
        std::fs::write(&v_path, &verilog).map_err(|e| e.to_string())?;
        std::fs::write(&shim_path, &shim).map_err(|e| e.to_string())?;
        let obj = dir.join("obj");
        tool_output(
            Command::new("verilator")
                .args(hdl::verilator::verilator_args(&wrapper, false))
                .arg("-Mdir")
                .arg(&obj)
                .arg(&v_path),
            "verilator",
        )?;

        // Each generated source is compiled after `hdl`'s prelude, as a run-time model's.
        let prelude = dir.join("prelude.h");
        std::fs::write(&prelude, hdl::verilator::sim_prelude()).map_err(|e| e.to_string())?;
        let mut generated = vec![];
        for e in std::fs::read_dir(&obj).map_err(|e| e.to_string())? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.extension().is_some_and(|x| x == "cpp") {
                generated.push(p);
            }
        }
        generated.sort();
        let mut sources = vec![];
        for p in generated {
            let unit = dir.join(format!(
                "unit_{}",
                p.file_name().expect("a file").to_string_lossy()
            ));
            let text = format!(
                "#include \"{}\"\n#include \"{}\"\n",
                prelude.display(),
                p.display()
            );
            std::fs::write(&unit, text).map_err(|e| e.to_string())?;
            sources.push(unit);
        }
        sources.push(shim_path);
        sources.push(include.join("verilated.cpp"));
        sources.push(include.join("verilated_threads.cpp"));

        let mut b = cc::Build::new();
        b.cpp(true)
            .compiler(&cxx)
            .std("gnu++17")
            // As `hdl::verilator` compiles run-time models (see its `cxx_flags`).
            .opt_level(3)
            .debug(false)
            .warnings(false)
            .extra_warnings(false)
            .flag("-faligned-new")
            .flag("-fwrapv")
            .flag_if_supported("-Wno-bool-operation")
            .flag_if_supported("-Wno-sign-compare")
            .flag_if_supported("-Wno-unused-parameter")
            .flag_if_supported("-Wno-unused-variable")
            .flag_if_supported("-Wno-unused-but-set-variable")
            .flag_if_supported("-Wno-uninitialized")
            .flag_if_supported("-Wno-shadow")
            .define("VM_COVERAGE", "0")
            .define("VM_SC", "0")
            .define("VM_TRACE", "0")
            .define("VM_TRACE_FST", "0")
            .define("VM_TRACE_VCD", "0")
            .include(&include)
            .include(include.join("vltstd"))
            .include(&obj)
            .files(&sources);
        for f in SHIM_FUNCTIONS {
            b.define(&format!("hdl_{f}"), format!("{PREFIX}hdl_{f}").as_str());
        }
        b.try_compile("vta_rtl_default")
            .map_err(|e| format!("compiling the model failed: {e}"))?;
        // Verilator's runtime uses std::atomic operations that clang++ leaves to libatomic
        // (g++ inlines them); run-time models link it too.
        println!("cargo:rustc-link-lib=atomic");

        // Identifies the model's sources; `src/rtl/model.rs` checks it the same way.
        let hash = isa::container::fnv1a_parts(&[
            verilog.as_bytes(),
            shim.as_bytes(),
            hdl::verilator::sim_prelude().as_bytes(),
        ]);
        let rs = format!(
            "// Generated by vta-sim's build.rs: the default config's model compiled into the crate.\n\
             /// Hash of the verilated Verilog, the shim and the prelude (`isa::container::fnv1a_parts`).\n\
             pub const SOURCE_HASH: u64 = {hash:#018x};\n\
             /// The config it was generated for (`HwConfig::to_json`).\n\
             pub const CONFIG_JSON: &str = {:?};\n",
            cfg.to_json()
        );
        std::fs::write(out.join("rtl_linked.rs"), rs).map_err(|e| e.to_string())?;
        Ok(())
    }
}
