// KnnStatsTests.cs - the neighbourhood statistics (KnnStats) against a double
// oracle written here: brute-force neighbourhoods with the contract's
// distances (ties by index), each one's scatter matrix and its smallest
// eigenvector by power iteration on (trace I - S), the scores, thresholds and
// counts by the header's definitions. Part of the test program of
// KnnGpgpuTests.cs.
using System;
using System.Linq;
using System.Runtime.InteropServices;
using KnnGpgpu;

static partial class Tests
{
    // N points on the sphere of radius r about c, and N2 planted 2 to 3 from c.
    static double[] SphereWithSpray(int seed, int n, int nSpray)
    {
        var rng = new Random(seed);
        var v = new double[3 * (n + nSpray)];
        for (int i = 0; i < n + nSpray; i++)
        {
            double z = rng.NextDouble() * 2 - 1, phi = rng.NextDouble() * 2 * Math.PI, r = Math.Sqrt(1 - z * z);
            double scale = i < n ? 1 : 2 + rng.NextDouble();
            v[3 * i] = scale * r * Math.Cos(phi);
            v[3 * i + 1] = scale * r * Math.Sin(phi);
            v[3 * i + 2] = scale * z;
        }
        return v;
    }

    // Every point by (squared distance to point i in the points' precision, index).
    static int[] SortedNeighbours(double[] pts, bool f32, int i, out double[] sq)
    {
        int n = pts.Length / 3;
        var d = new double[n];
        for (int r = 0; r < n; r++)
        {
            if (f32)
            {
                float dx = (float)pts[3 * i] - (float)pts[3 * r], dy = (float)pts[3 * i + 1] - (float)pts[3 * r + 1],
                      dz = (float)pts[3 * i + 2] - (float)pts[3 * r + 2];
                float xx = dx * dx, yy = dy * dy, zz = dz * dz, xy = xx + yy;
                d[r] = (float)(xy + zz);
            }
            else
            {
                double dx = pts[3 * i] - pts[3 * r], dy = pts[3 * i + 1] - pts[3 * r + 1], dz = pts[3 * i + 2] - pts[3 * r + 2];
                double xx = dx * dx, yy = dy * dy, zz = dz * dz, xy = xx + yy;
                d[r] = xy + zz;
            }
        }
        var order = Enumerable.Range(0, n).OrderBy(r => d[r]).ThenBy(r => r).ToArray();
        sq = order.Select(r => d[r]).ToArray();
        return order;
    }

    // The smallest eigenvector of the scatter of point i's k nearest, and l0 / trace.
    static double[] PcaOracle(double[] pts, bool f32, int i, int k, out double curvature)
    {
        double[] sq;
        var ids = SortedNeighbours(pts, f32, i, out sq).Take(k).ToArray();
        Func<int, int, double> at = (id, c) => f32 ? (float)pts[3 * id + c] : pts[3 * id + c];
        var mean = new double[3];
        foreach (int id in ids) for (int c = 0; c < 3; c++) mean[c] += at(id, c) / ids.Length;
        var s = new double[3, 3];
        foreach (int id in ids)
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) s[a, b] += (at(id, a) - mean[a]) * (at(id, b) - mean[b]);
        double trace = s[0, 0] + s[1, 1] + s[2, 2];
        var v = new[] { 0.577, 0.5773, 0.5775 };
        for (int it = 0; it < 400; it++)
        {
            var w = new double[3];
            for (int a = 0; a < 3; a++)
            {
                w[a] = trace * v[a];
                for (int b = 0; b < 3; b++) w[a] -= s[a, b] * v[b];
            }
            double len = Math.Sqrt(Dot(w, w));
            v = w.Select(x => x / len).ToArray();
        }
        double l0 = 0;
        for (int a = 0; a < 3; a++) for (int b = 0; b < 3; b++) l0 += v[a] * s[a, b] * v[b];
        curvature = trace > 0 ? l0 / trace : 0;
        return v;
    }

    static void StatsNormalsMatchADoubleOracle()
    {
        var pts = SphereWithSpray(3, 300, 0).Select(x => 2 * x).ToArray();
        var viewpoint = new[] { 0.3, -0.2, 5.0 };
        foreach (bool f32 in new[] { false, true })
        {
            using (var index = f32 ? new KnnIndex(pts.Select(x => (float)x).ToArray(), 3,
                                                  Opt(KnnBackend.OpenMP, KnnStructure.Auto))
                                   : new KnnIndex(pts, 3, Opt(KnnBackend.OpenMP, KnnStructure.Auto)))
            {
                double[] normals, curvature;
                if (f32)
                {
                    var r = index.Normals<float>(10, viewpoint.Select(x => (float)x).ToArray());
                    normals = r.Normals.Select(x => (double)x).ToArray();
                    curvature = r.Curvature.Select(x => (double)x).ToArray();
                }
                else
                {
                    var r = index.Normals<double>(10, viewpoint);
                    normals = r.Normals;
                    curvature = r.Curvature;
                }
                double worst = 0, worstCurvature = 0;
                int away = 0;
                for (int i = 0; i < 300; i++)
                {
                    double want;
                    var v = PcaOracle(pts, f32, i, 10, out want);
                    var n = Row(normals, i);
                    worst = Math.Max(worst, Math.Atan2(Math.Sqrt(Dot(Cross(n, v), Cross(n, v))), Math.Abs(Dot(n, v))));
                    worstCurvature = Math.Max(worstCurvature, Math.Abs(curvature[i] - want));
                    if (Dot(n, Sub(viewpoint, Row(pts, i))) < -1e-6) away++;
                }
                Check(worst < 1e-5, (f32 ? "float" : "double") + " normals within 1e-5 rad: " + worst);
                Check(worstCurvature < 1e-6, "curvature: " + worstCurvature);
                Check(away == 0, "every normal towards the viewpoint");
            }
        }
        // Without a viewpoint a closed sphere's normals all point outward.
        using (var index = new KnnIndex(pts, 3))
        {
            var r = index.Normals<double>(10, null, false);
            Check(r.Curvature == null, "no curvature asked for");
            Check(Enumerable.Range(0, 300).All(i => Dot(Row(r.Normals, i), Row(pts, i)) > 0), "outward");
            Throws<ArgumentException>(() => index.Normals<float>(10), "float normals of a float64 index");
            Throws<ArgumentException>(() => index.Normals<double>(10, new[] { 1.0, 2.0 }), "a 2-value viewpoint");
            Throws<KnnInvalidArgumentException>(() => index.Normals<double>(0), "k = 0");
        }
        // All points equal: (0, 0, 1) and curvature 0.
        using (var index = new KnnIndex(Enumerable.Repeat(1.5f, 30).ToArray(), 3))
        {
            var r = index.Normals<float>(4);
            Check(r.Normals[3] == 0 && r.Normals[4] == 0 && r.Normals[5] == 1 && r.Curvature.All(c => c == 0),
                  "degenerate neighbourhood");
        }
    }

    static void StatsOutliersAndDensitiesMatchTheOracle()
    {
        var pts = SphereWithSpray(11, 400, 8);
        int n = 408;
        using (var index = new KnnIndex(pts, 3, Opt(KnnBackend.OpenMP, KnnStructure.Auto)))
        {
            var scores = index.OutlierScores<double>(6);
            var want = new double[n];
            for (int i = 0; i < n; i++)
            {
                double[] sq;
                SortedNeighbours(pts, false, i, out sq);
                double sum = 0;
                for (int j = 1; j <= 6; j++) sum += Math.Sqrt(sq[j]);
                want[i] = sum / 6;
            }
            Check(scores.Zip(want, (a, b) => Math.Abs(a - b) <= 1e-13 * Math.Max(1, b)).All(x => x), "scores");
            double mean = 0;
            foreach (double s in scores) mean += s;
            mean /= n;
            double ss = 0;
            foreach (double s in scores) ss += (s - mean) * (s - mean);
            double std = Math.Sqrt(ss / (n - 1));
            var rule = Enumerable.Range(0, n).Where(i => scores[i] <= mean + 2 * std).ToArray();
            var kept = index.StatisticalInliers(6);
            Check(kept.SequenceEqual(rule), "statistical inliers");
            Check(kept.All(i => i < 400), "the spray dropped");
            foreach (int k in new[] { 1, 5 })
            {
                var kth = index.KthDistances<double>(k);
                Check(Enumerable.Range(0, n).All(i => { double[] sq; SortedNeighbours(pts, false, i, out sq);
                                                        return kth[i] == Math.Sqrt(sq[k]); }),
                      "k-th distances, k = " + k);
            }
            Check(index.KthDistances<double>(n).All(double.IsPositiveInfinity), "k >= n: +infinity");
            var counts = index.NeighborCounts(0.3);
            var wantCounts = Enumerable.Range(0, n).Select(i => { double[] sq; SortedNeighbours(pts, false, i, out sq);
                                                                  return (long)sq.Count(d => d <= 0.3 * 0.3) - 1; })
                                       .ToArray();
            Check(counts.SequenceEqual(wantCounts), "neighbour counts");
            Check(index.RadiusInliers(0.3, 3).SequenceEqual(Enumerable.Range(0, n).Where(i => wantCounts[i] >= 3)),
                  "radius inliers");
            Check(index.RadiusInliers(0.3, 0).Length == n, "min 0 keeps every point");
            Throws<KnnInvalidArgumentException>(() => index.NeighborCounts(-1), "negative radius");
            Throws<KnnInvalidArgumentException>(() => index.StatisticalInliers(6, double.NaN), "NaN ratio");
        }
        ulong small = KnnStats.EstimateBytes(1000, 16);
        Check(small > 0 && KnnStats.EstimateBytes(1000000, 16) > small &&
              KnnStats.EstimateBytes(1000, 16, KnnScalar.Float64) >= small, "estimates");
        var disposed = new KnnIndex(pts, 3);
        disposed.Dispose();
        Throws<ObjectDisposedException>(() => disposed.OutlierScores<double>(3), "a disposed index");
    }

    // The float calls behind the same methods on a float32 index: distances in float, scores
    // and thresholds in double as the header defines them; the IntPtr Normals writes what the
    // generic one returns; a T the index does not hold is refused before any call.
    static void StatsOfAFloat32IndexMatchTheOracle()
    {
        var pts = SphereWithSpray(13, 300, 6).Select(x => (double)(float)x).ToArray();
        int n = 306;
        using (var index = new KnnIndex(pts.Select(x => (float)x).ToArray(), 3,
                                        Opt(KnnBackend.OpenMP, KnnStructure.Auto)))
        {
            var sorted = Enumerable.Range(0, n).Select(i => { double[] sq; SortedNeighbours(pts, true, i, out sq);
                                                              return sq; }).ToArray();
            var scores = index.OutlierScores<float>(5);
            Check(Enumerable.Range(0, n).All(i => scores[i] == (float)(sorted[i].Skip(1).Take(5).Select(Math.Sqrt)
                                                                       .Aggregate(0.0, (a, b) => a + b) / 5)),
                  "float scores");
            double mean = 0, ss = 0;
            foreach (float s in scores) mean += s;
            mean /= n;
            foreach (float s in scores) ss += (s - mean) * (s - mean);
            double threshold = mean + 1.5 * Math.Sqrt(ss / (n - 1));
            var kept = index.StatisticalInliers(5, 1.5);
            Check(kept.SequenceEqual(Enumerable.Range(0, n).Where(i => scores[i] <= threshold)),
                  "float statistical inliers");
            Check(kept.Length < n && kept.All(i => i < 300), "the spray dropped");
            var kth = index.KthDistances<float>(4);
            Check(Enumerable.Range(0, n).All(i => kth[i] == (float)Math.Sqrt(sorted[i][4])), "float k-th distances");
            // The radius is rounded to float, and so is its square, as the index compares.
            float r = (float)0.3, r2 = r * r;
            var wantCounts = sorted.Select(sq => (long)sq.Count(d => d <= r2) - 1).ToArray();
            Check(index.NeighborCounts(0.3).SequenceEqual(wantCounts), "float neighbour counts");
            Check(index.RadiusInliers(0.3, 4).SequenceEqual(Enumerable.Range(0, n).Where(i => wantCounts[i] >= 4)),
                  "float radius inliers");
            var generic = index.Normals<float>(8);
            var normals = new float[3 * n];
            var curvature = new float[n];
            var pinned = new[] { GCHandle.Alloc(normals, GCHandleType.Pinned),
                                 GCHandle.Alloc(curvature, GCHandleType.Pinned) };
            try { index.Normals(8, IntPtr.Zero, pinned[0].AddrOfPinnedObject(), pinned[1].AddrOfPinnedObject()); }
            finally { foreach (var h in pinned) h.Free(); }
            Check(normals.SequenceEqual(generic.Normals) && curvature.SequenceEqual(generic.Curvature),
                  "the IntPtr normals are the generic ones");
            Throws<ArgumentException>(() => index.OutlierScores<double>(5), "double scores of a float32 index");
            Throws<ArgumentException>(() => index.Align<double>(new double[3]), "a double fit on a float32 index");
            Throws<NotSupportedException>(() => index.KthDistances<int>(5), "int k-th distances");
            Throws<KnnInvalidArgumentException>(() => index.RadiusInliers(0.3, -1), "negative min neighbours");
        }
    }

    // The index's own points, on an ellipsoid of axes 1, 0.6, 0.3 (no small rotation maps it
    // onto itself), turned about z and moved: the fit must bring every scan point back onto
    // its original, point to point and point to plane.
    static void IndexAlignRecoversARigidMotion()
    {
        var cloud = SphereWithSpray(7, 400, 0);
        for (int i = 0; i < 400; i++) { cloud[3 * i + 1] *= 0.6; cloud[3 * i + 2] *= 0.3; }
        double angle = 0.04, c = Math.Cos(angle), s = Math.Sin(angle);
        var shift = new[] { 0.02, -0.01, 0.015 };
        var scan = new double[cloud.Length];
        for (int i = 0; i < 400; i++)
        {
            double x = cloud[3 * i], y = cloud[3 * i + 1], z = cloud[3 * i + 2];
            scan[3 * i] = c * x - s * y + shift[0];
            scan[3 * i + 1] = s * x + c * y + shift[1];
            scan[3 * i + 2] = z + shift[2];
        }
        Func<double[,], double> misfit = t => {
            double worst = 0;
            for (int p = 0; p < 400; p++)
            {
                double d = 0;
                for (int i = 0; i < 3; i++)
                {
                    double moved = t[i, 3];
                    for (int j = 0; j < 3; j++) moved += t[i, j] * scan[3 * p + j];
                    d += (moved - cloud[3 * p + i]) * (moved - cloud[3 * p + i]);
                }
                worst = Math.Max(worst, Math.Sqrt(d));
            }
            return worst;
        };
        using (var index = new KnnIndex(cloud, 3, Opt(KnnBackend.OpenMP, KnnStructure.Auto)))
        {
            var toPoints = index.Align<double>(scan, maxIterations: 100);
            Check(toPoints.Converged && toPoints.NKept == 400, "point to point converged, every point kept");
            Check(misfit(toPoints.Transform) < 1e-6, "point to point misfit " + misfit(toPoints.Transform));
            var normals = index.Normals<double>(12, null, false).Normals;
            var toPlanes = index.Align<double>(scan, normals, maxIterations: 100);
            Check(toPlanes.Converged, "point to plane converged");
            Check(misfit(toPlanes.Transform) < 1e-5, "point to plane misfit " + misfit(toPlanes.Transform));
            bool refused = false;
            try { index.Align<double>(scan, new double[] { 0, 0, 1 }); }
            catch (ArgumentException) { refused = true; }
            Check(refused, "normals of the wrong length are refused");
        }
    }
}
