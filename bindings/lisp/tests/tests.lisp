;;;; tests.lisp - the knn-gpgpu binding against the real library and a brute-force oracle.

(in-package #:knn-gpgpu-tests)

(defun env (name) (let ((v (uiop:getenv name))) (and v (plusp (length v)) v)))

(defun repo-file (relative)
  (merge-pathnames relative (asdf:system-relative-pathname "knn-gpgpu" "../../")))

(defun header-text ()
  (uiop:read-file-string
   (if (env "KNN_GPGPU_INCLUDE")
       (merge-pathnames "knn_gpgpu.h" (uiop:ensure-directory-pathname (env "KNN_GPGPU_INCLUDE")))
       (repo-file "include/knn_gpgpu.h"))))

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
  (check-signals knn:knn-usage-error (knn::backend-code :opencl)))

(defun index-engine-available ()
  (handler-case (progn (knn:free-index (knn:build-index (make-cloud 1 4 3) 3)) t)
    (knn:knn-unsupported () nil)))

(deftest index-api
  (let ((pts (make-cloud 10 200 4)))
    (if (index-engine-available)
        (knn:with-index (index pts 4 :backend :openmp)
          (multiple-value-bind (n dim) (knn:index-info index)
            (check (and (= n 200) (= dim 4))))
          (let ((queries (make-cloud 11 30 4)))
            (multiple-value-bind (want-d want-i) (oracle pts queries 4 6)
              (multiple-value-bind (i d) (knn:index-query index queries 6)
                (check (vector= i want-i))
                (check (vector= d want-d))))
            (multiple-value-bind (i d c) (knn:index-radius index queries 20.0 5)
              (declare (ignore i d))
              (check (= (length c) 30)))))
        (let ((e (check-signals knn:knn-unsupported (knn:build-index pts 4 :threads 2))))
          (when e
            (check (eq (knn:knn-error-status e) :unsupported))
            (check (= (knn:knn-error-code e) 8))
            (check (string= (knn:knn-error-function e) "knn_index_build"))
            (check (search "knn_index_build" (knn:knn-error-message e)))))))
  ;; raw entry points with NULL handles
  (check (zerop (knn::%index-free (cffi:null-pointer))))
  (check (/= 0 (knn::%index-info (cffi:null-pointer) (cffi:null-pointer) (cffi:null-pointer)
                                 (cffi:null-pointer) (cffi:null-pointer))))
  (check (/= 0 (knn::%index-query-self (cffi:null-pointer) 1 0 (cffi:null-pointer)
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

(deftest quadtree-api
  (multiple-value-bind (v rings polys)
      (knn:pack-polygons '((((0 0) (4 0) (4 4) (0 4)) ((1 1) (3 1) (3 3) (1 3)))
                           (((5 0) (9 0) (7 3)))))
    (check (= (length v) 22))
    (check (vector= rings #(0 4 8 11)))
    (check (vector= polys #(0 2 3)))
    (let ((xy (make-cloud 12 50 2)))
      (handler-case
          (knn:with-quadtree (tree xy)
            (check (= (length (knn:points-in-polygons-count tree v rings polys)) 2))
            (multiple-value-bind (offsets indices) (knn:points-in-polygons tree v rings polys)
              (check (= (aref offsets 2) (length indices)))))
        (knn:knn-unsupported (e)
          (check (eq (knn:knn-error-status e) :unsupported))
          (check (string= (knn:knn-error-function e) "knn_quadtree_build")))))
    ;; the binding's own bounds checks (the C calls get no vertex count)
    (check-signals knn:knn-usage-error (knn::polygon-arrays (subseq v 0 20) rings polys))
    (check-signals knn:knn-usage-error (knn::polygon-arrays v rings #(0 2 4)))
    (check-signals knn:knn-usage-error (knn::polygon-arrays v #(0 4 -1 11) polys))
    (check (= 2 (nth-value 4 (knn::polygon-arrays v rings polys)))))
  (check (zerop (knn::%quadtree-free (cffi:null-pointer))))
  (check (/= 0 (knn::%points-in-polygons-count (cffi:null-pointer) (cffi:null-pointer)
                                               (cffi:null-pointer) 0 (cffi:null-pointer) 0
                                               (cffi:null-pointer) (cffi:null-pointer))))
  (check-signals knn:knn-usage-error
                 (knn:points-in-polygons-count (knn::%make-quadtree nil 0) #() #(0) #(0))))
