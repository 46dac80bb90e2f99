//! Progress on stderr for work that can take more than a moment (compiling, running on the RTL
//! simulator, checking against the integer reference): a bar or a spinner with the current
//! step, drawn only when stderr is a terminal, so scripts and pipes get clean output.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// One progress display; cleared when finished or dropped.
pub struct Progress(ProgressBar);

impl Progress {
    /// A spinner with elapsed time, for work of unknown length.
    pub fn spinner(what: &str) -> Progress {
        let p = ProgressBar::new_spinner();
        p.set_style(
            ProgressStyle::with_template("{spinner} {prefix} [{elapsed}] {msg}")
                .expect("valid template"),
        );
        p.set_prefix(what.to_string());
        p.enable_steady_tick(Duration::from_millis(120));
        Progress(p)
    }

    /// A bar of `len` units with elapsed time and ETA.
    pub fn bar(what: &str, len: u64) -> Progress {
        let p = ProgressBar::new(len);
        p.set_style(
            ProgressStyle::with_template(
                "{prefix} [{elapsed}] {bar:30} {pos}/{len} (ETA {eta}) {msg}",
            )
            .expect("valid template"),
        );
        p.set_prefix(what.to_string());
        Progress(p)
    }

    pub fn message(&self, m: &str) {
        self.0.set_message(m.to_string());
    }

    pub fn inc(&self) {
        self.0.inc(1);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}
