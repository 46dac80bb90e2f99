//! A loaded model and its safe API ([`Model`]): loading the library and its shim functions,
//! port handles, setting and reading ports through the model's memory, evaluation, clock
//! ticks and VCD traces.

use super::*;

/// Port handle of a [`Model`]: the port's index in the top module's port list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortId(pub usize);

type FnNew = unsafe extern "C" fn() -> *mut c_void;
type FnFree = unsafe extern "C" fn(*mut c_void);
type FnEval = unsafe extern "C" fn(*mut c_void);
type FnTick = unsafe extern "C" fn(*mut c_void, u64);
type FnPortPtr = unsafe extern "C" fn(*mut c_void, u32) -> *mut c_void;
type FnTraceOpen = unsafe extern "C" fn(*mut c_void, *const c_char, u64) -> c_int;
type FnTraceClose = unsafe extern "C" fn(*mut c_void);

#[derive(Clone, Copy)]
struct Fns {
    new: FnNew,
    free: FnFree,
    eval: FnEval,
    tick: FnTick,
    port_ptr: FnPortPtr,
    trace_open: FnTraceOpen,
    trace_close: FnTraceClose,
}

/// The C functions of a shim ([`shim_cpp`]) linked into the program, for a model compiled
/// ahead of time (typically by a build script, with its symbols renamed so that several
/// models can be linked) rather than loaded from the cache: see [`Model::from_static`].
#[derive(Clone, Copy, Debug)]
pub struct StaticShim {
    /// `hdl_abi_version`.
    pub abi_version: unsafe extern "C" fn() -> u32,
    /// `hdl_port_count`.
    pub port_count: unsafe extern "C" fn() -> u32,
    /// `hdl_new`.
    pub new: unsafe extern "C" fn() -> *mut c_void,
    /// `hdl_free`.
    pub free: unsafe extern "C" fn(*mut c_void),
    /// `hdl_eval`.
    pub eval: unsafe extern "C" fn(*mut c_void),
    /// `hdl_tick`.
    pub tick: unsafe extern "C" fn(*mut c_void, u64),
    /// `hdl_port_ptr`.
    pub port_ptr: unsafe extern "C" fn(*mut c_void, u32) -> *mut c_void,
    /// `hdl_trace_open`.
    pub trace_open: unsafe extern "C" fn(*mut c_void, *const c_char, u64) -> c_int,
    /// `hdl_trace_close`.
    pub trace_close: unsafe extern "C" fn(*mut c_void),
}

/// A compiled, loaded library; shared by all instances made from it.
struct Library {
    /// The loaded shared library; `None` for a model linked into the program
    /// ([`Model::from_static`]).
    _lib: Option<libloading::Library>,
    fns: Fns,
    path: PathBuf,
    ports: Vec<PortInfo>,
    by_name: HashMap<String, usize>,
    clock: Option<usize>,
    reset: Option<(usize, bool)>,
    traced: bool,
}

/// A running Verilator simulation of a design's top module.
///
/// Drive inputs with [`set`](Model::set) / [`set_wide`](Model::set_wide), propagate
/// combinational logic with [`eval`](Model::eval), read outputs with [`get`](Model::get) /
/// [`get_wide`](Model::get_wide), and advance the clock with [`tick`](Model::tick). A
/// typical cycle: set inputs, `eval()`, read outputs (including ready signals that depend on
/// the inputs just set), decide, `tick()`.
///
/// Misuse (an unknown port name, setting an output, a value wider than the port) panics
/// with a message naming the port: it is a bug in the test bench.
pub struct Model {
    lib: Arc<Library>,
    handle: *mut c_void,
    /// Each port's storage and what the per-cycle accessors check, by port index.
    slots: Vec<Slot>,
    cycles: u64,
}

/// A port's storage in the live model, with its width and direction, so that a port access
/// checks and writes without going through the port table.
#[derive(Clone, Copy)]
struct Slot {
    ptr: *mut u8,
    storage: Storage,
    width: u32,
    input: bool,
}

// SAFETY: a Verilated model has no thread affinity; `Model` owns its instance exclusively
// and all access goes through `&mut self` (or `&self` reads of port storage), so moving it
// to another thread is sound. It is not `Sync`.
unsafe impl Send for Model {}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("library", &self.lib.path)
            .field("cycles", &self.cycles)
            .finish()
    }
}

impl Model {
    /// Builds (or finds in `cache_dir`) the simulation library of `design`'s top module and
    /// creates one instance of it. `progress` receives each stage: `generating`,
    /// `verilating`, `compiling (N files)`, `linking`, `loading`, or `cached`.
    pub fn build(
        design: &Design,
        cache_dir: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Model, BuildError> {
        Model::build_with(design, cache_dir, &BuildOptions::default(), progress)
    }

    /// [`build`](Model::build) with options (tracing, parallel jobs).
    pub fn build_with(
        design: &Design,
        cache_dir: &Path,
        opts: &BuildOptions,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Model, BuildError> {
        progress("generating");
        let (verilog, wrapper) = sim_verilog(design);
        let shim = shim_cpp(design);
        let t = tools()?;
        let flags = cxx_flags(&t, opts.trace);
        // The runtime does not depend on VM_TRACE (it only sets a legacy macro), so traced
        // and untraced models share one compiled runtime.
        let rt_flags = cxx_flags(&t, false);
        let vargs = verilator_args(&wrapper, opts.trace);
        let jobs = opts.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        });
        fs::create_dir_all(cache_dir).map_err(io_err("creating cache directory", cache_dir))?;

        let runtime_key = cache_key(&[
            t.verilator_version.as_bytes(),
            t.verilator_root.to_string_lossy().as_bytes(),
            t.cxx.as_bytes(),
            t.cxx_version.as_bytes(),
            rt_flags.join(" ").as_bytes(),
        ]);
        let model_key = cache_key(&[
            runtime_key.as_bytes(),
            flags.join(" ").as_bytes(),
            vargs.join(" ").as_bytes(),
            verilog.as_bytes(),
            shim.as_bytes(),
            sim_prelude().as_bytes(),
            &ABI_VERSION.to_le_bytes(),
        ]);
        let model_dir = cache_dir.join(format!("model-{}", &model_key[..24]));
        let lib_path = model_dir.join("lib.so");
        if lib_path.exists() {
            progress("cached");
        } else {
            let _lock =
                FileLock::acquire(&cache_dir.join(format!("model-{}.lock", &model_key[..24])))?;
            if lib_path.exists() {
                progress("cached");
            } else {
                build_library(
                    &t,
                    cache_dir,
                    &runtime_key,
                    &model_dir,
                    &verilog,
                    &shim,
                    &flags,
                    &rt_flags,
                    &vargs,
                    opts.trace,
                    jobs,
                    progress,
                )?;
            }
        }
        progress("loading");
        let lib = load(&lib_path, design, opts.trace)?;
        Ok(Model::instantiate(Arc::new(lib)))
    }

    fn instantiate(lib: Arc<Library>) -> Model {
        // SAFETY: `new` is the shim's constructor; it returns an owned, valid model.
        let handle = unsafe { (lib.fns.new)() };
        assert!(
            !handle.is_null(),
            "the simulation model could not be created"
        );
        let slots = lib
            .ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                // SAFETY: the handle is valid and `i` is a port index of this library.
                let ptr = unsafe { (lib.fns.port_ptr)(handle, i as u32) } as *mut u8;
                assert!(!ptr.is_null(), "no storage for port {i}");
                Slot {
                    ptr,
                    storage: storage(port.width),
                    width: port.width,
                    input: port.dir == Dir::Input,
                }
            })
            .collect();
        Model {
            lib,
            handle,
            slots,
            cycles: 0,
        }
    }

    /// An instance of a model linked into the program instead of built and loaded from a
    /// cache: `shim` holds the functions of [`shim_cpp`]`(design)`, compiled together with
    /// the C++ that Verilator generated from [`sim_verilog`]`(design)` (with
    /// [`verilator_args`]); `traced` says whether that was done with `--trace` and
    /// `VM_TRACE=1`; `name` stands for the library path in messages. The ABI version and the
    /// port count are checked, as for a loaded library.
    ///
    /// # Safety
    ///
    /// The functions must come from exactly that compilation of exactly this design (the
    /// port table is taken from `design`, and port storage is accessed through it).
    pub unsafe fn from_static(
        design: &Design,
        shim: StaticShim,
        traced: bool,
        name: &str,
    ) -> Result<Model, BuildError> {
        let path = PathBuf::from(name);
        // SAFETY: plain functions without arguments (the caller vouches for them).
        let (abi, count) = unsafe { ((shim.abi_version)(), (shim.port_count)()) };
        let ports = design.top().ports().to_vec();
        if abi != ABI_VERSION || count as usize != ports.len() {
            return Err(BuildError::BadLibrary {
                path,
                reason: format!(
                    "ABI {abi} with {count} ports, expected ABI {ABI_VERSION} with {} ports",
                    ports.len()
                ),
            });
        }
        let fns = Fns {
            new: shim.new,
            free: shim.free,
            eval: shim.eval,
            tick: shim.tick,
            port_ptr: shim.port_ptr,
            trace_open: shim.trace_open,
            trace_close: shim.trace_close,
        };
        Ok(Model::instantiate(Arc::new(library(
            None, fns, path, ports, traced,
        ))))
    }

    /// Another, independent instance of the same compiled design (in its initial state).
    pub fn new_instance(&self) -> Model {
        Model::instantiate(self.lib.clone())
    }

    /// The path of the loaded library (inside the cache directory).
    pub fn library_path(&self) -> &Path {
        &self.lib.path
    }

    /// The top module's ports; a port's position is its [`PortId`].
    pub fn ports(&self) -> &[PortInfo] {
        &self.lib.ports
    }

    /// The port called `name`; panics with the list of ports if there is none.
    #[track_caller]
    pub fn port(&self, name: &str) -> PortId {
        match self.try_port(name) {
            Some(p) => p,
            None => {
                let names: Vec<&str> = self.lib.ports.iter().map(|p| p.name.as_str()).collect();
                panic!(
                    "the simulated module has no port `{name}`; its ports: {}",
                    names.join(", ")
                )
            }
        }
    }

    /// The port called `name`, if any.
    pub fn try_port(&self, name: &str) -> Option<PortId> {
        self.lib.by_name.get(name).map(|&i| PortId(i))
    }

    /// Information about a port.
    #[track_caller]
    #[inline]
    pub fn info(&self, port: PortId) -> &PortInfo {
        match self.lib.ports.get(port.0) {
            Some(p) => p,
            None => self.out_of_range(port),
        }
    }

    #[cold]
    #[track_caller]
    fn out_of_range(&self, port: PortId) -> ! {
        panic!(
            "port index {} is out of range: the module has {} ports",
            port.0,
            self.lib.ports.len()
        )
    }

    /// The slot of `port` (panics for an index out of range).
    #[track_caller]
    #[inline]
    fn slot(&self, port: PortId) -> Slot {
        match self.slots.get(port.0) {
            Some(&s) => s,
            None => self.out_of_range(port),
        }
    }

    #[track_caller]
    #[inline]
    fn writable(&self, port: PortId) -> Slot {
        let s = self.slot(port);
        if !s.input {
            self.not_an_input(port);
        }
        s
    }

    #[cold]
    #[track_caller]
    fn not_an_input(&self, port: PortId) -> ! {
        panic!("cannot set `{}`: it is an output", self.info(port).name)
    }

    #[cold]
    #[track_caller]
    fn bad_value(&self, port: PortId, value: u64) -> ! {
        let p = self.info(port);
        if p.width > 64 {
            panic!("`{}` is {} bits wide: use set_wide", p.name, p.width);
        }
        panic!(
            "value {value:#x} does not fit in `{}` ({} bits)",
            p.name, p.width
        );
    }

    /// Sets input `port` (at most 64 bits wide) to `value`; panics if `value` does not fit.
    /// Takes effect in the next [`eval`](Model::eval) or [`tick`](Model::tick).
    #[track_caller]
    #[inline]
    pub fn set(&mut self, port: PortId, value: u64) {
        let s = self.writable(port);
        if s.width > 64 || (s.width < 64 && value >> s.width != 0) {
            self.bad_value(port, value);
        }
        // SAFETY: `ptr` points to the port's storage inside the live model, whose C++ type
        // is given by `storage(width)`; the model is not running concurrently (&mut self).
        unsafe {
            match s.storage {
                Storage::U8 => *s.ptr = value as u8,
                Storage::U16 => *(s.ptr as *mut u16) = value as u16,
                Storage::U32 => *(s.ptr as *mut u32) = value as u32,
                Storage::U64 => *(s.ptr as *mut u64) = value,
                Storage::Wide(_) => unreachable!("checked above"),
            }
        }
    }

    /// Sets a signed input from an `i64` (two's complement, must fit the port's range).
    #[track_caller]
    pub fn set_signed(&mut self, port: PortId, value: i64) {
        let w = self.info(port).width;
        if w < 64 {
            let (min, max) = (-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1);
            if value < min || value > max {
                panic!(
                    "value {value} does not fit in `{}` ({w}-bit signed)",
                    self.info(port).name
                );
            }
            self.set(port, (value as u64) & ((1u64 << w) - 1));
        } else {
            self.set(port, value as u64);
        }
    }

    /// Sets input `port` of any width from little-endian 32-bit words. Missing high words
    /// are zero; bits above the port's width must be zero.
    #[track_caller]
    pub fn set_wide(&mut self, port: PortId, words: &[u32]) {
        let s = self.writable(port);
        let width = s.width;
        let n = width.div_ceil(32) as usize;
        if words.len() > n {
            let p = self.info(port);
            panic!(
                "{} words given for `{}`, which is {} bits ({n} words)",
                words.len(),
                p.name,
                p.width
            );
        }
        // Missing high words are zero (no allocation: this runs every simulated cycle).
        let word = |i: usize| words.get(i).copied().unwrap_or(0);
        let rem = width % 32;
        if rem != 0 && word(n - 1) >> rem != 0 {
            let p = self.info(port);
            panic!("value does not fit in `{}` ({} bits)", p.name, p.width);
        }
        match s.storage {
            Storage::Wide(k) => {
                let ptr = s.ptr as *mut u32;
                for i in 0..k {
                    // SAFETY: a VlWide<k> port is k contiguous 32-bit words.
                    unsafe { *ptr.add(i) = word(i) };
                }
            }
            _ => {
                let v = word(0) as u64 | (word(1) as u64) << 32;
                self.set(port, v);
            }
        }
    }

    /// The value of `port` (at most 64 bits wide) after the last `eval`/`tick`.
    #[track_caller]
    #[inline]
    pub fn get(&self, port: PortId) -> u64 {
        let s = self.slot(port);
        // SAFETY: as in `set`; reading the port's storage.
        unsafe {
            match s.storage {
                Storage::U8 => *s.ptr as u64,
                Storage::U16 => *(s.ptr as *const u16) as u64,
                Storage::U32 => *(s.ptr as *const u32) as u64,
                Storage::U64 => *(s.ptr as *const u64),
                Storage::Wide(_) => self.too_wide(port),
            }
        }
    }

    #[cold]
    #[track_caller]
    fn too_wide(&self, port: PortId) -> ! {
        let p = self.info(port);
        panic!("`{}` is {} bits wide: use get_wide", p.name, p.width)
    }

    /// A 1-bit port as a bool.
    #[track_caller]
    #[inline]
    pub fn get_bool(&self, port: PortId) -> bool {
        self.get(port) != 0
    }

    /// The value of a port (at most 64 bits) sign-extended from its width.
    #[track_caller]
    pub fn get_signed(&self, port: PortId) -> i64 {
        let w = self.info(port).width;
        let v = self.get(port);
        if w >= 64 {
            v as i64
        } else {
            ((v << (64 - w)) as i64) >> (64 - w)
        }
    }

    /// The value of `port` of any width as little-endian 32-bit words.
    #[track_caller]
    pub fn get_wide(&self, port: PortId) -> Vec<u32> {
        let n = self.info(port).width.div_ceil(32) as usize;
        let mut out = vec![0; n];
        self.get_wide_into(port, &mut out);
        out
    }

    /// Like [`get_wide`](Model::get_wide), into a caller buffer of exactly the port's word
    /// count.
    #[track_caller]
    pub fn get_wide_into(&self, port: PortId, out: &mut [u32]) {
        let s = self.slot(port);
        let n = s.width.div_ceil(32) as usize;
        if out.len() != n {
            let p = self.info(port);
            panic!("`{}` is {} words; got a buffer of {}", p.name, n, out.len());
        }
        match s.storage {
            Storage::Wide(_) => {
                let ptr = s.ptr as *const u32;
                for (i, o) in out.iter_mut().enumerate() {
                    // SAFETY: a VlWide<n> port is n contiguous 32-bit words.
                    *o = unsafe { *ptr.add(i) };
                }
            }
            _ => {
                let v = self.get(port);
                out[0] = v as u32;
                if n > 1 {
                    out[1] = (v >> 32) as u32;
                }
            }
        }
    }

    /// Propagates combinational logic after inputs changed.
    #[inline]
    pub fn eval(&mut self) {
        // SAFETY: valid handle, exclusive access.
        unsafe { (self.lib.fns.eval)(self.handle) }
    }

    /// One clock cycle: clock low, then high (registers update on the rising edge; the
    /// logic that depends on the inputs is evaluated with it). Without a waveform being
    /// written that is one evaluation, the falling edge being only noted (nothing acts on
    /// it; see the shim); with one, each edge is evaluated and recorded. Panics if the
    /// module has no clock.
    #[track_caller]
    #[inline]
    pub fn tick(&mut self) {
        self.ticks(1)
    }

    /// `n` clock cycles with the inputs unchanged.
    #[track_caller]
    #[inline]
    pub fn ticks(&mut self, n: u64) {
        if self.lib.clock.is_none() {
            panic!("the simulated module has no clock (it has no registers or memories)");
        }
        // SAFETY: valid handle, exclusive access.
        unsafe { (self.lib.fns.tick)(self.handle, n) }
        self.cycles += n;
    }

    /// Clock cycles simulated so far.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// Holds the reset active for `cycles` clock cycles, then releases it and evaluates.
    /// Does nothing if the module has no reset (it is then only ticked).
    pub fn reset(&mut self, cycles: u64) {
        match self.lib.reset {
            Some((i, active_low)) => {
                self.set(PortId(i), if active_low { 0 } else { 1 });
                self.ticks(cycles);
                self.set(PortId(i), if active_low { 1 } else { 0 });
                self.eval();
            }
            None => {
                if self.lib.clock.is_some() {
                    self.ticks(cycles);
                }
            }
        }
    }

    /// Starts writing a VCD waveform to `path` (every half clock cycle), in picoseconds at a
    /// clock of `clock_mhz`, so that waveform viewers show real time. Needs a model built
    /// with [`BuildOptions::trace`].
    pub fn trace_open(&mut self, path: &Path, clock_mhz: f64) -> Result<(), BuildError> {
        if !self.lib.traced {
            return Err(BuildError::BadLibrary {
                path: self.lib.path.clone(),
                reason: "it was built without tracing (set BuildOptions::trace)".into(),
            });
        }
        let c = CString::new(path.to_string_lossy().as_bytes()).map_err(|_| BuildError::Io {
            what: "opening trace file",
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"),
        })?;
        let half_period_ps = (0.5e6 / clock_mhz).round().max(1.0) as u64;
        // SAFETY: valid handle; `c` outlives the call.
        let ok = unsafe { (self.lib.fns.trace_open)(self.handle, c.as_ptr(), half_period_ps) };
        if ok == 0 {
            return Err(BuildError::Io {
                what: "opening trace file",
                path: path.to_path_buf(),
                source: io::Error::other("the VCD writer could not open it"),
            });
        }
        Ok(())
    }

    /// Flushes and closes the waveform, if one is open.
    pub fn trace_close(&mut self) {
        // SAFETY: valid handle.
        unsafe { (self.lib.fns.trace_close)(self.handle) }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the handle came from `new` of this library and is freed once.
        unsafe { (self.lib.fns.free)(self.handle) }
    }
}

fn load(path: &Path, design: &Design, traced: bool) -> Result<Library, BuildError> {
    // SAFETY: loading a library we generated and compiled; its initializers are Verilator's
    // and the shim's, which have no side effects beyond static setup.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|source| BuildError::Load {
        path: path.to_path_buf(),
        source,
    })?;
    macro_rules! sym {
        ($name:literal, $ty:ty) => {{
            // SAFETY: the shim defines this symbol with exactly this signature.
            let s: libloading::Symbol<$ty> =
                unsafe { lib.get($name) }.map_err(|source| BuildError::Load {
                    path: path.to_path_buf(),
                    source,
                })?;
            *s
        }};
    }
    let abi: unsafe extern "C" fn() -> u32 =
        sym!(b"hdl_abi_version\0", unsafe extern "C" fn() -> u32);
    let count: unsafe extern "C" fn() -> u32 =
        sym!(b"hdl_port_count\0", unsafe extern "C" fn() -> u32);
    // SAFETY: plain functions without arguments.
    let (abi, count) = unsafe { (abi(), count()) };
    let ports = design.top().ports().to_vec();
    if abi != ABI_VERSION || count as usize != ports.len() {
        return Err(BuildError::BadLibrary {
            path: path.to_path_buf(),
            reason: format!(
                "ABI {abi} with {count} ports, expected ABI {ABI_VERSION} with {} ports",
                ports.len()
            ),
        });
    }
    let fns = Fns {
        new: sym!(b"hdl_new\0", FnNew),
        free: sym!(b"hdl_free\0", FnFree),
        eval: sym!(b"hdl_eval\0", FnEval),
        tick: sym!(b"hdl_tick\0", FnTick),
        port_ptr: sym!(b"hdl_port_ptr\0", FnPortPtr),
        trace_open: sym!(b"hdl_trace_open\0", FnTraceOpen),
        trace_close: sym!(b"hdl_trace_close\0", FnTraceClose),
    };
    Ok(library(Some(lib), fns, path.to_path_buf(), ports, traced))
}

fn library(
    lib: Option<libloading::Library>,
    fns: Fns,
    path: PathBuf,
    ports: Vec<PortInfo>,
    traced: bool,
) -> Library {
    let by_name = ports
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), i))
        .collect();
    let clock = ports.iter().position(|p| p.role == PortRole::Clock);
    let reset = ports.iter().enumerate().find_map(|(i, p)| match p.role {
        PortRole::Reset { active_low } => Some((i, active_low)),
        _ => None,
    });
    Library {
        _lib: lib,
        fns,
        path,
        ports,
        by_name,
        clock,
        reset,
        traced,
    }
}
