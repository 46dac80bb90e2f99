//! Frames and messages round-trip; short, long, empty and garbled input is an error, never a
//! panic or an allocation the frame did not ask for.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn buffer() -> impl Strategy<Value = Buffer> {
    (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(phys_addr, size, id)| Buffer {
        phys_addr,
        size,
        id,
    })
}

fn timeout() -> impl Strategy<Value = RunTimeout> {
    (any::<Option<u64>>(), any::<Option<u64>>()).prop_map(|(wall, work)| RunTimeout {
        wall: wall.map(Duration::from_nanos),
        work,
    })
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (any::<u16>(), ".{0,20}").prop_map(|(version, token)| Request::Hello { version, token }),
        (any::<u64>(), any::<u64>()).prop_map(|(size, align)| Request::Alloc { size, align }),
        buffer().prop_map(|buf| Request::Free { buf }),
        (
            buffer(),
            any::<u64>(),
            prop::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(buf, offset, data)| Request::Write { buf, offset, data }),
        (buffer(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(buf, offset, len, hash)| Request::WriteCached {
                buf,
                offset,
                len,
                hash
            }
        ),
        (buffer(), any::<u64>(), any::<u64>()).prop_map(|(buf, offset, len)| Request::Read {
            buf,
            offset,
            len
        }),
        (buffer(), any::<u64>(), any::<u64>()).prop_map(|(buf, offset, size)| Request::Flush {
            buf,
            offset,
            size
        }),
        (buffer(), any::<u64>(), any::<u64>())
            .prop_map(|(buf, offset, size)| Request::Invalidate { buf, offset, size }),
        (any::<u64>(), any::<u32>(), timeout()).prop_map(|(insn_addr, insn_count, timeout)| {
            Request::Run {
                insn_addr,
                insn_count,
                timeout,
            }
        }),
        Just(Request::Bye),
    ]
}

fn pairs() -> impl Strategy<Value = Vec<(String, u64)>> {
    prop::collection::vec(("[a-z_]{1,12}", any::<u64>()), 0..6)
}

fn error_kind() -> impl Strategy<Value = ErrorKind> {
    prop_oneof![
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(requested, align, free, largest)| ErrorKind::OutOfMemory {
                requested,
                align,
                free,
                largest
            }
        ),
        any::<u64>().prop_map(|align| ErrorKind::BadAlign { align }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(id, phys_addr)| ErrorKind::UnknownBuffer { id, phys_addr }),
        (
            ".{0,10}",
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(what, id, offset, len, size)| ErrorKind::OutOfBounds {
                what,
                id,
                offset,
                len,
                size
            }),
        (".{0,10}", ".{0,10}")
            .prop_map(|(program, device)| ErrorKind::ConfigMismatch { program, device }),
        Just(ErrorKind::Program),
        ".{0,10}".prop_map(|backend| ErrorKind::Unavailable { backend }),
        (".{0,10}", ".{0,10}").prop_map(|(backend, detail)| ErrorKind::Timeout { backend, detail }),
        ".{0,10}".prop_map(|backend| ErrorKind::Run { backend }),
        Just(ErrorKind::Protocol),
    ]
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        (
            any::<u16>(),
            ".{0,12}",
            ".{0,12}",
            any::<u64>(),
            ".{0,40}",
            any::<u32>()
        )
            .prop_map(
                |(version, server_id, device, isa_hash, config_json, max_frame)| {
                    Response::Welcome(ServerInfo {
                        version,
                        server_id,
                        device,
                        config_string: "1x16_i8w8a32_15_15_18_17".into(),
                        isa_hash,
                        config_json,
                        bitstream: "none".into(),
                        max_frame,
                    })
                }
            ),
        Just(Response::Ok),
        buffer().prop_map(Response::Buffer),
        Just(Response::CacheHit),
        Just(Response::CacheMiss),
        prop::collection::vec(any::<u8>(), 0..300).prop_map(Response::Data),
        Just(Response::Running),
        (".{0,12}", pairs(), pairs(), any::<u64>()).prop_map(
            |(backend, counters, extras, nanos)| Response::Report(RunReport {
                backend,
                counters,
                extras,
                wall_time: Duration::from_nanos(nanos),
            })
        ),
        (error_kind(), ".{0,40}")
            .prop_map(|(kind, message)| Response::Error(ErrorMsg { kind, message })),
    ]
}

proptest! {
    #[test]
    fn requests_round_trip_through_frames(r in request()) {
        let mut wire = Vec::new();
        write_frame(&mut wire, &r.encode()).unwrap();
        let body = read_frame(&mut wire.as_slice(), u32::MAX).unwrap();
        prop_assert_eq!(Request::decode(&body).unwrap(), r);
    }

    #[test]
    fn responses_round_trip(r in response()) {
        prop_assert_eq!(Response::decode(&r.encode()).unwrap(), r);
    }

    #[test]
    fn every_cut_of_a_message_is_an_error(r in request(), s in response()) {
        let (req, resp) = (r.encode(), s.encode());
        for cut in 0..req.len() {
            prop_assert!(Request::decode(&req[..cut]).is_err());
        }
        for cut in 0..resp.len() {
            prop_assert!(Response::decode(&resp[..cut]).is_err());
        }
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = Request::decode(&bytes);
        let _ = Response::decode(&bytes);
        let _ = read_frame(&mut bytes.as_slice(), 1 << 16);
    }
}

#[test]
fn a_truncated_frame_is_an_error() {
    let mut wire = Vec::new();
    write_frame(&mut wire, &Request::Bye.encode()).unwrap();
    write_frame(&mut wire, &[1, 2, 3, 4, 5]).unwrap();
    let cut = &wire[..wire.len() - 2];
    let mut r = cut;
    assert_eq!(read_frame(&mut r, 64).unwrap(), Request::Bye.encode());
    assert!(matches!(
        read_frame(&mut r, 64),
        Err(WireError::Truncated(_))
    ));
    assert!(matches!(
        read_frame(&mut &[7u8, 0][..], 64),
        Err(WireError::Truncated(_))
    ));
    assert!(matches!(
        read_frame(&mut &[][..], 64),
        Err(WireError::Closed)
    ));
    assert!(matches!(
        read_frame(&mut &[0u8, 0, 0, 0][..], 64),
        Err(WireError::Empty)
    ));
}

#[test]
fn an_oversized_frame_is_refused_from_its_length() {
    // Claims 4 GiB - 1 and holds nothing: refused without reading or allocating.
    let wire = u32::MAX.to_le_bytes();
    let e = read_frame(&mut &wire[..], 1 << 20).unwrap_err();
    assert!(
        matches!(
            e,
            WireError::TooLong {
                len: u32::MAX,
                limit: 0x10_0000
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("longer than the limit"), "{e}");
}

#[test]
fn trailing_bytes_and_bad_fields_are_named() {
    let mut body = Request::Bye.encode();
    body.push(0);
    let e = Request::decode(&body).unwrap_err().to_string();
    assert!(e.contains("1 bytes after the message"), "{e}");
    let e = Request::decode(&[0x7f]).unwrap_err().to_string();
    assert!(e.contains("unknown request tag 0x7f"), "{e}");
    let e = Request::decode(b"\x01HTTP").unwrap_err().to_string();
    assert!(e.contains("VTAR"), "{e}");
    let mut run = Request::Run {
        insn_addr: 0,
        insn_count: 1,
        timeout: RunTimeout::default(),
    }
    .encode();
    run[13] = 2;
    let e = Request::decode(&run).unwrap_err().to_string();
    assert!(e.contains("option flag 2"), "{e}");
}

#[test]
fn device_errors_keep_their_variant_and_text_across_the_wire() {
    let errors = [
        DeviceError::OutOfMemory {
            requested: 1 << 30,
            align: 4096,
            free: 12288,
            largest: 8192,
        },
        DeviceError::BadAlign { align: 3 },
        DeviceError::UnknownBuffer {
            id: 7,
            phys_addr: 0x1000,
        },
        DeviceError::OutOfBounds {
            what: "copy from device",
            id: 2,
            offset: 10,
            len: 20,
            size: 16,
        },
        DeviceError::Program("no FINISH".into()),
        DeviceError::Timeout {
            backend: "fsim".into(),
            detail: "step limit 10 reached".into(),
        },
        DeviceError::Run {
            backend: "rtl".into(),
            source: "load module hung at cycle 100".into(),
        },
        DeviceError::Unavailable {
            backend: "rtl".into(),
            source: "verilator is not installed".into(),
        },
    ];
    for e in errors {
        let m = ErrorMsg::from_device(&e);
        let Response::Error(m) = Response::decode(&Response::Error(m).encode()).unwrap() else {
            panic!("an error decodes as an error");
        };
        let back = m.into_device("127.0.0.1:1");
        assert_eq!(back.to_string(), e.to_string());
        assert_eq!(
            std::mem::discriminant(&back),
            std::mem::discriminant(&e),
            "{e}"
        );
    }
    let e = ErrorMsg::protocol("token mismatch").into_device("host:9091");
    assert_eq!(e.to_string(), "remote device host:9091: token mismatch");
}
