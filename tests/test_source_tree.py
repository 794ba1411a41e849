"""``import nccl`` from a source checkout without its build takes the
submodules from an installed copy (nccl._source_tree); the packaging test
runs README's commands that way in a fresh virtual environment."""
from __future__ import annotations

import importlib.machinery
import warnings

import pytest

from nccl import _source_tree


def _package(root, version: str, built: bool):
    pkg = root / "nccl"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text(f'__version__ = "{version}"\n')
    if built:
        (pkg / ("_nccl" + importlib.machinery.EXTENSION_SUFFIXES[0])).write_bytes(b"")
    return pkg


def test_a_checkout_without_its_build_uses_the_installed_copy(tmp_path, monkeypatch):
    checkout = _package(tmp_path / "checkout", "0.6.0.1", built=False)
    installed = _package(tmp_path / "site-packages", "0.6.0.1", built=True)
    monkeypatch.setattr("sys.path", [str(tmp_path / "checkout"), str(tmp_path / "site-packages")])
    path = [str(checkout)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same version: nothing to say
        _source_tree.use_installed_copy(path)
    assert path == [str(installed)]


def test_a_different_installed_version_is_named(tmp_path, monkeypatch):
    checkout = _package(tmp_path / "checkout", "0.6.0.2", built=False)
    installed = _package(tmp_path / "site-packages", "0.6.0.1", built=True)
    monkeypatch.setattr("sys.path", [str(tmp_path / "checkout"), str(tmp_path / "site-packages")])
    path = [str(checkout)]
    with pytest.warns(RuntimeWarning, match=r"nccl4py 0\.6\.0\.1 installed at .* runs, not the "
                      r"source checkout .* \(0\.6\.0\.2\).*pip install -e \."):
        _source_tree.use_installed_copy(path)
    assert path == [str(installed)]


def test_a_built_checkout_or_no_installed_copy_stays(tmp_path, monkeypatch):
    built = _package(tmp_path / "built", "1", built=True)
    bare = _package(tmp_path / "bare", "1", built=False)
    _package(tmp_path / "other", "1", built=False)  # an installed copy needs its build
    monkeypatch.setattr("sys.path", [str(tmp_path / d) for d in ("bare", "other", "built")])
    path = [str(built)]
    _source_tree.use_installed_copy(path)  # the checkout is built: it is what runs
    assert path == [str(built)]
    assert _source_tree.installed_copy(str(bare)) == str(built)
    monkeypatch.setattr("sys.path", [str(tmp_path / "bare"), str(tmp_path / "other")])
    path = [str(bare)]
    _source_tree.use_installed_copy(path)  # nothing to take: the missing build is reported
    assert path == [str(bare)]                # where it is used (missing_build)
