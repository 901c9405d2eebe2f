// KnnGpgpuTests.cs - tests of the C# binding against the real library and a
// brute-force oracle. Exit code 0 when every check passes, 1 otherwise.
//
//   mcs -target:library -out:KnnGpgpu.dll ../KnnGpgpu.cs
//   mcs -r:KnnGpgpu.dll -out:KnnGpgpuTests.exe KnnGpgpuTests.cs
//   cp ../KnnGpgpu.dll.config . && LD_LIBRARY_PATH=<prefix>/lib mono KnnGpgpuTests.exe
//
// Environment: KNN_GPGPU_LIBRARY (library path), KNN_ABI_LAYOUT (output of
// bindings/abi_layout.c; else the documented table), KNN_GPGPU_INCLUDE (the
// directory of knn_gpgpu.h, for the "every function is bound" check).
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text.RegularExpressions;
using System.Threading;
using KnnGpgpu;

static class Tests
{
    static int checks, failures;
    static string current = "";

    static void Check(bool ok, string what)
    {
        checks++;
        if (!ok) { failures++; Console.WriteLine("  FAIL in {0}: {1}", current, what); }
    }

    static T Throws<T>(Action action, string what) where T : Exception
    {
        checks++;
        try { action(); }
        catch (T e) { return e; }
        catch (Exception e)
        {
            failures++;
            Console.WriteLine("  FAIL in {0}: {1} threw {2}: {3}", current, what, e.GetType().Name, e.Message);
            return null;
        }
        failures++;
        Console.WriteLine("  FAIL in {0}: {1} threw nothing, expected {2}", current, what, typeof(T).Name);
        return null;
    }

    // ---- oracle: float32 distance ((d0*d0 + d1*d1) + d2*d2) + ..., ties by index --------
    static float SqDist(float[] a, int ai, float[] b, int bi, int dim)
    {
        float acc = 0f;
        for (int j = 0; j < dim; j++)
        {
            float d = (float)(a[ai + j] - b[bi + j]);
            float dd = (float)(d * d);
            acc = j == 0 ? dd : (float)(acc + dd);
        }
        return acc;
    }

    static void Oracle(float[] reference, float[] queries, int dim, int k, out int[] ind, out float[] dist)
    {
        int n = reference.Length / dim, m = queries.Length / dim;
        ind = new int[m * k];
        dist = new float[m * k];
        var d = new float[n];
        for (int i = 0; i < m; i++)
        {
            for (int r = 0; r < n; r++) d[r] = SqDist(queries, i * dim, reference, r * dim, dim);
            var order = Enumerable.Range(0, n).OrderBy(r => d[r]).ThenBy(r => r).ToArray();
            for (int j = 0; j < k; j++)
            {
                ind[i * k + j] = j < n ? order[j] : -1;
                dist[i * k + j] = j < n ? d[order[j]] : float.PositiveInfinity;
            }
        }
    }

    static float[] Cloud(int seed, int n, int dim, string kind = "uniform")
    {
        var rng = new Random(seed);
        var v = new float[n * dim];
        if (kind == "lattice")
            for (int i = 0; i < v.Length; i++) v[i] = rng.Next(-3, 4);
        else if (kind == "duplicates")
        {
            var baseCloud = Cloud(seed + 1, Math.Max(1, n / 8), dim);
            int nb = baseCloud.Length / dim;
            for (int i = 0; i < n; i++) Array.Copy(baseCloud, rng.Next(nb) * dim, v, i * dim, dim);
        }
        else
            for (int i = 0; i < v.Length; i++) v[i] = (float)(rng.NextDouble() * 200.0 - 100.0);
        return v;
    }

    static Point[] ToPoints(float[] v)
    {
        var p = new Point[v.Length / 3];
        for (int i = 0; i < p.Length; i++) p[i] = new Point(v[3 * i], v[3 * i + 1], v[3 * i + 2]);
        return p;
    }

    static bool Same<T>(T[] a, T[] b) { return a.Length == b.Length && a.SequenceEqual(b); }

    static bool HasDevice() { return Knn.GetDeviceCount() > 0; }

    static Dictionary<string, long> Layout()
    {
        var table = new Dictionary<string, long> {
            {"sizeof.Point", 12}, {"sizeof.Node", 24}, {"offsetof.Node.p", 0}, {"offsetof.Node.left", 12},
            {"offsetof.Node.right", 16}, {"offsetof.Node.id", 20}, {"sizeof.knn_options", 40},
            {"offsetof.knn_options.struct_size", 0}, {"offsetof.knn_options.backend", 8},
            {"offsetof.knn_options.device", 12}, {"offsetof.knn_options.structure", 16},
            {"offsetof.knn_options.leaf_size", 20}, {"offsetof.knn_options.threads", 24},
            {"offsetof.knn_options.device_memory_limit", 32} };
        string path = Environment.GetEnvironmentVariable("KNN_ABI_LAYOUT");
        if (!string.IsNullOrEmpty(path))
        {
            table.Clear();
            foreach (var line in File.ReadAllLines(path))
            {
                int sp = line.LastIndexOf(' ');
                if (sp > 0) table[line.Substring(0, sp)] = long.Parse(line.Substring(sp + 1));
            }
            Console.WriteLine("  layout from {0}", path);
        }
        return table;
    }

    // ---- tests ----------------------------------------------------------------------------
    static void LayoutMatchesC()
    {
        var c = Layout();
        Check(Marshal.SizeOf(typeof(Point)) == c["sizeof.Point"] && c["sizeof.Point"] == 12, "sizeof Point");
        Check(Marshal.SizeOf(typeof(Node)) == c["sizeof.Node"] && c["sizeof.Node"] == 24, "sizeof Node");
        Check((long)Marshal.OffsetOf(typeof(Node), "X") == c["offsetof.Node.p"], "Node.p");
        Check((long)Marshal.OffsetOf(typeof(Node), "Left") == c["offsetof.Node.left"], "Node.left");
        Check((long)Marshal.OffsetOf(typeof(Node), "Right") == c["offsetof.Node.right"], "Node.right");
        Check((long)Marshal.OffsetOf(typeof(Node), "Id") == c["offsetof.Node.id"], "Node.id");
        Check(Marshal.SizeOf(typeof(KnnOptions)) == c["sizeof.knn_options"], "sizeof knn_options");
        var fields = new[] { new[] {"StructSize", "struct_size"}, new[] {"Backend", "backend"},
            new[] {"Device", "device"}, new[] {"Structure", "structure"}, new[] {"LeafSize", "leaf_size"},
            new[] {"Threads", "threads"}, new[] {"DeviceMemoryLimit", "device_memory_limit"} };
        foreach (var f in fields)
            Check((long)Marshal.OffsetOf(typeof(KnnOptions), f[0]) == c["offsetof.knn_options." + f[1]],
                  "knn_options." + f[1]);
        if (c.ContainsKey("const.KNN_OK"))
        {
            foreach (KnnStatus s in Enum.GetValues(typeof(KnnStatus)))
            {
                string name = s == KnnStatus.Ok ? "KNN_OK" : "KNN_ERR_" + KnnException.NameOf(s);
                Check(c["const." + name] == (long)s, name);
            }
            Check(c["const.KNN_BACKEND_OPENMP"] == (long)KnnBackend.OpenMP, "KNN_BACKEND_OPENMP");
            Check(c["const.KNN_STRUCTURE_BRUTE_FORCE"] == (long)KnnStructure.BruteForce, "KNN_STRUCTURE_BRUTE_FORCE");
            Check(c["const.KNN_VERSION_NUMBER"] == Knn.Version(), "version");
        }
    }

    static void EveryHeaderFunctionIsBound()
    {
        string dir = Environment.GetEnvironmentVariable("KNN_GPGPU_INCLUDE");
        if (string.IsNullOrEmpty(dir))
        {
            Console.WriteLine("  (KNN_GPGPU_INCLUDE not set: skipped)");
            return;
        }
        string text = File.ReadAllText(Path.Combine(dir, "knn_gpgpu.h"));
        var declared = new HashSet<string>(Regex.Matches(text, @"KNN_CALL\s+(\w+)\s*\(")
                                                .Cast<Match>().Select(m => m.Groups[1].Value));
        var native = typeof(Knn).Assembly.GetType("KnnGpgpu.NativeMethods");
        var bound = new HashSet<string>();
        foreach (var method in native.GetMethods(BindingFlags.Static | BindingFlags.NonPublic))
        {
            var attr = method.GetCustomAttributes(typeof(DllImportAttribute), false)
                             .Cast<DllImportAttribute>().FirstOrDefault();
            if (attr == null) continue;
            Check(attr.CallingConvention == CallingConvention.Cdecl, method.Name + " is Cdecl");
            Check(attr.Value == "knn_gpgpu", method.Name + " imports knn_gpgpu");
            bound.Add(string.IsNullOrEmpty(attr.EntryPoint) ? method.Name : attr.EntryPoint);
        }
        Check(declared.Count >= 30, "found the declarations");
        Check(declared.SetEquals(bound), "header vs binding: " +
              string.Join(",", declared.Except(bound)) + " / " + string.Join(",", bound.Except(declared)));
    }

    static void BuildAndQueryMatchTheOracle()
    {
        foreach (var kind in new[] { "uniform", "duplicates", "lattice" })
            foreach (var c in new[] { new[] {1, 4, 1}, new[] {9, 9, 3}, new[] {200, 60, 8}, new[] {900, 100, 17},
                                      new[] {20, 10, 25} })
            {
                int n = c[0], m = c[1], k = c[2];
                var pts = Cloud(n + kind.Length, n, 3, kind);
                var q = Cloud(n + 77, m, 3, kind).Concat(pts.Take(3 * Math.Min(n, 5))).ToArray();
                var tree = Knn.BuildKdTree(ToPoints(pts));
                var ids = tree.Select(t => t.Id).OrderBy(i => i).ToArray();
                Check(Same(ids, Enumerable.Range(0, n).ToArray()), "ids are a permutation");
                Check(tree.All(t => t.X == pts[3 * t.Id] && t.Y == pts[3 * t.Id + 1] && t.Z == pts[3 * t.Id + 2]),
                      "node point equals points[id]");
                Check(Enumerable.Range(0, n).All(i => tree[i].Left == (2 * i + 1 < n ? 2 * i + 1 : -1)),
                      "heap links");
                var mp = Knn.BuildKdTree(ToPoints(pts), KnnBackend.OpenMP);
                Check(Enumerable.Range(0, n).All(i => tree[i].Equals(mp[i])), "backends identical");
                int[] want; float[] wantD;
                Oracle(pts, q, 3, k, out want, out wantD);
                Check(Same(Knn.QueryAll(ToPoints(q), tree, k), want), string.Format("queryAll {0} n={1} k={2}", kind, n, k));
                Check(Same(Knn.QueryAll(ToPoints(q), tree, k, KnnBackend.OpenMP), want), "mpQueryAll");
                if (HasDevice())
                    Check(Same(Knn.QueryAll(ToPoints(q), tree, k, KnnBackend.Cuda), want), "cuQueryAll");
            }
        var empty = Knn.BuildKdTree(new Point[0]);
        Check(empty.Length == 0 && Knn.QueryAll(new Point[0], empty, 3).Length == 0, "empty input");
        var three = ToPoints(Cloud(2, 3, 3));
        var padded = Knn.QueryAll(three, Knn.BuildKdTree(three), 5);
        Check(padded[3] == -1 && padded[4] == -1, "-1 padding");
        var result = new int[3 * 2];
        Check(ReferenceEquals(Knn.QueryAll(three, Knn.BuildKdTree(three), 2, KnnBackend.Auto, result), result),
              "result written in place");
    }

    static void BruteForceBitIdentical()
    {
        foreach (int dim in new[] { 1, 2, 3, 5, 16 })
        {
            var r = Cloud(dim, 150, dim, "duplicates");
            var q = Cloud(dim + 9, 40, dim);
            int[] want; float[] wantD;
            Oracle(r, q, dim, 9, out want, out wantD);
            float[] d;
            var i = Knn.BruteForce(r, q, dim, 9, out d);
            Check(Same(i, want), "indices dim " + dim);
            Check(d.Select(BitConverter.GetBytes).SelectMany(b => b)
                   .SequenceEqual(wantD.Select(BitConverter.GetBytes).SelectMany(b => b)),
                  "bit-identical distances dim " + dim);
            Knn.BruteForce(r, q, dim, 2, out d, false);
            Check(d == null, "distances not requested");
        }
    }

    static void MemoryHelpers()
    {
        Check(Knn.TreeSize(1000) == 24000, "getTreeSize");
        Check(Knn.TreeSize(-1) == 0, "getTreeSize(-1)");
        Check(Knn.TreeSize(int.MaxValue) == 24UL * int.MaxValue, "64-bit sizes");
        Check(0 < Knn.NeededBytesForBuildingKdTree(1000) &&
              Knn.NeededBytesForBuildingKdTree(1000) < Knn.NeededBytesForBuildingKdTree(100000), "build bytes");
        Check(0 < Knn.NeededBytesForQueryAll(1000, 8, 1000) &&
              Knn.NeededBytesForQueryAll(1000, 8, 1000) < Knn.NeededBytesForQueryAll(100000, 8, 1000), "query bytes");
        Knn.NeededBytesInSearch(1000, 8, 1000);
        Knn.NeededBytesInSearch(1000, 8, 1000, 128, 32);
    }

    static void BadInputThrows()
    {
        var pts = Cloud(3, 20, 3);
        pts[3 * 4 + 1] = float.NaN;
        var e = Throws<KnnNonfiniteInputException>(() => Knn.BuildKdTree(ToPoints(pts)), "NaN point");
        if (e != null)
        {
            Check(e.Status == KnnStatus.NonfiniteInput && e.StatusName == "NONFINITE_INPUT", "status");
            Check(e.NativeMessage.Contains("point 4"), "message names the point: " + e.NativeMessage);
            Check(e.Function == "buildKdTree" && e.Message.Contains("KNN_ERR_NONFINITE_INPUT"), "message text");
        }
        var good = ToPoints(Cloud(4, 10, 3));
        var tree = Knn.BuildKdTree(good);
        var k0 = Throws<KnnInvalidArgumentException>(() => Knn.QueryAll(good, tree, 0), "k = 0");
        if (k0 != null) Check(k0.Status == KnnStatus.InvalidArgument && k0.NativeMessage.Contains("k is 0"), "k message");
        float[] d;
        Throws<KnnInvalidArgumentException>(() => Knn.BruteForce(Cloud(1, 5, 2), Cloud(2, 5, 2), 2, 0, out d), "brute k = 0");
        Throws<KnnInvalidArgumentException>(() => Knn.BruteForce(new float[0], new float[0], 0, 1, out d), "dim 0");
        var bad = (Node[])tree.Clone();
        bad[0].Left = 7;
        var t = Throws<KnnInvalidTreeException>(() => Knn.QueryAll(good, bad, 2), "corrupt tree");
        if (t != null) Check(t.Status == KnnStatus.InvalidTree && t.NativeMessage.Length > 0, "tree message");
        Throws<ArgumentException>(() => Knn.QueryAll(good, tree, 2, KnnBackend.Auto, new int[3]), "result too short");
        Throws<ArgumentException>(() => Knn.BruteForce(new float[7], new float[6], 3, 1, out d), "ragged rows");
        Throws<ArgumentNullException>(() => Knn.BuildKdTree(null), "null points");
        Check(NativeMethods_BuildRaw() == (int)KnnStatus.InvalidArgument, "NULL points with n > 0");
        Check(Knn.LastError().Contains("NULL"), "last error names the NULL");
        Check(Knn.StatusString(4242) == "unknown status", "unknown status text");
        Check(Knn.StatusString(2).Contains("NONFINITE"), "status text");
        Check(KnnException.From(77, "x", "f").StatusName == "UNKNOWN(77)", "unknown status name");
    }

    static int NativeMethods_BuildRaw()
    {
        var native = typeof(Knn).Assembly.GetType("KnnGpgpu.NativeMethods");
        var raw = native.GetMethod("buildKdTreeRaw", BindingFlags.Static | BindingFlags.NonPublic);
        return (int)raw.Invoke(null, new object[] { IntPtr.Zero, 5, IntPtr.Zero });
    }

    static void LastErrorIsPerThread()
    {
        var pts = Cloud(8, 64, 3);
        var seen = new HashSet<string>[6];
        var threads = Enumerable.Range(0, 6).Select(slot => new Thread(() =>
        {
            var bad = (float[])pts.Clone();
            bad[3 * (10 + slot)] = float.NaN;
            var mine = new HashSet<string>();
            for (int round = 0; round < 10; round++)
            {
                try { Knn.BuildKdTree(ToPoints(bad)); }
                catch (KnnException e) { mine.Add(e.NativeMessage); }
                Knn.BuildKdTree(ToPoints(pts));
            }
            seen[slot] = mine;
        })).ToArray();
        foreach (var th in threads) th.Start();
        foreach (var th in threads) th.Join();
        for (int slot = 0; slot < 6; slot++)
            Check(seen[slot].Count == 1 && seen[slot].First().Contains("point " + (10 + slot) + " "),
                  "thread " + slot + " saw " + string.Join(" | ", seen[slot]));
    }

    static void DeviceFunctions()
    {
        if (HasDevice())
        {
            Check(Knn.GetDevice() >= 0 && Knn.FreeBytesOnGpu() > 0, "device present");
            return;
        }
        Check(Knn.GetDeviceCount() == 0, "no devices");
        Check(Knn.GetDevice() == -1, "cuGetDevice -1");
        Check(Knn.FreeBytesOnGpu() == 0, "no free bytes");
        var e = Throws<KnnNoDeviceException>(() => Knn.SetDevice(0), "cuSetDevice");
        if (e != null) Check(e.Status == KnnStatus.NoDevice && e.StatusName == "NO_DEVICE", "NO_DEVICE");
        var pts = ToPoints(Cloud(9, 20, 3));
        Throws<KnnNoDeviceException>(() => Knn.BuildKdTree(pts, KnnBackend.Cuda), "cuBuildKdTree");
        var tree = Knn.BuildKdTree(pts);
        Throws<KnnNoDeviceException>(() => Knn.QueryAll(pts, tree, 2, KnnBackend.Cuda), "cuQueryAll");
    }

    static bool IndexEngineAvailable()
    {
        try { using (new KnnIndex(new float[12], 3)) return true; }
        catch (KnnUnsupportedException) { return false; }
    }

    static void IndexApi()
    {
        var o = KnnOptions.CreateDefault();
        Check((long)o.StructSize.ToUInt64() == Marshal.SizeOf(typeof(KnnOptions)), "struct_size from the library");
        Check(o.Device == -1 && o.BackendKind == KnnBackend.Auto && o.Threads == 0, "defaults");
        o.BackendKind = KnnBackend.OpenMP;
        o.Threads = 2;
        var pts = Cloud(10, 200, 4);
        if (IndexEngineAvailable())
        {
            using (var index = new KnnIndex(pts, 4, o))
            {
                var info = index.Info();
                Check(info.N == 200 && info.Dim == 4, "info");
                var q = Cloud(11, 30, 4);
                int[] want; float[] wantD;
                Oracle(pts, q, 4, 6, out want, out wantD);
                float[] d;
                Check(Same(index.Query(q, 6, out d), want) && Same(d, wantD), "index query");
                int[] counts;
                index.Radius(q, 20f, 5, out d, out counts);
                Check(counts.Length == 30, "radius counts");
            }
        }
        else
        {
            var e = Throws<KnnUnsupportedException>(() => new KnnIndex(pts, 4, o), "knn_index_build");
            if (e != null)
                Check(e.Status == KnnStatus.Unsupported && e.Function == "knn_index_build" &&
                      e.NativeMessage.StartsWith("knn_index_build"), "UNSUPPORTED carries its message");
            Throws<KnnUnsupportedException>(() => new KnnIndex(IntPtr.Zero, 0, 3), "pointer overload");
        }
        Throws<ArgumentException>(() => new KnnIndex(pts, 3), "rows of dim");
        Throws<ArgumentException>(() => new KnnIndex(pts, 4, new KnnOptions()), "uninitialised options");
        Check(KnnIndex.EstimateBuildBytes(1000, 3) > 0 &&
              KnnIndex.EstimateBuildBytes(1000000, 3) > KnnIndex.EstimateBuildBytes(1000, 3), "estimate build");
        Check(KnnIndex.EstimateQueryBytes(100000, 8, 1000, 3, o) > KnnIndex.EstimateQueryBytes(10, 8, 1000, 3, o),
              "estimate query");
        Check(KnnIndex.EstimateBuildBytes(-1, 3) == 0, "estimate of a negative size");
        // SafeHandle: NULL frees fine; the raw info call refuses NULL.
        Check(new IndexHandle().IsInvalid, "a fresh handle is invalid");
        var native = typeof(Knn).Assembly.GetType("KnnGpgpu.NativeMethods");
        var info_raw = native.GetMethod("knn_index_info_raw", BindingFlags.Static | BindingFlags.NonPublic);
        Check((int)info_raw.Invoke(null, new object[] { IntPtr.Zero, IntPtr.Zero, IntPtr.Zero, IntPtr.Zero, IntPtr.Zero }) != 0,
              "knn_index_info(NULL) fails");
    }

    static void QuadtreeApi()
    {
        float[] v = { 0, 0, 4, 0, 4, 4, 0, 4, 1, 1, 3, 1, 3, 3, 1, 3, 5, 0, 9, 0, 7, 3 };
        long[] rings = { 0, 4, 8, 11 };
        long[] polys = { 0, 2, 3 };
        try
        {
            using (var qt = new KnnQuadtree(Cloud(12, 50, 2)))
            {
                var counts = qt.PointsInPolygonsCount(v, rings, polys);
                Check(counts.Length == 2, "counts");
                long[] offsets;
                var ind = qt.PointsInPolygons(v, rings, polys, out offsets);
                Check(offsets[2] == ind.Length, "offsets");
            }
        }
        catch (KnnUnsupportedException e)
        {
            Check(e.Status == KnnStatus.Unsupported && e.Function == "knn_quadtree_build", "quadtree UNSUPPORTED");
        }
        Throws<ArgumentOutOfRangeException>(() => KnnQuadtree.ValidatePolygons(v.Take(20).ToArray(), rings, polys),
                                            "ring offsets past the vertices");
        Throws<ArgumentOutOfRangeException>(() => KnnQuadtree.ValidatePolygons(v, rings, new long[] { 0, 2, 4 }),
                                            "polygon offsets past the rings");
        Throws<ArgumentException>(() => new KnnQuadtree(new float[3]), "odd xy");
        var native = typeof(Knn).Assembly.GetType("KnnGpgpu.NativeMethods");
        var count_raw = native.GetMethod("knn_points_in_polygons_count_raw", BindingFlags.Static | BindingFlags.NonPublic);
        Check((int)count_raw.Invoke(null, new object[] { IntPtr.Zero, IntPtr.Zero, IntPtr.Zero, 0L, IntPtr.Zero, 0L,
                                                         IntPtr.Zero, IntPtr.Zero }) != 0, "count with a NULL tree fails");
    }

    static int Main()
    {
        var tests = new Action[] { LayoutMatchesC, EveryHeaderFunctionIsBound, BuildAndQueryMatchTheOracle,
                                   BruteForceBitIdentical, MemoryHelpers, BadInputThrows, LastErrorIsPerThread,
                                   DeviceFunctions, IndexApi, QuadtreeApi };
        var start = DateTime.UtcNow;
        foreach (var test in tests)
        {
            current = test.Method.Name;
            int before = failures;
            try { test(); }
            catch (Exception e)
            {
                failures++;
                Console.WriteLine("  ERROR in {0}: {1}", current, e);
            }
            Console.WriteLine("{0} {1}", failures == before ? "ok  " : "FAIL", current);
        }
        Console.WriteLine("{0} tests, {1} checks, {2} failures in {3:F2}s (library {4})", tests.Length, checks,
                          failures, (DateTime.UtcNow - start).TotalSeconds,
                          Loader.ExplicitPath ?? "from the loader's search path");
        return failures == 0 ? 0 : 1;
    }
}
