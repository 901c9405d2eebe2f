"""Shared fixtures: the numpy oracle, the C layout table, paths.

Environment:
    KNN_GPGPU_LIBRARY   full path of libknn_gpgpu (else the binding's search)
    KNN_GPGPU_INCLUDE   directory holding knn_gpgpu.h (else the repository's include/)
    KNN_ABI_LAYOUT      a file printed by bindings/abi_layout.c (else the test compiles it)
    CC                  C compiler for abi_layout.c (default: cc)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import pytest

import knn_gpgpu

TESTS_DIR = Path(__file__).resolve().parent
BINDINGS_DIR = TESTS_DIR.parent.parent
REPO_DIR = BINDINGS_DIR.parent


def include_dir() -> Path:
    env = os.environ.get("KNN_GPGPU_INCLUDE")
    return Path(env) if env else REPO_DIR / "include"


# The parts knn_gpgpu.h includes.
HEADER_PARTS = (
    "knn_gpgpu_classic.h",
    "knn_gpgpu_index.h",
    "knn_gpgpu_quadtree.h",
    "knn_gpgpu_mesh.h",
    "knn_gpgpu_stats.h",
)


def header_text() -> str:
    """knn_gpgpu.h and its exported parts, one text."""
    return "".join((include_dir() / name).read_text() for name in ("knn_gpgpu.h",) + HEADER_PARTS)


def oracle(ref: np.ndarray, queries: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Exact kNN with the contract's float32 distance ((d0*d0 + d1*d1) + d2*d2) + ...

    Every operation is a separate float32 numpy operation (rounded, never
    fused); ties go to the smaller index (stable sort of an index-ordered row).
    Missing slots: index -1, distance +inf.
    """
    ref = np.asarray(ref, dtype=np.float32)
    queries = np.asarray(queries, dtype=np.float32)
    m, n = queries.shape[0], ref.shape[0]
    ind = np.full((m, k), -1, dtype=np.int32)
    dist = np.full((m, k), np.inf, dtype=np.float32)
    if m == 0 or n == 0:
        return dist, ind
    take = min(k, n)
    for start in range(0, m, 256):
        q = queries[start:start + 256]
        d = q[:, None, :] - ref[None, :, :]
        sq = d * d
        acc = sq[..., 0]
        for j in range(1, ref.shape[1]):
            acc = acc + sq[..., j]
        order = np.argsort(acc, axis=1, kind="stable")[:, :take]
        ind[start:start + 256, :take] = order
        dist[start:start + 256, :take] = np.take_along_axis(acc, order, axis=1)
    return dist, ind


def oracle64(ref: np.ndarray, queries: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Exact kNN in float64 with the contract's order of operations; -1/+inf padding."""
    ref = np.asarray(ref, dtype=np.float64)
    queries = np.asarray(queries, dtype=np.float64)
    m, n = queries.shape[0], ref.shape[0]
    ind = np.full((m, k), -1, dtype=np.int32)
    dist = np.full((m, k), np.inf, dtype=np.float64)
    acc = all_sq64(ref, queries)
    take = min(k, n)
    order = np.argsort(acc, axis=1, kind="stable")[:, :take]
    ind[:, :take] = order
    dist[:, :take] = np.take_along_axis(acc, order, axis=1)
    return dist, ind


def all_sq64(ref: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """(m, n) squared distances, ((d0*d0 + d1*d1) + d2*d2) + ... in float64."""
    d = queries[:, None, :] - ref[None, :, :]
    sq = d * d
    acc = sq[..., 0]
    for j in range(1, ref.shape[1]):
        acc = acc + sq[..., j]
    return acc


@pytest.fixture(scope="session")
def lib() -> knn_gpgpu.Native:
    return knn_gpgpu.load_library()


@pytest.fixture(scope="session")
def has_device(lib) -> bool:
    return knn_gpgpu.get_device_count() > 0


def _compile_layout(tmpdir: Path) -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler to compile bindings/abi_layout.c (set KNN_ABI_LAYOUT)")
    exe = tmpdir / "abi_layout"
    subprocess.run([cc, "-std=c99", "-I", str(include_dir()), str(BINDINGS_DIR / "abi_layout.c"),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="session")
def c_layout(tmp_path_factory) -> Dict[str, int]:
    """{"sizeof.Node": 24, "offsetof.Node.left": 12, "const.KNN_OK": 0, ...} from the C compiler."""
    path = os.environ.get("KNN_ABI_LAYOUT")
    text = Path(path).read_text() if path else _compile_layout(tmp_path_factory.mktemp("abi"))
    table = {}
    for line in text.splitlines():
        if line.strip():
            name, value = line.rsplit(None, 1)
            table[name] = int(value)
    return table


def random_points(seed: int, n: int, dim: int = 3, kind: str = "uniform") -> np.ndarray:
    """Test clouds: uniform, duplicates (many exact ties), lattice (integer grid
    with equal distances), clustered (tight blobs far apart)."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        pts = rng.uniform(-100.0, 100.0, size=(n, dim))
    elif kind == "duplicates":
        base = rng.uniform(-1.0, 1.0, size=(max(1, n // 8), dim))
        pts = base[rng.integers(0, base.shape[0], size=n)]
    elif kind == "lattice":
        pts = rng.integers(-3, 4, size=(n, dim)).astype(np.float64)
    elif kind == "clustered":
        centres = rng.uniform(-1e4, 1e4, size=(4, dim))
        pts = centres[rng.integers(0, 4, size=n)] + rng.normal(0.0, 1e-3, size=(n, dim))
    else:
        raise ValueError(kind)
    return np.ascontiguousarray(pts, dtype=np.float32)
