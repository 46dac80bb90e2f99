//! Getting a Verilator model of `vta_top` (or of the multi-core design) for a config: the
//! default config's model compiled into this crate by `build.rs`, or any config's built on
//! demand (generate, verilate, compile, load) and cached on disk by `hdl` under a hash of
//! its sources. Within a process each model is built or loaded once; every simulator gets a
//! fresh instance of it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdl::verilator::{BuildOptions, Model};
use isa::HwConfig;

use super::RtlError;

/// Where a model came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelOrigin {
    /// Compiled into the program (the default config, by vta-sim's build script).
    Linked,
    /// Found in the on-disk cache (at this path).
    Cached(std::path::PathBuf),
    /// Built now (this long), and cached at this path.
    Built(std::path::PathBuf, Duration),
}

impl std::fmt::Display for ModelOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelOrigin::Linked => write!(f, "compiled into this program"),
            ModelOrigin::Cached(p) => write!(f, "cached model {}", p.display()),
            ModelOrigin::Built(p, d) => {
                write!(
                    f,
                    "built in {:.1} s, cached as {}",
                    d.as_secs_f64(),
                    p.display()
                )
            }
        }
    }
}

#[cfg(vta_rtl_linked)]
mod linked {
    use std::ffi::{c_char, c_int, c_void};

    use hdl::verilator::StaticShim;

    include!(concat!(env!("OUT_DIR"), "/rtl_linked.rs"));

    extern "C" {
        fn vta_rtl_default_hdl_abi_version() -> u32;
        fn vta_rtl_default_hdl_port_count() -> u32;
        fn vta_rtl_default_hdl_new() -> *mut c_void;
        fn vta_rtl_default_hdl_free(p: *mut c_void);
        fn vta_rtl_default_hdl_eval(p: *mut c_void);
        fn vta_rtl_default_hdl_tick(p: *mut c_void, n: u64);
        fn vta_rtl_default_hdl_port_ptr(p: *mut c_void, port: u32) -> *mut c_void;
        fn vta_rtl_default_hdl_trace_open(
            p: *mut c_void,
            path: *const c_char,
            half_period_ps: u64,
        ) -> c_int;
        fn vta_rtl_default_hdl_trace_close(p: *mut c_void);
    }

    pub fn shim() -> StaticShim {
        StaticShim {
            abi_version: vta_rtl_default_hdl_abi_version,
            port_count: vta_rtl_default_hdl_port_count,
            new: vta_rtl_default_hdl_new,
            free: vta_rtl_default_hdl_free,
            eval: vta_rtl_default_hdl_eval,
            tick: vta_rtl_default_hdl_tick,
            port_ptr: vta_rtl_default_hdl_port_ptr,
            trace_open: vta_rtl_default_hdl_trace_open,
            trace_close: vta_rtl_default_hdl_trace_close,
        }
    }
}

/// Whether the default config's model is compiled into this program.
pub fn linked_default() -> bool {
    cfg!(vta_rtl_linked)
}

/// The linked model, if `cfg` is its config and `design` its design.
#[cfg(vta_rtl_linked)]
fn from_linked(cfg: &HwConfig, design: &hdl::Design) -> Option<Result<Model, RtlError>> {
    if cfg.to_json() != linked::CONFIG_JSON {
        return None;
    }
    let (verilog, _) = hdl::verilator::sim_verilog(design);
    let shim = hdl::verilator::shim_cpp(design);
    let prelude = hdl::verilator::sim_prelude();
    let sources = [verilog.as_bytes(), shim.as_bytes(), prelude.as_bytes()];
    if isa::container::fnv1a_parts(&sources) != linked::SOURCE_HASH {
        return None;
    }
    // SAFETY: build.rs compiled these functions from exactly this design (same config, same
    // Verilog and shim, as the hash shows).
    Some(
        unsafe {
            Model::from_static(
                design,
                linked::shim(),
                false,
                "<default model compiled into vta-sim>",
            )
        }
        .map_err(RtlError::Build),
    )
}

#[cfg(not(vta_rtl_linked))]
fn from_linked(_: &HwConfig, _: &hdl::Design) -> Option<Result<Model, RtlError>> {
    None
}

struct Prototype {
    model: Mutex<Model>,
    origin: ModelOrigin,
}

type Protos = HashMap<(String, u32, bool), Arc<Prototype>>;

fn protos() -> &'static Mutex<Protos> {
    static P: std::sync::OnceLock<Mutex<Protos>> = std::sync::OnceLock::new();
    P.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A fresh instance (initial state) of the model of `vta_top` for `cfg`: the linked default
/// model, else one loaded from or built into `cache_dir` (`traced`: compiled with VCD
/// tracing; never the linked one). `progress` hears each build stage (`generating`,
/// `verilating`, `compiling (N files)`, `linking`, `loading`, `cached`). The returned origin
/// is where this process first got the model.
pub fn instance(
    cfg: &HwConfig,
    traced: bool,
    cache_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(Model, ModelOrigin), RtlError> {
    instance_of(cfg, 1, traced, cache_dir, progress)
}

/// A fresh instance of the model of `cfg`'s design with `cores` cores: `vta_top` for one
/// (as [`instance`]), `vta_hw::multicore`'s `vta_multicore_<cores>` for more (never linked).
pub fn instance_of(
    cfg: &HwConfig,
    cores: u32,
    traced: bool,
    cache_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(Model, ModelOrigin), RtlError> {
    let key = (cfg.to_json(), cores, traced);
    // One build at a time in this process (a build uses every CPU anyway); other processes
    // are kept apart by hdl's file locks.
    let mut map = protos().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = map.get(&key) {
        let m = p.model.lock().unwrap_or_else(|e| e.into_inner());
        return Ok((m.new_instance(), p.origin.clone()));
    }
    let g = if cores == 1 {
        vta_hw::generate(cfg)?
    } else {
        vta_hw::multicore::generate(cfg, cores)?
    };
    // `Accelerator::cycle` samples the outputs without evaluating the cycle's inputs.
    if !g.design.top().outputs_registered() {
        return Err(RtlError::Harness(format!(
            "an output of {} for {cfg} depends combinationally on an input, and the \
             harness samples the outputs before it evaluates the inputs; please report it",
            g.design.top().name()
        )));
    }
    let linked = if traced || cores != 1 {
        None
    } else {
        from_linked(cfg, &g.design)
    };
    let (model, origin) = match linked {
        Some(m) => (m?, ModelOrigin::Linked),
        None => {
            let t = Instant::now();
            let mut built = false;
            let opts = BuildOptions {
                trace: traced,
                jobs: None,
            };
            let m = Model::build_with(&g.design, cache_dir, &opts, &mut |s| {
                if s.starts_with("verilating") {
                    built = true;
                }
                progress(s)
            })?;
            let path = m.library_path().to_path_buf();
            let origin = if built {
                ModelOrigin::Built(path, t.elapsed())
            } else {
                ModelOrigin::Cached(path)
            };
            (m, origin)
        }
    };
    let inst = model.new_instance();
    map.insert(
        key,
        Arc::new(Prototype {
            model: Mutex::new(model),
            origin: origin.clone(),
        }),
    );
    Ok((inst, origin))
}
