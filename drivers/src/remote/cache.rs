//! The server's cache of uploaded blobs, keyed by content hash and length: bounded in bytes,
//! least recently used first out, so a model's weights cross the network once per server.

use std::collections::HashMap;
use std::sync::Arc;

/// A blob and when it was last used.
type Entry = (Arc<Vec<u8>>, u64);

/// Blobs by (FNV-1a hash, length), holding at most `capacity` bytes.
#[derive(Debug)]
pub struct BlobCache {
    capacity: u64,
    held: u64,
    blobs: HashMap<(u64, u64), Entry>,
    clock: u64,
}

impl BlobCache {
    pub fn new(capacity: u64) -> Self {
        BlobCache {
            capacity,
            held: 0,
            blobs: HashMap::new(),
            clock: 0,
        }
    }

    /// Bytes held.
    pub fn held(&self) -> u64 {
        self.held
    }

    pub fn len(&self) -> usize {
        self.blobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
    }

    /// The blob with this hash and length, marked as just used.
    pub fn get(&mut self, hash: u64, len: u64) -> Option<Arc<Vec<u8>>> {
        self.clock += 1;
        let e = self.blobs.get_mut(&(hash, len))?;
        e.1 = self.clock;
        Some(e.0.clone())
    }

    /// Keeps `blob` (whose hash is `hash`), dropping the least recently used blobs to make
    /// room; a blob larger than the whole cache is not kept.
    pub fn insert(&mut self, hash: u64, blob: Vec<u8>) {
        let len = blob.len() as u64;
        if len > self.capacity || self.get(hash, len).is_some() {
            return;
        }
        while self.held + len > self.capacity {
            let oldest = *self
                .blobs
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k)
                .expect("held bytes belong to some blob");
            self.held -= oldest.1;
            self.blobs.remove(&oldest);
        }
        self.clock += 1;
        self.held += len;
        self.blobs.insert((hash, len), (Arc::new(blob), self.clock));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_recently_used_blobs_go_first_and_bytes_stay_bounded() {
        let mut c = BlobCache::new(300);
        c.insert(1, vec![1; 100]);
        c.insert(2, vec![2; 100]);
        c.insert(3, vec![3; 100]);
        assert_eq!(c.held(), 300);
        assert!(c.get(1, 100).is_some(), "1 is now the most recent");
        c.insert(4, vec![4; 150]);
        assert!(c.get(2, 100).is_none() && c.get(3, 100).is_none());
        assert_eq!(*c.get(1, 100).unwrap(), vec![1; 100]);
        assert_eq!(c.held(), 250);
        assert_eq!(c.len(), 2);
        c.insert(5, vec![5; 301]);
        assert!(c.get(5, 301).is_none(), "larger than the whole cache");
        assert!(c.get(1, 99).is_none(), "the length is part of the key");
    }
}
