;;;; index.lisp - the index API: a resident index of points in any dimension.
;;;;
;;;; Points and queries are flat single-float or double-float vectors (rows of
;;;; DIM), 2-D arrays, or CFFI foreign pointers (host or device memory: the
;;;; library tells which, cudaPointerGetAttributes, and uses device arrays in
;;;; place; give the row count with :count, and :scalar :float64 for doubles).
;;;; Outputs are fresh Lisp vectors unless supplied.
;;;;
;;;; Precision follows the points: (simple-array double-float (*)) (or any
;;;; sequence holding a double-float) builds a float64 index through the _f64
;;;; calls, single-floats a float32 one; INDEX-SCALAR says which. Queries are
;;;; taken in the index's precision: a float64 index widens single-floats
;;;; exactly; a float32 index refuses a double-float that is no single-float
;;;; (KNN-USAGE-ERROR) instead of rounding it. Squared distances come back as
;;;; double-floats from a float64 index, single-floats from a float32 one.

(in-package #:knn-gpgpu)

(defstruct (index (:include native-handle (free '%index-free))
                  (:copier nil)
                  (:constructor %make-index (pointer n dim &optional (scalar :float32))))
  "A knn_index handle. Free it with FREE-INDEX or use WITH-INDEX; any thread
may, also while other threads query it (see handle.lisp)."
  (n 0 :type integer :read-only t)
  (dim 0 :type integer :read-only t)
  (scalar :float32 :type (member :float32 :float64) :read-only t))

(defun index-closed-p (index) (null (index-pointer index)))

(defmacro with-live-index ((handle index) &body body)
  "Run BODY with HANDLE bound to INDEX's knn_index*, held until BODY returns."
  (let ((i (gensym "INDEX")))
    `(let ((,i ,index))
       (check-type ,i index)
       (with-handle (,handle ,i "index") ,@body))))

(defun input-rows (data dim count name &optional scalar)
  "(values pointer-or-vector rows scalar) for index inputs. A foreign pointer
holds SCALAR's type (NIL: :float32)."
  (if (cffi:pointerp data)
      (progn
        (unless (and (integerp count) (>= count 0))
          (usage-error "~A is a foreign pointer: give its row count with :count" name))
        (values data count (or scalar :float32)))
      (rows-of data dim name scalar)))

(defun adopt-index (pointer n dim scalar)
  "An INDEX owning POINTER (a knn_index*), freed by the garbage collector if forgotten."
  (adopt-handle (%make-index nil n dim scalar) pointer))

(defun build-index (points dim &key options count scalar backend device structure leaf-size
                                 threads device-memory-limit)
  "Build an index over POINTS (rows of DIM reals; a foreign pointer needs
:COUNT, and :SCALAR :float64 when it holds doubles). Double-floats build a
float64 index (knn_index_build_f64), single-floats a float32 one; :SCALAR
forces one. OPTIONS is an OPTIONS structure; the keyword fields override it.
Returns an INDEX; signals KNN-ERROR subclasses (KNN-NONFINITE-INPUT naming the
point, KNN-INVALID-ARGUMENT, KNN-NO-DEVICE for :backend :cuda without a GPU)."
  (c-int dim "dim")
  (multiple-value-bind (data n scalar) (input-rows points dim count "points" scalar)
    (let ((opts (merge-options options (list :backend backend :device device
                                             :structure structure :leaf-size leaf-size
                                             :threads threads
                                             :device-memory-limit device-memory-limit))))
      (cffi:with-foreign-object (out :pointer)
        (setf (cffi:mem-ref out :pointer) (cffi:null-pointer))
        (with-foreign-options (opt opts)
          (with-pointers ((p data))
            (scalar-call (scalar name "knn_index_build" %index-build %index-build-f64)
              p n dim opt out)))
        (adopt-index (cffi:mem-ref out :pointer) n dim scalar)))))

(defun free-index (index)
  "Free INDEX (knn_index_free); freeing twice does nothing. Calls running on
INDEX in other threads finish with their full results, and the last of them
frees it; calls made afterwards signal KNN-USAGE-ERROR."
  (check-type index index)
  (free-handle index "knn_index_free"))

(defmacro with-index ((var points dim &rest keys) &body body)
  "Bind VAR to (BUILD-INDEX POINTS DIM . KEYS) for BODY; always freed."
  `(let ((,var (build-index ,points ,dim ,@keys)))
     (unwind-protect (progn ,@body)
       (free-index ,var))))

(defun index-info (index)
  "knn_index_info: (values n dim backend structure) that actually serve INDEX."
  (cffi:with-foreign-objects ((n :int64) (dim :int) (backend :int) (structure :int))
    (with-live-index (handle index)
      (check-status "knn_index_info" (%index-info handle n dim backend structure)))
    (values (cffi:mem-ref n :int64) (cffi:mem-ref dim :int)
            (let ((b (cffi:mem-ref backend :int))) (if (< -1 b 3) (aref #(:auto :cuda :openmp) b) b))
            (let ((s (cffi:mem-ref structure :int)))
              (if (< -1 s 4) (aref #(:auto :kdtree :grid :brute-force) s) s)))))

(defun index-query (index queries k &key (distances t) options count out-indices
                                      out-distances)
  "The K nearest indexed points of each query (knn_index_query, or
knn_index_query_f64 on a float64 index). Returns (values indices
sq-distances): m*k (signed-byte 32) and single-float (double-float on a
float64 index) vectors (sq-distances NIL unless DISTANCES), nearest first,
ties by index, -1 / +infinity in missing slots."
  (with-live-index (handle index)
    (let ((scalar (index-scalar index)))
      (multiple-value-bind (q m) (input-rows queries (index-dim index) count "queries" scalar)
        (c-int k "k")
        (let* ((size (* m (max k 0)))
               (ind (output-vector out-indices size '(signed-byte 32) "out-indices"))
               (dist (and (or distances out-distances)
                          (output-vector out-distances size (scalar-element-type scalar)
                                         "out-distances"))))
          (with-foreign-options (opt options)
            (with-pointers ((qp q) (ip ind) (dp dist))
              (scalar-call (scalar name "knn_index_query" %index-query %index-query-f64)
                handle qp m k ip dp opt)))
          (values ind dist))))))

(defun index-query-self (index k &key exclude-self (distances t))
  "All-kNN of the indexed points in input order (knn_index_query_self).
EXCLUDE-SELF drops only each point's own index. Returns (values indices sq-distances)."
  (with-live-index (handle index)
    (let* ((scalar (index-scalar index))
           (size (* (index-n index) (max (c-int k "k") 0)))
           (ind (make-array size :element-type '(signed-byte 32)))
           (dist (and distances (make-array size :element-type (scalar-element-type scalar)))))
      (with-pointers ((ip ind) (dp dist))
        (scalar-call (scalar name "knn_index_query_self" %index-query-self %index-query-self-f64)
          handle k (if exclude-self 1 0) ip dp))
      (values ind dist))))

(defun index-radius (index queries radius max-neighbors &key (distances t) options count)
  "Points within RADIUS of each query (knn_index_radius), rows of
MAX-NEIGHBORS ordered by (distance, index), -1 / +infinity in unused slots.
Returns (values indices sq-distances counts); counts are the true numbers
within the radius. MAX-NEIGHBORS 0 is a counting call (indices and distances NIL)."
  (with-live-index (handle index)
    (let ((scalar (index-scalar index)))
      (multiple-value-bind (q m) (input-rows queries (index-dim index) count "queries" scalar)
        (c-int max-neighbors "max_neighbors")
        (let* ((size (* m (max max-neighbors 0)))
               (rows (/= max-neighbors 0))
               (ind (and rows (make-array size :element-type '(signed-byte 32))))
               (dist (and rows distances
                          (make-array size :element-type (scalar-element-type scalar))))
               (counts (make-array m :element-type '(signed-byte 32)))
               (r (coerce radius (scalar-element-type scalar))))
          (with-foreign-options (opt options)
            (with-pointers ((qp q) (ip ind) (dp dist) (cp counts))
              (scalar-call (scalar name "knn_index_radius" %index-radius %index-radius-f64)
                handle qp m r max-neighbors ip dp cp opt)))
          (values ind dist counts))))))

(defun index-radius-counts (index queries radius &key options count)
  "knn_index_radius_count: a (signed-byte 64) vector of the number of points
within RADIUS of each query."
  (with-live-index (handle index)
    (let ((scalar (index-scalar index)))
      (multiple-value-bind (q m) (input-rows queries (index-dim index) count "queries" scalar)
        (let ((counts (make-array m :element-type '(signed-byte 64)))
              (r (coerce radius (scalar-element-type scalar))))
          (with-foreign-options (opt options)
            (with-pointers ((qp q) (cp counts))
              (scalar-call (scalar name "knn_index_radius_count" %index-radius-count
                                   %index-radius-count-f64)
                handle qp m r cp opt)))
          counts)))))

(defun index-radius-csr (index queries radius &key (distances t) options count)
  "Every point within RADIUS of each query in CSR rows: count, offsets
(knn_offsets_from_counts), fill (knn_index_radius_fill). Returns (values
indices sq-distances offsets): query i's neighbours, nearest first (ties by
index), at [offsets[i], offsets[i+1]) of indices ((signed-byte 32)) and
sq-distances (single-float, double-float on a float64 index; NIL unless
DISTANCES); offsets has m + 1 (signed-byte 64) entries."
  (with-live-index (handle index)
    (let ((scalar (index-scalar index)))
      (multiple-value-bind (q m) (input-rows queries (index-dim index) count "queries" scalar)
        (let* ((counts (index-radius-counts index q radius :options options :count m))
               (offsets (make-array (1+ m) :element-type '(signed-byte 64))))
          (with-pointers ((cp counts) (op offsets))
            (check-status "knn_offsets_from_counts" (%offsets-from-counts cp m op)))
          (let* ((total (aref offsets m))
                 (ind (make-array total :element-type '(signed-byte 32)))
                 (dist (and distances
                            (make-array total :element-type (scalar-element-type scalar))))
                 (r (coerce radius (scalar-element-type scalar))))
            (with-foreign-options (opt options)
              (with-pointers ((qp q) (op offsets) (ip ind) (dp dist))
                (scalar-call (scalar name "knn_index_radius_fill" %index-radius-fill
                                     %index-radius-fill-f64)
                  handle qp m r op ip dp opt)))
            (values ind dist offsets)))))))

(defun serialize-index (index)
  "knn_index_serialize: INDEX as a (unsigned-byte 8) vector (a versioned,
checksummed format that DESERIALIZE-INDEX loads on either backend)."
  (with-live-index (handle index)
    (cffi:with-foreign-object (size :size)
      (check-status "knn_index_serialized_size" (%index-serialized-size handle size))
      (let ((bytes (make-array (cffi:mem-ref size :size) :element-type '(unsigned-byte 8))))
        (with-pointers ((bp bytes))
          (check-status "knn_index_serialize" (%index-serialize handle bp (length bytes))))
        bytes))))

(defun deserialize-index (bytes &key options backend device threads device-memory-limit)
  "knn_index_deserialize: an INDEX from SERIALIZE-INDEX's bytes. The keywords
choose where it loads; the structure and leaf size come from BYTES. A
corrupted or truncated vector signals KNN-INVALID-ARGUMENT saying what is wrong."
  (unless (typep bytes '(simple-array (unsigned-byte 8) (*)))
    (usage-error "bytes must be a (simple-array (unsigned-byte 8) (*))"))
  (let ((opts (merge-options options (list :backend backend :device device :threads threads
                                           :device-memory-limit device-memory-limit))))
    (cffi:with-foreign-object (out :pointer)
      (setf (cffi:mem-ref out :pointer) (cffi:null-pointer))
      (with-foreign-options (opt opts)
        (with-pointers ((bp (and (plusp (length bytes)) bytes)))
          (check-status "knn_index_deserialize"
                        (%index-deserialize bp (length bytes) opt out))))
      ;; The new index is freed here unless ADOPT-INDEX took it: a failed
      ;; info call must not leave it behind.
      (let ((pointer (cffi:mem-ref out :pointer))
            (adopted nil))
        (unwind-protect
             (cffi:with-foreign-objects ((n :int64) (dim :int) (scalar :int))
               (check-status "knn_index_info"
                             (%index-info pointer n dim (cffi:null-pointer) (cffi:null-pointer)))
               (check-status "knn_index_scalar" (%index-scalar pointer scalar))
               (prog1 (adopt-index pointer (cffi:mem-ref n :int64) (cffi:mem-ref dim :int)
                                   (if (= (cffi:mem-ref scalar :int) 1) :float64 :float32))
                 (setf adopted t)))
          (unless adopted (%index-free pointer)))))))

(defun estimate-build-bytes (n dim &optional options (scalar :float32))
  "knn_estimate_build_bytes (SCALAR :float64: knn_estimate_build_bytes_f64):
device bytes an index build would need."
  (with-foreign-options (opt options)
    (ecase scalar
      (:float32 (%estimate-build-bytes n (c-int dim "dim") opt))
      (:float64 (%estimate-build-bytes-f64 n (c-int dim "dim") opt)))))

(defun estimate-query-bytes (m k n dim &optional options (scalar :float32))
  "knn_estimate_query_bytes (SCALAR :float64: knn_estimate_query_bytes_f64):
device bytes a query would need."
  (with-foreign-options (opt options)
    (ecase scalar
      (:float32 (%estimate-query-bytes m (c-int k "k") n (c-int dim "dim") opt))
      (:float64 (%estimate-query-bytes-f64 m (c-int k "k") n (c-int dim "dim") opt)))))
