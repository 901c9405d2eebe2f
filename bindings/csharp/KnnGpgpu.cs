// KnnGpgpu.cs - C# (P/Invoke) binding of libknn_gpgpu: exact kNN, radius
// search and point in polygon on NVIDIA GPUs and OpenMP.
//
// One file, no unsafe code; builds with mcs (Mono) and csc (.NET):
//     mcs -target:library -out:KnnGpgpu.dll KnnGpgpu.cs
//
// Finding the native library ("knn_gpgpu" in every DllImport), before the
// first call (the first that loads wins):
//   1. KNN_GPGPU_LIBRARY = full path of the library (when set, nothing else);
//   2. next to KnnGpgpu.dll (a bundled copy), then ../lib from there (an
//      install prefix) and /usr/local/lib (CMake's default prefix, which the
//      Linux loader searches only once ldconfig has run): the file found is
//      loaded (dlopen / LoadLibrary), so the DllImport resolves to it;
//   3. the platform's search: on Linux (Mono) KnnGpgpu.dll.config maps the
//      name to libknn_gpgpu.so.1, found through LD_LIBRARY_PATH or the
//      ldconfig cache; on Windows knn_gpgpu.dll next to the executable or on
//      PATH.
// Nothing found: KnnLibraryNotFoundException, saying what to install or set.
//
// Arrays of blittable types (float[], int[], long[], Point[], Node[]) are
// pinned by the marshaller and passed without copies. Failures throw
// KnnException subclasses carrying the status and knn_last_error().
using System;
using System.Collections.Generic;
using System.IO;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using Microsoft.Win32.SafeHandles;

namespace KnnGpgpu
{
    /// <summary>Status codes of knn_gpgpu.h (enum knn_status); values never change.</summary>
    public enum KnnStatus
    {
        Ok = 0,
        InvalidArgument = 1,
        NonfiniteInput = 2,
        HostOutOfMemory = 3,
        DeviceOutOfMemory = 4,
        NoDevice = 5,
        Device = 6,
        InvalidTree = 7,
        Unsupported = 8,
        Cancelled = 9,
        Internal = 10,
    }

    /// <summary>enum knn_backend.</summary>
    public enum KnnBackend { Auto = 0, Cuda = 1, OpenMP = 2 }

    /// <summary>enum knn_structure.</summary>
    public enum KnnStructure { Auto = 0, KdTree = 1, Grid = 2, BruteForce = 3 }

    /// <summary>enum knn_scalar: the precision an index holds and computes in. An index
    /// built from double[] (knn_index_build_f64) answers only the double overloads, one
    /// built from float[] only the float ones; the library refuses the other family with
    /// KnnInvalidArgumentException naming the right call.</summary>
    public enum KnnScalar { Float32 = 0, Float64 = 1 }

    /// <summary>struct Point { float p[3]; } (12 bytes).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Point
    {
        public float X, Y, Z;
        public Point(float x, float y, float z) { X = x; Y = y; Z = z; }
        public override string ToString() { return string.Format("({0}, {1}, {2})", X, Y, Z); }
    }

    /// <summary>struct Node { float p[3]; int left, right, id; } (24 bytes). A kd-tree is
    /// a Node[] the host may save and load; queries check its layout.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct Node
    {
        public float X, Y, Z;
        /// <summary>Index of the left child in the Node array, or -1.</summary>
        public int Left;
        /// <summary>Index of the right child, or -1.</summary>
        public int Right;
        /// <summary>Index of the point in the array the tree was built from.</summary>
        public int Id;
    }

    /// <summary>knn_options. Create with <see cref="CreateDefault"/> (knn_options_init), then
    /// set fields. StructSize is never larger than this binding's struct, so a newer
    /// library reads only the fields the binding knows.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct KnnOptions
    {
        public UIntPtr StructSize;
        public int Backend;
        public int Device;
        public int Structure;
        public int LeafSize;
        public int Threads;
        public UIntPtr DeviceMemoryLimit;

        /// <summary>The library's defaults (struct_size set by knn_options_init).</summary>
        public static KnnOptions CreateDefault()
        {
            using (var block = new OptionsBlock(null))
                return block.Read();
        }

        public KnnBackend BackendKind
        {
            get { return (KnnBackend)Backend; }
            set { Backend = (int)value; }
        }

        public KnnStructure StructureKind
        {
            get { return (KnnStructure)Structure; }
            set { Structure = (int)value; }
        }
    }

    /// <summary>Unmanaged knn_options for one call: a scratch block that knn_options_init
    /// fills (a newer library may write a larger struct), then the caller's fields.</summary>
    internal sealed class OptionsBlock : IDisposable
    {
        const int ScratchBytes = 1024;
        public IntPtr Pointer { get; private set; }

        public OptionsBlock(KnnOptions? options)
        {
            Loader.Ensure();
            Pointer = Marshal.AllocHGlobal(ScratchBytes);
            for (int i = 0; i < ScratchBytes; i += 8) Marshal.WriteInt64(Pointer, i, 0);
            Native.knn_options_init(Pointer);
            ulong ours = (ulong)Marshal.SizeOf(typeof(KnnOptions));
            if (options.HasValue)
            {
                KnnOptions o = options.Value;
                if (o.StructSize == UIntPtr.Zero)
                {
                    Dispose();
                    throw new ArgumentException(
                        "KnnOptions not initialised: start from KnnOptions.CreateDefault()", "options");
                }
                Marshal.StructureToPtr(o, Pointer, false);
            }
            ulong size = (ulong)Marshal.ReadIntPtr(Pointer, 0).ToInt64();
            if (size == 0 || size > ours) size = ours;
            Marshal.WriteIntPtr(Pointer, 0, new IntPtr((long)size));
        }

        public KnnOptions Read() { return (KnnOptions)Marshal.PtrToStructure(Pointer, typeof(KnnOptions)); }

        public void Dispose()
        {
            if (Pointer != IntPtr.Zero) { Marshal.FreeHGlobal(Pointer); Pointer = IntPtr.Zero; }
        }

        public static OptionsBlock For(KnnOptions? options)
        {
            return options.HasValue ? new OptionsBlock(options) : null;
        }

        public static IntPtr PointerOf(OptionsBlock block)
        {
            return block == null ? IntPtr.Zero : block.Pointer;
        }
    }

    // ---- exceptions ------------------------------------------------------------------

    /// <summary>A libknn_gpgpu call returned an error status.</summary>
    public class KnnException : Exception
    {
        /// <summary>The status (may be a value this binding does not name).</summary>
        public KnnStatus Status { get; private set; }
        /// <summary>"NONFINITE_INPUT", "NO_DEVICE"... (the C name without KNN_ERR_).</summary>
        public string StatusName { get; private set; }
        /// <summary>knn_last_error() of the failed call.</summary>
        public string NativeMessage { get; private set; }
        /// <summary>The C function that failed.</summary>
        public string Function { get; private set; }

        public KnnException(KnnStatus status, string nativeMessage, string function)
            : base(string.Format("KNN_ERR_{0}: {1}", NameOf(status),
                                 string.IsNullOrEmpty(nativeMessage) ? function : nativeMessage))
        {
            Status = status;
            StatusName = NameOf(status);
            NativeMessage = nativeMessage;
            Function = function;
        }

        static readonly string[] Names = {
            "OK", "INVALID_ARGUMENT", "NONFINITE_INPUT", "HOST_OUT_OF_MEMORY",
            "DEVICE_OUT_OF_MEMORY", "NO_DEVICE", "DEVICE", "INVALID_TREE", "UNSUPPORTED",
            "CANCELLED", "INTERNAL" };

        public static string NameOf(KnnStatus status)
        {
            int s = (int)status;
            return s >= 0 && s < Names.Length ? Names[s] : "UNKNOWN(" + s + ")";
        }

        /// <summary>The exception for a failed call (the subclass that fits the status).</summary>
        public static KnnException From(int status, string message, string function)
        {
            var s = (KnnStatus)status;
            switch (s)
            {
                case KnnStatus.InvalidArgument: return new KnnInvalidArgumentException(message, function);
                case KnnStatus.NonfiniteInput: return new KnnNonfiniteInputException(message, function);
                case KnnStatus.HostOutOfMemory:
                case KnnStatus.DeviceOutOfMemory: return new KnnOutOfMemoryException(s, message, function);
                case KnnStatus.NoDevice: return new KnnNoDeviceException(message, function);
                case KnnStatus.InvalidTree: return new KnnInvalidTreeException(message, function);
                case KnnStatus.Unsupported: return new KnnUnsupportedException(message, function);
                case KnnStatus.Cancelled: return new KnnCancelledException(message, function);
                default: return new KnnException(s, message, function);
            }
        }
    }

    public class KnnInvalidArgumentException : KnnException
    {
        public KnnInvalidArgumentException(string m, string f) : base(KnnStatus.InvalidArgument, m, f) { }
    }
    public class KnnNonfiniteInputException : KnnException
    {
        public KnnNonfiniteInputException(string m, string f) : base(KnnStatus.NonfiniteInput, m, f) { }
    }
    public class KnnOutOfMemoryException : KnnException
    {
        public KnnOutOfMemoryException(KnnStatus s, string m, string f) : base(s, m, f) { }
    }
    public class KnnNoDeviceException : KnnException
    {
        public KnnNoDeviceException(string m, string f) : base(KnnStatus.NoDevice, m, f) { }
    }
    public class KnnInvalidTreeException : KnnException
    {
        public KnnInvalidTreeException(string m, string f) : base(KnnStatus.InvalidTree, m, f) { }
    }
    public class KnnUnsupportedException : KnnException
    {
        public KnnUnsupportedException(string m, string f) : base(KnnStatus.Unsupported, m, f) { }
    }
    public class KnnCancelledException : KnnException
    {
        public KnnCancelledException(string m, string f) : base(KnnStatus.Cancelled, m, f) { }
    }

    // ---- loading -----------------------------------------------------------------------

    /// <summary>libknn_gpgpu could not be loaded, or its major version differs from the
    /// binding's; the message says what was tried and what to install or set.</summary>
    public class KnnLibraryNotFoundException : DllNotFoundException
    {
        public KnnLibraryNotFoundException(string message, Exception inner) : base(message, inner) { }
    }

    /// <summary>Finds and loads the library before the first call (the search order is at
    /// the top of this file) and checks its major version.</summary>
    public static class Loader
    {
        public const string EnvironmentVariable = "KNN_GPGPU_LIBRARY";
        public const int AbiMajor = 1;
        static readonly object Gate = new object();
        static bool loaded;

        [DllImport("libdl.so.2", EntryPoint = "dlopen")]
        static extern IntPtr dlopen_libdl(string path, int flags);
        [DllImport("libc.so.6", EntryPoint = "dlopen")]
        static extern IntPtr dlopen_libc(string path, int flags);
        [DllImport("libdl.so.2", EntryPoint = "dlerror")]
        static extern IntPtr dlerror_libdl();
        [DllImport("kernel32", CharSet = CharSet.Unicode, SetLastError = true)]
        static extern IntPtr LoadLibraryW(string path);

        /// <summary>Path given by the environment, or null (loader search).</summary>
        public static string ExplicitPath
        {
            get
            {
                string p = Environment.GetEnvironmentVariable(EnvironmentVariable);
                return string.IsNullOrEmpty(p) ? null : p;
            }
        }

        static bool IsWindows { get { return Environment.OSVersion.Platform == PlatformID.Win32NT; } }

        /// <summary>Step 2 of the search: the library files that exist next to this
        /// assembly, in ../lib from there and in /usr/local/lib, in that order.</summary>
        public static List<string> InstalledCandidates()
        {
            var found = new List<string>();
            string here = Path.GetDirectoryName(typeof(Loader).Assembly.Location);
            var dirs = new List<string>();
            if (!string.IsNullOrEmpty(here))
            {
                dirs.Add(here);
                dirs.Add(Path.Combine(Path.Combine(here, ".."), IsWindows ? "bin" : "lib"));
            }
            if (!IsWindows) dirs.Add("/usr/local/lib");
            string name = IsWindows ? "knn_gpgpu.dll"
                        : Environment.OSVersion.Platform == PlatformID.MacOSX ? "libknn_gpgpu.1.dylib"
                        : "libknn_gpgpu.so.1";
            foreach (string dir in dirs)
            {
                string path = Path.GetFullPath(Path.Combine(dir, name));
                if (File.Exists(path) && !found.Contains(path)) found.Add(path);
            }
            return found;
        }

        /// <summary>Path the library was loaded from, or null when it came from the platform's
        /// search (or is not loaded yet).</summary>
        public static string LoadedPath { get; private set; }

        public static void Ensure()
        {
            if (loaded) return;
            lock (Gate)
            {
                if (loaded) return;
                // Separate, non-inlined methods: Mono binds every P/Invoke of a method
                // when it compiles the method, so the version call must be compiled only
                // after the preload has run.
                var tried = new List<string>();
                string path = ExplicitPath;
                if (path != null)
                {
                    Preload(path);
                    LoadedPath = path;
                }
                else
                {
                    foreach (string candidate in InstalledCandidates())
                    {
                        try { Preload(candidate); LoadedPath = candidate; break; }
                        catch (DllNotFoundException e) { tried.Add(e.Message); }
                    }
                }
                int version;
                try { version = LoadedVersion(); }
                catch (DllNotFoundException e)
                {
                    tried.Add("the platform's search: " + e.Message);
                    throw new KnnLibraryNotFoundException(
                        "libknn_gpgpu not found: install it (cmake --install build; the default " +
                        "prefix /usr/local is searched), copy it next to KnnGpgpu.dll, put its folder " +
                        "on LD_LIBRARY_PATH (Linux, with KnnGpgpu.dll.config) / PATH (Windows), or set " +
                        EnvironmentVariable + " to its full path. Tried: " + string.Join("; ", tried.ToArray()), e);
                }
                if (version / 10000 != AbiMajor)
                    throw new KnnLibraryNotFoundException(string.Format(
                        "libknn_gpgpu version {0} does not match this binding (major {1})", version, AbiMajor), null);
                loaded = true;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int LoadedVersion() { return NativeMethods.knn_version(); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Preload(string path)
        {
            if (!File.Exists(path))
                throw new KnnLibraryNotFoundException(EnvironmentVariable + "=" + path + ": no such file", null);
            if (IsWindows)
            {
                if (LoadLibraryW(path) == IntPtr.Zero)
                    throw new KnnLibraryNotFoundException("LoadLibrary(" + path + ") failed, error " +
                                                   Marshal.GetLastWin32Error(), null);
                return;
            }
            const int RTLD_NOW = 2, RTLD_GLOBAL = 0x100;
            IntPtr handle;
            try { handle = dlopen_libdl(path, RTLD_NOW | RTLD_GLOBAL); }
            catch (DllNotFoundException) { handle = dlopen_libc(path, RTLD_NOW | RTLD_GLOBAL); }
            if (handle == IntPtr.Zero)
            {
                string why = "";
                try { why = Knn.Utf8(dlerror_libdl()); } catch (DllNotFoundException) { }
                throw new KnnLibraryNotFoundException("dlopen(" + path + ") failed: " + why, null);
            }
        }
    }

    // ---- raw entry points --------------------------------------------------------------

    /// <summary>Every function of knn_gpgpu.h, unchanged (status codes, raw pointers); the
    /// mesh calls of knn_gpgpu_mesh.h are in KnnMesh.cs.</summary>
    internal static partial class NativeMethods
    {
        const string Lib = "knn_gpgpu";
        const CallingConvention Cdecl = CallingConvention.Cdecl;

        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern IntPtr knn_status_string(int status);
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern IntPtr knn_last_error();
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int knn_version();
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int knn_set_cancel_flag(IntPtr flag);
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int knn_set_progress(IntPtr progress);

        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int buildKdTree([In] Point[] points, int n, [Out] Node[] tree);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int cuBuildKdTree([In] Point[] points, int n, [Out] Node[] tree);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int mpBuildKdTree([In] Point[] points, int n, [Out] Node[] tree);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int queryAll([In] Point[] queryPoints, [In] Node[] tree, int nQp, int nTree,
                                            int k, [Out] int[] result);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int cuQueryAll([In] Point[] queryPoints, [In] Node[] tree, int nQp, int nTree,
                                              int k, [Out] int[] result);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int mpQueryAll([In] Point[] queryPoints, [In] Node[] tree, int nQp, int nTree,
                                              int k, [Out] int[] result);
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern UIntPtr getTreeSize(int nTree);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr getNeededBytesForBuildingKdTree(int nTree);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr getNeededBytesForQueryAll(int nQp, int k, int nTree);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr getNeededBytesInSearch(int nQp, int k, int nTree, int threadNum,
                                                              int blockNum);
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern UIntPtr getFreeBytesOnGpu();
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int cuSetDevice(int device);
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int cuGetDevice();
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int cuGetDeviceCount();
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_brute_force([In] float[] reference, int nRef, [In] float[] query,
                                                   int nQuery, int dim, int k, [Out] float[] sqDist,
                                                   [Out] int[] ind);

        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern void knn_options_init(IntPtr opt);
        // Version 2 (device list at offsets 40 and 44 on 64-bit, 112 bytes); KnnOptions keeps
        // version 1 and KNN_DEVICES chooses devices for it.
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern void knn_options_init_v2(IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_build(IntPtr points, long n, int dim, IntPtr opt,
                                                   out IndexHandle index);
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int knn_index_free(IntPtr index);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_info(IndexHandle index, out long n, out int dim, out int backend,
                                                  out int structure);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_query(IndexHandle index, IntPtr queries, long m, int k,
                                                   IntPtr indices, IntPtr sqDistances, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_query_self(IndexHandle index, int k, int excludeSelf,
                                                        IntPtr indices, IntPtr sqDistances);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius(IndexHandle index, IntPtr queries, long m, float radius,
                                                    int maxNeighbors, IntPtr indices, IntPtr sqDistances,
                                                    IntPtr counts, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius_count(IndexHandle index, IntPtr queries, long m, float radius,
                                                          IntPtr counts, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_offsets_from_counts(IntPtr counts, long m, IntPtr offsets);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius_fill(IndexHandle index, IntPtr queries, long m, float radius,
                                                         IntPtr offsets, IntPtr indices, IntPtr sqDistances,
                                                         IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_serialized_size(IndexHandle index, out UIntPtr bytes);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_serialize(IndexHandle index, IntPtr buffer, UIntPtr bytes);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_deserialize(IntPtr buffer, UIntPtr bytes, IntPtr opt,
                                                         out IndexHandle index);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr knn_estimate_build_bytes(long n, int dim, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr knn_estimate_query_bytes(long m, int k, long n, int dim, IntPtr opt);

        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_quadtree_build([In] float[] xy, long n, IntPtr opt,
                                                      out QuadtreeHandle tree);
        [DllImport(Lib, CallingConvention = Cdecl)] internal static extern int knn_quadtree_free(IntPtr tree);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_points_in_polygons_count(QuadtreeHandle tree, [In] float[] verticesXy,
            [In] long[] ringOffsets, long nRings, [In] long[] polygonOffsets, long nPolygons,
            [Out] long[] counts, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_points_in_polygons(QuadtreeHandle tree, [In] float[] verticesXy,
            [In] long[] ringOffsets, long nRings, [In] long[] polygonOffsets, long nPolygons,
            [In] long[] outOffsets, [Out] long[] pointIndices, IntPtr opt);

        // float64: the float calls with double arrays and radius.
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_build_f64(IntPtr points, long n, int dim, IntPtr opt,
                                                       out IndexHandle index);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_scalar(IndexHandle index, out int scalar);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_query_f64(IndexHandle index, IntPtr queries, long m, int k,
                                                       IntPtr indices, IntPtr sqDistances, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_query_self_f64(IndexHandle index, int k, int excludeSelf,
                                                            IntPtr indices, IntPtr sqDistances);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius_f64(IndexHandle index, IntPtr queries, long m, double radius,
                                                        int maxNeighbors, IntPtr indices, IntPtr sqDistances,
                                                        IntPtr counts, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius_count_f64(IndexHandle index, IntPtr queries, long m,
                                                              double radius, IntPtr counts, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius_fill_f64(IndexHandle index, IntPtr queries, long m,
                                                             double radius, IntPtr offsets, IntPtr indices,
                                                             IntPtr sqDistances, IntPtr opt);
        // Pairs within a radius and neighbour counts (declared; no wrapper yet).
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_radius_pairs(IndexHandle index, double radius, IntPtr selfCounts,
                                                          long capacity, IntPtr pairs, out long count,
                                                          IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_count_neighbors(IndexHandle index, IntPtr queries, long m,
                                                             IntPtr radii, long nRadii, IntPtr queryWeights,
                                                             IntPtr pointWeights, IntPtr counts,
                                                             IntPtr weightedCounts, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_index_count_neighbors_f64(IndexHandle index, IntPtr queries, long m,
                                                                 IntPtr radii, long nRadii, IntPtr queryWeights,
                                                                 IntPtr pointWeights, IntPtr counts,
                                                                 IntPtr weightedCounts, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr knn_estimate_build_bytes_f64(long n, int dim, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern UIntPtr knn_estimate_query_bytes_f64(long m, int k, long n, int dim, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_quadtree_build_f64([In] double[] xy, long n, IntPtr opt,
                                                          out QuadtreeHandle tree);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_points_in_polygons_count_f64(QuadtreeHandle tree, [In] double[] verticesXy,
            [In] long[] ringOffsets, long nRings, [In] long[] polygonOffsets, long nPolygons,
            [Out] long[] counts, IntPtr opt);
        [DllImport(Lib, CallingConvention = Cdecl)]
        internal static extern int knn_points_in_polygons_f64(QuadtreeHandle tree, [In] double[] verticesXy,
            [In] long[] ringOffsets, long nRings, [In] long[] polygonOffsets, long nPolygons,
            [In] long[] outOffsets, [Out] long[] pointIndices, IntPtr opt);

        // The same entry points with raw pointers, for tests and hosts that pass NULL.
        [DllImport(Lib, CallingConvention = Cdecl, EntryPoint = "buildKdTree")]
        internal static extern int buildKdTreeRaw(IntPtr points, int n, IntPtr tree);
        [DllImport(Lib, CallingConvention = Cdecl, EntryPoint = "knn_index_info")]
        internal static extern int knn_index_info_raw(IntPtr index, IntPtr n, IntPtr dim, IntPtr backend,
                                                      IntPtr structure);
        [DllImport(Lib, CallingConvention = Cdecl, EntryPoint = "knn_points_in_polygons_count")]
        internal static extern int knn_points_in_polygons_count_raw(IntPtr tree, IntPtr verticesXy,
            IntPtr ringOffsets, long nRings, IntPtr polygonOffsets, long nPolygons, IntPtr counts, IntPtr opt);
    }


    /// <summary>Managed thunks over <see cref="NativeMethods"/>, never inlined. Mono binds a
    /// P/Invoke when it compiles the method that calls it, so the public methods (which
    /// first run Loader.Ensure to preload $KNN_GPGPU_LIBRARY) call these instead; each
    /// is compiled, and its import bound, only at its first call, after the preload.</summary>
    internal static class Native
    {
        const MethodImplOptions Late = MethodImplOptions.NoInlining;
        [MethodImpl(Late)] internal static IntPtr knn_status_string(int s) { return NativeMethods.knn_status_string(s); }
        [MethodImpl(Late)] internal static IntPtr knn_last_error() { return NativeMethods.knn_last_error(); }
        [MethodImpl(Late)] internal static int knn_version() { return NativeMethods.knn_version(); }
        [MethodImpl(Late)] internal static int knn_set_cancel_flag(IntPtr f) { return NativeMethods.knn_set_cancel_flag(f); }
        [MethodImpl(Late)] internal static int knn_set_progress(IntPtr p) { return NativeMethods.knn_set_progress(p); }
        [MethodImpl(Late)] internal static int buildKdTree(Point[] p, int n, Node[] t) { return NativeMethods.buildKdTree(p, n, t); }
        [MethodImpl(Late)] internal static int cuBuildKdTree(Point[] p, int n, Node[] t) { return NativeMethods.cuBuildKdTree(p, n, t); }
        [MethodImpl(Late)] internal static int mpBuildKdTree(Point[] p, int n, Node[] t) { return NativeMethods.mpBuildKdTree(p, n, t); }
        [MethodImpl(Late)]
        internal static int queryAll(Point[] q, Node[] t, int nq, int nt, int k, int[] r) { return NativeMethods.queryAll(q, t, nq, nt, k, r); }
        [MethodImpl(Late)]
        internal static int cuQueryAll(Point[] q, Node[] t, int nq, int nt, int k, int[] r) { return NativeMethods.cuQueryAll(q, t, nq, nt, k, r); }
        [MethodImpl(Late)]
        internal static int mpQueryAll(Point[] q, Node[] t, int nq, int nt, int k, int[] r) { return NativeMethods.mpQueryAll(q, t, nq, nt, k, r); }
        [MethodImpl(Late)] internal static UIntPtr getTreeSize(int n) { return NativeMethods.getTreeSize(n); }
        [MethodImpl(Late)]
        internal static UIntPtr getNeededBytesForBuildingKdTree(int n) { return NativeMethods.getNeededBytesForBuildingKdTree(n); }
        [MethodImpl(Late)]
        internal static UIntPtr getNeededBytesForQueryAll(int nq, int k, int nt) { return NativeMethods.getNeededBytesForQueryAll(nq, k, nt); }
        [MethodImpl(Late)]
        internal static UIntPtr getNeededBytesInSearch(int nq, int k, int nt, int tn, int bn)
        { return NativeMethods.getNeededBytesInSearch(nq, k, nt, tn, bn); }
        [MethodImpl(Late)] internal static UIntPtr getFreeBytesOnGpu() { return NativeMethods.getFreeBytesOnGpu(); }
        [MethodImpl(Late)] internal static int cuSetDevice(int d) { return NativeMethods.cuSetDevice(d); }
        [MethodImpl(Late)] internal static int cuGetDevice() { return NativeMethods.cuGetDevice(); }
        [MethodImpl(Late)] internal static int cuGetDeviceCount() { return NativeMethods.cuGetDeviceCount(); }
        [MethodImpl(Late)]
        internal static int knn_brute_force(float[] r, int nr, float[] q, int nq, int dim, int k, float[] d, int[] i)
        { return NativeMethods.knn_brute_force(r, nr, q, nq, dim, k, d, i); }
        [MethodImpl(Late)] internal static void knn_options_init(IntPtr o) { NativeMethods.knn_options_init(o); }
        [MethodImpl(Late)] internal static void knn_options_init_v2(IntPtr o) { NativeMethods.knn_options_init_v2(o); }
        [MethodImpl(Late)]
        internal static int knn_index_info(IndexHandle h, out long n, out int dim, out int b, out int s)
        { return NativeMethods.knn_index_info(h, out n, out dim, out b, out s); }
        [MethodImpl(Late)]
        internal static int knn_offsets_from_counts(IntPtr c, long m, IntPtr o) { return NativeMethods.knn_offsets_from_counts(c, m, o); }
        [MethodImpl(Late)]
        internal static int knn_index_serialized_size(IndexHandle h, out UIntPtr b) { return NativeMethods.knn_index_serialized_size(h, out b); }
        [MethodImpl(Late)]
        internal static int knn_index_serialize(IndexHandle h, IntPtr buf, UIntPtr b) { return NativeMethods.knn_index_serialize(h, buf, b); }
        [MethodImpl(Late)]
        internal static int knn_index_deserialize(IntPtr buf, UIntPtr b, IntPtr o, out IndexHandle h)
        { return NativeMethods.knn_index_deserialize(buf, b, o, out h); }
        [MethodImpl(Late)]
        internal static int knn_index_scalar(IndexHandle h, out int s) { return NativeMethods.knn_index_scalar(h, out s); }
    }


    /// <summary>The adapter of T's precision (float or double) for the calls that come in a
    /// float and an _f64 form.</summary>
    internal static class Precision
    {
        internal static C Pick<T, C>(C forFloat, C forDouble, string what)
        {
            if (typeof(T) == typeof(float)) return forFloat;
            if (typeof(T) == typeof(double)) return forDouble;
            throw new NotSupportedException(what + "<" + typeof(T).Name + ">: float or double only");
        }
    }

    /// <summary>The index entry points of one precision: the float calls or their _f64 twins
    /// (the _f64 ones take the radius in double, the float ones round it to float as the
    /// header compares in the index's scalar). Never inlined, as Native's thunks. Partial:
    /// KnnStats.cs adds the statistics' calls of each precision.</summary>
    internal abstract partial class IndexCalls
    {
        internal static IndexCalls For(KnnScalar scalar)
        {
            return scalar == KnnScalar.Float64 ? (IndexCalls)IndexCalls<double>.Of : IndexCalls<float>.Of;
        }

        internal abstract KnnScalar Scalar { get; }
        /// <summary>"" or "_f64": the C function's name is the float one's and this.</summary>
        internal abstract string Suffix { get; }
        internal abstract int Build(IntPtr p, long n, int dim, IntPtr o, out IndexHandle h);
        internal abstract int Query(IndexHandle h, IntPtr q, long m, int k, IntPtr i, IntPtr d, IntPtr o);
        internal abstract int QuerySelf(IndexHandle h, int k, int ex, IntPtr i, IntPtr d);
        internal abstract int Radius(IndexHandle h, IntPtr q, long m, double r, int mx, IntPtr i, IntPtr d,
                                     IntPtr c, IntPtr o);
        internal abstract int RadiusCount(IndexHandle h, IntPtr q, long m, double r, IntPtr c, IntPtr o);
        internal abstract int RadiusFill(IndexHandle h, IntPtr q, long m, double r, IntPtr off, IntPtr i,
                                         IntPtr d, IntPtr o);
        internal abstract UIntPtr EstimateBuildBytes(long n, int dim, IntPtr o);
        internal abstract UIntPtr EstimateQueryBytes(long m, int k, long n, int dim, IntPtr o);
    }

    /// <summary>IndexCalls with the quadtree calls, whose arrays are of T.</summary>
    internal abstract class IndexCalls<T> : IndexCalls where T : struct
    {
        internal static readonly IndexCalls<T> Of =
            Precision.Pick<T, IndexCalls<T>>((object)new FloatCalls() as IndexCalls<T>,
                                             (object)new DoubleCalls() as IndexCalls<T>,
                                             "KnnIndex");

        internal abstract int QuadtreeBuild(T[] xy, long n, IntPtr o, out QuadtreeHandle h);
        internal abstract int PipCount(QuadtreeHandle t, T[] v, long[] r, long nr, long[] p, long np, long[] c,
                                       IntPtr o);
        internal abstract int Pip(QuadtreeHandle t, T[] v, long[] r, long nr, long[] p, long np, long[] oo,
                                  long[] pi, IntPtr o);
    }

    internal sealed partial class FloatCalls : IndexCalls<float>
    {
        const MethodImplOptions Late = MethodImplOptions.NoInlining;
        internal override KnnScalar Scalar { get { return KnnScalar.Float32; } }
        internal override string Suffix { get { return ""; } }
        [MethodImpl(Late)]
        internal override int Build(IntPtr p, long n, int dim, IntPtr o, out IndexHandle h)
        { return NativeMethods.knn_index_build(p, n, dim, o, out h); }
        [MethodImpl(Late)]
        internal override int Query(IndexHandle h, IntPtr q, long m, int k, IntPtr i, IntPtr d, IntPtr o)
        { return NativeMethods.knn_index_query(h, q, m, k, i, d, o); }
        [MethodImpl(Late)]
        internal override int QuerySelf(IndexHandle h, int k, int ex, IntPtr i, IntPtr d)
        { return NativeMethods.knn_index_query_self(h, k, ex, i, d); }
        [MethodImpl(Late)]
        internal override int Radius(IndexHandle h, IntPtr q, long m, double r, int mx, IntPtr i, IntPtr d,
                                     IntPtr c, IntPtr o)
        { return NativeMethods.knn_index_radius(h, q, m, (float)r, mx, i, d, c, o); }
        [MethodImpl(Late)]
        internal override int RadiusCount(IndexHandle h, IntPtr q, long m, double r, IntPtr c, IntPtr o)
        { return NativeMethods.knn_index_radius_count(h, q, m, (float)r, c, o); }
        [MethodImpl(Late)]
        internal override int RadiusFill(IndexHandle h, IntPtr q, long m, double r, IntPtr off, IntPtr i,
                                         IntPtr d, IntPtr o)
        { return NativeMethods.knn_index_radius_fill(h, q, m, (float)r, off, i, d, o); }
        [MethodImpl(Late)]
        internal override UIntPtr EstimateBuildBytes(long n, int dim, IntPtr o)
        { return NativeMethods.knn_estimate_build_bytes(n, dim, o); }
        [MethodImpl(Late)]
        internal override UIntPtr EstimateQueryBytes(long m, int k, long n, int dim, IntPtr o)
        { return NativeMethods.knn_estimate_query_bytes(m, k, n, dim, o); }
        [MethodImpl(Late)]
        internal override int QuadtreeBuild(float[] xy, long n, IntPtr o, out QuadtreeHandle h)
        { return NativeMethods.knn_quadtree_build(xy, n, o, out h); }
        [MethodImpl(Late)]
        internal override int PipCount(QuadtreeHandle t, float[] v, long[] r, long nr, long[] p, long np,
                                       long[] c, IntPtr o)
        { return NativeMethods.knn_points_in_polygons_count(t, v, r, nr, p, np, c, o); }
        [MethodImpl(Late)]
        internal override int Pip(QuadtreeHandle t, float[] v, long[] r, long nr, long[] p, long np, long[] oo,
                                  long[] pi, IntPtr o)
        { return NativeMethods.knn_points_in_polygons(t, v, r, nr, p, np, oo, pi, o); }
    }

    internal sealed partial class DoubleCalls : IndexCalls<double>
    {
        const MethodImplOptions Late = MethodImplOptions.NoInlining;
        internal override KnnScalar Scalar { get { return KnnScalar.Float64; } }
        internal override string Suffix { get { return "_f64"; } }
        [MethodImpl(Late)]
        internal override int Build(IntPtr p, long n, int dim, IntPtr o, out IndexHandle h)
        { return NativeMethods.knn_index_build_f64(p, n, dim, o, out h); }
        [MethodImpl(Late)]
        internal override int Query(IndexHandle h, IntPtr q, long m, int k, IntPtr i, IntPtr d, IntPtr o)
        { return NativeMethods.knn_index_query_f64(h, q, m, k, i, d, o); }
        [MethodImpl(Late)]
        internal override int QuerySelf(IndexHandle h, int k, int ex, IntPtr i, IntPtr d)
        { return NativeMethods.knn_index_query_self_f64(h, k, ex, i, d); }
        [MethodImpl(Late)]
        internal override int Radius(IndexHandle h, IntPtr q, long m, double r, int mx, IntPtr i, IntPtr d,
                                     IntPtr c, IntPtr o)
        { return NativeMethods.knn_index_radius_f64(h, q, m, r, mx, i, d, c, o); }
        [MethodImpl(Late)]
        internal override int RadiusCount(IndexHandle h, IntPtr q, long m, double r, IntPtr c, IntPtr o)
        { return NativeMethods.knn_index_radius_count_f64(h, q, m, r, c, o); }
        [MethodImpl(Late)]
        internal override int RadiusFill(IndexHandle h, IntPtr q, long m, double r, IntPtr off, IntPtr i,
                                         IntPtr d, IntPtr o)
        { return NativeMethods.knn_index_radius_fill_f64(h, q, m, r, off, i, d, o); }
        [MethodImpl(Late)]
        internal override UIntPtr EstimateBuildBytes(long n, int dim, IntPtr o)
        { return NativeMethods.knn_estimate_build_bytes_f64(n, dim, o); }
        [MethodImpl(Late)]
        internal override UIntPtr EstimateQueryBytes(long m, int k, long n, int dim, IntPtr o)
        { return NativeMethods.knn_estimate_query_bytes_f64(m, k, n, dim, o); }
        [MethodImpl(Late)]
        internal override int QuadtreeBuild(double[] xy, long n, IntPtr o, out QuadtreeHandle h)
        { return NativeMethods.knn_quadtree_build_f64(xy, n, o, out h); }
        [MethodImpl(Late)]
        internal override int PipCount(QuadtreeHandle t, double[] v, long[] r, long nr, long[] p, long np,
                                       long[] c, IntPtr o)
        { return NativeMethods.knn_points_in_polygons_count_f64(t, v, r, nr, p, np, c, o); }
        [MethodImpl(Late)]
        internal override int Pip(QuadtreeHandle t, double[] v, long[] r, long nr, long[] p, long np, long[] oo,
                                  long[] pi, IntPtr o)
        { return NativeMethods.knn_points_in_polygons_f64(t, v, r, nr, p, np, oo, pi, o); }
    }

    // ---- handles -------------------------------------------------------------------------

    /// <summary>Owns a knn_index*; knn_index_free runs exactly once, even when the owner
    /// forgets Dispose (critical finalization).</summary>
    public sealed class IndexHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        public IndexHandle() : base(true) { }
        protected override bool ReleaseHandle() { return NativeMethods.knn_index_free(handle) == 0; }
    }

    /// <summary>Owns a knn_quadtree*.</summary>
    public sealed class QuadtreeHandle : SafeHandleZeroOrMinusOneIsInvalid
    {
        public QuadtreeHandle() : base(true) { }
        protected override bool ReleaseHandle() { return NativeMethods.knn_quadtree_free(handle) == 0; }
    }

    // ---- the classic API -----------------------------------------------------------------

    /// <summary>The classic 3-D API, brute force, devices, versions.</summary>
    public static class Knn
    {
        internal static string Utf8(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            var bytes = new byte[n];
            Marshal.Copy(p, bytes, 0, n);
            return Encoding.UTF8.GetString(bytes);
        }

        /// <summary>knn_last_error() of the calling thread.</summary>
        public static string LastError() { Loader.Ensure(); return Utf8(Native.knn_last_error()); }

        /// <summary>knn_status_string(status).</summary>
        public static string StatusString(int status)
        {
            Loader.Ensure();
            return Utf8(Native.knn_status_string(status));
        }

        /// <summary>knn_version(): MAJOR*10000 + MINOR*100 + PATCH.</summary>
        public static int Version() { Loader.Ensure(); return Native.knn_version(); }

        /// <summary>Throw the KnnException for a non-zero status (call right after the C call,
        /// on the same thread: the message is thread-local).</summary>
        public static void Check(int status, string function)
        {
            if (status != 0) throw KnnException.From(status, Utf8(Native.knn_last_error()), function);
        }

        /// <summary>The handle a constructor call (build, deserialize) made: on failure the
        /// library wrote none, so it is marked invalid (nothing to free) and the status thrown.</summary>
        internal static H Owned<H>(int status, H h, string function) where H : SafeHandle
        {
            if (status != 0)
            {
                if (h != null) h.SetHandleAsInvalid();
                Check(status, function);
            }
            return h;
        }

        internal delegate int Deserializer<H>(IntPtr buffer, UIntPtr bytes, IntPtr opt, out H h);
        internal delegate int SerializedSize<H>(H h, out UIntPtr bytes);

        /// <summary>knn_index_deserialize or knn_mesh_deserialize of data.</summary>
        internal static H Deserialize<H>(byte[] data, KnnOptions? options, Deserializer<H> call, string function)
            where H : SafeHandle
        {
            if (data == null) throw new ArgumentNullException("data");
            Loader.Ensure();
            H h;
            using (var pins = new Pins((Array)(data.Length > 0 ? data : null)))
            using (var opt = OptionsBlock.For(options))
                return Owned(call(pins[0], new UIntPtr((ulong)data.LongLength), OptionsBlock.PointerOf(opt), out h),
                             h, function);
        }

        /// <summary>knn_&lt;what&gt;_serialized_size, then knn_&lt;what&gt;_serialize into an array
        /// of that size.</summary>
        internal static byte[] Serialize<H>(H h, SerializedSize<H> sizeOf, Func<H, IntPtr, UIntPtr, int> write,
                                            string what)
        {
            UIntPtr size;
            Check(sizeOf(h, out size), "knn_" + what + "_serialized_size");
            var data = new byte[(long)size.ToUInt64()];
            using (var pins = new Pins(data))
                Check(write(h, pins[0], size), "knn_" + what + "_serialize");
            return data;
        }

        static Point[] NotNull(Point[] a, string name)
        {
            if (a == null) throw new ArgumentNullException(name);
            return a;
        }

        /// <summary>Build the kd-tree of points (buildKdTree / cuBuildKdTree / mpBuildKdTree).
        /// Every backend gives the identical tree. Throws KnnNonfiniteInputException naming
        /// the point, KnnNoDeviceException for Cuda without a GPU.</summary>
        public static Node[] BuildKdTree(Point[] points, KnnBackend backend = KnnBackend.Auto)
        {
            Loader.Ensure();
            NotNull(points, "points");
            var tree = new Node[points.Length];
            switch (backend)
            {
                case KnnBackend.Cuda:
                    Check(Native.cuBuildKdTree(points, points.Length, tree), "cuBuildKdTree"); break;
                case KnnBackend.OpenMP:
                    Check(Native.mpBuildKdTree(points, points.Length, tree), "mpBuildKdTree"); break;
                default:
                    Check(Native.buildKdTree(points, points.Length, tree), "buildKdTree"); break;
            }
            return tree;
        }

        /// <summary>The k nearest tree points of every query (queryAll / cuQueryAll /
        /// mpQueryAll): result[i*k + j] is query i's j-th neighbour's original index, ties by
        /// index, -1 where the tree has fewer than k points.</summary>
        public static int[] QueryAll(Point[] queries, Node[] tree, int k,
                                     KnnBackend backend = KnnBackend.Auto, int[] result = null)
        {
            Loader.Ensure();
            NotNull(queries, "queries");
            if (tree == null) throw new ArgumentNullException("tree");
            long size = (long)queries.Length * Math.Max(k, 0);
            if (result == null) result = new int[size];
            else if (result.LongLength != size)
                throw new ArgumentException("result must hold queries.Length * k = " + size + " ints", "result");
            switch (backend)
            {
                case KnnBackend.Cuda:
                    Check(Native.cuQueryAll(queries, tree, queries.Length, tree.Length, k, result),
                          "cuQueryAll"); break;
                case KnnBackend.OpenMP:
                    Check(Native.mpQueryAll(queries, tree, queries.Length, tree.Length, k, result),
                          "mpQueryAll"); break;
                default:
                    Check(Native.queryAll(queries, tree, queries.Length, tree.Length, k, result),
                          "queryAll"); break;
            }
            return result;
        }

        /// <summary>Exact brute-force kNN in any dimension on the CPU (knn_brute_force).
        /// reference and query hold rows of dim floats; returns n_query*k indices and squared
        /// distances (pass wantDistances=false for NULL).</summary>
        public static int[] BruteForce(float[] reference, float[] query, int dim, int k,
                                       out float[] sqDistances, bool wantDistances = true)
        {
            Loader.Ensure();
            if (reference == null) throw new ArgumentNullException("reference");
            if (query == null) throw new ArgumentNullException("query");
            int nRef = 0, nQuery = 0;
            if (dim > 0)
            {
                if (reference.Length % dim != 0 || query.Length % dim != 0)
                    throw new ArgumentException("array lengths must be multiples of dim = " + dim);
                nRef = reference.Length / dim;
                nQuery = query.Length / dim;
            }
            long size = (long)nQuery * Math.Max(k, 0);
            var ind = new int[size];
            sqDistances = wantDistances ? new float[size] : null;
            Check(Native.knn_brute_force(reference, nRef, query, nQuery, dim, k, sqDistances, ind),
                  "knn_brute_force");
            return ind;
        }

        /// <summary>getTreeSize: bytes of an n-node tree (0 when negative).</summary>
        public static ulong TreeSize(int nTree) { Loader.Ensure(); return Native.getTreeSize(nTree).ToUInt64(); }
        public static ulong NeededBytesForBuildingKdTree(int nTree)
        {
            Loader.Ensure();
            return Native.getNeededBytesForBuildingKdTree(nTree).ToUInt64();
        }
        public static ulong NeededBytesForQueryAll(int nQp, int k, int nTree)
        {
            Loader.Ensure();
            return Native.getNeededBytesForQueryAll(nQp, k, nTree).ToUInt64();
        }
        public static ulong NeededBytesInSearch(int nQp, int k, int nTree, int threadNum = 0, int blockNum = 0)
        {
            Loader.Ensure();
            return Native.getNeededBytesInSearch(nQp, k, nTree, threadNum, blockNum).ToUInt64();
        }
        /// <summary>Free bytes on the current device, counting the device memory the library keeps idle for its next call; 0 without one.</summary>
        public static ulong FreeBytesOnGpu() { Loader.Ensure(); return Native.getFreeBytesOnGpu().ToUInt64(); }
        /// <summary>cuSetDevice: KnnNoDeviceException without devices.</summary>
        public static void SetDevice(int device) { Loader.Ensure(); Check(Native.cuSetDevice(device), "cuSetDevice"); }
        /// <summary>cuGetDevice: -1 when there is none.</summary>
        public static int GetDevice() { Loader.Ensure(); return Native.cuGetDevice(); }
        /// <summary>cuGetDeviceCount: 0 when none (not an error).</summary>
        public static int GetDeviceCount() { Loader.Ensure(); return Native.cuGetDeviceCount(); }

        /// <summary>knn_set_cancel_flag: registers flag for the calling thread (null unregisters).</summary>
        public static void SetCancelFlag(KnnCancelFlag flag)
        {
            Loader.Ensure();
            Check(Native.knn_set_cancel_flag(flag == null ? IntPtr.Zero : flag.Pointer), "knn_set_cancel_flag");
        }

        /// <summary>knn_set_progress: registers progress for the calling thread (null unregisters);
        /// zeroes it.</summary>
        public static void SetProgress(KnnProgress progress)
        {
            Loader.Ensure();
            Check(Native.knn_set_progress(progress == null ? IntPtr.Zero : progress.Pointer), "knn_set_progress");
        }
    }

    // ---- the index API ------------------------------------------------------------------

    /// <summary>knn_index_info.</summary>
    public struct KnnIndexInfo
    {
        public long N;
        public int Dim;
        public KnnBackend Backend;
        public KnnStructure Structure;
    }

    /// <summary>A resident index of points in any dimension (knn_index). Dispose it (or use
    /// `using`); queries may run from many threads at once. Pointer overloads accept host
    /// or device (CUDA) memory: the library tells which and uses device arrays in place.
    /// Precision follows the points: float[] builds a float32 index (knn_index_build),
    /// double[] a float64 one (knn_index_build_f64); Scalar says which. The float[] and
    /// double[] overloads of each query call the float or the _f64 function; the
    /// library refuses a family the index does not hold. Pointer overloads hold the
    /// index's Scalar type.</summary>
    public sealed class KnnIndex : IDisposable
    {
        readonly IndexHandle handle;
        public long N { get; private set; }
        public int Dim { get; private set; }
        public KnnScalar Scalar { get; private set; }
        public IndexHandle Handle { get { return handle; } }

        /// <summary>Build over points: rows of dim floats (a float32 index).</summary>
        public KnnIndex(float[] points, int dim, KnnOptions? options = null)
            : this(Built(points, dim, options), RowsOf(points, dim), dim, KnnScalar.Float32) { }

        /// <summary>Build over points: rows of dim doubles (a float64 index).</summary>
        public KnnIndex(double[] points, int dim, KnnOptions? options = null)
            : this(Built(points, dim, options), RowsOf(points, dim), dim, KnnScalar.Float64) { }

        /// <summary>Build over n rows of dim floats at a host or device pointer.</summary>
        public KnnIndex(IntPtr points, long n, int dim, KnnOptions? options = null)
            : this(points, n, dim, KnnScalar.Float32, options) { }

        /// <summary>Build over n rows of dim values of the given scalar type at a host or
        /// device pointer.</summary>
        public KnnIndex(IntPtr points, long n, int dim, KnnScalar scalar, KnnOptions? options = null)
            : this(Build(IndexCalls.For(scalar), points, n, dim, options), n, dim, scalar) { }

        KnnIndex(IndexHandle owned, long n, int dim, KnnScalar scalar)
        {
            handle = owned;
            N = n;
            Dim = dim;
            Scalar = scalar;
        }

        KnnIndex(IndexHandle owned)
        {
            handle = owned;
            KnnIndexInfo info = Info();
            N = info.N;
            Dim = info.Dim;
            int scalar;
            Knn.Check(Native.knn_index_scalar(Live(), out scalar), "knn_index_scalar");
            Scalar = (KnnScalar)scalar;
        }

        static long RowsOf(Array points, int dim)
        {
            if (points == null) throw new ArgumentNullException("points");
            if (dim < 1 || points.LongLength % dim != 0)
                throw new ArgumentException("points.Length must be a multiple of dim (>= 1)");
            return points.LongLength / dim;
        }

        static IndexHandle Built<T>(T[] points, int dim, KnnOptions? options) where T : struct
        {
            long n = RowsOf(points, dim);
            using (var pins = new Pins(points))
                return Build(IndexCalls<T>.Of, pins[0], n, dim, options);
        }

        static IndexHandle Build(IndexCalls calls, IntPtr points, long n, int dim, KnnOptions? options)
        {
            Loader.Ensure();
            IndexHandle h;
            using (var opt = OptionsBlock.For(options))
                return Knn.Owned(calls.Build(points, n, dim, OptionsBlock.PointerOf(opt), out h), h,
                                 "knn_index_build" + calls.Suffix);
        }

        /// <summary>knn_index_deserialize: an index from Serialize()'s bytes. The options choose
        /// where it loads (backend, device, threads); the structure, leaf size and Scalar come
        /// from the bytes. A corrupted or truncated buffer throws KnnInvalidArgumentException.</summary>
        public static KnnIndex Deserialize(byte[] data, KnnOptions? options = null)
        {
            return new KnnIndex(Knn.Deserialize<IndexHandle>(data, options, Native.knn_index_deserialize,
                                                             "knn_index_deserialize"));
        }

        /// <summary>knn_index_serialize: the index as bytes (a versioned, checksummed format).</summary>
        public byte[] Serialize()
        {
            return Knn.Serialize(Live(), Native.knn_index_serialized_size, Native.knn_index_serialize, "index");
        }

        IndexHandle Live()
        {
            if (handle.IsClosed) throw new ObjectDisposedException("KnnIndex");
            return handle;
        }

        public void Dispose() { handle.Dispose(); }

        public KnnIndexInfo Info()
        {
            long n; int dim, backend, structure;
            Knn.Check(Native.knn_index_info(Live(), out n, out dim, out backend, out structure),
                      "knn_index_info");
            return new KnnIndexInfo { N = n, Dim = dim, Backend = (KnnBackend)backend,
                                      Structure = (KnnStructure)structure };
        }

        long Rows(Array queries)
        {
            if (queries == null) throw new ArgumentNullException("queries");
            if (queries.LongLength % Dim != 0) throw new ArgumentException("queries.Length must be a multiple of Dim");
            return queries.LongLength / Dim;
        }

        // The float[] and double[] overloads below are the public face of one generic method
        // each; IndexCalls<T> picks the float or the _f64 function.

        /// <summary>k nearest of each query (rows of Dim floats; a float32 index): indices[i*k + j],
        /// and squared distances when sqDistances is requested.</summary>
        public int[] Query(float[] queries, int k, out float[] sqDistances, KnnOptions? options = null,
                           bool wantDistances = true)
        { return Nearest(queries, k, out sqDistances, options, wantDistances); }

        /// <summary>k nearest of each query (rows of Dim doubles; a float64 index,
        /// knn_index_query_f64): indices and float64 squared distances.</summary>
        public int[] Query(double[] queries, int k, out double[] sqDistances, KnnOptions? options = null,
                           bool wantDistances = true)
        { return Nearest(queries, k, out sqDistances, options, wantDistances); }

        int[] Nearest<T>(T[] queries, int k, out T[] sqDistances, KnnOptions? options, bool wantDistances)
            where T : struct
        {
            long m = Rows(queries);
            var ind = new int[m * Math.Max(k, 0)];
            T[] dist = wantDistances ? new T[ind.LongLength] : null;
            using (var pins = new Pins(queries, ind, dist))
                Nearest(IndexCalls<T>.Of, pins[0], m, k, pins[1], pins[2], options);
            sqDistances = dist;
            return ind;
        }

        /// <summary>Raw form: host or device pointers of the index's Scalar type (sqDistances
        /// may be IntPtr.Zero).</summary>
        public void Query(IntPtr queries, long m, int k, IntPtr indices, IntPtr sqDistances,
                          KnnOptions? options = null)
        {
            Nearest(IndexCalls.For(Scalar), queries, m, k, indices, sqDistances, options);
        }

        void Nearest(IndexCalls calls, IntPtr queries, long m, int k, IntPtr indices, IntPtr sqDistances,
                     KnnOptions? options)
        {
            using (var opt = OptionsBlock.For(options))
                Knn.Check(calls.Query(Live(), queries, m, k, indices, sqDistances, OptionsBlock.PointerOf(opt)),
                          "knn_index_query" + calls.Suffix);
        }

        /// <summary>All-kNN of the indexed points in input order (a float32 index); excludeSelf
        /// drops only each point's own index.</summary>
        public int[] QuerySelf(int k, bool excludeSelf, out float[] sqDistances, bool wantDistances = true)
        { return NearestOfEach(k, excludeSelf, out sqDistances, wantDistances); }

        /// <summary>All-kNN of the indexed points of a float64 index (knn_index_query_self_f64).</summary>
        public int[] QuerySelf(int k, bool excludeSelf, out double[] sqDistances, bool wantDistances = true)
        { return NearestOfEach(k, excludeSelf, out sqDistances, wantDistances); }

        int[] NearestOfEach<T>(int k, bool excludeSelf, out T[] sqDistances, bool wantDistances) where T : struct
        {
            var ind = new int[N * Math.Max(k, 0)];
            T[] dist = wantDistances ? new T[ind.LongLength] : null;
            var calls = IndexCalls<T>.Of;
            using (var pins = new Pins(ind, dist))
                Knn.Check(calls.QuerySelf(Live(), k, excludeSelf ? 1 : 0, pins[0], pins[1]),
                          "knn_index_query_self" + calls.Suffix);
            sqDistances = dist;
            return ind;
        }

        /// <summary>Points within radius of each query (a float32 index): rows of maxNeighbors
        /// ordered by (distance, index), -1/+inf in unused slots; counts[i] is the true number.
        /// maxNeighbors = 0 is a counting call (indices null).</summary>
        public int[] Radius(float[] queries, float radius, int maxNeighbors, out float[] sqDistances,
                            out int[] counts, KnnOptions? options = null)
        { return Within(queries, radius, maxNeighbors, out sqDistances, out counts, options); }

        /// <summary>Points within radius of each query of a float64 index (knn_index_radius_f64:
        /// squared distance &lt;= radius*radius in double).</summary>
        public int[] Radius(double[] queries, double radius, int maxNeighbors, out double[] sqDistances,
                            out int[] counts, KnnOptions? options = null)
        { return Within(queries, radius, maxNeighbors, out sqDistances, out counts, options); }

        int[] Within<T>(T[] queries, double radius, int maxNeighbors, out T[] sqDistances, out int[] counts,
                        KnnOptions? options) where T : struct
        {
            long m = Rows(queries);
            long size = m * Math.Max(maxNeighbors, 0);
            int[] ind = maxNeighbors != 0 ? new int[size] : null;
            T[] dist = maxNeighbors != 0 ? new T[size] : null;
            counts = new int[m];
            var calls = IndexCalls<T>.Of;
            using (var pins = new Pins(queries, ind, dist, counts))
            using (var opt = OptionsBlock.For(options))
                Knn.Check(calls.Radius(Live(), pins[0], m, radius, maxNeighbors, pins[1], pins[2], pins[3],
                                       OptionsBlock.PointerOf(opt)),
                          "knn_index_radius" + calls.Suffix);
            sqDistances = dist;
            return ind;
        }

        /// <summary>knn_index_radius_count: the number of points within radius of each query.</summary>
        public long[] RadiusCounts(float[] queries, float radius, KnnOptions? options = null)
        { return CountsWithin(queries, radius, options); }

        /// <summary>knn_index_radius_count_f64 on a float64 index.</summary>
        public long[] RadiusCounts(double[] queries, double radius, KnnOptions? options = null)
        { return CountsWithin(queries, radius, options); }

        long[] CountsWithin<T>(T[] queries, double radius, KnnOptions? options) where T : struct
        {
            long m = Rows(queries);
            var counts = new long[m];
            var calls = IndexCalls<T>.Of;
            using (var pins = new Pins(queries, counts))
            using (var opt = OptionsBlock.For(options))
                Knn.Check(calls.RadiusCount(Live(), pins[0], m, radius, pins[1], OptionsBlock.PointerOf(opt)),
                          "knn_index_radius_count" + calls.Suffix);
            return counts;
        }

        /// <summary>Every point within radius of each query, in CSR rows: count, offsets
        /// (knn_offsets_from_counts), fill (knn_index_radius_fill). Query i's neighbours,
        /// nearest first (ties by index), are indices[offsets[i] .. offsets[i+1]); offsets has
        /// m + 1 entries; sqDistances is null unless wantDistances.</summary>
        public int[] RadiusCsr(float[] queries, float radius, out long[] offsets, out float[] sqDistances,
                               KnnOptions? options = null, bool wantDistances = true)
        { return CsrWithin(queries, radius, out offsets, out sqDistances, options, wantDistances); }

        /// <summary>RadiusCsr on a float64 index (the _f64 count and fill).</summary>
        public int[] RadiusCsr(double[] queries, double radius, out long[] offsets, out double[] sqDistances,
                               KnnOptions? options = null, bool wantDistances = true)
        { return CsrWithin(queries, radius, out offsets, out sqDistances, options, wantDistances); }

        int[] CsrWithin<T>(T[] queries, double radius, out long[] offsets, out T[] sqDistances,
                           KnnOptions? options, bool wantDistances) where T : struct
        {
            long[] counts = CountsWithin(queries, radius, options);
            long m = counts.LongLength;
            offsets = new long[m + 1];
            using (var pins = new Pins(m > 0 ? counts : null, offsets))
                Knn.Check(Native.knn_offsets_from_counts(pins[0], m, pins[1]), "knn_offsets_from_counts");
            long total = offsets[m];
            var ind = new int[total];
            T[] dist = wantDistances ? new T[total] : null;
            var calls = IndexCalls<T>.Of;
            using (var pins = new Pins(queries, offsets, total > 0 ? ind : null, total > 0 ? dist : null))
            using (var opt = OptionsBlock.For(options))
                Knn.Check(calls.RadiusFill(Live(), pins[0], m, radius, pins[1], pins[2], pins[3],
                                           OptionsBlock.PointerOf(opt)),
                          "knn_index_radius_fill" + calls.Suffix);
            sqDistances = dist;
            return ind;
        }

        public static ulong EstimateBuildBytes(long n, int dim, KnnOptions? options = null)
        {
            return EstimateBuildBytes(n, dim, KnnScalar.Float32, options);
        }

        /// <summary>knn_estimate_build_bytes, or its _f64 twin for a float64 index.</summary>
        public static ulong EstimateBuildBytes(long n, int dim, KnnScalar scalar, KnnOptions? options = null)
        {
            Loader.Ensure();
            using (var opt = OptionsBlock.For(options))
                return IndexCalls.For(scalar).EstimateBuildBytes(n, dim, OptionsBlock.PointerOf(opt)).ToUInt64();
        }

        public static ulong EstimateQueryBytes(long m, int k, long n, int dim, KnnOptions? options = null)
        {
            return EstimateQueryBytes(m, k, n, dim, KnnScalar.Float32, options);
        }

        /// <summary>knn_estimate_query_bytes, or its _f64 twin for a float64 index.</summary>
        public static ulong EstimateQueryBytes(long m, int k, long n, int dim, KnnScalar scalar,
                                               KnnOptions? options = null)
        {
            Loader.Ensure();
            using (var opt = OptionsBlock.For(options))
                return IndexCalls.For(scalar).EstimateQueryBytes(m, k, n, dim, OptionsBlock.PointerOf(opt))
                    .ToUInt64();
        }
    }

    /// <summary>Pins managed arrays for one call (null arrays give IntPtr.Zero).</summary>
    internal sealed class Pins : IDisposable
    {
        readonly List<GCHandle> handles = new List<GCHandle>();
        readonly IntPtr[] pointers;

        public Pins(params Array[] arrays)
        {
            pointers = new IntPtr[arrays.Length];
            for (int i = 0; i < arrays.Length; i++)
            {
                if (arrays[i] == null) continue;
                var h = GCHandle.Alloc(arrays[i], GCHandleType.Pinned);
                handles.Add(h);
                pointers[i] = h.AddrOfPinnedObject();
            }
        }

        public IntPtr this[int i] { get { return pointers[i]; } }

        public void Dispose()
        {
            foreach (var h in handles) h.Free();
            handles.Clear();
        }
    }

    // ---- point in polygon ----------------------------------------------------------------

    /// <summary>A quadtree over 2-D points for point-in-polygon queries (knn_quadtree).
    /// Polygons: verticesXy (x, y pairs), ringOffsets (nRings + 1, counting vertices),
    /// polygonOffsets (nPolygons + 1, counting rings); first ring outer, others holes.
    /// float[] points build a float32 tree, double[] a float64 one (knn_quadtree_build_f64);
    /// double[] vertices go to the _f64 polygon calls. Trees and polygons of either precision
    /// combine: the library decides on the exact values.</summary>
    public sealed class KnnQuadtree : IDisposable
    {
        readonly QuadtreeHandle handle;
        public long N { get; private set; }
        public KnnScalar Scalar { get; private set; }

        public KnnQuadtree(float[] xy, KnnOptions? options = null)
            : this(Built(xy, options), xy.Length / 2, KnnScalar.Float32) { }

        public KnnQuadtree(double[] xy, KnnOptions? options = null)
            : this(Built(xy, options), xy.Length / 2, KnnScalar.Float64) { }

        KnnQuadtree(QuadtreeHandle owned, long n, KnnScalar scalar)
        {
            handle = owned;
            N = n;
            Scalar = scalar;
        }

        static QuadtreeHandle Built<T>(T[] xy, KnnOptions? options) where T : struct
        {
            Loader.Ensure();
            if (xy == null) throw new ArgumentNullException("xy");
            if (xy.Length % 2 != 0) throw new ArgumentException("xy must hold (x, y) pairs");
            var calls = IndexCalls<T>.Of;
            QuadtreeHandle h;
            using (var opt = OptionsBlock.For(options))
                return Knn.Owned(calls.QuadtreeBuild(xy, xy.Length / 2, OptionsBlock.PointerOf(opt), out h), h,
                                 "knn_quadtree_build" + calls.Suffix);
        }

        public void Dispose() { handle.Dispose(); }

        QuadtreeHandle Live()
        {
            if (handle.IsClosed) throw new ObjectDisposedException("KnnQuadtree");
            return handle;
        }

        /// <summary>Checks what the C functions cannot: they get no vertex count, so every
        /// offset must stay inside the arrays passed.</summary>
        public static void ValidatePolygons(float[] verticesXy, long[] ringOffsets, long[] polygonOffsets)
        {
            Validate(verticesXy, ringOffsets, polygonOffsets);
        }

        public static void ValidatePolygons(double[] verticesXy, long[] ringOffsets, long[] polygonOffsets)
        {
            Validate(verticesXy, ringOffsets, polygonOffsets);
        }

        static void Validate(Array verticesXy, long[] ringOffsets, long[] polygonOffsets)
        {
            if (verticesXy == null || ringOffsets == null || polygonOffsets == null)
                throw new ArgumentNullException("polygon arrays must not be null");
            if (verticesXy.Length % 2 != 0) throw new ArgumentException("verticesXy must hold (x, y) pairs");
            if (ringOffsets.Length < 1 || polygonOffsets.Length < 1)
                throw new ArgumentException("offset arrays need at least one entry");
            long nVertices = verticesXy.Length / 2, nRings = ringOffsets.Length - 1;
            foreach (long o in ringOffsets)
                if (o < 0 || o > nVertices)
                    throw new ArgumentOutOfRangeException("ringOffsets", "offsets must lie in [0, " + nVertices + "]");
            foreach (long o in polygonOffsets)
                if (o < 0 || o > nRings)
                    throw new ArgumentOutOfRangeException("polygonOffsets", "offsets must lie in [0, " + nRings + "]");
        }

        public long[] PointsInPolygonsCount(float[] verticesXy, long[] ringOffsets, long[] polygonOffsets,
                                            KnnOptions? options = null)
        {
            return CountIn(verticesXy, ringOffsets, polygonOffsets, options);
        }

        /// <summary>knn_points_in_polygons_count_f64: double vertices.</summary>
        public long[] PointsInPolygonsCount(double[] verticesXy, long[] ringOffsets, long[] polygonOffsets,
                                            KnnOptions? options = null)
        {
            return CountIn(verticesXy, ringOffsets, polygonOffsets, options);
        }

        long[] CountIn<T>(T[] verticesXy, long[] ringOffsets, long[] polygonOffsets, KnnOptions? options)
            where T : struct
        {
            Validate(verticesXy, ringOffsets, polygonOffsets);
            var counts = new long[polygonOffsets.Length - 1];
            var calls = IndexCalls<T>.Of;
            using (var opt = OptionsBlock.For(options))
                Knn.Check(calls.PipCount(Live(), verticesXy, ringOffsets, ringOffsets.Length - 1, polygonOffsets,
                                         polygonOffsets.Length - 1, counts, OptionsBlock.PointerOf(opt)),
                          "knn_points_in_polygons_count" + calls.Suffix);
            return counts;
        }

        /// <summary>Points inside each polygon: polygon p's at indices[offsets[p]..offsets[p+1]),
        /// ascending. outOffsets (nPolygons + 1) are computed from the counts when null.</summary>
        public long[] PointsInPolygons(float[] verticesXy, long[] ringOffsets, long[] polygonOffsets,
                                       out long[] offsets, long[] outOffsets = null, KnnOptions? options = null)
        {
            return PointsIn(verticesXy, ringOffsets, polygonOffsets, out offsets, outOffsets, options);
        }

        /// <summary>knn_points_in_polygons_f64: double vertices.</summary>
        public long[] PointsInPolygons(double[] verticesXy, long[] ringOffsets, long[] polygonOffsets,
                                       out long[] offsets, long[] outOffsets = null, KnnOptions? options = null)
        {
            return PointsIn(verticesXy, ringOffsets, polygonOffsets, out offsets, outOffsets, options);
        }

        long[] PointsIn<T>(T[] verticesXy, long[] ringOffsets, long[] polygonOffsets, out long[] offsets,
                           long[] outOffsets, KnnOptions? options) where T : struct
        {
            Validate(verticesXy, ringOffsets, polygonOffsets);
            long nPolygons = polygonOffsets.Length - 1;
            if (outOffsets == null)
            {
                var counts = CountIn(verticesXy, ringOffsets, polygonOffsets, options);
                outOffsets = new long[nPolygons + 1];
                for (long p = 0; p < nPolygons; p++) outOffsets[p + 1] = outOffsets[p] + counts[p];
            }
            if (outOffsets.LongLength != nPolygons + 1)
                throw new ArgumentException("outOffsets needs nPolygons + 1 entries", "outOffsets");
            long max = 0;
            foreach (long o in outOffsets)
            {
                if (o < 0) throw new ArgumentOutOfRangeException("outOffsets", "offsets must not be negative");
                max = Math.Max(max, o);
            }
            var indices = new long[max];
            var calls = IndexCalls<T>.Of;
            using (var opt = OptionsBlock.For(options))
                Knn.Check(calls.Pip(Live(), verticesXy, ringOffsets, ringOffsets.Length - 1, polygonOffsets,
                                    nPolygons, outOffsets, indices, OptionsBlock.PointerOf(opt)),
                          "knn_points_in_polygons" + calls.Suffix);
            offsets = outOffsets;
            if (indices.LongLength == outOffsets[nPolygons]) return indices;
            var trimmed = new long[outOffsets[nPolygons]];
            Array.Copy(indices, trimmed, trimmed.LongLength);
            return trimmed;
        }

        /// <summary>Points inside each polygon, one ascending array per polygon.</summary>
        public long[][] PointsInEachPolygon(float[] verticesXy, long[] ringOffsets, long[] polygonOffsets,
                                            KnnOptions? options = null)
        {
            return EachIn(verticesXy, ringOffsets, polygonOffsets, options);
        }

        /// <summary>PointsInEachPolygon with double vertices (the _f64 calls).</summary>
        public long[][] PointsInEachPolygon(double[] verticesXy, long[] ringOffsets, long[] polygonOffsets,
                                            KnnOptions? options = null)
        {
            return EachIn(verticesXy, ringOffsets, polygonOffsets, options);
        }

        long[][] EachIn<T>(T[] verticesXy, long[] ringOffsets, long[] polygonOffsets, KnnOptions? options)
            where T : struct
        {
            long[] offsets;
            var indices = PointsIn(verticesXy, ringOffsets, polygonOffsets, out offsets, null, options);
            var result = new long[offsets.Length - 1][];
            for (int p = 0; p < result.Length; p++)
            {
                result[p] = new long[offsets[p + 1] - offsets[p]];
                Array.Copy(indices, offsets[p], result[p], 0, result[p].LongLength);
            }
            return result;
        }
    }

    // ---- per-thread native records ----------------------------------------------------------

    /// <summary>Native memory that the library reads or writes during the calls of the thread
    /// that registered it (a cancel flag, a progress record): allocated zeroed, registered by
    /// Register() until the result is disposed, freed by Dispose().</summary>
    public abstract class KnnThreadRecord : IDisposable
    {
        IntPtr cell;

        protected KnnThreadRecord(int bytes)
        {
            cell = Marshal.AllocHGlobal(bytes);
            for (int i = 0; i < bytes; i += 4) Marshal.WriteInt32(cell, i, 0);
        }

        protected IntPtr Live()
        {
            if (cell == IntPtr.Zero) throw new ObjectDisposedException(GetType().Name);
            return cell;
        }

        internal IntPtr Pointer { get { return Live(); } }

        /// <summary>Registers (true) or unregisters (false) this record for the calling thread.</summary>
        protected abstract void SetForCallingThread(bool registered);

        /// <summary>Registers the record for the calling thread; disposing the result unregisters it.</summary>
        public IDisposable Register()
        {
            SetForCallingThread(true);
            return new Registration(this);
        }

        sealed class Registration : IDisposable
        {
            KnnThreadRecord owner;
            public Registration(KnnThreadRecord owner) { this.owner = owner; }
            public void Dispose()
            {
                if (owner == null) return;
                owner.SetForCallingThread(false);
                owner = null;
            }
        }

        /// <summary>Frees the native memory; it must not be registered on any thread.</summary>
        public void Dispose()
        {
            if (cell != IntPtr.Zero) Marshal.FreeHGlobal(cell);
            cell = IntPtr.Zero;
            GC.SuppressFinalize(this);
        }

        ~KnnThreadRecord() { if (cell != IntPtr.Zero) Marshal.FreeHGlobal(cell); }
    }

    // ---- cancellation ----------------------------------------------------------------------

    /// <summary>A flag for knn_set_cancel_flag: a native int the library polls between chunks
    /// of work of the calls made by the thread that registered it. Cancel() may be called from
    /// any thread; the cancelled call throws KnnCancelledException. Reset() before reuse.
    /// <code>using (var flag = new KnnCancelFlag()) using (flag.Register()) { ...long calls... }</code></summary>
    public sealed class KnnCancelFlag : KnnThreadRecord
    {
        public KnnCancelFlag() : base(sizeof(int)) { }

        public void Cancel() { Marshal.WriteInt32(Live(), 1); }
        public void Reset() { Marshal.WriteInt32(Live(), 0); }
        public bool IsCancelled { get { return Marshal.ReadInt32(Live()) != 0; } }

        protected override void SetForCallingThread(bool registered)
        {
            Knn.SetCancelFlag(registered ? this : null);
        }
    }

    // ---- progress --------------------------------------------------------------------------

    /// <summary>knn_progress_stage.</summary>
    public enum KnnProgressStage { Idle = 0, Build = 1, Query = 2 }

    /// <summary>A record for knn_set_progress: native memory the library updates per chunk of
    /// work of the calls made by the thread that registered it; read it from any thread.
    /// Within a stage Done never decreases and ends at Total; a stage begins at 0, or, when a
    /// GPU call's CPU fallback begins it again, at what the stage had done before that call.
    /// Sequence counts the stages begun.
    /// <code>using (var p = new KnnProgress()) using (p.Register()) { ...long calls... }</code></summary>
    public sealed class KnnProgress : KnnThreadRecord
    {
        // struct knn_progress: int64 done, int64 total, int32 stage, int32 sequence (24 bytes).
        internal const int Size = 24;

        public KnnProgress() : base(Size) { }

        public int Sequence { get { return Marshal.ReadInt32(Live(), 20); } }
        public KnnProgressStage Stage { get { return (KnnProgressStage)Marshal.ReadInt32(Live(), 16); } }
        public long Total { get { return Marshal.ReadInt64(Live(), 8); } }
        public long Done { get { return Marshal.ReadInt64(Live(), 0); } }

        protected override void SetForCallingThread(bool registered)
        {
            Knn.SetProgress(registered ? this : null);
        }
    }
}
