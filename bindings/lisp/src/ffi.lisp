;;;; ffi.lisp - the foreign types and every function of knn_gpgpu.h (and of the
;;;; knn_gpgpu_mesh.h it includes), unchanged.
;;;;
;;;; The %-prefixed functions are the raw C entry points (status codes, raw
;;;; pointers). The rest of the system wraps them; hosts that need the raw
;;;; calls may use them as knn-gpgpu::%name.

(in-package #:knn-gpgpu)

;;; struct Point { float p[3]; }                                  12 bytes
(cffi:defcstruct point
  (p :float :count 3))

;;; struct Node { float p[3]; int left, right, id; }              24 bytes
(cffi:defcstruct node
  (p :float :count 3)
  (left :int)
  (right :int)
  (id :int))

;;; knn_options (40 bytes on 64-bit platforms)
(cffi:defcstruct knn-options
  (struct-size :size)
  (backend :int)
  (device :int)
  (structure :int)
  (leaf-size :int)
  (threads :int)
  (device-memory-limit :size))

;;; Status, errors, version
(cffi:defcfun ("knn_status_string" %status-string) :pointer (status :int))
(cffi:defcfun ("knn_last_error" %last-error) :pointer)
(cffi:defcfun ("knn_version" %version) :int)
(cffi:defcfun ("knn_set_cancel_flag" %set-cancel-flag) :int (flag :pointer))
(cffi:defcfun ("knn_set_progress" %set-progress) :int (progress :pointer))

;;; Classic 3-D API
(cffi:defcfun ("buildKdTree" %build-kd-tree) :int
  (points :pointer) (n :int) (tree :pointer))
(cffi:defcfun ("cuBuildKdTree" %cu-build-kd-tree) :int
  (points :pointer) (n :int) (tree :pointer))
(cffi:defcfun ("mpBuildKdTree" %mp-build-kd-tree) :int
  (points :pointer) (n :int) (tree :pointer))
(cffi:defcfun ("queryAll" %query-all) :int
  (query-points :pointer) (tree :pointer) (n-qp :int) (n-tree :int) (k :int) (result :pointer))
(cffi:defcfun ("cuQueryAll" %cu-query-all) :int
  (query-points :pointer) (tree :pointer) (n-qp :int) (n-tree :int) (k :int) (result :pointer))
(cffi:defcfun ("mpQueryAll" %mp-query-all) :int
  (query-points :pointer) (tree :pointer) (n-qp :int) (n-tree :int) (k :int) (result :pointer))
(cffi:defcfun ("getTreeSize" %get-tree-size) :size (n-tree :int))
(cffi:defcfun ("getNeededBytesForBuildingKdTree" %get-needed-bytes-for-building-kd-tree) :size
  (n-tree :int))
(cffi:defcfun ("getNeededBytesForQueryAll" %get-needed-bytes-for-query-all) :size
  (n-qp :int) (k :int) (n-tree :int))
(cffi:defcfun ("getNeededBytesInSearch" %get-needed-bytes-in-search) :size
  (n-qp :int) (k :int) (n-tree :int) (thread-num :int) (block-num :int))
(cffi:defcfun ("getFreeBytesOnGpu" %get-free-bytes-on-gpu) :size)
(cffi:defcfun ("cuSetDevice" %cu-set-device) :int (device :int))
(cffi:defcfun ("cuGetDevice" %cu-get-device) :int)
(cffi:defcfun ("cuGetDeviceCount" %cu-get-device-count) :int)
(cffi:defcfun ("knn_brute_force" %brute-force) :int
  (ref :pointer) (n-ref :int) (query :pointer) (n-query :int) (dim :int) (k :int)
  (sq-dist :pointer) (ind :pointer))

;;; Index API
(cffi:defcfun ("knn_options_init" %options-init) :void (opt :pointer))
;; Version 2 (device list at offsets 40 and 44 on 64-bit, 112 bytes); the
;; OPTIONS structure keeps version 1 and KNN_DEVICES chooses devices for it.
(cffi:defcfun ("knn_options_init_v2" %options-init-v2) :void (opt :pointer))
(cffi:defcfun ("knn_index_build" %index-build) :int
  (points :pointer) (n :int64) (dim :int) (opt :pointer) (out :pointer))
(cffi:defcfun ("knn_index_free" %index-free) :int (index :pointer))
(cffi:defcfun ("knn_index_info" %index-info) :int
  (index :pointer) (n :pointer) (dim :pointer) (backend :pointer) (structure :pointer))
(cffi:defcfun ("knn_index_query" %index-query) :int
  (index :pointer) (queries :pointer) (m :int64) (k :int) (indices :pointer)
  (sq-distances :pointer) (opt :pointer))
(cffi:defcfun ("knn_index_query_self" %index-query-self) :int
  (index :pointer) (k :int) (exclude-self :int) (indices :pointer) (sq-distances :pointer))
(cffi:defcfun ("knn_index_radius" %index-radius) :int
  (index :pointer) (queries :pointer) (m :int64) (radius :float) (max-neighbors :int)
  (indices :pointer) (sq-distances :pointer) (counts :pointer) (opt :pointer))
(cffi:defcfun ("knn_index_radius_count" %index-radius-count) :int
  (index :pointer) (queries :pointer) (m :int64) (radius :float) (counts :pointer)
  (opt :pointer))
(cffi:defcfun ("knn_offsets_from_counts" %offsets-from-counts) :int
  (counts :pointer) (m :int64) (offsets :pointer))
(cffi:defcfun ("knn_index_radius_fill" %index-radius-fill) :int
  (index :pointer) (queries :pointer) (m :int64) (radius :float) (offsets :pointer)
  (indices :pointer) (sq-distances :pointer) (opt :pointer))
(cffi:defcfun ("knn_index_serialized_size" %index-serialized-size) :int
  (index :pointer) (bytes :pointer))
(cffi:defcfun ("knn_index_serialize" %index-serialize) :int
  (index :pointer) (buffer :pointer) (bytes :size))
(cffi:defcfun ("knn_index_deserialize" %index-deserialize) :int
  (buffer :pointer) (bytes :size) (opt :pointer) (out :pointer))
(cffi:defcfun ("knn_estimate_build_bytes" %estimate-build-bytes) :size
  (n :int64) (dim :int) (opt :pointer))
(cffi:defcfun ("knn_estimate_query_bytes" %estimate-query-bytes) :size
  (m :int64) (k :int) (n :int64) (dim :int) (opt :pointer))

;;; Index API in float64: the float calls with double arrays and radius
(cffi:defcfun ("knn_index_build_f64" %index-build-f64) :int
  (points :pointer) (n :int64) (dim :int) (opt :pointer) (out :pointer))
(cffi:defcfun ("knn_index_scalar" %index-scalar) :int (index :pointer) (scalar :pointer))
(cffi:defcfun ("knn_index_query_f64" %index-query-f64) :int
  (index :pointer) (queries :pointer) (m :int64) (k :int) (indices :pointer)
  (sq-distances :pointer) (opt :pointer))
(cffi:defcfun ("knn_index_query_self_f64" %index-query-self-f64) :int
  (index :pointer) (k :int) (exclude-self :int) (indices :pointer) (sq-distances :pointer))
(cffi:defcfun ("knn_index_radius_f64" %index-radius-f64) :int
  (index :pointer) (queries :pointer) (m :int64) (radius :double) (max-neighbors :int)
  (indices :pointer) (sq-distances :pointer) (counts :pointer) (opt :pointer))
(cffi:defcfun ("knn_index_radius_count_f64" %index-radius-count-f64) :int
  (index :pointer) (queries :pointer) (m :int64) (radius :double) (counts :pointer)
  (opt :pointer))
(cffi:defcfun ("knn_index_radius_fill_f64" %index-radius-fill-f64) :int
  (index :pointer) (queries :pointer) (m :int64) (radius :double) (offsets :pointer)
  (indices :pointer) (sq-distances :pointer) (opt :pointer))
;; Pairs within a radius and neighbour counts (declared for the C API's
;; users; the Lisp binding has no wrapper of its own for them yet).
(cffi:defcfun ("knn_index_radius_pairs" %index-radius-pairs) :int
  (index :pointer) (radius :double) (self-counts :pointer) (capacity :int64) (pairs :pointer)
  (count :pointer) (opt :pointer))
(cffi:defcfun ("knn_index_count_neighbors" %index-count-neighbors) :int
  (index :pointer) (queries :pointer) (m :int64) (radii :pointer) (n-radii :int64)
  (query-weights :pointer) (point-weights :pointer) (counts :pointer) (weighted-counts :pointer)
  (opt :pointer))
(cffi:defcfun ("knn_index_count_neighbors_f64" %index-count-neighbors-f64) :int
  (index :pointer) (queries :pointer) (m :int64) (radii :pointer) (n-radii :int64)
  (query-weights :pointer) (point-weights :pointer) (counts :pointer) (weighted-counts :pointer)
  (opt :pointer))
(cffi:defcfun ("knn_estimate_build_bytes_f64" %estimate-build-bytes-f64) :size
  (n :int64) (dim :int) (opt :pointer))
(cffi:defcfun ("knn_estimate_query_bytes_f64" %estimate-query-bytes-f64) :size
  (m :int64) (k :int) (n :int64) (dim :int) (opt :pointer))

;;; Point in polygon over a quadtree
(cffi:defcfun ("knn_quadtree_build" %quadtree-build) :int
  (xy :pointer) (n :int64) (opt :pointer) (out :pointer))
(cffi:defcfun ("knn_quadtree_free" %quadtree-free) :int (tree :pointer))
(cffi:defcfun ("knn_points_in_polygons_count" %points-in-polygons-count) :int
  (tree :pointer) (vertices-xy :pointer) (ring-offsets :pointer) (n-rings :int64)
  (polygon-offsets :pointer) (n-polygons :int64) (counts :pointer) (opt :pointer))
(cffi:defcfun ("knn_points_in_polygons" %points-in-polygons) :int
  (tree :pointer) (vertices-xy :pointer) (ring-offsets :pointer) (n-rings :int64)
  (polygon-offsets :pointer) (n-polygons :int64) (out-offsets :pointer)
  (point-indices :pointer) (opt :pointer))
(cffi:defcfun ("knn_quadtree_build_f64" %quadtree-build-f64) :int
  (xy :pointer) (n :int64) (opt :pointer) (out :pointer))
(cffi:defcfun ("knn_points_in_polygons_count_f64" %points-in-polygons-count-f64) :int
  (tree :pointer) (vertices-xy :pointer) (ring-offsets :pointer) (n-rings :int64)
  (polygon-offsets :pointer) (n-polygons :int64) (counts :pointer) (opt :pointer))
(cffi:defcfun ("knn_points_in_polygons_f64" %points-in-polygons-f64) :int
  (tree :pointer) (vertices-xy :pointer) (ring-offsets :pointer) (n-rings :int64)
  (polygon-offsets :pointer) (n-polygons :int64) (out-offsets :pointer)
  (point-indices :pointer) (opt :pointer))

;;; Triangle meshes (knn_gpgpu_mesh.h)

;;; knn_deviation_report (104 bytes on 64-bit platforms)
(cffi:defcstruct deviation-report
  (struct-size :size)
  (n-points :int64)
  (n-measured :int64)
  (n-beyond :int64)
  (n-within-tolerance :int64)
  (n-above-tolerance :int64)
  (n-below-tolerance :int64)
  (n-below-bins :int64)
  (n-above-bins :int64)
  (min :double)
  (max :double)
  (mean :double)
  (rms :double))

;;; knn_align_params (48 bytes on 64-bit platforms): a field of 0 takes its default
(cffi:defcstruct align-params
  (struct-size :size)
  (max-correspondence :double)
  (max-iterations :int)
  (coarse-start :int)
  (kept-fraction :double)
  (tolerance-rotation :double)
  (tolerance-translation :double))

;;; knn_align_result (168 bytes on 64-bit platforms)
(cffi:defcstruct align-result
  (struct-size :size)
  (transform :double :count 16)
  (rms :double)
  (n-kept :int64)
  (iterations :int)
  (converged :int)
  (degenerate-directions :int)
  (n-degenerate :int))

(macrolet ((define-mesh-calls (suffix real)
             (flet ((c-name (name) (concatenate 'string name suffix))
                    (lisp-name (name)
                      (intern (string-upcase (concatenate 'string name (if (string= suffix "")
                                                                           "" "-f64"))))))
               `(progn
                  (cffi:defcfun (,(c-name "knn_mesh_build") ,(lisp-name "%mesh-build")) :int
                    (vertices :pointer) (n-vertices :int64) (triangles :pointer)
                    (n-triangles :int64) (opt :pointer) (out :pointer))
                  (cffi:defcfun (,(c-name "knn_mesh_closest") ,(lisp-name "%mesh-closest")) :int
                    (mesh :pointer) (points :pointer) (m :int64) (max-distance ,real)
                    (triangle-ids :pointer) (sq-distances :pointer) (closest :pointer)
                    (barycentric :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_mesh_signed_distance")
                                 ,(lisp-name "%mesh-signed-distance")) :int
                    (mesh :pointer) (points :pointer) (m :int64) (max-distance ,real)
                    (signed-distances :pointer) (triangle-ids :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_mesh_deviation_report")
                                 ,(lisp-name "%mesh-deviation-report")) :int
                    (mesh :pointer) (points :pointer) (m :int64) (max-distance ,real)
                    (tolerance :double) (percentiles :pointer) (n-percentiles :int)
                    (percentile-values :pointer) (bin-edges :pointer) (n-bins :int)
                    (bin-counts :pointer) (signed-distances :pointer) (report :pointer)
                    (opt :pointer))
                  ;; Alignment (contract section 8); MESH-ALIGN calls the _ex form.
                  (cffi:defcfun (,(c-name "knn_mesh_align") ,(lisp-name "%mesh-align")) :int
                    (mesh :pointer) (points :pointer) (m :int64) (initial :pointer)
                    (max-correspondence :double) (max-iterations :int) (transform :pointer)
                    (rms :pointer) (opt :pointer))
                  (cffi:defcfun (,(concatenate 'string "knn_mesh_align_ex" suffix)
                                 ,(lisp-name "%mesh-align-ex")) :int
                    (mesh :pointer) (points :pointer) (m :int64) (initial :pointer)
                    (params :pointer) (result :pointer) (opt :pointer))))))
  ;; The float calls and their _f64 twins differ only in the scalar type.
  (define-mesh-calls "" :float)
  (define-mesh-calls "_f64" :double))
(cffi:defcfun ("knn_mesh_free" %mesh-free) :int (mesh :pointer))
(cffi:defcfun ("knn_mesh_info" %mesh-info) :int
  (mesh :pointer) (n-vertices :pointer) (n-triangles :pointer) (scalar :pointer)
  (backend :pointer) (closed-oriented :pointer))
(cffi:defcfun ("knn_mesh_serialized_size" %mesh-serialized-size) :int
  (mesh :pointer) (bytes :pointer))
(cffi:defcfun ("knn_mesh_serialize" %mesh-serialize) :int
  (mesh :pointer) (buffer :pointer) (bytes :size))
(cffi:defcfun ("knn_mesh_deserialize" %mesh-deserialize) :int
  (buffer :pointer) (bytes :size) (opt :pointer) (out :pointer))
(cffi:defcfun ("knn_estimate_mesh_bytes" %estimate-mesh-bytes) :size
  (n-vertices :int64) (n-triangles :int64) (scalar :int) (opt :pointer))

;;; Neighbourhood statistics (knn_gpgpu_stats.h)
(macrolet ((define-stats-calls (suffix real)
             (flet ((c-name (base) (concatenate 'string base suffix))
                    (lisp-name (base) (intern (string-upcase (concatenate 'string base
                                                                          (if (string= suffix "")
                                                                              "" "-f64"))))))
               `(progn
                  (cffi:defcfun (,(c-name "knn_index_align") ,(lisp-name "%index-align")) :int
                    (index :pointer) (points :pointer) (m :int64) (normals :pointer)
                    (initial :pointer) (params :pointer) (result :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_index_normals") ,(lisp-name "%index-normals")) :int
                    (index :pointer) (k :int) (viewpoint :pointer) (normals :pointer)
                    (curvature :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_index_outlier_scores")
                                 ,(lisp-name "%index-outlier-scores")) :int
                    (index :pointer) (k :int) (mean-distances :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_index_statistical_inliers")
                                 ,(lisp-name "%index-statistical-inliers")) :int
                    (index :pointer) (k :int) (std-ratio :double) (kept :pointer)
                    (n-kept :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_index_kth_distances")
                                 ,(lisp-name "%index-kth-distances")) :int
                    (index :pointer) (k :int) (distances :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_index_neighbor_counts")
                                 ,(lisp-name "%index-neighbor-counts")) :int
                    (index :pointer) (radius ,real) (counts :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_index_radius_inliers")
                                 ,(lisp-name "%index-radius-inliers")) :int
                    (index :pointer) (radius ,real) (min-neighbors :int64) (kept :pointer)
                    (n-kept :pointer) (opt :pointer))
                  (cffi:defcfun (,(c-name "knn_estimate_stats_bytes")
                                 ,(lisp-name "%estimate-stats-bytes")) :size
                    (n :int64) (k :int) (opt :pointer))))))
  (define-stats-calls "" :float)
  (define-stats-calls "_f64" :double))

(defparameter *c-functions*
  '("knn_status_string" "knn_last_error" "knn_version" "knn_set_cancel_flag" "knn_set_progress"
    "buildKdTree" "cuBuildKdTree" "mpBuildKdTree" "queryAll" "cuQueryAll" "mpQueryAll"
    "getTreeSize" "getNeededBytesForBuildingKdTree" "getNeededBytesForQueryAll"
    "getNeededBytesInSearch" "getFreeBytesOnGpu" "cuSetDevice" "cuGetDevice"
    "cuGetDeviceCount" "knn_brute_force"
    "knn_options_init" "knn_options_init_v2" "knn_index_build" "knn_index_free" "knn_index_info" "knn_index_query"
    "knn_index_query_self" "knn_index_radius" "knn_index_radius_count"
    "knn_offsets_from_counts" "knn_index_radius_fill" "knn_index_serialized_size"
    "knn_index_serialize" "knn_index_deserialize" "knn_estimate_build_bytes"
    "knn_estimate_query_bytes"
    "knn_quadtree_build" "knn_quadtree_free" "knn_points_in_polygons_count"
    "knn_points_in_polygons"
    "knn_index_build_f64" "knn_index_scalar" "knn_index_query_f64" "knn_index_query_self_f64"
    "knn_index_radius_f64" "knn_index_radius_count_f64" "knn_index_radius_fill_f64"
    "knn_estimate_build_bytes_f64" "knn_estimate_query_bytes_f64"
    "knn_quadtree_build_f64" "knn_points_in_polygons_count_f64" "knn_points_in_polygons_f64"
    "knn_mesh_build" "knn_mesh_build_f64" "knn_mesh_free" "knn_mesh_info" "knn_mesh_closest"
    "knn_mesh_closest_f64" "knn_mesh_signed_distance" "knn_mesh_signed_distance_f64"
    "knn_mesh_deviation_report" "knn_mesh_deviation_report_f64" "knn_mesh_serialized_size"
    "knn_mesh_serialize" "knn_mesh_deserialize" "knn_estimate_mesh_bytes"
    "knn_mesh_align" "knn_mesh_align_f64" "knn_mesh_align_ex" "knn_mesh_align_ex_f64"
    "knn_index_normals" "knn_index_normals_f64" "knn_index_outlier_scores"
    "knn_index_outlier_scores_f64" "knn_index_statistical_inliers"
    "knn_index_statistical_inliers_f64" "knn_index_kth_distances" "knn_index_kth_distances_f64"
    "knn_index_neighbor_counts" "knn_index_neighbor_counts_f64" "knn_index_radius_inliers"
    "knn_index_radius_inliers_f64" "knn_estimate_stats_bytes" "knn_estimate_stats_bytes_f64"
    "knn_index_align" "knn_index_align_f64"
    "knn_index_radius_pairs" "knn_index_count_neighbors" "knn_index_count_neighbors_f64")
  "Every C function this file binds (the tests compare it with the header).")

;;; Every call into the library runs inside this. It loads the library first
;;; when needed, so a missing one is a KNN-LIBRARY-NOT-FOUND error rather than
;;; the Lisp's undefined-foreign-function error; and foreign code runs with the
;;; floating-point traps masked: SBCL enables traps that C code (and OpenMP
;;; threads it starts) does not expect.
(defmacro with-c-float-environment (&body body)
  #+sbcl `(progn
            (ensure-library)
            (sb-int:with-float-traps-masked (:invalid :divide-by-zero :overflow :inexact
                                              :underflow)
              ,@body))
  #-sbcl `(progn (ensure-library) ,@body))
