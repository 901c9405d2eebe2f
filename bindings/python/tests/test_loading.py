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
