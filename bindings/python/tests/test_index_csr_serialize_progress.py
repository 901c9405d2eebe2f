"""CSR radius rows, serialization and progress of the index API, against the
numpy oracle (conftest.oracle) and the index's own answers."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import ProgressStage

from conftest import oracle, random_points


def structures(dim):
    return ["kdtree", "brute_force"] + (["grid"] if dim == 3 else [])


def backends(has_device):
    return ["openmp"] + (["cuda"] if has_device else [])


def csr_oracle(pts, queries, radius):
    """Every point within radius (float32 r*r, inclusive), by (distance, index)."""
    r2 = np.float32(radius) * np.float32(radius)
    d, i = oracle(pts, queries, pts.shape[0])
    keep = d <= r2
    counts = keep.sum(axis=1)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return i[keep], d[keep], offsets


@pytest.mark.parametrize("dim", [2, 3, 5])
def test_radius_csr_matches_oracle(lib, has_device, dim):
    pts = random_points(60 + dim, 500, dim, "lattice")          # integer grid: distances tie
    queries = random_points(61 + dim, 40, dim, "lattice")
    for backend in backends(has_device):
        for structure in structures(dim):
            with knn.Index(pts, backend=backend, structure=structure) as index:
                for radius in (0.0, 1.0, 2.5, np.inf):
                    want_i, want_d, want_o = csr_oracle(pts, queries, radius)
                    what = "%s %s r=%g" % (backend, structure, radius)
                    res = index.radius_csr(queries, radius)
                    np.testing.assert_array_equal(res.offsets, want_o, err_msg=what)
                    np.testing.assert_array_equal(res.indices, want_i, err_msg=what)
                    assert res.sq_distances.tobytes() == want_d.tobytes(), what
                    np.testing.assert_array_equal(index.radius_counts(queries, radius),
                                                  np.diff(want_o), err_msg=what)
                assert index.radius_csr(queries, 1.0, distances=False).sq_distances is None


def test_radius_fill_refuses_offsets_that_disagree(lib):
    pts = random_points(70, 300, 3)
    q = random_points(71, 10, 3)
    with knn.Index(pts, backend="openmp") as index, index._use() as handle:
        counts = index.radius_counts(q, 40.0)
        assert counts.sum() > 0
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        offsets[3] += 1
        ind = np.full(int(offsets[-1]) + 1, -7, np.int32)
        status = knn.native().knn_index_radius_fill(
            handle, q.ctypes.data_as(knn._library._P_FLOAT), 10, 40.0,
            offsets.ctypes.data_as(knn._library._P_INT64),
            ind.ctypes.data_as(knn._library._P_INT32), None, None)
        assert status == knn.Status.INVALID_ARGUMENT
        assert "offsets[3] is %d but the counts give %d" % (offsets[3], offsets[3] - 1) \
            in knn.last_error()
        # Offsets a search could give: the rows' one search finds the
        # disagreement, the outputs the offsets cover are all missing.
        assert (ind[:-1] == -1).all() and ind[-1] == -7
        offsets[0] = 1  # no search gives these: refused before anything is written
        ind[:] = -7
        status = knn.native().knn_index_radius_fill(
            handle, q.ctypes.data_as(knn._library._P_FLOAT), 10, 40.0,
            offsets.ctypes.data_as(knn._library._P_INT64),
            ind.ctypes.data_as(knn._library._P_INT32), None, None)
        assert status == knn.Status.INVALID_ARGUMENT
        assert "offsets[0] is 1 but the counts give 0" in knn.last_error()
        assert (ind == -7).all()


def test_serialize_round_trip_answers_bit_identically(lib, has_device):
    pts = random_points(80, 2000, 3, "duplicates")
    q = random_points(81, 100, 3, "duplicates")
    for backend in backends(has_device):
        for structure in structures(3):
            with knn.Index(pts, backend=backend, structure=structure) as index:
                data = index.serialize()
                assert len(data) == 64 + pts.size * 4 + 4 and data[:8] == b"KNNGINDX"
                for load_on in backends(has_device):
                    with knn.Index.deserialize(data, backend=load_on) as loaded:
                        assert loaded.n == index.n and loaded.dim == 3
                        assert loaded.info().structure == index.info().structure
                        a_d, a_i = index.query(q, 7)
                        b_d, b_i = loaded.query(q, 7)
                        np.testing.assert_array_equal(a_i, b_i)
                        assert a_d.tobytes() == b_d.tobytes()
                        want_d, want_i = oracle(pts, q, 7)
                        np.testing.assert_array_equal(b_i, want_i)
                        assert loaded.serialize() == data


def test_deserialize_refuses_corrupted_and_truncated_buffers(lib):
    with knn.Index(random_points(90, 50, 2), backend="openmp") as index:
        data = index.serialize()
    with pytest.raises(knn.InvalidArgumentError, match="truncated"):
        knn.Index.deserialize(data[:-1])
    with pytest.raises(knn.InvalidArgumentError, match="truncated"):
        knn.Index.deserialize(b"")
    bad = bytearray(data)
    bad[100] ^= 0x10
    with pytest.raises(knn.InvalidArgumentError, match="CRC-32C"):
        knn.Index.deserialize(bytes(bad))
    with pytest.raises(knn.InvalidArgumentError, match="magic"):
        knn.Index.deserialize(b"X" + data[1:])
    with pytest.raises(knn.InvalidArgumentError, match="trailing bytes"):
        knn.Index.deserialize(data + b"\0")


def test_progress_polled_from_another_thread(lib):
    pts = random_points(95, 200000, 3)
    q = random_points(96, 200000, 3)
    with knn.Index(pts, backend="openmp") as index:
        progress = knn.Progress()
        seen = []
        running = threading.Event()
        running.set()

        def poll():
            while running.is_set():
                seen.append(progress.snapshot())

        with progress:
            assert progress.snapshot() == (0, ProgressStage.IDLE, 0, 0)
            poller = threading.Thread(target=poll)
            poller.start()
            try:
                index.query(q, 8)
            finally:
                running.clear()
                poller.join()
            last = progress.snapshot()
        assert last.stage == ProgressStage.QUERY and last.done == last.total == 200000
        assert last.fraction == 1.0
        previous = None
        for s in seen:
            assert 0 <= s.done <= s.total or s.total == 0
            if previous is not None and previous[:3] == s[:3]:
                assert s.done >= previous.done
            previous = s
