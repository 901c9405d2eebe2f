"""The installed package: its metadata and the knn-gpgpu console script.

These need the package installed from its wheel (scripts/release/build-wheels.sh,
scripts/checks/python-package.sh). Run from a checkout without one they skip,
unless KNN_EXPECT_INSTALLED_PACKAGE=1 (set by those scripts): then a missing
installation fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

import knn_gpgpu
from knn_gpgpu import _cli

from conftest import REPO_DIR, oracle


def installed_or_skip(what: str) -> None:
    if os.environ.get("KNN_EXPECT_INSTALLED_PACKAGE") == "1":
        pytest.fail("KNN_EXPECT_INSTALLED_PACKAGE=1 but %s is missing" % what)
    pytest.skip("%s is missing: the package is not installed from its wheel" % what)


def declared_project() -> Dict[str, Any]:
    """[project] of pyproject.toml, the oracle of the installed metadata."""
    try:
        import tomllib
    except ImportError:
        pytest.skip("no tomllib (Python < 3.11)")
    with open(REPO_DIR / "pyproject.toml", "rb") as f:
        project: Dict[str, Any] = tomllib.load(f)["project"]
    return project


def test_metadata_is_the_declared_one() -> None:
    try:
        meta = metadata.metadata("knn_gpgpu")
    except metadata.PackageNotFoundError:
        installed_or_skip("the distribution knn_gpgpu")
    project = declared_project()
    cmake = (REPO_DIR / "CMakeLists.txt").read_text()
    version = re.search(r"project\(knn_gpgpu VERSION ([0-9.]+)", cmake)
    assert version is not None
    assert meta["Version"] == version.group(1) == knn_gpgpu.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    assert sorted(meta.get_all("Classifier") or []) == sorted(project["classifiers"])
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert urls == project.get("urls", {})
    scripts = {e.name: e.value for e in metadata.distribution("knn_gpgpu").entry_points
               if e.group == "console_scripts"}
    assert scripts == project["scripts"] == {"knn-gpgpu": "knn_gpgpu._cli:main"}


def console_script() -> Path:
    """The knn-gpgpu script pip put beside this interpreter."""
    bin_dir = Path(sys.executable).parent
    script = bin_dir / ("knn-gpgpu.exe" if os.name == "nt" else "knn-gpgpu")
    if not script.is_file():
        installed_or_skip(str(script))
    if not os.path.isfile(_cli.tool_path()):
        installed_or_skip("the bundled tool %s" % _cli.tool_path())
    return script


def test_console_script_answers_as_the_oracle(tmp_path: Path) -> None:
    """`knn-gpgpu knn` through the console script: the bundled tool, the bundled library."""
    script = console_script()
    rng = np.random.default_rng(52)
    ref = rng.random((500, 3), dtype=np.float32)
    queries = rng.random((40, 3), dtype=np.float32)
    np.save(tmp_path / "ref.npy", ref)
    np.save(tmp_path / "queries.npy", queries)
    env = {k: v for k, v in os.environ.items() if k not in ("KNN_GPGPU_LIBRARY", "LD_LIBRARY_PATH")}
    run = subprocess.run(
        [str(script), "knn", "--ref", "ref.npy", "--query", "queries.npy", "--k", "5",
         "--out", "nn.npy", "--backend", "openmp"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    _, expected = oracle(ref, queries, 5)
    np.testing.assert_array_equal(np.load(tmp_path / "nn.npy"), expected)

    bad = subprocess.run([str(script), "knn", "--ref", "missing.npy", "--self", "--k", "1",
                          "--out", "x.npy"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode != 0 and "missing.npy" in bad.stderr


def test_version_of_the_tool_is_the_package_version() -> None:
    script = console_script()
    run = subprocess.run([str(script), "info"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "knn_gpgpu version: %s" % knn_gpgpu.__version__ in run.stdout


def test_entry_point_without_a_bundled_tool_says_why(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setattr(_cli, "tool_path", lambda: str(tmp_path / "knn-gpgpu"))
    assert _cli.main(["info"]) == 127
    err = capsys.readouterr().err
    assert "no command-line tool" in err and "libcli11-dev" in err
