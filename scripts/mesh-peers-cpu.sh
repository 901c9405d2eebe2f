#!/usr/bin/env bash
# The mesh side-by-side on a machine without a GPU (issue 48, item 8): our
# OpenMP engine against libigl, CGAL and Open3D on the same cores, one table
# last. scripts/mesh-peers.sh says what runs; this is its cpu mode.
#   scripts/mesh-peers-cpu.sh [MESH ...]   (MESH_SCANS, MESH_PEERS_PYTHON as there)
# Open3D: python3 -m venv .peers-venv && .peers-venv/bin/pip install open3d-cpu
MESH_PEERS_MODE=cpu exec "$(dirname "$0")/mesh-peers.sh" "$@"
