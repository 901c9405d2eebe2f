;;;; stats.lisp - neighbourhood statistics of an index's own 3-D points
;;;; (knn_gpgpu_stats.h): normals and curvature, outlier scores and the inliers
;;;; they keep, neighbour counts within a radius, the distance to the k-th
;;;; neighbour.
;;;;
;;;; Every definition is the header's: the k nearest of a point include itself
;;;; (normals), the k nearest others do not (scores, k-th distances); normals
;;;; are unit vectors oriented towards :VIEWPOINT when given, else consistently
;;;; over the cloud; degenerate neighbourhoods give a documented normal, never
;;;; NaN. Results come back in the index's precision (single-floats from a
;;;; float32 index, double-floats from a float64 one; counts (signed-byte 64),
;;;; kept ids (signed-byte 32)), per indexed point in input order, identical on
;;;; every backend. Outputs are fresh Lisp vectors, or foreign pointers given
;;;; with :OUT (host or device memory of the index's device; all outputs of a
;;;; call in one kind). A registered cancel flag and progress record
;;;; (cancel.lisp, progress.lisp) apply as to queries.

(in-package #:knn-gpgpu)

(defun index-normals (index k &key viewpoint (curvature t) options out-normals out-curvature)
  "Unit normals of INDEX's 3-D points by principal components of each point's
K nearest, itself included (knn_index_normals, or _f64), and, unless
CURVATURE is NIL, the surface variation l0 / (l0 + l1 + l2). VIEWPOINT (3
reals): every normal then satisfies dot(n, viewpoint - p) >= 0; NIL: oriented
consistently over the cloud (closed surfaces all outward or all inward).
Returns (values normals curvature): 3n reals (x y z per point) and n reals
(NIL without CURVATURE)."
  (c-int k "k")
  (with-live-index (handle index)
    (let* ((scalar (index-scalar index))
           (type (scalar-element-type scalar))
           (n (index-n index))
           (vp (and viewpoint (scalar-vector (coerce viewpoint 'vector) scalar "viewpoint")))
           (normals (output-vector out-normals (* 3 n) type "out-normals"))
           (cur (and (or curvature out-curvature)
                     (output-vector out-curvature n type "out-curvature"))))
      (when (and vp (/= (length vp) 3))
        (usage-error "viewpoint: expected 3 reals, got ~D" (length vp)))
      (with-foreign-options (opt options)
        (with-pointers ((vpp vp) (np normals) (cp cur))
          (scalar-call (scalar name "knn_index_normals" %index-normals %index-normals-f64)
            handle k vpp np cp opt)))
      (values normals cur))))

(defmacro define-per-point-call (lisp-name c-name float-fn f64-fn documentation)
  `(defun ,lisp-name (index k &key options out)
     ,documentation
     (c-int k "k")
     (with-live-index (handle index)
       (let* ((scalar (index-scalar index))
              (values-out (output-vector out (index-n index) (scalar-element-type scalar) "out")))
         (with-foreign-options (opt options)
           (with-pointers ((vp values-out))
             (scalar-call (scalar name ,c-name ,float-fn ,f64-fn)
               handle k vp opt)))
         values-out))))

(define-per-point-call index-outlier-scores "knn_index_outlier_scores"
  %index-outlier-scores %index-outlier-scores-f64
  "knn_index_outlier_scores: per point of INDEX, the mean Euclidean distance to
its K nearest others (0 for a lone point), in the index's precision.")

(define-per-point-call index-kth-distances "knn_index_kth_distances"
  %index-kth-distances %index-kth-distances-f64
  "knn_index_kth_distances: per point of INDEX, the distance to its K-th
nearest other (+infinity where fewer than K others exist).")

(defun index-neighbor-counts (index radius &key options out)
  "knn_index_neighbor_counts: per point of INDEX, the number of other points
within RADIUS (squared distance <= radius * radius in the index's precision;
equal points count, the point itself does not); a (signed-byte 64) vector."
  (with-live-index (handle index)
    (let* ((scalar (index-scalar index))
           (counts (output-vector out (index-n index) '(signed-byte 64) "out"))
           (r (coerce radius (scalar-element-type scalar))))
      (with-foreign-options (opt options)
        (with-pointers ((cp counts))
          (scalar-call (scalar name "knn_index_neighbor_counts" %index-neighbor-counts
                               %index-neighbor-counts-f64)
            handle r cp opt)))
      counts)))

(defun kept-ids (kept count)
  "The first COUNT kept ids of a Lisp vector (a foreign pointer as it is)."
  (if (cffi:pointerp kept) kept (subseq kept 0 count)))

(defun index-statistical-inliers (index k &key (std-ratio 2) options out)
  "Statistical outlier removal (knn_index_statistical_inliers): the points whose
INDEX-OUTLIER-SCORES s satisfy s <= mean + STD-RATIO * std (mean and sample
standard deviation over the cloud, float64), as PCL's StatisticalOutlierRemoval
with setMeanK(K) keeps them. Returns (values ids count): the kept ids in
ascending order ((signed-byte 32); with OUT a foreign pointer, OUT itself,
-1 after the first COUNT) and their number."
  (c-int k "k")
  (with-live-index (handle index)
    (let ((kept (output-vector out (index-n index) '(signed-byte 32) "out")))
      (cffi:with-foreign-object (count :int64)
        (with-foreign-options (opt options)
          (with-pointers ((kp kept))
            (scalar-call ((index-scalar index) name "knn_index_statistical_inliers"
                          %index-statistical-inliers %index-statistical-inliers-f64)
              handle k (coerce std-ratio 'double-float) kp count opt)))
        (let ((n (cffi:mem-ref count :int64)))
          (values (kept-ids kept n) n))))))

(defun index-radius-inliers (index radius min-neighbors &key options out)
  "Radius outlier removal (knn_index_radius_inliers): the points of INDEX with
at least MIN-NEIGHBORS others within RADIUS (as INDEX-NEIGHBOR-COUNTS counts
them). Returns (values ids count) as INDEX-STATISTICAL-INLIERS."
  (with-live-index (handle index)
    (let* ((scalar (index-scalar index))
           (kept (output-vector out (index-n index) '(signed-byte 32) "out"))
           (r (coerce radius (scalar-element-type scalar))))
      (cffi:with-foreign-object (count :int64)
        (with-foreign-options (opt options)
          (with-pointers ((kp kept))
            (scalar-call (scalar name "knn_index_radius_inliers" %index-radius-inliers
                                 %index-radius-inliers-f64)
              handle r min-neighbors kp count opt)))
        (let ((n (cffi:mem-ref count :int64)))
          (values (kept-ids kept n) n))))))

(defun estimate-stats-bytes (n k &optional options (scalar :float32))
  "knn_estimate_stats_bytes (SCALAR :float64: the _f64 twin): device bytes a
statistics call with lists of K on a CUDA index of N 3-D points needs at most
(pass K + 1 for the calls over others)."
  (c-int k "k")
  (with-foreign-options (opt options)
    (with-c-float-environment
      (ecase scalar
        (:float32 (%estimate-stats-bytes n k opt))
        (:float64 (%estimate-stats-bytes-f64 n k opt))))))

(defun index-align (index points &key normals initial max-correspondence (max-iterations 50)
                                   (kept-fraction 1) tolerance-rotation tolerance-translation
                                   coarse-start options count)
  "The rigid motion that best fits the scan POINTS (rows of 3 reals, x y z
per point: a flat vector, an (m 3) array, or a foreign pointer with :COUNT)
onto the 3-D points of INDEX (knn_index_align, or _f64): ICP against each
moved point's nearest index point, point to plane with NORMALS (rows of 3
reals, one unit normal per index point, e.g. from INDEX-NORMALS, or a foreign
pointer to as many) or point to point when NORMALS is NIL. The other keys are
MESH-ALIGN's. Returns an ALIGN-RESULT."
  (with-live-index (handle index)
    (let ((scalar (index-scalar index))
          (n (index-n index)))
      (multiple-value-bind (q m) (input-rows points 3 count "points" scalar)
        (multiple-value-bind (nv rows) (if normals (input-rows normals 3 n "normals" scalar) (values nil n))
          (unless (= rows n)
            (usage-error "normals: expected ~D rows (one per index point), got ~D" n rows))
          (with-foreign-options (opt options)
            (with-pointers ((qp q) (np nv))
              (call-align (lambda (ip params result)
                            (scalar-call (scalar name "knn_index_align" %index-align %index-align-f64)
                              handle qp m np ip params result opt))
                          initial max-correspondence max-iterations kept-fraction
                          tolerance-rotation tolerance-translation coarse-start))))))))
