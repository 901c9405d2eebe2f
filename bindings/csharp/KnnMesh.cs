// KnnMesh.cs - C# binding of the triangle-mesh calls of libknn_gpgpu
// (knn_gpgpu_mesh.h): exact closest point, signed distance, the deviation
// report of a scan against a design and the scan's best rigid fit to it.
// Compiled with KnnGpgpu.cs:
//     mcs -target:library -out:KnnGpgpu.dll KnnGpgpu.cs KnnMesh.cs
//
// KnnMesh<float> holds a float32 mesh (knn_mesh_build and the float calls),
// KnnMesh<double> a float64 one (the _f64 calls); one generic implementation
// serves both, and the two families differ only in which entry points
// MeshCalls<T> binds. Every definition (closest point, ties to the smaller
// triangle id, max_distance, signs, the report) is the header's: a point
// beyond maxDistance gets triangle -1, distance +infinity and NaN closest
// point and weights.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace KnnGpgpu
{
    internal static partial class NativeMethods
    {
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_build(IntPtr vertices, long nVertices, IntPtr triangles,
                                                  long nTriangles, IntPtr opt, out MeshHandle mesh);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_build_f64(IntPtr vertices, long nVertices, IntPtr triangles,
                                                      long nTriangles, IntPtr opt, out MeshHandle mesh);
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int knn_mesh_free(IntPtr mesh);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_info(MeshHandle mesh, out long nVertices, out long nTriangles,
                                                 out int scalar, out int backend, out int closedOriented);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_closest(MeshHandle mesh, IntPtr points, long m, float maxDistance,
                                                    IntPtr triangleIds, IntPtr sqDistances, IntPtr closest,
                                                    IntPtr barycentric, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_closest_f64(MeshHandle mesh, IntPtr points, long m,
                                                        double maxDistance, IntPtr triangleIds,
                                                        IntPtr sqDistances, IntPtr closest,
                                                        IntPtr barycentric, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_signed_distance(MeshHandle mesh, IntPtr points, long m,
                                                            float maxDistance, IntPtr signedDistances,
                                                            IntPtr triangleIds, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_signed_distance_f64(MeshHandle mesh, IntPtr points, long m,
                                                                double maxDistance, IntPtr signedDistances,
                                                                IntPtr triangleIds, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_deviation_report(
            MeshHandle mesh, IntPtr points, long m, float maxDistance, double tolerance, IntPtr percentiles,
            int nPercentiles, IntPtr percentileValues, IntPtr binEdges, int nBins, IntPtr binCounts,
            IntPtr signedDistances, ref KnnDeviationReportStruct report, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_deviation_report_f64(
            MeshHandle mesh, IntPtr points, long m, double maxDistance, double tolerance, IntPtr percentiles,
            int nPercentiles, IntPtr percentileValues, IntPtr binEdges, int nBins, IntPtr binCounts,
            IntPtr signedDistances, ref KnnDeviationReportStruct report, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_serialized_size(MeshHandle mesh, out UIntPtr bytes);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_serialize(MeshHandle mesh, IntPtr buffer, UIntPtr bytes);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_deserialize(IntPtr buffer, UIntPtr bytes, IntPtr opt,
                                                        out MeshHandle mesh);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr knn_estimate_mesh_bytes(long nVertices, long nTriangles, int scalar,
                                                              IntPtr opt);
        // Alignment (contract section 8); KnnMesh<T>.Align calls the _ex form.
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_align(MeshHandle mesh, IntPtr points, long m, IntPtr initial,
                                                  double maxCorrespondence, int maxIterations,
                                                  IntPtr transform, IntPtr rms, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_align_f64(MeshHandle mesh, IntPtr points, long m, IntPtr initial,
                                                      double maxCorrespondence, int maxIterations,
                                                      IntPtr transform, IntPtr rms, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_align_ex(MeshHandle mesh, IntPtr points, long m, IntPtr initial,
                                                     ref KnnAlignParamsStruct parameters,
                                                     ref KnnAlignResultStruct result, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_mesh_align_ex_f64(MeshHandle mesh, IntPtr points, long m,
                                                         IntPtr initial, ref KnnAlignParamsStruct parameters,
                                                         ref KnnAlignResultStruct result, IntPtr opt);
    }

    /// <summary>Owns a knn_mesh*; knn_mesh_free runs exactly once.</summary>
    public sealed class MeshHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        public MeshHandle() : base(true) { }
        protected override bool ReleaseHandle() { return NativeMethods.knn_mesh_free(handle) == 0; }
    }

    /// <summary>struct knn_deviation_report (104 bytes on 64-bit platforms).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct KnnDeviationReportStruct
    {
        public UIntPtr StructSize;
        public long NPoints, NMeasured, NBeyond, NWithinTolerance, NAboveTolerance, NBelowTolerance,
                    NBelowBins, NAboveBins;
        public double Min, Max, Mean, Rms;
    }

    /// <summary>struct knn_align_params (48 bytes on 64-bit platforms); a field of 0 takes its
    /// default.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct KnnAlignParamsStruct
    {
        public UIntPtr StructSize;
        public double MaxCorrespondence;
        public int MaxIterations;
        public int CoarseStart;
        public double KeptFraction;
        public double ToleranceRotation;
        public double ToleranceTranslation;
    }

    /// <summary>struct knn_align_result (168 bytes on 64-bit platforms).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct KnnAlignResultStruct
    {
        public UIntPtr StructSize;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 16)] public double[] Transform;
        public double Rms;
        public long NKept;
        public int Iterations;
        public int Converged;
        public int DegenerateDirections;
        public int NDegenerate;
    }

    /// <summary>The KNN_ALIGN_* bits: a rotation about an axis through the scan's centroid, or a
    /// translation along one, that the last step of a fit could not observe.</summary>
    [Flags]
    public enum KnnAlignDirections
    {
        None = 0, RotationX = 1, RotationY = 2, RotationZ = 4,
        TranslationX = 8, TranslationY = 16, TranslationZ = 32
    }

    /// <summary>What knn_mesh_align_ex found (definitions in the header). Transform is the
    /// row-major 4 x 4 rigid transform that maps the scan onto the mesh (mesh point =
    /// Transform * (x, y, z, 1)); Rms is NaN when no point was kept.</summary>
    public sealed class KnnAlignResult
    {
        public double[,] Transform;
        public double Rms;
        public long NKept;
        public int Iterations;
        public bool Converged;
        public KnnAlignDirections DegenerateDirections;
        public int NDegenerate;
    }

    // One fit's C call with its start (IntPtr.Zero: the identity), parameters and result.
    internal delegate int AlignCall(IntPtr initial, ref KnnAlignParamsStruct parameters,
                                    ref KnnAlignResultStruct result, IntPtr opt);

    // The marshalling every fit shares (knn_mesh_align_ex, knn_index_align): the parameters
    // struct (0 takes the header's default), the start pinned, the result read back.
    internal static class AlignRun
    {
        internal static KnnAlignResult Fit(AlignCall call, string name, double[,] initial,
                                           double maxCorrespondence, int maxIterations, double keptFraction,
                                           double? toleranceRotation, double? toleranceTranslation,
                                           bool coarseStart, KnnOptions? options)
        {
            if (initial != null && (initial.GetLength(0) != 4 || initial.GetLength(1) != 4))
                throw new ArgumentException("initial: expected a 4 x 4 transform");
            var prm = new KnnAlignParamsStruct {
                StructSize = new UIntPtr((ulong)Marshal.SizeOf(typeof(KnnAlignParamsStruct))),
                MaxCorrespondence = maxCorrespondence, MaxIterations = maxIterations,
                CoarseStart = coarseStart ? 1 : 0, KeptFraction = keptFraction,
                ToleranceRotation = toleranceRotation ?? 0, ToleranceTranslation = toleranceTranslation ?? 0 };
            var fit = new KnnAlignResultStruct {
                StructSize = new UIntPtr((ulong)Marshal.SizeOf(typeof(KnnAlignResultStruct))),
                Transform = new double[16] };
            using (var pins = new Pins(initial))
            using (var opt = OptionsBlock.For(options))
                Knn.Check(call(pins[0], ref prm, ref fit, OptionsBlock.PointerOf(opt)), name);
            var transform = new double[4, 4];
            Buffer.BlockCopy(fit.Transform, 0, transform, 0, 16 * sizeof(double));
            return new KnnAlignResult { Transform = transform, Rms = fit.Rms, NKept = fit.NKept,
                                        Iterations = fit.Iterations, Converged = fit.Converged != 0,
                                        DegenerateDirections = (KnnAlignDirections)fit.DegenerateDirections,
                                        NDegenerate = fit.NDegenerate };
        }
    }

    /// <summary>knn_mesh_info.</summary>
    public struct KnnMeshInfo
    {
        public long NVertices;
        public long NTriangles;
        public KnnScalar Scalar;
        public KnnBackend Backend;
        /// <summary>True: signs from the angle-weighted pseudonormals; false: from the
        /// generalized winding number.</summary>
        public bool ClosedOriented;
    }

    /// <summary>The answer of KnnMesh.Closest: per point the triangle (-1 beyond maxDistance),
    /// the squared distance, the closest point (x, y, z rows) and, when asked for, the
    /// barycentric weights (w0, w1, w2 rows; null otherwise).</summary>
    public sealed class KnnMeshClosest<T> where T : struct
    {
        public int[] TriangleIds;
        public T[] SqDistances;
        public T[] Closest;
        public T[] Barycentric;
    }

    /// <summary>What knn_mesh_deviation_report computes (definitions in the header).
    /// PercentileValues[i] is the nearest-rank percentile Percentiles[i]; BinCounts[b]
    /// counts BinEdges[b] &lt;= d &lt; BinEdges[b+1] (the last bin closed); SignedDistances
    /// holds the per-point values when asked for, else null.</summary>
    public sealed class KnnDeviationReport<T> where T : struct
    {
        public KnnDeviationReportStruct Summary;
        public double Tolerance;
        public double[] Percentiles, PercentileValues, BinEdges;
        public long[] BinCounts;
        public T[] SignedDistances;
    }

    /// <summary>The entry points of one precision: the float calls or their _f64 twins. The
    /// methods are never inlined, so that Mono binds each import only at its first call
    /// (after Loader.Ensure, as Native does for the index).</summary>
    internal abstract class MeshCalls<T> where T : struct
    {
        internal static readonly MeshCalls<T> Of =
            Precision.Pick<T, MeshCalls<T>>((object)new FloatMeshCalls() as MeshCalls<T>,
                                            (object)new DoubleMeshCalls() as MeshCalls<T>, "KnnMesh");

        internal abstract KnnScalar Scalar { get; }
        internal abstract string Suffix { get; }
        internal abstract int Build(IntPtr v, long nv, IntPtr t, long nt, IntPtr o, out MeshHandle h);
        internal abstract int Closest(MeshHandle h, IntPtr p, long m, double max, IntPtr ids, IntPtr sq, IntPtr cl,
                                      IntPtr bc, IntPtr o);
        internal abstract int SignedDistance(MeshHandle h, IntPtr p, long m, double max, IntPtr sd, IntPtr ids,
                                             IntPtr o);
        internal abstract int Report(MeshHandle h, IntPtr p, long m, double max, double tol, IntPtr pct, int np,
                                     IntPtr pv, IntPtr edges, int nb, IntPtr counts, IntPtr sd,
                                     ref KnnDeviationReportStruct r, IntPtr o);
        internal abstract int Align(MeshHandle h, IntPtr p, long m, IntPtr initial, ref KnnAlignParamsStruct prm,
                                    ref KnnAlignResultStruct r, IntPtr o);
    }

    internal sealed class FloatMeshCalls : MeshCalls<float>
    {
        const MethodImplOptions Late = MethodImplOptions.NoInlining;
        internal override KnnScalar Scalar { get { return KnnScalar.Float32; } }
        internal override string Suffix { get { return ""; } }
        [MethodImpl(Late)]
        internal override int Build(IntPtr v, long nv, IntPtr t, long nt, IntPtr o, out MeshHandle h)
        { return NativeMethods.knn_mesh_build(v, nv, t, nt, o, out h); }
        // max_distance is rounded to the mesh's float, as the header compares in it.
        [MethodImpl(Late)]
        internal override int Closest(MeshHandle h, IntPtr p, long m, double max, IntPtr ids, IntPtr sq, IntPtr cl,
                                      IntPtr bc, IntPtr o)
        { return NativeMethods.knn_mesh_closest(h, p, m, (float)max, ids, sq, cl, bc, o); }
        [MethodImpl(Late)]
        internal override int SignedDistance(MeshHandle h, IntPtr p, long m, double max, IntPtr sd, IntPtr ids,
                                             IntPtr o)
        { return NativeMethods.knn_mesh_signed_distance(h, p, m, (float)max, sd, ids, o); }
        [MethodImpl(Late)]
        internal override int Report(MeshHandle h, IntPtr p, long m, double max, double tol, IntPtr pct, int np,
                                     IntPtr pv, IntPtr edges, int nb, IntPtr counts, IntPtr sd,
                                     ref KnnDeviationReportStruct r, IntPtr o)
        { return NativeMethods.knn_mesh_deviation_report(h, p, m, (float)max, tol, pct, np, pv, edges, nb, counts, sd, ref r, o); }
        [MethodImpl(Late)]
        internal override int Align(MeshHandle h, IntPtr p, long m, IntPtr initial, ref KnnAlignParamsStruct prm,
                                    ref KnnAlignResultStruct r, IntPtr o)
        { return NativeMethods.knn_mesh_align_ex(h, p, m, initial, ref prm, ref r, o); }
    }

    internal sealed class DoubleMeshCalls : MeshCalls<double>
    {
        const MethodImplOptions Late = MethodImplOptions.NoInlining;
        internal override KnnScalar Scalar { get { return KnnScalar.Float64; } }
        internal override string Suffix { get { return "_f64"; } }
        [MethodImpl(Late)]
        internal override int Build(IntPtr v, long nv, IntPtr t, long nt, IntPtr o, out MeshHandle h)
        { return NativeMethods.knn_mesh_build_f64(v, nv, t, nt, o, out h); }
        [MethodImpl(Late)]
        internal override int Closest(MeshHandle h, IntPtr p, long m, double max, IntPtr ids, IntPtr sq, IntPtr cl,
                                      IntPtr bc, IntPtr o)
        { return NativeMethods.knn_mesh_closest_f64(h, p, m, max, ids, sq, cl, bc, o); }
        [MethodImpl(Late)]
        internal override int SignedDistance(MeshHandle h, IntPtr p, long m, double max, IntPtr sd, IntPtr ids,
                                             IntPtr o)
        { return NativeMethods.knn_mesh_signed_distance_f64(h, p, m, max, sd, ids, o); }
        [MethodImpl(Late)]
        internal override int Report(MeshHandle h, IntPtr p, long m, double max, double tol, IntPtr pct, int np,
                                     IntPtr pv, IntPtr edges, int nb, IntPtr counts, IntPtr sd,
                                     ref KnnDeviationReportStruct r, IntPtr o)
        { return NativeMethods.knn_mesh_deviation_report_f64(h, p, m, max, tol, pct, np, pv, edges, nb, counts, sd, ref r, o); }
        [MethodImpl(Late)]
        internal override int Align(MeshHandle h, IntPtr p, long m, IntPtr initial, ref KnnAlignParamsStruct prm,
                                    ref KnnAlignResultStruct r, IntPtr o)
        { return NativeMethods.knn_mesh_align_ex_f64(h, p, m, initial, ref prm, ref r, o); }
    }

    /// <summary>What every mesh is, whatever its precision: the handle, its info,
    /// serialization. Deserialize returns a KnnMesh&lt;float&gt; or KnnMesh&lt;double&gt; as the
    /// bytes say.</summary>
    public abstract class KnnMesh : IDisposable
    {
        readonly MeshHandle handle;
        public KnnMeshInfo Info { get; private set; }
        public MeshHandle Handle { get { return handle; } }

        internal KnnMesh(MeshHandle owned)
        {
            handle = owned;
            long nv, nt;
            int scalar, backend, closed;
            Knn.Check(MeshNative.Info(Live(), out nv, out nt, out scalar, out backend, out closed), "knn_mesh_info");
            Info = new KnnMeshInfo { NVertices = nv, NTriangles = nt, Scalar = (KnnScalar)scalar,
                                     Backend = (KnnBackend)backend, ClosedOriented = closed != 0 };
        }

        internal MeshHandle Live()
        {
            if (handle.IsClosed) throw new ObjectDisposedException("KnnMesh");
            return handle;
        }

        public void Dispose() { handle.Dispose(); }

        /// <summary>knn_mesh_serialize: the mesh as bytes (a versioned, checksummed format).</summary>
        public byte[] Serialize()
        {
            return Knn.Serialize(Live(), MeshNative.SerializedSize, MeshNative.Serialize, "mesh");
        }

        /// <summary>knn_mesh_deserialize: a mesh from Serialize()'s bytes, on the backend the
        /// options choose, in the precision it was built in. Corrupted or truncated bytes
        /// throw KnnInvalidArgumentException.</summary>
        public static KnnMesh Deserialize(byte[] data, KnnOptions? options = null)
        {
            MeshHandle h = Knn.Deserialize<MeshHandle>(data, options, MeshNative.Deserialize, "knn_mesh_deserialize");
            int scalar;
            long nv, nt;
            int backend, closed;
            int infoStatus = MeshNative.Info(h, out nv, out nt, out scalar, out backend, out closed);
            if (infoStatus != 0)
            {
                h.Dispose();
                Knn.Check(infoStatus, "knn_mesh_info");
            }
            return scalar == (int)KnnScalar.Float64 ? (KnnMesh)new KnnMesh<double>(h) : new KnnMesh<float>(h);
        }

        /// <summary>knn_estimate_mesh_bytes: device bytes a CUDA mesh build of this size needs
        /// at its peak (0 for impossible sizes).</summary>
        public static ulong EstimateBytes(long nVertices, long nTriangles, KnnScalar scalar,
                                          KnnOptions? options = null)
        {
            using (var opt = new OptionsBlock(options))
                return MeshNative.EstimateBytes(nVertices, nTriangles, (int)scalar,
                                                options.HasValue ? opt.Pointer : IntPtr.Zero).ToUInt64();
        }
    }

    /// <summary>The precision-free imports, behind late-bound thunks (see Native).</summary>
    internal static class MeshNative
    {
        const MethodImplOptions Late = MethodImplOptions.NoInlining;
        [MethodImpl(Late)]
        internal static int Info(MeshHandle h, out long nv, out long nt, out int s, out int b, out int c)
        { return NativeMethods.knn_mesh_info(h, out nv, out nt, out s, out b, out c); }
        [MethodImpl(Late)]
        internal static int SerializedSize(MeshHandle h, out UIntPtr b) { return NativeMethods.knn_mesh_serialized_size(h, out b); }
        [MethodImpl(Late)]
        internal static int Serialize(MeshHandle h, IntPtr buf, UIntPtr b) { return NativeMethods.knn_mesh_serialize(h, buf, b); }
        [MethodImpl(Late)]
        internal static int Deserialize(IntPtr buf, UIntPtr b, IntPtr o, out MeshHandle h)
        { return NativeMethods.knn_mesh_deserialize(buf, b, o, out h); }
        [MethodImpl(Late)]
        internal static UIntPtr EstimateBytes(long nv, long nt, int s, IntPtr o)
        { return NativeMethods.knn_estimate_mesh_bytes(nv, nt, s, o); }
    }

    /// <summary>A triangle mesh with its BVH (knn_mesh), T = float (a float32 mesh) or double
    /// (float64). Dispose it (or use `using`); queries may run from many threads at once.
    /// Arrays are rows: vertices and points (x, y, z), triangles (three vertex indices).
    /// The IntPtr overloads take host or device (CUDA) memory of T: a CUDA mesh uses device
    /// arrays in place, the OpenMP engine refuses them.</summary>
    public sealed class KnnMesh<T> : KnnMesh where T : struct
    {
        static readonly MeshCalls<T> Calls = MeshCalls<T>.Of;

        internal KnnMesh(MeshHandle owned) : base(owned) { }

        /// <summary>Build over vertices (rows of 3) and triangles (rows of 3 vertex indices).
        /// Throws KnnInvalidArgumentException (no triangle, an index out of range: the message
        /// names the triangle), KnnNonfiniteInputException (naming the vertex),
        /// KnnNoDeviceException.</summary>
        public KnnMesh(T[] vertices, int[] triangles, KnnOptions? options = null)
            : base(Build(vertices, triangles, options)) { }

        static MeshHandle Build(T[] vertices, int[] triangles, KnnOptions? options)
        {
            if (vertices == null) throw new ArgumentNullException("vertices");
            if (triangles == null) throw new ArgumentNullException("triangles");
            if (vertices.LongLength % 3 != 0) throw new ArgumentException("vertices.Length must be a multiple of 3");
            if (triangles.LongLength % 3 != 0) throw new ArgumentException("triangles.Length must be a multiple of 3");
            Loader.Ensure();
            MeshHandle h;
            using (var pins = new Pins(vertices.Length > 0 ? vertices : null, triangles.Length > 0 ? triangles : null))
            using (var opt = OptionsBlock.For(options))
                return Knn.Owned(Calls.Build(pins[0], vertices.LongLength / 3, pins[1], triangles.LongLength / 3,
                                             OptionsBlock.PointerOf(opt), out h),
                                 h, "knn_mesh_build" + Calls.Suffix);
        }

        static long Rows(T[] points)
        {
            if (points == null) throw new ArgumentNullException("points");
            if (points.LongLength % 3 != 0) throw new ArgumentException("points.Length must be a multiple of 3");
            return points.LongLength / 3;
        }

        /// <summary>The closest point of the mesh to each point (knn_mesh_closest or _f64);
        /// points farther than maxDistance get -1, +infinity and NaN.</summary>
        public KnnMeshClosest<T> Closest(T[] points, double maxDistance = double.PositiveInfinity,
                                         bool barycentric = false, KnnOptions? options = null)
        {
            long m = Rows(points);
            var r = new KnnMeshClosest<T> { TriangleIds = new int[m], SqDistances = new T[m],
                                            Closest = new T[3 * m], Barycentric = barycentric ? new T[3 * m] : null };
            using (var pins = new Pins(points, r.TriangleIds, r.SqDistances, r.Closest, r.Barycentric))
                Closest(pins[0], m, maxDistance, pins[1], pins[2], pins[3], pins[4], options);
            return r;
        }

        /// <summary>Raw form: host or device pointers of T (every output but triangleIds may be
        /// IntPtr.Zero; the outputs are all host or all device memory).</summary>
        public void Closest(IntPtr points, long m, double maxDistance, IntPtr triangleIds, IntPtr sqDistances,
                            IntPtr closest, IntPtr barycentric, KnnOptions? options = null)
        {
            using (var opt = OptionsBlock.For(options))
                Knn.Check(Calls.Closest(Live(), points, m, maxDistance, triangleIds, sqDistances, closest,
                                        barycentric, OptionsBlock.PointerOf(opt)),
                          "knn_mesh_closest" + Calls.Suffix);
        }

        /// <summary>The signed distance of each point (knn_mesh_signed_distance): the Euclidean
        /// distance, negative inside, +infinity beyond maxDistance.</summary>
        public T[] SignedDistance(T[] points, double maxDistance = double.PositiveInfinity,
                                  KnnOptions? options = null)
        {
            int[] ids;
            return SignedDistance(points, out ids, maxDistance, options, false);
        }

        /// <summary>SignedDistance and the closest triangle of each point.</summary>
        public T[] SignedDistance(T[] points, out int[] triangleIds, double maxDistance = double.PositiveInfinity,
                                  KnnOptions? options = null)
        {
            return SignedDistance(points, out triangleIds, maxDistance, options, true);
        }

        T[] SignedDistance(T[] points, out int[] triangleIds, double maxDistance, KnnOptions? options, bool wantIds)
        {
            long m = Rows(points);
            var sd = new T[m];
            triangleIds = wantIds ? new int[m] : null;
            using (var pins = new Pins(points, sd, triangleIds))
                SignedDistance(pins[0], m, maxDistance, pins[1], pins[2], options);
            return sd;
        }

        /// <summary>Raw form: host or device pointers of T (triangleIds may be IntPtr.Zero; the
        /// outputs are all host or all device memory).</summary>
        public void SignedDistance(IntPtr points, long m, double maxDistance, IntPtr signedDistances,
                                   IntPtr triangleIds, KnnOptions? options = null)
        {
            using (var opt = OptionsBlock.For(options))
                Knn.Check(Calls.SignedDistance(Live(), points, m, maxDistance, signedDistances, triangleIds,
                                               OptionsBlock.PointerOf(opt)),
                          "knn_mesh_signed_distance" + Calls.Suffix);
        }

        /// <summary>The deviation report of the scan points against this design
        /// (knn_mesh_deviation_report), computed where the mesh lives. percentiles in [0, 100]
        /// (null: none); binEdges strictly ascending (null: no histogram); wantDistances also
        /// returns the per-point signed distances.</summary>
        public KnnDeviationReport<T> DeviationReport(T[] points, double tolerance, double[] percentiles = null,
                                                     double[] binEdges = null,
                                                     double maxDistance = double.PositiveInfinity,
                                                     bool wantDistances = false, KnnOptions? options = null)
        {
            long m = Rows(points);
            percentiles = percentiles ?? new double[0];
            if (binEdges != null && binEdges.Length < 2)
                throw new ArgumentException("binEdges: at least two edges (one bin)");
            int nBins = binEdges == null ? 0 : binEdges.Length - 1;
            var r = new KnnDeviationReport<T> {
                Tolerance = tolerance, Percentiles = percentiles, PercentileValues = new double[percentiles.Length],
                BinEdges = binEdges ?? new double[0], BinCounts = new long[nBins],
                SignedDistances = wantDistances ? new T[m] : null };
            var summary = new KnnDeviationReportStruct {
                StructSize = new UIntPtr((ulong)Marshal.SizeOf(typeof(KnnDeviationReportStruct))) };
            using (var pins = new Pins(points, percentiles.Length > 0 ? percentiles : null,
                                       percentiles.Length > 0 ? r.PercentileValues : null,
                                       nBins > 0 ? r.BinEdges : null, nBins > 0 ? r.BinCounts : null,
                                       r.SignedDistances))
            using (var opt = OptionsBlock.For(options))
                Knn.Check(Calls.Report(Live(), pins[0], m, maxDistance, tolerance, pins[1], percentiles.Length,
                                       pins[2], pins[3], nBins, pins[4], pins[5], ref summary,
                                       OptionsBlock.PointerOf(opt)),
                          "knn_mesh_deviation_report" + Calls.Suffix);
            r.Summary = summary;
            return r;
        }

        /// <summary>The rigid motion that best fits the scan points onto this mesh
        /// (knn_mesh_align_ex or _f64): ICP point to plane, summed in float64 where the mesh
        /// lives. initial: a 4 x 4 rigid transform to start from (null: the identity);
        /// maxCorrespondence: points farther than this from the mesh once moved are left out
        /// of a step (+infinity: every point); keptFraction in (0, 1]: each step keeps that
        /// fraction of the correspondences, the nearest; toleranceRotation (radians) and
        /// toleranceTranslation per step, null: the header's defaults; coarseStart: also start
        /// from the principal axes. A bad argument (maxIterations &lt; 0, an initial transform
        /// that is not rigid) throws KnnInvalidArgumentException.</summary>
        public KnnAlignResult Align(T[] points, double[,] initial = null,
                                    double maxCorrespondence = double.PositiveInfinity, int maxIterations = 50,
                                    double keptFraction = 1, double? toleranceRotation = null,
                                    double? toleranceTranslation = null, bool coarseStart = false,
                                    KnnOptions? options = null)
        {
            long m = Rows(points);
            using (var pins = new Pins(points))
                return Align(pins[0], m, initial, maxCorrespondence, maxIterations, keptFraction, toleranceRotation,
                             toleranceTranslation, coarseStart, options);
        }

        /// <summary>Raw form: points are host or device pointers of T.</summary>
        public KnnAlignResult Align(IntPtr points, long m, double[,] initial = null,
                                    double maxCorrespondence = double.PositiveInfinity, int maxIterations = 50,
                                    double keptFraction = 1, double? toleranceRotation = null,
                                    double? toleranceTranslation = null, bool coarseStart = false,
                                    KnnOptions? options = null)
        {
            MeshHandle handle = Live();
            return AlignRun.Fit((IntPtr start, ref KnnAlignParamsStruct prm, ref KnnAlignResultStruct fit,
                                 IntPtr opt) => Calls.Align(handle, points, m, start, ref prm, ref fit, opt),
                                "knn_mesh_align_ex" + Calls.Suffix, initial, maxCorrespondence, maxIterations,
                                keptFraction, toleranceRotation, toleranceTranslation, coarseStart, options);
        }
    }
}
