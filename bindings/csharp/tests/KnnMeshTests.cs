// KnnMeshTests.cs - KnnMesh<float> and KnnMesh<double> against a double oracle
// written here (the closest point of every triangle by its regions: the
// projection when it lies in the triangle, else the nearest clamped point of
// the three edges), signs on a closed cube and an open box, the report by the
// header's nearest-rank rule. Part of the test program of KnnGpgpuTests.cs.
using System;
using System.Linq;
using KnnGpgpu;

static partial class Tests
{
    // The cube [-1, 1]^3: vertex (x, y, z) at 4*[x>0] + 2*[y>0] + [z>0]; 12 outward triangles.
    static double[] CubeVertices()
    {
        var v = new double[24];
        for (int i = 0; i < 8; i++)
        {
            v[3 * i] = (i & 4) != 0 ? 1 : -1;
            v[3 * i + 1] = (i & 2) != 0 ? 1 : -1;
            v[3 * i + 2] = (i & 1) != 0 ? 1 : -1;
        }
        return v;
    }

    static int[] CubeTriangles(bool lid = true)
    {
        int[][] quads = { new[] {0, 1, 3, 2}, new[] {4, 6, 7, 5}, new[] {0, 4, 5, 1}, new[] {2, 3, 7, 6},
                          new[] {0, 2, 6, 4}, new[] {1, 5, 7, 3} };
        return quads.Where(q => lid || q[0] != 1)
                    .SelectMany(q => new[] { q[0], q[1], q[2], q[0], q[2], q[3] }).ToArray();
    }

    // A needle, a point triangle and a repeated vertex after the cube.
    static void WithDegenerates(out double[] v, out int[] t)
    {
        v = CubeVertices().Concat(new double[] { 3, 0, 0, 4, 0, 0, 5, 0, 0, 0, 3, 3 }).ToArray();
        t = CubeTriangles().Concat(new[] { 8, 9, 10, 11, 11, 11, 8, 8, 9 }).ToArray();
    }

    static double[] RandomPoints(int seed, int n, double scale)
    {
        var rng = new Random(seed);
        return Enumerable.Range(0, 3 * n).Select(_ => (rng.NextDouble() * 2 - 1) * scale).ToArray();
    }

    static double Dot(double[] a, double[] b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
    static double[] Sub(double[] a, double[] b) { return new[] { a[0] - b[0], a[1] - b[1], a[2] - b[2] }; }
    static double[] Axpy(double[] a, double s, double[] d) { return new[] { a[0] + s * d[0], a[1] + s * d[1], a[2] + s * d[2] }; }
    static double[] Cross(double[] a, double[] b)
    {
        return new[] { a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0] };
    }
    static double[] Row(double[] v, int i) { return new[] { v[3 * i], v[3 * i + 1], v[3 * i + 2] }; }

    // Squared distance and closest point of triangle (a, b, c) to q, in double.
    static double TriangleClosest(double[] q, double[] a, double[] b, double[] c, out double[] closest)
    {
        double best = double.PositiveInfinity;
        closest = null;
        foreach (var e in new[] { new[] { a, b }, new[] { b, c }, new[] { c, a } })
        {
            var d = Sub(e[1], e[0]);
            double l2 = Dot(d, d);
            double t = l2 > 0 ? Math.Max(0, Math.Min(1, Dot(Sub(q, e[0]), d) / l2)) : 0;
            var p = Axpy(e[0], t, d);
            double dist = Dot(Sub(q, p), Sub(q, p));
            if (dist < best) { best = dist; closest = p; }
        }
        var n = Cross(Sub(b, a), Sub(c, a));
        double nn = Dot(n, n);
        if (nn > 0)
        {
            var proj = Axpy(q, -Dot(Sub(q, a), n) / nn, n);
            bool inside = new[] { new[] { a, b }, new[] { b, c }, new[] { c, a } }
                .All(e => Dot(Cross(Sub(e[1], e[0]), Sub(proj, e[0])), n) >= 0);
            double dist = Dot(Sub(q, proj), Sub(q, proj));
            if (inside && dist < best) { best = dist; closest = proj; }
        }
        return best;
    }

    static double[] PerTriangle(double[] v, int[] t, double[] q, out double[][] closest)
    {
        int nt = t.Length / 3;
        var d = new double[nt];
        closest = new double[nt][];
        for (int j = 0; j < nt; j++)
            d[j] = TriangleClosest(q, Row(v, t[3 * j]), Row(v, t[3 * j + 1]), Row(v, t[3 * j + 2]), out closest[j]);
        return d;
    }

    static bool Near(double a, double b, double tol) { return Math.Abs(a - b) <= tol * Math.Max(1, Math.Max(Math.Abs(a), Math.Abs(b))); }

    static double ToDouble<T>(T x) { return Convert.ToDouble(x); }

    // One generic check for both precisions: what KnnMesh<T> answers against the oracle.
    static void CheckClosest<T>(T[] points, double[] v, int[] t, Func<double, T> convert, double tol) where T : struct
    {
        T[] verts = v.Select(convert).ToArray();
        using (var mesh = new KnnMesh<T>(verts, t))
        {
            Check(mesh.Info.NTriangles == t.Length / 3 && mesh.Info.NVertices == v.Length / 3, "info counts");
            Check(mesh.Info.Scalar == (typeof(T) == typeof(double) ? KnnScalar.Float64 : KnnScalar.Float32), "scalar");
            var r = mesh.Closest(points, barycentric: true);
            var plain = mesh.Closest(points);
            Check(plain.Barycentric == null && plain.TriangleIds.SequenceEqual(r.TriangleIds), "without weights");
            int m = points.Length / 3;
            double[] vd = verts.Select(ToDouble).ToArray();
            for (int i = 0; i < m; i++)
            {
                var q = new[] { ToDouble(points[3 * i]), ToDouble(points[3 * i + 1]), ToDouble(points[3 * i + 2]) };
                double[][] cl;
                var all = PerTriangle(vd, t, q, out cl);
                double best = all.Min();
                int id = r.TriangleIds[i];
                Check(Near(ToDouble(r.SqDistances[i]), best, tol), typeof(T).Name + " distance " + i);
                Check(Near(all[id], best, tol), typeof(T).Name + " triangle " + i);
                Check(Enumerable.Range(0, 3).All(k => Near(ToDouble(r.Closest[3 * i + k]), cl[id][k], tol)),
                      typeof(T).Name + " closest point " + i);
                Check(Enumerable.Range(0, id).All(j => all[j] >= best - tol * (1 + best)), "ties to the smaller id " + i);
                double w0 = ToDouble(r.Barycentric[3 * i]), w1 = ToDouble(r.Barycentric[3 * i + 1]),
                       w2 = ToDouble(r.Barycentric[3 * i + 2]);
                Check(Near(w0 + w1 + w2, 1, tol), "weights sum to one " + i);
                for (int k = 0; k < 3; k++)
                {
                    double rebuilt = w0 * vd[3 * t[3 * id] + k] + w1 * vd[3 * t[3 * id + 1] + k] + w2 * vd[3 * t[3 * id + 2] + k];
                    Check(Near(rebuilt, ToDouble(r.Closest[3 * i + k]), 4 * tol), "weights rebuild the point " + i);
                }
            }
        }
    }

    static void MeshClosestMatchesADoubleOracle()
    {
        double[] v;
        int[] t;
        WithDegenerates(out v, out t);
        var points = RandomPoints(17, 150, 3);
        Array.Copy(new double[] { 1, 1, 1, 0, -1, -1 }, points, 6);   // a vertex, an edge midpoint
        CheckClosest(points, v, t, x => x, 1e-12);
        CheckClosest(points.Select(x => (float)x).ToArray(), v, t, x => (float)x, 1e-5);
        using (var mesh = new KnnMesh<double>(v, t))
        {
            var r = mesh.Closest(points);
            Check(r.SqDistances[0] == 0 && r.SqDistances[1] == 0, "points on the surface");
            Check(!mesh.Info.ClosedOriented, "degenerate triangles open the cube");
        }
    }

    static void MeshMaxDistance()
    {
        var v = CubeVertices();
        var t = CubeTriangles();
        var points = RandomPoints(5, 80, 4);
        using (var mesh = new KnnMesh<double>(v, t))
        {
            var r = mesh.Closest(points, 1.5);
            int[] ids;
            var sd = mesh.SignedDistance(points, out ids, 1.5);
            int beyond = 0;
            for (int i = 0; i < 80; i++)
            {
                double[][] cl;
                double best = PerTriangle(v, t, Row(points, i), out cl).Min();
                if (best > 2.25)
                {
                    beyond++;
                    Check(r.TriangleIds[i] == -1 && ids[i] == -1, "id -1 beyond");
                    Check(double.IsPositiveInfinity(r.SqDistances[i]) && double.IsPositiveInfinity(sd[i]), "+inf beyond");
                    Check(double.IsNaN(r.Closest[3 * i]), "NaN closest point beyond");
                }
                else Check(r.TriangleIds[i] >= 0 && Near(r.SqDistances[i], best, 1e-12), "within " + i);
            }
            Check(beyond > 0 && beyond < 80, "some beyond, some within");
        }
    }

    static void MeshSignsOnClosedAndOpenMeshes()
    {
        var v = CubeVertices();
        using (var cube = new KnnMesh<double>(v, CubeTriangles()))
        using (var flipped = new KnnMesh<double>(v, CubeTriangles().Select((x, i) => CubeTriangles()[i - i % 3 + 2 - i % 3]).ToArray()))
        using (var box = new KnnMesh<double>(v, CubeTriangles(lid: false)))
        {
            Check(cube.Info.ClosedOriented && flipped.Info.ClosedOriented && !box.Info.ClosedOriented,
                  "closed and oriented: the cube both ways, not the open box");
            var inner = RandomPoints(7, 60, 0.9);
            var outer = RandomPoints(8, 60, 3);
            var sdIn = cube.SignedDistance(inner);
            var sdOut = cube.SignedDistance(outer);
            var back = flipped.SignedDistance(outer);
            for (int i = 0; i < 60; i++)
            {
                var q = Row(inner, i);
                double exact = q.Select(Math.Abs).Max() - 1;
                Check(Near(sdIn[i], exact, 1e-15), "inside " + i);
                var p = Row(outer, i);
                bool outside = p.Select(Math.Abs).Max() > 1;
                double[][] cl;
                double d = Math.Sqrt(PerTriangle(v, CubeTriangles(), p, out cl).Min());
                Check((sdOut[i] > 0) == outside && Near(Math.Abs(sdOut[i]), d, 1e-12), "outer " + i);
                Check((back[i] < 0) == outside && Near(back[i], -sdOut[i], 1e-12), "flipped " + i);
            }
            var sdBox = box.SignedDistance(new double[] { 0, 0, -0.5, 0.5, -0.5, 0, 6, 0, 0, 0, -7, 1 });
            Check(sdBox[0] < 0 && sdBox[1] < 0, "inside the open box (winding number)");
            Check(sdBox[2] > 0 && sdBox[3] > 0 && Near(sdBox[2], 5, 1e-15), "outside the open box");
            var f = cube.SignedDistance(new double[] { 1, 0.25, -0.5 });
            Check(f[0] == 0 && BitConverter.DoubleToInt64Bits(f[0]) == 0, "+0 on the surface");
        }
    }

    static double NearestRank(double[] sorted, double p)
    {
        int k = Math.Max((int)Math.Ceiling(p / 100 * sorted.Length) - 1, 0);
        return sorted[k];
    }

    static void MeshDeviationReport()
    {
        var points = RandomPoints(12, 500, 1.3);
        double[] pct = { 0, 0.5, 10, 50, 90, 99.5, 100 };
        double[] edges = { -0.5, -0.1, 0, 0.1, 0.2 };
        foreach (bool f64 in new[] { true, false })
        {
            double[] sd;
            KnnDeviationReport<double> r64 = null;
            KnnDeviationReport<float> r32 = null;
            if (f64)
                using (var mesh = new KnnMesh<double>(CubeVertices(), CubeTriangles()))
                {
                    r64 = mesh.DeviationReport(points, 0.1, pct, edges, 0.25, wantDistances: true);
                    sd = mesh.SignedDistance(points, 0.25);
                    Check(r64.SignedDistances.SequenceEqual(sd), "per-point values");
                }
            else
                using (var mesh = new KnnMesh<float>(CubeVertices().Select(x => (float)x).ToArray(), CubeTriangles()))
                {
                    var pf = points.Select(x => (float)x).ToArray();
                    r32 = mesh.DeviationReport(pf, 0.1, pct, edges, 0.25, wantDistances: true);
                    var sdf = mesh.SignedDistance(pf, 0.25);
                    Check(r32.SignedDistances.SequenceEqual(sdf), "per-point values (float)");
                    sd = sdf.Select(x => (double)x).ToArray();
                }
            var s = f64 ? r64.Summary : r32.Summary;
            var values = f64 ? r64.PercentileValues : r32.PercentileValues;
            var counts = f64 ? r64.BinCounts : r32.BinCounts;
            var measured = sd.Where(x => !double.IsInfinity(x)).OrderBy(x => x).ToArray();
            string tag = f64 ? "double " : "float ";
            Check(s.NPoints == 500 && s.NMeasured == measured.Length && s.NBeyond == 500 - measured.Length, tag + "counts");
            Check(measured.Length > 0 && measured.Length < 500, tag + "some beyond");
            Check(s.Min == measured[0] && s.Max == measured[measured.Length - 1], tag + "min max");
            Check(Near(s.Mean, measured.Average(), 1e-12), tag + "mean");
            Check(Near(s.Rms, Math.Sqrt(measured.Select(x => x * x).Average()), 1e-12), tag + "rms");
            Check(values.SequenceEqual(pct.Select(p => NearestRank(measured, p))), tag + "nearest rank");
            Check(s.NWithinTolerance == measured.Count(d => d >= -0.1 && d <= 0.1), tag + "within");
            Check(s.NAboveTolerance == measured.Count(d => d > 0.1), tag + "above");
            Check(s.NBelowTolerance == measured.Count(d => d < -0.1), tag + "below");
            var expect = Enumerable.Range(0, 4).Select(b => (long)measured.Count(
                d => (edges[b] <= d && d < edges[b + 1]) || (b == 3 && d == edges[4]))).ToArray();
            Check(counts.SequenceEqual(expect), tag + "histogram");
            Check(s.NBelowBins == measured.Count(d => d < edges[0]) && s.NAboveBins == measured.Count(d => d > edges[4]),
                  tag + "outside the bins");
        }
    }

    static void MeshSerializeRoundTrip()
    {
        double[] v;
        int[] t;
        WithDegenerates(out v, out t);
        var points = RandomPoints(3, 40, 3);
        using (var mesh = new KnnMesh<float>(v.Select(x => (float)x).ToArray(), t))
        {
            var bytes = mesh.Serialize();
            using (var loaded = KnnMesh.Deserialize(bytes))
            {
                var back = loaded as KnnMesh<float>;
                Check(back != null, "a float mesh loads as KnnMesh<float>");
                Check(back.Serialize().SequenceEqual(bytes), "saves to the same bytes");
                var pf = points.Select(x => (float)x).ToArray();
                var a = mesh.Closest(pf, barycentric: true);
                var b = back.Closest(pf, barycentric: true);
                Check(a.TriangleIds.SequenceEqual(b.TriangleIds) && a.SqDistances.SequenceEqual(b.SqDistances) &&
                      a.Closest.SequenceEqual(b.Closest) && a.Barycentric.SequenceEqual(b.Barycentric), "same answers");
            }
            Throws<KnnInvalidArgumentException>(() => KnnMesh.Deserialize(bytes.Take(bytes.Length - 1).ToArray()),
                                                "truncated bytes");
        }
        using (var mesh = new KnnMesh<double>(v, t))
        using (var loaded = KnnMesh.Deserialize(mesh.Serialize()))
            Check(loaded is KnnMesh<double> && loaded.Info.NTriangles == 15, "a double mesh loads as KnnMesh<double>");
        Throws<KnnInvalidArgumentException>(() => KnnMesh.Deserialize(Enumerable.Repeat((byte)7, 40).ToArray()), "garbage");
    }

    static void MeshErrors()
    {
        var v = CubeVertices();
        var t = CubeTriangles();
        var e = Throws<KnnInvalidArgumentException>(() => new KnnMesh<double>(v, t.Concat(new[] { 0, 1, 99 }).ToArray()),
                                                    "index out of range");
        if (e != null) Check(e.NativeMessage.Contains("99") && e.Function == "knn_mesh_build_f64", e.Message);
        var bad = (double[])v.Clone();
        bad[13] = double.NaN;
        var n = Throws<KnnNonfiniteInputException>(() => new KnnMesh<double>(bad, t), "NaN vertex");
        if (n != null) Check(n.NativeMessage.Contains("4"), n.Message);
        Throws<KnnNonfiniteInputException>(() => new KnnMesh<float>(bad.Select(x => (float)x).ToArray(), t), "NaN float vertex");
        Throws<KnnInvalidArgumentException>(() => new KnnMesh<double>(v, new int[0]), "no triangle");
        Throws<ArgumentException>(() => new KnnMesh<double>(v, new[] { 0, 1 }), "a partial triangle");
        using (var mesh = new KnnMesh<double>(v, t))
        {
            var p = new double[] { 0, 0, 5 };
            Throws<KnnInvalidArgumentException>(() => mesh.Closest(p, -1), "negative max distance");
            Throws<KnnInvalidArgumentException>(() => mesh.SignedDistance(p, double.NaN), "NaN max distance");
            Throws<KnnInvalidArgumentException>(() => mesh.DeviationReport(p, -1), "negative tolerance");
            Throws<KnnInvalidArgumentException>(() => mesh.DeviationReport(p, 0.1, new double[] { 101 }), "percentile 101");
            Throws<KnnInvalidArgumentException>(() => mesh.DeviationReport(p, 0.1, null, new double[] { 1, 0 }),
                                                "descending edges");
            Throws<ArgumentException>(() => mesh.Closest(new double[] { 0, 0 }), "a partial point");
            Check(mesh.Closest(p).TriangleIds[0] == 10, "the lid's diagonal: ties to the smaller id");
            mesh.Dispose();
            Throws<ObjectDisposedException>(() => mesh.Closest(p), "disposed");
        }
        ulong small = KnnMesh.EstimateBytes(1000, 2000, KnnScalar.Float32),
              big = KnnMesh.EstimateBytes(1000000, 2000000, KnnScalar.Float32),
              wide = KnnMesh.EstimateBytes(1000000, 2000000, KnnScalar.Float64);
        Check(KnnMesh.EstimateBytes(-1, 10, KnnScalar.Float32) == 0, "impossible sizes estimate 0");
        Check(big >= small && wide >= big, "estimates grow");
        if (HasDevice())   // a CUDA build's model (a build without CUDA answers 0)
            Check(small > 0 && big > small && wide > big, "estimates of a CUDA build");
    }

    // ---- alignment -----------------------------------------------------------------------

    // CubeVertices scaled to [-1, 1] x [-0.7, 0.7] x [-0.5, 0.5] with the corner (+, +, +) pulled
    // out to (1.4, 1.1, 0.9): closed, and no rigid motion but the identity maps it onto itself.
    static double[] SkewedBoxVertices()
    {
        var v = CubeVertices();
        for (int i = 0; i < 8; i++)
        {
            v[3 * i + 1] *= 0.7;
            v[3 * i + 2] *= 0.5;
        }
        v[21] = 1.4; v[22] = 1.1; v[23] = 0.9;
        return v;
    }

    // n(n+1)/2 points inside each triangle, on a regular barycentric grid.
    static double[] SurfaceSamples(double[] v, int[] t, int n)
    {
        var points = new System.Collections.Generic.List<double>();
        for (int f = 0; f < t.Length / 3; f++)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n - i; j++)
                {
                    double a = (i + 1.0 / 3) / n, b = (j + 1.0 / 3) / n, c = 1 - a - b;
                    for (int k = 0; k < 3; k++)
                        points.Add(a * v[3 * t[3 * f] + k] + b * v[3 * t[3 * f + 1] + k] + c * v[3 * t[3 * f + 2] + k]);
                }
        return points.ToArray();
    }

    // The rotation by angle about axis (Rodrigues), row-major 3 x 3.
    static double[,] Rotation(double[] axis, double angle)
    {
        double norm = Math.Sqrt(axis.Sum(x => x * x));
        var k = axis.Select(x => x / norm).ToArray();
        double c = Math.Cos(angle), s = Math.Sin(angle);
        var cross = new double[,] { { 0, -k[2], k[1] }, { k[2], 0, -k[0] }, { -k[1], k[0], 0 } };
        var r = new double[3, 3];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                r[i, j] = (i == j ? c : 0) + (1 - c) * k[i] * k[j] + s * cross[i, j];
        return r;
    }

    // The 4 x 4 matrix of x -> r x + t.
    static double[,] Rigid(double[,] r, double[] t)
    {
        var m = new double[4, 4];
        for (int i = 0; i < 3; i++)
        {
            for (int j = 0; j < 3; j++) m[i, j] = r[i, j];
            m[i, 3] = t[i];
        }
        m[3, 3] = 1;
        return m;
    }

    static bool SameTransform(double[,] a, double[,] b, double tol)
    {
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                if (!(Math.Abs(a[i, j] - b[i, j]) <= tol)) return false;
        return true;
    }

    // The scan is the sampled surface moved by x -> R x + t; the fit must find the inverse,
    // x -> R^T x - R^T t, computed here.
    static void AlignRecoversARigidMotion<T>(Func<double, T> convert, double tol) where T : struct
    {
        var v = SkewedBoxVertices();
        var tris = CubeTriangles();
        var surface = SurfaceSamples(v, tris, 8);
        var r = Rotation(new double[] { 1, 2, 3 }, 0.08);
        var t = new double[] { 0.05, -0.03, 0.04 };
        int m = surface.Length / 3;
        var scan = new T[3 * m];
        for (int p = 0; p < m; p++)
            for (int i = 0; i < 3; i++)
                scan[3 * p + i] = convert(r[i, 0] * surface[3 * p] + r[i, 1] * surface[3 * p + 1] +
                                          r[i, 2] * surface[3 * p + 2] + t[i]);
        var rt = new double[3, 3];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) rt[i, j] = r[j, i];
        var back = Enumerable.Range(0, 3).Select(i => -(rt[i, 0] * t[0] + rt[i, 1] * t[1] + rt[i, 2] * t[2])).ToArray();
        var want = Rigid(rt, back);
        string name = typeof(T).Name;
        using (var mesh = new KnnMesh<T>(v.Select(convert).ToArray(), tris))
        {
            Check(mesh.Info.ClosedOriented, name + " skewed box closed");
            var fit = mesh.Align(scan, maxCorrespondence: 0.5);
            Check(fit.Converged, name + " converged");
            Check(fit.NKept == m, name + " every point kept: " + fit.NKept);
            Check(fit.Iterations > 1 && fit.Iterations < 50, name + " iterations " + fit.Iterations);
            Check(fit.Rms < tol, name + " rms " + fit.Rms);
            Check(fit.DegenerateDirections == KnnAlignDirections.None && fit.NDegenerate == 0,
                  name + " every direction observed");
            Check(SameTransform(fit.Transform, want, tol), name + " the inverse motion recovered");
            // one step from there is not the fit: the cap is obeyed and said
            var step = mesh.Align(scan, maxIterations: 1);
            Check(step.Iterations == 1 && !step.Converged, name + " one step has not converged");
            // started at the answer, it stays there
            var again = mesh.Align(scan, want);
            Check(again.Converged && SameTransform(again.Transform, want, tol), name + " started at the answer");
        }
    }

    static void MeshAlignRecoversARigidMotion()
    {
        AlignRecoversARigidMotion<double>(x => x, 1e-6);
        AlignRecoversARigidMotion<float>(x => (float)x, 1e-4);
    }

    static void MeshAlignErrors()
    {
        var v = SkewedBoxVertices();
        var t = CubeTriangles();
        var p = SurfaceSamples(v, t, 3);
        using (var mesh = new KnnMesh<double>(v, t))
        {
            var e = Throws<KnnInvalidArgumentException>(() => mesh.Align(p, maxIterations: -1), "max_iterations -1");
            if (e != null) Check(e.NativeMessage.Contains("max_iterations") && e.Function == "knn_mesh_align_ex_f64",
                                 e.Message);
            var scaled = Rigid(new double[,] { { 2, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, new double[3]);
            Throws<KnnInvalidArgumentException>(() => mesh.Align(p, scaled), "a scaling is no rigid motion");
            Throws<KnnInvalidArgumentException>(() => mesh.Align(p, keptFraction: 2), "kept fraction 2");
            Throws<KnnInvalidArgumentException>(() => mesh.Align(p, maxCorrespondence: -1), "negative max correspondence");
            Throws<ArgumentException>(() => mesh.Align(p, new double[3, 3]), "a 3 x 3 initial");
            Check(mesh.Align(p).Converged, "the next call works");
        }
    }
}
