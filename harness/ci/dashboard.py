"""The asv dashboard: `asv publish`, its JavaScript made local, `asv preview`.

asv's index.html loads jQuery, flot, bootstrap and three small libraries from public CDNs.
A lab machine, a CI runner or a laptop on a plane without those CDNs gets "One or more
external (JavaScript) dependencies of airspeed velocity failed to load" instead of graphs.
`vendor_dashboard` fetches the same versions from the npm registry (with npm, once, into a
cache), copies them to html/vendor/ and points index.html at them. The rewritten tags lose
their `integrity` attributes: the npm files are the packages' own builds (jsdelivr serves
those same bytes; cdnjs minifies its own), so a hash of the CDN's bytes would not match.

    harness dashboard publish   # asv publish, vendor the libraries, the harness's pages
                                # (html/harness/: verdicts, series, alerts, records; harness.ci.site)
    harness dashboard preview   # asv preview (serves html/ on localhost)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.ci.asvtool import AsvConfig
from harness.ci.reportfiles import Backfill
from harness.core.errors import UserError


@dataclass(frozen=True)
class Asset:
    url: str        # as asv 0.6.6's index.html has it
    npm: str        # the npm package and version that holds the same library
    path: str       # the file in that package
    extra: tuple[str, ...] = ()   # other files the asset needs (bootstrap's fonts)


ASSETS = (
    Asset("https://code.jquery.com/jquery-3.3.1.min.js", "jquery@3.3.1", "dist/jquery.min.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js", "flot@0.8.3", "jquery.flot.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js", "flot@0.8.3",
          "jquery.flot.time.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js", "flot@0.8.3",
          "jquery.flot.selection.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js", "flot@0.8.3",
          "jquery.flot.categories.js"),
    Asset("https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js", "flot-orderbars@1.0.0",
          "js/jquery.flot.orderBars.js"),
    # cdnjs's stupidtable 1.0.1 is not on npm; 1.1.3 keeps its $.fn.stupidtable API.
    Asset("https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js",
          "stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js", "blueimp-md5@2.19.0",
          "js/md5.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js", "bootstrap@3.1.1",
          "dist/js/bootstrap.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css", "bootstrap@3.1.1",
          "dist/css/bootstrap.min.css",
          tuple(f"dist/fonts/glyphicons-halflings-regular.{e}" for e in ("eot", "svg", "ttf", "woff"))),
)


def default_cache() -> Path:
    return Path.home() / ".cache" / "harness" / "asv-vendor"


def _local_name(a: Asset, path: str) -> str:
    return f"{a.npm.replace('@', '-')}/{path}"


def fetch_assets(cache: Path | None = None) -> Path:
    """Every asset under cache/<package-version>/<path>; `npm pack` for packages not there yet."""
    cache = cache or default_cache()
    missing = sorted({a.npm for a in ASSETS
                      if not all((cache / _local_name(a, p)).exists() for p in (a.path, *a.extra))})
    if not missing:
        return cache
    npm = shutil.which("npm")
    if npm is None:
        raise UserError("the dashboard's JavaScript is not cached and npm is not installed "
                        f"(needs: {', '.join(missing)}); install npm or open the dashboard online")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in missing:
            p = subprocess.run([npm, "pack", spec, "--silent", "--pack-destination", tmp],
                               capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                raise UserError(f"npm pack {spec} failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
            tgz = Path(tmp) / p.stdout.strip().splitlines()[-1]
            wanted = {f"package/{q}": q for a in ASSETS if a.npm == spec for q in (a.path, *a.extra)}
            with tarfile.open(tgz) as tf:
                for member in tf.getmembers():
                    if member.name in wanted:
                        dst = cache / f"{spec.replace('@', '-')}/{wanted[member.name]}"
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        f = tf.extractfile(member)
                        assert f is not None
                        dst.write_bytes(f.read())
    return cache


def vendor_dashboard(html_dir: Path, cache: Path | None = None) -> int:
    """Copy the assets into html_dir/vendor/ and point index.html at them; returns the number
    of tags rewritten (0 when index.html has no CDN tags left)."""
    index = html_dir / "index.html"
    if not index.exists():
        raise UserError(f"{index}: no published dashboard (run asv publish first)")
    text = index.read_text(encoding="utf-8")
    todo = [a for a in ASSETS if a.url in text]
    if not todo:
        return 0
    src = fetch_assets(cache)
    n = 0
    for a in todo:
        for p in (a.path, *a.extra):
            dst = html_dir / "vendor" / _local_name(a, p)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / _local_name(a, p), dst)
        # The whole tag: its integrity/crossorigin/referrerpolicy attributes name the CDN's bytes.
        tag = re.compile(r"<(script|link)\b[^>]*" + re.escape(a.url) + r"[^>]*>")
        local = f"vendor/{_local_name(a, a.path)}"

        def repl(m: re.Match[str], local: str = local, url: str = a.url) -> str:
            t = m.group(0)
            t = re.sub(r'\s(integrity|crossorigin|referrerpolicy)="[^"]*"', "", t)
            return t.replace(url, local)
        text, k = tag.subn(repl, text)
        n += k
    index.write_text(text, encoding="utf-8")
    return n


def check_published(html_dir: Path) -> None:
    """One line when there is no published dashboard to preview (asv preview would fail in os.chdir)."""
    if not (html_dir / "index.html").is_file():
        raise UserError(f"{html_dir}: nothing published yet; run `harness dashboard publish` first, "
                        "then `harness dashboard preview`")


def publish(config: str | None = None, vendor: bool = True, echo: bool = True,
            records: str | Path | None = None, alerts: str | Path | None = None,
            backfill: Backfill | None = None) -> Path:
    from harness.ci.asvtool import load_config, run_asv

    conf = load_config(config)
    check_sources(records, alerts)
    r = run_asv(["publish"], conf, echo=echo)
    if not (conf.html_dir / "index.html").exists():
        tail = " | ".join(r.output.strip().splitlines()[-3:])
        raise UserError(f"asv publish wrote no dashboard (exit {r.returncode}): {tail}")
    if vendor:
        try:
            n = vendor_dashboard(conf.html_dir)
            if n:
                print(f"harness: dashboard libraries served from {conf.html_dir}/vendor/ ({n} tags)", file=sys.stderr)
        except UserError as e:
            print(f"harness: warning: {e}; the dashboard needs its CDNs", file=sys.stderr)
    publish_harness(conf, records, alerts, backfill=backfill)
    return conf.html_dir


def check_sources(records: str | Path | None, alerts: str | Path | None) -> None:
    """One line when a directory the user named is not there (before asv publish runs)."""
    for given, what in ((records, "--records"), (alerts, "--alerts")):
        if given and not Path(given).expanduser().is_dir():
            raise UserError(f"{what} {given}: no such directory; name the directory that holds the "
                            f"{'records' if what == '--records' else 'nightly alerts'}")


def default_records(conf: AsvConfig) -> Path:
    """Where the asv benchmarks keep the sessions' records (harness.ci.asvsession.records_dir)."""
    from harness.ci.asvsession import RECORDS_ENV

    return Path(os.environ.get(RECORDS_ENV) or conf.root / ".asv" / "records")


def publish_harness(conf: AsvConfig, records: str | Path | None = None, alerts: str | Path | None = None,
                    user_templates: Path | None = None, backfill: Backfill | None = None) -> Path:
    """The harness's pages (html/harness/: verdicts, series, change points, records) beside
    asv's, linked from asv's index. `records`: a records directory (flat, or one per machine);
    `alerts`: the nightly's alerts directory (one per machine)."""
    from harness.ci.ackfile import acks_path, load_acks
    from harness.ci.site import Sources, build_site, link_from_asv, ms_benchmark

    rec = Path(records).expanduser() if records else default_records(conf)
    al = Path(alerts).expanduser() if alerts else None
    check_sources(records, alerts)
    try:
        acks = tuple(load_acks(conf.root, acks_path(conf)))
    except UserError as e:
        print(f"harness: warning: {e}; changes are shown without acknowledgements", file=sys.stderr)
        acks = ()
    src = Sources(records=rec, alerts=al, repo=conf.root, acks=acks, results=conf.results_dir,
                  user_templates=user_templates, backfill=backfill)
    index = build_site(conf.html_dir, src, ms_benchmark(conf.results_dir))
    link_from_asv(conf.html_dir)
    return index
