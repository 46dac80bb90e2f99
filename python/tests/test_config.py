import json

import pytest

import vta


def test_default_and_presets():
    c = vta.Config()
    assert c == vta.Config("default") == vta.Config.preset("default")
    assert c.config_string == "1x16_i8w8a32_15_15_18_17"
    assert c.log_block == c.log_block_in == c.log_block_out == 4
    assert c.axi_data_width == 64 and c.alu_mul is True and c.alu_lut is False
    presets = vta.Config.presets()
    assert {"default", "small", "batched", "rect", "lut", "wide-bus"} <= set(presets)
    assert all(isinstance(d, str) and d for d in presets.values())
    for name in presets:
        assert vta.Config(name).config_string


def test_every_field_is_a_property():
    c = vta.Config("rect")
    doc = json.loads(c.to_json())
    assert c.log_block is None
    assert (c.log_block_in, c.log_block_out) == (doc["LOG_BLOCK_IN"], doc["LOG_BLOCK_OUT"])
    for key, value in doc.items():
        assert getattr(c, key.lower()) == value, key
    assert isinstance(c.isa_hash, int)
    assert c.target == "sim" and c.hw_ver == "0.0.2"
    for f in ["log_inp_width", "log_wgt_width", "log_acc_width", "log_batch", "log_uop_buff_size",
              "log_inp_buff_size", "log_wgt_buff_size", "log_acc_buff_size", "cmd_queue_depth",
              "token_queue_depth", "clock_mhz"]:
        assert isinstance(getattr(c, f), int), f


def test_fields_override_and_replace():
    c = vta.Config("default", log_batch=1)
    assert c.log_batch == 1 and c.config_string.startswith("2x16_")
    d = c.replace(log_block_in=3)
    assert (d.log_block_in, d.log_block_out) == (3, 4)
    assert d.replace(log_block=4) == vta.Config("default", log_batch=1)
    assert c.replace() == c
    assert hash(vta.Config("default")) == hash(vta.Config.preset("default"))
    assert "with log_batch=1" in c.origin
    assert repr(c).startswith("vta.Config(")


def test_file_and_json_round_trip(tmp_path):
    c = vta.Config("lut", clock_mhz=150)
    p = tmp_path / "c.json"
    p.write_text(c.to_json())
    assert vta.Config.from_file(p) == c
    assert vta.Config(str(p)) == c
    assert vta.Config(p) == c
    assert vta.Config.from_json(c.to_json()) == c
    params = c.parameters()
    assert isinstance(params, dict) and len(params) > 10


@pytest.mark.parametrize(
    "fields, needle",
    [
        ({"log_batch": 9}, "LOG_BATCH"),
        ({"log_acc_buff_size": 40}, "LOG_ACC_BUFF_SIZE"),
        ({"axi_data_width": 48}, "AXI_DATA_WIDTH"),
        ({"log_batch": -1}, "log_batch"),
        ({"log_batch": "2"}, "log_batch"),
        ({"log_batch": True}, "log_batch"),
        ({"alu_mul": 1}, "alu_mul"),
        ({"target": 3}, "target"),
        ({"log_bats": 1}, "unknown config field 'log_bats'"),
    ],
)
def test_bad_fields_raise_config_error_naming_the_field(fields, needle):
    with pytest.raises(vta.ConfigError) as e:
        vta.Config("default", **fields)
    assert needle in str(e.value)
    assert isinstance(e.value, vta.VtaError)
    with pytest.raises(vta.ConfigError):
        vta.Config().replace(**fields)


def test_bad_presets_files_and_json(tmp_path):
    with pytest.raises(vta.ConfigError, match="neither a config file nor a preset"):
        vta.Config("no-such-preset")
    with pytest.raises(vta.ConfigError, match="neither a config file nor a preset"):
        vta.Config.preset("no-such-preset")
    with pytest.raises(vta.ConfigError, match="cannot read config file"):
        vta.Config.from_file(tmp_path / "missing.json")
    with pytest.raises(vta.ConfigError, match="not valid JSON"):
        vta.Config.from_json("{")
    with pytest.raises(vta.ConfigError, match="missing key LOG_BATCH"):
        vta.Config.from_json('{"LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BLOCK":4}')
    with pytest.raises(vta.ConfigError, match="config must be"):
        vta.compile(b"", config=3.5)
