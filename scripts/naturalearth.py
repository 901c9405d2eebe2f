#!/usr/bin/env python3
"""Writes Natural Earth's 1:110m countries as a compact GeoJSON file for the
point-in-polygon benchmark (`knn-gpgpu bench pip --polygons FILE`).

    scripts/naturalearth.py [--wheel geopandas-0.14.4-py3-none-any.whl] \\
        [--out bench/data/naturalearth_lowres.geojson]

The shapefile comes from the geopandas 0.14.x wheel on PyPI, which ships
Natural Earth's 'naturalearth_lowres' (177 countries, 1:110m) in
geopandas/datasets/. Without --wheel the script runs
`pip download geopandas==0.14.4 --no-deps` into a temporary folder. It reads
the shapefile with pyshp (`pip install pyshp`) and writes one Feature per
country ("name" property; Polygon or MultiPolygon; longitude, latitude with
4 decimals, about 10 m, far below the data's own 1:110m precision).

Natural Earth is in the public domain (https://www.naturalearthdata.com/about/terms-of-use/).
"""
import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile

SHAPE = "geopandas/datasets/naturalearth_lowres/naturalearth_lowres"


def wheel_path(given):
    if given:
        return given
    folder = tempfile.mkdtemp(prefix="naturalearth-")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", folder,
                    "geopandas==0.14.4"], check=True)
    (name,) = [f for f in os.listdir(folder) if f.endswith(".whl")]
    return os.path.join(folder, name)


def rings_of(shape):
    """The shape's rings as lists of [lon, lat] (pyshp: parts index into points),
    rounded, without consecutive repeats; rings that rounding leaves with fewer
    than 3 distinct vertices (slivers of a few metres) are dropped."""
    bounds = list(shape.parts) + [len(shape.points)]
    rings = []
    for a, b in zip(bounds, bounds[1:]):
        ring = []
        for x, y in shape.points[a:b]:
            v = [round(x, 4), round(y, 4)]
            if not ring or ring[-1] != v:
                ring.append(v)
        if len({tuple(v) for v in ring}) >= 3:
            rings.append(ring)
    return rings


def signed_area(ring):
    return 0.5 * sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(ring, ring[1:] + ring[:1]))


def polygons_of(rings):
    """Shapefile rings -> GeoJSON polygons: an outer ring (clockwise in a
    shapefile) starts a polygon, the counter-clockwise holes after it join it."""
    polygons = []
    for ring in rings:
        if signed_area(ring) <= 0 or not polygons:
            polygons.append([ring])
        else:
            polygons[-1].append(ring)
    return polygons


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wheel", help="a downloaded geopandas 0.14.x wheel")
    parser.add_argument("--out", default="bench/data/naturalearth_lowres.geojson")
    args = parser.parse_args()
    try:
        import shapefile  # pyshp
    except ImportError:
        sys.exit("needs pyshp: pip install pyshp")
    with zipfile.ZipFile(wheel_path(args.wheel)) as wheel:
        files = {ext: io.BytesIO(wheel.read(f"{SHAPE}.{ext}")) for ext in ("shp", "shx", "dbf")}
        encoding = wheel.read(f"{SHAPE}.cpg").decode("ascii").strip()  # the .dbf's text encoding
    reader = shapefile.Reader(shp=files["shp"], shx=files["shx"], dbf=files["dbf"],
                              encoding=encoding)
    features = []
    for record, shape in zip(reader.records(), reader.shapes()):
        polygons = polygons_of(rings_of(shape))
        geometry = ({"type": "Polygon", "coordinates": polygons[0]} if len(polygons) == 1
                    else {"type": "MultiPolygon", "coordinates": polygons})
        features.append({"type": "Feature", "properties": {"name": record["name"]},
                         "geometry": geometry})
    doc = {"type": "FeatureCollection",
           "source": "Natural Earth 1:110m countries (public domain), from geopandas 0.14.4",
           "features": features}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    parts = sum(1 if f["geometry"]["type"] == "Polygon" else len(f["geometry"]["coordinates"])
                for f in features)
    print(f"wrote {args.out}: {len(features)} countries, {parts} polygons, "
          f"{os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
