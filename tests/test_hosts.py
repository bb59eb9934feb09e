"""Host specs: every lab host loads, and the matcher picks the right one from host info."""

import json

import pytest

from harness.collect.host import specs as hosts
from harness.collect.host.info import collect_host
from harness.core.errors import UserError

LAB = {"m1-ultra", "m3-ultra", "m5-max", "gb10", "h100", "h200", "linux-cpu"}


def _host(system="Linux", model="Intel(R) Xeon(R) Processor", chip="unknown",
          gpu_name="unknown", nvidia="unknown"):
    return {"os": {"system": system}, "cpu": {"model": model, "apple_chip": chip},
            "gpu": {"name": gpu_name, "nvidia": nvidia}}


def test_every_lab_host_has_a_valid_spec():
    specs = hosts.load_specs()
    assert set(specs) == LAB
    cooldown = {p.name: (p.cooldown.floor_s, p.cooldown.ratio, p.cooldown.cap_s) for p in specs.values()}
    mac, gpu = (5, 9, 90), (0.05, 0.25, 30)
    assert cooldown == {"m1-ultra": mac, "m3-ultra": mac, "m5-max": mac, "gb10": gpu, "h100": gpu, "h200": gpu,
                        "linux-cpu": (0.05, 0.25, 2)}
    assert all("default_cooldown_s" not in json.loads((hosts.SPECS_DIR / f"{n}.json").read_text())
               for n in LAB)
    # A missing vendor figure is said to be unknown, never left silent.
    for p in specs.values():
        if p.peak_bandwidth_gbs is None:
            assert p.peak_bandwidth_source.startswith("unknown")


def test_vendor_bandwidth_figures():
    bw = {n: p.peak_bandwidth_gbs for n, p in hosts.load_specs().items()}
    assert (bw["m1-ultra"], bw["m3-ultra"], bw["h100"], bw["h200"], bw["gb10"]) == (800, 819, 3350, 4800, 273)
    assert bw["linux-cpu"] is None


def test_h200_gpu_name_picks_h200():
    nv = [{"name": "NVIDIA H200", "compute_cap": "9.0", "generation": "sm_90"}]
    p = hosts.match_spec(_host(gpu_name="NVIDIA H200", nvidia=nv))
    assert p is not None and p.name == "h200" and p.gpu_generation == "sm_90"


def test_an_h100_sxm_picks_h100_and_another_h100_card_nothing():
    nv = [{"name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0", "generation": "sm_90"}]
    assert hosts.match_spec(_host(gpu_name="NVIDIA H100 80GB HBM3", nvidia=nv)).name == "h100"
    # The PCIe card has half the bandwidth: the SXM's figures must not be quoted for it.
    assert hosts.match_spec(_host(gpu_name="NVIDIA H100 PCIe", nvidia=[{"name": "NVIDIA H100 PCIe"}])) is None


def test_gb10_from_nvidia_list_only():
    # MLX may not see the GPU (CPU wheel) while nvidia-smi does: the list still decides.
    nv = [{"name": "NVIDIA GB10", "compute_cap": "12.1"}]
    assert hosts.match_spec(_host(model="Cortex-X925", nvidia=nv)).name == "gb10"


def test_linux_cpu_host_gets_the_generic_spec():
    assert hosts.match_spec(_host()).name == "linux-cpu"


def test_apple_chips():
    for chip, name in (("Apple M1 Ultra", "m1-ultra"), ("Apple M3 Ultra", "m3-ultra"),
                       ("Apple M5 Max", "m5-max")):
        got = hosts.match_spec(_host(system="Darwin", model=chip, chip=chip,
                                        gpu_name=chip))
        assert got is not None and got.name == name
    # An Apple chip the lab has no host spec for fits nothing (no peak is guessed).
    assert hosts.match_spec(_host(system="Darwin", model="Apple M2 Pro",
                                     chip="Apple M2 Pro")) is None


def test_unreadable_gpu_section_matches_no_gpu_rule():
    host = _host()
    host["gpu"] = {"error": "RuntimeError: boom"}
    assert hosts.match_spec(host) is None


def test_this_host_matches_linux_cpu_or_a_gpu_spec():
    host = collect_host()
    got = hosts.match_spec(host)
    gpu = str(host["gpu"].get("name", "unknown"))
    if host["os"].get("system") == "Linux" and host["gpu"].get("nvidia") == "unknown" and gpu == "unknown":
        expected = "linux-cpu"
    elif "H200" in gpu:
        expected = "h200"
    else:   # a host of another kind: whatever matched must match by its own rules
        expected = got.name if got is not None and hosts.matches(got, host) else None
    assert (got.name if got else None) == expected


def test_unknown_name_raises_user_error_naming_known_specs():
    with pytest.raises(UserError) as err:
        hosts.get_spec("m9-hyper")
    msg = str(err.value)
    assert "m9-hyper" in msg and all(n in msg for n in LAB)
    assert hosts.get_spec("h200").asv_machine == "h200"


def test_malformed_spec_names_file_and_key(tmp_path):
    good = hosts.load_specs()["h200"].as_dict()
    bad = dict(good)
    del bad["asv_machine"]
    (tmp_path / "h200.json").write_text(json.dumps(bad))
    with pytest.raises(UserError, match=r"h200\.json: missing key 'asv_machine'"):
        hosts.load_specs(tmp_path)
    (tmp_path / "h200.json").write_text(json.dumps({**good, "match": {"colour": ["red"]}}))
    with pytest.raises(UserError, match="match"):
        hosts.load_specs(tmp_path)
    (tmp_path / "h200.json").write_text("{not json")
    with pytest.raises(UserError, match="cannot read"):
        hosts.load_specs(tmp_path)


def _write_spec(tmp_path, **changes):
    spec = {k: v for k, v in json.loads((hosts.SPECS_DIR / "h200.json").read_text()).items()}
    for k, v in changes.items():
        if v is None:
            spec.pop(k, None)
        else:
            spec[k] = v
    (tmp_path / "h200.json").write_text(json.dumps(spec))


@pytest.mark.parametrize("cooldown, what", [
    ("30", "must be an object"),
    ({"floor_s": 1, "ratio": 1}, "missing: cap_s"),
    ({"floor_s": 1, "ratio": 1, "cap_s": 5, "max_s": 9}, "unknown: max_s"),
    ({"floor_s": -1, "ratio": 1, "cap_s": 5}, "'cooldown.floor_s' must be a number >= 0"),
    ({"floor_s": 1, "ratio": True, "cap_s": 5}, "'cooldown.ratio' must be a number >= 0"),
    ({"floor_s": 10, "ratio": 1, "cap_s": 5}, "'cooldown.cap_s' must be null or a number >= floor_s"),
])
def test_bad_cooldown_rule_names_the_key(tmp_path, cooldown, what):
    _write_spec(tmp_path, cooldown=cooldown)
    with pytest.raises(UserError) as err:
        hosts.load_specs(tmp_path)
    msg = str(err.value)
    assert msg.startswith(str(tmp_path / "h200.json")) and "cooldown" in msg and what in msg, msg
    assert "\n" not in msg


def test_cooldown_missing_or_given_twice(tmp_path):
    _write_spec(tmp_path, cooldown=None)
    with pytest.raises(UserError, match="missing key 'cooldown'"):
        hosts.load_specs(tmp_path)
    _write_spec(tmp_path, default_cooldown_s=30)
    with pytest.raises(UserError, match="replaces 'default_cooldown_s'"):
        hosts.load_specs(tmp_path)


def test_old_spec_with_default_cooldown_s_reads_as_a_fixed_floor(tmp_path):
    _write_spec(tmp_path, cooldown=None, default_cooldown_s=30)
    p = hosts.load_specs(tmp_path)["h200"]
    assert p.cooldown == hosts.Cooldown(floor_s=30.0, ratio=0.0, cap_s=None)
    assert p.as_dict()["cooldown"] == {"floor_s": 30.0, "ratio": 0.0, "cap_s": None}
    _write_spec(tmp_path, cooldown={"floor_s": 1, "ratio": 2, "cap_s": None})
    assert hosts.load_specs(tmp_path)["h200"].cooldown.cap_s is None   # null: no cap


def test_host_cooldown_setting_takes_the_whole_rule(tmp_path, monkeypatch):
    from harness_helpers import command_arm, write_suite

    from harness.collect.suite import load_suite
    s = load_suite(write_suite(tmp_path, [command_arm("a")], cooldown_s="host"))
    monkeypatch.setattr(hosts, "match_spec", lambda host: hosts.get_spec("m3-ultra"))
    r = hosts.resolve_host_settings(s, {}).settings
    assert (r.cooldown_s, r.cooldown_ratio, r.cooldown_cap_s) == (5.0, 9.0, 90.0)
    assert r.cooldown_source.startswith("host spec m3-ultra") and "cap 90 s" in r.cooldown_source
    monkeypatch.setattr(hosts, "match_spec", lambda host: None)
    r = hosts.resolve_host_settings(s, {}).settings
    assert (r.cooldown_s, r.cooldown_ratio, r.cooldown_cap_s) == (10.0, 0.0, None)
    assert r.cooldown_source.startswith("host: no host spec matched")
