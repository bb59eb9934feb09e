"""Lab host specs: chip, GPU generation, peak bandwidth, cooldown rule, asv name. Shipped in
harness/hosts_data/; hosts/*.json of the repository under test are read first.

A spec says what the vendor promises (peak bandwidth, with its source); collect_host()
says what the machine is. match_spec() joins the two so records can quote a ceiling.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec

from harness.core.errors import UserError
from harness.core.hostinfo import Cooldown, HostInfo, HostSpec, as_host

__all__ = ["Cooldown", "HostSpec", "get_spec", "load_specs", "match_spec", "matches", "resolve_host_settings"]

# Specs shipped with the harness (package data); a `hosts/` directory at the root of the
# repository under test is read first, so a lab's own spec wins over a shipped one.
SPECS_DIR = Path(__file__).resolve().parents[2] / "hosts_data"
REPO_HOSTS = "hosts"
UNKNOWN = "unknown"


def repo_specs_dir(start: str | Path | None = None) -> Path | None:
    """hosts/ of the repository under test (harness.collect.provenance.repo_root), if it has one."""
    from harness.collect.provenance import repo_root

    root = repo_root(start)
    d = root / REPO_HOSTS if root is not None else None
    return d if d is not None and d.is_dir() else None


MATCH_RULES = {"system", "chip", "gpu_name", "no_gpu"}
COOLDOWN_KEYS = ("floor_s", "ratio", "cap_s")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


class _CooldownKeys(msgspec.Struct, kw_only=True):
    """A spec file's two ways of giving its cooldown rule, as written (checked by _cooldown)."""
    cooldown: Any = msgspec.UNSET
    default_cooldown_s: Any = msgspec.UNSET


def _cooldown(spec: dict[str, Any], path: Path) -> dict[str, float | None]:
    """The spec's cooldown rule as {"floor_s", "ratio", "cap_s"}; a UserError naming the key. A
    spec from before the rule may give "default_cooldown_s" instead: that floor, ratio 0, no cap."""
    given = msgspec.convert(spec, _CooldownKeys)
    if given.cooldown is not msgspec.UNSET and given.default_cooldown_s is not msgspec.UNSET:
        raise UserError(f"{path}: key 'cooldown' replaces 'default_cooldown_s'; give one of them")
    if given.cooldown is msgspec.UNSET:
        if given.default_cooldown_s is msgspec.UNSET:
            raise UserError(f"{path}: missing key 'cooldown'")
        floor = given.default_cooldown_s
        if not _number(floor) or floor < 0:
            raise UserError(f"{path}: key 'default_cooldown_s' must be a number >= 0, got {floor!r}")
        return {"floor_s": float(floor), "ratio": 0.0, "cap_s": None}
    c = given.cooldown
    if not isinstance(c, dict):
        raise UserError(f"{path}: key 'cooldown' must be an object with {', '.join(COOLDOWN_KEYS)}")
    unknown = sorted(set(c) - set(COOLDOWN_KEYS))
    missing = [k for k in COOLDOWN_KEYS if k not in c]
    if unknown or missing:
        raise UserError(f"{path}: key 'cooldown' needs exactly {', '.join(COOLDOWN_KEYS)} "
                        f"(missing: {', '.join(missing) or '-'}; unknown: {', '.join(unknown) or '-'})")
    floor, ratio, cap = (c[k] for k in COOLDOWN_KEYS)
    for k, v in (("floor_s", floor), ("ratio", ratio)):
        if not _number(v) or v < 0:
            raise UserError(f"{path}: key 'cooldown.{k}' must be a number >= 0, got {v!r}")
    if cap is not None and (not _number(cap) or cap < floor):
        raise UserError(f"{path}: key 'cooldown.cap_s' must be null or a number >= floor_s "
                        f"({floor!r}), got {cap!r}")
    return {"floor_s": float(floor), "ratio": float(ratio), "cap_s": None if cap is None else float(cap)}


def _validate(raw: Any, path: Path) -> HostSpec:
    if not isinstance(raw, dict):
        raise UserError(f"{path}: a host spec must be a JSON object")
    # The vendor's figures are named before the cooldown rule, which may come in two forms.
    missing = [f.name for f in msgspec.structs.fields(HostSpec) if f.required and f.name not in raw]
    if missing and missing[0] != "cooldown":
        raise UserError(f"{path}: missing key '{missing[0]}'")
    fields = {k: v for k, v in raw.items() if k != "default_cooldown_s"}
    try:
        spec = msgspec.convert({**fields, "cooldown": _cooldown(raw, path)}, HostSpec)
    except msgspec.ValidationError as e:
        raise UserError(f"{path}: {_explain(str(e))}") from None
    if spec.name != path.stem:
        raise UserError(f"{path}: name '{spec.name}' differs from the file name '{path.stem}'")
    unknown = set(spec.match) - MATCH_RULES
    if unknown or not spec.match:
        raise UserError(f"{path}: key 'match' needs rules from {sorted(MATCH_RULES)}, "
                        f"got {sorted(spec.match)}")
    return spec


def _explain(msg: str) -> str:
    """msgspec's "Object missing required field `x`" / "Expected `str`, got `int` - at `$.x`"
    in the words of the rest of this module."""
    if m := re.match(r"Object missing required field `(\w+)`", msg):
        return f"missing key '{m[1]}'"
    if m := re.match(r"Expected `(.+?)`, got `(\w+)` - at `\$\.(\w+)`", msg):
        return f"key '{m[3]}' has the wrong type ({m[2]}; expected {m[1]})"
    return msg


def _load_dir(d: Path) -> dict[str, HostSpec]:
    out = {}
    for path in sorted(d.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"{path}: cannot read host spec: {exc}") from None
        out[path.stem] = _validate(data, path)
    return out


def load_specs(directory: str | Path | None = None) -> dict[str, HostSpec]:
    """Specs by name, a malformed one a UserError naming the file. With a directory: its
    *.json. Without: the repository under test's hosts/ first, then the shipped specs it
    does not replace (a local spec of the same name wins); match_spec keeps this order."""
    if directory is not None:
        d = Path(directory)
        if not d.is_dir():
            raise UserError(f"{d}: no host spec directory")
        return _load_dir(d)
    local = repo_specs_dir()
    out = _load_dir(local) if local is not None else {}
    for name, spec in _load_dir(SPECS_DIR).items():
        out.setdefault(name, spec)
    return out


def _gpu_names(host: HostInfo) -> list[str] | None:
    """Names of the GPUs collect_host saw; None when its gpu section could not be read."""
    gpu = host.gpu
    if gpu.error:
        return None
    names = [gpu.name] + [g.name for g in gpu.nvidia_gpus]
    return [n for n in names if n not in ("", UNKNOWN)]


def _contains_any(haystacks: list[str], needles: list[str]) -> bool:
    return any(n.lower() in h.lower() for h in haystacks for n in needles)


def _rule_holds(rule: str, want: Any, host: HostInfo) -> bool:
    if rule == "system":
        return not host.os.error and host.os.system.lower() in [w.lower() for w in want]
    if rule == "chip":
        chips = [] if host.cpu.error else [host.cpu.apple_chip, host.cpu.model]
        return _contains_any([c for c in chips if c != UNKNOWN], want)
    names = _gpu_names(host)
    if names is None:  # an unreadable gpu section proves neither a GPU nor its absence
        return False
    if rule == "gpu_name":
        return _contains_any(names, want)
    if rule == "no_gpu":
        return (not names) == bool(want)
    return False


def matches(spec: HostSpec, host: HostInfo | dict[str, Any]) -> bool:
    """Whether every match rule of spec holds for collect_host()'s host section."""
    h = as_host(host)
    return all(_rule_holds(rule, want, h) for rule, want in spec.match.items())


def match_spec(host: HostInfo | dict[str, Any], specs: dict[str, HostSpec] | None = None) -> HostSpec | None:
    """The spec whose match rules all hold for collect_host()'s dict; a specific spec
    wins over a generic fallback, and among equals the first in load_specs' order (the
    repository's own before the shipped); None when nothing fits (no peak to quote)."""
    specs = load_specs() if specs is None else specs
    h = as_host(host)
    fits = [p for p in specs.values() if matches(p, h)]
    specific = [p for p in fits if not p.generic]
    chosen = specific or fits
    return chosen[0] if chosen else None


def get_spec(name: str, directory: str | Path | None = None) -> HostSpec:
    specs = load_specs(directory)
    if name not in specs:
        known = ", ".join(sorted(specs)) or "none"
        raise UserError(f"unknown host spec '{name}' (known: {known})")
    return specs[name]


def resolve_host_settings(suite: Any, host: HostInfo | dict[str, Any]) -> Any:
    """cooldown_s = "host" takes the matching host spec's cooldown rule: its floor_s as
    cooldown_s, its ratio and cap_s as cooldown_ratio and cooldown_cap_s."""
    from harness.collect.suite import Settings, with_settings
    if suite.settings.cooldown_source != "host":
        return suite
    spec = match_spec(host)
    if spec is None:
        base = Settings()
        return with_settings(suite, cooldown_s=base.cooldown_s, cooldown_ratio=base.cooldown_ratio,
                             cooldown_cap_s=base.cooldown_cap_s,
                             cooldown_source=f"host: no host spec matched, default {base.cooldown_s:g} s")
    rule = spec.cooldown
    return with_settings(suite, cooldown_s=rule.floor_s, cooldown_ratio=rule.ratio, cooldown_cap_s=rule.cap_s,
                         cooldown_source=f"host spec {spec.name} ({rule.describe()})")
