//! The on-disk cache that makes a sweep resumable: one JSON file per result, written
//! atomically (a temporary file renamed into place), so parallel jobs and interrupted runs
//! never leave a torn entry; an unreadable entry counts as missing and is rewritten.
//!
//! Layout under the root (`$VTA_CACHE_DIR`, else `$XDG_CACHE_HOME/vta`, else `~/.cache/vta`):
//!
//! * `fit/<rtl hash>-<family>.json`: a resource estimate, the document `vta hw report --json`
//!   prints; the same files `vta hw bitstream`'s fit pre-check reads and writes, so either
//!   command reuses the other's synthesis. The key is the generated Verilog's hash: an
//!   estimate is reused exactly as long as the hardware is the same.
//! * `dse/cycles/<network>-<key>.json`: a config's cycle count for a network, keyed by the
//!   network's hash, the config, the cycle source and the build of the toolkit doing the
//!   measuring ([`build_id`]: a new compiler or cycle model measures again).
//! * `dse/rtl/<network>-<key>.json`: the RTL simulator's cycle count, also keyed by what it
//!   depends on alone (the compiled model's bytes, the Verilog's hash, the memory timing), so
//!   another build that compiles the same programs for the same hardware reuses it.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// A cache rooted at a directory (created on first write).
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

/// A cache entry that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the cache entry {path}: {source}")]
pub struct CacheError {
    pub path: String,
    pub source: std::io::Error,
}

impl Cache {
    pub fn new(root: impl Into<PathBuf>) -> Cache {
        Cache { root: root.into() }
    }

    /// `$VTA_CACHE_DIR`, else `$XDG_CACHE_HOME/vta`, else `~/.cache/vta` (what `vta hw
    /// bitstream` uses); `None` without any of them.
    pub fn default_root() -> Option<PathBuf> {
        bitstreams::cache_dir()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file of entry `key` (a relative path such as `fit/0123-xc7.json`).
    pub fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    /// Entry `key`, if it is there and is JSON.
    pub fn get(&self, key: &str) -> Option<Value> {
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes entry `key` atomically.
    pub fn put(&self, key: &str, value: &Value) -> Result<(), CacheError> {
        let path = self.path(key);
        let err = |source| CacheError {
            path: path.display().to_string(),
            source,
        };
        let dir = path.parent().expect("a cache key is a relative file path");
        std::fs::create_dir_all(dir).map_err(err)?;
        // Unique per host, process and thread (shards on several machines may share the
        // cache over NFS): concurrent writers of one key each rename a whole file of their
        // own into place.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let tmp = dir.join(format!(
            ".{}.{}.{}.{:?}.tmp",
            path.file_name().expect("a file name").to_string_lossy(),
            host.trim(),
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&tmp, format!("{value:#}\n")).map_err(err)?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(e)
        })
    }
}

/// Identifies the running build of the toolkit (its executable's size and modification time,
/// hashed): cycle counts measured by another build are not reused, since its compiler or
/// cycle model may differ.
pub fn build_id() -> String {
    let stamp = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}:{modified}", m.len())
        })
        .unwrap_or_default();
    format!(
        "{:016x}",
        isa::container::fnv1a(format!("{}:{stamp}", env!("CARGO_PKG_VERSION")).as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_torn_one_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().join("c"));
        assert_eq!(cache.get("fit/a-xc7.json"), None);
        let v = serde_json::json!({"luts": 5, "bram36": 1.5});
        cache.put("fit/a-xc7.json", &v).unwrap();
        assert_eq!(cache.get("fit/a-xc7.json"), Some(v.clone()));
        // Overwriting replaces; no temporary files are left behind.
        let w = serde_json::json!({"luts": 6});
        cache.put("fit/a-xc7.json", &w).unwrap();
        assert_eq!(cache.get("fit/a-xc7.json"), Some(w));
        let names: Vec<_> = std::fs::read_dir(dir.path().join("c/fit"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["a-xc7.json"]);
        // A truncated file is a miss, not an error.
        std::fs::write(cache.path("fit/a-xc7.json"), "{\"luts\": ").unwrap();
        assert_eq!(cache.get("fit/a-xc7.json"), None);
    }

    #[test]
    fn an_unwritable_root_names_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "").unwrap();
        let e = Cache::new(&file)
            .put("dse/x.json", &serde_json::json!(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot write the cache entry") && e.contains("x.json"),
            "{e}"
        );
    }

    #[test]
    fn the_build_id_is_stable_within_a_build() {
        assert_eq!(build_id(), build_id());
        assert_eq!(build_id().len(), 16);
    }
}
