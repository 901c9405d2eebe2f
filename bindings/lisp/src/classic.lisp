;;;; classic.lisp - the classic 3-D API: kd-tree build, all-kNN, memory helpers,
;;;; device selection, brute force.

(in-package #:knn-gpgpu)

(defconstant +node-bytes+ 24)

(defstruct (kd-tree (:constructor %make-kd-tree (octets size)))
  "A kd-tree as the library lays it out: SIZE nodes of 24 bytes in OCTETS
(struct Node: float p[3]; int left, right, id). Save the octets to keep it."
  (octets nil :type octet-vector :read-only t)
  (size 0 :type (integer 0) :read-only t))

(defun kd-tree-from-octets (octets)
  "A kd-tree over saved bytes (a multiple of 24). Queries check the layout."
  (let ((octets (integer-vector octets '(unsigned-byte 8) "octets")))
    (unless (zerop (mod (length octets) +node-bytes+))
      (usage-error "~D bytes is not a whole number of 24-byte nodes" (length octets)))
    (%make-kd-tree octets (floor (length octets) +node-bytes+))))

(defun kd-tree-node (tree i)
  "Node I of TREE: (values x y z left right id)."
  (unless (< -1 i (kd-tree-size tree))
    (usage-error "node ~S is outside the tree of ~D nodes" i (kd-tree-size tree)))
  (cffi:with-pointer-to-vector-data (base (kd-tree-octets tree))
    (let ((node (cffi:inc-pointer base (* i +node-bytes+))))
      (cffi:with-foreign-slots ((left right id) node (:struct node))
        (let ((p (cffi:foreign-slot-pointer node '(:struct node) 'p)))
          (values (cffi:mem-aref p :float 0) (cffi:mem-aref p :float 1)
                  (cffi:mem-aref p :float 2) left right id))))))

(defun build-kd-tree (points &key (backend :auto))
  "Build the kd-tree of POINTS: a flat vector of 3n floats (x y z x y z ...) or
an (n 3) array. BACKEND :auto (buildKdTree: GPU when usable, else CPU), :cuda
(cuBuildKdTree; KNN-NO-DEVICE without a GPU) or :openmp (mpBuildKdTree). Every
backend gives the byte-identical tree. Signals KNN-NONFINITE-INPUT (message
names the point) and KNN-USAGE-ERROR for a length that is not 3n."
  (multiple-value-bind (v n) (rows-of points 3 "points" :round-to-float32)
    (c-int n "n")
    (let ((octets (make-array (* n +node-bytes+) :element-type '(unsigned-byte 8))))
      (with-pointers ((pts v) (tree octets))
        (ecase backend
          (:auto (check-status "buildKdTree" (%build-kd-tree pts n tree)))
          (:cuda (check-status "cuBuildKdTree" (%cu-build-kd-tree pts n tree)))
          (:openmp (check-status "mpBuildKdTree" (%mp-build-kd-tree pts n tree)))))
      (%make-kd-tree octets n))))

(defun query-all (queries tree k &key (backend :auto) result)
  "The K nearest TREE points of each query. QUERIES: 3m floats or an (m 3)
array. Returns a (simple-array (signed-byte 32) (m*k)): row i holds query i's
neighbours' original indices, nearest first, ties by index, -1 where the tree
has fewer than K points. RESULT may supply that vector. BACKEND :auto
(queryAll), :cuda (cuQueryAll) or :openmp (mpQueryAll)."
  (check-type tree kd-tree)
  (multiple-value-bind (q m) (rows-of queries 3 "queries" :round-to-float32)
    (c-int m "n_qp")
    (c-int k "k")
    (let ((out (output-vector result (* m (max k 0)) '(signed-byte 32) "result"))
          (n-tree (c-int (kd-tree-size tree) "n_tree")))
      (with-pointers ((qp q) (tp (kd-tree-octets tree)) (rp out))
        (ecase backend
          (:auto (check-status "queryAll" (%query-all qp tp m n-tree k rp)))
          (:cuda (check-status "cuQueryAll" (%cu-query-all qp tp m n-tree k rp)))
          (:openmp (check-status "mpQueryAll" (%mp-query-all qp tp m n-tree k rp)))))
      out)))

(defun tree-size (n-tree)
  "getTreeSize: bytes of the Node array of N-TREE nodes (0 when negative)."
  (with-c-float-environment (%get-tree-size (c-int n-tree "n_tree"))))

(defun needed-bytes-for-building-kd-tree (n-tree)
  "getNeededBytesForBuildingKdTree: device bytes cuBuildKdTree needs."
  (with-c-float-environment
    (%get-needed-bytes-for-building-kd-tree (c-int n-tree "n_tree"))))

(defun needed-bytes-for-query-all (n-qp k n-tree)
  "getNeededBytesForQueryAll: device bytes cuQueryAll needs for the whole call."
  (with-c-float-environment
    (%get-needed-bytes-for-query-all (c-int n-qp "n_qp") (c-int k "k") (c-int n-tree "n_tree"))))

(defun needed-bytes-in-search (n-qp k n-tree &optional (thread-num 0) (block-num 0))
  "getNeededBytesInSearch: device bytes of the search kernels' own storage."
  (with-c-float-environment
    (%get-needed-bytes-in-search (c-int n-qp "n_qp") (c-int k "k") (c-int n-tree "n_tree")
                                 (c-int thread-num "thread_num") (c-int block-num "block_num"))))

(defun free-bytes-on-gpu ()
  "getFreeBytesOnGpu: free bytes on the current device, counting the device
 memory the library keeps idle for its next call; 0 without one."
  (with-c-float-environment (%get-free-bytes-on-gpu)))

(defun set-device (device)
  "cuSetDevice. Signals KNN-NO-DEVICE without devices, KNN-INVALID-ARGUMENT out of range."
  (check-status "cuSetDevice" (%cu-set-device (c-int device "device"))))

(defun get-device ()
  "cuGetDevice: the calling thread's device, -1 when there is none."
  (with-c-float-environment (%cu-get-device)))

(defun get-device-count ()
  "cuGetDeviceCount: usable devices, 0 when none (not an error)."
  (with-c-float-environment (%cu-get-device-count)))

(defun brute-force (ref queries dim k &key (distances t) (indices t))
  "Exact kNN by brute force in any dimension on the CPU (knn_brute_force).
REF and QUERIES hold rows of DIM floats (flat vectors or 2-D arrays).
Returns (values sq-distances indices), vectors of m*k single-floats and
(signed-byte 32); NIL for an output not asked for."
  (c-int dim "dim")
  (multiple-value-bind (r n-ref) (if (plusp dim) (rows-of ref dim "ref" :round-to-float32) (values ref 0))
    (multiple-value-bind (q n-query) (if (plusp dim) (rows-of queries dim "queries" :round-to-float32)
                                         (values queries 0))
      (c-int n-ref "n_ref")
      (c-int n-query "n_query")
      (c-int k "k")
      (let* ((size (* n-query (max k 0)))
             (d (and distances (make-array size :element-type 'single-float)))
             (i (and indices (make-array size :element-type '(signed-byte 32)))))
        (with-pointers ((rp (and (plusp dim) r)) (qp (and (plusp dim) q)) (dp d) (ip i))
          (check-status "knn_brute_force" (%brute-force rp n-ref qp n-query dim k dp ip)))
        (values d i)))))
