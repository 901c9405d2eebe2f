"""Finding the library: KNN_GPGPU_LIBRARY, the loader's search path, clear failures."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import knn_gpgpu as knn


def run_python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def clean_env() -> dict:
    env = dict(os.environ)
    for key in ("KNN_GPGPU_LIBRARY", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"):
        env.pop(key, None)
    return env


def test_loaded_from_the_environment_variable(lib):
    path = os.environ.get("KNN_GPGPU_LIBRARY")
    if path:
        assert knn.library_path() == path
    assert knn.version() >= 10000


def test_loader_search_path():
    path = os.path.realpath(knn.library_path()) if os.path.sep in knn.library_path() else None
    if path is None:
        return                          # already found through the search path
    env = clean_env()
    env["LD_LIBRARY_PATH"] = os.path.dirname(path)
    env["DYLD_LIBRARY_PATH"] = os.path.dirname(path)
    done = run_python("""
        import knn_gpgpu as knn
        print(knn.version(), knn.library_path())
    """, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str(knn.version()))


def test_wrong_path_is_a_clear_error_on_first_use():
    env = clean_env()
    env["KNN_GPGPU_LIBRARY"] = "/nonexistent/libknn_gpgpu.so.1"
    done = run_python("""
        import knn_gpgpu as knn            # importing never needs the library
        try:
            knn.tree_size(3)
        except knn.LibraryNotFoundError as exc:
            print("LibraryNotFoundError", exc)
    """, env)
    assert done.returncode == 0, done.stderr
    assert "LibraryNotFoundError" in done.stdout and "KNN_GPGPU_LIBRARY" in done.stdout


def test_not_a_knn_library_is_refused():
    env = clean_env()
    libc = "libc.so.6" if sys.platform.startswith("linux") else None
    if libc is None:
        return
    env["KNN_GPGPU_LIBRARY"] = libc
    done = run_python("""
        import knn_gpgpu as knn
        try:
            knn.load_library()
        except knn.LibraryNotFoundError as exc:
            print("refused:", exc)
    """, env)
    assert "refused:" in done.stdout and "buildKdTree" in done.stdout


def copy_of_package(tmp_path, with_library: bool) -> str:
    """The installed package's modules copied under tmp_path (plus the loaded library
    under its run-time name when with_library): a wheel's layout, wherever this runs."""
    import shutil
    root = tmp_path / "site"
    shutil.copytree(os.path.dirname(knn.__file__), root / "knn_gpgpu",
                    ignore=shutil.ignore_patterns("*.so*", "*.dll", "*.dylib", "__pycache__"))
    if with_library:
        real = os.path.realpath(knn.library_path())
        if not os.path.isfile(real):
            return ""
        name = os.path.basename(knn._library._file_names()[0])
        shutil.copy2(real, root / "knn_gpgpu" / name)
        grafted = os.path.join(os.path.dirname(os.path.dirname(real)), "knn_gpgpu.libs")
        if os.path.isdir(grafted):      # what auditwheel repair added (libgomp)
            shutil.copytree(grafted, root / "knn_gpgpu.libs")
    return str(root)


def test_bundled_library_is_found_first(tmp_path, lib):
    site = copy_of_package(tmp_path, with_library=True)
    if not site:
        return                          # loaded by name through the search path
    env = clean_env()
    env["PYTHONPATH"] = site
    done = run_python("""
        import knn_gpgpu as knn
        print(knn.library_path())
        print(knn.version())
    """, env)
    assert done.returncode == 0, done.stderr
    path, version = done.stdout.split()
    assert os.path.dirname(path) == os.path.join(site, "knn_gpgpu")
    assert int(version) == knn.version()


def test_installed_wheel_answers_without_environment(lib):
    """Against an installed wheel (scripts/checks/python-package.sh): the bundled library
    serves, with no KNN_GPGPU_LIBRARY and no LD_LIBRARY_PATH."""
    package_dir = os.path.dirname(os.path.abspath(knn.__file__))
    bundled = [n for n in knn._library._file_names() if os.path.isfile(os.path.join(package_dir, n))]
    if not bundled:
        return                          # a source checkout: nothing bundled
    done = run_python("""
        import numpy as np, knn_gpgpu as knn
        pts = np.array([[0, 0, 0], [1, 0, 0], [0, 3, 0], [0, 0, 2]], dtype=np.float32)
        print(knn.library_path())
        print(knn.query_all(pts, knn.build_kdtree(pts), k=2).tolist())
    """, clean_env())
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == os.path.join(package_dir, bundled[0])
    assert lines[1] == str([[0, 1], [1, 0], [2, 0], [3, 0]])


def test_missing_library_names_what_to_install_or_set(tmp_path):
    site = copy_of_package(tmp_path, with_library=False)
    env = clean_env()
    env["PYTHONPATH"] = site
    done = run_python("""
        import knn_gpgpu as knn
        try:
            print("loaded", knn.library_path())
        except knn.LibraryNotFoundError as exc:
            print("LibraryNotFoundError:", exc)
    """, env)
    assert done.returncode == 0, done.stderr
    if done.stdout.startswith("loaded"):
        return                          # installed on this machine's loader path
    assert done.stdout.startswith("LibraryNotFoundError:"), done.stdout
    for advice in ("pip install ./bindings/python", "cmake --install", "KNN_GPGPU_LIBRARY"):
        assert advice in done.stdout
