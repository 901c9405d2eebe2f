// KnnGpgpuTests.cs - tests of the C# binding against the real library and a
// brute-force oracle. Exit code 0 when every check passes, 1 otherwise.
//
//   mcs -target:library -out:KnnGpgpu.dll ../KnnGpgpu.cs ../KnnMesh.cs
//   mcs -r:KnnGpgpu.dll -out:KnnGpgpuTests.exe KnnGpgpuTests.cs KnnMeshTests.cs KnnStatsTests.cs
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

static partial class Tests
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
        if (c.ContainsKey("sizeof.knn_progress"))
        {
            // KnnProgress reads the record at these offsets (24 bytes: done, total, stage, sequence).
            Check(c["sizeof.knn_progress"] == 24 && c["offsetof.knn_progress.done"] == 0 &&
                  c["offsetof.knn_progress.total"] == 8 && c["offsetof.knn_progress.stage"] == 16 &&
                  c["offsetof.knn_progress.sequence"] == 20, "knn_progress layout");
        }
        if (c.ContainsKey("sizeof.knn_deviation_report"))
        {
            var report = typeof(KnnDeviationReportStruct);
            Check(Marshal.SizeOf(report) == c["sizeof.knn_deviation_report"], "sizeof knn_deviation_report");
            var rf = new[] { new[] {"StructSize", "struct_size"}, new[] {"NPoints", "n_points"},
                new[] {"NMeasured", "n_measured"}, new[] {"NBeyond", "n_beyond"},
                new[] {"NWithinTolerance", "n_within_tolerance"}, new[] {"NAboveTolerance", "n_above_tolerance"},
                new[] {"NBelowTolerance", "n_below_tolerance"}, new[] {"NBelowBins", "n_below_bins"},
                new[] {"NAboveBins", "n_above_bins"}, new[] {"Min", "min"}, new[] {"Max", "max"},
                new[] {"Mean", "mean"}, new[] {"Rms", "rms"} };
            foreach (var f in rf)
                Check((long)Marshal.OffsetOf(report, f[0]) == c["offsetof.knn_deviation_report." + f[1]],
                      "knn_deviation_report." + f[1]);
        }
        var alignLayouts = new[] {
            Tuple.Create(typeof(KnnAlignParamsStruct), "knn_align_params", new[] {
                new[] {"StructSize", "struct_size"}, new[] {"MaxCorrespondence", "max_correspondence"},
                new[] {"MaxIterations", "max_iterations"}, new[] {"CoarseStart", "coarse_start"},
                new[] {"KeptFraction", "kept_fraction"}, new[] {"ToleranceRotation", "tolerance_rotation"},
                new[] {"ToleranceTranslation", "tolerance_translation"} }),
            Tuple.Create(typeof(KnnAlignResultStruct), "knn_align_result", new[] {
                new[] {"StructSize", "struct_size"}, new[] {"Transform", "transform"}, new[] {"Rms", "rms"},
                new[] {"NKept", "n_kept"}, new[] {"Iterations", "iterations"}, new[] {"Converged", "converged"},
                new[] {"DegenerateDirections", "degenerate_directions"}, new[] {"NDegenerate", "n_degenerate"} }) };
        foreach (var layout in alignLayouts)
        {
            if (!c.ContainsKey("sizeof." + layout.Item2)) continue;
            Check(Marshal.SizeOf(layout.Item1) == c["sizeof." + layout.Item2], "sizeof " + layout.Item2);
            foreach (var f in layout.Item3)
                Check((long)Marshal.OffsetOf(layout.Item1, f[0]) == c["offsetof." + layout.Item2 + "." + f[1]],
                      layout.Item2 + "." + f[1]);
        }
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
        // knn_gpgpu.h and the parts it includes.
        string text = string.Concat(new[] { "knn_gpgpu.h", "knn_gpgpu_classic.h", "knn_gpgpu_index.h",
                                            "knn_gpgpu_quadtree.h", "knn_gpgpu_mesh.h",
                                            "knn_gpgpu_stats.h" }
                                        .Select(name => File.ReadAllText(Path.Combine(dir, name))));
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

    // knn_options_init_v2 writes the whole version-2 struct: its size, the version-1
    // defaults and an empty device list (16 entries of -1).
    static void OptionsVersion2Defaults()
    {
        if (IntPtr.Size != 8) return;
        // The raw entry point, called through reflection, bypasses the binding's search:
        // load the library first (KNN_GPGPU_LIBRARY alone, nothing on the loader's path).
        Loader.Ensure();
        var native = typeof(Knn).Assembly.GetType("KnnGpgpu.NativeMethods");
        var init = native.GetMethod("knn_options_init_v2", BindingFlags.Static | BindingFlags.NonPublic);
        IntPtr block = Marshal.AllocHGlobal(1024);
        try
        {
            for (int i = 0; i < 1024; ++i) Marshal.WriteByte(block, i, 0x5A);
            init.Invoke(null, new object[] { block });
            Check(Marshal.ReadInt64(block, 0) == 112, "v2 struct_size 112");
            Check(Marshal.ReadInt32(block, 12) == -1, "v2 device -1");
            Check(Marshal.ReadInt32(block, 40) == 0, "v2 device_count 0");
            bool empty = true;
            for (int i = 0; i < 16; ++i) empty &= Marshal.ReadInt32(block, 44 + 4 * i) == -1;
            Check(empty, "v2 devices all -1");
        }
        finally { Marshal.FreeHGlobal(block); }
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

    // ---- the index API against the oracle ----------------------------------------------------
    static KnnBackend[] Backends()
    {
        return HasDevice() ? new[] { KnnBackend.Auto, KnnBackend.OpenMP, KnnBackend.Cuda }
                           : new[] { KnnBackend.Auto, KnnBackend.OpenMP };
    }

    static KnnStructure[] Structures(int dim)
    {
        var s = new List<KnnStructure> { KnnStructure.Auto, KnnStructure.KdTree, KnnStructure.BruteForce };
        if (dim == 3) s.Add(KnnStructure.Grid);
        return s.ToArray();
    }

    static KnnOptions Opt(KnnBackend backend, KnnStructure structure)
    {
        var o = KnnOptions.CreateDefault();
        o.BackendKind = backend;
        o.StructureKind = structure;
        return o;
    }

    static bool SameBits(float[] a, float[] b)
    {
        if (a == null || b == null || a.Length != b.Length) return false;
        for (int i = 0; i < a.Length; i++)
            if (BitConverter.ToInt32(BitConverter.GetBytes(a[i]), 0) != BitConverter.ToInt32(BitConverter.GetBytes(b[i]), 0))
                return false;
        return true;
    }

    static void CheckInfo(KnnIndex index, long n, int dim, KnnBackend backend, KnnStructure structure)
    {
        var info = index.Info();
        Check(info.N == n && info.Dim == dim, "info n/dim " + info.N + " " + info.Dim);
        if (backend == KnnBackend.OpenMP || (backend == KnnBackend.Auto && !HasDevice()))
            Check(info.Backend == KnnBackend.OpenMP, "info backend " + info.Backend);
        Check(info.Structure == KnnStructure.KdTree || info.Structure == KnnStructure.Grid ||
              info.Structure == KnnStructure.BruteForce, "info structure " + info.Structure);
        if (structure == KnnStructure.Grid)         // a poor grid is served by the kd-tree
            Check(info.Structure == KnnStructure.Grid || info.Structure == KnnStructure.KdTree,
                  "requested Grid, served by " + info.Structure);
        else if (structure != KnnStructure.Auto)
            Check(info.Structure == structure, "requested " + structure + ", served by " + info.Structure);
    }

    static void SelfOracle(float[] pts, int dim, int k, bool exclude, out int[] ind, out float[] dist)
    {
        int n = pts.Length / dim;
        int[] all; float[] allD;
        Oracle(pts, pts, dim, n, out all, out allD);
        ind = Enumerable.Repeat(-1, n * k).ToArray();
        dist = Enumerable.Repeat(float.PositiveInfinity, n * k).ToArray();
        for (int row = 0; row < n; row++)
            for (int c = 0, j = 0; c < n && j < k; c++)
            {
                if (exclude && all[row * n + c] == row) continue;
                ind[row * k + j] = all[row * n + c];
                dist[row * k + j] = allD[row * n + c];
                j++;
            }
    }

    static void RadiusOracle(float[] pts, float[] q, int dim, float radius, int maxNb,
                             out int[] ind, out float[] dist, out int[] counts)
    {
        int n = pts.Length / dim, m = q.Length / dim;
        float r2 = (float)(radius * radius);
        int[] all; float[] allD;
        Oracle(pts, q, dim, n, out all, out allD);
        ind = Enumerable.Repeat(-1, m * maxNb).ToArray();
        dist = Enumerable.Repeat(float.PositiveInfinity, m * maxNb).ToArray();
        counts = new int[m];
        for (int row = 0; row < m; row++)
        {
            for (int c = 0; c < n; c++) if (allD[row * n + c] <= r2) counts[row]++;
            for (int j = 0; j < Math.Min(counts[row], maxNb); j++)
            {
                ind[row * maxNb + j] = all[row * n + j];
                dist[row * maxNb + j] = allD[row * n + j];
            }
        }
    }

    static void IndexOraclesAgreeWithBruteForce()
    {
        // The helpers against the library's own CPU brute force (knn_brute_force).
        var pts = Cloud(90, 60, 3, "lattice");
        float[] d;
        var i = Knn.BruteForce(pts, pts, 3, 60, out d);
        int[] si; float[] sd;
        SelfOracle(pts, 3, 60, false, out si, out sd);
        Check(Same(si, i) && SameBits(sd, d), "self oracle");
        int[] ri, rc; float[] rd;
        RadiusOracle(pts, pts, 3, 1.5f, 60, out ri, out rd, out rc);
        Check(Enumerable.Range(0, 60).All(row => rc[row] == Enumerable.Range(0, 60).Count(c => d[row * 60 + c] <= 2.25f)),
              "radius oracle counts");
        Check(Enumerable.Range(0, 3600).All(j => ri[j] == -1 || ri[j] == i[j]), "radius oracle rows");
    }

    static void IndexQueryMatchesOracle()
    {
        foreach (int dim in new[] { 2, 3, 5 })
            foreach (var kind in new[] { "duplicates", "lattice" })
            {
                var pts = Cloud(dim + 40, 200, dim, kind);
                var q = Cloud(dim + 41, 30, dim, kind).Concat(pts.Take(5 * dim)).ToArray();
                foreach (var backend in Backends())
                    foreach (var structure in Structures(dim))
                        using (var index = new KnnIndex(pts, dim, Opt(backend, structure)))
                        {
                            CheckInfo(index, 200, dim, backend, structure);
                            foreach (int k in new[] { 1, 4, 17 })
                            {
                                int[] want; float[] wantD;
                                Oracle(pts, q, dim, k, out want, out wantD);
                                float[] d;
                                var got = index.Query(q, k, out d);
                                string what = string.Format("dim {0} {1} {2} {3} k {4}", dim, kind, backend, structure, k);
                                Check(Same(got, want), "indices " + what);
                                Check(SameBits(d, wantD), "distances " + what);
                            }
                        }
            }
    }

    static void IndexQueryForms()
    {
        var pts = Cloud(50, 5, 3);
        var o = Opt(KnnBackend.OpenMP, KnnStructure.KdTree);
        o.LeafSize = 1;
        o.Threads = 2;
        using (var index = new KnnIndex(pts, 3, o))
        {
            int[] want; float[] wantD;
            Oracle(pts, pts, 3, 8, out want, out wantD);
            float[] d;
            var got = index.Query(pts, 8, out d, KnnOptions.CreateDefault());
            Check(Same(got, want) && SameBits(d, wantD) && got[7] == -1 && float.IsPositiveInfinity(d[7]),
                  "k > n pads with -1 / +inf");
            got = index.Query(pts, 2, out d, null, false);
            Check(d == null && Same(got, want.Where((x, j) => j % 8 < 2).ToArray()), "no distances");
            // the raw pointer overload
            var ind = new int[5 * 2];
            var pin = GCHandle.Alloc(pts, GCHandleType.Pinned);
            var pinI = GCHandle.Alloc(ind, GCHandleType.Pinned);
            try { index.Query(pin.AddrOfPinnedObject(), 5, 2, pinI.AddrOfPinnedObject(), IntPtr.Zero); }
            finally { pin.Free(); pinI.Free(); }
            Check(Same(ind, want.Where((x, j) => j % 8 < 2).ToArray()), "IntPtr query");
        }
        using (var empty = new KnnIndex(IntPtr.Zero, 0, 3))
        {
            Check(empty.Info().N == 0, "empty index");
            float[] d;
            var got = empty.Query(pts, 2, out d);
            Check(got.All(x => x == -1) && d.All(float.IsPositiveInfinity), "empty index answers -1 / +inf");
        }
    }

    static void IndexQuerySelf()
    {
        foreach (int dim in new[] { 2, 3, 5 })
        {
            var pts = Cloud(dim + 60, 150, dim, "duplicates");
            foreach (var structure in Structures(dim))
                using (var index = new KnnIndex(pts, dim, Opt(KnnBackend.Auto, structure)))
                    foreach (bool exclude in new[] { false, true })
                        foreach (int k in new[] { 1, 6 })
                        {
                            int[] want; float[] wantD;
                            SelfOracle(pts, dim, k, exclude, out want, out wantD);
                            float[] d;
                            var got = index.QuerySelf(k, exclude, out d);
                            string what = string.Format("dim {0} {1} exclude {2} k {3}", dim, structure, exclude, k);
                            Check(Same(got, want), "query self " + what);
                            Check(SameBits(d, wantD), "query self distances " + what);
                            if (exclude)
                            {
                                Check(Enumerable.Range(0, 150).All(r => got[r * k] != r), "own index dropped");
                                Check(d.Count(x => x == 0f) > 100, "other copies at distance 0 stay");
                            }
                        }
        }
    }

    static void IndexRadius()
    {
        foreach (int dim in new[] { 2, 3, 5 })
        {
            var pts = Cloud(dim + 70, 300, dim, "lattice");
            var q = Cloud(dim + 71, 20, dim, "lattice").Concat(Cloud(dim + 72, 5, dim).Select(x => x / 40f)).ToArray();
            foreach (var backend in Backends())
                foreach (var structure in Structures(dim))
                    using (var index = new KnnIndex(pts, dim, Opt(backend, structure)))
                    {
                        bool overflow = false, empty = false;
                        foreach (var c in new[] { new[] { 1f, 8 }, new[] { 2f, 16 }, new[] { 0f, 4 }, new[] { 3.5f, 3 } })
                        {
                            float radius = c[0];
                            int maxNb = (int)c[1];
                            int[] wantI, wantC; float[] wantD;
                            RadiusOracle(pts, q, dim, radius, maxNb, out wantI, out wantD, out wantC);
                            overflow |= wantC.Any(x => x > maxNb);
                            empty |= wantC.Any(x => x == 0);
                            float[] d; int[] counts;
                            var got = index.Radius(q, radius, maxNb, out d, out counts);
                            string what = string.Format("radius dim {0} {1} {2} r {3}", dim, backend, structure, radius);
                            Check(Same(counts, wantC), what + " counts");
                            Check(Same(got, wantI), what + " indices");
                            Check(SameBits(d, wantD), what + " distances");
                        }
                        Check(overflow && empty, "rows beyond maxNeighbors and empty rows were tested");
                        float[] d0; int[] c0;
                        var none = index.Radius(q, 2f, 0, out d0, out c0);
                        int[] wi, wc; float[] wd;
                        RadiusOracle(pts, q, dim, 2f, 0, out wi, out wd, out wc);
                        Check(none == null && d0 == null && Same(c0, wc), "counting call");
                    }
        }
    }

    // CSR rows against the radius oracle with every hit kept (rows of n), packed by counts.
    static void IndexRadiusCsr()
    {
        foreach (int dim in new[] { 2, 3 })
        {
            var pts = Cloud(dim + 90, 300, dim, "lattice");
            int n = pts.Length / dim;
            var q = Cloud(dim + 91, 25, dim, "lattice");
            foreach (var backend in Backends())
                foreach (var structure in Structures(dim))
                    using (var index = new KnnIndex(pts, dim, Opt(backend, structure)))
                        foreach (float radius in new[] { 0f, 1f, 2.5f })
                        {
                            int[] wantI, wantC; float[] wantD;
                            RadiusOracle(pts, q, dim, radius, n, out wantI, out wantD, out wantC);
                            long[] offsets; float[] d;
                            var got = index.RadiusCsr(q, radius, out offsets, out d);
                            string what = string.Format("csr dim {0} {1} {2} r {3}", dim, backend, structure, radius);
                            Check(Same(index.RadiusCounts(q, radius), wantC.Select(c => (long)c).ToArray()), what + " counts");
                            var packedI = new List<int>();
                            var packedD = new List<float>();
                            long at = 0;
                            bool offsetsOk = offsets[0] == 0;
                            for (int row = 0; row < wantC.Length; row++)
                            {
                                at += wantC[row];
                                offsetsOk &= offsets[row + 1] == at;
                                for (int j = 0; j < wantC[row]; j++)
                                {
                                    packedI.Add(wantI[row * n + j]);
                                    packedD.Add(wantD[row * n + j]);
                                }
                            }
                            Check(offsetsOk, what + " offsets");
                            Check(Same(got, packedI.ToArray()), what + " indices");
                            Check(SameBits(d, packedD.ToArray()), what + " distances");
                        }
        }
    }

    static void IndexSerialize()
    {
        var pts = Cloud(95, 400, 3, "lattice");
        var q = Cloud(96, 30, 3);
        foreach (var backend in Backends())
            foreach (var structure in Structures(3))
                using (var index = new KnnIndex(pts, 3, Opt(backend, structure)))
                {
                    byte[] data = index.Serialize();
                    Check(data.Length == 64 + pts.Length * 4 + 4, "serialized size");
                    using (var loaded = KnnIndex.Deserialize(data, Opt(KnnBackend.OpenMP, KnnStructure.Auto)))
                    {
                        float[] ad, bd;
                        var ai = index.Query(q, 5, out ad);
                        var bi = loaded.Query(q, 5, out bd);
                        string what = string.Format("serialize {0} {1}", backend, structure);
                        Check(Same(ai, bi) && SameBits(ad, bd), what + " answers");
                        Check(Same(loaded.Serialize(), data), what + " saves to the same bytes");
                        Check(loaded.Info().Structure == index.Info().Structure, what + " structure");
                    }
                    var bad = (byte[])data.Clone();
                    bad[70] ^= 1;
                    var e = Throws<KnnInvalidArgumentException>(() => KnnIndex.Deserialize(bad), "corrupted");
                    Check(e != null && e.Message.Contains("CRC-32C"), "corrupted: " + (e == null ? "" : e.Message));
                    e = Throws<KnnInvalidArgumentException>(() => KnnIndex.Deserialize(data.Take(data.Length - 1).ToArray()),
                                                          "truncated");
                    Check(e != null && e.Message.Contains("truncated"), "truncated: " + (e == null ? "" : e.Message));
                }
    }

    static void ProgressPolledFromAnotherThread()
    {
        var pts = Cloud(97, 100000, 3);
        using (var index = new KnnIndex(pts, 3, Opt(KnnBackend.OpenMP, KnnStructure.KdTree)))
        using (var progress = new KnnProgress())
        {
            var seen = new List<long[]>();
            using (progress.Register())
            {
                Check(progress.Sequence == 0 && progress.Stage == KnnProgressStage.Idle, "zeroed when registered");
                bool running = true;
                var poller = new Thread(() =>
                {
                    while (Volatile.Read(ref running))
                        seen.Add(new long[] { progress.Sequence, (long)progress.Stage, progress.Total, progress.Done });
                });
                poller.Start();
                float[] d;
                index.Query(pts, 4, out d, null, false);
                Volatile.Write(ref running, false);
                poller.Join();
            }
            Check(progress.Stage == KnnProgressStage.Query && progress.Total == 100000 && progress.Done == 100000,
                  "final progress " + progress.Done + "/" + progress.Total);
            bool ordered = true;
            for (int i = 1; i < seen.Count; i++)
                if (seen[i][0] == seen[i - 1][0] && seen[i][1] == seen[i - 1][1] && seen[i][2] == seen[i - 1][2])
                    ordered &= seen[i][3] >= seen[i - 1][3];
            Check(ordered, "done never goes back within a stage");
            Check(seen.All(s => s[3] >= 0 && s[3] <= Math.Max(s[2], 0)), "done within total");
        }
    }

    static void IndexErrors()
    {
        var pts = Cloud(80, 20, 4);
        pts[4 * 6 + 3] = float.NaN;
        var e = Throws<KnnNonfiniteInputException>(() => new KnnIndex(pts, 4), "NaN point");
        if (e != null)
            Check(e.Function == "knn_index_build" && e.NativeMessage.StartsWith("knn_index_build") &&
                  e.NativeMessage.Contains("point 6"), "message names the point: " + e.NativeMessage);
        pts[4 * 6 + 3] = 1f;
        using (var index = new KnnIndex(pts, 4))
        {
            var q = Cloud(81, 20, 4);
            q[4 * 13] = float.PositiveInfinity;
            float[] d; int[] c;
            var qe = Throws<KnnNonfiniteInputException>(() => index.Query(q, 3, out d), "Inf query");
            if (qe != null) Check(qe.NativeMessage.Contains("13"), "query message: " + qe.NativeMessage);
            foreach (int k in new[] { 0, -2 })
            {
                var ke = Throws<KnnInvalidArgumentException>(() => index.Query(pts, k, out d), "k = " + k);
                if (ke != null) Check(ke.Function == "knn_index_query", "function");
                Throws<KnnInvalidArgumentException>(() => index.QuerySelf(k, false, out d), "self k = " + k);
            }
            Throws<KnnInvalidArgumentException>(() => index.Radius(pts, 1f, -1, out d, out c), "maxNeighbors -1");
            int[] want; float[] wantD;
            Oracle(pts, pts, 4, 2, out want, out wantD);
            Check(Same(index.Query(pts, 2, out d), want), "usable after refusals");
        }
        if (!HasDevice())
            Throws<KnnNoDeviceException>(() => new KnnIndex(pts, 4, Opt(KnnBackend.Cuda, KnnStructure.Auto)), "cuda");
        Throws<KnnUnsupportedException>(() => new KnnIndex(Cloud(82, 10, 2), 2, Opt(KnnBackend.Auto, KnnStructure.Grid)),
                                        "grid in 2-D");
        var o = KnnOptions.CreateDefault();
        Check((long)o.StructSize.ToUInt64() == Marshal.SizeOf(typeof(KnnOptions)), "struct_size from the library");
        Check(o.Device == -1 && o.BackendKind == KnnBackend.Auto && o.Threads == 0, "defaults");
        Throws<ArgumentException>(() => new KnnIndex(pts, 3), "rows of dim");
        Throws<ArgumentException>(() => new KnnIndex(pts, 4, new KnnOptions()), "uninitialised options");
        var closed = new KnnIndex(pts, 4);
        closed.Dispose();
        float[] dd;
        Throws<ObjectDisposedException>(() => closed.Query(pts, 1, out dd), "disposed index");
        Check(KnnIndex.EstimateBuildBytes(1000, 3) > 0 &&
              KnnIndex.EstimateBuildBytes(1000000, 3) > KnnIndex.EstimateBuildBytes(1000, 3), "estimate build");
        Check(KnnIndex.EstimateQueryBytes(100000, 8, 1000, 3, o) > KnnIndex.EstimateQueryBytes(10, 8, 1000, 3, o),
              "estimate query");
        Check(KnnIndex.EstimateBuildBytes(-1, 3) == 0, "estimate of a negative size");
        // SafeHandle: NULL frees fine; the raw info call refuses NULL.
        Check(new IndexHandle().IsInvalid, "a fresh handle is invalid");
        var native = typeof(Knn).Assembly.GetType("KnnGpgpu.NativeMethods");
        var info_raw = native.GetMethod("knn_index_info_raw", BindingFlags.Static | BindingFlags.NonPublic);
        Check((int)info_raw.Invoke(null, new object[] { IntPtr.Zero, IntPtr.Zero, IntPtr.Zero, IntPtr.Zero, IntPtr.Zero }) ==
              (int)KnnStatus.InvalidArgument, "knn_index_info(NULL) is INVALID_ARGUMENT");
        Check(Knn.LastError().StartsWith("knn_index_info"), "its message");
    }

    // ---- point in polygon against an exact oracle -------------------------------------------
    // Coordinates are multiples of 1/1024 below 2^13, so the crossing test of the header's rule
    // is exact in 64-bit integers: an edge (a, b) counts when exactly one endpoint has y > py
    // and it crosses strictly right of the point; inside = odd count over all rings.
    static long Fixed(float v)
    {
        double s = (double)v * 1024.0;
        if (s != Math.Floor(s) || Math.Abs(s) > (1L << 40)) throw new ArgumentException("not on the 1/1024 grid: " + v);
        return (long)s;
    }

    static int Crossings(long px, long py, float[] v, long begin, long end)
    {
        int count = 0;
        for (long i = begin; i < end; i++)
        {
            long j = i + 1 == end ? begin : i + 1;
            long x1 = Fixed(v[2 * i]), y1 = Fixed(v[2 * i + 1]), x2 = Fixed(v[2 * j]), y2 = Fixed(v[2 * j + 1]);
            if ((y1 > py) == (y2 > py)) continue;
            long num = (x1 - px) * (y2 - y1) + (py - y1) * (x2 - x1);
            if (num != 0 && (num > 0) == (y2 > y1)) count++;
        }
        return count;
    }

    static long[][] PipOracle(float[] xy, float[] v, long[] rings, long[] polys)
    {
        int n = xy.Length / 2;
        var result = new long[polys.Length - 1][];
        for (int p = 0; p + 1 < polys.Length; p++)
        {
            var members = new List<long>();
            for (int i = 0; i < n; i++)
            {
                long px = Fixed(xy[2 * i]), py = Fixed(xy[2 * i + 1]);
                int c = 0;
                for (long r = polys[p]; r < polys[p + 1]; r++) c += Crossings(px, py, v, rings[r], rings[r + 1]);
                if (c % 2 == 1) members.Add(i);
            }
            result[p] = members.ToArray();
        }
        return result;
    }

    // [[ring, hole...], ...] with rings as {x0, y0, x1, y1, ...} -> flat arrays
    static void Pack(float[][][] polygons, out float[] v, out long[] rings, out long[] polys)
    {
        var verts = new List<float>();
        var r = new List<long> { 0 };
        var p = new List<long> { 0 };
        foreach (var polygon in polygons)
        {
            foreach (var ring in polygon) { verts.AddRange(ring); r.Add(verts.Count / 2); }
            p.Add(r.Count - 1);
        }
        v = verts.ToArray();
        rings = r.ToArray();
        polys = p.ToArray();
    }

    static bool SameMembers(long[][] a, long[][] b)
    {
        return a.Length == b.Length && a.Zip(b, (x, y) => Same(x, y)).All(ok => ok);
    }

    static KnnOptions PipOpt(KnnBackend backend, int leaf = 0)
    {
        var o = KnnOptions.CreateDefault();
        o.BackendKind = backend;
        o.LeafSize = leaf;
        return o;
    }

    static float[] PipCloud(int seed, int n)
    {
        var rng = new Random(seed);
        var v = new float[2 * n];
        for (int i = 0; i < n; i++)
        {
            int step = i < n / 2 ? 256 : 1;                      // half on a 0.25 lattice
            v[2 * i] = rng.Next(-3 * 1024 / step, 21 * 1024 / step) * step / 1024f;
            v[2 * i + 1] = rng.Next(-3 * 1024 / step, 13 * 1024 / step) * step / 1024f;
        }
        return v;
    }

    static readonly float[] Square = { 0, 0, 4, 0, 4, 4, 0, 4 };
    static readonly float[] Hole = { 1, 1, 3, 1, 3, 3, 1, 3 };
    static readonly float[] HoleCw = { 1.5f, 1.5f, 1.5f, 2.5f, 2.5f, 2.5f, 2.5f, 1.5f };
    static readonly float[] Triangle = { 5, 0, 9, 0, 7, 3 };
    static readonly float[] Comb = { 10, 0, 16, 0, 16, 5, 15, 5, 15, 1, 14, 1, 14, 5, 13, 5, 13, 1, 12, 1, 12, 5,
                                     11, 5, 11, 1, 10, 1 };
    static readonly float[][][] Polygons = {
        new[] { Square, Hole },
        new[] { Triangle },
        new[] { new float[] { -2, -2, 20, -2, 20, 12, -2, 12, -2, -2 }, Square, Comb },
        new[] { Comb },
        new[] { new float[] { 0, 0, 8, 0, 8, 8, 0, 8 }, HoleCw, new float[] { 5, 5, 7, 5, 6, 7 } },
        new[] { Hole } };

    static void QuadtreeBoundaryRule()
    {
        // The header: [0,1]^2 holds (0,0), (0,0.5), (0.5,0) but not (1,0.5), (0.5,1), (1,1).
        float[] xy = { 0, 0, 0, 0.5f, 0.5f, 0, 0.5f, 0.5f, 1, 0.5f, 0.5f, 1, 1, 1, 1, 0, 0, 1, 2, 2 };
        var rings = new[] {
            new float[] { 0, 0, 1, 0, 1, 1, 0, 1 }, new float[] { 0, 1, 1, 1, 1, 0, 0, 0 },
            new float[] { 0, 0, 1, 0, 1, 1, 0, 1, 0, 0 }, new float[] { 1, 1, 0, 1, 0, 0, 1, 0 } };
        var want = new[] { new long[] { 0, 1, 2, 3 } };
        foreach (var ring in rings)
        {
            float[] v; long[] r, p;
            Pack(new[] { new[] { ring } }, out v, out r, out p);
            Check(SameMembers(PipOracle(xy, v, r, p), want), "the oracle follows the header");
            foreach (var backend in Backends())
                using (var qt = new KnnQuadtree(xy, PipOpt(backend)))
                    Check(SameMembers(qt.PointsInEachPolygon(v, r, p), want), "unit square " + backend);
        }
        // shared edges: a point on an edge belongs to the polygon on its right / above
        float[] sv; long[] sr, sp;
        Pack(new[] { new[] { new float[] { 0, 0, 1, 0, 1, 1, 0, 1 } }, new[] { new float[] { 1, 0, 2, 0, 2, 1, 1, 1 } },
                     new[] { new float[] { 1, -1, 2, -1, 2, 0, 1, 0 } } }, out sv, out sr, out sp);
        using (var qt = new KnnQuadtree(new float[] { 1, 0.5f, 1.5f, 0, 1, 0, 0.5f, 0.5f, 1.5f, -0.5f }))
            Check(SameMembers(qt.PointsInEachPolygon(sv, sr, sp),
                              new[] { new long[] { 3 }, new long[] { 0, 1, 2 }, new long[] { 4 } }), "shared edges");
    }

    static void QuadtreeSquareTiling()
    {
        var tiles = new List<float[][]>();
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++)
            {
                var ring = new float[] { i, j, i + 1, j, i + 1, j + 1, i, j + 1 };
                if ((i + j) % 2 == 1) ring = new float[] { i, j + 1, i + 1, j + 1, i + 1, j, i, j };
                tiles.Add(new[] { ring });
            }
        var xyl = new List<float>();
        for (float y = -0.5f; y <= 4.5f; y += 0.25f)
            for (float x = -0.5f; x <= 4.5f; x += 0.25f) { xyl.Add(x); xyl.Add(y); }
        var xy = xyl.ToArray();
        var want = Enumerable.Range(0, 16).Select(_ => new List<long>()).ToArray();
        for (int idx = 0; idx < xy.Length / 2; idx++)
        {
            float x = xy[2 * idx], y = xy[2 * idx + 1];
            if (x >= 0 && x < 4 && y >= 0 && y < 4) want[(int)Math.Floor(y) * 4 + (int)Math.Floor(x)].Add(idx);
        }
        var wantArr = want.Select(w => w.ToArray()).ToArray();
        float[] v; long[] r, p;
        Pack(tiles.ToArray(), out v, out r, out p);
        Check(SameMembers(PipOracle(xy, v, r, p), wantArr), "the oracle agrees with floor(x), floor(y)");
        foreach (var backend in Backends())
            foreach (int leaf in new[] { 0, 1, 3 })
                using (var qt = new KnnQuadtree(xy, PipOpt(backend, leaf)))
                {
                    Check(SameMembers(qt.PointsInEachPolygon(v, r, p), wantArr),
                          "tiling " + backend + " leaf " + leaf + ": every point in exactly one square");
                    Check(Same(qt.PointsInPolygonsCount(v, r, p), wantArr.Select(w => (long)w.Length).ToArray()),
                          "tiling counts");
                }
    }

    static void QuadtreeHolesMatchOracle()
    {
        var xy = PipCloud(7, 800);
        float[] v; long[] r, p;
        Pack(Polygons, out v, out r, out p);
        var want = PipOracle(xy, v, r, p);
        Check(want.All(w => w.Length > 3), "non-trivial memberships");
        foreach (var backend in Backends())
            foreach (int leaf in new[] { 0, 1, 16 })
            {
                var o = PipOpt(backend, leaf);
                o.Threads = 2;
                using (var qt = new KnnQuadtree(xy, o))
                {
                    Check(qt.N == 800, "N");
                    var counts = qt.PointsInPolygonsCount(v, r, p);
                    Check(Same(counts, want.Select(w => (long)w.Length).ToArray()), "counts " + backend + " leaf " + leaf);
                    long[] offsets;
                    var ind = qt.PointsInPolygons(v, r, p, out offsets);
                    Check(offsets[Polygons.Length] == ind.Length, "offsets");
                    var split = Enumerable.Range(0, Polygons.Length)
                        .Select(q => ind.Skip((int)offsets[q]).Take((int)(offsets[q + 1] - offsets[q])).ToArray()).ToArray();
                    Check(SameMembers(split, want), "members " + backend + " leaf " + leaf);
                    long[] o2;
                    Check(Same(qt.PointsInPolygons(v, r, p, out o2, offsets), ind), "explicit outOffsets");
                }
            }
    }

    static void QuadtreeErrors()
    {
        var xy = PipCloud(8, 40);
        xy[15] = float.NaN;
        var e = Throws<KnnNonfiniteInputException>(() => new KnnQuadtree(xy), "NaN point");
        if (e != null)
            Check(e.Function == "knn_quadtree_build" && e.NativeMessage.Contains("point 7"), "names the point: " + e.NativeMessage);
        var good = PipCloud(9, 200);
        float[] v; long[] r, p;
        Pack(new[] { new[] { Square, Hole }, new[] { Triangle } }, out v, out r, out p);
        using (var qt = new KnnQuadtree(good))
        {
            Action<string, Func<long[]>, string> refused = (what, call, fragment) =>
            {
                var ex = Throws<KnnException>(() => call(), what);
                if (ex != null)
                    Check(ex.Function == "knn_points_in_polygons_count" && ex.NativeMessage.Contains(fragment),
                          what + ": " + ex.NativeMessage);
            };
            float[] v2; long[] r2, p2;
            Pack(new[] { new[] { Square, new float[] { 0, 0, 1, 1 } } }, out v2, out r2, out p2);
            refused("two-vertex ring", () => qt.PointsInPolygonsCount(v2, r2, p2), "ring 1");
            Check(Throws<KnnInvalidArgumentException>(() => qt.PointsInPolygonsCount(v2, r2, p2), "status") != null, "");
            refused("decreasing ring offsets", () => qt.PointsInPolygonsCount(v, new long[] { 0, 4, 3, 11 }, p),
                    "ring_offsets decreases at ring 1");
            refused("polygon without a ring", () => qt.PointsInPolygonsCount(v, r, new long[] { 0, 2, 2, 3 }),
                    "polygon 1 has no ring");
            var nanV = (float[])v.Clone();
            nanV[10] = float.NaN;
            var ne = Throws<KnnNonfiniteInputException>(() => qt.PointsInPolygonsCount(nanV, r, p), "NaN vertex");
            if (ne != null) Check(ne.NativeMessage.Contains("vertex 5"), "names the vertex: " + ne.NativeMessage);
            long[] offsets;
            qt.PointsInPolygons(v, r, p, out offsets);
            var wrong = offsets.Select(x => x > 0 ? x + 1 : x).ToArray();
            long[] o2;
            var oe = Throws<KnnInvalidArgumentException>(() => qt.PointsInPolygons(v, r, p, out o2, wrong), "wrong outOffsets");
            if (oe != null)
                Check(oe.Function == "knn_points_in_polygons" && oe.NativeMessage.Contains("out_offsets[1]"), oe.NativeMessage);
            Check(Same(qt.PointsInPolygonsCount(v, r, p), PipOracle(good, v, r, p).Select(w => (long)w.Length).ToArray()),
                  "usable after refusals");
            // the binding's own checks (the C calls get no vertex count)
            Throws<ArgumentOutOfRangeException>(() => qt.PointsInPolygonsCount(v.Take(20).ToArray(), r, p),
                                                "ring offsets past the vertices");
            Throws<ArgumentOutOfRangeException>(() => qt.PointsInPolygonsCount(v, r, new long[] { 0, 2, 4 }),
                                                "polygon offsets past the rings");
        }
        if (!HasDevice())
            Throws<KnnNoDeviceException>(() => new KnnQuadtree(good, PipOpt(KnnBackend.Cuda)), "cuda quadtree");
        Throws<KnnInvalidArgumentException>(() => new KnnQuadtree(good, PipOpt(KnnBackend.Auto, -2)), "leaf size -2");
        Throws<ArgumentException>(() => new KnnQuadtree(new float[3]), "odd xy");
        var disposed = new KnnQuadtree(good);
        disposed.Dispose();
        Throws<ObjectDisposedException>(() => disposed.PointsInPolygonsCount(v, r, p), "disposed quadtree");
        using (var empty = new KnnQuadtree(new float[0]))
            Check(Same(empty.PointsInPolygonsCount(v, r, p), new long[] { 0, 0 }), "empty tree");
        var native = typeof(Knn).Assembly.GetType("KnnGpgpu.NativeMethods");
        var count_raw = native.GetMethod("knn_points_in_polygons_count_raw", BindingFlags.Static | BindingFlags.NonPublic);
        Check((int)count_raw.Invoke(null, new object[] { IntPtr.Zero, IntPtr.Zero, IntPtr.Zero, 0L, IntPtr.Zero, 0L,
                                                         IntPtr.Zero, IntPtr.Zero }) == (int)KnnStatus.InvalidArgument,
              "count with a NULL tree is INVALID_ARGUMENT");
        Check(Knn.LastError() == "knn_points_in_polygons_count: tree is NULL", "its message: " + Knn.LastError());
    }

    static void QuadtreeCancelFlag()
    {
        float[] v; long[] r, p;
        Pack(Polygons, out v, out r, out p);
        using (var qt = new KnnQuadtree(PipCloud(10, 1000), PipOpt(KnnBackend.OpenMP)))
        using (var flag = new KnnCancelFlag())
        {
            var want = qt.PointsInPolygonsCount(v, r, p);
            using (flag.Register())
            {
                flag.Cancel();
                Check(flag.IsCancelled, "IsCancelled");
                var e = Throws<KnnCancelledException>(() => qt.PointsInPolygonsCount(v, r, p), "cancelled count");
                if (e != null) Check(e.Status == KnnStatus.Cancelled && e.StatusName == "CANCELLED", "CANCELLED");
                flag.Reset();
                Check(Same(qt.PointsInPolygonsCount(v, r, p), want), "after reset");
            }
            flag.Cancel();                                            // unregistered: no effect
            Check(Same(qt.PointsInPolygonsCount(v, r, p), want), "unregistered");
        }
    }

    // Without arguments: every test. --expect-no-library: the first call must throw
    // KnnLibraryNotFoundException saying what to install or set. --expect-loaded-from DIR:
    // one build + query against the oracle, with the library found in DIR (no
    // environment variable).
    // ---- float64: double[] overloads call the _f64 functions --------------------------------

    /// <summary>A 10 m cube at 4.5e6 (a UTM northing): float32 cannot hold its millimetres.</summary>
    static double[] UtmCloud(int seed, int n)
    {
        var rng = new Random(seed);
        var v = new double[3 * n];
        for (int i = 0; i < v.Length; i++) v[i] = 4.5e6 + 10.0 * rng.NextDouble();
        return v;
    }

    /// <summary>The contract's squared distance in float64: ((d0*d0 + d1*d1) + d2*d2), each
    /// operation rounded to double (C# evaluates double arithmetic in double).</summary>
    static double SqDistance64(double[] a, int ai, double[] b, int bi)
    {
        double dx = a[ai] - b[bi], dy = a[ai + 1] - b[bi + 1], dz = a[ai + 2] - b[bi + 2];
        double xx = dx * dx, yy = dy * dy, zz = dz * dz;
        double s = xx + yy;
        return s + zz;
    }

    /// <summary>Every reference row of query row i as (distance, index), by (distance, index).</summary>
    static List<KeyValuePair<double, int>> Neighbours64(double[] reference, double[] queries, int i)
    {
        var all = new List<KeyValuePair<double, int>>();
        for (int r = 0; r < reference.Length / 3; r++)
            all.Add(new KeyValuePair<double, int>(SqDistance64(queries, 3 * i, reference, 3 * r), r));
        return all.OrderBy(e => e.Key).ThenBy(e => e.Value).ToList();
    }

    static bool SameBits(double a, double b)
    {
        return BitConverter.DoubleToInt64Bits(a) == BitConverter.DoubleToInt64Bits(b);
    }

    static void IndexF64MatchesADoubleOracle()
    {
        double[] pts = UtmCloud(41, 400), q = UtmCloud(42, 30);
        const int k = 6;
        var want = Enumerable.Range(0, 30).Select(i => Neighbours64(pts, q, i)).ToArray();
        // Rounded to float32, the neighbours change: the data needs float64.
        double[] p32 = pts.Select(x => (double)(float)x).ToArray(), q32 = q.Select(x => (double)(float)x).ToArray();
        Check(Enumerable.Range(0, 30).Any(i => !Neighbours64(p32, q32, i).Take(k).Select(e => e.Value)
                                                 .SequenceEqual(want[i].Take(k).Select(e => e.Value))),
              "float32 rounding changes the answer");
        var opt = KnnOptions.CreateDefault();
        opt.BackendKind = KnnBackend.OpenMP;
        using (var index = new KnnIndex(pts, 3, opt))
        {
            Check(index.Scalar == KnnScalar.Float64, "a float64 index");
            double[] d;
            int[] ind = index.Query(q, k, out d);
            bool ok = true;
            for (int i = 0; i < 30; i++)
                for (int j = 0; j < k; j++)
                    ok &= ind[i * k + j] == want[i][j].Value && SameBits(d[i * k + j], want[i][j].Key);
            Check(ok, "indices and bit-identical double distances");
            double[] sd;
            int[] self = index.QuerySelf(2, true, out sd);
            var self0 = Neighbours64(pts, pts, 0);
            Check(self[0] == self0[1].Value && SameBits(sd[0], self0[1].Key), "query self in double");
            double[] rd; int[] counts;
            index.Radius(q, 1.5, 64, out rd, out counts);
            Check(Enumerable.Range(0, 30).All(i => counts[i] == want[i].Count(e => e.Key <= 1.5 * 1.5)),
                  "radius counts: d2 <= r*r in double");
            long[] offsets; double[] cd;
            int[] csr = index.RadiusCsr(q, 1.5, out offsets, out cd);
            Check(offsets[30] == counts.Sum() && csr.Length == cd.Length, "radius csr in double");
            Check(Enumerable.Range(0, 30).All(i => index.RadiusCounts(q, 1.5)[i] == counts[i]), "radius counts f64");
            // The float family is refused by the library, naming the right call.
            float[] fd;
            KnnException refused = null;
            try { index.Query(new float[3], 1, out fd); } catch (KnnException x) { refused = x; }
            Check(refused != null && refused.Status == KnnStatus.InvalidArgument,
                  "float queries on a float64 index refused");
            using (var loaded = KnnIndex.Deserialize(index.Serialize(), opt))
            {
                double[] ld;
                Check(loaded.Scalar == KnnScalar.Float64 && Same(loaded.Query(q, k, out ld), ind) &&
                      ld.Zip(d, SameBits).All(b => b), "serialize keeps float64");
            }
        }
        Check(KnnIndex.EstimateBuildBytes(1000000, 3, KnnScalar.Float64) >
              KnnIndex.EstimateBuildBytes(1000000, 3), "float64 estimates count doubles");
    }

    static void QuadtreeF64KeepsTownsInside()
    {
        // A border whose eastern edge leans slightly; towns 4e-6 degrees inside and outside it.
        double x1 = 129.0, y1 = -26.0, x2 = 129.0003, y2 = -14.9;
        double[] border = { x1, y1, x2, y2, 120.0, y2, 120.0, y1 };
        var towns = new double[2 * 82];
        for (int side = 0; side < 2; side++)
            for (int i = 0; i <= 40; i++)
            {
                double y = -25.5 + 0.25 * i;
                double edge = x1 + (y - y1) * (x2 - x1) / (y2 - y1);
                int at = 2 * (41 * side + i);
                towns[at] = side == 0 ? edge - 4e-6 : edge + 4e-6;
                towns[at + 1] = y;
            }
        long[] rings = { 0, 4 }, polys = { 0, 1 };
        using (var tree = new KnnQuadtree(towns))
        {
            Check(tree.Scalar == KnnScalar.Float64, "a float64 tree");
            long[][] inside = tree.PointsInEachPolygon(border, rings, polys);
            Check(Same(inside[0].Select(v => (int)v).ToArray(), Enumerable.Range(0, 41).ToArray()),
                  "the inner towns, exactly");
            // float32 vertices combine with the float64 tree (the float call)
            long[] c32 = tree.PointsInPolygonsCount(border.Select(v => (float)v).ToArray(), rings, polys);
            Check(c32.Length == 1, "float vertices on a float64 tree");
        }
        using (var tree32 = new KnnQuadtree(towns.Select(v => (float)v).ToArray()))
            Check(tree32.PointsInPolygonsCount(border.Select(v => (float)v).ToArray(), rings, polys)[0] != 41,
                  "rounded to float32, towns cross the border");
    }

    static int Main(string[] args)
    {
        if (args.Length == 1 && args[0] == "--expect-no-library")
        {
            try
            {
                Console.WriteLine("FAIL: loaded libknn_gpgpu version {0} from {1}", Knn.Version(),
                                  Loader.LoadedPath ?? "the loader's search path");
                return 1;
            }
            catch (KnnLibraryNotFoundException e)
            {
                bool advises = e.Message.Contains("cmake --install") && e.Message.Contains(Loader.EnvironmentVariable);
                Console.WriteLine("{0} KnnLibraryNotFoundException: {1}", advises ? "ok  " : "FAIL", e.Message);
                return advises ? 0 : 1;
            }
        }
        string expectedDir = args.Length == 2 && args[0] == "--expect-loaded-from" ? Path.GetFullPath(args[1]) : null;
        var tests = new Action[] { LayoutMatchesC, EveryHeaderFunctionIsBound, OptionsVersion2Defaults, BuildAndQueryMatchTheOracle,
                                   BruteForceBitIdentical, MemoryHelpers, BadInputThrows, LastErrorIsPerThread,
                                   DeviceFunctions, IndexOraclesAgreeWithBruteForce, IndexQueryMatchesOracle,
                                   IndexQueryForms, IndexQuerySelf, IndexRadius, IndexRadiusCsr, IndexSerialize,
                                   ProgressPolledFromAnotherThread, IndexErrors,
                                   QuadtreeBoundaryRule, QuadtreeSquareTiling, QuadtreeHolesMatchOracle,
                                   QuadtreeErrors, QuadtreeCancelFlag, IndexF64MatchesADoubleOracle,
                                   QuadtreeF64KeepsTownsInside, MeshClosestMatchesADoubleOracle,
                                   MeshMaxDistance, MeshSignsOnClosedAndOpenMeshes, MeshDeviationReport,
                                   MeshSerializeRoundTrip, MeshErrors,
                                   MeshAlignRecoversARigidMotion, MeshAlignErrors,
                                   StatsNormalsMatchADoubleOracle, StatsOutliersAndDensitiesMatchTheOracle,
                                   StatsOfAFloat32IndexMatchTheOracle,
                                   IndexAlignRecoversARigidMotion };
        if (expectedDir != null) tests = new Action[] { BuildAndQueryMatchTheOracle };
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
                          Loader.LoadedPath ?? "from the loader's search path");
        if (expectedDir != null && (Loader.LoadedPath == null ||
                                    Path.GetDirectoryName(Loader.LoadedPath) != expectedDir.TrimEnd('/')))
        {
            Console.WriteLine("FAIL: the library was not loaded from {0}", expectedDir);
            failures++;
        }
        return failures == 0 ? 0 : 1;
    }
}
