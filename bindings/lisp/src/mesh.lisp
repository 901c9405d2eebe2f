;;;; mesh.lisp - triangle meshes: exact closest point, signed distance, the
;;;; deviation report of a scan against a design and the scan's best rigid fit
;;;; to it (knn_gpgpu_mesh.h).
;;;;
;;;; Vertices and points are rows of 3 reals (flat vectors or (n 3) arrays; a
;;;; foreign pointer for points, host or device memory of a CUDA mesh, with
;;;; :count); faces are rows of 3 vertex indices ((signed-byte 32)).
;;;; Precision follows the vertices as for the index: double-floats build a
;;;; float64 mesh (knn_mesh_build_f64), single-floats a float32 one; :SCALAR
;;;; forces one. Points are taken in the mesh's precision by the index's rule
;;;; (a float32 mesh refuses a double-float that is no single-float), and the
;;;; distances, closest points and weights come back in it. Every definition
;;;; (closest point, ties, max-distance, signs, the report) is the header's: a
;;;; point beyond MAX-DISTANCE gets triangle -1, distance +infinity and NaN
;;;; closest point and weights. Lifetime as for the index (handle.lisp).

(in-package #:knn-gpgpu)

(defstruct (mesh (:include native-handle (free '%mesh-free))
                 (:copier nil)
                 (:constructor %make-mesh ()))
  "A knn_mesh handle. Free it with FREE-MESH or use WITH-MESH; any thread may,
also while other threads query it (see handle.lisp)."
  (n-vertices 0 :type integer)
  (n-triangles 0 :type integer)
  (scalar :float32 :type (member :float32 :float64))
  (backend :openmp)
  (closed-oriented nil))

(defun mesh-closed-p (mesh) (null (mesh-pointer mesh)))

(defmacro with-live-mesh ((handle mesh) &body body)
  "Run BODY with HANDLE bound to MESH's knn_mesh*, held until BODY returns."
  (let ((m (gensym "MESH")))
    `(let ((,m ,mesh))
       (check-type ,m mesh)
       (with-handle (,handle ,m "mesh") ,@body))))

(defun infinity (scalar)
  "+infinity in SCALAR's type: max_distance without a limit."
  (ecase scalar
    (:float32 #+sbcl sb-ext:single-float-positive-infinity #-sbcl most-positive-single-float)
    (:float64 #+sbcl sb-ext:double-float-positive-infinity #-sbcl most-positive-double-float)))

(defun adopt-mesh (pointer)
  "A MESH owning POINTER (a knn_mesh*), described by knn_mesh_info; POINTER is
freed here when that call fails."
  (let ((adopted nil))
    (unwind-protect
         (cffi:with-foreign-objects ((nv :int64) (nt :int64) (scalar :int) (backend :int)
                                     (closed :int))
           (check-status "knn_mesh_info" (%mesh-info pointer nv nt scalar backend closed))
           (let ((mesh (%make-mesh)))
             (setf (mesh-n-vertices mesh) (cffi:mem-ref nv :int64)
                   (mesh-n-triangles mesh) (cffi:mem-ref nt :int64)
                   (mesh-scalar mesh) (if (= (cffi:mem-ref scalar :int) 1) :float64 :float32)
                   (mesh-backend mesh) (let ((b (cffi:mem-ref backend :int)))
                                         (if (< -1 b 3) (aref #(:auto :cuda :openmp) b) b))
                   (mesh-closed-oriented mesh) (= (cffi:mem-ref closed :int) 1))
             (prog1 (adopt-handle mesh pointer)
               (setf adopted t))))
      (unless adopted (%mesh-free pointer)))))

(defun build-mesh (vertices faces &key options scalar backend device threads
                                    device-memory-limit)
  "Build a mesh over VERTICES (rows of 3 reals) and FACES (rows of 3 vertex
indices). Double-floats build a float64 mesh, single-floats a float32 one;
:SCALAR (:float32 or :float64) forces one (converting the vertices, rounding
included). The keywords override OPTIONS' fields. Returns a MESH; signals
KNN-INVALID-ARGUMENT (no triangle, an index out of range: the message names
the triangle), KNN-NONFINITE-INPUT (naming the vertex), KNN-NO-DEVICE."
  (multiple-value-bind (verts nv scalar)
      (rows-of vertices 3 "vertices" (and scalar (if (eq scalar :float32) :round-to-float32 scalar)))
    (let* ((scalar (if (eq scalar :round-to-float32) :float32 scalar))
           (tris (integer-vector (if (arrayp faces) (flat-rows faces 3 "faces") faces)
                                 '(signed-byte 32) "faces"))
           (opts (merge-options options (list :backend backend :device device :threads threads
                                              :device-memory-limit device-memory-limit))))
      (unless (zerop (mod (length tris) 3))
        (usage-error "faces: ~D indices is not a whole number of triangles" (length tris)))
      (cffi:with-foreign-object (out :pointer)
        (setf (cffi:mem-ref out :pointer) (cffi:null-pointer))
        (with-foreign-options (opt opts)
          (with-pointers ((vp verts) (tp (and (plusp (length tris)) tris)))
            (scalar-call (scalar name "knn_mesh_build" %mesh-build %mesh-build-f64)
              vp nv tp (floor (length tris) 3) opt out)))
        (adopt-mesh (cffi:mem-ref out :pointer))))))

(defun flat-rows (array columns name)
  "A 2-D ARRAY of COLUMNS columns as a flat row-major vector (other arrays as they are)."
  (if (= (array-rank array) 2)
      (progn
        (unless (= (array-dimension array 1) columns)
          (usage-error "~A: expected ~D columns, got an array of dimensions ~S"
                       name columns (array-dimensions array)))
        (let ((out (make-array (array-total-size array))))
          (dotimes (i (length out) out)
            (setf (aref out i) (row-major-aref array i)))))
      array))

(defun free-mesh (mesh)
  "Free MESH (knn_mesh_free); freeing twice does nothing. Calls running on it
in other threads finish, and the last of them frees it."
  (check-type mesh mesh)
  (free-handle mesh "knn_mesh_free"))

(defmacro with-mesh ((var vertices faces &rest keys) &body body)
  "Bind VAR to (BUILD-MESH VERTICES FACES . KEYS) for BODY; always freed."
  `(let ((,var (build-mesh ,vertices ,faces ,@keys)))
     (unwind-protect (progn ,@body)
       (free-mesh ,var))))

(defun mesh-info (mesh)
  "knn_mesh_info: (values n-vertices n-triangles scalar backend closed-oriented)."
  (with-live-mesh (handle mesh)
    handle                              ; only held: the answers were read at build
    (values (mesh-n-vertices mesh) (mesh-n-triangles mesh) (mesh-scalar mesh)
            (mesh-backend mesh) (mesh-closed-oriented mesh))))

(defun mesh-points (mesh points count)
  "(values vector-or-pointer m) of POINTS in MESH's precision."
  (multiple-value-bind (q m) (input-rows points 3 count "points" (mesh-scalar mesh))
    (values q m)))

(defun mesh-limit (mesh max-distance)
  (coerce (or max-distance (infinity (mesh-scalar mesh)))
          (scalar-element-type (mesh-scalar mesh))))

(defun mesh-closest (mesh points &key max-distance barycentric options count)
  "The closest point of MESH to each of POINTS (knn_mesh_closest, or _f64).
Returns (values triangle-ids sq-distances closest barycentric): m
(signed-byte 32), m reals and m*3 reals of the mesh's precision (closest
points as rows of x y z; barycentric weights w0 w1 w2 of the triangle's
corners, NIL unless BARYCENTRIC). MAX-DISTANCE: farther points get -1,
+infinity and NaN (NIL: no limit)."
  (with-live-mesh (handle mesh)
    (multiple-value-bind (q m) (mesh-points mesh points count)
      (let* ((scalar (mesh-scalar mesh))
             (type (scalar-element-type scalar))
             (ids (make-array m :element-type '(signed-byte 32)))
             (sq (make-array m :element-type type))
             (cl (make-array (* 3 m) :element-type type))
             (bc (and barycentric (make-array (* 3 m) :element-type type)))
             (limit (mesh-limit mesh max-distance)))
        (with-foreign-options (opt options)
          (with-pointers ((qp q) (ip ids) (sp sq) (cp cl) (bp bc))
            (scalar-call (scalar name "knn_mesh_closest" %mesh-closest %mesh-closest-f64)
              handle qp m limit ip sp cp bp opt)))
        (values ids sq cl bc)))))

(defun mesh-signed-distance (mesh points &key max-distance options count)
  "The signed distance of each of POINTS to MESH (knn_mesh_signed_distance):
the Euclidean distance, negative inside, +infinity beyond MAX-DISTANCE.
Returns (values signed-distances triangle-ids)."
  (with-live-mesh (handle mesh)
    (multiple-value-bind (q m) (mesh-points mesh points count)
      (let* ((scalar (mesh-scalar mesh))
             (sd (make-array m :element-type (scalar-element-type scalar)))
             (ids (make-array m :element-type '(signed-byte 32)))
             (limit (mesh-limit mesh max-distance)))
        (with-foreign-options (opt options)
          (with-pointers ((qp q) (sp sd) (ip ids))
            (scalar-call (scalar name "knn_mesh_signed_distance" %mesh-signed-distance
                                 %mesh-signed-distance-f64)
              handle qp m limit sp ip opt)))
        (values sd ids)))))

(defstruct (deviation-report (:copier nil))
  "What knn_mesh_deviation_report computes (definitions in the header).
PERCENTILE-VALUES[i] is the nearest-rank percentile PERCENTILES[i];
BIN-COUNTS[b] counts BIN-EDGES[b] <= d < BIN-EDGES[b+1] (the last bin closed);
SIGNED-DISTANCES holds the per-point values when asked for, else NIL."
  (n-points 0) (n-measured 0) (n-beyond 0) (n-within-tolerance 0) (n-above-tolerance 0)
  (n-below-tolerance 0) (n-below-bins 0) (n-above-bins 0)
  (min 0d0) (max 0d0) (mean 0d0) (rms 0d0)
  (percentiles nil) (percentile-values nil) (bin-edges nil) (bin-counts nil)
  (signed-distances nil))

(defun mesh-deviation-report (mesh points tolerance &key (percentiles '(0 1 5 25 50 75 95 99 100))
                                                      bin-edges max-distance distances options
                                                      count)
  "The deviation report of the scan POINTS against the design MESH
(knn_mesh_deviation_report), computed where the mesh lives. TOLERANCE >= 0;
PERCENTILES in [0, 100]; BIN-EDGES strictly ascending (n-bins + 1 of them, or
NIL for no histogram); DISTANCES true also returns the per-point signed
distances. Returns a DEVIATION-REPORT."
  (let* ((pct (double-vector percentiles "percentiles"))
         (edges (double-vector (or bin-edges #()) "bin-edges"))
         (n-bins (max 0 (1- (length edges))))
         (values-out (make-array (length pct) :element-type 'double-float))
         (counts (make-array n-bins :element-type '(signed-byte 64))))
    (when (and bin-edges (< (length edges) 2))
      (usage-error "bin-edges: at least two edges (one bin), got ~D" (length edges)))
    (c-int (length pct) "the number of percentiles")
    (c-int n-bins "the number of bins")
    (with-live-mesh (handle mesh)
      (multiple-value-bind (q m) (mesh-points mesh points count)
        (let* ((scalar (mesh-scalar mesh))
               (sd (and distances (make-array m :element-type (scalar-element-type scalar))))
               (limit (mesh-limit mesh max-distance))
               (tol (coerce tolerance 'double-float)))
          (cffi:with-foreign-object (report '(:struct deviation-report))
            (setf (cffi:foreign-slot-value report '(:struct deviation-report) 'struct-size)
                  (cffi:foreign-type-size '(:struct deviation-report)))
            (with-foreign-options (opt options)
              (with-pointers ((qp q) (pp (and (plusp (length pct)) pct))
                              (vp (and (plusp (length pct)) values-out))
                              (ep (and (plusp n-bins) edges)) (cp (and (plusp n-bins) counts))
                              (sp sd))
                (scalar-call (scalar name "knn_mesh_deviation_report" %mesh-deviation-report
                                     %mesh-deviation-report-f64)
                  handle qp m limit tol pp (length pct) vp ep n-bins cp sp report opt)))
            (flet ((slot (name) (cffi:foreign-slot-value report '(:struct deviation-report) name)))
              (make-deviation-report
               :n-points (slot 'n-points) :n-measured (slot 'n-measured)
               :n-beyond (slot 'n-beyond) :n-within-tolerance (slot 'n-within-tolerance)
               :n-above-tolerance (slot 'n-above-tolerance)
               :n-below-tolerance (slot 'n-below-tolerance) :n-below-bins (slot 'n-below-bins)
               :n-above-bins (slot 'n-above-bins) :min (slot 'min) :max (slot 'max)
               :mean (slot 'mean) :rms (slot 'rms) :percentiles pct
               :percentile-values values-out :bin-edges edges :bin-counts counts
               :signed-distances sd))))))))

;;; ---- alignment -------------------------------------------------------------------

(defstruct (align-result (:copier nil))
  "What knn_mesh_align_ex found (definitions in the header). TRANSFORM is a
(4 4) double-float array, row-major as the header's: it maps the scan onto
the mesh (mesh point = TRANSFORM * (x y z 1)). RMS is NaN when no point was
kept; CONVERGED is a generalized boolean; DEGENERATE-DIRECTIONS holds the
KNN_ALIGN_* bits (1 2 4: rotations about x y z, 8 16 32: translations along
them) of the directions the last step could not observe."
  (transform nil) (rms 0d0) (n-kept 0) (iterations 0) (converged nil)
  (degenerate-directions 0) (n-degenerate 0))

(defun call-align (call initial max-correspondence max-iterations kept-fraction
                   tolerance-rotation tolerance-translation coarse-start)
  "The marshalling every fit shares (knn_mesh_align_ex, knn_index_align):
checks INITIAL and MAX-ITERATIONS, fills knn_align_params, and calls CALL
with the pointers of the start (NULL: the identity), the parameters and the
result, which CALL hands to its C function (checking its status). Returns
the ALIGN-RESULT."
  (let ((start (and initial (double-vector (if (arrayp initial) (flat-rows initial 4 "initial")
                                               initial)
                                           "initial"))))
    (when (and start (/= (length start) 16))
      (usage-error "initial: expected 16 reals (a 4 x 4 transform), got ~D" (length start)))
    (c-int max-iterations "max-iterations")
    (cffi:with-foreign-objects ((params '(:struct align-params))
                                (result '(:struct align-result)))
      (flet ((param (name value)
               (setf (cffi:foreign-slot-value params '(:struct align-params) name) value)))
        (param 'struct-size (cffi:foreign-type-size '(:struct align-params)))
        (param 'max-correspondence
               (coerce (or max-correspondence (infinity :float64)) 'double-float))
        (param 'max-iterations max-iterations)
        (param 'coarse-start (if coarse-start 1 0))
        (param 'kept-fraction (coerce kept-fraction 'double-float))
        ;; 0 in the struct: the default
        (param 'tolerance-rotation (coerce (or tolerance-rotation 0) 'double-float))
        (param 'tolerance-translation (coerce (or tolerance-translation 0) 'double-float)))
      (setf (cffi:foreign-slot-value result '(:struct align-result) 'struct-size)
            (cffi:foreign-type-size '(:struct align-result)))
      (with-pointers ((ip start))
        (funcall call ip params result))
      (flet ((slot (name) (cffi:foreign-slot-value result '(:struct align-result) name)))
        (let ((transform (make-array '(4 4) :element-type 'double-float))
              (fitted (cffi:foreign-slot-pointer result '(:struct align-result) 'transform)))
          (dotimes (i 16)
            (setf (row-major-aref transform i) (cffi:mem-aref fitted :double i)))
          (make-align-result
           :transform transform :rms (slot 'rms) :n-kept (slot 'n-kept)
           :iterations (slot 'iterations) :converged (= (slot 'converged) 1)
           :degenerate-directions (slot 'degenerate-directions)
           :n-degenerate (slot 'n-degenerate)))))))

(defun mesh-align (mesh points &key initial max-correspondence (max-iterations 50)
                                 (kept-fraction 1) tolerance-rotation tolerance-translation
                                 coarse-start options count)
  "The rigid motion that best fits the scan POINTS onto MESH
(knn_mesh_align_ex, or _f64): ICP point to plane, summed in float64 where
the mesh lives. INITIAL: a rigid transform to start from, 16 reals row-major
or a (4 4) array (NIL: the identity). MAX-CORRESPONDENCE: points farther
than this from the mesh once moved are left out of a step (NIL: every
point). MAX-ITERATIONS: the most steps. KEPT-FRACTION in (0, 1]: each step
keeps that fraction of the correspondences, the nearest. TOLERANCE-ROTATION
(radians) and TOLERANCE-TRANSLATION (length) per step, NIL: the header's
defaults. COARSE-START true also starts from the principal axes. Returns an
ALIGN-RESULT; a bad argument (negative MAX-ITERATIONS, a KEPT-FRACTION out of
range, an INITIAL that is not rigid) signals KNN-INVALID-ARGUMENT."
  (with-live-mesh (handle mesh)
    (multiple-value-bind (q m) (mesh-points mesh points count)
      (with-foreign-options (opt options)
        (with-pointers ((qp q))
          (call-align (lambda (ip params result)
                        (scalar-call ((mesh-scalar mesh) name "knn_mesh_align_ex"
                                      %mesh-align-ex %mesh-align-ex-f64)
                          handle qp m ip params result opt))
                      initial max-correspondence max-iterations kept-fraction
                      tolerance-rotation tolerance-translation coarse-start))))))

(defun serialize-mesh (mesh)
  "knn_mesh_serialize: MESH as a (unsigned-byte 8) vector (versioned, checksummed)."
  (with-live-mesh (handle mesh)
    (cffi:with-foreign-object (size :size)
      (check-status "knn_mesh_serialized_size" (%mesh-serialized-size handle size))
      (let ((bytes (make-array (cffi:mem-ref size :size) :element-type '(unsigned-byte 8))))
        (with-pointers ((bp bytes))
          (check-status "knn_mesh_serialize" (%mesh-serialize handle bp (length bytes))))
        bytes))))

(defun deserialize-mesh (bytes &key options backend device threads device-memory-limit)
  "knn_mesh_deserialize: a MESH from SERIALIZE-MESH's bytes, on the backend the
keywords choose. Corrupted or truncated bytes signal KNN-INVALID-ARGUMENT."
  (unless (typep bytes '(simple-array (unsigned-byte 8) (*)))
    (usage-error "bytes must be a (simple-array (unsigned-byte 8) (*))"))
  (let ((opts (merge-options options (list :backend backend :device device :threads threads
                                           :device-memory-limit device-memory-limit))))
    (cffi:with-foreign-object (out :pointer)
      (setf (cffi:mem-ref out :pointer) (cffi:null-pointer))
      (with-foreign-options (opt opts)
        (with-pointers ((bp (and (plusp (length bytes)) bytes)))
          (check-status "knn_mesh_deserialize" (%mesh-deserialize bp (length bytes) opt out))))
      (adopt-mesh (cffi:mem-ref out :pointer)))))

(defun estimate-mesh-bytes (n-vertices n-triangles &optional options (scalar :float32))
  "knn_estimate_mesh_bytes: device bytes a CUDA mesh build of this size needs
at its peak (0 for impossible sizes)."
  (with-foreign-options (opt options)
    (with-c-float-environment
      (%estimate-mesh-bytes n-vertices n-triangles (ecase scalar (:float32 0) (:float64 1)) opt))))
