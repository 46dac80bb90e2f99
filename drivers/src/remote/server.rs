//! The server side: [`serve`] puts one [`Device`] behind a TCP listener. The calling thread
//! owns the device and runs the requests of every connection one at a time, in arrival order;
//! each connection has a thread of its own that reads and checks its frames, keeps the buffers
//! it allocated (and frees them when it goes away), and answers. Connections beyond
//! `max_clients` wait in a bounded queue ([`super::admission`]) for a session to end.

use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use isa::container::fnv1a;

use super::admission::{Admission, Entry};
use super::cache::BlobCache;
use super::wire::{read_frame, write_frame, ErrorMsg, Request, Response, ServerInfo, WireError};
use super::{BUSY, CACHE_MIN_BYTES, PROTOCOL_VERSION};
use crate::{Buffer, Device, DeviceError};

/// A line of the server's log (one per connection and per run).
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// How [`serve`] serves.
#[derive(Clone)]
pub struct ServeOptions {
    /// The shared secret every hello must carry (empty: clients send an empty token).
    pub token: String,
    /// The server's name in its welcome.
    pub server_id: String,
    /// The loaded bitstream's hash, `none` on a simulator.
    pub bitstream: String,
    /// Longest frame body accepted; longer frames close the connection unread.
    pub max_frame: u32,
    /// Bytes of uploaded blobs kept for uploads by hash.
    pub cache_bytes: u64,
    /// Connections served at once; more wait in a queue.
    pub max_clients: usize,
    /// Connections waiting, oldest first, for one of the `max_clients` to end; more are
    /// refused at once with a message.
    pub max_waiting: usize,
    /// Longest wait in that queue before the connection is refused with a message.
    pub queue_timeout: Duration,
    /// Time a new connection has to say hello.
    pub hello_timeout: Duration,
    /// A connection silent this long is closed (and its buffers freed); `None`: never.
    pub idle_timeout: Option<Duration>,
    pub log: Option<Log>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            token: String::new(),
            server_id: "vta".into(),
            bitstream: "none".into(),
            max_frame: super::DEFAULT_MAX_FRAME,
            cache_bytes: 256 << 20,
            max_clients: 8,
            max_waiting: 64,
            queue_timeout: Duration::from_secs(300),
            hello_timeout: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(30 * 60)),
            log: None,
        }
    }
}

/// What a connection thread asks of the device thread.
enum Job {
    Request {
        req: Request,
        /// The FNV-1a hash of a write's data, when it is large enough to be cached.
        hash: Option<u64>,
        reply: Sender<Response>,
    },
    /// Frees a connection's buffers (it said bye, or went away).
    Release { bufs: Vec<Buffer> },
}

/// What every connection thread shares.
struct Shared {
    info: ServerInfo,
    opts: ServeOptions,
    admission: Admission,
}

impl Shared {
    fn log(&self, line: &str) {
        if let Some(log) = &self.opts.log {
            log(line);
        }
    }
}

/// Serves `device` on `listener` until the listener fails and every connection has closed.
/// Requests of all connections run on this thread, one at a time, so the device needs no
/// `Send`; connections are read and answered on threads of their own.
pub fn serve(listener: TcpListener, device: &mut dyn Device, opts: ServeOptions) -> io::Result<()> {
    let cfg = device.config();
    let shared = Arc::new(Shared {
        info: ServerInfo {
            version: PROTOCOL_VERSION,
            server_id: opts.server_id.clone(),
            device: device.name().into(),
            config_string: cfg.config_string(),
            isa_hash: cfg.isa_hash(),
            config_json: cfg.to_json(),
            bitstream: opts.bitstream.clone(),
            max_frame: opts.max_frame,
        },
        admission: Admission::new(opts.max_clients, opts.max_waiting),
        opts,
    });
    let (jobs, queue) = channel();
    let accepting = Arc::clone(&shared);
    thread::Builder::new()
        .name("vta-serve-accept".into())
        .spawn(move || accept(listener, jobs, accepting))?;
    run_jobs(device, queue, shared.opts.cache_bytes);
    Ok(())
}

fn accept(listener: TcpListener, jobs: Sender<Job>, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Out of descriptors and the like: this connection is lost, the server is not.
                shared.log(&format!("accept failed: {e}"));
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "?".into(), |a: SocketAddr| a.to_string());
        let ticket = match shared.admission.enter() {
            Entry::Now => None,
            Entry::Queued(t) => {
                let (active, waiting) = shared.admission.counts();
                shared.log(&format!(
                    "{peer}: waiting, {active} clients connected, {waiting} in the queue"
                ));
                Some(t)
            }
            Entry::Full { active, waiting } => {
                shared.log(&format!(
                    "{peer}: refused, {active} clients and {waiting} waiting"
                ));
                refuse(
                    &stream,
                    format!(
                        "{BUSY} {active} clients connected and {waiting} waiting (the limits); \
                         try again later"
                    ),
                );
                continue;
            }
        };
        let (jobs, shared) = (jobs.clone(), Arc::clone(&shared));
        let spawned = thread::Builder::new()
            .name(format!("vta-serve {peer}"))
            .spawn({
                let shared = Arc::clone(&shared);
                move || {
                    if let Some(t) = ticket {
                        let timeout = shared.opts.queue_timeout;
                        if !shared.admission.wait(t, timeout) {
                            shared.log(&format!("{peer}: refused after {timeout:?} in the queue"));
                            refuse(
                                &stream,
                                format!(
                                    "{BUSY} waited {} s in the queue for one of its {} clients \
                                     to finish; try again later",
                                    timeout.as_secs_f64(),
                                    shared.opts.max_clients
                                ),
                            );
                            return;
                        }
                    }
                    Session::new(&peer, &shared, jobs).serve(stream);
                    shared.admission.leave();
                }
            });
        if let Err(e) = spawned {
            // The closure never ran: give back what enter() took.
            match ticket {
                None => shared.admission.leave(),
                Some(t) => {
                    if shared.admission.wait(t, Duration::ZERO) {
                        shared.admission.leave();
                    }
                }
            }
            shared.log(&format!("cannot start a connection thread: {e}"));
        }
    }
}

/// Tells a connection it is not served, as the answer to its hello.
fn refuse(stream: &TcpStream, message: String) {
    let mut w = BufWriter::new(stream);
    let _ = send(&mut w, &Response::Error(ErrorMsg::protocol(message)));
}

/// The device thread: runs jobs in arrival order until every sender is gone.
fn run_jobs(dev: &mut dyn Device, queue: Receiver<Job>, cache_bytes: u64) {
    let mut cache = BlobCache::new(cache_bytes);
    for job in queue {
        match job {
            Job::Request { req, hash, reply } => {
                let response = execute(dev, &mut cache, req, hash, &reply);
                let _ = reply.send(response);
            }
            Job::Release { bufs } => {
                for b in bufs {
                    // From the connection's own record of what it allocated, so this fails
                    // only on a device bug, and there is no one left to tell.
                    let _ = dev.free(b);
                }
            }
        }
    }
}

fn execute(
    dev: &mut dyn Device,
    cache: &mut BlobCache,
    req: Request,
    hash: Option<u64>,
    reply: &Sender<Response>,
) -> Response {
    let done = |r: Result<(), DeviceError>| match r {
        Ok(()) => Response::Ok,
        Err(e) => Response::Error(ErrorMsg::from_device(&e)),
    };
    let fail = |e: DeviceError| Response::Error(ErrorMsg::from_device(&e));
    match req {
        Request::Alloc { size, align } => {
            dev.alloc(size, align).map_or_else(fail, Response::Buffer)
        }
        Request::Free { buf } => done(dev.free(buf)),
        Request::Write { buf, offset, data } => {
            let r = dev.copy_to_device(&buf, offset, &data);
            if let (Ok(()), Some(hash)) = (&r, hash) {
                cache.insert(hash, data);
            }
            done(r)
        }
        Request::WriteCached {
            buf,
            offset,
            len,
            hash,
        } => match cache.get(hash, len) {
            Some(blob) => match dev.copy_to_device(&buf, offset, &blob) {
                Ok(()) => Response::CacheHit,
                Err(e) => fail(e),
            },
            None => Response::CacheMiss,
        },
        Request::Read { buf, offset, len } => {
            let mut out = vec![0; len as usize];
            match dev.copy_from_device(&buf, offset, &mut out) {
                Ok(()) => Response::Data(out),
                Err(e) => fail(e),
            }
        }
        Request::Flush { buf, offset, size } => done(dev.flush(&buf, offset, size)),
        Request::Invalidate { buf, offset, size } => done(dev.invalidate(&buf, offset, size)),
        Request::Run {
            insn_addr,
            insn_count,
            timeout,
        } => {
            let _ = reply.send(Response::Running);
            dev.run(insn_addr, insn_count, timeout)
                .map_or_else(fail, Response::Report)
        }
        Request::Hello { .. } | Request::Bye => {
            Response::Error(ErrorMsg::protocol("hello and bye are not device requests"))
        }
    }
}

fn send(w: &mut BufWriter<&TcpStream>, r: &Response) -> io::Result<()> {
    write_frame(w, &r.encode())
}

/// One connection: its peer, the buffers it holds, its way to the device thread.
struct Session<'a> {
    peer: &'a str,
    shared: &'a Shared,
    jobs: Sender<Job>,
    owned: HashMap<u64, Buffer>,
}

/// Why a session ends.
enum End {
    Bye,
    Closed,
    /// The client broke the protocol or the connection failed; the text says how.
    Error(String),
}

impl<'a> Session<'a> {
    fn new(peer: &'a str, shared: &'a Shared, jobs: Sender<Job>) -> Self {
        Session {
            peer,
            shared,
            jobs,
            owned: HashMap::new(),
        }
    }

    fn serve(mut self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let mut r = BufReader::new(&stream);
        let mut w = BufWriter::new(&stream);
        let end = match self.hello(&stream, &mut r, &mut w) {
            Ok(()) => {
                let (active, waiting) = self.shared.admission.counts();
                self.shared.log(&format!(
                    "{}: connected (clients: {active}, waiting: {waiting})",
                    self.peer
                ));
                let _ = stream.set_read_timeout(self.shared.opts.idle_timeout);
                self.requests(&mut r, &mut w)
            }
            Err(end) => end,
        };
        if let End::Error(e) = &end {
            // Tell the client why, where the connection still carries it.
            let _ = send(&mut w, &Response::Error(ErrorMsg::protocol(e.clone())));
            linger(&stream);
        }
        let freed = self.owned.len();
        self.release();
        let why = match end {
            End::Bye => "said bye".to_string(),
            End::Closed => "disconnected".to_string(),
            End::Error(e) => format!("closed: {e}"),
        };
        let freed = if freed > 0 {
            format!(" ({freed} buffers it left allocated freed)")
        } else {
            String::new()
        };
        self.shared.log(&format!("{}: {why}{freed}", self.peer));
    }

    fn hello(
        &self,
        stream: &TcpStream,
        r: &mut BufReader<&TcpStream>,
        w: &mut BufWriter<&TcpStream>,
    ) -> Result<(), End> {
        let _ = stream.set_read_timeout(Some(self.shared.opts.hello_timeout));
        let body = read_frame(r, self.shared.opts.max_frame).map_err(|e| frame_end(e, "hello"))?;
        let (version, token) = match Request::decode(&body) {
            Ok(Request::Hello { version, token }) => (version, token),
            Ok(other) => {
                return Err(End::Error(format!(
                    "expected a hello, got a {} request",
                    other.name()
                )))
            }
            Err(e) => return Err(End::Error(e.to_string())),
        };
        if version != PROTOCOL_VERSION {
            return Err(End::Error(format!(
                "the client speaks protocol version {version}, this server version \
                 {PROTOCOL_VERSION}: use the same vta release on both ends"
            )));
        }
        if !same_secret(token.as_bytes(), self.shared.opts.token.as_bytes()) {
            return Err(End::Error(
                "token mismatch: this server requires the token it was started with \
                 (set VTA_REMOTE_TOKEN to it on the client)"
                    .into(),
            ));
        }
        send(w, &Response::Welcome(self.shared.info.clone())).map_err(|e| End::Error(e.to_string()))
    }

    fn requests(&mut self, r: &mut BufReader<&TcpStream>, w: &mut BufWriter<&TcpStream>) -> End {
        loop {
            let body = match read_frame(r, self.shared.opts.max_frame) {
                Ok(b) => b,
                Err(e) => return frame_end(e, "request"),
            };
            let req = match Request::decode(&body) {
                Ok(req) => req,
                Err(e) => return End::Error(e.to_string()),
            };
            if let Request::Bye = req {
                // Queued before the answer, so whatever the client does next (on any
                // connection) finds the buffers freed.
                self.release();
                let _ = send(w, &Response::Ok);
                return End::Bye;
            }
            let started = Instant::now();
            let run = match &req {
                Request::Run { insn_count, .. } => Some(*insn_count),
                _ => None,
            };
            let response = match self.request(req, w) {
                Ok(r) => r,
                Err(end) => return end,
            };
            if let Some(count) = run {
                let outcome = match &response {
                    Response::Report(_) => "done".to_string(),
                    Response::Error(e) => format!("failed: {}", e.message),
                    _ => "?".to_string(),
                };
                self.shared.log(&format!(
                    "{}: run of {count} instructions {outcome} ({:.3} ms with queueing)",
                    self.peer,
                    started.elapsed().as_secs_f64() * 1e3
                ));
            }
            if let Err(e) = send(w, &response) {
                return End::Error(e.to_string());
            }
        }
    }

    /// Frees every buffer this connection holds.
    fn release(&mut self) {
        if !self.owned.is_empty() {
            let bufs = self.owned.drain().map(|(_, b)| b).collect();
            let _ = self.jobs.send(Job::Release { bufs });
        }
    }

    /// Runs one request on the device and gives its final response (a run's `Running` notice
    /// is forwarded on the way).
    fn request(&mut self, req: Request, w: &mut BufWriter<&TcpStream>) -> Result<Response, End> {
        let mut hash = None;
        match &req {
            Request::Hello { .. } => return Err(End::Error("a second hello".into())),
            Request::Free { buf }
            | Request::WriteCached { buf, .. }
            | Request::Read { buf, .. }
            | Request::Flush { buf, .. }
            | Request::Invalidate { buf, .. } => {
                if let Err(refused) = self.check_owned(buf) {
                    return Ok(Response::Error(refused));
                }
            }
            Request::Write { buf, data, .. } => {
                if let Err(refused) = self.check_owned(buf) {
                    return Ok(Response::Error(refused));
                }
                if data.len() as u64 >= CACHE_MIN_BYTES {
                    hash = Some(fnv1a(data));
                }
            }
            Request::Alloc { .. } | Request::Run { .. } | Request::Bye => {}
        }
        if let Request::Read { len, .. } = &req {
            // The answer must fit a frame: tag and length prefix, then the data.
            let limit = u64::from(self.shared.opts.max_frame.saturating_sub(5));
            if *len > limit {
                return Ok(Response::Error(ErrorMsg::protocol(format!(
                    "a read of {len} bytes does not fit one frame; read at most {limit} bytes at \
                     a time"
                ))));
            }
        }
        let freeing = match &req {
            Request::Free { buf } => Some(buf.id),
            _ => None,
        };
        let (reply, answers) = channel();
        self.jobs
            .send(Job::Request { req, hash, reply })
            .map_err(|_| End::Error("the device thread has stopped".into()))?;
        let gone = || End::Error("the device thread has stopped".into());
        let mut response = answers.recv().map_err(|_| gone())?;
        if let Response::Running = response {
            send(w, &response).map_err(|e| End::Error(e.to_string()))?;
            response = answers.recv().map_err(|_| gone())?;
        }
        match (&response, freeing) {
            (Response::Buffer(b), _) => {
                self.owned.insert(b.id, b.clone());
            }
            (Response::Ok, Some(id)) => {
                self.owned.remove(&id);
            }
            _ => {}
        }
        Ok(response)
    }

    /// Buffers are this connection's own: another's cannot be named, freed or written.
    fn check_owned(&self, buf: &Buffer) -> Result<(), ErrorMsg> {
        match self.owned.get(&buf.id) {
            Some(b) if b == buf => Ok(()),
            _ => Err(ErrorMsg::from_device(&DeviceError::UnknownBuffer {
                id: buf.id,
                phys_addr: buf.phys_addr,
            })),
        }
    }
}

/// How a failed frame read ends the session.
fn frame_end(e: WireError, what: &str) -> End {
    match e {
        WireError::Closed => End::Closed,
        WireError::Io(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            End::Error(format!("no {what} in time; closing the idle connection"))
        }
        e => End::Error(format!("bad {what} frame: {e}")),
    }
}

/// Closes our side and reads what the client still sends (a little, briefly): closing with
/// unread input would reset the connection and could destroy the error message just sent.
fn linger(stream: &TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 4096];
    let mut left = 64usize << 10;
    while left > 0 {
        match io::Read::read(&mut &*stream, &mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// Compares secrets in time independent of where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
