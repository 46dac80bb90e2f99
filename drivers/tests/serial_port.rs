//! The Linux serial port (`drivers::serial::SerialPort`) on a pseudo-terminal: raw 8-bit
//! bytes both ways (no echo, no newline or flow-control translation), reads that time out,
//! the link's ping over it, and errors that name the port.

#![cfg(target_os = "linux")]

use std::ffi::CStr;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::io::FromRawFd;
use std::time::{Duration, Instant};

use drivers::serial::protocol::{crc8, response, Status, HEADER_BYTES};
use drivers::serial::{Link, SerialPort};

/// A pseudo-terminal: the master end, and the path of the slave end.
fn pty() -> (File, String) {
    // SAFETY: standard pty allocation; the returned descriptor is owned by the File, and
    // ptsname_r writes a NUL-terminated path into the buffer.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        let mut buf = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(fd, buf.as_mut_ptr(), buf.len()), 0);
        let path = CStr::from_ptr(buf.as_ptr()).to_str().unwrap().to_string();
        (File::from_raw_fd(fd), path)
    }
}

#[test]
fn raw_bytes_pass_both_ways_and_reads_time_out() {
    let (mut master, path) = pty();
    let mut port = SerialPort::open(&path, 115_200, Duration::from_millis(100)).unwrap();
    let all: Vec<u8> = (0..=255).collect();
    port.write_all(&all).unwrap();
    port.flush().unwrap();
    let mut got = vec![0; 256];
    master.read_exact(&mut got).unwrap();
    assert_eq!(got, all, "host to device");
    master.write_all(&all).unwrap();
    let mut got = vec![0; 256];
    let mut n = 0;
    while n < 256 {
        n += port.read(&mut got[n..]).unwrap();
    }
    assert_eq!(got, all, "device to host");
    let t = Instant::now();
    let e = port.read(&mut got).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(
        t.elapsed() >= Duration::from_millis(90),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn the_link_pings_over_the_port() {
    let (mut master, path) = pty();
    let port = SerialPort::open(&path, 115_200, Duration::from_millis(200)).unwrap();
    let bridge = std::thread::spawn(move || {
        let mut req = [0u8; HEADER_BYTES];
        master.read_exact(&mut req).unwrap();
        assert_eq!(req[7], crc8(0, &req[..7]));
        master.write_all(&response(Status::Ok, &[])).unwrap();
        master
    });
    let mut link = Link::new(port, &path, 0);
    link.nop().unwrap();
    drop(bridge.join().unwrap());
    // The other end is gone (the adapter unplugged): an error naming the port.
    let e = link.nop().unwrap_err().to_string();
    assert_eq!(
        e,
        format!("cannot write to {path}: Input/output error (os error 5)")
    );
}

#[test]
fn errors_name_the_port() {
    let e = SerialPort::open("/dev/no-such-tty", 115_200, Duration::from_millis(10))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cannot open /dev/no-such-tty: "), "{e}");
    let (_master, path) = pty();
    let e = SerialPort::open(&path, 100_000, Duration::from_millis(10))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "{path}: 100000 baud is not a rate this port can be set to"
        )),
        "{e}"
    );
    let e = SerialPort::open("/dev/null", 115_200, Duration::from_millis(10))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cannot configure (tcgetattr) /dev/null: "),
        "{e}"
    );
}
