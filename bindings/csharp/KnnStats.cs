// KnnStats.cs - C# binding of the neighbourhood statistics of libknn_gpgpu
// (knn_gpgpu_stats.h): normals and curvature, outlier scores and the inliers
// they keep, neighbour counts within a radius, the distance to the k-th
// neighbour. Compiled with KnnGpgpu.cs and KnnMesh.cs:
//     mcs -target:library -out:KnnGpgpu.dll KnnGpgpu.cs KnnMesh.cs KnnStats.cs
//
// Extension methods of KnnIndex. The generic ones take T = float for a
// float32 index (the float calls) and T = double for a float64 one (the _f64
// calls); another T, or one the index does not hold, throws before the call.
// Every definition is the header's: the k nearest of a point include itself
// (normals), the k nearest others do not (scores, k-th distances); normals
// are unit vectors oriented towards the viewpoint when one is given, else
// consistently over the cloud; results per indexed point in input order,
// identical on every backend. The IntPtr overloads take host or device
// outputs (all of one call in one kind), as the index's other calls do. A
// cancel flag and progress record registered on the calling thread apply as
// to queries.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace KnnGpgpu
{
    internal static partial class NativeMethods
    {
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_normals(IndexHandle index, int k, IntPtr viewpoint, IntPtr normals,
                                                     IntPtr curvature, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_normals_f64(IndexHandle index, int k, IntPtr viewpoint, IntPtr normals,
                                                         IntPtr curvature, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_outlier_scores(IndexHandle index, int k, IntPtr meanDistances,
                                                            IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_outlier_scores_f64(IndexHandle index, int k, IntPtr meanDistances,
                                                                IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_statistical_inliers(IndexHandle index, int k, double stdRatio,
                                                                 IntPtr kept, out long nKept, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_statistical_inliers_f64(IndexHandle index, int k, double stdRatio,
                                                                     IntPtr kept, out long nKept, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_kth_distances(IndexHandle index, int k, IntPtr distances, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_kth_distances_f64(IndexHandle index, int k, IntPtr distances,
                                                               IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_neighbor_counts(IndexHandle index, float radius, IntPtr counts,
                                                             IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_neighbor_counts_f64(IndexHandle index, double radius, IntPtr counts,
                                                                 IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius_inliers(IndexHandle index, float radius, long minNeighbors,
                                                            IntPtr kept, out long nKept, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius_inliers_f64(IndexHandle index, double radius,
                                                                long minNeighbors, IntPtr kept, out long nKept,
                                                                IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr knn_estimate_stats_bytes(long n, int k, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr knn_estimate_stats_bytes_f64(long n, int k, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_align(IndexHandle index, IntPtr points, long m, IntPtr normals,
                                                   IntPtr initial, ref KnnAlignParamsStruct parameters,
                                                   ref KnnAlignResultStruct result, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_align_f64(IndexHandle index, IntPtr points, long m, IntPtr normals,
                                                       IntPtr initial, ref KnnAlignParamsStruct parameters,
                                                       ref KnnAlignResultStruct result, IntPtr opt);
    }

    /// <summary>The answer of KnnStats.Normals: unit normals (x, y, z rows) and the surface
    /// variation l0 / (l0 + l1 + l2) per point (null when not asked for).</summary>
    public sealed class KnnNormals<T> where T : struct
    {
        public T[] Normals;
        public T[] Curvature;
    }

    // The statistics' entry points of each precision, beside the index's others (IndexCalls
    // in KnnGpgpu.cs): the generic and the Scalar-driven methods below share one body.
    internal abstract partial class IndexCalls
    {
        internal abstract int Normals(IndexHandle h, int k, IntPtr v, IntPtr n, IntPtr c, IntPtr o);
        internal abstract int OutlierScores(IndexHandle h, int k, IntPtr values, IntPtr o);
        internal abstract int KthDistances(IndexHandle h, int k, IntPtr values, IntPtr o);
        internal abstract int NeighborCounts(IndexHandle h, double r, IntPtr counts, IntPtr o);
        internal abstract int StatisticalInliers(IndexHandle h, int k, double ratio, IntPtr kept, out long n,
                                                 IntPtr o);
        internal abstract int RadiusInliers(IndexHandle h, double r, long min, IntPtr kept, out long n, IntPtr o);
        internal abstract UIntPtr EstimateStatsBytes(long n, int k, IntPtr o);
        internal abstract int Align(IndexHandle h, IntPtr p, long m, IntPtr normals, IntPtr initial,
                                    ref KnnAlignParamsStruct prm, ref KnnAlignResultStruct r, IntPtr o);
    }

    internal sealed partial class FloatCalls
    {
        [MethodImpl(Late)]
        internal override int Normals(IndexHandle h, int k, IntPtr v, IntPtr n, IntPtr c, IntPtr o)
        { return NativeMethods.knn_index_normals(h, k, v, n, c, o); }
        [MethodImpl(Late)]
        internal override int OutlierScores(IndexHandle h, int k, IntPtr values, IntPtr o)
        { return NativeMethods.knn_index_outlier_scores(h, k, values, o); }
        [MethodImpl(Late)]
        internal override int KthDistances(IndexHandle h, int k, IntPtr values, IntPtr o)
        { return NativeMethods.knn_index_kth_distances(h, k, values, o); }
        [MethodImpl(Late)]
        internal override int NeighborCounts(IndexHandle h, double r, IntPtr counts, IntPtr o)
        { return NativeMethods.knn_index_neighbor_counts(h, (float)r, counts, o); }
        [MethodImpl(Late)]
        internal override int StatisticalInliers(IndexHandle h, int k, double ratio, IntPtr kept, out long n,
                                                 IntPtr o)
        { return NativeMethods.knn_index_statistical_inliers(h, k, ratio, kept, out n, o); }
        [MethodImpl(Late)]
        internal override int RadiusInliers(IndexHandle h, double r, long min, IntPtr kept, out long n, IntPtr o)
        { return NativeMethods.knn_index_radius_inliers(h, (float)r, min, kept, out n, o); }
        [MethodImpl(Late)]
        internal override UIntPtr EstimateStatsBytes(long n, int k, IntPtr o)
        { return NativeMethods.knn_estimate_stats_bytes(n, k, o); }
        [MethodImpl(Late)]
        internal override int Align(IndexHandle h, IntPtr p, long m, IntPtr normals, IntPtr initial,
                                    ref KnnAlignParamsStruct prm, ref KnnAlignResultStruct r, IntPtr o)
        { return NativeMethods.knn_index_align(h, p, m, normals, initial, ref prm, ref r, o); }
    }

    internal sealed partial class DoubleCalls
    {
        [MethodImpl(Late)]
        internal override int Normals(IndexHandle h, int k, IntPtr v, IntPtr n, IntPtr c, IntPtr o)
        { return NativeMethods.knn_index_normals_f64(h, k, v, n, c, o); }
        [MethodImpl(Late)]
        internal override int OutlierScores(IndexHandle h, int k, IntPtr values, IntPtr o)
        { return NativeMethods.knn_index_outlier_scores_f64(h, k, values, o); }
        [MethodImpl(Late)]
        internal override int KthDistances(IndexHandle h, int k, IntPtr values, IntPtr o)
        { return NativeMethods.knn_index_kth_distances_f64(h, k, values, o); }
        [MethodImpl(Late)]
        internal override int NeighborCounts(IndexHandle h, double r, IntPtr counts, IntPtr o)
        { return NativeMethods.knn_index_neighbor_counts_f64(h, r, counts, o); }
        [MethodImpl(Late)]
        internal override int StatisticalInliers(IndexHandle h, int k, double ratio, IntPtr kept, out long n,
                                                 IntPtr o)
        { return NativeMethods.knn_index_statistical_inliers_f64(h, k, ratio, kept, out n, o); }
        [MethodImpl(Late)]
        internal override int RadiusInliers(IndexHandle h, double r, long min, IntPtr kept, out long n, IntPtr o)
        { return NativeMethods.knn_index_radius_inliers_f64(h, r, min, kept, out n, o); }
        [MethodImpl(Late)]
        internal override UIntPtr EstimateStatsBytes(long n, int k, IntPtr o)
        { return NativeMethods.knn_estimate_stats_bytes_f64(n, k, o); }
        [MethodImpl(Late)]
        internal override int Align(IndexHandle h, IntPtr p, long m, IntPtr normals, IntPtr initial,
                                    ref KnnAlignParamsStruct prm, ref KnnAlignResultStruct r, IntPtr o)
        { return NativeMethods.knn_index_align_f64(h, p, m, normals, initial, ref prm, ref r, o); }
    }

    /// <summary>Neighbourhood statistics of a KnnIndex of 3-D points (knn_gpgpu_stats.h).</summary>
    public static class KnnStats
    {
        static IndexHandle Live(KnnIndex index)
        {
            if (index == null) throw new ArgumentNullException("index");
            if (index.Handle.IsClosed) throw new ObjectDisposedException("KnnIndex");
            return index.Handle;
        }

        // The calls of the scalar the index holds.
        static IndexCalls CallsOf(KnnIndex index)
        {
            Live(index);
            return IndexCalls.For(index.Scalar);
        }

        // T must be the scalar the index holds: float for float32, double for float64. Picked,
        // not IndexCalls<T>.Of: the initialiser of IndexCalls<int> would wrap the refusal in a
        // TypeInitializationException.
        static IndexCalls CallsOf<T>(KnnIndex index)
        {
            Live(index);
            IndexCalls calls = Precision.Pick<T, IndexCalls>(IndexCalls<float>.Of, IndexCalls<double>.Of, "KnnStats");
            if (calls.Scalar != index.Scalar)
                throw new ArgumentException("this index holds " + index.Scalar + " (T = " +
                                            (index.Scalar == KnnScalar.Float64 ? "double" : "float") + "), not " +
                                            typeof(T).Name);
            return calls;
        }

        /// <summary>The rigid motion that best fits the scan points (x, y, z per point, the
        /// index's Scalar) onto the index's 3-D points (knn_index_align or _f64): ICP against
        /// each moved point's nearest index point, point to plane with normals (3 n values, one
        /// unit normal per index point, e.g. from Normals) or point to point when normals is
        /// null. The other arguments are KnnMesh's Align's.</summary>
        public static KnnAlignResult Align<T>(this KnnIndex index, T[] points, T[] normals = null,
                                              double[,] initial = null,
                                              double maxCorrespondence = double.PositiveInfinity,
                                              int maxIterations = 50, double keptFraction = 1,
                                              double? toleranceRotation = null, double? toleranceTranslation = null,
                                              bool coarseStart = false, KnnOptions? options = null)
            where T : struct
        {
            IndexCalls calls = CallsOf<T>(index);
            if (points == null) throw new ArgumentNullException("points");
            if (points.Length % 3 != 0)
                throw new ArgumentException("points: 3 values per point, got " + points.Length);
            if (normals != null && normals.Length != 3 * index.N)
                throw new ArgumentException("normals: " + 3 * index.N + " values (3 per index point), got " +
                                            normals.Length);
            IndexHandle handle = Live(index);
            long m = points.Length / 3;
            using (var pins = new Pins(points, normals))
            {
                IntPtr p = pins[0], n = pins[1];
                return AlignRun.Fit((IntPtr start, ref KnnAlignParamsStruct prm, ref KnnAlignResultStruct fit,
                                     IntPtr opt) => calls.Align(handle, p, m, n, start, ref prm, ref fit, opt),
                                    "knn_index_align" + calls.Suffix, initial, maxCorrespondence, maxIterations,
                                    keptFraction, toleranceRotation, toleranceTranslation, coarseStart, options);
            }
        }

        /// <summary>Unit normals of the index's 3-D points by principal components of each
        /// point's k nearest, itself included (knn_index_normals or _f64), and the curvature
        /// unless wantCurvature is false. viewpoint (3 values, or null): every normal then
        /// satisfies dot(n, viewpoint - p) &gt;= 0; null: oriented consistently over the
        /// cloud.</summary>
        public static KnnNormals<T> Normals<T>(this KnnIndex index, int k, T[] viewpoint = null,
                                               bool wantCurvature = true, KnnOptions? options = null)
            where T : struct
        {
            IndexCalls calls = CallsOf<T>(index);
            if (viewpoint != null && viewpoint.Length != 3)
                throw new ArgumentException("viewpoint: 3 values (x, y, z), or null");
            var result = new KnnNormals<T> { Normals = new T[3 * index.N],
                                             Curvature = wantCurvature ? new T[index.N] : null };
            using (var pins = new Pins(viewpoint, result.Normals, result.Curvature))
                NormalsOf(index, calls, k, pins[0], pins[1], pins[2], options);
            return result;
        }

        /// <summary>Raw form: viewpoint host memory (3 values of the index's Scalar, or
        /// IntPtr.Zero), normals (3 n) and curvature (n, or IntPtr.Zero) host or device memory
        /// of the index's Scalar.</summary>
        public static void Normals(this KnnIndex index, int k, IntPtr viewpoint, IntPtr normals, IntPtr curvature,
                                   KnnOptions? options = null)
        {
            NormalsOf(index, CallsOf(index), k, viewpoint, normals, curvature, options);
        }

        static void NormalsOf(KnnIndex index, IndexCalls calls, int k, IntPtr viewpoint, IntPtr normals,
                              IntPtr curvature, KnnOptions? options)
        {
            using (var opt = OptionsBlock.For(options))
                Knn.Check(calls.Normals(Live(index), k, viewpoint, normals, curvature, OptionsBlock.PointerOf(opt)),
                          "knn_index_normals" + calls.Suffix);
        }

        delegate int PerPointCall(IndexCalls calls, IndexHandle h, int k, IntPtr values, IntPtr o);

        // One value of T per indexed point (the scores, the k-th distances).
        static T[] PerPoint<T>(KnnIndex index, string call, PerPointCall run, int k, KnnOptions? options)
            where T : struct
        {
            IndexCalls calls = CallsOf<T>(index);
            var values = new T[index.N];
            using (var pins = new Pins(values))
            using (var opt = OptionsBlock.For(options))
                Knn.Check(run(calls, Live(index), k, pins[0], OptionsBlock.PointerOf(opt)), call + calls.Suffix);
            return values;
        }

        /// <summary>knn_index_outlier_scores: per point, the mean Euclidean distance to its k
        /// nearest others (0 for a lone point).</summary>
        public static T[] OutlierScores<T>(this KnnIndex index, int k, KnnOptions? options = null) where T : struct
        {
            return PerPoint<T>(index, "knn_index_outlier_scores", (c, h, kk, v, o) => c.OutlierScores(h, kk, v, o), k,
                               options);
        }

        /// <summary>knn_index_kth_distances: per point, the distance to its k-th nearest other
        /// (+infinity where fewer than k others exist).</summary>
        public static T[] KthDistances<T>(this KnnIndex index, int k, KnnOptions? options = null) where T : struct
        {
            return PerPoint<T>(index, "knn_index_kth_distances", (c, h, kk, v, o) => c.KthDistances(h, kk, v, o), k,
                               options);
        }

        /// <summary>knn_index_neighbor_counts: per point, the number of other points within
        /// radius (squared distance &lt;= radius * radius in the index's Scalar; equal points
        /// count, the point itself does not).</summary>
        public static long[] NeighborCounts(this KnnIndex index, double radius, KnnOptions? options = null)
        {
            IndexCalls calls = CallsOf(index);
            var counts = new long[index.N];
            using (var pins = new Pins(counts))
            using (var opt = OptionsBlock.For(options))
                Knn.Check(calls.NeighborCounts(Live(index), radius, pins[0], OptionsBlock.PointerOf(opt)),
                          "knn_index_neighbor_counts" + calls.Suffix);
            return counts;
        }

        delegate int KeptCall(IndexCalls calls, IndexHandle h, IntPtr kept, out long nKept, IntPtr o);

        // The ids an outlier removal keeps, ascending: room for every point, cut to nKept.
        static int[] Kept(KnnIndex index, string call, KeptCall run, KnnOptions? options)
        {
            IndexCalls calls = CallsOf(index);
            var kept = new int[index.N];
            long n;
            using (var pins = new Pins(kept))
            using (var opt = OptionsBlock.For(options))
                Knn.Check(run(calls, Live(index), pins[0], out n, OptionsBlock.PointerOf(opt)), call + calls.Suffix);
            Array.Resize(ref kept, (int)n);
            return kept;
        }

        /// <summary>Statistical outlier removal (knn_index_statistical_inliers): the ids, in
        /// ascending order, of the points whose OutlierScores s satisfy s &lt;= mean + stdRatio *
        /// std (mean and sample standard deviation over the cloud), as PCL's
        /// StatisticalOutlierRemoval with setMeanK(k) keeps them.</summary>
        public static int[] StatisticalInliers(this KnnIndex index, int k, double stdRatio = 2.0,
                                               KnnOptions? options = null)
        {
            return Kept(index, "knn_index_statistical_inliers",
                        (IndexCalls c, IndexHandle h, IntPtr kept, out long n, IntPtr o) =>
                            c.StatisticalInliers(h, k, stdRatio, kept, out n, o),
                        options);
        }

        /// <summary>Radius outlier removal (knn_index_radius_inliers): the ids, in ascending
        /// order, of the points with at least minNeighbors others within radius.</summary>
        public static int[] RadiusInliers(this KnnIndex index, double radius, long minNeighbors,
                                          KnnOptions? options = null)
        {
            return Kept(index, "knn_index_radius_inliers",
                        (IndexCalls c, IndexHandle h, IntPtr kept, out long n, IntPtr o) =>
                            c.RadiusInliers(h, radius, minNeighbors, kept, out n, o),
                        options);
        }

        /// <summary>knn_estimate_stats_bytes (or _f64): device bytes a statistics call with lists
        /// of k on a CUDA index of n 3-D points needs at most (k + 1 for the calls over others);
        /// no device needed.</summary>
        public static ulong EstimateBytes(long n, int k, KnnScalar scalar = KnnScalar.Float32,
                                          KnnOptions? options = null)
        {
            Loader.Ensure();
            using (var opt = OptionsBlock.For(options))
                return IndexCalls.For(scalar).EstimateStatsBytes(n, k, OptionsBlock.PointerOf(opt)).ToUInt64();
        }
    }
}
