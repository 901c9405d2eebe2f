"""Device functions without (or with) a GPU, as the header documents them."""

from __future__ import annotations

import numpy as np
import pytest

import knn_gpgpu as knn
from knn_gpgpu import Status

from conftest import oracle, random_points


def test_device_count_is_not_an_error(lib):
    count = knn.get_device_count()
    assert count >= 0
    assert knn.last_error() == ""


def test_without_a_device(lib, has_device):
    if has_device:
        pytest.skip("a CUDA device is usable here")
    assert knn.get_device() == -1
    assert knn.free_bytes_on_gpu() == 0
    with pytest.raises(knn.NoDeviceError) as info:
        knn.set_device(0)
    assert info.value.status == Status.NO_DEVICE and info.value.status_name == "NO_DEVICE"
    assert info.value.function == "cuSetDevice"
    pts = random_points(1, 40)
    with pytest.raises(knn.NoDeviceError) as info:
        knn.cu_build_kdtree(pts)
    assert info.value.message.startswith("cuBuildKdTree")
    tree = knn.build_kdtree(pts)                   # the automatic path runs on the CPU
    with pytest.raises(knn.NoDeviceError):
        knn.cu_query_all(pts, tree, 3)
    np.testing.assert_array_equal(knn.query_all(pts, tree, 3), oracle(pts, pts, 3)[1])


def test_with_a_device(lib, has_device):
    if not has_device:
        pytest.skip("no CUDA device")
    assert 0 <= knn.get_device() < knn.get_device_count()
    knn.set_device(knn.get_device())
    assert knn.free_bytes_on_gpu() > 0
    with pytest.raises(knn.InvalidArgumentError):
        knn.set_device(knn.get_device_count())


def test_set_device_negative_is_refused(lib):
    with pytest.raises((knn.InvalidArgumentError, knn.NoDeviceError)):
        knn.set_device(-1)


def test_device_memory_helpers_need_no_device(lib):
    assert knn.needed_bytes_for_building_kdtree(10**6) > 24 * 10**6
    assert knn.needed_bytes_for_query_all(10**5, 16, 10**6) > 0
    assert knn.estimate_build_bytes(10**6, 3) > 0
    assert knn.estimate_query_bytes(10**5, 16, 10**6, 3) > 0
