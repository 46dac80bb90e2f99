import threading
import time

import numpy as np
import pytest

import vta


def test_compile_from_path_bytes_and_model_proto(digits, digits_onnx, x):
    calib = [digits["calibration"]]
    from_path = vta.compile(digits_onnx, calibration=calib)
    from_str = vta.compile(str(digits_onnx), config="default", calibration=calib)
    from_bytes = vta.compile(digits["onnx"], config=vta.Config(), calibration=calib)
    assert from_path.source == str(digits_onnx)
    assert from_bytes.source == "<bytes>"
    outs = [m.run(x)[0] for m in (from_path, from_str, from_bytes)]
    assert outs[0].tobytes() == outs[1].tobytes() == outs[2].tobytes()
    onnx = pytest.importorskip("onnx")
    proto = onnx.load(str(digits_onnx))
    from_proto = vta.compile(proto, calibration=calib)
    assert from_proto.run(x)[0].tobytes() == outs[0].tobytes()


def test_compile_report(model):
    assert model.config == vta.Config("default")
    total, accel, cpu = model.steps
    assert total == accel + cpu and accel > 0
    support = model.support
    assert support and all({"node", "op", "status", "details"} <= set(r) for r in support)
    assert {r["op"] for r in support} >= {"Conv", "Relu"} or any(r["op"] == "Conv" for r in support)
    assert model.layers and all({"step", "name", "kind", "launch"} <= set(l) for l in model.layers)
    assert "op support" in model.compile_report
    assert "accelerator layers" in model.layer_report
    rep = model.report
    assert rep["config"] == "1x16_i8w8a32_15_15_18_17"
    assert rep["calibration_samples"] == 32
    assert set(rep["times_ms"]) >= {"import", "calibration", "lowering", "backend", "compile"}
    assert model.inputs == [{"name": "image", "shape": (1, 1, 8, 8), "dtype": "float32"}]
    assert model.outputs[0]["name"] == "probs" and model.outputs[0]["dtype"] == "float32"
    assert "CompiledModel" in repr(model)


def test_run_takes_a_dict_a_list_or_an_array(model, x):
    (a,) = model.run({"image": x})
    (b,) = model.run([x])
    (c,) = model.run((x,))
    (d,) = model.run(x, backend="fsim")
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (1, 10)
    assert a.tobytes() == b.tobytes() == c.tobytes() == d.tobytes()


def test_stacked_samples_and_accuracy(model, digits):
    test = digits["test"]
    (y,) = model.run(test)
    assert y.shape == (100, 10)
    acc = float((y.argmax(1) == digits["labels"]).mean())
    assert acc >= 0.9, acc
    # The same as one sample at a time.
    (y3,) = model.run(test[3:4])
    assert y[3:4].tobytes() == y3.tobytes()


@pytest.mark.parametrize("schedule", ["serial", "pipeline", "by-op", "by-path", "dynamic", "auto"])
def test_run_pool_equals_run_under_every_schedule(model, digits, tmp_path, schedule):
    test = digits["test"][:6]
    (want,) = model.run(test)
    trace = tmp_path / "t.json"
    (got,), report = model.run_pool(test, schedule=schedule, devices="fsim,fsim",
                                    in_flight=3, trace=trace, check=True)
    assert got.tobytes() == want.tobytes()
    assert report["samples"] == 6 and report["checked"] is True
    assert len(report["devices"]) == 4  # two accelerators and two CPU workers
    assert "traceEvents" in trace.read_text()


def test_run_pool_refuses_bad_options(model, x):
    with pytest.raises(ValueError, match="unknown schedule 'fastest'"):
        model.run_pool(x, schedule="fastest")
    with pytest.raises(ValueError, match="at least 1"):
        model.run_pool(x, in_flight=0)
    with pytest.raises(vta.BackendError):
        model.run_pool(x, devices="fsim,gpu")


def test_run_report_and_check(model, x):
    outs, rep = model.run_with_report({"image": x}, check=True)
    assert outs[0].shape == (1, 10)
    assert rep["config"] == model.config.config_string
    assert rep["outputs"] == [{"name": "probs", "type": "float[1, 10]"}]
    run = rep["run"]
    assert run["backend"] == "fsim" and run["samples"] == 1
    assert run["host_to_device_bytes"] > 0 and run["device_to_host_bytes"] > 0
    assert len(run["steps"]) == rep["steps"]
    assert all({"step", "name", "kind", "place", "host_ms"} <= set(s) for s in run["steps"])
    assert run["launches"] and all("counters" in l and "device_ms" in l for l in run["launches"])
    assert rep["check"]["bit_exact"] is True and rep["check"]["accel_layers"] > 0
    assert "per layer" in rep["table"] or rep["table"]


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda x: {"image": x.astype(np.float64)}, "float64"),
        (lambda x: {"image": x.astype(np.int32)}, "must be float[1, 1, 8, 8]"),
        (lambda x: {"image": x.reshape(1, 64)}, "must be float[1, 1, 8, 8]"),
        (lambda x: {"image": np.zeros((3, 1, 7, 8), np.float32)}, "must be float[1, 1, 8, 8]"),
        (lambda x: {"img": x}, "no input named 'img'"),
        (lambda x: {}, "missing input(s): 'image'"),
        (lambda x: [x, x], "2 inputs given"),
        (lambda x: [[0.0] * 64], "must be a numpy array"),
        (lambda x: "image", "must be a numpy array"),
        (lambda x: {3: x}, "input names must be strings"),
    ],
)
def test_bad_inputs_raise_input_error(model, x, make, needle):
    with pytest.raises(vta.InputError) as e:
        model.run(make(x))
    assert needle in str(e.value)
    assert isinstance(e.value, vta.RunError) and isinstance(e.value, vta.VtaError)


def test_bad_backends(model, x):
    with pytest.raises(vta.BackendError, match="unknown backend 'gpu'"):
        model.run(x, backend="gpu")
    with pytest.raises(vta.BackendError, match="--mem-latency is an option of the cycle-accurate"):
        model.run(x, backend="fsim", mem_latency=5)
    with pytest.raises(vta.BackendError):
        model.run(x, backend="remote://127.0.0.1:1")


def test_board_backend_and_its_options(model, x, tmp_path):
    # The workstation wheel runs backend="board" too; here there is no board, and the
    # defaults are vta-board's (/dev/uio0).
    assert vta.BUILD == "full"
    with pytest.raises(vta.BackendError, match="/dev/uio0"):
        model.run(x, backend="board")
    empty = vta.BoardOptions(root=tmp_path, udmabuf="udmabuf3")
    with pytest.raises(vta.BackendError, match=str(tmp_path)):
        model.run(x, backend="board", board=empty)
    with pytest.raises(vta.BackendError, match='backend="board"'):
        model.run(x, backend="fsim", board=empty)
    with pytest.raises(vta.BackendError, match="mem_latency"):
        model.run(x, backend="board", mem_latency=5)
    with pytest.raises(vta.BackendError, match="uio and hwh"):
        vta.BoardOptions(uio=1, hwh="vta.hwh")
    with pytest.raises(vta.BackendError, match="timeout"):
        vta.BoardOptions(timeout=0)
    with pytest.raises(vta.BackendError, match="base="):
        vta.BoardOptions(base="43C0000G")
    assert vta.BoardOptions(base="0x43C00000").base == 0x43C00000
    with pytest.raises(vta.BackendError, match="cannot read"):
        model.run(x, backend="board", board=vta.BoardOptions(hwh=tmp_path / "none.hwh"))


def test_bad_models(tmp_path, digits):
    with pytest.raises(vta.ModelFileError):
        vta.compile(b"\x08\x07garbage that is not an ONNX model")
    with pytest.raises(vta.ModelFileError, match="cannot read"):
        vta.compile(tmp_path / "missing.onnx")
    with pytest.raises(TypeError, match="SerializeToString"):
        vta.compile(12)
    with pytest.raises(vta.CompileError, match="calibration"):
        vta.compile(digits["onnx"], calibration=[np.zeros((1, 1, 8, 8), np.int8)])
    with pytest.raises(vta.CompileError):
        vta.compile(digits["onnx"])  # a float model needs calibration
    with pytest.raises(vta.ModelFileError):
        vta.load(b"not a compiled model")
    with pytest.raises(vta.ModelFileError, match="cannot read"):
        vta.load(tmp_path / "missing.vtab")


def test_save_and_load(model, tmp_path, x):
    p = tmp_path / "m.vtab"
    model.save(p)
    m2 = vta.load(p)
    assert m2.run(x)[0].tobytes() == model.run(x)[0].tobytes()
    assert m2.support is None and m2.report is None and m2.compile_report is None
    m3 = vta.load(p.read_bytes())
    assert m3.inputs == model.inputs
    assert model.to_bytes() == p.read_bytes()
    # The same ISA with another bus runs the same programs; another ISA is refused.
    assert vta.load(p, config=vta.Config("wide-bus")).config.axi_data_width == 256
    with pytest.raises(vta.ModelFileError, match="compiled for config"):
        vta.load(p, config="small")
    corrupt = bytearray(p.read_bytes())
    corrupt[len(corrupt) // 2] ^= 0xFF
    with pytest.raises(vta.ModelFileError):
        vta.load(bytes(corrupt))


def test_onnxruntime_round_trip(digits, model):
    """The same model and inputs through onnxruntime: vta's int8 network agrees with the float
    model's classes and is within quantization error of its scores."""
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(digits["onnx"], providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    test = digits["test"]
    ref = np.concatenate([sess.run(None, {name: test[i:i + 1]})[0] for i in range(len(test))])
    np.testing.assert_allclose(ref, digits["fp32_outputs"], atol=1e-5)
    (y,) = model.run({name: test})
    assert y.shape == ref.shape and y.dtype == ref.dtype
    agree = float((y.argmax(1) == ref.argmax(1)).mean())
    assert agree >= 0.95, agree
    assert float(np.abs(y - ref).max()) < 0.2


def test_runs_release_the_gil(model, digits):
    """Another Python thread keeps running while a run is under way."""
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        model.run(np.tile(digits["test"], (3, 1, 1, 1)))
    finally:
        stop.set()
        t.join()
    assert len(ticks) > 5


def test_ctrl_c_interrupts_a_run(model, digits):
    """A KeyboardInterrupt (what Ctrl-C raises) stops a long run after its current step."""
    import _thread

    long = np.tile(digits["test"], (50, 1, 1, 1))  # 5000 samples: many seconds
    timer = threading.Timer(0.3, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        model.run(long)
    assert time.monotonic() - start < 5
