;;;; tests.lisp - the knn-gpgpu binding against the real library and a brute-force oracle.

(in-package #:knn-gpgpu-tests)

(defun env (name) (let ((v (uiop:getenv name))) (and v (plusp (length v)) v)))

(defun repo-file (relative)
  (merge-pathnames relative (asdf:system-relative-pathname "knn-gpgpu" "../../")))

(defun header-file (name)
  (if (env "KNN_GPGPU_INCLUDE")
      (merge-pathnames name (uiop:ensure-directory-pathname (env "KNN_GPGPU_INCLUDE")))
      (repo-file (concatenate 'string "include/" name))))

(defun header-text ()
  "knn_gpgpu.h and the parts it includes, one string."
  (let ((dir (if (env "KNN_GPGPU_INCLUDE")
                 (uiop:ensure-directory-pathname (env "KNN_GPGPU_INCLUDE"))
                 (repo-file "include/"))))
    (apply #'concatenate 'string
           (mapcar (lambda (name) (uiop:read-file-string (merge-pathnames name dir)))
                   '("knn_gpgpu.h" "knn_gpgpu_classic.h" "knn_gpgpu_index.h"
                     "knn_gpgpu_quadtree.h" "knn_gpgpu_mesh.h"
                     "knn_gpgpu_stats.h")))))

(defun c-layout ()
  "Table from bindings/abi_layout.c output ($KNN_ABI_LAYOUT), or the documented values."
  (let ((table (make-hash-table :test 'equal)))
    (if (env "KNN_ABI_LAYOUT")
        (dolist (line (uiop:read-file-lines (env "KNN_ABI_LAYOUT")))
          (let ((space (position #\Space line :from-end t)))
            (when space
              (setf (gethash (subseq line 0 space) table)
                    (parse-integer line :start (1+ space))))))
        (loop for (k v) on '("sizeof.Point" 12 "sizeof.Node" 24 "offsetof.Node.p" 0
                             "offsetof.Node.left" 12 "offsetof.Node.right" 16
                             "offsetof.Node.id" 20 "sizeof.knn_options" 40
                             "offsetof.knn_options.struct_size" 0
                             "offsetof.knn_options.backend" 8 "offsetof.knn_options.device" 12
                             "offsetof.knn_options.structure" 16
                             "offsetof.knn_options.leaf_size" 20
                             "offsetof.knn_options.threads" 24
                             "offsetof.knn_options.device_memory_limit" 32)
                by #'cddr do (setf (gethash k table) v)))
    table))

(defun vector= (a b) (and (= (length a) (length b)) (every #'eql a b)))

(defun has-device () (plusp (knn:get-device-count)))

;;; ---- layout and binding completeness -----------------------------------------
(deftest layout-matches-c
  (let ((c (c-layout)))
    (format t "~&  layout from ~:[the documented table~;~:*~A~]~%" (env "KNN_ABI_LAYOUT"))
    (check (= (cffi:foreign-type-size '(:struct knn:point)) (gethash "sizeof.Point" c) 12))
    (check (= (cffi:foreign-type-size '(:struct knn:node)) (gethash "sizeof.Node" c) 24))
    (dolist (slot '((knn::p "p") (knn::left "left") (knn::right "right") (knn::id "id")))
      (check (= (cffi:foreign-slot-offset '(:struct knn:node) (first slot))
                (gethash (format nil "offsetof.Node.~A" (second slot)) c))
             (format nil "offset of Node.~A" (second slot))))
    (check (= (cffi:foreign-type-size '(:struct knn:knn-options)) (gethash "sizeof.knn_options" c)))
    (when (gethash "sizeof.knn_progress" c)
      (check (= (cffi:foreign-type-size '(:struct knn::knn-progress)) (gethash "sizeof.knn_progress" c) 24)
             "sizeof knn_progress")
      (dolist (slot '((knn::done "done") (knn::total "total") (knn::stage "stage")
                      (knn::sequence "sequence")))
        (check (= (cffi:foreign-slot-offset '(:struct knn::knn-progress) (first slot))
                  (gethash (format nil "offsetof.knn_progress.~A" (second slot)) c))
               (format nil "offset of knn_progress.~A" (second slot)))))
    (when (gethash "sizeof.knn_deviation_report" c)
      (check (= (cffi:foreign-type-size '(:struct knn::deviation-report))
                (gethash "sizeof.knn_deviation_report" c))
             "sizeof knn_deviation_report")
      (dolist (slot '((knn::struct-size "struct_size") (knn::n-points "n_points")
                      (knn::n-measured "n_measured") (knn::n-beyond "n_beyond")
                      (knn::n-within-tolerance "n_within_tolerance")
                      (knn::n-above-tolerance "n_above_tolerance")
                      (knn::n-below-tolerance "n_below_tolerance")
                      (knn::n-below-bins "n_below_bins") (knn::n-above-bins "n_above_bins")
                      (min "min") (max "max") (knn::mean "mean") (knn::rms "rms")))
        (check (= (cffi:foreign-slot-offset '(:struct knn::deviation-report) (first slot))
                  (gethash (format nil "offsetof.knn_deviation_report.~A" (second slot)) c))
               (format nil "offset of knn_deviation_report.~A" (second slot)))))
    (loop for (type name slots)
            in '((knn::align-params "knn_align_params"
                  ((knn::struct-size "struct_size") (knn::max-correspondence "max_correspondence")
                   (knn::max-iterations "max_iterations") (knn::coarse-start "coarse_start")
                   (knn::kept-fraction "kept_fraction")
                   (knn::tolerance-rotation "tolerance_rotation")
                   (knn::tolerance-translation "tolerance_translation")))
                 (knn::align-result "knn_align_result"
                  ((knn::struct-size "struct_size") (knn::transform "transform")
                   (knn::rms "rms") (knn::n-kept "n_kept") (knn::iterations "iterations")
                   (knn::converged "converged")
                   (knn::degenerate-directions "degenerate_directions")
                   (knn::n-degenerate "n_degenerate"))))
          when (gethash (format nil "sizeof.~A" name) c)
            do (check (= (cffi:foreign-type-size `(:struct ,type))
                         (gethash (format nil "sizeof.~A" name) c))
                      (format nil "sizeof ~A" name))
               (dolist (slot slots)
                 (check (= (cffi:foreign-slot-offset `(:struct ,type) (first slot))
                           (gethash (format nil "offsetof.~A.~A" name (second slot)) c))
                        (format nil "offset of ~A.~A" name (second slot)))))
    (dolist (slot '((knn::struct-size "struct_size") (knn::backend "backend")
                    (knn::device "device") (knn::structure "structure")
                    (knn::leaf-size "leaf_size") (knn::threads "threads")
                    (knn::device-memory-limit "device_memory_limit")))
      (check (= (cffi:foreign-slot-offset '(:struct knn:knn-options) (first slot))
                (gethash (format nil "offsetof.knn_options.~A" (second slot)) c))
             (format nil "offset of knn_options.~A" (second slot))))
    (when (env "KNN_ABI_LAYOUT")
      (loop for code from 0 for kw across knn::*status-keywords*
            for name = (if (zerop code) "KNN_OK"
                           (format nil "KNN_ERR_~A" (substitute #\_ #\- (symbol-name kw))))
            do (check (eql (gethash (format nil "const.~A" name) c) code) name))
      (check (eql (gethash "const.KNN_VERSION_NUMBER" c) (knn:knn-version))))))

(deftest every-header-function-is-bound
  (let* ((text (header-text))
         (names '()))
    (loop with start = 0
          for pos = (search "KNN_CALL " text :start2 start)
          while pos
          do (let* ((name-start (+ pos 9))
                    (paren (position #\( text :start name-start))
                    (name (string-trim " " (subseq text name-start paren))))
               (when (every (lambda (ch) (or (alphanumericp ch) (char= ch #\_))) name)
                 (push name names))
               (setf start paren)))
    (setf names (remove-duplicates names :test #'string=))
    (check (>= (length names) 30) "found the declarations")
    (check (null (set-exclusive-or names knn::*c-functions* :test #'string=))
           (format nil "header vs binding: ~S" (set-exclusive-or names knn::*c-functions*
                                                                 :test #'string=)))
    (dolist (name knn::*c-functions*)
      (check (cffi:foreign-symbol-pointer name) (format nil "symbol ~A" name)))))

(deftest version-and-status-strings
  (check (= (first (knn:version-list)) 1))
  (check (search "NONFINITE" (knn:status-string 2)))
  (check (string= (knn:status-string 4242) "unknown status"))
  (check (eq (knn:status-keyword 5) :no-device))
  (check (eq (knn:status-keyword 99) :unknown))
  (check (= (knn:status-code :invalid-tree) 7)))

;;; ---- classic API --------------------------------------------------------------
(defun check-tree-layout (points tree)
  (let* ((n (knn:kd-tree-size tree))
         (seen (make-array n :initial-element nil)))
    (dotimes (i n)
      (multiple-value-bind (x y z left right id) (knn:kd-tree-node tree i)
        (setf (aref seen id) t)
        (check (and (= x (aref points (* 3 id))) (= y (aref points (+ 1 (* 3 id))))
                    (= z (aref points (+ 2 (* 3 id)))))
               "node point equals points[id]")
        (check (= left (if (< (+ 1 (* 2 i)) n) (+ 1 (* 2 i)) -1)) "heap left link")
        (check (= right (if (< (+ 2 (* 2 i)) n) (+ 2 (* 2 i)) -1)) "heap right link")))
    (check (every #'identity seen) "ids are a permutation")))

(deftest build-and-query-match-the-oracle
  (dolist (kind '(:uniform :duplicates :lattice))
    (loop for (n m k) in '((1 4 1) (9 9 3) (200 50 8) (700 120 17) (20 10 25))
          for seed from 1
          do (let* ((pts (make-cloud (+ seed (* 31 n)) n 3 :kind kind))
                    (queries (concatenate '(simple-array single-float (*))
                                          (make-cloud (+ 7 seed) m 3 :kind kind)
                                          (subseq pts 0 (* 3 (min n 5)))))
                    (tree (knn:build-kd-tree pts)))
               (check-tree-layout pts tree)
               (check (equalp (knn:kd-tree-octets (knn:build-kd-tree pts :backend :openmp))
                              (knn:kd-tree-octets tree))
                      "openmp tree is byte-identical")
               (when (has-device)
                 (check (equalp (knn:kd-tree-octets (knn:build-kd-tree pts :backend :cuda))
                                (knn:kd-tree-octets tree))))
               (let ((want (nth-value 1 (oracle pts queries 3 k))))
                 (check (vector= (knn:query-all queries tree k) want)
                        (format nil "queryAll ~A n=~D k=~D" kind n k))
                 (check (vector= (knn:query-all queries tree k :backend :openmp) want)
                        (format nil "mpQueryAll ~A n=~D k=~D" kind n k))
                 (when (has-device)
                   (check (vector= (knn:query-all queries tree k :backend :cuda) want))))))))

(deftest other-input-forms
  (let* ((pts (make-cloud 5 30 3))
         (tree (knn:build-kd-tree pts))
         (as-2d (make-array '(30 3) :element-type 'single-float))
         (as-list (coerce pts 'list))
         (as-doubles (map 'vector (lambda (x) (coerce x 'double-float)) pts)))
    (dotimes (i 90) (setf (row-major-aref as-2d i) (aref pts i)))
    (dolist (form (list as-2d as-list as-doubles))
      (check (equalp (knn:kd-tree-octets (knn:build-kd-tree form)) (knn:kd-tree-octets tree))))
    (let ((saved (knn:kd-tree-from-octets (copy-seq (knn:kd-tree-octets tree)))))
      (check (vector= (knn:query-all pts saved 4) (knn:query-all pts tree 4))))
    (let ((out (make-array (* 30 2) :element-type '(signed-byte 32))))
      (check (eq (knn:query-all pts tree 2 :result out) out) "result written in place"))))

(deftest empty-and-short-inputs
  (let ((empty (make-array 0 :element-type 'single-float)))
    (check (= (knn:kd-tree-size (knn:build-kd-tree empty)) 0))
    (check (= (length (knn:query-all empty (knn:build-kd-tree empty) 3)) 0)))
  (let* ((pts (make-cloud 2 3 3))
         (got (knn:query-all pts (knn:build-kd-tree pts) 5)))
    (check (every (lambda (i) (= (aref got i) -1)) '(3 4 8 9 13 14)) "-1 padding")
    (check (vector= got (nth-value 1 (oracle pts pts 3 5))))))

(deftest brute-force-bit-identical
  (dolist (dim '(1 2 3 5 16))
    (let* ((ref (make-cloud dim 150 dim :kind :duplicates))
           (queries (make-cloud (+ 3 dim) 40 dim)))
      (multiple-value-bind (want-d want-i) (oracle ref queries dim 9)
        (multiple-value-bind (d i) (knn:brute-force ref queries dim 9)
          (check (vector= i want-i) (format nil "indices dim ~D" dim))
          (check (every (lambda (a b) (= (sb-kernel:single-float-bits a)
                                         (sb-kernel:single-float-bits b)))
                        d want-d)
                 (format nil "bit-identical distances dim ~D" dim))))
      (multiple-value-bind (d i) (knn:brute-force ref queries dim 2 :distances nil)
        (check (and (null d) (= (length i) 80))))))
  (multiple-value-bind (d i) (knn:brute-force (make-cloud 1 2 4) (make-cloud 2 1 4) 4 3)
    (check (and (= (aref i 2) -1) (= (aref d 2) sb-ext:single-float-positive-infinity)))))

(deftest memory-helpers
  (check (= (knn:tree-size 1000) 24000))
  (check (= (knn:tree-size -3) 0))
  (check (= (knn:tree-size (1- (expt 2 31))) (* 24 (1- (expt 2 31)))))
  (check (< 0 (knn:needed-bytes-for-building-kd-tree 1000)
            (knn:needed-bytes-for-building-kd-tree 100000)))
  (check (< 0 (knn:needed-bytes-for-query-all 1000 8 1000)
            (knn:needed-bytes-for-query-all 100000 8 1000)))
  (check (>= (knn:needed-bytes-in-search 1000 8 1000) 0))
  (check (>= (knn:needed-bytes-in-search 1000 8 1000 128 32) 0))
  (check-signals knn:knn-usage-error (knn:tree-size (expt 2 31))))

;;; ---- errors -------------------------------------------------------------------
(deftest nonfinite-input-names-the-point
  (let ((pts (make-cloud 3 20 3)))
    (setf (aref pts (+ 1 (* 3 4))) (nan-single))
    (let ((e (check-signals knn:knn-nonfinite-input (knn:build-kd-tree pts))))
      (when e
        (check (eq (knn:knn-error-status e) :nonfinite-input))
        (check (= (knn:knn-error-code e) 2))
        (check (search "point 4" (knn:knn-error-message e)) (knn:knn-error-message e))
        (check (string= (knn:knn-error-function e) "buildKdTree"))
        (check (search "KNN_ERR_NONFINITE_INPUT" (princ-to-string e)))
        (check (typep e 'knn:knn-error))))))

(deftest bad-k-is-invalid-argument
  (let* ((pts (make-cloud 4 10 3))
         (tree (knn:build-kd-tree pts)))
    (dolist (k '(0 -2))
      (let ((e (check-signals knn:knn-invalid-argument (knn:query-all pts tree k))))
        (when e
          (check (eq (knn:knn-error-status e) :invalid-argument))
          (check (search (format nil "k is ~D" k) (knn:knn-error-message e)))))
      (check-signals knn:knn-invalid-argument (knn:brute-force pts pts 3 k)))))

(deftest corrupt-tree-is-invalid-tree
  (let* ((pts (make-cloud 6 15 3))
         (octets (copy-seq (knn:kd-tree-octets (knn:build-kd-tree pts)))))
    (setf (aref octets 12) 9)                        ; node 0's left link := 9
    (let ((e (check-signals knn:knn-invalid-tree
                            (knn:query-all pts (knn:kd-tree-from-octets octets) 2))))
      (when e (check (eq (knn:knn-error-status e) :invalid-tree))))))

(deftest shape-mistakes-are-usage-errors
  (let ((e (check-signals knn:knn-usage-error
                          (knn:build-kd-tree (make-array 10 :element-type 'single-float)))))
    (check (not (typep e 'knn:knn-error)) "not a library error"))
  (check-signals knn:knn-usage-error (knn:build-kd-tree (make-array '(4 2) :initial-element 0.0)))
  (check-signals knn:knn-usage-error (knn:build-kd-tree '(1 2 "three")))
  (check-signals knn:knn-usage-error (knn:kd-tree-from-octets (make-array 25 :element-type
                                                                            '(unsigned-byte 8))))
  (let ((tree (knn:build-kd-tree (make-cloud 1 4 3))))
    (check-signals knn:knn-usage-error (knn:kd-tree-node tree 4))
    (check-signals knn:knn-usage-error
                   (knn:query-all (make-cloud 1 4 3) tree 2
                                  :result (make-array 3 :element-type '(signed-byte 32)))))
  (check-signals knn:knn-usage-error (knn:brute-force (make-cloud 1 4 3) (make-cloud 1 4 2) 3 1)))

(deftest last-error-is-per-thread
  (let* ((pts (make-cloud 8 64 3))
         (results (make-array 6 :initial-element nil))
         (threads
           (loop for slot below 6
                 collect (let ((slot slot))
                           (sb-thread:make-thread
                            (lambda ()
                              (let ((bad (copy-seq pts))
                                    (messages '()))
                                (setf (aref bad (* 3 (+ 10 slot))) (nan-single))
                                (dotimes (round 10)
                                  (handler-case (knn:build-kd-tree bad)
                                    (knn:knn-error (e)
                                      (pushnew (knn:knn-error-message e) messages
                                               :test #'string=)))
                                  (knn:build-kd-tree pts))
                                (setf (aref results slot) messages))))))))
    (mapc #'sb-thread:join-thread threads)
    (dotimes (slot 6)
      (let ((messages (aref results slot)))
        (check (and (= (length messages) 1)
                    (search (format nil "point ~D " (+ 10 slot)) (first messages)))
               (format nil "thread ~D saw ~S" slot messages))))))

;;; ---- devices --------------------------------------------------------------------
(deftest device-functions-without-a-gpu
  (if (has-device)
      (progn (check (>= (knn:get-device) 0)) (check (plusp (knn:free-bytes-on-gpu))))
      (let ((pts (make-cloud 9 20 3)))
        (check (= (knn:get-device-count) 0))
        (check (= (knn:get-device) -1))
        (check (= (knn:free-bytes-on-gpu) 0))
        (let ((e (check-signals knn:knn-no-device (knn:set-device 0))))
          (when e (check (eq (knn:knn-error-status e) :no-device))))
        (check-signals knn:knn-no-device (knn:build-kd-tree pts :backend :cuda))
        (check-signals knn:knn-no-device
                       (knn:query-all pts (knn:build-kd-tree pts) 2 :backend :cuda))
        (check (vector= (knn:query-all pts (knn:build-kd-tree pts) 2)
                        (nth-value 1 (oracle pts pts 3 2)))
               "automatic path falls back to the CPU"))))

;;; ---- options, index, quadtree -----------------------------------------------------
(deftest options-defaults
  (let ((d (knn:default-options-plist)))
    (check (= (getf d :struct-size) (cffi:foreign-type-size '(:struct knn:knn-options))))
    (check (= (getf d :device) -1))
    (check (= (getf d :backend) 0))
    (check (= (getf d :threads) 0)))
  (cffi:with-foreign-pointer (p knn::+options-scratch-bytes+)
    (knn::fill-foreign-options p (knn:make-options :backend :openmp :structure :brute-force
                                                   :threads 3 :device-memory-limit 4096))
    (cffi:with-foreign-slots ((knn::backend knn::structure knn::threads
                                            knn::device-memory-limit knn::device)
                              p (:struct knn:knn-options))
      (check (equal (list knn::backend knn::structure knn::threads knn::device-memory-limit
                          knn::device)
                    '(2 3 3 4096 -1)))))
  (check-signals knn:knn-usage-error (knn::backend-code :opencl))
  ;; knn_options_init_v2 writes the whole version-2 struct: its size, the
  ;; version-1 defaults and an empty device list (16 entries of -1).
  (cffi:with-foreign-pointer (p knn::+options-scratch-bytes+)
    (dotimes (i knn::+options-scratch-bytes+) (setf (cffi:mem-aref p :uint8 i) #x5A))
    (knn::%options-init-v2 p)
    (when (= (cffi:foreign-type-size :pointer) 8)
      (check (= (cffi:mem-ref p :uint64 0) 112))
      (check (= (cffi:mem-ref p :int 12) -1))
      (check (= (cffi:mem-ref p :int 40) 0))
      (check (loop for i below 16 always (= (cffi:mem-ref p :int (+ 44 (* 4 i))) -1))))))

;;; ---- the index API against the oracle ----------------------------------------------
(defun index-backends () (append '(:auto :openmp) (and (has-device) '(:cuda))))
(defun index-structures (dim)
  (append '(:auto :kdtree :brute-force) (and (= dim 3) '(:grid))))

(defun check-index-info (index n dim backend structure)
  (multiple-value-bind (in idim ibackend istructure) (knn:index-info index)
    (check (and (= in n) (= idim dim)) (format nil "info n/dim ~D ~D" in idim))
    (when (or (eq backend :openmp) (and (eq backend :auto) (not (has-device))))
      (check (eq ibackend :openmp) (format nil "info backend ~S" ibackend)))
    (check (member istructure '(:kdtree :grid :brute-force)) (format nil "info structure ~S" istructure))
    (case structure
      (:auto)
      (:grid (check (member istructure '(:grid :kdtree)) ; a poor grid is served by the kd-tree
                    (format nil "requested :grid, served by ~S" istructure)))
      (t (check (eq istructure structure) (format nil "requested ~S, served by ~S" structure istructure))))))

(deftest index-query-matches-oracle
  (dolist (dim '(2 3 5))
    (dolist (kind '(:duplicates :lattice))
      (let* ((pts (make-cloud (+ dim 40) 200 dim :kind kind))
             (queries (concatenate '(simple-array single-float (*))
                                   (make-cloud (+ dim 41) 30 dim :kind kind) (subseq pts 0 (* 5 dim)))))
        (dolist (backend (index-backends))
          (dolist (structure (index-structures dim))
            (knn:with-index (index pts dim :backend backend :structure structure)
              (check-index-info index 200 dim backend structure)
              (dolist (k '(1 4 17))
                (multiple-value-bind (want-d want-i) (oracle pts queries dim k)
                  (multiple-value-bind (i d) (knn:index-query index queries k)
                    (check (vector= i want-i)
                           (format nil "indices dim ~D ~S ~S ~S k ~D" dim kind backend structure k))
                    (check (same-bits d want-d)
                           (format nil "distances dim ~D ~S ~S ~S k ~D" dim kind backend structure k))))))))))))

(deftest index-query-other-forms
  (let* ((pts (make-cloud 50 5 3))
         (as-2d (make-array '(5 3) :element-type 'single-float)))
    (dotimes (i 15) (setf (row-major-aref as-2d i) (aref pts i)))
    (knn:with-index (index as-2d 3 :backend :openmp :structure :kdtree :leaf-size 1 :threads 2)
      (multiple-value-bind (want-d want-i) (oracle pts pts 3 8)
        (multiple-value-bind (i d) (knn:index-query index pts 8 :options (knn:make-options :threads 1))
          (check (vector= i want-i) "k > n pads with -1")
          (check (same-bits d want-d) "k > n pads with +infinity")
          (check (= (aref i 7) -1))))
      (multiple-value-bind (i d) (knn:index-query index (coerce pts 'list) 2 :distances nil)
        (check (and (null d) (vector= i (nth-value 1 (oracle pts pts 3 2)))) "list queries, no distances"))
      (let ((out (make-array 10 :element-type '(signed-byte 32))))
        (check (eq (knn:index-query index (subseq pts 0 15) 2 :out-indices out :distances nil) out)
               "written in place")))))

(deftest index-query-self
  (dolist (dim '(2 3 5))
    (let ((pts (make-cloud (+ dim 60) 150 dim :kind :duplicates)))
      (dolist (structure (index-structures dim))
        (knn:with-index (index pts dim :structure structure)
          (dolist (exclude '(nil t))
            (dolist (k '(1 6))
              (multiple-value-bind (want-d want-i) (self-oracle pts dim k exclude)
                (multiple-value-bind (i d) (knn:index-query-self index k :exclude-self exclude)
                  (check (vector= i want-i)
                         (format nil "query-self dim ~D ~S exclude ~S k ~D" dim structure exclude k))
                  (check (same-bits d want-d) "query-self distances")
                  (when exclude
                    (check (loop for row below 150 never (= (aref i (* row k)) row)) "own index dropped")
                    (check (> (count 0f0 d) 100) "other copies at distance 0 stay")))))))))))

(deftest index-radius
  (dolist (dim '(2 3 5))
    (let ((pts (make-cloud (+ dim 70) 300 dim :kind :lattice))
          (queries (concatenate '(simple-array single-float (*))
                                (make-cloud (+ dim 71) 20 dim :kind :lattice)
                                (map '(simple-array single-float (*)) (lambda (x) (/ x 40))
                                     (make-cloud (+ dim 72) 5 dim)))))
      (dolist (backend (index-backends))
        (dolist (structure (index-structures dim))
          (knn:with-index (index pts dim :backend backend :structure structure)
            (let ((overflow nil) (empty nil))
              (loop for (radius max-nb) in '((1.0 8) (2.0 16) (0.0 4) (3.5 3))
                    do (multiple-value-bind (want-i want-d want-c)
                           (radius-oracle pts queries dim radius max-nb)
                         (when (some (lambda (c) (> c max-nb)) want-c) (setf overflow t))
                         (when (some #'zerop want-c) (setf empty t))
                         (multiple-value-bind (i d c) (knn:index-radius index queries radius max-nb)
                           (let ((what (format nil "radius dim ~D ~S ~S r ~A" dim backend structure radius)))
                             (check (vector= c want-c) (format nil "~A counts" what))
                             (check (vector= i want-i) (format nil "~A indices" what))
                             (check (same-bits d want-d) (format nil "~A distances" what))))))
              (check (and overflow empty) "rows beyond max-neighbors and empty rows were tested"))
            (multiple-value-bind (i d c) (knn:index-radius index queries 2.0 0)
              (check (and (null i) (null d)) "counting call")
              (check (vector= c (nth-value 2 (radius-oracle pts queries dim 2.0 0))) "counting counts"))))))))

;;; CSR rows: every hit of the radius oracle (rows of n), packed by its counts.
(deftest index-radius-csr
  (dolist (dim '(2 3))
    (let* ((pts (make-cloud (+ dim 90) 300 dim :kind :lattice))
           (n (floor (length pts) dim))
           (queries (make-cloud (+ dim 91) 25 dim :kind :lattice)))
      (dolist (backend (index-backends))
        (dolist (structure (index-structures dim))
          (knn:with-index (index pts dim :backend backend :structure structure)
            (dolist (radius '(0.0 1.0 2.5))
              (multiple-value-bind (want-i want-d want-c) (radius-oracle pts queries dim radius n)
                (multiple-value-bind (i d offsets) (knn:index-radius-csr index queries radius)
                  (let ((what (format nil "csr dim ~D ~S ~S r ~A" dim backend structure radius))
                        (at 0))
                    (check (= (aref offsets 0) 0) what)
                    (check (vector= (knn:index-radius-counts index queries radius) want-c)
                           (format nil "~A counts" what))
                    (dotimes (row (length want-c))
                      (check (= (aref offsets (1+ row)) (+ (aref offsets row) (aref want-c row)))
                             (format nil "~A offsets" what))
                      (dotimes (j (aref want-c row))
                        (check (and (= (aref i at) (aref want-i (+ (* row n) j)))
                                    (same-bits (subseq d at (1+ at))
                                               (subseq want-d (+ (* row n) j) (+ (* row n) j 1))))
                               (format nil "~A row ~D entry ~D" what row j))
                        (incf at)))
                    (check (= at (length i)) (format nil "~A total" what))))))))))))

(deftest index-serialize
  (let* ((pts (make-cloud 95 400 3 :kind :lattice))
         (queries (make-cloud 96 30 3)))
    (dolist (backend (index-backends))
      (dolist (structure (index-structures 3))
        (knn:with-index (index pts 3 :backend backend :structure structure)
          (let* ((bytes (knn:serialize-index index))
                 (loaded (knn:deserialize-index bytes :backend :openmp)))
            (unwind-protect
                 (progn
                   (check (= (length bytes) (+ 64 (* 4 (length pts)) 4)) "serialized size")
                   (check (equalp (knn:serialize-index loaded) bytes) "saves to the same bytes")
                   (multiple-value-bind (a-i a-d) (knn:index-query index queries 5)
                     (multiple-value-bind (b-i b-d) (knn:index-query loaded queries 5)
                       (check (vector= a-i b-i) (format nil "~S ~S indices" backend structure))
                       (check (same-bits a-d b-d) (format nil "~S ~S distances" backend structure)))))
              (knn:free-index loaded))
            (let ((bad (copy-seq bytes)))
              (setf (aref bad 70) (logxor (aref bad 70) 1))
              (let ((e (check-signals knn:knn-invalid-argument (knn:deserialize-index bad))))
                (when e (check (search "CRC-32C" (knn:knn-error-message e)) (knn:knn-error-message e)))))
            (let ((e (check-signals knn:knn-invalid-argument
                                    (knn:deserialize-index (subseq bytes 0 (1- (length bytes)))))))
              (when e (check (search "truncated" (knn:knn-error-message e)) (knn:knn-error-message e))))))))))

(deftest progress-polled-from-another-thread
  (let* ((pts (make-cloud 97 100000 3))
         (progress (knn:make-progress))
         (seen '())
         (running t))
    (knn:with-index (index pts 3 :backend :openmp)
      (knn:with-progress (progress)
        (check (equal (multiple-value-list (knn:progress-snapshot progress)) '(0 :idle 0 0))
               "zeroed when registered")
        (let ((poller (sb-thread:make-thread
                       (lambda ()
                         (loop while running
                               do (push (multiple-value-list (knn:progress-snapshot progress))
                                        seen))))))
          (unwind-protect (knn:index-query index pts 4 :distances nil)
            (setf running nil)
            (sb-thread:join-thread poller)))
        (multiple-value-bind (sequence stage total done) (knn:progress-snapshot progress)
          (check (and (plusp sequence) (eq stage :query) (= total 100000) (= done total))
                 (format nil "final ~S ~S ~S ~S" sequence stage total done))))
      (check (every (lambda (s) (<= 0 (fourth s) (max (third s) 0))) seen) "done within total")
      (let ((in-order (reverse seen)))
        (check (loop for (a b) on in-order while b
                     never (and (equal (subseq a 0 3) (subseq b 0 3)) (< (fourth b) (fourth a))))
               "done never goes back within a stage")))
    (knn:free-progress progress)))

(deftest index-errors
  (let ((pts (make-cloud 80 20 4)))
    (setf (aref pts (+ 3 (* 4 6))) (nan-single))
    (let ((e (check-signals knn:knn-nonfinite-input (knn:build-index pts 4))))
      (when e
        (check (string= (knn:knn-error-function e) "knn_index_build"))
        (check (search "point 6" (knn:knn-error-message e)) (knn:knn-error-message e))))
    (setf (aref pts (+ 3 (* 4 6))) 1.0)
    (knn:with-index (index pts 4)
      (let ((queries (make-cloud 81 20 4)))
        (setf (aref queries (* 4 13)) (nan-single))
        (let ((e (check-signals knn:knn-nonfinite-input (knn:index-query index queries 3))))
          (when e (check (search "13" (knn:knn-error-message e)) (knn:knn-error-message e)))))
      (dolist (k '(0 -2))
        (let ((e (check-signals knn:knn-invalid-argument (knn:index-query index pts k))))
          (when e
            (check (eq (knn:knn-error-status e) :invalid-argument))
            (check (string= (knn:knn-error-function e) "knn_index_query"))))
        (check-signals knn:knn-invalid-argument (knn:index-query-self index k)))
      (check-signals knn:knn-invalid-argument (knn:index-radius index pts 1.0 -1))
      (check (vector= (knn:index-query index pts 2) (nth-value 1 (oracle pts pts 4 2)))
             "usable after refusals"))
    (unless (has-device)
      (check-signals knn:knn-no-device (knn:build-index pts 4 :backend :cuda)))
    (check-signals knn:knn-unsupported (knn:build-index (make-cloud 82 10 2) 2 :structure :grid)))
  ;; raw entry points with NULL handles
  (check (zerop (knn::%index-free (cffi:null-pointer))))
  (check (= 1 (knn::%index-info (cffi:null-pointer) (cffi:null-pointer) (cffi:null-pointer)
                                (cffi:null-pointer) (cffi:null-pointer))))
  (check (search "knn_index_info" (knn:last-error)))
  (check (= 1 (knn::%index-query-self (cffi:null-pointer) 1 0 (cffi:null-pointer)
                                      (cffi:null-pointer))))
  ;; a closed index is refused by the binding, before any call
  (let ((closed (knn::%make-index nil 10 3)))
    (check (knn:index-closed-p closed))
    (check-signals knn:knn-usage-error (knn:index-query closed (make-cloud 1 2 3) 1))
    (check-signals knn:knn-usage-error (knn:index-info closed))
    (knn:free-index closed))
  (check-signals knn:knn-usage-error (knn:build-index (make-cloud 1 5 3) 4))
  (check-signals knn:knn-usage-error (knn:build-index (cffi:null-pointer) 3))
  ;; estimates
  (check (< 0 (knn:estimate-build-bytes 1000 3) (knn:estimate-build-bytes 1000000 3)))
  (check (< 0 (knn:estimate-query-bytes 10 8 1000 3) (knn:estimate-query-bytes 100000 8 1000 3)))
  (check (plusp (knn:estimate-query-bytes 1000 8 1000 3 (knn:make-options :backend :cuda))))
  (check (zerop (knn:estimate-build-bytes -1 3))))

(deftest index-oracles-agree-with-brute-force
  ;; The helpers above against the library's own CPU brute force.
  (let ((pts (make-cloud 90 60 3 :kind :lattice)))
    (multiple-value-bind (d i) (knn:brute-force pts pts 3 60)
      (multiple-value-bind (sd si) (self-oracle pts 3 60 nil)
        (check (and (vector= si i) (same-bits sd d)) "self-oracle"))
      (multiple-value-bind (ri rd rc) (radius-oracle pts pts 3 1.5 60)
        (declare (ignore rd))
        (check (vector= rc (loop for row below 60
                                 collect (count-if (lambda (x) (<= x 2.25)) d
                                                   :start (* row 60) :end (* (1+ row) 60)))))
        (check (loop for j below 3600 always (or (= (aref ri j) -1) (= (aref ri j) (aref i j)))))))))

;;; ---- point in polygon against the exact oracle --------------------------------------
(defparameter *square* '((0 0) (4 0) (4 4) (0 4)))
(defparameter *hole* '((1 1) (3 1) (3 3) (1 3)))
(defparameter *triangle* '((5 0) (9 0) (7 3)))
(defparameter *comb* '((10 0) (16 0) (16 5) (15 5) (15 1) (14 1) (14 5) (13 5) (13 1) (12 1)
                       (12 5) (11 5) (11 1) (10 1)))
(defparameter *polygons*
  (list (list *square* *hole*)
        (list *triangle*)
        (list '((-2 -2) (20 -2) (20 12) (-2 12) (-2 -2)) *square* *comb*)
        (list *comb*)
        (list '((0 0) (8 0) (8 8) (0 8)) '((1.5 1.5) (1.5 2.5) (2.5 2.5) (2.5 1.5))
              '((5 5) (7 5) (6 7)))
        (list *hole*)))

(defun pip-backends () (append '(:auto :openmp) (and (has-device) '(:cuda))))

(defun members (tree polygons)
  (multiple-value-bind (v r p) (knn:pack-polygons polygons)
    (mapcar (lambda (x) (coerce x 'list)) (knn:points-in-each-polygon tree v r p))))

(deftest quadtree-boundary-rule
  ;; The header: [0,1]^2 holds (0,0), (0,0.5), (0.5,0) but not (1,0.5), (0.5,1), (1,1).
  (let* ((unit '((0 0) (1 0) (1 1) (0 1)))
         (xy (flat-xy '((0 0) (0 0.5) (0.5 0) (0.5 0.5) (1 0.5) (0.5 1) (1 1) (1 0) (0 1) (2 2)))))
    (dolist (ring (list unit (reverse unit) (append unit (list (first unit)))
                        (append (cddr unit) (subseq unit 0 2))))
      (check (equal (pip-oracle xy (list (list ring))) '((0 1 2 3))) "the oracle follows the header")
      (dolist (backend (pip-backends))
        (knn:with-quadtree (tree xy :backend backend)
          (check (equal (members tree (list (list ring))) '((0 1 2 3)))
                 (format nil "unit square ~S ~S" backend ring)))))
    ;; shared edges: a point on an edge belongs to the polygon on its right / above
    (knn:with-quadtree (tree (flat-xy '((1 0.5) (1.5 0) (1 0) (0.5 0.5) (1.5 -0.5))))
      (check (equal (members tree '((((0 0) (1 0) (1 1) (0 1))) (((1 0) (2 0) (2 1) (1 1)))
                                    (((1 -1) (2 -1) (2 0) (1 0)))))
                    '((3) (0 1 2) (4)))
             "shared edges and corner"))))

(deftest quadtree-square-tiling
  (let* ((tiles (loop for j below 4
                      append (loop for i below 4
                                   collect (let ((ring (list (list i j) (list (1+ i) j)
                                                             (list (1+ i) (1+ j)) (list i (1+ j)))))
                                             (list (if (oddp (+ i j)) (reverse ring) ring))))))
         (pairs (loop for y from -0.5 to 4.5 by 0.25
                      append (loop for x from -0.5 to 4.5 by 0.25 collect (list x y))))
         (xy (flat-xy pairs))
         (want (let ((w (make-array 16 :initial-element nil)))
                 (loop for (x y) in pairs for idx from 0
                       when (and (<= 0 x) (< x 4) (<= 0 y) (< y 4))
                         do (push idx (aref w (+ (* 4 (floor y)) (floor x)))))
                 (map 'list #'reverse w))))
    (check (equal (pip-oracle xy tiles) want) "the oracle agrees with floor(x), floor(y)")
    (dolist (backend (pip-backends))
      (dolist (leaf '(0 1 3))
        (knn:with-quadtree (tree xy :backend backend :leaf-size leaf)
          (check (equal (members tree tiles) want)
                 (format nil "tiling ~S leaf ~D: every point in exactly one square" backend leaf))
          (multiple-value-bind (v r p) (knn:pack-polygons tiles)
            (check (equal (coerce (knn:points-in-polygons-count tree v r p) 'list)
                          (mapcar #'length want)))))))))

(deftest quadtree-holes-match-oracle
  (let* ((xy (pip-cloud 7 700))
         (want (pip-oracle xy *polygons*)))
    (check (every (lambda (w) (> (length w) 3)) want) "non-trivial memberships")
    (multiple-value-bind (v r p) (knn:pack-polygons *polygons*)
      (dolist (backend (pip-backends))
        (dolist (leaf '(0 1 16))
          (knn:with-quadtree (tree xy :backend backend :leaf-size leaf :threads 2)
            (check (= (knn:quadtree-n tree) 700))
            (let ((counts (knn:points-in-polygons-count tree v r p)))
              (check (equal (coerce counts 'list) (mapcar #'length want))
                     (format nil "counts ~S leaf ~D" backend leaf))
              (multiple-value-bind (offsets indices) (knn:points-in-polygons tree v r p)
                (check (= (aref offsets (length *polygons*)) (length indices)))
                (check (equal (loop for q below (length *polygons*)
                                    collect (coerce (subseq indices (aref offsets q)
                                                            (aref offsets (1+ q)))
                                                    'list))
                              want)
                       (format nil "members ~S leaf ~D" backend leaf))
                (multiple-value-bind (o2 i2) (knn:points-in-polygons tree v r p :out-offsets offsets)
                  (check (and (equalp o2 offsets) (equalp i2 indices)) "explicit out-offsets"))))))))))

(deftest quadtree-errors
  (let ((xy (pip-cloud 8 40)))
    (setf (aref xy 15) (nan-single))                       ; point 7's y
    (let ((e (check-signals knn:knn-nonfinite-input (knn:build-quadtree xy))))
      (when e
        (check (string= (knn:knn-error-function e) "knn_quadtree_build"))
        (check (search "point 7" (knn:knn-error-message e)) (knn:knn-error-message e)))))
  (knn:with-quadtree (tree (pip-cloud 9 200))
    (flet ((refused (condition polygons-or-arrays fragment)
             (multiple-value-bind (v r p)
                 (if (listp polygons-or-arrays)
                     (knn:pack-polygons polygons-or-arrays)
                     (values-list (coerce polygons-or-arrays 'list)))
               (let ((e (handler-case (progn (knn:points-in-polygons-count tree v r p) nil)
                          (knn:knn-error (e) e))))
                 (check (typep e condition) (format nil "~S signalled ~S" fragment e))
                 (when e
                   (check (string= (knn:knn-error-function e) "knn_points_in_polygons_count"))
                   (check (search fragment (knn:knn-error-message e))
                          (format nil "~S in ~S" fragment (knn:knn-error-message e))))))))
      (multiple-value-bind (v r p) (knn:pack-polygons (list (list *square* *hole*) (list *triangle*)))
        (refused 'knn:knn-invalid-argument (list (list *square* '((0 0) (1 1)))) "ring 1")
        (refused 'knn:knn-invalid-argument (list (list *square*) (list '((0 0) (1 0) (0 0))))
                 "fewer than 3")
        (refused 'knn:knn-invalid-argument
                 (vector v (make-array 4 :element-type '(signed-byte 64) :initial-contents '(0 4 3 11)) p)
                 "ring_offsets decreases at ring 1")
        (refused 'knn:knn-invalid-argument
                 (vector v r (make-array 4 :element-type '(signed-byte 64) :initial-contents '(0 2 2 3)))
                 "polygon 1 has no ring")
        (let ((bad (copy-seq v)))
          (setf (aref bad 10) (nan-single))                  ; vertex 5's x
          (refused 'knn:knn-nonfinite-input (vector bad r p) "vertex 5"))
        (multiple-value-bind (offsets) (knn:points-in-polygons tree v r p)
          (let ((wrong (map '(simple-array (signed-byte 64) (*)) (lambda (o) (if (plusp o) (1+ o) o))
                            offsets)))
            (let ((e (check-signals knn:knn-invalid-argument
                                    (knn:points-in-polygons tree v r p :out-offsets wrong))))
              (when e
                (check (string= (knn:knn-error-function e) "knn_points_in_polygons"))
                (check (search "out_offsets[1]" (knn:knn-error-message e)))))))
        (check (equal (coerce (knn:points-in-polygons-count tree v r p) 'list)
                      (mapcar #'length (pip-oracle (pip-cloud 9 200)
                                                   (list (list *square* *hole*) (list *triangle*)))))
               "usable after refusals"))))
  (unless (has-device)
    (check-signals knn:knn-no-device (knn:build-quadtree (pip-cloud 1 5) :backend :cuda)))
  (check-signals knn:knn-invalid-argument (knn:build-quadtree (pip-cloud 1 5) :leaf-size -2)))

(deftest quadtree-cancel-flag
  (let ((flag (knn:make-cancel-flag)))
    (multiple-value-bind (v r p) (knn:pack-polygons *polygons*)
      (knn:with-quadtree (tree (pip-cloud 10 1000) :backend :openmp)
        (let ((want (knn:points-in-polygons-count tree v r p)))
          (knn:with-cancel-flag (flag)
            (knn:cancel flag)
            (check (knn:cancelled-p flag))
            (let ((e (check-signals knn:knn-cancelled (knn:points-in-polygons-count tree v r p))))
              (when e (check (eq (knn:knn-error-status e) :cancelled))))
            (knn:reset-cancel-flag flag)
            (check (equalp (knn:points-in-polygons-count tree v r p) want) "after reset"))
          (knn:cancel flag)                                  ; unregistered: no effect
          (check (equalp (knn:points-in-polygons-count tree v r p) want) "unregistered"))))
    (knn:free-cancel-flag flag)
    (check-signals knn:knn-usage-error (knn:cancel flag))))

(deftest quadtree-binding-checks
  (multiple-value-bind (v rings polys)
      (knn:pack-polygons (list (list *square* *hole*) (list *triangle*)))
    (check (= (length v) 22))
    (check (vector= rings #(0 4 8 11)))
    (check (vector= polys #(0 2 3)))
    (knn:with-quadtree (tree (make-array 0 :element-type 'single-float))
      (check (equal (coerce (knn:points-in-polygons-count tree v rings polys) 'list) '(0 0)))
      (check (equal (members tree nil) nil)))
    ;; the binding's own bounds checks (the C calls get no vertex count)
    (check-signals knn:knn-usage-error (knn::polygon-arrays (subseq v 0 20) rings polys))
    (check-signals knn:knn-usage-error (knn::polygon-arrays v rings #(0 2 4)))
    (check-signals knn:knn-usage-error (knn::polygon-arrays v #(0 4 -1 11) polys))
    (check (= 2 (nth-value 4 (knn::polygon-arrays v rings polys)))))
  (check (zerop (knn::%quadtree-free (cffi:null-pointer))))
  (check (= 1 (knn::%points-in-polygons-count (cffi:null-pointer) (cffi:null-pointer)
                                              (cffi:null-pointer) 0 (cffi:null-pointer) 0
                                              (cffi:null-pointer) (cffi:null-pointer))))
  (check (search "tree is NULL" (knn:last-error)))
  (check-signals knn:knn-usage-error
                 (knn:points-in-polygons-count (knn::%make-quadtree nil 0) #() #(0) #(0))))

;;; ---- float64: double-float vectors go to the _f64 calls ---------------------------------

(defun utm-cloud (seed n)
  "N points of a 10 m cube offset to 4.5e6 (a UTM northing), as double-floats."
  (let ((state (sb-ext:seed-random-state seed))
        (v (make-array (* 3 n) :element-type 'double-float)))
    (dotimes (i (length v) v)
      (setf (aref v i) (+ 4.5d6 (random 10d0 state))))))

(defun sorted-neighbours (ref queries row distance)
  "Every REF row of query ROW as (sq-distance . index), by (distance, index)."
  (let ((n (floor (length ref) 3)))
    (stable-sort (loop for r below n
                       collect (cons (funcall distance queries (* 3 row) ref (* 3 r) 3) r))
                 #'< :key #'car)))

(deftest f64-index-matches-a-double-oracle
  (let* ((pts (utm-cloud 31 400))
         (q (utm-cloud 32 30))
         (k 6)
         (want (loop for i below 30 collect (sorted-neighbours pts q i #'sq-distance-64))))
    ;; the data needs float64: rounded to single-floats the neighbours change
    (let ((p32 (map '(simple-array single-float (*)) (lambda (x) (coerce x 'single-float)) pts))
          (q32 (map '(simple-array single-float (*)) (lambda (x) (coerce x 'single-float)) q)))
      (check (loop for i below 30
                     thereis (mismatch (mapcar #'cdr (subseq (sorted-neighbours p32 q32 i
                                                                                #'sq-distance)
                                                             0 k))
                                       (mapcar #'cdr (subseq (nth i want) 0 k))))
             "float32 rounding changes the answer"))
    (knn:with-index (index pts 3 :backend :openmp)
      (check (eq (knn:index-scalar index) :float64))
      (multiple-value-bind (ind dist) (knn:index-query index q k)
        (check (typep dist '(simple-array double-float (*))))
        (check (loop for i below 30
                     always (loop for j below k
                                  for (d . r) in (nth i want)
                                  always (and (= (aref ind (+ (* i k) j)) r)
                                              (eql (aref dist (+ (* i k) j)) d))))
               "indices and bit-identical double distances"))
      ;; radius in double: squared distance <= r*r in float64
      (multiple-value-bind (ind dist counts) (knn:index-radius index q 1.5d0 64)
        (declare (ignore ind))
        (check (typep dist '(simple-array double-float (*))))
        (check (loop for i below 30
                     always (= (aref counts i)
                               (count-if (lambda (e) (<= (car e) (* 1.5d0 1.5d0))) (nth i want))))))
      ;; single-float queries widen exactly
      (let ((q32 (map '(simple-array single-float (*)) (lambda (x) (coerce x 'single-float)) q)))
        (check (equalp (knn:index-query index q32 k)
                       (knn:index-query index (map '(simple-array double-float (*))
                                                   (lambda (x) (coerce x 'double-float)) q32)
                                        k))))
      ;; serialized and loaded, still float64
      (let ((loaded (knn:deserialize-index (knn:serialize-index index) :backend :openmp)))
        (check (eq (knn:index-scalar loaded) :float64))
        (check (equalp (multiple-value-list (knn:index-query loaded q k))
                       (multiple-value-list (knn:index-query index q k))))
        (knn:free-index loaded)))
    (check (> (knn:estimate-build-bytes 1000000 3 nil :float64)
              (knn:estimate-build-bytes 1000000 3 nil :float32)))))

(deftest f32-index-refuses-rounding-double-queries
  (let ((pts (make-cloud 33 50 3)))
    (knn:with-index (index pts 3 :backend :openmp)
      (check (eq (knn:index-scalar index) :float32))
      (check-signals knn:knn-usage-error
                     (knn:index-query index (make-array 3 :element-type 'double-float
                                                          :initial-contents '(0.1d0 0d0 0d0))
                                  2))
      ;; double-floats that are single-floats are taken
      (check (equalp (knn:index-query index (make-array 3 :element-type 'double-float
                                                          :initial-contents '(0.5d0 1d0 2d0))
                                  2)
                     (knn:index-query index (make-array 3 :element-type 'single-float
                                                          :initial-contents '(0.5f0 1f0 2f0))
                                  2))))))

(deftest f64-towns-stay-inside-the-border
  ;; a border whose eastern edge leans slightly, towns 4e-6 degrees inside and
  ;; outside it: float32 (spacing 1.5e-5 at 129 degrees) cannot tell them apart
  (let* ((x1 129d0) (y1 -26d0) (x2 129.0003d0) (y2 -14.9d0)
         (border (list (list (list (list x1 y1) (list x2 y2) (list 120d0 y2) (list 120d0 y1)))))
         (towns (make-array (* 2 82) :element-type 'double-float)))
    (dotimes (side 2)
      (dotimes (i 41)
        (let* ((y (+ -25.5d0 (* 0.25d0 i)))
               (edge (+ x1 (/ (* (- y y1) (- x2 x1)) (- y2 y1))))
               (at (* 2 (+ (* 41 side) i))))
          (setf (aref towns at) (if (zerop side) (- edge 4d-6) (+ edge 4d-6))
                (aref towns (1+ at)) y))))
    (multiple-value-bind (v rings polys) (knn:pack-polygons border)
      (check (typep v '(simple-array double-float (*))))
      (knn:with-quadtree (tree towns :backend :openmp)
        (check (eq (knn:quadtree-scalar tree) :float64))
        (check (equalp (first (knn:points-in-each-polygon tree v rings polys))
                       (coerce (loop for i below 41 collect i) '(vector (signed-byte 64)))))))
    ;; rounded to single-floats, towns cross the border
    (let ((towns32 (map '(simple-array single-float (*)) (lambda (x) (coerce x 'single-float))
                        towns)))
      (multiple-value-bind (v rings polys)
          (knn:pack-polygons (list (list (mapcar (lambda (p) (mapcar (lambda (c) (coerce c 'single-float)) p))
                                                 (first (first border))))))
        (check (typep v '(simple-array single-float (*))))
        (knn:with-quadtree (tree towns32 :backend :openmp)
          (check (/= 41 (aref (knn:points-in-polygons-count tree v rings polys) 0))))))))

;;; ---- freeing while other threads call (issue #51 item 3) -------------------------

(defun free-while-calling (free call)
  "Three threads run CALL in a loop until it signals KNN-USAGE-ERROR (the object
is closed); once each has answered, three more threads FREE the object at the
same moment. Returns (values answers others): what CALL returned, and any
other condition signalled by CALL or FREE."
  (let* ((lock (sb-thread:make-mutex))
         (answers '()) (others '()) (go nil)
         (workers
           (loop repeat 3
                 collect (sb-thread:make-thread
                          (lambda ()
                            (loop (let ((answer (handler-case (funcall call)
                                                  (knn:knn-usage-error () (return))
                                                  (error (e) (sb-thread:with-mutex (lock)
                                                               (push e others))
                                                    (return)))))
                                    (sb-thread:with-mutex (lock) (push answer answers))))))))
         (freers (loop repeat 3
                       collect (sb-thread:make-thread
                                (lambda ()
                                  (loop until go do (sb-thread:thread-yield))
                                  (handler-case (funcall free)
                                    (error (e) (sb-thread:with-mutex (lock) (push e others)))))))))
    (loop until (>= (sb-thread:with-mutex (lock) (length answers)) 3)
          do (sleep 0.001))
    (setf go t)
    (mapc #'sb-thread:join-thread freers)
    (mapc #'sb-thread:join-thread workers)
    (values answers others)))

(deftest free-index-while-other-threads-query
  ;; Queries as a list of rationals (the floats' exact values): the binding
  ;; converts them between taking the index and calling the library, which is
  ;; where a free used to slip in (the library then refused the freed handle, or
  ;; ran on another index at the same address); the conversion makes that
  ;; window most of each call.
  (let* ((pts (make-cloud 151 300 3))
         (queries (make-cloud 152 400 3))
         (query-list (map 'list #'rational queries))
         (k 3)
         (rounds 0))
    (multiple-value-bind (want-d want-i) (oracle pts queries 3 k)
      (loop with start = (get-internal-real-time)
            while (and (< rounds 200)
                       (< (- (get-internal-real-time) start) (* 3 internal-time-units-per-second)))
            do (incf rounds)
               (let ((index (knn:build-index pts 3 :backend :openmp :threads 1)))
                 (multiple-value-bind (answers others)
                     (free-while-calling (lambda () (knn:free-index index))
                                         (lambda () (multiple-value-list
                                                     (knn:index-query index query-list k))))
                   (check (null others) (format nil "round ~D: ~{~A~^; ~}" rounds others))
                   (check (every (lambda (a) (and (vector= (first a) want-i)
                                                  (same-bits (second a) want-d)))
                                 answers)
                          (format nil "round ~D: every answer is the oracle's" rounds)))
                 (check (knn:index-closed-p index))
                 (check (null (knn:free-index index)) "a second free does nothing")
                 (check-signals knn:knn-usage-error (knn:index-query index queries k))))
      (format t "~&  ~D rounds~%" rounds))))

(deftest free-quadtree-while-other-threads-count
  ;; A polygon of 2000 vertices away from every point: its vertices take long
  ;; to convert (see below) and little time in the library.
  (let* ((xy (pip-cloud 153 200))
         (far (loop for i below 2000
                    for a = (/ (* 2 pi i) 2000)
                    collect (list (+ 1000 (* 5 (cos a))) (+ 1000 (* 5 (sin a))))))
         (polygons (append *polygons* (list (list far))))
         (want (mapcar #'length (pip-oracle xy polygons)))
         (rounds 0))
    (multiple-value-bind (v r p) (knn:pack-polygons polygons)
      ;; the vertices as rationals, converted while the tree is held (see above)
      (let ((vertex-list (map 'list #'rational v)))
        (loop with start = (get-internal-real-time)
              while (and (< rounds 200)
                         (< (- (get-internal-real-time) start)
                            (* 3 internal-time-units-per-second)))
              do (incf rounds)
                 (let ((tree (knn:build-quadtree xy :backend :openmp :threads 1)))
                   (multiple-value-bind (answers others)
                       (free-while-calling (lambda () (knn:free-quadtree tree))
                                           (lambda () (coerce (knn:points-in-polygons-count
                                                               tree vertex-list r p)
                                                              'list)))
                     (check (null others) (format nil "round ~D: ~{~A~^; ~}" rounds others))
                     (check (every (lambda (a) (equal a want)) answers)
                            (format nil "round ~D: every count is the oracle's" rounds)))
                   (check (knn:quadtree-closed-p tree))
                   (check (null (knn:free-quadtree tree)) "a second free does nothing")
                   (check-signals knn:knn-usage-error (knn:points-in-polygons-count tree v r p))))
        (format t "~&  ~D rounds~%" rounds)))))
