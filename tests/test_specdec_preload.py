"""The specdec adapter's BLAS preload on what an import of `specdec` can find."""

import sys

from harness.collect.adapters import specdec as adapter


def test_preload_names_the_package_directory_of_a_real_package(tmp_path, monkeypatch):
    pkg = tmp_path / "specdec_preload_regular"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(adapter, "NAME", pkg.name)
    monkeypatch.delitem(sys.modules, pkg.name, raising=False)
    assert adapter.preload_blas() == str(pkg.resolve())


def test_preload_skips_a_bare_directory_imported_as_a_namespace(tmp_path, monkeypatch):
    # A `specdec/` folder without __init__.py (a checkout's root, not the package) imports as a
    # namespace package with no __file__: no package to preload from, not a crash.
    (tmp_path / "specdec_preload_bare").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(adapter, "NAME", "specdec_preload_bare")
    monkeypatch.delitem(sys.modules, "specdec_preload_bare", raising=False)
    assert adapter.preload_blas() is None
