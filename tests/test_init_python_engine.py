"""docs/own-engine.md says a Python engine needs a pyproject.toml, and the asv.conf.json init
writes is why: with one it builds a wheel of the commit, without one nothing."""

from __future__ import annotations

import re

from harness_helpers import REPO

from harness.ci.init import render


def _asv_conf(root, tmp_path):
    from asv import util as asv_util
    conf = tmp_path / "asv.conf.json"
    conf.write_text(render(root, "harness", ["x"], ["m3-ultra"])["asv.conf.json"])
    return asv_util.load_json(str(conf), js_comments=True)   # as asv reads it


def test_own_engine_doc_says_a_python_engine_needs_pyproject_for_the_wheel_init_builds(tmp_path):
    doc = re.sub(r"\s+", " ", (REPO / "docs" / "own-engine.md").read_text())
    assert "A Python engine needs a `pyproject.toml`" in doc
    assert "builds a wheel of the commit (`pip wheel`)" in doc
    # What it says of the code: a package gets a wheel build, a bare repository none.
    eng = tmp_path / "eng"
    eng.mkdir()
    assert _asv_conf(eng, tmp_path)["build_command"] == []
    (eng / "pyproject.toml").write_text('[project]\nname = "my-engine"\nversion = "0"\n')
    assert "pip wheel" in " ".join(_asv_conf(eng, tmp_path)["build_command"])
