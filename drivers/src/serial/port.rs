//! A serial port on Linux (`/dev/ttyUSB0`, `/dev/ttyACM0`, ...): raw 8N1 at a standard
//! baud rate, no flow control, exclusive, reads that time out. std and `libc` only.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::time::Duration;

use super::SerialError;

/// The baud rates the kernel's termios offers by constant (others need `BOTHER`, which few
/// USB serial adapters honour exactly).
const RATES: [(u32, libc::speed_t); 18] = [
    (9600, libc::B9600),
    (19200, libc::B19200),
    (38400, libc::B38400),
    (57600, libc::B57600),
    (115_200, libc::B115200),
    (230_400, libc::B230400),
    (460_800, libc::B460800),
    (500_000, libc::B500000),
    (576_000, libc::B576000),
    (921_600, libc::B921600),
    (1_000_000, libc::B1000000),
    (1_152_000, libc::B1152000),
    (1_500_000, libc::B1500000),
    (2_000_000, libc::B2000000),
    (2_500_000, libc::B2500000),
    (3_000_000, libc::B3000000),
    (3_500_000, libc::B3500000),
    (4_000_000, libc::B4000000),
];

/// An open serial port. A read waits at most the port's timeout for the first byte and
/// then returns what has arrived; if nothing came it fails with `TimedOut`.
#[derive(Debug)]
pub struct SerialPort {
    file: File,
    timeout: Duration,
}

impl SerialPort {
    /// Opens `path` at `baud` (8N1, raw, no flow control), for this process only, with
    /// reads that time out after `timeout`, and drops whatever was waiting in its buffers.
    pub fn open(path: &str, baud: u32, timeout: Duration) -> Result<SerialPort, SerialError> {
        let speed = RATES
            .iter()
            .find(|r| r.0 == baud)
            .map(|r| r.1)
            .ok_or_else(|| SerialError::Baud {
                port: path.to_string(),
                baud,
                supported: RATES
                    .iter()
                    .map(|r| r.0.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let io_err = |what: &'static str| {
            let port = path.to_string();
            move |source: io::Error| SerialError::Io { what, port, source }
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(path)
            .map_err(io_err("open"))?;
        let fd = file.as_raw_fd();
        // SAFETY: `fd` is an open descriptor owned by `file` for the whole block; `tio` is a
        // plain C struct that tcgetattr fills in completely before it is read.
        unsafe {
            let mut tio: libc::termios = std::mem::zeroed();
            check(libc::tcgetattr(fd, &mut tio)).map_err(io_err("configure (tcgetattr)"))?;
            libc::cfmakeraw(&mut tio);
            tio.c_cflag |= libc::CLOCAL | libc::CREAD;
            tio.c_cflag &= !(libc::CRTSCTS | libc::CSTOPB | libc::PARENB);
            tio.c_iflag &= !(libc::IXON | libc::IXOFF | libc::IXANY);
            tio.c_cc[libc::VMIN] = 0;
            tio.c_cc[libc::VTIME] = 0;
            check(libc::cfsetispeed(&mut tio, speed)).map_err(io_err("set the speed of"))?;
            check(libc::cfsetospeed(&mut tio, speed)).map_err(io_err("set the speed of"))?;
            check(libc::tcsetattr(fd, libc::TCSANOW, &tio)).map_err(io_err("configure"))?;
            check(libc::ioctl(fd, libc::TIOCEXCL)).map_err(io_err("take exclusive use of"))?;
            check(libc::tcflush(fd, libc::TCIOFLUSH)).map_err(io_err("flush"))?;
            // Back to blocking writes; reads wait in poll() below.
            let flags = libc::fcntl(fd, libc::F_GETFL);
            check(flags).map_err(io_err("configure (F_GETFL)"))?;
            check(libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK))
                .map_err(io_err("configure (F_SETFL)"))?;
        }
        Ok(SerialPort { file, timeout })
    }

    /// How long a read waits for its first byte.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Read for SerialPort {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut pfd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = self.timeout.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::ErrorKind::TimedOut.into());
        }
        if pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0
            && pfd.revents & libc::POLLIN == 0
        {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the device went away (unplugged?)",
            ));
        }
        self.file.read(buf)
    }
}

impl Write for SerialPort {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        // SAFETY: a valid descriptor; waits until the kernel has sent every byte.
        check(unsafe { libc::tcdrain(self.file.as_raw_fd()) })
    }
}
