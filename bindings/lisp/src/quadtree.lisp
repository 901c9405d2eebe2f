;;;; quadtree.lisp - point in polygon over a quadtree (2-D).
;;;;
;;;; Polygons in the library's flat form: VERTICES (x y pairs), RING-OFFSETS
;;;; (n-rings + 1, counting vertices), POLYGON-OFFSETS (n-polygons + 1, counting
;;;; rings); the first ring of a polygon is its outer boundary, the others
;;;; holes. PACK-POLYGONS builds them from nested lists. The C functions get no
;;;; vertex count, so the binding checks that every offset stays inside the
;;;; arrays it passes; the library checks the rest (KNN-INVALID-ARGUMENT for
;;;; decreasing offsets, a polygon without a ring, a ring of fewer than 3
;;;; distinct vertices, out-offsets that disagree with the counts;
;;;; KNN-NONFINITE-INPUT for a NaN/Inf vertex; the message names the element).
;;;;
;;;; Inside rule (the header's): even-odd crossings over all rings of the
;;;; polygon with half-open edges; a point exactly on an edge belongs to the
;;;; polygon to its right (above it on a horizontal edge), so polygons that tile
;;;; a region share their boundary points out exactly once.

(in-package #:knn-gpgpu)

(defstruct (quadtree (:include native-handle (free '%quadtree-free))
                     (:copier nil)
                     (:constructor %make-quadtree (pointer n &optional (scalar :float32))))
  "A knn_quadtree handle. Free it with FREE-QUADTREE or use WITH-QUADTREE; any
thread may, also while other threads query it (see handle.lisp)."
  (n 0 :type integer :read-only t)
  (scalar :float32 :type (member :float32 :float64) :read-only t))

(defun quadtree-closed-p (tree) (null (quadtree-pointer tree)))

(defmacro with-live-quadtree ((handle tree) &body body)
  "Run BODY with HANDLE bound to TREE's knn_quadtree*, held until BODY returns."
  (let ((q (gensym "TREE")))
    `(let ((,q ,tree))
       (check-type ,q quadtree)
       (with-handle (,handle ,q "quadtree") ,@body))))

(defun build-quadtree (xy &key options backend device leaf-size threads)
  "Build a quadtree over XY (flat x y pairs or an (n 2) array); the tree keeps
its own copy. Double-floats build a float64 tree (knn_quadtree_build_f64),
single-floats a float32 one; trees and polygons of either precision combine
(the library decides on the exact values). OPTIONS is an OPTIONS structure; the keyword fields override it
(:backend :auto builds on the CUDA engine when a device is usable, else on
OpenMP; :leaf-size is the leaf capacity, 0 = default). Signals
KNN-NONFINITE-INPUT naming the first NaN/Inf point."
  (multiple-value-bind (v n scalar) (rows-of xy 2 "xy")
    (let ((opts (merge-options options (list :backend backend :device device
                                             :leaf-size leaf-size :threads threads))))
      (cffi:with-foreign-object (out :pointer)
        (setf (cffi:mem-ref out :pointer) (cffi:null-pointer))
        (with-foreign-options (opt opts)
          (with-pointers ((p v))
            (scalar-call (scalar name "knn_quadtree_build" %quadtree-build %quadtree-build-f64)
              p n opt out)))
        (adopt-handle (%make-quadtree nil n scalar) (cffi:mem-ref out :pointer))))))

(defun free-quadtree (tree)
  "Free TREE (knn_quadtree_free); freeing twice does nothing. Calls running on
TREE in other threads finish with their full results, and the last of them
frees it; calls made afterwards signal KNN-USAGE-ERROR."
  (check-type tree quadtree)
  (free-handle tree "knn_quadtree_free"))

(defmacro with-quadtree ((var xy &rest keys) &body body)
  `(let ((,var (build-quadtree ,xy ,@keys)))
     (unwind-protect (progn ,@body)
       (free-quadtree ,var))))

(defun pack-polygons (polygons)
  "POLYGONS: a list of polygons, each a list of rings, each a list of (x y).
Returns (values vertices ring-offsets polygon-offsets); the vertices are
double-floats when any coordinate is a double-float (the _f64 calls), else
single-floats."
  (let ((xs '()) (rings (list 0)) (polys (list 0)) (nv 0) (nr 0))
    (dolist (polygon polygons)
      (dolist (ring polygon)
        (dolist (vertex ring)
          (push (first vertex) xs)
          (push (second vertex) xs)
          (incf nv))
        (push nv rings)
        (incf nr))
      (push nr polys))
    (values (scalar-vector (nreverse xs) (scalar-of xs) "polygons")
            (make-array (length rings) :element-type '(signed-byte 64)
                                       :initial-contents (nreverse rings))
            (make-array (length polys) :element-type '(signed-byte 64)
                                       :initial-contents (nreverse polys)))))

(defun polygon-arrays (vertices ring-offsets polygon-offsets)
  "(values vertices rings n-rings polygons n-polygons scalar), checked."
  (multiple-value-bind (v n-vertices scalar) (rows-of vertices 2 "vertices")
    (let* ((rings (integer-vector ring-offsets '(signed-byte 64) "ring-offsets"))
           (polys (integer-vector polygon-offsets '(signed-byte 64) "polygon-offsets"))
           (n-rings (1- (length rings)))
           (n-polygons (1- (length polys))))
      (when (or (minusp n-rings) (minusp n-polygons))
        (usage-error "ring-offsets and polygon-offsets need at least one entry"))
      (unless (every (lambda (o) (<= 0 o n-vertices)) rings)
        (usage-error "ring-offsets must lie in [0, ~D] (the number of vertices)" n-vertices))
      (unless (every (lambda (o) (<= 0 o n-rings)) polys)
        (usage-error "polygon-offsets must lie in [0, ~D] (the number of rings)" n-rings))
      (values v rings n-rings polys n-polygons scalar))))

(defun points-in-polygons-count (tree vertices ring-offsets polygon-offsets &key options)
  "knn_points_in_polygons_count: a (signed-byte 64) vector of the number of
TREE points inside each polygon."
  (with-live-quadtree (handle tree)
    (multiple-value-bind (v rings n-rings polys n-polygons scalar)
        (polygon-arrays vertices ring-offsets polygon-offsets)
      (let ((counts (make-array n-polygons :element-type '(signed-byte 64))))
        (with-foreign-options (opt options)
          (with-pointers ((vp v) (rp rings) (pp polys) (cp counts))
            (scalar-call (scalar name "knn_points_in_polygons_count" %points-in-polygons-count
                                 %points-in-polygons-count-f64)
              handle vp rp n-rings pp n-polygons cp opt)))
        counts))))

(defun points-in-polygons (tree vertices ring-offsets polygon-offsets &key out-offsets options)
  "knn_points_in_polygons: (values offsets indices); polygon p's points are
indices[offsets[p], offsets[p+1]), ascending. OUT-OFFSETS (n-polygons + 1)
are computed from the counts when not given."
  (with-live-quadtree (handle tree)
    (multiple-value-bind (v rings n-rings polys n-polygons scalar)
        (polygon-arrays vertices ring-offsets polygon-offsets)
      (let ((offsets
              (if out-offsets
                  (integer-vector out-offsets '(signed-byte 64) "out-offsets")
                  (let* ((counts (points-in-polygons-count tree v rings polys :options options))
                         (o (make-array (1+ n-polygons) :element-type '(signed-byte 64)
                                                        :initial-element 0)))
                    (dotimes (p n-polygons o)
                      (setf (aref o (1+ p)) (+ (aref o p) (aref counts p))))))))
        (unless (= (length offsets) (1+ n-polygons))
          (usage-error "out-offsets needs ~D entries, got ~D" (1+ n-polygons) (length offsets)))
        (when (some #'minusp offsets)
          (usage-error "out-offsets must not be negative"))
        (let ((indices (make-array (reduce #'max offsets) :element-type '(signed-byte 64))))
          (with-foreign-options (opt options)
            (with-pointers ((vp v) (rp rings) (pp polys) (op offsets) (ip indices))
              (scalar-call (scalar name "knn_points_in_polygons" %points-in-polygons
                                   %points-in-polygons-f64)
                handle vp rp n-rings pp n-polygons op ip opt)))
          (values offsets (subseq indices 0 (aref offsets n-polygons))))))))

(defun points-in-each-polygon (tree vertices ring-offsets polygon-offsets &key options)
  "The TREE points inside each polygon: a list of one (signed-byte 64) vector
per polygon, indices ascending."
  (multiple-value-bind (offsets indices)
      (points-in-polygons tree vertices ring-offsets polygon-offsets :options options)
    (loop for p below (1- (length offsets))
          collect (subseq indices (aref offsets p) (aref offsets (1+ p))))))
