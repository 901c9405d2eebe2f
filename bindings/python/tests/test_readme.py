"""The README's Python examples run as written, and print no warning."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Dict

import numpy as np

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples_run_without_warnings(lib: Any) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    # What the mesh example takes from the reader: a closed cube and a scan near it.
    corners = np.array([[x, y, z] for x in (0.0, 1.0) for y in (0.0, 1.0) for z in (0.0, 1.0)])
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    rng = np.random.default_rng(5)
    scan = corners[faces[rng.integers(0, 12, 500), 0]] + rng.normal(0, 0.01, (500, 3))
    namespace: Dict[str, Any] = {"vertices": corners, "faces": faces, "scan": scan}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)
    assert namespace["d2"].dtype == np.float64 and namespace["ind"].dtype == np.int32
