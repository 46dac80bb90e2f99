//! `backend="board"`: the accelerator in a Zynq board's fabric, from the Python package on
//! the board (PYNQ-Z1/Z2, Ultra96, ZCU104, KV260). [`PyBoardOptions`] (`vta.BoardOptions`)
//! holds where the accelerator's registers and DMA buffer are, with the board binary's
//! defaults and options (`vta-board run --uio/--base/--hwh/--instance/--udmabuf/--root`);
//! the device is the board binary's, `drivers::board::BoardDevice`.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::{BackendError, Opener};

/// Where a board's accelerator is: `vta.BoardOptions(root="/", uio=None, base=None,
/// hwh=None, instance="vta_0", udmabuf="udmabuf0", timeout=10.0)`.
///
/// The registers are `/dev/uio{uio}` (default `/dev/uio0`), or `/dev/mem` at `base` (the
/// accelerator's s_axi_control address), or at the base address of cell `instance` in
/// Vivado's `.hwh` file `hwh`; the memory is the u-dma-buf buffer `udmabuf`; `root` prefixes
/// /dev and /sys (a chroot, or an emulated board); `timeout` bounds each launch, in seconds.
/// These are `vta-board run`'s options, with its defaults.
#[pyclass(frozen, module = "vta", name = "BoardOptions")]
#[derive(Clone)]
pub(crate) struct PyBoardOptions {
    #[pyo3(get)]
    root: PathBuf,
    #[pyo3(get)]
    uio: Option<u32>,
    #[pyo3(get)]
    base: Option<u64>,
    #[pyo3(get)]
    hwh: Option<PathBuf>,
    #[pyo3(get)]
    instance: String,
    #[pyo3(get)]
    udmabuf: String,
    #[pyo3(get)]
    timeout: f64,
}

impl Default for PyBoardOptions {
    fn default() -> Self {
        PyBoardOptions {
            root: PathBuf::from("/"),
            uio: None,
            base: None,
            hwh: None,
            instance: "vta_0".into(),
            udmabuf: "udmabuf0".into(),
            timeout: 10.0,
        }
    }
}

#[pymethods]
impl PyBoardOptions {
    #[new]
    #[pyo3(signature = (root = PathBuf::from("/"), uio = None, base = None, hwh = None,
        instance = "vta_0".to_string(), udmabuf = "udmabuf0".to_string(), timeout = 10.0))]
    fn new(
        root: PathBuf,
        uio: Option<u32>,
        base: Option<&Bound<'_, PyAny>>,
        hwh: Option<PathBuf>,
        instance: String,
        udmabuf: String,
        timeout: f64,
    ) -> PyResult<Self> {
        let base = base.map(parse_base).transpose()?;
        let given: Vec<&str> = [
            ("uio", uio.is_some()),
            ("base", base.is_some()),
            ("hwh", hwh.is_some()),
        ]
        .into_iter()
        .filter(|g| g.1)
        .map(|g| g.0)
        .collect();
        if given.len() > 1 {
            return Err(BackendError::new_err(format!(
                "BoardOptions: give one of uio, base and hwh (where the registers are), not {}",
                given.join(" and ")
            )));
        }
        if !(timeout > 0.0 && timeout.is_finite()) {
            return Err(BackendError::new_err(format!(
                "BoardOptions: timeout={timeout}: give a positive number of seconds"
            )));
        }
        if udmabuf.is_empty() || udmabuf.contains('/') {
            return Err(BackendError::new_err(format!(
                "BoardOptions: udmabuf={udmabuf:?}: give the buffer's name, e.g. \"udmabuf0\" \
                 (its device is /dev/udmabuf0)"
            )));
        }
        Ok(PyBoardOptions {
            root,
            uio,
            base,
            hwh,
            instance,
            udmabuf,
            timeout,
        })
    }

    fn __repr__(&self) -> String {
        let regs = match (&self.hwh, self.base) {
            (Some(h), _) => format!(
                "hwh={:?}, instance={:?}",
                h.display().to_string(),
                self.instance
            ),
            (None, Some(b)) => format!("base=0x{b:x}"),
            (None, None) => format!("uio={}", self.uio.unwrap_or(0)),
        };
        format!(
            "vta.BoardOptions(root={:?}, {regs}, udmabuf={:?}, timeout={})",
            self.root.display().to_string(),
            self.udmabuf,
            self.timeout
        )
    }
}

/// `base` as an int or a hex string ("0x43C00000", as the .hwh and `vta-board --base` write it).
fn parse_base(v: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(n) = v.extract::<u64>() {
        return Ok(n);
    }
    let bad = || {
        BackendError::new_err(format!(
            "BoardOptions: base={}: give the registers' physical address as an int or a hex \
             string such as \"0x43C00000\"",
            v.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    let s: String = v.extract().map_err(|_| bad())?;
    let h = s.trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(h, 16).map_err(|_| bad())
}

impl PyBoardOptions {
    /// Opens the board device for a run's config (the .hwh is read now, so a bad one fails
    /// before the run).
    #[cfg(target_os = "linux")]
    pub(crate) fn opener(&self) -> PyResult<Opener> {
        use drivers::board::{BoardDevice, BoardOptions, BoardPaths, RegisterWindow};
        use std::time::Duration;
        let registers = match (&self.hwh, self.base) {
            (Some(path), _) => {
                let h = bitstreams::hwh::read_file(path)
                    .map_err(|e| BackendError::new_err(crate::chain(&e)))?;
                let (base, _) = h.registers(&self.instance).ok_or_else(|| {
                    BackendError::new_err(format!(
                        "{}: no register window of cell '{}': give BoardOptions(instance=...) \
                         the accelerator's cell in the block design",
                        path.display(),
                        self.instance
                    ))
                })?;
                RegisterWindow::DevMem(base)
            }
            (None, Some(base)) => RegisterWindow::DevMem(base),
            (None, None) => RegisterWindow::Uio(self.uio.unwrap_or(0)),
        };
        let opts = BoardOptions {
            paths: BoardPaths::at(&self.root),
            registers,
            udmabuf: self.udmabuf.clone(),
            default_wall: Duration::from_secs_f64(self.timeout),
            ..BoardOptions::default()
        };
        Ok(Box::new(move |cfg, _check| {
            BoardDevice::open(cfg, &opts)
                .map(|d| Box::new(d) as Box<dyn drivers::Device>)
                .map_err(|e| BackendError::new_err(crate::chain(&e)))
        }))
    }

    /// The board device is Linux's (UIO, /dev/mem, u-dma-buf).
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn opener(&self) -> PyResult<Opener> {
        Err(BackendError::new_err(
            "backend=\"board\" runs on a Zynq board's Linux (UIO, /dev/mem and u-dma-buf); \
             this is not Linux",
        ))
    }
}
