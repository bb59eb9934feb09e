"""Host profiles: every lab host loads, and the matcher picks the right one from host info."""

import json

import pytest

from harness import hosts
from harness.errors import UserError
from harness.hostinfo import collect_host

LAB = {"m1-ultra", "m3-ultra", "m5-max", "gb10", "h200", "linux-cpu"}


def _host(system="Linux", model="Intel(R) Xeon(R) Processor", chip="unknown",
          gpu_name="unknown", nvidia="unknown"):
    return {"os": {"system": system}, "cpu": {"model": model, "apple_chip": chip},
            "gpu": {"name": gpu_name, "nvidia": nvidia}}


def test_every_lab_host_has_a_valid_profile():
    profiles = hosts.load_profiles()
    assert set(profiles) == LAB
    cooldown = {p["name"]: p["default_cooldown_s"] for p in profiles.values()}
    assert cooldown == {"m1-ultra": 90, "m3-ultra": 90, "m5-max": 90, "gb10": 30, "h200": 30,
                        "linux-cpu": 2}
    # A missing vendor figure is said to be unknown, never left silent.
    for p in profiles.values():
        if p["peak_bandwidth_gbs"] is None:
            assert p["peak_bandwidth_source"].startswith("unknown")


def test_vendor_bandwidth_figures():
    bw = {n: p["peak_bandwidth_gbs"] for n, p in hosts.load_profiles().items()}
    assert (bw["m1-ultra"], bw["m3-ultra"], bw["h200"], bw["gb10"]) == (800, 819, 4800, 273)
    assert bw["linux-cpu"] is None


def test_h200_gpu_name_picks_h200():
    nv = [{"name": "NVIDIA H200", "compute_cap": "9.0", "generation": "sm_90"}]
    p = hosts.match_profile(_host(gpu_name="NVIDIA H200", nvidia=nv))
    assert p["name"] == "h200" and p["gpu_generation"] == "sm_90"


def test_gb10_from_nvidia_list_only():
    # MLX may not see the GPU (CPU wheel) while nvidia-smi does: the list still decides.
    nv = [{"name": "NVIDIA GB10", "compute_cap": "12.1"}]
    assert hosts.match_profile(_host(model="Cortex-X925", nvidia=nv))["name"] == "gb10"


def test_linux_cpu_host_gets_the_generic_profile():
    assert hosts.match_profile(_host())["name"] == "linux-cpu"


def test_apple_chips():
    for chip, name in (("Apple M1 Ultra", "m1-ultra"), ("Apple M3 Ultra", "m3-ultra"),
                       ("Apple M5 Max", "m5-max")):
        got = hosts.match_profile(_host(system="Darwin", model=chip, chip=chip,
                                        gpu_name=chip))
        assert got["name"] == name
    # An Apple chip the lab has no profile for fits nothing (no peak is guessed).
    assert hosts.match_profile(_host(system="Darwin", model="Apple M2 Pro",
                                     chip="Apple M2 Pro")) is None


def test_unreadable_gpu_section_matches_no_gpu_rule():
    host = _host()
    host["gpu"] = {"error": "RuntimeError: boom"}
    assert hosts.match_profile(host) is None


def test_this_host_matches_linux_cpu_or_a_gpu_profile():
    host = collect_host()
    got = hosts.match_profile(host)
    if host["os"].get("system") == "Linux" and host["gpu"].get("nvidia") == "unknown" \
            and host["gpu"].get("name") == "unknown":
        assert got is not None and got["name"] == "linux-cpu"


def test_unknown_name_raises_user_error_naming_known_profiles():
    with pytest.raises(UserError) as err:
        hosts.get_profile("m9-hyper")
    msg = str(err.value)
    assert "m9-hyper" in msg and all(n in msg for n in LAB)
    assert hosts.get_profile("h200")["asv_machine"] == "h200"


def test_malformed_profile_names_file_and_key(tmp_path):
    good = hosts.load_profiles()["h200"]
    bad = dict(good)
    del bad["asv_machine"]
    (tmp_path / "h200.json").write_text(json.dumps(bad))
    with pytest.raises(UserError, match=r"h200\.json: missing key 'asv_machine'"):
        hosts.load_profiles(tmp_path)
    (tmp_path / "h200.json").write_text(json.dumps({**good, "match": {"colour": ["red"]}}))
    with pytest.raises(UserError, match="match"):
        hosts.load_profiles(tmp_path)
    (tmp_path / "h200.json").write_text("{not json")
    with pytest.raises(UserError, match="cannot read"):
        hosts.load_profiles(tmp_path)
