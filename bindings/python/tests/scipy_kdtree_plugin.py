"""A pytest plugin that puts knn_gpgpu's KDTree in the place of scipy's.

Loaded with ``-p scipy_kdtree_plugin`` (this directory on ``sys.path``) by
test_scipy_suite.py before scipy's own ``scipy/spatial/tests/test_kdtree.py``
is imported, so that file's ``from scipy.spatial import KDTree, cKDTree``
(and the fixtures and classes it builds from them) test knn_gpgpu's class.
"""

from __future__ import annotations

import scipy.spatial

import knn_gpgpu

scipy.spatial.KDTree = knn_gpgpu.KDTree
scipy.spatial.cKDTree = knn_gpgpu.cKDTree
